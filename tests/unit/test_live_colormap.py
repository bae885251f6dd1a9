"""The live box's colour table (``book/_static/live/viridis.js``) is matplotlib's viridis."""

from __future__ import annotations

import re

import matplotlib
import numpy as np

from support.paths import ROOT

TABLE = ROOT / "book" / "_static" / "live" / "viridis.js"


def test_the_table_is_matplotlibs_viridis():
    rows = re.findall(r"\[(\d+), (\d+), (\d+)\]", TABLE.read_text(encoding="utf-8"))
    table = np.array(rows, dtype=np.uint8)  # [256, 3]
    expected = matplotlib.colormaps["viridis"](np.arange(256), bytes=True)[:, :3]
    assert table.shape == expected.shape == (256, 3)
    np.testing.assert_array_equal(table, expected)
