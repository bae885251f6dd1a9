"""A page of the book as a learner's notebook: the MyST a page uses, in markdown Jupyter renders.

The book's pages are MyST markdown notebooks (``notebooks_src/``). Plain Jupyter renders neither
MyST's roles and directives nor values glued into the prose, so this module turns each page into a
notebook a learner can run in JupyterLab:

- figures: a page's figure cell carries myst-nb's cell-level ``mystnb.figure`` metadata and ends
  with ``plt.show()``, so it draws its figure in place in Jupyter as in the book; the notebook adds
  the figure's number and caption below it (``Fig. 2.1. ...``);
- numbers quoted in the prose (``{glue:text}``) are filled in with the values of the build;
- cross-references (``{numref}``, ``{ref}``, ``{doc}``, ``{eq}``) become readable text linking to
  the right notebook (or, for pages that are not notebooks, the published book's page, by
  absolute URL: the site's ``html.baseurl`` in ``_config.yml``), so every link of a notebook
  resolves inside the zip of notebooks or on the site;
- citations become "(Vaswani et al., 2017)", with the references listed at the end;
- admonitions become quotes, dropdowns and solutions ``<details>`` blocks, tabs headings,
  ``literalinclude`` the code it includes; the cells of a chapter's worked solutions are folded;
- labs become workbooks: they stop at the stub the learner fills in (see :func:`workbook_cells`);
- the notebook stands alone, outside the book's environment: its first code cell installs
  ``attention_lab`` and the learner's requirements from the site where they are missing (on
  Colab, say; :func:`setup_cell`), ``glue`` comes from ``attention_lab.book.glue`` (no myst-nb
  needed), the quiz is embedded in its cell with its math already rendered as MathML (a lone
  notebook needs no quiz file; JupyterLab shows typeset math offline), and ``%xmode`` prints
  nothing.

Anything MyST that it does not know is an error, so no raw markup reaches a learner unnoticed.

The numbers (figure, equation and chapter numbers, titles, glued values, citations) come from the
Sphinx build itself, through the index that ``attention_book.learner_notebooks`` writes into
``_build/learner_index.json`` when a build finishes. This module needs no running Sphinx.

As a script, ``python -m attention_book.notebook_converter OUTPUT_DIR`` (with ``book/_ext`` on
``PYTHONPATH``; ``make notebooks``) writes every page's notebook into ``OUTPUT_DIR`` from the index
of the last build.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat

from . import ROOT

SOURCE_DIR = "notebooks_src"
INDEX_NAME = "learner_index.json"  # in _build/, written by attention_book.learner_notebooks
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
LAB_DROPPED_TAGS = {"remove-cell", "remove-input"}  # the book's own checks of the solution
STUB = "raise NotImplementedError"

SOLUTION_START = re.compile(r"^`{3,}\{solution-start\}", re.MULTILINE)
SOLUTION_MARKER = re.compile(
    r"^(?P<fence>`{3,})\{(?P<kind>solution-start|solution-end)\}[ \t]*(?P<label>\S*)[^\n]*\n"
    r"(?:[ \t]*:[\w-]+:[^\n]*\n)*(?P=fence)[ \t]*$",
    re.MULTILINE,
)
# A fenced directive: ```{name} argument, then :option: lines, the body, the same fence again.
DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<argument>[^\n]*)\n"
    r"(?P<options>(?:[ \t]*:[\w-]+:[^\n]*\n)*)(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<content>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[\w.:-]+)\)=[ \t]*$", re.MULTILINE)
LABELLED_MATH = re.compile(
    r"^\$\$\n(?P<body>.*?)\n\$\$[ \t]*\((?P<label>[\w.:-]+)\)[ \t]*$", re.MULTILINE | re.DOTALL
)
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
# Code a learner's notebook runs differently from the book's page (see code_source).
GLUE_IMPORT = re.compile(r"^from myst_nb import glue[ \t]*$", re.MULTILINE)
XMODE = re.compile(r"^%xmode \w+[ \t]*$", re.MULTILINE)
QUIZ_CALL = re.compile(
    r"""^show_quiz\(\s*["'](?P<path>[^"']+\.json)["']\s*\)[ \t]*$""", re.MULTILINE
)
QUIZ_TEXT = ("question", "answer", "feedback")  # a quiz's fields that may hold math
MATH_IN_TEXT = re.compile(
    r"\$\$(?P<display>.+?)\$\$|\\\((?P<paren>.+?)\\\)|\$(?P<inline>[^$]+?)\$", re.DOTALL
)
LEARN_REQUIREMENTS = "requirements-learn.txt"  # at the root; shipped in _notebooks/ and the zip
SITE_VARIABLE = "ATTENTION_LAB_SITE"  # overrides the site's URL in the set-up cell (tests)
NOTEBOOKS_FOLDER = "_notebooks"  # in the site: the notebooks, the wheel, the requirements
SETUP = """\
# Set-up for a notebook opened outside an environment made from requirements-learn.txt (on
# Colab, say): install attention_lab and the learner's requirements from the book's site. The
# runtime's own torch, JupyterLab and kernel stay (Colab's torch is its CUDA build). Where
# attention_lab is installed, this cell does nothing.
import importlib.util

if importlib.util.find_spec("attention_lab") is None:
    import os, subprocess, sys, tempfile, urllib.request
    from importlib.metadata import PackageNotFoundError, version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    site = os.environ.get("SITE_VARIABLE", "SITE_URL").rstrip("/")
    files = f"{site}/NOTEBOOKS_FOLDER/"
    with urllib.request.urlopen(files + "LEARN_REQUIREMENTS", timeout=60) as response:
        wanted = response.read().decode("utf-8").splitlines()
    kept = {n for n in ("torch", "jupyterlab", "ipykernel") if installed(n)}
    if "torch" in kept:  # PyTorch's CPU index is needed for torch only
        wanted = [w for w in wanted if not w.startswith("--extra-index-url")]
    wanted = [w for w in wanted if w.split("==")[0].strip() not in kept]
    loaded = {n: installed(n) for n in ("numpy", "pandas", "matplotlib") if n in sys.modules}
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listing:
        listing.write("\\n".join(wanted))
    pip = [sys.executable, "-m", "pip", "install", "-q", "-r", listing.name, files + "WHEEL"]
    subprocess.run(pip, check=True)
    importlib.invalidate_caches()
    print(f"Installed attention_lab and the learner's requirements from {files}")
    if any(installed(n) != v for n, v in loaded.items()):
        print("Restart the kernel (the runtime), then run all cells again.")
"""
# What must never reach a learner: MyST roles and directives.
RAW_MYST = re.compile(r"\{(glue|numref|doc|cite|ref|eq)[\w:-]*\}`|^`{3,}\{|^:::", re.MULTILINE)


class ConversionError(ValueError):
    """A page that cannot become a notebook: unknown markup, a missing label, a lab without stub."""


# --- one page ------------------------------------------------------------------------------------


@dataclass
class Page:
    """One page being converted, with what its links need."""

    docname: str  # e.g. notebooks_src/chapters/02_scaled_dot_product_attention
    index: dict
    cited: list = field(default_factory=list)

    @property
    def site(self) -> str:
        """The published book's base URL, ending in ``/`` (``html.baseurl`` in _config.yml)."""
        return site_url(self.index)

    @property
    def folder(self) -> PurePosixPath:
        return PurePosixPath(self.docname).parent

    def is_notebook(self, docname: str) -> bool:
        return docname.startswith(f"{SOURCE_DIR}/")

    def href(self, docname: str, anchor: str | None = None) -> str:
        """A link from this notebook to ``docname``: a notebook, or the site's page by URL."""
        if docname == self.docname:
            base = ""
        elif self.is_notebook(docname):
            base = posixpath.relpath(docname, self.folder) + ".ipynb"
        else:
            base = f"{self.site}{docname}.html"
        return f"{base}#{anchor}" if anchor else (base or "#")

    def label(self, label: str) -> dict:
        try:
            return self.index["labels"][label]
        except KeyError:
            raise ConversionError(f"{self.docname}: unknown label {label!r}") from None

    def glued(self, key: str) -> dict:
        try:
            return self.index["glue"][self.docname][key]
        except KeyError:
            raise ConversionError(
                f"{self.docname}: no glued value {key!r} in the build (run `make book`)"
            ) from None


def _resolve_doc(page: Page, target: str) -> str:
    return posixpath.normpath(posixpath.join(str(page.folder), target))


def format_plain(text: str, spec: str) -> str:
    """The text of ``{glue:text}`key:spec```, exactly as myst-nb formats it in the book."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(text, spec)


def role(page: Page, name: str, content: str) -> str:
    """Plain markdown for one MyST role."""
    explicit = EXPLICIT.match(content)
    text, target = (explicit["text"], explicit["target"]) if explicit else (None, content)
    if name == "glue:text":
        key, _, spec = content.rpartition(":") if ":" in content else (content, "", "s")
        return format_plain(page.glued(key)["text/plain"], spec)
    if name == "glue:md":
        return page.glued(content)["text/markdown"]
    if name == "doc":
        docname = _resolve_doc(page, target)
        title = text or page.index["pages"].get(docname, {}).get("title")
        if title is None:
            raise ConversionError(f"{page.docname}: {{doc}} to an unknown page {target!r}")
        return f"[{title}]({page.href(docname)})"
    if name == "numref":
        entry = page.label(target)
        if "number" not in entry or not entry["number"]:
            raise ConversionError(f"{page.docname}: {{numref}} to {target!r}, which has no number")
        template = text or page.index["numfig_format"].get(entry["kind"], "%s")
        shown = template.replace("%s", entry["number"]).replace("{number}", entry["number"])
        return f"[{shown}]({page.href(entry['doc'], target)})"
    if name == "ref":
        entry = page.label(target)
        if text:
            shown = text
        elif entry.get("kind") in ("exercise", "solution") and entry.get("number"):
            shown = f"{entry['kind'].capitalize()} {entry['number']}"
            if entry.get("title"):
                shown += f" ({entry['title']})"
        else:
            shown = entry.get("title") or target
        return f"[{shown}]({page.href(entry['doc'], target)})"
    if name == "eq":
        try:
            equation = page.index["equations"][target]
        except KeyError:
            raise ConversionError(f"{page.docname}: unknown equation {target!r}") from None
        return f"[({equation['number']})]({page.href(equation['doc'], target)})"
    if name in ("cite:p", "cite:t", "cite"):
        keys = [k.strip() for k in content.split(",")]
        entries = []
        for key in keys:
            if key not in page.index["citations"]:
                raise ConversionError(f"{page.docname}: unknown citation {key!r}")
            if key not in page.cited:
                page.cited.append(key)
            entries.append(page.index["citations"][key])
        if name == "cite:t":
            return "; ".join(f"{e['author']} ({e['year']})" for e in entries)
        return "(" + "; ".join(f"{e['author']}, {e['year']}" for e in entries) + ")"
    if name == "math":
        return f"${content}$"
    raise ConversionError(f"{page.docname}: the role {{{name}}} has no plain-markdown form")


def _options(text: str) -> dict:
    return dict(re.findall(r"^[ \t]*:([\w-]+):[ \t]*(.*?)[ \t]*$", text, re.MULTILINE))


def _quote(title: str, body: str) -> str:
    lines = [f"**{title}**", ""] + body.splitlines()
    return "\n".join(f"> {line}".rstrip() for line in lines)


def _anchor(label: str | None) -> str:
    return f'<a id="{label}"></a>\n\n' if label else ""


def literal_include(page: Page, argument: str, options: dict) -> str:
    """The code a ``literalinclude`` shows, read as Sphinx reads it, in a fenced block."""
    from sphinx.directives.code import LiteralInclude, LiteralIncludeReader

    class _Config:
        source_encoding = "utf-8-sig"

    path = (ROOT / page.folder / argument).resolve()
    # LiteralIncludeReader applies :pyobject:, :lines: and the rest in Sphinx's own order.
    # Each option converted from its text by the directive's own option_spec (:dedent: an int),
    # as Sphinx does before the reader sees it.
    reader_options = {
        key: LiteralInclude.option_spec[key](value)
        for key, value in options.items()
        if key not in ("language", "caption")
    }
    code, _ = LiteralIncludeReader(str(path), reader_options, _Config()).read()
    language = options.get("language", "python")
    caption = options.get("caption")
    head = f"*{caption}*\n\n" if caption else f"From `{_module_of(path)}`:\n\n"
    return f"{head}```{language}\n{code.rstrip()}\n```"


def _module_of(path: Path) -> str:
    """The module a learner imports for a file of the library: ``attention_lab.positional``."""
    relative = path.relative_to(ROOT / "lib").with_suffix("")
    parts = [p for p in relative.parts if p != "__init__"]
    return ".".join(parts)


def directive(page: Page, match: re.Match) -> str:
    """Plain markdown for one MyST directive (its body converted too)."""
    name, argument = match["name"], match["argument"].strip()
    options = _options(match["options"])
    body = markdown(page, match["body"].strip("\n")) if name != "literalinclude" else ""
    label = options.get("label") or options.get("name")
    if name == "admonition":
        return _anchor(label) + _quote(argument or "Note", body)
    if name in ("note", "tip", "hint", "important", "warning", "caution", "seealso"):
        return _anchor(label) + _quote(argument or name.capitalize(), body)
    if name == "dropdown":
        return f"<details>\n<summary>{argument}</summary>\n\n{body}\n\n</details>"
    if name == "exercise":
        entry = page.index["labels"].get(label or "", {})
        number = f" {entry['number']}" if entry.get("number") else ""
        title = f"Exercise{number}" + (f" ({argument})" if argument else "")
        return f"{_anchor(label)}**{title}**\n\n{body}"
    if name == "solution":
        return f"<details>\n<summary>Solution</summary>\n\n{body}\n\n</details>"
    if name == "tab-set":
        return body
    if name == "tab-item":
        return f"#### {argument}\n\n{body}"
    if name == "table":
        entry = page.index["labels"].get(label or "", {})
        number = entry.get("number")
        prefix = page.index["numfig_format"].get("table", "Table %s").replace("%s", number or "")
        caption = markdown(page, argument)
        return f"{_anchor(label)}**{prefix}.** {caption}\n\n{body}" if number else body
    if name == "literalinclude":
        return literal_include(page, argument, options)
    if name == "math":
        return f"$$\n{body}\n$$"
    if name == "live-attention":
        # The book's box runs the model in the browser; a notebook has the kernel instead.
        return (
            "> *The book's page has a box here that runs MiniLM in your browser on any sentence "
            "you type. In this notebook, use the* Try it yourself *cell below "
            "(`attention_grid`).*"
        )
    if name == "instrument":
        # The book's instrument computes in the browser; a notebook has the kernel instead.
        return _instrument_pointer(page, argument)
    raise ConversionError(f"{page.docname}: the directive {{{name}}} has no plain-markdown form")


def markdown(page: Page, text: str) -> str:
    """Turn a markdown cell's MyST into markdown that plain Jupyter renders."""
    text = DIRECTIVE.sub(lambda m: directive(page, m), text)

    def math(match: re.Match) -> str:
        equation = page.index["equations"].get(match["label"])
        if equation is None:
            raise ConversionError(f"{page.docname}: unknown equation {match['label']!r}")
        body = match["body"].strip("\n")
        return f'<a id="{match["label"]}"></a>\n\n$$\n{body}\n\\tag{{{equation["number"]}}}\n$$'

    text = LABELLED_MATH.sub(math, text)
    text = TARGET.sub(lambda m: f'<a id="{m["label"]}"></a>', text)
    return ROLE.sub(lambda m: role(page, m["name"], m["content"]), text)


def _figure_caption(page: Page, cell) -> str | None:
    figure = cell.metadata.get("mystnb", {}).get("figure")
    if not figure:
        return None
    name = figure.get("name")
    entry = page.label(name) if name else {}
    number = entry.get("number")
    prefix = page.index["numfig_format"].get("figure", "Fig. %s").replace("%s", number or "")
    caption = markdown(page, str(figure.get("caption", "")))
    return f'<a id="{name}"></a>\n\n**{prefix}.** {caption}'.rstrip()


EXPLORERS = ROOT / "book" / "explorers.yml"  # captions and text alternatives of the explorers
EXPLORER_CALL = re.compile(r"""explorers\.show\(.*div_id\s*=\s*["']([^"']+)["']""", re.DOTALL)


def _interactive_entry(key: str, kind: str) -> dict:
    """The caption and text alternative of an explorer or instrument, from explorers.yml."""
    import yaml

    texts = yaml.safe_load(EXPLORERS.read_text(encoding="utf-8")) or {}
    if key not in texts:
        raise ConversionError(f"the {kind} {key!r} has no entry in {EXPLORERS.name}")
    return texts[key]


def _interactive_caption(
    page: Page, key: str, entry: dict, kind: str, note: str = "", use: str = "How to use it"
) -> str:
    """A notebook's caption for an explorer or instrument: number, label, caption, folded text."""
    number = page.index["interactive"].get(page.docname, {}).get(key)
    if number is None:
        raise ConversionError(f"{page.docname}: the {kind} {key!r} has no figure number")
    prefix = page.index["numfig_format"].get("figure", "Fig. %s").replace("%s", number)
    return (
        f'<a id="{key}"></a>\n\n**{prefix}.** **Interactive {kind}.** {entry["caption"]}\n\n'
        f"{note}<details><summary>Text description of the {kind}</summary>\n\n"
        f"{entry['shows']}\n\n**{use}:** {entry['operate']}\n\n</details>"
    )


def _explorer_caption(page: Page, cell) -> str | None:
    """The caption and text alternative (from ``book/explorers.yml``) of a cell's explorer."""
    found = EXPLORER_CALL.search(cell.source)
    if not found:
        return None
    key = found[1]
    return _interactive_caption(page, key, _interactive_entry(key, "explorer"), "explorer")


def _instrument_pointer(page: Page, name: str) -> str:
    """What a notebook shows for the book's ``{instrument}``: its caption, its text, a pointer."""
    key = f"instrument-{name}"
    entry = _interactive_entry(key, "instrument")
    note = (
        "> *The book's page has an instrument here that computes in your browser from the "
        "settings you choose. In this notebook, change the settings of the* Try it yourself "
        "*cell below and run it again.*\n\n"
    )
    return _interactive_caption(page, key, entry, "instrument", note, "How to use it (in the book)")


def _add_markdown(page: Page, out: list, text: str, hidden: bool) -> None:
    text = markdown(page, text.strip("\n")).strip()
    if text:
        cell = nbformat.v4.new_markdown_cell(text)
        if hidden:
            _hide_source(cell)
        out.append(cell)


def _hide_source(cell) -> None:
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def _intro(page: Page, kind: str) -> str:
    info = page.index["pages"][page.docname]
    title = info["title"]
    where = {
        "chapter": f"chapter {info['number']}" if info["number"] else "a chapter",
        "lab": "a lab",
        "practice": "a practice page",
        "appendix": "the appendix",
        "start": "a page of the part Start here",
    }[kind]
    book = f"[{page.index['title']}]({page.href('book/intro')})"
    how = f"[How to use this book]({page.href('book/how_to_use')})"
    lines = [
        f'*This notebook is {where} of {book}, "{title}", made from the same source as the '
        "book's page. Run it top to bottom (Run → Run All Cells): every figure and table is "
        "drawn by the cells. Numbers quoted in the text are those of the book's run: on your "
        "machine a trained model's numbers may differ a little and timings will differ, "
        "while the claims the text makes hold (the cells check them). "
        f"Setting up: {how}; the first code cell installs the library and what the notebooks "
        "need where they are missing (on Colab, say), and does nothing where they are there.*",
    ]
    if info.get("words"):
        minutes = -(-info["words"] // 200)
        lines.append(f"*About {minutes} minutes to read ({info['words']:,} words of prose).*")
    if kind == "lab":
        lines.append(
            "*This is a workbook: fill in the stub, run its check, and compare with the solution "
            "folded at the end of the book's page.*"
        )
    return "\n\n".join(lines)


def _references(page: Page) -> str | None:
    if not page.cited:
        return None
    items = sorted(page.index["citations"][k]["reference"] for k in page.cited)
    # A reference spans lines (authors, title, venue): each line after the first is indented
    # under its item, or a renderer may read a line such as "2024." as a list of its own.
    return "## References\n\n" + "\n".join(
        "- " + item.strip().replace("\n", "\n  ") for item in items
    )


def _kind(docname: str) -> str:
    part = PurePosixPath(docname).parts[1]
    kinds = {"chapters": "chapter", "labs": "lab", "appendix": "appendix", "start": "start"}
    return kinds.get(part, "practice")


def workbook_cells(cells: list, where: str) -> list:
    """A lab's cells up to the solution: the learner starts from the stub."""
    if not any(c.cell_type == "code" and STUB in c.source for c in cells):
        raise ConversionError(f"{where}: a lab needs a stub, a code cell with `{STUB}`")
    kept = []
    for cell in cells:
        tags = set(cell.metadata.get("tags", []))
        # %xmode Minimal stays: a failing check then shows its message, not the frames above it.
        if tags & LAB_DROPPED_TAGS and "%xmode" not in cell.source:
            continue
        if cell.cell_type == "markdown" and (start := SOLUTION_START.search(cell.source)):
            before = cell.source[: start.start()].rstrip()
            before = re.sub(r"\n*^#+ Solution\s*$", "", before, flags=re.MULTILINE).rstrip()
            if before:
                cell.source = before
                kept.append(cell)
            return kept
        kept.append(cell)
    raise ConversionError(f"{where}: a lab needs a solution, between {{solution-start}} markers")


def convert(source: Path, docname: str, index: dict) -> nbformat.NotebookNode:
    """The learner's notebook for one page (``docname``, e.g. ``notebooks_src/labs/01_x``)."""
    import jupytext

    page = Page(docname, index)
    kind = _kind(docname)
    nb = jupytext.read(source)
    cells = workbook_cells(nb.cells, docname) if kind == "lab" else nb.cells
    out = [nbformat.v4.new_markdown_cell(_intro(page, kind)), setup_cell(index)]
    in_solution = False
    for cell in cells:
        if cell.cell_type == "markdown":
            # A chapter's worked solution: {solution-start} ... code cells ... {solution-end}.
            position = 0
            for marker in SOLUTION_MARKER.finditer(cell.source):
                _add_markdown(page, out, cell.source[position : marker.start()], in_solution)
                position = marker.end()
                in_solution = marker["kind"] == "solution-start"
                if in_solution:
                    entry = index["labels"].get(marker["label"], {})
                    which = f"exercise {entry['number']}" if entry.get("number") else "the exercise"
                    out.append(
                        nbformat.v4.new_markdown_cell(
                            f"**Solution to {which}.** Try it first: the solution's cells "
                            "below are folded. Click the bar to the left of a folded cell to "
                            "open it."
                        )
                    )
            _add_markdown(page, out, cell.source[position:], in_solution)
            continue
        new = nbformat.v4.new_code_cell(code_source(page, cell.source))
        tags = [t for t in cell.metadata.get("tags", [])]
        if tags:
            new.metadata["tags"] = tags
        if "mystnb" in cell.metadata:
            new.metadata["mystnb"] = cell.metadata["mystnb"]
        if set(tags) & HIDDEN_TAGS or in_solution:
            _hide_source(new)
        if in_solution:
            new.metadata["jupyter"]["outputs_hidden"] = True
        out.append(new)
        if (caption := _figure_caption(page, cell)) is not None:
            out.append(nbformat.v4.new_markdown_cell(caption))
        if (caption := _explorer_caption(page, cell)) is not None:
            out.append(nbformat.v4.new_markdown_cell(caption))
    if kind == "lab":
        out.append(
            nbformat.v4.new_markdown_cell(
                "## Solution\n\nThe solution is not in this workbook: you start from the stub "
                "above. When the check passes, compare your function with the solution in the "
                f"book's version of this lab, [{index['pages'][docname]['title']}]"
                f"({page.site}{docname}.html), where it is folded at the end of the page."
            )
        )
    if (references := _references(page)) is not None:
        out.append(nbformat.v4.new_markdown_cell(references))
    for cell in out:
        if cell.cell_type == "markdown" and (raw := RAW_MYST.search(cell.source)):
            raise ConversionError(f"{docname}: MyST markup survived: {raw.group(0)!r}")
    notebook = nbformat.v4.new_notebook(cells=out)
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    return notebook


# --- every page ------------------------------------------------------------------------------


def site_url(index: dict) -> str:
    """The published book's base URL (``html.baseurl``), ending in ``/``."""
    url = index.get("site_url") or ""
    if not url.startswith(("https://", "http://")):
        raise ConversionError("_config.yml sets no html.baseurl: the notebooks link to the site")
    return url.rstrip("/") + "/"


def wheel_name() -> str:
    """The file name of the library's wheel, as ``pip wheel`` writes it from pyproject.toml."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return f"{project['name']}-{project['version']}-py3-none-any.whl"


def setup_cell(index: dict) -> nbformat.NotebookNode:
    """The notebook's first code cell: installs what it needs where ``attention_lab`` is missing.

    On Colab, or in any Python without the library, it reads ``requirements-learn.txt`` from
    the site's ``_notebooks/`` (the URL from ``html.baseurl``; the environment variable
    ``ATTENTION_LAB_SITE`` overrides it, as the tests do) and installs it with the wheel there,
    keeping a torch the runtime has. Its source is folded: the intro says what it does.
    """
    source = SETUP
    for key, value in {
        "SITE_VARIABLE": SITE_VARIABLE,
        "SITE_URL": site_url(index),
        "NOTEBOOKS_FOLDER": NOTEBOOKS_FOLDER,
        "LEARN_REQUIREMENTS": LEARN_REQUIREMENTS,
        "WHEEL": wheel_name(),
    }.items():
        source = source.replace(key, value)
    cell = nbformat.v4.new_code_cell(source.rstrip("\n"))
    cell.metadata["tags"] = ["learner-setup"]
    _hide_source(cell)
    return cell


def _mathml(text: str) -> str:
    """``text`` with its TeX (``$...$``, ``$$...$$``, ``\\(...\\)``) rendered as MathML."""
    from latex2mathml.converter import convert as to_mathml

    def render(match: re.Match) -> str:
        display = match["display"] is not None
        tex = match["display"] or match["paren"] or match["inline"]
        return to_mathml(tex.strip(), display="block" if display else "inline")

    return MATH_IN_TEXT.sub(render, text)


def quiz_questions(path: Path) -> list:
    """A quiz file's questions, their math rendered as MathML for any notebook front end.

    The book's MathJax typesets the quiz's TeX in the page. In JupyterLab, no MathJax reaches
    the questions (the quiz's script draws them after the output is shown), while Chromium,
    Firefox and Safari draw MathML themselves, offline.
    """
    questions = json.loads(path.read_text(encoding="utf-8"))

    def render(item):
        if isinstance(item, list):
            return [render(x) for x in item]
        if isinstance(item, dict):
            return {
                k: _mathml(v) if k in QUIZ_TEXT and isinstance(v, str) else render(v)
                for k, v in item.items()
            }
        return item

    return render(questions)


def code_source(page: Page, source: str) -> str:
    """A code cell's source as a learner's notebook runs it, outside the book's environment.

    ``from myst_nb import glue`` becomes ``attention_lab.book.glue`` (the values are in the
    text already; no myst-nb needed); a cell of ``%xmode`` lines prints nothing; a quiz read
    from ``../quizzes/`` is embedded, so a notebook downloaded on its own shows its quiz.
    """
    source = GLUE_IMPORT.sub("from attention_lab.book.glue import glue", source)
    if XMODE.search(source):
        lines = [line for line in source.splitlines() if line.strip()]
        if not all(XMODE.match(line) or line.lstrip().startswith("#") for line in lines):
            raise ConversionError(f"{page.docname}: a cell with %xmode holds other code")
        source = "%%capture\n" + source  # %xmode prints "Exception reporting mode: ..."
    if call := QUIZ_CALL.search(source):
        path = (ROOT / page.folder / call["path"]).resolve()
        if not path.is_file():
            raise ConversionError(f"{page.docname}: no quiz file {call['path']}")
        text = json.dumps(quiz_questions(path), ensure_ascii=False, indent=1)
        if '"""' in text:
            raise ConversionError(f"{page.docname}: the quiz holds three double quotes in a row")
        embedded = (
            f"import json\n\n# The questions of {path.name}, embedded: this notebook needs no "
            "quiz file.\n"
            f'QUIZ = json.loads(r"""{text}""")\n'
            f'show_quiz(QUIZ, name="{path.stem}")'
        )
        source = source[: call.start()] + embedded + source[call.end() :]
    return source


def page_docnames(index: dict) -> list[str]:
    """Every executable page the build knows, in toc order of their names."""
    return sorted(d for d in index["pages"] if d.startswith(f"{SOURCE_DIR}/"))


def write_notebooks(index: dict, out_dir: Path, log=print) -> list[Path]:
    """Write every page's notebook, the quizzes' JSON files and the learner's requirements."""
    written = []
    for docname in page_docnames(index):
        relative = PurePosixPath(docname).relative_to(SOURCE_DIR)
        target = out_dir / relative.with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = convert(ROOT / f"{docname}.md", docname, index)
        nbformat.write(notebook, target)
        written.append(target)
        log(f"wrote {target}")
    for data in sorted((ROOT / SOURCE_DIR).rglob("*.json")):
        target = out_dir / data.relative_to(ROOT / SOURCE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, target)
        written.append(target)
    requirements = out_dir / LEARN_REQUIREMENTS
    shutil.copyfile(ROOT / LEARN_REQUIREMENTS, requirements)
    written.append(requirements)
    return written


# --- make notebooks -----------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0] if argv else "notebooks")
    index_path = ROOT / "_build" / INDEX_NAME
    if not index_path.is_file():
        print(f"no {index_path.relative_to(ROOT)}: run `make book` first", file=sys.stderr)
        return 1
    index = json.loads(index_path.read_text(encoding="utf-8"))
    try:
        write_notebooks(index, out_dir)
    except ConversionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
