"""Grouped-query, multi-query attention, QK-norm and RoPE in MultiHeadAttention, checked against
PyTorch's ``enable_gqa`` and against transformers' Llama and Qwen3 attention (eager)."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from transformers import LlamaConfig, Qwen3Config
from transformers.cache_utils import DynamicCache
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding

from attention_lab import positional
from attention_lab.attention import MultiHeadAttention
from attention_lab.attention_config import AttentionConfig
from attention_lab.caches import KVCache, decode_step
from attention_lab.masks import causal_mask, padding_mask
from attention_lab.positional import RotaryEmbedding, rotary_embedding
from support.tensors import random_inputs

pytestmark = pytest.mark.usefixtures("one_thread")

# (H, Hkv): multi-head, grouped-query (two group sizes), multi-query.
HEADS = [(4, 4), (4, 2), (6, 2), (4, 1)]


def make_gqa(num_heads, num_kv_heads, *, seed=0, **kwargs):
    torch.manual_seed(seed)  # modules draw initial weights from the global generator
    attention = MultiHeadAttention(
        24, num_heads, config=AttentionConfig(num_kv_heads=num_kv_heads, **kwargs)
    ).eval()
    if attention.q_norm is not None:
        with torch.no_grad():  # RMSNorm weights start at 1: make them matter
            attention.q_norm.weight.uniform_(0.5, 1.5)
            attention.k_norm.weight.uniform_(0.5, 1.5)
    return attention


def sdpa_reference(attention, x, memory, mask):
    """Output and weights from torch's fused attention with enable_gqa=True on the module's own
    projections: the output through its out_proj, the weights as the attention applied to
    one-hot values (value j = e_j gives the weight of key j)."""
    q, k, v = attention.project(x, memory)  # [B, H, Tq, Dh], [B, Hkv, Tk, Dh] twice
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    output = attention.out_proj(out.transpose(1, 2).flatten(2))  # [B, Tq, D]
    one_hot = torch.eye(k.shape[2]).expand(k.shape[0], k.shape[1], -1, -1)  # [B, Hkv, Tk, Tk]
    weights = F.scaled_dot_product_attention(q, k, one_hot, attn_mask=mask, enable_gqa=True)
    return output, weights


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), HEADS)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "cross"])
@pytest.mark.parametrize(
    "features",
    [
        {},
        {"head_dim": 10},
        {"head_dim": 10, "qk_norm": True, "rope_layout": "half"},
        {"rope_layout": "interleaved"},
    ],
    ids=["plain", "head_dim", "qwen3_like", "rope_interleaved"],
)
def test_matches_torch_enable_gqa(num_heads, num_kv_heads, mask_kind, features):
    attention = make_gqa(num_heads, num_kv_heads, **features)
    x, memory = random_inputs([(2, 7, 24), (2, 9, 24)])
    ids = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [1, 2, 3, 4, 5, 6, 7]])
    mask = {
        "none": None,
        "causal": causal_mask(7),
        "padding": padding_mask(ids),
        "cross": padding_mask(torch.arange(1, 10).expand(2, 9) * (torch.arange(9) < 6)),
    }[mask_kind]
    memory = memory if mask_kind == "cross" else None
    with torch.no_grad():
        output, weights = attention(x, memory, mask=mask)
        expected_output, expected_weights = sdpa_reference(attention, x, memory, mask)
    assert weights.shape == (2, num_heads, 7, 9 if memory is not None else 7)
    torch.testing.assert_close(output, expected_output)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), HEADS)
def test_shapes_and_parameter_count(num_heads, num_kv_heads):
    attention = make_gqa(num_heads, num_kv_heads, head_dim=10, qk_norm=True)
    assert attention.q_proj.weight.shape == (num_heads * 10, 24)
    assert attention.k_proj.weight.shape == (num_kv_heads * 10, 24)
    assert attention.v_proj.weight.shape == (num_kv_heads * 10, 24)
    assert attention.out_proj.weight.shape == (24, num_heads * 10)
    projections = 2 * (num_heads + num_kv_heads) * 10 * 24 + 2 * num_kv_heads * 10 + 24
    projections += num_heads * 10  # the q_proj bias
    assert sum(p.numel() for p in attention.parameters()) == projections + 2 * 10


@given(
    heads=st.sampled_from(HEADS),
    seq_len=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_grouped_query_is_multi_head_with_repeated_key_value_heads(heads, seq_len, seed):
    """A GQA module computes what a multi-head module computes when its key and value weights
    repeat each key/value head for the query heads of its group (repeat_interleave)."""
    num_heads, num_kv_heads = heads
    gqa = make_gqa(num_heads, num_kv_heads, seed=seed, head_dim=6)
    mha = make_gqa(num_heads, num_heads, seed=seed, head_dim=6)
    group = num_heads // num_kv_heads
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
        for ours, theirs in ((mha.k_proj, gqa.k_proj), (mha.v_proj, gqa.v_proj)):
            weight = theirs.weight.unflatten(0, (num_kv_heads, 6))  # [Hkv, Dh, D]
            ours.weight.copy_(weight.repeat_interleave(group, dim=0).flatten(0, 1))
            ours.bias.copy_(theirs.bias.view(num_kv_heads, 6).repeat_interleave(group, 0).flatten())
    (x,) = random_inputs([(2, seq_len, 24)], seed=seed)
    with torch.no_grad():
        expected, expected_weights = mha(x, mask=causal_mask(seq_len))
        output, weights = gqa(x, mask=causal_mask(seq_len))
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), HEADS)
@pytest.mark.parametrize("rope", [None, "half", "interleaved"])
def test_decode_step_caches_kv_heads_and_matches_the_full_causal_pass(
    num_heads, num_kv_heads, rope
):
    attention = make_gqa(num_heads, num_kv_heads, head_dim=10, qk_norm=True, rope_layout=rope)
    (x,) = random_inputs([(2, 8, 24)])
    cache = KVCache(2, num_kv_heads, 10, max_len=8)
    with torch.no_grad():
        expected, expected_weights = attention(x, mask=causal_mask(8))
        prompt, prompt_weights = decode_step(attention, x[:, :5], cache)
        steps = [decode_step(attention, x[:, t : t + 1], cache) for t in range(5, 8)]
    assert cache.keys.shape == (2, num_kv_heads, 8, 10)  # the cache holds Hkv heads, not H
    torch.testing.assert_close(prompt, expected[:, :5])
    torch.testing.assert_close(prompt_weights, expected_weights[:, :, :5, :5])
    for t, (output, weights) in zip(range(5, 8), steps, strict=True):
        torch.testing.assert_close(output, expected[:, t : t + 1])
        torch.testing.assert_close(weights, expected_weights[:, :, t : t + 1, : t + 1])


def test_positions_shift_rope_and_leave_relative_scores_alone():
    attention = make_gqa(4, 2, rope_layout="half")
    (x,) = random_inputs([(1, 5, 24)])
    with torch.no_grad():
        _, weights = attention(x, mask=causal_mask(5))
        _, shifted = attention(x, mask=causal_mask(5), positions=torch.arange(100, 105))
        q, _, _ = attention.project(x, positions=torch.arange(100, 105))
        q0, _, _ = attention.project(x)
    torch.testing.assert_close(shifted, weights, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(q, q0)


# transformers' Llama and Qwen3 attention: small random configurations, eager attention.

ROPE_THETA = 500.0  # not the default, so that copying it is tested


def hf_attention(family, num_kv_heads, *, bias=False, seed=0):
    """A transformers attention layer and its rotary embedding, with random weights."""
    common = {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": num_kv_heads,
        "num_hidden_layers": 1,
        "intermediate_size": 64,
        "vocab_size": 16,
        "attention_bias": bias,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
    }
    if family == "qwen3":  # Qwen3's heads are wider than hidden_size / num_heads
        config, classes = Qwen3Config(head_dim=12, **common), (Qwen3Attention, Qwen3RotaryEmbedding)
    else:
        config, classes = LlamaConfig(**common), (LlamaAttention, LlamaRotaryEmbedding)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    module, rotary = classes[0](config, layer_idx=0).eval(), classes[1](config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1 + 0.2 * noise if "norm" in name else 0.3 * noise)
    return module, rotary, config


def run_hf(module, rotary, x, positions, mask, cache=None):
    """transformers' forward: cos/sin from the model's rotary embedding, the bool mask as the
    additive float mask transformers builds (0 where allowed, the dtype's minimum elsewhere)."""
    cos, sin = rotary(x, positions[None].expand(x.shape[0], -1))
    float_mask = None
    if mask is not None:
        mask = mask.expand(x.shape[0], 1, *mask.shape[-2:])  # [B, 1, Tq, Tk]
        float_mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    return module(
        x, position_embeddings=(cos, sin), attention_mask=float_mask, past_key_values=cache
    )


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_from_hf_matches_transformers(family, num_kv_heads, mask_kind):
    module, rotary, _ = hf_attention(family, num_kv_heads, bias=family == "llama")
    attention = MultiHeadAttention.from_hf(module)
    assert (attention.num_heads, attention.num_kv_heads) == (4, num_kv_heads)
    assert attention.config.rope_layout == "half" and attention.config.rope_base == ROPE_THETA
    assert (attention.q_norm is not None) == (family == "qwen3")
    (x,) = random_inputs([(2, 6, 32)])
    ids = torch.tensor([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6]])
    mask = {"none": None, "causal": causal_mask(6), "padding": padding_mask(ids)}[mask_kind]
    positions = torch.arange(3, 9)  # not from 0, so that positions reach the rotation
    with torch.no_grad():
        expected, expected_weights = run_hf(module, rotary, x, positions, mask)
        output, weights = attention(x, mask=mask, positions=positions)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_from_hf_with_a_kv_cache_matches_transformers_dynamic_cache(family, num_kv_heads):
    module, rotary, config = hf_attention(family, num_kv_heads)
    attention = MultiHeadAttention.from_hf(module)
    (x,) = random_inputs([(2, 8, 32)])
    theirs, ours = DynamicCache(config=config), KVCache(2, num_kv_heads, module.head_dim, 8)
    with torch.no_grad():
        # A prompt of 5 tokens (causal), then 3 tokens one at a time (no mask needed).
        pieces = [(0, 5), (5, 6), (6, 7), (7, 8)]
        for start, end in pieces:
            positions = torch.arange(start, end)
            mask = causal_mask(end)[start:] if end - start > 1 else None
            expected, expected_weights = run_hf(
                module, rotary, x[:, start:end], positions, mask, theirs
            )
            output, weights = decode_step(attention, x[:, start:end], ours)
            torch.testing.assert_close(output, expected)
            torch.testing.assert_close(weights, expected_weights)
    held = theirs.layers[0]
    assert ours.keys.shape[1] == held.keys.shape[1] == num_kv_heads
    torch.testing.assert_close(ours.keys[:, :, : len(ours)], held.keys)
    torch.testing.assert_close(ours.values[:, :, : len(ours)], held.values)


def test_from_hf_keeps_dtype_and_mode_and_copies():
    module, _, _ = hf_attention("qwen3", 2)
    module = module.to(torch.float64).train()
    attention = MultiHeadAttention.from_hf(module)
    assert attention.q_proj.weight.dtype == torch.float64 and attention.training
    with torch.no_grad():
        module.q_proj.weight.zero_()
    assert attention.q_proj.weight.abs().sum() > 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(num_kv_heads=3)),
            ValueError,
            "num_kv_heads=3",
        ),
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(num_kv_heads=0)),
            ValueError,
            "num_kv_heads",
        ),
        (lambda: MultiHeadAttention(10, 4), ValueError, "d_model=10 is not divisible"),
        (
            lambda: MultiHeadAttention(
                24, 4, config=AttentionConfig(head_dim=5, rope_layout="half")
            ),
            ValueError,
            "even head_dim",
        ),
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(rope_layout="neox")),
            ValueError,
            "rope_layout must be",
        ),
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(qk_norm=1)),
            TypeError,
            "qk_norm",
        ),
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(rope_base=1)),
            ValueError,
            "rope_base",
        ),
        (
            lambda: MultiHeadAttention(24, 4)(torch.zeros(1, 3, 24), positions=torch.arange(3)),
            ValueError,
            "positions",
        ),
        (
            lambda: MultiHeadAttention(24, 4, config=AttentionConfig(rope_layout="half"))(
                torch.zeros(1, 3, 24), positions=torch.arange(4)
            ),
            ValueError,
            "positions",
        ),
        (lambda: MultiHeadAttention.from_hf(torch.nn.Linear(2, 2)), TypeError, "module"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_from_hf_rejects_a_rope_scaling_it_lacks():
    module, _, config = hf_attention("llama", 2)
    config.rope_parameters = {"rope_type": "longrope", "rope_theta": 500.0, "factor": 2.0}
    with pytest.raises(ValueError, match="rope_type='longrope'"):
        MultiHeadAttention.from_hf(module)


def test_decode_step_rejects_a_cache_of_num_heads_for_a_gqa_layer():
    attention = make_gqa(4, 2)
    cache = KVCache(1, 4, 6, 4)  # H heads: the wrong width for Hkv = 2
    with pytest.raises(ValueError, match=r"cache holds \[B, Hkv, Dh\]"):
        decode_step(attention, torch.zeros(1, 1, 24), cache)


# The rotary embedding is a submodule built once: the same rotation as the function, the
# frequencies computed at construction (per call only for "dynamic"), nothing in the state dict.

SCALED = {
    "none": None,
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4},
    "llama3": {
        "rope_type": "llama3",
        "factor": 4.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 4,
    },
}


@pytest.mark.parametrize("scaling", SCALED.values(), ids=SCALED.keys())
@pytest.mark.parametrize("rope", ["half", "interleaved"])
def test_project_rotates_exactly_as_rotary_embedding(scaling, rope):
    attention = make_gqa(
        4, 2, rope_layout=rope, rope_scaling=scaling, rope_base=500.0, qk_norm=True
    )
    (x,) = random_inputs([(2, 9, 24)])
    positions = torch.tensor([0, 3, 4, 7, 8, 11, 12, 15, 20])
    with torch.no_grad():
        q, k, _ = attention.project(x, positions=positions)
        plain = make_gqa(4, 2, qk_norm=True)  # the same weights (seed 0), no rotation
        q0, k0, _ = plain.project(x)
    options = {"base": 500.0, "layout": rope, "scaling": scaling}
    assert torch.equal(q, rotary_embedding(q0, positions, **options))
    assert torch.equal(k, rotary_embedding(k0, positions, **options))


@pytest.mark.parametrize("scaling", SCALED.values(), ids=SCALED.keys())
def test_frequencies_are_computed_once_unless_they_depend_on_the_length(scaling, monkeypatch):
    attention = make_gqa(4, 2, rope_layout="half", rope_scaling=scaling)
    assert isinstance(attention.rotary, RotaryEmbedding)
    calls = []
    original = positional.rope_frequencies
    monkeypatch.setattr(
        positional, "rope_frequencies", lambda *a, **k: calls.append(k) or original(*a, **k)
    )
    (x,) = random_inputs([(1, 6, 24)])
    with torch.no_grad():
        attention(x, mask=causal_mask(6))
        attention(x[:, :3], mask=causal_mask(3))
    dynamic = scaling is not None and scaling["rope_type"] == "dynamic"
    # Dynamic: once for the queries and once for the keys of each call, at its length.
    assert [call.get("seq_len") for call in calls] == ([6, 6, 3, 3] if dynamic else [])


@pytest.mark.parametrize("scaling", SCALED.values(), ids=SCALED.keys())
def test_rope_adds_nothing_to_the_state_dict(scaling):
    rotated = make_gqa(4, 2, rope_layout="half", rope_scaling=scaling, qk_norm=True)
    plain = make_gqa(4, 2, qk_norm=True)
    assert list(rotated.state_dict()) == list(plain.state_dict())
    assert list(rotated.buffers()) == []
    plain.load_state_dict(rotated.state_dict())  # strict, both ways
    rotated.load_state_dict(plain.state_dict())


def test_repr_shows_the_rotary_embedding():
    text = repr(make_gqa(4, 2, rope_layout="half", rope_scaling=SCALED["linear"]))
    assert "(rotary): RotaryEmbedding(head_dim=6, base=10000.0, layout='half', scaling=" in text
    assert "rotary" not in repr(make_gqa(4, 2))


def test_rope_scaling_is_read_only_and_a_copy():
    scaling = dict(SCALED["linear"])
    attention = make_gqa(4, 2, rope_layout="half", rope_scaling=scaling)
    config = attention.config
    assert config.rope_scaling == scaling and make_gqa(4, 2).config.rope_scaling is None
    scaling["factor"] = 8.0  # the caller's dict, edited after the build
    assert config.rope_scaling["factor"] == 2.0 == attention.rotary.scaling["factor"]
    with pytest.raises(TypeError):
        config.rope_scaling["factor"] = 16.0  # the config's own copy is read-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.rope_scaling = SCALED["yarn"]
