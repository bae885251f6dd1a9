"""attention_lab.book.quiz: validating quiz files, emitting the HTML and script of a static quiz."""

from __future__ import annotations

import copy
import json
import re

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import attention_lab.book
from attention_lab.book.quiz import load_quiz, quiz_html_and_script, show_quiz, validate_quiz

GOOD = [
    {
        "question": "Pick one.",
        "type": "multiple_choice",
        "answers": [
            {"answer": "right", "correct": True, "feedback": "Yes."},
            {"answer": "wrong", "correct": False, "feedback": "No."},
        ],
    },
    {
        "question": "How many?",
        "type": "numeric",
        "precision": 3,
        "answers": [
            {"type": "value", "value": 21, "correct": True, "feedback": "Yes."},
            {"type": "range", "range": [14.5, 15.5], "correct": False, "feedback": "No."},
            {"type": "default", "feedback": "Try again."},
        ],
    },
]


def broken(edit):
    quiz = copy.deepcopy(GOOD)
    edit(quiz)
    return quiz


def test_a_good_quiz_passes():
    assert validate_quiz(copy.deepcopy(GOOD)) is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda q: q.clear(), "at least one question"),
        (lambda q: q[0].pop("question"), "question 0: needs a non-empty string 'question'"),
        (lambda q: q[0].update(type="many_choice"), "question 0: 'type' must be one of"),
        (lambda q: q[0]["answers"][1].update(correct=True), "exactly 1 correct answer, has 2"),
        (lambda q: q[0]["answers"][0].update(correct=False), "exactly 1 correct answer, has 0"),
        (lambda q: q[0]["answers"][1].update(correct="no"), "answer 1: needs 'correct'"),
        (lambda q: q[0]["answers"][1].pop("feedback"), "answer 1: needs a non-empty string"),
        (lambda q: q[0]["answers"].pop(), "at least 2 'answers'"),
        (lambda q: q[0]["answers"][1].update(answer="right"), "same text"),
        (lambda q: q[1].update(precision=0), "'precision' must be a positive int"),
        (lambda q: q[1]["answers"][0].update(value="21"), "needs a number 'value'"),
        (lambda q: q[1]["answers"][0].update(value=True), "needs a number 'value'"),
        (lambda q: q[1]["answers"][1].update(range=[2, 1]), "low < high"),
        (lambda q: q[1]["answers"][1].update(type="interval"), "'type' must be 'value'"),
        (lambda q: q[1]["answers"][0].update(correct=False), "at least one correct answer"),
        (lambda q: q[1]["answers"].pop(), "ends with a 'default' answer"),
    ],
)
def test_malformed_quizzes_are_rejected_with_the_question_named(edit, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        validate_quiz(broken(edit))


def test_wrong_types_raise_type_error():
    with pytest.raises(TypeError, match="questions must be a list"):
        validate_quiz({"question": "x"})
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        load_quiz(42)
    with pytest.raises(TypeError, match="name must be a str"):
        quiz_html_and_script(GOOD, name=3)
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        quiz_html_and_script(GOOD, name="")


def test_load_quiz_reads_validates_and_names_the_file(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    assert load_quiz(good) == GOOD
    assert load_quiz(str(good)) == GOOD
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken(lambda q: q[1]["answers"].pop())))
    with pytest.raises(ValueError, match=r"bad\.json: question 1"):
        load_quiz(bad)
    not_json = tmp_path / "not.json"
    not_json.write_text("[{")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_quiz(not_json)
    with pytest.raises(FileNotFoundError):
        load_quiz(tmp_path / "missing.json")


def test_html_is_a_closed_container_with_a_stable_id():
    html, _ = quiz_html_and_script(GOOD, "02_scaled-dot")
    assert html.startswith('<div id="quiz_02_scaled_dot" ')
    assert html.count("<div") == html.count("</div>") == 1
    assert "<style>" in html and html.rstrip().endswith("</style>")
    # The same quiz gives the same bytes: builds are reproducible.
    assert quiz_html_and_script(GOOD, "02_scaled-dot") == quiz_html_and_script(
        copy.deepcopy(GOOD), "02_scaled-dot"
    )


def test_html_loads_nothing_from_the_network():
    html, _ = quiz_html_and_script(GOOD, "q")
    assert not re.search(r"url\(|@import|https?:", html)


def test_script_holds_the_questions_and_waits_for_the_page_and_mathjax():
    _, script = quiz_html_and_script(GOOD, "q")
    assert "var questionsquiz_q=" in script
    assert json.dumps(GOOD[1]["answers"][0]) in script.replace("\n", "")
    # It starts jupyterquiz after "load" and after MathJax's startup promise, not while the
    # page is still being parsed (the race described in the module's docstring).
    assert 'window.addEventListener("load", whenTypesetterReady)' in script
    assert "mj.startup.promise.then(start)" in script
    assert script.index("function start()") < script.index("show_questions(questionsquiz_q")
    assert script.startswith("(function () {") and script.endswith("})();\n")


def test_show_quiz_displays_html_then_javascript(tmp_path):
    path = tmp_path / "05_masks.json"
    path.write_text(json.dumps(GOOD))
    InteractiveShell.instance()
    try:
        with capture_output() as captured:
            show_quiz(path)
    finally:
        # Later tests (test_book_display) need a process with no IPython shell.
        InteractiveShell.clear_instance()
    data = [output.data for output in captured.outputs]
    assert len(data) == 2
    assert data[0]["text/html"].startswith('<div id="quiz_05_masks"')
    assert "show_questions(questionsquiz_05_masks" in data[1]["application/javascript"]


def test_feedback_is_marked_by_symbol_and_fields_are_labelled():
    html, script = quiz_html_and_script(GOOD, "q")
    # Right and wrong shown by a tick and a cross (spoken as words), not by colour alone.
    assert '#quiz_q .Feedback.correct::before { content: "\\2713\\00a0" / "Correct. "; }' in html
    assert (
        '#quiz_q .Feedback.incorrect::before { content: "\\2717\\00a0" / "Incorrect. "; }' in html
    )
    # After jupyterquiz has drawn the quiz, its fields get their labels and feedback a status role.
    assert script.index("show_questions(questionsquiz_q") < script.index(
        'label(document.getElementById("quiz_q"))'
    )
    assert "text.htmlFor = input.id" in script
    assert 'feedback.setAttribute("role", "status")' in script


def test_the_style_and_script_are_package_files_written_into_the_quiz():
    # quiz.css and quiz.js ship as package data (pyproject.toml) and are emitted unchanged, but
    # for the container id put in place of their placeholders.
    folder = attention_lab.book.__path__[0]
    with open(f"{folder}/quiz.css", encoding="utf-8") as css_file:
        css = css_file.read()
    with open(f"{folder}/quiz.js", encoding="utf-8") as js_file:
        js = js_file.read()
    html, script = quiz_html_and_script(GOOD, "q")
    assert css.count("#QUIZ") >= 5 and "<style>\n" + css.replace("#QUIZ", "#quiz_q") in html
    before, after = js.split("/*QUIZ*/")
    assert script.startswith(before) and script.endswith(
        after.replace("/*ID*/", json.dumps("quiz_q"))
    )


def test_show_quiz_takes_the_questions_themselves_as_a_notebook_embeds_them():
    InteractiveShell.instance()
    try:
        with capture_output() as captured:
            show_quiz(copy.deepcopy(GOOD), name="05_masks")
    finally:
        InteractiveShell.clear_instance()
    html, script = captured.outputs
    assert html.data["text/html"].startswith('<div id="quiz_05_masks" ')
    assert json.dumps(GOOD[1]["answers"][0]) in script.data["application/javascript"].replace(
        "\n", ""
    )
    with pytest.raises(ValueError, match="question 0"):
        show_quiz([{"type": "numeric"}])


def _luminance(colour: str) -> float:
    """WCAG 2.x relative luminance of ``#rrggbb``."""
    channels = [int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("verdict", ["--jq-correct-color", "--jq-incorrect-color"])
def test_the_verdicts_colours_meet_wcag_aa_in_both_themes(verdict):
    """An answered button's text on its verdict's colour, and the feedback in that colour on the
    light page and on the dark theme's light panel behind a cell's HTML output (myst-nb's
    ``--pst-color-text-base``, #ced6dd): 4.5:1 or more. The page visits' axe audit of an
    answered quiz (tests/browser/test_browser_pages.py) checks the same in Chromium."""
    html, _ = quiz_html_and_script(GOOD, "quiz_colours")
    colour = re.search(rf"{verdict}:\s*(#[0-9a-fA-F]{{6}})", html).group(1)
    text = re.search(r"--jq-text-color:\s*(#[0-9a-fA-F]{6})", html).group(1)
    for background in (text, "#ffffff", "#ced6dd"):
        assert _contrast(colour, background) >= 4.5, (verdict, colour, background)
    assert _contrast("#009113", "#fafafa") < 4.5  # jupyterquiz's own green: the check can fail
