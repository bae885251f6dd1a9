"""The stage table ``make test`` (and so CI) ends with: how long each stage took, and its tests.

Standard library only (it times the stage that creates the virtual environment)::

    python3 tests/support/stages.py reset
    python3 tests/support/stages.py run NAME -- COMMAND ...   # runs it, records its seconds
    python3 tests/support/stages.py table                     # prints the table

A stage that fails prints the table so far and exits with the command's code. Tests add their
counts through ``record_tests`` (tests/conftest.py, in the pytest process of the stage named by
``ATTENTION_LAB_STAGE``); the table closes with the plain line ``tests: N passed, N failed``
over every stage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "_build" / "stages.jsonl"
ENV = "ATTENTION_LAB_STAGE"


def _append(entry: dict) -> None:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def record_tests(counts: dict[str, int]) -> None:
    """Called by a pytest run inside a stage: its counts (passed, failed, skipped, errors)."""
    stage = os.environ.get(ENV)
    if stage:
        _append({"stage": stage, "tests": counts})


def _entries() -> list[dict]:
    if not LOG.is_file():
        return []
    return [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines() if line]


def table() -> str:
    stages: dict[str, dict] = {}
    for entry in _entries():
        stage = stages.setdefault(entry["stage"], {"seconds": None, "tests": {}})
        if "tests" in entry:
            for outcome, count in entry["tests"].items():
                stage["tests"][outcome] = stage["tests"].get(outcome, 0) + count
        else:
            stage["seconds"] = entry["seconds"]
            stage["status"] = entry["status"]
    lines = ["", "stage                              seconds   tests"]
    total = 0.0
    totals: dict[str, int] = {}
    for name, stage in stages.items():
        seconds = stage["seconds"]
        total += seconds or 0.0
        shown = "-" if seconds is None else f"{seconds:7.0f}"
        tests = ", ".join(f"{n} {o}" for o, n in stage["tests"].items() if n)
        status = "" if stage.get("status", 0) == 0 else f"  (FAILED, exit {stage['status']})"
        lines.append(f"{name:34} {shown:>7}   {tests}{status}")
        for outcome, count in stage["tests"].items():
            totals[outcome] = totals.get(outcome, 0) + count
    lines.append(f"{'total':34} {total:7.0f}")
    passed, failed = totals.get("passed", 0), totals.get("failed", 0) + totals.get("errors", 0)
    lines.append(f"tests: {passed} passed, {failed} failed")
    return "\n".join(lines)


def run(name: str, command: list[str]) -> int:
    start = time.monotonic()
    done = subprocess.run(command, env={**os.environ, ENV: name}, check=False)
    _append({"stage": name, "seconds": round(time.monotonic() - start, 1),
             "status": done.returncode})  # fmt: skip
    if done.returncode != 0:
        print(table())
    return done.returncode


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "reset":
        LOG.unlink(missing_ok=True)
        return 0
    if argv[0] == "table":
        print(table())
        return 0
    if argv[0] == "run" and len(argv) >= 4 and argv[2] == "--":
        return run(argv[1], argv[3:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
