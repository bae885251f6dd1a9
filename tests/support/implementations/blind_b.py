# ruff: noqa: E741, B905 - learner code kept as written (`l` is the lab's running sum)
"""Learner implementations, correct and wrong, of the eleven labs of the attention course (set B).

Every lab has three correct implementations written with different idioms and several wrong
ones, each wrong one making exactly one plausible mistake. ``LABS`` at the end of the module
registers them under the name of the check that grades them.

Mistakes considered and excluded because no input the contract allows can tell them apart from
a right implementation (they were checked by running Python):

- 04 masks: scaling the scores by ``1 / sqrt(Dk)`` *after* filling the blocked ones with
  ``finfo.min`` (the filled value stays so negative that its exponential is still exactly 0,
  and rows whose keys are all blocked are zeroed either way).
- 06 pooling: dividing the masked sum by the padded length ``T`` (or not dividing at all, a sum
  instead of a mean). Every pooled vector only changes by a positive factor, which the scaling
  to length 1 removes: scores and ranking are identical (float32/float64 to ~1e-16; float16
  to one unit in the last place of the rounding, the ranking unchanged).
- 08 KV cache: merging the heads with ``out.reshape(B, 1, D)`` without the ``transpose(1, 2)``,
  and splitting them with ``.view(B, H, 1, Dh)`` without it: with a single new token
  (``Tq = 1``) both orders of the axes give the same memory layout, so the result is the same.
- 11 ALiBi bias: lining the queries up top-left (query row ``r`` at position ``r`` instead of
  ``Tk - Tq + r``), BLOOM's ``m * j`` and MPT's ``m * (j - Tk + 1)``: each differs from the
  bias by a constant per query row, which the softmax ignores and the contract accepts.
- 11 ALiBi bias: ``-m * |i - j|``, or ``m * (j - i)`` clamped at 0 from above: identical on the
  keys up to the query's own position, the only part a causal model (and the contract's
  comparison) uses.

How this set was written (2026-12-03): by a writer who saw only each lab's contract (the set-up
cell, the task and its shapes table, the stub; ``## The task`` to ``## Check it`` of the page),
the library's non-check modules, and nothing of the checks, their tests, the pages' hints or
lists of mistakes, or the other sets. Its role (``blind_sets_measured.md``): *held out* for the
first round of changes (labs 01-07, which it measured before and after), then a *tuning* set for
the second (labs 08-11). Labs 01-07's checks were never changed for it.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention  # noqa: F401
from attention_lab.masks import causal_mask, combine_masks, padding_mask  # noqa: F401
from attention_lab.positional import alibi_bias, alibi_slopes, sinusoidal_encoding  # noqa: F401


def _softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32 for the exponentials and sums (float64 stays float64)."""
    return torch.promote_types(dtype, torch.float32)


# ---------------------------------------------------------------------------------------------
# Lab 01: scaled dot-product attention
# ---------------------------------------------------------------------------------------------


def l01_correct_matmul(query, key, value):
    """Correct: ``@`` with ``key.transpose(-2, -1)``, divide by sqrt(Dk), ``torch.softmax``."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # [..., Tq, Tk]
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def l01_correct_einsum_manual_softmax(query, key, value):
    """Correct: einsum scores and a hand-written, max-shifted softmax in at least float32."""
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    work = scores.to(_softmax_dtype(scores.dtype))
    exps = torch.exp(work - work.amax(dim=-1, keepdim=True))
    weights = (exps / exps.sum(dim=-1, keepdim=True)).to(query.dtype)
    output = torch.einsum("...qk,...kv->...qv", weights, value)
    return output, weights


def l01_correct_scaled_query(query, key, value):
    """Correct: scale the queries first, ``torch.matmul`` with ``key.mT``, ``F.softmax``."""
    scaled = query * (1.0 / math.sqrt(query.shape[-1]))
    scores = torch.matmul(scaled, key.mT)
    weights = F.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return torch.matmul(weights, value), weights


def l01_wrong_softmax_over_queries(query, key, value):
    """Wrong: the softmax normalises over the queries (dim=-2), so columns sum to 1, not rows."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-2)
    return weights @ value, weights


def l01_wrong_scale_by_dk(query, key, value):
    """Wrong: divides the scores by Dk instead of sqrt(Dk)."""
    scores = query @ key.transpose(-2, -1) / query.shape[-1]
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def l01_wrong_no_scaling(query, key, value):
    """Wrong: forgets the 1/sqrt(Dk) scaling of the scores."""
    scores = query @ key.transpose(-2, -1)
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def l01_wrong_scale_by_key_length(query, key, value):
    """Wrong: scales by sqrt of the number of keys Tk (shape[-2]) instead of sqrt(Dk)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(key.shape[-2])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def l01_wrong_transpose_fixed_axes(query, key, value):
    """Wrong: transposes the key with fixed axes (1, 2), right only for [B, T, D] inputs:
    crashes on [T, D] and swaps heads with positions on [B, H, T, D]."""
    scores = query @ key.transpose(1, 2) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def l01_wrong_returns_scores(query, key, value):
    """Wrong: the output is right, but it returns the scaled scores (before the softmax) as the
    weights."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, scores


def l01_wrong_float32_result(query, key, value):
    """Wrong: casts everything to float32 (``.float()``) and never casts back, so float64 inputs
    give float32 results."""
    q, k, v = query.float(), key.float(), value.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


# ---------------------------------------------------------------------------------------------
# Lab 02: multi-head attention (split, attend, merge)
# ---------------------------------------------------------------------------------------------


def l02_correct_view_transpose(query, key, value, num_heads):
    """Correct: ``reshape(B, T, H, Dh).transpose(1, 2)``, library attention, transpose back and
    ``reshape``."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def l02_correct_chunk_stack(query, key, value, num_heads):
    """Correct: ``chunk`` the features into heads and ``stack`` them on dim 1; merge with
    ``cat`` of the ``unbind`` heads."""

    def split(x):
        return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # [B, H, T, Dh]

    q, k, v = split(query), split(key), split(value)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhqk,bhkd->bhqd", weights, v)
    return torch.cat(heads.unbind(dim=1), dim=-1), weights


def l02_correct_loop_over_heads(query, key, value, num_heads):
    """Correct: a Python loop over heads, slicing each head's features, attention per head,
    then ``cat`` the outputs and ``stack`` the weights."""
    head_dim = query.shape[-1] // num_heads
    outputs, maps = [], []
    for head in range(num_heads):
        cols = slice(head * head_dim, (head + 1) * head_dim)
        out, w = scaled_dot_product_attention(query[..., cols], key[..., cols], value[..., cols])
        outputs.append(out)
        maps.append(w)
    return torch.cat(outputs, dim=-1), torch.stack(maps, dim=1)


def l02_wrong_view_without_transpose(query, key, value, num_heads):
    """Wrong: splits with ``view(B, H, T, Dh)`` directly, mixing positions and features."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(x.shape[0], num_heads, x.shape[1], head_dim)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def l02_wrong_interleaved_heads(query, key, value, num_heads):
    """Wrong: ``view(B, T, Dh, H)`` puts feature f in head f % H (interleaved) instead of
    f // Dh."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(x.shape[0], x.shape[1], head_dim, num_heads).permute(0, 3, 1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def l02_wrong_merge_without_transpose(query, key, value, num_heads):
    """Wrong: merges the heads with ``reshape(B, Tq, D)`` straight from [B, H, Tq, Dh]."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.reshape(batch, q_len, width), weights


def l02_wrong_weights_averaged(query, key, value, num_heads):
    """Wrong: returns the weights averaged over the heads, [B, Tq, Tk], instead of one map per
    head."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights.mean(dim=1)


def l02_wrong_scale_by_model_width(query, key, value, num_heads):
    """Wrong: writes the attention inline and scales by sqrt(D) instead of the head width
    sqrt(Dh)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    q, k, v = split(query), split(key), split(value)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(width), dim=-1)
    output = (weights @ v).transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def l02_wrong_key_as_value(query, key, value, num_heads):
    """Wrong: passes the keys where the values go (attends over ``key`` twice)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    k = split(key)
    output, weights = scaled_dot_product_attention(split(query), k, k)
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def l02_wrong_view_after_transpose(query, key, value, num_heads):
    """Wrong: merges with ``.view`` after ``transpose(1, 2)``, which is not contiguous: crashes."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.transpose(1, 2).view(batch, q_len, width), weights


def l02_wrong_query_length_for_keys(query, key, value, num_heads):
    """Wrong: splits keys and values with the query length Tq, so it crashes when Tk != Tq."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(batch, q_len, num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


# ---------------------------------------------------------------------------------------------
# Lab 03: sinusoidal positional encoding
# ---------------------------------------------------------------------------------------------


def l03_correct_power_slices(max_len, d_model):
    """Correct: angles ``pos / 10000 ** (2i / d)`` in float64, sines into ``0::2``, cosines
    into ``1::2`` (one fewer for an odd width), cast to float32."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [ceil(D/2)]
    angle = position / torch.pow(10000.0, two_i / d_model)  # [T, ceil(D/2)]
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return encoding.float()


def l03_correct_exp_log_stack(max_len, d_model):
    """Correct: frequencies ``exp(-2i ln(10000) / d)``, ``stack`` sin and cos as pairs, flatten
    and cut to ``d_model`` columns."""
    pairs = (d_model + 1) // 2
    freq = torch.exp(
        torch.arange(pairs, dtype=torch.float64) * (-2.0 * math.log(10000.0) / d_model)
    )  # [pairs]
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64), freq)  # [T, pairs]
    both = torch.stack([angle.sin(), angle.cos()], dim=-1)  # [T, pairs, 2]
    return both.reshape(max_len, 2 * pairs)[:, :d_model].to(torch.float32)


def l03_correct_per_column_where(max_len, d_model):
    """Correct: one angle per column from its pair index ``c // 2``, then ``torch.where`` on the
    column's parity picks sin or cos."""
    column = torch.arange(d_model)
    pair_start = (column // 2 * 2).to(torch.float64)  # 2i for column 2i and 2i + 1
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000.0 ** (-pair_start / d_model)
    even = (column % 2 == 0)[None, :]
    return torch.where(even, torch.sin(angle), torch.cos(angle)).to(torch.float32)


def l03_wrong_column_exponent(max_len, d_model):
    """Wrong: uses the column index c in the exponent, ``10000 ** (c / d)``, so each cosine
    column has its own frequency instead of its sine partner's."""
    column = torch.arange(d_model, dtype=torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000.0 ** (column / d_model)
    encoding = torch.empty(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle[:, 0::2])
    encoding[:, 1::2] = torch.cos(angle[:, 1::2])
    return encoding.float()


def l03_wrong_sin_cos_swapped(max_len, d_model):
    """Wrong: cosines in the even columns and sines in the odd ones."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.cos(angle)
    encoding[:, 1::2] = torch.sin(angle)[:, : d_model // 2]
    return encoding.float()


def l03_wrong_halves_not_interleaved(max_len, d_model):
    """Wrong: all sines in the first half of the columns and all cosines in the second
    (``cat``) instead of interleaved pairs."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.cat([torch.sin(angle), torch.cos(angle)[:, : d_model // 2]], dim=-1)
    return encoding.float()


def l03_wrong_float64_result(max_len, d_model):
    """Wrong: builds the encoding in float64 and forgets to return float32."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return encoding


def l03_wrong_positions_from_one(max_len, d_model):
    """Wrong: counts positions from 1 (``arange(1, max_len + 1)``) instead of 0."""
    position = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return encoding.float()


def l03_wrong_odd_width_crash(max_len, d_model):
    """Wrong: fills the odd columns with all ceil(d/2) cosines, a shape mismatch (crash) when
    ``d_model`` is odd."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)
    return encoding.float()


def l03_wrong_exponent_sign(max_len, d_model):
    """Wrong: the exp/log form with the sign of the exponent lost, so the positions are
    multiplied by ``10000 ** (2i / d)`` instead of divided."""
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    div_term = torch.exp(two_i * (math.log(10000.0) / d_model))
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * div_term
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return encoding.float()


# ---------------------------------------------------------------------------------------------
# Lab 04: masked attention
# ---------------------------------------------------------------------------------------------


def l04_correct_finfo_min_zero_rows(query, key, value, mask):
    """Correct: fill blocked scores with ``finfo.min``, softmax in at least float32, zero the
    rows whose keys are all blocked."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def l04_correct_neg_inf_nan_to_num(query, key, value, mask):
    """Correct: einsum scores taken to at least float32, ``-inf`` where blocked, softmax, then
    ``nan_to_num`` turns the all-blocked rows (0/0) into 0."""
    work = _softmax_dtype(query.dtype)
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    scores = torch.where(mask, scores.to(work), torch.tensor(-math.inf, dtype=work))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0).to(query.dtype)
    return weights @ value, weights


def l04_correct_manual_exp(query, key, value, mask):
    """Correct: hand-written softmax: exponentials of the allowed scores relative to their
    maximum, blocked ones exactly 0, a zero denominator replaced by 1."""
    work = _softmax_dtype(query.dtype)
    scores = (torch.matmul(query, key.mT) / math.sqrt(query.shape[-1])).to(work)
    allowed = mask.expand_as(scores) if mask.ndim <= scores.ndim else mask
    scores = scores.masked_fill(~allowed, -math.inf)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(scores - row_max)  # exp(-inf) = 0 where blocked
    total = exps.sum(dim=-1, keepdim=True)
    weights = (exps / torch.where(total > 0, total, torch.ones_like(total))).to(query.dtype)
    return torch.matmul(weights, value), weights


def l04_wrong_inverted_polarity(query, key, value, mask):
    """Wrong: blocks where the mask is True (the "1 = blocked" convention of some tutorials)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(mask.all(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def l04_wrong_neg_inf_gives_nan(query, key, value, mask):
    """Wrong: fills with ``-inf`` and does nothing about rows whose keys are all blocked: NaN."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return weights @ value, weights


def l04_wrong_mask_after_softmax(query, key, value, mask):
    """Wrong: multiplies the softmax by the mask afterwards without renormalising, so the
    remaining weights of a row no longer sum to 1."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = (weights * mask).to(query.dtype)
    return weights @ value, weights


def l04_wrong_uniform_empty_rows(query, key, value, mask):
    """Wrong: fills with ``finfo.min`` but never zeroes the all-blocked rows, which stay a
    uniform average over the blocked keys."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return weights @ value, weights


def l04_wrong_output_before_zeroing(query, key, value, mask):
    """Wrong: zeroes the all-blocked rows of the weights only after computing the output from
    them, so those queries' outputs are the uniform average, not 0."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    output = weights @ value
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return output, weights


def l04_wrong_mask_transposed(query, key, value, mask):
    """Wrong: transposes the mask, taking its rows for keys and its columns for queries."""
    mask = mask.transpose(-2, -1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def l04_wrong_half_softmax_not_cast_back(query, key, value, mask):
    """Wrong: takes the softmax in float32 and forgets to cast back, so a float16 query makes
    ``weights @ value`` mix dtypes and crash."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ value, weights


# ---------------------------------------------------------------------------------------------
# Lab 05: encoder layer wiring
# ---------------------------------------------------------------------------------------------


def l05_correct_if_else(x, layer, mask=None):
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


def l05_correct_sublayer_loop(x, layer, mask=None):
    """Correct: one loop over the two sub-layers, each given as (norm, function, dropout),
    with the norm placed by ``layer.norm_first``."""
    weights = None

    def attend(h):
        nonlocal weights
        out, weights = layer.self_attn(h, mask=mask)
        return out

    for norm, function, dropout in (
        (layer.norm1, attend, layer.dropout1),
        (layer.norm2, layer.feed_forward, layer.dropout2),
    ):
        if layer.norm_first:
            x = x + dropout(function(norm(x)))
        else:
            x = norm(x + dropout(function(x)))
    return x, weights


def l05_correct_two_helpers(x, layer, mask=None):
    """Correct: separate pre-norm and post-norm helpers, residuals with ``torch.add``."""

    def pre_norm(h):
        attended, w = layer.self_attn(layer.norm1(h), mask=mask)
        h = torch.add(h, layer.dropout1(attended))
        ff = layer.feed_forward(layer.norm2(h))
        return torch.add(h, layer.dropout2(ff)), w

    def post_norm(h):
        attended, w = layer.self_attn(h, mask=mask)
        h = layer.norm1(torch.add(h, layer.dropout1(attended)))
        ff = layer.feed_forward(h)
        return layer.norm2(torch.add(h, layer.dropout2(ff))), w

    return (pre_norm if layer.norm_first else post_norm)(x)


def l05_wrong_always_pre_norm(x, layer, mask=None):
    """Wrong: ignores ``layer.norm_first`` and always wires pre-norm."""
    attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
    x = x + layer.dropout1(attended)
    x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    return x, weights


def l05_wrong_always_post_norm(x, layer, mask=None):
    """Wrong: ignores ``layer.norm_first`` and always wires post-norm."""
    attended, weights = layer.self_attn(x, mask=mask)
    x = layer.norm1(x + layer.dropout1(attended))
    x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def l05_wrong_pre_norm_residual_normalised(x, layer, mask=None):
    """Wrong: in pre-norm, overwrites x with norm(x), so the residual adds the normalised
    input instead of the untouched one."""
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


def l05_wrong_norms_swapped(x, layer, mask=None):
    """Wrong: uses ``norm2`` for the attention and ``norm1`` for the feed-forward (seen only
    when the two LayerNorms hold different parameters)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm2(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm1(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm2(x + layer.dropout1(attended))
        x = layer.norm1(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def l05_wrong_dropout_after_residual(x, layer, mask=None):
    """Wrong: applies each dropout to the residual sum instead of to the sub-layer's output
    (seen in training mode)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = layer.dropout1(x + attended)
        x = layer.dropout2(x + layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(layer.dropout1(x + attended))
        x = layer.norm2(layer.dropout2(x + layer.feed_forward(x)))
    return x, weights


def l05_wrong_no_dropout(x, layer, mask=None):
    """Wrong: leaves out ``dropout1`` and ``dropout2`` (seen in training mode)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + attended
        x = x + layer.feed_forward(layer.norm2(x))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + attended)
        x = layer.norm2(x + layer.feed_forward(x))
    return x, weights


def l05_wrong_mask_not_passed(x, layer, mask=None):
    """Wrong: calls the attention without the mask, so padding is attended to."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x))
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def l05_wrong_ff_on_attention_output(x, layer, mask=None):
    """Wrong: feeds the feed-forward the attention's output instead of the updated x."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(attended)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(attended)))
    return x, weights


# ---------------------------------------------------------------------------------------------
# Lab 06: mean pooling, normalisation and search
# ---------------------------------------------------------------------------------------------


def _l06_normalize(x, dim=-1):
    """Scale to length 1 along dim; an eps float16 can hold keeps a zero vector at 0."""
    return F.normalize(x, dim=dim, eps=torch.finfo(x.dtype).tiny)


def _l06_pool_masked(hidden, mask):
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # [B, T, 1]
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def l06_correct_masked_mean_normalize(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: masked sum over the token count clamped at 1, ``F.normalize`` (with an eps that
    float16 can hold), ``@``, ``topk``."""
    eps = torch.finfo(query_hidden.dtype).tiny
    queries = F.normalize(_l06_pool_masked(query_hidden, query_mask), dim=-1, eps=eps)
    docs = F.normalize(_l06_pool_masked(doc_hidden, doc_mask), dim=-1, eps=eps)
    scores = queries @ docs.T  # [Q, N]
    return scores, scores.topk(k, dim=-1).indices


def l06_correct_einsum_argsort(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: einsum pooling, a zero vector where a sequence has no token, division by the
    clamped norm, einsum scores, stable descending ``argsort``."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype)
        total = torch.einsum("btd,bt->bd", hidden, m)
        count = m.sum(dim=1, keepdim=True)
        mean = torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total))
        length = mean.norm(dim=-1, keepdim=True)
        return mean / torch.where(length > 0, length, torch.ones_like(length))

    scores = torch.einsum("qd,nd->qn", pool(query_hidden, query_mask), pool(doc_hidden, doc_mask))
    top = torch.argsort(scores, dim=-1, descending=True, stable=True)[:, :k]
    return scores, top


def l06_correct_loop_boolean_index(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: a loop over sequences selecting the real tokens with a boolean index, each
    mean scaled by its own ``norm()`` (a zero vector left as it is), ``torch.mm`` and
    ``torch.sort``."""

    def pool(hidden, mask):
        rows = []
        for sequence, keep in zip(hidden, mask):
            real = sequence[keep.bool()]
            if len(real) == 0:
                rows.append(sequence.new_zeros(sequence.shape[-1]))
                continue
            mean = real.sum(dim=0) / len(real)
            rows.append(mean / mean.norm() if mean.norm() > 0 else mean)
        return torch.stack(rows)

    queries, docs = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    scores = torch.mm(queries, docs.t())
    top = torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :k]
    return scores, top


def l06_wrong_mean_includes_padding(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: mean-pools over every position, padding included (``hidden.mean(dim=1)``)."""
    queries = _l06_normalize(query_hidden.mean(dim=1), dim=-1)
    docs = _l06_normalize(doc_hidden.mean(dim=1), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_not_normalised(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: skips the scaling to length 1, so the scores are dot products, not cosines."""
    queries = _l06_pool_masked(query_hidden, query_mask)
    docs = _l06_pool_masked(doc_hidden, doc_mask)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_normalise_over_batch(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: normalises along dim 0 (each feature across the sequences) instead of each
    vector."""
    queries = _l06_normalize(_l06_pool_masked(query_hidden, query_mask), dim=0)
    docs = _l06_normalize(_l06_pool_masked(doc_hidden, doc_mask), dim=0)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_smallest_first(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: ``topk(..., largest=False)``: returns the k *worst* documents."""
    queries = _l06_normalize(_l06_pool_masked(query_hidden, query_mask), dim=-1)
    docs = _l06_normalize(_l06_pool_masked(doc_hidden, doc_mask), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1, largest=False).indices


def l06_wrong_empty_sequence_nan(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: divides by the raw token count, so an empty sequence pools to 0/0 = NaN."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(dim=1) / m.sum(dim=1)

    queries = _l06_normalize(pool(query_hidden, query_mask), dim=-1)
    docs = _l06_normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_mask_not_unsqueezed(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: multiplies [B, T, D] by the [B, T] mask without ``unsqueeze(-1)``: a broadcasting
    crash (or a wrong product if T happens to equal D)."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype)
        return (hidden * m).sum(dim=1) / m.sum(dim=1, keepdim=True).clamp(min=1e-9)

    queries = _l06_normalize(pool(query_hidden, query_mask), dim=-1)
    docs = _l06_normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_integer_mask_as_index(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: indexes each sequence with the 0/1 mask as given; an integer mask then picks
    positions 0 and 1 (gather) instead of the real tokens."""

    def pool(hidden, mask):
        rows = []
        for sequence, keep in zip(hidden, mask):
            real = sequence[keep]
            rows.append(real.mean(dim=0) if len(real) else sequence.new_zeros(sequence.shape[-1]))
        return torch.stack(rows)

    queries = _l06_normalize(pool(query_hidden, query_mask), dim=-1)
    docs = _l06_normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


def l06_wrong_float_mask_promotes(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: converts the masks with ``.float()``, which promotes float16 (and bfloat16)
    hidden states, so the scores come back float32."""

    def pool(hidden, mask):
        m = mask.float().unsqueeze(-1)
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    queries = _l06_normalize(pool(query_hidden, query_mask), dim=-1)
    docs = _l06_normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = queries @ docs.T
    return scores, scores.topk(k, dim=-1).indices


# ---------------------------------------------------------------------------------------------
# Lab 07: online softmax (attention one block of keys at a time)
# ---------------------------------------------------------------------------------------------


def l07_correct_running_state(query, key, value, block_size):
    """Correct: running max from ``finfo.min``, sum and accumulator, rescaled by
    ``exp(m - m_new)`` at every block, in at least float32."""
    work = _softmax_dtype(query.dtype)
    q = query.to(work) / math.sqrt(query.shape[-1])
    rows = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query.shape[-2], 1)
    row_max = torch.full(rows, torch.finfo(work).min, dtype=work)
    row_sum = torch.zeros(rows, dtype=work)
    acc = None
    for start in range(0, key.shape[-2], block_size):
        k_block = key[..., start : start + block_size, :].to(work)
        v_block = value[..., start : start + block_size, :].to(work)
        scores = q @ k_block.transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = p @ v_block if acc is None else acc * rescale + p @ v_block
        row_max = new_max
    return (acc / row_sum).to(query.dtype)


def l07_correct_einsum_neg_inf(query, key, value, block_size):
    """Correct: state starts at ``-inf``, 0 and 0; einsum scores scaled per block; the final
    division is by the running sum."""
    work = _softmax_dtype(query.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1])
    q, k, v = query.to(work), key.to(work), value.to(work)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = torch.full((*batch, q.shape[-2], 1), -math.inf, dtype=work)
    ell = torch.zeros((*batch, q.shape[-2], 1), dtype=work)
    a = torch.zeros((*batch, q.shape[-2], v.shape[-1]), dtype=work)
    num_keys = k.shape[-2]
    start = 0
    while start < num_keys:
        stop = min(start + block_size, num_keys)
        s = torch.einsum("...qd,...kd->...qk", q, k[..., start:stop, :]) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        factor = torch.exp(m - m_new)  # exp(-inf) = 0 at the first block
        e = torch.exp(s - m_new)
        ell = factor * ell + e.sum(dim=-1, keepdim=True)
        a = factor * a + torch.einsum("...qk,...kv->...qv", e, v[..., start:stop, :])
        m = m_new
        start = stop
    return (a / ell).to(query.dtype)


def l07_correct_first_block_init(query, key, value, block_size):
    """Correct: ``split`` the keys and values into blocks, initialise the state from the first
    block, fold in the others."""
    work = _softmax_dtype(query.dtype)
    q = query.to(work) * (query.shape[-1] ** -0.5)
    key_blocks = key.to(work).split(block_size, dim=-2)
    value_blocks = value.to(work).split(block_size, dim=-2)
    scores = torch.matmul(q, key_blocks[0].mT)
    row_max = scores.max(dim=-1, keepdim=True).values
    p = (scores - row_max).exp()
    row_sum = p.sum(dim=-1, keepdim=True)
    acc = torch.matmul(p, value_blocks[0])
    for k_block, v_block in zip(key_blocks[1:], value_blocks[1:]):
        scores = torch.matmul(q, k_block.mT)
        new_max = torch.maximum(row_max, scores.max(dim=-1, keepdim=True).values)
        alpha = (row_max - new_max).exp()
        p = (scores - new_max).exp()
        row_sum = alpha * row_sum + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + torch.matmul(p, v_block)
        row_max = new_max
    return (acc / row_sum).to(query.dtype)


def _l07_wrong_template(query, key, value, block_size, *, mistake):
    work = _softmax_dtype(query.dtype)
    if mistake == "float32":
        query, key, value = query.float(), key.float(), value.float()
        work = torch.float32
    scale = 1.0 if mistake == "no_scale" else math.sqrt(query.shape[-1])
    q = query.to(work) / scale
    rows = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query.shape[-2], 1)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    row_max = torch.full(rows, torch.finfo(work).min, dtype=work)
    row_sum = torch.zeros(rows, dtype=work)
    acc = torch.zeros((*batch, query.shape[-2], value.shape[-1]), dtype=work)
    num_keys = key.shape[-2]
    stop_at = num_keys - block_size + 1 if mistake == "drop_last" else num_keys
    for start in range(0, stop_at, block_size):
        end = start + block_size - 1 if mistake == "short_block" else start + block_size
        k_block = key[..., start:end, :].to(work)
        v_block = value[..., start:end, :].to(work)
        scores = q @ k_block.transpose(-2, -1)
        if mistake == "no_max":
            p = torch.exp(scores)
            row_sum = row_sum + p.sum(dim=-1, keepdim=True)
            acc = acc + p @ v_block
            continue
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        if mistake == "inverted_rescale":
            rescale = torch.exp(new_max - row_max)
        p = torch.exp(scores - new_max)
        sum_rescale = 1.0 if mistake == "no_sum_rescale" else rescale
        acc_rescale = 1.0 if mistake == "no_acc_rescale" else rescale
        row_sum = row_sum * sum_rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * acc_rescale + p @ v_block
        row_max = new_max
    output = acc / row_sum
    return output if mistake == "float32" else output.to(query.dtype)


def l07_wrong_acc_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the running sum but not the accumulator when the maximum grows."""
    return _l07_wrong_template(query, key, value, block_size, mistake="no_acc_rescale")


def l07_wrong_sum_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the accumulator but not the running sum when the maximum grows."""
    return _l07_wrong_template(query, key, value, block_size, mistake="no_sum_rescale")


def l07_wrong_inverted_rescale(query, key, value, block_size):
    """Wrong: the correction factor is upside down, ``exp(m_new - m)`` instead of
    ``exp(m - m_new)``."""
    return _l07_wrong_template(query, key, value, block_size, mistake="inverted_rescale")


def l07_wrong_last_partial_block_dropped(query, key, value, block_size):
    """Wrong: loops ``range(0, Tk - block_size + 1, block_size)``, so the last, shorter block
    of keys is never visited."""
    return _l07_wrong_template(query, key, value, block_size, mistake="drop_last")


def l07_wrong_no_max_subtraction(query, key, value, block_size):
    """Wrong: exponentiates the raw scores without subtracting a running maximum: right for
    small scores, inf/inf = NaN once a score passes ~88 (float32)."""
    return _l07_wrong_template(query, key, value, block_size, mistake="no_max")


def l07_wrong_no_scaling(query, key, value, block_size):
    """Wrong: forgets to divide the scores by sqrt(Dk)."""
    return _l07_wrong_template(query, key, value, block_size, mistake="no_scale")


def l07_wrong_float32_result(query, key, value, block_size):
    """Wrong: works with ``.float()`` copies and returns the float32 result, whatever the dtype
    of the query."""
    return _l07_wrong_template(query, key, value, block_size, mistake="float32")


def l07_wrong_block_slice_off_by_one(query, key, value, block_size):
    """Wrong: slices each block as ``start:start + block_size - 1``, skipping the last key of
    every block (and crashing on empty blocks when block_size is 1)."""
    return _l07_wrong_template(query, key, value, block_size, mistake="short_block")


# ---------------------------------------------------------------------------------------------
# Lab 08: one decoding step with a KV cache
# ---------------------------------------------------------------------------------------------


def l08_correct_view_transpose(attention, token, cache):
    """Correct: add the encoding of position t, project, ``view``/``transpose`` into heads,
    ``cat`` onto the cache, library attention, merge, ``out_proj``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, width)[t].to(dtype=token.dtype, device=token.device)

    def split(y):
        return y.view(batch, 1, heads, head_dim).transpose(1, 2)  # [B, H, 1, Dh]

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([values, split(attention.v_proj(x))], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    out = out.transpose(1, 2).reshape(batch, 1, heads * head_dim)
    return attention.out_proj(out), (keys, values)


def l08_correct_permute_einsum(attention, token, cache):
    """Correct: the position's row taken as ``[-1:]`` of the encoding, heads by ``reshape`` and
    ``permute``, hand-written attention with einsum, merge by ``permute``/``reshape``."""
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    position = keys.shape[-2]
    x = token + sinusoidal_encoding(position + 1, width)[-1:].to(token.dtype)  # [1, D]

    def split(y):
        return y.reshape(batch, 1, heads, head_dim).permute(0, 2, 1, 3)

    q, k, v = (split(proj(x)) for proj in (attention.q_proj, attention.k_proj, attention.v_proj))
    keys, values = torch.cat((keys, k), dim=-2), torch.cat((values, v), dim=-2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(head_dim)
    weights = torch.softmax(scores.to(_softmax_dtype(scores.dtype)), dim=-1).to(scores.dtype)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, values)
    out = out.permute(0, 2, 1, 3).reshape(batch, 1, width)
    return attention.out_proj(out), (keys, values)


def l08_correct_unflatten(attention, token, cache):
    """Correct: ``unflatten`` into heads, the cache extended with a list ``cat``, matmul
    attention with ``F.softmax``, ``flatten`` back."""
    old_keys, old_values = cache
    t = old_keys.size(2)
    encoding = sinusoidal_encoding(t + 1, token.size(-1))
    x = token + encoding[t].to(token)
    heads = attention.num_heads

    def split(y):
        return y.unflatten(-1, (heads, -1)).transpose(1, 2)  # [B, H, 1, Dh]

    q = split(attention.q_proj(x))
    keys = torch.cat([old_keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([old_values, split(attention.v_proj(x))], dim=2)
    weights = F.softmax(
        torch.matmul(q, keys.mT) / math.sqrt(q.size(-1)), dim=-1, dtype=_softmax_dtype(q.dtype)
    ).to(q.dtype)
    out = torch.matmul(weights, values).transpose(1, 2).flatten(2)  # [B, 1, D]
    return attention.out_proj(out), (keys, values)


def _l08_template(attention, token, cache, *, mistake):
    keys, values = cache
    batch, _, width = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    if mistake == "position_plus_one":
        encoding = sinusoidal_encoding(t + 2, width)[t + 1]
    else:
        encoding = sinusoidal_encoding(t + 1, width)[t]
    encoding = encoding.to(dtype=token.dtype, device=token.device)
    x = token if mistake == "no_position" else token + encoding
    kv_input = token if mistake == "position_on_query_only" else x

    def split(y):
        if mistake == "interleaved_heads":
            return y.reshape(batch, 1, head_dim, heads).permute(0, 3, 1, 2)
        return y.view(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    k, v = split(attention.k_proj(kv_input)), split(attention.v_proj(kv_input))
    cat_dim = 1 if mistake == "cat_on_heads" else 2
    new_keys = torch.cat([keys, k], dim=cat_dim)
    new_values = torch.cat([values, v], dim=cat_dim)
    if mistake == "attend_new_only":
        out, _ = scaled_dot_product_attention(q, k, v)
    else:
        out, _ = scaled_dot_product_attention(q, new_keys, new_values)
    out = out.transpose(1, 2).reshape(batch, 1, heads * head_dim)
    out = out if mistake == "no_out_proj" else attention.out_proj(out)
    if mistake == "old_cache_returned":
        return out, (keys, values)
    return out, (new_keys, new_values)


def l08_wrong_position_off_by_one(attention, token, cache):
    """Wrong: the new token gets the encoding of position t + 1 instead of t."""
    return _l08_template(attention, token, cache, mistake="position_plus_one")


def l08_wrong_no_position(attention, token, cache):
    """Wrong: never adds the sinusoidal encoding to the token."""
    return _l08_template(attention, token, cache, mistake="no_position")


def l08_wrong_position_on_query_only(attention, token, cache):
    """Wrong: adds the position to the input of the query projection only; keys and values
    are projected from the bare token."""
    return _l08_template(attention, token, cache, mistake="position_on_query_only")


def l08_wrong_interleaved_heads(attention, token, cache):
    """Wrong: splits into heads with ``reshape(B, 1, Dh, H)``, so feature f goes to head
    f % H."""
    return _l08_template(attention, token, cache, mistake="interleaved_heads")


def l08_wrong_cat_on_head_axis(attention, token, cache):
    """Wrong: appends the new key and value along dim 1 (heads) instead of dim 2 (positions):
    a shape crash."""
    return _l08_template(attention, token, cache, mistake="cat_on_heads")


def l08_wrong_attends_new_token_only(attention, token, cache):
    """Wrong: attends with the new token's key and value only, not the whole extended cache."""
    return _l08_template(attention, token, cache, mistake="attend_new_only")


def l08_wrong_returns_old_cache(attention, token, cache):
    """Wrong: returns the cache it was given, not the extended one."""
    return _l08_template(attention, token, cache, mistake="old_cache_returned")


def l08_wrong_no_out_proj(attention, token, cache):
    """Wrong: forgets ``attention.out_proj`` after merging the heads."""
    return _l08_template(attention, token, cache, mistake="no_out_proj")


# ---------------------------------------------------------------------------------------------
# Lab 09: grouped-query attention
# ---------------------------------------------------------------------------------------------


def l09_correct_repeat_interleave(query, key, value):
    """Correct: ``repeat_interleave`` each key/value head ``H // Hkv`` times on dim 1, then the
    library's attention."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(query, key, value)


def l09_correct_group_broadcast(query, key, value):
    """Correct: view the queries as [B, Hkv, group, Tq, Dh] and let the key/value heads
    broadcast over the group axis, then flatten back."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    q = query.reshape(batch, kv_heads, heads // kv_heads, q_len, head_dim)
    k, v = key.unsqueeze(2), value.unsqueeze(2)  # [B, Hkv, 1, Tk, Dh]
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    output = weights @ v
    return (
        output.reshape(batch, heads, q_len, value.shape[-1]),
        weights.reshape(batch, heads, q_len, key.shape[-2]),
    )


def l09_correct_loop_heads(query, key, value):
    """Correct: a loop over the query heads, head h reading key/value head h // group, results
    stacked on dim 1."""
    heads, kv_heads = query.shape[1], key.shape[1]
    group = heads // kv_heads
    outputs, maps = [], []
    for h in range(heads):
        out, w = scaled_dot_product_attention(query[:, h], key[:, h // group], value[:, h // group])
        outputs.append(out)
        maps.append(w)
    return torch.stack(outputs, dim=1), torch.stack(maps, dim=1)


def l09_wrong_tile_repeat(query, key, value):
    """Wrong: ``repeat`` tiles the key/value heads (0, 1, 0, 1, ...), so head h reads h % Hkv."""
    group = query.shape[1] // key.shape[1]
    return scaled_dot_product_attention(
        query, key.repeat(1, group, 1, 1), value.repeat(1, group, 1, 1)
    )


def l09_wrong_group_ratio_inverted(query, key, value):
    """Wrong: computes the group as Hkv // H (0 when Hkv < H), so the repeat leaves no heads
    and the attention fails on the shapes."""
    group = key.shape[1] // query.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(query, key, value)


def l09_wrong_no_repeat(query, key, value):
    """Wrong: attends straight with the Hkv key/value heads; broadcasting makes it right only
    for Hkv = 1 or Hkv = H and crashes otherwise."""
    return scaled_dot_product_attention(query, key, value)


def l09_wrong_average_query_heads(query, key, value):
    """Wrong: averages the query heads of each group to match the key/value heads, returning
    Hkv heads instead of H."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    q = query.reshape(batch, kv_heads, heads // kv_heads, q_len, head_dim).mean(dim=2)
    return scaled_dot_product_attention(q, key, value)


def l09_wrong_value_tiled(query, key, value):
    """Wrong: repeat_interleave for the keys but ``repeat`` (tiling) for the values, so the
    values come from the wrong head."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat(1, group, 1, 1)
    return scaled_dot_product_attention(query, key, value)


def l09_wrong_repeat_on_time_axis(query, key, value):
    """Wrong: repeats the keys and values on dim 2 (positions) instead of dim 1 (heads)."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=2)
    value = value.repeat_interleave(group, dim=2)
    return scaled_dot_product_attention(query, key, value)


def l09_wrong_divide_by_kv_heads(query, key, value):
    """Wrong: query head h reads key/value head h // Hkv instead of h // (H // Hkv)."""
    heads, kv_heads = query.shape[1], key.shape[1]
    index = torch.arange(heads) // kv_heads
    return scaled_dot_product_attention(query, key[:, index], value[:, index])


# ---------------------------------------------------------------------------------------------
# Lab 10: sliding-window mask and document mask
# ---------------------------------------------------------------------------------------------


def l10w_correct_tril_triu(size, window):
    """Correct: ``tril()`` of ones AND ``triu(-(window - 1))``."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 1))


def l10w_correct_distance(size, window):
    """Correct: the distance ``i - j`` from two ``arange``s, kept where 0 <= i - j < window."""
    distance = torch.arange(size)[:, None] - torch.arange(size)[None, :]
    return (distance >= 0) & (distance < window)


def l10w_correct_row_loop(size, window):
    """Correct: a loop over the rows filling keys max(0, i - window + 1) .. i."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, max(0, i - window + 1) : i + 1] = True
    return mask


def l10w_wrong_window_plus_one(size, window):
    """Wrong: off by one, sees ``window + 1`` keys (``i - j <= window``)."""
    distance = torch.arange(size)[:, None] - torch.arange(size)[None, :]
    return (distance >= 0) & (distance <= window)


def l10w_wrong_window_minus_one(size, window):
    """Wrong: off by one, ``triu(-(window - 2))`` (``i - j < window - 1``): sees window - 1
    keys, and nothing at all when window = 1."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 2))


def l10w_wrong_symmetric_band(size, window):
    """Wrong: a band ``|i - j| < window`` on both sides: not causal."""
    distance = torch.arange(size)[:, None] - torch.arange(size)[None, :]
    return distance.abs() < window


def l10w_wrong_transposed(size, window):
    """Wrong: rows and columns swapped (``triu`` and ``tril(window - 1)``): queries see the
    following keys."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.triu() & ones.tril(window - 1)


def l10w_wrong_float_dtype(size, window):
    """Wrong: built from ``torch.ones(size, size)`` (float) and returned as a float 0/1 tensor
    instead of ``torch.bool``."""
    ones = torch.ones(size, size)
    return ones.tril() * ones.triu(-(window - 1))


def l10d_correct_eq_and_causal(document_ids):
    """Correct: same-document comparison by broadcasting, AND the library's causal mask."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & causal_mask(document_ids.shape[0], device=document_ids.device)


def l10d_correct_positions(document_ids):
    """Correct: ``torch.eq`` of the ids and a ``j <= i`` comparison of two ``arange``s."""
    size = document_ids.numel()
    position = torch.arange(size, device=document_ids.device)
    causal = position[None, :] <= position[:, None]
    return torch.eq(document_ids.unsqueeze(1), document_ids.unsqueeze(0)).logical_and(causal)


def l10d_correct_block_diag(document_ids):
    """Correct: the runs from ``unique_consecutive`` counts, one causal block per run placed
    on the diagonal with ``block_diag``."""
    _, counts = torch.unique_consecutive(document_ids, return_counts=True)
    blocks = [torch.ones(c, c, dtype=torch.int64).tril() for c in counts.tolist()]
    return torch.block_diag(*blocks).bool()


def l10d_wrong_not_causal(document_ids):
    """Wrong: keeps only the same-document condition, so a token sees later tokens of its own
    document."""
    return document_ids[:, None] == document_ids[None, :]


def l10d_wrong_ordered_ids(document_ids):
    """Wrong: ``ids[i] >= ids[j]`` instead of equality (assumes increasing ids), letting later
    documents see earlier ones."""
    later_or_same = document_ids[:, None] >= document_ids[None, :]
    return later_or_same & causal_mask(document_ids.shape[0])


def l10d_wrong_bincount_blocks(document_ids):
    """Wrong: block sizes from ``bincount`` of the ids, i.e. ordered by id value, not by where
    each document sits (wrong when ids are not numbered in order)."""
    counts = torch.bincount(document_ids - document_ids.min())
    blocks = [torch.ones(c, c, dtype=torch.int64).tril() for c in counts.tolist() if c > 0]
    return torch.block_diag(*blocks).bool()


def l10d_wrong_upper_triangle(document_ids):
    """Wrong: ``j >= i`` (``triu``) instead of ``j <= i``: each query sees the future of its
    document."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).triu()


def l10d_wrong_excludes_self(document_ids):
    """Wrong: the causal part is ``tril(-1)``, strictly below the diagonal, so no token sees
    itself."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).tril(-1)


def l10d_wrong_integer_dtype(document_ids):
    """Wrong: combines the two conditions by multiplying integers and returns an int64 mask."""
    same = (document_ids[:, None] == document_ids[None, :]).long()
    return same * torch.ones_like(same).tril()


# ---------------------------------------------------------------------------------------------
# Lab 11: ALiBi slopes and bias
# ---------------------------------------------------------------------------------------------


def l11s_correct_torch(num_heads):
    """Correct: geometric sequences from ``2 ** (-8 * arange / n)``, the 2P sequence's
    ``[0::2]`` terms appended."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def l11s_correct_python_math(num_heads):
    """Correct: plain Python with ``bit_length`` for P and the odd terms k = 1, 3, 5, ... of
    the 2P sequence."""
    power = 1 << (num_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
    slopes += [2.0 ** (-8.0 * k / (2 * power)) for k in range(1, 2 * (num_heads - power), 2)]
    return torch.tensor(slopes, dtype=torch.float64)


def l11s_correct_alibi_repo(num_heads):
    """Correct: the ALiBi repository's recursion, start = ratio = 2 ** (-2 ** -(log2 n - 3))."""

    def power_of_two(n):
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    def slopes(n):
        if math.log2(n).is_integer():
            return power_of_two(n)
        closest = 2 ** math.floor(math.log2(n))
        return power_of_two(closest) + slopes(2 * closest)[0::2][: n - closest]

    return torch.tensor(slopes(num_heads), dtype=torch.float64)


def l11s_wrong_exponent_from_zero(num_heads):
    """Wrong: counts h from 0 in the exponent, ``2 ** (-8 h / H)``, so the first slope is 1."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(n, dtype=torch.float64) / n)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def l11s_wrong_even_terms(num_heads):
    """Wrong: appends the 2nd, 4th, ... terms of the 2P sequence (``[1::2]``), which repeat
    slopes already taken."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[1::2][: num_heads - power]])


def l11s_wrong_next_power_truncated(num_heads):
    """Wrong: for other head counts takes the sequence of the next power of two above H and
    keeps its first H slopes."""
    power = 2 ** int(math.ceil(math.log2(num_heads)))
    return (2.0 ** (-8.0 * torch.arange(1, power + 1, dtype=torch.float64) / power))[:num_heads]


def l11s_wrong_geometric_for_any_h(num_heads):
    """Wrong: uses ``2 ** (-8 (h + 1) / H)`` for every H, ignoring the rule for head counts
    that are not powers of two."""
    return 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)


def l11s_wrong_extra_first(num_heads):
    """Wrong: puts the extra slopes of the 2P sequence before the P slopes instead of after."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(2 * power)[0::2][: num_heads - power], geometric(power)])


def l11s_wrong_precedence(num_heads):
    """Wrong: operator precedence, ``2 ** (-8 (h + 1)) / H`` instead of
    ``2 ** (-8 (h + 1) / H)``."""

    def geometric(n):
        return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64)) / n

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def _l11_positions(q_len, kv_len):
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return query_pos, key_pos


def l11b_correct_broadcast(num_heads, q_len, kv_len):
    """Correct: my slopes [H, 1, 1] times ``j - i`` [Tq, Tk], queries the last Tq positions."""
    query_pos, key_pos = _l11_positions(q_len, kv_len)
    return l11s_correct_torch(num_heads)[:, None, None] * (key_pos[None, :] - query_pos[:, None])


def l11b_correct_einsum_library_slopes(num_heads, q_len, kv_len):
    """Correct: the library's ``alibi_slopes`` and the distances combined by an outer product
    (einsum), query row r at position Tk - Tq + r."""
    rows = torch.arange(q_len, dtype=torch.float64) + (kv_len - q_len)
    cols = torch.arange(kv_len, dtype=torch.float64)
    distance = cols.unsqueeze(0) - rows.unsqueeze(1)  # [Tq, Tk]
    return torch.einsum("h,qk->hqk", alibi_slopes(num_heads), distance)


def l11b_correct_loop(num_heads, q_len, kv_len):
    """Correct: loops over heads and query rows filling ``m_h * (j - i)`` with the
    python-math slopes."""
    slopes = l11s_correct_python_math(num_heads)
    bias = torch.empty(num_heads, q_len, kv_len, dtype=torch.float64)
    keys = torch.arange(kv_len, dtype=torch.float64)
    for h in range(num_heads):
        for r in range(q_len):
            i = kv_len - q_len + r
            bias[h, r] = slopes[h] * (keys - i)
    return bias


def l11b_wrong_sign_flipped(num_heads, q_len, kv_len):
    """Wrong: ``m_h * (i - j)``: the sign is flipped, rewarding distant keys."""
    query_pos, key_pos = _l11_positions(q_len, kv_len)
    return l11s_correct_torch(num_heads)[:, None, None] * (query_pos[:, None] - key_pos[None, :])


def l11b_wrong_slopes_unsqueezed_once(num_heads, q_len, kv_len):
    """Wrong: ``slopes[:, None]`` instead of ``[:, None, None]``: [H, 1] against [Tq, Tk]
    crashes, or gives a 2-D result when H happens to equal Tq."""
    query_pos, key_pos = _l11_positions(q_len, kv_len)
    return l11s_correct_torch(num_heads)[:, None] * (key_pos[None, :] - query_pos[:, None])


def l11b_wrong_heads_reversed(num_heads, q_len, kv_len):
    """Wrong: the slopes in reverse head order (``flip``), the gentlest slope on head 0."""
    query_pos, key_pos = _l11_positions(q_len, kv_len)
    slopes = l11s_correct_torch(num_heads).flip(0)
    return slopes[:, None, None] * (key_pos[None, :] - query_pos[:, None])


def l11b_wrong_simple_slopes(num_heads, q_len, kv_len):
    """Wrong: builds the bias on the plain formula ``2 ** (-8 (h + 1) / H)``, wrong for head
    counts that are not powers of two."""
    query_pos, key_pos = _l11_positions(q_len, kv_len)
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)
    return slopes[:, None, None] * (key_pos[None, :] - query_pos[:, None])


def l11b_wrong_ignores_kv_len(num_heads, q_len, kv_len):
    """Wrong: uses q_len for the keys too, returning [H, Tq, Tq] when decoding with a cache."""
    positions = torch.arange(q_len, dtype=torch.float64)
    distance = positions[None, :] - positions[:, None]
    return l11s_correct_torch(num_heads)[:, None, None] * distance


def l11b_wrong_no_outer_broadcast(num_heads, q_len, kv_len):
    """Wrong: subtracts ``arange(q_len)`` from ``arange(kv_len)`` without ``[:, None]``: an
    elementwise difference (zeros) that crashes when Tq != Tk."""
    distance = torch.arange(kv_len, dtype=torch.float64) - torch.arange(q_len, dtype=torch.float64)
    return l11s_correct_torch(num_heads)[:, None, None] * distance


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

LABS = {
    "01": {
        "check": "check_scaled_dot_product_attention",
        "correct": [
            l01_correct_matmul,
            l01_correct_einsum_manual_softmax,
            l01_correct_scaled_query,
        ],
        "wrong": [
            (
                l01_wrong_softmax_over_queries,
                "softmax over the queries (dim=-2) instead of the keys",
            ),
            (l01_wrong_scale_by_dk, "scores divided by Dk instead of sqrt(Dk)"),
            (l01_wrong_no_scaling, "no 1/sqrt(Dk) scaling"),
            (
                l01_wrong_scale_by_key_length,
                "scaled by sqrt(Tk) (number of keys) instead of sqrt(Dk)",
            ),
            (l01_wrong_transpose_fixed_axes, "key.transpose(1, 2): right only for 3-D inputs"),
            (l01_wrong_returns_scores, "returns the pre-softmax scores as the weights"),
            (
                l01_wrong_float32_result,
                "computes in float32 and returns float32 for float64 inputs",
            ),
        ],
    },
    "02": {
        "check": "check_multi_head_attention",
        "correct": [
            l02_correct_view_transpose,
            l02_correct_chunk_stack,
            l02_correct_loop_over_heads,
        ],
        "wrong": [
            (
                l02_wrong_view_without_transpose,
                "split with view(B, H, T, Dh), mixing positions and features",
            ),
            (l02_wrong_interleaved_heads, "split with view(B, T, Dh, H): feature f in head f % H"),
            (
                l02_wrong_merge_without_transpose,
                "merge reshapes [B, H, Tq, Dh] without transposing back",
            ),
            (l02_wrong_weights_averaged, "weights averaged over heads, [B, Tq, Tk]"),
            (l02_wrong_scale_by_model_width, "scores scaled by sqrt(D) instead of sqrt(Dh)"),
            (l02_wrong_key_as_value, "keys passed where the values go"),
            (
                l02_wrong_view_after_transpose,
                "merge with .view on a non-contiguous transpose: crash",
            ),
            (l02_wrong_query_length_for_keys, "keys/values split with Tq: crash when Tk != Tq"),
        ],
    },
    "03": {
        "check": "check_sinusoidal_encoding",
        "correct": [
            l03_correct_power_slices,
            l03_correct_exp_log_stack,
            l03_correct_per_column_where,
        ],
        "wrong": [
            (l03_wrong_column_exponent, "exponent uses the column index c instead of 2i"),
            (l03_wrong_sin_cos_swapped, "cos in even columns, sin in odd columns"),
            (l03_wrong_halves_not_interleaved, "sines in the first half, cosines in the second"),
            (l03_wrong_float64_result, "returns float64 instead of float32"),
            (l03_wrong_positions_from_one, "positions counted from 1"),
            (l03_wrong_odd_width_crash, "odd d_model: one cosine column too many, crash"),
            (l03_wrong_exponent_sign, "positions multiplied by 10000**(2i/d) instead of divided"),
        ],
    },
    "04": {
        "check": "check_masked_attention",
        "correct": [
            l04_correct_finfo_min_zero_rows,
            l04_correct_neg_inf_nan_to_num,
            l04_correct_manual_exp,
        ],
        "wrong": [
            (l04_wrong_inverted_polarity, "blocks where the mask is True (inverted polarity)"),
            (l04_wrong_neg_inf_gives_nan, "-inf fill, all-blocked rows become NaN"),
            (l04_wrong_mask_after_softmax, "mask multiplied after the softmax, no renormalisation"),
            (l04_wrong_uniform_empty_rows, "all-blocked rows left uniform instead of 0"),
            (l04_wrong_output_before_zeroing, "output computed before zeroing all-blocked rows"),
            (l04_wrong_mask_transposed, "mask transposed (rows taken for keys)"),
            (l04_wrong_half_softmax_not_cast_back, "float32 softmax not cast back: float16 crash"),
        ],
    },
    "05": {
        "check": "check_encoder_layer",
        "correct": [l05_correct_if_else, l05_correct_sublayer_loop, l05_correct_two_helpers],
        "wrong": [
            (l05_wrong_always_pre_norm, "ignores norm_first: always pre-norm"),
            (l05_wrong_always_post_norm, "ignores norm_first: always post-norm"),
            (l05_wrong_pre_norm_residual_normalised, "pre-norm residual adds norm(x) instead of x"),
            (l05_wrong_norms_swapped, "norm1 and norm2 swapped"),
            (l05_wrong_dropout_after_residual, "dropout applied to the residual sum"),
            (l05_wrong_no_dropout, "dropout1 and dropout2 left out"),
            (l05_wrong_mask_not_passed, "mask not passed to the attention"),
            (l05_wrong_ff_on_attention_output, "feed-forward applied to the attention output"),
        ],
    },
    "06": {
        "check": "check_pooling_and_search",
        "correct": [
            l06_correct_masked_mean_normalize,
            l06_correct_einsum_argsort,
            l06_correct_loop_boolean_index,
        ],
        "wrong": [
            (l06_wrong_mean_includes_padding, "mean over all positions, padding included"),
            (l06_wrong_not_normalised, "no scaling to length 1: dot products, not cosines"),
            (l06_wrong_normalise_over_batch, "normalised along dim 0 (across sequences)"),
            (l06_wrong_smallest_first, "topk with largest=False: worst documents"),
            (l06_wrong_empty_sequence_nan, "count not clamped: empty sequence gives NaN"),
            (l06_wrong_mask_not_unsqueezed, "mask not unsqueezed: broadcasting crash"),
            (
                l06_wrong_integer_mask_as_index,
                "integer 0/1 mask used as an index (gathers rows 0/1)",
            ),
            (l06_wrong_float_mask_promotes, "mask.float() promotes float16 scores to float32"),
        ],
    },
    "07": {
        "check": "check_online_softmax",
        "correct": [
            l07_correct_running_state,
            l07_correct_einsum_neg_inf,
            l07_correct_first_block_init,
        ],
        "wrong": [
            (l07_wrong_acc_not_rescaled, "accumulator not rescaled when the max grows"),
            (l07_wrong_sum_not_rescaled, "running sum not rescaled when the max grows"),
            (l07_wrong_inverted_rescale, "rescale factor exp(m_new - m) upside down"),
            (l07_wrong_last_partial_block_dropped, "last partial block of keys never visited"),
            (l07_wrong_no_max_subtraction, "no max subtraction: overflow to NaN on large scores"),
            (l07_wrong_no_scaling, "no 1/sqrt(Dk) scaling"),
            (l07_wrong_float32_result, "returns float32 whatever the query dtype"),
            (
                l07_wrong_block_slice_off_by_one,
                "blocks sliced start:start+block_size-1, a key skipped",
            ),
        ],
    },
    "08": {
        "check": "check_kv_cache_decoding",
        "correct": [l08_correct_view_transpose, l08_correct_permute_einsum, l08_correct_unflatten],
        "wrong": [
            (l08_wrong_position_off_by_one, "encoding of position t + 1 instead of t"),
            (l08_wrong_no_position, "no positional encoding added"),
            (
                l08_wrong_position_on_query_only,
                "position added for the query only, not keys/values",
            ),
            (l08_wrong_interleaved_heads, "heads split as (Dh, H): feature f in head f % H"),
            (l08_wrong_cat_on_head_axis, "cache appended on dim 1 (heads): crash"),
            (l08_wrong_attends_new_token_only, "attends to the new token only, not the cache"),
            (l08_wrong_returns_old_cache, "returns the old cache, not the extended one"),
            (l08_wrong_no_out_proj, "out_proj not applied"),
        ],
    },
    "09": {
        "check": "check_grouped_query_attention",
        "correct": [
            l09_correct_repeat_interleave,
            l09_correct_group_broadcast,
            l09_correct_loop_heads,
        ],
        "wrong": [
            (l09_wrong_tile_repeat, "repeat tiles the kv heads: head h reads h % Hkv"),
            (l09_wrong_group_ratio_inverted, "group = Hkv // H: crash"),
            (l09_wrong_no_repeat, "kv heads not repeated: crash unless Hkv in (1, H)"),
            (l09_wrong_average_query_heads, "query heads averaged per group: Hkv outputs"),
            (l09_wrong_value_tiled, "keys repeat_interleave'd but values tiled"),
            (l09_wrong_repeat_on_time_axis, "repeated on the position axis instead of heads"),
            (l09_wrong_divide_by_kv_heads, "head h reads kv head h // Hkv"),
        ],
    },
    "10-window": {
        "check": "check_sliding_window_mask",
        "correct": [l10w_correct_tril_triu, l10w_correct_distance, l10w_correct_row_loop],
        "wrong": [
            (l10w_wrong_window_plus_one, "off by one: window + 1 keys"),
            (l10w_wrong_window_minus_one, "off by one: window - 1 keys"),
            (l10w_wrong_symmetric_band, "symmetric band |i - j| < window: not causal"),
            (l10w_wrong_transposed, "transposed: queries see following keys"),
            (l10w_wrong_float_dtype, "float 0/1 mask instead of torch.bool"),
        ],
    },
    "10-document": {
        "check": "check_document_mask",
        "correct": [l10d_correct_eq_and_causal, l10d_correct_positions, l10d_correct_block_diag],
        "wrong": [
            (l10d_wrong_not_causal, "same document only, not causal"),
            (l10d_wrong_ordered_ids, "ids[i] >= ids[j] instead of equality"),
            (l10d_wrong_bincount_blocks, "block sizes from bincount: assumes ids in order"),
            (l10d_wrong_upper_triangle, "triu instead of tril: sees the future"),
            (l10d_wrong_excludes_self, "tril(-1): a token does not see itself"),
            (l10d_wrong_integer_dtype, "int64 mask instead of torch.bool"),
        ],
    },
    "11-slopes": {
        "check": "check_alibi_slopes",
        "correct": [l11s_correct_torch, l11s_correct_python_math, l11s_correct_alibi_repo],
        "wrong": [
            (l11s_wrong_exponent_from_zero, "exponent counts h from 0: first slope 1"),
            (l11s_wrong_even_terms, "appends the even terms [1::2] of the 2P sequence"),
            (l11s_wrong_next_power_truncated, "next power of two above H, truncated"),
            (l11s_wrong_geometric_for_any_h, "plain geometric formula for every H"),
            (l11s_wrong_extra_first, "extra 2P slopes placed before the P slopes"),
            (l11s_wrong_precedence, "precedence: 2**(-8(h+1)) / H"),
        ],
    },
    "11-bias": {
        "check": "check_alibi_bias",
        "correct": [l11b_correct_broadcast, l11b_correct_einsum_library_slopes, l11b_correct_loop],
        "wrong": [
            (l11b_wrong_sign_flipped, "m * (i - j): sign flipped"),
            (l11b_wrong_slopes_unsqueezed_once, "slopes[:, None] against [Tq, Tk]: crash"),
            (l11b_wrong_heads_reversed, "slopes in reverse head order"),
            (l11b_wrong_simple_slopes, "plain geometric slopes for non-power-of-two H"),
            (l11b_wrong_ignores_kv_len, "keys counted with q_len: [H, Tq, Tq]"),
            (l11b_wrong_no_outer_broadcast, "arange(Tk) - arange(Tq) without [:, None]"),
        ],
    },
}


# The mistake each wrong implementation's check named when the set was measured
# (blind_sets_measured.md), every one read and judged to be that implementation's mistake;
# test_checks_independent.py keeps it so. The others are answered with where they go wrong.
NAMED = {
    "l01_wrong_softmax_over_queries": "softmax_axis",
    "l01_wrong_scale_by_dk": "scaled_by_d_k",
    "l01_wrong_no_scaling": "no_scaling",
    "l01_wrong_scale_by_key_length": "scaled_by_sequence_length",
    "l01_wrong_transpose_fixed_axes": "fixed_axes",
    "l01_wrong_returns_scores": "returned_scores",
    "l01_wrong_float32_result": "wrong_dtype",
    "l02_wrong_view_without_transpose": "split_without_transpose",
    "l02_wrong_interleaved_heads": "heads_interleaved",
    "l02_wrong_merge_without_transpose": "merge_without_transpose",
    "l02_wrong_weights_averaged": "weights_averaged",
    "l02_wrong_scale_by_model_width": "scaled_by_sqrt_d_model",
    "l02_wrong_key_as_value": "weights_times_keys",
    "l02_wrong_view_after_transpose": "view_after_transpose",
    "l02_wrong_query_length_for_keys": "split_with_query_length",
    "l03_wrong_column_exponent": "frequency_column_index",
    "l03_wrong_sin_cos_swapped": "sin_cos_swapped",
    "l03_wrong_halves_not_interleaved": "halves_not_interleaved",
    "l03_wrong_float64_result": "wrong_dtype",
    "l03_wrong_positions_from_one": "positions_from_one",
    "l03_wrong_odd_width_crash": "odd_d_model",
    "l03_wrong_exponent_sign": "frequency_inverted",
    "l04_wrong_inverted_polarity": "mask_polarity",
    "l04_wrong_neg_inf_gives_nan": "nan_fully_masked",
    "l04_wrong_mask_after_softmax": "mask_after_softmax",
    "l04_wrong_uniform_empty_rows": "uniform_fully_masked",
    "l04_wrong_output_before_zeroing": "output_before_zeroing",
    "l04_wrong_mask_transposed": "mask_transposed",
    "l05_wrong_always_pre_norm": "pre_norm_instead_of_post_norm",
    "l05_wrong_always_post_norm": "post_norm_instead_of_pre_norm",
    "l05_wrong_pre_norm_residual_normalised": "pre_norm_residual_normalised",
    "l05_wrong_norms_swapped": "norms_swapped",
    "l05_wrong_dropout_after_residual": "dropout_on_residual_sum",
    "l05_wrong_no_dropout": "dropout_missing",
    "l05_wrong_mask_not_passed": "encoder_mask_ignored",
    "l06_wrong_mean_includes_padding": "mean_over_padding",
    "l06_wrong_not_normalised": "cosine_not_normalised",
    "l06_wrong_normalise_over_batch": "normalised_wrong_axis",
    "l06_wrong_smallest_first": "ranked_ascending",
    "l06_wrong_empty_sequence_nan": "empty_sequence_nan",
    "l06_wrong_mask_not_unsqueezed": "pool_mask_not_unsqueezed",
    "l06_wrong_float_mask_promotes": "wrong_dtype",
    "l07_wrong_acc_not_rescaled": "acc_not_rescaled",
    "l07_wrong_sum_not_rescaled": "sum_not_rescaled",
    "l07_wrong_inverted_rescale": "rescale_inverted",
    "l07_wrong_last_partial_block_dropped": "last_block_dropped",
    "l07_wrong_no_max_subtraction": "online_overflow",
    "l07_wrong_no_scaling": "no_scaling",
    "l07_wrong_float32_result": "wrong_dtype",
    "l07_wrong_block_slice_off_by_one": "block_slice_short",
    "l08_wrong_position_off_by_one": "positions_off_by_one",
    "l08_wrong_no_position": "no_positions",
    "l08_wrong_position_on_query_only": "positions_in_some_projections",
    "l08_wrong_interleaved_heads": "heads_interleaved",
    "l08_wrong_cat_on_head_axis": "cache_wrong_axis",
    "l08_wrong_attends_new_token_only": "attends_to_itself_only",
    "l08_wrong_returns_old_cache": "cache_not_returned",
    "l08_wrong_no_out_proj": "out_proj_missing",
    "l09_wrong_tile_repeat": "kv_heads_repeated_round_robin",
    "l09_wrong_group_ratio_inverted": "kv_heads_wrong_count",
    "l09_wrong_no_repeat": "kv_heads_wrong_count",
    "l09_wrong_average_query_heads": "query_heads_reduced",
    "l09_wrong_value_tiled": "keys_values_grouped_apart",
    "l09_wrong_repeat_on_time_axis": "repeated_along_wrong_axis",
    "l09_wrong_divide_by_kv_heads": "group_index_by_kv_heads",
    "l10w_wrong_window_plus_one": "window_one_too_wide",
    "l10w_wrong_window_minus_one": "window_one_too_narrow",
    "l10w_wrong_symmetric_band": "window_symmetric",
    "l10w_wrong_transposed": "window_transposed",
    "l10w_wrong_float_dtype": "mask_not_bool",
    "l10d_wrong_not_causal": "document_not_causal",
    "l10d_wrong_ordered_ids": "documents_compared_by_order",
    "l10d_wrong_bincount_blocks": "documents_sorted",
    "l10d_wrong_upper_triangle": "document_transposed",
    "l10d_wrong_excludes_self": "document_excludes_self",
    "l10d_wrong_integer_dtype": "mask_not_bool",
    "l11s_wrong_exponent_from_zero": "alibi_slopes_from_zero",
    "l11s_wrong_even_terms": "alibi_extra_wrong_terms",
    "l11s_wrong_next_power_truncated": "alibi_first_2p_terms",
    "l11s_wrong_geometric_for_any_h": "alibi_naive_non_power_of_two",
    "l11s_wrong_extra_first": "alibi_extra_first",
    "l11s_wrong_precedence": "alibi_slopes_precedence",
    "l11b_wrong_sign_flipped": "alibi_bias_sign",
    "l11b_wrong_slopes_unsqueezed_once": "alibi_bias_slopes_wrong_axis",
    "l11b_wrong_heads_reversed": "alibi_slopes_reversed",
    "l11b_wrong_simple_slopes": "alibi_naive_non_power_of_two",
    "l11b_wrong_ignores_kv_len": "alibi_bias_keys_from_q_len",
    "l11b_wrong_no_outer_broadcast": "alibi_bias_offsets_not_outer",
}
