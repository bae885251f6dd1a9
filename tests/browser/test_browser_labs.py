"""The labs in headless Chromium, as a learner reads them in the built book.

For every lab page: the solution is folded until its toggle is clicked, and its code is then
shown; the hints are folded until opened; the stub's check failure and the solution's one-line
success message are on the page, visible; the browser reports no error. A screenshot of each lab
with its solution open goes to tests/screenshots/.
"""

from __future__ import annotations

import pytest

from support import labs
from support.browser import SCREENSHOTS, Tab

# Each lab page and the (first) learner's function its stub defines.
LABS = {name: labs.read(name).functions[0] for name in labs.NAMES}


@pytest.fixture
def open_lab(browser, server, html_dir):
    """Open a lab page; collect console errors, page errors and failed requests."""
    tabs = []

    def visit(name: str):
        path = f"notebooks_src/labs/{name}.html"
        assert (html_dir / path).is_file(), f"{path} is not in the built book (_toc.yml?)"
        tab = Tab(browser)
        tab.page.goto(f"{server}/{path}", wait_until="load", timeout=90_000)
        # sphinx-togglebutton adds the solution's toggle button once the page has loaded.
        tab.page.locator(".solution.dropdown button.toggle-button").wait_for(timeout=30_000)
        tabs.append(tab)
        return tab.page

    def problems() -> list[str]:
        return [p for tab in tabs for p in tab.errors + tab.failed]

    yield visit, problems
    for tab in tabs:
        tab.close()


@pytest.mark.parametrize("name", sorted(LABS))
def test_lab_solution_is_folded_and_the_check_passes_visibly(name, open_lab):
    visit, problems = open_lab
    page = visit(name)
    function = LABS[name]

    # The stub's check fails, visibly, with the advice to replace the stub.
    stub_failure = page.locator(".cell_output", has_text="it is still the").first
    assert stub_failure.is_visible()
    assert f"{function} raised NotImplementedError" in stub_failure.inner_text()

    # The solution: one folded admonition whose code is hidden until its toggle is clicked.
    solution = page.locator(".solution.dropdown")
    assert solution.count() == 1
    code = solution.locator(".cell_input").first
    assert code.count() == 1, "the solution holds the code cell"
    assert f"def {function}(" in code.inner_text() or f"def {function}(" in code.text_content()
    assert not code.is_visible(), "the solution is shown before its toggle is clicked"
    solution.locator("button.toggle-button").click()
    code.wait_for(state="visible", timeout=5_000)
    assert "NotImplementedError" not in code.inner_text()

    # After the solution, the check's one-line success message is on the page, visible.
    success = page.locator(".cell_output", has_text=f"✓ {function} matches the library on all")
    assert success.count() == 1
    assert success.is_visible()
    assert success.inner_text().strip().count("\n") == 0, "one line"

    # Hints are folded until opened.
    hints = page.locator("details.sd-dropdown")
    assert hints.count() >= 3
    first = hints.first
    assert first.get_attribute("open") is None
    body = first.locator(".sd-summary-content")
    assert not body.is_visible()
    first.locator("summary").click()
    body.wait_for(state="visible", timeout=5_000)

    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"lab_{name}.png"), full_page=True)
    assert not problems(), "\n".join(problems())
