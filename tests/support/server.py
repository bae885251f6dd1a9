"""A local HTTP server for a folder (the built book), on a free port, in a thread.

Used by the browser tests' ``server`` fixture (tests/conftest.py) and the benchmarks that open
the built book in Chromium (benchmarks/page_weights.py, benchmarks/live_attention.py).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Python's static file handler without a log line per request."""

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(directory: Path | str) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 while the block runs; yields the base URL, no slash."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
