"""The seed sweep: each trained chapter's claims hold for other seeds, not just the book's.

Every page that trains a model sets its seed once (``SEED = 0``) and derives every random choice
from it. Here each such page runs again with another seed under each foreign numeric
configuration (``support.runs.sweep``: seeds 1 and 2, and 3 where this machine has a third
configuration; the first as the learner's notebook, the others as the book page), as written;
every cell must pass, so each page assert is a bound checked against
three or four training runs on three or four kinds of machine. ``make sweep`` runs the full sweep
(seeds 1 to 4 under the foreign configurations and the build's: five training runs), which an
author runs after changing a trained page or the library it trains with. The spread over seeds
is wider than the spread over numeric configurations, so it stands in for machines the tests
cannot run (Apple Silicon has no MKL). Each glued number's range is printed after the run
(``support.runs.summary``). The two cheapest such pages (``support.runs.REPRODUCED``) run
again in the build's configuration with the book's seed, as the learner's notebook, and must draw
the book's figures byte for byte.
"""

from __future__ import annotations

import nbformat
import pytest

from support import numerics, runs
from support.paths import ROOT

pytestmark = pytest.mark.slow

SWEPT = runs.swept()
# The chapters that train a model; each must be swept.
TRAINED = {
    "08_watching_attention_learn",
    "12_decoder_that_writes",
    "13_induction_heads",
    "14_cross_attention_alignment",
    "16_sharing_keys_and_values",
    "17_masks_as_functions",
    "18_positions_past_training_length",
    "19_stretching_rope",
    "20_attention_that_stays_stable",
    "22_what_a_fixed_state_forgets",
    "23_sparse_attention",
}


def test_every_trained_chapter_sets_its_seed_once():
    assert TRAINED <= {s.stem for s in SWEPT}, TRAINED - {s.stem for s in SWEPT}
    for source in SWEPT:
        assert len(numerics.SEED_LINE.findall(source.read_text(encoding="utf-8"))) == 1


@pytest.mark.parametrize("source", SWEPT, ids=[s.stem for s in SWEPT])
def test_the_page_s_claims_hold_for_other_seeds(source, numeric_configurations):
    swept = [r for r in runs.of_page(runs.page_of(source), numeric_configurations)
             if r.purpose == "sweep"]  # fmt: skip
    assert len({r.seed for r in swept}) >= 2 and len({r.config for r in swept}) >= 2, swept
    problems = []
    for run in swept:
        failures = numerics.errors(runs.get(run))
        if failures:
            problems.append(f"{run.label}:\n" + "\n".join(failures) + f"\nrerun: {run.command}")
    assert not problems, "\n".join(problems)


def test_the_reproduced_pages_are_trained_pages():
    assert set(runs.REPRODUCED) <= {runs.page_of(s) for s in SWEPT}, runs.REPRODUCED


REPRODUCED = [s for s in SWEPT if runs.page_of(s) in runs.REPRODUCED]


@pytest.mark.parametrize("source", REPRODUCED, ids=[s.stem for s in REPRODUCED])
def test_the_book_s_seed_draws_the_book_s_figures(source, html_dir, numeric_configurations):
    """Seeds are fixed: rerun in the build's configuration, as the learner's notebook, a trained
    page draws the figures of the book's build byte for byte."""
    book_run = numerics.BUILD_EXECUTED / source.relative_to(ROOT / "notebooks_src")
    book_run = book_run.with_suffix(".ipynb")
    if not book_run.is_file():
        pytest.fail(f"{book_run.relative_to(ROOT)} is missing: `make book` writes it")
    run = runs.reproduced(runs.page_of(source), numeric_configurations)
    assert run.config == "default" and run.seed is None, run
    nb = runs.get(run)
    assert not numerics.errors(nb)
    fresh, built = numerics.pngs(nb), numerics.pngs(nbformat.read(book_run, as_version=4))
    assert fresh and len(fresh) == len(built)
    differ = [k + 1 for k, (a, b) in enumerate(zip(fresh, built, strict=True)) if a != b]
    assert not differ, f"figures {differ} of {len(fresh)} differ from the book's build"
