"""Lab 2's learner code, used as data: multi-head attention.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_multi_head_attention in attention_lab.checks). ``CHECK`` is the check; ``RIGHT`` lists
implementations, ``WRONG`` ``(implementation, mistake key)``. test_checks_lab02.py and
test_checks.py run them through the check.
"""

from __future__ import annotations

import math

import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks import check_multi_head_attention

CHECK = check_multi_head_attention


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def with_einops_style_permute(query, key, value, num_heads):
    def split(x):
        b, t, d = x.shape
        return x.reshape(b, t, num_heads, d // num_heads).permute(0, 2, 1, 3)

    out, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    b, h, t, dh = out.shape
    return out.permute(0, 2, 1, 3).reshape(b, t, h * dh), weights


def head_by_head_loop(query, key, value, num_heads):
    head_dim = query.shape[-1] // num_heads
    outputs, weights = [], []
    for h in range(num_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        q, k, v = query[..., part], key[..., part], value[..., part]
        w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(head_dim), dim=-1)
        outputs.append(w @ v)
        weights.append(w)
    return torch.cat(outputs, dim=-1), torch.stack(weights, dim=1)


def with_chunk_and_einsum(query, key, value, num_heads):
    q = torch.stack(query.chunk(num_heads, dim=-1), dim=1)  # [B, H, Tq, Dh]
    k = torch.stack(key.chunk(num_heads, dim=-1), dim=1)
    v = torch.stack(value.chunk(num_heads, dim=-1), dim=1)
    weights = torch.einsum("bhqd,bhkd->bhqk", q, k).div(q.shape[-1] ** 0.5).softmax(-1)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
    return torch.cat(out.unbind(dim=1), dim=-1), weights


RIGHT = [with_einops_style_permute, head_by_head_loop, with_chunk_and_einsum]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def attend(q, k, v, divisor=None, dim=-1):
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    weights = torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=dim)
    return weights @ v, weights


def right_split(x, h):
    b, t, d = x.shape
    return x.view(b, t, h, d // h).transpose(1, 2)


def right_merge(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def interleaved_view(query, key, value, num_heads):
    def split(x):
        b, t, d = x.shape
        return x.view(b, t, d // num_heads, num_heads).permute(0, 3, 1, 2)

    out, weights = attend(split(query), split(key), split(value))
    return right_merge(out), weights


def interleaved_both_ways(query, key, value, num_heads):
    def split(x):
        b, t, d = x.shape
        return x.view(b, t, d // num_heads, num_heads).permute(0, 3, 1, 2)

    out, weights = attend(split(query), split(key), split(value))
    b, h, t, dh = out.shape
    return out.permute(0, 2, 3, 1).reshape(b, t, h * dh), weights


def summed_weights(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v)
    return right_merge(out), weights.sum(dim=1)


def first_head_weights(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v)
    return right_merge(out), weights[:, 0]


def keys_values_swapped(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, v, k)
    return right_merge(out), weights


def keys_times_queries(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    weights = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return right_merge(weights @ v), weights


def averaged_weights_for_every_head(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v)
    return right_merge(out), weights.mean(dim=1, keepdim=True).expand_as(weights)


def last_heads_weights_from_a_loop(query, key, value, num_heads):
    head_dim = query.shape[-1] // num_heads
    outputs = []
    for h in range(num_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        out, weights = attend(query[..., part], key[..., part], value[..., part])
        outputs.append(out)
    return torch.cat(outputs, dim=-1), weights  # the loop's last head only


def softmax_over_heads(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v, dim=1)
    return right_merge(out), weights


def softmax_over_batch(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v, dim=0)
    return right_merge(out), weights


def head_slices_start_at_h(query, key, value, num_heads):
    head_dim = query.shape[-1] // num_heads
    outputs, all_weights = [], []
    for h in range(num_heads):
        part = slice(h, h + head_dim)  # should be h * head_dim to (h + 1) * head_dim
        out, weights = attend(query[..., part], key[..., part], value[..., part])
        outputs.append(out)
        all_weights.append(weights)
    return torch.cat(outputs, dim=-1), torch.stack(all_weights, dim=1)


def scaled_by_number_of_heads(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v, divisor=math.sqrt(num_heads))
    return right_merge(out), weights


def keys_split_from_the_query(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, query, value))
    out, weights = attend(q, k, v)
    return right_merge(out), weights


def square_root_without_parentheses(query, key, value, num_heads):
    head_dim = query.shape[-1] // num_heads
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v, divisor=head_dim**1 / 2)
    return right_merge(out), weights


def heads_averaged(query, key, value, num_heads):
    q, k, v = (right_split(x, num_heads) for x in (query, key, value))
    out, weights = attend(q, k, v)
    return out.mean(dim=1), weights


def head_width_as_a_float(query, key, value, num_heads):
    def split(x):
        b, t, d = x.shape
        return x.view(b, t, num_heads, d / num_heads).transpose(1, 2)

    out, weights = attend(split(query), split(key), split(value))
    return right_merge(out), weights


WRONG = [
    (head_width_as_a_float, "head_dim_not_int"),
    (heads_averaged, "heads_averaged"),
    (square_root_without_parentheses, "sqrt_as_half_power"),
    (keys_split_from_the_query, "split_from_query"),
    (averaged_weights_for_every_head, "weights_averaged"),
    (last_heads_weights_from_a_loop, "weights_of_one_head"),
    (softmax_over_heads, "softmax_over_heads"),
    (softmax_over_batch, "softmax_over_batch"),
    (head_slices_start_at_h, "head_slices_overlap"),
    (scaled_by_number_of_heads, "scaled_by_head_count"),
    (interleaved_view, "heads_interleaved"),
    (interleaved_both_ways, "heads_interleaved"),
    (summed_weights, "weights_summed"),
    (first_head_weights, "weights_of_one_head"),
    (keys_values_swapped, "keys_values_swapped"),
    (keys_times_queries, "scores_transposed"),
]
