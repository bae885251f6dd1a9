"""Tests of attention_lab.book.display: palette PNGs and the formatter that sends them."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from attention_lab.book import display


def _png(data: bytes):
    import io

    from PIL import Image

    return Image.open(io.BytesIO(data))


def _many_coloured_heatmap() -> Figure:
    generator = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(5.0, 4.0))
    ax.imshow(generator.normal(size=(300, 300)).cumsum(axis=1), cmap="RdBu_r")
    return fig


def test_palette_png_shrinks_a_heatmap_and_keeps_its_look():
    from IPython.core.pylabtools import print_figure

    fig = _many_coloured_heatmap()
    full = print_figure(fig, fmt="png", bbox_inches="tight")
    small = display.palette_png(fig)
    plt.close(fig)
    assert small is not None and len(small) <= 0.7 * len(full)
    before, after = _png(full).convert("RGB"), _png(small)
    assert after.mode == "P" and after.size == before.size
    assert len(after.getcolors(1 << 24)) <= 256 < len(before.getcolors(1 << 24))
    difference = np.abs(
        np.asarray(before, dtype=np.int16) - np.asarray(after.convert("RGB"), dtype=np.int16)
    )
    # 256 shared colours: on average a pixel moves by a few levels of 255, never by a lot.
    assert difference.mean() < 3 and np.percentile(difference, 99.9) < 40


def test_palette_png_of_a_line_chart_is_smaller_and_close():
    from IPython.core.pylabtools import print_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 0, 1])
    ax.set_title("a line")
    full, small = print_figure(fig, fmt="png", bbox_inches="tight"), display.palette_png(fig)
    plt.close(fig)
    assert len(small) < 0.5 * len(full)
    difference = np.abs(
        np.asarray(_png(full).convert("RGB"), dtype=np.int16)
        - np.asarray(_png(small).convert("RGB"), dtype=np.int16)
    )
    assert difference.max() <= 32


def test_palette_png_of_an_empty_figure_is_none():
    fig = plt.figure()
    assert display.palette_png(fig) is None
    plt.close(fig)


def test_palette_png_is_deterministic_and_rejects_non_figures():
    fig = _many_coloured_heatmap()
    assert display.palette_png(fig) == display.palette_png(fig)
    plt.close(fig)
    with pytest.raises(TypeError, match="matplotlib Figure"):
        display.palette_png(np.zeros((3, 3)))


def test_use_palette_png_needs_ipython():
    with pytest.raises(RuntimeError, match="inside IPython"):
        display.use_palette_png()


def test_use_palette_png_registers_the_formatter_for_figures():
    import base64

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        display.use_palette_png()
        formatter = shell.display_formatter.formatters["image/png"]
        heatmap = _many_coloured_heatmap()
        sent = base64.b64decode(formatter(heatmap))
        assert sent == display.palette_png(heatmap)
        assert _png(sent).mode == "P"
        plt.close("all")
    finally:
        InteractiveShell.clear_instance()
