"""Lab 9's learner code, used as data: grouped-query attention.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_grouped_query_attention in attention_lab.checks). ``CHECK`` is the check; ``RIGHT`` lists
implementations, ``WRONG`` ``(implementation, mistake key)``. test_checks_lab09.py and
test_checks.py run them through the check.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks import check_grouped_query_attention

CHECK = check_grouped_query_attention


def attend(query, key, value, dim=-1, divisor=None):
    """Attention on heads already matched, as the learner writes it after expanding."""
    divisor = math.sqrt(query.shape[-1]) if divisor is None else divisor
    weights = torch.softmax(query @ key.transpose(-2, -1) / divisor, dim=dim)
    return weights @ value, weights


def expanded(query, key, value):
    group = query.shape[1] // key.shape[1]
    return key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def with_repeat_interleave(query, key, value):
    return attend(query, *expanded(query, key, value))


def with_an_einsum_over_groups(query, key, value):
    batch, heads, query_len, head_dim = query.shape
    kv_heads = key.shape[1]
    grouped = query.view(batch, kv_heads, heads // kv_heads, query_len, head_dim)
    scores = torch.einsum("bjgqd,bjkd->bjgqk", grouped, key) / head_dim**0.5
    weights = scores.softmax(dim=-1)
    output = torch.einsum("bjgqk,bjkd->bjgqd", weights, value)
    return output.reshape(query.shape), weights.reshape(batch, heads, query_len, -1)


def with_a_loop_over_query_heads(query, key, value):
    heads, kv_heads = query.shape[1], key.shape[1]
    outputs, weights = [], []
    for h in range(heads):
        j = h * kv_heads // heads
        w = F.softmax(query[:, h] @ key[:, j].mT * query.shape[-1] ** -0.5, dim=-1)
        outputs.append(w @ value[:, j])
        weights.append(w)
    return torch.stack(outputs, dim=1), torch.stack(weights, dim=1)


def with_repeat_kv_as_transformers(query, key, value):
    batch, kv_heads, key_len, head_dim = key.shape
    group = query.shape[1] // kv_heads

    def repeat_kv(x):
        x = x[:, :, None].expand(batch, kv_heads, group, key_len, head_dim)
        return x.reshape(batch, kv_heads * group, key_len, head_dim)

    k, v = repeat_kv(key), repeat_kv(value)
    output = F.scaled_dot_product_attention(query, k, v)
    _, weights = attend(query, k, v)
    return output, weights


RIGHT = [
    with_repeat_interleave,
    with_an_einsum_over_groups,
    with_a_loop_over_query_heads,
    with_repeat_kv_as_transformers,
]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def with_repeat(query, key, value):
    group = query.shape[1] // key.shape[1]
    return attend(query, key.repeat(1, group, 1, 1), value.repeat(1, group, 1, 1))


def expanded_in_the_wrong_order(query, key, value):
    batch, heads, _, head_dim = query.shape
    group = heads // key.shape[1]

    def expand(x):  # [B, group, Hkv, Tk, Dh]: the groups' copies first
        return x[:, None].expand(batch, group, *x.shape[1:]).reshape(batch, heads, -1, head_dim)

    return attend(query, expand(key), expand(value))


def repeated_by_kv_heads(query, key, value):
    kv_heads = key.shape[1]
    return attend(
        query, key.repeat_interleave(kv_heads, dim=1), value.repeat_interleave(kv_heads, dim=1)
    )


def not_expanded(query, key, value):
    return attend(query, key, value)  # broadcasting only works for Hkv = 1


def loop_with_h_over_kv_heads(query, key, value):
    kv_heads = key.shape[1]
    outputs, weights = [], []
    for h in range(query.shape[1]):
        o, w = attend(query[:, h], key[:, h // kv_heads], value[:, h // kv_heads])
        outputs.append(o)
        weights.append(w)
    return torch.stack(outputs, dim=1), torch.stack(weights, dim=1)


def repeated_along_positions(query, key, value):
    group = query.shape[1] // key.shape[1]
    return attend(query, key.repeat_interleave(group, dim=2), value.repeat_interleave(group, dim=2))


def repeated_along_batch(query, key, value):
    group = query.shape[1] // key.shape[1]
    return attend(query, key.repeat_interleave(group, dim=0), value.repeat_interleave(group, dim=0))


def with_a_causal_mask(query, key, value):
    k, v = expanded(query, key, value)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    query_len, key_len = scores.shape[-2:]
    future = torch.ones(query_len, key_len, dtype=torch.bool).triu(key_len - query_len + 1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ v, weights


def with_is_causal(query, key, value):
    k, v = expanded(query, key, value)
    output = F.scaled_dot_product_attention(query, k, v, is_causal=True)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)  # top-left, as is_causal
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return output, weights


def group_queries_averaged(query, key, value):
    batch, heads, query_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    shared = query.view(batch, kv_heads, group, query_len, head_dim).mean(dim=2)
    output, weights = attend(shared, key, value)
    return output.repeat_interleave(group, dim=1), weights.repeat_interleave(group, dim=1)


def group_queries_averaged_and_kept(query, key, value):
    batch, heads, query_len, head_dim = query.shape
    kv_heads = key.shape[1]
    shared = query.view(batch, kv_heads, heads // kv_heads, query_len, head_dim).mean(dim=2)
    return attend(shared, key, value)


def one_query_per_group(query, key, value):
    group = query.shape[1] // key.shape[1]
    return attend(query[:, ::group], key, value)


def key_value_heads_averaged(query, key, value):
    return attend(query, key.mean(dim=1, keepdim=True), value.mean(dim=1, keepdim=True))


def group_axis_kept(query, key, value):
    batch, heads, query_len, head_dim = query.shape
    kv_heads = key.shape[1]
    grouped = query.view(batch, kv_heads, heads // kv_heads, query_len, head_dim)
    return attend(grouped, key[:, :, None], value[:, :, None])


def heads_merged(query, key, value):
    output, weights = with_repeat_interleave(query, key, value)
    batch, heads, query_len, head_dim = output.shape
    return output.transpose(1, 2).reshape(batch, query_len, heads * head_dim), weights


def scaled_by_every_heads_width(query, key, value):
    divisor = math.sqrt(query.shape[1] * query.shape[-1])
    return attend(query, *expanded(query, key, value), divisor=divisor)


def scaled_by_cache_width(query, key, value):
    divisor = math.sqrt(key.shape[1] * key.shape[-1])
    return attend(query, *expanded(query, key, value), divisor=divisor)


def scaled_by_size_1(query, key, value):
    return attend(query, *expanded(query, key, value), divisor=math.sqrt(query.size(1)))


def not_scaled(query, key, value):
    return attend(query, *expanded(query, key, value), divisor=1.0)


def scaled_by_head_width(query, key, value):
    return attend(query, *expanded(query, key, value), divisor=query.shape[-1])


def softmax_over_queries(query, key, value):
    return attend(query, *expanded(query, key, value), dim=-2)


def keys_and_values_swapped(query, key, value):
    k, v = expanded(query, key, value)
    return attend(query, v, k)


def keys_times_queries(query, key, value):
    k, v = expanded(query, key, value)
    weights = torch.softmax(k @ query.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights.transpose(-2, -1) @ v, weights


def scaled_after_the_softmax(query, key, value):
    k, v = expanded(query, key, value)
    weights = torch.softmax(query @ k.transpose(-2, -1), dim=-1) / math.sqrt(query.shape[-1])
    return weights @ v, weights


def group_by_true_division(query, key, value):
    group = query.shape[1] / key.shape[1]
    return attend(query, key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1))


def expanded_to_all_heads(query, key, value):
    batch, heads, _, head_dim = query.shape
    return attend(
        query, key.expand(batch, heads, -1, head_dim), value.expand(batch, heads, -1, head_dim)
    )


def values_tiled(query, key, value):
    """The keys repeat_interleave'd, the values tiled with repeat: two groupings."""
    group = query.shape[1] // key.shape[1]
    return attend(query, key.repeat_interleave(group, dim=1), value.repeat(1, group, 1, 1))


def not_expanded_into_the_library(query, key, value):
    """No expansion: the library's attention refuses key heads that do not broadcast."""
    return scaled_dot_product_attention(query, key, value)


WRONG = [
    (values_tiled, "keys_values_grouped_apart"),
    (not_expanded_into_the_library, "kv_heads_wrong_count"),
    (with_repeat, "kv_heads_repeated_round_robin"),
    (expanded_in_the_wrong_order, "kv_heads_repeated_round_robin"),
    (repeated_by_kv_heads, "kv_heads_wrong_count"),
    (not_expanded, "kv_heads_wrong_count"),
    (loop_with_h_over_kv_heads, "group_index_by_kv_heads"),
    (repeated_along_positions, "repeated_along_wrong_axis"),
    (repeated_along_batch, "repeated_along_wrong_axis"),
    (with_a_causal_mask, "causal_mask_applied"),
    (with_is_causal, "causal_mask_applied"),
    (group_queries_averaged, "query_groups_averaged"),
    (group_queries_averaged_and_kept, "query_heads_reduced"),
    (one_query_per_group, "query_heads_reduced"),
    (key_value_heads_averaged, "kv_heads_averaged"),
    (group_axis_kept, "group_axis_not_merged"),
    (heads_merged, "heads_merged"),
    (group_by_true_division, "group_not_int"),
    (expanded_to_all_heads, "expand_cannot_repeat"),
    (scaled_by_every_heads_width, "scaled_by_all_heads_width"),
    (scaled_by_cache_width, "scaled_by_all_heads_width"),
    (scaled_by_size_1, "scaled_by_head_count"),
    (not_scaled, "no_scaling"),
    (scaled_by_head_width, "scaled_by_d_k"),
    (softmax_over_queries, "softmax_axis"),
    (keys_and_values_swapped, "keys_values_swapped"),
    (keys_times_queries, "scores_transposed"),
    (scaled_after_the_softmax, "scaled_after_softmax"),
]
