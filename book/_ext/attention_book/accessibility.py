"""Markup fixes for accessibility, each at the place that writes the markup.

- myst-nb's folded code cells: the ``<summary>`` is named "Toggle hidden content" by an
  ``aria-label`` while it shows "Show code cell source"; a name that does not contain the
  visible text fails speech-input users (WCAG 2.5.3). Without the label it is named by what it
  shows.
- Citations (the bibliography): docutils wraps them in ``role="list"`` but gives each entry the
  deprecated ``doc-biblioentry`` role instead of ``listitem``, so the list has no items for
  assistive technology (ARIA requires them). Each entry is a ``listitem`` here.

The interactive figures (explorers and instruments) get their caption and text alternative from
``attention_book.interactive_figure``.
"""

from __future__ import annotations

from html import escape

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode
from sphinx.application import Sphinx


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


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    app.add_node(
        HideCodeCellNode, override=True, html=(visit_hide_cell_input, depart_hide_cell_input)
    )
    app.add_node(nodes.citation, override=True, html=(visit_citation, depart_citation))
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
