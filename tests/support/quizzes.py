"""The chapter quizzes in a tab, used as a reader would (tests/browser/test_browser_pages.py).

For every quiz file in notebooks_src/quizzes/ the chapter page of the same name must show the
quiz, every question of it, and grade in the browser with no kernel: a wrong choice and then the
right one show their own feedback, marked incorrect and correct; a wrong and then the right number,
typed and confirmed with Enter, likewise. :func:`grade` does this in a page already open (the
page's one visit in the light theme) and writes a screenshot of the quiz to tests/screenshots/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.browser import SCREENSHOTS
from support.paths import ROOT

QUIZZES = sorted((ROOT / "notebooks_src" / "quizzes").glob("*.json"))


def page_of(quiz_file: Path) -> str:
    """The built chapter a quiz belongs to: ``notebooks_src/chapters/<stem>.html``."""
    return f"notebooks_src/chapters/{quiz_file.stem}.html"


def plain(text: str) -> str | None:
    """The text a reader sees for a feedback string, or None if MathJax will typeset it."""
    if "$" in text:
        return None
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def type_number(page, box, value) -> None:
    box.click()  # jupyterquiz clears the box on focus
    box.press_sequentially(str(value))
    box.press("Enter")


# What check_feedback reads of a feedback element, in one round trip to the page (a quiz has up
# to a dozen answers to check; read attribute by attribute they took about a second a quiz), once
# the element carries the class expected (looked at every 20 ms, for at most 10 s; if it never
# does, the class check below names what it has). Visible as Playwright means it: a box of some
# size, not visibility:hidden.
_FEEDBACK_STATE = """(el, expected) => new Promise((resolve) => {
    const start = performance.now();
    const look = () => {
        if (!el.classList.contains(expected) && performance.now() - start < 10000) {
            setTimeout(look, 20);
            return;
        }
        const box = el.getBoundingClientRect();
        resolve({classes: [...el.classList], role: el.getAttribute('role'),
                 visible: box.width > 0 && box.height > 0
                     && getComputedStyle(el).visibility !== 'hidden',
                 marker: getComputedStyle(el, '::before').content, text: el.innerText});
    };
    look();
})"""


def check_feedback(feedback, expected_class: str, text: str) -> None:
    state = feedback.evaluate(_FEEDBACK_STATE, expected_class)
    classes = state["classes"]
    assert expected_class in classes, f"feedback is {classes}, expected {expected_class}"
    assert state["visible"]
    # Not by colour alone: a tick or a cross before the feedback, spoken as a word.
    marker = state["marker"]
    symbol, spoken = (
        ("\u2713", "Correct.") if expected_class == "correct" else ("\u2717", "Incorrect.")
    )
    assert symbol in marker and spoken in marker, marker
    assert state["role"] == "status"
    shown = plain(text)
    if shown is not None:
        assert state["text"].strip() == shown.strip()
    else:
        assert state["text"].strip()


def a_number_in(answer: dict) -> float:
    if "value" in answer:
        return answer["value"]
    low, high = answer["range"]
    return round((low + high) / 2, 6)


def grade(page, quiz_file: Path) -> None:
    """Answer every question of ``quiz_file`` wrongly, then rightly, in ``page`` (the chapter,
    open and loaded), checking each feedback; raises AssertionError at the first that fails."""
    stem = quiz_file.stem
    questions = json.loads(quiz_file.read_text(encoding="utf-8"))
    container = page.locator(f"#quiz_{stem}")
    assert container.count() == 1, f"no quiz container #quiz_{stem}"
    # The quiz fills its container once the page has loaded and MathJax has typeset.
    page.wait_for_function(
        "([id, n]) => document.querySelectorAll(`#${id} .Quiz`).length === n",
        arg=[f"quiz_{stem}", len(questions)],
        timeout=30_000,
    )
    wrappers = container.locator(".Quiz")

    for index, question in enumerate(questions):
        wrapper = wrappers.nth(index)
        feedback = wrapper.locator(".Feedback")
        if question["type"] == "multiple_choice":
            buttons = wrapper.locator("label.MCButton")
            assert buttons.count() == len(question["answers"])
            wrong = next(a for a in question["answers"] if not a["correct"])
            right = next(a for a in question["answers"] if a["correct"])
            for answer, verdict in [(wrong, "incorrect"), (right, "correct")]:
                # Answers are shuffled on every load: find the button by its feedback.
                button = _button_with_feedback(wrapper, answer["feedback"])
                button.click()
                check_feedback(feedback, verdict, answer["feedback"])
                assert f"{verdict}Button" in button.get_attribute("class").split()
        else:
            box = wrapper.locator("input.Input-text")
            assert box.count() == 1
            # The field is named by its label and described by its question.
            assert box.evaluate("(b) => b.labels.length") == 1
            described = box.get_attribute("aria-describedby")
            assert described and wrapper.locator(f"#{described}").inner_text().strip()
            wrong = next((a for a in question["answers"] if a.get("correct") is False), None)
            if wrong is not None:
                type_number(page, box, a_number_in(wrong))
                check_feedback(feedback, "incorrect", wrong["feedback"])
            else:
                type_number(page, box, 123456.789)
                check_feedback(feedback, "incorrect", question["answers"][-1]["feedback"])
            right = next(a for a in question["answers"] if a.get("correct") is True)
            type_number(page, box, a_number_in(right))
            check_feedback(feedback, "correct", right["feedback"])

    SCREENSHOTS.mkdir(exist_ok=True)
    container.screenshot(path=str(SCREENSHOTS / f"quiz_{stem}.png"))


def _button_with_feedback(wrapper, feedback: str):
    """The answer button whose data-feedback is ``feedback`` (answers are shuffled)."""
    buttons = wrapper.locator("label.MCButton")
    index = buttons.evaluate_all(
        "(els, f) => els.findIndex((e) => e.dataset.feedback === f)", feedback
    )
    if index < 0:
        raise AssertionError(f"no answer button with feedback {feedback!r}")
    return buttons.nth(index)
