"""The old home of the book's quizzes, kept so that ``from attention_lab.quiz import show_quiz``
(the last cell of every chapter) keeps working: the code is :mod:`attention_lab.book.quiz`."""

from attention_lab.book.quiz import (  # noqa: F401 - re-exported under the old name
    QUESTION_TYPES,
    load_quiz,
    quiz_html_and_script,
    show_quiz,
    validate_quiz,
)
