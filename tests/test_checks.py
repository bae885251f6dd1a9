"""attention_lab.checks: right answers pass, stubs and every classic mistake fail, by name.

The wrong implementations below are written the way a learner writes them (``-inf`` fills,
``view`` and ``reshape``, explicit loops of the formula), independently of the variants the
checks compute internally, so a test passes only if the check recognises the mistake by what the
function does.
"""

from __future__ import annotations

import importlib
import math

import jupytext
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from attention_lab import checks
from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks import MISTAKES
from attention_lab.positional import sinusoidal_encoding
from conftest import ROOT

LABS = ROOT / "notebooks_src" / "labs"

# ---------------------------------------------------------------------------------------------
# Learner-style implementations: right by default, each keyword introduces one mistake.


def attention(
    query,
    key,
    value,
    mask=None,
    *,
    dim=-1,
    scale="sqrt_dk",
    softmax=True,
    times="value",
    order="output_first",
    transpose_scores=False,
    mask_mode="right",
    fill=None,
    naive_exp=False,
    as_float32=False,
    zero_masked_rows=True,
):
    d_k = query.size(-1)
    if transpose_scores:
        scores = key @ query.transpose(-2, -1)
    else:
        scores = torch.matmul(query, key.transpose(-2, -1))
    scores = {
        "sqrt_dk": scores / math.sqrt(d_k),
        "none": scores,
        "dk": scores / d_k,
        "times": scores * math.sqrt(d_k),
        "after_softmax": scores,
    }[scale]
    if mask is not None and mask_mode == "multiply":
        scores = scores * mask
    if mask is not None and mask_mode in ("right", "inverted"):
        blocked = ~mask if mask_mode == "right" else mask
        fill_value = torch.finfo(scores.dtype).min if fill is None else fill
        scores = scores.masked_fill(blocked, fill_value)
    if not softmax:
        weights = scores
    elif naive_exp:
        exponentials = torch.exp(scores)
        weights = exponentials / exponentials.sum(dim=dim, keepdim=True)
    else:
        weights = F.softmax(scores, dim=dim)
    if scale == "after_softmax":
        weights = weights / math.sqrt(d_k)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    if mask is not None and mask_mode == "right" and zero_masked_rows:
        weights = weights.masked_fill(~mask, 0.0)
    output = weights @ {"value": value, "key": key}.get(times, value)
    if times == "nothing":
        output = weights
    if as_float32:
        output, weights = output.float(), weights.float()
    if order == "single":
        return output
    if order == "weights_first":
        return weights, output
    return output, weights


def multi_head(
    query,
    key,
    value,
    num_heads,
    *,
    split="right",
    merge="right",
    scale="sqrt_dk",
    dim=-1,
    average=False,
):
    batch, query_len, d_model = query.shape
    head_dim = d_model // num_heads

    def split_heads(x):
        length = query_len if split == "query_length" else x.size(1)
        if split == "no_transpose":
            return x.view(batch, num_heads, length, head_dim)
        if split == "swapped":
            return x.view(batch, length, head_dim, num_heads).transpose(1, 2)
        return x.view(batch, length, num_heads, head_dim).transpose(1, 2)

    q, k, v = split_heads(query), split_heads(key), split_heads(value)
    scores = q @ k.transpose(-2, -1)
    divisor = {"sqrt_dk": math.sqrt(head_dim), "sqrt_d_model": math.sqrt(d_model)}
    if scale != "after_softmax":
        scores = scores / divisor.get(scale, 1.0)
    weights = torch.softmax(scores, dim=dim)
    if scale == "after_softmax":
        weights = weights / math.sqrt(head_dim)
    out = weights @ v
    if merge == "none":
        return out, weights
    if merge == "no_transpose":
        out = out.contiguous().view(batch, query_len, d_model)
    elif merge == "permute_0231":
        out = out.permute(0, 2, 3, 1).reshape(batch, query_len, d_model)
    elif merge == "view_after_transpose":
        out = out.transpose(1, 2).view(batch, query_len, d_model)
    else:
        out = out.transpose(1, 2).contiguous().view(batch, query_len, d_model)
    return out, weights.mean(dim=1) if average else weights


def encoding(
    max_len,
    d_model,
    *,
    swap=False,
    exponent="2i",
    layout="interleaved",
    start=0,
    invert=False,
    transpose=False,
    odd_safe=True,
):
    # The angles in float64, as the lab asks (float32 angles are a mistake of their own).
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    position = torch.arange(start, start + max_len, dtype=torch.float64).unsqueeze(1)
    if exponent == "column":
        for j in range(d_model):
            angle = position[:, 0] / 10000 ** (j / d_model)
            pe[:, j] = torch.sin(angle) if j % 2 == 0 else torch.cos(angle)
        return pe.float()
    i = torch.arange(0, (d_model + 1) // 2, dtype=torch.float64)
    power = 10000 ** ((2 * i if exponent == "2i" else i) / d_model)
    angle = position * power if invert else position / power
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    n_cos = d_model // 2 if odd_safe else (d_model + 1) // 2
    if layout == "halves":
        pe = torch.cat([first(angle), second(angle)[:, : d_model // 2]], dim=1)
    else:
        pe[:, 0::2] = first(angle)
        pe[:, 1::2] = second(angle)[:, :n_cos]
    pe = pe.float()
    return pe.T if transpose else pe


def encoder_layer(x, layer, mask=None, *, mistake=None):
    pre = layer.norm_first
    norm1, norm2 = layer.norm1, layer.norm2
    if mistake == "arrangement":
        pre = not pre
    if mistake == "norms_swapped":
        norm1, norm2 = norm2, norm1
    if mistake == "norm1_twice":
        norm2 = norm1
    attn_mask = None if mistake == "mask_ignored" else mask
    if pre and mistake in ("normalised_residual", "normalised_residual_in_attention"):
        h = norm1(x)
        attended, weights = layer.self_attn(h, mask=attn_mask)
        x = h + layer.dropout1(attended)
        if mistake == "normalised_residual_in_attention":
            return x + layer.dropout2(layer.feed_forward(norm2(x))), weights
        h = norm2(x)
        return h + layer.dropout2(layer.feed_forward(h)), weights
    if pre:
        attended, weights = layer.self_attn(norm1(x), mask=attn_mask)
        x = x + layer.dropout1(attended)
        x = x + layer.dropout2(layer.feed_forward(norm2(x)))
        return x, weights
    attended, weights = layer.self_attn(x, mask=attn_mask)
    if mistake == "norm_outside":
        x = x + norm1(layer.dropout1(attended))
        return x + norm2(layer.dropout2(layer.feed_forward(x))), weights
    if mistake == "no_attention_residual":
        x = norm1(layer.dropout1(attended))
    else:
        x = norm1(x + layer.dropout1(attended))
    if mistake == "no_feed_forward_residual":
        x = norm2(layer.dropout2(layer.feed_forward(x)))
    else:
        x = norm2(x + layer.dropout2(layer.feed_forward(x)))
    return x, weights


def encoder_layer_pre_norm_only(x, layer, mask=None):
    """Always pre-norm: wrong for the post-norm layers."""
    attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
    x = x + attended
    return x + layer.feed_forward(layer.norm2(x)), weights


def encoder_layer_post_norm_only(x, layer, mask=None):
    """Always post-norm: right for post-norm layers, wrong for the pre-norm ones."""
    attended, weights = layer.self_attn(x, mask=mask)
    x = layer.norm1(x + attended)
    return layer.norm2(x + layer.feed_forward(x)), weights


def search(
    query_hidden,
    query_mask,
    doc_hidden,
    doc_mask,
    k,
    *,
    pool="masked",
    unsqueeze=True,
    clamp=True,
    normalise="both",
    dim=-1,
    transpose=False,
    rank="topk",
):
    def mean_pool(hidden, mask):
        if pool == "all":
            return hidden.mean(dim=1)
        weights = mask.unsqueeze(-1) if unsqueeze else mask
        weights = weights.to(hidden.dtype)
        count = weights.sum(dim=1)
        if clamp:
            count = count.clamp(min=1e-9)
        return (hidden * weights).sum(dim=1) / count

    queries, documents = mean_pool(query_hidden, query_mask), mean_pool(doc_hidden, doc_mask)
    if normalise == "by_hand":
        queries = queries / queries.norm(dim=-1, keepdim=True)
        documents = documents / documents.norm(dim=-1, keepdim=True)
    if normalise in ("both", "queries"):
        queries = F.normalize(queries, dim=dim)
    if normalise in ("both", "documents"):
        documents = F.normalize(documents, dim=dim)
    scores = documents @ queries.T if transpose else queries @ documents.T
    if rank == "argsort":
        return scores, scores.argsort(dim=-1)[:, :k]
    if rank == "over_queries":
        return scores, scores.topk(k, dim=0).indices
    return scores, scores.topk(k, dim=-1).indices


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
):
    q = query / math.sqrt(query.shape[-1]) if scale else query
    if full_scores:
        every_score = q @ key.transpose(-2, -1)
    row_max = torch.full((*q.shape[:-1], 1), start, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    key_len = key.shape[-2]
    stop = key_len // block_size * block_size if drop_last else key_len
    for begin in range(0, stop, block_size):
        end = begin + block_size
        if full_scores:
            scores = every_score[..., begin:end]
        else:
            scores = q @ key[..., begin:end, :].transpose(-2, -1)
        if maximum == "none":
            new_max = torch.zeros_like(row_max)
        elif maximum == "block":
            new_max = scores.amax(dim=-1, keepdim=True)
        else:
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(new_max - row_max) if invert else torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = (row_sum * rescale if rescale_sum else row_sum) + p.sum(dim=-1, keepdim=True)
        acc = (acc * rescale if rescale_acc else acc) + p @ value[..., begin:end, :]
        row_max = new_max
    return acc / row_sum if divide else acc


def decode(
    attention,
    x,
    *,
    cat_dim=2,
    start_empty=True,
    positions="right",
    replace=False,
    append_after=False,
    recompute=False,
):
    batch, length, d_model = x.shape
    heads = attention.num_heads
    head_dim = d_model // heads
    encoding = sinusoidal_encoding(length, d_model)

    def split(y):
        return y.view(batch, y.shape[1], heads, head_dim).transpose(1, 2)

    keys = torch.zeros(batch, heads, 0, head_dim) if start_empty else None
    values = keys
    outputs = []
    for t in range(length):
        position = {"right": t, "restart": 0}.get(positions)
        token = x[:, t : t + 1]
        if position is not None:
            token = token + encoding[position]
        if recompute:
            prefix = x[:, : t + 1] + encoding[: t + 1]
            keys, values = split(attention.k_proj(prefix)), split(attention.v_proj(prefix))
        q, k, v = (
            split(proj(token)) for proj in (attention.q_proj, attention.k_proj, attention.v_proj)
        )
        if append_after:
            if keys.shape[2] == 0:
                out = torch.zeros_like(q)
            else:
                out, _ = scaled_dot_product_attention(q, keys, values)
        if recompute:
            pass
        elif replace or keys is None:
            keys, values = k, v
        else:
            keys, values = torch.cat([keys, k], dim=cat_dim), torch.cat([values, v], dim=cat_dim)
        if not append_after:
            out, _ = scaled_dot_product_attention(q, keys, values)
        outputs.append(attention.out_proj(out.transpose(1, 2).reshape(batch, 1, d_model)))
    return torch.cat(outputs, dim=1), keys


def scores_only(*args):
    return search(*args)[0]


def search_in_float64(query_hidden, query_mask, doc_hidden, doc_mask, k):
    return search(query_hidden.double(), query_mask, doc_hidden.double(), doc_mask, k)


def online_in_float64(query, key, value, block_size):
    return online_attention(query.double(), key.double(), value.double(), block_size)


def outputs_only(attention, x):
    return decode(attention, x)[0]


def calls_the_layer(x, layer, mask=None):
    return layer(x, mask)


def with_(fn, **deviation):
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs, **deviation)

    wrong.__name__ = f"{fn.__name__}_with_{'_'.join(deviation)}"
    return wrong


def masked(**deviation):
    """A four-argument masked attention with one deviation."""

    def wrong(query, key, value, mask):
        return attention(query, key, value, mask, **deviation)

    wrong.__name__ = f"masked_attention_with_{'_'.join(deviation) or 'nothing_wrong'}"
    return wrong


def unmasked(**deviation):
    def wrong(query, key, value):
        return attention(query, key, value, **deviation)

    wrong.__name__ = f"attention_with_{'_'.join(deviation) or 'nothing_wrong'}"
    return wrong


def ignores_mask(query, key, value, mask):
    return attention(query, key, value)


def stub(*args, **kwargs):
    raise NotImplementedError("write your implementation here")


def flat(error: BaseException) -> str:
    """The message with its line wrapping undone."""
    return " ".join(str(error).split())


# ---------------------------------------------------------------------------------------------
# Right answers pass.

RIGHT = [
    (checks.check_scaled_dot_product_attention, unmasked()),
    (checks.check_multi_head_attention, multi_head),
    (checks.check_sinusoidal_encoding, encoding),
    (checks.check_masked_attention, masked()),
    (checks.check_encoder_layer, encoder_layer),
    (checks.check_pooling_and_search, search),
    (checks.check_online_softmax, online_attention),
    (checks.check_kv_cache_decoding, decode),
]
CHECK_IDS = [check.__name__ for check, _ in RIGHT]


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_a_right_implementation_passes_with_one_line(check, fn, capsys):
    check(fn)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"✓ {fn.__name__} matches the library on all")
    assert len(lines[0]) <= 76  # fits the book's code column without scrolling


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_the_stub_fails_with_a_helpful_message(check, fn):
    with pytest.raises(AssertionError) as info:
        check(stub)
    assert "still the stub" in flat(info.value)
    message = flat(info.value)
    assert 'Replace the line "raise NotImplementedError(...)" with your implementation' in message
    # The book shows messages with the traceback lexer, which fails on backticks (a warning).
    assert "`" not in message
    assert info.value.__cause__ is None  # no NotImplementedError traceback on top


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_a_non_callable_is_a_type_error(check, fn):
    with pytest.raises(TypeError, match="fn must be a function"):
        check("my_function")


# ---------------------------------------------------------------------------------------------
# Every mistake is rejected, and named.

WRONG = [
    # check, wrong implementation, key of the mistake the message must name
    (checks.check_scaled_dot_product_attention, unmasked(dim=-2), "softmax_axis"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="none"), "no_scaling"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="dk"), "scaled_by_d_k"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="times"), "scale_multiplied"),
    (checks.check_scaled_dot_product_attention, unmasked(softmax=False), "no_softmax"),
    (
        checks.check_scaled_dot_product_attention,
        unmasked(scale="after_softmax"),
        "scaled_after_softmax",
    ),
    (
        checks.check_scaled_dot_product_attention,
        unmasked(transpose_scores=True),
        "scores_transposed",
    ),
    (checks.check_scaled_dot_product_attention, unmasked(times="key"), "weights_times_keys"),
    (checks.check_scaled_dot_product_attention, unmasked(times="nothing"), "output_is_weights"),
    (checks.check_scaled_dot_product_attention, unmasked(order="weights_first"), "pair_swapped"),
    (checks.check_scaled_dot_product_attention, unmasked(order="single"), "not_a_pair"),
    (checks.check_scaled_dot_product_attention, unmasked(naive_exp=True), "overflow"),
    (checks.check_scaled_dot_product_attention, unmasked(as_float32=True), "wrong_dtype"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="no_transpose"),
        "merge_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="permute_0231"),
        "merge_wrong_permutation",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="no_transpose"),
        "split_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="query_length"),
        "split_with_query_length",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="no_transpose", merge="no_transpose"),
        "split_and_merge_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="swapped"),
        "heads_and_width_swapped",
    ),
    (checks.check_multi_head_attention, with_(multi_head, merge="none"), "heads_not_merged"),
    (checks.check_multi_head_attention, with_(multi_head, average=True), "weights_averaged"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="view_after_transpose"),
        "view_after_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, scale="sqrt_d_model"),
        "scaled_by_sqrt_d_model",
    ),
    (checks.check_multi_head_attention, with_(multi_head, scale="none"), "no_scaling"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, scale="after_softmax"),
        "scaled_after_softmax",
    ),
    (checks.check_multi_head_attention, with_(multi_head, dim=-2), "softmax_axis"),
    (checks.check_sinusoidal_encoding, with_(encoding, swap=True), "sin_cos_swapped"),
    (checks.check_sinusoidal_encoding, with_(encoding, exponent="i"), "frequency_i_not_2i"),
    (
        checks.check_sinusoidal_encoding,
        with_(encoding, exponent="column"),
        "frequency_column_index",
    ),
    (checks.check_sinusoidal_encoding, with_(encoding, invert=True), "frequency_inverted"),
    (checks.check_sinusoidal_encoding, with_(encoding, layout="halves"), "halves_not_interleaved"),
    (checks.check_sinusoidal_encoding, with_(encoding, start=1), "positions_from_one"),
    (checks.check_sinusoidal_encoding, with_(encoding, transpose=True), "encoding_transposed"),
    (checks.check_sinusoidal_encoding, with_(encoding, odd_safe=False), "odd_d_model"),
    (checks.check_masked_attention, masked(mask_mode="inverted"), "mask_polarity"),
    (checks.check_masked_attention, masked(mask_mode="inverted", fill=-1e9), "mask_polarity"),
    (checks.check_masked_attention, ignores_mask, "mask_ignored"),
    (checks.check_masked_attention, masked(mask_mode="after_softmax"), "mask_after_softmax"),
    (checks.check_masked_attention, masked(mask_mode="multiply"), "scores_times_mask"),
    (checks.check_masked_attention, masked(scale="after_softmax"), "scaled_after_softmax"),
    (
        checks.check_masked_attention,
        masked(fill=float("-inf"), zero_masked_rows=False),
        "nan_fully_masked",
    ),
    (checks.check_masked_attention, masked(zero_masked_rows=False), "uniform_fully_masked"),
    (checks.check_masked_attention, masked(fill=-1e9), "fill_overflow"),
    (checks.check_masked_attention, masked(dim=-2), "softmax_axis"),
    (checks.check_masked_attention, masked(scale="none"), "no_scaling"),
    (checks.check_masked_attention, masked(scale="dk"), "scaled_by_d_k"),
    (checks.check_masked_attention, masked(scale="times"), "scale_multiplied"),
    (checks.check_masked_attention, masked(softmax=False), "no_softmax"),
    (checks.check_masked_attention, masked(transpose_scores=True), "scores_transposed"),
    (checks.check_masked_attention, masked(times="key"), "weights_times_keys"),
    (checks.check_masked_attention, masked(times="nothing"), "output_is_weights"),
    (checks.check_masked_attention, masked(order="weights_first"), "pair_swapped"),
    (checks.check_encoder_layer, encoder_layer_pre_norm_only, "pre_norm_instead_of_post_norm"),
    (checks.check_encoder_layer, encoder_layer_post_norm_only, "post_norm_instead_of_pre_norm"),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="no_attention_residual"),
        "no_attention_residual",
    ),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="no_feed_forward_residual"),
        "no_feed_forward_residual",
    ),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="norm_outside"),
        "norm_outside_residual",
    ),
    (checks.check_encoder_layer, with_(encoder_layer, mistake="norms_swapped"), "norms_swapped"),
    (checks.check_encoder_layer, with_(encoder_layer, mistake="norm1_twice"), "norm1_used_twice"),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="normalised_residual"),
        "pre_norm_residual_normalised",
    ),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="normalised_residual_in_attention"),
        "pre_norm_residual_normalised",
    ),
    (
        checks.check_encoder_layer,
        with_(encoder_layer, mistake="mask_ignored"),
        "encoder_mask_ignored",
    ),
    (checks.check_pooling_and_search, with_(search, pool="all"), "mean_over_padding"),
    (checks.check_pooling_and_search, with_(search, unsqueeze=False), "pool_mask_not_unsqueezed"),
    (checks.check_pooling_and_search, with_(search, clamp=False), "empty_sequence_nan"),
    (checks.check_pooling_and_search, with_(search, normalise="by_hand"), "empty_sequence_nan"),
    (checks.check_pooling_and_search, with_(search, normalise="none"), "cosine_not_normalised"),
    (checks.check_pooling_and_search, with_(search, dim=0), "normalised_wrong_axis"),
    (checks.check_pooling_and_search, with_(search, normalise="queries"), "normalised_one_side"),
    (checks.check_pooling_and_search, with_(search, normalise="documents"), "normalised_one_side"),
    (checks.check_pooling_and_search, with_(search, transpose=True), "search_scores_transposed"),
    (
        checks.check_pooling_and_search,
        with_(search, rank="over_queries"),
        "search_scores_transposed",
    ),
    (checks.check_pooling_and_search, with_(search, rank="argsort"), "ranked_ascending"),
    (checks.check_online_softmax, with_(online_attention, rescale_sum=False), "sum_not_rescaled"),
    (checks.check_online_softmax, with_(online_attention, rescale_acc=False), "acc_not_rescaled"),
    (
        checks.check_online_softmax,
        with_(online_attention, rescale_sum=False, rescale_acc=False),
        "nothing_rescaled",
    ),
    (checks.check_online_softmax, with_(online_attention, invert=True), "rescale_inverted"),
    (checks.check_online_softmax, with_(online_attention, divide=False), "not_divided_by_sum"),
    (checks.check_online_softmax, with_(online_attention, drop_last=True), "last_block_dropped"),
    (checks.check_online_softmax, with_(online_attention, maximum="none"), "online_overflow"),
    (checks.check_online_softmax, with_(online_attention, maximum="block"), "online_overflow"),
    (checks.check_online_softmax, with_(online_attention, start=0.0), "max_started_at_zero"),
    (checks.check_online_softmax, with_(online_attention, full_scores=True), "full_score_matrix"),
    (checks.check_online_softmax, with_(online_attention, scale=False), "no_scaling"),
    (checks.check_kv_cache_decoding, with_(decode, cat_dim=1), "cache_wrong_axis"),
    (checks.check_kv_cache_decoding, with_(decode, cat_dim=-1), "cache_wrong_axis"),
    (
        checks.check_kv_cache_decoding,
        with_(decode, cat_dim=1, start_empty=False),
        "cache_wrong_axis",
    ),
    (checks.check_kv_cache_decoding, with_(decode, positions="restart"), "positions_restart"),
    (checks.check_kv_cache_decoding, with_(decode, positions="none"), "no_positions"),
    (checks.check_kv_cache_decoding, with_(decode, replace=True), "cache_replaced"),
    (
        checks.check_kv_cache_decoding,
        with_(decode, append_after=True),
        "appended_after_attending",
    ),
    (checks.check_kv_cache_decoding, with_(decode, recompute=True), "prefix_recomputed"),
]
# The shared mistakes, on the checks that test them with their own code.
WRONG += [
    (checks.check_pooling_and_search, scores_only, "not_a_pair"),
    (checks.check_pooling_and_search, search_in_float64, "wrong_dtype"),
    (checks.check_online_softmax, online_in_float64, "wrong_dtype"),
    (checks.check_kv_cache_decoding, outputs_only, "not_a_pair"),
]


@pytest.mark.parametrize(
    ("check", "wrong", "mistake"),
    WRONG,
    ids=[f"{check.__name__.removeprefix('check_')}-{key}" for check, _, key in WRONG],
)
def test_a_mistake_is_rejected_and_named(check, wrong, mistake):
    with pytest.raises(AssertionError) as info:
        check(wrong)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    assert "on case '" in message  # names the first failing case
    assert all(len(line) <= 76 for line in str(info.value).splitlines()[1:])


def lab_tests() -> list[tuple]:
    """(check, wrong, key) of the labs' own test files, tests/test_checks_labNN.py: each has
    CHECK and WRONG = [(wrong implementation, key), ...]."""
    found = []
    for path in sorted((ROOT / "tests").glob("test_checks_lab*.py")):
        module = importlib.import_module(path.stem)
        found += [(module.CHECK, wrong, key) for wrong, key in module.WRONG]
    return found


def test_every_mistake_the_checks_know_is_proved_by_a_wrong_implementation():
    assert {key for _, _, key in WRONG + lab_tests()} == set(MISTAKES)
    assert not any("`" in text for text in MISTAKES.values())  # see the stub test


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_a_check_documents_every_mistake_it_is_tested_on(check, fn):
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    tested = {key for c, _, key in WRONG + lab_tests() if c is check}
    assert tested <= documented
    # The rest are the shared ones (a pair returned the wrong way round, a dtype ...), proved
    # on another check that goes through the same code.
    shared = {"pair_swapped", "not_a_pair", "wrong_dtype"}
    assert documented - tested <= shared


def test_calling_the_whole_layer_is_refused_with_advice():
    with pytest.raises(AssertionError) as info:
        checks.check_encoder_layer(calls_the_layer)
    assert "build the layer from its parts" in flat(info.value)


def test_a_crash_names_the_case_and_keeps_the_learners_traceback():
    def crashes(query, key, value):
        return query @ value  # wrong shapes: a RuntimeError

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(crashes)
    assert "raised RuntimeError on case 'batch of 2" in flat(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_unknown_mistake_still_names_case_and_difference():
    def off_by_a_bit(query, key, value):
        output, weights = attention(query, key, value)
        return output + 0.1, weights

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(off_by_a_bit)
    message = flat(info.value)
    assert "the output differs: largest difference 0.1" in message
    assert "Where it goes wrong: the weights are right, the output is not" in message


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    for check, fn in RIGHT:
        check(fn)
    assert torch.equal(torch.get_rng_state(), before)


# Each example runs the whole check: a few are enough and the suite's budget would be slow.
@settings(max_examples=8)
@given(shift=st.floats(min_value=-3, max_value=3).filter(lambda s: abs(s) > 1e-2))
def test_any_shifted_output_is_rejected(shift):
    """Whatever the learner's output is off by, the check does not pass it."""

    def shifted(query, key, value):
        output, weights = attention(query, key, value)
        return output + shift, weights

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(shifted)
    assert "does not match the library" in flat(info.value)


# Each example runs the whole check: a few are enough and the suite's budget would be slow.
@settings(max_examples=6)
@given(scale=st.floats(min_value=0.05, max_value=20).filter(lambda s: abs(s - 1) > 0.05))
def test_any_other_temperature_is_rejected(scale):
    def rescaled(query, key, value):
        return attention(query * scale, key, value)

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(rescaled)
    assert "the weights differ" in flat(info.value)


# ---------------------------------------------------------------------------------------------
# The labs' own code: the solution in each page passes its check, the stub in it fails.

LAB_CHECKS = {
    "01_scaled_dot_product_attention": "check_scaled_dot_product_attention",
    "02_multi_head_attention": "check_multi_head_attention",
    "03_positional_encoding": "check_sinusoidal_encoding",
    "04_masks": "check_masked_attention",
    "05_encoder_layer": "check_encoder_layer",
    "06_pooling_and_search": "check_pooling_and_search",
    "07_online_softmax": "check_online_softmax",
    "08_kv_cache_decoding": "check_kv_cache_decoding",
}


def lab_code(name: str) -> tuple[str, str, str]:
    """(setup, stub, solution) code of a lab page: cells before the stub, the stub, the solution.

    The solution is every code cell between the page's ``{solution-start}`` and
    ``{solution-end}`` markers.
    """
    nb = jupytext.read(LABS / f"{name}.md")
    setup, stub_code, solution = [], None, []
    inside = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if "{solution-start}" in cell.source:
                inside = True
            if "{solution-end}" in cell.source:
                inside = False
            continue
        if inside:
            solution.append(cell.source)
        elif stub_code is None and "raise NotImplementedError" in cell.source:
            stub_code = cell.source
        elif stub_code is None:
            setup.append(cell.source)
    assert stub_code and solution, f"{name}: no stub or no solution found"
    return "\n".join(setup), stub_code, "\n".join(solution)


def run_lab_cells(*sources: str) -> dict:
    namespace: dict = {}
    for source in sources:
        lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]
        exec(compile("\n".join(lines), "<lab>", "exec"), namespace)  # noqa: S102 - our own pages
    return namespace


def learner_function(namespace: dict, stub_source: str):
    name = stub_source.split("def ", 1)[1].split("(", 1)[0]
    return namespace[name]


@pytest.mark.parametrize("lab", sorted(LAB_CHECKS))
def test_the_labs_solution_passes_its_check(lab, capsys):
    setup, stub_code, solution = lab_code(lab)
    namespace = run_lab_cells(setup, stub_code, solution)
    capsys.readouterr()
    getattr(checks, LAB_CHECKS[lab])(learner_function(namespace, stub_code))
    assert "matches the library on all" in capsys.readouterr().out


@pytest.mark.parametrize("lab", sorted(LAB_CHECKS))
def test_the_labs_stub_fails_its_check_with_a_helpful_message(lab):
    setup, stub_code, _ = lab_code(lab)
    namespace = run_lab_cells(setup, stub_code)
    with pytest.raises(AssertionError) as info:
        getattr(checks, LAB_CHECKS[lab])(learner_function(namespace, stub_code))
    assert "still the stub" in flat(info.value)
