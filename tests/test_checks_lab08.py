"""Lab 8's check: decoding steps written three right ways pass; every mistake is named.

The wrong steps are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the step does.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks
from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks import MISTAKES
from attention_lab.positional import sinusoidal_encoding

check = checks.check_kv_cache_decoding


def flat(error: BaseException) -> str:
    return " ".join(str(error).split())


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


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_a_right_step_passes(fn, capsys):
    check(fn)
    assert capsys.readouterr().out.startswith(f"✓ {fn.__name__} matches the library")


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
):
    batch, _, d_model = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    keys, values = cache
    t = keys.shape[2]
    where = {"cache_length": t, "zero": 0, "after_append": t + 1}[position]
    pe = sinusoidal_encoding(where + 1, d_model)[where]
    x = token if positions_into == "nowhere" else token + pe
    split = (batch, 1, heads, head_dim) if view == "heads_first" else (batch, 1, head_dim, heads)
    q_in = k_in = v_in = x
    if positions_into == "queries_and_keys":
        v_in = token
    if positions_into == "after_projection":
        q_in = k_in = v_in = token
    q, k, v = attention.q_proj(q_in), attention.k_proj(k_in), attention.v_proj(v_in)
    if positions_into == "after_projection":
        q, k = q + pe, k + pe
    q, k, v = (y.view(split).transpose(1, 2) for y in (q, k, v))
    old_keys, old_values = keys, values
    if replace:
        keys, values = k, v
    else:
        keys, values = torch.cat([keys, k], dim=cat_dim), torch.cat([values, v], dim=cat_dim)
    seen_keys, seen_values = (old_keys, old_values) if append_after else (keys, values)
    d = {"sqrt_head_dim": math.sqrt(head_dim), "one": 1.0, "sqrt_d_model": math.sqrt(d_model)}
    scores = q @ seen_keys.transpose(-2, -1) / d[divisor]
    out = torch.softmax(scores, dim=softmax_dim) @ seen_values
    if not merge:
        return out, (keys, values)
    out = out.transpose(1, 2).reshape(batch, 1, d_model)
    if out_proj:
        out = attention.out_proj(out)
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


def step_returning_the_output_only(attention, token, cache):
    return step(attention, token, cache)[0]


def step_returning_a_flat_triple(attention, token, cache):
    out, (keys, values) = step(attention, token, cache)
    return out, keys, values


WRONG = [
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
    (check, step_returning_the_output_only, "step_not_a_pair"),
    (check, step_returning_a_flat_triple, "step_not_a_pair"),
]


@pytest.mark.parametrize(
    ("check", "wrong", "mistake"), WRONG, ids=[f"{w.__name__}-{key}" for _, w, key in WRONG]
)
def test_a_mistake_is_rejected_and_named(check, wrong, mistake):
    with pytest.raises(AssertionError) as info:
        check(wrong)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    assert "on case '" in message
    lines = str(info.value).splitlines()
    assert len(lines) <= 8 and all(len(line) <= 76 for line in lines[1:])


def test_every_mistake_of_the_lab_is_proved():
    from attention_lab.checks import kv_cache

    assert set(kv_cache.MISTAKES) <= {key for _, _, key in WRONG}
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    assert {key for _, _, key in WRONG} <= documented


def test_an_unknown_mistake_says_where_the_decoding_goes_wrong():
    def step_forgetting_the_bias_of_v(attention, token, cache):
        out, (keys, values) = step(attention, token, cache)
        return out, (keys, values - attention.v_proj.bias.view(1, -1, 1, attention.head_dim))

    with pytest.raises(AssertionError) as info:
        check(step_forgetting_the_bias_of_v)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong:" in message
    assert "the cached keys are right" in message
    assert "the cached values differ at positions 0, 1, 2, 3, 4 and 5" in message


def test_the_step_cannot_see_the_future():
    """The check feeds one token per call: a step never receives a later token."""
    seen = []

    def spy(attention, token, cache):
        seen.append((token.shape[1], cache[0].shape[2]))
        return step(attention, token, cache)

    check(spy)
    assert all(width == 1 for width, _ in seen)
    assert [cached for _, cached in seen[:6]] == [0, 1, 2, 3, 4, 5]
