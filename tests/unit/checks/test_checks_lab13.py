"""Lab 13's check (a step of the gated delta rule): right steps written three ways pass, every
mistake in the catalogue, written the way a learner writes it, fails with its name, and a step
wrong in some other way is located, not misnamed.

The implementations it runs are in ``support/implementations/lab13.py``.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.checks import MISTAKES, check_gated_delta_step
from attention_lab.checks.delta_step import MISTAKES as DELTA_MISTAKES
from support.implementations.lab13 import RIGHT, WRONG, step, step_with_einsum
from support.messages import flat


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_right_steps_pass(fn, capsys):
    check_gated_delta_step(fn)
    assert capsys.readouterr().out.startswith(f"✓ {fn.__name__} matches the library on all 6")


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [(fn, key) for _, fn, key in WRONG],
    ids=[f"{fn.__name__}-{key}" for _, fn, key in WRONG],
)
def test_wrong_steps_are_named(fn, mistake):
    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(fn)
    assert f"Likely mistake: {MISTAKES[mistake]}" in flat(error.value)


def test_every_mistake_is_tested_and_messages_are_short():
    assert set(DELTA_MISTAKES) | {"wrong_dtype"} == {key for _, _, key in WRONG}
    for _, fn, _ in WRONG:
        with pytest.raises(AssertionError) as error:
            check_gated_delta_step(fn)
        lines = str(error.value).splitlines()
        assert len(lines) <= 8 and max(map(len, lines)) <= 76


def test_a_state_used_the_wrong_way_round_is_caught_by_its_shape_and_by_its_values():
    """Where Dk != Dv a prediction S' k crashes and a returned [B, H, Dv, Dk] state has the
    wrong shape; where Dk = Dv only the values show it."""
    axes = MISTAKES["delta_state_axes"]

    def returned_transposed(query, key, value, beta, decay, state):
        output, state = step_with_einsum(query, key, value, beta, decay, state)
        return output, state.transpose(-2, -1)

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(returned_transposed)
    message = flat(error.value)
    assert "the state has shape [2, 2, 3, 4], expected [2, 2, 4, 3]" in message
    assert axes in message

    def predicted_the_wrong_way_when_square(query, key, value, beta, decay, state):
        if query.shape[-1] == value.shape[-1]:
            return step(query, key, value, beta, decay, state, orientation="prediction")
        return step_with_einsum(query, key, value, beta, decay, state)

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(predicted_the_wrong_way_when_square)
    message = flat(error.value)
    assert "on case 'Dk = Dv = 4" in message and "differs" in message
    assert axes in message


def test_a_step_wrong_in_another_way_is_located_not_named():
    def beta_squared(query, key, value, beta, decay, state):
        return step_with_einsum(query, key, value, beta * beta, decay, state)

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(beta_squared)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: with beta = 0 (the step only forgets) your state is right" in (
        message
    )

    def forgets_twice_as_fast(query, key, value, beta, decay, state):
        return step_with_einsum(query, key, value, beta, 2 * decay, state)

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(forgets_twice_as_fast)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "your state differs there too: look at the decay first" in message

    def writes_a_little_always(query, key, value, beta, decay, state):
        output, new = step_with_einsum(query, key, value, beta, decay, state)
        new = new + 0.05 * key[..., :, None] * value[..., None, :]  # even when beta = 0
        return (new * query[..., :, None]).sum(-2) / query.shape[-1] ** 0.5, new

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(writes_a_little_always)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "so the forgetting is, but your step writes when beta = 0" in message

    def output_off_a_little(query, key, value, beta, decay, state):
        output, state = step_with_einsum(query, key, value, beta, decay, state)
        return output + 0.01, state

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(output_off_a_little)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: the state is right, the output is not" in message


def test_a_wrongly_shaped_output_says_which_axis():
    def output_kept_its_axis(query, key, value, beta, decay, state):
        output, state = step_with_einsum(query, key, value, beta, decay, state)
        return output.unsqueeze(-2), state

    with pytest.raises(AssertionError) as error:
        check_gated_delta_step(output_kept_its_axis)
    message = flat(error.value)
    assert "the output has shape [2, 2, 1, 3], expected [2, 2, 3]" in message
    assert "Where it goes wrong: more axes than expected (4 instead of 3)" in message


def test_the_sequence_feeds_each_step_the_state_the_step_before_returned(capsys):
    calls = []

    def spy(query, key, value, beta, decay, state):
        result = step_with_einsum(query, key, value, beta, decay, state)
        calls.append((state.clone(), result[1].clone(), key.norm(dim=-1)))
        return result

    check_gated_delta_step(spy)
    assert "on all 6 cases" in capsys.readouterr().out
    sequence = calls[5:]  # after the five single steps
    assert len(sequence) == 7
    assert not sequence[0][0].any()  # from a zero state
    for (_, returned, _), (received, _, _) in zip(sequence[:-1], sequence[1:], strict=True):
        torch.testing.assert_close(received, returned)
    norms = torch.cat([norm.flatten() for _, _, norm in calls])
    torch.testing.assert_close(norms, torch.ones_like(norms))  # every key of unit length
