"""Figures in Chromium: the content column is as wide as ``support.figures.COLUMN`` says (the
rule test_figure_text.py applies to every figure's text), every figure image is a link to itself,
and a ``tap-to-open`` figure tells a phone, and only a phone, that a tap enlarges it.
"""

from __future__ import annotations

import pytest

from support.figures import COLUMN, SMALLEST, TAP_TO_OPEN


@pytest.mark.parametrize("viewport", sorted(COLUMN))
def test_the_column_widths_are_the_ones_measured(viewport, browser, server):
    """Every figure image is shown at min(natural width, COLUMN[viewport]), and is a link to
    the full-size image (book/_static/figure-zoom.js)."""
    page = browser.new_page()
    try:
        page.set_viewport_size({"width": viewport, "height": 900})
        page.goto(f"{server}/notebooks_src/chapters/05_masks.html", wait_until="load")
        column = page.eval_on_selector(
            ".bd-article figure",
            """figure => {
                const style = getComputedStyle(figure);
                return figure.clientWidth - parseFloat(style.paddingLeft)
                    - parseFloat(style.paddingRight);
            }""",
        )
        images = page.eval_on_selector_all(
            ".bd-article figure img",
            """imgs => imgs.map(img => ({
                shown: img.getBoundingClientRect().width,
                natural: img.naturalWidth,
                link: img.closest("a") ? img.closest("a").href : null,
                src: img.src,
            }))""",
        )
    finally:
        page.close()
    assert images, "no figure on the page"
    assert column == pytest.approx(COLUMN[viewport], abs=1)
    for image in images:
        assert image["shown"] == pytest.approx(min(image["natural"], COLUMN[viewport]), abs=1)
        assert image["link"] == image["src"], f"{image['src']} is not a link to itself"


@pytest.mark.parametrize("viewport", sorted(COLUMN))
def test_a_tap_to_open_figure_says_so_on_a_phone_only(viewport, browser, server):
    """Under each TAP_TO_OPEN figure, a phone shows a hint that a tap enlarges it (inside the
    link, at least 9 px); a laptop, where the figure is legible, shows none."""
    page = browser.new_page()
    try:
        page.set_viewport_size({"width": viewport, "height": 900})
        page.goto(f"{server}/notebooks_src/chapters/01_why_attention.html", wait_until="load")
        hints = page.eval_on_selector_all(
            ".bd-article figure",
            """figures => figures.map(figure => {
                const hint = figure.querySelector("a.figure-zoom .figure-zoom-hint");
                return {
                    id: figure.id, tap: figure.classList.contains("tap-to-open"),
                    shown: hint !== null && hint.getBoundingClientRect().height > 0,
                    px: hint === null ? 0 : parseFloat(getComputedStyle(hint).fontSize),
                };
            })""",
        )
    finally:
        page.close()
    tapped = {hint["id"] for hint in hints if hint["tap"]}
    assert tapped == {"fig-why-it", "fig-why-paths"} <= TAP_TO_OPEN
    for hint in hints:
        assert hint["shown"] == (hint["tap"] and viewport < 600), hint
        assert not hint["shown"] or hint["px"] >= SMALLEST, hint
