"""pretrained: all-MiniLM-L6-v2 offline, and our encoder checked against ``transformers``' model.

The model is loaded once per session (``load_minilm`` and the shared encoder are cached); the
sentence-transformers reference is loaded once per module, with network connections refused.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_lab import pretrained
from attention_lab.bert import BertEncoder, BertEncoderConfig
from attention_lab.pretrained import (
    attention_maps,
    encoder_from_minilm,
    load_minilm,
    load_tokenizer,
    model_path,
    sentence_embeddings,
)

# Our encoder against transformers' BertModel. Measured on this machine (float32): at most ~2e-6
# on the hidden states of real tokens, ~2e-5 on those of padding, ~2e-6 on attention weights.
ATOL = 1e-4

SENTENCES = [
    "The cat sat on the mat.",
    "Hi",
    "Tokenization splits unbelievable words into WordPiece pieces, doesn't it?",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
]


@pytest.fixture(scope="module")
def no_network():
    """Refuse every outgoing connection: loading must work from the package directory alone."""

    def refuse(*args, **kwargs):
        raise OSError("network access attempted during an offline test")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        yield


@pytest.fixture(scope="module")
def minilm(no_network):
    return load_minilm()


@pytest.fixture(scope="module")
def encoder(no_network):
    return pretrained._shared_encoder()


@pytest.fixture(scope="module")
def sbert(no_network):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)


def run_both(minilm, encoder, batch):
    _, model = minilm
    with torch.no_grad():
        reference = model(**batch, output_attentions=True)
        hidden, attentions = encoder(
            batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        )
    return reference, hidden, attentions


# ---------------------------------------------------------------------------------- import


def test_import_does_not_import_transformers_or_print():
    code = (
        "import sys, attention_lab.pretrained\n"
        "heavy = [m for m in ('transformers', 'sentence_transformers', 'tokenizers') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_the_encoder_names_are_still_importable_from_here():
    # The pages and the labs' checks import them from pretrained, where they used to live.
    from attention_lab import bert

    for name in ("BertEmbedding", "BertEncoder", "key_mask", "mean_pool"):
        assert getattr(pretrained, name) is getattr(bert, name)


# ---------------------------------------------------------------------------------- loading


def test_load_minilm_is_cached_eval_eager(minilm):
    tokenizer, model = minilm
    assert load_minilm() is minilm
    assert load_tokenizer() is tokenizer
    assert tokenizer.is_fast
    assert not model.training
    assert model.config._attn_implementation == "eager"
    config = model.config
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (
        6,
        12,
        384,
    )


def test_tokenizer_is_wordpiece_with_cls_and_sep(minilm):
    tokenizer, _ = minilm
    ids = tokenizer("Tokenization rocks")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "token", "##ization", "rocks", "[SEP]"]
    assert ids[0] == 101 and ids[-1] == 102


# ---------------------------------------------------------------------------------- attention_maps


def test_attention_maps_shape_tokens_and_rows(minilm, encoder):
    tokenizer, _ = minilm
    sentence = "The quick brown fox jumps over the lazy dog."
    tokens, weights = attention_maps(sentence)
    encoded = tokenizer(sentence, return_tensors="pt")
    assert tokens == tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert weights.shape == (6, 12, len(tokens), len(tokens))
    assert weights.dtype == torch.float32
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, 12, len(tokens)))
    # An independent computation of the same weights: our encoder.
    with torch.no_grad():
        _, ours = encoder(encoded["input_ids"])
    torch.testing.assert_close(weights, torch.stack(ours)[:, 0], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "sentence, error",
    [(None, TypeError), (["a sentence"], TypeError), (b"bytes", TypeError), ("", ValueError),
     ("   \n", ValueError), ("word " * 600, ValueError)],
)  # fmt: skip
def test_attention_maps_rejects_bad_input(sentence, error):
    with pytest.raises(error, match="sentence"):
        attention_maps(sentence)


def test_attention_grid_draws_every_head_or_one_layer_with_tokens(minilm):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sentence = "A sentence of the learner's own, with émigré and 😀."
    tokens, weights = attention_maps(sentence)
    every = pretrained.attention_grid(sentence)
    panels = every.axes[:-1]  # the last axes is the colour bar
    assert len(panels) == 6 * 12
    assert panels[2 * 12 + 9].get_title() == "L2 H9"  # layers and heads counted from 0
    one = pretrained.attention_grid(sentence, layer=4)
    assert len(one.axes) == 12 + 1 and one.axes[5].get_title() == "head 5"
    assert one.get_suptitle() == f'MiniLM, layer 4: its 12 heads\n"{sentence}"'  # names it
    assert one.axes[-1].get_xlabel() == "attention weight"  # the colour bar, under the grid
    labels = [t.get_text() for t in one.axes[0].get_yticklabels()]
    assert labels == tokens
    # The panel shows head 5 of layer 4: the image's data are those weights.
    drawn = np.asarray(one.axes[5].collections[0].get_array()).reshape(len(tokens), len(tokens))
    torch.testing.assert_close(torch.as_tensor(drawn, dtype=torch.float32), weights[4, 5])
    plt.close("all")


@pytest.mark.parametrize("layer, error", [(6, ValueError), (-1, ValueError), ("1", TypeError)])
def test_attention_grid_rejects_a_layer_the_model_does_not_have(layer, error, minilm):
    with pytest.raises(error, match="layer"):
        pretrained.attention_grid("Hello there.", layer=layer)


# ---------------------------------------------------------------------------------- our encoder


@pytest.mark.parametrize(
    "texts",
    [[SENTENCES[0]], [SENTENCES[2]], SENTENCES, SENTENCES[::-1]],
    ids=["short", "subwords", "padded-batch", "padded-batch-reversed"],
)
def test_encoder_matches_transformers(minilm, encoder, texts):
    tokenizer, _ = minilm
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    reference, hidden, attentions = run_both(minilm, encoder, batch)
    real = batch["attention_mask"].bool()  # [B, T]
    # Real tokens: hidden states and every layer's weights (rows of real queries) within ATOL.
    torch.testing.assert_close(hidden[real], reference.last_hidden_state[real], atol=ATOL, rtol=0)
    assert len(attentions) == len(reference.attentions) == 6
    for ours, theirs in zip(attentions, reference.attentions, strict=True):
        assert ours.shape == theirs.shape == (len(texts), 12, real.shape[1], real.shape[1])
        ours_rows = ours.transpose(1, 2)[real]  # [real tokens, H, T]
        theirs_rows = theirs.transpose(1, 2)[real]  # [real tokens, H, T]
        torch.testing.assert_close(ours_rows, theirs_rows, atol=ATOL, rtol=0)
        # Nothing attends to padding, in both models.
        blocked = ~real[:, None, None, :].expand_as(ours)
        assert torch.all(ours[blocked] == 0) and torch.all(theirs[blocked] == 0)
    # Padding rows are computed by both (a [PAD] query attends to the real keys) but no output
    # uses them; they are held to the same bound (measured: up to ~2e-5 on hidden states, their
    # untrained [PAD] embedding makes them the most sensitive to rounding).
    torch.testing.assert_close(hidden, reference.last_hidden_state, atol=ATOL, rtol=0)
    for ours, theirs in zip(attentions, reference.attentions, strict=True):
        torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_encoder_matches_transformers_on_a_sentence_pair(minilm, encoder):
    tokenizer, _ = minilm
    batch = tokenizer(["How old are you?"], ["What is your age?"], return_tensors="pt")
    assert batch["token_type_ids"].sum() > 0  # the second sentence has type 1
    reference, hidden, attentions = run_both(minilm, encoder, batch)
    torch.testing.assert_close(hidden, reference.last_hidden_state, atol=ATOL, rtol=0)
    for ours, theirs in zip(attentions, reference.attentions, strict=True):
        torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_encoder_defaults_mean_no_padding_and_one_segment(encoder):
    ids = torch.tensor([[101, 7592, 2088, 102]])
    with torch.no_grad():
        default, _ = encoder(ids)
        explicit, _ = encoder(ids, torch.ones_like(ids), torch.zeros_like(ids))
        as_bool, _ = encoder(ids, torch.ones_like(ids, dtype=torch.bool))
    torch.testing.assert_close(default, explicit, atol=0, rtol=0)
    torch.testing.assert_close(default, as_bool, atol=0, rtol=0)


def test_encoder_from_minilm_structure(encoder):
    shared = encoder
    encoder = encoder_from_minilm()
    assert isinstance(encoder, BertEncoder) and not encoder.training
    assert len(encoder.layers) == 6
    layer = encoder.layers[0]
    assert not layer.norm_first
    assert layer.feed_forward.activation == "gelu"
    assert layer.norm1.eps == layer.norm2.eps == encoder.embedding.norm.eps == 1e-12
    assert encoder.embedding.position.weight.shape == (512, 384)
    assert layer.self_attn.num_heads == 12
    # A fresh encoder each call, with MiniLM's weights in it.
    assert encoder is not shared
    _, model = load_minilm()
    torch.testing.assert_close(
        encoder.layers[3].self_attn.k_proj.weight,
        model.encoder.layer[3].attention.self.key.weight,
        atol=0,
        rtol=0,
    )


def test_weight_mapping_matches_a_random_bert():
    """The name mapping, checked on a small randomly initialised transformers BertModel."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
        max_position_embeddings=12,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        hidden_act="gelu",
        attn_implementation="eager",
    )
    theirs = BertModel(config, add_pooling_layer=False).eval()
    ours_config = BertEncoderConfig(
        vocab_size=50, d_model=16, num_layers=2, num_heads=4, d_ff=24, max_len=12
    )
    ours = BertEncoder(ours_config).eval()
    names = pretrained._minilm_to_ours(2)
    state = theirs.state_dict()
    ours.load_state_dict({mine: state[name] for name, mine in names.items()}, strict=True)
    ids = torch.randint(1, 50, (3, 7))
    ids[1, 5:] = 0
    attention_mask = (ids != 0).long()
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    with torch.no_grad():
        reference = theirs(
            input_ids=ids,
            attention_mask=attention_mask,
            token_type_ids=types,
            output_attentions=True,
        )
        hidden, attentions = ours(ids, attention_mask, types)
    real = attention_mask.bool()
    torch.testing.assert_close(hidden[real], reference.last_hidden_state[real], atol=ATOL, rtol=0)
    for mine, theirs_weights in zip(attentions, reference.attentions, strict=True):
        torch.testing.assert_close(
            mine.transpose(1, 2)[real], theirs_weights.transpose(1, 2)[real], atol=ATOL, rtol=0
        )


# ---------------------------------------------------------------------------------- embeddings


def test_sentence_transformers_pipeline_is_mean_then_normalize(sbert):
    kinds = [type(module).__name__ for module in sbert]
    assert kinds == ["Transformer", "Pooling", "Normalize"]
    assert sbert.max_seq_length == 256


def test_sentence_embeddings_equal_sentence_transformers(sbert):
    texts = [*SENTENCES, "", "word " * 270]  # an empty sentence, and one truncated at 256
    ours = sentence_embeddings(texts, batch_size=3)
    reference = torch.as_tensor(sbert.encode(texts, batch_size=3))
    assert ours.shape == (len(texts), 384) and ours.dtype == torch.float32
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.norm(dim=1), torch.ones(len(texts)))


def test_sentence_embeddings_do_not_depend_on_batching(encoder):
    one_by_one = sentence_embeddings(SENTENCES, batch_size=1)
    together = sentence_embeddings(tuple(SENTENCES), encoder=encoder)
    torch.testing.assert_close(one_by_one, together, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "sentences, kwargs, error, name",
    [("one sentence", {}, TypeError, "wrap"), ([], {}, ValueError, "sentences"),
     (["fine", 3], {}, TypeError, r"sentences\[1\]"), (None, {}, TypeError, "sentences"),
     (["fine"], {"batch_size": 0}, ValueError, "batch_size"),
     (["fine"], {"batch_size": 2.5}, TypeError, "batch_size"),
     (["fine"], {"encoder": torch.nn.Linear(2, 2)}, TypeError, "encoder")],
)  # fmt: skip
def test_sentence_embeddings_reject_bad_input(sentences, kwargs, error, name):
    with pytest.raises(error, match=name):
        sentence_embeddings(sentences, **kwargs)


def test_sentence_embeddings_refuse_an_encoder_in_training_mode():
    encoder = encoder_from_minilm().train()
    with pytest.raises(ValueError, match=r"encoder\.eval\(\)"):
        sentence_embeddings(["fine"], encoder=encoder)


@pytest.mark.parametrize(
    "key, value", [("hidden_act", "gelu_new"), ("position_embedding_type", "relative_key")]
)
def test_encoder_from_minilm_refuses_a_bert_it_does_not_build(tmp_path, monkeypatch, key, value):
    import json
    from pathlib import Path

    folder = tmp_path / "model"
    folder.mkdir()
    for item in Path(model_path()).iterdir():  # the weights as links, the config changed
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((Path(model_path()) / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: value}))
    monkeypatch.setattr(pretrained, "model_path", lambda: str(folder))
    with pytest.raises(ValueError, match=key):
        encoder_from_minilm()
