"""Lab 8's learner code, used as data: the KV-cache decoding step.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each (check_kv_cache_decoding
in attention_lab.checks). ``check`` is the check; ``RIGHT`` lists implementations, ``WRONG``
``(check, implementation, mistake key)``. test_checks_lab08.py and test_checks.py run them
through the check.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks
from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import causal_mask
from attention_lab.positional import sinusoidal_encoding

check = checks.check_kv_cache_decoding


# ---------------------------------------------------------------------------------------------
# Right steps, written differently.


def step_with_library_attention(attention, token, cache):
    """The lab's solution shape: cat the cache, the library's attention, out_proj."""
    batch, _, d_model = token.shape
    keys, values = cache
    position = keys.shape[2]
    x = token + sinusoidal_encoding(position + 1, d_model)[position]
    split = (batch, 1, attention.num_heads, attention.head_dim)
    q = attention.q_proj(x).view(split).transpose(1, 2)
    k = attention.k_proj(x).view(split).transpose(1, 2)
    v = attention.v_proj(x).view(split).transpose(1, 2)
    keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return attention.out_proj(out.transpose(1, 2).reshape(batch, 1, d_model)), (keys, values)


def step_by_hand_with_einsum(attention, token, cache):
    """Scores with einsum, heads as [B, 1, H, Dh] throughout, a big encoding table sliced."""
    b, _, d = token.shape
    h = attention.num_heads
    dh = d // h
    past_k, past_v = cache
    t = past_k.size(-2)
    pe = sinusoidal_encoding(64, d)[t : t + 1]  # [1, D]
    x = token + pe
    q = attention.q_proj(x).reshape(b, 1, h, dh)
    k = attention.k_proj(x).reshape(b, 1, h, dh).permute(0, 2, 1, 3)
    v = attention.v_proj(x).reshape(b, 1, h, dh).permute(0, 2, 1, 3)
    all_k = torch.cat((past_k, k), dim=-2)
    all_v = torch.cat((past_v, v), dim=-2)
    scores = torch.einsum("bqhd,bhkd->bhqk", q, all_k) / math.sqrt(dh)
    w = F.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bhkd->bqhd", w, all_v).reshape(b, 1, d)
    return attention.out_proj(out), (all_k, all_v)


def step_with_torch_sdpa(attention, token, cache, cache_dtype=None):
    """PyTorch's fused attention, the projections through F.linear, a preallocated copy (in
    the cache's dtype unless ``cache_dtype`` says otherwise: a wrong version's)."""
    batch, _, d_model = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, d_model)[-1]
    projections = [
        F.linear(x, layer.weight, layer.bias).view(batch, 1, heads, head_dim).transpose(1, 2)
        for layer in (attention.q_proj, attention.k_proj, attention.v_proj)
    ]
    q, k, v = projections
    dtype = keys.dtype if cache_dtype is None else cache_dtype
    new_keys = torch.empty(batch, heads, t + 1, head_dim, dtype=dtype)
    new_keys[:, :, :t], new_keys[:, :, t:] = keys, k
    new_values = torch.empty_like(new_keys)
    new_values[:, :, :t], new_values[:, :, t:] = values, v
    out = F.scaled_dot_product_attention(q, new_keys, new_values)
    out = out.permute(0, 2, 1, 3).reshape(batch, 1, d_model)
    return attention.out_proj(out), (new_keys, new_values)


RIGHT = [step_with_library_attention, step_by_hand_with_einsum, step_with_torch_sdpa]


def cache_in_the_default_dtype(attention, token, cache):
    """The grown cache made by torch.empty without dtype=: float32 whatever the module's."""
    return step_with_torch_sdpa(attention, token, cache, cache_dtype=torch.float32)


# ---------------------------------------------------------------------------------------------
# Wrong steps: one mistake each.


def step(
    attention,
    token,
    cache,
    *,
    cat_dim=2,
    position="cache_length",
    positions_into="embedding",
    replace=False,
    return_cache="extended",
    append_after=False,
    out_proj=True,
    divisor="sqrt_head_dim",
    softmax_dim=-1,
    view="heads_first",
    merge=True,
    layers=("q_proj", "k_proj", "v_proj"),
    linear="layer",
    append="end",
    scores_from="keys",
    mask_row=None,
    softmax=True,
    merge_order=(0, 2, 1, 3),
    residual=False,
    squeeze=False,
    store="heads",
):
    batch, _, d_model = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2] if store == "heads" else keys.shape[1]
    where = {
        "cache_length": t,
        "zero": 0,
        "after_append": t + 1,
        "head_width": keys.shape[-1],
        "heads": keys.shape[1],
        "len_cache": len(cache),
    }.get(position, position)
    if position == "last_of_t_rows":
        pe = sinusoidal_encoding(t, d_model)[-1]
    elif position == "minus_one":
        pe = sinusoidal_encoding(t + 1, d_model)[t - 1]
    elif position in ("whole_table", "whole_table_viewed"):
        pe = sinusoidal_encoding(t + 1, d_model)
    else:
        pe = sinusoidal_encoding(where + 1, d_model)[where]
    if positions_into == "scaled_embedding":
        token = token * math.sqrt(d_model)
    x = token if positions_into in ("nowhere", "after_projection") else token + pe
    if positions_into == "twice":
        x = x + pe
    length = 1 if position == "whole_table_viewed" else -1
    split = (batch, length, heads, head_dim)
    if view != "heads_first":
        split = (batch, length, head_dim, heads)
    only = {"queries_and_keys": "qk", "queries": "q", "keys": "k", "values": "v"}
    inputs = {name: x for name in "qkv"}
    for name in "qkv":
        if positions_into in only and name not in only[positions_into]:
            inputs[name] = token

    def project(layer, y):
        if layer is None:  # the projection forgotten
            return y
        if linear == "untransposed":
            return y @ layer.weight + layer.bias
        if linear == "no_bias":
            return y @ layer.weight.t()
        return layer(y)

    q, k, v = (
        project(getattr(attention, layer) if layer else None, inputs[name])
        for name, layer in zip("qkv", layers, strict=True)
    )
    if positions_into == "after_projection":
        q, k = q + pe, k + pe
    if store == "flat":
        keys = torch.cat([keys, k], dim=1)
        values = torch.cat([values, v], dim=1)
        k_all = keys.view(batch, -1, heads, head_dim).transpose(1, 2)
        v_all = values.view(batch, -1, heads, head_dim).transpose(1, 2)
        q = q.view(split).transpose(1, 2)
        out = F.softmax(q @ k_all.transpose(-2, -1) / math.sqrt(head_dim), dim=-1) @ v_all
        out = out.transpose(1, 2).reshape(batch, -1, d_model)
        return attention.out_proj(out), (keys, values)
    q, k, v = (y.view(split).transpose(1, 2) for y in (q, k, v))
    old_keys, old_values = keys, values
    if replace:
        keys, values = k, v
    elif append == "start":
        keys, values = torch.cat([k, keys], dim=cat_dim), torch.cat([v, values], dim=cat_dim)
    elif append == "twice":
        keys, values = torch.cat([keys, k, k], dim=cat_dim), torch.cat([values, v, v], dim=2)
    else:
        keys, values = torch.cat([keys, k], dim=cat_dim), torch.cat([values, v], dim=cat_dim)
    seen_keys, seen_values = (old_keys, old_values) if append_after else (keys, values)
    if scores_from == "values":
        seen_keys, seen_values = seen_values, seen_keys
    if scores_from == "itself":
        seen_keys, seen_values = k, v
    if mask_row == "first":
        length = seen_keys.shape[2]
        allowed = torch.tril(torch.ones(length, length, dtype=torch.bool))[:1]  # [1, t + 1]
    d = {
        "sqrt_head_dim": math.sqrt(head_dim),
        "one": 1.0,
        "sqrt_d_model": math.sqrt(d_model),
        "head_dim": head_dim,
        "times": 1 / math.sqrt(head_dim),
        "sqrt_keys": math.sqrt(seen_keys.shape[2]),
    }
    scores = q @ seen_keys.transpose(-2, -1) / d[divisor]
    if mask_row == "first":
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim) if softmax else scores
    out = weights @ (seen_keys if scores_from == "keys_twice" else seen_values)
    if not merge:
        return out, (keys, values)
    out = out.permute(*merge_order).reshape(batch, -1, d_model)
    if out_proj:
        out = project(
            getattr(attention, out_proj if isinstance(out_proj, str) else "out_proj"), out
        )
    if residual == "token":
        out = out + token
    elif residual == "positioned":
        out = out + x
    if squeeze:
        out = out.squeeze(1)
    if return_cache == "received":
        return out, cache
    if return_cache == "swapped":
        return out, (values, keys)
    return out, (keys, values)


def named(**deviation):
    def wrong(attention, token, cache):
        return step(attention, token, cache, **deviation)

    wrong.__name__ = f"step_with_{'_'.join(deviation)}"
    return wrong


_stored: list = []


def step_recomputing_the_prefix(attention, token, cache):
    """Keeps the tokens in a list of its own and projects them all again at every step."""
    if cache[0].shape[2] == 0:
        _stored.clear()
    _stored.append(token)
    batch, length, d_model = token.shape[0], len(_stored), token.shape[2]
    x = torch.cat(_stored, dim=1) + sinusoidal_encoding(length, d_model)
    split = (batch, length, attention.num_heads, attention.head_dim)
    k = attention.k_proj(x).view(split).transpose(1, 2)
    v = attention.v_proj(x).view(split).transpose(1, 2)
    q = attention.q_proj(x[:, -1:]).view(batch, 1, *split[2:]).transpose(1, 2)
    out, _ = scaled_dot_product_attention(q, k, v)
    return attention.out_proj(out.transpose(1, 2).reshape(batch, 1, d_model)), (k, v)


def step_with_a_flat_cache(attention, token, cache):
    """Keeps [B, t, D] projections in the cache and splits them into heads when attending."""
    keys, values = cache
    if keys.dim() == 4:  # the check's empty cache: start a flat one
        empty = torch.zeros(token.shape[0], 0, token.shape[2], dtype=token.dtype)
        cache = (empty, empty)
    return step(attention, token, cache, store="flat")


def step_attending_with(attend):
    """A right step up to the attention, then ``attend(q, keys, values, t)`` [B, H, 1, Dh]."""

    def wrong(attention, token, cache):
        batch, _, d_model = token.shape
        keys, values = cache
        t = keys.shape[2]
        x = token + sinusoidal_encoding(t + 1, d_model)[t]
        split = (batch, 1, attention.num_heads, attention.head_dim)
        q, k, v = (
            layer(x).view(split).transpose(1, 2)
            for layer in (attention.q_proj, attention.k_proj, attention.v_proj)
        )
        keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
        out = attend(q, keys, values, t)
        return attention.out_proj(out.transpose(1, 2).reshape(batch, 1, d_model)), (keys, values)

    wrong.__name__ = f"step_{attend.__name__}"
    return wrong


def with_a_causal_mask(q, keys, values, t):
    """The library's attention given a causal mask over the cache's length."""
    return scaled_dot_product_attention(q, keys, values, causal_mask(t + 1))[0]


def with_is_causal(q, keys, values, t):
    """PyTorch's fused attention told is_causal=True: one query then sees the first key only."""
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True)


def step_calling_the_module_on_the_token(attention, token, cache):
    """The output from the module's own forward on the token; the cache kept by hand."""
    batch, _, d_model = token.shape
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, d_model)[t]
    output, _ = attention(x)
    split = (batch, 1, attention.num_heads, attention.head_dim)
    k = attention.k_proj(x).view(split).transpose(1, 2)
    v = attention.v_proj(x).view(split).transpose(1, 2)
    return output, (torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2))


def step_merging_one_sequence(attention, token, cache):
    """Merges the heads as if the batch held one sequence: reshape(1, 1, D)."""
    out, (keys, values) = step(attention, token, cache, out_proj=False)
    merged = out.reshape(1, 1, -1)
    return attention.out_proj(merged), (keys, values)


def step_attending_from_the_first_query(attention, token, cache):
    """Takes the query of the first sequence for the whole batch (q[0:1])."""
    batch, _, d_model = token.shape
    keys, values = cache
    t = keys.shape[2]
    x = token + sinusoidal_encoding(t + 1, d_model)[t]
    split = (-1, 1, attention.num_heads, attention.head_dim)
    q = attention.q_proj(x[:1]).view(split).transpose(1, 2)  # [1, H, 1, Dh]
    keys = torch.cat([keys, attention.k_proj(x).view(split).transpose(1, 2)], dim=2)
    values = torch.cat([values, attention.v_proj(x).view(split).transpose(1, 2)], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return attention.out_proj(out.transpose(1, 2).reshape(batch, 1, d_model)), (keys, values)


def step_returning_the_output_only(attention, token, cache):
    return step(attention, token, cache)[0]


def step_returning_a_flat_triple(attention, token, cache):
    out, (keys, values) = step(attention, token, cache)
    return out, keys, values


def step_with_heads_interleaved(attention, token, cache):
    """Heads split as [B, 1, Dh, H] and permuted: feature f goes to head f % H (and back)."""
    batch, _, d_model = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    keys, values = cache
    position = keys.shape[2]
    x = token + sinusoidal_encoding(position + 1, d_model)[position]

    def split(y):
        return y.view(batch, 1, head_dim, heads).permute(0, 3, 1, 2)  # [B, H, 1, Dh]

    q, k, v = split(attention.q_proj(x)), split(attention.k_proj(x)), split(attention.v_proj(x))
    keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    merged = out.permute(0, 2, 3, 1).reshape(batch, 1, d_model)
    return attention.out_proj(merged), (keys, values)


WRONG = [
    (check, step_with_heads_interleaved, "heads_interleaved"),
    (check, cache_in_the_default_dtype, "wrong_dtype"),
    (check, named(cat_dim=1), "cache_wrong_axis"),
    (check, named(cat_dim=-1), "cache_wrong_axis"),
    (check, named(cat_dim=0), "cache_wrong_axis"),
    (check, named(position="zero"), "positions_restart"),
    (check, named(position="after_append"), "positions_off_by_one"),
    (check, named(positions_into="nowhere"), "no_positions"),
    (check, named(positions_into="queries_and_keys"), "positions_not_in_values"),
    (check, named(positions_into="after_projection"), "positions_after_projection"),
    (check, named(replace=True), "cache_replaced"),
    (check, named(return_cache="received"), "cache_not_returned"),
    (check, named(return_cache="swapped"), "cache_keys_values_swapped"),
    (check, named(append_after=True), "appended_after_attending"),
    (check, named(out_proj=False), "out_proj_missing"),
    (check, named(divisor="one"), "no_scaling"),
    (check, named(divisor="sqrt_d_model"), "scaled_by_sqrt_d_model"),
    (check, named(softmax_dim=-2), "softmax_axis"),
    (check, named(view="width_first"), "heads_and_width_swapped"),
    (check, named(merge=False), "heads_not_merged"),
    (check, step_recomputing_the_prefix, "prefix_recomputed"),
    (check, named(position="minus_one"), "positions_one_behind"),
    (check, named(position="head_width"), "position_from_wrong_axis"),
    (check, named(position="heads"), "position_from_wrong_axis"),
    (check, named(position="whole_table"), "encoding_not_indexed"),
    (check, named(position="whole_table_viewed"), "encoding_not_indexed"),
    (check, named(positions_into="queries"), "positions_in_some_projections"),
    (check, named(positions_into="keys"), "positions_in_some_projections"),
    (check, named(positions_into="values"), "positions_in_some_projections"),
    (check, named(positions_into="twice"), "positions_added_twice"),
    (check, named(layers=("q_proj", "k_proj", "k_proj")), "value_from_wrong_layer"),
    (check, named(layers=("q_proj", "q_proj", "v_proj")), "key_from_wrong_layer"),
    (check, named(layers=("k_proj", "k_proj", "v_proj")), "query_from_wrong_layer"),
    (check, named(layers=("q_proj", "v_proj", "k_proj")), "projections_mixed_up"),
    (check, named(linear="untransposed"), "weight_not_transposed"),
    (check, named(linear="no_bias"), "projection_bias_missing"),
    (check, named(append="start"), "cache_prepended"),
    (check, named(append="twice"), "appended_twice"),
    (check, step_with_a_flat_cache, "cache_not_split"),
    (check, named(scores_from="values"), "keys_values_swapped"),
    (check, named(scores_from="keys_twice"), "weights_times_keys"),
    (check, named(mask_row="first"), "attends_to_first_only"),
    (check, named(softmax=False), "no_softmax"),
    (check, named(divisor="head_dim"), "scaled_by_d_k"),
    (check, named(divisor="times"), "scale_multiplied"),
    (check, named(divisor="sqrt_keys"), "scaled_by_sequence_length"),
    (check, named(merge_order=(0, 2, 3, 1)), "merge_wrong_permutation"),
    (check, named(residual="token"), "residual_added"),
    (check, named(residual="positioned"), "residual_added"),
    (check, named(squeeze=True), "output_squeezed"),
    (check, named(position="len_cache"), "position_from_wrong_axis"),
    (check, step_merging_one_sequence, "batch_hard_coded"),
    (check, step_attending_from_the_first_query, "batch_hard_coded"),
    (check, named(position="last_of_t_rows"), "encoding_one_row_short"),
    (check, named(positions_into="scaled_embedding"), "embedding_scaled"),
    (check, named(layers=("q_proj", "k_proj", None)), "projection_missing"),
    (check, named(layers=(None, "k_proj", "v_proj")), "projection_missing"),
    (check, named(out_proj="v_proj"), "out_proj_wrong_layer"),
    (check, named(scores_from="itself"), "attends_to_itself_only"),
    (check, step_calling_the_module_on_the_token, "attends_to_itself_only"),
    (check, step_attending_with(with_a_causal_mask), "mask_not_needed"),
    (check, step_attending_with(with_is_causal), "attends_to_first_only"),
    (check, step_returning_the_output_only, "step_not_a_pair"),
    (check, step_returning_a_flat_triple, "step_not_a_pair"),
]
