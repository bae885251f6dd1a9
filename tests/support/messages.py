"""Reading the checks' messages (attention_lab.checks) in the tests."""

from __future__ import annotations


def flat(error: BaseException) -> str:
    """The message with its line wrapping undone."""
    return " ".join(str(error).split())
