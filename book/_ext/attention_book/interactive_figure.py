"""The interactive figures: explorers (plotly) and instruments, numbered with the page's figures.

Each is wrapped in a ``<figure>`` with a caption and a text alternative (what it shows, how to
operate it), read from ``book/explorers.yml`` by the figure's id (a plotly div's ``div_id``, an
instrument's ``instrument-<name>``). A build fails if one has no entry there. Both are numbered
with the page's figures ("Fig. 3.5"): an :class:`InteractiveFigure` node, an enumerable node of
type ``figure``, holds each one's place when the page is read, so that Sphinx counts it, and its
number goes into the caption when the page is written.

As a Sphinx extension this module registers the node, puts every plotly explorer of a page in
one when the page is read, and writes every such node as its numbered ``<figure>``. Instruments
make their own node (``attention_book.instruments``).
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import yaml
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

EXPLORERS = Path("book") / "explorers.yml"  # relative to the book's root (Sphinx's confdir)
KEYBOARD_NOTE = " From the keyboard, the menus under the figure do the same as its controls."
_PLOTLY_DIV = re.compile(r'<div id="([A-Za-z][\w-]*)" class="plotly-graph-div"')


def explorer_texts(app: Sphinx) -> dict:
    """``book/explorers.yml``: each interactive figure's ``caption``, ``shows`` and ``operate``.

    Raises:
        ExtensionError: an entry lacks one of the three fields.
    """
    path = Path(app.confdir) / EXPLORERS
    texts = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for div_id, entry in texts.items():
        missing = {"caption", "shows", "operate"} - set(entry or {})
        if missing:
            raise ExtensionError(f"{EXPLORERS}: {div_id} needs {sorted(missing)}")
    return texts


def explorer_entry(app: Sphinx, key: str, docname: str, kind: str = "explorer") -> dict:
    """The entry ``key`` of ``book/explorers.yml``, for the ``kind`` a page ``docname`` holds.

    Raises:
        ExtensionError: ``book/explorers.yml`` has no entry ``key``, or the entry is incomplete.
    """
    entry = explorer_texts(app).get(key)
    if entry is None:
        raise ExtensionError(
            f"{docname}: the {kind} {key!r} has no caption and text alternative in {EXPLORERS}"
        )
    return entry


class InteractiveFigure(nodes.General, nodes.Element):
    """The place of an explorer or instrument, numbered by Sphinx like a figure.

    Attributes: ``ids`` (one id, the figure's: the plotly div's id or ``instrument-<name>``),
    ``key`` (its entry in ``book/explorers.yml``), ``kind`` (``"explorer"`` or
    ``"instrument"``), ``caption`` (for Sphinx's count and ``numref``) and, for an instrument,
    ``body`` (its HTML). An explorer's plotly HTML is its child. When the page is written the
    node becomes the ``<figure>`` of :func:`interactive_figure`.
    """


def _interactive_title(node: InteractiveFigure) -> str:
    return node["caption"]


def interactive_figure(
    key: str,
    body: str,
    entry: dict,
    kind: str,
    *,
    figure_id: bool = False,
    note: str = "",
    number: str | None = None,
) -> str:
    """``body`` inside a ``<figure>`` with the caption and text alternative of ``entry``.

    ``entry`` is ``book/explorers.yml``'s entry ``key``; ``kind`` is ``"explorer"`` (``body`` is
    a plotly figure, whose div carries the id ``key``) or ``"instrument"`` (``figure_id=True``:
    the figure carries it). ``note`` follows the text saying how to use it; ``number`` (e.g.
    ``"3.5"``) starts the caption as Sphinx starts a figure's.
    """
    caption, text = f"{key}-caption", f"{key}-text"
    classes = "explorer" if kind == "explorer" else f"explorer {kind}"
    own_id = f' id="{key}"' if figure_id else ""
    numbered = f'<span class="caption-number">Fig. {number} </span>' if number else ""
    return (
        f'<figure class="{classes}"{own_id} aria-labelledby="{caption}" '
        f'aria-describedby="{text}">\n'
        f"{body}\n"
        f'<figcaption id="{caption}">{numbered}'
        f'<span class="explorer-label">Interactive {kind}.</span> '
        f"{escape(entry['caption'])}</figcaption>\n"
        f'<details class="explorer-text"><summary>Text description of the {kind}</summary>\n'
        f'<div id="{text}"><p>{escape(entry["shows"])}</p>\n'
        f"<p><strong>How to use it:</strong> {escape(entry['operate'])}{note}</p></div>\n"
        "</details>\n</figure>\n"
    )


def _place_explorers(app: Sphinx, doctree: nodes.document) -> None:
    """When a page is read: put each plotly explorer in an InteractiveFigure, to be counted."""
    docname = app.env.docname
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split() or isinstance(raw.parent, InteractiveFigure):
            continue
        found = _PLOTLY_DIV.search(raw.astext())
        if not found:
            continue
        div_id = found.group(1)
        entry = explorer_entry(app, div_id, docname)
        place = InteractiveFigure(
            ids=[div_id], key=div_id, kind="explorer", caption=entry["caption"]
        )
        raw.replace_self(place)
        place += raw


def _write_interactive_figures(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """When a page is written: each InteractiveFigure becomes its numbered ``<figure>``."""
    numbers = app.env.toc_fignumbers.get(docname, {}).get("figure", {})
    for place in list(doctree.findall(InteractiveFigure)):
        if app.builder.format != "html":
            place["ids"] = []
            place.replace_self(place.children)
            continue
        key, kind = place["key"], place["kind"]
        found = numbers.get(place["ids"][0])
        number = ".".join(map(str, found)) if found else None
        if kind == "explorer":
            raws = [r for r in place.findall(nodes.raw) if _PLOTLY_DIV.search(r.astext())]
            if len(raws) != 1:
                raise ExtensionError(f"{docname}: the explorer {key!r} lost its plotly HTML")
            markup = interactive_figure(
                key, raws[0].astext(), explorer_entry(app, key, docname), kind,
                note=KEYBOARD_NOTE, number=number,
            )  # fmt: skip
        else:
            markup = interactive_figure(
                key, place["body"], explorer_entry(app, key, docname, kind), kind,
                figure_id=True, number=number,
            )  # fmt: skip
        # The markup carries the id where it belongs (the plotly div, the instrument's figure);
        # replace_self would copy the node's ids onto the raw node, and so into the page twice.
        place["ids"] = []
        place.replace_self(nodes.raw("", markup, format="html"))


def _skip(self, node: nodes.Node) -> None:
    pass


def setup(app: Sphinx) -> dict:
    app.add_enumerable_node(
        InteractiveFigure,
        "figure",
        _interactive_title,
        html=(_skip, _skip),
        latex=(_skip, _skip),
        text=(_skip, _skip),
    )
    app.connect("doctree-read", _place_explorers)
    app.connect("doctree-resolved", _write_interactive_figures)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
