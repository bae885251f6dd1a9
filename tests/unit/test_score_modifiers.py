"""ScoreModifiers: a cap, a bias and sink logits, checked, and applied by the attention function
in the order of Gemma 2 and GPT-OSS (against the computation written out)."""

import math

import pytest
import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask
from attention_lab.score_modifiers import ScoreModifiers
from support.tensors import random_inputs


def reference_weights(query, key, mask, *, softcap=None, bias=None, sinks=None):
    """The weights written out: cap, bias, mask, softmax with one extra (sink) column."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~mask, -torch.inf)
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    column = sinks[:, None, None].expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


@pytest.mark.parametrize("which", ["softcap", "bias", "sinks", "all"], ids=lambda which: which)
def test_modifiers_are_applied_in_the_order_of_gemma_2_and_gpt_oss(which):
    query, key, value = random_inputs([[2, 3, 5, 4], [2, 3, 6, 4], [2, 3, 6, 4]], torch.float64)
    query = 4 * query  # scores large enough for the cap to matter
    mask = causal_mask(6)[1:]  # [Tq, Tk] = [5, 6], queries at the last positions
    bias = torch.randn(3, 5, 6, dtype=torch.float64)
    sinks = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    chosen = {
        "softcap": 2.0 if which in ("softcap", "all") else None,
        "bias": bias if which in ("bias", "all") else None,
        "sinks": sinks if which in ("sinks", "all") else None,
    }
    modifiers = ScoreModifiers(
        softcap=chosen["softcap"], bias=chosen["bias"], sink_logits=chosen["sinks"]
    )
    output, weights = scaled_dot_product_attention(query, key, value, mask, modifiers=modifiers)
    expected = reference_weights(query, key, mask, **chosen)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(output, expected @ value)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: ScoreModifiers(softcap=0.0), ValueError, "softcap"),
        (lambda: ScoreModifiers(bias=[1.0]), TypeError, "bias must be a floating"),
        (lambda: ScoreModifiers(bias=torch.ones(2, dtype=torch.long)), TypeError, "bias"),
        (lambda: ScoreModifiers(sink_logits=torch.ones(2, 2)), ValueError, r"shape \[H\]"),
        (lambda: ScoreModifiers(sink_logits=1.0), TypeError, "sink_logits"),
    ],
)
def test_modifiers_check_their_values(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_modifiers_must_fit_the_scores():
    query, key, value = random_inputs([[1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 4]])
    with pytest.raises(ValueError, match=r"bias of shape \[3, 3\] does not broadcast"):
        scaled_dot_product_attention(
            query, key, value, modifiers=ScoreModifiers(bias=torch.zeros(3, 3))
        )
    with pytest.raises(ValueError, match="one logit per head"):
        scaled_dot_product_attention(
            query, key, value, modifiers=ScoreModifiers(sink_logits=torch.zeros(3))
        )
    with pytest.raises(TypeError, match="modifiers must be None or a ScoreModifiers"):
        scaled_dot_product_attention(query, key, value, modifiers={"softcap": 1.0})
