"""Open the built book in headless Chromium, as a reader would, with the network unavailable.

Every page: no console errors, no request leaves the machine, no resource answers 404, math is
typeset by the book's own MathJax, every image loads. Screenshots go to tests/screenshots/
(ignored by git) for an author to look at.

Uses Debian's Chromium (``/usr/bin/chromium``, or ``CHROMIUM_PATH``) driven by Playwright;
nothing downloads a browser. Without Chromium the tests skip, except with CI=true, where they fail.
"""

from __future__ import annotations

import pytest

from support.browser import PHONE, SCREENSHOTS, Tab
from support.page_weights import built_pages

pytestmark = [pytest.mark.book, pytest.mark.browser]


def test_every_page_renders_offline_without_errors(browser, server, html_dir):
    SCREENSHOTS.mkdir(exist_ok=True)
    problems = []
    pages = built_pages(html_dir)
    assert len(pages) >= 5, pages
    for path in pages:
        visit = Tab(browser, server)
        visit.goto(path, idle=True)
        page = visit.page
        n_math = page.locator(".math").count()
        if n_math:
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                " && document.querySelectorAll('mjx-container').length > 0",
                timeout=20_000,
            )
            page.evaluate("() => MathJax.startup.promise")
            typeset = page.locator("mjx-container").count()
            if typeset < n_math:
                problems.append(f"{path}: {n_math} math elements, {typeset} typeset")
            raw = page.locator("mjx-merror").count()
            if raw:
                problems.append(f"{path}: {raw} MathJax errors")
        broken = page.evaluate(
            "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.getAttribute('src'))"
        )
        problems += [f"{path}: image did not load: {src}" for src in broken]
        problems += [f"{path}: {e}" for e in visit.errors]
        problems += [f"{path}: request left the machine: {u}" for u in visit.outside]
        problems += [f"{path}: {f}" for f in visit.failed + visit.unfinished]
        name = path.replace("/", "__").removesuffix(".html")
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
        page.close()
    assert not problems, "\n".join(problems)


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


def test_display_equations_fit_a_phone_column(browser, server, html_dir):
    """At 390 px no display equation hides part of itself behind its own sideways scroll.

    pydata-sphinx-theme gives each ``div.math`` ``overflow: hidden`` and its ``mjx-container``
    ``overflow: auto``: an equation wider than the column does not break the page, it is cut,
    and a phone reader sees half a formula. Long equations are broken into ``aligned`` lines,
    and on a phone the equation number moves under the equation (book/_static/custom.css).
    """
    problems = []
    pages = [
        p for p in built_pages(html_dir) if 'class="math notranslate' in (html_dir / p).read_text()
    ]
    assert len(pages) >= 8, pages
    for path in pages:
        visit = Tab(browser, server)
        visit.goto(path, idle=True)
        page = visit.page
        page.set_viewport_size(PHONE)
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20_000
        )
        page.evaluate("() => MathJax.startup.promise")
        cut = page.evaluate(
            """() => [...document.querySelectorAll('main div.math mjx-container')]
                 .filter(c => c.scrollWidth > c.clientWidth + 1)
                 .map(c => `${c.closest('div.math').id}: ${c.scrollWidth} in ${c.clientWidth}`)"""
        )
        problems += [f"{path}: {item}" for item in cut]
        page.close()
    assert not problems, "\n".join(problems)
