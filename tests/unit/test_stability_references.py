"""Part VI (2)'s library against the code real models run: ALiBi (BLOOM, MPT), every RoPE scaling
(transformers' ROPE_INIT_FUNCTIONS and Llama's rotary embedding), sinks (GPT-OSS's eager
attention) and softcapping (Gemma 2's)."""

import math
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.attention_config import AttentionConfig
from attention_lab.masks import causal_mask
from attention_lab.positional import (
    alibi_bias,
    alibi_slopes,
    rope_frequencies,
    rotary_embedding,
)
from attention_lab.score_modifiers import ScoreModifiers

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import GptOssConfig, LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.gemma2.modeling_gemma2 import (
        eager_attention_forward as gemma2_eager,
    )
    from transformers.models.gpt_oss.modeling_gpt_oss import (
        GptOssAttention,
    )
    from transformers.models.gpt_oss.modeling_gpt_oss import (
        eager_attention_forward as gpt_oss_eager,
    )
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor


# ALiBi ------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 32, 48, 112])
def test_alibi_slopes_are_bloom_and_mpt_slopes(num_heads):
    ours = alibi_slopes(num_heads)
    # BLOOM: slope * (key position) for an all-ones attention mask, one query row.
    bloom = build_alibi_tensor(torch.ones(1, 4), num_heads, torch.float64)[:, 0, 1]  # [H]
    torch.testing.assert_close(ours, bloom, rtol=1e-6, atol=0)
    # MPT: slope * (j - T + 1) for T = 2, key j = 0, so -slope.
    mpt = -build_mpt_alibi_tensor(num_heads, 2)[:, 0, 0].to(torch.float64)  # [H]
    torch.testing.assert_close(ours, mpt, rtol=1e-6, atol=0)
    assert len(set(ours.tolist())) == num_heads and bool(((ours > 0) & (ours < 1)).all())


@pytest.mark.parametrize(("num_heads", "q_len", "kv_len"), [(4, 6, 6), (6, 3, 9), (5, 1, 7)])
def test_alibi_bias_is_bloom_and_mpt_up_to_a_constant_per_row(num_heads, q_len, kv_len):
    ours = alibi_bias(num_heads, q_len, kv_len)  # [H, Tq, Tk]
    bloom = build_alibi_tensor(torch.ones(1, kv_len), num_heads, torch.float64)  # [H, 1, Tk]
    mpt = build_mpt_alibi_tensor(num_heads, kv_len).to(torch.float64)  # [H, 1, Tk]
    for theirs in (bloom, mpt):
        difference = ours - theirs  # constant along each row
        torch.testing.assert_close(
            difference, difference[..., :1].expand_as(difference), rtol=0, atol=1e-9
        )
    # And so the same attention, with the queries as the last positions under a causal mask.
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, num_heads, q_len, 8, generator=generator, dtype=torch.float64)
    key = torch.randn(1, num_heads, kv_len, 8, generator=generator, dtype=torch.float64)
    value = torch.randn(1, num_heads, kv_len, 8, generator=generator, dtype=torch.float64)
    mask = causal_mask(kv_len)[kv_len - q_len :]  # [Tq, Tk]
    ours_out, ours_w = scaled_dot_product_attention(
        query, key, value, mask, modifiers=ScoreModifiers(bias=ours)
    )
    bloom_out, bloom_w = scaled_dot_product_attention(
        query, key, value, mask, modifiers=ScoreModifiers(bias=bloom)
    )
    torch.testing.assert_close(ours_w, bloom_w)
    torch.testing.assert_close(ours_out, bloom_out)


def test_alibi_bias_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="kv_len must be at least q_len"):
        alibi_bias(2, 5, 3)


# RoPE scaling -----------------------------------------------------------------------------

SCALINGS = [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64},
    {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 128,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
        "truncate": False,
    },
    {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
    },
    {
        "rope_type": "yarn",
        "factor": 2.0,
        "original_max_position_embeddings": 32,
        "attention_factor": 1.3,
    },
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
]


def llama_config(head_dim, base, scaling, max_positions=64):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaConfig(
            hidden_size=head_dim * 2,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=head_dim,
            max_position_embeddings=max_positions,
            rope_parameters={"rope_theta": base, **(scaling or {"rope_type": "default"})},
        )


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: s["rope_type"])
@pytest.mark.parametrize("head_dim", [16, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_frequencies_are_transformers(scaling, head_dim, base):
    seq_lens = [None] if scaling["rope_type"] != "dynamic" else [32, 64, 100, 1000]
    for seq_len in seq_lens:
        config = llama_config(head_dim, base, scaling)
        theirs, their_factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len)
        ours, our_factor = rope_frequencies(
            head_dim, base=base, scaling=scaling, seq_len=seq_len or 1
        )
        # transformers computes in float32; ours is float64.
        torch.testing.assert_close(ours.float(), theirs, rtol=2e-6, atol=0)
        assert our_factor == pytest.approx(their_factor, rel=1e-12)


@pytest.mark.parametrize(
    "scaling", [None, *SCALINGS], ids=lambda s: (s or {}).get("rope_type", "none")
)
def test_rotated_queries_are_llamas(scaling):
    head_dim, base, length = 32, 10000.0, 100
    config = llama_config(head_dim, base, scaling)
    rotary = LlamaRotaryEmbedding(config)
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(2, 2, length, head_dim, generator=generator)
    key = torch.randn(2, 2, length, head_dim, generator=generator)
    positions = torch.arange(length)
    cos, sin = rotary(query, positions[None])
    their_q, their_k = apply_rotary_pos_emb(query, key, cos, sin)
    ours_q = rotary_embedding(query, positions, base=base, layout="half", scaling=scaling)
    ours_k = rotary_embedding(key, positions, base=base, layout="half", scaling=scaling)
    torch.testing.assert_close(ours_q, their_q, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours_k, their_k, rtol=1e-4, atol=1e-4)


@given(st.integers(1, 6), st.integers(0, 3))
def test_layouts_equal_up_to_a_permutation_of_the_features(half_pairs, seed):
    head_dim = 2 * half_pairs
    x = torch.randn(3, 5, head_dim, generator=torch.Generator().manual_seed(seed))
    # Interleaved pairs (2i, 2i+1) are the half layout's (i, i + Dh/2) after this permutation.
    to_half = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    interleaved = rotary_embedding(x, layout="interleaved")
    half = rotary_embedding(x[..., to_half], layout="half")
    torch.testing.assert_close(interleaved[..., to_half], half)


@pytest.mark.parametrize(
    ("scaling", "match"),
    [
        ({"rope_type": "ntk"}, "rope_type"),
        ({"rope_type": "linear"}, "needs"),
        ({"rope_type": "linear", "factor": 2.0, "beta_fast": 3}, "takes no"),
        ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}, "seq_len"),
        ({"rope_type": "linear", "factor": -1.0}, "factor"),
    ],
)
def test_bad_scalings_are_named(scaling, match):
    with pytest.raises(ValueError, match=match):
        rope_frequencies(8, scaling=scaling)


# Sinks and softcapping --------------------------------------------------------------------


def random_qkv(heads, q_len, kv_len, head_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(2, heads, length, head_dim, generator=generator)
        for length in (q_len, kv_len, kv_len)
    ]


@pytest.mark.parametrize("masked", [False, True])
def test_sink_logits_are_gpt_oss_attention(masked):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = GptOssConfig(
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=8,
            num_hidden_layers=1,
            attn_implementation="eager",
        )
    module = GptOssAttention(config, layer_idx=0).eval()
    torch.nn.init.normal_(module.sinks, std=2.0, generator=torch.Generator().manual_seed(3))
    query, key, value = random_qkv(4, 6, 6, 8)
    mask = causal_mask(6) if masked else None
    additive = None if mask is None else torch.zeros(6, 6).masked_fill(~mask, -torch.inf)
    their_out, their_w = gpt_oss_eager(module, query, key, value, additive, scaling=8**-0.5)
    ours_out, ours_w = scaled_dot_product_attention(
        query, key, value, mask, modifiers=ScoreModifiers(sink_logits=module.sinks.detach())
    )
    torch.testing.assert_close(ours_w, their_w)
    torch.testing.assert_close(ours_out, their_out.transpose(1, 2))
    assert bool((ours_w.sum(-1) < 1).all())


def test_a_fully_masked_row_with_a_sink_is_still_zero():
    query, key, value = random_qkv(2, 3, 3, 4)
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    out, weights = scaled_dot_product_attention(
        query, key, value, mask, modifiers=ScoreModifiers(sink_logits=torch.tensor([0.5, -1.0]))
    )
    assert bool((weights[..., 0, :] == 0).all()) and bool((out[..., 0, :] == 0).all())


@pytest.mark.parametrize("softcap", [0.5, 5.0, 50.0])
def test_softcap_is_gemma2_attention(softcap):
    class Module(torch.nn.Module):
        num_key_value_groups = 1
        head_dim = 16

    query, key, value = random_qkv(3, 5, 5, 16)
    query = query * 4  # large scores, so the cap bites
    mask = causal_mask(5)
    additive = torch.zeros(5, 5).masked_fill(~mask, -torch.inf)
    their_out, their_w = gemma2_eager(Module().eval(), query, key, value, additive, softcap=softcap)
    ours_out, ours_w = scaled_dot_product_attention(
        query, key, value, mask, modifiers=ScoreModifiers(softcap=softcap)
    )
    torch.testing.assert_close(ours_w, their_w)
    torch.testing.assert_close(ours_out, their_out.transpose(1, 2))


def test_softcap_bounds_every_score():
    query, key, value = random_qkv(1, 4, 4, 8)
    value = torch.eye(4).expand(2, 1, 4, 4).contiguous()
    _, weights = scaled_dot_product_attention(
        query * 100, key, value, modifiers=ScoreModifiers(softcap=2.0)
    )
    # With |score| <= 2 the largest ratio of two weights in a row is at most e**4 (reached
    # here: the scores are so large that tanh rounds to +-1 in float32).
    ratio = weights.amax(-1) / weights.amin(-1)
    assert bool((ratio <= math.exp(4) * (1 + 1e-5)).all())
    _, uncapped = scaled_dot_product_attention(query * 100, key, value)
    assert bool((uncapped.amax(-1) / uncapped.amin(-1) > 1e6).all())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bias": torch.zeros(3, 3, dtype=torch.long)}, TypeError, "bias"),
        ({"bias": torch.zeros(2, 3)}, ValueError, "bias of shape"),
        ({"sink_logits": torch.zeros(3)}, ValueError, "sink_logits"),
        ({"sink_logits": [0.0, 0.0]}, TypeError, "sink_logits"),
        ({"softcap": 0.0}, ValueError, "softcap"),
    ],
)
def test_bad_stability_arguments_are_named(kwargs, error, match):
    query, key, value = random_qkv(2, 3, 3, 4)
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(query, key, value, modifiers=ScoreModifiers(**kwargs))


# Whole attention layers, weights copied with from_hf ----------------------------------------


def randomise(module, seed=0):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1 + 0.2 * noise if "norm" in name else 0.3 * noise)
    return module.eval()


def run_layer(module, rotary, x, positions, mask):
    cos, sin = rotary(x, positions[None].expand(x.shape[0], -1))
    float_mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    return module(x, position_embeddings=(cos, sin), attention_mask=float_mask[None, None])


def gpt_oss_layer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

        config = GptOssConfig(
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            num_hidden_layers=1,
            vocab_size=16,
            attention_bias=True,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 1000.0,
                "factor": 4.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 16,
            },
        )
    config._attn_implementation = "eager"
    return randomise(GptOssAttention(config, layer_idx=0)), GptOssRotaryEmbedding(config)


def test_from_hf_copies_gpt_oss_sinks_and_yarn_and_matches_it():
    module, rotary = gpt_oss_layer()
    attention = MultiHeadAttention.from_hf(module)
    assert (
        attention.sink_logits is not None and attention.config.rope_scaling["rope_type"] == "yarn"
    )
    x = torch.randn(2, 40, 32, generator=torch.Generator().manual_seed(5))
    positions = torch.arange(20, 60)  # beyond the original 16 positions
    mask = causal_mask(40)
    with torch.no_grad():
        expected, expected_weights = run_layer(module, rotary, x, positions, mask)
        output, weights = attention(x, mask=mask, positions=positions)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)
    # The sinks took weight: no row sums above 1, and most rows visibly below.
    sums = weights.sum(-1)
    assert bool((sums <= 1 + 1e-6).all()) and float((sums < 0.999).float().mean()) > 0.5


def test_from_hf_copies_gemma2_softcapping_and_matches_it():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import Gemma2Config
        from transformers.models.gemma2.modeling_gemma2 import (
            Gemma2Attention,
            Gemma2RotaryEmbedding,
        )

        config = Gemma2Config(
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            query_pre_attn_scalar=8,
            attn_logit_softcapping=2.0,
            num_hidden_layers=1,
            vocab_size=16,
            sliding_window=None,
        )
    config._attn_implementation = "eager"
    module = randomise(Gemma2Attention(config, layer_idx=0))
    attention = MultiHeadAttention.from_hf(module)
    assert attention.config.softcap == 2.0
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(6)) * 3
    positions = torch.arange(6)
    with torch.no_grad():
        expected, expected_weights = run_layer(
            module, Gemma2RotaryEmbedding(config), x, positions, causal_mask(6)
        )
        output, weights = attention(x, mask=causal_mask(6), positions=positions)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("scaling", SCALINGS[:2] + SCALINGS[-1:], ids=lambda s: s["rope_type"])
def test_from_hf_copies_llama_rope_scaling_and_matches_it(scaling):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.models.llama.modeling_llama import LlamaAttention

        config = LlamaConfig(
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_hidden_layers=1,
            vocab_size=16,
            max_position_embeddings=64,
            rope_parameters={"rope_theta": 500.0, **scaling},
        )
    config._attn_implementation = "eager"
    module = randomise(LlamaAttention(config, layer_idx=0))
    attention = MultiHeadAttention.from_hf(module)
    length = 100  # past the 64 positions, where "dynamic" rescales
    x = torch.randn(1, length, 32, generator=torch.Generator().manual_seed(7))
    positions = torch.arange(length)
    with torch.no_grad():
        expected, expected_weights = run_layer(
            module, LlamaRotaryEmbedding(config), x, positions, causal_mask(length)
        )
        output, weights = attention(x, mask=causal_mask(length), positions=positions)
    torch.testing.assert_close(output, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-4, atol=1e-5)


def test_sinks_and_softcap_arguments_are_checked():
    with pytest.raises(ValueError, match="rope_base and rope_scaling need a rotary embedding"):
        MultiHeadAttention(
            8, 2, config=AttentionConfig(rope_scaling={"rope_type": "linear", "factor": 2.0})
        )
    with pytest.raises(ValueError, match="softcap"):
        MultiHeadAttention(8, 2, config=AttentionConfig(softcap=0))
    with pytest.raises(TypeError, match="sinks"):
        MultiHeadAttention(8, 2, config=AttentionConfig(sinks=1))
    attention = MultiHeadAttention(8, 2, config=AttentionConfig(sinks=True))
    assert attention.sink_logits.shape == (2,) and attention.sink_logits.requires_grad


def test_multi_head_attention_with_alibi_adds_the_bias_and_decodes_with_a_cache():
    from attention_lab.caches import KVCache, decode_step

    torch.manual_seed(0)
    attention = MultiHeadAttention(24, 6, config=AttentionConfig(num_kv_heads=2, alibi=True)).eval()
    x = torch.randn(2, 7, 24, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        output, weights = attention(x, mask=causal_mask(7))
        q, k, v = attention.project(x)
        k, v = (t.repeat_interleave(3, dim=1) for t in (k, v))
        _, expected = scaled_dot_product_attention(
            q, k, v, causal_mask(7), modifiers=ScoreModifiers(bias=alibi_bias(6, 7, 7).float())
        )
        torch.testing.assert_close(weights, expected)
        # Token by token through a cache: the queries are the last positions.
        cache = KVCache(2, 2, 4, 7)
        steps = [decode_step(attention, x[:, t : t + 1], cache)[0] for t in range(7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), output)


def test_a_layer_builds_alibi_s_bias_once_per_shape():
    """Training calls a layer with one shape thousands of times: the bias is built at the first
    call and reused (the same tensor, equal to a fresh ``alibi_bias``), and rebuilt when the
    lengths or the dtype change, as in decoding, where Tk grows by one at every step."""
    attention = MultiHeadAttention(16, 4, config=AttentionConfig(alibi=True))
    q, k = torch.randn(1, 4, 5, 4), torch.randn(1, 4, 5, 4)
    first = attention.score_modifiers(q, k).bias
    assert attention.score_modifiers(q, k).bias is first
    assert torch.equal(first, alibi_bias(4, 5, 5).float())
    longer = attention.score_modifiers(q[:, :, :1], torch.randn(1, 4, 9, 4)).bias
    assert torch.equal(longer, alibi_bias(4, 1, 9).float())
    doubled = attention.score_modifiers(q.double(), k.double()).bias
    assert doubled.dtype == torch.float64 and torch.equal(doubled, alibi_bias(4, 5, 5))
    assert "_alibi" not in str(attention.state_dict().keys())
