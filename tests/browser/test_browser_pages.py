"""Every built page, opened once in headless Chromium, as a reader would, offline, in both themes.

The visit, in the light theme, records all that the page's checks read: console errors, requests
that would leave the machine, resources that answer 404, math typeset by the book's own MathJax,
images loaded, a screenshot of the first screen (``tests/screenshots/``, ignored by git), what the
page downloads (``support.page_weights``), axe-core's WCAG 2.0/2.1 A and AA violations once its
scripts have finished (MathJax typeset, quizzes and instruments drawn), the tables that scroll
sideways at 1280 and 390 px and whether a line says so, and, at a phone's width, display
equations cut by their own sideways scroll; on a chapter with a quiz, the quiz answered
wrongly and then rightly (``support.quizzes``). Then, back at the desktop width, the page is
switched to the dark theme with the theme's own button, as a reader switches it, and the visit
records axe-core's violations and the page's errors there. Opening each page once, instead of once
per check or per theme, is most of what the browser stage saves (a page takes seconds to settle:
MathJax, plotly, fonts). A page opened in the dark theme (the reader's stored choice) is the same
CSS under the same ``data-theme`` attribute: the instruments' and the print tests open pages
that way.

One test per page and theme, a pytest-xdist group per page, so a failure names its page and
theme and the visits spread over the workers; each visit is stored for the session
(``recorded``), so the book-wide checks (the download budget, what pages share) read the same
visits.

Uses Debian's Chromium (``/usr/bin/chromium``, or ``CHROMIUM_PATH``) driven by Playwright;
nothing downloads a browser. Without Chromium the tests skip, except with CI=true, where they fail.
"""

from __future__ import annotations

import fcntl
import functools
import json
import warnings
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from support import page_weights, quizzes
from support.accessibility import BLOCKING, run_axe
from support.browser import CHOOSE_THEME, DESKTOP, PHONE, SCREENSHOTS, Tab
from support.paths import HTML
from support.prerequisites import missing

# Rules this stack cannot satisfy, each with the reason and the upstream issue. Empty: every
# rule is met at its cause (see book/_templates/, book/_static/custom.css, attention_lab.book.quiz).
NOT_FIXABLE: dict[str, str] = {}

# Display equations wider than their column: pydata-sphinx-theme gives each ``div.math``
# ``overflow: hidden`` and its ``mjx-container`` ``overflow: auto``, so an equation wider than the
# column is cut and a phone reader sees half a formula.
CUT_EQUATIONS = """() => [...document.querySelectorAll('main div.math mjx-container')]
    .filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => `${c.closest('div.math').id}: ${c.scrollWidth} in ${c.clientWidth}`)"""
BROKEN_IMAGES = """() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
    .map(i => i.getAttribute('src'))"""
# Every table in the article: whether it scrolls sideways in its box, and whether the line that
# says so (book/_static/focusable_scroll.js) is shown; read two frames after a resize, when the
# script's ResizeObserver has run.
TABLES = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() =>
    done([...document.querySelectorAll('.bd-article table')].map((table, i) => {
        const line = table.previousElementSibling;
        return {
            table: `${table.closest('section[id]')?.id ?? ''} table ${i + 1}`,
            scrolls: table.scrollWidth > table.clientWidth + 1,
            hinted: !!line && line.classList.contains('table-scroll-hint')
                && line.offsetParent !== null,
        };
    })))))"""
QUIZZES_DRAWN = (
    "() => [...document.querySelectorAll('[id^=quiz_]')].every((q) => q.querySelector('.Quiz'))"
)
# Every instrument on the page has drawn itself at its defaults (book/_static/instruments/).
INSTRUMENTS_DRAWN = """() => [...document.querySelectorAll('.instrument-body[data-instrument]')]
    .every((el) => window.attentionInstruments?.[el.dataset.instrument]?.runs > 0)"""


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


# The theme's switch cycles through its modes (light, dark and the system's, in an order that
# depends on the system's): pressed until the page is dark, at most once per mode. A press sets
# the mode at once (pydata-sphinx-theme's click handler), so nothing here waits on the page.
SWITCH_TO_DARK = """() => {
    const button = document.querySelector('.theme-switch-button');
    for (let k = 0; k < 3 && document.documentElement.dataset.mode !== 'dark'; k++) {
        button.click();
    }
    return [document.documentElement.dataset.mode, document.documentElement.dataset.theme];
}"""


TRANSITIONS_DONE = """() => !document.getAnimations()
    .some((a) => a instanceof CSSTransition && a.playState === 'running')"""


def visit(context, base: str, html_dir, axe, path: str, again: bool = True) -> dict[str, dict]:
    """Open ``path`` once, in the light theme, and record what every per-page check reads; then
    switch it to the dark theme and record its errors and axe-core's violations there.
    Returns ``{"light": ..., "dark": ...}``.

    If the network is not quiet within two minutes (seen once, on a page that is quiet within
    two seconds alone: a request the browser never finished), the page is opened once more in
    a new tab, with a warning naming the requests still open; a second time fails the test."""
    theme = "light"
    tab = Tab(context, base, timeout=120_000)
    tab.page.add_init_script(CHOOSE_THEME.format(theme))
    found: dict = {"problems": []}
    dark: dict = {"problems": []}
    try:
        try:
            tab.goto(path, idle=True)
        except PlaywrightTimeout as error:
            open_requests = sorted(tab.pending)
            if not again:
                raise AssertionError(f"{path}: still waiting for {open_requests}") from error
            tab.close()
            warnings.warn(
                f"{path} ({theme}): network not quiet in 120 s, still waiting for "
                f"{open_requests}; opened again in a new tab",
                stacklevel=1,
            )
            return visit(context, base, html_dir, axe, path, again=False)
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
        page.wait_for_function(INSTRUMENTS_DRAWN)
        problems = found["problems"]
        typeset = page.locator("mjx-container").count()
        if typeset < n_math:
            problems.append(f"{n_math} math elements, {typeset} typeset")
        if page.locator("mjx-merror").count():
            problems.append(f"{page.locator('mjx-merror').count()} MathJax errors")
        problems += [f"image did not load: {src}" for src in page.evaluate(BROKEN_IMAGES)]
        found["files"], found["missing"] = page_weights.files_of(html_dir, path, list(tab.requests))
        found["violations"] = _violations(run_axe(page, axe))
        SCREENSHOTS.mkdir(exist_ok=True)
        name = path.replace("/", "__").removesuffix(".html")
        # The first screen only: a full-page screenshot of the longest pages takes longer than
        # the rest of their visit (22 s for the API reference on the 2-core machine).
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        # Its quiz, answered wrongly and then rightly (after axe, which audits the page as it
        # opens; at the desktop width).
        quiz = QUIZ_OF.get(path)
        if quiz is not None:
            try:
                quizzes.grade(page, quiz)
                found["quiz"] = "graded"
            except AssertionError as error:
                found["quiz"] = f"{type(error).__name__}: {error}"
        found["tables"] = {"1280": page.evaluate(TABLES)}
        page.set_viewport_size(PHONE)
        page.wait_for_function(f"() => window.innerWidth === {PHONE['width']}")
        found["tables"]["390"] = page.evaluate(TABLES)
        if n_math:
            found["cut"] = page.evaluate(CUT_EQUATIONS)
        found["problems"] += _tab_problems(tab)
        # The dark theme, switched to as a reader switches it, at the desktop width again.
        seen = len(tab.errors), len(tab.outside), len(tab.failed), len(tab.unfinished)
        page.set_viewport_size(DESKTOP)
        page.wait_for_function(f"() => window.innerWidth === {DESKTOP['width']}")
        mode = page.evaluate(SWITCH_TO_DARK)
        assert mode == ["dark", "dark"], (path, "the theme's switch left", mode)
        # The theme eases some colours into the new mode (the search button's text): audited
        # mid-way, they read as too little contrast, so axe waits for every CSS transition.
        page.wait_for_function(TRANSITIONS_DONE, polling=50, timeout=30_000)
        dark["violations"] = _violations(run_axe(page, axe))
        dark["problems"] += _tab_problems(tab, *seen)
    finally:
        tab.close()
    return {"light": found, "dark": dark}


def _tab_problems(tab, errors=0, outside=0, failed=0, unfinished=0) -> list[str]:
    """What went wrong in ``tab`` (after the counts given of each kind): errors, requests that
    would have left the machine, responses of 400 or more, requests that got no response."""
    return [
        *tab.errors[errors:],
        *(f"request left the machine: {u}" for u in tab.outside[outside:]),
        *tab.failed[failed:],
        *tab.unfinished[unfinished:],
    ]


# Each visit is stored (one JSON file per page and theme) in a folder shared by the pytest-xdist
# workers of this session, under a lock: the per-page tests and the book-wide ones read the same
# visit, whichever worker made it, and no page is opened twice.
@pytest.fixture(scope="session")
def visits_dir(tmp_path_factory, worker_id) -> Path:
    """This session's folder: under xdist the workers' base folders share a parent made for the
    session; without xdist (``worker_id`` "master") the parent is shared by every session."""
    base = tmp_path_factory.getbasetemp()
    return (base if worker_id == "master" else base.parent) / "page-visits"


@pytest.fixture(scope="module")
def recorded(visits_dir, browser, server, html_dir, axe):
    """``recorded(path, theme)``: what the one visit of ``path`` recorded in ``theme``."""

    def get(path: str, theme: str) -> dict:
        name = path.replace("/", "__") + ".json"
        visits_dir.mkdir(parents=True, exist_ok=True)
        with open(visits_dir / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (visits_dir / theme / name).is_file():
                for shown, found in visit(browser, server, html_dir, axe, path).items():
                    found["files"] = sorted(str(f) for f in found.get("files", ()))
                    (visits_dir / shown).mkdir(exist_ok=True)
                    (visits_dir / shown / name).write_text(json.dumps(found))
        return json.loads((visits_dir / theme / name).read_text())

    return get


# The pages are known at collection from the built book; before a build, one placeholder that
# asks for it (skipped locally, failed under CI=true: an empty parametrisation proves nothing).
PAGES = page_weights.built_pages(HTML) if (HTML / "index.html").is_file() else ["(not built)"]


@functools.cache
def _built(html_dir: Path) -> frozenset[str]:
    return frozenset(page_weights.built_pages(html_dir))  # listed once per worker, not per test


def _page(path: str, html_dir) -> str:
    assert path in _built(html_dir), f"{path} is no longer built: rerun pytest"
    return path


# Each page a group of its own (conftest.py would put the module on one worker), so the visits
# spread over the workers, and a page's two themes on the worker that visits it.
def _per_page():
    return [pytest.param(p, marks=pytest.mark.xdist_group(f"page-{p}")) for p in PAGES]


@pytest.mark.parametrize("path", _per_page())
def test_the_page_in_the_light_theme(recorded, html_dir, path):
    """Renders offline without errors, no serious axe violation, and at 390 px no display
    equation hides part of itself behind its own sideways scroll (long equations are broken
    into ``aligned`` lines, and on a phone the equation number moves under the equation:
    book/_static/custom.css). At 1280 and at 390 px, a line above each table says it scrolls
    sideways exactly while it does (book/_static/focusable_scroll.js)."""
    found = recorded(_page(path, html_dir), "light")
    assert not found["problems"], "\n".join(found["problems"])
    assert not _serious(found, "light"), "\n".join(_serious(found, "light"))
    assert not found.get("cut"), "\n".join(found.get("cut", []))
    unsaid = [
        f"at {width} px, {t['table']}: "
        + (
            "scrolls sideways and no line says so"
            if t["scrolls"]
            else "fits, yet a line says it scrolls"
        )
        for width, tables in found["tables"].items()
        for t in tables
        if t["scrolls"] != t["hinted"]
    ]
    assert not unsaid, "\n".join(unsaid)


@pytest.mark.parametrize("path", _per_page())
def test_the_page_in_the_dark_theme(recorded, html_dir, path):
    """No errors and no serious axe violation in the dark theme either, once the theme's own
    switch has turned the page dark (at the desktop width)."""
    found = recorded(_page(path, html_dir), "dark")
    assert not found["problems"], "\n".join(found["problems"])
    assert not _serious(found, "dark"), "\n".join(_serious(found, "dark"))


QUIZ_OF = {quizzes.page_of(q): q for q in quizzes.QUIZZES}


# In its page's group: it reads the visit the page's tests made, on the same worker.
@pytest.mark.parametrize(
    "quiz_file",
    [
        pytest.param(q, id=q.stem, marks=pytest.mark.xdist_group(f"page-{page}"))
        for page, q in QUIZ_OF.items()
    ],
)
def test_the_chapter_s_quiz_grades_in_the_static_page(recorded, html_dir, quiz_file):
    """Every quiz in notebooks_src/quizzes/ is on its chapter's page and grades there with no
    kernel (support.quizzes.grade, in the page's light visit): each question's wrong and right
    answers show their own feedback, marked by a tick or a cross spoken as a word, not by colour
    alone. No error and no request leaving the machine meanwhile (the page's light test)."""
    path = quizzes.page_of(quiz_file)
    if not (html_dir / path).is_file():
        missing(f"{path} is not built: add the chapter to _toc.yml and run `make book`")
    found = recorded(path, "light")
    assert found.get("quiz") == "graded", found.get("quiz", "no quiz graded in the visit")


def _serious(found: dict, theme: str) -> list[str]:
    return [
        f"{theme}: {v['impact']} {v['id']} ({v['help']}) at {json.dumps(v['nodes'][:3])}"
        for v in found["violations"]
        if v["impact"] in BLOCKING and v["id"] not in NOT_FIXABLE
    ]


# The book-wide checks read every page's light visit; they come last (conftest.py), when the
# per-page tests have stored most visits.
book_wide = pytest.mark.xdist_group("browser-pages-book-wide")


@pytest.fixture(scope="module")
def light(recorded, html_dir) -> dict[str, dict]:
    pages = page_weights.built_pages(html_dir)
    assert len(pages) >= 20, pages
    return {path: recorded(path, "light") for path in pages}


@book_wide
def test_tables_that_scroll_on_a_phone_were_found(light):
    """The per-page check of the scroll line is not vacuous: at 390 px some tables do scroll
    (52 across the book, 9 of them in Part VI, when the line was added; chapter 16's capacity
    table among them)."""
    scrolling = [
        f"{path}: {t['table']}"
        for path, found in light.items()
        for t in found["tables"]["390"]
        if t["scrolls"]
    ]
    assert len(scrolling) >= 8, scrolling
    assert any("16_sharing" in s for s in scrolling), scrolling


@book_wide
def test_display_equations_were_measured_at_a_phone_width(light):
    with_math = [p for p, found in light.items() if "cut" in found]
    assert len(with_math) >= 8, with_math


@pytest.fixture(scope="module")
def weights(light, html_dir):
    per_page = {path: {Path(f) for f in found["files"]} for path, found in light.items()}
    gone = [item for found in light.values() for item in found["missing"]]
    return page_weights.weigh(html_dir, per_page), gone


@book_wide
def test_every_page_is_within_the_weight_budget(weights):
    rows, gone = weights
    assert not gone, gone
    assert len(rows) >= 20
    problems = page_weights.over_budget(rows)
    assert not problems, page_weights.table(rows) + "\n" + "\n".join(problems)


@book_wide
def test_no_page_loads_the_full_icon_font_or_script(weights):
    rows, _ = weights
    for r in rows:
        heavy = [f for f in r["fetched"] if f.endswith(("fa-solid-900.woff2", "fontawesome.js"))]
        assert not heavy, (r["page"], heavy)
        assert "_static/vendor/fontawesome/webfonts/fa-solid-900.subset.woff" in r["fetched"] or (
            r["page"] == "index.html"  # a redirect to the first page
        ), r["page"]


@book_wide
def test_shared_assets_are_cached_across_pages(weights):
    rows, _ = weights
    # Sanity of the measure itself: a first visit costs more than the next page everywhere.
    for r in rows:
        assert r["next_page"] < r["first_visit"], r
