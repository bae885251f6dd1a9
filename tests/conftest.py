"""Shared fixtures: where the built book is, and how to treat a missing prerequisite.

Tests of the built HTML and the browser tests need `make book` to have run (``make test`` runs it
first). Outside CI a missing prerequisite skips those tests with a message saying what to do; with
``CI=true`` it fails them, so CI can never pass by skipping.
"""

from __future__ import annotations

import functools
import http.server
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
