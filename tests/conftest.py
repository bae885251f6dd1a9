"""Shared fixtures: where the built book is, and how to treat a missing prerequisite.

Tests of the built HTML and the browser tests need `make book` to have run (``make test`` runs it
first). Outside CI a missing prerequisite skips those tests with a message saying what to do; with
``CI=true`` it fails them, so CI can never pass by skipping.

Markers (pyproject.toml) say what a test needs: ``book`` the built book in ``_build/``, ``browser``
headless Chromium, ``slow`` several minutes of pages run again. ``book`` and ``browser`` come from
the test's folder (``FOLDER_MARKERS``: site/ and runs/ ``book``, browser/ both; unit/ and pages/
none); ``slow`` is set by its three modules (runs/: portability, seed sweep, learner
environment). A test that asks for the built book (``html_dir``) or for Chromium (``browser``)
gets the marker here wherever it lives, so ``make test-fast`` (``-m "not book and not browser and
not slow"``) never needs a build.

Hypothesis's budget is set once, here: the profile ``suite`` (``HYPOTHESIS_PROFILE=thorough`` runs
ten times as many examples). A test states ``max_examples`` itself only where its examples cost
far more or far less than most.

The plumbing these fixtures hand out lives in ``tests/support/`` (importable as ``support``):
``server`` (the built book over HTTP), ``browser`` (Chromium, the watched tab :class:`Tab` every
browser test opens pages with, the phone's width, screenshots), ``accessibility`` (axe-core),
``page_weights`` (what a page downloads; also ``make bench-weights``), ``figure_recorder`` (the
cell that records the text of every figure a notebook draws), ``numerics`` (seeds and numeric
configurations) and ``tensors`` (the library tests' inputs and tolerances); ``paths`` (``ROOT``,
``HTML``) and ``prerequisites`` (``missing``) are what test modules would otherwise have imported
from here: no test module imports conftest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from support import accessibility, runs, stages
from support import browser as browser_support
from support import server as server_support
from support.paths import HTML, ROOT
from support.prerequisites import missing

# No deadline: the first example of a test pays for torch's lazy initialisation, and on a loaded
# machine any example may wait for a core.
settings.register_profile("suite", max_examples=25, deadline=None)
settings.register_profile("thorough", max_examples=250, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


@pytest.fixture(scope="session")
def html_dir() -> Path:
    if not (HTML / "index.html").is_file():
        missing("the book is not built: run `make book` first")
    return HTML


# A fixture a test asks for (directly or through another fixture) -> the marker it implies.
IMPLIED_MARKERS = {"html_dir": "book", "browser": "browser"}

# The folder under tests/ a test lives in -> the markers it implies: the built site and the page
# runs need `make book` (and `make runs`), the browser tests Chromium over the built book. unit/
# and pages/ imply none (a test there that asks for ``html_dir`` still gets ``book``).
TESTS = Path(__file__).resolve().parent
FOLDER_MARKERS = {"site": ("book",), "runs": ("book",), "browser": ("book", "browser")}


def folder(item) -> str | None:
    """The folder under tests/ a test's file is in (``unit``, ``site``, ...), or None."""
    path = Path(item.path).resolve()
    if not path.is_relative_to(TESTS):
        return None
    parts = path.relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 else None


# The test modules whose groups take longest (the browser stage's visits of every page in each
# theme, a group per page, minutes in all); the rest keep their order, but for the groups in
# LAST: the book-wide checks that read every page's stored visit (test_browser_pages.py).
LONGEST_FIRST = ("test_browser_pages.py", "test_browser_instruments.py")
LAST = ("browser-pages-book-wide",)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items):
    for item in items:
        for marker in FOLDER_MARKERS.get(folder(item), ()):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        for fixture, marker in IMPLIED_MARKERS.items():
            if fixture in item.fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        # pytest-xdist (`make test`: --dist loadgroup): a module's tests go to one worker, so
        # its module fixtures (a browser, a built page's visits) are set up once, unless the
        # module splits itself into groups (test_browser_pages.py: one per page and theme).
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # The scheduler hands out the groups in this order, a whole group to a worker: the longest
    # first, so no long group starts last and leaves the other worker idle.
    # Groups named in LAST come after all others (they read what the others stored).
    order = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def place(item) -> tuple[int, int]:
        group = item.get_closest_marker("xdist_group").args[0]
        return (group in LAST, order.get(item.path.name, len(order)))

    items.sort(key=place)


def pytest_xdist_node_collection_finished(node, ids):
    """Under ``--dist loadgroup`` (``make test``) each test's node id ends in ``@<group>``, which
    the scheduler reads. When it does not (pytest 9.2 with pytest-xdist 3.8 drops it,
    pytest-dev/pytest-xdist#1386) the groups are ignored without a word and every module
    fixture is set up on both workers, at twice the cost: stop instead."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    ungrouped = [i for i in ids if "@" not in i.rsplit("]", 1)[-1]]
    if ungrouped:
        pytest.exit(
            f"--dist loadgroup did not group {len(ungrouped)} of {len(ids)} tests (first: "
            f"{ungrouped[0]}): pytest-xdist cannot mark node ids under this pytest "
            "(requirements.txt pins the two; pytest-dev/pytest-xdist#1386)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture(scope="session")
def numeric_configurations() -> list[str]:
    """The foreign numeric configurations of the page runs: the first three (at least two) of
    ``support.numerics.CONFIGURATIONS`` that change this machine's numerics (a short training
    run's weights differ from the default's and from each other's), measured once for every
    worker (``support.runs.configurations``)."""
    chosen = runs.configurations()["chosen"]
    if len(chosen) < 2:
        digests = runs.configurations()["digests"]
        tried = ", ".join(f"{name}: {digest[:12]}" for name, digest in digests.items())
        missing(f"fewer than two configurations change this machine's numerics ({tried})")
    return chosen


@pytest.fixture(scope="session")
def learner_run(numeric_configurations):
    """A page's learner notebook (``_build/html/_notebooks/``) as a learner runs it: executed in
    its own folder, offline, under the first foreign configuration (a learner's machine is not
    the author's); a page that trains a model with seed 1 (the first run of its seed sweep).
    Read from ``support.runs``' store (``make runs`` fills it), executed then if missing.

    ``learner_run(source)`` takes the page's source under ``notebooks_src/`` and returns the
    executed notebook; its ``metadata["figure_text"]`` maps each PNG's SHA-256 to the dpi it was
    rendered at and the font sizes (points) of the texts drawn into it.
    """
    return lambda source: runs.get(runs.learner(runs.page_of(source), numeric_configurations))


@pytest.fixture(autouse=True)
def default_print_options():
    """Lab pages run in-process by some tests set torch's print options: undo it after each."""
    yield
    torch.set_printoptions(profile="default", sci_mode=None)


# Browser tests (browser/): Debian's Chromium driven by Playwright over a local server
# (tests/support/browser.py, server.py, accessibility.py).


@pytest.fixture(scope="session")
def axe() -> Path:
    """The path of axe-core's script; missing, the test is skipped (failed with ``CI=true``)."""
    if not accessibility.AXE.is_file():
        where = accessibility.AXE.relative_to(ROOT)
        missing(f"{where} is missing: run `make book` (it runs `npm ci`)")
    return accessibility.AXE


@pytest.fixture(scope="module")
def server(html_dir):
    """The built book served over HTTP: its base URL (no trailing slash)."""
    with server_support.serve(html_dir) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    """A Chromium browser context (1280 x 900), with a profile of its own."""
    if not browser_support.chromium_found():
        missing(
            f"Chromium not found at {browser_support.CHROMIUM}: apt-get install chromium"
            " (or set CHROMIUM_PATH)"
        )
    with browser_support.chromium() as context:
        yield context


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module's tests (``pytestmark = usefixtures("one_thread")``).

    Tiny matrices gain nothing from threads, and on a loaded machine threads wait for each
    other; results do not depend on it. The previous setting is restored.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def pytest_terminal_summary(terminalreporter, config):
    """After the run: the numeric configurations used and the glued values that differed
    between them and the build, and each swept claim's spread over seeds (from the stored runs
    of ``support.runs``, so whichever worker read them); the counts go to the stage table."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller reports
        return
    stats = terminalreporter.stats
    stages.record_tests(
        {name: len(stats.get(key, [])) for name, key in
         [("passed", "passed"), ("failed", "failed"), ("skipped", "skipped"), ("errors", "error")]}
    )  # fmt: skip
    reports = [r for found in stats.values() for r in found if hasattr(r, "nodeid")]
    read = {r.nodeid.split("::")[0] for r in reports}
    if not read & {"tests/runs/test_portability.py", "tests/runs/test_seed_sweep.py"}:
        return
    for title, lines in runs.summary():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
