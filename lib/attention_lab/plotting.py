"""Figures of attention weights.

Helpers here take tensors or arrays and return :class:`matplotlib.figure.Figure` objects.
They are pure: they never call ``plt.show()``, never change matplotlib's global style, and
import no model code, so any page can draw what any module returns. ``PALETTE`` holds the
book's line colours; :func:`heatmap` draws any matrix, :func:`attention_heatmap` attention.
"""

from __future__ import annotations

import numbers

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap, Normalize, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch
from matplotlib.ticker import MaxNLocator

from attention_lab._validation import as_float_array, check_int

__all__ = [
    "PALETTE",
    "attention_arcs",
    "attention_heatmap",
    "encoding_heatmap",
    "head_grid",
    "heatmap",
    "mask_image",
    "model_head_grid",
]

# The book's line colours as RGB in [0, 1]: seaborn's "colorblind" palette, written out so no
# page imports seaborn (1.2 s per kernel, mostly scipy.stats). ``BLUE, ORANGE = PALETTE[:2]``.
PALETTE: tuple[tuple[float, float, float], ...] = tuple(
    to_rgb(code)
    for code in (
        "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc",
        "#ca9161", "#fbafe4", "#949494", "#ece133", "#56b4e9",
    )
)  # fmt: skip

# Up to this many rows and columns the weights are printed in the cells; beyond it the
# numbers no longer fit and only the colours are shown.
_ANNOTATE_MAX_SIZE = 8


def _as_2d_array(weights: torch.Tensor | np.ndarray) -> np.ndarray:
    """``weights`` as a float64 ``[Tq, Tk]`` array, or raise."""
    hints = {
        4: "Pick one batch element and one head first, e.g. weights[0, 0].",
        3: "Pick one batch element (or head) first, e.g. weights[0].",
    }
    return as_float_array(weights, "weights", "[Tq, Tk]", hints)


def _check_tokens(
    tokens: list[str] | tuple[str, ...] | None,
    name: str,
    expected: int,
    axis: str,
    array_name: str = "weights",
) -> list[str] | None:
    """Return ``tokens`` as a list of strings (None stays None), or raise."""
    if tokens is None:
        return None
    if isinstance(tokens, str):
        raise TypeError(f"{name} must be a sequence of tokens, not a single string: {tokens!r}")
    labels = [str(token) for token in tokens]
    if len(labels) != expected:
        raise ValueError(
            f"{name} has {len(labels)} tokens but {array_name} has {expected} {axis} "
            f"({array_name} is [Tq, Tk]: one row per query, one column per key)"
        )
    return labels


def heatmap(
    values: torch.Tensor | np.ndarray,
    *,
    ax: Axes,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: str | np.ndarray | None = None,
    row_labels: list[str] | None = None,
    col_labels: list[str] | None = None,
    hidden: np.ndarray | None = None,
    square: bool = True,
    colorbar: dict | None = None,
):
    """Draw a ``[rows, cols]`` matrix (tensor or array) as coloured cells into ``ax``, row 0
    on top; return the colour bar (``None`` without one).

    ``vmin``/``vmax`` end the colour scale (``None``: the smallest/largest value shown).
    ``annotate`` prints a text in each cell, 10-point, dark on light cells and white on dark
    ones (WCAG relative luminance above 0.408): a format string for a float such as
    ``"{:.2f}"``, or an array of strings of the matrix's shape. ``row_labels``/``col_labels``
    put one label per row/column at the cell centres (``None``: at most 20 positions).
    ``hidden``: boolean, of the matrix's shape, ``True`` where a cell is left blank (as NaN are).
    ``colorbar`` holds the keyword arguments of ``Figure.colorbar``
    (e.g. ``{"label": "weight", "location": "bottom"}``), ``None`` for no colour bar.

    Raises:
        TypeError: If ``values`` is not a tensor or array of numbers.
        ValueError: If ``values`` is not 2-D or is empty, or a label list, ``hidden`` or an
            array of annotations does not match its shape.
    """
    array = as_float_array(values, "values", "[rows, cols]", {})
    num_rows, num_cols = array.shape
    row_labels = _check_tokens(row_labels, "row_labels", num_rows, "rows", "values")
    col_labels = _check_tokens(col_labels, "col_labels", num_cols, "columns", "values")
    hidden = np.zeros(array.shape, bool) if hidden is None else np.asarray(hidden, bool)
    if hidden.shape != array.shape:
        raise ValueError(f"hidden has shape {hidden.shape}, values has {array.shape}")
    hidden = hidden | np.isnan(array)  # NaN cells are left blank, never coloured or printed
    mesh = ax.pcolormesh(np.ma.masked_where(hidden, array), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set(xlim=(0, num_cols), ylim=(num_rows, 0))  # row 0 on top, as in a printed matrix
    if square:
        ax.set_aspect("equal")
    ax.spines[:].set_visible(False)
    ax.set_xticks(*_tick_positions(num_cols, col_labels))
    ax.set_yticks(*_tick_positions(num_rows, row_labels))
    if isinstance(annotate, str):
        annotate = [[annotate.format(value) for value in row] for row in array]
    if annotate is not None:
        texts = np.asarray(annotate, dtype=str)
        if texts.shape != array.shape:
            raise ValueError(f"annotate has shape {texts.shape}, values has {array.shape}")
        rgb = plt.get_cmap(cmap)(Normalize(*mesh.get_clim())(array))[..., :3]  # [rows, cols, 3]
        linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        light = linear @ np.array([0.2126, 0.7152, 0.0722]) > 0.408
        for (row, col), text in np.ndenumerate(texts):
            if not hidden[row, col]:
                colour = "0.15" if light[row, col] else "white"
                ax.text(col + 0.5, row + 0.5, text, ha="center", va="center", fontsize=10,
                        color=colour)  # fmt: skip
    return None if colorbar is None else ax.figure.colorbar(mesh, ax=ax, **colorbar)


def attention_heatmap(
    weights: torch.Tensor | np.ndarray,
    query_tokens: list[str] | tuple[str, ...] | None = None,
    key_tokens: list[str] | tuple[str, ...] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    vmax: float | None = None,
) -> Figure:
    """Draw one attention matrix as a labelled heatmap.

    Row ``i`` shows how query ``i`` spreads its attention over the keys, so with weights
    from a softmax every row sums to 1. The colour scale starts at 0 and, by default, ends at
    the largest weight, so a diffuse matrix looks as bright as a one-hot one: pass
    ``vmax=1.0`` to compare panels, or to show how sharp a matrix really is.

    Args:
        weights: Attention weights of shape ``[Tq, Tk]``, a tensor (any float dtype, any
            device, with or without grad) or an array. For the ``[B, H, Tq, Tk]`` weights a
            module returns, pick one batch element and head first, e.g. ``weights[0, 0]``.
        query_tokens: ``Tq`` labels for the rows. Defaults to the positions ``0 .. Tq-1``.
        key_tokens: ``Tk`` labels for the columns. Defaults to ``query_tokens`` when the
            matrix is square (self-attention), otherwise to the positions ``0 .. Tk-1``.
        ax: Axes to draw into. By default a new figure is created, sized to the matrix.
        title: Title of the axes.
        annotate: Whether to print each weight in its cell. By default the values are
            printed when the matrix is at most 8 x 8.
        cmap: Name of a matplotlib colormap. The default, ``"viridis"``, is perceptually
            uniform and readable with colour-vision deficiencies.
        vmax: Top of the colour scale, a number above 0; ``None`` (the default) takes the
            largest weight.

    Returns:
        The figure holding the heatmap (the figure of ``ax`` when ``ax`` is given). It is
        not shown; close it with ``plt.close(fig)`` once it has been displayed or saved.

    Raises:
        TypeError: If ``weights`` is not a tensor or array of numbers, or a token list is a
            single string.
        ValueError: If ``weights`` is not 2-D or is empty, if ``query_tokens`` or
            ``key_tokens`` does not have one label per row or column, or if ``vmax`` is not
            above 0.
    """
    array = _as_2d_array(weights)
    if vmax is not None:
        if isinstance(vmax, bool) or not isinstance(vmax, numbers.Real):
            raise TypeError(f"vmax must be a number or None, got {type(vmax).__name__}")
        if not vmax > 0:
            raise ValueError(f"vmax must be above 0, got {vmax}")
    num_queries, num_keys = array.shape
    if key_tokens is None and num_queries == num_keys:
        key_tokens = query_tokens
    row_labels = _check_tokens(query_tokens, "query_tokens", num_queries, "rows (queries)")
    col_labels = _check_tokens(key_tokens, "key_tokens", num_keys, "columns (keys)")
    if annotate is None:
        annotate = max(num_queries, num_keys) <= _ANNOTATE_MAX_SIZE

    if ax is None:
        # At most 5.0 inches wide: shown near 1:1 in a laptop's content column and, scaled to
        # a phone's (about 350 px), its 10-point text stays above 9 px.
        width = min(5.0, max(4.0, 2.2 + 0.4 * num_keys))
        height = min(7.0, max(3.2, 1.4 + 0.4 * num_queries))
        fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    else:
        fig = ax.figure

    heatmap(
        array,
        ax=ax,
        vmin=0.0,
        vmax=vmax,
        cmap=cmap,
        annotate="{:.2f}" if annotate else None,
        row_labels=row_labels,
        col_labels=col_labels,
        colorbar={"label": "attention weight"},
    )
    if col_labels is not None and max(len(label) for label in col_labels) > 4:
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    else:
        plt.setp(ax.get_xticklabels(), rotation=0)
    plt.setp(ax.get_yticklabels(), rotation=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title is not None:
        ax.set_title(title)
    return fig


def _as_head_stack(weights: torch.Tensor | np.ndarray) -> np.ndarray:
    """``weights`` as a float64 ``[H, Tq, Tk]`` array, or raise."""
    hints = {
        4: "Pick one batch element first, e.g. weights[0].",
        2: "For a single head, add a head axis (weights[None]) or use attention_heatmap.",
    }
    return as_float_array(weights, "weights", "[H, Tq, Tk]", hints)


def _tick_positions(size: int, labels: list[str] | None) -> tuple[list[float], list[str]]:
    """Tick positions at cell centres and their texts: the labels, or thinned-out positions."""
    if labels is not None:
        return [i + 0.5 for i in range(size)], labels
    step = -(-size // 20)  # at most 20 position labels
    return [i + 0.5 for i in range(0, size, step)], [str(i) for i in range(0, size, step)]


def head_grid(
    weights: torch.Tensor | np.ndarray,
    query_tokens: list[str] | tuple[str, ...] | None = None,
    key_tokens: list[str] | tuple[str, ...] | None = None,
    *,
    ncols: int = 4,
    titles: list[str] | tuple[str, ...] | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
    cmap: str = "viridis",
    vmax: float | None = None,
    colorbar: str = "right",
) -> Figure:
    """Draw the attention matrices of several heads side by side, on one colour scale.

    Head ``h`` (counting from 0) is drawn in panel ``h``, filling the grid row by row. All
    panels share one colour scale, from 0 to ``vmax`` (by default the largest weight of any
    head), and one colour bar, so equal colours mean equal weights in every panel. Query
    tokens label the rows of the panels in the first column, key tokens the columns of the
    lowest panel of each column; key labels longer than two characters are turned.

    Args:
        weights: Attention weights of shape ``[H, Tq, Tk]``, a tensor (any float dtype, any
            device, with or without grad) or an array. For the ``[B, H, Tq, Tk]`` weights a
            module returns, pick one batch element first, e.g. ``weights[0]``.
        query_tokens: ``Tq`` labels for the rows. Defaults to the positions ``0 .. Tq-1``.
        key_tokens: ``Tk`` labels for the columns. Defaults to ``query_tokens`` when each
            matrix is square (self-attention), otherwise to the positions ``0 .. Tk-1``.
        ncols: Number of panels per row, a positive int; fewer if there are fewer heads.
        titles: ``H`` panel titles. Defaults to ``"head 0"``, ..., ``"head H-1"``: the book
            counts heads and layers from 0, as the tensors index them.
        title: Title of the whole figure.
        figsize: Size of the figure in inches. By default it is sized to the grid and to the
            matrices, at most 5.0 inches wide (the content column of a page; on a phone its
            text stays above 9 px).
        cmap: Name of a matplotlib colormap. The default, ``"viridis"``, is perceptually
            uniform and readable with colour-vision deficiencies.
        vmax: Top of the colour scale, a number above 0, e.g. ``1.0`` to compare figures
            on one scale; ``None`` (the default) takes the largest weight of any head.
        colorbar: Where the colour bar goes: ``"right"`` of the grid, or ``"bottom"``, under
            it, which leaves the grid the full width of the figure.

    Returns:
        The figure: ``H`` heatmap axes, in head order, followed by the colour bar's axes. It
        is not shown; close it with ``plt.close(fig)`` once it has been displayed or saved.

    Raises:
        TypeError: If ``weights`` is not a tensor or array of numbers, a token list or
            ``titles`` is a single string, or ``ncols`` is not an int.
        ValueError: If ``weights`` is not 3-D or is empty, if ``query_tokens`` or
            ``key_tokens`` does not have one label per row or column, if ``titles`` does
            not have one title per head, if ``ncols`` or ``vmax`` is not positive, or if
            ``colorbar`` is neither ``"right"`` nor ``"bottom"``.
    """
    array = _as_head_stack(weights)
    num_heads, num_queries, num_keys = array.shape
    if key_tokens is None and num_queries == num_keys:
        key_tokens = query_tokens
    row_labels = _check_tokens(query_tokens, "query_tokens", num_queries, "rows (queries)")
    col_labels = _check_tokens(key_tokens, "key_tokens", num_keys, "columns (keys)")
    check_int(ncols, "ncols")
    if vmax is not None:
        if isinstance(vmax, bool) or not isinstance(vmax, numbers.Real):
            raise TypeError(f"vmax must be a number or None, got {type(vmax).__name__}")
        if not vmax > 0:
            raise ValueError(f"vmax must be above 0, got {vmax}")
    if colorbar not in ("right", "bottom"):
        raise ValueError(f'colorbar must be "right" or "bottom", got {colorbar!r}')
    if titles is None:
        titles = [f"head {h}" for h in range(num_heads)]
    elif isinstance(titles, str):
        raise TypeError(f"titles must be a sequence of {num_heads} titles, not a single string")
    else:
        titles = [str(panel_title) for panel_title in titles]
        if len(titles) != num_heads:
            raise ValueError(
                f"titles has {len(titles)} titles but weights has {num_heads} heads "
                f"(weights is [H, Tq, Tk])"
            )

    ncols = min(ncols, num_heads)
    nrows = -(-num_heads // ncols)  # ceiling division
    if figsize is None:
        # Square cells; about 1.8 inches of tick labels and colour bar, 5.0 inches at most.
        cell = min(
            0.35, 2.4 / max(num_queries, num_keys), (3.2 - 0.25 * ncols) / (ncols * num_keys)
        )
        width = ncols * (num_keys * cell + 0.25) + 1.8
        height = nrows * (num_queries * cell + 0.35) + 0.8 + (0.4 if title else 0.0)
        figsize = (width, height)
    fig, grid = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", squeeze=False)
    axes = list(grid.flat)
    for ax in axes[num_heads:]:
        ax.remove()
    axes = axes[:num_heads]

    # One scale for every panel; an all-zero stack still gets a usable colour bar.
    if vmax is None:
        vmax = float(array.max()) if array.max() > 0 else 1.0
    # Without tokens, label every position, or every k-th one in long sequences.
    row_ticks, row_texts = _tick_positions(num_queries, row_labels)
    col_ticks, col_texts = _tick_positions(num_keys, col_labels)
    # Labels wider than a cell ("3:11", words) are turned: upright when the cells are many.
    rotate = col_labels is not None and max(len(label) for label in col_labels) > 2
    angle = 90 if num_keys > 12 else 45
    for head, ax in enumerate(axes):
        col = head % ncols
        heatmap(array[head], ax=ax, cmap=cmap, vmin=0.0, vmax=vmax)
        ax.set_title(titles[head])
        # Labels go on the outer panels only: the lowest panel of each column and the first
        # column.
        if head + ncols >= num_heads:
            ax.set_xticks(col_ticks, col_texts)
            if rotate:
                plt.setp(
                    ax.get_xticklabels(),
                    rotation=angle,
                    ha="right",
                    va="center" if angle == 90 else "top",
                    rotation_mode="anchor",
                )
            ax.set_xlabel("key")
        else:
            ax.set_xticks([])
        if col == 0:
            ax.set_yticks(row_ticks, row_texts)
            ax.set_ylabel("query")
        else:
            ax.set_yticks([])
    if colorbar == "bottom":
        fig.colorbar(
            axes[0].collections[0],
            ax=axes,
            label="attention weight",
            location="bottom",
            shrink=0.6,
            aspect=30,
        )
    else:
        fig.colorbar(axes[0].collections[0], ax=axes, label="attention weight", shrink=0.9)
    if title is not None:
        fig.suptitle(title)
    return fig


def model_head_grid(
    weights: torch.Tensor | np.ndarray,
    tokens: list[str] | tuple[str, ...] | None = None,
    *,
    layer: int | None = None,
    title: str | None = None,
) -> Figure:
    """Draw a whole model's attention: every head of every layer, or one layer's heads large.

    With ``layer=None``, all ``L * H`` heads share one grid, a row per layer, each panel titled
    ``"L{layer} H{head}"``: too small for token labels, made to spot patterns. With a layer,
    its ``H`` heads are drawn three a row by :func:`head_grid`, titled ``"head 0"`` ...,
    each large enough for the tokens on both axes, with the colour bar under the grid. Layers
    and heads are counted from 0, as the tensors index them.

    Args:
        weights: Shape ``[L, H, T, T]``, e.g. from
            :func:`attention_lab.pretrained.attention_maps`, a tensor or an array.
        tokens: ``T`` labels, used when a single layer is drawn.
        layer: ``None`` for every head, or the layer to draw, in ``0 .. L-1``.
        title: Title of the whole figure.

    Returns:
        The figure: the heatmap axes in (layer, head) order, then the colour bar's axes. It is
        not shown; close it with ``plt.close(fig)`` once it has been displayed or saved.

    Raises:
        TypeError: If ``weights`` is not a tensor or array of numbers, or ``layer`` is not an
            int or ``None``.
        ValueError: If ``weights`` is not 4-D or is empty, ``layer`` is not in ``0 .. L-1``, or
            ``tokens`` does not have ``T`` labels.
    """
    if layer is not None:
        check_int(layer, "layer", minimum=0)
    array = as_float_array(weights, "weights", "[L, H, T, T]")
    num_layers, num_heads = array.shape[:2]
    if layer is not None and layer >= num_layers:
        raise ValueError(f"layer must be in 0..{num_layers - 1}, got {layer}")
    if layer is None:
        titles = [f"L{i} H{h}" for i in range(num_layers) for h in range(num_heads)]
        stack = array.reshape(num_layers * num_heads, *array.shape[2:])  # [L*H, T, T]
        fig = head_grid(stack, titles=titles, ncols=num_heads, figsize=(10.0, 6.5), title=title)
        for ax in fig.axes[:-1]:  # the panels are too small for token labels
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel("")
            ax.set_ylabel("")
        return fig
    # Three panels a row, each large enough for one token label per row and column (about
    # 0.16 inch each, up to 2.9 inches a panel); the colour bar goes under the grid.
    ncols = 3
    panel = min(max(1.6, 0.16 * array.shape[-1]), 2.9)
    nrows = -(-num_heads // ncols)
    return head_grid(
        array[layer],
        tokens,
        ncols=ncols,
        figsize=(ncols * panel + 1.6, nrows * (panel + 0.3) + 1.6),
        title=title,
        colorbar="bottom",
    )


# Two colours that differ in lightness as well as hue, so the two states stay distinct in
# greyscale and for every colour-vision deficiency: the Okabe-Ito blue and a pale grey.
_MAY_ATTEND_COLOUR = "#0072B2"
_BLOCKED_COLOUR = "#DDDDDD"
# Up to this many rows and columns every position gets a tick and the cells are outlined.
_GRID_MAX_SIZE = 32


def _as_2d_bool_array(mask: torch.Tensor | np.ndarray) -> np.ndarray:
    """Convert a boolean ``mask`` to a NumPy bool array of rank 2, or raise."""
    if isinstance(mask, torch.Tensor):
        dtype = mask.dtype
        array = mask.detach().cpu().numpy() if dtype == torch.bool else None
    elif isinstance(mask, np.ndarray):
        dtype = mask.dtype
        array = mask if dtype == np.bool_ else None
    else:
        raise TypeError(
            "mask must be a torch.bool tensor or a NumPy bool array with True = may attend, "
            f"got {type(mask).__name__}"
        )
    if array is None:
        raise TypeError(
            f"mask must have a bool dtype with True = may attend, got {dtype}. Convert with "
            "mask.bool() if 1 means 'may attend', or ~mask.bool() if 1 means 'blocked'."
        )
    if array.ndim != 2:
        hint = ""
        if array.ndim > 2:
            hint = (
                " Pick one batch element and head first, e.g. mask[0, 0] for [B, H, Tq, Tk];"
                " expand a padding mask [B, 1, 1, Tk] first, e.g. mask.expand(B, 1, Tq, Tk)."
            )
        raise ValueError(
            f"mask must be 2-D with shape [Tq, Tk], got shape {tuple(array.shape)}.{hint}"
        )
    if array.size == 0:
        raise ValueError(f"mask must not be empty, got shape {tuple(array.shape)}")
    return array


def mask_image(
    mask: torch.Tensor | np.ndarray,
    query_tokens: list[str] | tuple[str, ...] | None = None,
    key_tokens: list[str] | tuple[str, ...] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    legend: bool = True,
) -> Figure:
    """Draw one boolean attention mask as a two-colour image.

    Cell ``[i, j]`` is blue where query ``i`` may attend to key ``j`` (``True``) and pale
    grey where it is blocked (``False``), the library's one mask polarity. A legend names
    the two colours.

    Args:
        mask: Mask of shape ``[Tq, Tk]``, a ``torch.bool`` tensor (any device) or a NumPy
            bool array, ``True`` where the query may attend to the key. For a batched mask
            pick one batch element and head first, e.g. ``mask[0, 0]``.
        query_tokens: ``Tq`` labels for the rows. Defaults to the positions ``0 .. Tq-1``.
        key_tokens: ``Tk`` labels for the columns. Defaults to ``query_tokens`` when the
            mask is square (self-attention), otherwise to the positions ``0 .. Tk-1``.
        ax: Axes to draw into. By default a new figure is created, sized to the mask.
        title: Title of the axes.
        legend: Whether to add the legend ("may attend", "blocked") to the right of the
            axes. Turn it off for all but one panel of a figure with several masks.

    Returns:
        The figure holding the image (the figure of ``ax`` when ``ax`` is given). It is not
        shown; close it with ``plt.close(fig)`` once it has been displayed or saved.

    Raises:
        TypeError: If ``mask`` is not a bool tensor or array (the message shows the
            conversion from the 0/1 conventions), or a token list is a single string.
        ValueError: If ``mask`` is not 2-D or is empty, or if ``query_tokens`` or
            ``key_tokens`` does not have one label per row or column.
    """
    array = _as_2d_bool_array(mask)
    num_queries, num_keys = array.shape
    if key_tokens is None and num_queries == num_keys:
        key_tokens = query_tokens
    row_labels = _check_tokens(
        query_tokens, "query_tokens", num_queries, "rows (queries)", array_name="mask"
    )
    col_labels = _check_tokens(
        key_tokens, "key_tokens", num_keys, "columns (keys)", array_name="mask"
    )

    if ax is None:
        # Square cells, plus room for the labels and the legend: at most 5.0 inches wide.
        cell = min(0.4, 2.1 / max(num_queries, num_keys))
        width = (2.9 if legend else 1.2) + cell * num_keys
        height = 1.3 + cell * num_queries
        fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    else:
        fig = ax.figure

    colours = ListedColormap([_BLOCKED_COLOUR, _MAY_ATTEND_COLOUR])
    ax.imshow(array.astype(np.uint8), cmap=colours, vmin=0, vmax=1, interpolation="nearest")
    if max(num_queries, num_keys) <= _GRID_MAX_SIZE:
        # White lines between the cells, so that single cells can be counted.
        ax.set_xticks(np.arange(num_keys + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(num_queries + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
    for axis, labels, size in (
        (ax.xaxis, col_labels, num_keys),
        (ax.yaxis, row_labels, num_queries),
    ):
        if labels is not None:
            axis.set_ticks(np.arange(size), labels)
        elif size <= _GRID_MAX_SIZE:
            axis.set_ticks(np.arange(size), [str(position) for position in range(size)])
        else:
            axis.set_major_locator(MaxNLocator(integer=True))
    if col_labels is not None and max(len(label) for label in col_labels) > 4:
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title is not None:
        ax.set_title(title)
    if legend:
        handles = [
            # Two lines each: a narrow legend leaves the mask room in a 5-inch figure.
            Patch(facecolor=_MAY_ATTEND_COLOUR, label="may attend\n(True)"),
            Patch(facecolor=_BLOCKED_COLOUR, edgecolor="0.6", label="blocked\n(False)"),
        ]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


def _as_encoding_array(encoding: torch.Tensor | np.ndarray) -> np.ndarray:
    """``encoding`` as a float64 ``[T, D]`` array (positions x dimensions), or raise."""
    return as_float_array(encoding, "encoding", "[T, D]")


def encoding_heatmap(
    encoding: torch.Tensor | np.ndarray,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "RdBu_r",
    colorbar_label: str = "encoding value",
) -> Figure:
    """Draw a positional encoding as a heatmap: one row per position, one column per dimension.

    The colour scale is symmetric about 0 (from ``-m`` to ``m``, with ``m`` the largest
    absolute value), so with a diverging colormap 0 is the neutral middle colour and positive
    and negative values of equal size get equally strong colours.

    Args:
        encoding: Shape ``[T, D]``, a tensor (any float dtype, any device, with or without
            grad) or an array: e.g. ``sinusoidal_encoding(T, D)`` or the weight of a learned
            position table.
        ax: Axes to draw into. By default a new 5.0 x 3.4 inch figure is created.
        title: Title of the axes.
        cmap: Name of a matplotlib colormap. The default, ``"RdBu_r"`` (blue negative, red
            positive), is a diverging map readable with the common colour-vision deficiencies.
        colorbar_label: Label of the colour bar.

    Returns:
        The figure holding the heatmap and its colour bar (the figure of ``ax`` when ``ax`` is
        given). It is not shown; close it with ``plt.close(fig)`` once it has been displayed
        or saved.

    Raises:
        TypeError: If ``encoding`` is not a tensor or array of numbers.
        ValueError: If ``encoding`` is not 2-D or is empty.
    """
    array = _as_encoding_array(encoding)
    largest = float(np.nanmax(np.abs(array))) if np.isfinite(array).any() else 0.0
    # An all-zero encoding still gets a usable, centred scale.
    limit = largest if 0.0 < largest < np.inf else 1.0
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.0, 3.4), layout="constrained")
    else:
        fig = ax.figure
    image = ax.imshow(array, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    colorbar = fig.colorbar(image, ax=ax)
    colorbar.set_label(colorbar_label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    if title is not None:
        ax.set_title(title)
    return fig


# Bend of every arc (matplotlib's ``arc3`` ``rad``): an arc between tokens ``s`` places apart
# rises ``_ARC_BEND * s / 2`` above (or below) the row of tokens.
_ARC_BEND = 0.5
# Arcs start and end this far (in data units, one unit between neighbouring tokens) above or
# below a token's centre, on the edge of its label box.
_ARC_END = 0.15


def attention_arcs(
    weights: torch.Tensor | np.ndarray,
    tokens: list[str] | tuple[str, ...] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    highlight: list[tuple[int, int]] | tuple[tuple[int, int], ...] | None = None,
    linewidth: float = 2.0,
    color: str = "0.45",
    highlight_color: str = "#D55E00",
) -> Figure:
    """Draw a square attention matrix, or a mask of who may attend to whom, as arcs.

    The tokens sit in a row, in order. Every positive entry ``weights[i, j]`` with ``i != j``
    (query ``i`` takes from key ``j``) becomes an arrow from token ``j`` to token ``i``: above
    the row when the key comes earlier (``j < i``), below it when the key comes later. Arcs
    between distant tokens rise higher, and heavier weights give wider, more opaque arcs. The
    diagonal, a token attending to itself, is not drawn. Each arrow's ``gid`` is
    ``"arc-{i}-{j}"``.

    Args:
        weights: Shape ``[T, T]``, non-negative: attention weights, or a ``torch.bool`` mask
            (``True`` = may attend, drawn as weight 1), as a tensor or an array.
        tokens: ``T`` labels, one per position. Defaults to the positions ``0 .. T-1``.
        ax: Axes to draw into; its aspect is set to equal. By default a new figure is created,
            sized to the sequence.
        title: Title of the axes.
        highlight: ``(query, key)`` pairs whose arcs are drawn on top, in
            ``highlight_color``, e.g. the steps of a path. Each must be an arc that is drawn.
        linewidth: Width in points of the arc of the largest weight.
        color: Matplotlib colour of the arcs.
        highlight_color: Matplotlib colour of the highlighted arcs. The default is the
            vermilion of the Okabe-Ito palette, distinguishable with colour-vision
            deficiencies.

    Returns:
        The figure holding the diagram (the figure of ``ax`` when ``ax`` is given). It is not
        shown; close it with ``plt.close(fig)`` once it has been displayed or saved.

    Raises:
        TypeError: If ``weights`` is not a tensor or array of numbers, ``tokens`` is a single
            string, or ``highlight`` is not a sequence of pairs of ints.
        ValueError: If ``weights`` is not square ``[T, T]``, is empty, or has a negative or
            non-finite entry; if ``tokens`` does not have ``T`` labels; if ``linewidth`` is
            not positive; or if a ``highlight`` pair is not a drawn arc.
    """
    array = _as_2d_array(weights)
    size = array.shape[0]
    if array.shape[1] != size:
        raise ValueError(
            f"weights must be square [T, T] (self-attention over one sequence), "
            f"got shape {tuple(array.shape)}"
        )
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError("weights must be finite and non-negative")
    labels = _check_tokens(tokens, "tokens", size, "rows and columns")
    if labels is None:
        labels = [str(position) for position in range(size)]
    if isinstance(linewidth, bool) or not isinstance(linewidth, int | float):
        raise TypeError(f"linewidth must be a positive number, got {type(linewidth).__name__}")
    if not 0 < linewidth < np.inf:
        raise ValueError(f"linewidth must be a positive number, got {linewidth}")

    arcs = [(i, j) for i in range(size) for j in range(size) if i != j and array[i, j] > 0]
    highlighted = _check_highlight(highlight, set(arcs))

    # How far the highest arc rises above the row, and the lowest falls below it.
    rise = max((_ARC_BEND * (i - j) / 2 for i, j in arcs if j < i), default=0.0)
    fall = max((_ARC_BEND * (j - i) / 2 for i, j in arcs if j > i), default=0.0)
    y_limits = (-(fall + _ARC_END + 0.2), rise + _ARC_END + 0.2)
    if ax is None:
        width = min(10.0, max(4.0, 0.9 * size + 0.5))
        height = (y_limits[1] - y_limits[0]) * width / size + (0.5 if title else 0.2)
        fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    else:
        fig = ax.figure

    largest = max((array[i, j] for i, j in arcs), default=1.0)
    for i, j in arcs:
        share = array[i, j] / largest
        is_highlighted = (i, j) in highlighted
        end = _ARC_END if j < i else -_ARC_END
        arrow = FancyArrowPatch(
            (j, end),
            (i, end),
            connectionstyle=f"arc3,rad={-_ARC_BEND}",
            arrowstyle="-|>,head_length=0.5,head_width=0.25",
            mutation_scale=10 + 2 * linewidth,
            linewidth=(linewidth + 1.0 if is_highlighted else linewidth * share),
            color=highlight_color if is_highlighted else color,
            alpha=1.0 if is_highlighted else 0.35 + 0.65 * share,
            shrinkA=0.0,
            shrinkB=0.0,
            zorder=2 if is_highlighted else 1,
            gid=f"arc-{i}-{j}",
        )
        ax.add_patch(arrow)
    for position, label in enumerate(labels):
        ax.text(
            position,
            0.0,
            label,
            ha="center",
            va="center",
            zorder=3,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.3"},
        )
    ax.set_xlim(-0.6, size - 0.4)
    ax.set_ylim(*y_limits)
    ax.set_aspect("equal")
    ax.axis("off")
    if title is not None:
        ax.set_title(title)
    return fig


def _check_highlight(
    highlight: list[tuple[int, int]] | tuple[tuple[int, int], ...] | None,
    arcs: set[tuple[int, int]],
) -> set[tuple[int, int]]:
    """Return the ``(query, key)`` pairs of ``highlight`` as a set, or raise."""
    if highlight is None:
        return set()
    pairs = set()
    for pair in highlight:
        if (
            not isinstance(pair, tuple | list)
            or len(pair) != 2
            or any(isinstance(p, bool) or not isinstance(p, int | np.integer) for p in pair)
        ):
            raise TypeError(f"highlight must hold (query, key) pairs of ints, got {pair!r}")
        query, key = (int(p) for p in pair)
        if (query, key) not in arcs:
            raise ValueError(
                f"highlight pair {(query, key)} is not a drawn arc: it needs query != key "
                f"and a positive weights[{query}, {key}]"
            )
        pairs.add((query, key))
    return pairs
