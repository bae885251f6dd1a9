"""The page-weight budget of ``support/page_weights.py``, on made-up numbers and files.

The measure of the built pages in Chromium is in ``test_browser_a11y.py``; these check that the
budget and the sizes it adds up can fail, without a build or a browser.
"""

from __future__ import annotations

from pathlib import Path

from support import page_weights


def test_the_budget_check_fails_a_heavy_page():
    rows = [
        {"page": "a.html", "first_visit": page_weights.FIRST_VISIT_BUDGET + 1, "next_page": 1},
        {"page": "b.html", "first_visit": 1, "next_page": page_weights.NEXT_PAGE_BUDGET * 3},
        {"page": "c.html", "first_visit": 1, "next_page": page_weights.NEXT_PAGE_BUDGET * 2},
    ]
    problems = page_weights.over_budget(rows)
    assert any(p.startswith("a.html") for p in problems)
    assert any(p.startswith("median next page") for p in problems)
    assert not any(p.startswith(("b.html", "c.html")) for p in problems)


def test_compressed_size_is_gzip_for_text_and_raw_for_images(tmp_path: Path):
    text = tmp_path / "a.js"
    text.write_text("var x = 1;\n" * 1000)
    image = tmp_path / "a.png"
    image.write_bytes(bytes(range(256)) * 4)
    assert page_weights.compressed_size(text) < text.stat().st_size / 10
    assert page_weights.compressed_size(image) == image.stat().st_size
