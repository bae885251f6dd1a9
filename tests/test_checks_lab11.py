"""Lab 11's checks (ALiBi): right implementations written three ways pass, and every mistake in
the catalogue, written the way a learner writes it, fails with its name."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab.checks import MISTAKES, check_alibi_bias, check_alibi_slopes
from attention_lab.checks.alibi import MISTAKES as ALIBI_MISTAKES

# Slopes ------------------------------------------------------------------------------------


def slopes_loop(
    num_heads, *, start=1, eight=8.0, base=2.0, extra="odd", order="first", brackets=True
):
    def sequence(n):
        if not brackets:  # 2 ** -8 * (k + 1) / n: the exponent's brackets forgotten
            return [base**-eight * (k + start) / n for k in range(n)]
        return [base ** (-eight * (k + start) / n) for k in range(n)]

    power = 1
    while power * 2 <= num_heads:
        power *= 2
    wider = sequence(2 * power)
    extras = (wider[0::2] if extra == "odd" else wider[1::2])[: num_heads - power]
    slopes = sequence(power) + extras if order == "first" else extras + sequence(power)
    return torch.tensor(slopes, dtype=torch.float64)


def slopes_log2(num_heads):
    # Written from the paper's recursion, with exponents: 2 ** (-2 ** -(log2(n) - 3)).
    def sequence(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**k for k in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(sequence(num_heads))
    power = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(sequence(power) + sequence(2 * power)[0::2][: num_heads - power])


def slopes_vectorised(num_heads):
    power = 2 ** int(math.log2(num_heads))
    first = torch.exp2(-8 * torch.arange(1, power + 1) / power)
    odd = 2 * torch.arange(num_heads - power) + 1  # terms 1, 3, 5, ... of the 2P sequence
    extra = torch.exp2(-8 * odd / (2 * power))
    return torch.cat([first, extra]).float()


@pytest.mark.parametrize("fn", [slopes_loop, slopes_log2, slopes_vectorised])
def test_right_slopes_pass(fn, capsys):
    check_alibi_slopes(fn)
    assert capsys.readouterr().out.startswith("✓")


def naive(num_heads):
    return torch.tensor([2 ** (-8 * (k + 1) / num_heads) for k in range(num_heads)])


WRONG_SLOPES = {
    "alibi_naive_non_power_of_two": naive,
    "alibi_extra_wrong_terms": lambda h: slopes_loop(h, extra="even"),
    "alibi_extra_first": lambda h: slopes_loop(h, order="extra_first"),
    "alibi_first_2p_terms": lambda h: naive(2 ** math.ceil(math.log2(h)))[:h],
    "alibi_slopes_from_zero": lambda h: slopes_loop(h, start=0),
    "alibi_slopes_without_8": lambda h: torch.tensor([2.0 ** -(k + 1) for k in range(h)]),
    "alibi_slopes_reversed": lambda h: slopes_loop(h).flip(0),
    "alibi_slopes_sorted": lambda h: slopes_loop(h).sort(descending=True).values,
    "alibi_slopes_positive_exponent": lambda h: slopes_loop(h, eight=-8.0),
    "alibi_slopes_natural_base": lambda h: torch.exp(-8 * torch.arange(1, h + 1) / h),
    "alibi_slopes_precedence": lambda h: slopes_loop(h, brackets=False),
}


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


# Bias --------------------------------------------------------------------------------------


def bias_right(num_heads, q_len, kv_len, *, slopes=slopes_loop, sign=1, power=1):
    query = torch.arange(kv_len - q_len, kv_len).unsqueeze(1)  # [Tq, 1]
    key = torch.arange(kv_len).unsqueeze(0)  # [1, Tk]
    distance = (sign * (key - query)).double()
    if power != 1:
        distance = -(distance.abs() ** power)
    return slopes(num_heads).view(-1, 1, 1) * distance


def bias_bloom(num_heads, q_len, kv_len):
    # BLOOM's form: slope * key position, the same in every row.
    return slopes_vectorised(num_heads)[:, None, None] * torch.arange(kv_len).expand(q_len, -1)


def bias_loops(num_heads, q_len, kv_len):
    out = torch.zeros(num_heads, q_len, kv_len)
    slopes = slopes_log2(num_heads)
    for h in range(num_heads):
        for r in range(q_len):
            i = kv_len - q_len + r
            for j in range(kv_len):
                out[h, r, j] = -slopes[h] * abs(i - j)  # symmetric: only j <= i is checked
    return out


@pytest.mark.parametrize("fn", [bias_right, bias_bloom, bias_loops])
def test_right_biases_pass(fn, capsys):
    check_alibi_bias(fn)
    out = capsys.readouterr().out
    assert out.startswith("✓")
    assert ("constant in each row" in out) == (fn is bias_bloom)


WRONG_BIAS = {
    "alibi_bias_sign": lambda h, q, k: bias_right(h, q, k, sign=-1),
    # Slopes that match no classic slope mistake (those are named as such: tested below).
    "alibi_bias_wrong_slopes": lambda h, q, k: bias_right(
        h, q, k, slopes=lambda n: 0.5 * slopes_loop(n)
    ),
    "alibi_bias_not_linear": lambda h, q, k: bias_right(h, q, k, power=2),
    "alibi_bias_slopes_wrong_axis": lambda h, q, k: (
        slopes_loop(h)[None, :, None] * torch.ones(q, k).unsqueeze(0)
    ),
    # Right for a square bias; with a cache, keys arange(q_len) or a row for every position.
    "alibi_bias_keys_from_q_len": lambda h, q, k: bias_right(h, q, k)[..., k - q :],
    "alibi_bias_every_position_a_query": lambda h, q, k: bias_right(h, k, k),
}


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


def test_a_transposed_bias_is_named_then_located_for_a_cache():
    # On the first, square case a transpose is the sign mistake; with a cache, a shape error.
    with pytest.raises(AssertionError, match="wrong sign or orientation"):
        check_alibi_bias(lambda h, q, k: bias_right(h, q, k).transpose(-1, -2))

    def transposed_only_for_a_cache(h, q, k):
        bias = bias_right(h, q, k)
        return bias if q == k else bias.transpose(-1, -2)

    with pytest.raises(AssertionError, match="wrong order"):
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


# For tests/test_checks.py, which runs every lab's wrong implementations through its own
# message tests: (check, wrong implementation, mistake key).
WRONG = [(check_alibi_slopes, fn, key) for key, fn in sorted(WRONG_SLOPES.items())] + [
    (check_alibi_bias, fn, key) for key, fn in sorted(WRONG_BIAS.items())
]

# Right implementations that pass with the one success line (bias_bloom adds a second line,
# tested above): (check, implementation).
RIGHT = [
    (check_alibi_slopes, slopes_loop),
    (check_alibi_slopes, slopes_log2),
    (check_alibi_slopes, slopes_vectorised),
    (check_alibi_bias, bias_right),
    (check_alibi_bias, bias_loops),
]
