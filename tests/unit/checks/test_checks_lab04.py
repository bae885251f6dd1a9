"""Lab 4's check: right implementations written in other ways pass; each mistake of its
catalogue, written the way a learner writes it, is named; an unknown one is located.

The implementations it runs are in ``support/implementations/lab04.py``.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.checks import check_masked_attention
from support.implementations.lab04 import scores_of
from support.messages import flat


def test_a_leak_through_the_mask_is_located():
    def blocks_only_half(query, key, value, mask):
        scores = scores_of(query, key).masked_fill(~mask, -2.0)  # too mild a fill
        weights = torch.softmax(scores, dim=-1)
        return weights @ value, weights

    with pytest.raises(AssertionError) as info:
        check_masked_attention(blocks_only_half)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: blocked keys get a weight" in message
