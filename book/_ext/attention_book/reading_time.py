"""A reading time at the top of each chapter, from the words of its teaching path.

The teaching path is the chapter's prose up to its "Exercises" section: code cells and their
outputs, display math, and folded blocks (solutions, dropdowns) are not counted, since a reader
does not read them word by word. At 200 words a minute (MyST's own default for the same
estimate), the chapter gets a line under its title, e.g. "About 22 minutes to read (4,310 words
of prose; code, exercises and the quiz besides)". The counts are kept in the build environment
(``env.reading_words``) for the learners' notebooks and ``benchmarks/word_counts.py``.
"""

from __future__ import annotations

import math
import re

from docutils import nodes
from sphinx.application import Sphinx

WORDS_PER_MINUTE = 200
CHAPTERS = "notebooks_src/chapters/"
STOP_SECTIONS = {"Exercises", "Quiz"}
WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


def _skipped(node: nodes.Node) -> bool:
    if isinstance(node, nodes.literal_block | nodes.math_block | nodes.raw | nodes.comment):
        return True
    if not isinstance(node, nodes.Element):
        return False
    if node.get("nb_element", "").startswith("cell_code"):
        return True  # a code cell: its source and its outputs
    classes = set(node.get("classes", []))
    # Folded blocks: sphinx-exercise's solutions, sphinx-design's and togglebutton's dropdowns.
    return bool(classes & {"solution", "dropdown", "toggle", "reading-time"}) or (
        type(node).__name__ in {"solution_node", "details"}
    )


def count_words(node: nodes.Node) -> int:
    """Words of prose in ``node``, without what :func:`_skipped` leaves out."""
    if _skipped(node):
        return 0
    if isinstance(node, nodes.Text):
        return len(WORD.findall(node.astext()))
    if isinstance(node, nodes.section):
        title = node.next_node(nodes.title)
        if title is not None and title.astext().strip() in STOP_SECTIONS:
            return 0
    return sum(count_words(child) for child in node.children)


def reading_line(words: int) -> str:
    minutes = max(1, math.ceil(words / WORDS_PER_MINUTE))
    return (
        f"About {minutes} minutes to read ({words:,} words of prose; code, exercises and the "
        "quiz besides)."
    )


def _add_reading_time(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    if not docname.startswith(CHAPTERS):
        return
    words = count_words(doctree)
    if not hasattr(app.env, "reading_words"):
        app.env.reading_words = {}
    app.env.reading_words[docname] = words
    section = doctree.next_node(nodes.section)
    title = section.next_node(nodes.title) if section is not None else None
    if title is None:
        return
    line = nodes.paragraph("", reading_line(words), classes=["reading-time"])
    title.parent.insert(title.parent.index(title) + 1, line)


def _purge(app: Sphinx, env, docname: str) -> None:
    getattr(env, "reading_words", {}).pop(docname, None)


def _merge(app: Sphinx, env, docnames, other) -> None:
    if not hasattr(env, "reading_words"):
        env.reading_words = {}
    env.reading_words.update(
        {d: w for d, w in getattr(other, "reading_words", {}).items() if d in docnames}
    )


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", _add_reading_time)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
