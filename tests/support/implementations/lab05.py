"""Lab 5's learner code, used as data: the encoder layer, wired from its parts.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each (check_encoder_layer in
attention_lab.checks). ``check`` is the check; ``RIGHT`` lists implementations, ``WRONG``
``(check, implementation, mistake key)``. test_checks_lab05.py and test_checks.py run them
through the check.
"""

from __future__ import annotations

from attention_lab import checks
from support.implementations import with_

check = checks.check_encoder_layer


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


def encoder_layer_in_one_expression_each(x, layer, mask=None):
    """Right, written as a sub-layer helper called twice."""

    def sublayer(x, fn, norm, dropout):
        if layer.norm_first:
            out = fn(norm(x))
            return x + dropout(out[0] if isinstance(out, tuple) else out), out
        out = fn(x)
        return norm(x + dropout(out[0] if isinstance(out, tuple) else out)), out

    x, (_, weights) = sublayer(
        x, lambda h: layer.self_attn(h, mask=mask), layer.norm1, layer.dropout1
    )
    x, _ = sublayer(x, layer.feed_forward, layer.norm2, layer.dropout2)
    return x, weights


def encoder_layer_with_names(x, layer, mask=None):
    """Right, with intermediate names and keyword calls."""
    residual = x
    if layer.norm_first:
        normed = layer.norm1(residual)
        attn_out, attn_weights = layer.self_attn(normed, normed, normed, mask=mask)
        hidden = residual + layer.dropout1(attn_out)
        ff_out = layer.feed_forward(layer.norm2(hidden))
        return hidden + layer.dropout2(ff_out), attn_weights
    attn_out, attn_weights = layer.self_attn(query=residual, mask=mask)
    hidden = layer.norm1(residual + layer.dropout1(attn_out))
    ff_out = layer.dropout2(layer.feed_forward(hidden))
    return layer.norm2(ff_out + hidden), attn_weights


def wired(x, layer, mask=None, *, mistake):
    """Learner-style wiring with one mistake of dropout, norms or order."""
    a_drop, f_drop = layer.dropout1, layer.dropout2
    if mistake == "dropouts_swapped":
        a_drop, f_drop = f_drop, a_drop
    if layer.norm_first:
        if mistake == "parallel":
            a, w = layer.self_attn(layer.norm1(x), mask=mask)
            return x + a_drop(a) + f_drop(layer.feed_forward(layer.norm2(x))), w
        if mistake == "parallel_one_norm":
            h = layer.norm1(x)
            a, w = layer.self_attn(h, mask=mask)
            return x + a_drop(a) + f_drop(layer.feed_forward(h)), w
        if mistake == "final_norm":
            a, w = layer.self_attn(layer.norm1(x), mask=mask)
            x = x + a_drop(a)
            return layer.norm2(x + f_drop(layer.feed_forward(layer.norm2(x)))), w
        if mistake == "no_second_norm":
            a, w = layer.self_attn(layer.norm1(x), mask=mask)
            x = x + a_drop(a)
            return x + f_drop(layer.feed_forward(x)), w
        a, w = layer.self_attn(layer.norm1(x), mask=mask)
        if mistake == "dropout_on_sum":
            x = a_drop(x + a)
            return f_drop(x + layer.feed_forward(layer.norm2(x))), w
        if mistake == "no_dropout":
            x = x + a
            return x + layer.feed_forward(layer.norm2(x)), w
        x = x + a_drop(a)
        return x + f_drop(layer.feed_forward(layer.norm2(x))), w
    if mistake == "dropout_on_input":
        a, w = layer.self_attn(a_drop(x), mask=mask)
        x = layer.norm1(x + a)
        return layer.norm2(x + layer.feed_forward(f_drop(x))), w
    a, w = layer.self_attn(x, mask=mask)
    if mistake == "dropout_on_sum":
        x = layer.norm1(a_drop(x + a))
        return layer.norm2(f_drop(x + layer.feed_forward(x))), w
    if mistake == "dropout_on_sum_attention_only":
        x = layer.norm1(a_drop(x + a))
        return layer.norm2(x + f_drop(layer.feed_forward(x))), w
    if mistake == "dropout_after_norm":
        x = a_drop(layer.norm1(x + a))
        return f_drop(layer.norm2(x + layer.feed_forward(x))), w
    if mistake == "no_dropout":
        x = layer.norm1(x + a)
        return layer.norm2(x + layer.feed_forward(x)), w
    if mistake == "no_second_dropout":
        x = layer.norm1(x + a_drop(a))
        return layer.norm2(x + layer.feed_forward(x)), w
    if mistake == "no_second_norm":
        x = layer.norm1(x + a_drop(a))
        return x + f_drop(layer.feed_forward(x)), w
    if mistake == "no_first_norm":
        x = x + a_drop(a)
        return layer.norm2(x + f_drop(layer.feed_forward(x))), w
    if mistake == "parallel":
        h = layer.norm1(x + a_drop(a))
        return layer.norm2(h + f_drop(layer.feed_forward(x))), w
    x = layer.norm1(x + a_drop(a))
    return layer.norm2(x + f_drop(layer.feed_forward(x))), w


def wired_again(x, layer, mask=None, *, mistake):
    """Learner-style wiring written with sub-layer names, one more mistake each."""
    n1, n2, d1, d2 = layer.norm1, layer.norm2, layer.dropout1, layer.dropout2
    if mistake == "norm2_twice":
        n1 = n2
    if mistake == "dropout1_twice":
        d2 = d1
    if mistake == "dropout2_twice":
        d1 = d2
    if mistake == "mask_inverted" and mask is not None:
        mask = ~mask
    norm_first = layer.norm_first
    attention_first = {"attention_pre": True, "attention_post": False}.get(mistake, norm_first)
    ff_first = {"attention_pre": False, "attention_post": True}.get(mistake, norm_first)
    if attention_first:
        attn_out, weights = layer.self_attn(n1(x), mask=mask)
        after_attention = x + d1(attn_out)
    else:
        attn_out, weights = layer.self_attn(x, mask=mask)
        after_attention = n1(x + d1(attn_out))
    residual = x if mistake == "ff_residual_from_input" else after_attention
    if ff_first:
        normed = n2(after_attention)
        base = normed if mistake == "ff_normalised_residual" else residual
        return base + d2(layer.feed_forward(normed)), weights
    return n2(residual + d2(layer.feed_forward(after_attention))), weights


def again(mistake):
    def fn(x, layer, mask=None):
        return wired_again(x, layer, mask, mistake=mistake)

    fn.__name__ = f"encoder_layer_{mistake}"
    return fn


def encoder_layer_right_again(x, layer, mask=None):
    """Right: wired_again with no mistake (the wrong ones above differ from it by one)."""
    return wired_again(x, layer, mask, mistake="")


def wrong(mistake):
    def fn(x, layer, mask=None):
        return wired(x, layer, mask, mistake=mistake)

    fn.__name__ = f"encoder_layer_{mistake}"
    return fn


def pre_norm_only_when_asked(mistake):
    """Post-norm right, the mistake in the pre-norm branch only (reached on case 3)."""

    def fn(x, layer, mask=None):
        return wired(x, layer, mask, mistake=mistake if layer.norm_first else "")

    fn.__name__ = f"encoder_layer_pre_norm_{mistake}"
    return fn


RIGHT = [
    encoder_layer,
    encoder_layer_in_one_expression_each,
    encoder_layer_with_names,
    encoder_layer_right_again,
]


def encoder_layer_mask_by_position(x, layer, mask=None):
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask)  # the mask lands in key
        x = x + layer.dropout1(attended)
        return x + layer.dropout2(layer.feed_forward(layer.norm2(x))), weights
    attended, weights = layer.self_attn(x, mask)
    x = layer.norm1(x + layer.dropout1(attended))
    return layer.norm2(x + layer.dropout2(layer.feed_forward(x))), weights


def encoder_layer_feed_forward_on_the_raw_sum(x, layer, mask=None):
    if layer.norm_first:
        attended, weights = layer.self_attn(layer.norm1(x), mask=mask)
        x = x + layer.dropout1(attended)
        return x + layer.dropout2(layer.feed_forward(layer.norm2(x))), weights
    attended, weights = layer.self_attn(x, mask=mask)
    total = x + layer.dropout1(attended)
    return layer.norm2(layer.norm1(total) + layer.dropout2(layer.feed_forward(total))), weights


def heads_reduced(how):
    """The layer wired right, its weights [B, H, T, T] reduced over the heads to [B, T, T]."""

    def encoder_layer_with_weights_reduced(x, layer, mask=None):
        x, weights = encoder_layer(x, layer, mask)
        reduced = {"mean": weights.mean(dim=1), "sum": weights.sum(1), "first": weights[:, 0]}
        return x, reduced[how]

    encoder_layer_with_weights_reduced.__name__ += f"_{how}"
    return encoder_layer_with_weights_reduced


WRONG = [
    (check, heads_reduced("mean"), "weights_averaged"),
    (check, heads_reduced("sum"), "weights_summed"),
    (check, heads_reduced("first"), "weights_of_one_head"),
    (check, encoder_layer_feed_forward_on_the_raw_sum, "sum_before_norm1_reused"),
    (check, encoder_layer_mask_by_position, "mask_passed_by_position"),
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
    (check, wrong("no_second_norm"), "norm2_missing"),
    (check, pre_norm_only_when_asked("no_second_norm"), "norm2_missing"),
    (check, wrong("no_first_norm"), "norm1_missing"),
    (check, wrong("parallel"), "parallel_sublayers"),
    (check, pre_norm_only_when_asked("parallel"), "parallel_sublayers"),
    (check, pre_norm_only_when_asked("parallel_one_norm"), "parallel_sublayers"),
    (check, wrong("dropout_on_sum"), "dropout_on_residual_sum"),
    (check, wrong("dropout_on_sum_attention_only"), "dropout_on_residual_sum"),
    (check, pre_norm_only_when_asked("dropout_on_sum"), "dropout_on_residual_sum"),
    (check, wrong("dropout_after_norm"), "dropout_after_norm"),
    (check, wrong("no_dropout"), "dropout_missing"),
    (check, wrong("no_second_dropout"), "dropout_missing"),
    (check, pre_norm_only_when_asked("no_dropout"), "dropout_missing"),
    (check, wrong("dropouts_swapped"), "dropouts_swapped"),
    (check, pre_norm_only_when_asked("final_norm"), "pre_norm_final_norm"),
    (check, wrong("dropout_on_input"), "dropout_on_sublayer_input"),
    (check, again("norm2_twice"), "norm2_used_twice"),
    (check, again("dropout1_twice"), "same_dropout_twice"),
    (check, again("dropout2_twice"), "same_dropout_twice"),
    (check, again("mask_inverted"), "mask_polarity"),
    (check, again("attention_pre"), "arrangements_mixed"),
    (check, again("attention_post"), "arrangements_mixed"),
    (check, again("ff_residual_from_input"), "feed_forward_residual_from_input"),
    (check, again("ff_normalised_residual"), "pre_norm_residual_normalised"),
]


def calls_the_layer(x, layer, mask=None):
    return layer(x, mask)
