"""The figures an executed notebook drew (read by test_figure_text.py and test_figure_layout.py),
and the rule by which a figure's text is legible where the book shows it.

A font of ``s`` points rendered at ``dpi`` is ``s * dpi / 72`` px in the PNG; the book shows a PNG
``W`` px wide at its natural width, or scaled down to the content column when it is wider, so on a
page whose column is ``C`` px wide the text is shown at::

    s * dpi / 72 * min(1, C / W)     CSS px

and must be at least ``SMALLEST`` there (test_figure_text.py). ``COLUMN`` holds ``C`` at each
viewport width, as measured in Chromium (test_browser_figures.py checks it); a figure in
``TAP_TO_OPEN`` may instead be legible at full size on a phone, which a tap opens.
"""

from __future__ import annotations

import base64
import hashlib
import struct

# The width in CSS px of a chapter page's content column (the widest an image is shown), at each
# viewport width, measured in Chromium on the built book (sphinx-book-theme): see
# test_browser_figures.py's test_the_column_widths_are_the_ones_measured.
COLUMN = {1280: 672, 390: 342}
SMALLEST = 9.0  # CSS px
# Figures the phone may open full size with a tap instead (see the module docstring). Each
# carries the figure class ``tap-to-open`` (``classes: tap-to-open`` after its name), under
# which figure-zoom.js shows a narrow screen a hint that a tap enlarges it.
TAP_TO_OPEN = {
    "fig-why-it",  # a ten-word sentence in one row of labelled boxes, arcs between the words
    "fig-why-paths",  # the same ten words, as a chain and as all pairs
    "fig-pt-pattern-heads",  # six heads' attention over a 15-token sentence, tokens labelled
    "fig-pt-try-it",  # twelve heads' attention over a 16-token sentence, tokens labelled
    "fig-sim-search",  # a similarity matrix of many sentences, each labelled
}


def rendered_px(points: float, dpi: float, png_width: int, column: float) -> float:
    """CSS px of a ``points`` font in a PNG ``png_width`` px wide shown in ``column`` px."""
    return points * dpi / 72 * min(1.0, column / png_width)


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
