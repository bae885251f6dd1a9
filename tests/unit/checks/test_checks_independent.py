"""The labs' checks on implementations written blind.

Five sets in ``support/implementations/``, each with correct implementations written otherwise
than the pages' solutions and wrong ones with one plausible learner's mistake each, written
without reading the checks or their catalogue: ``independent_labs.py`` from the lab pages
(``independent_labs_baseline.md``), ``blind_a.py``, ``blind_b.py`` and ``blind_c.py`` (labs
01-11) and ``blind_d.py`` (labs 12 and 13) from the labs' contracts alone
(``blind_sets_measured.md``). The checks must pass every correct one, fail
every wrong one, and never answer a wrong one with no more than "none of the common mistakes": a
message names a mistake or says where the result goes wrong. Where a blind set's ``NAMED``
records the mistake its check named (read and judged right when the set was measured), the check
still names that one.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from attention_lab import checks
from attention_lab.checks._core import MISTAKES, UNKNOWN
from support.implementations import blind_a, blind_b, blind_c, blind_d, independent_labs

SETS = {
    "independent": independent_labs,
    "a": blind_a,
    "b": blind_b,
    "c": blind_c,
    "d": blind_d,
}
LABS_COVERED = {"a": range(1, 12), "b": range(1, 12), "c": range(1, 12), "d": (12, 13)}

CORRECT = [
    pytest.param(entry["check"], fn, id=f"{name}-lab{lab}-{fn.__name__}")
    for name, module in SETS.items()
    for lab, entry in module.LABS.items()
    for fn in entry["correct"]
]
WRONG = [
    pytest.param(
        entry["check"],
        fn,
        description,
        getattr(module, "NAMED", {}).get(fn.__name__),
        id=f"{name}-lab{lab}-{fn.__name__}",
    )
    for name, module in SETS.items()
    for lab, entry in module.LABS.items()
    for fn, description in entry["wrong"]
]


def _squashed(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("check", "fn"), CORRECT)
def test_a_correct_implementation_written_blind_passes(check, fn):
    with contextlib.redirect_stdout(io.StringIO()):
        getattr(checks, check)(fn)


@pytest.mark.parametrize(("check", "fn", "description", "named"), WRONG)
def test_a_wrong_implementation_written_blind_fails_with_a_named_or_located_mistake(
    check, fn, description, named
):
    with pytest.raises(AssertionError) as info, contextlib.redirect_stdout(io.StringIO()):
        getattr(checks, check)(fn)
    message = _squashed(str(info.value))
    assert _squashed(UNKNOWN) not in message, f"{description}: {message}"
    if named is not None:
        assert f"Likely mistake: {_squashed(MISTAKES[named])}" in message, (
            f"{description}: named {named} when measured, now: {message}"
        )


def test_the_blind_sets_are_not_empty():
    """Each set holds correct and wrong implementations for every lab, and its record of what
    was named holds only functions of the set (an empty parametrisation proves nothing)."""
    for name, module in SETS.items():
        labs = {lab.split("-")[0] for lab in module.LABS}
        if name in LABS_COVERED:
            assert labs == {f"{n:02d}" for n in LABS_COVERED[name]}, (name, labs)
        wrong = {fn.__name__ for entry in module.LABS.values() for fn, _ in entry["wrong"]}
        assert set(getattr(module, "NAMED", {})) <= wrong, name
        assert all(entry["correct"] and entry["wrong"] for entry in module.LABS.values()), name
