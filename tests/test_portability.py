"""The portability run: the book's claims hold on other machines, not just the build's.

A trained model's numbers, and so the page asserts that check them, depend on the CPU's vector
width, the BLAS kernel and the thread count. The learners' notebooks already run under the first
numeric configuration of ``numeric_configurations`` (conftest.py); here every page, as the book
executes it (labs with their solutions), runs under the second (``support.runs`` executes and
stores each run; ``make runs`` fills the store two at a time before the tests read it). Any cell
error outside a cell tagged ``raises-exception`` fails, which includes every page's own asserts.
Figures are not compared across configurations. The glued values that differ from the build's are
printed after the run (``support.runs.summary``).
"""

from __future__ import annotations

import pytest

from support import numerics, runs

pytestmark = pytest.mark.slow

SOURCES = runs.sources()


def test_each_configuration_changes_this_machine_s_numerics(numeric_configurations):
    digests = runs.configurations()["digests"]
    used = ["default", *numeric_configurations]
    assert len({digests[name] for name in used}) == len(used), digests


@pytest.mark.parametrize(
    "source", SOURCES, ids=[f"{s.parent.name}/{s.stem}" for s in SOURCES]
)  # fmt: skip
def test_the_page_runs_under_another_numeric_configuration(source, numeric_configurations):
    run = runs.Run(runs.page_of(source), "book", numeric_configurations[1])
    failures = numerics.errors(runs.get(run))
    settings = numerics.CONFIGURATIONS[run.config]
    assert not failures, (
        f"{source.name} under {run.config} {settings}:\n"
        + "\n".join(failures)
        + f"\nrerun: {run.command}"
    )
