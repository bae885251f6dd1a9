"""Shared fixtures: where the built book is, and how to treat a missing prerequisite.

Tests of the built HTML and the browser tests need `make book` to have run (``make test`` runs it
first). Outside CI a missing prerequisite skips those tests with a message saying what to do; with
``CI=true`` it fails them, so CI can never pass by skipping.
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

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"


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


# Put before a learner notebook's first cell when the tests execute it: for every PNG the kernel
# renders (a figure shown by plt.show() or glued), it records the dpi it was rendered at and the
# font size in points of every text matplotlib drew into it, keyed by the PNG's SHA-256: the PNG
# as drawn, and the PNG Jupyter's formatter sends (they differ for a palette PNG, see
# plotting.use_palette_png). It only observes: the figures come out byte for byte as without it.
FIGURE_TEXT_RECORDER = """\
import base64, hashlib, json
import matplotlib.backend_bases, matplotlib.figure, matplotlib.text
from IPython.core.formatters import PNGFormatter

def _record_figure_text(path):
    drawn = []
    text_draw = matplotlib.text.Text.draw
    print_figure = matplotlib.backend_bases.FigureCanvasBase.print_figure

    def draw(self, renderer):
        # Text.draw itself skips invisible and empty texts; so do we.
        if self.get_visible() and self.get_text().strip():
            drawn.append(float(self.get_fontsize()))
        return text_draw(self, renderer)

    def print_png(self, filename, *args, **kwargs):
        drawn.clear()
        result = print_figure(self, filename, *args, **kwargs)
        if kwargs.get("format") == "png" and hasattr(filename, "getvalue"):
            record = {
                "sha256": hashlib.sha256(filename.getvalue()).hexdigest(),
                "dpi": float(kwargs.get("dpi") or self.figure.dpi),
                "sizes": sorted(set(drawn)),
            }
            with open(path, "a") as file:
                file.write(json.dumps(record) + "\\n")
        return result

    format_png = PNGFormatter.__call__

    def format_figure(self, obj):
        result = format_png(self, obj)
        if isinstance(obj, matplotlib.figure.Figure) and result is not None:
            data = base64.b64decode(result) if isinstance(result, str) else result
            record = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "dpi": float(obj.dpi),
                "sizes": sorted(set(drawn)),
            }
            with open(path, "a") as file:
                file.write(json.dumps(record) + "\\n")
        return result

    matplotlib.text.Text.draw = draw
    matplotlib.backend_bases.FigureCanvasBase.print_figure = print_png
    PNGFormatter.__call__ = format_figure

_record_figure_text(RECORD_PATH)
del _record_figure_text
"""


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory):
    """Run a notebook as a learner would (nbclient, offline, in its own folder), once per session.

    Returns the executed notebook; its ``metadata["figure_text"]`` maps each PNG's SHA-256 to the
    dpi it was rendered at and the font sizes (points) of the texts drawn into it.
    """
    import nbformat
    from nbclient import NotebookClient

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
            client.execute()
            nb.cells.remove(recorder)
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
