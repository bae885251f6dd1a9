"""The one reader of a lab page's stub and solution (``notebooks_src/labs/*.md``) for the tests.

A lab page, read with jupytext, holds one stub cell (each function the learner writes raises
``NotImplementedError``), the set-up cells before it, and a solution: the code cells between the
markdown cells that hold ``{solution-start}`` and ``{solution-end}``. The book's own reader is
``attention_book.notebook_converter.workbook_cells`` (``make notebooks``); this one is written
apart from it, so the tests of the workbooks can compare the two.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jupytext

from support.paths import ROOT

STUB = "raise NotImplementedError"
FOLDER = ROOT / "notebooks_src" / "labs"
PAGES = sorted(FOLDER.glob("*.md"))
NAMES = [page.stem for page in PAGES]


def defined_functions(source: str) -> list[str]:
    """The names of the functions a cell defines, in the order they are written (IPython magics,
    ``%xmode``, are left out: they are not Python)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]
    tree = ast.parse("\n".join(lines))
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    return list(dict.fromkeys(node.name for node in sorted(found, key=lambda node: node.lineno)))


@dataclasses.dataclass(frozen=True)
class Lab:
    path: Path
    notebook: object  # the page as jupytext reads it (an nbformat notebook)
    setup: list[str]  # code cells before the stub
    stub: str  # the one code cell that holds the stub
    solution: list[str]  # code cells between the solution's markers

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def functions(self) -> list[str]:
        """The learner's functions, in the order the stub defines them."""
        return defined_functions(self.stub)


def read(lab: str | Path) -> Lab:
    """A lab page, by its name (``"01_scaled_dot_product_attention"``) or its path."""
    path = FOLDER / f"{lab}.md" if isinstance(lab, str) else Path(lab)
    notebook = jupytext.read(path)
    setup, stubs, solution = [], [], []
    inside = False
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            if "{solution-start}" in cell.source:
                inside = True
            if "{solution-end}" in cell.source:
                inside = False
        elif inside:
            solution.append(cell.source)
        elif STUB in cell.source:
            stubs.append(cell.source)
        elif not stubs:
            setup.append(cell.source)
    assert len(stubs) == 1, f"{path.name}: a lab has exactly one stub, not {len(stubs)}"
    assert solution, f"{path.name}: no solution between {{solution-start}} and {{solution-end}}"
    return Lab(path, notebook, setup, stubs[0], solution)
