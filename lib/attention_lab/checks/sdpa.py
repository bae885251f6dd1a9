"""Lab 1: the check of scaled dot-product attention.

Also what the later attention labs (multi-head attention, masks, the encoder layer) build on:
the wrong variants of attention (:func:`attention_variant`), the mistakes a wrong shape or a
crash points to, and :func:`compare_pair`, the comparison of an ``(output, weights)`` pair.
"""

from __future__ import annotations

import functools
import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks._core import (
    Case,
    Result,
    call_quietly,
    check_callable,
    close,
    compare,
    fail,
    name_of,
    randn,
    register_mistakes,
    run,
    same_behaviour,
    success,
    tolerance,
    two_tensors,
)

__all__ = ["check_scaled_dot_product_attention"]

MISTAKES = register_mistakes(
    {
        "softmax_axis": (
            "softmax over the wrong axis: each query's row must be normalised over the keys, "
            "dim=-1, not over the queries (dim=-2)"
        ),
        "no_scaling": ("missing scaling: divide the scores Q K^T by sqrt(d_k) before the softmax"),
        "scaled_by_d_k": (
            "wrong scaling: you divided by d_k instead of by sqrt(d_k) (or divided both the "
            "queries and the keys by sqrt(d_k))"
        ),
        "scaled_by_value_width": (
            "wrong scaling: you divided by the square root of the values' width; d_k is the "
            "width of the queries and keys, query.shape[-1]"
        ),
        "scaled_by_sequence_length": (
            "wrong scaling: you divided by the square root of a sequence length; d_k is the "
            "width of the queries and keys, query.shape[-1], not shape[-2] or shape[1]"
        ),
        "log_softmax": (
            "log_softmax instead of softmax: the weights must be probabilities, "
            "torch.softmax(scores, dim=-1)"
        ),
        "softmax_sum_without_keepdim": (
            "a softmax by hand divided by a sum without keepdim=True: the sums of shape "
            "[..., Tq] then divide along the keys' axis; use exp.sum(dim=-1, keepdim=True)"
        ),
        "keys_values_swapped": (
            "keys and values swapped: the scores compare the queries with the keys, "
            "query @ key^T, and the output is a weighted sum of the values"
        ),
        "output_uses_transposed_weights": (
            "the output uses the weights transposed: output = weights @ value, with weights "
            "[..., Tq, Tk], not weights^T @ value"
        ),
        "returned_scores": (
            "the second result is the scores, not the weights: return the weights after the softmax"
        ),
        "fixed_axes": (
            "fixed axes: your function is right for inputs of one number of dimensions ([T, D], "
            "[B, T, D] or [B, H, T, D]) but not of another; count axes from the end, "
            "transpose(-2, -1), dim=-1, shape[-1], not transpose(0, 1), transpose(1, 2), .T or "
            "shape[2]"
        ),
        "sizes_mixed_up": (
            "a size or axis taken from the wrong tensor: your function is right when Tq = Tk "
            "and d_k = d_v, but not when they differ; check each shape[...] and transpose"
        ),
        "scale_multiplied": (
            "wrong scaling: you multiplied by sqrt(d_k) instead of dividing by it"
        ),
        "softmax_max_without_keepdim": (
            "a softmax by hand that subtracts the row maxima taken without keepdim=True: the "
            "[..., Tq] maxima are then subtracted along the keys' axis; use "
            "scores.amax(dim=-1, keepdim=True)"
        ),
        "output_from_scores": (
            "the output multiplies the scores, not the weights, by the values: the output is "
            "softmax(scores) @ value"
        ),
        "sqrt_as_half_power": (
            "wrong scaling: the square root written d_k ** 1/2, which Python reads as "
            "(d_k ** 1) / 2, a power 1 and then a division by 2; write d_k ** 0.5 or "
            "math.sqrt(d_k)"
        ),
        "no_softmax": (
            "no softmax: the weights are the raw scaled scores; apply softmax over dim=-1"
        ),
        "scaled_after_softmax": (
            "scaling applied after the softmax: the weights then sum to 1/sqrt(d_k), not to 1; "
            "divide the scores by sqrt(d_k) before the softmax, which sharpens or flattens them"
        ),
        "scores_transposed": (
            "scores not Q K^T: compute query @ key.transpose(-2, -1), shape [..., Tq, Tk] (not "
            "K Q^T, nor Q K without transposing the keys); then weights @ value is [..., Tq, Dv]"
        ),
        "weights_times_keys": (
            "output not the weighted sum of values: you multiplied the weights by the keys; "
            "the output is weights @ value"
        ),
        "output_is_weights": (
            "output not the weighted sum of values: you returned the weights as the output; "
            "multiply them by the values (weights @ value)"
        ),
        "pair_swapped": "you returned (weights, output); return (output, weights)",
        "weights_returned_transposed": (
            "the weights are returned transposed, [..., Tk, Tq]: the output is right, so "
            "return the weights as the softmax gave them, one row per query, [..., Tq, Tk]"
        ),
        "softmax_over_everything": (
            "the softmax divides by a sum over more than each query's row (over the whole "
            "tensor, or over every query and key): each row is divided by its own sum, "
            "exp.sum(dim=-1, keepdim=True), or use torch.softmax(scores, dim=-1)"
        ),
        "softmax_global_max": (
            "the softmax subtracts the maximum of the whole tensor, not each row's: a row far "
            "below it underflows to 0 everywhere, and 0 / 0 is NaN; subtract each row's own "
            "maximum, scores.amax(dim=-1, keepdim=True)"
        ),
        "overflow": (
            "the softmax overflowed on large scores (inf or NaN): subtract each row's maximum "
            "before exponentiating, or use torch.softmax"
        ),
    }
)


# ---------------------------------------------------------------------------------------------
# Wrong variants of attention, computed in float64 and cast back.


def attention_variant(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    divisor: float | None = None,
    dim: int = -1,
    softmax: bool | str = True,
    use_keys: bool = False,
    scores_transposed: bool = False,
    invert_mask: bool = False,
    mask_after_softmax: bool = False,
    scale_after_softmax: bool = False,
    multiply_by_mask: bool = False,
    scale: str | None = None,
    scores: str = "qk",
    swap_key_value: bool = False,
    weights_returned: str = "weights",
    output: str = "weights @ value",
    mask_transposed: bool = False,
    renormalise_after_mask: bool = False,
    ignore_mask: bool = False,
    add_mask: bool = False,
    unsqueeze_mask: bool = False,
    fill: str = "min",
    zero_blocked: bool = True,
    zero_after_output: bool = False,
    zero_where_allowed: bool = False,
    zero_empty_rows: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with one deliberate deviation; the defaults give the right answer.

    ``scale`` names the divisor by a size (``"sqrt_dv"``, ``"sqrt_tq"``, ``"sqrt_tk"``), ``scores``
    is ``"qk"`` (right), ``"kq"`` (``K Q^T``) or ``"qk_no_transpose"`` (``Q K``), ``softmax``
    may be ``"log"`` or ``"no_keepdim"`` (a hand-written softmax dividing by a sum without
    ``keepdim``), ``weights_returned`` ``"scaled_scores"`` or ``"raw_scores"`` (the second
    result), ``output`` ``"weights^T @ value"``; ``zero_empty_rows`` zeroes at the end the rows
    whose keys the mask blocks all (as a learner does who repairs only those). Shapes that make
    no sense raise ``RuntimeError``, as the learner's code would.
    """
    dtype = query.dtype
    q, k, v = query.double(), key.double(), value.double()
    if swap_key_value:
        k, v = v, k
    sizes = {
        "sqrt_dv": v.shape[-1],
        "sqrt_tq": q.shape[-2],
        "sqrt_tk": k.shape[-2],
    }
    if scale is not None:
        divisor = math.sqrt(sizes[scale])
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    if scores_transposed:
        scores = "kq"
    raw = {
        "qk": lambda: q @ k.transpose(-2, -1),
        "kq": lambda: k @ q.transpose(-2, -1),
        "qk_no_transpose": lambda: q @ k,
    }[scores]()
    scaled = raw if scale_after_softmax else raw / divisor
    s = scaled
    if ignore_mask:
        mask = None
    if mask is not None and mask_transposed:
        mask = mask.transpose(-2, -1)
    if mask is not None and unsqueeze_mask:
        mask = mask.unsqueeze(1)
    empty_rows = None if mask is None else ~mask.any(dim=-1, keepdim=True)  # [..., Tq, 1]
    if mask is not None and add_mask:
        s = s + mask  # True adds 1: nothing is blocked
        mask, zero_blocked = None, False
    if mask is not None:
        torch.broadcast_shapes(mask.shape, s.shape)  # a RuntimeError where the learner's crashes
    if mask is not None and invert_mask:
        mask = ~mask
    if mask is not None and multiply_by_mask:
        s = s * mask  # blocked scores become 0, and keep a weight
        mask = None
    if mask is not None and not mask_after_softmax and not renormalise_after_mask:
        # The learner fills in the inputs' dtype; its most negative value is finite there.
        s = s.masked_fill(~mask, -math.inf if fill == "-inf" else torch.finfo(dtype).min)
    if softmax is True:
        weights = torch.softmax(s, dim=dim)
    elif softmax == "log":
        weights = torch.log_softmax(s, dim=dim)
    elif softmax in ("global", "per_matrix"):
        over = tuple(range(s.ndim)) if softmax == "global" else (-2, -1)
        exp = torch.exp(s - s.amax(dim=over, keepdim=True))
        weights = exp / exp.sum(dim=over, keepdim=True)
    elif softmax == "max_no_keepdim":
        exp = torch.exp(s - s.amax(dim=dim))  # [..., Tq] maxima along the wrong axis
        weights = exp / exp.sum(dim=dim, keepdim=True)
    elif softmax == "no_keepdim":
        exp = torch.exp(s - s.amax(dim=dim, keepdim=True))
        weights = exp / exp.sum(dim=dim)  # broadcasts the sums along the wrong axis
    else:
        weights = s
    unzeroed = weights  # what the output reads when it is computed before the zeroing
    if mask is not None and zero_blocked:
        weights = weights.masked_fill(mask if zero_where_allowed else ~mask, 0.0)
    if mask is not None and renormalise_after_mask:
        weights = weights / weights.sum(dim=-1, keepdim=True)  # 0 / 0 in a fully masked row
    if scale_after_softmax:
        weights = weights / divisor
    if zero_empty_rows and empty_rows is not None:
        weights = weights.masked_fill(empty_rows, 0.0)
    if not zero_after_output:
        unzeroed = weights
    if output == "weights":
        out = weights
    elif output == "scores @ value":
        out = s @ (k if use_keys else v)
    elif output == "weights^T @ value":
        out = unzeroed.transpose(-2, -1) @ (k if use_keys else v)
    else:
        out = unzeroed @ (k if use_keys else v)
    returned = {
        "weights": weights,
        "scaled_scores": scaled,
        "raw_scores": raw,
        "masked_scores": s,
        "transposed": weights.transpose(-2, -1),
    }[weights_returned]
    return out.to(dtype), returned.to(dtype)


#: The mistakes of attention recognised by their behaviour: key (a suffix after "/" tells two
#: ways of making one mistake apart) -> the arguments of :func:`attention_variant`. The order
#: matters only where two mistakes behave alike on every probe.
ATTENTION_SIGNATURES: dict[str, dict] = {
    "softmax_axis": {"dim": -2},
    "no_scaling": {"divisor": 1.0},
    "scaled_by_value_width": {"scale": "sqrt_dv"},
    "scaled_by_sequence_length/tq": {"scale": "sqrt_tq"},
    "scaled_by_sequence_length/tk": {"scale": "sqrt_tk"},
    "scaled_after_softmax": {"scale_after_softmax": True},
    "no_softmax": {"softmax": False},
    "log_softmax": {"softmax": "log"},
    "softmax_sum_without_keepdim": {"softmax": "no_keepdim"},
    "keys_values_swapped": {"swap_key_value": True},
    "weights_times_keys": {"use_keys": True},
    "scores_transposed/kq": {"scores": "kq"},
    "scores_transposed/qk": {"scores": "qk_no_transpose"},
    "output_uses_transposed_weights": {"output": "weights^T @ value"},
    "returned_scores/scaled": {"weights_returned": "scaled_scores"},
    "returned_scores/raw": {"weights_returned": "raw_scores"},
    "returned_scores/masked": {"weights_returned": "masked_scores"},
    "output_is_weights": {"output": "weights"},
    "weights_returned_transposed": {"weights_returned": "transposed"},
    "softmax_max_without_keepdim": {"softmax": "max_no_keepdim"},
    "output_from_scores": {"output": "scores @ value"},
    "softmax_over_everything/global": {"softmax": "global"},
    "softmax_over_everything/per_matrix": {"softmax": "per_matrix"},
}


def attention_variants(query, key, value, mask=None) -> dict[str, Callable]:
    """The wrong variants every attention check tries: mistake key -> ``() -> (output,
    weights)``."""
    d_k = query.shape[-1]

    def variant(**kwargs):
        return lambda: attention_variant(query, key, value, mask, **kwargs)

    return {
        "softmax_axis": variant(dim=-2),
        "no_scaling": variant(divisor=1.0),
        "scaled_by_d_k": variant(divisor=float(d_k)),
        "scale_multiplied": variant(divisor=1 / math.sqrt(d_k)),
        "no_softmax": variant(softmax=False),
        "scaled_after_softmax": variant(scale_after_softmax=True),
        "weights_times_keys": variant(use_keys=True),
    }


def signature_variants(query, key, value, mask=None, extra=None) -> dict[str, Callable]:
    """Every wrong variant of :data:`ATTENTION_SIGNATURES` (and ``extra``, key -> arguments of
    :func:`attention_variant`, tried first) on these inputs: key -> ``() -> (output,
    weights)``."""
    d_k = query.shape[-1]
    signatures = {
        **(extra or {}),
        **ATTENTION_SIGNATURES,
        "scaled_by_d_k": {"divisor": float(d_k)},
        "scale_multiplied": {"divisor": 1 / math.sqrt(d_k)},
        "sqrt_as_half_power": {"divisor": d_k / 2},
        "sqrt_as_half_power/inline": {"divisor": 2.0 * d_k},  # scores / d_k ** 1/2
    }
    return {
        key_: (lambda kwargs=kwargs: attention_variant(query, key, value, mask, **kwargs))
        for key_, kwargs in signatures.items()
    }


def attention_shape_mistake(query, key, value):
    """Names the mistake that gives a wrong output or weights shape, for the given inputs."""
    lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    tq, tk, d_k, d_v = query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]

    def mistake(out_shape, w_shape):
        if w_shape == (*lead, tk, tq) and tq != tk:
            return "scores_transposed"
        if out_shape == (*lead, tq, d_k) and d_k != d_v:
            return "weights_times_keys"
        if out_shape == (*lead, tq, tk) and tk != d_v:
            return "output_is_weights"
        return None

    return mistake


def matmul_error(error: Exception) -> str | None:
    """A matrix product of mismatched shapes in attention: most often the keys' transpose."""
    text = str(error)
    shapes = ("cannot be multiplied", "Expected size", "must match the size")
    return "scores_transposed" if any(s in text for s in shapes) else None


def cache(compute: Callable[[], Any]) -> Callable[[], Any]:
    """``compute`` run once, on the first call (a diagnosis probes the learner's function)."""
    return functools.cache(compute)


def compare_pair(
    fn_name: str,
    case: Case,
    result: Any,
    expected: tuple[torch.Tensor, torch.Tensor],
    variants: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]],
    shape_mistake: Callable[[torch.Size, torch.Size], str | None] = lambda out, w: None,
    *,
    nonfinite: Callable[[str, torch.Tensor], tuple[str, str | None] | None] | None = None,
    diagnose: Callable[[tuple[torch.Tensor, ...]], tuple[str, str] | None] | None = None,
    fallback: Callable[[tuple[torch.Tensor, ...]], str | None] | None = None,
    locate: Callable[[tuple[torch.Tensor, ...]], str | None] | None = None,
) -> None:
    """Compare a learner's ``(output, weights)`` with the library's, or fail with a diagnosis.

    A single tensor, or the pair the wrong way round, is named before :func:`compare` runs;
    a difference is reported on the weights first, since a wrong output follows from them;
    NaN or inf on a case with large scores is the ``overflow`` of a naive softmax; an output
    equal to the expected weights is ``output_is_weights``. ``nonfinite`` and ``diagnose`` are
    a lab's own hooks of :func:`compare`, tried before these; ``fallback`` (a mistake found by
    behaviour) and ``locate`` (where the result is wrong) are tried after them.
    """
    expected_out, expected_w = expected
    if isinstance(result, torch.Tensor):
        fail(fn_name, case, f"it returned one tensor of shape {list(result.shape)}", "not_a_pair")
    two_tensors(fn_name, case, result)
    out, w = result
    if (
        out.shape == expected_w.shape
        and w.shape == expected_out.shape
        and expected_out.shape != expected_w.shape
    ):
        fail(fn_name, case, "the output has the weights' shape and the reverse", "pair_swapped")
    tol = tolerance(expected_out.dtype)

    def not_finite(name: str, bad: torch.Tensor) -> tuple[str, str | None]:
        found = nonfinite(name, bad) if nonfinite else None
        return found or ("NaN or inf", "overflow" if case.large_scores else None)

    compare(
        fn_name,
        case,
        [Result("output", out, expected_out), Result("weights", w, expected_w)],
        tol,
        variants=variants,
        shape_mistake=lambda name, shapes: shape_mistake(*shapes),
        nonfinite=not_finite,
        report_first=("weights",),
        diagnose=diagnose,
        fallback=lambda got: (
            "output_is_weights"
            if close(got[0], expected_w, *tol)
            else (fallback(got) if fallback else None)
        ),
        locate=locate,
    )


# ---------------------------------------------------------------------------------------------
# Diagnosis by behaviour: probes, signatures, and where a result goes wrong.


def diagnose_by_probes(
    fn: Callable,
    probes: list[tuple],
    variants_of: Callable[..., dict[str, Callable]],
    reference: Callable[..., tuple[torch.Tensor, ...]],
) -> str | None:
    """The first mistake whose signature ``fn`` shows on every probe (see
    :func:`~attention_lab.checks._core.same_behaviour`), or ``None``.

    ``variants_of(*probe)`` gives key -> ``() -> results`` of each wrong variant on a probe,
    ``reference(*probe)`` the right results.
    """
    got = [call_quietly(fn, args) for args in probes]
    right = [reference(*args) for args in probes]
    variants = [variants_of(*args) for args in probes]
    for key in variants[0]:
        if same_behaviour(got, [v[key] for v in variants], right):
            return key.partition("/")[0]
    return None


def indices(where: torch.Tensor, limit: int = 4) -> str:
    """'0, 2 and 3' for the True entries of a 1-D bool tensor."""
    found = [str(i) for i in where.nonzero().flatten().tolist()]
    found = found[:limit] + (["..."] if len(found) > limit else [])
    return ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else "".join(found)


def _wrong_slices(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """Which leading (batch, head) slices of ``[..., T, D]`` results differ, if not all."""
    if got.ndim < 3:
        return ""
    lead = got.shape[:-2]
    diff = (got.double() - expected.double()).abs() > atol + rtol * expected.double().abs()
    wrong = diff.flatten(-2).any(dim=-1).flatten()  # [prod(lead)]
    if wrong.all() or not wrong.any():
        return ""
    names = "batch entries" if len(lead) == 1 else f"[{', '.join(['b', 'h'][: len(lead)])}] slices"
    found = [list(torch.unravel_index(i, lead)) for i in wrong.nonzero().flatten()]
    shown = ", ".join(str([int(x) for x in f]) if len(lead) > 1 else str(int(f[0])) for f in found)
    return f" (only in {names} {shown[:40]})"


def locate_pair(
    got: tuple[torch.Tensor, torch.Tensor],
    expected: tuple[torch.Tensor, torch.Tensor],
    mask: torch.Tensor | None = None,
) -> str:
    """Which part of an ``(output, weights)`` pair is wrong, in the learner's terms: blocked
    keys with a weight, rows that do not sum to 1, a temperature, or the output alone."""
    out, w = got
    expected_out, expected_w = expected
    atol, rtol = tolerance(expected_out.dtype)
    wd, ew = w.double(), expected_w.double()
    if close(w, expected_w, atol, rtol):
        rows = (out.double() - expected_out.double()).abs().amax(dim=-1) > atol  # [..., Tq]
        return (
            "the weights are right, the output is not weights @ value; wrong in "
            f"{int(rows.sum())} of {rows.numel()} query rows"
            + _wrong_slices(out, expected_out, atol, rtol)
        )
    if mask is not None:
        blocked = ~mask.expand_as(wd)
        leak = wd.abs().masked_fill(~blocked, 0.0)
        if (leak > atol).any():
            index = [int(i) for i in torch.unravel_index(leak.argmax(), leak.shape)]
            return (
                f"blocked keys get a weight (up to {leak.max().item():.3g}, at query "
                f"{index[-2]}, key {index[-1]}, index {index}), where it must be exactly 0"
            )
    sums, expected_sums = wd.sum(dim=-1), ew.sum(dim=-1)
    slices = _wrong_slices(w, expected_w, atol, rtol)
    if not torch.allclose(sums, expected_sums, atol=1e-3):
        if torch.allclose(wd.sum(dim=-2), torch.ones_like(wd.sum(dim=-2)), atol=1e-3):
            return "the columns of the weights sum to 1, not the rows (one per query)" + slices
        return (
            f"the rows of the weights sum to {sums.min().item():.3g} to "
            f"{sums.max().item():.3g} instead of 1 (softmax over the keys){slices}"
        )
    # Rows sum right: compare the log-weights, centred per row, with the right ones.
    visible = ew > 0
    if visible.all(dim=-1).any():
        full = visible.all(dim=-1)  # [..., Tq] rows with every key visible
        lw, le = wd.clamp_min(1e-300).log()[full], ew.log()[full]  # [rows, Tk]
        lw, le = lw - lw.mean(dim=-1, keepdim=True), le - le.mean(dim=-1, keepdim=True)
        factor = (lw * le).sum() / (le * le).sum().clamp_min(1e-300)
        if torch.allclose(lw, factor * le, atol=1e-2) and abs(factor - 1) > 1e-3:
            return (
                "each row sums to 1 and ranks the keys like the right weights, but the "
                f"weights are those of scores multiplied by {factor.item():.3g}: the scale of "
                "the scores before the softmax is off" + slices
            )
    return "each row of the weights sums to 1, but the scores behind them differ" + slices


def fixed_axes(fn: Callable, generator: torch.Generator) -> bool:
    """Whether ``fn`` is right for inputs of one number of dimensions but not of another
    (``[T, D]``, ``[B, T, D]``, ``[B, H, T, D]``): the mark of a transpose of fixed axes,
    ``transpose(0, 1)`` or ``transpose(1, 2)``, where the last two were meant."""
    ranks = [
        ((3, 4), (5, 4), (5, 6)),
        ((2, 3, 4), (2, 5, 4), (2, 5, 6)),
        ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)),
    ]
    right = [_right(fn, tuple(randn(generator, *s) for s in shapes)) for shapes in ranks]
    return any(right) and not all(right)


def _right(fn: Callable, args: tuple) -> bool:
    result = call_quietly(fn, args)
    expected = scaled_dot_product_attention(*args)
    return (
        isinstance(result, tuple | list)
        and len(result) == 2
        and all(close(r, e, 1e-5, 1e-4) for r, e in zip(result, expected, strict=True))
    )


def _sdpa_probes(g: torch.Generator) -> list[tuple]:
    """Rank-3 probes: every size distinct, all square, Dk = Dv with Tq != Tk, and the reverse."""
    shapes = [
        ((2, 3, 4), (2, 5, 4), (2, 5, 6)),
        ((1, 4, 4), (1, 4, 4), (1, 4, 4)),
        ((2, 3, 6), (2, 5, 6), (2, 5, 6)),
        ((2, 4, 3), (2, 4, 3), (2, 4, 5)),
    ]
    return [tuple(randn(g, *shape) for shape in probe) for probe in shapes]


def diagnose_sdpa(fn: Callable) -> str | None:
    """Lab 1's diagnosis of a failing ``fn`` by its behaviour on the probes."""
    g = torch.Generator().manual_seed(10)
    probes = _sdpa_probes(g)
    if fixed_axes(fn, g):
        return "fixed_axes"
    found = diagnose_by_probes(fn, probes, signature_variants, scaled_dot_product_attention)
    if found is None and _right(fn, probes[1]) and not _right(fn, probes[0]):
        return "sizes_mixed_up"
    return found


# ---------------------------------------------------------------------------------------------
# Lab 1: scaled dot-product attention.


def _sdpa_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    return [
        Case(
            "batch of 2, 3 queries, 5 keys, d_k=4, d_v=6",
            (randn(g, 2, 3, 4), randn(g, 2, 5, 4), randn(g, 2, 5, 6)),
        ),
        Case(
            "heads [B, H, T, Dh] = [2, 3, 7, 16]",
            (randn(g, 2, 3, 7, 16), randn(g, 2, 3, 7, 16), randn(g, 2, 3, 7, 16)),
        ),
        Case("a single token [1, 1, 8]", (randn(g, 1, 1, 8), randn(g, 1, 1, 8), randn(g, 1, 1, 8))),
        Case(
            "unbatched [Tq, Dk] = [4, 8], equal widths",
            (randn(g, 4, 8), randn(g, 4, 8), randn(g, 4, 8)),
        ),
        Case(
            "float64 inputs",
            tuple(randn(g, 2, 4, 8, dtype=torch.float64) for _ in range(3)),
        ),
        Case(
            "large scores (entries around 30)",
            (30 * randn(g, 1, 4, 8), 30 * randn(g, 1, 6, 8), randn(g, 1, 6, 3)),
            large_scores=True,
        ),
    ]


def global_max_nonfinite(query, key, value, bad: torch.Tensor, name: str) -> bool:
    """Whether ``bad`` (the learner's NaN or inf in its ``name``, "output" or "weights") is
    where a softmax computed in the inputs' dtype goes 0 / 0 when it subtracts the maximum of
    the whole tensor, or of each [Tq, Tk] matrix, instead of each row's."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # [..., Tq, Tk]
    for over in (tuple(range(scores.ndim)), (-2, -1)):
        exp = torch.exp(scores - scores.amax(dim=over, keepdim=True))
        weights = exp / exp.sum(dim=-1, keepdim=True)  # NaN in a row that underflowed
        result = weights if name == "weights" else weights @ value
        if result.shape == bad.shape and torch.equal(~result.isfinite(), bad):
            return True
    return False


def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value) -> (output, weights)`` (Lab 1).

    ``fn`` receives ``query`` ``[..., Tq, Dk]``, ``key`` ``[..., Tk, Dk]`` and ``value``
    ``[..., Tk, Dv]`` and must return ``softmax(query @ key^T / sqrt(Dk)) @ value`` and the
    weights, as :func:`attention_lab.attention.scaled_dot_product_attention` does without a mask.
    Cases: a batch with ``Tq != Tk`` and ``Dk != Dv``, four-dimensional ``[B, H, T, Dh]``
    inputs, a single token, unbatched inputs, ``float64`` and large scores.

    On a failure it probes ``fn`` with inputs of its own (every size distinct, all sizes equal,
    other numbers of leading dimensions) and names the mistake whose behaviour ``fn`` shows on
    all of them; when none does, it says which part of the result is wrong.

    Mistakes it names: ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``,
    ``scale_multiplied``, ``scaled_by_value_width``, ``scaled_by_sequence_length``,
    ``no_softmax``, ``log_softmax``, ``softmax_sum_without_keepdim``, ``scaled_after_softmax``,
    ``scores_transposed``, ``keys_values_swapped``, ``weights_times_keys``,
    ``output_uses_transposed_weights``, ``output_is_weights``, ``returned_scores``,
    ``fixed_axes``, ``sizes_mixed_up``, ``pair_swapped``, ``not_a_pair``, ``overflow``,
    ``weights_returned_transposed``, ``softmax_over_everything``, ``softmax_global_max``,
    ``sqrt_as_half_power``, ``softmax_max_without_keepdim``, ``output_from_scores``,
    ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _sdpa_cases()
    diagnosis = cache(lambda: diagnose_sdpa(fn))
    for case in cases:
        expected = scaled_dot_product_attention(*case.args)
        result = run(fn, case, lambda error: diagnosis())

        def nonfinite(name, bad, args=case.args, case=case):
            if case.large_scores and global_max_nonfinite(*args, bad, name):
                return "NaN or inf", "softmax_global_max"
            return None

        compare_pair(
            name_of(fn),
            case,
            result,
            expected,
            {},
            lambda out, w: diagnosis(),
            nonfinite=nonfinite,
            fallback=lambda got: diagnosis(),
            locate=lambda got, expected=expected: locate_pair(got, expected),
        )
    success(fn, cases)
