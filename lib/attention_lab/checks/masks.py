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
    attention_shape_mistake,
    attention_variant,
    attention_variants,
    compare_pair,
    matmul_error,
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
            "scores multiplied by the mask: a blocked score becomes 0, not a very negative "
            "number, and exp(0) = 1 still gives that key a weight; fill the blocked scores "
            "instead, scores.masked_fill(~mask, torch.finfo(scores.dtype).min)"
        ),
        "mask_after_softmax": (
            "weights zeroed after the softmax without renormalising: the rows no longer sum to "
            "1; mask the scores before the softmax"
        ),
        "nan_fully_masked": (
            "NaN in a fully masked row: filling with -inf gives 0 / 0 when every key is "
            "blocked; fill with torch.finfo(scores.dtype).min and set the weights of such rows "
            "to 0"
        ),
        "uniform_fully_masked": (
            "a fully masked row gets uniform weights: when every key is blocked the weights "
            "(and the output) must be 0; zero the blocked weights after the softmax"
        ),
        "fill_overflow": (
            "the fill value does not fit in float16 (e.g. -1e9): use torch.finfo(scores.dtype).min"
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


def check_masked_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, mask) -> (output, weights)`` (Lab 4).

    ``fn`` must compute scaled dot-product attention where ``mask`` (``torch.bool``,
    broadcastable to ``[..., Tq, Tk]``, ``True`` = may attend) blocks keys, exactly as
    :func:`attention_lab.attention.scaled_dot_product_attention`: blocked keys get a weight of
    exactly 0, and a query whose keys are all blocked gets weights and output 0, never NaN.
    Cases: an irregular mask, a causal mask, a padding mask, both combined, fully masked rows,
    a single token, and ``float16``.

    Mistakes it names: ``mask_polarity``, ``mask_ignored``, ``mask_after_softmax``,
    ``scores_times_mask``, ``nan_fully_masked``, ``uniform_fully_masked``, ``fill_overflow``,
    ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``, ``scale_multiplied``, ``no_softmax``,
    ``scaled_after_softmax``, ``scores_transposed``, ``weights_times_keys``,
    ``output_is_weights``, ``pair_swapped``, ``not_a_pair``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _masked_cases()

    def error_hint(error: Exception) -> str | None:
        return "fill_overflow" if "overflow" in str(error) else matmul_error(error)

    for case in cases:
        query, key, value, mask = case.args

        def variant(q=query, k=key, v=value, m=mask, **kwargs):
            return lambda: attention_variant(q, k, v, m, **kwargs)

        variants = {
            "mask_polarity": variant(invert_mask=True),
            "mask_ignored": lambda q=query, k=key, v=value: attention_variant(q, k, v),
            "mask_after_softmax": variant(mask_after_softmax=True),
            "scores_times_mask": variant(multiply_by_mask=True),
            **attention_variants(query, key, value, mask),
        }
        result = run(fn, case, error_hint)
        compare_pair(
            name_of(fn),
            case,
            result,
            scaled_dot_product_attention(query, key, value, mask),
            variants,
            attention_shape_mistake(query, key, value),
            nonfinite=_fully_masked_nan(case),
            diagnose=_fully_masked_uniform(case),
        )
    success(fn, cases)
