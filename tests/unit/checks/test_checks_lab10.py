"""Lab 10's checks: right sliding-window and document masks written in other ways pass; each
mistake of their catalogue, written the way a learner writes it, is named; an unknown one is
located.

The implementations it runs are in ``support/implementations/lab10.py``.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from attention_lab.checks import MISTAKES, check_document_mask, check_sliding_window_mask
from support.implementations.lab10 import (
    RIGHT,
    WRONG,
    documents_by_comparing_ids,
    window_by_comparisons,
)
from support.messages import flat


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=[fn.__name__ for _, fn in RIGHT])
def test_right_implementations_pass(check, fn, capsys):
    check(fn)
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize(("check", "fn", "mistake"), WRONG, ids=[fn.__name__ for _, fn, _ in WRONG])
def test_a_mistake_is_named(check, fn, mistake):
    with pytest.raises(AssertionError) as info:
        check(fn)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    lines = str(info.value).splitlines()
    assert len(lines) <= 8 and all(len(line) <= 76 for line in lines)


def test_a_stray_key_is_located():
    def one_key_too_many(size, window):
        mask = window_by_comparisons(size, window)
        mask[-1, 0] = size > window  # the last query sees the first key
        return mask

    with pytest.raises(AssertionError) as info:
        check_sliding_window_mask(one_key_too_many)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "query 6 may attend to key 0, which must be blocked" in message
    assert "1 key seen that must be blocked (before the window), the first at query 6" in message


def test_a_leak_into_another_document_is_located():
    def sees_the_previous_token(document_ids):
        mask = documents_by_comparing_ids(document_ids)
        return mask | torch.ones_like(mask).tril(-1).triu(-1)  # and the token before

    with pytest.raises(AssertionError) as info:
        check_document_mask(sees_the_previous_token)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "keys seen that must be blocked (in another document), the first at query 3" in message


def test_ids_of_another_integer_dtype_are_tried():
    """One-hot encoding the ids works for int64 ids only (F.one_hot refuses int32): the
    contract allows any integer dtype, so the check must try one."""

    def one_hot_documents(ids):
        same = F.one_hot(ids) @ F.one_hot(ids).T  # [T, T]: 1 where two ids are equal
        return (same > 0) & torch.ones(len(ids), len(ids), dtype=torch.bool).tril()

    with pytest.raises(AssertionError) as info:
        check_document_mask(one_hot_documents)
    assert "int32 ids" in " ".join(str(info.value).split())
