"""Lab 11: the checks of ALiBi's slopes and bias."""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    BROADCAST_ERROR,
    Case,
    call_quietly,
    check_callable,
    differing,
    expect_tensor,
    fail,
    listed,
    name_of,
    register_mistakes,
    run,
    shape_where,
    success,
)
from attention_lab.positional import alibi_bias, alibi_slopes

__all__ = ["check_alibi_bias", "check_alibi_slopes"]

MISTAKES = register_mistakes(
    {
        "alibi_naive_non_power_of_two": (
            "the geometric sequence 2 ** (-8 (h + 1) / H) used for every H: right for powers "
            "of two only; for other H take the sequence of the largest power of two P < H, "
            "then every other slope of the sequence for 2P"
        ),
        "alibi_extra_wrong_terms": (
            "the extra slopes for a head count that is not a power of two are the wrong half "
            "of the 2P sequence: take its 1st, 3rd, 5th, ... terms ([0::2]), not the even ones"
        ),
        "alibi_extra_first": (
            "the extra slopes come first: the P slopes of the power of two come first, the "
            "extra ones from the 2P sequence after them"
        ),
        "alibi_first_2p_terms": (
            "the first H slopes of the 2P sequence: for a head count that is not a power of "
            "two, take the P-head sequence, then every other slope of the 2P sequence"
        ),
        "alibi_slopes_from_zero": (
            "the exponents start at 0, so the first slope is 1: head h (counting from 0) has "
            "2 ** (-8 (h + 1) / H)"
        ),
        "alibi_slopes_without_8": (
            "the 8 is missing: head h has 2 ** (-8 (h + 1) / H), not 2 ** (-(h + 1)) (the two "
            "agree only for 8 heads)"
        ),
        "alibi_slopes_reversed": (
            "the slopes in reverse order: the first head has the largest slope, 2 ** (-8 / H)"
        ),
        "alibi_slopes_sorted": (
            "the slopes sorted: for a head count that is not a power of two they are not "
            "monotone, the extra slopes come after the others"
        ),
        "alibi_slopes_positive_exponent": (
            "the exponent's sign is lost: slopes are 2 ** (-8 (h + 1) / H), all between 0 and 1"
        ),
        "alibi_slopes_natural_base": (
            "exp instead of a power of 2: slopes are 2 ** (-8 (h + 1) / H), not "
            "e ** (-8 (h + 1) / H) (torch.exp takes base e)"
        ),
        "alibi_slopes_precedence": (
            "operator precedence: the whole exponent needs brackets, 2 ** (-8 * (h + 1) / H); "
            "2 ** -8 * (h + 1) / H is (2 ** -8) * (h + 1) / H, and 2 ** (-8 * (h + 1)) / H "
            "divides the power by H"
        ),
        "alibi_power_rounded_up": (
            "P rounded up: for a head count that is not a power of two, P is the largest power "
            "of two at most H, 2 ** floor(log2(H)); round(log2(H)) gives a power above H for "
            "H = 3, 6, 7, 12, ..."
        ),
        "alibi_bias_sign": (
            "the bias has the wrong sign or orientation: a key d positions before the query "
            "gets -slope * d (farther keys lose), i.e. slope * (j - i), not slope * (i - j)"
        ),
        "alibi_bias_wrong_slopes": (
            "the bias grows linearly with distance, but with other slopes than "
            "alibi_slopes(H): check your slopes first (check_alibi_slopes), then use them"
        ),
        "alibi_bias_slopes_wrong_axis": (
            "the slopes are broadcast along the wrong axis: one slope per head is "
            "slopes[:, None, None], shape [H, 1, 1], times the distances [Tq, Tk]"
        ),
        "alibi_bias_keys_from_q_len": (
            "the key positions run over q_len: the keys are all kv_len positions (those held "
            "before and the new ones), torch.arange(kv_len), so the bias is [H, Tq, Tk]"
        ),
        "alibi_bias_every_position_a_query": (
            "a query row for every position: the queries are the last q_len of the kv_len "
            "positions, torch.arange(kv_len - q_len, kv_len), so the bias is [H, Tq, Tk]"
        ),
        "alibi_bias_offsets_not_outer": (
            "the distances are one row: two 1-D position vectors subtracted as they are give "
            "[Tk] (or a crash when Tq != Tk); make a [Tq, Tk] grid, keys[None, :] - "
            "queries[:, None]"
        ),
        "alibi_bias_transposed": (
            "the grid built with the keys on the rows, [H, Tk, Tq]: the queries index the rows "
            "and the keys the columns, [H, Tq, Tk]"
        ),
        "alibi_bias_not_linear": (
            "the bias does not grow linearly with the distance: it is slope * (j - i) for key "
            "j and query position i, not a square, an absolute value of a product, or a ratio"
        ),
    }
)

# Head counts: powers of two first (the easy rule), then the others.
_SLOPE_HEADS = (8, 4, 16, 1, 2, 6, 12, 5, 20, 3)


def _geometric(
    count: int, *, start: int = 1, eight: float = 8.0, base: float = 2.0, precedence=False
):
    exponents = torch.arange(start, start + count, dtype=torch.float64)  # [count]
    if precedence == "division":  # 2 ** (-8 * (h + 1)) / H, the division outside
        return base ** (-eight * exponents) / count
    if precedence:  # 2 ** -8 * (h + 1) / H, without the exponent's brackets
        return base**-eight * exponents / count
    return base ** (-eight * exponents / count)


def _combined(num_heads: int, how: str = "right", **geometric) -> torch.Tensor:
    """The slopes by the rule for any H; ``how`` is ``"right"``, ``"wrong_terms"``,
    ``"extra_first"`` or ``"rounded"`` (P = 2 ** round(log2 H), and the extra slopes sliced to
    ``H - P`` as written even when that is negative)."""
    log = math.log2(num_heads)
    power = 2 ** (round(log) if how == "rounded" else math.floor(log))
    first = _geometric(power, **geometric)
    wider = _geometric(2 * power, **geometric)
    extra = (wider[1::2] if how == "wrong_terms" else wider[0::2])[: num_heads - power]
    if how == "extra_first":
        return torch.cat([extra, first])
    return torch.cat([first, extra])


def _slope_variants(num_heads: int) -> dict[str, torch.Tensor]:
    right = alibi_slopes(num_heads)
    return {
        "alibi_naive_non_power_of_two": _geometric(num_heads),
        "alibi_extra_wrong_terms": _combined(num_heads, "wrong_terms"),
        "alibi_extra_first": _combined(num_heads, "extra_first"),
        "alibi_first_2p_terms": _geometric(2 ** math.ceil(math.log2(num_heads)))[:num_heads],
        "alibi_slopes_from_zero": _combined(num_heads, start=0),
        "alibi_slopes_from_zero/naive": _geometric(num_heads, start=0),
        "alibi_slopes_without_8": 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float64),
        "alibi_slopes_reversed": right.flip(0),
        "alibi_slopes_sorted": right.sort(descending=True).values,
        "alibi_slopes_positive_exponent": 1 / right,
        "alibi_slopes_natural_base": _combined(num_heads, base=math.e),
        "alibi_slopes_natural_base/naive": _geometric(num_heads, base=math.e),
        "alibi_slopes_precedence": _combined(num_heads, precedence=True),
        "alibi_slopes_precedence/naive": _geometric(num_heads, precedence=True),
        "alibi_slopes_precedence/division": _combined(num_heads, precedence="division"),
        "alibi_slopes_precedence/division_naive": _geometric(num_heads, precedence="division"),
        "alibi_power_rounded_up": _combined(num_heads, "rounded"),
    }


def _slope_mistake(slopes: torch.Tensor, num_heads: int) -> str | None:
    """The classic slope mistake that ``slopes`` (``[H]``, float64) matches, if any."""
    right = alibi_slopes(num_heads)
    return next(
        (
            key.partition("/")[0]
            for key, wrong in _slope_variants(num_heads).items()
            if wrong.shape == slopes.shape
            and torch.allclose(slopes, wrong, rtol=1e-6, atol=0)
            and (wrong.shape != right.shape or not torch.allclose(wrong, right, rtol=1e-6, atol=0))
        ),
        None,
    )


def _as_float64(fn_name: str, case: Case, got: torch.Tensor, expected: torch.Tensor):
    if got.shape != expected.shape:
        fail(
            fn_name,
            case,
            f"the result has shape {list(got.shape)}, expected {list(expected.shape)}",
            None,
            where=shape_where(got.shape, expected.shape),
        )
    if not got.is_floating_point():
        fail(
            fn_name,
            case,
            f"the result is {got.dtype}, expected a floating dtype",
            None,
            where=(
                "every entry is an integer: positions from torch.arange are int64, and slopes "
                "cast to their dtype (.to(positions), .long()) lose their fractions; keep the "
                "slopes and the product floating point"
            ),
        )
    if not got.isfinite().all():
        bad = (~got.isfinite()).nonzero()[0].tolist()
        fail(
            fn_name,
            case,
            "the result contains NaN or inf",
            None,
            where=f"the first at index {bad} (a division by 0, or a log or power of 0)",
        )
    return got.double()


def check_alibi_slopes(fn: Callable[[int], torch.Tensor]) -> None:
    """Check a learner's ``fn(num_heads) -> [H]`` against the library's ALiBi slopes.

    Head counts 8, 4, 16, 1, 2 (powers of two) and 6, 12, 5, 20, 3 (not); a result in
    ``float32`` or ``float64`` within a relative 1e-6 passes. On a mismatch the check compares
    the result with each classic wrong version of the slopes and names the one it matches, or
    says which heads are wrong.

    Mistakes it names: ``alibi_naive_non_power_of_two``, ``alibi_extra_wrong_terms``,
    ``alibi_extra_first``, ``alibi_first_2p_terms``, ``alibi_slopes_from_zero``,
    ``alibi_slopes_without_8``, ``alibi_slopes_reversed``, ``alibi_slopes_sorted``,
    ``alibi_slopes_positive_exponent``, ``alibi_slopes_natural_base``,
    ``alibi_slopes_precedence``, ``alibi_power_rounded_up`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: If a result differs, naming the case and the likely mistake.
    """
    check_callable(fn)
    fn_name = name_of(fn)
    cases = [Case(f"{heads} heads", (heads,)) for heads in _SLOPE_HEADS]
    for case in cases:
        (heads,) = case.args
        got = run(fn, case)
        expect_tensor(fn_name, case, got)
        expected = alibi_slopes(heads)
        if got.shape != expected.shape and got.is_floating_point() and got.ndim == 1:
            fail(
                fn_name,
                case,
                f"the result has shape {list(got.shape)}, expected {list(expected.shape)}",
                _slope_mistake(got.double(), heads),
                where=shape_where(got.shape, expected.shape),
            )
        got = _as_float64(fn_name, case, got, expected)
        if torch.allclose(got, expected, rtol=1e-6, atol=0):
            continue
        mistake = _slope_mistake(got, heads)
        bad = differing(got, expected, 0, 0, 1e-6)
        power = 2 ** math.floor(math.log2(heads))
        where = f"the slopes of heads {listed(bad)} (counting from 0)"
        if all(index >= power for index in bad):
            where += f", the extra heads after the first {power}: the part for a head count "
            where += "that is not a power of two"
        problem = (
            f"slope {bad[0]} is {got[bad[0]].item():.6g}, expected {expected[bad[0]].item():.6g}"
        )
        fail(fn_name, case, problem, mistake, where=where)
    success(fn, cases)


# (H, Tq, Tk): square, a cache (Tq < Tk), one query, H not a power of two, H = Tq.
_BIAS_CASES = ((4, 6, 6), (2, 3, 8), (8, 1, 5), (6, 5, 5), (3, 3, 7), (1, 4, 4))


def _causal_region(q_len: int, kv_len: int) -> torch.Tensor:
    query_pos = torch.arange(kv_len - q_len, kv_len)[:, None]  # [Tq, 1]
    return torch.arange(kv_len)[None, :] <= query_pos  # [Tq, Tk]


def _per_row_normalised(bias: torch.Tensor, q_len: int, kv_len: int) -> torch.Tensor:
    """The bias minus its value at each query's own position (a per-row constant)."""
    own = torch.arange(kv_len - q_len, kv_len)  # [Tq]: the key column of each query
    at_own = bias[..., torch.arange(q_len), own]  # [H, Tq]
    return bias - at_own[..., None]  # [H, Tq, Tk]


def _bias_hint(case: Case) -> Callable[[Exception], str | None]:
    """The mistake behind a crash on ``case``: query and key positions that meet as two 1-D
    vectors (their sizes Tq and Tk clash), else slopes broadcast along the wrong axis."""
    _, q_len, kv_len = case.args

    def hint(error: Exception) -> str | None:
        text = str(error)
        sizes = BROADCAST_ERROR.search(text)
        if sizes and q_len != kv_len and {int(s) for s in sizes.groups()[:2]} == {q_len, kv_len}:
            return "alibi_bias_offsets_not_outer"
        if "must match the size of tensor" in text or "broadcast" in text:
            return "alibi_bias_slopes_wrong_axis"
        return None

    return hint


def check_alibi_bias(fn: Callable[[int, int, int], torch.Tensor]) -> None:
    """Check a learner's ``fn(num_heads, q_len, kv_len) -> [H, Tq, Tk]`` against the library's.

    The library's is :func:`~attention_lab.positional.alibi_bias`; its slopes are
    :func:`~attention_lab.positional.alibi_slopes`.

    Only what a causal model uses is compared: for each query (the last ``q_len`` positions
    of ``kv_len``), the keys up to and including its own position. A bias that differs from the
    library's by a constant in each row passes, since the softmax ignores such a constant
    (BLOOM's and MPT's biases do); the check then says so.

    Mistakes it names: ``alibi_bias_sign``, ``alibi_bias_wrong_slopes`` (or, for slopes that
    match a classic slope mistake, that mistake's name), ``alibi_bias_slopes_wrong_axis``,
    ``alibi_bias_keys_from_q_len``, ``alibi_bias_every_position_a_query``,
    ``alibi_bias_offsets_not_outer``, ``alibi_bias_transposed``, ``alibi_bias_not_linear``
    (see :data:`MISTAKES`); otherwise it says which query rows are wrong.

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: If a result differs, naming the case and the likely mistake.
    """
    check_callable(fn)
    fn_name = name_of(fn)
    cases = [Case(f"H={h}, Tq={tq}, Tk={tk}", (h, tq, tk)) for h, tq, tk in _BIAS_CASES]
    shifted = False
    for case in cases:
        heads, q_len, kv_len = case.args
        got = run(fn, case, _bias_hint(case))
        expect_tensor(fn_name, case, got)
        expected = alibi_bias(heads, q_len, kv_len)  # [H, Tq, Tk]
        missized = {}
        if q_len != kv_len:
            missized[(heads, q_len, q_len)] = "alibi_bias_keys_from_q_len"
            missized[(heads, kv_len, kv_len)] = "alibi_bias_every_position_a_query"
            missized[(heads, kv_len, q_len)] = "alibi_bias_transposed"
        if q_len > 1:  # one query: [H, 1, Tk] is the right shape
            missized[(heads, 1, kv_len)] = "alibi_bias_offsets_not_outer"
            missized[(heads, kv_len)] = "alibi_bias_offsets_not_outer"
        if tuple(got.shape) in missized:
            problem = f"the result has shape {list(got.shape)}, expected {list(expected.shape)}"
            fail(fn_name, case, problem, missized[tuple(got.shape)])
        got = _as_float64(fn_name, case, got, expected)
        region = _causal_region(q_len, kv_len).expand_as(expected)  # [H, Tq, Tk]
        normalised = _per_row_normalised(got, q_len, kv_len)
        if torch.allclose(normalised[region], expected[region], rtol=1e-6, atol=1e-9):
            if not torch.allclose(got[region], expected[region], rtol=1e-6, atol=1e-9):
                shifted = True
            continue
        _diagnose_bias(fn, case, normalised, expected, region)
    success(fn, cases)
    if shifted:
        print(
            "  Your bias differs from the library's by a constant in each row (as\n"
            "  BLOOM's slope * j does): the softmax ignores it, so the attention is the same."
        )


def _transposed_for_a_cache(fn: Callable) -> bool:
    """Whether ``fn`` gives a cache's bias (Tq < Tk) the shape [H, Tk, Tq]: on a square bias
    keys on the rows look like the sign mistake, on a cache's they cannot."""
    got = call_quietly(fn, (2, 3, 8))
    return isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 8, 3)


def _diagnose_bias(fn, case, normalised, expected, region) -> None:
    fn_name = name_of(fn)
    heads, q_len, kv_len = case.args
    problem_at = (~torch.isclose(normalised, expected, rtol=1e-6, atol=1e-9)) & region
    h, r, j = (int(i) for i in problem_at.nonzero()[0])
    problem = (
        f"head {h}, query row {r}, key {j}: {normalised[h, r, j].item():.4g} after removing "
        f"the row's constant, expected {expected[h, r, j].item():.4g}"
    )
    if torch.allclose(normalised[region], -expected[region], rtol=1e-6, atol=1e-9):
        if q_len == kv_len and _transposed_for_a_cache(fn):
            fail(fn_name, case, problem, "alibi_bias_transposed")
        fail(fn_name, case, problem, "alibi_bias_sign")
    # Linear in the distance, with some slope per head?
    own = torch.arange(kv_len - q_len, kv_len)  # [Tq]
    offset = (torch.arange(kv_len)[None, :] - own[:, None]).double()  # [Tq, Tk], j - i
    back = offset < 0
    if back.any():
        fitted = normalised[:, back] / offset[back]  # [H, entries]: the slope of each entry
        slopes = fitted.mean(dim=1)  # [H]
        linear = torch.allclose(fitted, slopes[:, None].expand_as(fitted), rtol=1e-5, atol=1e-9)
        if linear and torch.allclose(slopes.abs(), alibi_slopes(heads), rtol=1e-6):
            fail(fn_name, case, problem, "alibi_bias_sign")
        if linear:
            wrong = differing(slopes, alibi_slopes(heads), 0, 0, 1e-6)
            # A classic slope mistake, named as check_alibi_slopes names it; else generic.
            mistake = _slope_mistake(slopes, heads) or "alibi_bias_wrong_slopes"
            fail(
                fn_name,
                case,
                problem + f"; your slopes of heads {listed(wrong)} differ",
                mistake,
            )
        fail(fn_name, case, problem, "alibi_bias_not_linear")
    rows = differing(normalised * region, expected * region, 1, 1e-9, 1e-6)
    fail(fn_name, case, problem, None, where=f"query rows {listed(rows)}")
