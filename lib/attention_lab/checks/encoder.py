"""Lab 5: the check of an encoder layer built from its parts."""

from __future__ import annotations

import re
from dataclasses import dataclass

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    check_callable,
    close,
    difference,
    fail,
    match_variant,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    the,
    tolerance,
)
from attention_lab.checks.sdpa import compare_pair
from attention_lab.layers import EncoderLayer
from attention_lab.masks import padding_mask

__all__ = ["check_encoder_layer"]

MISTAKES = register_mistakes(
    {
        "sum_before_norm1_reused": (
            "the feed-forward sub-layer (or its residual) takes the attention's sum before "
            "norm1: in post-norm, x = norm1(x + dropout1(attention)) is what the feed-forward "
            "sub-layer both reads and adds back"
        ),
        "mask_passed_by_position": (
            "the mask passed by position: layer.self_attn(x, mask) puts it in the attention's "
            "second parameter, key (the third is value); pass it by name, "
            "layer.self_attn(x, mask=mask)"
        ),
        "pre_norm_instead_of_post_norm": (
            "pre-norm computed for a post-norm layer (layer.norm_first is False): "
            "x = norm1(x + attention(x)), then x = norm2(x + feed_forward(x))"
        ),
        "post_norm_instead_of_pre_norm": (
            "post-norm computed for a pre-norm layer (layer.norm_first is True): "
            "x = x + attention(norm1(x)), then x = x + feed_forward(norm2(x))"
        ),
        "no_attention_residual": (
            "missing residual connection around the attention: add the sub-layer's input back"
        ),
        "no_feed_forward_residual": (
            "missing residual connection around the feed-forward network: add its input back"
        ),
        "norm_outside_residual": (
            "LayerNorm applied to the sub-layer's output before the residual sum: post-norm "
            "normalises the sum, norm(x + sublayer(x))"
        ),
        "norms_swapped": (
            "norm1 and norm2 swapped: norm1 belongs to the attention, norm2 to the feed-forward"
        ),
        "norm1_used_twice": (
            "norm1 used for both sub-layers: the feed-forward sub-layer has its own LayerNorm, "
            "norm2, with its own learned scale and shift"
        ),
        "pre_norm_residual_normalised": (
            "the pre-norm residual adds the normalised x: normalise only the sub-layer's input "
            "and add the sub-layer's output to the unnormalised x, x = x + attention(norm1(x)), "
            "not h = norm1(x); x = h + attention(h)"
        ),
        "encoder_mask_ignored": (
            "the mask is not passed to the self-attention: layer.self_attn(..., mask=mask)"
        ),
        "norm1_missing": (
            "the attention sub-layer has no LayerNorm: post-norm normalises its residual sum, "
            "x = norm1(x + attention(x)); pre-norm normalises its input, attention(norm1(x))"
        ),
        "norm2_missing": (
            "the feed-forward sub-layer has no LayerNorm: post-norm ends with "
            "x = norm2(x + feed_forward(x)); pre-norm feeds it feed_forward(norm2(x))"
        ),
        "parallel_sublayers": (
            "the two sub-layers run side by side, both on the layer's input: they run one "
            "after the other, and the feed-forward sub-layer reads x as the attention "
            "sub-layer left it (its residual sum, normalised in post-norm)"
        ),
        "dropout_on_residual_sum": (
            "dropout applied to the residual sum: it drops only the sub-layer's output, "
            "x + dropout1(attention(...)), so that the residual path carries x unchanged"
        ),
        "dropout_after_norm": (
            "dropout applied after the LayerNorm: it drops the sub-layer's output before the "
            "residual sum, norm1(x + dropout1(attention(x)))"
        ),
        "dropout_missing": (
            "dropout is missing: it does nothing in evaluation mode, but in training mode each "
            "sub-layer's output goes through its dropout before the residual sum, "
            "x + dropout1(attention(...)) and x + dropout2(feed_forward(...))"
        ),
        "dropouts_swapped": (
            "dropout1 and dropout2 swapped: dropout1 belongs to the attention, dropout2 to the "
            "feed-forward (the check gives them different rates)"
        ),
        "pre_norm_final_norm": (
            "a LayerNorm after the pre-norm layer's last residual sum: a pre-norm layer ends "
            "with x = x + dropout2(feed_forward(norm2(x))), unnormalised (a pre-norm stack "
            "has one final norm after its last layer, not one inside each)"
        ),
        "arrangements_mixed": (
            "one sub-layer pre-norm and the other post-norm: layer.norm_first sets both; "
            "post-norm normalises each residual sum, pre-norm each sub-layer's input"
        ),
        "feed_forward_residual_from_input": (
            "the feed-forward residual adds the layer's input: it adds the x that leaves the "
            "attention sub-layer, so that the attention's contribution is kept"
        ),
        "norm2_used_twice": (
            "norm2 used for both sub-layers: the attention sub-layer has its own LayerNorm, "
            "norm1, with its own learned scale and shift"
        ),
        "same_dropout_twice": (
            "one dropout used for both sub-layers: dropout1 belongs to the attention, "
            "dropout2 to the feed-forward (the check gives them different rates)"
        ),
        "dropout_on_sublayer_input": (
            "dropout applied to the sub-layer's input: it drops the sub-layer's output, "
            "x + dropout1(attention(...)), not what goes into the attention"
        ),
    }
)


def _encoder_variant(layer: EncoderLayer, x: torch.Tensor, mask, mistake: str) -> tuple:
    """The layer computed with one deliberate deviation, the parts called in the order a learner
    making that mistake calls them (so that, in training mode, dropout draws the same masks)."""
    attend, ff, norm1, norm2 = layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2
    drop1, drop2 = layer.dropout1, layer.dropout2
    mistake, _, which = mistake.partition("/")
    pre = layer.norm_first
    if mistake == "norms_swapped":
        norm1, norm2 = norm2, norm1
    if mistake == "norm1_used_twice":
        norm2 = norm1
    if mistake == "norm2_used_twice":
        norm1 = norm2
    if mistake == "same_dropout_twice":
        drop1, drop2 = (drop1, drop1) if which == "1" else (drop2, drop2)
    if mistake == "mask_polarity" and mask is not None:
        mask = ~mask
    if mistake == "dropouts_swapped":
        drop1, drop2 = drop2, drop1
    if mistake in ("pre_norm_instead_of_post_norm", "post_norm_instead_of_pre_norm"):
        pre = not pre
    if mistake == "encoder_mask_ignored":
        mask = None
    first, second = which in ("", "attention"), which in ("", "feed_forward")

    def keep(y):
        return y

    # The deviations that name one sub-layer ("/attention", "/feed_forward") touch only that one.
    if mistake == "dropout_missing":
        drop1, drop2 = (keep if first else drop1), (keep if second else drop2)
    if mistake == "norm1_missing":
        norm1 = keep
    if mistake == "norm2_missing":
        norm2 = keep
    on_sum = mistake == "dropout_on_residual_sum"
    sum1, sum2 = (drop1, drop2) if on_sum else (keep, keep)
    out1, out2 = (keep, keep) if on_sum else (drop1, drop2)
    if on_sum:
        sum1, out1 = (drop1, keep) if first else (keep, drop1)
        sum2, out2 = (drop2, keep) if second else (keep, drop2)
    if mistake == "dropout_on_sublayer_input":
        attended, weights = attend(drop1(norm1(x) if pre else x), mask=mask)
        x = x + attended if pre else norm1(x + attended)
        h = drop2(norm2(x) if pre else x)
        return (x + ff(h) if pre else norm2(x + ff(h))), weights
    if mistake == "pre_norm_final_norm":
        attended, weights = attend(norm1(x), mask=mask)
        x = x + drop1(attended)
        x = x + drop2(ff(norm2(x)))
        return (norm2 if which == "norm2" else norm1)(x), weights
    if mistake == "arrangements_mixed":
        if which == "attention_pre":
            attended, weights = attend(norm1(x), mask=mask)
            x = x + drop1(attended)
            return norm2(x + drop2(ff(x))), weights
        attended, weights = attend(x, mask=mask)
        x = norm1(x + drop1(attended))
        return x + drop2(ff(norm2(x))), weights
    if mistake == "feed_forward_residual_from_input":
        attended, weights = attend(norm1(x) if pre else x, mask=mask)
        h = x + drop1(attended) if pre else norm1(x + drop1(attended))
        return (x + drop2(ff(norm2(h))) if pre else norm2(x + drop2(ff(h)))), weights
    if mistake == "parallel_sublayers" and pre:
        h = norm1(x)
        attended, weights = attend(h, mask=mask)
        h2 = h if which == "shared_norm" else norm2(x)
        return x + drop1(attended) + drop2(ff(h2)), weights
    if mistake == "parallel_sublayers":
        attended, weights = attend(x, mask=mask)
        y = norm1(x + drop1(attended))
        return norm2(y + drop2(ff(x))), weights
    if pre and mistake == "pre_norm_residual_normalised" and which != "feed_forward":
        h = norm1(x)
        attended, weights = attend(h, mask=mask)
        x = h + drop1(attended)
        # Some make the mistake in the attention sub-layer only.
        h = norm2(x)
        x = x + drop2(ff(h)) if which == "attention" else h + drop2(ff(h))
        return x, weights
    if pre and mistake == "pre_norm_residual_normalised":  # in the feed-forward only
        attended, weights = attend(norm1(x), mask=mask)
        x = x + drop1(attended)
        h = norm2(x)
        return h + drop2(ff(h)), weights
    attention_residual = mistake != "no_attention_residual"
    feed_forward_residual = mistake != "no_feed_forward_residual"
    if pre:
        attended, weights = attend(norm1(x), mask=mask)
        x = sum1(x + out1(attended) if attention_residual else out1(attended))
        h = ff(norm2(x))
        return sum2(x + out2(h) if feed_forward_residual else out2(h)), weights
    attended, weights = attend(x, mask=mask)
    if mistake == "norm_outside_residual":
        x = x + norm1(drop1(attended))
        return x + norm2(drop2(ff(x))), weights
    if mistake == "sum_before_norm1_reused":
        total = x + drop1(attended)  # the sum that norm1 should have turned into x
        h, residual = (total, norm1(total)) if which == "read" else (norm1(total), total)
        return norm2(residual + drop2(ff(h))), weights
    if mistake == "dropout_after_norm":
        x = drop1(norm1(x + attended))
        return drop2(norm2(x + ff(x))), weights
    x = norm1(sum1(x + out1(attended) if attention_residual else out1(attended)))
    h = ff(x)
    return norm2(sum2(x + out2(h) if feed_forward_residual else out2(h))), weights


_ENCODER_MISTAKES = (
    "pre_norm_instead_of_post_norm",
    "post_norm_instead_of_pre_norm",
    "no_attention_residual",
    "no_feed_forward_residual",
    "norm_outside_residual",
    "norms_swapped",
    "norm1_used_twice",
    "norm1_missing",
    "norm2_missing",
    "parallel_sublayers",
    "parallel_sublayers/shared_norm",
    "pre_norm_residual_normalised",
    "pre_norm_residual_normalised/attention",
    "encoder_mask_ignored",
    "mask_polarity",
    "arrangements_mixed/attention_pre",
    "arrangements_mixed/attention_post",
    "feed_forward_residual_from_input",
    "norm2_used_twice",
    "sum_before_norm1_reused/read",
    "sum_before_norm1_reused/added",
    "pre_norm_residual_normalised/feed_forward",
    "pre_norm_final_norm/norm2",
    "pre_norm_final_norm/norm1",
    # Seen in training mode only (the last cases): dropout does nothing in evaluation mode.
    "dropout_on_residual_sum",
    "dropout_on_residual_sum/attention",
    "dropout_on_residual_sum/feed_forward",
    "dropout_after_norm",
    "dropout_missing",
    "dropout_missing/attention",
    "dropout_missing/feed_forward",
    "dropouts_swapped",
    "dropout_on_sublayer_input",
    "same_dropout_twice/1",
    "same_dropout_twice/2",
)

# Mistakes that exist in one arrangement only: key -> the value of norm_first they apply to.
_ARRANGEMENT_MISTAKES = {
    "pre_norm_instead_of_post_norm": False,
    "post_norm_instead_of_pre_norm": True,
    "norm_outside_residual": False,
    "pre_norm_residual_normalised": True,
    "pre_norm_residual_normalised/attention": True,
    "pre_norm_residual_normalised/feed_forward": True,
    "parallel_sublayers/shared_norm": True,
    "pre_norm_final_norm/norm2": True,
    "pre_norm_final_norm/norm1": True,
    "dropout_after_norm": False,
    "sum_before_norm1_reused/read": False,
    "sum_before_norm1_reused/added": False,
}


def _refuse_forward(*args, **kwargs):
    raise RuntimeError(
        "the check hands you a layer whose own forward is switched off: build the layer from "
        "its parts (layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2, "
        "layer.dropout1, layer.dropout2) instead of calling layer(x)"
    )


@dataclass
class _EncoderCase(Case):
    """A case with the seed of its dropout masks, or ``None`` for evaluation mode."""

    seed: int | None = None


def _encoder_cases() -> list[_EncoderCase]:
    g = torch.Generator().manual_seed(3)
    token_ids = torch.tensor([[4, 9, 2, 7, 5], [3, 8, 6, 0, 0]])  # [B, T], 0 = padding

    def layer(norm_first: bool, activation: str = "relu", seed: int = 0, train=False):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = EncoderLayer(
                16, 4, 32, dropout=0.1, activation=activation, norm_first=norm_first
            ).train(train)
            with torch.no_grad():
                # Distinct, non-trivial norms, so that swapping or skipping one shows.
                for norm in (module.norm1, module.norm2):
                    norm.weight.copy_(1 + 0.5 * torch.randn(16))
                    norm.bias.copy_(0.5 * torch.randn(16))
        # Distinct dropout rates, so that swapping the two dropouts shows.
        module.dropout1.p, module.dropout2.p = 0.25, 0.5
        return module

    def case(name, x, module, mask=None, seed=None):
        return _EncoderCase(name, (x, module), {} if mask is None else {"mask": mask}, seed=seed)

    return [
        case("post-norm layer, x [2, 5, 16], no mask", randn(g, 2, 5, 16), layer(False, seed=1)),
        case(
            "post-norm layer with a padding mask [2, 1, 1, 5]",
            randn(g, 2, 5, 16),
            layer(False, seed=2),
            padding_mask(token_ids),
        ),
        case(
            "pre-norm layer (norm_first=True) with a padding mask",
            randn(g, 2, 5, 16),
            layer(True, seed=3),
            padding_mask(token_ids),
        ),
        case("a single token, post-norm", randn(g, 1, 1, 16), layer(False, seed=4)),
        case(
            "GELU activation, pre-norm, x [3, 4, 16]",
            randn(g, 3, 4, 16),
            layer(True, "gelu", seed=5),
        ),
        # Training mode: dropout is on, its masks drawn from a seed the check sets (and then
        # restores the global random state), so where each dropout acts shows in the result.
        case(
            "post-norm layer in training mode (dropout on), padding mask",
            randn(g, 2, 5, 16),
            layer(False, seed=6, train=True),
            padding_mask(token_ids),
            seed=60,
        ),
        case(
            "pre-norm layer in training mode (dropout on)",
            randn(g, 2, 5, 16),
            layer(True, seed=7, train=True),
            seed=70,
        ),
    ]


# The parts of a layer whose inputs the check records, in the order the layer uses them.
_PARTS = ("norm1", "self_attn", "dropout1", "norm2", "feed_forward", "dropout2")


def _traced(layer: EncoderLayer, seed: int | None, call: Callable[[], Any]):
    """``call()`` with dropout seeded by ``seed`` (global random state restored after), and the
    inputs each part of ``layer`` received, in order: ``(result, [(part, input), ...])``."""
    trace: list[tuple[str, torch.Tensor]] = []

    def record(module, args, kwargs, part):
        # The first tensor argument, given by position or by name (self_attn(query=h)).
        first = next(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        trace.append((part, first.detach().clone()))

    hooks = [
        getattr(layer, part).register_forward_pre_hook(
            lambda module, args, kwargs, part=part: record(module, args, kwargs, part),
            with_kwargs=True,
        )
        for part in _PARTS
    ]
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0 if seed is None else seed)
            return call(), trace
    finally:
        for hook in hooks:
            hook.remove()


def _where(got_trace, expected_trace, tol) -> str:
    """Which part of the layer first receives another input than in the library's layer."""
    got_parts = [part for part, _ in got_trace]
    missing = [part for part, _ in expected_trace if part not in got_parts]
    for index, (part, expected) in enumerate(expected_trace):
        if part in missing:
            continue
        got = next(tensor for name, tensor in got_trace if name == part)
        if not close(got, expected, *tol):
            what = f"layer.{part} receives another input than in the library's layer"
            if index == 0 or all(p in missing for p, _ in expected_trace[:index]):
                what += " (it is the first part the layer uses)"
            else:
                before = ", ".join(f"layer.{p}" for p, _ in expected_trace[:index] if p != part)
                what += f" (the parts before it, {before}, receive the right inputs)"
            break
    else:
        extra = [
            part
            for part in dict.fromkeys(got_parts)
            if got_parts.count(part) > sum(p == part for p, _ in expected_trace)
        ]
        what = (
            "every part receives the right input the first time, but "
            + ", ".join(f"layer.{p} is called {got_parts.count(p)} times" for p in extra)
            + " (once in the library's layer)"
            if extra
            else "every part receives the right input, so the last residual sum is wrong"
        )
    if missing:
        what += "; never called: " + ", ".join(f"layer.{p}" for p in dict.fromkeys(missing))
    return what


# The attention's own error when its key or value is the bool mask.
_BOOL_KEY = re.compile(r"^(key|value) must have a floating dtype, got torch\.bool")


def _mask_by_position(error: Exception) -> str | None:
    """``mask_passed_by_position`` for the attention's refusal of a bool key or value: the
    only bool tensor of a case is its mask."""
    if isinstance(error, TypeError) and _BOOL_KEY.search(str(error)):
        return "mask_passed_by_position"
    return None


def check_encoder_layer(fn: Callable) -> None:
    """Check a learner's ``fn(x, layer, mask=None) -> (x, weights)`` (Lab 5).

    ``fn`` receives ``x`` ``[B, T, D]``, an :class:`attention_lab.layers.EncoderLayer`, and
    optionally a ``torch.bool`` mask. It must compute the layer from its parts
    (``layer.self_attn``, ``layer.feed_forward``, ``layer.norm1``, ``layer.norm2``,
    ``layer.dropout1``, ``layer.dropout2``), in the post-norm or pre-norm arrangement that
    ``layer.norm_first`` selects, and return the new ``x`` ``[B, T, D]`` and the attention
    weights ``[B, H, T, T]``. The layer's own ``forward`` is switched off during the check.
    Cases: post-norm, with a padding mask, pre-norm, a single token, a GELU layer (all in
    evaluation mode), then a post-norm and a pre-norm layer in training mode, where dropout
    acts: the check seeds its masks inside ``torch.random.fork_rng`` (the global random
    state is left as it was), so that where each dropout acts shows in the result.

    Mistakes it names: ``pre_norm_instead_of_post_norm``, ``post_norm_instead_of_pre_norm``,
    ``pre_norm_residual_normalised``, ``no_attention_residual``, ``no_feed_forward_residual``,
    ``norm_outside_residual``, ``norms_swapped``, ``norm1_used_twice``, ``norm1_missing``,
    ``norm2_missing``, ``parallel_sublayers``, ``pre_norm_final_norm``, ``encoder_mask_ignored``,
    ``dropout_on_residual_sum``, ``dropout_after_norm``, ``dropout_missing``,
    ``dropouts_swapped``, ``dropout_on_sublayer_input``, ``arrangements_mixed``,
    ``feed_forward_residual_from_input``, ``norm2_used_twice``, ``same_dropout_twice``,
    ``mask_polarity``, ``mask_passed_by_position``, ``sum_before_norm1_reused``,
    ``weights_averaged``, ``weights_summed``, ``weights_of_one_head``, ``pair_swapped``,
    ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`). When none fits, the message says which part of the
    layer first receives a wrong input.

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _encoder_cases()
    fn_name = name_of(fn)
    for case in cases:
        x, layer = case.args
        mask = case.kwargs.get("mask")
        with torch.no_grad():
            expected, expected_trace = _traced(
                layer, case.seed, lambda layer=layer, x=x, mask=mask: layer(x, mask)
            )
        tol = tolerance(x.dtype)

        def variant(key, layer=layer, x=x, mask=mask, seed=case.seed):
            with torch.no_grad():
                return _traced(layer, seed, lambda: _encoder_variant(layer, x, mask, key))[0]

        variants = {
            key: lambda key=key: variant(key)
            for key in _ENCODER_MISTAKES
            if _ARRANGEMENT_MISTAKES.get(key, layer.norm_first) == layer.norm_first
        }
        layer.forward = _refuse_forward
        try:
            result, trace = _traced(
                layer, case.seed, lambda case=case: run(fn, case, _mask_by_position)
            )
        finally:
            del layer.forward

        context = (variants, trace, expected, expected_trace, tol, case)

        def diagnose(got, context=context):
            variants, trace, expected, expected_trace, tol, case = context
            if match_variant(got, variants, tol):
                return None  # compare names it
            where = _where(trace, expected_trace, tol)
            fail(fn_name, case, _problem(got, expected), None, where=where)

        with torch.no_grad():
            compare_pair(
                fn_name,
                case,
                result,
                expected,
                variants,
                lambda out, w, result=result, expected=expected: _heads_reduced(result, expected),
                diagnose=diagnose,
            )
    success(fn, cases)


def _heads_reduced(result, expected) -> str | None:
    """The mistake of weights ``[B, T, T]`` where ``[B, H, T, T]`` was due: every head's weights
    averaged or summed, or one head's kept (the keys of Lab 2, :mod:`.multi_head`)."""
    weights, heads = result[1], expected[1]
    if weights.shape != heads.shape[:1] + heads.shape[2:]:
        return None
    tol = tolerance(heads.dtype)
    for key, reduced in (
        ("weights_averaged", heads.mean(dim=1)),
        ("weights_summed", heads.sum(dim=1)),
        ("weights_of_one_head", heads[:, 0]),
    ):
        if close(weights, reduced, *tol):
            return key
    return None


def _problem(got, expected) -> str:
    """What differs first, the weights before the output, as the other failures say it."""
    for name, g, e in zip(("weights", "output"), reversed(got), reversed(expected), strict=True):
        if not close(g, e, *tolerance(e.dtype)):
            return f"{the(name, 'differs')}: {difference(g, e)}"
    return "the results differ"
