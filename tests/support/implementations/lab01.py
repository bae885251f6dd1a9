"""Lab 1's learner code, used as data: scaled dot-product attention.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_scaled_dot_product_attention in attention_lab.checks). ``CHECK`` is the check; ``RIGHT``
lists implementations, ``WRONG`` ``(implementation, mistake key)``. test_checks_lab01.py and
test_checks.py run them through the check.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.checks import check_scaled_dot_product_attention

CHECK = check_scaled_dot_product_attention


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def with_einsum(query, key, value):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / query.shape[-1] ** 0.5
    weights = scores.softmax(-1)
    return torch.einsum("...qk,...kv->...qv", weights, value), weights


def softmax_by_hand(query, key, value):
    scores = query @ key.mT * (1.0 / math.sqrt(key.size(-1)))
    scores = scores - scores.max(dim=-1, keepdim=True).values
    exp = scores.exp()
    weights = exp / exp.sum(-1, keepdim=True)
    return torch.matmul(weights, value), weights


def both_scaled_by_fourth_root(query, key, value):
    root = query.shape[-1] ** 0.25
    weights = F.softmax((query / root) @ (key / root).transpose(-1, -2), dim=-1)
    return weights @ value, weights


def flattened_batch(query, key, value):
    lead = query.shape[:-2]
    q = query.reshape(-1, *query.shape[-2:])  # [N, Tq, Dk]
    k = key.reshape(-1, *key.shape[-2:])
    v = value.reshape(-1, *value.shape[-2:])
    weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1]), dim=2)
    output = torch.bmm(weights, v)
    return output.reshape(*lead, *output.shape[-2:]), weights.reshape(*lead, *weights.shape[-2:])


RIGHT = [with_einsum, softmax_by_hand, both_scaled_by_fourth_root, flattened_batch]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def scaled_by_value_width(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(value.shape[-1]), dim=-1)
    return weights @ value, weights


def scaled_by_query_length(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-2]), dim=-1)
    return weights @ value, weights


def scaled_by_key_length(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / key.size(-2) ** 0.5, dim=-1)
    return weights @ value, weights


def both_scaled_by_sqrt_dk(query, key, value):
    root = math.sqrt(query.shape[-1])
    weights = torch.softmax((query / root) @ (key / root).transpose(-2, -1), dim=-1)
    return weights @ value, weights


def keys_values_swapped(query, key, value):
    weights = torch.softmax(query @ value.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1)
    return weights @ key, weights


def fixed_transpose(query, key, value):
    scores = query @ key.transpose(1, 2) / math.sqrt(query.shape[-1])
    weights = scores.softmax(dim=-1)
    return weights @ value, weights


def first_axes_transposed(query, key, value):
    """Right for [T, D] inputs only: transpose(0, 1) swaps the batch and the positions."""
    scores = query @ key.transpose(0, 1) / math.sqrt(query.shape[-1])
    weights = scores.softmax(dim=-1)
    return weights @ value, weights


def fixed_softmax_axis(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = scores.softmax(dim=2)
    return weights @ value, weights


def log_softmax(query, key, value):
    weights = F.log_softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def sum_without_keepdim(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = exp / exp.sum(dim=-1)
    return weights @ value, weights


def transposed_weights_in_output(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights.transpose(-2, -1) @ value, weights


def returns_scores(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(scores, dim=-1) @ value, scores


def query_times_key_untransposed(query, key, value):
    weights = torch.softmax(query @ key / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def keys_times_queries(query, key, value):
    weights = torch.softmax(key @ query.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def width_from_the_keys_length(query, key, value):
    d_k = key.shape[-2]  # the keys' length, not their width
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    return weights @ value, weights


def output_shaped_like_the_query(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    output = torch.empty_like(query)  # [..., Tq, Dk]: the output is [..., Tq, Dv]
    output[...] = weights @ value
    return output, weights


def divided_by_d_v_squared(query, key, value):
    # Not in the catalogue: divides by d_v, which no probe's d_k or T equals on every probe.
    weights = torch.softmax(query @ key.transpose(-2, -1) / value.shape[-1] ** 2, dim=-1)
    return weights @ value, weights


def weights_returned_transposed(query, key, value):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights.transpose(-2, -1)


def softmax_over_the_whole_tensor(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exp = torch.exp(scores - scores.max())
    weights = exp / exp.sum()
    return weights @ value, weights


def softmax_over_each_matrix(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exp = torch.exp(scores - scores.amax(dim=(-2, -1), keepdim=True))
    weights = exp / exp.sum(dim=(-2, -1), keepdim=True)
    return weights @ value, weights


def softmax_minus_the_global_maximum(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exp = torch.exp(scores - scores.max())
    weights = exp / exp.sum(dim=-1, keepdim=True)
    return weights @ value, weights


def square_root_without_parentheses(query, key, value):
    d_k = query.shape[-1]
    weights = torch.softmax(query @ key.transpose(-2, -1) / d_k**1 / 2, dim=-1)
    return weights @ value, weights


def softmax_maximum_without_keepdim(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exp = torch.exp(scores - scores.max(dim=-1).values)
    weights = exp / exp.sum(dim=-1, keepdim=True)
    return weights @ value, weights


def output_from_the_scores(query, key, value):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return scores @ value, torch.softmax(scores, dim=-1)


WRONG = [
    (softmax_maximum_without_keepdim, "softmax_max_without_keepdim"),
    (output_from_the_scores, "output_from_scores"),
    (square_root_without_parentheses, "sqrt_as_half_power"),
    (weights_returned_transposed, "weights_returned_transposed"),
    (softmax_over_the_whole_tensor, "softmax_over_everything"),
    (softmax_over_each_matrix, "softmax_over_everything"),
    (softmax_minus_the_global_maximum, "softmax_global_max"),
    (scaled_by_value_width, "scaled_by_value_width"),
    (scaled_by_query_length, "scaled_by_sequence_length"),
    (scaled_by_key_length, "scaled_by_sequence_length"),
    (width_from_the_keys_length, "scaled_by_sequence_length"),
    (both_scaled_by_sqrt_dk, "scaled_by_d_k"),
    (keys_values_swapped, "keys_values_swapped"),
    (fixed_transpose, "fixed_axes"),
    (first_axes_transposed, "fixed_axes"),
    (fixed_softmax_axis, "fixed_axes"),
    (log_softmax, "log_softmax"),
    (sum_without_keepdim, "softmax_sum_without_keepdim"),
    (transposed_weights_in_output, "output_uses_transposed_weights"),
    (returns_scores, "returned_scores"),
    (query_times_key_untransposed, "scores_transposed"),
    (keys_times_queries, "scores_transposed"),
    (output_shaped_like_the_query, "sizes_mixed_up"),
]
