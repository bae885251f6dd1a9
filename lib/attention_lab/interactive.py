"""Interactive figures for the static book: plotly explorers that need no kernel.

Each explorer takes tensors or arrays that a page has computed and returns a
``plotly.graph_objects.Figure`` whose controls (plotly buttons, dropdowns and sliders) switch
between states that are all precomputed and stored in the figure, so the figure works in a
static HTML page with no Python behind it. :func:`show` displays a figure in a page or a
notebook; :func:`to_html` is the HTML fragment the book's pages use. Like
:mod:`attention_lab.plotting`, this module is pure: it imports no model code, and it changes no
global setting of plotly.

Two controls that act on one figure must not undo each other. Where a figure has two, one
control chooses which traces are ``visible`` and the other sets the data (``z`` or ``y``) of all
of those traces at once, so any order of clicks ends in the state both controls show. A third
control changes the layout (an axis range), or rewrites the steps of another control (choosing a
layer moves the head slider back to head 0).

Token labels are escaped: a token such as ``<b>`` is shown as the text ``<b>``; markup in a
token is never interpreted, neither by plotly's label renderer nor by the browser.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.subplots import make_subplots

from attention_lab._validation import check_int
from attention_lab.plotting import _as_float_array

__all__ = [
    "Explorer",
    "attention_explorer",
    "heads_explorer",
    "mask_lab",
    "positional_explorer",
    "scaling_explorer",
    "show",
    "to_html",
]

# Values are stored with this many decimals: enough for a hover label, light enough for a page.
DECIMALS = 3
# Passed to plotly.js: resize with the page; no toolbar (on a phone it covers the controls).
CONFIG = {"responsive": True, "displaylogo": False, "displayModeBar": False}

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12}
# plotly.js draws the active button near-white (#F4FAFF), so the others are a darker grey.
_CONTROL_STYLE = {"bgcolor": "#d1d5db", "bordercolor": "#6b7280", "font": {"size": 12}}
_HOVER_WEIGHT = "query: %{customdata[0]}<br>key: %{customdata[1]}<br>weight: %{z:.3f}"
_DIV_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
# Colour-blind-safe colours (seaborn's "colorblind" palette): blue, orange, green.
_BLUE, _ORANGE, _GREEN = "#0173b2", "#de8f05", "#029e73"


def to_html(fig: go.Figure, *, div_id: str) -> str:
    """Return the HTML fragment that displays ``fig`` in a page that loads plotly.js itself.

    The fragment is a ``<div class="plotly-graph-div">`` and the script that draws the figure
    into it. plotly.js is not included: the book serves it from its own ``_static`` folder, on
    pages whose body contains a ``plotly-graph-div`` only. The same figure and ``div_id``
    always give the same string, so a rebuilt page is byte-for-byte the same.

    Args:
        fig: The figure, e.g. from :func:`attention_explorer`.
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
        fig: The figure, e.g. from :func:`attention_explorer`.
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


# --- shared helpers ------------------------------------------------------------------------


def _rounded(array: np.ndarray, decimals: int = DECIMALS) -> list:
    """``array`` as nested lists of rounded Python floats; NaN becomes None (a gap)."""
    # Adding 0.0 turns -0.0 into 0.0, one character shorter in the page.
    values = np.round(np.asarray(array, dtype=np.float64), decimals) + 0.0
    as_object = values.astype(object)
    as_object[np.isnan(values)] = None
    return as_object.tolist()


def _labels(tokens: Sequence[str], name: str, expected: int | None = None) -> list[str]:
    """Escaped token labels, or raise if ``tokens`` is not a sequence of ``expected`` strings."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of token strings, got {type(tokens).__name__}")
    if not all(isinstance(token, str) for token in tokens):
        raise TypeError(f"{name} must contain only str tokens")
    if expected is not None and len(tokens) != expected:
        raise ValueError(f"{name} has {len(tokens)} tokens but the weights have {expected}")
    # plotly.js reads a few tags (<b>, <br>, <a href>...) in labels and decodes entities:
    # escaping makes it show the token's characters, whatever they are.
    return [html.escape(token, quote=False) for token in tokens]


def _pairs(queries: list[str], keys: list[str]) -> list[list[list[str]]]:
    """``[Tq][Tk]`` pairs (query label, key label): the hover text of each heatmap cell."""
    return [[[query, key] for key in keys] for query in queries]


def _as_bool_array(mask: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    """A boolean mask as a NumPy array, or raise ``TypeError``."""
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise TypeError(
                f"{name} must be a torch.bool mask (True = may attend), got {mask.dtype}"
            )
        return mask.detach().cpu().numpy()
    array = np.asarray(mask)
    if array.dtype != np.bool_:
        raise TypeError(f"{name} must be a boolean mask (True = may attend), got {array.dtype}")
    return array


def _check_heads(weights: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    """``weights`` as a float array of shape ``[L, H, T, T]``, or raise."""
    array = _as_float_array(weights, name, "[L, H, T, T]")
    if array.shape[-1] != array.shape[-2]:
        raise ValueError(
            f"{name} must be self-attention weights [L, H, T, T], got shape {tuple(array.shape)}"
        )
    return array


class _Frame:
    """Fixed margins around the plotting area, so that controls keep their place.

    Controls and labels live in the margins and are positioned in "paper" coordinates (0 and 1
    are the edges of the plotting area). With the figure's height and margins fixed, and no
    automatic margins, a control placed ``px`` pixels below the figure's top edge stays there
    at every width.
    """

    def __init__(self, height: int, top: int, bottom: int, left: int, right: int = 12) -> None:
        check_int(height, "height", minimum=top + bottom + 100)
        self.height, self.top, self.bottom = height, top, bottom
        self.left, self.right = left, right

    def y(self, px: float) -> float:
        """Paper y of the point ``px`` pixels below the top edge of the figure."""
        return (self.height - self.bottom - px) / (self.height - self.top - self.bottom)

    def apply(self, fig: go.Figure) -> None:
        fig.update_layout(
            template="none",
            autosize=True,
            height=self.height,
            margin={
                "l": self.left,
                "r": self.right,
                "t": self.top,
                "b": self.bottom,
                "autoexpand": False,
            },
            font=_FONT,
            paper_bgcolor="white",
            plot_bgcolor="white",
            hoverlabel={"font": {"size": 13}},
        )

    def label(self, text: str, px: float) -> dict:
        """The name of a control, right-aligned in the left margin, ``px`` below the top."""
        return {
            "text": text,
            "x": 0,
            "y": self.y(px),
            "xref": "paper",
            "yref": "paper",
            "xanchor": "right",
            "yanchor": "middle",
            "xshift": -8,
            "showarrow": False,
            "font": {"size": 12, "color": "#111827"},
        }

    def buttons(self, buttons: list[dict], px: float, active: int = 0) -> dict:
        """A row of buttons of which one is active (a radio group), its middle ``px`` down."""
        return {
            "type": "buttons",
            "direction": "right",
            "active": active,
            "showactive": True,
            "buttons": buttons,
            "x": 0,
            "y": self.y(px),
            "xanchor": "left",
            "yanchor": "middle",
            "pad": {"t": 0, "b": 0, "l": 0, "r": 0},
            **_CONTROL_STYLE,
        }

    def dropdown(self, buttons: list[dict], px: float, active: int = 0) -> dict:
        return {**self.buttons(buttons, px, active), "type": "dropdown", "direction": "down"}

    def slider(self, steps: list[dict], px: float, active: int = 0) -> dict:
        """A slider across the plotting area's width, its top ``px`` below the figure's top."""
        return {
            "active": active,
            "steps": steps,
            "currentvalue": {"visible": False},
            "x": 0,
            "len": 1.0,
            "y": self.y(px),
            "xanchor": "left",
            "yanchor": "top",
            "pad": {"t": 0, "b": 0, "l": 0, "r": 0},
            "ticklen": 3,
            "font": {"size": 11},
            "bgcolor": "#e5e7eb",
            "activebgcolor": "#9ca3af",
            "bordercolor": "#6b7280",
        }


def _token_axis(labels: list[str], *, reverse: bool = False, show: bool = True) -> dict:
    """Axis settings labelling positions ``0 .. T-1`` with (escaped) tokens.

    Positions, not tokens, are the coordinates: repeated tokens ("the" twice) would otherwise
    fall into one category.
    """
    size = len(labels)
    return {
        "tickmode": "array",
        "tickvals": list(range(size)),
        "ticktext": labels if show else [""] * size,
        "range": [size - 0.5, -0.5] if reverse else [-0.5, size - 0.5],
        "showgrid": False,
        "zeroline": False,
        "showline": False,
        "ticks": "",
        "automargin": False,
        "tickfont": {"size": 11},
    }


def _weight_colours(*, fixed: bool = True, **colorbar) -> dict:
    """Viridis from 0 to 1 (``fixed``), or from the smallest to the largest weight shown."""
    limits = {"cmin": 0, "cmax": 1} if fixed else {"cauto": True}
    return {
        "colorscale": "Viridis",
        **limits,
        "colorbar": {"title": {"text": "weight", "side": "top"}, "thickness": 12, **colorbar},
    }


# --- explorer 1: a gallery of sentences x layer x head ---------------------------------------


def attention_explorer(
    gallery: Mapping[str, tuple[Sequence[str], torch.Tensor | np.ndarray]],
    *,
    height: int = 660,
) -> go.Figure:
    """One attention head as a heatmap, with the sentence, layer and head chosen by controls.

    A dropdown picks the sentence, a row of buttons the layer, a slider the head; choosing a
    layer moves the slider back to head 0. Hovering over a cell shows the query token, the key
    token and the weight. Every state is stored in the figure, weights rounded to 3 decimals.
    Layers and heads are numbered from 0, as in ``weights[layer, head]``.

    Args:
        gallery: Maps a short label for each sentence (shown in the dropdown; labels longer
            than 32 characters are cut) to ``(tokens, weights)``: the sentence's ``T`` tokens
            and its weights of shape ``[L, H, T, T]``, as returned by
            ``attention_lab.pretrained.attention_maps``. All sentences need the same ``L`` and
            ``H``; ``T`` may differ.
        height: Height of the figure in pixels; its width follows the page.

    Returns:
        The figure: one heatmap per sentence (only the chosen one visible); the sentence
        dropdown is ``layout.updatemenus[0]``, the layer buttons ``updatemenus[1]``, the head
        slider ``layout.sliders[0]``.

    Raises:
        TypeError: If ``gallery`` is not a mapping of ``str`` labels to ``(tokens, weights)``
            pairs, or a token is not a ``str``.
        ValueError: If ``gallery`` is empty, some ``weights`` is not ``[L, H, T, T]``, its
            token count is not ``T``, or the sentences differ in ``L`` or ``H``.
    """
    if not isinstance(gallery, Mapping):
        raise TypeError(
            f"gallery must be a dict of label -> (tokens, weights), got {type(gallery).__name__}"
        )
    if not gallery:
        raise ValueError("gallery must contain at least one sentence, got an empty mapping")
    names, token_labels, stacks = [], [], []
    for label, entry in gallery.items():
        if not isinstance(label, str):
            raise TypeError(f"gallery keys must be str labels, got {type(label).__name__}")
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise TypeError(f"gallery[{label!r}] must be a (tokens, weights) pair")
        weights = _check_heads(entry[1], f"gallery[{label!r}] weights")
        if stacks and weights.shape[:2] != stacks[0].shape[:2]:
            raise ValueError(
                f"every sentence needs the same [L, H]: gallery[{label!r}] has "
                f"{list(weights.shape[:2])}, the first sentence {list(stacks[0].shape[:2])}"
            )
        token_labels.append(_labels(entry[0], f"gallery[{label!r}] tokens", weights.shape[-1]))
        names.append(html.escape(label if len(label) <= 32 else label[:31] + "…", quote=False))
        stacks.append(weights)
    num_layers, num_heads = stacks[0].shape[:2]

    # The colour bar lies under the heatmap, not beside it, and the key tokens stand upright:
    # on a 375 px phone a 20-token sentence then still gets about 11 px per column.
    frame = _Frame(height, top=142, bottom=128, left=92, right=16)
    fig = go.Figure()
    for s, (tokens, weights) in enumerate(zip(token_labels, stacks, strict=True)):
        fig.add_trace(
            go.Heatmap(
                z=_rounded(weights[0, 0]),
                customdata=_pairs(tokens, tokens),
                hovertemplate=_HOVER_WEIGHT + "<extra></extra>",
                coloraxis="coloraxis",
                visible=s == 0,
                name=names[s],
            )
        )

    def head_steps(layer: int) -> list[dict]:
        return [
            {
                "label": str(head),
                "method": "restyle",
                "args": [{"z": [_rounded(w[layer, head]) for w in stacks]}],
            }
            for head in range(num_heads)
        ]

    sentence_buttons = []
    for s, tokens in enumerate(token_labels):
        size = len(tokens)
        axes = {
            "xaxis.tickvals": list(range(size)),
            "xaxis.ticktext": tokens,
            "xaxis.range": [-0.5, size - 0.5],
            "yaxis.tickvals": list(range(size)),
            "yaxis.ticktext": tokens,
            "yaxis.range": [size - 0.5, -0.5],
        }
        visible = [i == s for i in range(len(stacks))]
        sentence_buttons.append(
            {"label": names[s], "method": "update", "args": [{"visible": visible}, axes]}
        )
    layer_buttons = [
        {
            "label": str(layer),
            "method": "update",
            "args": [
                {"z": [_rounded(w[layer, 0]) for w in stacks]},
                {"sliders[0].active": 0, "sliders[0].steps": head_steps(layer)},
            ],
        }
        for layer in range(num_layers)
    ]
    frame.apply(fig)
    first = token_labels[0]
    fig.update_layout(
        xaxis={**_token_axis(first), "tickangle": -90},
        yaxis=_token_axis(first, reverse=True),
        coloraxis=_weight_colours(
            fixed=False,
            orientation="h",
            x=0,
            xanchor="left",
            len=0.6,
            thickness=10,
            y=frame.y(frame.height - 26),
            yanchor="middle",
        ),
        updatemenus=[
            frame.dropdown(sentence_buttons, px=20),
            frame.buttons(layer_buttons, px=58),
        ],
        sliders=[frame.slider(head_steps(0), px=84)],
        annotations=[
            frame.label("sentence", 20),
            frame.label("layer", 58),
            frame.label("head", 93),
            {
                **frame.label("rows: query, columns: key", frame.top - 10),
                "x": 1,
                "xshift": 0,
                "font": {"size": 11, "color": "#4b5563"},
            },
        ],
    )
    return fig


# --- explorer 2: every head of one layer, side by side -----------------------------------------


def heads_explorer(
    tokens: Sequence[str],
    weights: torch.Tensor | np.ndarray,
    *,
    columns: int = 3,
    row_height: int = 190,
) -> go.Figure:
    """Every head of one layer as small multiples, with buttons that choose the layer.

    Each head is a heatmap of its ``[T, T]`` weights, all on one colour scale that runs from
    the smallest to the largest weight of the layer. Query tokens label the rows of the first
    column; the columns are the keys, in the same order (too narrow on a phone to be labelled).
    Hovering over a cell shows the query token, the key token and the weight. Layers and heads
    are numbered from 0, as in ``weights[layer, head]``.

    Args:
        tokens: The ``T`` tokens of the sentence.
        weights: Shape ``[L, H, T, T]``, e.g. from ``attention_lab.pretrained.attention_maps``,
            or the weights of ``L`` modules stacked. ``L`` may be 1 (one layer, no buttons).
        columns: Number of heads per row of the grid.
        row_height: Height of one row of the grid in pixels.

    Returns:
        The figure: ``H`` heatmaps (trace ``h`` is head ``h``), the layer buttons as
        ``layout.updatemenus[0]``.

    Raises:
        TypeError: If ``tokens`` is not a list of ``str`` or an int argument is not an int.
        ValueError: If ``weights`` is not ``[L, H, T, T]``, ``len(tokens) != T``, or an int
            argument is not positive.
    """
    stack = _check_heads(weights, "weights")
    check_int(columns, "columns")
    check_int(row_height, "row_height", minimum=80)
    num_layers, num_heads, size = stack.shape[:3]
    labels = _labels(tokens, "tokens", size)
    columns = min(columns, num_heads)
    rows = -(-num_heads // columns)
    top = 64 if num_layers > 1 else 28
    frame = _Frame(top + rows * row_height + 80, top=top, bottom=80, left=84)
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"head {h}" for h in range(num_heads)],
        horizontal_spacing=0.03,
        vertical_spacing=min(0.3 / rows, 24 / (rows * row_height - 24)),
    )
    for h in range(num_heads):
        row, col = divmod(h, columns)
        fig.add_trace(
            go.Heatmap(
                z=_rounded(stack[0, h]),
                customdata=_pairs(labels, labels),
                hovertemplate=f"head {h}<br>" + _HOVER_WEIGHT + "<extra></extra>",
                coloraxis="coloraxis",
                name=f"head {h}",
            ),
            row=row + 1,
            col=col + 1,
        )
        fig.update_xaxes(_token_axis(labels, show=False), row=row + 1, col=col + 1)
        fig.update_yaxes(_token_axis(labels, reverse=True, show=col == 0), row=row + 1, col=col + 1)
    frame.apply(fig)
    # The colour bar lies under the grid, so that on a phone the heads get the whole width.
    colorbar = {"orientation": "h", "x": 0, "xanchor": "left", "len": 0.6, "thickness": 10}
    colorbar |= {"y": frame.y(frame.height - 42), "yanchor": "middle"}
    fig.update_layout(coloraxis=_weight_colours(fixed=False, **colorbar))
    fig.update_annotations(font={"size": 12})
    fig.add_annotation(
        {
            **frame.label("rows: queries, columns: keys (same order)", frame.height - 12),
            "x": 0,
            "xanchor": "left",
            "xshift": 0,
            "font": {"size": 11, "color": "#4b5563"},
        }
    )
    if num_layers > 1:
        layer_buttons = [
            {
                "label": str(layer),
                "method": "restyle",
                "args": [{"z": [_rounded(stack[layer, h]) for h in range(num_heads)]}],
            }
            for layer in range(num_layers)
        ]
        fig.update_layout(updatemenus=[frame.buttons(layer_buttons, px=20)])
        fig.add_annotation(frame.label("layer", 20))
    return fig


# --- explorer 3: the sinusoidal encoding for several widths ----------------------------------


def positional_explorer(
    encodings: Sequence[torch.Tensor | np.ndarray],
    *,
    positions: Sequence[int] = (10, 25, 50, 100),
    dimensions: Sequence[int] = (0, 2, 6, 14, -2),
) -> go.Figure:
    """Positional encodings as a heatmap and as waves, with the width, length and dims chosen.

    Buttons choose ``d_model`` (one of the encodings) and the number of positions shown; a
    dropdown chooses a pair of dimensions ``(2i, 2i + 1)``, drawn below the heatmap as two
    curves over the position.

    Args:
        encodings: Encodings of shape ``[T, D]`` with the same ``T`` and different widths ``D``,
            e.g. ``[sinusoidal_encoding(100, d) for d in (16, 32, 64, 128)]``, values in
            ``[-1, 1]``.
        positions: Numbers of positions offered by the buttons, each at most ``T``; the last
            is shown first.
        dimensions: First dimension of each pair offered by the dropdown: an even index, or
            ``-2`` for the last pair of each width. Every index must exist in every encoding.

    Returns:
        The figure: one heatmap per encoding (trace ``e``), then two curves per encoding
        (traces ``E + 2e`` and ``E + 2e + 1``); only those of the chosen width are visible.
        ``layout.updatemenus`` holds the width buttons, the position buttons and the
        dimensions dropdown, in that order.

    Raises:
        TypeError: If an encoding is not a tensor or array, or ``positions`` or ``dimensions``
            holds a non-int.
        ValueError: If ``encodings`` is empty, the encodings differ in ``T``, a width repeats or
            is odd, a number of positions is not in ``1 .. T``, or a dimension is odd or out
            of range.
    """
    if isinstance(encodings, torch.Tensor | np.ndarray) or not isinstance(encodings, Sequence):
        raise TypeError(
            "encodings must be a list of [T, D] encodings, got " + type(encodings).__name__
        )
    if not encodings:
        raise ValueError("encodings must hold at least one [T, D] encoding")
    arrays = [_as_float_array(e, f"encodings[{i}]", "[T, D]") for i, e in enumerate(encodings)]
    length = arrays[0].shape[0]
    widths = [a.shape[1] for a in arrays]
    if any(a.shape[0] != length for a in arrays):
        raise ValueError(f"encodings must all have the same T, got {[a.shape[0] for a in arrays]}")
    if len(set(widths)) != len(widths) or any(w % 2 for w in widths):
        raise ValueError(f"encodings must have distinct, even widths D, got {widths}")
    for count in positions:
        check_int(count, "positions")
        if count > length:
            raise ValueError(f"positions must be at most T = {length}, got {count}")
    for start in dimensions:
        check_int(start, "dimensions", minimum=None)
        if start != -2 and (start % 2 or not 0 <= start < min(widths)):
            raise ValueError(
                f"dimensions must be even indices below the smallest width {min(widths)}, "
                f"or -2 (the last pair), got {start}"
            )
    if not positions or not dimensions:
        raise ValueError("positions and dimensions must each offer at least one choice")

    count = len(arrays)
    frame = _Frame(800, top=128, bottom=48, left=84, right=58)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.62, 0.38], vertical_spacing=0.17)
    for e, array in enumerate(arrays):
        fig.add_trace(
            go.Heatmap(
                z=_rounded(array, 2),
                coloraxis="coloraxis",
                visible=e == count - 1,
                name=f"d_model = {widths[e]}",
                hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.2f}<extra></extra>",
            ),
            row=1,
            col=1,
        )

    def pair(e: int, start: int) -> tuple[int, int]:
        first = widths[e] - 2 if start == -2 else start
        return first, first + 1

    x = list(range(length))
    for e in range(count):
        first, second = pair(e, dimensions[0])
        for dim, colour, dash, kind in (
            (first, _BLUE, "solid", "sin"),
            (second, _ORANGE, "dash", "cos"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=_rounded(arrays[e][:, dim]),
                    mode="lines",
                    line={"color": colour, "dash": dash, "width": 2},
                    name=f"dim {dim} ({kind})",
                    visible=e == count - 1,
                    hovertemplate="position %{x}<br>%{fullData.name}: %{y:.3f}<extra></extra>",
                ),
                row=2,
                col=1,
            )

    width_buttons = []
    for e, width in enumerate(widths):
        visible = [i == e for i in range(count)] + [i == e for i in range(count) for _ in (0, 1)]
        width_buttons.append(
            {
                "label": str(width),
                "method": "update",
                "args": [{"visible": visible}, {"xaxis.range": [-0.5, width - 0.5]}],
            }
        )
    position_buttons = [
        {
            "label": str(n),
            "method": "relayout",
            "args": [{"yaxis.range": [n - 0.5, -0.5], "xaxis2.range": [0, n - 1]}],
        }
        for n in positions
    ]
    dimension_buttons = []
    lines = list(range(count, 3 * count))
    for start in dimensions:
        ys, names = [], []
        for e in range(count):
            for dim, kind in zip(pair(e, start), ("sin", "cos"), strict=True):
                ys.append(_rounded(arrays[e][:, dim]))
                names.append(f"dim {dim} ({kind})")
        label = "last pair" if start == -2 else f"{start} and {start + 1}"
        dimension_buttons.append(
            {"label": label, "method": "restyle", "args": [{"y": ys, "name": names}, lines]}
        )

    frame.apply(fig)
    longest = positions[-1]
    fig.update_layout(
        coloraxis={
            "colorscale": "RdBu",
            "reversescale": True,
            "cmin": -1,
            "cmax": 1,
            "colorbar": {
                "title": {"text": "value", "side": "top"},
                "thickness": 10,
                "len": 0.6,
                "y": 0.7,
            },
        },
        legend={
            "orientation": "h",
            "x": 1,
            "y": fig.layout.yaxis2.domain[1],
            "xanchor": "right",
            "yanchor": "bottom",
            "bgcolor": "rgba(255,255,255,0.8)",
        },
        updatemenus=[
            frame.buttons(width_buttons, px=18, active=count - 1),
            frame.buttons(position_buttons, px=52, active=len(positions) - 1),
            frame.dropdown(dimension_buttons, px=86),
        ],
        annotations=[
            frame.label("d_model", 18),
            frame.label("positions", 52),
            frame.label("dimensions", 86),
        ],
    )
    fig.update_xaxes(title_text="dimension", range=[-0.5, widths[-1] - 0.5], row=1, col=1)
    fig.update_yaxes(
        title_text="position", range=[longest - 0.5, -0.5], showgrid=False, row=1, col=1
    )
    fig.update_xaxes(title_text="position", range=[0, longest - 1], row=2, col=1)
    fig.update_yaxes(title_text="value", range=[-1.1, 1.1], row=2, col=1)
    for axis in ("xaxis", "yaxis", "xaxis2", "yaxis2"):
        fig.layout[axis].update(automargin=False, zeroline=False, title_standoff=6)
    return fig


# --- explorer 4: padding and causal masks, switched on and off --------------------------------


def mask_lab(
    tokens: Sequence[Sequence[str]],
    scores: torch.Tensor | np.ndarray,
    *,
    padding: torch.Tensor | np.ndarray,
    causal: torch.Tensor | np.ndarray,
    weights: Mapping[tuple[bool, bool], torch.Tensor | np.ndarray],
) -> go.Figure:
    """Scores, masked scores and attention weights of a padded batch, with masks switched on/off.

    One row per sequence of the batch, three heatmaps per row: the raw scores, the scores left
    after the chosen masks (blocked cells grey), and the attention weights computed with those
    masks. Two button groups switch the padding mask and the causal mask on and off; all four
    combinations are stored. A query that may attend to no key keeps its row of weights, all
    0 in this library's convention.

    Args:
        tokens: ``B`` lists of ``T`` tokens, padding included.
        scores: Shape ``[B, T, T]``: the attention scores of one head before masking.
        padding: The padding mask, ``torch.bool`` with ``True`` = may attend, broadcastable to
            ``[B, T, T]``, e.g. ``padding_mask(ids)[:, 0]`` of shape ``[B, 1, T]``.
        causal: The causal mask, ``torch.bool``, broadcastable to ``[B, T, T]``, e.g.
            ``causal_mask(T)``.
        weights: Maps ``(padding_on, causal_on)``, all four combinations of two bools, to the
            weights ``[B, T, T]`` computed with that combination of masks (e.g. by
            ``scaled_dot_product_attention``).

    Returns:
        The figure. Traces ``0 .. B-1`` are the raw scores; then, for ``p`` = off, on, the
        masked scores of each sequence and the weights of each sequence (only those of the
        chosen padding state are visible). ``layout.updatemenus[0]`` switches padding,
        ``updatemenus[1]`` the causal mask; both start off.

    Raises:
        TypeError: If a mask is not boolean, ``weights`` is not a mapping, ``tokens`` is not a
            list of lists, or a token is not a ``str``.
        ValueError: If a shape does not fit ``[B, T, T]``, the tokens do not match it, or a
            combination of masks is missing from ``weights``.
    """
    score_array = _as_float_array(scores, "scores", "[B, T, T]")
    batch, size = score_array.shape[0], score_array.shape[-1]
    if score_array.shape[1] != size:
        raise ValueError(f"scores must be [B, T, T], got shape {tuple(score_array.shape)}")
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"tokens must be a list of B = {batch} token lists, got {type(tokens).__name__}"
        )
    if len(tokens) != batch:
        raise ValueError(f"tokens must be a list of B = {batch} token lists, got {len(tokens)}")
    labels = [_labels(row, f"tokens[{b}]", size) for b, row in enumerate(tokens)]
    masks = {}
    for name, mask in (("padding", padding), ("causal", causal)):
        array = _as_bool_array(mask, name)
        try:
            masks[name] = np.broadcast_to(array, score_array.shape)
        except ValueError as error:
            raise ValueError(
                f"{name} must broadcast to scores' shape {list(score_array.shape)}, "
                f"got shape {list(array.shape)}"
            ) from error
    if not isinstance(weights, Mapping):
        raise TypeError(
            "weights must be a dict (padding_on, causal_on) -> [B, T, T], "
            f"got {type(weights).__name__}"
        )
    combos = [(p, c) for p in (False, True) for c in (False, True)]
    missing = [combo for combo in combos if combo not in weights]
    if missing:
        raise ValueError(
            f"weights must have all four (padding_on, causal_on) keys, missing {missing}"
        )
    weight_arrays = {}
    for combo in combos:
        array = _as_float_array(weights[combo], f"weights[{combo}]", "[B, T, T]")
        if array.shape != score_array.shape:
            raise ValueError(
                f"weights[{combo}] must have the shape of scores {list(score_array.shape)}, "
                f"got {list(array.shape)}"
            )
        weight_arrays[combo] = array

    def allowed(p: bool, c: bool) -> np.ndarray:
        keep = np.ones(score_array.shape, dtype=bool)
        if p:
            keep &= masks["padding"]
        if c:
            keep &= masks["causal"]
        return keep

    def masked(p: bool, c: bool) -> np.ndarray:
        return np.where(allowed(p, c), score_array, np.nan)

    limit = float(np.ceil(np.abs(score_array).max()))
    row_height = 178
    top = 96
    frame = _Frame(top + batch * row_height + 96, top=top, bottom=96, left=64)
    fig = make_subplots(
        rows=batch,
        cols=3,
        column_titles=["scores", "masked scores", "weights"],
        horizontal_spacing=0.05,
        vertical_spacing=min(0.4 / batch, 60 / (batch * row_height - 60)),
    )
    hover_score = "query: %{customdata[0]}<br>key: %{customdata[1]}<br>score: %{z:.2f}"
    for b in range(batch):
        fig.add_trace(
            go.Heatmap(
                z=_rounded(score_array[b], 2),
                customdata=_pairs(labels[b], labels[b]),
                hovertemplate=hover_score + "<extra></extra>",
                coloraxis="coloraxis",
                name=f"scores {b}",
            ),
            row=b + 1,
            col=1,
        )
    # Masked scores, then weights, for padding off (visible at first) and on.
    for p in (False, True):
        for b in range(batch):
            fig.add_trace(
                go.Heatmap(
                    z=_rounded(masked(p, False)[b], 2),
                    customdata=_pairs(labels[b], labels[b]),
                    hovertemplate=hover_score + "<extra></extra>",
                    hoverongaps=False,
                    coloraxis="coloraxis",
                    visible=not p,
                    name=f"masked {b} padding={'on' if p else 'off'}",
                ),
                row=b + 1,
                col=2,
            )
        for b in range(batch):
            fig.add_trace(
                go.Heatmap(
                    z=_rounded(weight_arrays[(p, False)][b]),
                    customdata=_pairs(labels[b], labels[b]),
                    hovertemplate=_HOVER_WEIGHT + "<extra></extra>",
                    coloraxis="coloraxis2",
                    visible=not p,
                    name=f"weights {b} padding={'on' if p else 'off'}",
                ),
                row=b + 1,
                col=3,
            )
    for b in range(batch):
        for col in (1, 2, 3):
            fig.update_xaxes(
                {**_token_axis(labels[b]), "tickangle": -60, "tickfont": {"size": 10}},
                row=b + 1,
                col=col,
            )
            fig.update_yaxes(
                {**_token_axis(labels[b], reverse=True, show=col == 1), "tickfont": {"size": 10}},
                row=b + 1,
                col=col,
            )
    # Traces batch .. 3*batch-1 for padding off, 3*batch .. 5*batch-1 for padding on.
    switchable = list(range(batch, 5 * batch))

    def visibility(p: bool) -> list[bool]:
        return [True] * batch + [not p] * (2 * batch) + [p] * (2 * batch)

    def data(c: bool) -> list:
        z = []
        for p in (False, True):
            z += [_rounded(masked(p, c)[b], 2) for b in range(batch)]
            z += [_rounded(weight_arrays[(p, c)][b]) for b in range(batch)]
        return z

    padding_buttons = [
        {"label": label, "method": "restyle", "args": [{"visible": visibility(p)}]}
        for label, p in (("off", False), ("on", True))
    ]
    causal_buttons = [
        {"label": label, "method": "restyle", "args": [{"z": data(c)}, switchable]}
        for label, c in (("off", False), ("on", True))
    ]
    frame.apply(fig)
    fig.update_layout(
        plot_bgcolor="#d1d5db",
        coloraxis={
            "colorscale": "RdBu",
            "reversescale": True,
            "cmin": -limit,
            "cmax": limit,
            "colorbar": {
                "title": {"text": "score (grey: blocked)", "side": "top"},
                "orientation": "h",
                "thickness": 10,
                "len": 0.6,
                "x": 0,
                "xanchor": "left",
                "y": frame.y(frame.height - 34),
                "yanchor": "middle",
            },
        },
        coloraxis2={
            **_weight_colours(),
            "colorbar": {
                "title": {"text": "weight", "side": "top"},
                "orientation": "h",
                "thickness": 10,
                "len": 0.32,
                "x": 1,
                "xanchor": "right",
                "y": frame.y(frame.height - 34),
                "yanchor": "middle",
            },
        },
        updatemenus=[frame.buttons(padding_buttons, px=18), frame.buttons(causal_buttons, px=52)],
    )
    fig.add_annotation(frame.label("padding", 18))
    fig.add_annotation(frame.label("causal", 52))
    fig.update_annotations(font={"size": 12})
    return fig


# --- explorer 5: scaled and unscaled softmax against the width d_k ---------------------------


def scaling_explorer(
    d_ks: Sequence[int],
    unscaled: torch.Tensor | np.ndarray,
    scaled: torch.Tensor | np.ndarray,
) -> go.Figure:
    """A row of softmax weights, unscaled and scaled, with a slider for the width ``d_k``.

    For each width, the top panel shows one query's weights over its keys, sorted from the
    largest unscaled weight down (scaling keeps the order), as two sets of bars; the bottom
    panel shows the entropy of both rows against ``d_k``, with the chosen width marked. The
    dotted line is the entropy of a uniform row, ``ln Tk``.

    Args:
        d_ks: The ``N`` widths, increasing, one slider step each.
        unscaled: Shape ``[N, Tk]``: row ``n`` is ``softmax(q · k_j)`` over the keys ``j`` at
            width ``d_ks[n]``.
        scaled: Shape ``[N, Tk]``: the same rows computed from ``q · k_j / sqrt(d_k)``.

    Returns:
        The figure: bars (trace 0 unscaled, trace 1 scaled), entropy curves (traces 2, 3) and
        the markers of the chosen width (trace 4); the slider is ``layout.sliders[0]``.

    Raises:
        TypeError: If a width is not an int.
        ValueError: If the shapes do not match ``[N, Tk]``, the widths do not increase, or a
            row is not a distribution (negative, or not summing to 1).
    """
    if isinstance(d_ks, str) or not isinstance(d_ks, Sequence) or not d_ks:
        raise TypeError("d_ks must be a non-empty list of int widths")
    for width in d_ks:
        check_int(width, "d_ks")
    if list(d_ks) != sorted(set(d_ks)):
        raise ValueError(f"d_ks must increase, got {list(d_ks)}")
    rows = {}
    for name, values in (("unscaled", unscaled), ("scaled", scaled)):
        array = _as_float_array(values, name, "[N, Tk]")
        if array.shape[0] != len(d_ks):
            raise ValueError(
                f"{name} must have one row per width, N = {len(d_ks)}, got {array.shape[0]}"
            )
        if (array < 0).any() or not np.allclose(array.sum(axis=-1), 1.0, atol=1e-4):
            raise ValueError(f"{name} rows must be softmax weights: non-negative, summing to 1")
        rows[name] = array
    if rows["unscaled"].shape != rows["scaled"].shape:
        raise ValueError(
            f"unscaled and scaled must have the same shape, got {rows['unscaled'].shape} "
            f"and {rows['scaled'].shape}"
        )
    num_keys = rows["unscaled"].shape[1]
    order = np.argsort(-rows["unscaled"], axis=-1, kind="stable")
    ordered = {name: np.take_along_axis(a, order, axis=-1) for name, a in rows.items()}
    entropy = {
        name: -np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0), axis=-1)
        for name, a in rows.items()
    }
    log_widths = np.log2(np.asarray(d_ks, dtype=np.float64))

    frame = _Frame(640, top=84, bottom=58, left=64)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.55, 0.45], vertical_spacing=0.16)
    keys = list(range(1, num_keys + 1))
    first = len(d_ks) - 1
    styles = (("unscaled", _BLUE, "unscaled: q·k"), ("scaled", _ORANGE, "scaled: q·k/√d_k"))
    for name, colour, label in styles:
        fig.add_trace(
            go.Bar(
                x=keys,
                y=_rounded(ordered[name][first]),
                name=label,
                marker_color=colour,
                legendgroup=name,
                hovertemplate=f"{label}<br>key %{{x}}: weight %{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    for name, colour, label in styles:
        fig.add_trace(
            go.Scatter(
                x=log_widths.tolist(),
                y=_rounded(entropy[name]),
                mode="lines+markers",
                line={"color": colour},
                marker={"size": 6},
                name=label,
                legendgroup=name,
                showlegend=False,
                customdata=list(d_ks),
                hovertemplate=(
                    f"{label}<br>d_k = %{{customdata}}: entropy %{{y:.2f}} nats<extra></extra>"
                ),
            ),
            row=2,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=[log_widths[first]] * 2,
            y=_rounded([entropy["unscaled"][first], entropy["scaled"][first]]),
            mode="markers",
            marker={"size": 14, "color": "rgba(0,0,0,0)", "line": {"color": "#111827", "width": 2}},
            name="chosen d_k",
            showlegend=False,
            hoverinfo="skip",
        ),
        row=2,
        col=1,
    )
    steps = [
        {
            "label": str(width),
            "method": "restyle",
            "args": [
                {
                    "y": [
                        _rounded(ordered["unscaled"][n]),
                        _rounded(ordered["scaled"][n]),
                        _rounded([entropy["unscaled"][n], entropy["scaled"][n]]),
                    ],
                    "x": [keys, keys, [float(log_widths[n])] * 2],
                },
                [0, 1, 4],
            ],
        }
        for n, width in enumerate(d_ks)
    ]
    frame.apply(fig)
    uniform = float(np.log(num_keys))
    fig.update_layout(
        sliders=[frame.slider(steps, px=30, active=first)],
        annotations=[frame.label("d_k", 39)],
        # Top right of the bars: the largest weights come first, on the left.
        legend={
            "x": 1,
            "y": 1,
            "xanchor": "right",
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.85)",
        },
        barmode="group",
        bargap=0.2,
    )
    fig.add_hline(
        y=uniform,
        line={"color": "#6b7280", "dash": "dot", "width": 1},
        annotation_text=f"uniform: ln {num_keys} = {uniform:.2f}",
        annotation_position="top left",
        annotation_font_size=11,
        row=2,
        col=1,
    )
    fig.update_xaxes(
        title_text="keys, largest weight first",
        tickvals=sorted({1, *range(4, num_keys + 1, 4)}),
        tickangle=0,
        row=1,
        col=1,
    )
    fig.update_yaxes(title_text="weight", range=[0, 1.02], row=1, col=1)
    fig.update_xaxes(
        title_text="d_k",
        tickvals=log_widths.tolist(),
        ticktext=[str(w) for w in d_ks],
        tickangle=0,
        tickfont={"size": 10},
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text="entropy (nats)", range=[0, uniform * 1.12], row=2, col=1)
    for axis in ("xaxis", "yaxis", "xaxis2", "yaxis2"):
        fig.layout[axis].update(automargin=False, zeroline=False, title_standoff=4)
    return fig
