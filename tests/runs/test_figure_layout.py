"""No figure's text runs into other text, into another panel or off the image; no legend hides data.

Where each text is comes from the kernel itself: ``learner_run`` in conftest.py records,
for every PNG matplotlib renders, the rectangle of every visible text it draws into it (tick
labels, titles, axis labels, suptitles, legend entries, annotations, colour-bar labels), the
frame of every axes and what each legend covers, in the PNG's own pixels. They are measured by
the renderer that draws the PNG, during that draw, so ``bbox_inches="tight"`` is already applied.

A text's rectangle is matplotlib's layout box: the advance width of its characters by the height
of a line of its font (ascent of "l" to descent of "p"), rotated with the text. Two texts collide
when their rectangles, each shrunk by ``SLACK`` px on every side, still intersect: they overlap by
more than ``2 * SLACK`` px across and along. The layout box is a little larger than the ink
(the line height reserves room for accents and descenders, e.g. under digits), so texts set as
close as matplotlib lays out tick labels (boxes touching, or sharing a pixel from rounding) do
not count, while two words that run into each other, whose boxes overlap by several px in both
directions, do. Rotated texts are compared as rotated rectangles, not as the squares around them:
two labels at 45 degrees set side by side do not collide even though their squares overlap.
"""

from __future__ import annotations

import math

import pytest

from support import runs
from support.figures import figure_records, png_size

SOURCES = runs.sources()
IDS = [runs.page_of(s) for s in SOURCES]

SLACK = 0.5  # px shrunk from each side of a text's rectangle before testing for overlap
# A legend covers data when it lies over at least this many of a line's points (its vertices and
# 7 points evenly between each two) or a scatter's markers: one point is often a line's end
# touching the frame's edge.
COVERED = 2
# Figures whose text collides (none now: keep it empty). A listed figure that has
# no collision fails the test, so the list only shrinks: remove a figure once it is fixed.
OVERLAPS_KNOWN: set[str] = set()


def layouts(nb):
    """(label, PNG width, PNG height, record) of every PNG the notebook drew."""
    for label, png, record in figure_records(nb):
        yield label, *png_size(png), record


def _shrunk(corners, by: float):
    """The rectangle ``corners`` (c0, c0 + up, c0 + up + along, c0 + along) less ``by`` px
    on each side (never less than a line)."""
    (x0, y0), (x1, y1), _, (x3, y3) = corners
    up, along = (x1 - x0, y1 - y0), (x3 - x0, y3 - y0)
    moves = []
    for vx, vy in (up, along):
        length = math.hypot(vx, vy)
        step = min(by, length / 2) / length if length else 0.0
        moves.append((vx * step, vy * step))
    (ux, uy), (ax, ay) = moves
    return [
        (x0 + ux + ax, y0 + uy + ay),
        (x1 - ux + ax, y1 - uy + ay),
        (corners[2][0] - ux - ax, corners[2][1] - uy - ay),
        (x3 + ux - ax, y3 + uy - ay),
    ]


def _intersect(p, q) -> bool:
    """Whether two convex quadrilaterals overlap (separating axis theorem)."""
    for poly in (p, q):
        for i in range(4):
            (xa, ya), (xb, yb) = poly[i], poly[(i + 1) % 4]
            nx, ny = yb - ya, xa - xb
            if nx == 0 and ny == 0:
                continue
            pp = [nx * x + ny * y for x, y in p]
            qq = [nx * x + ny * y for x, y in q]
            if max(pp) <= min(qq) or max(qq) <= min(pp):
                return False
    return True


def _rectangle(box):
    x0, y0, x1, y1 = box
    return [(x0, y1), (x0, y0), (x1, y0), (x1, y1)]


def _show(box) -> str:
    return "[" + ", ".join(f"{v:.0f}" for v in box) + "]"


def _ink(text) -> str:
    """The text and the box around its ink, x0, y0, x1, y1 in PNG px from the top left."""
    xs, ys = zip(*text["corners"], strict=True)
    return f"{text['text']!r} {_show((min(xs), min(ys), max(xs), max(ys)))}"


def collisions(width: int, height: int, record) -> list[str]:
    """What is wrong with one figure's layout, one line per problem."""
    texts, axes = record["texts"], record["axes"]
    problems = []
    shrunk = [_shrunk(t["corners"], SLACK) for t in texts]
    for i, a in enumerate(texts):
        for j in range(i + 1, len(texts)):
            b = texts[j]
            ax0, ay0, ax1, ay1 = a["box"]
            bx0, by0, bx1, by1 = b["box"]
            if ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0:
                continue
            if _intersect(shrunk[i], shrunk[j]):
                problems.append(f"text {_ink(a)} overlaps text {_ink(b)}")
    for text, quad in zip(texts, shrunk, strict=True):
        if any(not (0 <= x <= width and 0 <= y <= height) for x, y in quad):
            problems.append(
                f"text {_ink(text)} is cut off by the edge of the {width} x {height} image"
            )
    for text, quad in zip(texts, shrunk, strict=True):
        owner = text["axes"]
        for k, other in enumerate(axes):
            if k == owner or not other or not other["drawn"]:
                continue
            related = owner is not None and (
                other["parent"] == owner
                or axes[owner]["parent"] == k
                or _same(other["box"], axes[owner]["box"])
            )
            if related:
                continue
            if _intersect(quad, _rectangle(other["box"])):
                name = other["title"] or other["label"] or f"axes {k}"
                problems.append(
                    f"text {_ink(text)} runs into the panel {name!r} {_show(other['box'])}"
                )
    for legend in record["legends"]:
        for hit in legend["covers"]:
            if hit["points"] < COVERED:
                continue
            what = hit["label"] if not hit["label"].startswith("_") else "an unlabelled artist"
            problems.append(
                f"the legend {_show(legend['box'])} covers {hit['points']} points of {what!r}"
            )
    return problems


def _same(a, b) -> bool:
    return all(abs(u - v) < 0.5 for u, v in zip(a, b, strict=True))


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_no_figure_text_collides_or_is_cut_off(source, learner_run):
    nb = learner_run(source)
    failing, fixed = [], []
    for label, width, height, record in layouts(nb):
        problems = collisions(width, height, record)
        if label in OVERLAPS_KNOWN:
            if not problems:
                fixed.append(label)
            continue
        failing += [f"{source.stem} {label}: {problem}" for problem in problems]
    assert not failing, "figure layout problems:\n" + "\n".join(failing)
    assert not fixed, f"no collision any more: remove {fixed} from OVERLAPS_KNOWN"
