"""Printing a page: custom.css's print stylesheet and book/_static/print.js, in headless Chromium.

The page is laid out for print (print media, and the beforeprint event Chromium fires when it
prints or saves a PDF), opened in the dark theme as a reader who prints from it would have it.
"""

from __future__ import annotations

import pytest

from support.browser import CHOOSE_THEME, Tab

# Chapter 05 has folded cells, an instrument and a quiz; chapter 07 prints errors with long lines.
PAGES = [
    "notebooks_src/chapters/05_masks.html",
    "notebooks_src/chapters/07_data_for_experiments.html",
]

PRINTED = """() => {
  const shown = (e) => e.getClientRects().length > 0;
  const quiz = document.querySelector('[id^="quiz_"]');
  const ink = (e) => getComputedStyle(e).color;
  return {
    theme: document.documentElement.dataset.theme,
    cut: Array.from(document.querySelectorAll('.bd-article pre'))
      .filter((p) => shown(p) && p.scrollWidth > p.clientWidth + 1)
      .map((p) => p.textContent.slice(0, 60)),
    wide: Array.from(document.querySelectorAll('.bd-article *'))
      .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
      .map((e) => e.tagName + '.' + e.className).slice(0, 5),
    folds: Array.from(document.querySelectorAll('details.hide')).filter(shown).length,
    chrome: Array.from(document.querySelectorAll(
      '.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, button'))
      .filter(shown).map((e) => e.tagName + '.' + e.className).slice(0, 5),
    questions: quiz ? quiz.querySelectorAll('.Quiz').length : 0,
    questionInk: quiz ? Array.from(quiz.querySelectorAll('.Quiz > div:first-child'), ink) : [],
    answers: Array.from(document.querySelectorAll('.quiz-print-answers li'),
      (li) => li.textContent.trim()),
    descriptions: Array.from(document.querySelectorAll('details.explorer-text'))
      .filter((d) => !d.open).length,
  };
}"""


@pytest.mark.parametrize("page", PAGES)
def test_a_page_prints_whole_and_light(browser, server, page):
    tab = Tab(browser, server, timeout=120_000).page
    tab.add_init_script(CHOOSE_THEME.format("dark"))
    try:
        tab.set_viewport_size({"width": 680, "height": 900})  # A4 less 15 mm margins, in CSS px
        tab.goto(f"{server}/{page}", wait_until="load")
        tab.wait_for_load_state("networkidle")
        tab.evaluate("() => window.MathJax?.startup?.promise")
        tab.wait_for_function(
            "() => [...document.querySelectorAll('[id^=quiz_]')]"
            ".every((q) => q.querySelector('.Quiz'))"
        )
        tab.emulate_media(media="print")
        tab.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
        printed = tab.evaluate(PRINTED)
        tab.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
        tab.emulate_media(media="screen")
        after = tab.evaluate(PRINTED)
    finally:
        tab.close()
    assert printed["theme"] == "light" and after["theme"] == "dark"
    assert not printed["cut"], printed["cut"]  # code, outputs and errors wrap
    assert not printed["wide"], printed["wide"]
    assert printed["folds"] == 0
    assert not printed["chrome"], printed["chrome"]
    assert printed["descriptions"] == 0
    # Every question prints in black, and the answers follow, one per question, none empty.
    assert set(printed["questionInk"]) <= {"rgb(0, 0, 0)"}, printed["questionInk"]
    assert len(printed["answers"]) == printed["questions"], printed["answers"]
    assert all(printed["answers"]), printed["answers"]
    assert not after["answers"]  # removed once printed
    if "05_masks" in page:
        assert printed["questions"] >= 3
        assert "21" in printed["answers"]  # causal_mask(6) has 21 True entries
        assert after["descriptions"] >= 1  # folded again on screen


def test_a_pdf_of_a_chapter(browser, server):
    # Chromium's own PDF print fires beforeprint and afterprint: the quiz's answers are in the
    # page while it is printed, and gone afterwards.
    tab = Tab(browser, server, timeout=120_000).page
    try:
        tab.goto(f"{server}/{PAGES[0]}", wait_until="load")
        tab.wait_for_function(
            "() => [...document.querySelectorAll('[id^=quiz_]')]"
            ".every((q) => q.querySelector('.Quiz'))"
        )
        # Added after print.js's listener, so it runs after it.
        tab.evaluate(
            "() => addEventListener('beforeprint', () => { window.keysPrinted = "
            "document.querySelectorAll('.quiz-print-answers li').length; })"
        )
        pdf = tab.pdf(format="A4", margin={k: "15mm" for k in ("top", "bottom", "left", "right")})
        printed = tab.evaluate("() => window.keysPrinted")
        left = tab.evaluate("() => document.querySelectorAll('.quiz-print-answers').length")
    finally:
        tab.close()
    assert pdf.startswith(b"%PDF")
    assert printed >= 3 and left == 0, (printed, left)
