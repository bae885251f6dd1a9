"""Lab 2's check: right implementations written in other ways pass; each mistake of its
catalogue, written the way a learner writes it, is named; an unknown one is located.

The implementations it runs are in ``support/implementations/lab02.py``.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.checks import check_multi_head_attention
from support.implementations.lab02 import attend, right_merge, right_split
from support.messages import flat


def test_one_wrong_head_is_located():
    def last_head_unscaled(query, key, value, num_heads):
        q, k, v = (right_split(x, num_heads) for x in (query, key, value))
        out, weights = attend(q, k, v)
        if num_heads > 1:
            last_out, last_w = attend(q[:, -1:], k[:, -1:], v[:, -1:], divisor=1.0)
            out = torch.cat([out[:, :-1], last_out], dim=1)
            weights = torch.cat([weights[:, :-1], last_w], dim=1)
        return right_merge(out), weights

    with pytest.raises(AssertionError) as info:
        check_multi_head_attention(last_head_unscaled)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: the weights of head 2 differ (the others are right)" in message


def test_a_wrong_merge_is_located_by_head():
    def last_two_heads_exchanged(query, key, value, num_heads):
        q, k, v = (right_split(x, num_heads) for x in (query, key, value))
        out, weights = attend(q, k, v)
        order = list(range(num_heads))
        order[-2:] = order[-2:][::-1] if num_heads > 1 else order[-2:]
        return right_merge(out[:, order]), weights

    with pytest.raises(AssertionError) as info:
        check_multi_head_attention(last_two_heads_exchanged)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "the output differs in the features of head 1 and 2" in message
