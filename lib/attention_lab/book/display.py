"""How a notebook sends matplotlib figures: as palette PNGs, a fraction of the usual bytes.

Book support, apart from the figure functions of :mod:`attention_lab.plotting`: those draw and
return a figure; this decides how Jupyter encodes it. Nothing happens on import;
:func:`use_palette_png`, called in a page's first cell, registers the formatter.
"""

from __future__ import annotations

import base64
import io

from matplotlib.figure import Figure

__all__ = ["palette_png", "use_palette_png"]


def palette_png(fig: Figure) -> bytes | None:
    """``fig`` as a PNG of at most 256 colours (a palette PNG), a fraction of the usual bytes.

    The figure is rendered exactly as Jupyter's inline backend renders it (``bbox_inches=
    "tight"``, the figure's own dpi and face colour), then reduced to at most 256 colours with
    Pillow's fast octree quantiser, without dithering (flat areas stay flat). A palette PNG
    stores one byte per pixel instead of four: a line chart (a few hundred colours, almost all
    from anti-aliasing) shrinks about 3 times, a heatmap of a 512 x 512 matrix (thousands of
    colours) about 5 times. The price: a pixel moves by a few levels of 255 on average, and a
    colour map's 256 steps share the 256 entries with the text and lines.

    Returns:
        The palette PNG's bytes; ``None`` for a figure with nothing drawn (Jupyter shows
        nothing for one).

    Raises:
        TypeError: If ``fig`` is not a :class:`matplotlib.figure.Figure`.
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    from IPython.core.pylabtools import print_figure
    from PIL import Image

    full = print_figure(fig, fmt="png", bbox_inches="tight")
    if full is None:
        return None
    image = Image.open(io.BytesIO(full))
    # Opaque figures (the usual case) are quantised in RGB; transparency is kept otherwise.
    opaque = image.mode == "RGB" or image.getchannel("A").getextrema() == (255, 255)
    source = image.convert("RGB" if opaque else "RGBA")
    palette = source.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def use_palette_png() -> None:
    """Make Jupyter send every matplotlib figure as a :func:`palette_png`.

    Call it once in a page's first cell, after ``%matplotlib inline``. It registers a PNG
    formatter for :class:`~matplotlib.figure.Figure` with the running IPython shell, so the
    book's build and a learner's notebook get the same bytes. It changes nothing else, and
    nothing outside IPython.

    Raises:
        RuntimeError: If it is not called inside IPython (e.g. from a plain script).
    """
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("use_palette_png() works inside IPython or Jupyter only")

    def as_png(fig: Figure) -> str | None:
        small = palette_png(fig)
        return None if small is None else base64.b64encode(small).decode("ascii")

    shell.display_formatter.formatters["image/png"].for_type(Figure, as_png)
