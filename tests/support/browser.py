"""Headless Chromium for the browser tests and the benchmarks: the browser, a watched tab, a phone.

Debian's Chromium (``/usr/bin/chromium``, or ``CHROMIUM_PATH``) driven by Playwright; nothing
downloads a browser. :class:`Tab` is the one recorder of what a page reports (console errors,
page errors, requests, failed responses, dialogs, requests that would leave the machine), used
by every test that opens a page.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
DESKTOP = {"width": 1280, "height": 900}
# A phone's viewport in CSS px (an iPhone 12 to 15): the narrowest column the book is tested at.
PHONE = {"width": 390, "height": 844}
NO_SIDEWAYS_SCROLL = (
    "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
)
# URLs that are not requests to a server (never refused by a local-only tab).
IN_PAGE = ("data:", "blob:", "about:")
# The theme's switch (pydata-sphinx-theme 0.17's setTheme) stores the chosen mode and the theme
# it resolves to in localStorage; the page's first script copies them onto <html> as data-mode
# and data-theme before anything is drawn. Storing them before the page loads (as an init
# script) is how a reader's earlier choice opens every later page.
THEMES = ("light", "dark")
CHOOSE_THEME = "localStorage.setItem('mode', {0!r}); localStorage.setItem('theme', {0!r});"
SCREENSHOTS = ROOT / "tests" / "screenshots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chromium_found() -> bool:
    return Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is not None


@contextlib.contextmanager
def chromium(prefix: str = "attention-lab-chromium-", viewport: dict = DESKTOP) -> Iterator:
    """A Playwright browser context of Chromium with a fresh profile (removed afterwards)."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix=prefix)
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport=viewport,
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Tab:
    """A new tab in ``context`` and what it reports while it is open.

    With ``base`` (a server's URL), every request elsewhere is refused and its URL kept in
    ``outside``: nothing leaves the machine. Dialogs are dismissed and their messages kept.

    Attributes:
        page: The Playwright page.
        errors: Console errors (``console: ...``) and uncaught exceptions (``pageerror: ...``).
        requests: The URL of every request the page made, in order.
        failed: Responses with an HTTP status of 400 or more (``404 http://...``).
        unfinished: Requests that got no response (refused, or cut off), with the reason.
        pending: Requests sent that have neither finished nor failed yet.
        outside: Requests to anywhere but ``base``, refused.
        dialogs: The messages of the dialogs the page opened.
    """

    def __init__(
        self, context, base: str | None = None, *, timeout: float | None = None, viewport=None
    ) -> None:
        self.page = context.new_page()
        self.base = base
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.failed: list[str] = []
        self.unfinished: list[str] = []
        self.outside: list[str] = []
        self.dialogs: list[str] = []
        if timeout is not None:
            self.page.set_default_timeout(timeout)
        if viewport is not None:
            self.page.set_viewport_size(viewport)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        self.pending: set[str] = set()  # requests sent and not yet finished or failed
        self.page.on("request", self._request)
        self.page.on("response", self._response)
        self.page.on("requestfinished", lambda r: self.pending.discard(r.url))
        self.page.on("requestfailed", self._request_failed)
        self.page.on("dialog", self._dialog)
        if base is not None:
            self.page.route("**/*", self._route)

    def goto(self, path: str, *, idle: bool = False, **kwargs) -> None:
        """Open ``path`` of the server ``base`` (wait for ``load`` unless told otherwise); with
        ``idle``, wait until the network has been quiet for half a second too."""
        self.page.goto(f"{self.base}/{path}", **{"wait_until": "load", **kwargs})
        if idle:
            self.page.wait_for_load_state("networkidle")

    def close(self) -> None:
        if not self.page.is_closed():
            self.page.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _console(self, message) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} @ {message.location}")

    def _request(self, request) -> None:
        self.requests.append(request.url)
        self.pending.add(request.url)

    def _request_failed(self, request) -> None:
        self.pending.discard(request.url)
        self.unfinished.append(f"{request.url} {request.failure}")

    def _response(self, response) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.url}")

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith((self.base, *IN_PAGE)):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()


def fits_the_width(page, selector: str, width: int = PHONE["width"]):
    """Assert that ``page`` does not scroll sideways and that ``selector`` is at most ``width``
    CSS px wide; return the element's locator."""
    assert page.evaluate(NO_SIDEWAYS_SCROLL), f"the page scrolls sideways at {width} px"
    box = page.locator(selector)
    assert box.bounding_box()["width"] <= width, (selector, box.bounding_box())
    return box


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
