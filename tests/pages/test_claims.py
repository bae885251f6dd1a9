"""Five numeric claims of the book, measured here independently of the pages that make them.

The pages assert these claims on their own inputs; these tests re-measure them another way, so
a claim that only held for a page's particular inputs or formula would fail here too:

- chapter 06: with neither residual nor LayerNorm, the gradient reaching a deep stack's first
  layer shrinks geometrically, to about 1e-28 after 24 layers. Its float32 entries are still
  representable and agree with float64; only a norm taken in float32, which squares them, underflows
  to 0;
- chapter 09: MiniLM's layer 3, head 11 (the head the ``[SEP]`` measure picks) is a
  punctuation head: on probes other than the page's, its word tokens put more weight on the
  final full stop than on ``[SEP]``, and its ``[SEP]`` share grows when the full stop is removed;
- chapter 11: with d_ff = 4D, a whole block's attention products (QKᵀ and AV) cost as much as
  all its linear maps at T = 6D (2,304 tokens for MiniLM), counted by PyTorch's
  ``FlopCounterMode`` on ``transformers``' own ``BertLayer`` rather than by the page's formula;
- chapter 21: linear attention's left-to-right order, ``(phi(Q) phi(K)^T) V``, costs 4T^2D FLOPs,
  its right-to-left order 4TD^2, and its chunked causal form 4TD(D + C) (in general
  ``T (4 Dk Dv + 2 C (Dk + Dv))``), counted by ``FlopCounterMode`` on the library's
  ``linear_attention`` rather than by the page's formulas from the products' shapes;
- chapter 22: Qwen3-Next's published configuration, as ``transformers``' ``Qwen3NextConfig``
  carries it, has 48 layers in twelve groups of three linear-attention (Gated DeltaNet) layers
  and one full-attention layer.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_lab.layers import EncoderLayer
from attention_lab.linear import linear_attention
from attention_lab.pretrained import load_minilm

pytestmark = pytest.mark.usefixtures("one_thread")


def _neither_gradients(depth: int, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    """The gradient at each layer's input of a stack with no residual and no LayerNorm.

    Each layer is x <- FeedForward(SelfAttention(x)), built from the library's EncoderLayer's
    own sub-modules; the loss is the output's projection on a fixed random direction.
    """
    torch.manual_seed(seed)
    layers = [EncoderLayer(64, 4, d_ff=256, dropout=0.0).to(dtype).eval() for _ in range(depth)]
    h = torch.randn(4, 16, 64).to(dtype).requires_grad_(True)  # the same draw in both dtypes
    inputs = [h]
    for layer in layers:
        h = layer.feed_forward(layer.self_attn(h)[0])
        h.retain_grad()
        inputs.append(h)
    direction = torch.randn(h.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    loss = (direction * h).sum() / math.sqrt(h.numel())
    loss.backward()
    return [t.grad for t in inputs[:-1]]


def _rms(gradient: torch.Tensor) -> float:
    """Root mean square, computed in float64 whatever the gradient's dtype."""
    return gradient.double().pow(2).mean().sqrt().item()


def test_neither_stack_gradient_vanishes_geometrically_but_float32_still_holds_it():
    float64 = [_rms(g) for g in _neither_gradients(24, torch.float64)]
    float32_gradients = _neither_gradients(24, torch.float32)
    float32 = [_rms(g) for g in float32_gradients]
    # Nonzero all the way down, but far below anything an optimiser could use.
    assert all(g > 0 for g in float64)
    assert float64[0] < 1e-20
    # Geometric: every layer shrinks it by a factor of the same order (no single cliff).
    factors = [float64[i + 1] / float64[i] for i in range(len(float64) - 1)]
    assert min(factors) > 2 and max(factors) < 20 * min(factors)
    # float32 represents these gradients (its smallest normal number is about 1.2e-38) and
    # agrees with float64 at every layer ...
    for low, high in zip(float32, float64, strict=True):
        assert math.isclose(low, high, rel_tol=1e-4)
    assert (float32_gradients[0] != 0).all()
    # ... but squaring them in float32, as a float32 norm does, underflows to exactly 0.
    assert float32_gradients[0].pow(2).sum().item() == 0.0


# Probes unlike the page's: different words, lengths and subjects, each ending in a full stop.
PROBES = [
    "Rain fell on the quiet harbour all night.",
    "She packed three books and a torch for the trip.",
    "The committee postponed its vote until next spring.",
    "Old maps rarely show the roads we drive today.",
    "My brother repaired the bicycle with borrowed tools.",
    "Bright lanterns hung above the crowded market square.",
    "Engineers tested the bridge before it opened to traffic.",
    "A small bird sang from the top of the chimney.",
]
HEAD = (3, 11)


def _shares(sentence: str) -> tuple[float, float]:
    """Head HEAD's word tokens' mean weight on the last real token and on [SEP]."""
    tokenizer, model = load_minilm()
    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        attentions = model(**encoded, output_attentions=True).attentions
    rows = attentions[HEAD[0]][0, HEAD[1], 1:-1]  # [T - 2, T]: word tokens as queries
    return rows[:, -2].mean().item(), rows[:, -1].mean().item()


def test_minilm_sep_measure_head_is_a_punctuation_head():
    with_stop = [_shares(text) for text in PROBES]
    without_stop = [_shares(text.removesuffix(".")) for text in PROBES]
    on_stop = sum(s for s, _ in with_stop) / len(PROBES)
    on_sep = sum(s for _, s in with_stop) / len(PROBES)
    on_sep_no_stop = sum(s for _, s in without_stop) / len(PROBES)
    # The page's numbers on its own probes: about 0.39 on ".", 0.14 on [SEP], 0.24 without ".".
    assert on_stop > 2 * on_sep
    assert all(stop > sep for stop, sep in with_stop)  # per sentence, not only on average
    assert on_sep_no_stop > 1.5 * on_sep


def _bert_layer_flops(length: int) -> tuple[int, int]:
    """(linear-map FLOPs, attention-product FLOPs) of one MiniLM BertLayer on `length` tokens."""
    from transformers.models.bert.modeling_bert import BertLayer

    _, model = load_minilm()
    config = model.config
    assert config.intermediate_size == 4 * config.hidden_size  # d_ff = 4D
    layer = BertLayer(config).eval()  # its own random weights: FLOPs do not depend on them
    hidden = torch.zeros(1, length, config.hidden_size)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(hidden)
    by_op = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    linear = sum(n for op, n in by_op.items() if op in ("aten.addmm", "aten.mm"))
    products = sum(n for op, n in by_op.items() if op == "aten.bmm")
    assert linear + products == counter.get_total_flops()  # nothing else was counted
    return linear, products


def test_block_crossover_with_feed_forward_is_six_d_for_minilm():
    _, model = load_minilm()
    width = model.config.hidden_size  # D = 384
    crossover = 6 * width  # 2,304
    below, at, above = (_bert_layer_flops(t) for t in (crossover - 1, crossover, crossover + 1))
    assert below[1] < below[0]
    assert at[1] == at[0]
    assert above[1] > above[0]
    # Not 2D: there the products equal only the four projections, a third of the linear maps.
    linear, products = _bert_layer_flops(2 * width)
    assert products * 3 == linear


def _linear_attention_flops(length: int, key_dim: int, value_dim: int, **options) -> int:
    """FlopCounterMode's count of one head of ``linear_attention`` with no feature map and no
    normaliser, so that only its matrix products are left."""
    q, k = torch.zeros(1, 1, length, key_dim), torch.zeros(1, 1, length, key_dim)
    v = torch.zeros(1, 1, length, value_dim)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        linear_attention(q, k, v, feature_map=None, normalize=False, **options)
    return counter.get_total_flops()


@pytest.mark.parametrize("length", [64, 512, 1000])
def test_linear_attention_s_two_orders_cost_what_chapter_21_counts(length):
    width = 64
    left_to_right = _linear_attention_flops(length, width, width, causal=False, form="parallel")
    right_to_left = _linear_attention_flops(length, width, width, causal=False, form="recurrent")
    assert left_to_right == 4 * length**2 * width
    assert right_to_left == 4 * length * width**2
    # A causal parallel form computes the whole T x T matrix too, then zeroes its future.
    assert _linear_attention_flops(length, width, width, form="parallel") == left_to_right


@pytest.mark.parametrize(("key_dim", "value_dim"), [(64, 64), (32, 48)])
@pytest.mark.parametrize("chunk", [16, 64, 256])
def test_the_chunked_form_costs_what_chapter_21_counts(key_dim, value_dim, chunk):
    length = 1024  # a multiple of every chunk length
    counted = _linear_attention_flops(length, key_dim, value_dim, form="chunked", chunk_size=chunk)
    assert counted == length * (4 * key_dim * value_dim + 2 * chunk * (key_dim + value_dim))
    if key_dim == value_dim:
        assert counted == 4 * length * key_dim * (key_dim + chunk)  # 4TD(D + C)


def test_qwen3_next_stacks_three_gated_deltanet_layers_below_each_attention_layer():
    from transformers import Qwen3NextConfig

    layer_types = Qwen3NextConfig().layer_types
    assert len(layer_types) == 48
    group = ["linear_attention"] * 3 + ["full_attention"]
    assert layer_types == group * 12
