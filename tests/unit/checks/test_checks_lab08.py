"""Lab 8's check: decoding steps written three right ways pass; every mistake is named.

The wrong steps are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the step does.

The implementations it runs are in ``support/implementations/lab08.py``.
"""

from __future__ import annotations

import pytest

from attention_lab.checks import MISTAKES
from support.implementations.lab08 import check, named, step
from support.messages import flat


def test_an_unknown_mistake_says_where_the_decoding_goes_wrong():
    def step_forgetting_the_bias_of_v(attention, token, cache):
        out, (keys, values) = step(attention, token, cache)
        return out, (keys, values - attention.v_proj.bias.view(1, -1, 1, attention.head_dim))

    with pytest.raises(AssertionError) as info:
        check(step_forgetting_the_bias_of_v)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong:" in message
    assert "the cached keys are right" in message
    assert "the cached values differ at positions 0, 1, 2, 3, 4 and 5" in message


def test_k_proj_called_twice_per_step_is_not_called_projecting_again():
    """A value made with k_proj calls k_proj twice at every step, not more at each: its values
    name it, and the message does not say that earlier tokens were projected again."""
    with pytest.raises(AssertionError) as info:
        check(named(layers=("q_proj", "k_proj", "k_proj")))
    assert MISTAKES["prefix_recomputed"] not in flat(info.value)


def test_the_step_cannot_see_the_future():
    """The check feeds one token per call: a step never receives a later token."""
    seen = []

    def spy(attention, token, cache):
        seen.append((token.shape[1], cache[0].shape[2]))
        return step(attention, token, cache)

    check(spy)
    assert all(width == 1 for width, _ in seen)
    assert [cached for _, cached in seen[:6]] == [0, 1, 2, 3, 4, 5]
