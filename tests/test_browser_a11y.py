"""Every built page is accessible and light, measured in headless Chromium.

Accessibility: axe-core (pinned in package.json, installed into node_modules/ by ``make book``)
runs on every page once its scripts have finished (MathJax typeset, quizzes and explorers
drawn) with the WCAG 2.0/2.1 A and AA rules; no page may have a critical or serious violation,
in the theme's light mode or in its dark mode.

Weight: ``tests/support/page_weights.py`` records what the browser fetches for each page and sizes
it as a static host sends it (gzip); every page must be within the first-visit budget and the
median page within the next-page budget.
"""

from __future__ import annotations

import json

import pytest

from support import page_weights
from support.accessibility import BLOCKING, run_axe
from support.browser import CHOOSE_THEME, THEMES, Tab

pytestmark = [pytest.mark.book, pytest.mark.browser]

# Rules this stack cannot satisfy, each with the reason and the upstream issue. Empty: every
# rule is met at its cause (see book/_templates/, book/_static/custom.css, attention_lab.quiz).
NOT_FIXABLE: dict[str, str] = {}


def audit(context, base: str, axe, page: str, theme: str = "light") -> list[dict]:
    """axe-core's WCAG A/AA violations on ``page`` in ``theme``, after its scripts have run."""
    # Nothing leaves the machine (test_browser.py checks that no page tries).
    tab = Tab(context, base, timeout=120_000)
    tab.page.add_init_script(CHOOSE_THEME.format(theme))
    try:
        tab.goto(page, idle=True)
        shown = tab.page.evaluate("() => document.documentElement.dataset.theme")
        assert shown == theme, (page, shown)
        tab.page.evaluate("() => window.MathJax?.startup?.promise")
        # Quizzes fill their containers once the page has loaded and MathJax is ready.
        tab.page.wait_for_function(
            "() => [...document.querySelectorAll('[id^=quiz_]')]"
            ".every((q) => q.querySelector('.Quiz'))"
        )
        result = run_axe(tab.page, axe)
    finally:
        tab.close()
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [n["target"] for n in v["nodes"]],
        }
        for v in result["violations"]
    ]


@pytest.mark.parametrize("theme", THEMES)
def test_axe_finds_no_serious_violation_on_any_page(browser, server, html_dir, axe, theme):
    pages = page_weights.built_pages(html_dir)
    assert len(pages) >= 20, pages
    problems = []
    for page in pages:
        for v in audit(browser, server, axe, page, theme):
            if v["impact"] in BLOCKING and v["id"] not in NOT_FIXABLE:
                problems.append(
                    f"{theme} {page}: {v['impact']} {v['id']} ({v['help']}) at "
                    f"{json.dumps(v['nodes'][:3])}"
                )
    assert not problems, "\n".join(problems)


def test_axe_catches_an_unlabelled_field(browser, server, axe):
    # The audit must be able to fail: a page with a field that has no label is reported.
    tab = browser.new_page()
    try:
        tab.goto(f"{server}/search.html", wait_until="load")
        tab.evaluate("() => document.body.append(document.createElement('input'))")
        ids = [v["id"] for v in run_axe(tab, axe)["violations"]]
    finally:
        tab.close()
    assert "label" in ids


_STATE = """(select) => {
  const gd = select.closest('figure.explorer').querySelector('.plotly-graph-div');
  const [kind, i] = select.dataset.control.split(' ');
  const control = kind === 'menu' ? gd.layout.updatemenus[i] : gd.layout.sliders[i];
  const ranges = Object.keys(gd.layout).filter((k) => /axis/.test(k))
    .map((k) => gd.layout[k].range);
  return {active: control.active || 0, data: JSON.stringify([gd.data.map(
    (t) => [t.visible, t.z, t.y]), ranges])};
}"""


def test_explorer_controls_work_from_the_keyboard(browser, server, html_dir):
    # Every plotly control of every explorer has a <select> under the figure; choosing another
    # entry with the keyboard alone moves plotly's own control and changes what is drawn.
    pages = [
        page
        for page in page_weights.built_pages(html_dir)
        if 'class="plotly-graph-div"' in (html_dir / page).read_text(encoding="utf-8")
    ]
    # Chapters 03 and 09; the instruments of chapters 02-05 are native controls, operated from
    # the keyboard in test_browser_instruments.py.
    assert len(pages) >= 2, pages
    for page in pages:
        tab = browser.new_page()
        tab.set_default_timeout(120_000)
        try:
            tab.goto(f"{server}/{page}", wait_until="load")
            tab.wait_for_selector("figure.explorer .explorer-keyboard select", state="attached")
            selects = tab.locator("figure.explorer .explorer-keyboard select")
            n_controls = tab.evaluate(
                "() => [...document.querySelectorAll('figure.explorer .plotly-graph-div')]"
                ".reduce((n, gd) => n + (gd.layout.updatemenus || []).length"
                " + (gd.layout.sliders || []).length, 0)"
            )
            assert selects.count() == n_controls, page
            for k in range(selects.count()):
                select = selects.nth(k)
                assert select.evaluate("(s) => s.labels.length === 1 && !!s.labels[0].textContent")
                before = select.evaluate(_STATE)
                select.focus()
                tab.keyboard.press("ArrowDown" if before["active"] == 0 else "Home")
                tab.wait_for_function(
                    f"(s) => ({_STATE})(s).active !== {before['active']}",
                    arg=select.element_handle(),
                )
                after = select.evaluate(_STATE)
                assert after["data"] != before["data"], (page, k)
                assert select.evaluate("(s) => s.selectedIndex") == after["active"]
        finally:
            tab.close()


@pytest.fixture(scope="module")
def weights(browser, server, html_dir):
    rows, gone = page_weights.measure(browser, server, html_dir)
    return rows, gone


def test_every_page_is_within_the_weight_budget(weights):
    rows, gone = weights
    assert not gone, gone
    assert len(rows) >= 20
    problems = page_weights.over_budget(rows)
    assert not problems, page_weights.table(rows) + "\n" + "\n".join(problems)


def test_no_page_loads_the_full_icon_font_or_script(weights):
    rows, _ = weights
    for r in rows:
        heavy = [f for f in r["fetched"] if f.endswith(("fa-solid-900.woff2", "fontawesome.js"))]
        assert not heavy, (r["page"], heavy)
        assert "_static/vendor/fontawesome/webfonts/fa-solid-900.subset.woff" in r["fetched"] or (
            r["page"] == "index.html"  # a redirect to the first page
        ), r["page"]


def test_shared_assets_are_cached_across_pages(weights):
    rows, _ = weights
    # Sanity of the measure itself: a first visit costs more than the next page everywhere.
    for r in rows:
        assert r["next_page"] < r["first_visit"], r
