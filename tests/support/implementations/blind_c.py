# ruff: noqa: E741, B905 - learner code kept as written (`l` is the lab's running sum)
"""Learner implementations (set C) of the eleven labs: correct ones and plausible mistakes.

Each lab's entry in ``LABS`` names its check, lists correct implementations and lists wrong
ones with a one-line description of the mistake. Every wrong implementation makes exactly one
mistake, and each one was seen to differ from the right result (or to crash) on some input the
lab's contract allows.

Mistakes considered and left out, because no input the contract allows tells them apart from a
right implementation:

- Lab 04: dividing by sqrt(Dk) *after* filling the blocked scores with the dtype's most
  negative value: the filled scores stay hugely negative, their exponentials still underflow to
  exactly 0, and the all-blocked rows are zeroed anyway.
- Lab 08: splitting the one new token into heads with ``view(B, H, 1, Dh)`` without the
  transpose, or merging the heads with ``reshape(B, 1, D)`` without transposing back: with a
  single query position (``Tq = 1``) the two layouts hold the same numbers in the same order.
- Lab 08: building the positional row as ``sinusoidal_encoding(T_max, D)[t]`` from a longer
  table instead of ``sinusoidal_encoding(t + 1, D)[t]``: row ``t`` does not depend on the length.
- Lab 11 (bias): lining the queries up top-left (query row r at position r instead of
  Tk - Tq + r), measuring every row's distance from the first query, counting key positions
  from 1, or BLOOM's ``m_h * j``: each differs from the right bias by a constant in each row,
  which the contract declares acceptable (the softmax ignores it).
- Lab 11 (bias): ``-m_h * |i - j|`` or ``m_h * (j - i)`` clamped at 0 above the diagonal: equal to
  the right bias on and below the diagonal, the only entries a causal model uses.
- Lab 11 (slopes): returning ``float32`` slopes instead of the library's ``float64``: the
  contract does not fix the dtype of the slopes, and the values agree to float32 precision.

How this set was written (2026-12-03): by a third writer, the same way as ``blind_a.py`` and
``blind_b.py`` (the labs' contracts and the library's non-check modules only), while the checks
were being changed on those two. Its role (``blind_sets_measured.md``): *held out* for both rounds;
no check was changed to name one of its mistakes. A check changed for it makes it a tuning set:
measure that change on a new set written blind.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask
from attention_lab.positional import sinusoidal_encoding

# ---------------------------------------------------------------------------------------------
# Lab 01: scaled dot-product attention
# ---------------------------------------------------------------------------------------------


def _softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def sdpa_correct_matmul(query, key, value):
    """Correct: matmul with the transposed keys, divide by sqrt(Dk), torch.softmax over keys."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return weights @ value, weights


def sdpa_correct_einsum(query, key, value):
    """Correct: einsum for the scores and the weighted sum, a hand-written stable softmax."""
    work = _softmax_dtype(query.dtype)
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    scores = scores.to(work)
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exps = shifted.exp()
    weights = (exps / exps.sum(dim=-1, keepdim=True)).to(query.dtype)
    output = torch.einsum("...qk,...kv->...qv", weights, value)
    return output, weights


def sdpa_wrong_scale_dk(query, key, value):
    """Wrong: divides the scores by Dk instead of sqrt(Dk)."""
    scores = query @ key.transpose(-2, -1) / query.shape[-1]
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_wrong_softmax_queries(query, key, value):
    """Wrong: softmax over dim=-2 (over the queries) instead of over the keys."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-2)
    return weights @ value, weights


def sdpa_wrong_scale_after_softmax(query, key, value):
    """Wrong: applies the softmax to the raw scores and divides the weights by sqrt(Dk) after."""
    scores = query @ key.transpose(-2, -1)
    weights = torch.softmax(scores, dim=-1) / math.sqrt(query.shape[-1])
    return weights @ value, weights


def sdpa_wrong_transpose_01(query, key, value):
    """Wrong: transposes the keys with transpose(0, 1), right only for 2-D inputs; crashes or
    mixes the batch for batched inputs."""
    scores = query @ key.transpose(0, 1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_wrong_float32(query, key, value):
    """Wrong: casts the scores and values to float32 "for stability" and never casts back, so
    float64 inputs get float32 results."""
    scores = (query @ key.transpose(-2, -1)).float() / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value.float(), weights


# ---------------------------------------------------------------------------------------------
# Lab 02: multi-head attention (split, attend, merge)
# ---------------------------------------------------------------------------------------------


def mha_correct_view_transpose(query, key, value, num_heads):
    """Correct: view [B, T, H, Dh], transpose to [B, H, T, Dh], library attention, transpose
    back and reshape to [B, Tq, D]."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def mha_correct_loop_chunks(query, key, value, num_heads):
    """Correct: a loop over the heads, each a chunk of the features, attended with a
    hand-written attention; outputs concatenated, weights stacked on dim 1."""
    outputs, maps = [], []
    for q, k, v in zip(
        query.chunk(num_heads, dim=-1), key.chunk(num_heads, dim=-1), value.chunk(num_heads, dim=-1)
    ):
        out, w = sdpa_correct_einsum(q, k, v)
        outputs.append(out)
        maps.append(w)
    return torch.cat(outputs, dim=-1), torch.stack(maps, dim=1)


def mha_wrong_split_no_transpose(query, key, value, num_heads):
    """Wrong: splits with view(B, H, T, Dh) straight from [B, T, D], so a "head" holds pieces
    of several positions instead of a slice of every position's features."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.reshape(x.shape[0], num_heads, x.shape[1], head_dim)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def mha_wrong_merge_no_transpose(query, key, value, num_heads):
    """Wrong: merges [B, H, Tq, Dh] with reshape(B, Tq, D) without transposing heads and
    positions back first."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return output.reshape(batch, q_len, width), weights


def mha_wrong_interleaved_heads(query, key, value, num_heads):
    """Wrong: splits with view(B, T, Dh, H), so feature f goes to head f % H instead of f // Dh
    (and merges back the same way)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], head_dim, num_heads).permute(0, 3, 1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.permute(0, 2, 3, 1).reshape(batch, q_len, width)
    return output, weights


def mha_wrong_scale_model_width(query, key, value, num_heads):
    """Wrong: writes its own per-head attention but scales the scores by sqrt(D), the model
    width, instead of sqrt(Dh)."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    q, k, v = split(query), split(key), split(value)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(width), dim=-1)
    output = (weights @ v).transpose(1, 2).reshape(batch, q_len, width)
    return output, weights


def mha_wrong_view_after_transpose(query, key, value, num_heads):
    """Wrong: merges the heads with .view on the transposed (non-contiguous) output, which
    raises a RuntimeError as soon as there is more than one head and position."""
    batch, q_len, width = query.shape
    head_dim = width // num_heads

    def split(x):
        return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    output = output.transpose(1, 2).view(batch, q_len, width)
    return output, weights


# ---------------------------------------------------------------------------------------------
# Lab 03: sinusoidal positional encoding
# ---------------------------------------------------------------------------------------------


def pe_correct_slices(max_len, d_model):
    """Correct: float64 angles pos / 10000 ** (2i / D) by broadcasting, sines into the even
    columns, cosines into the odd ones (one fewer for an odd D), cast to float32."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = angle.sin()
    encoding[:, 1::2] = angle.cos()[:, : d_model // 2]
    return encoding.float()


def pe_correct_stack(max_len, d_model):
    """Correct: frequencies exp(-ln(10000) * 2i / D), (sin, cos) stacked on a new last axis and
    flattened so they interleave, the surplus cosine of an odd D cut off."""
    pairs = (d_model + 1) // 2
    freq = torch.exp(
        torch.arange(pairs, dtype=torch.float64) * (-2.0 * math.log(10000.0) / d_model)
    )
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64), freq)
    both = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)
    return both.reshape(max_len, 2 * pairs)[:, :d_model].to(torch.float32)


def pe_wrong_i_not_2i(max_len, d_model):
    """Wrong: uses the pair index i instead of 2i in the exponent, 10000 ** (i / D)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float64)
    angle = position / 10000.0 ** (i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = angle.sin()
    encoding[:, 1::2] = angle.cos()[:, : d_model // 2]
    return encoding.float()


def pe_wrong_sin_cos_swapped(max_len, d_model):
    """Wrong: cosines in the even columns and sines in the odd ones."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = angle.cos()
    encoding[:, 1::2] = angle.sin()[:, : d_model // 2]
    return encoding.float()


def pe_wrong_halves(max_len, d_model):
    """Wrong: concatenates all sines then all cosines (first half, second half) instead of
    interleaving them column by column."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.cat([angle.sin(), angle.cos()[:, : d_model // 2]], dim=1)
    return encoding.float()


def pe_wrong_odd_width_crash(max_len, d_model):
    """Wrong: writes every pair's cosine into the odd columns, which for an odd D has one
    column fewer than there are angles: a shape error."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = angle.sin()
    encoding[:, 1::2] = angle.cos()
    return encoding.float()


def pe_wrong_float64(max_len, d_model):
    """Wrong: computes everything in float64 and returns float64, not float32."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = angle.sin()
    encoding[:, 1::2] = angle.cos()[:, : d_model // 2]
    return encoding


# ---------------------------------------------------------------------------------------------
# Lab 04: masked attention
# ---------------------------------------------------------------------------------------------


def masked_correct_fill_min(query, key, value, mask):
    """Correct: blocked scores filled with the dtype's most negative value, softmax in at least
    float32, all-blocked rows zeroed."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def masked_correct_manual(query, key, value, mask):
    """Correct: hand-written softmax in float32 or wider: -inf on blocked keys, a row maximum
    replaced by 0 where the row is all blocked, exponentials, and a division that gives 0 for an
    empty row."""
    work = _softmax_dtype(query.dtype)
    scores = (query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])).to(work)
    scores = torch.where(mask, scores, torch.tensor(-math.inf, dtype=work))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(scores - row_max)
    total = exps.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, exps / total.clamp_min(1.0), torch.zeros_like(exps))
    weights = weights.to(query.dtype)
    return weights @ value, weights


def masked_wrong_neg_inf(query, key, value, mask):
    """Wrong: fills blocked scores with -inf and stops there: a row with every key blocked
    becomes NaN."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return weights @ value, weights


def masked_wrong_polarity(query, key, value, mask):
    """Wrong: reads the mask as True = blocked, so it blocks exactly the keys it should keep."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(mask.all(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def masked_wrong_multiply_after_softmax(query, key, value, mask):
    """Wrong: softmax over all keys, then multiplies the weights by the mask without
    renormalising, so the kept weights of a row no longer sum to 1."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = (weights * mask).to(query.dtype)
    return weights @ value, weights


def masked_wrong_minus_1e9(query, key, value, mask):
    """Wrong: fills blocked scores with the constant -1e9, which float16 cannot hold
    (masked_fill raises an overflow error); fine in float32 and float64."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype))
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(query.dtype)
    return weights @ value, weights


def masked_wrong_empty_rows_uniform(query, key, value, mask):
    """Wrong: fills with the dtype's minimum but forgets the all-blocked rows, which get a
    uniform softmax (weights 1/Tk, output the mean value) instead of 0."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    return weights @ value, weights


# ---------------------------------------------------------------------------------------------
# Lab 05: encoder layer
# ---------------------------------------------------------------------------------------------


def encoder_correct_branches(x, layer, mask=None):
    """Correct: an if/else on norm_first with the two arrangements written out."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_correct_sublayer_helper(x, layer, mask=None):
    """Correct: one helper that wraps any sub-layer with its norm, dropout and residual in the
    arrangement norm_first asks for, applied to attention then feed-forward."""
    captured = {}

    def attention(h):
        out, captured["weights"] = layer.self_attn(h, mask=mask)
        return out

    def sublayer(h, fn, norm, drop):
        if layer.norm_first:
            return h + drop(fn(norm(h)))
        return norm(h + drop(fn(h)))

    x = sublayer(x, attention, layer.norm1, layer.dropout1)
    x = sublayer(x, layer.feed_forward, layer.norm2, layer.dropout2)
    return x, captured["weights"]


def encoder_wrong_prenorm_residual_normed(x, layer, mask=None):
    """Wrong: in pre-norm, overwrites x with norm(x) and adds the sub-layer to that, so the
    residual path carries the normalised x instead of the untouched one."""
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


def encoder_wrong_ignores_norm_first(x, layer, mask=None):
    """Wrong: always runs the post-norm arrangement, whatever layer.norm_first says."""
    attended, weights = layer.self_attn(x, mask=mask)
    x = layer.norm1(x + layer.dropout1(attended))
    x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_wrong_dropout_after_residual(x, layer, mask=None):
    """Wrong: applies each dropout to the residual sum instead of to the sub-layer's output
    before it is added (visible only in training mode)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = layer.dropout1(x + attended)
        x = layer.dropout2(x + layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(layer.dropout1(x + attended))
        x = layer.norm2(layer.dropout2(x + layer.feed_forward(x)))
    return x, weights


def encoder_wrong_norms_swapped(x, layer, mask=None):
    """Wrong: uses norm2 around the attention and norm1 around the feed-forward."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm2(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm1(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm2(x + layer.dropout1(attended))
        x = layer.norm1(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_wrong_mask_dropped(x, layer, mask=None):
    """Wrong: calls the attention without passing the mask on, so padding is attended to."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x))
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


# ---------------------------------------------------------------------------------------------
# Lab 06: pooling and search
# ---------------------------------------------------------------------------------------------


def search_correct_normalize(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: masked sum over real tokens divided by the clamped count, F.normalize, a matrix
    product for the cosines, torch.topk; pooled in at least float32."""

    def pool(hidden, mask):
        weights = mask.to(hidden.dtype).unsqueeze(-1)  # [N, T, 1]
        total = (hidden * weights).sum(dim=1)
        count = weights.sum(dim=1).clamp(min=1e-9)
        return total / count

    # In float16 the clamps (1e-9 here, 1e-12 in F.normalize) underflow to 0: work in float32.
    work = torch.promote_types(query_hidden.dtype, torch.float32)
    q = F.normalize(pool(query_hidden.to(work), query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden.to(work), doc_mask), dim=-1)
    scores = (q @ d.T).to(query_hidden.dtype)
    return scores, torch.topk(scores, k, dim=-1).indices


def search_correct_einsum(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: pooling with einsum over a boolean mask and a count kept at least 1, lengths
    scaled by hand (a zero vector stays zero), einsum for the cosines; float32 or float64
    working precision."""

    def pool(hidden, mask):
        keep = mask.bool().to(hidden.dtype)  # [N, T]
        total = torch.einsum("ntd,nt->nd", hidden, keep)
        count = keep.sum(dim=1, keepdim=True)
        return torch.where(count > 0, total / count.clamp_min(1.0), torch.zeros_like(total))

    def unit(v):
        length = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        return v / length.clamp_min(1e-12)

    work = torch.float64 if query_hidden.dtype == torch.float64 else torch.float32
    q = unit(pool(query_hidden.to(work), query_mask))
    d = unit(pool(doc_hidden.to(work), doc_mask))
    scores = torch.einsum("qd,nd->qn", q, d).to(query_hidden.dtype)
    top = scores.topk(k, dim=1).indices
    return scores, top


def search_wrong_mean_with_padding(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: mean-pools over every position, padding included (hidden.mean(dim=1))."""
    q = F.normalize(query_hidden.mean(dim=1), dim=-1)
    d = F.normalize(doc_hidden.mean(dim=1), dim=-1)
    scores = q @ d.T
    return scores, torch.topk(scores, k, dim=-1).indices


def search_wrong_no_clamp(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: divides the masked sum by the real-token count without guarding against 0, so an
    empty sequence pools to NaN."""

    def pool(hidden, mask):
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1)

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, torch.topk(scores, k, dim=-1).indices


def search_wrong_no_normalise(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: skips scaling the pooled vectors to length 1, so the scores are dot products,
    not cosines (and the ranking favours long vectors)."""

    def pool(hidden, mask):
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    scores = pool(query_hidden, query_mask) @ pool(doc_hidden, doc_mask).T
    return scores, torch.topk(scores, k, dim=-1).indices


def search_wrong_ascending(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: ranks with argsort, which sorts ascending, and keeps the first k: the k worst
    documents."""

    def pool(hidden, mask):
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.argsort(dim=-1)[:, :k]


def search_wrong_normalise_batch_axis(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: F.normalize(..., dim=0) scales each feature across the batch of sequences instead
    of each pooled vector to length 1."""

    def pool(hidden, mask):
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    q = F.normalize(pool(query_hidden, query_mask), dim=0)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=0)
    scores = q @ d.T
    return scores, torch.topk(scores, k, dim=-1).indices


# ---------------------------------------------------------------------------------------------
# Lab 07: online softmax
# ---------------------------------------------------------------------------------------------


def online_correct_loop(query, key, value, block_size):
    """Correct: the update as the lab states it, running quantities in float32 or wider,
    started at the dtype's minimum, 0 and 0."""
    work = _softmax_dtype(query.dtype)
    q = query.to(work) / math.sqrt(query.shape[-1])
    tk = key.shape[-2]
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    row_max = torch.full((*batch, query.shape[-2], 1), torch.finfo(work).min, dtype=work)
    row_sum = torch.zeros((*batch, query.shape[-2], 1), dtype=work)
    acc = torch.zeros((*batch, query.shape[-2], value.shape[-1]), dtype=work)
    for start in range(0, tk, block_size):
        k = key[..., start : start + block_size, :].to(work)
        v = value[..., start : start + block_size, :].to(work)
        scores = q @ k.transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v
        row_max = new_max
    return (acc / row_sum).to(query.dtype)


def online_correct_split(query, key, value, block_size):
    """Correct: blocks from torch.split, einsum for scores and values, the running maximum
    started at -inf (the first rescale is exp(-inf) = 0)."""
    work = _softmax_dtype(query.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1])
    q = query.to(work)
    row_max = row_sum = acc = None
    for k, v in zip(key.split(block_size, dim=-2), value.split(block_size, dim=-2)):
        scores = torch.einsum("...qd,...kd->...qk", q, k.to(work)) * scale
        block_max = scores.amax(dim=-1, keepdim=True)
        if row_max is None:
            row_max = torch.full_like(block_max, -math.inf)
            row_sum = torch.zeros_like(block_max)
            acc = 0.0
        new_max = torch.maximum(row_max, block_max)
        alpha = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = alpha * row_sum + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + torch.einsum("...qk,...kv->...qv", p, v.to(work))
        row_max = new_max
    return (acc / row_sum).to(query.dtype)


def online_wrong_acc_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the running sum when the maximum grows but not the accumulated values."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), torch.finfo(q.dtype).min, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        scores = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - new_max)
        row_sum = row_sum * torch.exp(row_max - new_max) + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ value[..., start : start + block_size, :]
        row_max = new_max
    return acc / row_sum


def online_wrong_sum_not_rescaled(query, key, value, block_size):
    """Wrong: rescales the accumulated values when the maximum grows but not the running sum."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), torch.finfo(q.dtype).min, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        scores = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - new_max)
        row_sum = row_sum + p.sum(dim=-1, keepdim=True)
        acc = acc * torch.exp(row_max - new_max) + p @ value[..., start : start + block_size, :]
        row_max = new_max
    return acc / row_sum


def online_wrong_rescale_sign(query, key, value, block_size):
    """Wrong: rescales by exp(m_new - m) instead of exp(m - m_new) whenever the maximum grows
    (the running quantities start from the first block)."""
    q = query / math.sqrt(query.shape[-1])
    row_max = row_sum = acc = None
    for start in range(0, key.shape[-2], block_size):
        scores = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        v = value[..., start : start + block_size, :]
        block_max = scores.amax(dim=-1, keepdim=True)
        if row_max is None:
            p = torch.exp(scores - block_max)
            row_max, row_sum, acc = block_max, p.sum(dim=-1, keepdim=True), p @ v
            continue
        new_max = torch.maximum(row_max, block_max)
        rescale = torch.exp(new_max - row_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v
        row_max = new_max
    return acc / row_sum


def online_wrong_drops_last_block(query, key, value, block_size):
    """Wrong: loops over Tk // block_size full blocks only, dropping the shorter last block."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), torch.finfo(q.dtype).min, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=q.dtype)
    for b in range(key.shape[-2] // block_size):
        block = slice(b * block_size, (b + 1) * block_size)
        scores = q @ key[..., block, :].transpose(-2, -1)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ value[..., block, :]
        row_max = new_max
    return acc / row_sum


def online_wrong_max_updated_first(query, key, value, block_size):
    """Wrong: updates row_max before computing the rescale factor, so the factor is always
    exp(0) = 1 and nothing is ever rescaled."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), torch.finfo(q.dtype).min, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros((*q.shape[:-1], value.shape[-1]), dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        scores = q @ key[..., start : start + block_size, :].transpose(-2, -1)
        row_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - row_max)
        p = torch.exp(scores - row_max)
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start : start + block_size, :]
    return acc / row_sum


# ---------------------------------------------------------------------------------------------
# Lab 08: one decoding step with a KV cache
# ---------------------------------------------------------------------------------------------


def _position_row(token, t):
    return sinusoidal_encoding(t + 1, token.shape[-1])[t].to(token.dtype)


def decode_correct_view(attention, token, cache):
    """Correct: position row t added, projections split with view/transpose, keys and values
    appended with torch.cat on the time axis, library attention, heads merged, out_proj."""
    keys, values = cache
    batch = token.shape[0]
    heads, head_dim = attention.num_heads, attention.head_dim
    x = token + _position_row(token, keys.shape[2])

    def split(y):
        return y.view(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    keys = torch.cat([keys, split(attention.k_proj(x))], dim=2)
    values = torch.cat([values, split(attention.v_proj(x))], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    out = out.transpose(1, 2).reshape(batch, 1, heads * head_dim)
    return attention.out_proj(out), (keys, values)


def decode_correct_functional(attention, token, cache):
    """Correct: F.linear with each projection's weight and bias, unflatten into heads, einsum
    attention with a hand-written softmax, flatten back, out_proj."""
    keys, values = cache
    t = keys.shape[-2]
    x = token + sinusoidal_encoding(t + 1, token.shape[-1])[t].to(token.dtype)
    heads, head_dim = attention.num_heads, attention.head_dim

    def project(layer):
        y = F.linear(x, layer.weight, layer.bias)  # [B, 1, H*Dh]
        return y.unflatten(-1, (heads, head_dim)).permute(0, 2, 1, 3)  # [B, H, 1, Dh]

    q = project(attention.q_proj)
    keys = torch.cat((keys, project(attention.k_proj)), dim=-2)
    values = torch.cat((values, project(attention.v_proj)), dim=-2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(head_dim)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(q.dtype)
    out = torch.einsum("bhqk,bhkd->bqhd", weights, values).flatten(-2)  # [B, 1, H*Dh]
    return attention.out_proj(out), (keys, values)


def decode_correct_preallocated(attention, token, cache):
    """Correct: a new [B, H, t + 1, Dh] cache filled by copying the old one and writing the new
    row at index t, and the attention computed head by head in a loop."""
    old_keys, old_values = cache
    batch, heads, t, head_dim = old_keys.shape
    x = token + sinusoidal_encoding(t + 1, token.shape[-1])[t : t + 1].to(token.dtype)
    q = attention.q_proj(x).reshape(batch, heads, head_dim)  # one position: [B, H, Dh]
    k = attention.k_proj(x).reshape(batch, heads, head_dim)
    v = attention.v_proj(x).reshape(batch, heads, head_dim)
    keys = old_keys.new_empty(batch, heads, t + 1, head_dim)
    values = old_values.new_empty(batch, heads, t + 1, head_dim)
    keys[:, :, :t], values[:, :, :t] = old_keys, old_values
    keys[:, :, t], values[:, :, t] = k, v
    outs = []
    for h in range(heads):
        out, _ = scaled_dot_product_attention(q[:, h : h + 1], keys[:, h], values[:, h])
        outs.append(out)  # [B, 1, Dh]
    return attention.out_proj(torch.cat(outs, dim=-1)), (keys, values)


def _decode_template(
    attention,
    token,
    cache,
    *,
    position=None,
    cat_dim=2,
    attend_new_only=False,
    out_proj=True,
    value_proj=None,
    scale_width=None,
):
    """A decoding step with one switchable mistake (shared by the wrong implementations)."""
    keys, values = cache
    batch = token.shape[0]
    heads, head_dim = attention.num_heads, attention.head_dim
    t = keys.shape[2]
    x = token if position is None else token + position(token, t)

    def split(y):
        return y.view(batch, 1, heads, head_dim).transpose(1, 2)

    q = split(attention.q_proj(x))
    k = split(attention.k_proj(x))
    v = split((value_proj or attention.v_proj)(x))
    keys = torch.cat([keys, k], dim=cat_dim)
    values = torch.cat([values, v], dim=cat_dim)
    use_k, use_v = (k, v) if attend_new_only else (keys, values)
    scale = math.sqrt(scale_width if scale_width is not None else head_dim)
    weights = torch.softmax(q @ use_k.transpose(-2, -1) / scale, dim=-1)
    out = (weights @ use_v).transpose(1, 2).reshape(batch, 1, heads * head_dim)
    return (attention.out_proj(out) if out_proj else out), (keys, values)


def decode_wrong_position_zero(attention, token, cache):
    """Wrong: adds the encoding of position 0 at every step (the token's index in its own
    one-token input) instead of position t."""
    return _decode_template(attention, token, cache, position=lambda tok, t: _position_row(tok, 0))


def decode_wrong_no_position(attention, token, cache):
    """Wrong: never adds the positional encoding to the token."""
    return _decode_template(attention, token, cache, position=None)


def decode_wrong_position_plus_one(attention, token, cache):
    """Wrong: off by one in the position, adds the encoding of t + 1 (the cache length after
    appending) instead of t."""
    return _decode_template(
        attention, token, cache, position=lambda tok, t: _position_row(tok, t + 1)
    )


def decode_wrong_cat_heads_axis(attention, token, cache):
    """Wrong: appends the new key and value along dim 1 (the heads) instead of dim 2 (time):
    torch.cat raises a size mismatch."""
    return _decode_template(attention, token, cache, position=_position_row, cat_dim=1)


def decode_wrong_attends_new_only(attention, token, cache):
    """Wrong: appends to the cache but attends with the new token's own key and value instead of
    the whole cache, so every output is just its own value."""
    return _decode_template(attention, token, cache, position=_position_row, attend_new_only=True)


def decode_wrong_no_out_proj(attention, token, cache):
    """Wrong: returns the merged heads without applying attention.out_proj."""
    return _decode_template(attention, token, cache, position=_position_row, out_proj=False)


def decode_wrong_values_from_k_proj(attention, token, cache):
    """Wrong: copy-paste slip, computes the values with attention.k_proj instead of v_proj."""
    return _decode_template(
        attention, token, cache, position=_position_row, value_proj=attention.k_proj
    )


def decode_wrong_scale_model_width(attention, token, cache):
    """Wrong: scales the scores by sqrt(D), the model width, instead of sqrt(Dh)."""
    return _decode_template(
        attention, token, cache, position=_position_row, scale_width=token.shape[-1]
    )


# ---------------------------------------------------------------------------------------------
# Lab 09: grouped-query attention
# ---------------------------------------------------------------------------------------------


def gqa_correct_repeat_interleave(query, key, value):
    """Correct: each key/value head repeated for its group with repeat_interleave on dim 1,
    then the library's attention."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(query, key, value)


def gqa_correct_grouped_einsum(query, key, value):
    """Correct: queries reshaped to [B, Hkv, group, Tq, Dh] and attended against the unrepeated
    keys [B, Hkv, Tk, Dh] with einsum, then reshaped back to H heads."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    q = query.reshape(batch, kv_heads, group, q_len, head_dim)
    scores = torch.einsum("bngqd,bnkd->bngqk", q, key) / math.sqrt(head_dim)
    weights = torch.softmax(scores, dim=-1, dtype=_softmax_dtype(scores.dtype)).to(query.dtype)
    output = torch.einsum("bngqk,bnkd->bngqd", weights, value)
    k_len = key.shape[2]
    return (
        output.reshape(batch, heads, q_len, head_dim),
        weights.reshape(batch, heads, q_len, k_len),
    )


def gqa_correct_index(query, key, value):
    """Correct: an index tensor h // group picks each query head's key/value head, then a
    hand-written attention."""
    heads, kv_heads = query.shape[1], key.shape[1]
    index = torch.arange(heads, device=query.device) // (heads // kv_heads)
    k = key.index_select(1, index)
    v = value[:, index]
    return sdpa_correct_matmul(query, k, v)


def gqa_wrong_repeat_tiles(query, key, value):
    """Wrong: key.repeat(1, group, 1, 1) tiles the heads (0, 1, 0, 1, ...), so query head h
    reads key/value head h % Hkv instead of h // group."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat(1, group, 1, 1)
    value = value.repeat(1, group, 1, 1)
    return scaled_dot_product_attention(query, key, value)


def gqa_wrong_group_axis_first(query, key, value):
    """Wrong: reshapes the queries to [B, group, Hkv, Tq, Dh] (group axis first) and broadcasts
    the keys over it, so consecutive query heads land on different key/value heads."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    q = query.reshape(batch, group, kv_heads, q_len, head_dim)
    output, weights = scaled_dot_product_attention(q, key.unsqueeze(1), value.unsqueeze(1))
    return (
        output.reshape(batch, heads, q_len, head_dim),
        weights.reshape(batch, heads, q_len, key.shape[2]),
    )


def gqa_wrong_expand(query, key, value):
    """Wrong: key.expand(B, H, Tk, Dh) to "broadcast" the key/value heads; expand only grows
    axes of size 1, so it raises for 1 < Hkv < H (right only for Hkv = 1 or Hkv = H)."""
    batch, heads, _, head_dim = query.shape
    key = key.expand(batch, heads, key.shape[2], head_dim)
    value = value.expand(batch, heads, value.shape[2], head_dim)
    return sdpa_correct_matmul(query, key, value)


def gqa_wrong_repeat_interleave_flat(query, key, value):
    """Wrong: calls torch.repeat_interleave(key, group) without dim=, which flattens the
    tensor to 1-D; the score product then fails (and Hkv = H, group 1, gives a flat vector
    too)."""
    group = query.shape[1] // key.shape[1]
    key = torch.repeat_interleave(key, group)
    value = torch.repeat_interleave(value, group)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def gqa_wrong_index_by_hkv(query, key, value):
    """Wrong: a loop over query heads that reads key/value head h // Hkv instead of
    h // group: the wrong heads, or an IndexError inside the loop whenever h // Hkv reaches
    Hkv (right only when H = Hkv ** 2)."""
    heads, kv_heads = query.shape[1], key.shape[1]
    outputs, maps = [], []
    for h in range(heads):
        kv = h // kv_heads
        out, w = sdpa_correct_matmul(query[:, h], key[:, kv], value[:, kv])
        outputs.append(out)
        maps.append(w)
    return torch.stack(outputs, dim=1), torch.stack(maps, dim=1)


def gqa_wrong_group_mean_query(query, key, value):
    """Wrong: averages the queries of each group into one and attends once per key/value head,
    copying that result to every query head of the group."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    q = query.reshape(batch, kv_heads, group, q_len, head_dim).mean(dim=2)
    output, weights = scaled_dot_product_attention(q, key, value)
    return (
        output.repeat_interleave(group, dim=1),
        weights.repeat_interleave(group, dim=1),
    )


def gqa_wrong_softmax_dim3_in_5d(query, key, value):
    """Wrong: in the grouped 5-D layout [B, Hkv, group, Tq, Tk] keeps the 4-D habit
    softmax(dim=3), which now normalises over the queries, not the keys."""
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    q = query.reshape(batch, kv_heads, group, q_len, head_dim)
    scores = q @ key.unsqueeze(2).transpose(-2, -1) / math.sqrt(head_dim)
    weights = torch.softmax(scores, dim=3)
    output = weights @ value.unsqueeze(2)
    return (
        output.reshape(batch, heads, q_len, head_dim),
        weights.reshape(batch, heads, q_len, key.shape[2]),
    )


def gqa_wrong_repeat_by_h(query, key, value):
    """Wrong: repeats each key/value head H times instead of H // Hkv times, giving Hkv * H
    heads: the einsum over heads fails unless Hkv = 1."""
    heads = query.shape[1]
    key = key.repeat_interleave(heads, dim=1)
    value = value.repeat_interleave(heads, dim=1)
    scores = torch.einsum("bhqd,bhkd->bhqk", query, key) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, value), weights


# ---------------------------------------------------------------------------------------------
# Lab 10: sliding-window and document masks
# ---------------------------------------------------------------------------------------------


def window_correct_tril_triu(size, window):
    """Correct: ones.tril() & ones.triu(-(window - 1))."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 1))


def window_correct_arange(size, window):
    """Correct: distance i - j from broadcast aranges, kept where 0 <= i - j < window."""
    i = torch.arange(size)[:, None]
    j = torch.arange(size)[None, :]
    distance = i - j
    return (distance >= 0) & (distance < window)


def window_correct_loop(size, window):
    """Correct: a Python loop that sets row i's slice max(0, i - window + 1) .. i to True."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, max(0, i - window + 1) : i + 1] = True
    return mask


def window_wrong_one_extra(size, window):
    """Wrong: off by one, keeps i - window <= j <= i: window + 1 keys."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-window)


def window_wrong_one_short(size, window):
    """Wrong: off by one, keeps i - window + 1 < j <= i: window - 1 keys (window = 1 sees
    nothing at all)."""
    i = torch.arange(size)[:, None]
    j = torch.arange(size)[None, :]
    return (j <= i) & (j > i - window + 1)


def window_wrong_symmetric_band(size, window):
    """Wrong: |i - j| < window, a band on both sides of the diagonal: not causal."""
    i = torch.arange(size)[:, None]
    j = torch.arange(size)[None, :]
    return (i - j).abs() < window


def window_wrong_transposed(size, window):
    """Wrong: rows and columns swapped: query i sees keys i .. i + window - 1 (the future)."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.triu() & ones.tril(window - 1)


def window_wrong_excludes_self(size, window):
    """Wrong: counts the window over the keys before the query, i - window <= j < i, leaving
    the query itself out."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril(-1) & ones.triu(-window)


def window_wrong_triu_sign(size, window):
    """Wrong: sign slip in the diagonal offset, triu(window - 1) instead of triu(-(window - 1)):
    only the diagonal survives for window 1, and nothing for larger windows."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(window - 1)


def window_wrong_float_dtype(size, window):
    """Wrong: builds the band from torch.ones (float32) and returns it as a 0./1. float mask,
    not torch.bool."""
    ones = torch.ones(size, size)
    return torch.tril(ones) * torch.triu(ones, diagonal=-(window - 1))


def window_wrong_inverted(size, window):
    """Wrong: returns True where attention is blocked (the other polarity)."""
    ones = torch.ones(size, size, dtype=torch.bool)
    return ~(ones.tril() & ones.triu(-(window - 1)))


def document_correct_broadcast(document_ids):
    """Correct: ids[:, None] == ids[None, :] combined with the causal mask."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & causal_mask(document_ids.shape[0])


def document_correct_loop(document_ids):
    """Correct: a double Python loop over queries and keys j <= i, True when the ids match."""
    ids = document_ids.tolist()
    size = len(ids)
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        for j in range(i + 1):
            if ids[j] == ids[i]:
                mask[i, j] = True
    return mask


def document_correct_one_hot(document_ids):
    """Correct: ids relabelled 0..n-1 with torch.unique, one-hot rows multiplied to find the
    pairs in the same document, torch.tril for the causal part."""
    _, labels = torch.unique(document_ids, return_inverse=True)
    one_hot = F.one_hot(labels).float()  # [T, n]
    same = (one_hot @ one_hot.T) > 0.5
    return torch.tril(same)


def document_wrong_not_causal(document_ids):
    """Wrong: same-document test only, no causal part: each document attends both ways."""
    return document_ids[:, None] == document_ids[None, :]


def document_wrong_broadcast_slip(document_ids):
    """Wrong: compares ids[None, :] with ids[None, :] (a [1, T] row of True), so the result is
    just the causal mask: documents ignored."""
    same = document_ids[None, :] == document_ids[None, :]
    return same & causal_mask(document_ids.shape[0])


def document_wrong_bincount_blocks(document_ids):
    """Wrong: takes the document lengths from torch.bincount(ids) and lays causal blocks in
    order of id, assuming the documents are numbered 0, 1, 2, ... in order."""
    lengths = torch.bincount(document_ids)
    blocks = [torch.ones(n, n, dtype=torch.bool).tril() for n in lengths.tolist()]
    return torch.block_diag(*blocks)


def document_wrong_upper(document_ids):
    """Wrong: keeps the same-document pairs with j >= i (triu) instead of j <= i."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).triu()


def document_wrong_earlier_documents(document_ids):
    """Wrong: lets a query see every key of its own or an earlier-numbered document
    (ids[j] <= ids[i]) within the causal mask, instead of its own document only."""
    earlier = document_ids[None, :] <= document_ids[:, None]
    return earlier & causal_mask(document_ids.shape[0])


def document_wrong_long_dtype(document_ids):
    """Wrong: builds the mask by multiplying 0/1 integer tensors and returns int64, not bool."""
    same = (document_ids[:, None] == document_ids[None, :]).long()
    return torch.tril(same)


def document_wrong_strictly_causal(document_ids):
    """Wrong: tril(-1), keys j < i only: a query may not attend to itself."""
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones_like(same).tril(-1)


def document_wrong_boundary_shift(document_ids):
    """Wrong: finds document starts with a misaligned diff (ids[i] != ids[i + 1] marks i as a
    start), so the last token of each document is counted in the next one."""
    change = document_ids[:-1] != document_ids[1:]
    starts = torch.cat([change, torch.tensor([False])])
    run = torch.cumsum(starts.long(), dim=0)
    same = run[:, None] == run[None, :]
    return same & causal_mask(document_ids.shape[0])


# ---------------------------------------------------------------------------------------------
# Lab 11: ALiBi slopes and bias
# ---------------------------------------------------------------------------------------------


def slopes_correct_geometric(num_heads):
    """Correct: geometric(P) then the odd-numbered terms of geometric(2P), P = 2 ** floor(log2 H),
    float64."""

    def geometric(count):
        return 2.0 ** (-8.0 * torch.arange(1, count + 1, dtype=torch.float64) / count)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    extra = geometric(2 * power)[0::2][: num_heads - power]
    return torch.cat([geometric(power), extra])


def slopes_correct_ratio(num_heads):
    """Correct: the ALiBi paper's closed form: ratio r = 2 ** (-8 / P), slopes r ** 1 .. r ** P,
    then (2 ** (-4 / P)) ** (1, 3, 5, ...) for the rest; P from bit_length."""
    power = 1 << (num_heads.bit_length() - 1)
    ratio = 2.0 ** (-8.0 / power)
    base = [ratio ** (k + 1) for k in range(power)]
    half_ratio = 2.0 ** (-4.0 / power)
    extra = [half_ratio ** (2 * k + 1) for k in range(num_heads - power)]
    return torch.tensor(base + extra, dtype=torch.float64)


def slopes_correct_loop(num_heads):
    """Correct: a while loop for P, then a loop that appends slope by slope with math.pow."""
    power = 1
    while power * 2 <= num_heads:
        power *= 2
    slopes = [math.pow(2.0, -8.0 * (h + 1) / power) for h in range(power)]
    k = 1
    while len(slopes) < num_heads:
        slopes.append(math.pow(2.0, -8.0 * k / (2 * power)))
        k += 2
    return torch.tensor(slopes, dtype=torch.float64)


def slopes_wrong_from_zero(num_heads):
    """Wrong: off by one, 2 ** (-8 h / P) with h from 0, so the first slope is 1."""

    def geometric(count):
        return 2.0 ** (-8.0 * torch.arange(count, dtype=torch.float64) / count)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def slopes_wrong_plain_geometric(num_heads):
    """Wrong: uses 2 ** (-8 (h + 1) / H) for every head count, ignoring the rule for H not a
    power of two."""
    return 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)


def slopes_wrong_even_terms(num_heads):
    """Wrong: appends the 2nd, 4th, ... terms of the 2P sequence ([1::2]), which repeat slopes
    already there, instead of the 1st, 3rd, ..."""

    def geometric(count):
        return 2.0 ** (-8.0 * torch.arange(1, count + 1, dtype=torch.float64) / count)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[1::2][: num_heads - power]])


def slopes_wrong_next_power(num_heads):
    """Wrong: takes the next power of two above H and truncates its sequence to H slopes."""
    power = 2 ** int(math.ceil(math.log2(num_heads)))
    return (2.0 ** (-8.0 * torch.arange(1, power + 1, dtype=torch.float64) / power))[:num_heads]


def slopes_wrong_extras_first(num_heads):
    """Wrong: puts the extra slopes from the 2P sequence before the P slopes instead of after."""

    def geometric(count):
        return 2.0 ** (-8.0 * torch.arange(1, count + 1, dtype=torch.float64) / count)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(2 * power)[0::2][: num_heads - power], geometric(power)])


def slopes_wrong_integer_division(num_heads):
    """Wrong: writes the exponent with // (-8 * (h + 1) // P), flooring it to an integer: right
    up to 8 heads, where the exponents happen to be integers, wrong from 9 heads on."""
    power = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = [2.0 ** (-8 * (h + 1) // power) for h in range(power)]
    slopes += [2.0 ** (-8 * k // (2 * power)) for k in range(1, 2 * (num_heads - power), 2)]
    return torch.tensor(slopes, dtype=torch.float64)


def slopes_wrong_consecutive_extras(num_heads):
    """Wrong: appends the first H - P terms of the 2P sequence instead of every other one."""

    def geometric(count):
        return 2.0 ** (-8.0 * torch.arange(1, count + 1, dtype=torch.float64) / count)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    return torch.cat([geometric(power), geometric(2 * power)[: num_heads - power]])


def slopes_wrong_reversed(num_heads):
    """Wrong: assigns the right slopes to the heads in reverse order (flipped), the smallest
    slope to head 0."""
    return slopes_correct_geometric(num_heads).flip(0)


def bias_correct_offsets(num_heads, q_len, kv_len):
    """Correct: query positions kv_len - q_len .. kv_len - 1, offsets j - i by broadcasting,
    times the slopes [H, 1, 1]."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (key_pos[None, :] - query_pos[:, None])


def bias_correct_einsum(num_heads, q_len, kv_len):
    """Correct: -m_h (i - j) as an outer product by einsum of the slopes with the distance
    matrix, query row r at position Tk - Tq + r."""
    slopes = slopes_correct_ratio(num_heads)
    i = torch.arange(q_len, dtype=torch.float64).unsqueeze(1) + (kv_len - q_len)
    j = torch.arange(kv_len, dtype=torch.float64).unsqueeze(0)
    distance = i - j  # [Tq, Tk]
    return -torch.einsum("h,qk->hqk", slopes, distance)


def bias_correct_loop(num_heads, q_len, kv_len):
    """Correct: triple Python loop filling bias[h, r, j] = m_h (j - (Tk - Tq + r))."""
    slopes = slopes_correct_loop(num_heads).tolist()
    bias = torch.zeros(num_heads, q_len, kv_len, dtype=torch.float64)
    offset = kv_len - q_len
    for h, m in enumerate(slopes):
        for r in range(q_len):
            for j in range(kv_len):
                bias[h, r, j] = m * (j - (offset + r))
    return bias


def bias_wrong_sign(num_heads, q_len, kv_len):
    """Wrong: m_h (i - j): rewards distant keys instead of penalising them."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (query_pos[:, None] - key_pos[None, :])


def bias_wrong_slopes_broadcast(num_heads, q_len, kv_len):
    """Wrong: slopes[:, None] * offset, one None short: the heads meet the query axis, a
    broadcast error unless H equals Tq (then a [Tq, Tk] result, a slope per row)."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None] * (key_pos[None, :] - query_pos[:, None])


def bias_wrong_transposed(num_heads, q_len, kv_len):
    """Wrong: builds the offsets with keys on the rows, [H, Tk, Tq] (axes swapped)."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (key_pos[:, None] - query_pos[None, :])


def bias_wrong_to_like_positions(num_heads, q_len, kv_len):
    """Wrong: moves the slopes with slopes.to(offset), which also casts them to the integer
    dtype of the arange positions: every slope truncates to 0."""
    slopes = slopes_correct_geometric(num_heads)
    offset = torch.arange(kv_len)[None, :] - torch.arange(kv_len - q_len, kv_len)[:, None]
    return slopes.to(offset)[:, None, None] * offset


def bias_wrong_heads_last(num_heads, q_len, kv_len):
    """Wrong: multiplies offset[..., None] by the slopes, giving [Tq, Tk, H] with the head axis
    last."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    offset = key_pos[None, :] - query_pos[:, None]
    return offset[..., None] * slopes


def bias_wrong_q_len_for_keys(num_heads, q_len, kv_len):
    """Wrong: builds the key positions from q_len too, giving [H, Tq, Tq] when Tq < Tk."""
    slopes = slopes_correct_geometric(num_heads)
    pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (pos[None, :] - pos[:, None])


def bias_wrong_no_outer(num_heads, q_len, kv_len):
    """Wrong: subtracts the position vectors without [:, None], an elementwise difference that
    fails when Tq != Tk and gives a row of zeros ([H, 1, Tk]) when they are equal."""
    slopes = slopes_correct_geometric(num_heads)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (key_pos - query_pos)


def bias_wrong_heads_reversed(num_heads, q_len, kv_len):
    """Wrong: pairs the slopes with the heads in reverse order (slopes.flip(0)), head 0 getting
    the smallest slope."""
    slopes = slopes_correct_geometric(num_heads).flip(0)
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)
    key_pos = torch.arange(kv_len, dtype=torch.float64)
    return slopes[:, None, None] * (key_pos[None, :] - query_pos[:, None])


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def _wrong(*functions):
    return [(fn, " ".join(fn.__doc__.split("Wrong: ", 1)[1].split())) for fn in functions]


LABS = {
    "01": {
        "check": "check_scaled_dot_product_attention",
        "correct": [sdpa_correct_matmul, sdpa_correct_einsum],
        "wrong": _wrong(
            sdpa_wrong_scale_dk,
            sdpa_wrong_softmax_queries,
            sdpa_wrong_scale_after_softmax,
            sdpa_wrong_transpose_01,
            sdpa_wrong_float32,
        ),
    },
    "02": {
        "check": "check_multi_head_attention",
        "correct": [mha_correct_view_transpose, mha_correct_loop_chunks],
        "wrong": _wrong(
            mha_wrong_split_no_transpose,
            mha_wrong_merge_no_transpose,
            mha_wrong_interleaved_heads,
            mha_wrong_scale_model_width,
            mha_wrong_view_after_transpose,
        ),
    },
    "03": {
        "check": "check_sinusoidal_encoding",
        "correct": [pe_correct_slices, pe_correct_stack],
        "wrong": _wrong(
            pe_wrong_i_not_2i,
            pe_wrong_sin_cos_swapped,
            pe_wrong_halves,
            pe_wrong_odd_width_crash,
            pe_wrong_float64,
        ),
    },
    "04": {
        "check": "check_masked_attention",
        "correct": [masked_correct_fill_min, masked_correct_manual],
        "wrong": _wrong(
            masked_wrong_neg_inf,
            masked_wrong_polarity,
            masked_wrong_multiply_after_softmax,
            masked_wrong_minus_1e9,
            masked_wrong_empty_rows_uniform,
        ),
    },
    "05": {
        "check": "check_encoder_layer",
        "correct": [encoder_correct_branches, encoder_correct_sublayer_helper],
        "wrong": _wrong(
            encoder_wrong_prenorm_residual_normed,
            encoder_wrong_ignores_norm_first,
            encoder_wrong_dropout_after_residual,
            encoder_wrong_norms_swapped,
            encoder_wrong_mask_dropped,
        ),
    },
    "06": {
        "check": "check_pooling_and_search",
        "correct": [search_correct_normalize, search_correct_einsum],
        "wrong": _wrong(
            search_wrong_mean_with_padding,
            search_wrong_no_clamp,
            search_wrong_no_normalise,
            search_wrong_ascending,
            search_wrong_normalise_batch_axis,
        ),
    },
    "07": {
        "check": "check_online_softmax",
        "correct": [online_correct_loop, online_correct_split],
        "wrong": _wrong(
            online_wrong_acc_not_rescaled,
            online_wrong_sum_not_rescaled,
            online_wrong_rescale_sign,
            online_wrong_drops_last_block,
            online_wrong_max_updated_first,
        ),
    },
    "08": {
        "check": "check_kv_cache_decoding",
        "correct": [decode_correct_view, decode_correct_functional, decode_correct_preallocated],
        "wrong": _wrong(
            decode_wrong_position_zero,
            decode_wrong_no_position,
            decode_wrong_position_plus_one,
            decode_wrong_cat_heads_axis,
            decode_wrong_attends_new_only,
            decode_wrong_no_out_proj,
            decode_wrong_values_from_k_proj,
            decode_wrong_scale_model_width,
        ),
    },
    "09": {
        "check": "check_grouped_query_attention",
        "correct": [gqa_correct_repeat_interleave, gqa_correct_grouped_einsum, gqa_correct_index],
        "wrong": _wrong(
            gqa_wrong_repeat_tiles,
            gqa_wrong_group_axis_first,
            gqa_wrong_expand,
            gqa_wrong_repeat_interleave_flat,
            gqa_wrong_index_by_hkv,
            gqa_wrong_group_mean_query,
            gqa_wrong_softmax_dim3_in_5d,
            gqa_wrong_repeat_by_h,
        ),
    },
    "10-window": {
        "check": "check_sliding_window_mask",
        "correct": [window_correct_tril_triu, window_correct_arange, window_correct_loop],
        "wrong": _wrong(
            window_wrong_one_extra,
            window_wrong_one_short,
            window_wrong_symmetric_band,
            window_wrong_transposed,
            window_wrong_excludes_self,
            window_wrong_triu_sign,
            window_wrong_float_dtype,
            window_wrong_inverted,
        ),
    },
    "10-document": {
        "check": "check_document_mask",
        "correct": [document_correct_broadcast, document_correct_loop, document_correct_one_hot],
        "wrong": _wrong(
            document_wrong_not_causal,
            document_wrong_broadcast_slip,
            document_wrong_bincount_blocks,
            document_wrong_upper,
            document_wrong_earlier_documents,
            document_wrong_long_dtype,
            document_wrong_strictly_causal,
            document_wrong_boundary_shift,
        ),
    },
    "11-slopes": {
        "check": "check_alibi_slopes",
        "correct": [slopes_correct_geometric, slopes_correct_ratio, slopes_correct_loop],
        "wrong": _wrong(
            slopes_wrong_from_zero,
            slopes_wrong_plain_geometric,
            slopes_wrong_even_terms,
            slopes_wrong_next_power,
            slopes_wrong_extras_first,
            slopes_wrong_integer_division,
            slopes_wrong_consecutive_extras,
            slopes_wrong_reversed,
        ),
    },
    "11-bias": {
        "check": "check_alibi_bias",
        "correct": [bias_correct_offsets, bias_correct_einsum, bias_correct_loop],
        "wrong": _wrong(
            bias_wrong_sign,
            bias_wrong_slopes_broadcast,
            bias_wrong_transposed,
            bias_wrong_to_like_positions,
            bias_wrong_heads_last,
            bias_wrong_q_len_for_keys,
            bias_wrong_no_outer,
            bias_wrong_heads_reversed,
        ),
    },
}


# The mistake each wrong implementation's check named when the set was measured
# (blind_sets_measured.md), every one read and judged to be that implementation's mistake;
# test_checks_independent.py keeps it so. The others are answered with where they go wrong.
NAMED = {
    "sdpa_wrong_scale_dk": "scaled_by_d_k",
    "sdpa_wrong_softmax_queries": "softmax_axis",
    "sdpa_wrong_scale_after_softmax": "scaled_after_softmax",
    "sdpa_wrong_transpose_01": "fixed_axes",
    "sdpa_wrong_float32": "wrong_dtype",
    "mha_wrong_split_no_transpose": "split_without_transpose",
    "mha_wrong_merge_no_transpose": "merge_without_transpose",
    "mha_wrong_interleaved_heads": "heads_interleaved",
    "mha_wrong_scale_model_width": "scaled_by_sqrt_d_model",
    "mha_wrong_view_after_transpose": "view_after_transpose",
    "pe_wrong_i_not_2i": "frequency_i_not_2i",
    "pe_wrong_sin_cos_swapped": "sin_cos_swapped",
    "pe_wrong_halves": "halves_not_interleaved",
    "pe_wrong_odd_width_crash": "odd_d_model",
    "pe_wrong_float64": "wrong_dtype",
    "masked_wrong_neg_inf": "nan_fully_masked",
    "masked_wrong_polarity": "mask_polarity",
    "masked_wrong_multiply_after_softmax": "mask_after_softmax",
    "masked_wrong_minus_1e9": "fill_overflow",
    "masked_wrong_empty_rows_uniform": "uniform_fully_masked",
    "encoder_wrong_prenorm_residual_normed": "pre_norm_residual_normalised",
    "encoder_wrong_ignores_norm_first": "post_norm_instead_of_pre_norm",
    "encoder_wrong_dropout_after_residual": "dropout_on_residual_sum",
    "encoder_wrong_norms_swapped": "norms_swapped",
    "encoder_wrong_mask_dropped": "encoder_mask_ignored",
    "search_wrong_mean_with_padding": "mean_over_padding",
    "search_wrong_no_clamp": "empty_sequence_nan",
    "search_wrong_no_normalise": "cosine_not_normalised",
    "search_wrong_ascending": "ranked_ascending",
    "search_wrong_normalise_batch_axis": "normalised_wrong_axis",
    "online_wrong_acc_not_rescaled": "acc_not_rescaled",
    "online_wrong_sum_not_rescaled": "sum_not_rescaled",
    "online_wrong_rescale_sign": "rescale_inverted",
    "online_wrong_drops_last_block": "last_block_dropped",
    "online_wrong_max_updated_first": "nothing_rescaled",
    "decode_wrong_position_zero": "positions_restart",
    "decode_wrong_no_position": "no_positions",
    "decode_wrong_position_plus_one": "positions_off_by_one",
    "decode_wrong_cat_heads_axis": "cache_wrong_axis",
    "decode_wrong_attends_new_only": "attends_to_itself_only",
    "decode_wrong_no_out_proj": "out_proj_missing",
    "decode_wrong_values_from_k_proj": "value_from_wrong_layer",
    "decode_wrong_scale_model_width": "scaled_by_sqrt_d_model",
    "gqa_wrong_repeat_tiles": "kv_heads_repeated_round_robin",
    "gqa_wrong_group_axis_first": "kv_heads_repeated_round_robin",
    "gqa_wrong_expand": "expand_cannot_repeat",
    "gqa_wrong_index_by_hkv": "group_index_by_kv_heads",
    "gqa_wrong_group_mean_query": "query_groups_averaged",
    "gqa_wrong_softmax_dim3_in_5d": "softmax_axis",
    "gqa_wrong_repeat_by_h": "kv_heads_wrong_count",
    "window_wrong_one_extra": "window_one_too_wide",
    "window_wrong_one_short": "window_one_too_narrow",
    "window_wrong_symmetric_band": "window_symmetric",
    "window_wrong_transposed": "window_transposed",
    "window_wrong_excludes_self": "window_excludes_self",
    "window_wrong_triu_sign": "diagonal_offset_sign",
    "window_wrong_float_dtype": "mask_not_bool",
    "window_wrong_inverted": "mask_inverted",
    "document_wrong_not_causal": "document_not_causal",
    "document_wrong_broadcast_slip": "documents_ignored",
    "document_wrong_bincount_blocks": "documents_sorted",
    "document_wrong_upper": "document_transposed",
    "document_wrong_earlier_documents": "documents_compared_by_order",
    "document_wrong_long_dtype": "mask_not_bool",
    "document_wrong_strictly_causal": "document_excludes_self",
    "document_wrong_boundary_shift": "document_boundary_shifted",
    "slopes_wrong_from_zero": "alibi_slopes_from_zero",
    "slopes_wrong_plain_geometric": "alibi_naive_non_power_of_two",
    "slopes_wrong_even_terms": "alibi_extra_wrong_terms",
    "slopes_wrong_next_power": "alibi_first_2p_terms",
    "slopes_wrong_extras_first": "alibi_extra_first",
    "slopes_wrong_reversed": "alibi_slopes_reversed",
    "bias_wrong_sign": "alibi_bias_sign",
    "bias_wrong_slopes_broadcast": "alibi_bias_slopes_wrong_axis",
    "bias_wrong_transposed": "alibi_bias_transposed",
    "bias_wrong_q_len_for_keys": "alibi_bias_keys_from_q_len",
    "bias_wrong_no_outer": "alibi_bias_offsets_not_outer",
    "bias_wrong_heads_reversed": "alibi_slopes_reversed",
}
