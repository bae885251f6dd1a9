"""layers: checked against PyTorch's nn.TransformerEncoderLayer / nn.TransformerDecoderLayer."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F  # noqa: N812

from attention_lab.caches import KVCache
from attention_lab.layers import (
    DecoderLayer,
    EncoderConfig,
    EncoderLayer,
    FeedForward,
    TransformerEncoder,
    embed_tokens,
    token_embedding,
)
from attention_lab.masks import causal_mask, padding_mask
from attention_lab.positional import sinusoidal_encoding
from support.tensors import random_inputs

# The fields of a small encoder besides its vocabulary size.
ENCODER = {"d_model": 8, "num_layers": 1, "num_heads": 2, "d_ff": 16, "max_len": 10}

ARRANGEMENTS = [False, True]
ACTIVATIONS = ["relu", "gelu"]
# Token ids with 0 as padding: full, half padded, nearly all padded.
TOKEN_IDS = torch.tensor([[4, 2, 7, 1, 9, 3, 5], [6, 1, 8, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0]])


def _torch_encoder_layer(norm_first, activation, dtype=torch.float32, d_model=16, heads=4):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        d_model,
        heads,
        dim_feedforward=40,
        dropout=0.1,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
    )
    return layer.to(dtype).eval()


@pytest.mark.parametrize("norm_first", ARRANGEMENTS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "both"])
def test_encoder_layer_matches_torch(norm_first, activation, masking):
    reference = _torch_encoder_layer(norm_first, activation)
    ours = EncoderLayer.from_torch(reference)
    (x,) = random_inputs([(3, 7, 16)])
    keep = padding_mask(TOKEN_IDS)  # [B, 1, 1, T], True = real token
    mask, kwargs = None, {}
    if masking in ("padding", "both"):
        mask = keep
        kwargs["src_key_padding_mask"] = TOKEN_IDS == 0  # PyTorch: True = blocked
    if masking in ("causal", "both"):
        mask = causal_mask(7) if mask is None else mask & causal_mask(7)
        kwargs["src_mask"] = ~causal_mask(7)
    output, weights = ours(x, mask)
    # Grad mode is on and the parameters require grad, so PyTorch takes its reference
    # (non-fused) path: outputs at padding positions are computed, not zeroed.
    expected = reference(x, **kwargs)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    assert weights.shape == (3, 4, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 7))


@pytest.mark.parametrize("norm_first", ARRANGEMENTS)
def test_encoder_layer_matches_torch_fast_path_on_real_tokens(norm_first):
    """In inference mode PyTorch uses its fused kernel; real-token positions still agree."""
    reference = _torch_encoder_layer(norm_first, "relu")
    ours = EncoderLayer.from_torch(reference)
    (x,) = random_inputs([(3, 7, 16)], seed=3)
    with torch.inference_mode():
        expected = reference(x, src_key_padding_mask=TOKEN_IDS == 0)
        output, _ = ours(x, padding_mask(TOKEN_IDS))
    real = TOKEN_IDS != 0
    torch.testing.assert_close(output[real], expected[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", ARRANGEMENTS)
def test_encoder_layer_attention_weights_match_torch_self_attention(norm_first):
    """The weights the layer returns are those of its first sub-layer's input."""
    reference = _torch_encoder_layer(norm_first, "relu")
    ours = EncoderLayer.from_torch(reference)
    (x,) = random_inputs([(3, 7, 16)], seed=1)
    attention_input = reference.norm1(x) if norm_first else x
    _, expected = reference.self_attn(
        attention_input,
        attention_input,
        attention_input,
        key_padding_mask=TOKEN_IDS == 0,
        need_weights=True,
        average_attn_weights=False,
    )
    _, weights = ours(x, padding_mask(TOKEN_IDS))
    torch.testing.assert_close(weights, expected)


def test_encoder_layer_matches_torch_in_float64():
    reference = _torch_encoder_layer(True, "gelu", dtype=torch.float64)
    ours = EncoderLayer.from_torch(reference)
    assert ours.norm1.weight.dtype == torch.float64
    (x,) = random_inputs([(2, 5, 16)], dtype=torch.float64)
    torch.testing.assert_close(ours(x)[0], reference(x), atol=1e-12, rtol=1e-12)


def test_from_torch_copies_configuration_and_training_mode():
    reference = nn.TransformerEncoderLayer(
        8, 2, 24, dropout=0.2, activation="gelu", batch_first=True, norm_first=True,
        layer_norm_eps=1e-12,
    )  # fmt: skip
    ours = EncoderLayer.from_torch(reference)
    assert ours.training
    assert ours.norm_first is True
    assert ours.norm1.eps == ours.norm2.eps == 1e-12
    assert ours.feed_forward.activation == "gelu"
    assert ours.feed_forward.d_ff == 24
    assert ours.dropout1.p == ours.feed_forward.dropout.p == ours.self_attn.dropout == 0.2
    assert not EncoderLayer.from_torch(reference.eval()).training


def test_from_torch_copies_are_independent():
    reference = _torch_encoder_layer(False, "relu")
    ours = EncoderLayer.from_torch(reference)
    with torch.no_grad():
        ours.feed_forward.linear1.weight.zero_()
    assert reference.linear1.weight.abs().sum() > 0


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: nn.Linear(4, 4), TypeError, "nn.TransformerEncoderLayer"),
        (
            lambda: nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh, batch_first=True),
            ValueError,
            "activation",
        ),
        (
            lambda: nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU("tanh")),
            ValueError,
            "exact gelu",
        ),
        (lambda: nn.TransformerEncoderLayer(8, 2, 16, bias=False), ValueError, "bias"),
    ],
)
def test_from_torch_rejects_what_it_cannot_represent(build, error, match):
    with pytest.raises(error, match=match):
        EncoderLayer.from_torch(build())


@pytest.mark.parametrize("norm_first", ARRANGEMENTS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_decoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(1)
    reference = nn.TransformerDecoderLayer(
        16, 4, 40, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    ours = DecoderLayer.from_torch(reference)
    target, memory = random_inputs([(3, 6, 16), (3, 7, 16)], seed=2)
    source_keep = padding_mask(TOKEN_IDS)  # [B, 1, 1, Tk]
    output, self_weights, cross_weights = ours(
        target, memory, self_mask=causal_mask(6), memory_mask=source_keep
    )
    expected = reference(
        target, memory, tgt_mask=~causal_mask(6), memory_key_padding_mask=TOKEN_IDS == 0
    )
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    assert self_weights.shape == (3, 4, 6, 6)
    assert cross_weights.shape == (3, 4, 6, 7)
    # The causal mask: no target position reads a later one.
    assert self_weights.triu(1).abs().max() == 0
    # Padding in the source: no weight on padded source positions.
    assert cross_weights.masked_select(~source_keep.expand_as(cross_weights)).abs().max() == 0


def test_decoder_layer_cross_attention_reads_memory():
    """Changing the encoder output changes the decoder's result, and only through memory."""
    torch.manual_seed(0)
    layer = DecoderLayer(8, 2, 16, dropout=0.0).eval()
    target, memory, other = random_inputs([(1, 4, 8), (1, 5, 8), (1, 5, 8)])
    first, _, _ = layer(target, memory)
    second, _, _ = layer(target, other)
    assert not torch.allclose(first, second)
    torch.testing.assert_close(layer(target, memory)[0], first)


def test_decoder_from_torch_rejects_other_modules():
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer"):
        DecoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_feed_forward_against_formula(activation):
    torch.manual_seed(0)
    ff = FeedForward(8, activation=activation)
    assert ff.d_ff == 32
    (x,) = random_inputs([(2, 3, 8)])
    act = F.relu if activation == "relu" else F.gelu
    expected = (
        act(x @ ff.linear1.weight.T + ff.linear1.bias) @ ff.linear2.weight.T + ff.linear2.bias
    )
    torch.testing.assert_close(ff(x), expected)


def test_feed_forward_is_position_wise():
    """Each position is transformed on its own: permuting positions permutes the output."""
    torch.manual_seed(0)
    ff = FeedForward(8, 12)
    (x,) = random_inputs([(2, 5, 8)])
    order = torch.tensor([3, 0, 4, 1, 2])
    torch.testing.assert_close(ff(x[:, order]), ff(x)[:, order])


@given(
    batch=st.integers(1, 3),
    seq_len=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
def test_pre_norm_layer_with_silent_sublayers_is_the_identity(batch, seq_len, heads, seed):
    """Pre-norm keeps a clean residual path: zero the sub-layers' outputs and x passes unchanged;
    post-norm would still normalise it."""
    layer = EncoderLayer(8, heads, 16, dropout=0.0, norm_first=True)
    post = EncoderLayer(8, heads, 16, dropout=0.0, norm_first=False)
    for each in (layer, post):
        with torch.no_grad():
            for linear in (each.self_attn.out_proj, each.feed_forward.linear2):
                linear.weight.zero_()
                linear.bias.zero_()
    (x,) = random_inputs([(batch, seq_len, 8)], seed=seed)
    assert torch.equal(layer(x)[0], x)
    normalised = F.layer_norm(F.layer_norm(x, (8,), eps=1e-5), (8,), eps=1e-5)
    torch.testing.assert_close(post(x)[0], normalised)


def test_fully_masked_rows_stay_finite():
    layer = EncoderLayer(8, 2, 16, dropout=0.0).eval()
    (x,) = random_inputs([(1, 3, 8)])
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, True]])
    output, weights = layer(x, mask)
    assert torch.isfinite(output).all()
    assert weights[0, :, 1].abs().max() == 0


def test_transformer_encoder_against_its_parts():
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=30, d_model=16, num_layers=2, num_heads=4, d_ff=32, max_len=10, dropout=0.0
    )
    encoder = TransformerEncoder(config).eval()
    token_ids = torch.tensor([[3, 7, 1, 0], [5, 2, 0, 0]])
    keep = padding_mask(token_ids)
    hidden, attentions = encoder(token_ids, keep)
    x = encoder.embedding.weight[token_ids] * math.sqrt(16) + sinusoidal_encoding(4, 16)
    for layer in encoder.layers:
        x, _ = layer(x, keep)
    torch.testing.assert_close(hidden, x)
    assert encoder.final_norm is None
    assert len(attentions) == 2
    for weights in attentions:
        assert weights.shape == (2, 4, 4, 4)
        assert weights[1, :, :, 2:].abs().max() == 0


def test_pre_norm_encoder_ends_with_a_layer_norm():
    torch.manual_seed(0)
    encoder = TransformerEncoder(
        30, d_model=16, num_layers=1, num_heads=4, d_ff=32, max_len=10, dropout=0.0, norm_first=True
    )
    hidden, _ = encoder.eval()(torch.tensor([[1, 2, 3]]))
    torch.testing.assert_close(hidden.mean(-1), torch.zeros(1, 3), atol=1e-5, rtol=0)


def test_transformer_encoder_is_deterministic_in_eval_and_random_in_training():
    torch.manual_seed(0)
    encoder = TransformerEncoder(
        30, d_model=16, num_layers=1, num_heads=4, d_ff=32, max_len=10, dropout=0.5
    )
    token_ids = torch.tensor([[1, 2, 3, 4]])
    encoder.eval()
    torch.testing.assert_close(encoder(token_ids)[0], encoder(token_ids)[0])
    encoder.train()
    assert not torch.equal(encoder(token_ids)[0], encoder(token_ids)[0])


@pytest.mark.parametrize(
    ("token_ids", "error", "match"),
    [
        ([[1, 2]], TypeError, "torch.Tensor"),
        (torch.tensor([[1.0, 2.0]]), TypeError, "integer dtype"),
        (torch.tensor([[True, False]]), TypeError, "integer dtype"),
        (torch.tensor([1, 2]), ValueError, r"\[B, T\]"),
        (torch.tensor([[1, 30]]), ValueError, "vocab_size=30"),
        (torch.tensor([[-1, 2]]), ValueError, "vocab_size=30"),
    ],
)
def test_transformer_encoder_rejects_bad_token_ids(token_ids, error, match):
    encoder = TransformerEncoder(30, d_model=16, num_layers=1, num_heads=4, d_ff=32, max_len=10)
    with pytest.raises(error, match=match):
        encoder(token_ids)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: FeedForward(0), ValueError, "d_model"),
        (lambda: FeedForward(8, 2.5), TypeError, "d_ff"),
        (lambda: FeedForward(8, activation="tanh"), ValueError, "activation"),
        (lambda: FeedForward(8, activation=None), TypeError, "activation"),
        (lambda: FeedForward(8, dropout=1.0), ValueError, "dropout"),
        (lambda: EncoderLayer(10, 4, 16), ValueError, "not divisible"),
        (lambda: EncoderLayer(8, 2, 16, norm_first=1), TypeError, "norm_first"),
        (lambda: EncoderLayer(8, 2, 16, layer_norm_eps=0.0), ValueError, "layer_norm_eps"),
        (lambda: EncoderLayer(8, 2, 16, attention="rope"), TypeError, "AttentionConfig"),
        (lambda: EncoderLayer(8, 2, 16, attention={"rope_layout": "half"}), TypeError, "config"),
        (lambda: DecoderLayer(8, 2, 16, activation="swish"), ValueError, "activation"),
        (lambda: TransformerEncoder(0, **ENCODER), ValueError, "vocab_size"),
        (lambda: TransformerEncoder(10, **ENCODER | {"num_layers": True}), TypeError, "num_layers"),
        (lambda: TransformerEncoder(10, **ENCODER | {"max_len": 0}), ValueError, "max_len"),
    ],
)
def test_constructors_reject_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_encoder_from_a_config_equals_the_encoder_from_keywords():
    config = EncoderConfig(vocab_size=10, **ENCODER)
    torch.manual_seed(0)
    from_config = TransformerEncoder(config)
    torch.manual_seed(0)
    from_keywords = TransformerEncoder(10, **ENCODER)
    torch.manual_seed(0)
    all_keywords = TransformerEncoder(vocab_size=10, **ENCODER)
    assert from_config.config == from_keywords.config == all_keywords.config == config
    for other in (from_keywords, all_keywords):
        for (name, ours), (_, theirs) in zip(
            from_config.state_dict().items(), other.state_dict().items(), strict=True
        ):
            torch.testing.assert_close(ours, theirs, msg=name)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"d_model": 9}, ValueError, "d_model=9 is not divisible by num_heads=2"),
        ({"d_ff": 0}, ValueError, "d_ff"),
        ({"dropout": 1.0}, ValueError, "dropout"),
        ({"activation": "tanh"}, ValueError, "activation"),
        ({"norm_first": 1}, TypeError, "norm_first"),
        ({"layer_norm_eps": 0.0}, ValueError, "layer_norm_eps"),
    ],
)
def test_encoder_config_rejects_bad_fields(changes, error, match):
    with pytest.raises(error, match=match):
        EncoderConfig(vocab_size=10, **ENCODER | changes)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: EncoderConfig(10, **ENCODER), "positional"),
        (lambda: TransformerEncoder(EncoderConfig(vocab_size=10, **ENCODER), dropout=0.0), "both"),
        (lambda: TransformerEncoder("10", **ENCODER), "instance of EncoderConfig"),
        (lambda: TransformerEncoder(10, **ENCODER, d_fff=3), "d_fff"),
    ],
)
def test_encoder_takes_a_config_or_keyword_arguments(build, match):
    with pytest.raises(TypeError, match=match):
        build()


def test_encoder_config_is_frozen():
    config = EncoderConfig(vocab_size=10, **ENCODER)
    with pytest.raises(AttributeError):
        config.d_model = 16


def test_layers_reject_bad_inputs():
    layer = EncoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match=r"\[B, T, 8\]"):
        layer(torch.randn(2, 3, 6))
    with pytest.raises(TypeError, match="bool"):
        layer(torch.randn(2, 3, 8), torch.ones(3, 3))
    decoder = DecoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="memory"):
        decoder(torch.randn(2, 3, 8), torch.randn(2, 4, 6))


def test_token_embedding_draws_entries_of_size_one_over_sqrt_d_and_checks_its_arguments():
    torch.manual_seed(0)
    embedding = token_embedding(2000, 64)
    assert abs(embedding.weight.std().item() - 64**-0.5) < 0.01
    ids = torch.tensor([[3, 1999, 0]])
    torch.testing.assert_close(embed_tokens(embedding, ids), embedding.weight[ids] * 8.0)
    with pytest.raises(ValueError, match="d_model"):
        token_embedding(10, 0)
    with pytest.raises(TypeError, match="vocab_size"):
        token_embedding(10.0, 4)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
@pytest.mark.parametrize("sizes", [[1] * 7, [7], [3, 1, 2, 1]], ids=["tokens", "all", "mixed"])
def test_encoder_layer_decode_gives_the_rows_of_the_full_causal_forward(norm_first, sizes):
    torch.manual_seed(0)
    layer = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).double().eval()
    (x,) = random_inputs([[2, 7, 16]], torch.float64, seed=1)
    expected, expected_weights = layer(x, mask=causal_mask(7))
    cache = KVCache(2, 4, 4, 7, dtype=torch.float64)
    start = 0
    for piece in x.split(sizes, dim=1):
        output, weights = layer.decode(piece, cache)
        end = start + piece.shape[1]
        torch.testing.assert_close(output, expected[:, start:end])
        torch.testing.assert_close(weights, expected_weights[:, :, start:end, :end])
        start = end
    assert len(cache) == 7


def test_encoder_layer_decode_rejects_bad_input():
    layer = EncoderLayer(16, 4, 32)
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        layer.decode(torch.randn(1, 2, 16), cache=None)
    with pytest.raises(ValueError, match="x"):
        layer.decode(torch.randn(1, 2, 8), KVCache(1, 4, 4, 4))
