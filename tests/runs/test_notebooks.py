"""The learners' notebooks, as the built book ships them in ``_build/html/_notebooks/``.

Each is executed as a learner would run it (nbclient, offline, in its own folder) and must show
what its page shows: at least as many images as the page has figures, the same figures byte for
byte (seeds are fixed), the explorers as plotly figures JupyterLab draws offline, no error outside
the cells that demonstrate one, and no raw MyST in its text.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import yaml

from attention_book import notebook_converter, notebook_downloads
from support import numerics, runs
from support.paths import HTML, ROOT

SOURCES = sorted((ROOT / "notebooks_src").rglob("*.md"))
IDS = [str(p.relative_to(ROOT / "notebooks_src").with_suffix("")) for p in SOURCES]
NOTEBOOKS = HTML / notebook_downloads.HTML_DIR_NAME
PLOTLY = "application/vnd.plotly.v1+json"
# Every MIME type a page's outputs may carry; anything else would be dropped by the book's
# build without a warning (see suppress_warnings in _config.yml), so it fails here.
KNOWN_MIME = {
    "text/plain",
    "text/html",
    "text/markdown",
    "image/png",
    "application/javascript",
    PLOTLY,
}
GLUE_PREFIX = "application/papermill.record/"
RAW_MYST = [
    re.compile(r"\{glue"),
    re.compile(r"\{numref\}"),
    re.compile(r"\{doc\}"),
    re.compile(r"\{cite"),
    re.compile(r"\{ref\}"),
    re.compile(r"\{eq\}"),
    re.compile(r"^`{3,}\{", re.MULTILINE),
    re.compile(r"^:::", re.MULTILINE),
]


def notebook_of(source: Path) -> Path:
    relative = source.relative_to(ROOT / "notebooks_src").with_suffix(".ipynb")
    path = NOTEBOOKS / relative
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: `make book` writes it")
    return path


def page_of(source: Path) -> Path:
    return HTML / source.relative_to(ROOT).with_suffix(".html")


class _Figures(HTMLParser):
    """Counts the page's figures: <figure> elements, each holding an image."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.figures = 0
        self.with_image = 0
        self._has_image = False

    def handle_starttag(self, tag, attrs):
        if tag == "figure":
            self.depth += 1
            self.figures += 1
            self._has_image = False
        elif tag == "img" and self.depth:
            self._has_image = True

    def handle_endtag(self, tag):
        if tag == "figure" and self.depth:
            self.depth -= 1
            self.with_image += self._has_image


def page_figures(page: Path) -> int:
    parser = _Figures()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.with_image


@pytest.fixture(scope="module")
def executed(learner_run):
    """Each page's learner notebook, executed in its own folder (``support.runs``), by source."""

    def run(source: Path):
        notebook_of(source)  # fails with what to do if the build did not write it
        return learner_run(source)

    return run


def _outputs(nb):
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            yield cell, output


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_the_notebook_has_no_myst_markup(source, html_dir):
    nb = nbformat.read(notebook_of(source), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for pattern in RAW_MYST:
            assert not pattern.search(cell.source), f"raw MyST in a markdown cell:\n{cell.source}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_the_notebook_runs_and_shows_what_the_page_shows(source, executed):
    nb = executed(source)
    images = 0
    for cell, output in _outputs(nb):
        tags = cell.metadata.get("tags", [])
        if output.output_type == "error":
            assert "raises-exception" in tags, (
                f"{output.ename}: {output.evalue} in a cell that is not meant to raise:\n"
                f"{cell.source}"
            )
            continue
        if output.output_type == "stream":
            assert "is not defined" not in output.text, output.text
            assert "Exception reporting mode" not in output.text, cell.source
            continue
        data = output.get("data", {})
        mimes = {m for m in data if not m.startswith(GLUE_PREFIX)}
        assert mimes <= KNOWN_MIME, f"unknown output MIME types {mimes - KNOWN_MIME}"
        for mime in ("text/plain", "text/html"):
            assert "is not defined" not in data.get(mime, ""), data[mime][:300]
        images += "image/png" in data
    expected = page_figures(page_of(source))
    assert images >= expected, f"the notebook drew {images} images; its page has {expected}"


@pytest.mark.parametrize(
    "source",
    [s for s in SOURCES if "explorers.show(" in s.read_text()],
    ids=lambda s: s.stem,
)
def test_explorers_are_drawn_by_jupyterlab_from_plotly_json(source, executed):
    nb = executed(source)
    specs = [o["data"][PLOTLY] for _, o in _outputs(nb) if PLOTLY in o.get("data", {})]
    assert specs, "no explorer was displayed"
    for spec in specs:
        assert spec["data"] and "layout" in spec
        assert "cdn" not in json.dumps(spec).lower()


CHAPTERS = [s for s in SOURCES if s.parent.name == "chapters"]


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


# A figure drawn under other numerics may grow or shrink by a tick label's width.
SIZE_TOLERANCE = 0.05


@pytest.mark.parametrize("source", CHAPTERS, ids=[s.stem for s in CHAPTERS])
def test_a_learner_draws_the_same_figures_as_the_book(source, executed, html_dir):
    """The learner's run draws the book's figures, one for one and of the same size.

    The learner's notebook runs under another numeric configuration (conftest.py's
    ``learner_run``; a page that trains, with another seed too), so its figures are not compared
    byte for byte here; tests/runs/test_seed_sweep.py checks that two trained pages rerun with the
    book's seed in the build's configuration draw the book's figures byte for byte.
    """
    book_run = numerics.BUILD_EXECUTED / source.relative_to(ROOT / "notebooks_src").with_suffix(
        ".ipynb"
    )
    if not book_run.is_file():
        pytest.fail(f"{book_run.relative_to(ROOT)} is missing: `make book` writes it")
    fresh = numerics.pngs(executed(source))
    built = numerics.pngs(nbformat.read(book_run, as_version=4))
    assert fresh, f"{source.name} drew no figures"
    assert len(fresh) == len(built), f"the learner drew {len(fresh)} figures, the book {len(built)}"
    for k, (ours, theirs) in enumerate(zip(fresh, built, strict=True)):
        (w, h), (bw, bh) = _png_size(ours), _png_size(theirs)
        assert abs(w - bw) <= SIZE_TOLERANCE * bw and abs(h - bh) <= SIZE_TOLERANCE * bh, (
            f"figure {k + 1}: {w}x{h} px in the learner's run, {bw}x{bh} in the book's"
        )


@pytest.mark.parametrize("source", CHAPTERS, ids=[s.stem for s in CHAPTERS])
def test_figures_have_their_number_and_caption_as_text(source, html_dir):
    nb = nbformat.read(notebook_of(source), as_version=4)
    page = page_of(source).read_text(encoding="utf-8")
    numbers = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span>', page)
    assert numbers, "the page has no numbered figure"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for number in numbers:
        assert f"**Fig. {number}.**" in text, f"Fig. {number} has no caption in the notebook"


def test_explorers_have_their_caption_and_text_description():
    """The book wraps each explorer in a caption and a text alternative; so does the notebook."""
    import yaml

    texts = yaml.safe_load((ROOT / "book" / "explorers.yml").read_text(encoding="utf-8"))
    found = 0
    for source in CHAPTERS:
        ids = re.findall(r'div_id="([^"]+)"', source.read_text(encoding="utf-8"))
        markdown = "\n".join(
            c.source
            for c in nbformat.read(notebook_of(source), as_version=4).cells
            if c.cell_type == "markdown"
        )
        for div_id in ids:
            found += 1
            assert f"**Interactive explorer.** {texts[div_id]['caption']}" in markdown, div_id
            assert texts[div_id]["operate"] in markdown, div_id
        # An instrument computes in the book's page; the notebook points to the kernel instead.
        for name in re.findall(r"^```\{instrument\} ([a-z0-9_-]+)", source.read_text(), re.M):
            found += 1
            entry = texts[f"instrument-{name}"]
            assert f"**Interactive instrument.** {entry['caption']}" in markdown, name
            assert "instrument here that computes in your browser" in markdown, name
            assert entry["operate"] in markdown, name
    assert found >= 5


def test_glued_numbers_fill_the_prose():
    """Every {glue:text} of a page becomes the number the book shows."""
    source = ROOT / "notebooks_src" / "chapters" / "06_transformer_block.md"
    nb = nbformat.read(notebook_of(source), as_version=4)
    index = json.loads((ROOT / "_build" / notebook_converter.INDEX_NAME).read_text())
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    page = page_of(source).read_text(encoding="utf-8")
    glued = re.findall(r"\{glue:text\}`([^`]+)`", source.read_text())
    assert len(glued) > 10
    for role in glued:
        key, _, spec = role.rpartition(":")
        value = notebook_converter.format_plain(
            index["glue"]["notebooks_src/chapters/06_transformer_block"][key]["text/plain"], spec
        )
        assert value in text, f"{role} -> {value} is not in the notebook"
        assert f'<span class="pasted-text">{value}</span>' in page, f"the page shows no {value}"


def test_citations_become_author_year_with_the_references_listed():
    source = ROOT / "notebooks_src" / "chapters" / "02_scaled_dot_product_attention.md"
    nb = nbformat.read(notebook_of(source), as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "(Vaswani et al., 2017)" in text
    assert nb.cells[-1].source.startswith("## References")
    assert "Attention is all you need" in nb.cells[-1].source
    # One list item per reference: a reference's later lines are indented under its item, so
    # that no renderer reads a line such as "2017." as a list of its own.
    lines = nb.cells[-1].source.splitlines()[2:]
    assert lines and lines[0].startswith("- "), lines[:2]
    assert all(line.startswith(("- ", "  ")) for line in lines), lines


# The published site's base URL, set once in _config.yml; the notebooks link to it.
SITE = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"]
# Links outside the book that a notebook may carry: its references' DOIs and papers.
OUTSIDE = re.compile(r"https://(doi\.org|arxiv\.org|aclanthology\.org|proceedings\.|papers\.)")


def _links(cell) -> list[str]:
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", cell.source, flags=re.DOTALL)  # not code
    return re.findall(r"\]\(([^)\s]+)\)", prose) + re.findall(r'href="([^"]+)"', prose)


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_link_resolves_in_the_zip_or_on_the_site(source, html_dir):
    """A link goes to a notebook of the zip (with its anchor), or to the site by absolute URL.

    A site URL is checked against the built site (the page exists and holds the anchor); the
    base URL is ``html.baseurl`` from _config.yml. Nothing links out of the zip by a relative
    path.
    """
    path = notebook_of(source)
    nb = nbformat.read(path, as_version=4)
    checked = 0
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for target in _links(cell):
            checked += 1
            file, _, anchor = target.partition("#")
            if target.startswith(SITE):
                page = html_dir / file.removeprefix(SITE)
                assert page.is_file(), f"{target}: the site has no such page"
                if anchor:
                    assert f'id="{anchor}"' in page.read_text(encoding="utf-8"), target
                continue
            if target.startswith(("http://", "https://")):
                assert OUTSIDE.match(target), f"a link to neither the zip nor the site: {target}"
                continue
            if not file:  # an anchor in this notebook
                ids = "\n".join(c.source for c in nb.cells)
                assert f'<a id="{anchor}"></a>' in ids, f"no anchor {anchor} in this notebook"
                continue
            resolved = (path.parent / file).resolve()
            assert resolved.is_relative_to(NOTEBOOKS.resolve()), f"{target} leaves the zip"
            assert file.endswith(".ipynb") and resolved.is_file(), f"broken link {target}"
            if anchor:
                other = nbformat.read(resolved, as_version=4)
                ids = "\n".join(c.source for c in other.cells)
                assert f'<a id="{anchor}"></a>' in ids, f"no anchor {anchor} in {file}"
    assert checked >= 2  # at least the header's links to the book and to "How to use"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_the_notebook_needs_nothing_of_the_book_s_tools_or_repository(source, html_dir):
    nb = nbformat.read(notebook_of(source), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "myst_nb" not in code and "sphinx" not in code.lower()
    assert "../quizzes/" not in code, "the quiz is read from a file beside the notebook"
    assert "../../lib/" not in text and "make notebooks` writes" not in text
    setup = nb.cells[1]
    assert setup.cell_type == "code" and "learner-setup" in setup.metadata["tags"]
    assert f'"{SITE}"' in setup.source and notebook_converter.SITE_VARIABLE in setup.source


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_page_offers_its_notebook_for_download(source, html_dir):
    page = page_of(source)
    html = page.read_text(encoding="utf-8")
    links = dict(re.findall(r'href="([^"]+)"[^>]*?\n?[^>]*?title="([^"]*)"', html, flags=re.DOTALL))
    wanted = {
        "Download this page as a Jupyter notebook": notebook_of(source),
        "Every notebook, the quizzes, the library's wheel and requirements": (
            NOTEBOOKS / notebook_downloads.ZIP_NAME
        ),
    }
    for title, file in wanted.items():
        hrefs = [h for h, t in links.items() if t == title]
        assert hrefs, f"the page has no link titled {title!r}"
        assert (page.parent / hrefs[0]).resolve() == file.resolve()


CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPOSITORY = CONFIG["repository"]["url"]


def _titled_links(page: Path) -> dict[str, str]:
    html = page.read_text(encoding="utf-8")
    found = re.findall(r'href="([^"]+)"[^>]*?\n?[^>]*?title="([^"]*)"', html, flags=re.DOTALL)
    return {title: href for href, title in found}


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_page_opens_its_notebook_in_colab_from_the_gh_pages_branch(source, html_dir):
    links = _titled_links(page_of(source))
    relative = source.relative_to(ROOT / "notebooks_src").with_suffix(".ipynb").as_posix()
    owner_repo = REPOSITORY.removeprefix("https://github.com/")
    assert links.get("Open this page's notebook in Google Colab") == (
        f"https://colab.research.google.com/github/{owner_repo}/blob/gh-pages/_notebooks/{relative}"
    )
    # The notebook is in the built site at that path, which the workflow publishes to gh-pages.
    assert (NOTEBOOKS / relative).is_file()


def test_every_page_links_the_repository_and_the_workflow_publishes_to_gh_pages(html_dir):
    pages = [p for p in html_dir.rglob("*.html") if "_static" not in p.parts]
    pages = [p for p in pages if "genindex" not in p.name and "search" not in p.name]
    pages.remove(html_dir / "index.html")  # a redirect to the landing page, with no header
    assert len(pages) > 20
    for page in pages:
        links = _titled_links(page)
        assert links.get("The book's source: pages, library and tests") == REPOSITORY, page
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text(encoding="utf-8")
    assert "path: _build/html" in workflow and "gh-pages" in workflow
    assert "contents: write" in workflow


def test_the_zip_has_every_notebook_the_quizzes_and_an_installable_wheel(html_dir, tmp_path):
    archive = zipfile.ZipFile(NOTEBOOKS / notebook_downloads.ZIP_NAME)
    names = set(archive.namelist())
    for source in SOURCES:
        relative = source.relative_to(ROOT / "notebooks_src").with_suffix(".ipynb")
        assert f"attention-lab-notebooks/{relative.as_posix()}" in names
    assert any(n.startswith("attention-lab-notebooks/quizzes/") for n in names)
    # The learner's requirements, not the author's.
    assert "attention-lab-notebooks/requirements-learn.txt" in names
    assert "attention-lab-notebooks/requirements.txt" not in names
    shipped = archive.read("attention-lab-notebooks/requirements-learn.txt").decode()
    assert shipped == (ROOT / "requirements-learn.txt").read_text(encoding="utf-8")
    (wheel,) = [n for n in names if n.endswith(".whl")]
    archive.extract(wheel, tmp_path)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(tmp_path / wheel),
        ],
        check=True,
    )
    found = subprocess.run(
        [sys.executable, "-c", "import attention_lab.masks as m; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(target), found


def test_a_lone_notebook_runs_top_to_bottom_with_its_quiz(numeric_configurations, html_dir):
    """A chapter's .ipynb downloaded on its own, in a folder with nothing beside it."""
    (run,) = [r for r in runs.matrix(numeric_configurations) if r.variant == "lone"]
    nb = runs.get(run)
    for cell, output in _outputs(nb):
        if output.output_type == "error":
            assert "raises-exception" in cell.metadata.get("tags", []), output.evalue
    quiz = [
        o["data"]["text/html"]
        for _, o in _outputs(nb)
        if 'id="quiz_05_masks"' in o.get("data", {}).get("text/html", "")
    ]
    assert quiz, "the quiz was not displayed"
    # The questions are embedded in the cell, their math already MathML (no TeX left to typeset).
    (cell,) = [c for c in nb.cells if "show_quiz(QUIZ" in c.source]
    questions = json.loads(cell.source.split('json.loads(r"""', 1)[1].split('""")', 1)[0])
    texts = [q["question"] for q in questions] + [
        a.get("answer", "") + a["feedback"] for q in questions for a in q["answers"]
    ]
    assert any("<math" in t for t in texts)
    assert not [t for t in texts if re.search(r"\$|\\\(", t)]
