"""`make notebooks` from the last build: each lab's workbook has the stub without the solution;
each chapter's notebook has every code cell; the quiz files the chapters read are copied.

The labs' sources themselves, and a learner running a workbook, are test_labs.py's (no build).
"""

from __future__ import annotations

import os
import subprocess

import jupytext
import nbformat
import pytest

from attention_book import notebook_converter
from support import labs
from support.paths import ROOT
from support.prerequisites import missing

LABS = labs.PAGES
NAMES = labs.NAMES


@pytest.fixture(scope="module")
def made_notebooks(tmp_path_factory):
    """Run `make notebooks` (without re-creating the venv or rebuilding the book) into a
    temporary folder."""
    if not (ROOT / "_build" / notebook_converter.INDEX_NAME).is_file():
        missing("the book is not built: run `make book` first")
    out = tmp_path_factory.mktemp("notebooks")
    result = subprocess.run(
        ["make", "-o", ".venv/.installed", "-o", "book", "notebooks"],
        cwd=ROOT,
        env={**os.environ, "NOTEBOOKS_DIR": str(out)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("lab", LABS, ids=NAMES)
def test_make_notebooks_writes_the_stub_without_the_solution(lab, made_notebooks):
    path = made_notebooks / "labs" / f"{lab.stem}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    page = labs.read(lab)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert page.stub in code
    for name in page.functions:
        assert any(f"({name})" in c for c in code), "the check cell is there"
    # No solution code: not its cells, not a line of its function bodies (hints may quote
    # fragments in prose), no markers.
    all_code = "\n".join(code)
    everything = "\n".join(c.source for c in nb.cells)
    for solution in page.solution:
        assert solution not in code
        for line in solution.splitlines():
            if line.strip() and not line.lstrip().startswith(("def ", '"""', "#", "return")):
                assert line.strip() not in all_code, f"solution line in workbook: {line}"
    assert "solution-start" not in everything and "solution-end" not in everything
    # The book's own cells (assertions) stay out, but not %xmode Minimal: a failing check shows
    # its message, not the frames above it. MyST markup becomes plain markdown.
    kept = [
        c.source
        for c in nb.cells
        if set(c.metadata.get("tags", [])) & {"remove-cell", "remove-input"}
    ]
    assert kept and all("%xmode" in source for source in kept), kept
    assert "{dropdown}" not in everything and "<details>" in everything
    assert "{doc}" not in everything and "{exercise}" not in everything
    assert "The solution is not in this workbook" in nb.cells[-1].source


def test_make_notebooks_keeps_every_code_cell_of_the_chapters(made_notebooks):
    """Every code cell of a chapter, after the set-up cell, as a learner's notebook runs it."""
    import json

    index = json.loads((ROOT / "_build" / notebook_converter.INDEX_NAME).read_text())
    chapters = sorted((ROOT / "notebooks_src" / "chapters").glob("*.md"))
    assert chapters
    for chapter in chapters:
        nb = nbformat.read(made_notebooks / "chapters" / f"{chapter.stem}.ipynb", as_version=4)
        page = notebook_converter.Page(f"notebooks_src/chapters/{chapter.stem}", index)
        source = jupytext.read(chapter)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        assert "learner-setup" in nb.cells[1].metadata["tags"] and code[0] == nb.cells[1].source
        expected = [
            notebook_converter.code_source(page, c.source)
            for c in source.cells
            if c.cell_type == "code"
        ]
        assert code[1:] == expected, chapter.name
        originals = [c.source for c in source.cells if c.cell_type == "code"]
        for ours, theirs in zip(code[1:], originals, strict=True):
            if ours != theirs:  # only the glue import, %xmode's output and the quiz's file
                assert ("myst_nb" in theirs) or ("%xmode" in theirs) or ("show_quiz(" in theirs)


def test_make_notebooks_copies_the_quiz_files_the_chapters_read(made_notebooks):
    quizzes = sorted((ROOT / "notebooks_src" / "quizzes").glob("*.json"))
    assert quizzes
    for quiz in quizzes:
        copied = made_notebooks / "quizzes" / quiz.name
        assert copied.read_bytes() == quiz.read_bytes(), quiz.name
