"""The learners' notebooks at build time: what the conversion needs, and the downloads.

As a Sphinx extension, this module writes, when an HTML build finishes:

- ``_build/learner_index.json``: what the conversion (``attention_book.notebook_converter``)
  needs from the build: figure, equation and chapter numbers, titles, labels, glued values and
  citations;
- ``<html>/_notebooks/``: every page's notebook, the quizzes' JSON files, the library as a wheel,
  ``requirements-learn.txt`` and a zip of all of it (``attention_book.notebook_downloads``);

and adds the page's notebook and the zip to each page's download menu, an "Open in Colab" link
to the page's notebook as the ``gh-pages`` branch holds it (the workflow in ``.github/workflows``
publishes the built site there, ``_notebooks/`` included) and a link to the repository. The two
URLs are set once, in ``_config.yml``: ``html.baseurl`` (the published site) and
``repository.url``. ``make notebooks`` writes
the same notebooks elsewhere from the index of the last build (``python -m
attention_book.notebook_converter OUTPUT_DIR``).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from . import ROOT
from .notebook_converter import INDEX_NAME, LEARN_REQUIREMENTS, SOURCE_DIR, wheel_name
from .notebook_downloads import HTML_DIR_NAME, ZIP_NAME, write_downloads

BOOK_TITLE = "Attention, by running it"
PAGES_BRANCH = "gh-pages"  # the branch the workflow publishes the built site to
COLAB = "https://colab.research.google.com/github"


# --- the index: what the conversion needs from the build ----------------------------------------


def build_index(app) -> dict:
    """Collect numbers, titles, labels, glued values and citations from a finished Sphinx build."""
    env = app.env
    std = env.get_domain("std")
    numfig = env.toc_fignumbers
    formats = {kind: str(text) for kind, text in app.config.numfig_format.items()}

    def number(docname: str, kind: str, node_id: str) -> str | None:
        found = numfig.get(docname, {}).get(kind, {}).get(node_id)
        return ".".join(map(str, found)) if found else None

    pages = {}
    for docname in sorted(env.found_docs):
        secnum = env.toc_secnumbers.get(docname, {}).get("")
        pages[docname] = {
            "title": env.titles[docname].astext() if docname in env.titles else docname,
            "number": ".".join(map(str, secnum)) if secnum else None,
            "words": getattr(env, "reading_words", {}).get(docname),  # attention_book.reading_time
        }

    labels = {}
    for label, (docname, node_id, title) in std.labels.items():
        entry = {"doc": docname, "id": node_id, "title": title or None}
        for kind in ("figure", "table", "code-block", "exercise", "solution"):
            if (num := number(docname, kind, node_id)) is not None:
                entry["kind"], entry["number"] = kind, num
        labels[label] = entry
    for label, (docname, node_id) in std.anonlabels.items():
        labels.setdefault(label, {"doc": docname, "id": node_id, "title": None})
    # sphinx-exercise keeps its own registry; its numbers are in toc_fignumbers too.
    for label, item in getattr(env, "sphinx_exercise_registry", {}).items():
        docname = item.get("docname")
        kind = item.get("type", "exercise")
        entry = labels.setdefault(label, {"doc": docname, "id": label, "title": None})
        entry["kind"] = kind
        entry["number"] = number(docname, kind, label)
        entry["title"] = str(item.get("title") or "") or entry["title"]

    equations = {}
    for label, (docname, eqno) in env.get_domain("math").equations.items():
        num = number(docname, "displaymath", f"equation-{label}") or str(eqno)
        equations[label] = {"doc": docname, "number": num}

    output = Path(app.outdir).parent / "jupyter_execute"
    glue = {}
    for docname in pages:
        path = output / f"{docname}.glue.json"
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            glue[docname] = {key: value.get("data", {}) for key, value in data.items()}

    # Every figure's number by its node id: explorers and instruments are numbered with the
    # figures (attention_book.interactive_figure) but have no label to find them by.
    interactive = {
        docname: {
            node_id: ".".join(map(str, found)) for node_id, found in kinds.get("figure", {}).items()
        }
        for docname, kinds in numfig.items()
    }

    return {
        "title": str(app.config.html_title or BOOK_TITLE),
        "site_url": app.config.html_baseurl,
        "repository_url": repository_url(app),
        "numfig_format": formats,
        "pages": pages,
        "interactive": interactive,
        "labels": labels,
        "equations": equations,
        "glue": glue,
        "citations": citations(ROOT / "book" / "references.bib"),
    }


def _last_names(persons) -> list[str]:
    return [" ".join(p.last_names).replace("{", "").replace("}", "") for p in persons]


def citations(bibfile: Path) -> dict:
    """Each entry of the bibliography: its author-year label and a one-line reference."""
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    bibliography = parse_file(str(bibfile))
    style = find_plugin("pybtex.style.formatting", "plain")()
    backend = find_plugin("pybtex.backends", "markdown")()
    formatted = {
        entry.key: entry.text.render(backend)
        for entry in style.format_entries(bibliography.entries.values())
    }
    out = {}
    for key, entry in bibliography.entries.items():
        names = _last_names(entry.persons.get("author", []) or entry.persons.get("editor", []))
        if len(names) >= 3:
            who = f"{names[0]} et al."
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = names[0] if names else key
        year = entry.fields.get("year", "n.d.")
        text = formatted[key].replace("\\", "")
        out[key] = {"author": who, "year": year, "reference": text}
    return out


# --- Sphinx hooks ------------------------------------------------------------------------------


def repository_url(app) -> str:
    """The repository's URL, ``repository.url`` in _config.yml (no trailing slash)."""
    return str(app.config.html_theme_options.get("repository_url", "")).rstrip("/")


def colab_url(app, relative: PurePosixPath) -> str:
    """Colab's link to a page's notebook on the gh-pages branch (``_notebooks/<relative>.ipynb``).

    Colab opens a notebook from a public GitHub path: ``/github/<owner>/<repo>/blob/<branch>/``.
    """
    owner_repo = repository_url(app).removeprefix("https://github.com/")
    return f"{COLAB}/{owner_repo}/blob/{PAGES_BRANCH}/{HTML_DIR_NAME}/{relative}.ipynb"


def _check_urls(app, config) -> None:
    # The notebooks link to the site by absolute URL and Colab opens them from GitHub: both
    # URLs must be set, once, in _config.yml.
    if not str(config.html_baseurl).startswith("https://"):
        raise ValueError("_config.yml: html.baseurl must be the published site's https URL")
    if not str(config.html_theme_options.get("repository_url", "")).startswith(
        "https://github.com/"
    ):
        raise ValueError("_config.yml: repository.url must be the repository's GitHub URL")
    # "How to use" links the repository through this substitution: the URL stays in one place.
    repository = str(config.html_theme_options["repository_url"]).rstrip("/")
    config.myst_substitutions = {
        **config.myst_substitutions,
        "repository_link": f"[source repository]({repository})",
    }


def _index_path(app) -> Path:
    return Path(app.outdir).parent / INDEX_NAME


def _write(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    # Sphinx's titles may be lazy translation strings: default=str makes them plain text, and the
    # notebooks are written from the index as `make notebooks` reads it back.
    text = json.dumps(build_index(app), indent=1, sort_keys=True, default=str)
    _index_path(app).write_text(text, encoding="utf-8")
    index = json.loads(text)
    write_downloads(index, Path(app.outdir), log=logger.info)


def _download_button(app, pagename, templatename, context, doctree) -> None:
    # Every page: a link to the repository; a notebook page also "Open in Colab". They go in a
    # menu of their own before the theme's download menu.
    buttons = context.get("header_buttons", [])
    is_notebook = pagename.startswith(f"{SOURCE_DIR}/")
    relative = PurePosixPath(pagename).relative_to(SOURCE_DIR) if is_notebook else None
    launch = [
        {
            "type": "link",
            "url": repository_url(app),
            "text": "Source repository",
            "tooltip": "The book's source: pages, library and tests",
            "icon": "fas fa-code-branch",
            "label": "repository-button",
        }
    ]
    if is_notebook:
        launch.insert(
            0,
            {
                "type": "link",
                "url": colab_url(app, relative),
                "text": "Open in Colab",
                "tooltip": "Open this page's notebook in Google Colab",
                "icon": "fas fa-play",
                "label": "colab-button",
            },
        )
    buttons.insert(
        0,
        {
            "type": "group",
            "tooltip": "Run this page's notebook, or see the book's source",
            "icon": "fas fa-rocket",
            "label": "launch-buttons",
            "buttons": launch,
        },
    )
    if not is_notebook:
        return
    # The theme's download menu offers the page's source (.md); add the learner's notebook.
    pathto = context["pathto"]
    for button in buttons:
        if button.get("label") == "download-buttons":
            button["buttons"].insert(
                0,
                {
                    "type": "link",
                    "url": pathto(f"{HTML_DIR_NAME}/{relative}.ipynb", 1),
                    "text": ".ipynb",
                    "tooltip": "Download this page as a Jupyter notebook",
                    "icon": "fas fa-book",
                    "label": "download-notebook-button",
                },
            )
            button["buttons"].insert(
                1,
                {
                    "type": "link",
                    "url": pathto(f"{HTML_DIR_NAME}/{ZIP_NAME}", 1),
                    "text": "all notebooks (.zip)",
                    "tooltip": "Every notebook, the quizzes, the library's wheel and requirements",
                    "icon": "fas fa-file-archive",
                    "label": "download-zip-button",
                },
            )
            # What the zip holds for setting up, each on its own (a lone notebook needs them).
            button["buttons"][2:2] = [
                {
                    "type": "link",
                    "url": pathto(f"{HTML_DIR_NAME}/{LEARN_REQUIREMENTS}", 1),
                    "text": LEARN_REQUIREMENTS,
                    "tooltip": "What the notebooks need, pinned, with PyTorch's CPU build",
                    "icon": "fas fa-list",
                    "label": "download-requirements-button",
                },
                {
                    "type": "link",
                    "url": pathto(f"{HTML_DIR_NAME}/{wheel_name()}", 1),
                    "text": "attention_lab (.whl)",
                    "tooltip": "The attention_lab library, as a wheel for pip",
                    "icon": "fas fa-box",
                    "label": "download-wheel-button",
                },
            ]


def setup(app) -> dict:
    # After the theme has made its header buttons (priority 500), before the page is written.
    app.connect("config-inited", _check_urls)
    app.connect("html-page-context", _download_button, priority=600)
    app.connect("build-finished", _write)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
