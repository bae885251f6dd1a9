"""Shared fixtures: where the built book is, and how to treat a missing prerequisite.

Tests of the built HTML and the browser tests need `make book` to have run (``make test`` runs it
first). Outside CI a missing prerequisite skips those tests with a message saying what to do; with
``CI=true`` it fails them, so CI can never pass by skipping.

Markers (pyproject.toml) say what a test needs: ``book`` the built book in ``_build/``, ``browser``
headless Chromium, ``slow`` several minutes of pages run again. A test that asks for the built
book (``html_dir``) or for Chromium (``browser``) gets the marker here even where its module forgot
it, so ``make test-fast`` (``-m "not book and not browser and not slow"``) never needs a build.

Hypothesis's budget is set once, here: the profile ``suite`` (``HYPOTHESIS_PROFILE=thorough`` runs
ten times as many examples). A test states ``max_examples`` itself only where its examples cost
far more or far less than most.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from support import numerics

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"

# No deadline: the first example of a test pays for torch's lazy initialisation, and on a loaded
# machine any example may wait for a core.
settings.register_profile("suite", max_examples=25, deadline=None)
settings.register_profile("thorough", max_examples=250, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


def missing(reason: str) -> None:
    """Skip (locally) or fail (in CI) because a prerequisite is missing."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this must not be skipped)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def html_dir() -> Path:
    if not (HTML / "index.html").is_file():
        missing("the book is not built: run `make book` first")
    return HTML


# A fixture a test asks for (directly or through another fixture) -> the marker it implies.
IMPLIED_MARKERS = {"html_dir": "book", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items):
    for item in items:
        for fixture, marker in IMPLIED_MARKERS.items():
            if fixture in item.fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


# Put before a learner notebook's first cell when the tests execute it: for every PNG the kernel
# renders (a figure shown by plt.show() or glued), it records the dpi it was rendered at and the
# font size in points of every text matplotlib drew into it, keyed by the PNG's SHA-256: the PNG
# as drawn, and the PNG Jupyter's formatter sends (they differ for a palette PNG, see
# plotting.use_palette_png). It only observes: the figures come out byte for byte as without it.
FIGURE_TEXT_RECORDER = """\
import base64, functools, hashlib, json, math
import matplotlib.axes, matplotlib.backend_bases, matplotlib.figure, matplotlib.legend
import matplotlib.text
from IPython.core.formatters import PNGFormatter

def _record_figure_text(path):
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
            _, ih, idescent = renderer.get_text_width_height_descent(
                line, text.get_fontproperties(), ismath=ismath) if line else (0, 0, 0)
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
        points = [(x0, y0), (x0 - s * h, y0 + c * h), (x0 + c * w - s * h, y0 + s * w + c * h),
                  (x0 + c * w, y0 + s * w)]
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
            drawn_in = drawn_in or any(a.get_visible() for a in (
                *self.images, *self.collections, *self.lines, *self.patches))
            layout["axes"][index] = {
                "box": png_box(self.bbox), "parent": parent, "drawn": bool(drawn_in),
                "label": self.get_label() or "", "title": self.get_title(),
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
            layout["texts"].append({
                "text": self.get_text(), "size": float(self.get_fontsize()),
                "box": png_box(box), "corners": quad,
                "axes": owners[-1] if owners else None,
            })
        return result

    @functools.wraps(legend_draw)
    def draw_legend(self, renderer):
        result = legend_draw(self, renderer)
        if not self.get_visible():
            return result
        frame = self.get_window_extent(renderer)
        ax = self.axes if self.axes is not None else None
        hits = []
        for artist in (ax.lines if ax is not None else []):
            if not artist.get_visible() or artist.get_linestyle() in ("None", " ", "") and (
                    artist.get_marker() in (None, "None", "", " ")):
                continue
            xy = artist.get_transform().transform(artist.get_xydata())
            points = []
            for (xa, ya), (xb, yb) in zip(xy[:-1], xy[1:]):
                points += [(xa + (xb - xa) * t / 8, ya + (yb - ya) * t / 8) for t in range(8)]
            if len(xy):
                points.append(tuple(xy[-1]))
            inside = [p for p in points if frame.contains(*p)]
            if inside:
                hits.append({"label": str(artist.get_label()), "points": len(inside)})
        for artist in (ax.collections if ax is not None else []):
            if type(artist).__name__ != "PathCollection" or not artist.get_visible():
                continue  # scatter points only
            offsets = artist.get_offsets()
            if len(offsets) == 0 or len(offsets) > 10000:
                continue
            xy = artist.get_offset_transform().transform(offsets)
            inside = [p for p in xy if frame.contains(*p)]
            if inside:
                hits.append({"label": str(artist.get_label()), "points": len(inside)})
        layout["legends"].append({"box": png_box(frame), "covers": hits,
                                  "axes": owners[-1] if owners else None})
        return result

    def measured(png, dpi):
        return {
            "sha256": hashlib.sha256(png).hexdigest(), "dpi": dpi, "sizes": sorted(set(drawn)),
            "texts": list(layout["texts"]), "axes": list(layout["axes"]),
            "legends": list(layout["legends"]),
        }

    def print_png(self, filename, *args, **kwargs):
        drawn.clear()
        result = print_figure(self, filename, *args, **kwargs)
        if kwargs.get("format") == "png" and hasattr(filename, "getvalue"):
            record = measured(filename.getvalue(), float(kwargs.get("dpi") or self.figure.dpi))
            with open(path, "a") as file:
                file.write(json.dumps(record) + "\\n")
        return result

    format_png = PNGFormatter.__call__

    def format_figure(self, obj):
        result = format_png(self, obj)
        if isinstance(obj, matplotlib.figure.Figure) and result is not None:
            data = base64.b64decode(result) if isinstance(result, str) else result
            with open(path, "a") as file:
                file.write(json.dumps(measured(data, float(obj.dpi))) + "\\n")
        return result

    matplotlib.text.Text.draw = draw
    matplotlib.axes._base._AxesBase.draw = draw_axes
    matplotlib.figure.Figure.draw = draw_figure
    matplotlib.legend.Legend.draw = draw_legend
    matplotlib.backend_bases.FigureCanvasBase.print_figure = print_png
    PNGFormatter.__call__ = format_figure

_record_figure_text(RECORD_PATH)
del _record_figure_text
"""


@pytest.fixture(scope="session")
def numeric_configurations() -> list[str]:
    """The two numeric configurations of the portability run: the first two of
    ``support.numerics.CONFIGURATIONS`` that change this machine's numerics (a short training
    run's weights differ from the default's and from each other's)."""
    chosen, digests = numerics.effective_configurations(2)
    numerics.REPORT["configurations"] = {"chosen": chosen, "digests": digests}
    if len(chosen) < 2:
        tried = ", ".join(f"{name}: {digest[:12]}" for name, digest in digests.items())
        missing(f"fewer than two configurations change this machine's numerics ({tried})")
    return chosen


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory, numeric_configurations):
    """Run a notebook as a learner would (nbclient, offline, in its own folder), once per session.

    The kernel runs under the portability run's first numeric configuration, not the build's:
    a learner's machine is not the author's, and the pages' claims must hold there
    (tests/test_portability.py runs the second).

    Returns the executed notebook; its ``metadata["figure_text"]`` maps each PNG's SHA-256 to the
    dpi it was rendered at and the font sizes (points) of the texts drawn into it.
    """
    import nbformat
    from nbclient import NotebookClient

    config = numeric_configurations[0]

    cache: dict[Path, nbformat.NotebookNode] = {}
    records = tmp_path_factory.mktemp("figure-text")

    def run(path: Path) -> nbformat.NotebookNode:
        if path not in cache:
            nb = nbformat.read(path, as_version=4)
            log = records / f"{len(cache)}.jsonl"
            source = FIGURE_TEXT_RECORDER.replace("RECORD_PATH", repr(str(log)))
            recorder = nbformat.v4.new_code_cell(source)
            nb.cells.insert(0, recorder)
            client = NotebookClient(
                nb,
                timeout=600,
                kernel_name="python3",
                allow_errors=True,  # errors are checked by the tests, with the cell that raised
                resources={"metadata": {"path": str(path.parent)}},
            )
            client.execute(env=numerics.environment(config))
            nb.cells.remove(recorder)
            nb.metadata["numeric_configuration"] = config
            numerics.record("glue", f"{path.parent.name}/{path.stem}", config, numerics.glued(nb))
            lines = log.read_text().splitlines() if log.exists() else []
            found = [json.loads(line) for line in lines]
            nb.metadata["figure_text"] = {r["sha256"]: r for r in found}
            cache[path] = nb
        return cache[path]

    return run


@pytest.fixture(autouse=True)
def default_print_options():
    """Lab pages run in-process by some tests set torch's print options: undo it after each."""
    yield
    torch.set_printoptions(profile="default", sci_mode=None)


# Half-precision results are compared with a float32 reference computed from the same
# (rounded) inputs, so the tolerance covers only the rounding inside the computation.
HALF_TOLERANCE = {
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}


def random_inputs(shapes, dtype=torch.float32, seed=0):
    """Seeded standard-normal tensors, drawn in float64 then cast, one per shape."""
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype) for shape in shapes
    ]


# Browser tests (test_browser*.py): Debian's Chromium driven by Playwright over a local server.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
SCREENSHOTS = ROOT / "tests" / "screenshots"
# axe-core, the accessibility audit the browser tests inject into pages (npm, `make book`).
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def axe() -> Path:
    """The path of axe-core's script; missing, the test is skipped (failed with ``CI=true``)."""
    if not AXE.is_file():
        missing(f"{AXE.relative_to(ROOT)} is missing: run `make book` (it runs `npm ci`)")
    return AXE


def element_screenshot(locator, name: str) -> Path:
    """Write a screenshot of ``locator`` (a Playwright locator) to ``tests/screenshots/<name>.png``.

    Checks what was written: a PNG as wide as the element (in CSS px, the browser's scale being
    1), so a screenshot of nothing, or of a collapsed element, fails. Returns the file's path.
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    locator.scroll_into_view_if_needed()
    width = locator.bounding_box()["width"]
    locator.screenshot(path=str(path))
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    png_width = int.from_bytes(data[16:20], "big")  # the IHDR chunk's width
    assert width > 0 and abs(png_width - width) <= 1, (path.name, png_width, width)
    return path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def server(html_dir):
    handler = functools.partial(QuietHandler, directory=str(html_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        missing(
            f"Chromium not found at {CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)"
        )
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="attention-lab-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module's tests (``pytestmark = usefixtures("one_thread")``).

    Tiny matrices gain nothing from threads, and on a loaded machine threads wait for each
    other; results do not depend on it. The previous setting is restored.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def pytest_terminal_summary(terminalreporter):
    """After the run: the numeric configurations used and the glued values that differed
    between them and the build, and each swept claim's spread over seeds."""
    for title, lines in numerics.summary():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
