"""Lab 5's check: encoder layers wired three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.
"""

from __future__ import annotations

import pytest

from attention_lab import checks
from attention_lab.checks import MISTAKES

check = checks.check_encoder_layer


def flat(error: BaseException) -> str:
    return " ".join(str(error).split())


def with_(fn, **deviation):
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs, **deviation)

    wrong.__name__ = f"{fn.__name__}_with_{'_'.join(deviation)}"
    return wrong


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


RIGHT = [encoder_layer]
WRONG = [
    (check, encoder_layer_pre_norm_only, "pre_norm_instead_of_post_norm"),
    (check, encoder_layer_post_norm_only, "post_norm_instead_of_pre_norm"),
    (check, with_(encoder_layer, mistake="no_attention_residual"), "no_attention_residual"),
    (check, with_(encoder_layer, mistake="no_feed_forward_residual"), "no_feed_forward_residual"),
    (check, with_(encoder_layer, mistake="norm_outside"), "norm_outside_residual"),
    (check, with_(encoder_layer, mistake="norms_swapped"), "norms_swapped"),
    (check, with_(encoder_layer, mistake="norm1_twice"), "norm1_used_twice"),
    (check, with_(encoder_layer, mistake="normalised_residual"), "pre_norm_residual_normalised"),
    (
        check,
        with_(encoder_layer, mistake="normalised_residual_in_attention"),
        "pre_norm_residual_normalised",
    ),
    (check, with_(encoder_layer, mistake="mask_ignored"), "encoder_mask_ignored"),
]


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_a_right_implementation_passes(fn, capsys):
    check(fn)
    assert capsys.readouterr().out.startswith(f"✓ {fn.__name__} matches the library")


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
    from attention_lab.checks import encoder

    assert set(encoder.MISTAKES) <= {key for _, _, key in WRONG}
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    assert {key for _, _, key in WRONG} <= documented


def calls_the_layer(x, layer, mask=None):
    return layer(x, mask)


def test_calling_the_whole_layer_is_refused_with_advice():
    with pytest.raises(AssertionError) as info:
        check(calls_the_layer)
    assert "build the layer from its parts" in flat(info.value)
