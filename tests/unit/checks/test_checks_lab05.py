"""Lab 5's check: encoder layers wired three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.

The implementations it runs are in ``support/implementations/lab05.py``.
"""

from __future__ import annotations

import pytest
import torch

from support.implementations.lab05 import calls_the_layer, check, encoder_layer
from support.messages import flat


def test_calling_the_whole_layer_is_refused_with_advice():
    with pytest.raises(AssertionError) as info:
        check(calls_the_layer)
    assert "build the layer from its parts" in flat(info.value)


def test_an_unknown_mistake_says_which_part_goes_wrong():
    def doubles_the_attention(x, layer, mask=None):
        a, w = layer.self_attn(x, mask=mask) if not layer.norm_first else (None, None)
        x = layer.norm1(x + 2 * layer.dropout1(a))
        return layer.norm2(x + layer.dropout2(layer.feed_forward(x))), w

    with pytest.raises(AssertionError) as info:
        check(doubles_the_attention)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: layer.norm1 receives another input" in message


def test_the_check_leaves_the_global_random_state_alone():
    torch.manual_seed(5)
    before = torch.get_rng_state()
    check(encoder_layer)
    assert torch.equal(torch.get_rng_state(), before)


def test_a_part_called_too_often_is_located():
    def normalises_twice(x, layer, mask=None):
        out, w = encoder_layer(x, layer, mask)
        return layer.norm2(layer.norm2(out)) if layer.norm_first else out, w

    with pytest.raises(AssertionError) as info:
        check(normalises_twice)
    assert "layer.norm2 is called 3 times (once in the library's layer)" in flat(info.value)
