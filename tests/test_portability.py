"""The portability run: the book's claims hold on other machines, not just the build's.

A trained model's numbers, and so the page asserts that check them, depend on the CPU's vector
width, the BLAS kernel and the thread count. The learners' notebooks already run under the first
numeric configuration of ``numeric_configurations`` (conftest.py); here every page, as the book
executes it (labs with their solutions), runs under the second. Any cell error outside a cell
tagged ``raises-exception`` fails, which includes every page's own asserts. Figures are not
compared across configurations. The glued values that differ from the build's are printed after
the run (``support.numerics.summary``).
"""

from __future__ import annotations

import pytest

from conftest import ROOT
from support import numerics

pytestmark = pytest.mark.slow

SOURCES = sorted((ROOT / "notebooks_src").rglob("*.md"))


def test_each_configuration_changes_this_machine_s_numerics(numeric_configurations):
    digests = numerics.REPORT["configurations"]["digests"]
    runs = ["default", *numeric_configurations]
    assert len({digests[run] for run in runs}) == len(runs), digests


@pytest.mark.parametrize(
    "source", SOURCES, ids=[f"{s.parent.name}/{s.stem}" for s in SOURCES]
)  # fmt: skip
def test_the_page_runs_under_another_numeric_configuration(source, numeric_configurations):
    config = numeric_configurations[1]
    nb = numerics.execute(numerics.page_notebook(source), source.parent, config)
    numerics.record("glue", f"{source.parent.name}/{source.stem}", config, numerics.glued(nb))
    failures = numerics.errors(nb)
    settings = numerics.CONFIGURATIONS[config]
    assert not failures, f"{source.name} under {config} {settings}:\n" + "\n".join(failures)
