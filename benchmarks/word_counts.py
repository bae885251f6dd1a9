"""How long is each chapter's teaching path? Words of prose, as the book's reading time counts.

Reads the counts the last build recorded (``_build/learner_index.json``, written by
``book/_ext/attention_book/learner_notebooks.py`` from the counts of
``book/_ext/attention_book/reading_time.py``): prose up to the "Exercises" section, without
code, outputs, display math or folded blocks. Prints a table and writes
``benchmarks/results/word_counts.md``. The goal (issue 14) is about 4,000 words a chapter.

Usage: ``python benchmarks/word_counts.py`` after ``make book``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "_build" / "learner_index.json"
RESULTS = ROOT / "benchmarks" / "results"
GOAL = 4000


def main() -> int:
    if not INDEX.is_file():
        print(f"no {INDEX.relative_to(ROOT)}: run `make book` first", file=sys.stderr)
        return 1
    pages = json.loads(INDEX.read_text(encoding="utf-8"))["pages"]
    rows = [
        (info["number"], info["title"], info["words"])
        for docname, info in sorted(pages.items())
        if docname.startswith("notebooks_src/chapters/") and info.get("words") is not None
    ]
    lines = [
        "| chapter | title | words of prose | minutes at 200 wpm | over the 4,000 goal |",
        "|---|---|---|---|---|",
    ]
    for number, title, words in rows:
        over = f"{words - GOAL:+,}" if words > GOAL else ""
        lines.append(f"| {number} | {title} | {words:,} | {-(-words // 200)} | {over} |")
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "word_counts.md").write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
