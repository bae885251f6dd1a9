"""Lab 7's learner code, used as data: the online softmax loop.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each (check_online_softmax in
attention_lab.checks). ``check`` is the check; ``RIGHT`` lists implementations, ``WRONG``
``(check, implementation, mistake key)``. test_checks_lab07.py and test_checks.py run them
through the check.
"""

from __future__ import annotations

import math

import torch

from attention_lab import checks
from support.implementations import with_

check = checks.check_online_softmax


def online_attention(
    query,
    key,
    value,
    block_size,
    *,
    rescale_sum=True,
    rescale_acc=True,
    invert=False,
    divide=True,
    drop_last=False,
    maximum="running",
    start=-math.inf,
    scale=True,
    full_scores=False,
    exp_with="new_max",
    carry_max=True,
    rescale_after=False,
    loop_stop="end",
    slice_end="block",
    factor_on="sums",
    normalise_blocks=False,
    twice=None,
):
    d_k = query.shape[-1]
    divisor = {
        True: math.sqrt(d_k),
        False: 1.0,
        "d_k": d_k,
        "times": 1 / math.sqrt(d_k),
        "d_v": math.sqrt(value.shape[-1]),
        "keys": math.sqrt(key.shape[-2]),
    }
    q = query / divisor.get(scale, 1.0)
    if full_scores:
        every_score = q @ key.transpose(-2, -1)
    row_max = torch.full((*q.shape[:-1], 1), start, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    key_len = key.shape[-2]
    stop = key_len // block_size * block_size if drop_last else key_len
    if loop_stop == "one_block_early":
        stop = key_len - block_size
    for begin in range(0, stop, block_size):
        end = begin + block_size - (1 if slice_end == "minus_one" else 0)
        if full_scores:
            scores = every_score[..., begin:end]
        else:
            scores = q @ key[..., begin:end, :].transpose(-2, -1)
        if scale == "block":
            scores = scores / math.sqrt(scores.shape[-1])
        if maximum == "none":
            new_max = torch.zeros_like(row_max)
        elif maximum == "block":
            new_max = scores.amax(dim=-1, keepdim=True)
        elif maximum == "over_queries":
            new_max = torch.maximum(row_max, scores.amax(dim=-2, keepdim=True))
        elif maximum == "global":
            new_max = torch.maximum(row_max, scores.max())
        else:
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        block_max = scores.amax(dim=-1, keepdim=True)
        rescale = torch.exp(new_max - row_max) if invert else torch.exp(row_max - new_max)
        if factor_on == "block_max":
            rescale = torch.exp(row_max - block_max)
        exp_from = {"old_max": row_max, "block_max": block_max}.get(exp_with, new_max)
        p = torch.exp(scores - exp_from)
        if factor_on == "new_block":
            p, rescale = p * rescale, 1.0
        if normalise_blocks:
            p = p / p.sum(dim=-1, keepdim=True)
        if twice == "acc":
            acc = acc * rescale  # and once more below
        if twice == "sum":
            row_sum = row_sum * rescale
        if rescale_after:
            row_sum = (row_sum + p.sum(dim=-1, keepdim=True)) * rescale
            acc = (acc + p @ value[..., begin:end, :]) * rescale
        else:
            row_sum = (row_sum * rescale if rescale_sum else row_sum) + p.sum(-1, keepdim=True)
            acc = (acc * rescale if rescale_acc else acc) + p @ value[..., begin:end, :]
        if carry_max:
            row_max = new_max
    return acc / row_sum if divide else acc


def online_in_float64(query, key, value, block_size):
    return online_attention(query.double(), key.double(), value.double(), block_size)


def online_attention_with_a_list_of_blocks(query, key, value, block_size):
    """Right: the blocks from split, the maximum started at the dtype's lowest value, the
    running quantities updated in place."""
    scale = query.shape[-1] ** -0.5
    m = torch.full(query.shape[:-1] + (1,), torch.finfo(query.dtype).min, dtype=query.dtype)
    l = torch.zeros_like(m)  # noqa: E741 - the paper's name
    o = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for k, v in zip(key.split(block_size, -2), value.split(block_size, -2), strict=True):
        s = torch.einsum("...qd,...kd->...qk", query, k) * scale
        m_new = torch.max(m, s.max(dim=-1, keepdim=True).values)
        alpha = (m - m_new).exp()
        p = (s - m_new).exp()
        l.mul_(alpha).add_(p.sum(-1, keepdim=True))
        o.mul_(alpha).add_(p @ v)
        m = m_new
    return o / l


def online_attention_normalised_as_it_goes(query, key, value, block_size):
    """Right: keeps the output normalised after every block (the FlashAttention-1 form)."""
    d_k = query.shape[-1]
    out = None
    for start in range(0, key.shape[-2], block_size):
        scores = query @ key[..., start : start + block_size, :].transpose(-1, -2) / d_k**0.5
        block_max = scores.amax(-1, keepdim=True)
        p = torch.exp(scores - block_max)
        block_sum = p.sum(-1, keepdim=True)
        block_out = (p @ value[..., start : start + block_size, :]) / block_sum
        if out is None:
            out, m, l = block_out, block_max, block_sum  # noqa: E741
            continue
        m_new = torch.maximum(m, block_max)
        old, new = l * torch.exp(m - m_new), block_sum * torch.exp(block_max - m_new)
        out = (out * old + block_out * new) / (old + new)
        m, l = m_new, old + new  # noqa: E741
    return out


def online_attention_without_keepdim(query, key, value, block_size):
    """Wrong: the block's maximum without keepdim=True, [..., Tq], beside row_max [..., Tq, 1]."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        scores = q @ key[..., start : start + block_size, :].mT
        new_max = torch.maximum(row_max, scores.amax(dim=-1))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start : start + block_size, :]
        row_max = new_max
    return acc / row_sum


def online_attention_with_acc_as_wide_as_the_query(query, key, value, block_size):
    """Wrong: the weighted sum of values started as zeros_like(query), [..., Tq, Dk]."""
    q = query / math.sqrt(query.shape[-1])
    m = torch.full_like(q[..., :1], -math.inf)
    total = torch.zeros_like(m)
    acc = torch.zeros_like(q)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        total = alpha * total + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ value[..., start : start + block_size, :]
        m = m_new
    return acc / total


def online_attention_normalised_without_the_old_sum(query, key, value, block_size):
    """Wrong: the output kept normalised, but the old output not weighted by its sum."""
    q = query / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    total = torch.zeros_like(m)
    out = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        total = alpha * total + p.sum(-1, keepdim=True)
        out = (alpha * out + p @ value[..., start : start + block_size, :]) / total
        m = m_new
    return out


RIGHT = [
    online_attention,
    online_attention_with_a_list_of_blocks,
    online_attention_normalised_as_it_goes,
]
WRONG = [
    (check, online_attention_without_keepdim, "keepdim_missing"),
    (check, online_attention_with_acc_as_wide_as_the_query, "sizes_mixed_up"),
    (check, with_(online_attention, rescale_sum=False), "sum_not_rescaled"),
    (check, with_(online_attention, rescale_acc=False), "acc_not_rescaled"),
    (check, with_(online_attention, rescale_sum=False, rescale_acc=False), "nothing_rescaled"),
    (check, with_(online_attention, invert=True), "rescale_inverted"),
    (check, with_(online_attention, divide=False), "not_divided_by_sum"),
    (check, with_(online_attention, drop_last=True), "last_block_dropped"),
    (check, with_(online_attention, maximum="none"), "online_overflow"),
    (check, with_(online_attention, maximum="block"), "online_overflow"),
    (check, with_(online_attention, start=0.0), "max_started_at_zero"),
    (check, with_(online_attention, twice="acc"), "acc_rescaled_twice"),
    (check, with_(online_attention, twice="sum"), "sum_rescaled_twice"),
    (check, with_(online_attention, maximum="over_queries"), "block_max_over_queries"),
    (check, with_(online_attention, maximum="global"), "max_over_rows"),
    (check, online_attention_normalised_without_the_old_sum, "normalised_without_old_sum"),
    (check, with_(online_attention, full_scores=True), "full_score_matrix"),
    (check, with_(online_attention, scale=False), "no_scaling"),
    (check, online_in_float64, "wrong_dtype"),
    (check, with_(online_attention, exp_with="old_max"), "exp_with_old_max"),
    (check, with_(online_attention, exp_with="old_max", start=0.0), "exp_with_old_max"),
    (check, with_(online_attention, carry_max=False), "max_not_carried"),
    (check, with_(online_attention, rescale_after=True), "rescaled_after_adding"),
    (check, with_(online_attention, scale="d_k"), "scaled_by_d_k"),
    (check, with_(online_attention, scale="times"), "scale_multiplied"),
    (check, with_(online_attention, scale="d_v"), "scaled_by_value_width"),
    (check, with_(online_attention, scale="keys"), "scaled_by_sequence_length"),
    (check, with_(online_attention, scale="block"), "scaled_by_sequence_length"),
    (check, with_(online_attention, loop_stop="one_block_early"), "blocks_stop_early"),
    (check, with_(online_attention, slice_end="minus_one"), "block_slice_short"),
    (check, with_(online_attention, factor_on="new_block"), "new_block_rescaled"),
    (check, with_(online_attention, factor_on="block_max"), "rescale_with_block_max"),
    (check, with_(online_attention, exp_with="block_max"), "exp_with_block_max"),
    (check, with_(online_attention, normalise_blocks=True), "block_normalised"),
    (check, with_(online_attention, normalise_blocks=True, divide=False), "block_normalised"),
]
