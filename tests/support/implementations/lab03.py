"""Lab 3's learner code, used as data: the sinusoidal encoding.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_sinusoidal_encoding in attention_lab.checks). ``CHECK`` is the check; ``RIGHT`` lists
implementations, ``WRONG`` ``(implementation, mistake key)``. test_checks_lab03.py and
test_checks.py run them through the check.
"""

from __future__ import annotations

import math

import torch

from attention_lab.checks import check_sinusoidal_encoding

CHECK = check_sinusoidal_encoding


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def with_log_space(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * -math.log(1e4) / d_model
    )
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]
    return pe.float()


def with_python_loops(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / 10000 ** (2 * (j // 2) / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def stacked_and_flattened(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    inv = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = position * inv  # [T, ceil(D / 2)]
    pairs = torch.stack([angle.sin(), angle.cos()], dim=-1)  # [T, ceil(D / 2), 2]
    return pairs.flatten(1)[:, :d_model].float()


RIGHT = [with_log_space, with_python_loops, stacked_and_flattened]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def encoding(max_len, d_model, angle_of, sin=torch.sin, cos=torch.cos):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = angle_of(position, two_i, d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = sin(angle)
    pe[:, 1::2] = cos(angle[:, : d_model // 2])
    return pe.float()


def two_i_doubled(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / 10000 ** (2 * two_i / d))


def without_parentheses(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / 10000**two_i / d)


def divisor_without_parentheses(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / (10000**two_i / d))


def base_with_a_zero_too_few(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / 1000 ** (two_i / d))


def sine_everywhere(max_len, d_model):
    right = lambda pos, two_i, d: pos / 10000 ** (two_i / d)  # noqa: E731
    return encoding(max_len, d_model, right, cos=torch.sin)


def angles_in_float32(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1)  # int64, divided below into float32
    two_i = torch.arange(0, d_model, 2)
    angle = position / 10000 ** (two_i / d_model)  # float32 angles
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


def integer_division_in_the_exponent(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / 10000 ** (two_i // d))


def exponent_over_half_the_width(max_len, d_model):
    return encoding(max_len, d_model, lambda pos, two_i, d: pos / 10000 ** ((two_i / 2) / (d // 2)))


WRONG = [
    (angles_in_float32, "angles_in_float32"),
    (integer_division_in_the_exponent, "exponent_always_zero"),
    (exponent_over_half_the_width, "odd_width_exponent"),
    (two_i_doubled, "frequency_2i_doubled"),
    (without_parentheses, "exponent_parentheses"),
    (divisor_without_parentheses, "exponent_parentheses"),
    (base_with_a_zero_too_few, "wrong_base"),
    (sine_everywhere, "one_function_for_all_columns"),
]
