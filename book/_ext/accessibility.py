"""Markup fixes for accessibility, each at the place that writes the markup.

- myst-nb's folded code cells: the ``<summary>`` is named "Toggle hidden content" by an
  ``aria-label`` while it shows "Show code cell source"; a name that does not contain the
  visible text fails speech-input users (WCAG 2.5.3). Without the label it is named by what it
  shows.
- Citations (the bibliography): docutils wraps them in ``role="list"`` but gives each entry the
  deprecated ``doc-biblioentry`` role instead of ``listitem``, so the list has no items for
  assistive technology (ARIA requires them). Each entry is a ``listitem`` here.
- Interactive explorers (plotly figures): each is wrapped in a ``<figure>`` with a caption and a
  text alternative (what it shows, how to operate it), read from ``book/explorers.yml`` by the
  figure's ``div_id``. A build fails if an explorer has no entry there.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import yaml
from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

EXPLORERS = Path("book") / "explorers.yml"
_PLOTLY_DIV = re.compile(r'<div id="([A-Za-z][\w-]*)" class="plotly-graph-div"')


def visit_hide_cell_input(self, node: HideCodeCellNode) -> None:
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n')
    self.body.append("<summary>\n")
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def depart_hide_cell_input(self, node: HideCodeCellNode) -> None:
    self.body.append("</details>\n")


def visit_citation(self, node: nodes.citation) -> None:
    if not isinstance(node.previous_sibling(), type(node)):
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(self.starttag(node, "div", classes=[node.tagname], role="listitem"))


def depart_citation(self, node: nodes.citation) -> None:
    self.body.append("</div>\n")
    if not isinstance(node.next_node(descend=False, siblings=True), type(node)):
        self.body.append("</div>\n")


def _explorer_texts(app: Sphinx) -> dict:
    path = Path(app.confdir) / EXPLORERS
    texts = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for div_id, entry in texts.items():
        missing = {"caption", "shows", "operate"} - set(entry or {})
        if missing:
            raise ExtensionError(f"{EXPLORERS}: {div_id} needs {sorted(missing)}")
    return texts


KEYBOARD_NOTE = " From the keyboard, the menus under the figure do the same as its controls."


def interactive_figure(
    key: str, body: str, entry: dict, kind: str, *, figure_id: bool = False, note: str = ""
) -> str:
    """``body`` inside a ``<figure>`` with the caption and text alternative of ``entry``.

    ``entry`` is ``book/explorers.yml``'s entry ``key``; ``kind`` is ``"explorer"`` (``body`` is
    a plotly figure, whose div carries the id ``key``) or ``"instrument"`` (``figure_id=True``:
    the figure carries it). ``note`` follows the text saying how to use it.
    """
    caption, text = f"{key}-caption", f"{key}-text"
    classes = "explorer" if kind == "explorer" else f"explorer {kind}"
    own_id = f' id="{key}"' if figure_id else ""
    return (
        f'<figure class="{classes}"{own_id} aria-labelledby="{caption}" '
        f'aria-describedby="{text}">\n'
        f"{body}\n"
        f'<figcaption id="{caption}"><span class="explorer-label">Interactive {kind}.</span> '
        f"{escape(entry['caption'])}</figcaption>\n"
        f'<details class="explorer-text"><summary>Text description of the {kind}</summary>\n'
        f'<div id="{text}"><p>{escape(entry["shows"])}</p>\n'
        f"<p><strong>How to use it:</strong> {escape(entry['operate'])}{note}</p></div>\n"
        "</details>\n</figure>\n"
    )


def _caption_explorers(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html":
        return
    texts = None
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split():
            continue
        html = raw.astext()
        found = _PLOTLY_DIV.search(html)
        if not found:
            continue
        if texts is None:
            texts = _explorer_texts(app)
        div_id = found.group(1)
        if div_id not in texts:
            raise ExtensionError(
                f"{docname}: the explorer {div_id!r} has no caption and text alternative in "
                f"{EXPLORERS}"
            )
        markup = interactive_figure(div_id, html, texts[div_id], "explorer", note=KEYBOARD_NOTE)
        raw.replace_self(nodes.raw("", markup, format="html"))


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    app.add_node(
        HideCodeCellNode, override=True, html=(visit_hide_cell_input, depart_hide_cell_input)
    )
    app.add_node(nodes.citation, override=True, html=(visit_citation, depart_citation))
    app.connect("doctree-resolved", _caption_explorers)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
