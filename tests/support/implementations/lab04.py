"""Lab 4's learner code, used as data: masked attention.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each (check_masked_attention
in attention_lab.checks). ``CHECK`` is the check; ``RIGHT`` lists implementations, ``WRONG``
``(implementation, mistake key)``. test_checks_lab04.py and test_checks.py run them through the
check.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.checks import check_masked_attention

CHECK = check_masked_attention


def scores_of(query, key):
    return query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def minus_inf_then_nan_to_num(query, key, value, mask):
    weights = torch.softmax(scores_of(query, key).masked_fill(~mask, float("-inf")), dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    return weights @ value, weights


def where_and_zero_rows(query, key, value, mask):
    scores = torch.where(mask, scores_of(query, key), torch.finfo(query.dtype).min)
    weights = F.softmax(scores, dim=-1)
    weights = weights * mask.any(dim=-1, keepdim=True)  # fully masked rows: 0
    return weights @ value, weights


def exp_times_mask_guarded(query, key, value, mask):
    scores = scores_of(query, key).float()
    exp = torch.exp(scores - scores.amax(-1, keepdim=True)) * mask
    total = exp.sum(-1, keepdim=True)
    weights = (exp / total.clamp_min(1e-30)).to(query.dtype)
    return weights @ value, weights


def additive_bias_in_float32(query, key, value, mask):
    bias = torch.zeros(mask.shape, dtype=torch.float32).masked_fill(~mask, -1e30)
    weights = torch.softmax(scores_of(query, key).float() + bias, dim=-1)
    weights = weights.masked_fill(~mask, 0).to(query.dtype)
    return weights @ value, weights


RIGHT = [
    minus_inf_then_nan_to_num,
    where_and_zero_rows,
    exp_times_mask_guarded,
    additive_bias_in_float32,
]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def multiplied_and_renormalised(query, key, value, mask):
    weights = torch.softmax(scores_of(query, key), dim=-1) * mask
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ value, weights


def mask_read_transposed(query, key, value, mask):
    scores = scores_of(query, key).masked_fill(~mask.transpose(-2, -1), -1e9)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask.transpose(-2, -1), 0)
    return weights @ value, weights


def mask_read_transposed_with_minus_inf(query, key, value, mask):
    scores = scores_of(query, key).masked_fill(mask.mT == 0, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    return weights @ value, weights


def filled_with_zero(query, key, value, mask):
    weights = torch.softmax(scores_of(query, key).masked_fill(~mask, 0.0), dim=-1)
    return weights @ value, weights


def filled_with_zero_empty_rows_zeroed(query, key, value, mask):
    """Blocked scores set to 0; only the rows whose keys are all blocked repaired after."""
    weights = torch.softmax(scores_of(query, key).masked_fill(~mask, 0.0), dim=-1)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


def mask_added(query, key, value, mask):
    weights = torch.softmax(scores_of(query, key) + mask, dim=-1)
    return weights @ value, weights


def additive_mask_inverted(query, key, value, mask):
    weights = torch.softmax(scores_of(query, key) + mask.float() * -1e9, dim=-1)
    return weights @ value, weights


def mask_unsqueezed(query, key, value, mask):
    mask = mask.unsqueeze(1)  # as if it were [B, T, T]
    scores = scores_of(query, key).masked_fill(~mask, torch.finfo(query.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0)
    return weights @ value, weights


def masked_with_value_width(query, key, value, mask):
    scores = query @ key.transpose(-2, -1) / math.sqrt(value.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ value, weights


def masked_log_softmax(query, key, value, mask):
    scores = scores_of(query, key).masked_fill(~mask, torch.finfo(query.dtype).min)
    weights = torch.log_softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ value, weights


def masked_keys_values_swapped(query, key, value, mask):
    scores = query @ value.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ key, weights


def masked_right(query, key, value, mask, divisor):
    scores = query @ key.transpose(-2, -1) / divisor
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores, torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


def masked_by_key_length(query, key, value, mask):
    _, weights = masked_right(query, key, value, mask, math.sqrt(key.shape[-2]))
    return weights @ value, weights


def masked_returns_scores(query, key, value, mask):
    scores, weights = masked_right(query, key, value, mask, math.sqrt(query.shape[-1]))
    return weights @ value, scores


def masked_weights_transposed(query, key, value, mask):
    _, weights = masked_right(query, key, value, mask, math.sqrt(query.shape[-1]))
    return weights.transpose(-2, -1) @ value, weights


def output_then_zeroed_weights(query, key, value, mask):
    scores = query @ key.mT / math.sqrt(query.shape[-1])
    weights = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
    output = weights @ value
    return output, weights.masked_fill(~mask, 0.0)


def zeroed_with_the_mask_itself(query, key, value, mask):
    scores = query @ key.mT / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores.masked_fill(mask == 0, -1e4), dim=-1)
    weights = weights.masked_fill(mask, 0.0)
    return weights @ value, weights


WRONG = [
    (output_then_zeroed_weights, "output_before_zeroing"),
    (zeroed_with_the_mask_itself, "zeroed_where_allowed"),
    (masked_by_key_length, "scaled_by_sequence_length"),
    (masked_returns_scores, "returned_scores"),
    (masked_weights_transposed, "output_uses_transposed_weights"),
    (multiplied_and_renormalised, "nan_fully_masked"),
    (mask_read_transposed, "mask_transposed"),
    (mask_read_transposed_with_minus_inf, "mask_transposed"),
    (filled_with_zero, "scores_times_mask"),
    (filled_with_zero_empty_rows_zeroed, "scores_times_mask"),
    (mask_added, "mask_added"),
    (additive_mask_inverted, "mask_polarity"),
    (mask_unsqueezed, "mask_reshaped"),
    (masked_with_value_width, "scaled_by_value_width"),
    (masked_log_softmax, "log_softmax"),
    (masked_keys_values_swapped, "keys_values_swapped"),
]
