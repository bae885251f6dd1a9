"""Lab 11's learner code, used as data: ALiBi's slopes and bias.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each (check_alibi_slopes and
check_alibi_bias in attention_lab.checks). ``RIGHT`` lists ``(check, implementation)`` pairs,
``WRONG`` ``(check, implementation, mistake key)``. test_checks_lab11.py and test_checks.py run
them through the check.
"""

from __future__ import annotations

import math

import torch

from attention_lab.checks import check_alibi_bias, check_alibi_slopes

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
    "alibi_power_rounded_up": lambda h: slopes_rounded_power(h),
}


def slopes_rounded_power(num_heads):
    """P as 2 ** round(log2 H): above H for H = 3, 6, 7, ...; the extra slice as written."""
    power = 2 ** round(math.log2(num_heads))
    first = naive(power)
    extra = naive(2 * power)[0::2][: num_heads - power]
    return torch.cat([first, extra])


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


def bias_keys_on_the_rows(num_heads, q_len, kv_len):
    """The grid [H, Tk, Tq]: keys on the rows, queries on the columns."""
    query = torch.arange(kv_len - q_len, kv_len).unsqueeze(0)  # [1, Tq]
    key = torch.arange(kv_len).unsqueeze(1)  # [Tk, 1]
    return slopes_loop(num_heads).view(-1, 1, 1) * (key - query).double()


WRONG_BIAS = {
    "alibi_bias_sign": lambda h, q, k: bias_right(h, q, k, sign=-1),
    # Slopes that match no classic slope mistake (those are named as such: test_checks_lab11.py).
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
    "alibi_bias_transposed": lambda h, q, k: bias_keys_on_the_rows(h, q, k),
    "alibi_bias_offsets_not_outer": lambda h, q, k: (
        slopes_loop(h)[:, None, None] * (torch.arange(k) - torch.arange(k - q, k)).double()
    ),
}


# For test_checks.py, which runs every lab's wrong implementations through its own
# message tests: (check, wrong implementation, mistake key).
WRONG = [(check_alibi_slopes, fn, key) for key, fn in sorted(WRONG_SLOPES.items())] + [
    (check_alibi_bias, fn, key) for key, fn in sorted(WRONG_BIAS.items())
]

# Right implementations that pass with the one success line (bias_bloom adds a second line,
# test_checks_lab11.py): (check, implementation).
RIGHT = [
    (check_alibi_slopes, slopes_loop),
    (check_alibi_slopes, slopes_log2),
    (check_alibi_slopes, slopes_vectorised),
    (check_alibi_bias, bias_right),
    (check_alibi_bias, bias_loops),
]
