"""`make bench-weights`: what a browser downloads for each page of the built book, as a table.

The measure and the budget are tests/support/page_weights.py's (the tests check the same
budget): every page is opened in headless Chromium (``/usr/bin/chromium`` or ``CHROMIUM_PATH``)
over a local server and every file it fetches or references is counted, gzip-compressed where a
static host would compress it, for a first visit and for the next page.

Usage: ``PYTHONPATH=tests python benchmarks/page_weights.py [path/to/_build/html]`` (default:
``_build/html``; ``make book`` first) prints the table and writes it to
``benchmarks/results/page_weights.txt``; exits 1 if a page is over budget or links a missing
file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from support import browser, page_weights, server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=ROOT / "_build" / "html")
    args = parser.parse_args(argv)
    html_dir: Path = args.html_dir.resolve()
    if not (html_dir / "index.html").is_file():
        print(f"no built book in {html_dir}: run `make book` first", file=sys.stderr)
        return 1
    if not browser.chromium_found():
        print(f"Chromium not found at {browser.CHROMIUM}: set CHROMIUM_PATH", file=sys.stderr)
        return 1
    with server.serve(html_dir) as base, browser.chromium("page-weights-chromium-") as context:
        rows, missing = page_weights.measure(context, base, html_dir)
    report = page_weights.table(rows)
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "page_weights.txt").write_text(report + "\n", encoding="utf-8")
    problems = missing + page_weights.over_budget(rows)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
