"""The portability run: the book's claims hold on other machines, not just the build's.

A trained model's numbers, and so the page asserts that check them, depend on the CPU's vector
width, the BLAS kernel and the thread count. So every page runs under at least two numeric
configurations besides the build's (``support.runs.matrix``): a page that trains a model under
three, through its seed sweep (tests/runs/test_seed_sweep.py); any other page as its learner
notebook under the first (tests/runs/test_notebooks.py) and as the book executes it (labs with
their solutions) under the second. Any cell error outside a cell tagged ``raises-exception``
fails, which includes every page's own asserts. Figures are not compared across configurations.
The glued values that differ from the build's are printed after the run
(``support.runs.summary``). ``make runs`` executes and stores every run, two at a time, before the
tests read them.
"""

from __future__ import annotations

import pytest

from support import numerics, runs

pytestmark = pytest.mark.slow

SOURCES = runs.sources()


def test_each_configuration_changes_this_machine_s_numerics(numeric_configurations):
    digests = runs.configurations()["digests"]
    used = ["default", *numeric_configurations]
    assert len(numeric_configurations) >= 2, digests
    assert len({digests[name] for name in used}) == len(used), digests


@pytest.mark.parametrize(
    "source", SOURCES, ids=[f"{s.parent.name}/{s.stem}" for s in SOURCES]
)  # fmt: skip
def test_the_page_runs_under_two_other_numeric_configurations(source, numeric_configurations):
    foreign = [
        r for r in runs.of_page(runs.page_of(source), numeric_configurations)
        if r.config != "default"
    ]  # fmt: skip
    assert len({r.config for r in foreign}) >= 2, foreign
    problems = []
    for run in foreign:
        failures = numerics.errors(runs.get(run))
        if failures:
            settings = numerics.CONFIGURATIONS[run.config]
            problems.append(
                f"{run.label} {settings}:\n" + "\n".join(failures) + f"\nrerun: {run.command}"
            )
    assert not problems, "\n".join(problems)
