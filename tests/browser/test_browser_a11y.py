"""Accessibility beyond what each page's visit records (tests/browser/test_browser_pages.py runs
axe-core on every page in both themes, and weighs it): the audit can fail, and the explorers'
controls work from the keyboard.

axe-core is pinned in package.json and installed into node_modules/ by ``make book``.
"""

from __future__ import annotations

from support import page_weights
from support.accessibility import run_axe


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
