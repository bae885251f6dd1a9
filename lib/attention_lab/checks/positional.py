"""Lab 3: the check of the sinusoidal positional encoding."""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    Result,
    check_callable,
    compare,
    expect_tensor,
    name_of,
    register_mistakes,
    run,
    success,
)
from attention_lab.positional import sinusoidal_encoding

__all__ = ["check_sinusoidal_encoding"]

MISTAKES = register_mistakes(
    {
        "sin_cos_swapped": (
            "sine and cosine swapped: even columns (0, 2, 4, ...) hold the sine, odd columns "
            "the cosine"
        ),
        "frequency_i_not_2i": (
            "frequencies use i instead of 2i: column pair i has the angle "
            "pos / base ** (2i / d_model), not pos / base ** (i / d_model)"
        ),
        "frequency_column_index": (
            "each column uses its own index j in the exponent: the sine in column 2i and the "
            "cosine in column 2i + 1 share one frequency, 1 / base ** (2i / d_model)"
        ),
        "frequency_inverted": (
            "frequency inverted: divide the position by base ** (2i / d_model), do not multiply"
        ),
        "halves_not_interleaved": (
            "sines and cosines in two halves: interleave them, sine in column 2i and cosine in "
            "column 2i + 1"
        ),
        "positions_from_one": (
            "positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1)"
        ),
        "encoding_transposed": "the encoding is transposed: return [max_len, d_model]",
        "frequency_2i_doubled": (
            "2i counted twice: torch.arange(0, d_model, 2) already gives 2i, so the exponent is "
            "that divided by d_model, not 2 * arange(0, d_model, 2) / d_model"
        ),
        "exponent_parentheses": (
            "the exponent without its parentheses: ** takes only the number right after it, so "
            "write pos / 10000 ** (2 * i / d_model)"
        ),
        "wrong_base": (
            "the base is not 10000: the angle is pos / 10000 ** (2i / d_model) (check the "
            "number of zeros, 1e4)"
        ),
        "one_function_for_all_columns": (
            "every column a sine, or every column a cosine: even columns hold the sine, odd "
            "columns the cosine"
        ),
        "angles_in_float32": (
            "the angles are computed in float32: their rounding error grows with the position "
            "(about 1e-5 at position 200) and the sine passes it on; compute the position and "
            "the exponent in float64 and round only the result to float32"
        ),
        "exponent_always_zero": (
            "every column pair turns at the same rate, one radian per position: the exponent "
            "2i / d_model came out 0 (an integer division such as two_i // d_model?)"
        ),
        "odd_width_exponent": (
            "right for even widths, wrong for the odd width: the exponent must be "
            "2i / d_model with d_model itself, not a form equal to it only when d_model is even "
            "(such as i / (d_model // 2))"
        ),
        "odd_d_model": (
            "an odd d_model fails: the last column is then a sine without a cosine partner, so "
            "there is one cosine column fewer than sine columns"
        ),
    }
)


def _encoding_variant(max_len: int, d_model: int, mistake: str) -> torch.Tensor:
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # [T, 1]
    if mistake == "positions_from_one":
        position = position + 1
    pair = torch.arange((d_model + 1) // 2, dtype=torch.float64)  # [ceil(D / 2)]: i
    factor = {"frequency_i_not_2i": 1, "frequency_2i_doubled": 4}.get(mistake, 2)
    exponent = factor * pair / d_model
    angle = position / 10000.0**exponent  # [T, ceil(D / 2)]
    if mistake == "frequency_inverted":
        angle = position * 10000.0**exponent
    if mistake == "exponent_parentheses/power_of_2i":  # pos / 10000 ** (2 * i) / d_model
        angle = position / 10000.0 ** (2 * pair) / d_model
    if mistake == "exponent_parentheses/divisor":  # pos / (10000 ** (2 * i) / d_model)
        angle = position * d_model / 10000.0 ** (2 * pair)
    if mistake == "exponent_parentheses/power_of_i":  # pos / 10000 ** i / d_model, i = 2i / 2
        angle = position / 10000.0**pair / d_model
    if mistake == "exponent_parentheses/squared":  # pos / 10000 ** 2 * (2 * i) / d_model
        angle = position / 10000.0**2 * (2 * pair) / d_model
    if mistake == "exponent_parentheses/squared_i":  # pos / 10000 ** 2 * i / d_model
        angle = position / 10000.0**2 * pair / d_model
    encoding = torch.empty(max_len, d_model, dtype=torch.float64)
    sin, cos = torch.sin(angle), torch.cos(angle)
    if mistake == "sin_cos_swapped":
        sin, cos = cos, sin
    if mistake == "one_function_for_all_columns/sin":
        cos = sin
    if mistake == "one_function_for_all_columns/cos":
        sin = cos
    if mistake == "halves_not_interleaved":
        encoding = torch.cat([sin, cos[:, : d_model // 2]], dim=1)  # [T, D]
    elif mistake == "frequency_column_index":
        column = torch.arange(d_model, dtype=torch.float64)  # [D]: j
        angle = position / 10000.0 ** (column / d_model)  # [T, D]
        encoding[:, 0::2] = torch.sin(angle[:, 0::2])
        encoding[:, 1::2] = torch.cos(angle[:, 1::2])
    else:
        encoding[:, 0::2] = sin
        encoding[:, 1::2] = cos[:, : d_model // 2]
    return encoding.to(torch.float32)


def _inverted_frequency(result: torch.Tensor, max_len: int, d_model: int) -> bool:
    """Whether ``result`` is the encoding with angles ``pos * base ** (2i / D)``.

    Those angles reach millions of radians, where float32 keeps no digit of the sine, so only
    the entries whose angles stay below 100 radians are compared; some of them must be in a pair
    other than the first, whose angle (the position itself) is the same either way.
    """
    expected = _encoding_variant(max_len, d_model, "frequency_inverted").double()
    pair = torch.arange(d_model, dtype=torch.float64) // 2  # [D]: i of each column
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # [T, 1]
    small = position * 10000.0 ** (2 * pair / d_model) < 100  # [T, D]
    if not (small & (pair > 0)).any():
        return False
    return torch.allclose(result.double()[small], expected[small], atol=1e-3)


_ENCODING_MISTAKES = (
    "sin_cos_swapped",
    "frequency_i_not_2i",
    "frequency_2i_doubled",
    "exponent_parentheses/power_of_2i",
    "exponent_parentheses/squared",
    "exponent_parentheses/squared_i",
    "exponent_parentheses/divisor",
    "exponent_parentheses/power_of_i",
    "one_function_for_all_columns/sin",
    "one_function_for_all_columns/cos",
    "frequency_column_index",
    "frequency_inverted",
    "halves_not_interleaved",
    "positions_from_one",
)


def _every_pair_turns_once(result: torch.Tensor, max_len: int, d_model: int) -> bool:
    """Whether every column pair of ``result`` has the angle ``pos`` (an exponent of 0)."""
    if max_len < 2 or d_model < 4:
        return False
    angle = torch.arange(max_len, dtype=torch.float64)[:, None].expand(max_len, d_model)
    zero = torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angle), torch.cos(angle))
    return torch.allclose(result.double(), zero, atol=1e-3, rtol=1e-3)


def _float32_angles(result: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether ``result`` is the encoding up to the rounding of float32 angles: close to 1e-4,
    and its error growing with the position (the rows past the first tenth hold the largest)."""
    r, e = result.double(), expected.double()
    if not torch.allclose(r, e, atol=1e-4, rtol=1e-4):
        return False
    error = (r - e).abs().amax(dim=1)  # [T]
    return error.argmax().item() > r.shape[0] // 10


def _other_base(result: torch.Tensor, max_len: int, d_model: int) -> bool:
    """Whether ``result`` is the encoding with another base than 10000, read from the angle by
    which the second column pair turns from position 0 to 1."""
    if max_len < 2 or d_model < 4:
        return False
    r = result.double()
    step = torch.atan2(r[1, 2], r[1, 3])  # the angle of pair 1 at position 1: base ** (-2 / D)
    if not 0 < step < math.pi / 2:
        return False
    base = step.item() ** (-d_model / 2)
    if abs(base - 10000) < 1:
        return False
    other = sinusoidal_encoding(max_len, d_model, base=base).double()
    return torch.allclose(r, other, atol=1e-3, rtol=1e-3)


def _locate_encoding(result: torch.Tensor, expected: torch.Tensor) -> str:
    """Which rows and columns of the encoding are wrong, and how fast the first wrong pair
    turns."""
    r, e = result.double(), expected.double()
    wrong = ~torch.isclose(r, e, atol=1e-4, rtol=1e-4, equal_nan=False)  # [T, D]
    columns, rows = wrong.any(dim=0), wrong.any(dim=1)
    first = int(columns.nonzero()[0])
    kind = "sine" if first % 2 == 0 else "cosine"
    text = (
        f"{int(columns.sum())} of {columns.numel()} columns are wrong, the first column "
        f"{first} (the {kind} of pair {first // 2}), from position {int(rows.nonzero()[0])} on"
    )
    pair = first // 2
    if r.shape[0] > 1 and 2 * pair + 1 < r.shape[1]:
        step = torch.atan2(r[1, 2 * pair], r[1, 2 * pair + 1]).item()
        expected_step = torch.atan2(e[1, 2 * pair], e[1, 2 * pair + 1]).item()
        if math.isfinite(step):
            text += (
                f"; from position 0 to 1 that pair turns by {step:.3g} rad, expected "
                f"{expected_step:.3g} (read as atan2(sine, cosine))"
            )
    return text


def check_sinusoidal_encoding(fn: Callable) -> None:
    """Check a learner's ``fn(max_len, d_model) -> encoding`` (Lab 3).

    ``fn`` must return the ``[max_len, d_model]`` ``float32`` tensor of
    :func:`attention_lab.positional.sinusoidal_encoding` (base 10000): sines in the even
    columns, cosines in the odd ones, column pair ``i`` at the angle
    ``pos / 10000 ** (2i / d_model)``. Cases: 50 positions of width 16, 200 positions of width
    64, a single position, width 2, and an odd width.

    When the values differ and no mistake fits, it says which columns and positions are wrong and
    how fast the first wrong column pair turns.

    Mistakes it names: ``sin_cos_swapped``, ``frequency_i_not_2i``, ``frequency_column_index``,
    ``frequency_2i_doubled``, ``exponent_parentheses``, ``wrong_base``, ``angles_in_float32``,
    ``exponent_always_zero``, ``odd_width_exponent``,
    ``one_function_for_all_columns``, ``frequency_inverted``, ``halves_not_interleaved``,
    ``positions_from_one``,
    ``encoding_transposed``, ``odd_d_model``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = [
        Case("50 positions, d_model=16", (50, 16)),
        Case("200 positions, d_model=64", (200, 64)),
        Case("a single position, d_model=8", (1, 8)),
        Case("10 positions, d_model=2", (10, 2)),
        Case("12 positions, odd d_model=7", (12, 7)),
    ]
    fn_name = name_of(fn)
    for case in cases:
        max_len, d_model = case.args
        odd = d_model % 2 == 1
        result = run(fn, case, lambda error, odd=odd: "odd_d_model" if odd else None)
        expected = sinusoidal_encoding(max_len, d_model)
        expect_tensor(fn_name, case, result)

        def shape_mistake(name, shapes, max_len=max_len, d_model=d_model, odd=odd):
            transposed = shapes[0] == (d_model, max_len) and d_model != max_len
            return "encoding_transposed" if transposed else ("odd_d_model" if odd else None)

        def fallback(got, max_len=max_len, d_model=d_model, odd=odd, expected=expected):
            if _float32_angles(got[0], expected):
                return "angles_in_float32"
            if _inverted_frequency(got[0], max_len, d_model):
                return "frequency_inverted"
            if _every_pair_turns_once(got[0], max_len, d_model):
                return "exponent_always_zero"
            if _other_base(got[0], max_len, d_model):
                # The even widths came first and passed: only the odd width's exponent is off.
                return "odd_width_exponent" if odd else "wrong_base"
            return "odd_d_model" if odd else None

        # The encoding is float32 whatever the learner computes in; NaN is just a difference.
        compare(
            fn_name,
            case,
            [
                Result(
                    "result",
                    result,
                    expected,
                    finite=False,
                    expected_dtype="float32",
                    values="values",
                )
            ],
            # float64 angles rounded once to float32 are within 6e-8 of the library; float32
            # angles are off by about 1e-5 at position 200, which the lab teaches to avoid.
            (1e-6, 1e-6),
            variants={
                key: lambda key=key, max_len=max_len, d_model=d_model: (
                    _encoding_variant(max_len, d_model, key),
                )
                for key in _ENCODING_MISTAKES
            },
            shape_mistake=shape_mistake,
            fallback=fallback,
            locate=lambda got, expected=expected: _locate_encoding(got[0], expected),
        )
    success(fn, cases)
