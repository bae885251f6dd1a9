"""Records, for each PNG a notebook's kernel renders, the text matplotlib drew into it.

tests/conftest.py's ``executed_notebook`` puts :func:`notebook_cell` before a learner notebook's
first cell when the tests execute it: for every PNG the kernel renders (a figure shown by
plt.show() or glued), it records the dpi it was rendered at and the font size in points of every
text matplotlib drew into it, keyed by the PNG's SHA-256: the PNG as drawn, and the PNG
Jupyter's formatter sends (they differ for a palette PNG, see plotting.use_palette_png). Also
where each text, axes frame and legend was drawn, in the PNG's pixels
(tests/runs/test_figure_text.py and tests/runs/test_figure_layout.py read them). It only observes:
the figures come out byte for byte as without it.

The cell runs this file in a namespace of its own, so the notebook's own cells see none of its
names: a page that forgets an import still fails.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math

import matplotlib.axes
import matplotlib.backend_bases
import matplotlib.figure
import matplotlib.legend
import matplotlib.text
from IPython.core.formatters import PNGFormatter


def notebook_cell(log: str) -> str:
    """The source of a cell that starts recording into the JSON-lines file ``log``."""
    return (
        f"with open({__file__!r}) as _file:\n"
        f"    exec(compile(_file.read(), {__file__!r}, 'exec'), _recorder := {{}})\n"
        f"_recorder['record_figure_text']({str(log)!r})\n"
        "del _file, _recorder\n"
    )


def record_figure_text(path: str) -> None:
    """Patch matplotlib and IPython's PNG formatter to append a JSON line to ``path`` per PNG."""
    drawn = []  # font sizes of the texts drawn since the PNG was asked for
    # What the latest Figure.draw drew, in the PNG's pixels (x right, y down): the last draw of
    # a savefig is the one that renders the PNG, after bbox_inches="tight" moved the origin.
    layout = {"texts": [], "axes": [], "legends": []}
    owners = []  # indices in layout["axes"] of the axes being drawn, innermost last
    height = [0.0]  # the canvas height, to turn matplotlib's y up into the PNG's y down
    text_draw = matplotlib.text.Text.draw
    axes_draw = matplotlib.axes._base._AxesBase.draw
    figure_draw = matplotlib.figure.Figure.draw
    legend_draw = matplotlib.legend.Legend.draw
    print_figure = matplotlib.backend_bases.FigureCanvasBase.print_figure

    def png_box(bbox):
        return [bbox.x0, height[0] - bbox.y1, bbox.x1, height[0] - bbox.y0]

    def corners(text, renderer):
        # The rectangle of the text's ink, rotated with it: matplotlib's layout box (its first
        # corner relative to the anchor, its unrotated size) less the room the font reserves
        # above the first line and below the last beyond what their glyphs use.
        _, lines, ((cx, cy), (w, h)) = text._get_layout(renderer)
        ink = []
        for k in (0, -1):
            line, ismath = text._preprocess_math(lines[k][0])
            _, ih, idescent = (
                renderer.get_text_width_height_descent(
                    line, text.get_fontproperties(), ismath=ismath
                )
                if line
                else (0, 0, 0)
            )
            ink.append((ih - idescent, idescent))
        top = max(0.0, lines[0][1][1] - ink[0][0])
        bottom = max(0.0, lines[-1][1][2] - ink[1][1])
        if top + bottom >= h:
            top = bottom = 0.0
        x, y = text.get_transform().transform(text.get_unitless_position())
        a = math.radians(text.get_rotation())
        c, s = math.cos(a), math.sin(a)
        h -= top + bottom
        x0, y0 = x + cx - s * bottom, y + cy + c * bottom
        points = [
            (x0, y0),
            (x0 - s * h, y0 + c * h),
            (x0 + c * w - s * h, y0 + s * w + c * h),
            (x0 + c * w, y0 + s * w),
        ]
        return [[px, height[0] - py] for px, py in points]

    @functools.wraps(figure_draw)
    def draw_figure(self, renderer):
        layout["texts"].clear()
        layout["axes"].clear()
        layout["legends"].clear()
        height[0] = float(getattr(renderer, "height", self.bbox.height))
        return figure_draw(self, renderer)

    @functools.wraps(axes_draw)
    def draw_axes(self, renderer):
        if not self.get_visible():
            return axes_draw(self, renderer)
        index = len(layout["axes"])
        layout["axes"].append(None)
        parent = owners[-1] if owners else None
        owners.append(index)
        try:
            return axes_draw(self, renderer)
        finally:
            owners.pop()
            # Its frame is an obstacle to other axes' texts if anything is drawn in it.
            drawn_in = any(s.get_visible() for s in self.spines.values()) and self.axison
            drawn_in = drawn_in or any(
                a.get_visible()
                for a in (*self.images, *self.collections, *self.lines, *self.patches)
            )
            layout["axes"][index] = {
                "box": png_box(self.bbox),
                "parent": parent,
                "drawn": bool(drawn_in),
                "label": self.get_label() or "",
                "title": self.get_title(),
            }

    @functools.wraps(text_draw)
    def draw(self, renderer):
        result = text_draw(self, renderer)
        # Text.draw itself skips invisible and empty texts; so do we.
        if self.get_visible() and self.get_text().strip():
            drawn.append(float(self.get_fontsize()))
            box = matplotlib.text.Text.get_window_extent(self, renderer)
            if not all(math.isfinite(v) for v in box.extents):
                return result
            quad = corners(self, renderer)
            clip = self.get_clip_box() if self.get_clip_on() else None
            if clip is not None:
                inside = box.intersection(box, clip)
                if inside is None or inside.width <= 0 or inside.height <= 0:
                    return result  # clipped away entirely: not shown
                if inside.bounds != box.bounds:
                    box = inside
                    x0, y0, x1, y1 = png_box(box)
                    quad = [[x0, y1], [x0, y0], [x1, y0], [x1, y1]]
            layout["texts"].append(
                {
                    "text": self.get_text(),
                    "size": float(self.get_fontsize()),
                    "box": png_box(box),
                    "corners": quad,
                    "axes": owners[-1] if owners else None,
                }
            )
        return result

    @functools.wraps(legend_draw)
    def draw_legend(self, renderer):
        result = legend_draw(self, renderer)
        if not self.get_visible():
            return result
        frame = self.get_window_extent(renderer)
        ax = self.axes if self.axes is not None else None
        hits = []
        for artist in ax.lines if ax is not None else []:
            no_line = artist.get_linestyle() in ("None", " ", "")
            no_marker = artist.get_marker() in (None, "None", "", " ")
            if not artist.get_visible() or (no_line and no_marker):
                continue
            xy = artist.get_transform().transform(artist.get_xydata())
            points = []
            for (xa, ya), (xb, yb) in zip(xy[:-1], xy[1:], strict=True):
                points += [(xa + (xb - xa) * t / 8, ya + (yb - ya) * t / 8) for t in range(8)]
            if len(xy):
                points.append(tuple(xy[-1]))
            inside = [p for p in points if frame.contains(*p)]
            if inside:
                hits.append({"label": str(artist.get_label()), "points": len(inside)})
        for artist in ax.collections if ax is not None else []:
            if type(artist).__name__ != "PathCollection" or not artist.get_visible():
                continue  # scatter points only
            offsets = artist.get_offsets()
            if len(offsets) == 0 or len(offsets) > 10000:
                continue
            xy = artist.get_offset_transform().transform(offsets)
            inside = [p for p in xy if frame.contains(*p)]
            if inside:
                hits.append({"label": str(artist.get_label()), "points": len(inside)})
        layout["legends"].append(
            {"box": png_box(frame), "covers": hits, "axes": owners[-1] if owners else None}
        )
        return result

    def measured(png, dpi):
        return {
            "sha256": hashlib.sha256(png).hexdigest(),
            "dpi": dpi,
            "sizes": sorted(set(drawn)),
            "texts": list(layout["texts"]),
            "axes": list(layout["axes"]),
            "legends": list(layout["legends"]),
        }

    def print_png(self, filename, *args, **kwargs):
        drawn.clear()
        result = print_figure(self, filename, *args, **kwargs)
        if kwargs.get("format") == "png" and hasattr(filename, "getvalue"):
            record = measured(filename.getvalue(), float(kwargs.get("dpi") or self.figure.dpi))
            with open(path, "a") as file:
                file.write(json.dumps(record) + "\n")
        return result

    format_png = PNGFormatter.__call__

    def format_figure(self, obj):
        result = format_png(self, obj)
        if isinstance(obj, matplotlib.figure.Figure) and result is not None:
            data = base64.b64decode(result) if isinstance(result, str) else result
            with open(path, "a") as file:
                file.write(json.dumps(measured(data, float(obj.dpi))) + "\n")
        return result

    matplotlib.text.Text.draw = draw
    matplotlib.axes._base._AxesBase.draw = draw_axes
    matplotlib.figure.Figure.draw = draw_figure
    matplotlib.legend.Legend.draw = draw_legend
    matplotlib.backend_bases.FigureCanvasBase.print_figure = print_png
    PNGFormatter.__call__ = format_figure
