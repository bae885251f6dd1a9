"""One chapter in headless Chromium, as a reader would, with the network unavailable: its math
and figures, and its width on a phone (every page's own checks are in test_browser_pages.py).

Uses Debian's Chromium (``/usr/bin/chromium``, or ``CHROMIUM_PATH``) driven by Playwright;
nothing downloads a browser. Without Chromium the tests skip, except with CI=true, where they fail.
"""

from __future__ import annotations

from support.browser import SCREENSHOTS, Tab


def test_pattern_chapter_math_and_figures(browser, server):
    visit = Tab(browser, server)
    visit.goto("notebooks_src/chapters/02_scaled_dot_product_attention.html", idle=True)
    page = visit.page
    page.evaluate("() => MathJax.startup.promise")
    assert page.locator("mjx-container").count() >= 5
    figures = page.locator("figure img")
    assert figures.count() >= 3
    for i in range(figures.count()):
        assert figures.nth(i).evaluate("img => img.naturalWidth") > 100
    # A phone-width reader: the page itself must not scroll sideways.
    page.set_viewport_size({"width": 375, "height": 800})
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    page.screenshot(path=str(SCREENSHOTS / "chapter_02_phone.png"), full_page=False)
    assert overflow <= 1, f"page overflows a 375 px viewport by {overflow}px"
    page.close()
