"""`make bench-book`: how long the book takes to build, cold and warm, and where the time goes.

In a temporary copy of the book sources (so the repository's own ``_build/`` and execution cache
are untouched), this times three builds with the same command ``make book`` runs:

1. cold: empty ``_build/``, every page executed;
2. no change: the same build again, every page taken from the execution cache;
3. one page changed: a code cell appended to one page (``--page``), which alone re-executes;

and then prints each page's execution time as recorded by jupyter-cache in the copy's cache. The
cold build executes pages two at a time, as ``make book`` and CI do (so a page's time is taken
beside another kernel); ``--alone`` executes them one at a time, each page's time on its own.
Results are written to ``benchmarks/results/book.csv`` and ``book.md``.

Usage: ``python benchmarks/book.py [--page notebooks_src/chapters/02_....md] [--keep]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# What the build reads: the book, the library, and what the learners' downloads are made of (the
# library's wheel is built from pyproject.toml; requirements-learn.txt ships beside the notebooks).
SOURCES = [
    "_config.yml",
    "_toc.yml",
    "book",
    "lib",
    "notebooks_src",
    "pyproject.toml",
    "README.md",
    "requirements-learn.txt",
]
CHANGED_CELL = "\n```{code-cell} ipython3\n# bench-book: a changed page re-executes\n1 + 1\n```\n"


def build(copy: Path, workers: int = 0) -> tuple[float, bool]:
    """Run the book build in ``copy``; return the wall-clock seconds and whether it succeeded."""
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", ".", "-n", "-W"]
    command.append("--keep-going")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    if workers:
        env["BOOK_EXECUTION_WORKERS"] = str(workers)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        print(f"  (build exited with {done.returncode}; last lines:)\n{tail}", file=sys.stderr)
    return seconds, done.returncode == 0


def page_times(copy: Path) -> dict[str, float]:
    """Execution seconds per page, from the newest jupyter-cache record of each page."""
    from jupyter_cache import get_cache

    newest: dict[str, tuple[object, float]] = {}
    for record in get_cache(copy / "_build" / ".jupyter_cache").list_cache_records():
        page = str(Path(record.uri).relative_to(copy))
        seconds = float(record.data.get("execution_seconds", float("nan")))
        if page not in newest or record.created > newest[page][0]:
            newest[page] = (record.created, seconds)
    return {page: seconds for page, (_, seconds) in sorted(newest.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--page",
        default="notebooks_src/chapters/02_scaled_dot_product_attention.md",
        help="the page to change for the one-page rebuild",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    parser.add_argument("--alone", action="store_true", help="execute pages one at a time")
    args = parser.parse_args()

    copy = Path(tempfile.mkdtemp(prefix="attention-lab-bench-book-"))
    try:
        for name in SOURCES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, copy / name)
            else:
                shutil.copy2(source, copy / name)
        # The front-end packages `make book` installed (plotly.js, Font Awesome), not copied.
        (copy / "node_modules").symlink_to(ROOT / "node_modules", target_is_directory=True)
        timings = []
        print(f"building in {copy} (the library is imported from the installed attention_lab)")
        for label, prepare in [
            ("cold build (empty cache)", None),
            ("no-change rebuild", None),
            (f"one page changed ({Path(args.page).stem})", args.page),
        ]:
            if prepare is not None:
                with open(copy / prepare, "a") as page:
                    page.write(CHANGED_CELL)
            seconds, ok = build(copy, 1 if args.alone else 0)
            timings.append((label, seconds, ok))
            print(f"  {label:<55} {seconds:7.1f} s{'' if ok else '  (build failed)'}")

        pages = page_times(copy)
        how = "one at a time" if args.alone else "two at a time"
        print(f"\nexecution time per page, executed {how} (jupyter-cache records of the copy):")
        for page, seconds in sorted(pages.items(), key=lambda item: -item[1]):
            print(f"  {page:<60} {seconds:6.1f} s")
        print(f"  {'total':<60} {sum(pages.values()):6.1f} s")

        RESULTS.mkdir(parents=True, exist_ok=True)
        with open(RESULTS / "book.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["what", "seconds", "build succeeded"])
            writer.writerows((label, f"{s:.1f}", ok) for label, s, ok in timings)
            writer.writerows((f"execute {page}", f"{s:.1f}", "") for page, s in pages.items())
        lines = ["# Book build times", "", "| what | seconds | build succeeded |", "|---|---|---|"]
        lines += [f"| {label} | {s:.1f} | {ok} |" for label, s, ok in timings]
        lines += ["", "| page (its newest execution) | seconds |", "|---|---|"]
        lines += [f"| {page} | {s:.1f} |" for page, s in pages.items()]
        (RESULTS / "book.md").write_text("\n".join(lines) + "\n")
        print(f"\nwrote {RESULTS / 'book.csv'} and {RESULTS / 'book.md'}")
    finally:
        if args.keep:
            print(f"kept {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    main()
