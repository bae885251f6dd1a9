"""Lab 1: the check of scaled dot-product attention.

Also what the later attention labs (multi-head attention, masks, the encoder layer) build on:
the wrong variants of attention (:func:`attention_variant`), the mistakes a wrong shape or a
crash points to, and :func:`compare_pair`, the comparison of an ``(output, weights)`` pair.
"""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks._core import (
    Case,
    Result,
    check_callable,
    close,
    compare,
    fail,
    name_of,
    randn,
    register_mistakes,
    run,
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
        "scaled_by_d_k": "wrong scaling: you divided by d_k instead of by sqrt(d_k)",
        "scale_multiplied": (
            "wrong scaling: you multiplied by sqrt(d_k) instead of dividing by it"
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
    softmax: bool = True,
    use_keys: bool = False,
    scores_transposed: bool = False,
    invert_mask: bool = False,
    mask_after_softmax: bool = False,
    scale_after_softmax: bool = False,
    multiply_by_mask: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with one deliberate deviation; the defaults give the right answer."""
    dtype = query.dtype
    q, k, v = query.double(), key.double(), value.double()
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    scores = k @ q.transpose(-2, -1) if scores_transposed else q @ k.transpose(-2, -1)
    if not scale_after_softmax:
        scores = scores / divisor
    if mask is not None and invert_mask:
        mask = ~mask
    if mask is not None and multiply_by_mask:
        scores = scores * mask  # blocked scores become 0, and keep a weight
        mask = None
    if mask is not None and not mask_after_softmax:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim) if softmax else scores
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if scale_after_softmax:
        weights = weights / divisor
    output = weights @ (k if use_keys else v)
    return output.to(dtype), weights.to(dtype)


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
) -> None:
    """Compare a learner's ``(output, weights)`` with the library's, or fail with a diagnosis.

    A single tensor, or the pair the wrong way round, is named before :func:`compare` runs;
    a difference is reported on the weights first, since a wrong output follows from them;
    NaN or inf on a case with large scores is the ``overflow`` of a naive softmax; an output
    equal to the expected weights is ``output_is_weights``. ``nonfinite`` and ``diagnose`` are
    a lab's own hooks of :func:`compare`, tried before these.
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
        fallback=lambda got: "output_is_weights" if close(got[0], expected_w, *tol) else None,
    )


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


def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value) -> (output, weights)`` (Lab 1).

    ``fn`` receives ``query`` ``[..., Tq, Dk]``, ``key`` ``[..., Tk, Dk]`` and ``value``
    ``[..., Tk, Dv]`` and must return ``softmax(query @ key^T / sqrt(Dk)) @ value`` and the
    weights, as :func:`attention_lab.attention.scaled_dot_product_attention` does without a mask.
    Cases: a batch with ``Tq != Tk`` and ``Dk != Dv``, four-dimensional ``[B, H, T, Dh]``
    inputs, a single token, unbatched inputs, ``float64`` and large scores.

    Mistakes it names: ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``,
    ``scale_multiplied``, ``no_softmax``, ``scaled_after_softmax``, ``scores_transposed``,
    ``weights_times_keys``, ``output_is_weights``, ``pair_swapped``, ``not_a_pair``,
    ``overflow``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _sdpa_cases()
    for case in cases:
        result = run(fn, case, matmul_error)
        compare_pair(
            name_of(fn),
            case,
            result,
            scaled_dot_product_attention(*case.args),
            attention_variants(*case.args),
            attention_shape_mistake(*case.args),
        )
    success(fn, cases)
