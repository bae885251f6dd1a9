"""Lab 10: the checks of a sliding-window causal mask and of a document mask."""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    Result,
    call_quietly,
    check_callable,
    compare,
    fail,
    name_of,
    register_mistakes,
    run,
    same_behaviour,
    success,
)
from attention_lab.checks.sdpa import cache
from attention_lab.masks import document_mask, sliding_window_mask

__all__ = ["check_document_mask", "check_sliding_window_mask"]

MISTAKES = register_mistakes(
    {
        "mask_not_a_tensor": (
            "the mask is not a torch tensor (a NumPy array or a list): build it with torch "
            "operations, or convert it with torch.as_tensor(..., dtype=torch.bool)"
        ),
        "mask_not_bool": (
            "the mask is not a torch.bool tensor: build it from comparisons (<=, ==) "
            "combined with &, or call .bool() on a 0/1 mask"
        ),
        "additive_mask": (
            "an additive mask (0 where allowed, a very negative number where blocked): this "
            "lab's masks are torch.bool, True = may attend"
        ),
        "mask_inverted": (
            "inverted polarity: True must mean 'may attend' and False 'blocked'; yours is "
            "True exactly where a key is blocked"
        ),
        "combined_with_or": (
            "the conditions combined with | (or): a key must pass both of them, so combine "
            "them with & (and)"
        ),
        "window_one_too_wide": (
            "off by one: query i sees window + 1 keys, i - window to i; the window counts "
            "the query itself, so keep i - window < j <= i"
        ),
        "window_one_too_narrow": (
            "off by one: query i sees window - 1 keys; the window counts the query itself, "
            "keys i - window + 1 to i, so keep i - window < j <= i"
        ),
        "window_symmetric": (
            "a symmetric window, |i - j| < window (or <=): query i also sees the keys after "
            "it, the future; a causal window keeps only i - window < j <= i"
        ),
        "window_transposed": (
            "the mask transposed: row i is the query and column j the key, so [i, j] is "
            "True for i - window < j <= i; yours lets query i see keys i to i + window - 1"
        ),
        "window_ignored": (
            "the window is ignored: this is the causal mask; also block the keys more than "
            "window - 1 positions back, j <= i - window"
        ),
        "window_not_causal": (
            "the window without the causal part: query i also sees every later key; keep "
            "j <= i as well as j > i - window"
        ),
        "window_excludes_self": (
            "the query cannot see itself: the window is keys i - window + 1 to i, the "
            "diagonal included"
        ),
        "diagonal_offset_sign": (
            "the band's diagonal offset has the wrong sign: keys before query i lie below "
            "the diagonal, so keep them with triu(-(window - 1)), beside tril()"
        ),
        "documents_ignored": (
            "the documents are ignored: this is the causal mask, so queries leak into "
            "earlier documents; also require the same id, ids[:, None] == ids[None, :]"
        ),
        "document_not_causal": (
            "not causal within a document: a query sees the later tokens of its own "
            "document; combine the same-document test with the causal mask, j <= i"
        ),
        "document_transposed": (
            "the mask transposed: row i is the query and column j the key; yours lets "
            "query i see the later tokens of its document, not the earlier ones"
        ),
        "document_excludes_self": (
            "the query cannot see itself: within its document query i sees keys j <= i, "
            "the diagonal included"
        ),
        "document_boundary_shifted": (
            "the document boundaries are one position off: a document starts at the first "
            "position with a new id (mark starts with ids[1:] != ids[:-1], shifted by one, "
            "or compare the ids themselves)"
        ),
        "documents_sorted": (
            "the blocks follow the ids sorted by value (torch.unique sorts them), not the "
            "order of the documents in the sequence; torch.unique_consecutive keeps it, "
            "or compare the ids, ids[:, None] == ids[None, :]"
        ),
        "float_mask_combined": (
            "the mask's parts are float tensors (torch.ones and torch.zeros give float32), "
            "which & and | do not take: build them from comparisons, or pass dtype=torch.bool"
        ),
        "one_hot_of_ids": (
            "F.one_hot takes int64 ids only, and the ids may be any integer dtype: compare "
            "them instead, ids[:, None] == ids[None, :] (or convert with ids.long())"
        ),
        "window_slice_wraps": (
            "the first rows' slice wraps round: a row filled with a slice from i - window + 1 "
            "starts below 0 for the first queries, and a negative start counts from the end of "
            "the row; start it at max(0, i - window + 1)"
        ),
        "documents_compared_by_order": (
            "the ids compared by order (>= or <=), not for equality: a query may attend only "
            "to keys of its own document, ids[:, None] == ids[None, :], and then j <= i"
        ),
        "ids_compared_elementwise": (
            "ids compared elementwise, giving [T]: compare every query with every key, "
            "ids[:, None] == ids[None, :], [T, T]"
        ),
    }
)


def _grid(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(query index [T, 1], key index [1, T])."""
    position = torch.arange(size)
    return position[:, None], position[None, :]


def _window_variant(size: int, window: int, mistake: str) -> tuple[torch.Tensor]:
    """A sliding-window mask with one deliberate mistake (a key of :data:`MISTAKES`, or
    ``"right"``), as a one-tuple."""
    i, j = _grid(size)
    causal = j <= i
    masks = {
        "right": lambda: causal & (j > i - window),
        "window_one_too_wide": lambda: causal & (j >= i - window),
        "window_one_too_narrow": lambda: causal & (j > i - window + 1),
        "window_symmetric/lt": lambda: (i - j).abs() < window,
        "window_symmetric/le": lambda: (i - j).abs() <= window,
        "window_transposed": lambda: (i <= j) & (i > j - window),
        "mask_inverted": lambda: ~(causal & (j > i - window)),
        "window_ignored": lambda: causal,
        "window_not_causal": lambda: j > i - window,
        "window_excludes_self": lambda: (j < i) & (j >= i - window),
        "window_excludes_self/narrow": lambda: (j < i) & (j > i - window),
        "diagonal_offset_sign": lambda: causal & (j >= i + window - 1),
        "combined_with_or": lambda: causal | (j > i - window),
        "window_slice_wraps": lambda: _rows_by_slices(size, window),
    }
    return (masks[mistake]().expand(size, size),)


def _rows_by_slices(size: int, window: int) -> torch.Tensor:
    """Each row filled with a slice from ``i - window + 1``, not clamped at 0: Python's slice
    then starts that many keys from the end of the row (empty, or a few keys, for the first)."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for query in range(size):
        mask[query, query - window + 1 : query + 1] = True
    return mask


def _segments(ids: torch.Tensor, late: bool = False) -> torch.Tensor:
    """Each position's run of equal ids, counted from 0; ``late`` counts a change at the
    position before it (each document's last token joins the next)."""
    change = ids[1:] != ids[:-1]  # [T - 1]
    pad = torch.zeros(1, dtype=torch.bool)
    starts = torch.cat([change, pad]) if late else torch.cat([pad, change])  # [T]
    return starts.long().cumsum(0)


def _document_variant(ids: torch.Tensor, mistake: str) -> tuple[torch.Tensor]:
    """A document mask with one deliberate mistake (or ``"right"``), as a one-tuple."""
    i, j = _grid(ids.shape[0])
    causal = j <= i
    same = ids[:, None] == ids[None, :]  # [T, T]
    late = _segments(ids, late=True)
    _, counts = torch.unique(ids, return_counts=True)  # in the ids' sorted order
    in_sorted = torch.repeat_interleave(torch.arange(len(counts)), counts)  # [T]
    masks = {
        "right": lambda: same & causal,
        "documents_ignored": lambda: causal,
        "document_not_causal": lambda: same,
        "document_transposed": lambda: same & (j >= i),
        "mask_inverted": lambda: ~(same & causal),
        "combined_with_or": lambda: same | causal,
        "document_excludes_self": lambda: same & (j < i),
        "document_boundary_shifted": lambda: (late[:, None] == late[None, :]) & causal,
        "documents_sorted": lambda: (in_sorted[:, None] == in_sorted[None, :]) & causal,
        "documents_compared_by_order/ge": lambda: (ids[:, None] >= ids[None, :]) & causal,
        "documents_compared_by_order/le": lambda: (ids[:, None] <= ids[None, :]) & causal,
        "documents_compared_by_order/ge_alone": lambda: ids[:, None] >= ids[None, :],
        "documents_compared_by_order/le_alone": lambda: ids[:, None] <= ids[None, :],
    }
    return (masks[mistake](),)


def _window_probes() -> list[tuple]:
    return [(7, 3), (6, 2), (5, 1), (4, 6), (8, 4)]


def _document_probes() -> list[tuple]:
    return [
        (torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2]),),
        (torch.tensor([5, 5, 2, 2, 2, 2, 9]),),
        (torch.tensor([3, 3, 3, 3, 3]),),
        (torch.tensor([0, 1, 2, 3]),),
        (torch.tensor([4, 7, 7, 7, 1, 1]),),
    ]


def _as_bool(result: Any) -> Any:
    """A mask of 0s and 1s as ``torch.bool`` (its values are what the diagnosis reads)."""
    if isinstance(result, torch.Tensor) and result.dtype != torch.bool:
        if ((result == 0) | (result == 1)).all():
            return result.bool()
    return result


def _by_probes(fn: Callable, probes: list[tuple], variant, reference, keys) -> str | None:
    """The first mistake of ``keys`` whose signature ``fn`` shows on every probe."""
    got = [call_quietly(fn, args) for args in probes]
    got = [_as_bool(g) for g in got]
    right = [reference(*args) for args in probes]
    for key in keys:
        expected = [lambda args=args, key=key: variant(*args, key) for args in probes]
        if same_behaviour(got, expected, right, tol=(0.0, 0.0)):
            return key.partition("/")[0]
    return None


_WINDOW_KEYS = (
    "window_one_too_wide",
    "window_one_too_narrow",
    "window_symmetric/lt",
    "window_symmetric/le",
    "window_transposed",
    "mask_inverted",
    "window_ignored",
    "window_not_causal",
    "window_excludes_self",
    "window_excludes_self/narrow",
    "diagonal_offset_sign",
    "combined_with_or",
    "window_slice_wraps",
)
_DOCUMENT_KEYS = (
    "documents_ignored",
    "document_not_causal",
    "document_transposed",
    "mask_inverted",
    "combined_with_or",
    "document_excludes_self",
    "document_boundary_shifted",
    "documents_sorted",
    "documents_compared_by_order/ge",
    "documents_compared_by_order/le",
    "documents_compared_by_order/ge_alone",
    "documents_compared_by_order/le_alone",
)


def _dtype_mistake(fn_name: str, case: Case, got: torch.Tensor, expected: torch.Tensor) -> None:
    """Fail if ``got`` is not boolean: a 0/1 mask, or an additive one."""
    if got.dtype == torch.bool:
        return
    problem = f"the mask is {got.dtype}, expected torch.bool"
    if got.shape == expected.shape and (got.is_floating_point() or got.is_complex()):
        blocked = got.real if got.is_complex() else got
        additive = bool((blocked[expected] == 0).all() and (blocked[~expected] <= -1e4).all())
        if additive and not expected.all():
            fail(fn_name, case, problem, "additive_mask")
    fail(fn_name, case, problem, "mask_not_bool")


def _keys(count: int) -> str:
    return f"{count} key" if count == 1 else f"{count} keys"


def locate_mask(got: torch.Tensor, expected: torch.Tensor, regions: dict[str, torch.Tensor]) -> str:
    """Which entries of a boolean ``[T, T]`` mask are wrong: keys seen that must be blocked
    (and in which of ``regions``, name -> bool ``[T, T]``), and keys blocked that must be seen.
    """
    got = got.bool()
    extra, missing = got & ~expected, ~got & expected
    parts = []
    if extra.any():
        i, j = (int(x) for x in extra.nonzero()[0])
        kinds = [name for name, region in regions.items() if (extra & region).any()]
        where = f" ({', '.join(kinds)})" if kinds else ""
        parts.append(
            f"{_keys(int(extra.sum()))} seen that must be blocked{where}, the first at query "
            f"{i}, key {j}"
        )
    if missing.any():
        i, j = (int(x) for x in missing.nonzero()[0])
        parts.append(
            f"{_keys(int(missing.sum()))} blocked that must be seen, the first at query {i}, "
            f"key {j}"
        )
    rows = (extra | missing).any(dim=-1).nonzero().flatten().tolist()
    shown = ", ".join(map(str, rows[:6])) + (" ..." if len(rows) > 6 else "")
    return "; ".join(parts) + f" (wrong in the rows of queries {shown})"


def first_wrong_entry(got: torch.Tensor, expected: torch.Tensor) -> str:
    """The first wrong entry of a boolean ``[T, T]`` mask, in words."""
    i, j = (int(x) for x in (got.bool() != expected).nonzero()[0])
    if expected[i, j]:
        return f"query {i} may not attend to key {j}, which it must see"
    return f"query {i} may attend to key {j}, which must be blocked"


def _compare_mask(fn: Callable, case: Case, result: Any, expected: torch.Tensor, hooks) -> None:
    """The dtype, then :func:`~attention_lab.checks._core.compare` (shape, values, diagnosis)."""
    fn_name = name_of(fn)
    if not isinstance(result, torch.Tensor):
        fail(
            fn_name, case, f"it returned {type(result).__name__}, not a tensor", "mask_not_a_tensor"
        )
    diagnosis, shape_mistake, regions = hooks
    _dtype_mistake(fn_name, case, result, expected)

    def named(got: tuple[torch.Tensor, ...]) -> None:
        """The first wrong entry, and the mistake, or where the mask is wrong."""
        mistake = diagnosis()
        where = None if mistake else locate_mask(got[0], expected, regions)
        fail(fn_name, case, first_wrong_entry(got[0], expected), mistake, where)

    compare(
        fn_name,
        case,
        [Result("mask", result, expected, dtype=False, finite=False)],
        (0.0, 0.0),
        shape_mistake=lambda name, shapes: shape_mistake(shapes[0]),
        diagnose=named,
    )


# ---------------------------------------------------------------------------------------------
# The sliding window.


def _window_cases() -> list[Case]:
    return [
        Case("T=7, window=3", (7, 3)),
        Case("T=6, window=2", (6, 2)),
        Case("window=1: each query sees itself only, T=5", (5, 1)),
        Case("window = T = 5: the causal mask", (5, 5)),
        Case("window=9 longer than T=6", (6, 9)),
        Case("a single token, window=2", (1, 2)),
    ]


def check_sliding_window_mask(fn: Callable) -> None:
    """Check a learner's ``fn(size, window) -> mask`` (Lab 10).

    ``mask`` must be the ``torch.bool`` tensor ``[T, T]`` of
    :func:`attention_lab.masks.sliding_window_mask`: query ``i`` may attend to keys
    ``i - window + 1 .. i`` (``True`` = may attend), ``window`` keys counting itself, fewer at
    the start. Cases: windows of 3, 2 and 1, a window as long as the sequence and a longer one,
    a single token.

    On a failure it probes ``fn`` with sizes and windows of its own and names the mistake
    whose masks ``fn`` returns on all of them, or says which entries are wrong (keys seen in
    the future or before the window, keys blocked that must be seen).

    Mistakes it names: ``window_one_too_wide``, ``window_one_too_narrow``,
    ``window_symmetric``, ``window_transposed``, ``mask_inverted``, ``window_ignored``,
    ``window_not_causal``, ``window_excludes_self``, ``diagonal_offset_sign``,
    ``combined_with_or``, ``window_slice_wraps``, ``float_mask_combined``, ``mask_not_bool``,
    ``additive_mask``, ``mask_not_a_tensor`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _window_cases()
    diagnosis = cache(
        lambda: _by_probes(
            fn,
            _window_probes(),
            _window_variant,
            lambda size, window: (sliding_window_mask(size, window),),
            _WINDOW_KEYS,
        )
    )
    for case in cases:
        size, window = case.args
        expected = sliding_window_mask(size, window)
        i, j = _grid(size)
        regions = {"in the future": j > i, "before the window": j <= i - window}
        result = run(fn, case, lambda error: _crash_hint(error) or diagnosis())
        _compare_mask(fn, case, result, expected, (diagnosis, lambda shape: None, regions))
    success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Documents packed into one sequence.


def _crash_hint(error: Exception) -> str | None:
    """The mistake behind an error PyTorch raises inside a learner's mask function, if it
    says one: ``&`` or ``|`` on float tensors, ``F.one_hot`` on ids that are not int64."""
    text = str(error)
    if "bitwise" in text and "not implemented for 'Float'" in text:
        return "float_mask_combined"
    if "one_hot is only applicable to index tensor" in text:
        return "one_hot_of_ids"
    return None


def _document_cases() -> list[Case]:
    return [
        Case("ids [0, 0, 0, 1, 1, 2, 2]: three documents", (torch.tensor([0, 0, 0, 1, 1, 2, 2]),)),
        Case("one document of 5 tokens: the causal mask", (torch.tensor([4, 4, 4, 4, 4]),)),
        Case("ids [7, 7, 3, 3, 3, 9]: not numbered in order", (torch.tensor([7, 7, 3, 3, 3, 9]),)),
        Case("every token its own document, T=4", (torch.tensor([0, 1, 2, 3]),)),
        Case("a single token", (torch.tensor([0]),)),
        Case(
            "int32 ids [2, 2, 5, 5, 5]: another integer dtype",
            (torch.tensor([2, 2, 5, 5, 5], dtype=torch.int32),),
        ),
    ]


def check_document_mask(fn: Callable) -> None:
    """Check a learner's ``fn(document_ids) -> mask`` (Lab 10).

    ``document_ids`` ``[T]`` (an integer tensor) gives the document of each position, each
    document a run of equal ids; ``mask`` must be the ``torch.bool`` tensor ``[T, T]`` of
    :func:`attention_lab.masks.document_mask`: query ``i`` may attend to key ``j`` iff
    ``j <= i`` and both are in the same document (block-diagonal, causal within each block).
    Cases: three documents, one document, ids not numbered in order, one token per document,
    a single token, ids of dtype ``int32``.

    On a failure it probes ``fn`` with ids of its own and names the mistake whose masks ``fn``
    returns on all of them, or says which entries are wrong (keys seen in the future or in
    another document, keys blocked that must be seen).

    Mistakes it names: ``documents_ignored``, ``document_not_causal``,
    ``document_transposed``, ``mask_inverted``, ``combined_with_or``,
    ``document_excludes_self``, ``document_boundary_shifted``, ``documents_sorted``,
    ``documents_compared_by_order``, ``ids_compared_elementwise``, ``one_hot_of_ids``,
    ``float_mask_combined``, ``mask_not_bool``, ``additive_mask`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _document_cases()
    diagnosis = cache(
        lambda: _by_probes(
            fn,
            _document_probes(),
            _document_variant,
            lambda ids: (document_mask(ids),),
            _DOCUMENT_KEYS,
        )
    )
    for case in cases:
        (ids,) = case.args
        expected = document_mask(ids)
        i, j = _grid(ids.shape[0])
        regions = {"in the future": j > i, "in another document": ids[:, None] != ids[None, :]}

        def shape_mistake(shape, size=ids.shape[0]):
            return "ids_compared_elementwise" if list(shape) == [size] and size > 1 else None

        result = run(fn, case, lambda error: _crash_hint(error) or diagnosis())
        _compare_mask(fn, case, result, expected, (diagnosis, shape_mistake, regions))
    success(fn, cases)
