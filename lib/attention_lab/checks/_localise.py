"""A failure that says where the result goes wrong, for when no known mistake fits (private to
:mod:`attention_lab.checks`).

A message never names a mistake whose signature did not match; when none does, it says which
part of the result is wrong (which step, which rows, which part of the layer), in the learner's
terms, so that the learner knows where to look.
"""

from __future__ import annotations

import torch

from attention_lab.checks._core import Case, wrap


def fail_where(fn_name: str, case: Case, problem: str, where: str) -> None:
    """Raise ``AssertionError``: ``fn_name`` differs on ``case`` by ``problem``, and ``where``
    says which part of the result is wrong (no known mistake fits)."""
    raise AssertionError(
        wrap(
            f"{fn_name} does not match the library on case '{case.name}': {problem}.\n"
            f"Where it goes wrong: {where}."
        )
    )


def differing(got: torch.Tensor, expected: torch.Tensor, dim: int, atol: float, rtol: float):
    """The indices along ``dim`` where ``got`` and ``expected`` differ anywhere (a list)."""
    bad = ~torch.isclose(got.double(), expected.double(), atol=atol, rtol=rtol)
    per_index = bad.movedim(dim, 0).reshape(bad.shape[dim], -1).any(dim=1)  # [size of dim]
    return per_index.nonzero().flatten().tolist()


def listed(indices: list[int], limit: int = 6) -> str:
    """'1, 2 and 4', or the first few and a count."""
    words = [str(i) for i in indices[:limit]]
    if len(indices) > limit:
        return f"{', '.join(words)} and {len(indices) - limit} more"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
