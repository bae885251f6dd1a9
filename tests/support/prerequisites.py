"""How a test treats a missing prerequisite (the built book, Chromium, axe-core, a chapter).

Outside CI it is skipped with a message saying what to do; with ``CI=true`` it fails, so CI can
never pass by skipping.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def missing(reason: str) -> None:
    """Skip (locally) or fail (in CI) because a prerequisite is missing."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this must not be skipped)")
    pytest.skip(reason)
