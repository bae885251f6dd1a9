"""How the book and a learner's notebook display an explorer (a plotly figure), offline.

Book support, apart from the figure functions of :mod:`attention_lab.interactive`: those build
a ``plotly.graph_objects.Figure``; this turns one into the HTML fragment the book writes into its
page (:func:`to_html`) and into an object that also carries plotly's JSON for JupyterLab
(:func:`show`). It imports plotly only, and changes no global setting of plotly.
"""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["CONFIG", "PLOTLY_MIMETYPE", "Explorer", "show", "to_html"]

# Passed to plotly.js: resize with the page; no toolbar (on a phone it covers the controls).
CONFIG = {"responsive": True, "displaylogo": False, "displayModeBar": False}

_DIV_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def to_html(fig: go.Figure, *, div_id: str) -> str:
    """Return the HTML fragment that displays ``fig`` in a page that loads plotly.js itself.

    The fragment is a ``<div class="plotly-graph-div">`` and the script that draws the figure
    into it. plotly.js is not included: the book serves it from its own ``_static`` folder, on
    pages whose body contains a ``plotly-graph-div`` only. The same figure and ``div_id``
    always give the same string, so a rebuilt page is byte-for-byte the same.

    Args:
        fig: The figure, e.g. from :func:`attention_lab.interactive.attention_explorer`.
        div_id: The ``id`` of the figure's ``div``: a letter, then letters, digits, ``-`` or
            ``_``. It must be unique within the page; browser tests find the figure by it.

    Returns:
        The HTML fragment, e.g. for ``IPython.display.HTML``.

    Raises:
        TypeError: If ``fig`` is not a ``plotly.graph_objects.Figure`` or ``div_id`` is not a
            ``str``.
        ValueError: If ``div_id`` is not such an id.
    """
    if not isinstance(fig, go.Figure):
        raise TypeError(f"fig must be a plotly.graph_objects.Figure, got {type(fig).__name__}")
    if not isinstance(div_id, str):
        raise TypeError(f"div_id must be a str, got {type(div_id).__name__}")
    if not _DIV_ID.match(div_id):
        raise ValueError(
            "div_id must start with a letter and contain only letters, digits, '-' and '_', "
            f"got {div_id!r}"
        )
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        config=CONFIG,
        default_width="100%",
    )


PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"
"""The MIME type under which JupyterLab's plotly renderer (shipped inside ``plotly``) draws a
figure with its own copy of plotly.js, offline."""


class Explorer:
    """A figure to display: the book's HTML fragment and plotly's JSON, for whichever renders.

    The book's HTML build chooses ``text/html`` (plotly.js is served by the book); JupyterLab
    and VS Code choose ``application/vnd.plotly.v1+json`` and draw the figure with the
    plotly.js bundled in their plotly renderer, so a learner's notebook draws it with no
    network and no CDN.
    """

    # fig is a plotly.graph_objects.Figure; the annotation is left off so that the API page's
    # signature does not name plotly's private module.
    def __init__(self, fig, div_id: str) -> None:
        self.html = to_html(fig, div_id=div_id)
        self.spec = json.loads(pio.to_json(fig, validate=False))
        self.spec["config"] = dict(CONFIG)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.html, PLOTLY_MIMETYPE: self.spec}


def show(fig: go.Figure, *, div_id: str) -> Explorer:
    """Display ``fig`` (an explorer) in the book's page or in a learner's notebook.

    Make it a cell's last expression. The object it returns carries two representations: the
    HTML fragment of :func:`to_html`, which the book writes into its page (plotly.js comes from
    the book's own ``_static``), and the figure as plotly JSON, which JupyterLab draws with its
    plotly renderer. Neither loads anything from the network.

    Args:
        fig: The figure, e.g. from :func:`attention_lab.interactive.attention_explorer`.
        div_id: The ``id`` of the figure's ``div`` in the page, as for :func:`to_html`.

    Returns:
        An object that IPython displays, with ``html`` (the fragment) and ``spec`` (the JSON,
        a ``dict`` with ``data``, ``layout`` and ``config``).

    Raises:
        TypeError: If ``fig`` is not a ``plotly.graph_objects.Figure`` or ``div_id`` is not a
            ``str``.
        ValueError: If ``div_id`` is not a valid id.
    """
    return Explorer(fig, div_id)
