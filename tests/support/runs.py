"""The one execution layer: every page run the tests read, declared once, executed once.

A run is a page (its source under ``notebooks_src/``, e.g. ``chapters/08_watching_attention_learn``)
in a variant, under a numeric configuration (``support.numerics.CONFIGURATIONS``) and a seed:

- ``book``: the MyST source as the book's build executes it (labs with their solutions), with its
  ``SEED = …`` line rewritten when ``seed`` is given;
- ``learner``: the notebook the built site ships in ``_build/html/_notebooks/`` (run in its own
  folder there, with ``support.figure_recorder``'s cell first, so each figure's text is recorded;
  with its ``SEED = …`` line rewritten when ``seed`` is given);
- ``lone``: the same learner notebook copied alone into an empty folder, as a learner who
  downloaded one page runs it.

:func:`matrix` declares every run ``make test`` needs (the learners' notebooks, the portability
run, the seed sweep spread over the numeric configurations, the rerun of the book's seed for the
pages in :data:`REPRODUCED`);
``make runs`` executes the ones not yet stored with two workers, longest first. (The build runs
the pages that report timings alone, as their timings are published; here none is read: no test
and no page assert reads a time.)
Each run is stored in ``_build/runs/`` under the hash of its inputs (the notebook's text, the
configuration's variables, the seed and the library's code), so any test that needs a run reads
it and none executes a page itself; a run a test asks for that was not executed yet (a test run
by hand) is executed then, under a lock, so two pytest workers never execute the same run twice.

From the command line::

    .venv/bin/python tests/support/runs.py            # execute the matrix's missing runs
    .venv/bin/python tests/support/runs.py --list     # the matrix, one run a line, and its state

"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import figure_recorder, numerics

ROOT = Path(__file__).resolve().parents[2]
SOURCES_DIR = ROOT / "notebooks_src"
NOTEBOOKS = ROOT / "_build" / "html" / "_notebooks"
STORE = ROOT / "_build" / "runs"
# Bumped when the way a run is executed changes, so older stored runs are not read.
FORMAT = "1"

VARIANTS = ("book", "learner", "lone")
# How many foreign numeric configurations the runs use (the first that change this machine).
FOREIGN = 3
# The seed sweep (the book's build runs the page's own seed, 0): `make test` runs one other seed
# under each foreign configuration (seeds 1, 2 and, where this machine has a third, 3); `make
# sweep` (ATTENTION_LAB_SWEEP=full) runs the full sweep, seeds 1 to 4 under A, B, C (or A again)
# and the build's configuration. Each seed under a fixed configuration (`sweep`): the same runs
# every time, so a commit that changes nothing a page computes cannot fail it.
FULL_SWEEP_SEEDS = (1, 2, 3, 4)
FULL_SWEEP = os.environ.get("ATTENTION_LAB_SWEEP", "") == "full"
# The page the ``lone`` variant runs: a chapter with a quiz, downloaded on its own.
LONE_PAGE = "chapters/05_masks"
# The trained pages rerun in the build's configuration with the book's seed, whose figures must be
# the book's byte for byte (seeds are fixed: the same build draws the same figures): the two
# cheapest. Every trained page ran this rerun until 2026-12-04: a run per trained page, 334 of
# the 1,529 s summed over a fresh clone's page runs on a 2-core AMD EPYC, and it never failed.
# It now shows that seeded training and the figures' rendering reproduce; a page that drew
# randomness outside ``SEED`` would be caught only if it is one of these.
REPRODUCED = ("start/training_primer", "chapters/08_watching_attention_learn")


@dataclasses.dataclass(frozen=True, order=True)
class Run:
    """One execution of a page. ``purpose`` only labels it (for the stage table)."""

    page: str
    variant: str = "book"
    config: str = "default"
    seed: int | None = None
    purpose: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant={self.variant!r} is not one of {VARIANTS}")
        if self.config not in numerics.CONFIGURATIONS:
            raise ValueError(f"config={self.config!r} is not in numerics.CONFIGURATIONS")

    @property
    def label(self) -> str:
        seed = "page's seed" if self.seed is None else f"seed {self.seed}"
        return f"{self.page} [{self.variant}, {self.config}, {seed}]"

    @property
    def command(self) -> str:
        """The command that reruns this run (as the book page) and prints its glued values."""
        seed = f" --seeds {self.seed}" if self.seed is not None else ""
        return (
            f".venv/bin/python tests/support/numerics.py notebooks_src/{self.page}.md"
            f"{seed} --configs {self.config}"
        )


def page_of(source: Path) -> str:
    """``notebooks_src/chapters/05_masks.md`` -> ``chapters/05_masks``."""
    return str(source.resolve().relative_to(SOURCES_DIR).with_suffix(""))


def sources() -> list[Path]:
    return sorted(SOURCES_DIR.rglob("*.md"))


def swept() -> list[Path]:
    """The pages that set their seed once (``SEED = …``): the trained ones."""
    return [s for s in sources() if numerics.SEED_LINE.search(s.read_text(encoding="utf-8"))]


# ---------------------------------------------------------------------------------------------
# The numeric configurations of the portability run, measured once per machine and library.


@functools.cache
def _library_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "lib").rglob("*")):
        if path.suffix in {".py", ".css", ".js"} and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(name: str):
    STORE.mkdir(parents=True, exist_ok=True)
    with open(STORE / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _configurations_path() -> Path:
    import platform
    from importlib.metadata import version

    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = "\n".join(line for line in cpu.splitlines() if line.startswith(("model name", "flags")))
    inputs = [FORMAT, str(FOREIGN), _library_hash(), version("torch"), platform.machine(), cpu]
    inputs.append(str(os.cpu_count()))
    key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()[:16]
    return STORE / f"configurations-{key}.json"


def configurations() -> dict:
    """``{"chosen": [names], "digests": {name: sha256}}``: the first :data:`FOREIGN`
    configurations that change this machine's numerics (``numerics.effective_configurations``;
    at least two are needed), measured once and stored (keyed by the library, torch and the
    CPU), so every worker and stage uses the same."""
    path = _configurations_path()
    with _locked("configurations"):
        if not path.is_file():
            chosen, digests = numerics.effective_configurations(FOREIGN)
            path.write_text(json.dumps({"chosen": chosen, "digests": digests}, indent=1))
    return json.loads(path.read_text())


# ---------------------------------------------------------------------------------------------
# The matrix.


def matrix(chosen: list[str] | None = None) -> list[Run]:
    """Every run ``make test`` reads, with ``chosen`` the foreign numeric configurations
    (:func:`configurations`: A, B and, where this machine has one, C).

    - A page that trains a model (it sets ``SEED = …``): its seed sweep (:func:`sweep`), another
      seed under each foreign configuration (with :data:`FULL_SWEEP`, seeds 1 to 4 under A, B,
      C and the build's configuration), whose first run is its learner notebook (the others
      the book page); a page of :data:`REPRODUCED` also its learner notebook in the build's
      configuration with the book's seed, the rerun whose figures must be the book's byte for
      byte.
    - Any other page: its learner notebook under A, and the book page under B (the portability
      run).
    - The ``lone`` learner notebook (:data:`LONE_PAGE`) under A.
    """
    if chosen is None:
        chosen = configurations()["chosen"]
    if len(chosen) < 2:
        raise RuntimeError(f"fewer than two numeric configurations change this machine: {chosen}")
    first, second = chosen[:2]
    trained = {page_of(s) for s in swept()}
    runs = []
    for source in sources():
        page = page_of(source)
        if page in trained:
            runs += [
                Run(page, "book" if k else "learner", config, seed, purpose="sweep")
                for k, (seed, config) in enumerate(sweep(chosen))
            ]
            if page in REPRODUCED:
                runs.append(Run(page, "learner", "default", purpose="reproduced"))
        else:
            runs.append(Run(page, "learner", first, purpose="learner"))
            runs.append(Run(page, "book", second, purpose="portability"))
    runs.append(Run(LONE_PAGE, "lone", first, purpose="learner"))
    return runs


def sweep(chosen: list[str], full: bool | None = None) -> list[tuple[int, str]]:
    """``(seed, configuration)`` of each sweep run of a trained page: seed ``k`` under the
    ``k``-th of ``chosen``; with ``full`` (default :data:`FULL_SWEEP`), seeds 1 to 4 under A, B,
    C (or A again) and the build's configuration."""
    if full is None:
        full = FULL_SWEEP
    if not full:
        return list(enumerate(chosen, start=1))
    third = chosen[2] if len(chosen) > 2 else chosen[0]
    return list(zip(FULL_SWEEP_SEEDS, [chosen[0], chosen[1], third, "default"], strict=True))


def learner(page: str, chosen: list[str]) -> Run:
    """The run of ``page``'s learner notebook in :func:`matrix` (for a trained page, its seed
    sweep's first run)."""
    (found,) = [
        r
        for r in matrix(chosen)
        if r.page == page and r.variant == "learner" and r.purpose != "reproduced"
    ]
    return found


def reproduced(page: str, chosen: list[str]) -> Run:
    """The rerun of ``page`` (one of :data:`REPRODUCED`) with the book's seed, in the build's
    configuration, as its learner notebook."""
    (found,) = [r for r in matrix(chosen) if r.page == page and r.purpose == "reproduced"]
    return found


def of_page(page: str, chosen: list[str]) -> list[Run]:
    """Every run of ``page`` in :func:`matrix`."""
    return [r for r in matrix(chosen) if r.page == page]


# ---------------------------------------------------------------------------------------------
# Executing and storing.


def _input_text(run: Run) -> str:
    if run.variant == "book":
        source = SOURCES_DIR / f"{run.page}.md"
        text = source.read_text(encoding="utf-8")
        if run.seed is not None:
            if len(numerics.SEED_LINE.findall(text)) != 1:
                raise ValueError(f"{source.name} must set its seed once as 'SEED = <int>'")
            text = numerics.SEED_LINE.sub(f"SEED = {run.seed}", text)
        return text
    notebook = NOTEBOOKS / f"{run.page}.ipynb"
    if not notebook.is_file():
        raise FileNotFoundError(f"{notebook.relative_to(ROOT)} is missing: `make book` writes it")
    text = notebook.read_text(encoding="utf-8")
    if run.seed is None:
        return text
    import nbformat

    nb = nbformat.reads(text, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and numerics.SEED_LINE.search(c.source)]
    if len(cells) != 1 or len(numerics.SEED_LINE.findall(cells[0].source)) != 1:
        raise ValueError(f"{notebook.name} must set its seed once as 'SEED = <int>'")
    cells[0].source = numerics.SEED_LINE.sub(f"SEED = {run.seed}", cells[0].source)
    return nbformat.writes(nb)


def key(run: Run) -> str:
    """The hash of everything a run's result depends on."""
    parts = [
        FORMAT,
        run.page,
        run.variant,
        json.dumps(numerics.CONFIGURATIONS[run.config], sort_keys=True),
        str(run.seed),
        _input_text(run),
        _library_hash(),
    ]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


def _stem(run: Run) -> str:
    seed = "page" if run.seed is None else str(run.seed)
    name = f"{run.page.replace('/', '--')}.{run.variant}.{run.config}.seed-{seed}"
    return f"{name}.{key(run)}"


def stored(run: Run) -> Path:
    """Where ``run``'s executed notebook is (or will be) stored."""
    return STORE / f"{_stem(run)}.ipynb"


def execute(nb, cwd: Path, config: str = "default", timeout: int = 600):
    """Execute ``nb`` in a fresh kernel in ``cwd`` under ``config``; errors stay in the outputs.

    The kernel talks over Unix sockets in a folder of its own (``transport="ipc"``), not TCP: with
    TCP, jupyter_client picks free ports, closes them and hands them to the kernel, and another
    kernel's client could take one in between ("Kernel died before replying to kernel_info", seen
    in CI with two workers). Sockets in a fresh folder cannot collide."""
    from nbclient import NotebookClient
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="attention-lab-kernel-") as sockets:
        settings = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}})
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", allow_errors=True,
            resources={"metadata": {"path": str(cwd)}}, config=settings,
        )  # fmt: skip
        client.execute(env=numerics.environment(config))
    return nb


def _execute(run: Run):
    import jupytext
    import nbformat

    text = _input_text(run)
    start = time.monotonic()
    if run.variant == "book":
        nb = jupytext.reads(text, fmt="md:myst")
        execute(nb, SOURCES_DIR / Path(run.page).parent, run.config)
    else:
        nb = nbformat.reads(text, as_version=4)
        with tempfile.TemporaryDirectory(prefix="attention-lab-run-") as scratch:
            if run.variant == "lone":
                folder = Path(scratch) / "Downloads"
                folder.mkdir()
            else:
                folder = (NOTEBOOKS / run.page).parent
            log = Path(scratch) / "figure-text.jsonl"
            recorder = nbformat.v4.new_code_cell(figure_recorder.notebook_cell(str(log)))
            nb.cells.insert(0, recorder)
            execute(nb, folder, run.config)
            nb.cells.remove(recorder)
            lines = log.read_text().splitlines() if log.exists() else []
            nb.metadata["figure_text"] = {r["sha256"]: r for r in map(json.loads, lines)}
    nb.metadata["attention_lab_run"] = {
        **dataclasses.asdict(run),
        "seconds": round(time.monotonic() - start, 1),
        "errors": numerics.errors(nb),
        "glued": numerics.glued(nb),
    }
    return nb


def get(run: Run):
    """``run``'s executed notebook: read from the store, or executed now (under a lock) and
    stored. Its ``metadata["attention_lab_run"]`` holds the seconds it took, the errors of its
    cells (outside ``raises-exception``) and its glued values."""
    import nbformat

    path = stored(run)
    if not path.is_file():
        with _locked(path.stem):
            if not path.is_file():
                nb = _execute(run)
                partial = path.with_suffix(".partial")
                nbformat.write(nb, partial)
                partial.replace(path)
    return nbformat.read(path, as_version=4)


def record(run: Run) -> dict:
    """The stored run's record (seconds, errors, glued values), or ``{}`` if not stored."""
    path = stored(run)
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))["metadata"].get("attention_lab_run", {})


def summary() -> list[tuple[str, list[str]]]:
    """The terminal summary's sections (``numerics.summary``) from the stored runs of the
    matrix: the configurations used, the glued values that differ between them and the build,
    and each swept number's range over seeds."""
    path = _configurations_path()
    if not path.is_file():
        return []
    config = json.loads(path.read_text())
    if len(config["chosen"]) < 2:
        return numerics.summary(config, {}, {})
    glue: dict = {}
    sweep: dict = {}
    for run in matrix(config["chosen"]):
        if run.variant == "lone" or run.purpose == "reproduced":
            continue
        try:
            found = record(run)
        except FileNotFoundError:  # no built book: no learner notebooks to key on
            continue
        if not found:
            continue
        if run.purpose == "sweep":
            sweep.setdefault(run.page, {})[f"{run.seed} ({run.config})"] = found["glued"]
        else:
            glue.setdefault(run.page, {})[run.config] = found["glued"]
    return numerics.summary(config, glue, sweep)


def _worker(run: Run) -> tuple[Run, float, list[str]]:
    start = time.monotonic()
    nb = get(run)
    return run, time.monotonic() - start, nb.metadata["attention_lab_run"]["errors"]


# How much longer than the build's configuration a run takes under each (measured on the 2-core
# machine: ATen's scalar kernels about 1.3 times, with MKL's SSE4.2 path and one thread about 2).
SLOWER = {"baseline": 2.0, "aten-default": 1.3}


def _expected_seconds(runs: list[Run]) -> dict[Run, float]:
    """For scheduling, longest first: per run, the seconds the build took to execute its page
    (``_build/page_seconds.json``) times :data:`SLOWER` for its configuration, else a guess
    (trained pages are the long ones). The file and the sources are read once."""
    built = ROOT / "_build" / "page_seconds.json"
    seconds = json.loads(built.read_text()) if built.is_file() else {}
    trained = {page_of(s) for s in swept()}

    def expected(run: Run) -> float:
        page = f"notebooks_src/{run.page}"
        if page in seconds:
            return seconds[page] * SLOWER.get(run.config, 1.0)
        return 60.0 if run.page in trained else 10.0

    return {run: expected(run) for run in runs}


def fill(runs: list[Run], workers: int = 2) -> dict[str, float]:
    """Execute the runs not yet stored, ``workers`` at a time, longest first. Prints a line per
    run; returns seconds summed by purpose."""
    todo = [r for r in runs if not stored(r).is_file()]
    expected = _expected_seconds(todo)
    todo.sort(key=expected.__getitem__, reverse=True)
    total = len(todo)
    print(f"{len(runs) - total} of {len(runs)} runs already stored; executing {total} "
          f"({workers} at a time)", flush=True)  # fmt: skip
    by_purpose: dict[str, float] = {}
    failed: list[str] = []
    done = 0

    def report(run: Run, seconds: float, errors: list[str]) -> None:
        nonlocal done
        done += 1
        by_purpose[run.purpose] = by_purpose.get(run.purpose, 0.0) + seconds
        mark = f"  {len(errors)} failing cell(s)" if errors else ""
        print(f"[{done}/{total}] {run.label}: {seconds:.0f} s{mark}", flush=True)
        if errors:
            failed.append(f"{run.label}: {errors[0]}\n    rerun: {run.command}")

    STORE.mkdir(parents=True, exist_ok=True)
    if todo:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for future in as_completed([pool.submit(_worker, r) for r in todo]):
                report(*future.result())
    if failed:
        print("runs with failing cells (the tests that read them fail):", *failed, sep="\n  ")
    return by_purpose


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="list the matrix and exit")
    args = parser.parse_args()
    config = configurations()
    print(f"numeric configurations: {', '.join(config['chosen'])} (the build runs 'default')")
    runs = matrix(config["chosen"])
    if args.list:
        for run in runs:
            state = "stored" if stored(run).is_file() else "missing"
            print(f"{state:8} {run.purpose:12} {run.label}")
        return
    start = time.monotonic()
    by_purpose = fill(runs, args.workers)
    wall = time.monotonic() - start
    summed = " ".join(f"{p} {s:.0f} s" for p, s in sorted(by_purpose.items()))
    print(f"runs: {wall:.0f} s wall on {args.workers} workers; summed per purpose: {summed or '-'}")


if __name__ == "__main__":
    _main()
