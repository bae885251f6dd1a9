"""Lab 1's check: right implementations written in other ways pass; each mistake of its
catalogue, written the way a learner writes it, is named; an unknown one is located.

The implementations it runs are in ``support/implementations/lab01.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab.checks import check_scaled_dot_product_attention
from support.implementations.lab01 import divided_by_d_v_squared
from support.messages import flat


def test_an_unknown_temperature_is_located_not_named():
    with pytest.raises(AssertionError) as info:
        check_scaled_dot_product_attention(divided_by_d_v_squared)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: each row sums to 1 and ranks the keys" in message
    assert "scores multiplied by 0.0556" in message  # sqrt(4) / 36


def test_a_wrong_output_alone_is_located():
    def adds_the_query(query, key, value):
        weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1)
        return weights @ value + query.sum(-1, keepdim=True), weights

    with pytest.raises(AssertionError) as info:
        check_scaled_dot_product_attention(adds_the_query)
    assert "the weights are right, the output is not weights @ value" in flat(info.value)
