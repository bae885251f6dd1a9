"""The labs and their workbooks: the sources hold a stub and a solution; `make notebooks` gives
learners the stub without the solution; a learner running a workbook top to bottom is stopped by
the check with a helpful message.
"""

from __future__ import annotations

import os
import subprocess
import types

import jupytext
import nbformat
import pytest

from attention_book import notebook_converter
from support import labs
from support.paths import ROOT
from support.prerequisites import missing

LABS = labs.PAGES
NAMES = labs.NAMES
STUB = labs.STUB


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


def test_there_are_eleven_labs():
    assert NAMES == [
        "01_scaled_dot_product_attention",
        "02_multi_head_attention",
        "03_positional_encoding",
        "04_masks",
        "05_encoder_layer",
        "06_pooling_and_search",
        "07_online_softmax",
        "08_kv_cache_decoding",
        "09_grouped_query_attention",
        "10_window_and_document_masks",
        "11_alibi",
    ]


@pytest.mark.parametrize("lab", LABS, ids=NAMES)
def test_the_source_has_a_stub_a_check_and_a_solution_of_the_same_function(lab):
    page = labs.read(lab)
    stub = page.stub
    names = page.functions  # one function, or a few (Lab 10 has two)
    assert names and len(names) == stub.count(STUB), "each function of the stub raises"
    solution = "\n".join(page.solution)
    for name in names:
        assert name.startswith("my_"), "the learner's function is called my_<something>"
        assert name in labs.defined_functions(solution) and STUB not in solution
        checks = [
            c for c in page.notebook.cells if c.cell_type == "code" and f"({name})" in c.source
        ]
        assert len(checks) == 2, "one check on the stub (raises) and one after the solution"
        assert "raises-exception" in checks[0].metadata.get("tags", [])
        assert "raises-exception" not in checks[1].metadata.get("tags", [])
    text = lab.read_text()
    assert text.count("```{dropdown} Hint") >= 3
    assert ":class: dropdown" in text.split("{solution-start}", 1)[1].split("\n", 2)[1]


@pytest.mark.book  # `make notebooks` reads the last build's index
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


@pytest.mark.book  # `make notebooks` reads the last build's index
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


@pytest.mark.book  # `make notebooks` reads the last build's index
def test_make_notebooks_copies_the_quiz_files_the_chapters_read(made_notebooks):
    quizzes = sorted((ROOT / "notebooks_src" / "quizzes").glob("*.json"))
    assert quizzes
    for quiz in quizzes:
        copied = made_notebooks / "quizzes" / quiz.name
        assert copied.read_bytes() == quiz.read_bytes(), quiz.name


@pytest.mark.parametrize("lab", LABS, ids=NAMES)
def test_a_learner_running_the_workbook_is_stopped_by_the_check_with_advice(lab, capsys):
    """Run the workbook's cells in order, as "Run All" does: the first error is the check's."""
    cells = notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)
    namespace: dict = {}
    error = None
    for cell in cells:
        if cell.cell_type != "code":
            continue
        # IPython magics (%xmode) are not Python: the kernel runs them, exec cannot.
        source = "\n".join(
            "" if line.lstrip().startswith("%") else line for line in cell.source.splitlines()
        )
        try:
            exec(compile(source, lab.name, "exec"), namespace)  # noqa: S102 - our pages
        except Exception as exc:  # noqa: BLE001 - the point is which exception comes first
            error = exc
            break
    assert isinstance(error, AssertionError), error
    message = " ".join(str(error).split())
    assert "still the stub" in message and "raise NotImplementedError" in message


def test_a_lab_without_a_solution_is_refused(tmp_path):
    lab = tmp_path / "01_no_solution.md"
    lab.write_text(LABS[0].read_text().split("## Solution", 1)[0])
    with pytest.raises(notebook_converter.ConversionError, match="a lab needs a solution"):
        notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)


def test_a_lab_without_a_stub_is_refused(tmp_path):
    lab = tmp_path / "01_no_stub.md"
    lab.write_text(LABS[0].read_text().replace(STUB, "return None  #"))
    with pytest.raises(notebook_converter.ConversionError, match="a lab needs a stub"):
        notebook_converter.workbook_cells(jupytext.read(lab).cells, lab.name)


def test_a_literal_include_with_dedent_reads_as_sphinx_shows_it():
    # Options arrive as text; Sphinx's directive turns :dedent: into an int before reading.
    page = types.SimpleNamespace(folder="notebooks_src/chapters")
    options = {
        "pyobject": "EncoderLayer.decode",
        "start-after": "if self.norm_first:",
        "end-before": "else:",
        "dedent": "12",
    }
    block = notebook_converter.literal_include(page, "../../lib/attention_lab/layers.py", options)
    code = block.split("```python\n", 1)[1].removesuffix("\n```")
    assert code.splitlines()[0].startswith("attended, weights = decode_step(")
    assert all(not line.startswith(" ") for line in code.splitlines())
