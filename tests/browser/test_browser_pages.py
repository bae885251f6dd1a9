"""Every built page, opened once per theme in headless Chromium, as a reader would, offline.

One visit in the light theme records all that the per-page checks read: console errors, requests
that would leave the machine, resources that answer 404, math typeset by the book's own MathJax,
images loaded, a screenshot of the first screen (``tests/screenshots/``, ignored by git), what the
page downloads (``support.page_weights``), axe-core's WCAG 2.0/2.1 A and AA violations once its
scripts have finished (MathJax typeset, quizzes and explorers drawn) and, at a phone's width,
display equations cut by their own sideways scroll. One visit in the dark theme records axe-core's
violations there. Opening each page once per theme, instead of once per check, is most of what the
browser stage costs (a page takes seconds to settle: MathJax, plotly, fonts).

Uses Debian's Chromium (``/usr/bin/chromium``, or ``CHROMIUM_PATH``) driven by Playwright;
nothing downloads a browser. Without Chromium the tests skip, except with CI=true, where they fail.
"""

from __future__ import annotations

import json

import pytest

from support import page_weights
from support.accessibility import BLOCKING, run_axe
from support.browser import CHOOSE_THEME, PHONE, SCREENSHOTS, Tab

# Rules this stack cannot satisfy, each with the reason and the upstream issue. Empty: every
# rule is met at its cause (see book/_templates/, book/_static/custom.css, attention_lab.quiz).
NOT_FIXABLE: dict[str, str] = {}

# Display equations wider than their column: pydata-sphinx-theme gives each ``div.math``
# ``overflow: hidden`` and its ``mjx-container`` ``overflow: auto``, so an equation wider than the
# column is cut and a phone reader sees half a formula.
CUT_EQUATIONS = """() => [...document.querySelectorAll('main div.math mjx-container')]
    .filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => `${c.closest('div.math').id}: ${c.scrollWidth} in ${c.clientWidth}`)"""
BROKEN_IMAGES = """() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
    .map(i => i.getAttribute('src'))"""
QUIZZES_DRAWN = (
    "() => [...document.querySelectorAll('[id^=quiz_]')].every((q) => q.querySelector('.Quiz'))"
)


def _violations(result: dict) -> list[dict]:
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [n["target"] for n in v["nodes"]],
        }
        for v in result["violations"]
    ]


def visit(context, base: str, html_dir, axe, path: str, theme: str) -> dict:
    """Open ``path`` once in ``theme`` and record what every per-page check reads."""
    tab = Tab(context, base, timeout=120_000)
    tab.page.add_init_script(CHOOSE_THEME.format(theme))
    found: dict = {"problems": []}
    try:
        tab.goto(path, idle=True)
        page = tab.page
        shown = page.evaluate("() => document.documentElement.dataset.theme")
        assert shown == theme, (path, shown)
        n_math = page.locator(".math").count()
        if n_math:
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                " && document.querySelectorAll('mjx-container').length > 0"
            )
        page_weights.settle(tab)  # MathJax done, its fonts fetched
        page.wait_for_function(QUIZZES_DRAWN)
        if theme == "light":
            problems = found["problems"]
            typeset = page.locator("mjx-container").count()
            if typeset < n_math:
                problems.append(f"{n_math} math elements, {typeset} typeset")
            if page.locator("mjx-merror").count():
                problems.append(f"{page.locator('mjx-merror').count()} MathJax errors")
            problems += [f"image did not load: {src}" for src in page.evaluate(BROKEN_IMAGES)]
            found["files"], found["missing"] = page_weights.files_of(
                html_dir, path, list(tab.requests)
            )
        found["violations"] = _violations(run_axe(page, axe))
        if theme == "light":
            SCREENSHOTS.mkdir(exist_ok=True)
            name = path.replace("/", "__").removesuffix(".html")
            # The first screen only: a full-page screenshot of the longest pages takes longer
            # than the rest of their visit (22 s for the API reference on the 2-core machine).
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
            if n_math:
                page.set_viewport_size(PHONE)
                page.wait_for_function(f"() => window.innerWidth === {PHONE['width']}")
                found["cut"] = page.evaluate(CUT_EQUATIONS)
        found["problems"] += tab.errors
        found["problems"] += [f"request left the machine: {u}" for u in tab.outside]
        found["problems"] += tab.failed + tab.unfinished
    finally:
        tab.close()
    return found


def _visit_all(browser, server, html_dir, axe, theme: str) -> dict[str, dict]:
    pages = page_weights.built_pages(html_dir)
    assert len(pages) >= 20, pages
    return {path: visit(browser, server, html_dir, axe, path, theme) for path in pages}


# One fixture per theme, and the tests of each theme in an xdist group of their own, so the two
# themes' visits run on the two workers at once (conftest.py groups any other test by module).
@pytest.fixture(scope="module")
def light(browser, server, html_dir, axe) -> dict[str, dict]:
    """page -> what its one visit in the light theme recorded."""
    return _visit_all(browser, server, html_dir, axe, "light")


@pytest.fixture(scope="module")
def dark(browser, server, html_dir, axe) -> dict[str, dict]:
    """page -> what its one visit in the dark theme recorded."""
    return _visit_all(browser, server, html_dir, axe, "dark")


in_light = pytest.mark.xdist_group("browser-pages-light")
in_dark = pytest.mark.xdist_group("browser-pages-dark")


@in_light
def test_every_page_renders_offline_without_errors(light):
    problems = [
        f"{path}: {problem}" for path, found in light.items() for problem in found["problems"]
    ]
    assert not problems, "\n".join(problems)


@in_dark
def test_the_dark_theme_raises_no_errors_either(dark):
    problems = [f"{path}: {issue}" for path, found in dark.items() for issue in found["problems"]]
    assert not problems, "\n".join(problems)


def _serious(visits: dict[str, dict], theme: str) -> list[str]:
    return [
        f"{theme} {path}: {v['impact']} {v['id']} ({v['help']}) at {json.dumps(v['nodes'][:3])}"
        for path, found in visits.items()
        for v in found["violations"]
        if v["impact"] in BLOCKING and v["id"] not in NOT_FIXABLE
    ]


@in_light
def test_axe_finds_no_serious_violation_on_any_page_in_the_light_theme(light):
    problems = _serious(light, "light")
    assert not problems, "\n".join(problems)


@in_dark
def test_axe_finds_no_serious_violation_on_any_page_in_the_dark_theme(dark):
    problems = _serious(dark, "dark")
    assert not problems, "\n".join(problems)


@in_light
def test_display_equations_fit_a_phone_column(light):
    """At 390 px no display equation hides part of itself behind its own sideways scroll.

    Long equations are broken into ``aligned`` lines, and on a phone the equation number moves
    under the equation (book/_static/custom.css).
    """
    with_math = [p for p, found in light.items() if "cut" in found]
    assert len(with_math) >= 8, with_math
    problems = [f"{path}: {item}" for path in with_math for item in light[path]["cut"]]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def weights(light, html_dir):
    per_page = {path: found["files"] for path, found in light.items()}
    gone = [item for found in light.values() for item in found["missing"]]
    return page_weights.weigh(html_dir, per_page), gone


@in_light
def test_every_page_is_within_the_weight_budget(weights):
    rows, gone = weights
    assert not gone, gone
    assert len(rows) >= 20
    problems = page_weights.over_budget(rows)
    assert not problems, page_weights.table(rows) + "\n" + "\n".join(problems)


@in_light
def test_no_page_loads_the_full_icon_font_or_script(weights):
    rows, _ = weights
    for r in rows:
        heavy = [f for f in r["fetched"] if f.endswith(("fa-solid-900.woff2", "fontawesome.js"))]
        assert not heavy, (r["page"], heavy)
        assert "_static/vendor/fontawesome/webfonts/fa-solid-900.subset.woff" in r["fetched"] or (
            r["page"] == "index.html"  # a redirect to the first page
        ), r["page"]


@in_light
def test_shared_assets_are_cached_across_pages(weights):
    rows, _ = weights
    # Sanity of the measure itself: a first visit costs more than the next page everywhere.
    for r in rows:
        assert r["next_page"] < r["first_visit"], r
