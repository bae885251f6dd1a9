"""Lab 3's check: right implementations written in other ways pass; each mistake of its
catalogue, written the way a learner writes it, is named; an unknown one is located.

The implementations it runs are in ``support/implementations/lab03.py``.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.checks import check_sinusoidal_encoding
from support.implementations.lab03 import encoding
from support.messages import flat


def test_an_unknown_frequency_is_located():
    def last_pair_too_slow(max_len, d_model):
        pe = encoding(max_len, d_model, lambda pos, two_i, d: pos / 10000 ** (two_i / d))
        if d_model >= 4:
            angle = torch.arange(max_len, dtype=torch.float64) / 1e9
            pe[:, -2 + d_model % 2] = angle.sin().float()
        return pe

    with pytest.raises(AssertionError) as info:
        check_sinusoidal_encoding(last_pair_too_slow)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: 1 of 16 columns are wrong, the first column 14" in message
