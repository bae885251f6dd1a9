"""Lab 11's checks (ALiBi): right implementations written three ways pass, and every mistake in
the catalogue, written the way a learner writes it, fails with its name.

The implementations it runs are in ``support/implementations/lab11.py``.
"""

from __future__ import annotations

import pytest

from attention_lab.checks import MISTAKES, check_alibi_bias, check_alibi_slopes
from attention_lab.checks.alibi import MISTAKES as ALIBI_MISTAKES
from support.implementations.lab11 import (
    WRONG_BIAS,
    WRONG_SLOPES,
    bias_bloom,
    bias_loops,
    bias_right,
    slopes_log2,
    slopes_loop,
    slopes_vectorised,
)


@pytest.mark.parametrize("fn", [slopes_loop, slopes_log2, slopes_vectorised])
def test_right_slopes_pass(fn, capsys):
    check_alibi_slopes(fn)
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("mistake", sorted(WRONG_SLOPES))
def test_wrong_slopes_are_named(mistake):
    with pytest.raises(AssertionError) as error:
        check_alibi_slopes(WRONG_SLOPES[mistake])
    assert MISTAKES[mistake] in " ".join(str(error.value).split())


def test_an_unknown_slope_mistake_is_located_not_named():
    def off_for_six(h):
        slopes = slopes_loop(h)
        if h == 6:
            slopes[5] *= 1.5
        return slopes

    with pytest.raises(AssertionError, match="Where it goes wrong: the slopes of heads 5"):
        check_alibi_slopes(off_for_six)


@pytest.mark.parametrize("fn", [bias_right, bias_bloom, bias_loops])
def test_right_biases_pass(fn, capsys):
    check_alibi_bias(fn)
    out = capsys.readouterr().out
    assert out.startswith("✓")
    assert ("constant in each row" in out) == (fn is bias_bloom)


@pytest.mark.parametrize("mistake", sorted(WRONG_BIAS))
def test_wrong_biases_are_named(mistake):
    with pytest.raises(AssertionError) as error:
        check_alibi_bias(WRONG_BIAS[mistake])
    assert MISTAKES[mistake] in " ".join(str(error.value).split())


@pytest.mark.parametrize(
    "mistake", ["alibi_slopes_reversed", "alibi_slopes_without_8", "alibi_naive_non_power_of_two"]
)
def test_a_bias_built_on_a_classic_slope_mistake_names_the_slope_mistake(mistake):
    def bias(h, q, k):
        return bias_right(h, q, k, slopes=WRONG_SLOPES[mistake])

    with pytest.raises(AssertionError) as error:
        check_alibi_bias(bias)
    assert MISTAKES[mistake] in " ".join(str(error.value).split())


def test_a_square_transpose_is_the_sign_mistake_unless_a_cache_shows_keys_on_the_rows():
    # A bias transposed only when square is, on every shape, the sign mistake's bias.
    def transposed_when_square(h, q, k):
        bias = bias_right(h, q, k)
        return bias.transpose(-1, -2) if q == k else bias_right(h, q, k, sign=-1)

    with pytest.raises(AssertionError, match="wrong sign or orientation"):
        check_alibi_bias(transposed_when_square)
    # Transposed always: a cache's bias then has the shape [H, Tk, Tq], whichever case fails.
    with pytest.raises(AssertionError, match="keys on the rows"):
        check_alibi_bias(lambda h, q, k: bias_right(h, q, k).transpose(-1, -2))

    def transposed_only_for_a_cache(h, q, k):
        bias = bias_right(h, q, k)
        return bias if q == k else bias.transpose(-1, -2)

    with pytest.raises(AssertionError, match="keys on the rows"):
        check_alibi_bias(transposed_only_for_a_cache)


def test_every_mistake_is_tested_and_messages_are_short():
    assert set(ALIBI_MISTAKES) == set(WRONG_SLOPES) | set(WRONG_BIAS)
    for fn, check in [(f, check_alibi_slopes) for f in WRONG_SLOPES.values()] + [
        (f, check_alibi_bias) for f in WRONG_BIAS.values()
    ]:
        with pytest.raises(AssertionError) as error:
            check(fn)
        lines = str(error.value).splitlines()
        assert len(lines) <= 8 and max(map(len, lines)) <= 76
