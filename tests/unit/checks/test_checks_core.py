"""attention_lab.checks._core: the mistakes' registry and the one comparison every check uses.

The checks themselves (each mistake proved by a wrong implementation) are in test_checks.py.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab import checks
from attention_lab.checks import (
    _core,
    alibi,
    delta_step,
    encoder,
    grouped_query,
    kv_cache,
    linear_step,
    masks,
    multi_head,
    online_softmax,
    positional,
    sdpa,
    search,
    window_masks,
)

LABS = [
    sdpa,
    multi_head,
    positional,
    masks,
    encoder,
    search,
    online_softmax,
    kv_cache,
    grouped_query,
    window_masks,
    alibi,
    linear_step,
    delta_step,
]
CASE = _core.Case("a case", ())


def test_the_labs_tables_and_the_shared_mistakes_make_up_mistakes_once_each():
    tables = [{"not_a_pair", "wrong_dtype"}, *(set(lab.MISTAKES) for lab in LABS)]
    assert sum(len(table) for table in tables) == len(checks.MISTAKES)
    assert set().union(*tables) == set(checks.MISTAKES)
    for lab in LABS:
        assert lab.MISTAKES.items() <= checks.MISTAKES.items()


def test_a_mistake_registered_again_must_keep_its_explanation():
    before = dict(checks.MISTAKES)
    assert _core.register_mistakes({"no_scaling": sdpa.MISTAKES["no_scaling"]})
    with pytest.raises(ValueError, match="'no_scaling' is registered twice"):
        _core.register_mistakes({"a_new_key": "new", "no_scaling": "another explanation"})
    assert checks.MISTAKES == before  # nothing of the refused table was added


def test_compare_passes_matching_results_quietly():
    x = torch.arange(6.0).view(2, 3)
    _core.compare("fn", CASE, [_core.Result("output", x.clone(), x)], (1e-5, 1e-4))


def test_compare_goes_shape_then_dtype_then_nan_then_values():
    x = torch.ones(2, 3)
    steps = [
        (torch.ones(3, 2), "the output has shape [3, 2], expected [2, 3]"),
        (torch.ones(2, 3, dtype=torch.float64), "the output is torch.float64, expected"),
        (torch.full((2, 3), float("nan")), "the output contains NaN or inf"),
        (torch.zeros(2, 3), "the output differs: largest difference 1 at index [0, 0]"),
    ]
    for got, problem in steps:
        with pytest.raises(AssertionError) as info:
            _core.compare("fn", CASE, [_core.Result("output", got, x)], (1e-5, 1e-4))
        assert problem in " ".join(str(info.value).split())


def test_compare_reports_the_named_result_first_and_names_the_matching_variant():
    output, weights = torch.ones(2), torch.ones(3)
    wrong = (torch.zeros(2), torch.zeros(3))
    with pytest.raises(AssertionError) as info:
        _core.compare(
            "fn",
            CASE,
            [_core.Result("output", wrong[0], output), _core.Result("weights", wrong[1], weights)],
            (1e-5, 1e-4),
            variants={
                "softmax_axis": lambda: (torch.ones(2), wrong[1]),
                "no_scaling": lambda: wrong,
            },
            report_first=("weights",),
        )
    message = " ".join(str(info.value).split())
    assert "the weights differ" in message
    assert f"Likely mistake: {checks.MISTAKES['no_scaling']}." in message


def test_compare_shows_exact_results_whole():
    expected = torch.tensor([[0, 1]])
    with pytest.raises(AssertionError) as info:
        _core.compare(
            "fn",
            CASE,
            [_core.Result("top indices", torch.tensor([[1, 0]]), expected, exact=True)],
            (1e-5, 1e-4),
        )
    assert "the top indices are [[1, 0]], expected [[0, 1]]" in " ".join(str(info.value).split())


def test_a_crash_in_the_learners_code_is_read_in_the_learners_terms():
    def mixes_widths(query, key, value, block_size):
        weights = torch.softmax(query @ key.mT, dim=-1)
        return weights * value  # [1, 2, 5] * [1, 5, 3]: no broadcast

    case = _core.Case("a case", (torch.ones(1, 2, 4), torch.ones(1, 5, 4), torch.ones(1, 5, 3), 2))
    with pytest.raises(AssertionError) as info:
        _core.run(mixes_widths, case)
    message = " ".join(str(info.value).split())
    assert "raised RuntimeError on case 'a case'" in message
    assert 'Where it goes wrong: your line "return weights * value' in message
    assert "(in mixes_widths)" in message
    assert "`" not in message  # the book's traceback lexer fails on backticks
    assert "sizes along one axis are 5 and 3, and only equal sizes or 1 broadcast" in message
    assert "5 is key.shape[1] or value.shape[1], 3 is value.shape[2]" in message
    arguments = "query [1, 2, 4], key [1, 5, 4], value [1, 5, 3], block_size = 2"
    assert f"your arguments: {arguments}" in message


def test_a_crash_in_the_library_called_by_the_learner_points_at_the_learners_call():
    def bad_call(x):
        return torch.nn.functional.linear(x, torch.ones(3, 5))

    case = _core.Case("a case", (torch.ones(2, 4),))
    with pytest.raises(AssertionError) as info:
        _core.run(bad_call, case)
    message = " ".join(str(info.value).split())
    assert 'your line "return torch.nn.functional.linear(x, torch.ones(3, 5))"' in message
    assert "inner sizes differ: 4 columns against 5 rows" in message
    assert "4 is x.shape[1]" in message


def test_the_stub_is_told_to_be_replaced():
    def my_mask(size, window):
        raise NotImplementedError("write my_mask here")

    with pytest.raises(AssertionError) as info:
        _core.run(my_mask, _core.Case("a window of 2", (4, 2)))
    assert "still the stub" in " ".join(str(info.value).split())


def test_a_notimplementederror_from_pytorch_is_a_crash_not_the_stub():
    """`&` on float tensors raises NotImplementedError inside PyTorch: the learner wrote code,
    so the message must not tell them to replace the stub."""

    def my_mask(size, window):
        ones = torch.ones(size, size)  # float, where a bool tensor was meant
        return ones.tril() & ones.triu(-(window - 1))

    with pytest.raises(AssertionError) as info:
        _core.run(my_mask, _core.Case("a window of 2", (4, 2)))
    message = " ".join(str(info.value).split())
    assert "still the stub" not in message
    assert "raised NotImplementedError on case 'a window of 2'" in message
    assert "Where it goes wrong" in message and "ones.tril() & ones.triu" in message
