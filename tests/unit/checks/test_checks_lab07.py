"""Lab 7's check: online softmax loops written three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.

The implementations it runs are in ``support/implementations/lab07.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

from support.implementations.lab07 import check, online_attention, with_
from support.messages import flat


def test_an_unknown_mistake_says_which_part_of_the_loop_goes_wrong():
    def off_in_the_carry(query, key, value, block_size):
        q = query / math.sqrt(query.shape[-1])
        row_max = torch.full((*q.shape[:-1], 1), -math.inf)
        row_sum = torch.zeros_like(row_max)
        acc = torch.zeros(*q.shape[:-1], value.shape[-1])
        for start in range(0, key.shape[-2], block_size):
            scores = q @ key[..., start : start + block_size, :].transpose(-2, -1)
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            rescale = torch.exp(row_max - new_max) ** 2  # squared: wrong for every later block
            p = torch.exp(scores - new_max)
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ value[..., start : start + block_size, :]
            row_max = new_max
        return acc / row_sum

    with pytest.raises(AssertionError) as info:
        check(off_in_the_carry)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "with every key in one block your output is right" in message


def test_nan_from_the_old_maximum_is_not_called_an_inverted_factor():
    with pytest.raises(AssertionError) as info:
        check(with_(online_attention, exp_with="old_max"))
    assert "inverted" not in flat(info.value)
