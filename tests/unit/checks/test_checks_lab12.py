"""Lab 12's check (a step of causal linear attention): right steps written three ways pass, every
mistake in the catalogue, written the way a learner writes it, fails with its name, and a step
wrong in some other way is located, not misnamed.

The implementations it runs are in ``support/implementations/lab12.py``.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.checks import MISTAKES, check_linear_attention_step
from attention_lab.checks.linear_step import MISTAKES as LINEAR_MISTAKES
from support.implementations.lab12 import RIGHT, WRONG, phi, step, step_with_einsum
from support.messages import flat


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_right_steps_pass(fn, capsys):
    check_linear_attention_step(fn)
    assert capsys.readouterr().out.startswith(f"✓ {fn.__name__} matches the library on all 6")


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [(fn, key) for _, fn, key in WRONG],
    ids=[f"{fn.__name__}-{key}" for _, fn, key in WRONG],
)
def test_wrong_steps_are_named(fn, mistake):
    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(fn)
    assert f"Likely mistake: {MISTAKES[mistake]}" in flat(error.value)


def test_every_mistake_is_tested_and_messages_are_short():
    assert set(LINEAR_MISTAKES) | {"wrong_dtype"} == {key for _, _, key in WRONG}
    for _, fn, _ in WRONG:
        with pytest.raises(AssertionError) as error:
            check_linear_attention_step(fn)
        lines = str(error.value).splitlines()
        assert len(lines) <= 8 and max(map(len, lines)) <= 76


def test_a_transposed_state_is_caught_by_its_shape_and_by_its_values():
    """Where Dk != Dv a state written v phi(k)^T cannot be added to the state received (a crash)
    or has the shape [B, H, Dv, Dk]; where Dk = Dv only its values show it."""
    transposed = MISTAKES["linear_state_transposed"]

    def returned_transposed(query, key, value, state, key_sum):
        output, state, key_sum = step_with_einsum(query, key, value, state, key_sum)
        return output, state.transpose(-2, -1), key_sum

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(returned_transposed)
    message = flat(error.value)
    assert "on case 'B=2, H=2, Dk=4, Dv=3" in message
    assert "the state has shape [2, 2, 3, 4], expected [2, 2, 4, 3]" in message
    assert transposed in message

    def transposed_only_when_square(query, key, value, state, key_sum):
        if query.shape[-1] == value.shape[-1]:
            return step(query, key, value, state, key_sum, write="v k")
        return step_with_einsum(query, key, value, state, key_sum)

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(transposed_only_when_square)
    message = flat(error.value)
    assert "on case 'Dk = Dv = 4" in message and "differs" in message
    assert transposed in message


def test_a_step_wrong_in_another_way_is_located_not_named():
    def key_sum_counted_twice(query, key, value, state, key_sum):
        output, state, new_sum = step_with_einsum(query, key, value, state, key_sum)
        return output, state, new_sum + phi(key)

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(key_sum_counted_twice)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "the key sum differs: largest difference" in message
    assert "Where it goes wrong: the key sum differs: the key sum is z + phi(k)" in message

    def output_off_a_little(query, key, value, state, key_sum):
        output, state, key_sum = step_with_einsum(query, key, value, state, key_sum)
        return output + 0.01, state, key_sum

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(output_off_a_little)
    message = flat(error.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: the state and the key sum are right, the output is not" in message


def test_a_wrongly_shaped_output_says_which_axis():
    def output_kept_its_axis(query, key, value, state, key_sum):
        output, state, key_sum = step_with_einsum(query, key, value, state, key_sum)
        return output.unsqueeze(-2), state, key_sum

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(output_kept_its_axis)
    message = flat(error.value)
    assert "the output has shape [2, 2, 1, 3], expected [2, 2, 3]" in message
    assert "Where it goes wrong: more axes than expected (4 instead of 3)" in message


def test_a_crash_names_the_learners_line_and_sizes():
    def crashes(query, key, value, state, key_sum):
        phi_k = phi(key)
        return state + phi_k * value  # [B, H, Dk] * [B, H, Dv]: no outer product

    with pytest.raises(AssertionError) as error:
        check_linear_attention_step(crashes)
    message = flat(error.value)
    assert "raised RuntimeError on case 'B=2, H=2, Dk=4, Dv=3" in message
    assert 'your line "return state + phi_k * value' in message
    assert "or key.shape[2]" in message and "3 is value.shape[2]" in message


def test_the_sequence_feeds_each_step_the_state_the_step_before_returned(capsys):
    calls = []

    def spy(query, key, value, state, key_sum):
        result = step_with_einsum(query, key, value, state, key_sum)
        calls.append((state.clone(), result[1].clone()))
        return result

    check_linear_attention_step(spy)
    assert "on all 6 cases" in capsys.readouterr().out
    sequence = calls[5:]  # after the five single steps
    assert len(sequence) == 7
    assert not sequence[0][0].any()  # from zeros
    for (_, returned), (received, _) in zip(sequence[:-1], sequence[1:], strict=True):
        torch.testing.assert_close(received, returned)
