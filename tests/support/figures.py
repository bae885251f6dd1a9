"""The figures an executed notebook drew (read by test_figure_text.py and test_figure_layout.py)."""

from __future__ import annotations

import base64
import hashlib
import struct


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in px of a PNG, from its header."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def figure_records(nb):
    """(label, PNG bytes, recorder's record) of every PNG the notebook drew.

    The label is the figure's name, or ``cell <index>``; the record is what the recorder in
    conftest.py stored for that PNG (its dpi, font sizes and text boxes).
    """
    records = nb.metadata["figure_text"]
    for index, cell in enumerate(nb.cells):
        name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data:
                continue
            png = base64.b64decode(data["image/png"])
            record = records.get(hashlib.sha256(png).hexdigest())
            assert record is not None, f"cell {index} shows a PNG the recorder did not see"
            yield name or f"cell {index}", png, record
