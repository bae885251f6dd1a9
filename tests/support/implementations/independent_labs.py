"""Independent implementations of the eight labs, to measure the checkers.

Written from each lab page alone (task, stub, hints, folded solution), without reading the
checkers' code, their tests or their catalogue of mistakes. For each lab: several correct
implementations written differently from the page's solution, and wrong ones, each a plausible
learner mistake at one step.

``LABS[lab]`` holds the name of the lab's check in ``attention_lab.checks``, the correct
functions, and the wrong ones with a one-line description of the mistake. This module holds no
tests; ``independent_labs_baseline.md`` beside it records what the checkers said about each one.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask
from attention_lab.positional import sinusoidal_encoding

# ---------------------------------------------------------------------------------------------
# Lab 01: scaled dot-product attention. my_attention(query, key, value) -> (output, weights)
# ---------------------------------------------------------------------------------------------


def sdpa_einsum(query, key, value):
    """Correct: einsum for both products."""
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    weights = scores.softmax(dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, value), weights


def sdpa_manual_stable_softmax(query, key, value):
    """Correct: softmax by hand, subtracting each row's maximum before exp."""
    scores = torch.matmul(query, key.mT) * (query.shape[-1] ** -0.5)
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exps = shifted.exp()
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return torch.matmul(weights, value), weights


def sdpa_split_scale_logsumexp(query, key, value):
    """Correct: d_k**-1/4 on each side, weights as exp(scores - logsumexp)."""
    quarter = query.shape[-1] ** -0.25
    scores = (query * quarter) @ (key * quarter).swapaxes(-1, -2)
    weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    return weights @ value, weights


def sdpa_flatten_bmm(query, key, value):
    """Correct: flatten the leading dimensions into one batch, use bmm, restore them."""
    lead = query.shape[:-2]
    tq, dk = query.shape[-2:]
    tk, dv = value.shape[-2:]
    q = query.reshape(-1, tq, dk)
    k = key.reshape(-1, tk, dk)
    v = value.reshape(-1, tk, dv)
    weights = F.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(dk), dim=2)
    output = torch.bmm(weights, v)
    return output.reshape(*lead, tq, dv), weights.reshape(*lead, tq, tk)


def sdpa_sqrt_precedence(query, key, value):
    """Wrong: `d_k ** 1/2` parses as d_k / 2 (equals sqrt(d_k) only when d_k = 4)."""
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / (d_k**1 / 2)
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_scale_by_value_width(query, key, value):
    """Wrong: scales by sqrt of the values' width (value.shape[-1]) instead of d_k."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(value.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_scale_by_key_length(query, key, value):
    """Wrong: scales by sqrt(Tk), reading key.shape[-2] instead of the feature width."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(key.shape[-2])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_transpose_1_2(query, key, value):
    """Wrong: key.transpose(1, 2), written for [B, T, D]; wrong for [B, H, T, Dh] and [T, D]."""
    scores = query @ key.transpose(1, 2) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def sdpa_softmax_dim2(query, key, value):
    """Wrong: softmax over dim=2 (the last axis only for 3-D inputs)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=2)
    return weights @ value, weights


def sdpa_naive_exp(query, key, value):
    """Wrong: softmax by hand without subtracting the maximum: overflows on large scores."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    exps = torch.exp(scores)
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return weights @ value, weights


def sdpa_float32_cast(query, key, value):
    """Wrong: casts to float() "for stability", so float64 inputs come back float32."""
    q, k, v = query.float(), key.float(), value.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def sdpa_returns_swapped(query, key, value):
    """Wrong: returns (weights, output) instead of (output, weights)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights, weights @ value


def sdpa_log_softmax(query, key, value):
    """Wrong: log_softmax instead of softmax (weights are log-probabilities)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.log_softmax(scores, dim=-1)
    return weights @ value, weights


# ---------------------------------------------------------------------------------------------
# Lab 02: multi-head split / merge. my_multi_head_attention(query, key, value, num_heads)
# ---------------------------------------------------------------------------------------------


def mha_chunk_stack(query, key, value, num_heads):
    """Correct: chunk the features into heads, stack them on dim 1, cat them back."""

    def split(x):
        return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # [B, H, T, Dh]

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return torch.cat(output.unbind(dim=1), dim=-1), weights


def mha_unflatten_permute(query, key, value, num_heads):
    """Correct: unflatten/permute to split, permute/flatten to merge, attention by einsum."""

    def split(x):
        return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)

    q, k, v = split(query), split(key), split(value)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    output = torch.einsum("bhqk,bhkd->bhqd", weights, v)
    return output.permute(0, 2, 1, 3).flatten(2), weights


def mha_loop_over_heads(query, key, value, num_heads):
    """Correct: one attention call per head on a slice of the features, then concatenate."""
    head_dim = query.shape[-1] // num_heads
    outputs, weights = [], []
    for h in range(num_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        out, w = scaled_dot_product_attention(query[..., cols], key[..., cols], value[..., cols])
        outputs.append(out)
        weights.append(w)
    return torch.cat(outputs, dim=-1), torch.stack(weights, dim=1)


def _split_right(x, num_heads):
    b, t, d = x.shape
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)


def _merge_right(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def mha_view_heads_first(query, key, value, num_heads):
    """Wrong: splits by viewing [B, T, D] directly as [B, H, T, Dh] (mixes tokens into heads)."""

    def split(x):
        b, t, d = x.shape
        return x.view(b, num_heads, t, d // num_heads)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return _merge_right(output), weights


def mha_interleaved_heads(query, key, value, num_heads):
    """Wrong: splits with view(B, T, Dh, H), so feature f goes to head f % H, not f // Dh."""

    def split(x):
        b, t, d = x.shape
        return x.view(b, t, d // num_heads, num_heads).permute(0, 3, 1, 2)

    output, weights = scaled_dot_product_attention(split(query), split(key), split(value))
    return _merge_right(output), weights


def mha_merge_permute_wrong(query, key, value, num_heads):
    """Wrong: merges with permute(0, 2, 3, 1), interleaving the heads' features."""
    output, weights = scaled_dot_product_attention(
        _split_right(query, num_heads), _split_right(key, num_heads), _split_right(value, num_heads)
    )
    b, h, t, dh = output.shape
    return output.permute(0, 2, 3, 1).reshape(b, t, h * dh), weights


def mha_scale_by_model_width(query, key, value, num_heads):
    """Wrong: own attention per head, but scaled by sqrt(D) of the whole model, not sqrt(Dh)."""
    scale = math.sqrt(query.shape[-1])
    q, k, v = (_split_right(t, num_heads) for t in (query, key, value))
    weights = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
    return _merge_right(weights @ v), weights


def mha_key_split_from_query(query, key, value, num_heads):
    """Wrong: copy-paste slip, the keys are split from `query` (self-attention assumed)."""
    q = _split_right(query, num_heads)
    k = _split_right(query, num_heads)
    v = _split_right(value, num_heads)
    # Works only when Tq == Tk; otherwise the shapes clash.
    output, weights = scaled_dot_product_attention(q, k, v)
    return _merge_right(output), weights


def mha_keys_values_swapped(query, key, value, num_heads):
    """Wrong: passes (q, v, k) to attention: values used as keys and keys as values."""
    q, k, v = (_split_right(t, num_heads) for t in (query, key, value))
    output, weights = scaled_dot_product_attention(q, v, k)
    return _merge_right(output), weights


def mha_weights_averaged(query, key, value, num_heads):
    """Wrong: returns the weights averaged over heads, [B, Tq, Tk], like nn.MultiheadAttention."""
    q, k, v = (_split_right(t, num_heads) for t in (query, key, value))
    output, weights = scaled_dot_product_attention(q, k, v)
    return _merge_right(output), weights.mean(dim=1)


def mha_merge_with_view(query, key, value, num_heads):
    """Wrong: merges with .view after the transpose (non-contiguous: crashes for H > 1)."""
    q, k, v = (_split_right(t, num_heads) for t in (query, key, value))
    output, weights = scaled_dot_product_attention(q, k, v)
    b, h, t, dh = output.shape
    return output.transpose(1, 2).view(b, t, h * dh), weights


# ---------------------------------------------------------------------------------------------
# Lab 03: sinusoidal positional encoding. my_encoding(max_len, d_model) -> [T, D] float32
# ---------------------------------------------------------------------------------------------


def pe_stack_interleave(max_len, d_model):
    """Correct: stack sin and cos on a new last axis, flatten to interleave, trim odd width."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(-1)
    pairs = (d_model + 1) // 2
    freq = 10000.0 ** (-2.0 * torch.arange(pairs, dtype=torch.float64) / d_model)
    angle = pos * freq  # [T, pairs]
    table = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)  # [T, 2 * pairs]
    return table[:, :d_model].to(torch.float32)


def pe_exp_log(max_len, d_model):
    """Correct: frequencies as exp(-2i ln(10000) / d), the common PyTorch-tutorial form."""
    position = torch.arange(0, max_len, dtype=torch.float64)[:, None]
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    n_cos = pe[:, 1::2].shape[1]
    pe[:, 1::2] = torch.cos(position * div_term[:n_cos])
    return pe.float()


def pe_phase_shift(max_len, d_model):
    """Correct: one sine per column, cos(x) written as sin(x + pi/2) on odd columns."""
    col = torch.arange(d_model, dtype=torch.float64)
    pair_index = torch.div(col, 2, rounding_mode="floor")  # i for columns 2i and 2i + 1
    freq = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -2.0 * pair_index / d_model)
    phase = (col % 2) * (math.pi / 2)
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    return torch.sin(pos * freq + phase).to(torch.float32)


def pe_where_columns(max_len, d_model):
    """Correct: compute sin and cos of the pair angle for every column, pick with torch.where."""
    col = torch.arange(d_model)
    two_i = (col - col % 2).to(torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (two_i / d_model)
    return torch.where(col % 2 == 0, angle.sin(), angle.cos()).float()


def _pe_template(max_len, d_model, *, base=10000.0, dtype=torch.float64, positions=None):
    position = (
        torch.arange(max_len, dtype=dtype)[:, None] if positions is None else positions[:, None]
    )
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    angle = position / base ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=dtype)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding


def pe_float32_angles(max_len, d_model):
    """Wrong (numerics): angles computed in float32, whose error grows with the position."""
    return _pe_template(max_len, d_model, dtype=torch.float32)


def pe_base_1000(max_len, d_model):
    """Wrong: base 1000 instead of 10000 (a dropped zero)."""
    return _pe_template(max_len, d_model, base=1000.0).float()


def pe_power_precedence(max_len, d_model):
    """Wrong: `10000 ** 2 * i / d_model` without parentheses: (10000**2) * i / d, not a power."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(0, (d_model + 1) // 2, dtype=torch.float64)
    denominator = 10000**2 * i / d_model
    angle = position / denominator.clamp(min=1e-12)  # i = 0 "fixed" by clamping
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


def pe_floor_division_exponent(max_len, d_model):
    """Wrong: integer floor division in the exponent, two_i // d_model, is always 0."""
    position = torch.arange(max_len)[:, None]
    two_i = torch.arange(0, d_model, 2)
    angle = position / 10000 ** (two_i // d_model)
    encoding = torch.zeros(max_len, d_model)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding


def pe_odd_trim_from_front(max_len, d_model):
    """Wrong: for odd widths, trims the cosines' angles from the front, angle[:, -(D//2):]."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    n_cos = d_model // 2
    encoding[:, 1::2] = torch.cos(angle[:, angle.shape[1] - n_cos :])
    return encoding.float()


def pe_odd_not_trimmed(max_len, d_model):
    """Wrong: no trimming for odd widths: the cosine assignment crashes when D is odd."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000 ** (two_i / d_model)
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle)
    return encoding.float()


def pe_returns_float64(max_len, d_model):
    """Wrong (dtype): correct values, but returned in float64 (forgot the final .float())."""
    return _pe_template(max_len, d_model)


def pe_exponent_over_half_width(max_len, d_model):
    """Wrong: exponent i / (D // 2) with i the pair index: equals 2i / D for even D only."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(0, (d_model + 1) // 2, dtype=torch.float64)
    angle = position / 10000 ** (i / max(d_model // 2, 1))
    encoding = torch.zeros(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


# ---------------------------------------------------------------------------------------------
# Lab 04: masked attention. my_masked_attention(query, key, value, mask)
# ---------------------------------------------------------------------------------------------


def masked_neg_inf_nan_to_num(query, key, value, mask):
    """Correct: fill with -inf, softmax, then turn the NaN of empty rows into 0."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ value, weights


def masked_where_float32_softmax(query, key, value, mask):
    """Correct: torch.where with the dtype's minimum, softmax in float32, weights * mask."""
    scores = torch.einsum("...qd,...kd->...qk", query, key) * query.shape[-1] ** -0.5
    low = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
    scores = torch.where(mask, scores, low)
    weights = torch.softmax(scores.float() if scores.dtype == torch.float16 else scores, dim=-1)
    weights = (weights * mask).to(query.dtype)
    return weights @ value, weights


def masked_manual_renormalise(query, key, value, mask):
    """Correct: exp of masked-max-shifted scores times the mask, divided by a clamped sum."""
    work = torch.promote_types(query.dtype, torch.float32)
    scores = (query.to(work) @ key.to(work).mT) / math.sqrt(query.shape[-1])
    lowest = torch.finfo(work).min
    filled = scores.masked_fill(~mask, lowest)
    row_max = filled.amax(dim=-1, keepdim=True)
    exps = torch.exp(filled - row_max) * mask
    total = exps.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(work).tiny)
    weights = (exps / total).to(query.dtype)
    return weights @ value, weights


def masked_empty_rows_by_any(query, key, value, mask):
    """Correct: -inf fill, then zero exactly the rows whose mask has no True."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = scores.masked_fill(~mask, -math.inf).softmax(dim=-1)
    empty = ~mask.any(dim=-1, keepdim=True)
    weights = weights.masked_fill(empty, 0.0)
    return weights @ value, weights


def masked_fill_zero(query, key, value, mask):
    """Wrong: masked_fill(~mask, 0): a blocked score of 0 still gets a weight."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def masked_mask_transposed(query, key, value, mask):
    """Wrong: transposes the mask's last two axes (blocks queries instead of keys)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    mask = mask.transpose(-2, -1)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ value, weights


def masked_output_before_zeroing(query, key, value, mask):
    """Wrong: output computed before the empty rows' weights are zeroed (output = mean of V)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    output = weights @ value
    weights = weights.masked_fill(~mask, 0.0)
    return output, weights


def masked_log_mask_promotes(query, key, value, mask):
    """Wrong (dtype): adds log(mask.float()), promoting float16 scores and output to float32."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores + torch.log(mask.float())
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ value.to(weights.dtype), weights


def masked_fill_minus_1e9(query, key, value, mask):
    """Wrong: fill -1e9 (too large for float16) and zero the blocked weights after softmax."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ value, weights


def masked_empty_rows_uniform(query, key, value, mask):
    """Wrong: fills -inf, then 'fixes' empty rows by adding 1 / Tk (uniform) instead of 0."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    weights = weights.nan_to_num(1.0 / key.shape[-2])
    return weights @ value, weights


def masked_renormalise_wrong_axis(query, key, value, mask):
    """Wrong: exp * mask, but normalised over the queries (sum over dim=-2)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * mask
    weights = exps / exps.sum(dim=-2, keepdim=True).clamp(min=1e-12)
    return weights @ value, weights


# ---------------------------------------------------------------------------------------------
# Lab 05: encoder layer. my_encoder_layer(x, layer, mask=None) -> (x, weights)
# ---------------------------------------------------------------------------------------------


def encoder_generic_sublayer(x, layer, mask=None):
    """Correct: one helper for both sub-layers, parameterised by norm, dropout, arrangement."""
    box = {}

    def attention(h):
        out, box["weights"] = layer.self_attn(h, mask=mask)
        return out

    def sublayer(x, fn, norm, dropout):
        if layer.norm_first:
            return x + dropout(fn(norm(x)))
        return norm(x + dropout(fn(x)))

    x = sublayer(x, attention, layer.norm1, layer.dropout1)
    x = sublayer(x, layer.feed_forward, layer.norm2, layer.dropout2)
    return x, box["weights"]


def encoder_functional_layer_norm(x, layer, mask=None):
    """Correct: the LayerNorms applied through F.layer_norm with the modules' parameters."""

    def ln(norm, t):
        return F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    pre = layer.norm_first
    attn_in = ln(layer.norm1, x) if pre else x
    attended, weights = layer.self_attn(attn_in, mask=mask)
    residual = x + layer.dropout1(attended)
    h = residual if pre else ln(layer.norm1, residual)
    ff_in = ln(layer.norm2, h) if pre else h
    out = h + layer.dropout2(layer.feed_forward(ff_in))
    return (out if pre else ln(layer.norm2, out)), weights


def encoder_loop_over_sublayers(x, layer, mask=None):
    """Correct: a loop over (sub-layer, norm, dropout) triples, torch.add for the residual."""
    weights = None

    def attention(h):
        nonlocal weights
        out, weights = layer.self_attn(h, h, h, mask)
        return out

    for fn, norm, dropout in (
        (attention, layer.norm1, layer.dropout1),
        (layer.feed_forward, layer.norm2, layer.dropout2),
    ):
        if layer.norm_first:
            x = torch.add(x, dropout(fn(norm(x))))
        else:
            x = norm(torch.add(x, dropout(fn(x))))
    return x, weights


def encoder_dropout_on_residual_sum(x, layer, mask=None):
    """Wrong (train mode only): dropout applied to the residual sum, not the sub-layer output."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = layer.dropout1(x + attended)
        x = layer.dropout2(x + layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(layer.dropout1(x + attended))
        x = layer.norm2(layer.dropout2(x + layer.feed_forward(x)))
    return x, weights


def encoder_dropout_on_input(x, layer, mask=None):
    """Wrong (train mode only): dropout on each sub-layer's input instead of its output."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.dropout1(layer.norm1(x)), mask=mask)
        x = x + attended
        x = x + layer.feed_forward(layer.dropout2(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(layer.dropout1(x), mask=mask)
        x = layer.norm1(x + attended)
        x = layer.norm2(x + layer.feed_forward(layer.dropout2(x)))
    return x, weights


def encoder_ff_residual_from_input(x, layer, mask=None):
    """Wrong: post-norm feed-forward residual adds the layer's input x, not the updated x."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        h = x + layer.dropout1(attended)
        out = h + layer.dropout2(layer.feed_forward(layer.norm2(h)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        h = layer.norm1(x + layer.dropout1(attended))
        out = layer.norm2(x + layer.dropout2(layer.feed_forward(h)))
    return out, weights


def encoder_ff_on_unnormalised_sum(x, layer, mask=None):
    """Wrong: post-norm feed-forward fed the sum before norm1 (norm1 only on the residual)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        s = x + layer.dropout1(attended)
        x = layer.norm2(layer.norm1(s) + layer.dropout2(layer.feed_forward(s)))
    return x, weights


def encoder_pre_norm_extra_final_norm(x, layer, mask=None):
    """Wrong: pre-norm with an extra norm2 on the layer's output (the stack's final norm)."""
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
        x = layer.norm2(x)
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_pre_norm_parallel(x, layer, mask=None):
    """Wrong: pre-norm feed-forward reuses norm1(x) of the input (a parallel block)."""
    if layer.norm_first:
        h = layer.norm1(x)
        attended, weights = layer.self_attn(h, mask=mask)
        x = x + layer.dropout1(attended) + layer.dropout2(layer.feed_forward(h))
    else:
        attended, weights = layer.self_attn(x, mask=mask)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_mask_inverted(x, layer, mask=None):
    """Wrong: passes ~mask to the attention (thinks True means 'blocked')."""
    inverted = None if mask is None else ~mask
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=inverted)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(layer.norm2(x)))
    else:
        attended, weights = layer.self_attn(x, mask=inverted)
        x = layer.norm1(x + layer.dropout1(attended))
        x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_always_post_norm(x, layer, mask=None):
    """Wrong: ignores layer.norm_first and always wires post-norm."""
    attended, weights = layer.self_attn(x, mask=mask)
    x = layer.norm1(x + layer.dropout1(attended))
    x = layer.norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


# ---------------------------------------------------------------------------------------------
# Lab 06: pooling and search. my_search(query_hidden, query_mask, doc_hidden, doc_mask, k)
# ---------------------------------------------------------------------------------------------


def _pool_mean(hidden, mask):
    w = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * w).sum(dim=1) / w.sum(dim=1).clamp(min=1e-9)


def search_cosine_similarity_broadcast(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: F.cosine_similarity of pooled vectors, broadcast [Q, 1, D] against [1, N, D]."""
    q = _pool_mean(query_hidden, query_mask)
    d = _pool_mean(doc_hidden, doc_mask)
    scores = F.cosine_similarity(q[:, None, :], d[None, :, :], dim=-1)
    top = torch.argsort(scores, dim=-1, descending=True)[:, :k]
    return scores, top


def search_einsum_manual_norm(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: einsum pooling, norms by hand with a guard for zero vectors, einsum scores."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype)
        total = torch.einsum("btd,bt->bd", hidden, m)
        count = m.sum(dim=1, keepdim=True)
        return torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total))

    def unit(v):
        length = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        return torch.where(length > 0, v / length.clamp(min=torch.finfo(v.dtype).tiny), v)

    scores = torch.einsum(
        "qd,nd->qn", unit(pool(query_hidden, query_mask)), unit(pool(doc_hidden, doc_mask))
    )
    return scores, scores.topk(k, dim=1).indices


def search_sum_pool_sort(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Correct: masked sum via torch.where (cosine does not need the count), sort descending."""

    def pooled_unit(hidden, mask):
        keep = mask.bool().unsqueeze(-1)
        total = torch.where(keep, hidden, torch.zeros((), dtype=hidden.dtype)).sum(dim=1)
        return F.normalize(total, p=2.0, dim=1)

    scores = pooled_unit(query_hidden, query_mask) @ pooled_unit(doc_hidden, doc_mask).mT
    order = scores.sort(dim=-1, descending=True, stable=True).indices
    return scores, order[..., :k]


def search_padding_polarity(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: pools over the padding positions (1 - mask), reading 1 as 'padding'."""

    def pool(hidden, mask):
        keep = (~mask.bool()).unsqueeze(-1).to(hidden.dtype)
        return (hidden * keep).sum(1) / keep.sum(1).clamp(min=1e-9)

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def search_max_pool(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: max-pools over the real tokens instead of taking their mean."""

    def pool(hidden, mask):
        keep = mask.bool().unsqueeze(-1)
        pooled = hidden.masked_fill(~keep, float("-inf")).amax(dim=1)
        return torch.where(keep.any(dim=1), pooled, torch.zeros_like(pooled))

    q = F.normalize(pool(query_hidden, query_mask), dim=-1)
    d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def search_query_side_plain_mean(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: documents pooled over real tokens, but queries with a plain mean over padding."""
    q = F.normalize(query_hidden.mean(dim=1), dim=-1)
    d = F.normalize(_pool_mean(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def search_argsort_tail(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: argsort ascending, take the last k: the right documents, worst first."""
    q = F.normalize(_pool_mean(query_hidden, query_mask), dim=-1)
    d = F.normalize(_pool_mean(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.argsort(dim=-1)[:, -k:]


def search_topk_values(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: returns topk(...).values (the best scores) instead of the indices."""
    q = F.normalize(_pool_mean(query_hidden, query_mask), dim=-1)
    d = F.normalize(_pool_mean(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).values


def search_float_cast(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong (dtype): pooled vectors cast with .float(), so float64 inputs give float32 scores."""
    q = F.normalize(_pool_mean(query_hidden, query_mask).float(), dim=-1)
    d = F.normalize(_pool_mean(doc_hidden, doc_mask).float(), dim=-1)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def search_norm_nan_empty(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: divides by .norm() by hand, so an all-padding document becomes 0/0 = NaN."""
    q = _pool_mean(query_hidden, query_mask)
    d = _pool_mean(doc_hidden, doc_mask)
    q = q / q.norm(dim=-1, keepdim=True)
    d = d / d.norm(dim=-1, keepdim=True)
    scores = q @ d.T
    return scores, scores.topk(k, dim=-1).indices


def search_topk_over_queries(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: ranks along dim=0 (for each document, its best queries), then transposes."""
    q = F.normalize(_pool_mean(query_hidden, query_mask), dim=-1)
    d = F.normalize(_pool_mean(doc_hidden, doc_mask), dim=-1)
    scores = q @ d.T
    top = scores.topk(min(k, scores.shape[0]), dim=0).indices.T
    return scores, top


# ---------------------------------------------------------------------------------------------
# Lab 07: online softmax. my_online_attention(query, key, value, block_size) -> output
# ---------------------------------------------------------------------------------------------


def online_normalised_accumulator(query, key, value, block_size):
    """Correct: keeps the normalised output and the log-sum-exp (FlashAttention-2 style)."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    lead_q = query.shape[:-1]
    lse = torch.full((*lead_q, 1), -math.inf, dtype=query.dtype)
    out = torch.zeros((*lead_q, value.shape[-1]), dtype=query.dtype)
    for start in range(0, key.shape[-2], block_size):
        stop = min(start + block_size, key.shape[-2])
        s = (query @ key[..., start:stop, :].transpose(-2, -1)) * scale
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, block_lse)
        p = torch.exp(s - new_lse)  # this block's final-normalised weights, so far
        out = out * torch.exp(lse - new_lse) + p @ value[..., start:stop, :]
        lse = new_lse
    return out


def online_finfo_min_start_scaled_scores(query, key, value, block_size):
    """Correct: running max starts at the dtype's minimum, scores (not queries) scaled."""
    dtype = query.dtype
    tq_shape = query.shape[:-1]
    m = torch.full((*tq_shape, 1), torch.finfo(dtype).min, dtype=dtype)
    ell = torch.zeros((*tq_shape, 1), dtype=dtype)
    a = torch.zeros((*tq_shape, value.shape[-1]), dtype=dtype)
    k_blocks = key.split(block_size, dim=-2)
    v_blocks = value.split(block_size, dim=-2)
    for kb, vb in zip(k_blocks, v_blocks, strict=True):
        s = torch.einsum("...qd,...kd->...qk", query, kb) / math.sqrt(query.shape[-1])
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        ell = alpha * ell + p.sum(dim=-1, keepdim=True)
        a = alpha * a + torch.einsum("...qk,...kv->...qv", p, vb)
        m = m_new
    return a / ell


def online_reverse_block_order(query, key, value, block_size):
    """Correct: visits the blocks from last to first (the softmax does not care about order)."""
    q = query * query.shape[-1] ** -0.5
    tk = key.shape[-2]
    starts = list(range(0, tk, block_size))[::-1]
    row_max = row_sum = acc = None
    for start in starts:
        kb = key.narrow(-2, start, min(block_size, tk - start))
        vb = value.narrow(-2, start, min(block_size, tk - start))
        s = q @ kb.mT
        bmax = s.amax(dim=-1, keepdim=True)
        if row_max is None:
            row_max = bmax
            p = torch.exp(s - row_max)
            row_sum = p.sum(dim=-1, keepdim=True)
            acc = p @ vb
            continue
        new_max = torch.maximum(row_max, bmax)
        factor = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * factor + p.sum(dim=-1, keepdim=True)
        acc = acc * factor + p @ vb
        row_max = new_max
    return acc / row_sum


def _online_template(query, key, value, block_size, *, step=None):
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        kb = key[..., start : start + block_size, :]
        vb = value[..., start : start + block_size, :]
        row_max, row_sum, acc = step(q, kb, vb, row_max, row_sum, acc)
    return acc / row_sum


def online_block_max_only(query, key, value, block_size):
    """Wrong (numerics): the running max is replaced by each block's own max, not max(m, ...)."""

    def step(q, kb, vb, row_max, row_sum, acc):
        s = q @ kb.transpose(-2, -1)
        new_max = s.amax(dim=-1, keepdim=True)
        # At the first block row_max is -inf: exp(-inf - x) = 0, fine; later it may be > 1.
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        return new_max, row_sum * rescale + p.sum(-1, keepdim=True), acc * rescale + p @ vb

    return _online_template(query, key, value, block_size, step=step)


def online_block_local_max(query, key, value, block_size):
    """Wrong: the block's exponentials are taken relative to the block's max, not the new max."""

    def step(q, kb, vb, row_max, row_sum, acc):
        s = q @ kb.transpose(-2, -1)
        block_max = s.amax(dim=-1, keepdim=True)
        new_max = torch.maximum(row_max, block_max)
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - block_max)
        return new_max, row_sum * rescale + p.sum(-1, keepdim=True), acc * rescale + p @ vb

    return _online_template(query, key, value, block_size, step=step)


def online_slice_off_by_one(query, key, value, block_size):
    """Wrong: slices start:start + block_size - 1, dropping the last key of every block."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        end = min(start + block_size - 1, key.shape[-2])
        s = q @ key[..., start:end, :].transpose(-2, -1)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start:end, :]
        row_max = new_max
    return acc / row_sum


def online_integer_block_count(query, key, value, block_size):
    """Wrong: loops over range(Tk // block_size) blocks, so a shorter last block is skipped."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for b in range(key.shape[-2] // block_size):
        kb = key[..., b * block_size : (b + 1) * block_size, :]
        vb = value[..., b * block_size : (b + 1) * block_size, :]
        s = q @ kb.transpose(-2, -1)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ vb
        row_max = new_max
    return acc / row_sum


def online_default_dtype_accumulators(query, key, value, block_size):
    """Wrong (dtype): accumulators made without dtype=, so float64 inputs give float32 output."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf)
    row_sum = torch.zeros(*q.shape[:-1], 1)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1])
    for start in range(0, key.shape[-2], block_size):
        s = (q @ key[..., start : start + block_size, :].transpose(-2, -1)).to(acc.dtype)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start : start + block_size, :].to(acc.dtype)
        row_max = new_max
    return acc / row_sum


def online_blocks_on_first_axis(query, key, value, block_size):
    """Wrong: slices key[start:stop] (the first axis), right only for unbatched [T, D] inputs."""
    q = query / math.sqrt(query.shape[-1])
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    for start in range(0, key.shape[-2], block_size):
        kb = key[start : start + block_size]
        vb = value[start : start + block_size]
        s = q @ kb.transpose(-2, -1)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ vb
        row_max = new_max
    return acc / row_sum


def online_scores_precomputed(query, key, value, block_size):
    """Wrong (contract): computes all the scores first, then runs the online loop over them."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # [..., Tq, Tk]
    row_max = torch.full((*query.shape[:-1], 1), -math.inf, dtype=query.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype)
    for start in range(0, key.shape[-2], block_size):
        s = scores[..., start : start + block_size]
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p = torch.exp(s - new_max)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ value[..., start : start + block_size, :]
        row_max = new_max
    return acc / row_sum


# ---------------------------------------------------------------------------------------------
# Lab 08: KV-cache decoding, one step.
# my_decode_step(attention, token [B, 1, D], cache (keys, values) [B, H, t, Dh])
#     -> (output [B, 1, D], (keys, values) [B, H, t + 1, Dh])
# ---------------------------------------------------------------------------------------------


def _position_row(t, d_model, dtype):
    """Row t of the sinusoidal encoding, computed here in float64 from the formula."""
    i = torch.arange(d_model, dtype=torch.float64)
    angles = t / 10000.0 ** ((i - i % 2) / d_model)
    return torch.where(i % 2 == 0, torch.sin(angles), torch.cos(angles)).to(dtype)


def step_einsum_by_hand(attention, token, cache):
    """Correct: projections, scores, softmax and merge written with einsum on the weights."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[-2]
    x = token + sinusoidal_encoding(t + 1, d)[t].to(token.dtype)

    def project(linear):
        y = torch.einsum("bsd,ed->bse", x, linear.weight)
        if linear.bias is not None:
            y = y + linear.bias
        return y.reshape(b, 1, h, dh).permute(0, 2, 1, 3)  # [B, H, 1, Dh]

    q, k, v = project(attention.q_proj), project(attention.k_proj), project(attention.v_proj)
    keys = torch.cat((keys, k), dim=-2)
    values = torch.cat((values, v), dim=-2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(dh)
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    heads = torch.einsum("bhqk,bhkd->bqhd", weights, values).reshape(b, 1, d)
    out = torch.einsum("bqe,de->bqd", heads, attention.out_proj.weight)
    if attention.out_proj.bias is not None:
        out = out + attention.out_proj.bias
    return out, (keys, values)


def step_preallocated_fused_sdpa(attention, token, cache):
    """Correct: new cache of t + 1 positions, old one copied in; torch's fused SDPA."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    old_keys, old_values = cache
    t = old_keys.size(2)
    x = token + sinusoidal_encoding(t + 1, d)[-1]  # the last row is row t
    q = attention.q_proj(x).unflatten(-1, (h, dh)).transpose(1, 2)
    k = attention.k_proj(x).unflatten(-1, (h, dh)).transpose(1, 2)
    v = attention.v_proj(x).unflatten(-1, (h, dh)).transpose(1, 2)
    keys = old_keys.new_empty(b, h, t + 1, dh)
    values = old_values.new_empty(b, h, t + 1, dh)
    keys[:, :, :t] = old_keys
    values[:, :, :t] = old_values
    keys[:, :, t:] = k
    values[:, :, t:] = v
    out = F.scaled_dot_product_attention(q, keys, values)  # [B, H, 1, Dh]
    return attention.out_proj(out.transpose(1, 2).flatten(2)), (keys, values)


def step_loop_over_heads(attention, token, cache):
    """Correct: one head at a time, columns sliced from the projections; cache stacked."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2]
    x = token + _position_row(t, d, token.dtype)
    q_all, k_all, v_all = attention.q_proj(x), attention.k_proj(x), attention.v_proj(x)
    new_keys, new_values, outs = [], [], []
    for head in range(h):
        cols = slice(head * dh, (head + 1) * dh)
        k_h = torch.cat([keys[:, head], k_all[:, :, cols]], dim=1)  # [B, t + 1, Dh]
        v_h = torch.cat([values[:, head], v_all[:, :, cols]], dim=1)
        out_h, _ = scaled_dot_product_attention(q_all[:, :, cols], k_h, v_h)  # [B, 1, Dh]
        new_keys.append(k_h)
        new_values.append(v_h)
        outs.append(out_h)
    out = attention.out_proj(torch.cat(outs, dim=-1))
    return out, (torch.stack(new_keys, dim=1), torch.stack(new_values, dim=1))


def step_flat_bmm_direct_view(attention, token, cache):
    """Correct: heads split by view(B, H, 1, Dh) (valid for one token), B*H flattened, bmm."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2]
    x = token + _position_row(t, d, token.dtype)
    q = attention.q_proj(x).view(b, h, 1, dh)
    keys = torch.cat([keys, attention.k_proj(x).view(b, h, 1, dh)], dim=2)
    values = torch.cat([values, attention.v_proj(x).view(b, h, 1, dh)], dim=2)
    scores = (
        torch.bmm(q.reshape(b * h, 1, dh), keys.reshape(b * h, t + 1, dh).transpose(1, 2))
        * dh**-0.5
    )
    out = torch.bmm(scores.softmax(dim=-1), values.reshape(b * h, t + 1, dh))
    return attention.out_proj(out.view(b, 1, d)), (keys, values)


def _step_template(
    attention,
    token,
    cache,
    *,
    position=None,
    where_position="input",
    cache_dim=2,
    replace_cache=False,
    swap_kv=False,
    out_proj=True,
    scale=None,
    softmax_dim=-1,
    split="standard",
    merge="standard",
    attend_first=False,
    first_mask_row=False,
    value_proj="v_proj",
    reverse_return=False,
    default_dtype_cache=False,
):
    """One decoding step, with one knob per wrong implementation below."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2] if position is None else position(keys)
    pe = sinusoidal_encoding(t + 1, d)[t]
    x = token + pe if where_position in ("input", "input_qk") else token

    def split_heads(y):
        if split == "interleaved":
            return y.view(b, 1, dh, h).permute(0, 3, 1, 2)  # [B, H, 1, Dh], head = column % H
        return y.view(b, 1, h, dh).transpose(1, 2)

    q_in = token + pe if where_position == "query" else x
    kv_in = x
    v_in = token if where_position == "input_qk" else x
    q_lin = attention.q_proj(q_in)
    k_lin = attention.k_proj(kv_in)
    v_lin = getattr(attention, value_proj)(v_in)
    if where_position == "projected":
        q_lin, k_lin, v_lin = q_lin + pe, k_lin + pe, v_lin + pe
    q, k, v = split_heads(q_lin), split_heads(k_lin), split_heads(v_lin)

    def attend(ks, vs):
        scores = q @ ks.transpose(-2, -1)
        scores = scores / (scale(dh, d, ks) if scale is not None else math.sqrt(dh))
        if first_mask_row:
            scores = scores.masked_fill(~causal_mask(ks.shape[-2])[:1], float("-inf"))
        return scores.softmax(dim=softmax_dim) @ vs

    if attend_first:
        out = attend(keys, values)
    if replace_cache:
        new_keys, new_values = k, v
    elif default_dtype_cache:
        new_keys = torch.zeros(b, h, t + 1, dh)
        new_values = torch.zeros(b, h, t + 1, dh)
        new_keys[:, :, :t], new_keys[:, :, t:] = keys, k
        new_values[:, :, :t], new_values[:, :, t:] = values, v
    else:
        first, second = (v, k) if swap_kv else (k, v)
        new_keys = torch.cat([keys, first], dim=cache_dim)
        new_values = torch.cat([values, second], dim=cache_dim)
    if not attend_first:
        if replace_cache:
            out = attend(torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2))
        else:
            out = attend(new_keys, new_values)
    if merge == "dh_major":
        out = out.permute(0, 2, 3, 1).reshape(b, 1, d)  # [B, 1, Dh, H] flattened
    elif split == "interleaved":
        out = out.permute(0, 2, 3, 1).reshape(b, 1, d)  # the inverse of the interleaved split
    else:
        out = out.transpose(1, 2).reshape(b, 1, d)
    if out_proj:
        out = attention.out_proj(out)
    if reverse_return:
        return (new_keys, new_values), out
    return out, (new_keys, new_values)


def step_position_one_too_far(attention, token, cache):
    """Wrong: position counted with the new token included: token t gets row t + 1."""
    return _step_template(attention, token, cache, position=lambda keys: keys.shape[2] + 1)


def step_position_from_len(attention, token, cache):
    """Wrong: t = len(keys), which is the batch size, not the number of cached tokens."""
    return _step_template(attention, token, cache, position=len)


def step_position_on_query_only(attention, token, cache):
    """Wrong: the encoding is added to the query's input only; keys and values unpositioned."""
    return _step_template(attention, token, cache, where_position="query")


def step_position_not_on_values(attention, token, cache):
    """Wrong: the encoding is added to the input of q_proj and k_proj, v_proj gets the raw token."""
    return _step_template(attention, token, cache, where_position="input_qk")


def step_position_after_projection(attention, token, cache):
    """Wrong: the encoding is added to the projected q, k and v instead of the embedding."""
    return _step_template(attention, token, cache, where_position="projected")


def step_cache_replaced(attention, token, cache):
    """Wrong: attends over old + new, but returns only the new token's key and value."""
    return _step_template(attention, token, cache, replace_cache=True)


def step_cache_on_heads_axis(attention, token, cache):
    """Wrong: the cache is concatenated along dim=1, the heads axis."""
    return _step_template(attention, token, cache, cache_dim=1)


def step_kv_swapped_on_append(attention, token, cache):
    """Wrong: the new value appended to the keys and the new key to the values."""
    return _step_template(attention, token, cache, swap_kv=True)


def step_returns_cache_first(attention, token, cache):
    """Wrong: returns (cache, output) instead of (output, cache)."""
    return _step_template(attention, token, cache, reverse_return=True)


def step_no_out_proj(attention, token, cache):
    """Wrong: heads merged but out_proj not applied."""
    return _step_template(attention, token, cache, out_proj=False)


def step_scale_by_cache_length(attention, token, cache):
    """Wrong: scores divided by sqrt of the number of cached keys, not sqrt(Dh)."""
    return _step_template(attention, token, cache, scale=lambda dh, d, ks: math.sqrt(ks.shape[-2]))


def step_softmax_over_query_axis(attention, token, cache):
    """Wrong: softmax(dim=-2), over the single query: every weight becomes 1."""
    return _step_template(attention, token, cache, softmax_dim=-2)


def step_heads_interleaved(attention, token, cache):
    """Wrong: heads split by view(B, 1, Dh, H) (head = column % H), merged back consistently."""
    return _step_template(attention, token, cache, split="interleaved")


def step_merge_dh_major(attention, token, cache):
    """Wrong: heads merged by permute(0, 2, 3, 1): the columns come out Dh-major."""
    return _step_template(attention, token, cache, merge="dh_major")


def step_attend_before_append(attention, token, cache):
    """Wrong: attends to the cache received, then appends the new key and value."""
    return _step_template(attention, token, cache, attend_first=True)


def step_first_causal_mask_row(attention, token, cache):
    """Wrong: a causal mask added anyway, its first row causal_mask(t + 1)[:1]: sees token 0."""
    return _step_template(attention, token, cache, first_mask_row=True)


def step_value_from_k_proj(attention, token, cache):
    """Wrong: copy-paste slip, the value projected with k_proj instead of v_proj."""
    return _step_template(attention, token, cache, value_proj="k_proj")


def step_cache_default_dtype(attention, token, cache):
    """Wrong: the grown cache allocated with torch.zeros(...) in the default dtype and device."""
    return _step_template(attention, token, cache, default_dtype_cache=True)


def step_position_float64(attention, token, cache):
    """Wrong: the position row computed by hand in float64 and added without casting back."""
    b, _, d = token.shape
    h, dh = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2]
    x = token + _position_row(t, d, torch.float64)  # promotes the token to float64
    split = (b, 1, h, dh)
    q = attention.q_proj(x).view(split).transpose(1, 2)
    keys = torch.cat([keys, attention.k_proj(x).view(split).transpose(1, 2)], dim=2)
    values = torch.cat([values, attention.v_proj(x).view(split).transpose(1, 2)], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return attention.out_proj(out.transpose(1, 2).reshape(b, 1, d)), (keys, values)


LABS = {
    "01": {
        "check": "check_scaled_dot_product_attention",
        "correct": [
            sdpa_einsum,
            sdpa_manual_stable_softmax,
            sdpa_split_scale_logsumexp,
            sdpa_flatten_bmm,
        ],
        "wrong": [
            (
                sdpa_sqrt_precedence,
                "`d_k ** 1/2` is d_k / 2, not sqrt(d_k) (same only for d_k = 4)",
            ),
            (
                sdpa_scale_by_value_width,
                "scaled by sqrt(Dv), the values' width, instead of sqrt(Dk)",
            ),
            (sdpa_scale_by_key_length, "scaled by sqrt(Tk), key.shape[-2], instead of sqrt(Dk)"),
            (sdpa_transpose_1_2, "key.transpose(1, 2): right for [B, T, D] only"),
            (sdpa_softmax_dim2, "softmax over dim=2: the keys' axis only for 3-D inputs"),
            (sdpa_naive_exp, "softmax by hand without subtracting the row maximum (overflow)"),
            (sdpa_float32_cast, "inputs cast to float32, so float64 comes back float32"),
            (sdpa_returns_swapped, "returns (weights, output) instead of (output, weights)"),
            (sdpa_log_softmax, "log_softmax instead of softmax"),
        ],
    },
    "02": {
        "check": "check_multi_head_attention",
        "correct": [mha_chunk_stack, mha_unflatten_permute, mha_loop_over_heads],
        "wrong": [
            (mha_view_heads_first, "split by view(B, H, T, Dh) directly, no transpose"),
            (mha_interleaved_heads, "split by view(B, T, Dh, H): feature f to head f % H"),
            (
                mha_merge_permute_wrong,
                "merge with permute(0, 2, 3, 1): heads' features interleaved",
            ),
            (mha_scale_by_model_width, "own attention per head scaled by sqrt(D), not sqrt(Dh)"),
            (mha_key_split_from_query, "keys split from `query` (copy-paste slip)"),
            (mha_keys_values_swapped, "keys and values swapped in the attention call"),
            (mha_weights_averaged, "weights averaged over the heads, [B, Tq, Tk]"),
            (mha_merge_with_view, "merge with .view after transpose (non-contiguous, crashes)"),
        ],
    },
    "03": {
        "check": "check_sinusoidal_encoding",
        "correct": [pe_stack_interleave, pe_exp_log, pe_phase_shift, pe_where_columns],
        "wrong": [
            (pe_float32_angles, "angles computed in float32 (error grows with the position)"),
            (pe_base_1000, "base 1000 instead of 10000"),
            (pe_power_precedence, "`10000 ** 2 * i / d`: missing parentheses around the exponent"),
            (
                pe_floor_division_exponent,
                "floor division two_i // d_model in the exponent (always 0)",
            ),
            (
                pe_odd_trim_from_front,
                "odd width: cosine angles trimmed from the front, not the back",
            ),
            (pe_odd_not_trimmed, "odd width: cosines not trimmed, the assignment crashes"),
            (pe_returns_float64, "correct values returned as float64 (no final .float())"),
            (pe_exponent_over_half_width, "exponent i / (D // 2): equals 2i / D for even D only"),
        ],
    },
    "04": {
        "check": "check_masked_attention",
        "correct": [
            masked_neg_inf_nan_to_num,
            masked_where_float32_softmax,
            masked_manual_renormalise,
            masked_empty_rows_by_any,
        ],
        "wrong": [
            (masked_fill_zero, "blocked scores filled with 0 instead of a very negative number"),
            (masked_mask_transposed, "mask transposed: blocks queries, not keys"),
            (masked_output_before_zeroing, "output computed before the empty rows are zeroed"),
            (masked_log_mask_promotes, "adds log(mask.float()): float16 becomes float32"),
            (masked_fill_minus_1e9, "fill value -1e9, out of float16's range"),
            (masked_empty_rows_uniform, "empty rows' NaN replaced by 1/Tk (uniform)"),
            (masked_renormalise_wrong_axis, "masked exponentials normalised over the queries"),
        ],
    },
    "05": {
        "check": "check_encoder_layer",
        "correct": [
            encoder_generic_sublayer,
            encoder_functional_layer_norm,
            encoder_loop_over_sublayers,
        ],
        "wrong": [
            (encoder_dropout_on_residual_sum, "dropout on the residual sum (train mode only)"),
            (encoder_dropout_on_input, "dropout on the sub-layer's input (train mode only)"),
            (
                encoder_ff_residual_from_input,
                "second residual adds the layer's input, not updated x",
            ),
            (encoder_ff_on_unnormalised_sum, "post-norm: feed-forward fed the sum before norm1"),
            (encoder_pre_norm_extra_final_norm, "pre-norm: extra norm2 on the layer's output"),
            (encoder_pre_norm_parallel, "pre-norm: feed-forward reuses norm1(x), a parallel block"),
            (encoder_mask_inverted, "passes ~mask to the attention"),
            (encoder_always_post_norm, "ignores norm_first: always post-norm"),
        ],
    },
    "06": {
        "check": "check_pooling_and_search",
        "correct": [
            search_cosine_similarity_broadcast,
            search_einsum_manual_norm,
            search_sum_pool_sort,
        ],
        "wrong": [
            (search_padding_polarity, "pools over the padding (mask read the wrong way round)"),
            (search_max_pool, "max-pool over the real tokens instead of the mean"),
            (search_query_side_plain_mean, "queries pooled with a plain mean over the padding"),
            (search_argsort_tail, "argsort ascending, last k: right documents, worst first"),
            (search_topk_values, "returns topk values instead of indices"),
            (search_float_cast, "pooled vectors cast to float32: float64 gives float32 scores"),
            (search_norm_nan_empty, "normalised by hand by .norm(): NaN for an empty document"),
            (search_topk_over_queries, "topk along dim=0 (per document), transposed"),
        ],
    },
    "07": {
        "check": "check_online_softmax",
        "correct": [
            online_normalised_accumulator,
            online_finfo_min_start_scaled_scores,
            online_reverse_block_order,
        ],
        "wrong": [
            (online_block_max_only, "running max replaced by the block's max (overflows)"),
            (
                online_block_local_max,
                "block exponentials relative to the block max, not the new max",
            ),
            (online_slice_off_by_one, "block slice start:start+block_size-1 drops a key per block"),
            (online_integer_block_count, "range(Tk // block_size): a shorter last block skipped"),
            (online_default_dtype_accumulators, "accumulators float32 by default: float64 lost"),
            (online_blocks_on_first_axis, "blocks sliced along the first axis, not the keys' axis"),
            (online_scores_precomputed, "all scores computed first, then the loop (memory)"),
        ],
    },
    "08": {
        "check": "check_kv_cache_decoding",
        "correct": [
            step_einsum_by_hand,
            step_preallocated_fused_sdpa,
            step_loop_over_heads,
            step_flat_bmm_direct_view,
        ],
        "wrong": [
            (
                step_position_one_too_far,
                "position counted after the append: token t gets row t + 1",
            ),
            (step_position_from_len, "t = len(keys), the batch size, as the position"),
            (step_position_on_query_only, "encoding added to the query's input only"),
            (
                step_position_not_on_values,
                "encoding added to q_proj's and k_proj's input, not v_proj's",
            ),
            (step_position_after_projection, "encoding added to the projected q, k and v"),
            (step_cache_replaced, "returned cache holds only the new token's key and value"),
            (step_cache_on_heads_axis, "cache concatenated along dim=1, the heads axis"),
            (step_kv_swapped_on_append, "new value appended to the keys, new key to the values"),
            (step_returns_cache_first, "returns (cache, output), the pair reversed"),
            (step_no_out_proj, "out_proj forgotten"),
            (step_scale_by_cache_length, "scores scaled by sqrt(number of cached keys)"),
            (step_softmax_over_query_axis, "softmax(dim=-2), over the single query"),
            (step_heads_interleaved, "heads split as view(B, 1, Dh, H): interleaved columns"),
            (step_merge_dh_major, "heads merged with permute(0, 2, 3, 1): Dh-major columns"),
            (step_attend_before_append, "attends to the old cache, then appends the token"),
            (step_first_causal_mask_row, "causal_mask(t + 1)[:1] applied: only token 0 attended"),
            (step_value_from_k_proj, "value projected with k_proj (copy-paste slip)"),
            (step_cache_default_dtype, "grown cache allocated by torch.zeros in the default dtype"),
            (step_position_float64, "position row computed in float64, added without a cast"),
        ],
    },
}
