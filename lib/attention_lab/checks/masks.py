"""Lab 4: the check of masks applied to attention."""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks._core import (
    Case,
    check_callable,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    tolerance,
)
from attention_lab.checks.sdpa import (
    cache,
    compare_pair,
    diagnose_by_probes,
    locate_pair,
    signature_variants,
)
from attention_lab.masks import causal_mask, combine_masks, padding_mask

__all__ = ["check_masked_attention"]

MISTAKES = register_mistakes(
    {
        "mask_polarity": (
            "inverted mask polarity: True means 'may attend', so block where the mask is False "
            "(scores.masked_fill(~mask, ...))"
        ),
        "mask_ignored": "the mask is ignored: blocked keys must get a weight of exactly 0",
        "scores_times_mask": (
            "blocked scores set to 0 (multiplied by the mask, or filled with 0): exp(0) = 1 "
            "still gives a blocked key a weight; fill them with a very negative number, "
            "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)"
        ),
        "mask_transposed": (
            "the mask read transposed: its rows are the queries and its columns the keys, "
            "[..., Tq, Tk]; use it as it is, without transpose"
        ),
        "mask_added": (
            "the bool mask added to the scores: True adds 1 and False adds 0, which blocks "
            "nothing; fill the blocked scores, scores.masked_fill(~mask, ...)"
        ),
        "mask_reshaped": (
            "the mask given another axis (unsqueeze or view): it already broadcasts to "
            "[..., Tq, Tk], so use it as it is"
        ),
        "mask_after_softmax": (
            "weights zeroed after the softmax without renormalising: the rows no longer sum to "
            "1; mask the scores before the softmax"
        ),
        "nan_fully_masked": (
            "NaN in a fully masked row: when every key of a query is blocked its row ends in "
            "0 / 0 (a softmax of scores that are all -inf, or weights divided by their sum of "
            "0); such a row must get weights and output 0"
        ),
        "uniform_fully_masked": (
            "a fully masked row gets uniform weights: when every key is blocked the weights "
            "(and the output) must be 0; zero the blocked weights after the softmax"
        ),
        "fill_overflow": (
            "the fill value does not fit in float16 (e.g. -1e9): use torch.finfo(scores.dtype).min"
        ),
        "zeroed_where_allowed": (
            "the weights are zeroed where the mask is True: True means 'may attend', so zero "
            "the blocked weights where it is False, weights.masked_fill(~mask, 0.0)"
        ),
        "output_before_zeroing": (
            "the output is computed before the blocked weights are zeroed: a query whose keys "
            "are all blocked then averages the values; zero the weights first, then "
            "output = weights @ value"
        ),
    }
)


def _masked_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)
    # Every row allows some keys and blocks others, so the inverted mask is defined too.
    random_mask = torch.tensor(
        [
            [True, False, True, False, True],
            [False, True, True, False, False],
            [True, True, False, True, False],
            [False, False, False, True, True],
        ]
    )[None, None]  # [1, 1, Tq, Tk]
    token_ids = torch.tensor([[5, 3, 8, 2, 9, 4], [7, 1, 6, 0, 0, 0]])  # [B, T], 0 = padding
    all_padding = torch.tensor([[4, 2, 0, 0], [0, 0, 0, 0]])  # the second sequence is empty

    def case(name, shapes, mask, dtype=torch.float32):
        args = tuple(randn(g, *shape, dtype=dtype) for shape in shapes) + (mask,)
        tq, tk = args[0].shape[-2], args[1].shape[-2]
        full = ~mask.expand(*mask.shape[:-2], tq, tk).any(dim=-1, keepdim=True)  # [..., Tq, 1]
        return Case(name, args, fully_masked_rows=full if full.any() else None)

    return [
        case(
            "a mask [1, 1, 4, 5] over 4 queries and 5 keys, 2 heads",
            [(2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 6)],
            random_mask,
        ),
        case("a causal mask [6, 6], 2 heads", [(2, 2, 6, 8)] * 3, causal_mask(6)),
        case(
            "a padding mask [2, 1, 1, 6]: the second sequence has 3 padding tokens",
            [(2, 3, 6, 4)] * 3,
            padding_mask(token_ids),
        ),
        case(
            "causal and padding masks combined, [2, 1, 6, 6]",
            [(2, 2, 6, 4)] * 3,
            combine_masks(causal_mask(6), padding_mask(token_ids)),
        ),
        case(
            "fully masked rows: the second sequence is all padding",
            [(2, 2, 4, 8)] * 3,
            padding_mask(all_padding),
        ),
        case(
            "a single token that may attend to itself",
            [(1, 1, 1, 4)] * 3,
            torch.ones(1, 1, dtype=torch.bool),
        ),
        case("float16 inputs, a causal mask", [(1, 2, 5, 8)] * 3, causal_mask(5), torch.float16),
    ]


def _fully_masked_nan(case: Case):
    """The nonfinite hook: NaN only in the rows whose keys are all blocked."""

    def hook(name: str, bad: torch.Tensor) -> tuple[str, str] | None:
        rows = case.fully_masked_rows
        if rows is not None and not (bad & ~rows.expand_as(bad)).any():
            return "NaN", "nan_fully_masked"
        return None

    return hook


def _fully_masked_uniform(case: Case):
    """The diagnose hook: the fully masked rows got uniform weights instead of 0."""

    def hook(got: tuple[torch.Tensor, ...]) -> tuple[str, str] | None:
        if case.fully_masked_rows is None:
            return None
        _, w = got
        rows = case.fully_masked_rows.expand_as(w)
        uniform = torch.full_like(w.double(), 1.0 / w.shape[-1])
        atol, _ = tolerance(w.dtype)
        if rows.any() and torch.allclose(w.double()[rows], uniform[rows], atol=atol):
            return "the weights of a fully masked row are not 0", "uniform_fully_masked"
        return None

    return hook


_MASK_SIGNATURES = {
    "mask_polarity": {"invert_mask": True},
    "mask_polarity/unzeroed": {"invert_mask": True, "zero_blocked": False},
    "mask_polarity/-inf": {"invert_mask": True, "fill": "-inf", "zero_blocked": False},
    "mask_ignored": {"ignore_mask": True},
    "mask_transposed": {"mask_transposed": True},
    "mask_transposed/unzeroed": {"mask_transposed": True, "zero_blocked": False},
    "mask_after_softmax": {"mask_after_softmax": True},
    "scores_times_mask": {"multiply_by_mask": True},
    "scores_times_mask/empty_rows_zeroed": {"multiply_by_mask": True, "zero_empty_rows": True},
    "mask_added": {"add_mask": True},
    "mask_reshaped": {"unsqueeze_mask": True},
    "uniform_fully_masked": {"zero_blocked": False},
    "nan_fully_masked": {"fill": "-inf", "zero_blocked": False},
    "nan_fully_masked/renormalised": {"renormalise_after_mask": True},
    "output_before_zeroing": {"zero_after_output": True},
    "zeroed_where_allowed": {"zero_where_allowed": True},
}


def _mask_probes() -> list[tuple]:
    """Probes: every size distinct with an irregular mask, square sizes with a mask that is
    not symmetric (so that reading it transposed shows), and a sequence that is all padding."""
    g = torch.Generator().manual_seed(12)
    irregular = torch.tensor(
        [[1, 0, 1, 0, 1], [0, 1, 1, 0, 0], [1, 1, 0, 1, 0], [0, 0, 1, 1, 1]], dtype=torch.bool
    )  # [Tq, Tk] = [4, 5]
    square = torch.tensor(
        [[1, 1, 0, 0], [0, 1, 0, 1], [1, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool
    )  # [4, 4], every row and column mixed, not symmetric
    padding = padding_mask(torch.tensor([[3, 1, 0], [0, 0, 0]]))  # [2, 1, 1, 3]
    return [
        (randn(g, 1, 2, 4, 6), randn(g, 1, 2, 5, 6), randn(g, 1, 2, 5, 3), irregular),
        (randn(g, 1, 2, 4, 4), randn(g, 1, 2, 4, 4), randn(g, 1, 2, 4, 4), square),
        (randn(g, 2, 1, 3, 4), randn(g, 2, 1, 3, 4), randn(g, 2, 1, 3, 4), padding),
    ]


def diagnose_masked(fn: Callable) -> str | None:
    """Lab 4's diagnosis of a failing ``fn`` by its behaviour on the probes."""
    return diagnose_by_probes(
        fn,
        _mask_probes(),
        lambda q, k, v, m: signature_variants(q, k, v, m, _MASK_SIGNATURES),
        scaled_dot_product_attention,
    )


def check_masked_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, mask) -> (output, weights)`` (Lab 4).

    ``fn`` must compute scaled dot-product attention where ``mask`` (``torch.bool``,
    broadcastable to ``[..., Tq, Tk]``, ``True`` = may attend) blocks keys, exactly as
    :func:`attention_lab.attention.scaled_dot_product_attention`: blocked keys get a weight of
    exactly 0, and a query whose keys are all blocked gets weights and output 0, never NaN.
    Cases: an irregular mask, a causal mask, a padding mask, both combined, fully masked rows,
    a single token, and ``float16``. On a failure it probes ``fn`` with masks of its own (sizes
    all distinct, a square mask that is not symmetric, a sequence that is all padding) and names
    the mistake whose behaviour ``fn`` shows on all of them, or says where the result is wrong.

    Mistakes it names: ``mask_polarity``, ``mask_ignored``, ``mask_transposed``,
    ``mask_after_softmax``, ``scores_times_mask``, ``mask_added``, ``mask_reshaped``,
    ``nan_fully_masked``, ``uniform_fully_masked``, ``output_before_zeroing``,
    ``zeroed_where_allowed``,
    ``fill_overflow``, and those of Lab 1:
    ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``, ``scale_multiplied``,
    ``scaled_by_value_width``, ``scaled_by_sequence_length``, ``no_softmax``, ``log_softmax``,
    ``scaled_after_softmax``, ``scores_transposed``,
    ``keys_values_swapped``, ``weights_times_keys``, ``output_uses_transposed_weights``,
    ``output_is_weights``, ``returned_scores``, ``pair_swapped``, ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _masked_cases()
    diagnosis = cache(lambda: diagnose_masked(fn))

    def error_hint(error: Exception) -> str | None:
        return "fill_overflow" if "overflow" in str(error) else diagnosis()

    for case in cases:
        query, key, value, mask = case.args
        expected = scaled_dot_product_attention(query, key, value, mask)
        fully_masked_nan = _fully_masked_nan(case)

        def nonfinite(name, bad, fully_masked_nan=fully_masked_nan):
            return fully_masked_nan(name, bad) or ("NaN or inf", diagnosis())

        result = run(fn, case, error_hint)
        compare_pair(
            name_of(fn),
            case,
            result,
            expected,
            {},
            lambda out, w: diagnosis(),
            nonfinite=nonfinite,
            diagnose=_fully_masked_uniform(case),
            fallback=lambda got: diagnosis(),
            locate=lambda got, expected=expected, mask=mask: locate_pair(got, expected, mask),
        )
    success(fn, cases)
