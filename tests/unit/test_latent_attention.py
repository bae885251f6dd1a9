"""LatentAttention (DeepSeek's multi-head latent attention) against transformers'
DeepseekV3Attention (eager, small random configurations), with and without a cache."""

import pytest
import torch
from transformers import DeepseekV3Config
from transformers.cache_utils import DynamicCache
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)

from attention_lab.attention import MultiHeadAttention
from attention_lab.caches import LatentCache
from attention_lab.latent_attention import LatentAttention
from attention_lab.masks import causal_mask, padding_mask
from attention_lab.positional import RotaryEmbedding, rotary_embedding
from support.tensors import random_inputs

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = {"kv_lora_rank": 8, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4, "v_head_dim": 5}


def hf_latent(q_lora_rank, rope_interleave, seed=0):
    config = DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=1,
        intermediate_size=64,
        moe_intermediate_size=16,
        vocab_size=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        q_lora_rank=q_lora_rank,
        rope_interleave=rope_interleave,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        **SIZES,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    module = DeepseekV3Attention(config, layer_idx=0).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1 + 0.2 * noise if "norm" in name else 0.3 * noise)
    return module, DeepseekV3RotaryEmbedding(config), config


def run_hf(module, rotary, x, positions, mask, cache=None):
    cos, sin = rotary(x, positions[None].expand(x.shape[0], -1))
    float_mask = None
    if mask is not None:
        mask = mask.expand(x.shape[0], 1, *mask.shape[-2:])  # [B, 1, Tq, Tk]
        float_mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    return module(x, (cos, sin), float_mask, past_key_values=cache)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("rope_interleave", [True, False])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_from_hf_matches_deepseek_v3_attention(q_lora_rank, rope_interleave, mask_kind):
    module, rotary, _ = hf_latent(q_lora_rank, rope_interleave)
    attention = LatentAttention.from_hf(module)
    assert attention.rotary.layout == ("interleaved" if rope_interleave else "half")
    (x,) = random_inputs([(2, 6, 32)])
    ids = torch.tensor([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6]])
    mask = {"none": None, "causal": causal_mask(6), "padding": padding_mask(ids)}[mask_kind]
    positions = torch.arange(2, 8)
    with torch.no_grad():
        expected, expected_weights = run_hf(module, rotary, x, positions, mask)
        output, weights = attention(x, mask, positions=positions)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
def test_latent_cache_matches_transformers_and_holds_only_the_latent(q_lora_rank):
    module, rotary, config = hf_latent(q_lora_rank, True)
    attention = LatentAttention.from_hf(module)
    (x,) = random_inputs([(2, 8, 32)])
    theirs, ours = DynamicCache(config=config), attention.new_cache(2, 8)
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8)]:
            positions = torch.arange(start, end)
            mask = causal_mask(end)[start:] if end - start > 1 else None
            expected, expected_weights = run_hf(
                module, rotary, x[:, start:end], positions, mask, theirs
            )
            output, weights = attention(x[:, start:end], mask, cache=ours)
            torch.testing.assert_close(output, expected)
            torch.testing.assert_close(weights, expected_weights)
    # transformers caches the same latent ([B, 1, T, R]) and a RoPE key of the same width.
    held = theirs.layers[0]
    torch.testing.assert_close(ours.latents[:, None], held.keys)
    assert held.values.shape[-1] == ours.rope_keys.shape[-1] == SIZES["qk_rope_head_dim"]
    per_position = SIZES["kv_lora_rank"] + SIZES["qk_rope_head_dim"]
    assert (
        ours.numbers_per_position
        == per_position
        == held.keys[0, 0, 0].numel() + held.values[0, 0, 0].numel()
    )
    # Multi-head attention with the same heads would cache 2 * H * Dh numbers per position.
    assert per_position < 2 * 4 * (SIZES["qk_nope_head_dim"] + SIZES["qk_rope_head_dim"])


def test_latent_attention_with_cache_matches_the_full_causal_pass():
    torch.manual_seed(0)
    attention = LatentAttention(32, 4, q_lora_rank=12, **SIZES).eval()
    (x,) = random_inputs([(2, 7, 32)])
    cache = attention.new_cache(2, 7)
    with torch.no_grad():
        expected, expected_weights = attention(x, causal_mask(7))
        first, _ = attention(x[:, :4], causal_mask(4), cache=cache)
        rest = [attention(x[:, t : t + 1], cache=cache) for t in range(4, 7)]
    torch.testing.assert_close(first, expected[:, :4])
    for t, (output, weights) in zip(range(4, 7), rest, strict=True):
        torch.testing.assert_close(output, expected[:, t : t + 1])
        torch.testing.assert_close(weights, expected_weights[:, :, t : t + 1, : t + 1])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: LatentAttention(32, 4, **{**SIZES, "qk_rope_head_dim": 3}), ValueError, "even"),
        (
            lambda: LatentAttention(32, 4, **{**SIZES, "kv_lora_rank": 0}),
            ValueError,
            "kv_lora_rank",
        ),
        (lambda: LatentAttention(32, 4, rope_layout="neox", **SIZES), ValueError, "rope_layout"),
        (
            lambda: LatentAttention(32, 4, **SIZES)(torch.zeros(1, 2, 32), cache=[]),
            TypeError,
            "cache",
        ),
        (lambda: LatentAttention.from_hf(MultiHeadAttention(8, 2)), TypeError, "module"),
        (
            lambda: LatentCache(1, 8, 4, 2).append(torch.zeros(1, 3, 8), torch.zeros(1, 3, 4)),
            ValueError,
            "holds 0 of max_len=2 positions and cannot take 3 more",
        ),
        (lambda: LatentCache(1, 8, 0, 2), ValueError, "rope_dim must be a positive int"),
        (lambda: LatentCache(1, 8, 4, 2, dtype=torch.int64), TypeError, "floating torch.dtype"),
        (
            lambda: LatentCache(1, 8, 4, 2).append(torch.zeros(1, 1, 7), torch.zeros(1, 1, 4)),
            ValueError,
            "latent",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_latent_attention_holds_one_rotary_embedding_and_saves_only_weights():
    torch.manual_seed(0)
    attention = LatentAttention(32, 4, rope_layout="half", rope_base=500.0, **SIZES)
    assert isinstance(attention.rotary, RotaryEmbedding)
    assert (attention.rotary.head_dim, attention.rotary.base) == (4, 500.0)
    assert attention.rotary.layout == "half" and attention.rotary.scaling is None
    assert sorted(attention.state_dict()) == [
        "kv_a_norm.weight",
        "kv_a_proj.weight",
        "kv_b_proj.weight",
        "out_proj.weight",
        "q_proj.weight",
    ]
    (x,) = random_inputs([(2, 5, 32)])
    positions = torch.arange(10, 15)
    with torch.no_grad():
        _, k_rope = attention.kv_a_proj(x).split([8, 4], dim=-1)  # [B, T, Dr]
        cache = attention.new_cache(2, 5)
        attention(x, causal_mask(5), positions=positions, cache=cache)
    # The cache holds the shared RoPE keys rotated exactly as the function rotates them.
    expected = rotary_embedding(k_rope, positions, base=500.0, layout="half")
    assert torch.equal(cache.rope_keys, expected)
