"""support/figure_recorder.py, the cell the notebook tests put first, run in a fresh interpreter.

It must record what tests/runs/test_figure_text.py and tests/runs/test_figure_layout.py read (the
dpi, the font sizes, where each text, axes and legend was drawn) and change nothing: the PNG
comes out byte for byte as without it, and the notebook's namespace gains no name.
"""

from __future__ import annotations

import json
import subprocess
import sys

from support import figure_recorder

FIGURE = """
import hashlib, io, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

before = set(globals())
if sys.argv[1] == "record":
    exec(sys.argv[2])
added = sorted(set(globals()) - before - {"before"})
fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
ax.plot([0, 1, 2], [0, 1, 0], label="a line")
ax.set_title("a title", fontsize=12)
ax.legend(fontsize=9)
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=100)
print(json.dumps({"sha256": hashlib.sha256(buffer.getvalue()).hexdigest(), "added": added}))
"""


def run(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", FIGURE, *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_recorder_records_the_figure_and_changes_nothing(tmp_path):
    log = tmp_path / "figures.jsonl"
    plain = run("plain")
    recorded = run("record", figure_recorder.notebook_cell(str(log)))
    assert recorded["sha256"] == plain["sha256"]  # the same PNG, byte for byte
    assert recorded["added"] == []  # the notebook's cells see none of the recorder's names
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["sha256"] for r in records] == [plain["sha256"]]
    (record,) = records
    assert record["dpi"] == 100
    assert {9.0, 12.0} <= set(record["sizes"])
    texts = {t["text"]: t for t in record["texts"]}
    assert texts["a title"]["size"] == 12 and texts["a title"]["axes"] == 0
    x0, y0, x1, y1 = texts["a title"]["box"]
    assert 0 <= x0 < x1 <= 300 and 0 <= y0 < y1 <= 200  # in the PNG's pixels, y down
    assert len(record["axes"]) == 1 and record["axes"][0]["title"] == "a title"
    (legend,) = record["legends"]
    assert legend["axes"] == 0 and all(c["label"] == "a line" for c in legend["covers"])
