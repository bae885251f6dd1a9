"""Lab 2's check: right implementations written in other ways pass; each mistake of its
catalogue, written the way a learner writes it, is named; an unknown one is located."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks import check_multi_head_attention
from support.messages import flat

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


def test_one_wrong_head_is_located():
    def last_head_unscaled(query, key, value, num_heads):
        q, k, v = (right_split(x, num_heads) for x in (query, key, value))
        out, weights = attend(q, k, v)
        if num_heads > 1:
            last_out, last_w = attend(q[:, -1:], k[:, -1:], v[:, -1:], divisor=1.0)
            out = torch.cat([out[:, :-1], last_out], dim=1)
            weights = torch.cat([weights[:, :-1], last_w], dim=1)
        return right_merge(out), weights

    with pytest.raises(AssertionError) as info:
        check_multi_head_attention(last_head_unscaled)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: the weights of head 2 differ (the others are right)" in message


def test_a_wrong_merge_is_located_by_head():
    def last_two_heads_exchanged(query, key, value, num_heads):
        q, k, v = (right_split(x, num_heads) for x in (query, key, value))
        out, weights = attend(q, k, v)
        order = list(range(num_heads))
        order[-2:] = order[-2:][::-1] if num_heads > 1 else order[-2:]
        return right_merge(out[:, order]), weights

    with pytest.raises(AssertionError) as info:
        check_multi_head_attention(last_two_heads_exchanged)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "the output differs in the features of head 1 and 2" in message
