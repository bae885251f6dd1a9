"""``attention_lab.sparse``: top-k masks and attention against their definitions, and the
lightning indexer against transformers' ``DeepseekV32Indexer`` (a small random configuration,
weights copied): the same top-k key sets."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DeepseekV32Config
from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
    DeepseekV32Indexer,
    DeepseekV32RotaryEmbedding,
    apply_rotary_pos_emb,
)

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask, topk_mask
from attention_lab.sparse import LightningIndexer, topk_attention
from support.tensors import random_inputs

pytestmark = pytest.mark.usefixtures("one_thread")


@settings(max_examples=30, deadline=None)
@given(
    tq=st.integers(1, 7), tk=st.integers(1, 9), data=st.data(), causal=st.booleans(),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_topk_mask_keeps_the_k_best_visible_keys_of_each_query(tq, tk, data, causal, seed):
    k = data.draw(st.integers(1, tk))
    scores = random_inputs([(2, tq, tk)], seed=seed)[0]
    mask = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq) if causal else None
    kept = topk_mask(scores, k, mask)
    visible = mask if mask is not None else torch.ones(tq, tk, dtype=torch.bool)
    for b in range(2):
        for i in range(tq):
            seen = visible[i].nonzero().flatten().tolist()
            ranked = sorted(seen, key=lambda j: -scores[b, i, j].item())[:k]
            assert set(kept[b, i].nonzero().flatten().tolist()) == set(ranked)


def test_topk_attention_reads_only_the_kept_keys_and_with_every_key_is_attention():
    q, k, v = random_inputs([(2, 3, 5, 4), (2, 3, 9, 4), (2, 3, 9, 6)], seed=1)
    full = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(topk_attention(q, k, v, 9), full)
    out, weights = topk_attention(q, k, v, 3)
    kept = topk_mask(q @ k.transpose(-2, -1), 3)
    assert (weights[~kept] == 0).all() and ((weights > 0) == kept).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    # Another scorer's ranking picks the keys; the attention still weighs them by q . k.
    other = random_inputs([(2, 3, 5, 9)], seed=4)[0]
    _, chosen = topk_attention(q, k, v, 2, scores=other)
    assert ((chosen > 0) == topk_mask(other, 2)).all()


def test_a_visible_key_of_infinite_score_is_kept():
    scores = torch.tensor([[0.0, float("inf"), 1.0, 2.0]])
    kept = topk_mask(scores, 2, torch.ones(1, 4, dtype=torch.bool))
    assert kept.tolist() == [[False, True, False, True]]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at most the number of keys"):
        topk_mask(torch.zeros(2, 4), 5)
    with pytest.raises(ValueError, match="k must be a positive int"):
        topk_mask(torch.zeros(2, 4), 0)
    with pytest.raises(TypeError, match="torch.bool"):
        topk_mask(torch.zeros(2, 4), 2, mask=torch.ones(2, 4))
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="k must be at most the number of keys, Tk = 3; got 4"):
        topk_attention(q, q, q, 4)  # named as the caller passed it, not top_k
    with pytest.raises(TypeError, match="k must be a positive int"):
        topk_attention(q, q, q, True)
    with pytest.raises(ValueError, match="rope_dim must be even"):
        LightningIndexer(16, 8, 2, 8, 3, 4)


def indexer_scores_as_the_reference_computes_them(reference, x, q_resid, cos, sin, causal):
    """DeepseekV32Indexer.forward's scores, step by step from its own modules (its forward
    returns only the indices)."""
    batch, length, _ = x.shape
    heads, dim, rope = reference.n_heads, reference.head_dim, reference.qk_rope_head_dim
    q = reference.wq_b(q_resid).view(batch, length, heads, dim)
    k = reference.k_norm(reference.wk(x)).unsqueeze(2)
    q_rot, q_k_rot = apply_rotary_pos_emb(q[..., :rope], k[..., :rope], cos, sin, unsqueeze_dim=2)
    q = torch.cat([q_rot, q[..., rope:]], dim=-1).transpose(1, 2)  # [B, H, T, Dh]
    k = torch.cat([q_k_rot, k[..., rope:]], dim=-1).squeeze(2)  # [B, T, Dh]
    scores = torch.relu(q @ k.transpose(-1, -2).unsqueeze(1) * dim**-0.5)  # [B, H, T, T]
    weights = reference.weights_proj(x) * heads**-0.5  # [B, T, H]
    total = (weights.transpose(1, 2).unsqueeze(-1) * scores).sum(dim=1)
    return total.masked_fill(~causal, float("-inf"))


@pytest.mark.parametrize("top_k", [1, 4, 16])
def test_the_lightning_indexer_picks_deepseek_v32_s_keys(top_k):
    torch.manual_seed(0)  # modules draw their weights from the global generator
    config = DeepseekV32Config(
        hidden_size=32, q_lora_rank=24, index_n_heads=4, index_head_dim=16,
        qk_rope_head_dim=8, index_topk=top_k, num_attention_heads=4, num_key_value_heads=4,
        kv_lora_rank=16, qk_nope_head_dim=8, v_head_dim=8, num_hidden_layers=1,
        vocab_size=50, intermediate_size=64, moe_intermediate_size=32,
    )  # fmt: skip
    reference = DeepseekV32Indexer(config, layer_idx=0).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.5)
    ours = LightningIndexer.from_hf(reference).eval()
    batch, length = 2, 29  # longer than top_k: most queries choose among more keys than k
    x, q_resid = random_inputs([(batch, length, 32), (batch, length, 24)], seed=5)
    positions = torch.arange(length)
    cos, sin = DeepseekV32RotaryEmbedding(config)(x, positions[None].expand(batch, -1))
    causal = causal_mask(length)[None]  # [1, T, T]
    with torch.no_grad():
        expected = reference(x, q_resid, (cos, sin), causal, positions[None])
        scores = ours.index_scores(x, q_resid, positions, causal)
        written = indexer_scores_as_the_reference_computes_them(
            reference, x, q_resid, cos, sin, causal
        )
        got = ours(x, q_resid, positions, causal)
    torch.testing.assert_close(scores, written, atol=1e-5, rtol=1e-5)
    assert got.shape == expected.shape == (batch, length, min(top_k, length))
    # As sets, over the keys each query may see (a query that sees fewer than k keys also
    # lists blocked ones, in no order that means anything); best first by the scores.
    for b in range(batch):
        for i in range(length):
            mine = {j for j in got[b, i].tolist() if j <= i}
            theirs = {j for j in expected[b, i].tolist() if j <= i}
            assert mine == theirs and len(mine) == min(top_k, i + 1), (b, i)
            ranked = scores[b, i, got[b, i][: min(top_k, i + 1)]]
            assert (ranked[:-1] >= ranked[1:]).all(), (b, i)
