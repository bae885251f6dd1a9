"""Tests for attention_lab.caches: incremental decoding through KVCache and decode_step against
the full causal pass, and the caches' validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab.attention import MultiHeadAttention
from attention_lab.attention_config import AttentionConfig
from attention_lab.caches import KVCache, decode_step
from attention_lab.masks import causal_mask
from support.tensors import random_inputs, rope_scalings

# KVCache and decode_step: incremental causal decoding against full causal attention.


def make_attention(d_model=16, num_heads=4, seed=0, dtype=torch.float32):
    """A MultiHeadAttention with the (seeded, random) weights of a PyTorch module, in eval mode."""
    torch.manual_seed(seed)
    reference = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    return MultiHeadAttention.from_torch(reference).to(dtype).eval()


def decode_in_pieces(attention, x, sizes):
    """Feed ``x`` [B, T, D] to decode_step in consecutive pieces of the given lengths."""
    cache = KVCache(x.shape[0], attention.num_heads, attention.head_dim, x.shape[1], dtype=x.dtype)
    outputs, weights = [], []
    for piece in x.split(sizes, dim=1):
        output, piece_weights = decode_step(attention, piece, cache)
        outputs.append(output)
        weights.append(piece_weights)
    return torch.cat(outputs, dim=1), weights, cache


@pytest.mark.parametrize(
    "sizes", [[1] * 9, [9], [4, 1, 1, 1, 1, 1], [2, 3, 4]], ids=["tokens", "all", "prompt", "mixed"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decode_step_matches_full_causal_attention(sizes, dtype):
    attention = make_attention(dtype=dtype)
    (x,) = random_inputs([[2, 9, 16]], dtype, seed=3)
    expected, expected_weights = attention(x, mask=causal_mask(9))
    output, weights, cache = decode_in_pieces(attention, x, sizes)
    assert len(cache) == 9
    torch.testing.assert_close(output, expected)
    start = 0
    for piece_weights in weights:
        end = start + piece_weights.shape[-2]
        # The rows of the new positions, over every position held so far.
        assert piece_weights.shape == (2, 4, end - start, end)
        torch.testing.assert_close(piece_weights, expected_weights[:, :, start:end, :end])
        start = end


def test_decode_step_cache_holds_the_projected_keys_and_values():
    attention = make_attention()
    (x,) = random_inputs([[1, 5, 16]])
    _, _, cache = decode_in_pieces(attention, x, [1] * 5)
    keys = attention.k_proj(x).view(1, 5, 4, 4).transpose(1, 2)  # [B, H, T, Dh]
    values = attention.v_proj(x).view(1, 5, 4, 4).transpose(1, 2)  # [B, H, T, Dh]
    torch.testing.assert_close(cache.keys, keys)
    torch.testing.assert_close(cache.values, values)


@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    batch=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_property_any_split_gives_the_full_result(sizes, batch, seed):
    attention = make_attention(d_model=8, num_heads=2, seed=seed % 7, dtype=torch.float64)
    total = sum(sizes)
    (x,) = random_inputs([[batch, total, 8]], torch.float64, seed=seed)
    output, _, _ = decode_in_pieces(attention, x, sizes)
    expected, _ = attention(x, mask=causal_mask(total))
    torch.testing.assert_close(output, expected)


@given(
    num_kv_heads=st.sampled_from([4, 2, 1]),
    qk_norm=st.booleans(),
    position=st.sampled_from(
        [(None, False), ("half", False), ("interleaved", False), (None, True)]
    ),
    sinks=st.booleans(),
    softcap=st.sampled_from([None, 5.0]),
    bias=st.booleans(),
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_property_every_combination_of_options_decodes_as_the_full_pass(
    num_kv_heads, qk_norm, position, sinks, softcap, bias, sizes, seed
):
    # Each of Part VI's options changes what a cached step must recompute (rotated keys, the
    # ALiBi bias of the new rows, sink logits, capped scores, normed keys): together, too.
    # (A rotary embedding and ALiBi together are refused by AttentionConfig.)
    rope, alibi = position
    torch.manual_seed(seed % 7)
    attention = (
        MultiHeadAttention(
            16,
            4,
            config=AttentionConfig(
                num_kv_heads=num_kv_heads,
                qk_norm=qk_norm,
                rope_layout=rope,
                alibi=alibi,
                sinks=sinks,
                softcap=softcap,
            ),
            bias=bias,
        )
        .double()
        .eval()
    )
    if sinks:
        with torch.no_grad():
            attention.sink_logits.normal_()  # they start at 0: make each head's differ
    total = sum(sizes)
    (x,) = random_inputs([[2, total, 16]], torch.float64, seed=seed)
    expected, expected_weights = attention(x, mask=causal_mask(total))
    cache = KVCache(2, num_kv_heads, attention.head_dim, total, dtype=torch.float64)
    start = 0
    for piece in x.split(sizes, dim=1):
        output, weights = decode_step(attention, piece, cache)
        end = start + piece.shape[1]
        torch.testing.assert_close(output, expected[:, start:end])
        torch.testing.assert_close(weights, expected_weights[:, :, start:end, :end])
        start = end


def test_kv_cache_append_returns_views_of_everything_held():
    cache = KVCache(batch_size=2, num_heads=3, head_dim=4, max_len=6)
    first = random_inputs([[2, 3, 2, 4]] * 2, seed=1)
    second = random_inputs([[2, 3, 3, 4]] * 2, seed=2)
    cache.append(*first)
    keys, values = cache.append(*second)
    assert len(cache) == 5 and cache.max_len == 6
    torch.testing.assert_close(keys, torch.cat([first[0], second[0]], dim=2))
    torch.testing.assert_close(values, torch.cat([first[1], second[1]], dim=2))
    assert keys.data_ptr() == cache.keys.data_ptr()  # a view, not a copy
    cache.reset()
    assert len(cache) == 0


def test_kv_cache_rejects_bad_input():
    cache = KVCache(batch_size=1, num_heads=2, head_dim=4, max_len=3)
    good = torch.zeros(1, 2, 2, 4)
    with pytest.raises(ValueError, match="max_len=3"):
        cache.append(torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 4, 4))
    cache.append(good, good)
    with pytest.raises(ValueError, match="cannot take 2 more"):
        cache.append(good, good)
    assert len(cache) == 2  # a refused append changes nothing
    with pytest.raises(ValueError, match=r"\[B, H, Tn, Dh\]"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(good[:, :, :1].double(), good[:, :, :1].double())
    with pytest.raises(TypeError, match="key must be a torch.Tensor"):
        cache.append([0.0], good)
    with pytest.raises(ValueError, match="same number of positions"):
        cache.append(good[:, :, :1], torch.zeros(1, 2, 0, 4))
    with pytest.raises(ValueError, match="max_len"):
        KVCache(batch_size=1, num_heads=2, head_dim=4, max_len=0)
    with pytest.raises(TypeError, match="dtype"):
        KVCache(batch_size=1, num_heads=2, head_dim=4, max_len=3, dtype=torch.int64)


def test_decode_step_rejects_bad_input():
    attention = make_attention()
    cache = KVCache(batch_size=1, num_heads=4, head_dim=4, max_len=4)
    with pytest.raises(TypeError, match="attention must be a MultiHeadAttention"):
        decode_step(torch.nn.Linear(16, 16), torch.zeros(1, 1, 16), cache)
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        decode_step(attention, torch.zeros(1, 1, 16), None)
    with pytest.raises(ValueError, match=r"x must have shape \[B, T, 16\]"):
        decode_step(attention, torch.zeros(1, 1, 8), cache)
    wrong_heads = KVCache(batch_size=1, num_heads=2, head_dim=8, max_len=4)
    with pytest.raises(ValueError, match=r"cache holds \[B, Hkv, Dh\]"):
        decode_step(attention, torch.zeros(1, 1, 16), wrong_heads)


# decode_step with a scaled rotary embedding: the cache holds rotated keys, so it reproduces the
# full pass only when the frequencies do not depend on the length.

SCALINGS = rope_scalings(factor=2.0, original=4)
FIXED_SCALINGS = {kind: s for kind, s in SCALINGS.items() if kind != "dynamic"}
DYNAMIC = SCALINGS["dynamic"]


@pytest.mark.parametrize("scaling", FIXED_SCALINGS.values(), ids=FIXED_SCALINGS.keys())
@pytest.mark.parametrize("rope", ["half", "interleaved"])
def test_decode_step_with_a_fixed_rope_scaling_matches_the_full_causal_pass(scaling, rope):
    torch.manual_seed(0)
    attention = MultiHeadAttention(
        16, 2, config=AttentionConfig(rope_layout=rope, rope_scaling=scaling)
    ).eval()
    (x,) = random_inputs([[2, 32, 16]], seed=4)  # 32 positions, 8 times the training length
    with torch.no_grad():
        expected, expected_weights = attention(x, mask=causal_mask(32))
        output, weights, _ = decode_in_pieces(attention, x, [5] + [1] * 27)
    torch.testing.assert_close(output, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(weights[-1], expected_weights[:, :, -1:], rtol=0, atol=1e-6)


def test_decode_step_refuses_dynamic_rope_scaling():
    # Dynamic scaling rotates by frequencies of the current length: the keys cached at earlier
    # steps were rotated under shorter lengths, and the cached pass drifted from the full one.
    attention = MultiHeadAttention(
        16, 2, config=AttentionConfig(rope_layout="half", rope_scaling=DYNAMIC)
    ).eval()
    cache = KVCache(batch_size=1, num_heads=2, head_dim=8, max_len=8)
    with pytest.raises(ValueError, match=r"rope_scaling.*'dynamic'.*re-rotating.*causal_mask"):
        decode_step(attention, torch.zeros(1, 1, 16), cache)
    assert len(cache) == 0  # refused before anything was stored
