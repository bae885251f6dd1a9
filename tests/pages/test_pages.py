"""Static checks of the page sources in notebooks_src/: the conventions every chapter follows.

These read the MyST sources (via jupytext, the same reader `make notebooks` uses) without running
them; the build executes them.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re

import jupytext
import nbformat
import pytest
import yaml

import attention_lab
from support.paths import ROOT

SOURCES = sorted((ROOT / "notebooks_src").rglob("*.md"))


def _ids(paths):
    return [str(p.relative_to(ROOT / "notebooks_src")) for p in paths]


def library_names() -> set[str]:
    """Every public name of every attention_lab submodule (plotting is not imported eagerly)."""
    names = set()
    for info in pkgutil.iter_modules(attention_lab.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"attention_lab.{info.name}")
            names |= {n for n in getattr(module, "__all__", dir(module)) if not n.startswith("_")}
    return names


def test_there_are_pages():
    assert SOURCES, "notebooks_src/ has no pages"


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_page_is_a_python_notebook_listed_in_the_toc(path):
    nb = jupytext.read(path)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert any(c.cell_type == "code" for c in nb.cells), (
        "a page with no code cell is not a notebook"
    )
    toc = (ROOT / "_toc.yml").read_text()
    assert str(path.relative_to(ROOT).with_suffix("")) in toc, "page is not in _toc.yml"


def figure_cells(nb) -> list:
    """The cells that draw a figure: myst-nb's cell-level ``mystnb.figure`` metadata."""
    return [
        c for c in nb.cells if c.cell_type == "code" and "figure" in c.metadata.get("mystnb", {})
    ]


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_figures_have_name_caption_and_alt_and_are_referenced(path):
    """The figure convention: the cell that draws a figure shows it (plt.show(), so Jupyter
    draws it in place too) and carries its name, caption and alt text."""
    nb = jupytext.read(path)
    text = path.read_text()
    for cell in figure_cells(nb):
        figure = cell.metadata["mystnb"]["figure"]
        name = figure.get("name", "")
        assert name.startswith("fig-"), f"a figure needs a name fig-...: {figure}"
        assert len(str(figure.get("caption", "")).split()) >= 4, f"{name} needs a caption"
        alt = cell.metadata["mystnb"].get("image", {}).get("alt", "")
        assert len(alt.split()) >= 4, f"{name} needs a real alt text"
        assert f"{{numref}}`{name}`" in text, f"{name} is never referenced with {{numref}}"
        assert cell.source.rstrip().endswith("plt.show()"), f"{name}: end the cell with plt.show()"
        assert "glue(" not in cell.source, f"{name}: glue numbers in another cell"


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_figures_are_drawn_in_their_cell_not_glued(path):
    # A glued figure shows nowhere in a learner's Jupyter; a figure shown without metadata has
    # no number, caption or alt text in the book.
    assert "{glue:figure}" not in path.read_text()
    nb = jupytext.read(path)
    figures = [id(c) for c in figure_cells(nb)]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert not re.search(r"\bglue\([^)]*\bfig\b", cell.source), cell.source
        if "plt.show(" in cell.source:
            assert id(cell) in figures, f"a figure without name, caption and alt:\n{cell.source}"


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_pages_do_not_redefine_library_code(path):
    names = library_names()
    nb = jupytext.read(path)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        # IPython magics and shell lines are not Python: blank them before parsing.
        source = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line
            for line in cell.source.splitlines()
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                assert node.name not in names, (
                    f"{node.name} redefines attention_lab's {node.name}: "
                    "show the library's with literalinclude and import it"
                )


def test_toc_lists_only_existing_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for p in toc["parts"] for c in p["chapters"]]
    for f in files:
        assert (ROOT / f"{f}.md").is_file(), f"_toc.yml lists {f}, which does not exist"


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_page_converts_to_a_valid_learner_notebook(path):
    """`make notebooks` writes each page as .ipynb with jupytext; the result must validate."""
    nb = nbformat.reads(jupytext.writes(jupytext.read(path), fmt="ipynb"), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"


CHAPTERS = sorted((ROOT / "notebooks_src" / "chapters").glob("*.md"))
EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)")
# A solution is a {solution} block, or {solution-start} ... {solution-end} around code cells.
SOLUTION = re.compile(r"````?\{solution(?:-start)?\}\s*(\S+)\n((?::[^\n]*\n)*)")


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_chapter_ends_with_exercises_whose_solutions_are_folded(path):
    text = path.read_text()
    assert "\n## Exercises\n" in text, "a chapter ends with an Exercises section"
    exercises = EXERCISE.findall(text.split("\n## Exercises\n", 1)[1])
    assert len(exercises) >= 3, f"only {len(exercises)} exercises"
    solutions = dict(SOLUTION.findall(text))
    for label in exercises:
        assert label in solutions, f"exercise {label} has no solution"
        assert ":class: dropdown" in solutions[label], f"the solution of {label} is not hidden"


def test_each_part_ends_with_reflection_questions():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = [p for p in toc["parts"] if p["caption"].startswith("Part ")]
    assert len(parts) == 7
    for part in parts:
        last = ROOT / f"{part['chapters'][-1]['file']}.md"
        name = part["caption"].split(":")[0]
        assert f"```{{admonition}} Reflect on {name}\n" in last.read_text(), (
            f"{last.name}, the last chapter of {name}, has no reflection questions"
        )


def test_viva_has_enough_questions_in_the_required_groups():
    text = (ROOT / "notebooks_src" / "practice" / "viva.md").read_text()
    groups = re.findall(r"^## (.+)$", text, re.MULTILINE)
    for group in [
        "Fundamentals",
        "Positional encoding",
        "Attention and masks",
        "Multi-head attention",
        "The encoder",
        "Advanced",
    ]:
        assert group in groups, f"the viva has no {group!r} group"
    questions = re.findall(r"^```\{dropdown\} \d+\. ", text, re.MULTILINE)
    assert len(questions) >= 25, f"only {len(questions)} viva questions"
    advanced = text.split("\n## Advanced\n", 1)[1].lower()
    for topic in ["d_k", "learned or fixed", "batchnorm", "residual", "padding", "cost"]:
        assert topic in advanced, f"the advanced questions do not cover {topic!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_each_chapter_has_a_try_it_yourself_cell_for_the_learners_own_input(path):
    nb = jupytext.read(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and re.search(
            r"^#{2,3} Try it yourself$", cell.source, re.MULTILINE
        ):
            following = next(c for c in nb.cells[i + 1 :] if c.cell_type == "code")
            first_line = following.source.splitlines()[0]
            assert re.search(r"# (your|yours)\b", first_line), (
                f"the try-it cell's first line says what to change:\n{following.source}"
            )
            return
    pytest.fail("no 'Try it yourself' section")
