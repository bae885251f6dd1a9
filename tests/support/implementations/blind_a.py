# ruff: noqa: E741, B905 - learner code kept as written (`l` is the lab's running sum)
"""Learner implementations (set A) of the eleven labs of the attention course, written blind.

For every lab there are three correct implementations, written in different idioms, and a
handful of wrong ones, each carrying exactly one plausible mistake. ``LABS`` at the end of the
module registers them with the name of the check that will judge them.

Mistakes considered and excluded because no input the contract allows can tell them from a
right implementation:

- Lab 04: applying the mask *before* dividing by ``sqrt(Dk)`` when it fills with
  ``torch.finfo(dtype).min``: the filled scores stay so negative that their exponentials still
  underflow to exactly 0, so weights and output are unchanged.
- Lab 04: a softmax computed in half precision instead of float32 for ``float16`` inputs: the
  difference is of the order of half precision's own rounding, not a structural error that a
  tolerance-based comparison can distinguish reliably.
- Lab 05: calling ``layer.dropout1`` for both sub-layers (or ``dropout2`` for both): the two
  ``nn.Dropout`` modules have the same ``p`` and draw from the same generator in the same
  order, so the result is identical.
- Lab 06: dividing each sequence's masked sum by the padded length ``T`` instead of its number
  of real tokens, or not dividing at all (sum pooling), or dividing by the batch's total token
  count: every one of these scales a pooled vector by a positive number, which the
  normalisation to length 1 removes; the cosines and the ranking are unchanged.
- Lab 08: merging the heads with ``reshape(B, 1, D)`` without transposing ``[B, H, 1, Dh]``
  first: with one query position the two memory layouts coincide.
- Lab 11 (bias): lining the queries up top-left (query row ``r`` at position ``r`` instead of
  ``Tk - Tq + r``), or counting the key positions (or the query positions) from 1, or MPT's
  ``m (j - Tk + 1)`` and BLOOM's ``m j``: each differs from the right bias by a constant in
  every row, which the softmax ignores and the contract says the check accepts.
- Lab 11 (bias): a symmetric penalty ``-m |i - j|``: it equals ``m (j - i)`` on every key at or
  before the query, the only entries the contract compares.
- Lab 11 (slopes): slopes returned as ``float32`` rather than ``float64``: the contract fixes
  no dtype for the slopes, so this is not a mistake.

How this set was written (2026-12-03): by a writer who saw only each lab's contract (the set-up
cell, the task and its shapes table, the stub; ``## The task`` to ``## Check it`` of the page),
the library's non-check modules, and nothing of the checks, their tests, the pages' hints or
lists of mistakes, or the other sets. Its role: the *tuning* set of both rounds of changes to
the checks (``blind_sets_measured.md``).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask
from attention_lab.positional import alibi_slopes, sinusoidal_encoding

# ---------------------------------------------------------------------------------------------
# Lab 01: scaled dot-product attention
# ---------------------------------------------------------------------------------------------


def lab01_correct_matmul(query, key, value):
    """Correct: ``@`` and ``transpose``, divide by sqrt(Dk), ``torch.softmax`` over the keys."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # [..., Tq, Tk]
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def lab01_correct_einsum_manual_softmax(query, key, value):
    """Correct: ``einsum`` for both products and a hand-written, max-subtracted softmax."""
    d_k = query.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", query, key) / d_k**0.5
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exp = shifted.exp()
    weights = exp / exp.sum(dim=-1, keepdim=True)
    output = torch.einsum("...qk,...kv->...qv", weights, value)
    return output, weights


def lab01_correct_bmm_flatten(query, key, value):
    """Correct: broadcast the leading dims, flatten them into one batch, scale the queries
    first, ``torch.bmm``, and reshape back."""
    lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    tq, dk = query.shape[-2:]
    tk, dv = value.shape[-2:]
    q = (query / math.sqrt(dk)).expand(*lead, tq, dk).reshape(-1, tq, dk)
    k = key.expand(*lead, tk, dk).reshape(-1, tk, dk)
    v = value.expand(*lead, tk, dv).reshape(-1, tk, dv)
    weights = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=2)  # [N, Tq, Tk]
    output = torch.bmm(weights, v)  # [N, Tq, Dv]
    return output.reshape(*lead, tq, dv), weights.reshape(*lead, tq, tk)


def lab01_wrong_no_scaling(query, key, value):
    """Wrong: forgets to divide the scores by sqrt(Dk) (softmax of the raw dot products)."""
    scores = query @ key.transpose(-2, -1)
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def lab01_wrong_scale_by_dk(query, key, value):
    """Wrong: divides the scores by Dk instead of sqrt(Dk)."""
    scores = query @ key.transpose(-2, -1) / query.shape[-1]
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def lab01_wrong_softmax_over_queries(query, key, value):
    """Wrong: softmax over dim=-2 (the queries) instead of the keys; columns sum to 1."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-2)
    return weights @ value, weights


def lab01_wrong_scale_by_value_width(query, key, value):
    """Wrong: scales by sqrt of the value width Dv (value.shape[-1]) instead of Dk."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(value.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def lab01_wrong_transpose_first_axes(query, key, value):
    """Wrong: transposes the key with ``transpose(0, 1)``, right only for 2-D inputs; with
    leading batch dims it swaps the batch and time axes (a crash or mixed-up batches)."""
    scores = query @ key.transpose(0, 1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def lab01_wrong_returns_scores(query, key, value):
    """Wrong: returns the scaled scores (the logits before the softmax) as the weights."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, scores


def lab01_wrong_float32_result(query, key, value):
    """Wrong: casts the inputs to float32 (``.float()``) and never casts back, so a float64
    query gets float32 results."""
    q, k, v = query.float(), key.float(), value.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def lab01_wrong_weights_transposed_in_output(query, key, value):
    """Wrong: multiplies the values by the transposed weights (``weights.mT @ value``): a
    crash when Tq != Tk, mixed-up rows when they are equal."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights.transpose(-2, -1) @ value, weights


# ---------------------------------------------------------------------------------------------
# Lab 02: multi-head attention (split, attend, merge)
# ---------------------------------------------------------------------------------------------


def lab02_correct_view_transpose(query, key, value, num_heads):
    """Correct: reshape to [B, T, H, Dh], transpose to [B, H, T, Dh], the library's attention,
    transpose back and reshape to [B, Tq, D]."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def lab02_correct_unflatten_einsum(query, key, value, num_heads):
    """Correct: ``unflatten`` + ``permute`` into heads, attention written with ``einsum``, and
    the merge done inside the second ``einsum`` (``bqhd``) followed by ``flatten``."""
    head_dim = query.shape[-1] // num_heads
    q = query.unflatten(-1, (num_heads, head_dim)).permute(0, 2, 1, 3)  # [B, H, Tq, Dh]
    k = key.unflatten(-1, (num_heads, head_dim)).permute(0, 2, 1, 3)
    v = value.unflatten(-1, (num_heads, head_dim)).permute(0, 2, 1, 3)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(head_dim)
    weights = scores.softmax(dim=-1)
    output = torch.einsum("bhqk,bhkd->bqhd", weights, v).flatten(2)  # [B, Tq, D]
    return output, weights


def lab02_correct_loop_over_heads(query, key, value, num_heads):
    """Correct: a Python loop over heads slicing features h*Dh:(h+1)*Dh, ``torch.cat`` of the
    outputs along the features, ``torch.stack`` of the weights along dim 1."""
    head_dim = query.shape[-1] // num_heads
    outputs, maps = [], []
    for h in range(num_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        out, w = scaled_dot_product_attention(query[..., cols], key[..., cols], value[..., cols])
        outputs.append(out)
        maps.append(w)
    return torch.cat(outputs, dim=-1), torch.stack(maps, dim=1)


def lab02_wrong_split_without_transpose(query, key, value, num_heads):
    """Wrong: splits with ``view(B, H, T, Dh)`` directly, so a "head" is a block of whole
    positions instead of a block of features."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, num_heads, x.shape[1], head_dim)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.transpose(1, 2).reshape(batch, q_len, width), weights


def lab02_wrong_interleaved_split(query, key, value, num_heads):
    """Wrong: splits as [B, T, Dh, H] (feature f goes to head f % H, interleaved) instead of
    [B, T, H, Dh] (head f // Dh)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], head_dim, num_heads).permute(0, 3, 1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.transpose(1, 2).reshape(batch, q_len, width), weights


def lab02_wrong_merge_without_transpose(query, key, value, num_heads):
    """Wrong: merges [B, H, Tq, Dh] straight into [B, Tq, D] with ``reshape`` (no transpose
    back), scrambling positions and heads."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.reshape(batch, q_len, width), weights


def lab02_wrong_merge_interleaved(query, key, value, num_heads):
    """Wrong: merges with ``permute(0, 2, 3, 1)`` so the features come out as [Dh, H]
    (interleaved heads) instead of head 0's features first."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.permute(0, 2, 3, 1).reshape(batch, q_len, width), weights


def lab02_wrong_scale_by_model_width(query, key, value, num_heads):
    """Wrong: attention written by hand, scaling the scores by sqrt(D) (the full width)
    instead of sqrt(Dh) (one head's width)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    q, k, v = split(query), split(key), split(value)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(width), dim=-1)
    output = (weights @ v).transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def lab02_wrong_weights_averaged(query, key, value, num_heads):
    """Wrong: returns the weights averaged over the heads, [B, Tq, Tk] (as
    ``nn.MultiheadAttention`` does by default), instead of one map per head."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.transpose(1, 2).reshape(batch, q_len, width), weights.mean(dim=1)


def lab02_wrong_key_split_with_query_length(query, key, value, num_heads):
    """Wrong: reuses the query's length Tq when splitting the keys and values, which crashes
    (or mis-splits) whenever Tk != Tq."""
    batch, seq_len, width = query.shape
    head_dim = width // num_heads
    q = query.reshape(batch, seq_len, num_heads, head_dim).transpose(1, 2)
    k = key.reshape(batch, seq_len, num_heads, head_dim).transpose(1, 2)
    v = value.reshape(batch, seq_len, num_heads, head_dim).transpose(1, 2)
    output, weights = scaled_dot_product_attention(q, k, v)
    return output.transpose(1, 2).reshape(batch, seq_len, width), weights


def lab02_wrong_view_after_transpose(query, key, value, num_heads):
    """Wrong: merges with ``.view`` right after ``transpose(1, 2)``; the transposed tensor is
    not contiguous, so ``view`` raises whenever H > 1 and Tq > 1."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.transpose(1, 2).view(batch, q_len, width), weights


# ---------------------------------------------------------------------------------------------
# Lab 03: sinusoidal positional encoding
# ---------------------------------------------------------------------------------------------


def lab03_correct_slices(max_len, d_model):
    """Correct: float64 angles pos / 10000**(2i/D) by broadcasting, sines into the even
    columns, the first D // 2 cosines into the odd ones, cast to float32."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [ceil(D/2)]
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.to(torch.float32)


def lab03_correct_exp_log_stack(max_len, d_model):
    """Correct: frequencies as exp(-2i ln(10000) / D), sine and cosine stacked on a new last
    axis and flattened (interleaving them), the extra cosine cut off for an odd D."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    angle = position * frequency  # [T, ceil(D/2)]
    pairs = torch.stack((angle.sin(), angle.cos()), dim=-1)  # [T, ceil(D/2), 2]
    return pairs.flatten(1)[:, :d_model].float()


def lab03_correct_where_parity(max_len, d_model):
    """Correct: one angle per column (pair index 2i = c - c % 2), then ``torch.where`` picks
    the sine for even columns and the cosine for odd ones."""
    column = torch.arange(d_model)
    two_i = (column - column % 2).to(torch.float64)
    inverse_wavelength = torch.pow(10000.0, -two_i / d_model)  # [D]
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * inverse_wavelength  # [T, D]
    encoding = torch.where(column % 2 == 0, torch.sin(angle), torch.cos(angle))
    return encoding.to(dtype=torch.float32)


def lab03_wrong_pair_index_exponent(max_len, d_model):
    """Wrong: uses the pair index i instead of 2i in the exponent, 10000**(i/D), so the
    frequencies fall off half as fast."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float64)
    angle = position / 10000.0 ** (i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


def lab03_wrong_per_column_exponent(max_len, d_model):
    """Wrong: gives every column its own exponent c/D, so the cosine in column 2i+1 uses the
    angle of exponent (2i+1)/D instead of sharing its sine's angle."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    column = torch.arange(d_model, dtype=torch.float64)
    angle = position / 10000.0 ** (column / d_model)  # [T, D]
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle[:, 0::2])
    encoding[:, 1::2] = torch.cos(angle[:, 1::2])
    return encoding.float()


def lab03_wrong_sin_cos_swapped(max_len, d_model):
    """Wrong: puts the cosines in the even columns and the sines in the odd ones."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.cos(angle)
    encoding[:, 1::2] = torch.sin(angle[:, : d_model // 2])
    return encoding.float()


def lab03_wrong_positions_from_one(max_len, d_model):
    """Wrong: counts positions from 1 (``arange(1, max_len + 1)``) instead of 0."""
    position = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


def lab03_wrong_odd_width_crash(max_len, d_model):
    """Wrong: assigns all ceil(D/2) cosines to the D // 2 odd columns, which crashes with a
    shape mismatch when D is odd."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)
    return encoding.float()


def lab03_wrong_float64_result(max_len, d_model):
    """Wrong: right values, but returns the float64 working tensor instead of float32."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding


def lab03_wrong_concatenated_halves(max_len, d_model):
    """Wrong: concatenates all sines and then all cosines ([sin | cos]) instead of
    interleaving them column pair by column pair."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.cat([torch.sin(angle), torch.cos(angle[:, : d_model // 2])], dim=1)
    return encoding.float()


def lab03_wrong_multiplies_by_wavelength(max_len, d_model):
    """Wrong: multiplies the position by 10000**(2i/D) instead of dividing by it."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position * 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


# ---------------------------------------------------------------------------------------------
# Lab 04: masked attention
# ---------------------------------------------------------------------------------------------


def lab04_correct_finfo_min(query, key, value, mask):
    """Correct: fill blocked scores with the dtype's most negative finite value, softmax in
    (at least) float32, then zero the rows whose keys are all blocked."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)
    weights = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(query.dtype)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


def lab04_correct_neg_inf_nan_to_num(query, key, value, mask):
    """Correct: ``torch.where`` with -inf for blocked keys, softmax in float32, and
    ``nan_to_num`` turning the NaN rows (all keys blocked) into 0."""
    work = torch.promote_types(query.dtype, torch.float32)
    scores = (query @ key.transpose(-2, -1)).to(work) / math.sqrt(query.shape[-1])
    scores = torch.where(mask, scores, torch.tensor(-math.inf, dtype=work))
    weights = torch.softmax(scores, dim=-1).nan_to_num(nan=0.0).to(query.dtype)
    return weights @ value, weights


def lab04_correct_manual_exp(query, key, value, mask):
    """Correct: a hand-written softmax in float32: exponentials times the 0/1 mask, divided by
    their row sum clamped away from 0, so an empty row gives 0 / tiny = 0."""
    work = torch.promote_types(query.dtype, torch.float32)
    q, k, v = query.to(work), key.to(work), value.to(work)
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~mask, torch.finfo(work).min)
    keep = mask.to(work)
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * keep
    weights = exp / exp.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(work).tiny)
    output = weights @ v
    return output.to(query.dtype), weights.to(query.dtype)


def lab04_wrong_inverted_polarity(query, key, value, mask):
    """Wrong: blocks the keys where the mask is True (``masked_fill(mask, ...)``), treating
    True as "blocked"."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    weights = weights.masked_fill(~(~mask).any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


def lab04_wrong_neg_inf_gives_nan(query, key, value, mask):
    """Wrong: fills blocked scores with -inf and stops there: a query whose keys are all
    blocked gets a softmax of 0/0 = NaN in its weights and output."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    return weights @ value, weights


def lab04_wrong_minus_1e9(query, key, value, mask):
    """Wrong: fills with the constant -1e9: an all-blocked row gets uniform weights instead of
    0, and in float16 the fill value overflows (a crash)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    return weights @ value, weights


def lab04_wrong_fill_zero(query, key, value, mask):
    """Wrong: sets the blocked scores to 0 (``masked_fill(~mask, 0)``), so blocked keys still
    get a positive weight."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


def lab04_wrong_mask_after_softmax(query, key, value, mask):
    """Wrong: softmax over all keys first, then multiplies the weights by the mask without
    renormalising, so the rows no longer sum to 1."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    weights = weights * mask
    return weights @ value, weights


def lab04_wrong_mask_transposed(query, key, value, mask):
    """Wrong: transposes the mask (``mask.transpose(-2, -1)``), reading its rows as keys and
    its columns as queries (a causal mask becomes anti-causal)."""
    mask = mask.transpose(-2, -1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


def lab04_wrong_empty_rows_zeroed_too_late(query, key, value, mask):
    """Wrong: computes the output before zeroing the all-blocked rows' weights, so such a row
    has weights 0 but an output equal to the plain mean of the values."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)
    output = weights @ value
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return output, weights


def lab04_wrong_float32_result(query, key, value, mask):
    """Wrong: upcasts to float32 for a stable softmax and forgets to cast back, so float16
    inputs get float32 results."""
    q, k, v = query.float(), key.float(), value.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)
    weights = torch.softmax(scores, dim=-1)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights


# ---------------------------------------------------------------------------------------------
# Lab 05: encoder layer wiring
# ---------------------------------------------------------------------------------------------


def lab05_correct_if_else(x, layer, mask=None):
    """Correct: the two arrangements written out in an if/else."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_correct_stage_loop(x, layer, mask=None):
    """Correct: a loop over two (norm, sub-layer, dropout) stages, with the arrangement chosen
    inside the loop; the first stage's weights are kept."""

    def attention(h):
        return layer.self_attn(h, mask=mask)

    def feed_forward(h):
        return layer.feed_forward(h), None

    stages = [
        (layer.norm1, attention, layer.dropout1),
        (layer.norm2, feed_forward, layer.dropout2),
    ]
    weights = None
    for norm, sublayer, dropout in stages:
        if layer.norm_first:
            out, w = sublayer(norm(x))
            x = x + dropout(out)
        else:
            out, w = sublayer(x)
            x = norm(x + dropout(out))
        if w is not None:
            weights = w
    return x, weights


def lab05_correct_residual_helper(x, layer, mask=None):
    """Correct: one helper ``residual(x, branch, norm, dropout)`` that wraps any branch in
    pre- or post-norm, used for both sub-layers (weights taken out through a list)."""
    kept = []

    def attention(h):
        out, w = layer.self_attn(h, mask=mask)
        kept.append(w)
        return out

    def residual(inp, branch, norm, dropout):
        if layer.norm_first:
            return torch.add(inp, dropout(branch(norm(inp))))
        return norm(torch.add(inp, dropout(branch(inp))))

    h = residual(x, attention, layer.norm1, layer.dropout1)
    h = residual(h, layer.feed_forward, layer.norm2, layer.dropout2)
    return h, kept[0]


def lab05_wrong_postnorm_norm_on_branch(x, layer, mask=None):
    """Wrong: in post-norm, normalises the sub-layer's output before adding it,
    x + norm(sublayer(x)), instead of normalising the sum."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = x + layer.norm1(layer.dropout1(attended))
        x = x + layer.norm2(layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_wrong_prenorm_residual_from_normed(x, layer, mask=None):
    """Wrong: in pre-norm, overwrites x with norm(x) and adds the sub-layer to that, so the
    residual path carries the normalised input instead of the untouched one."""
    if layer.norm_first:
        x = layer.norm1(x)
        attended, weights = layer.self_attn(x, mask=mask)
        x = x + layer.dropout1(attended)
        x = layer.norm2(x)
        x = x + layer.dropout2(layer.feed_forward(x))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_wrong_ignores_norm_first(x, layer, mask=None):
    """Wrong: always wires post-norm, ignoring ``layer.norm_first``."""
    attended, weights = layer.self_attn(x, mask=mask)
    x = layer.norm1(x + layer.dropout1(attended))
    x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_wrong_norms_swapped(x, layer, mask=None):
    """Wrong: uses norm2 around the attention and norm1 around the feed-forward network
    (visible once the two LayerNorms hold different parameters)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm2(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm1(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm2(x + layer.dropout1(attended))
        x = layer.norm1(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_wrong_mask_dropped(x, layer, mask=None):
    """Wrong: accepts ``mask`` but never passes it to the attention, so padding is attended."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x))
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def lab05_wrong_dropout_after_residual(x, layer, mask=None):
    """Wrong: applies each dropout to the residual sum instead of to the sub-layer's output
    before it is added (only shows in training mode)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = layer.dropout1(x + attended)
        x = layer.dropout2(x + layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(layer.dropout1(x + attended))
        x = layer.norm2(layer.dropout2(x + layer.feed_forward(x)))
    return x, weights


def lab05_wrong_weights_averaged(x, layer, mask=None):
    """Wrong: returns the attention weights averaged over the heads, [B, T, T], instead of
    the per-head [B, H, T, T]."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights.mean(dim=1)


def lab05_wrong_second_residual_from_input(x, layer, mask=None):
    """Wrong: in post-norm, the feed-forward block's residual adds the layer's original input
    instead of the attention block's result (the FFN itself gets the right input)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
        return x, weights
    attended, weights = layer.self_attn(x, mask=mask)
    h = layer.norm1(x + layer.dropout1(attended))
    out = layer.norm2(x + layer.dropout2(layer.feed_forward(h)))
    return out, weights


# ---------------------------------------------------------------------------------------------
# Lab 06: mean pooling and cosine search
# ---------------------------------------------------------------------------------------------


def lab06_correct_masked_sum(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: masked sum over tokens / real-token count (clamped at 1), ``F.normalize``, a
    matrix product and ``topk``; pooled in at least float32, scores cast back."""
    work = torch.promote_types(query_hidden.dtype, torch.float32)

    def pool(hidden, mask):
        m = mask.to(work).unsqueeze(-1)  # [B, T, 1]
        total = (hidden.to(work) * m).sum(dim=1)
        return total / m.sum(dim=1).clamp_min(1.0)

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1).indices


def lab06_correct_einsum_argsort(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: ``einsum`` pooling, norms from ``torch.linalg.vector_norm`` clamped away from
    0, ``einsum`` cosines, and a stable descending ``argsort`` cut to k."""
    work = torch.promote_types(query_hidden.dtype, torch.float32)

    def pool(hidden, mask):
        m = mask.to(work)
        mean = torch.einsum("btd,bt->bd", hidden.to(work), m) / m.sum(-1, keepdim=True).clamp(
            min=1e-9
        )
        norm = torch.linalg.vector_norm(mean, dim=-1, keepdim=True)
        return mean / norm.clamp(min=1e-12)

    scores = torch.einsum("qd,nd->qn", pool(query_hidden, query_mask), pool(doc_hidden, doc_mask))
    top = torch.argsort(scores, dim=-1, descending=True, stable=True)[:, :k]
    return scores.to(query_hidden.dtype), top


def lab06_correct_loop_cosine(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: a loop over sequences that keeps the real tokens by boolean indexing and
    averages them (zeros for an empty one), ``F.cosine_similarity`` by broadcasting, and
    ``torch.sort``."""
    work = torch.promote_types(query_hidden.dtype, torch.float32)

    def pool(hidden, mask):
        vectors = []
        for seq, keep in zip(hidden.to(work), mask.bool(), strict=True):
            real = seq[keep]
            vectors.append(real.mean(dim=0) if len(real) else seq.new_zeros(seq.shape[-1]))
        return torch.stack(vectors)

    q, d = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    scores = F.cosine_similarity(q[:, None, :], d[None, :, :], dim=-1)  # [Q, N]
    top = torch.sort(scores, dim=-1, descending=True).indices[:, :k]
    return scores.to(query_hidden.dtype), top


def _lab06_pool(hidden, mask):
    work = torch.promote_types(hidden.dtype, torch.float32)
    m = mask.to(work).unsqueeze(-1)
    return (hidden.to(work) * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)


def lab06_wrong_pools_padding(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: mean-pools over every position, padding included (``hidden.mean(dim=1)``)."""
    q = F.normalize(query_hidden.float().mean(dim=1), dim=-1)
    d = F.normalize(doc_hidden.float().mean(dim=1), dim=-1)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1).indices


def lab06_wrong_no_normalisation(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: skips the scaling to length 1, so the scores are dot products of the pooled
    vectors, not cosines (and longer vectors rank higher)."""
    q = _lab06_pool(query_hidden, query_mask)
    d = _lab06_pool(doc_hidden, doc_mask)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1).indices


def lab06_wrong_normalise_wrong_axis(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: normalises along dim 0 (across the sequences of the batch) instead of along
    each vector's features."""
    q = F.normalize(_lab06_pool(query_hidden, query_mask), dim=0)
    d = F.normalize(_lab06_pool(doc_hidden, doc_mask), dim=0)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1).indices


def lab06_wrong_worst_first(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: ranks in ascending order (``topk(largest=False)``), returning the k *least*
    similar documents."""
    q = F.normalize(_lab06_pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(_lab06_pool(doc_hidden, doc_mask), dim=-1)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1, largest=False).indices


def lab06_wrong_empty_sequence_nan(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: divides by the real-token count without clamping and normalises with
    ``v / v.norm()``, so an all-padding sequence becomes NaN instead of 0."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype).unsqueeze(-1)
        mean = (hidden * m).sum(dim=1) / m.sum(dim=1)
        return mean / mean.norm(dim=-1, keepdim=True)

    scores = pool(query_hidden, query_mask) @ pool(doc_hidden, doc_mask).T
    return scores, scores.topk(k, dim=-1).indices


def lab06_wrong_topk_over_queries(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: takes ``topk`` along dim 0 (the best queries for each document), giving [k, N]
    instead of [Q, k]."""
    q = F.normalize(_lab06_pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(_lab06_pool(doc_hidden, doc_mask), dim=-1)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=0).indices


def lab06_wrong_float_mask_dtype(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: turns the mask into weights with ``.float()``, which promotes half-precision
    hidden states, so float16 inputs get float32 scores."""

    def pool(hidden, mask):
        m = mask.unsqueeze(-1).float()
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def lab06_wrong_pairwise_cosine(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: ``F.cosine_similarity(q, d)`` without broadcasting compares query i with
    document i only: a crash when Q != N, a [Q] vector otherwise."""
    q = _lab06_pool(query_hidden, query_mask)
    d = _lab06_pool(doc_hidden, doc_mask)
    scores = F.cosine_similarity(q, d, dim=-1).to(query_hidden.dtype)
    return scores, scores.topk(k, dim=-1).indices


# ---------------------------------------------------------------------------------------------
# Lab 07: online softmax
# ---------------------------------------------------------------------------------------------


def lab07_correct_finfo_floor(query, key, value, block_size):
    """Correct: running max initialised to the most negative finite float, sums and acc to 0,
    one slice of keys per step, queries scaled once, accumulation in at least float32."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    key_len = key.shape[-2]
    lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    row_max = torch.full((*lead, query.shape[-2], 1), torch.finfo(work).min, dtype=work)
    row_sum = torch.zeros((*lead, query.shape[-2], 1), dtype=work)
    acc = torch.zeros((*lead, query.shape[-2], value.shape[-1]), dtype=work)
    for start in range(0, key_len, block_size):
        k_block = key[..., start : start + block_size, :].to(work)
        v_block = value[..., start : start + block_size, :].to(work)
        scores = q @ k_block.transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v_block
        row_max = new_max
    return (acc / row_sum).to(query.dtype)


def lab07_correct_split_einsum(query, key, value, block_size):
    """Correct: ``torch.split`` into blocks, -inf as the initial maximum, ``einsum`` scores
    scaled per block, in-place updates of the running quantities."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work)
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = l = acc = None
    for k_block, v_block in zip(
        torch.split(key.to(work), block_size, dim=-2),
        torch.split(value.to(work), block_size, dim=-2),
        strict=True,
    ):
        s = torch.einsum("...qd,...kd->...qk", q, k_block) * scale
        block_max = s.amax(dim=-1, keepdim=True)
        if m is None:
            m = torch.full_like(block_max, -math.inf)
            l = torch.zeros_like(block_max)
            acc = torch.zeros((*s.shape[:-1], v_block.shape[-1]), dtype=work)
        m_new = torch.maximum(m, block_max)
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + torch.einsum("...qk,...kv->...qv", p, v_block)
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_correct_first_block_init(query, key, value, block_size):
    """Correct: a while loop whose first block initialises m, l and acc directly (no sentinel
    value); later blocks rescale with exp(m - m_new); computes in float64."""
    dtype = query.dtype
    q, k, v = query.double(), key.double(), value.double()
    scale = q.shape[-1] ** 0.5
    start, key_len = 0, k.shape[-2]
    m = l = acc = None
    while start < key_len:
        stop = min(start + block_size, key_len)
        s = q @ k[..., start:stop, :].mT / scale
        vb = v[..., start:stop, :]
        if m is None:
            m = s.max(dim=-1, keepdim=True).values
            p = (s - m).exp()
            l, acc = p.sum(-1, keepdim=True), p @ vb
        else:
            m_new = torch.max(m, s.max(dim=-1, keepdim=True).values)
            p = (s - m_new).exp()
            factor = (m - m_new).exp()
            l = factor * l + p.sum(-1, keepdim=True)
            acc = factor * acc + p @ vb
            m = m_new
        start = stop
    return (acc / l).to(dtype)


def lab07_wrong_acc_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the running sum but not the accumulator when the maximum grows."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=work)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(-1, keepdim=True)
        acc = acc + p @ value[..., start : start + block_size, :].to(work)
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_wrong_sum_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the accumulator but not the running sum l when the maximum grows."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=work)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l + p.sum(-1, keepdim=True)
        acc = acc * torch.exp(m - m_new) + p @ value[..., start : start + block_size, :].to(work)
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_wrong_rescale_inverted(query, key, value, block_size):
    """Wrong: rescales by exp(m_new - m) instead of exp(m - m_new) (the factor upside down)."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), torch.finfo(work).min, dtype=work)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    first = True
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        factor = torch.ones_like(m) if first else torch.exp(m_new - m)
        p = torch.exp(s - m_new)
        l = l * factor + p.sum(-1, keepdim=True)
        acc = acc * factor + p @ value[..., start : start + block_size, :].to(work)
        m, first = m_new, False
    return (acc / l).to(query.dtype)


def lab07_wrong_no_scaling(query, key, value, block_size):
    """Wrong: the online softmax is right, but the scores are never divided by sqrt(Dk)."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work)
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=work)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ value[..., start : start + block_size, :].to(work)
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_wrong_drops_last_partial_block(query, key, value, block_size):
    """Wrong: loops over ``Tk // block_size`` full blocks only, dropping the keys of a last,
    shorter block (and every key when Tk < block_size)."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=work)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    for b in range(key.shape[-2] // block_size):
        block = slice(b * block_size, (b + 1) * block_size)
        s = q @ key[..., block, :].to(work).transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ value[..., block, :].to(work)
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_wrong_max_never_stored(query, key, value, block_size):
    """Wrong: computes m_new but never assigns it back to the running maximum, so every block
    rescales the past by exp(-inf) = 0 and only the last block survives."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=work)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=work)
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start : start + block_size, :].to(work)
    return (acc / row_sum).to(query.dtype)


def lab07_wrong_block_max_only(query, key, value, block_size):
    """Wrong: uses each block's own maximum as m_new instead of max(m, block max); exact in
    exact arithmetic, but exp(m - m_new) overflows once an earlier block's maximum exceeds a
    later one's by more than the dtype's exponent range (NaN for large scores)."""
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) / math.sqrt(query.shape[-1])
    m = None
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].to(work).transpose(-2, -1)
        v_block = value[..., start : start + block_size, :].to(work)
        m_new = s.amax(-1, keepdim=True)
        p = torch.exp(s - m_new)
        if m is None:
            l, acc = p.sum(-1, keepdim=True), p @ v_block
        else:
            alpha = torch.exp(m - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v_block
        m = m_new
    return (acc / l).to(query.dtype)


def lab07_wrong_float32_result(query, key, value, block_size):
    """Wrong: accumulates in float32 and returns float32 whatever the input dtype (float64
    inputs lose precision and come back in the wrong dtype)."""
    q = query.float() / math.sqrt(query.shape[-1])
    m = torch.full((*q.shape[:-1], 1), -math.inf)
    l = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]))
    for start in range(0, key.shape[-2], block_size):
        s = q @ key[..., start : start + block_size, :].float().transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ value[..., start : start + block_size, :].float()
        m = m_new
    return acc / l


# ---------------------------------------------------------------------------------------------
# Lab 08: one decoding step with a key/value cache
# ---------------------------------------------------------------------------------------------


def lab08_correct_sdpa(attention, token, cache):
    """Correct: add the encoding of position t = keys.shape[2], project, split with
    reshape + transpose, ``torch.cat`` on the time axis, the library's attention, merge,
    ``out_proj``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, width)[t].to(token.dtype)

    def split(y):
        return y.reshape(batch, 1, -1, head_dim).transpose(1, 2)  # [B, H, 1, Dh]

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([values, split(attention.v_proj(x))], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)  # [B, H, 1, Dh]
    out = out.transpose(1, 2).reshape(batch, 1, heads * head_dim)
    return attention.out_proj(out), (keys, values)


def lab08_correct_einsum(attention, token, cache):
    """Correct: the encoding row taken as ``[-1:]`` of a (t+1)-row table, heads split with
    ``view(B, H, 1, Dh)`` (one position), an ``einsum`` attention with its own softmax."""
    past_k, past_v = cache
    t = past_k.size(2)
    batch, width = token.size(0), token.size(-1)
    heads, head_dim = attention.num_heads, attention.head_dim
    x = token + sinusoidal_encoding(t + 1, width)[-1:].to(dtype=token.dtype)  # [1, D]
    q = attention.q_proj(x).reshape(batch, heads, 1, head_dim)
    k_new = attention.k_proj(x).reshape(batch, heads, 1, head_dim)
    v_new = attention.v_proj(x).reshape(batch, heads, 1, head_dim)
    keys = torch.cat((past_k, k_new), dim=-2)
    values = torch.cat((past_v, v_new), dim=-2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(head_dim)
    weights = (scores - scores.amax(-1, keepdim=True)).exp()
    weights = weights / weights.sum(-1, keepdim=True)
    merged = torch.einsum("bhqk,bhkd->bqhd", weights, values).reshape(batch, 1, width)
    return attention.out_proj(merged), (keys, values)


def lab08_correct_functional(attention, token, cache):
    """Correct: ``F.linear`` with each projection's weight and bias, a new cache allocated
    with ``new_empty`` and filled by slices, ``torch.softmax`` with ``mT``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim, t = attention.num_heads, attention.head_dim, keys.shape[2]
    position = sinusoidal_encoding(t + 1, width)[t]
    x = token + position.to(token)

    def project(linear):
        y = F.linear(x, linear.weight, linear.bias)  # [B, 1, H * Dh]
        return y.view(batch, 1, heads, head_dim).permute(0, 2, 1, 3)

    q, k, v = project(attention.q_proj), project(attention.k_proj), project(attention.v_proj)
    new_keys = keys.new_empty(batch, heads, t + 1, head_dim)
    new_values = values.new_empty(batch, heads, t + 1, head_dim)
    new_keys[:, :, :t], new_keys[:, :, t:] = keys, k
    new_values[:, :, :t], new_values[:, :, t:] = values, v
    weights = torch.softmax(q @ new_keys.mT / head_dim**0.5, dim=-1)
    out = (weights @ new_values).permute(0, 2, 1, 3).reshape(batch, 1, width)
    out = F.linear(out, attention.out_proj.weight, attention.out_proj.bias)
    return out, (new_keys, new_values)


def _lab08_attend(attention, x, keys, values):
    batch = x.shape[0]
    heads, head_dim = attention.num_heads, attention.head_dim

    def split(y):
        return y.reshape(batch, 1, heads, head_dim).transpose(1, 2)

    q, k, v = split(attention.q_proj(x)), split(attention.k_proj(x)), split(attention.v_proj(x))
    keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    out = attention.out_proj(out.transpose(1, 2).reshape(batch, 1, heads * head_dim))
    return out, (keys, values)


def lab08_wrong_no_position(attention, token, cache):
    """Wrong: never adds the positional encoding to the token (step 1 skipped)."""
    keys, values = cache
    return _lab08_attend(attention, token, keys, values)


def lab08_wrong_position_plus_one(attention, token, cache):
    """Wrong: counts the new token's position from 1, adding the encoding of position t + 1
    instead of t."""
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 2, token.shape[-1])[t + 1].to(token.dtype)
    return _lab08_attend(attention, x, keys, values)


def lab08_wrong_position_from_heads_axis(attention, token, cache):
    """Wrong: reads the number of cached tokens from ``keys.shape[1]`` (the heads axis, H)
    instead of ``keys.shape[2]``, so every step gets the encoding of position H."""
    keys, values = cache
    t = keys.shape[1]
    x = token + sinusoidal_encoding(t + 1, token.shape[-1])[t].to(token.dtype)
    return _lab08_attend(attention, x, keys, values)


def lab08_wrong_encoding_table_too_short(attention, token, cache):
    """Wrong: builds an encoding table of t rows, ``sinusoidal_encoding(t, D)[t]``, one row
    short, and the indexing crashes."""
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t, token.shape[-1])[t].to(token.dtype)
    return _lab08_attend(attention, x, keys, values)


def lab08_wrong_cat_on_feature_axis(attention, token, cache):
    """Wrong: concatenates the new key/value onto the cache along dim -1 (the features)
    instead of dim 2 (time): a shape crash."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, width)[t].to(token.dtype)

    def split(y):
        return y.reshape(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=-1)
    values = torch.cat([values, split(attention.v_proj(x))], dim=-1)
    out, _ = scaled_dot_product_attention(q, keys, values)
    out = attention.out_proj(out.transpose(1, 2).reshape(batch, 1, width))
    return out, (keys, values)


def lab08_wrong_returns_old_cache(attention, token, cache):
    """Wrong: attends over the extended cache but returns the cache it was given, so the next
    step never sees this token's key and value."""
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, token.shape[-1])[t].to(token.dtype)
    out, _ = _lab08_attend(attention, x, keys, values)
    return out, (keys, values)


def lab08_wrong_no_out_proj(attention, token, cache):
    """Wrong: returns the merged heads without applying ``attention.out_proj``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, width)[t].to(token.dtype)

    def split(y):
        return y.reshape(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([values, split(attention.v_proj(x))], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return out.transpose(1, 2).reshape(batch, 1, width), (keys, values)


def lab08_wrong_value_from_key_proj(attention, token, cache):
    """Wrong: computes the new value with ``k_proj`` (a copy-paste slip) instead of
    ``v_proj``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, width)[t].to(token.dtype)

    def split(y):
        return y.reshape(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([values, split(attention.k_proj(x))], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    out = attention.out_proj(out.transpose(1, 2).reshape(batch, 1, width))
    return out, (keys, values)


# ---------------------------------------------------------------------------------------------
# Lab 09: grouped-query attention
# ---------------------------------------------------------------------------------------------


def lab09_correct_repeat_interleave(query, key, value):
    """Correct: repeat each key/value head ``group`` times in place with
    ``repeat_interleave(dim=1)``, then the library's attention."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(query, key, value)


def lab09_correct_grouped_einsum(query, key, value):
    """Correct: view the query heads as [B, Hkv, group, Tq, Dh] and let ``einsum`` broadcast
    each key/value head over its group, without copying the keys."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    q = query.reshape(batch, kv_heads, heads // kv_heads, q_len, head_dim)
    scores = torch.einsum("bngqd,bnkd->bngqk", q, key) / math.sqrt(head_dim)
    weights = torch.softmax(scores, dim=-1)
    output = torch.einsum("bngqk,bnkd->bngqd", weights, value)
    return (
        output.reshape(batch, heads, q_len, head_dim),
        weights.reshape(batch, heads, q_len, key.shape[2]),
    )


def lab09_correct_loop_over_heads(query, key, value):
    """Correct: a loop over query heads, head h reading key/value head h // group, results
    stacked on dim 1."""
    heads, kv_heads = query.shape[1], key.shape[1]
    group = heads // kv_heads
    outputs, maps = [], []
    for h in range(heads):
        q, k, v = query[:, h], key[:, h // group], value[:, h // group]
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        outputs.append(w @ v)
        maps.append(w)
    return torch.stack(outputs, dim=1), torch.stack(maps, dim=1)


def lab09_wrong_repeat_tiles(query, key, value):
    """Wrong: uses ``repeat`` (tiling: 0, 1, 0, 1, ...) instead of ``repeat_interleave``, so
    query head h reads key/value head h % Hkv instead of h // group."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat(1, group, 1, 1)
    value = value.repeat(1, group, 1, 1)
    return scaled_dot_product_attention(query, key, value)


def lab09_wrong_divides_by_kv_heads(query, key, value):
    """Wrong: sends query head h to key/value head h // Hkv (confusing the number of groups
    with the group size); wrong groups, or an index error when Hkv < group."""
    heads, kv_heads = query.shape[1], key.shape[1]
    outputs, maps = [], []
    for h in range(heads):
        q, k, v = query[:, h], key[:, h // kv_heads], value[:, h // kv_heads]
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        outputs.append(w @ v)
        maps.append(w)
    return torch.stack(outputs, dim=1), torch.stack(maps, dim=1)


def lab09_wrong_weights_per_kv_head(query, key, value):
    """Wrong: returns the weights averaged over each group's query heads, one map per
    key/value head [B, Hkv, Tq, Tk], instead of one per query head."""
    batch, heads, q_len, _ = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    output, weights = scaled_dot_product_attention(
        query, key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    )
    weights = weights.reshape(batch, kv_heads, group, q_len, -1).mean(dim=2)
    return output, weights


def lab09_wrong_group_queries_averaged(query, key, value):
    """Wrong: averages the query heads of each group into one query per key/value head and
    copies its result to all of them, as if the queries were shared too."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    shared_q = query.reshape(batch, kv_heads, group, q_len, head_dim).mean(dim=2)
    output, weights = scaled_dot_product_attention(shared_q, key, value)
    return output.repeat_interleave(group, dim=1), weights.repeat_interleave(group, dim=1)


def lab09_wrong_value_not_repeated(query, key, value):
    """Wrong: repeats the keys for the groups but forgets the values: broadcasting hides it
    for Hkv = 1 (or Hkv = H) but crashes for anything in between."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def lab09_wrong_repeat_on_time_axis(query, key, value):
    """Wrong: ``repeat_interleave(group, dim=2)`` repeats along the time axis instead of the
    heads axis: each key is duplicated and the heads are not (extra keys or a crash)."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=2)
    value = value.repeat_interleave(group, dim=2)
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def lab09_wrong_float32_buffers(query, key, value):
    """Wrong: preallocates the results with ``torch.zeros(shape)`` (default float32) and fills
    them head by head, so float64 inputs get float32 results."""
    batch, heads, q_len, head_dim = query.shape
    group = heads // key.shape[1]
    output = torch.zeros(batch, heads, q_len, head_dim)
    weights = torch.zeros(batch, heads, q_len, key.shape[2])
    for h in range(heads):
        w = torch.softmax(
            query[:, h] @ key[:, h // group].transpose(-1, -2) / math.sqrt(head_dim), dim=-1
        )
        weights[:, h] = w
        output[:, h] = w @ value[:, h // group]
    return output, weights


# ---------------------------------------------------------------------------------------------
# Lab 10: sliding-window and document masks
# ---------------------------------------------------------------------------------------------


def lab10w_correct_tril_triu(size, window):
    """Correct: ``tril()`` (j <= i) AND ``triu(-(window - 1))`` (j >= i - window + 1)."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 1))


def lab10w_correct_distance(size, window):
    """Correct: the distance d = i - j from two ``arange``s, allowed when 0 <= d < window."""
    i = torch.arange(size)[:, None]
    j = torch.arange(size)[None, :]
    distance = i - j
    return (distance >= 0) & (distance < window)


def lab10w_correct_row_loop(size, window):
    """Correct: a loop over rows setting keys max(0, i - window + 1) .. i to True."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, max(0, i - window + 1) : i + 1] = True
    return mask


def lab10w_wrong_one_key_too_many(size, window):
    """Wrong: off by one, keeps i - j <= window, so each query sees window + 1 keys."""
    distance = torch.arange(size)[:, None] - torch.arange(size)[None, :]
    return (distance >= 0) & (distance <= window)


def lab10w_wrong_one_key_too_few(size, window):
    """Wrong: off by one the other way, ``triu(-(window - 2))``: window - 1 keys (and a
    query does not even see itself when window = 1)."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 2))


def lab10w_wrong_not_causal(size, window):
    """Wrong: a symmetric band |i - j| < window, so queries also see the keys after them."""
    distance = torch.arange(size)[:, None] - torch.arange(size)[None, :]
    return distance.abs() < window


def lab10w_wrong_transposed(size, window):
    """Wrong: rows and columns swapped (``triu`` where ``tril`` was meant): query i sees keys
    i .. i + window - 1, the future."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.triu() & ones.tril(window - 1)


def lab10w_wrong_float_dtype(size, window):
    """Wrong: right pattern, built from ``torch.ones(size, size)`` and returned as float 0/1
    instead of ``torch.bool``."""
    ones = torch.ones(size, size)
    return ones.tril() * ones.triu(-(window - 1))


def lab10w_wrong_negative_slice_wraps(size, window):
    """Wrong: a row loop slicing from i - window + 1 without clamping at 0; at the start of
    the sequence the negative start wraps around and the row stays (partly) empty."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, i - window + 1 : i + 1] = True
    return mask


def lab10d_correct_broadcast(document_ids):
    """Correct: same-document matrix by broadcasting ``==``, AND the causal mask."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & causal_mask(document_ids.shape[0], device=document_ids.device)


def lab10d_correct_eq_arange(document_ids):
    """Correct: ``torch.eq`` of an outer expansion, and j <= i from two ``arange``s."""
    size = document_ids.numel()
    rows = document_ids.unsqueeze(1).expand(size, size)
    cols = document_ids.unsqueeze(0).expand(size, size)
    positions = torch.arange(size, device=document_ids.device)
    return torch.eq(rows, cols) & (positions[None, :] <= positions[:, None])


def lab10d_correct_loops(document_ids):
    """Correct: two Python loops, query i and key j <= i, True when the ids are equal."""
    ids = document_ids.tolist()
    mask = torch.zeros(len(ids), len(ids), dtype=torch.bool)
    for i in range(len(ids)):
        for j in range(i + 1):
            mask[i, j] = ids[i] == ids[j]
    return mask


def lab10d_wrong_not_causal(document_ids):
    """Wrong: only the same-document test, no causal part: each document's block is full, so
    queries see later tokens of their document."""
    return document_ids[:, None] == document_ids[None, :]


def lab10d_wrong_or_instead_of_and(document_ids):
    """Wrong: combines the same-document test and the causal mask with ``|`` instead of
    ``&``, letting queries see earlier documents and later tokens of their own."""
    same = document_ids[:, None] == document_ids[None, :]
    return same | causal_mask(document_ids.shape[0])


def lab10d_wrong_bincount_blocks(document_ids):
    """Wrong: builds the blocks from ``torch.bincount(ids)``, assuming the documents are
    numbered 0, 1, 2, ... in order (wrong block sizes when they are not)."""
    lengths = [int(n) for n in torch.bincount(document_ids) if n > 0]
    blocks = [torch.ones(n, n, dtype=torch.bool).tril() for n in lengths]
    return torch.block_diag(*blocks)


def lab10d_wrong_upper_triangle(document_ids):
    """Wrong: uses ``triu`` for the causal part (j >= i): each query sees the later tokens of
    its document instead of the earlier ones."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).triu()


def lab10d_wrong_strictly_causal(document_ids):
    """Wrong: ``tril(-1)`` (j < i) for the causal part, so no query may attend to itself."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).tril(-1)


def lab10d_wrong_integer_dtype(document_ids):
    """Wrong: right pattern, computed by multiplying 0/1 integer matrices, returned as int64
    instead of ``torch.bool``."""
    same = (document_ids[:, None] == document_ids[None, :]).long()
    return same * torch.ones_like(same).tril()


# ---------------------------------------------------------------------------------------------
# Lab 11: ALiBi slopes and bias
# ---------------------------------------------------------------------------------------------


def lab11s_correct_geometric(num_heads):
    """Correct: the geometric sequence for P = 2**floor(log2 H), then the odd-numbered terms
    (1st, 3rd, ...) of the sequence for 2P, cut to H; float64."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** math.floor(math.log2(num_heads))
    extra = geometric(2 * power)[0::2][: num_heads - power]
    return torch.cat([geometric(power), extra])


def lab11s_correct_ratio_powers(num_heads):
    """Correct: the sequence written as ratio**(h + 1) with ratio = 2**(-8/P), the power of
    two found by bit length; the extra slopes are ratio2**(1, 3, 5, ...) for 2P."""
    power = 1 << (num_heads.bit_length() - 1)
    ratio = 2.0 ** (-8.0 / power)
    base = ratio ** torch.arange(1, power + 1, dtype=torch.float64)
    ratio2 = 2.0 ** (-8.0 / (2 * power))
    odd = 2 * torch.arange(num_heads - power, dtype=torch.float64) + 1  # 1, 3, 5, ...
    return torch.cat([base, ratio2**odd])


def lab11s_correct_python_loop(num_heads):
    """Correct: a Python loop with ``math`` that doubles P while 2P <= H, appends the slopes
    one by one, and wraps the list in a float64 tensor."""
    power = 1
    while power * 2 <= num_heads:
        power *= 2
    slopes = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
    n = 1  # 1st, 3rd, 5th, ... term of the sequence for 2P
    while len(slopes) < num_heads:
        slopes.append(2.0 ** (-8.0 * n / (2 * power)))
        n += 2
    return torch.tensor(slopes, dtype=torch.float64)


def lab11s_wrong_exponent_from_zero(num_heads):
    """Wrong: uses 2**(-8h/H) with h counting from 0, so the first slope is 1 and every slope
    is one step too large."""
    power = 2 ** math.floor(math.log2(num_heads))

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(0, n, dtype=torch.float64) / n)

    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def lab11s_wrong_formula_for_any_h(num_heads):
    """Wrong: applies the power-of-two formula 2**(-8(h+1)/H) to every H, ignoring the rule
    for head counts that are not powers of two."""
    return 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)


def lab11s_wrong_even_terms(num_heads):
    """Wrong: takes the 2nd, 4th, ... terms of the 2P sequence (``[1::2]``) instead of the
    1st, 3rd, ..., which just repeats slopes of the P sequence."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** math.floor(math.log2(num_heads))
    return torch.cat([geometric(power), geometric(2 * power)[1::2][: num_heads - power]])


def lab11s_wrong_next_power_truncated(num_heads):
    """Wrong: takes the sequence of the next power of two at or above H and keeps its first
    H terms."""
    power = 2 ** math.ceil(math.log2(num_heads))
    return 2.0 ** (-8.0 * torch.arange(1, power + 1, dtype=torch.float64) / power)[:num_heads]


def lab11s_wrong_extra_first(num_heads):
    """Wrong: puts the extra slopes from the 2P sequence before the P sequence instead of
    after it."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** math.floor(math.log2(num_heads))
    return torch.cat([geometric(2 * power)[0::2][: num_heads - power], geometric(power)])


def lab11s_wrong_rounded_log(num_heads):
    """Wrong: finds P with ``round(log2 H)`` instead of floor, so for H = 3, 6, 7, ... P
    exceeds H and the slope count comes out wrong."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** round(math.log2(num_heads))
    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def lab11b_correct_offsets(num_heads, q_len, kv_len):
    """Correct: float64 query positions Tk - Tq .. Tk - 1 and key positions 0 .. Tk - 1,
    offset j - i, times the slopes broadcast as [H, 1, 1]."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = key_pos[None, :] - query_pos[:, None]  # [Tq, Tk]
    return lab11s_correct_geometric(num_heads)[:, None, None] * offset


def lab11b_correct_integer_distance(num_heads, q_len, kv_len):
    """Correct: integer distance i - j from row indices shifted by Tk - Tq, turned into
    -m * distance with the library's slopes and ``einsum`` (an outer product)."""
    rows = torch.arange(q_len)[:, None] + (kv_len - q_len)
    cols = torch.arange(kv_len)[None, :]
    distance = (rows - cols).to(torch.float64)  # [Tq, Tk], d = i - j
    return torch.einsum("h,qk->hqk", alibi_slopes(num_heads), -distance) + 0.0


def lab11b_correct_per_head_stack(num_heads, q_len, kv_len):
    """Correct: one [Tq, Tk] matrix per head, each slope times the (j - i) grid of
    ``torch.meshgrid``, stacked with ``torch.stack``."""
    i, j = torch.meshgrid(
        torch.arange(kv_len - q_len, kv_len, dtype=torch.float64),
        torch.arange(kv_len, dtype=torch.float64),
        indexing="ij",
    )
    slopes = lab11s_correct_python_loop(num_heads)
    return torch.stack([float(m) * (j - i) for m in slopes])


def lab11b_wrong_sign_flipped(num_heads, q_len, kv_len):
    """Wrong: m (i - j) instead of m (j - i): a bonus, not a penalty, for distant keys."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = query_pos[:, None] - key_pos[None, :]
    return alibi_slopes(num_heads)[:, None, None] * offset


def lab11b_wrong_slopes_broadcast(num_heads, q_len, kv_len):
    """Wrong: shapes the slopes [H, 1] instead of [H, 1, 1], so they broadcast against the
    query axis: a crash, or a [Tq, Tk] result with one slope per query row."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = key_pos[None, :] - query_pos[:, None]
    return alibi_slopes(num_heads)[:, None] * offset


def lab11b_wrong_slopes_reversed(num_heads, q_len, kv_len):
    """Wrong: gives head h the slope of head H - 1 - h (the slopes flipped), so the steepest
    penalty goes to the last head."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = key_pos[None, :] - query_pos[:, None]
    return alibi_slopes(num_heads).flip(0)[:, None, None] * offset


def lab11b_wrong_axes_swapped(num_heads, q_len, kv_len):
    """Wrong: builds the grid with the keys on the rows, [H, Tk, Tq], instead of [H, Tq, Tk]
    (the wrong shape whenever Tq < Tk; it happens to coincide when Tq = Tk)."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = query_pos[None, :] - key_pos[:, None]  # [Tk, Tq]
    return alibi_slopes(num_heads)[:, None, None] * offset


def lab11b_wrong_power_of_two_slopes(num_heads, q_len, kv_len):
    """Wrong: builds the bias on slopes 2**(-8(h+1)/H) for every H, not ALiBi's slopes for
    head counts that are not powers of two."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (key_pos[None, :] - query_pos[:, None])


def lab11b_wrong_one_dimensional_offset(num_heads, q_len, kv_len):
    """Wrong: subtracts the two position vectors without unsqueezing them: a crash when
    Tq != Tk and a [H, 1, T] diagonal-only result when they are equal."""
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = key_pos - query_pos
    return alibi_slopes(num_heads)[:, None, None] * offset


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def _one_line(fn):
    """The mistake a wrong implementation makes: its docstring on one line, without "Wrong: "."""
    return " ".join(fn.__doc__.split()).removeprefix("Wrong: ")


def _entry(check, correct, wrong):
    """One lab's registry entry: the check's name, the correct and the (wrong, mistake) lists."""
    return {
        "check": check,
        "correct": correct,
        "wrong": [(fn, _one_line(fn)) for fn in wrong],
    }


LABS = {
    "01": _entry(
        "check_scaled_dot_product_attention",
        [lab01_correct_matmul, lab01_correct_einsum_manual_softmax, lab01_correct_bmm_flatten],
        [
            lab01_wrong_no_scaling,
            lab01_wrong_scale_by_dk,
            lab01_wrong_softmax_over_queries,
            lab01_wrong_scale_by_value_width,
            lab01_wrong_transpose_first_axes,
            lab01_wrong_returns_scores,
            lab01_wrong_float32_result,
            lab01_wrong_weights_transposed_in_output,
        ],
    ),
    "02": _entry(
        "check_multi_head_attention",
        [
            lab02_correct_view_transpose,
            lab02_correct_unflatten_einsum,
            lab02_correct_loop_over_heads,
        ],
        [
            lab02_wrong_split_without_transpose,
            lab02_wrong_interleaved_split,
            lab02_wrong_merge_without_transpose,
            lab02_wrong_merge_interleaved,
            lab02_wrong_scale_by_model_width,
            lab02_wrong_weights_averaged,
            lab02_wrong_key_split_with_query_length,
            lab02_wrong_view_after_transpose,
        ],
    ),
    "03": _entry(
        "check_sinusoidal_encoding",
        [lab03_correct_slices, lab03_correct_exp_log_stack, lab03_correct_where_parity],
        [
            lab03_wrong_pair_index_exponent,
            lab03_wrong_per_column_exponent,
            lab03_wrong_sin_cos_swapped,
            lab03_wrong_positions_from_one,
            lab03_wrong_odd_width_crash,
            lab03_wrong_float64_result,
            lab03_wrong_concatenated_halves,
            lab03_wrong_multiplies_by_wavelength,
        ],
    ),
    "04": _entry(
        "check_masked_attention",
        [lab04_correct_finfo_min, lab04_correct_neg_inf_nan_to_num, lab04_correct_manual_exp],
        [
            lab04_wrong_inverted_polarity,
            lab04_wrong_neg_inf_gives_nan,
            lab04_wrong_minus_1e9,
            lab04_wrong_fill_zero,
            lab04_wrong_mask_after_softmax,
            lab04_wrong_mask_transposed,
            lab04_wrong_empty_rows_zeroed_too_late,
            lab04_wrong_float32_result,
        ],
    ),
    "05": _entry(
        "check_encoder_layer",
        [lab05_correct_if_else, lab05_correct_stage_loop, lab05_correct_residual_helper],
        [
            lab05_wrong_postnorm_norm_on_branch,
            lab05_wrong_prenorm_residual_from_normed,
            lab05_wrong_ignores_norm_first,
            lab05_wrong_norms_swapped,
            lab05_wrong_mask_dropped,
            lab05_wrong_dropout_after_residual,
            lab05_wrong_weights_averaged,
            lab05_wrong_second_residual_from_input,
        ],
    ),
    "06": _entry(
        "check_pooling_and_search",
        [lab06_correct_masked_sum, lab06_correct_einsum_argsort, lab06_correct_loop_cosine],
        [
            lab06_wrong_pools_padding,
            lab06_wrong_no_normalisation,
            lab06_wrong_normalise_wrong_axis,
            lab06_wrong_worst_first,
            lab06_wrong_empty_sequence_nan,
            lab06_wrong_topk_over_queries,
            lab06_wrong_float_mask_dtype,
            lab06_wrong_pairwise_cosine,
        ],
    ),
    "07": _entry(
        "check_online_softmax",
        [lab07_correct_finfo_floor, lab07_correct_split_einsum, lab07_correct_first_block_init],
        [
            lab07_wrong_acc_not_rescaled,
            lab07_wrong_sum_not_rescaled,
            lab07_wrong_rescale_inverted,
            lab07_wrong_no_scaling,
            lab07_wrong_drops_last_partial_block,
            lab07_wrong_max_never_stored,
            lab07_wrong_block_max_only,
            lab07_wrong_float32_result,
        ],
    ),
    "08": _entry(
        "check_kv_cache_decoding",
        [lab08_correct_sdpa, lab08_correct_einsum, lab08_correct_functional],
        [
            lab08_wrong_no_position,
            lab08_wrong_position_plus_one,
            lab08_wrong_position_from_heads_axis,
            lab08_wrong_encoding_table_too_short,
            lab08_wrong_cat_on_feature_axis,
            lab08_wrong_returns_old_cache,
            lab08_wrong_no_out_proj,
            lab08_wrong_value_from_key_proj,
        ],
    ),
    "09": _entry(
        "check_grouped_query_attention",
        [
            lab09_correct_repeat_interleave,
            lab09_correct_grouped_einsum,
            lab09_correct_loop_over_heads,
        ],
        [
            lab09_wrong_repeat_tiles,
            lab09_wrong_divides_by_kv_heads,
            lab09_wrong_weights_per_kv_head,
            lab09_wrong_group_queries_averaged,
            lab09_wrong_value_not_repeated,
            lab09_wrong_repeat_on_time_axis,
            lab09_wrong_float32_buffers,
        ],
    ),
    "10-window": _entry(
        "check_sliding_window_mask",
        [lab10w_correct_tril_triu, lab10w_correct_distance, lab10w_correct_row_loop],
        [
            lab10w_wrong_one_key_too_many,
            lab10w_wrong_one_key_too_few,
            lab10w_wrong_not_causal,
            lab10w_wrong_transposed,
            lab10w_wrong_float_dtype,
            lab10w_wrong_negative_slice_wraps,
        ],
    ),
    "10-document": _entry(
        "check_document_mask",
        [lab10d_correct_broadcast, lab10d_correct_eq_arange, lab10d_correct_loops],
        [
            lab10d_wrong_not_causal,
            lab10d_wrong_or_instead_of_and,
            lab10d_wrong_bincount_blocks,
            lab10d_wrong_upper_triangle,
            lab10d_wrong_strictly_causal,
            lab10d_wrong_integer_dtype,
        ],
    ),
    "11-slopes": _entry(
        "check_alibi_slopes",
        [lab11s_correct_geometric, lab11s_correct_ratio_powers, lab11s_correct_python_loop],
        [
            lab11s_wrong_exponent_from_zero,
            lab11s_wrong_formula_for_any_h,
            lab11s_wrong_even_terms,
            lab11s_wrong_next_power_truncated,
            lab11s_wrong_extra_first,
            lab11s_wrong_rounded_log,
        ],
    ),
    "11-bias": _entry(
        "check_alibi_bias",
        [lab11b_correct_offsets, lab11b_correct_integer_distance, lab11b_correct_per_head_stack],
        [
            lab11b_wrong_sign_flipped,
            lab11b_wrong_slopes_broadcast,
            lab11b_wrong_slopes_reversed,
            lab11b_wrong_axes_swapped,
            lab11b_wrong_power_of_two_slopes,
            lab11b_wrong_one_dimensional_offset,
        ],
    ),
}


# The mistake each wrong implementation's check named when the set was measured
# (blind_sets_measured.md), every one read and judged to be that implementation's mistake;
# test_checks_independent.py keeps it so. The others are answered with where they go wrong.
NAMED = {
    "lab01_wrong_no_scaling": "no_scaling",
    "lab01_wrong_scale_by_dk": "scaled_by_d_k",
    "lab01_wrong_softmax_over_queries": "softmax_axis",
    "lab01_wrong_scale_by_value_width": "scaled_by_value_width",
    "lab01_wrong_transpose_first_axes": "fixed_axes",
    "lab01_wrong_returns_scores": "returned_scores",
    "lab01_wrong_float32_result": "wrong_dtype",
    "lab01_wrong_weights_transposed_in_output": "output_uses_transposed_weights",
    "lab02_wrong_split_without_transpose": "split_without_transpose",
    "lab02_wrong_interleaved_split": "heads_interleaved",
    "lab02_wrong_merge_without_transpose": "merge_without_transpose",
    "lab02_wrong_merge_interleaved": "merge_wrong_permutation",
    "lab02_wrong_scale_by_model_width": "scaled_by_sqrt_d_model",
    "lab02_wrong_weights_averaged": "weights_averaged",
    "lab02_wrong_key_split_with_query_length": "split_with_query_length",
    "lab02_wrong_view_after_transpose": "view_after_transpose",
    "lab03_wrong_pair_index_exponent": "frequency_i_not_2i",
    "lab03_wrong_per_column_exponent": "frequency_column_index",
    "lab03_wrong_sin_cos_swapped": "sin_cos_swapped",
    "lab03_wrong_positions_from_one": "positions_from_one",
    "lab03_wrong_odd_width_crash": "odd_d_model",
    "lab03_wrong_float64_result": "wrong_dtype",
    "lab03_wrong_concatenated_halves": "halves_not_interleaved",
    "lab03_wrong_multiplies_by_wavelength": "frequency_inverted",
    "lab04_wrong_inverted_polarity": "mask_polarity",
    "lab04_wrong_neg_inf_gives_nan": "nan_fully_masked",
    "lab04_wrong_minus_1e9": "uniform_fully_masked",
    "lab04_wrong_fill_zero": "scores_times_mask",
    "lab04_wrong_mask_after_softmax": "mask_after_softmax",
    "lab04_wrong_mask_transposed": "mask_transposed",
    "lab04_wrong_empty_rows_zeroed_too_late": "output_before_zeroing",
    "lab04_wrong_float32_result": "wrong_dtype",
    "lab05_wrong_postnorm_norm_on_branch": "norm_outside_residual",
    "lab05_wrong_prenorm_residual_from_normed": "pre_norm_residual_normalised",
    "lab05_wrong_ignores_norm_first": "post_norm_instead_of_pre_norm",
    "lab05_wrong_norms_swapped": "norms_swapped",
    "lab05_wrong_mask_dropped": "encoder_mask_ignored",
    "lab05_wrong_dropout_after_residual": "dropout_on_residual_sum",
    "lab05_wrong_weights_averaged": "weights_averaged",
    "lab05_wrong_second_residual_from_input": "feed_forward_residual_from_input",
    "lab06_wrong_pools_padding": "mean_over_padding",
    "lab06_wrong_no_normalisation": "cosine_not_normalised",
    "lab06_wrong_normalise_wrong_axis": "normalised_wrong_axis",
    "lab06_wrong_worst_first": "ranked_ascending",
    "lab06_wrong_empty_sequence_nan": "empty_sequence_nan",
    "lab06_wrong_topk_over_queries": "search_scores_transposed",
    "lab06_wrong_float_mask_dtype": "wrong_dtype",
    "lab06_wrong_pairwise_cosine": "scores_row_by_row",
    "lab07_wrong_acc_not_rescaled": "acc_not_rescaled",
    "lab07_wrong_sum_not_rescaled": "sum_not_rescaled",
    "lab07_wrong_rescale_inverted": "rescale_inverted",
    "lab07_wrong_no_scaling": "no_scaling",
    "lab07_wrong_drops_last_partial_block": "last_block_dropped",
    "lab07_wrong_max_never_stored": "max_not_carried",
    "lab07_wrong_block_max_only": "online_overflow",
    "lab07_wrong_float32_result": "wrong_dtype",
    "lab08_wrong_no_position": "no_positions",
    "lab08_wrong_position_plus_one": "positions_off_by_one",
    "lab08_wrong_position_from_heads_axis": "position_from_wrong_axis",
    "lab08_wrong_encoding_table_too_short": "encoding_one_row_short",
    "lab08_wrong_cat_on_feature_axis": "cache_wrong_axis",
    "lab08_wrong_returns_old_cache": "cache_not_returned",
    "lab08_wrong_no_out_proj": "out_proj_missing",
    "lab08_wrong_value_from_key_proj": "value_from_wrong_layer",
    "lab09_wrong_repeat_tiles": "kv_heads_repeated_round_robin",
    "lab09_wrong_divides_by_kv_heads": "group_index_by_kv_heads",
    "lab09_wrong_weights_per_kv_head": "query_heads_reduced",
    "lab09_wrong_group_queries_averaged": "query_groups_averaged",
    "lab09_wrong_value_not_repeated": "kv_heads_wrong_count",
    "lab09_wrong_repeat_on_time_axis": "repeated_along_wrong_axis",
    "lab09_wrong_float32_buffers": "wrong_dtype",
    "lab10w_wrong_one_key_too_many": "window_one_too_wide",
    "lab10w_wrong_one_key_too_few": "window_one_too_narrow",
    "lab10w_wrong_not_causal": "window_symmetric",
    "lab10w_wrong_transposed": "window_transposed",
    "lab10w_wrong_float_dtype": "mask_not_bool",
    "lab10w_wrong_negative_slice_wraps": "window_slice_wraps",
    "lab10d_wrong_not_causal": "document_not_causal",
    "lab10d_wrong_or_instead_of_and": "combined_with_or",
    "lab10d_wrong_bincount_blocks": "documents_sorted",
    "lab10d_wrong_upper_triangle": "document_transposed",
    "lab10d_wrong_strictly_causal": "document_excludes_self",
    "lab10d_wrong_integer_dtype": "mask_not_bool",
    "lab11s_wrong_exponent_from_zero": "alibi_slopes_from_zero",
    "lab11s_wrong_formula_for_any_h": "alibi_naive_non_power_of_two",
    "lab11s_wrong_even_terms": "alibi_extra_wrong_terms",
    "lab11s_wrong_next_power_truncated": "alibi_first_2p_terms",
    "lab11s_wrong_extra_first": "alibi_extra_first",
    "lab11s_wrong_rounded_log": "alibi_power_rounded_up",
    "lab11b_wrong_sign_flipped": "alibi_bias_sign",
    "lab11b_wrong_slopes_broadcast": "alibi_bias_slopes_wrong_axis",
    "lab11b_wrong_slopes_reversed": "alibi_slopes_reversed",
    "lab11b_wrong_axes_swapped": "alibi_bias_transposed",
    "lab11b_wrong_power_of_two_slopes": "alibi_naive_non_power_of_two",
    "lab11b_wrong_one_dimensional_offset": "alibi_bias_offsets_not_outer",
}
