"""Interactive figures for the static book: plotly explorers that need no kernel.

Each explorer takes tensors or arrays that a page has computed and returns a
``plotly.graph_objects.Figure`` whose controls (plotly buttons, dropdowns and sliders) switch
between states that are all precomputed and stored in the figure, so the figure works in a
static HTML page with no Python behind it. :func:`attention_lab.book.explorers.show` displays
a figure in a page or a notebook. Like
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
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from attention_lab._validation import as_float_array, check_int

__all__ = ["attention_explorer", "heads_explorer"]

# Values are stored with this many decimals: enough for a hover label, light enough for a page.
DECIMALS = 3

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12}
# plotly.js draws the active button near-white (#F4FAFF), so the others are a darker grey.
_CONTROL_STYLE = {"bgcolor": "#d1d5db", "bordercolor": "#6b7280", "font": {"size": 12}}
_HOVER_WEIGHT = "query: %{customdata[0]}<br>key: %{customdata[1]}<br>weight: %{z:.3f}"


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


def _check_heads(weights: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    """``weights`` as a float array of shape ``[L, H, T, T]``, or raise."""
    array = as_float_array(weights, name, "[L, H, T, T]")
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


def _token_axis(labels: list[str], *, reverse: bool = False, labelled: bool = True) -> dict:
    """Axis settings labelling positions ``0 .. T-1`` with (escaped) tokens.

    Positions, not tokens, are the coordinates: repeated tokens ("the" twice) would otherwise
    fall into one category.
    """
    size = len(labels)
    return {
        "tickmode": "array",
        "tickvals": list(range(size)),
        "ticktext": labels if labelled else [""] * size,
        "range": [size - 0.5, -0.5] if reverse else [-0.5, size - 0.5],
        "showgrid": False,
        "zeroline": False,
        "showline": False,
        "ticks": "",
        "automargin": False,
        "tickfont": {"size": 11},
    }


def _weight_colours(**colorbar) -> dict:
    """Viridis from 0 to 1 for every view, so that equal colours mean equal weights."""
    return {
        "colorscale": "Viridis",
        "cmin": 0,
        "cmax": 1,
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
    layer moves the slider back to head 0. Colours run from 0 to 1 for every head. Hovering
    over a cell shows the query token, the key token and the weight. Every state is stored in
    the figure, weights rounded to 3 decimals.
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

    Each head is a heatmap of its ``[T, T]`` weights, all on one colour scale from 0 to 1, the
    same for every layer. Query tokens label the rows of the first
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
        fig.update_xaxes(_token_axis(labels, labelled=False), row=row + 1, col=col + 1)
        fig.update_yaxes(
            _token_axis(labels, reverse=True, labelled=col == 0), row=row + 1, col=col + 1
        )
    frame.apply(fig)
    # The colour bar lies under the grid, so that on a phone the heads get the whole width.
    colorbar = {"orientation": "h", "x": 0, "xanchor": "left", "len": 0.6, "thickness": 10}
    colorbar |= {"y": frame.y(frame.height - 42), "yanchor": "middle"}
    fig.update_layout(coloraxis=_weight_colours(**colorbar))
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
