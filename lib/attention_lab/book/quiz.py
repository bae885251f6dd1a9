"""Self-grading quizzes that work in the book's static HTML pages, with no kernel.

A quiz is a JSON file holding a list of questions in the format of ``jupyterquiz``:
multiple choice (exactly one correct answer) and numeric questions. ``show_quiz`` displays one
in a notebook; in the book, the HTML and JavaScript it emits are written into the page, where the
quiz grades the reader's answers in the browser.

``jupyterquiz.display_quiz`` itself emits the same HTML and JavaScript, with three differences
that matter in a static page: its container id is random (every build differs), its ``<div>`` is
left unclosed, and it starts as soon as the browser parses the page. The last one is a race. The
book loads MathJax deferred, after a small configuration object called ``MathJax``;
``jupyterquiz`` sees that object, waits 500 ms and then reads ``MathJax.version``, which is only
there once MathJax has loaded. On a busy machine it is not, and the page throws an error. Here the
quiz starts once the page has loaded and MathJax, if the page uses it, has finished typesetting.

The quiz's own style and script are files beside this module, ``quiz.css`` and ``quiz.js``
(package data, shipped in the wheel), read when a quiz is built. Imports ``jupyterquiz`` and
``IPython`` only when a quiz is displayed.
"""

from __future__ import annotations

import functools
import json
import numbers
import os
import re
from importlib import resources
from pathlib import Path

QUESTION_TYPES = ("multiple_choice", "numeric")
"""The question types used by the book's quizzes."""


def _fail(where: str, message: str) -> None:
    raise ValueError(f"{where}: {message}")


def _check_text(item: dict, key: str, where: str) -> None:
    if not isinstance(item.get(key), str) or not item[key].strip():
        _fail(where, f"needs a non-empty string {key!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_multiple_choice(question: dict, where: str) -> None:
    answers = question.get("answers")
    if not isinstance(answers, list) or len(answers) < 2:
        _fail(where, "a multiple-choice question needs a list of at least 2 'answers'")
    for j, answer in enumerate(answers):
        here = f"{where}, answer {j}"
        if not isinstance(answer, dict):
            _fail(here, "must be an object")
        _check_text(answer, "answer", here)
        _check_text(answer, "feedback", here)
        if not isinstance(answer.get("correct"), bool):
            _fail(here, "needs 'correct': true or false")
    texts = [a["answer"] for a in answers]
    if len(set(texts)) != len(texts):
        _fail(where, "two answers have the same text")
    n_correct = sum(a["correct"] for a in answers)
    if n_correct != 1:
        _fail(where, f"a multiple-choice question needs exactly 1 correct answer, has {n_correct}")


def _check_numeric(question: dict, where: str) -> None:
    precision = question.get("precision")
    if precision is not None and (
        isinstance(precision, bool) or not isinstance(precision, int) or precision < 1
    ):
        _fail(where, f"'precision' must be a positive int, got {precision!r}")
    answers = question.get("answers")
    if not isinstance(answers, list) or not answers:
        _fail(where, "a numeric question needs a non-empty list of 'answers'")
    for j, answer in enumerate(answers):
        here = f"{where}, answer {j}"
        if not isinstance(answer, dict):
            _fail(here, "must be an object")
        kind = answer.get("type")
        _check_text(answer, "feedback", here)
        if kind == "value":
            if not _is_number(answer.get("value")):
                _fail(here, "a 'value' answer needs a number 'value'")
        elif kind == "range":
            bounds = answer.get("range")
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(_is_number(b) for b in bounds)
                and bounds[0] < bounds[1]
            ):
                _fail(here, "a 'range' answer needs 'range': [low, high] with low < high")
        elif kind == "default":
            continue
        else:
            _fail(here, f"'type' must be 'value', 'range' or 'default', got {kind!r}")
        if not isinstance(answer.get("correct"), bool):
            _fail(here, "needs 'correct': true or false")
    if not any(a.get("correct") is True for a in answers):
        _fail(where, "a numeric question needs at least one correct answer")
    if answers[-1].get("type") != "default":
        _fail(where, "a numeric question ends with a 'default' answer (the feedback for the rest)")


def validate_quiz(questions: list) -> None:
    """Check that ``questions`` is a quiz that ``jupyterquiz`` can display and grade.

    Every question needs a ``"question"`` text and a ``"type"`` from :data:`QUESTION_TYPES`.
    A multiple-choice question has at least two ``"answers"``, each with ``"answer"``,
    ``"correct"`` and ``"feedback"``, exactly one of them correct. A numeric question may have
    a ``"precision"`` (significant digits) and has ``"answers"`` of type ``"value"`` or
    ``"range"`` (``[low, high)``), at least one correct, each with feedback, ending with a
    ``"default"`` answer whose feedback covers every other number.

    Args:
        questions: The quiz, as read from its JSON file.

    Raises:
        TypeError: If ``questions`` is not a list.
        ValueError: If the quiz is empty or a question is malformed; the message names the
            question (by number) and what is wrong.
    """
    if not isinstance(questions, list):
        raise TypeError(f"questions must be a list of dicts, got {type(questions).__name__}")
    if not questions:
        raise ValueError("questions must hold at least one question, got an empty list")
    for i, question in enumerate(questions):
        where = f"question {i}"
        if not isinstance(question, dict):
            _fail(where, f"must be an object, got {type(question).__name__}")
        _check_text(question, "question", where)
        kind = question.get("type")
        if kind == "multiple_choice":
            _check_multiple_choice(question, where)
        elif kind == "numeric":
            _check_numeric(question, where)
        else:
            _fail(where, f"'type' must be one of {QUESTION_TYPES}, got {kind!r}")


def load_quiz(path: str) -> list[dict]:
    """Read a quiz from a JSON file and validate it with :func:`validate_quiz`.

    Args:
        path: The quiz file, e.g. ``"../quizzes/02_scaled_dot_product_attention.json"``; a
            ``pathlib.Path`` (any ``os.PathLike``) works too.

    Returns:
        The questions, a list of dicts in ``jupyterquiz``'s format.

    Raises:
        TypeError: If ``path`` is not a string or path.
        FileNotFoundError: If there is no such file.
        ValueError: If the file is not valid JSON or not a valid quiz.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path)
    try:
        questions = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"path={str(path)!r} is not valid JSON: {error}") from None
    try:
        validate_quiz(questions)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path.name}: {error}") from None
    return questions


# quiz.css: right and wrong are not told by colour alone. A tick or a cross goes before the
# feedback and before the chosen answer, read out as "Correct." / "Incorrect." (the text after
# the slash is what assistive technology says in place of the symbol), and the hidden radio
# button's answer gets a focus ring, so the quiz can be followed from the keyboard. Every rule
# starts with "#QUIZ", replaced by the quiz's container id.
#
# quiz.js runs jupyterquiz's script (in place of /*QUIZ*/) once the page has loaded and MathJax,
# if the page has it, is ready; in a notebook, where the page has long loaded, at once.
# jupyterquiz's code, inlined there, reads a global MathJax: where that is no MathJax able to
# typeset (JupyterLab keeps a configuration object of that name), jupyterquiz would load MathJax
# from a CDN. A local name hides such an object from it, so nothing is fetched; the book's
# MathJax, which can typeset, is passed through. /*ID*/ becomes the container id, as a string.
@functools.cache
def _asset(name: str) -> str:
    """The text of ``name``, a file shipped beside this module (``quiz.css`` or ``quiz.js``)."""
    # Read as text, so a checkout with CRLF line ends still emits the same "\n" page.
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _quiz_id(name: str) -> str:
    # The id is also used as a bare JavaScript identifier by jupyterquiz's script.
    return "quiz_" + re.sub(r"\W", "_", name)


def quiz_html_and_script(questions: list[dict], name: str) -> tuple[str, str]:
    """The HTML and the JavaScript that display a quiz in a page.

    Args:
        questions: A quiz, checked with :func:`validate_quiz`.
        name: A name for the quiz, unique in its page, e.g. the chapter's file stem. The quiz's
            container gets the id ``quiz_<name>`` (non-word characters replaced by ``_``), the
            same in every build.

    Returns:
        ``(html, javascript)``: a closed, empty ``<div>`` followed by the quiz's ``<style>``,
        and a script that fills the ``<div>`` once the page has loaded and MathJax (if the page
        loads it) has finished typesetting.

    Raises:
        TypeError: If ``name`` is not a string, or ``questions`` is not a list.
        ValueError: If ``name`` is empty or the quiz is malformed.
    """
    from jupyterquiz.dynamic.loader import load_questions_script
    from jupyterquiz.dynamic.renderer import build_script, build_styles, render_div

    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError("name must be a non-empty string")
    validate_quiz(questions)
    div_id = _quiz_id(name)
    prefix, static, url = load_questions_script(questions, div_id)
    html = (
        render_div(
            div_id,
            shuffle_questions=False,
            shuffle_answers=True,
            preserve_responses=False,
            num=len(questions),
            max_width=600,
            border_radius=10,
            question_alignment="left",
        )
        + "</div>\n"
        + build_styles(div_id, _COLOURS)
        + "<style>\n"
        + _asset("quiz.css").replace("#QUIZ", f"#{div_id}")
        + "</style>\n"
    )
    quiz = build_script(prefix, static, url, div_id, load_js=True)
    script = _asset("quiz.js").replace("/*QUIZ*/", quiz).replace("/*ID*/", json.dumps(div_id))
    return html, script


def show_quiz(quiz: str | list[dict], *, name: str | None = None) -> None:
    """Display a quiz, to be graded in the browser with no kernel.

    Args:
        quiz: A quiz file, a ``str`` or an ``os.PathLike`` (see :func:`load_quiz`), or the
            questions themselves, a list of dicts (a learner's notebook embeds them, so that it
            runs without the quiz file beside it).
        name: Unique name of the quiz in its page; default: the file's stem, or ``"quiz"``
            for a list of questions.

    Raises:
        TypeError: If ``quiz`` or ``name`` has the wrong type.
        FileNotFoundError: If there is no such file.
        ValueError: If the file or the list is not a valid quiz.
    """
    from IPython.display import HTML, Javascript, display

    if isinstance(quiz, list):
        questions, stem = quiz, "quiz"
    else:
        questions, stem = load_quiz(quiz), Path(quiz).stem
    html, script = quiz_html_and_script(questions, stem if name is None else name)
    display(HTML(html))
    display(Javascript(script))


# jupyterquiz's default colours, stated here so that the book's quizzes look the same whatever
# a later jupyterquiz chooses; but for its two verdicts, darkened until their text meets WCAG AA
# (4.5:1): an answered button's #fafafa text on the verdict, and the feedback in the verdict's
# colour on the light page (#ffffff) and on the light panel the dark theme puts behind a cell's
# HTML output (#ced6dd). jupyterquiz's green, #009113, gave 3.98, 4.15 and 2.82; its red, #c80202,
# 4.12 on that panel. Seen once the page visits audited an answered quiz (tests/browser).
_COLOURS = {
    "--jq-multiple-choice-bg": "#392061",
    "--jq-mc-button-bg": "#fafafa",
    "--jq-mc-button-border": "#e0e0e0e0",
    "--jq-mc-button-inset-shadow": "#555555",
    "--jq-many-choice-bg": "#f75c03ff",
    "--jq-numeric-bg": "#392061ff",
    "--jq-numeric-input-bg": "#c0c0c0",
    "--jq-numeric-input-label": "#101010",
    "--jq-numeric-input-shadow": "#999999",
    "--jq-string-bg": "#4c1a57",
    "--jq-incorrect-color": "#b00202",
    "--jq-correct-color": "#006610",
    "--jq-text-color": "#fafafa",
    "--jq-link-color": "#9abafa",
}
