"""The labs' checks on implementations written blind, from the lab pages alone.

``support/implementations/independent_labs.py`` holds, per lab, correct implementations written
differently from the pages' solutions and wrong ones with a plausible learner's mistake each,
written without reading the checks or their catalogue (``independent_labs_baseline.md`` beside it
records the first measurement). The checks must pass every correct one, fail every wrong one, and
never answer a wrong one with no more than "none of the common mistakes": a message names a
mistake or says where the result goes wrong.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from attention_lab import checks
from attention_lab.checks._core import UNKNOWN
from support.implementations import independent_labs

CORRECT = [
    (lab, entry["check"], fn)
    for lab, entry in independent_labs.LABS.items()
    for fn in entry["correct"]
]
WRONG = [
    (lab, entry["check"], fn, description)
    for lab, entry in independent_labs.LABS.items()
    for fn, description in entry["wrong"]
]


@pytest.mark.parametrize(
    ("lab", "check", "fn"), CORRECT, ids=[f"lab{lab}-{fn.__name__}" for lab, _, fn in CORRECT]
)
def test_a_correct_implementation_written_blind_passes(lab, check, fn):
    with contextlib.redirect_stdout(io.StringIO()):
        getattr(checks, check)(fn)


@pytest.mark.parametrize(
    ("lab", "check", "fn", "description"),
    WRONG,
    ids=[f"lab{lab}-{fn.__name__}" for lab, _, fn, _ in WRONG],
)
def test_a_wrong_implementation_written_blind_fails_with_a_named_or_located_mistake(
    lab, check, fn, description
):
    with pytest.raises(AssertionError) as info, contextlib.redirect_stdout(io.StringIO()):
        getattr(checks, check)(fn)
    message = " ".join(str(info.value).split())
    assert " ".join(UNKNOWN.split()) not in message, f"{description}: {message}"
