"""Write the learners' Jupyter notebooks from the MyST sources in notebooks_src/.

Usage::

    python tools/workbooks.py [SOURCE_DIR [OUTPUT_DIR]]     # defaults: notebooks_src notebooks

Every ``SOURCE_DIR/**/*.md`` page becomes ``OUTPUT_DIR/**/*.ipynb``. Chapters (and every page
outside ``labs/``) are converted as they are, exactly as ``jupytext --to ipynb`` converts them.

Labs become *workbooks*: the learner starts from the stub, so everything from the lab's
``{solution-start}`` marker on (the solution, the check that passes with it, and the
demonstrations after it) is left out and replaced by a short note; cells tagged
``remove-cell`` or ``remove-input`` (the book's own settings and assertions) are left out too.
The MyST markup that plain Jupyter does not render becomes markdown it does: hint dropdowns
become ``<details>`` blocks, exercise and admonition boxes become a bold title, and
``{doc}`` links point at the neighbouring notebooks. Data files the pages read (the quizzes'
``*.json``) are copied alongside.

A lab without a stub (a cell raising ``NotImplementedError``) or without a solution marker is
an error: the script exits with a message and a non-zero status.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import jupytext
import nbformat

SOLUTION_START = re.compile(r"^`{3,}\{solution-start\}", re.MULTILINE)
BOOK_ONLY_TAGS = {"remove-cell", "remove-input"}
STUB = "raise NotImplementedError"
CLOSING_NOTE = (
    "## Solution\n\n"
    "The solution is not in this workbook: you start from the stub above. When the check "
    "passes, compare your function with the solution in the book's version of this lab, "
    "where it is folded at the end of the page."
)
# A fenced directive: ```{name} argument, then :option: lines, the body, and the closing fence.
DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,})\{(?P<name>dropdown|exercise|admonition|note|tip|warning)\}[ \t]*"
    r"(?P<argument>[^\n]*)\n(?P<options>(?::[^\n]*\n)*)(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
TARGET = re.compile(r"^\([\w.:-]+\)=[ \t]*\n", re.MULTILINE)
DOC_ROLE = re.compile(r"\{doc\}`(?:(?P<title>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`]+))`")


class WorkbookError(ValueError):
    """A lab page that cannot become a workbook: no stub, or no solution marker."""


def page_title(path: Path) -> str:
    """The first ``# `` heading of a MyST page, or its file name."""
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def plain_markdown(text: str, page: Path) -> str:
    """Rewrite the MyST markup of a markdown cell into markdown that plain Jupyter renders."""

    def directive(match: re.Match) -> str:
        name, argument = match["name"], match["argument"].strip()
        body = match["body"].strip("\n")
        if name == "dropdown":
            return f"<details>\n<summary>{argument}</summary>\n\n{body}\n\n</details>"
        title = {"exercise": f"Exercise: {argument}"}.get(name, argument or name.capitalize())
        return f"**{title}**\n\n{body}"

    def doc(match: re.Match) -> str:
        target = match["target"] or match["bare"]
        title = match["title"] or page_title((page.parent / target).with_suffix(".md"))
        return f"[{title}]({target}.ipynb)"

    text = TARGET.sub("", text).lstrip("\n")  # (label)= lines: cross-reference targets
    return DOC_ROLE.sub(doc, DIRECTIVE.sub(directive, text))


def workbook(page: Path) -> nbformat.NotebookNode:
    """The learner's notebook for a lab page: everything before the solution, made plain."""
    nb = jupytext.read(page)
    if not any(c.cell_type == "code" and STUB in c.source for c in nb.cells):
        raise WorkbookError(f"{page}: a lab needs a stub, a code cell with `{STUB}`")
    cells = []
    for cell in nb.cells:
        if set(cell.metadata.get("tags", [])) & BOOK_ONLY_TAGS:
            continue
        if cell.cell_type == "markdown" and (start := SOLUTION_START.search(cell.source)):
            before = cell.source[: start.start()].rstrip()
            before = re.sub(r"\n*^#+ Solution\s*$", "", before, flags=re.MULTILINE).rstrip()
            if before:
                cell.source = before
                cells.append(cell)
            break
        cells.append(cell)
    else:
        raise WorkbookError(f"{page}: a lab needs a solution, between {{solution-start}} markers")
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(cell.source, page)
    cells.append(nbformat.v4.new_markdown_cell(CLOSING_NOTE))
    nb.cells = cells
    return nb


def convert(page: Path, source_dir: Path) -> nbformat.NotebookNode:
    """The notebook for one page: a workbook for a lab, a plain conversion for anything else."""
    if page.relative_to(source_dir).parts[0] == "labs":
        return workbook(page)
    return jupytext.read(page)


def main(argv: list[str]) -> int:
    source_dir = Path(argv[0] if argv else "notebooks_src")
    output_dir = Path(argv[1] if len(argv) > 1 else "notebooks")
    pages = sorted(source_dir.rglob("*.md"))
    if not pages:
        print(f"no pages (*.md) in {source_dir}", file=sys.stderr)
        return 1
    for page in pages:
        out = (output_dir / page.relative_to(source_dir)).with_suffix(".ipynb")
        try:
            nb = convert(page, source_dir)
        except WorkbookError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        out.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(nb, out, fmt="ipynb")
        print(f"wrote {out}")
    # The chapters' quiz cells read their questions from ../quizzes/*.json.
    for data in sorted(source_dir.rglob("*.json")):
        out = output_dir / data.relative_to(source_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, out)
        print(f"copied {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
