"""Lab 9: the check of grouped-query attention (key/value heads shared by groups of queries)."""

from __future__ import annotations

import functools
import math
import re

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.checks._core import (
    Case,
    check_callable,
    close,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    tolerance,
)
from attention_lab.checks.sdpa import (
    ATTENTION_SIGNATURES,
    attention_variant,
    cache,
    compare_pair,
    diagnose_by_probes,
    indices,
    locate_pair,
    matmul_error,
)

__all__ = ["check_grouped_query_attention"]

MISTAKES = register_mistakes(
    {
        "kv_heads_repeated_round_robin": (
            "key/value heads dealt to the query heads in turn (repeat, or a view as "
            "[B, group, Hkv, ...]): query head h must read key/value head h // (H // Hkv), "
            "so use key.repeat_interleave(H // Hkv, dim=1)"
        ),
        "kv_heads_wrong_count": (
            "keys and values expanded to the wrong number of heads (or not at all): repeat "
            "each of the Hkv heads H // Hkv times, key.repeat_interleave(H // Hkv, dim=1), "
            "so that they have the queries' H heads"
        ),
        "group_index_by_kv_heads": (
            "query head h given key/value head h // Hkv: a group holds H // Hkv query heads, "
            "so head h reads key/value head h // (H // Hkv)"
        ),
        "repeated_along_wrong_axis": (
            "keys and values repeated along another axis than the heads (dim=0, the batch, "
            "or dim=2, the positions): repeat_interleave(H // Hkv, dim=1)"
        ),
        "keys_values_grouped_apart": (
            "the keys and the values expanded two different ways (one with repeat_interleave, "
            "the other with repeat): query head h reads key/value head h // (H // Hkv) for "
            "both, so use repeat_interleave(H // Hkv, dim=1) on the keys and on the values"
        ),
        "causal_mask_applied": (
            "a causal mask applied: this function takes no mask, so every query attends to "
            "every key (a decoder passes its mask to the attention separately)"
        ),
        "query_groups_averaged": (
            "the query heads of a group averaged into one: every query head keeps its own "
            "queries and its own weights; only the keys and values are shared"
        ),
        "query_heads_reduced": (
            "the result has Hkv heads: every one of the H query heads keeps its own queries, "
            "output and weights; the keys and values are what the heads of a group share"
        ),
        "kv_heads_averaged": (
            "the key/value heads averaged into one: each group of H // Hkv query heads has "
            "its own key/value head; repeat them with repeat_interleave(H // Hkv, dim=1)"
        ),
        "group_axis_not_merged": (
            "the result keeps a group axis, [B, Hkv, H // Hkv, ...]: reshape it to H heads, "
            "[B, H, ...], group by group"
        ),
        "heads_merged": (
            "heads merged into [B, Tq, H * Dh]: here the output stays per head, "
            "[B, H, Tq, Dh] (the module merges and projects afterwards)"
        ),
        "scaled_by_all_heads_width": (
            "wrong scaling: you divided by the square root of several heads' width (H * Dh "
            "or Hkv * Dh); scale by sqrt(Dh), the width of one head, query.shape[-1]"
        ),
        "group_not_int": (
            "the group size is a float (H / Hkv): repeats and indices must be ints, so "
            "use integer division, group = H // Hkv"
        ),
        "expand_cannot_repeat": (
            "expand only stretches axes of size 1, so it cannot turn Hkv heads into H: "
            "repeat_interleave(H // Hkv, dim=1), or expand a new group axis, "
            "key[:, :, None].expand(B, Hkv, group, Tk, Dh), and reshape it to H heads"
        ),
        "scaled_by_head_count": (
            "wrong scaling: you divided by the square root of a number of heads "
            "(shape[1]); scale by sqrt(Dh), the width of one head, query.shape[-1]"
        ),
    }
)


def _groups(query: torch.Tensor, key: torch.Tensor) -> tuple[int, int, int]:
    """(H, Hkv, group) of a call."""
    heads, kv_heads = query.shape[1], key.shape[1]
    return heads, kv_heads, heads // kv_heads


def grouped_query_reference(query, key, value) -> tuple[torch.Tensor, torch.Tensor]:
    """The library's grouped-query attention: key/value head ``j`` serves query heads
    ``j * group .. (j + 1) * group - 1`` (``repeat_interleave``, the grouping of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``), as
    :meth:`attention_lab.attention.MultiHeadAttention.attend` does."""
    _, _, group = _groups(query, key)
    key = key.repeat_interleave(group, dim=1)  # [B, H, Tk, Dh]
    value = value.repeat_interleave(group, dim=1)  # [B, H, Tk, Dh]
    return scaled_dot_product_attention(query, key, value)


def _gqa_variant(
    query, key, value, *, heads_of="interleave", values_of=None, queries="own", **attention
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped-query attention with one deliberate deviation. ``heads_of`` says which
    key/value head query head ``h`` reads: ``"interleave"`` (right, ``h // group``),
    ``"round_robin"`` (``h % Hkv``), ``"by_kv_heads"`` (``h // Hkv``), ``"mean"`` (the mean
    of all key/value heads), ``"positions"`` or ``"batch"`` (keys repeated along dim 2 or 0,
    not expanded); ``values_of``, if given, the same for the values alone (``heads_of`` then
    for the keys alone);
    ``queries`` is ``"own"`` or ``"group_mean"`` (each group's queries averaged, the result
    repeated back to ``H`` heads); ``attention`` are the arguments of
    :func:`~attention_lab.checks.sdpa.attention_variant`. Shapes that make no sense raise, as
    the learner's code would."""
    heads, kv_heads, group = _groups(query, key)
    batch, _, query_len, head_dim = query.shape
    if queries == "group_mean":
        q = query.view(batch, kv_heads, group, query_len, head_dim).mean(dim=2)  # [B,Hkv,Tq,Dh]
        output, weights = attention_variant(q, key, value, **attention)
        return output.repeat_interleave(group, dim=1), weights.repeat_interleave(group, dim=1)
    if heads_of == "mean":
        k, v = key.mean(dim=1, keepdim=True), value.mean(dim=1, keepdim=True)  # [B, 1, Tk, Dh]
    elif heads_of in ("positions", "batch"):
        axis = 2 if heads_of == "positions" else 0
        k, v = key.repeat_interleave(group, dim=axis), value.repeat_interleave(group, dim=axis)
    else:
        h = torch.arange(heads)
        which = {
            "interleave": h // group,
            "round_robin": h % kv_heads,
            "by_kv_heads": h // kv_heads,
        }
        k, v = key[:, which[heads_of]], value[:, which[values_of or heads_of]]  # [B,H,Tk,Dh]
    return attention_variant(query, k, v, **attention)


_GQA_SIGNATURES = {
    "kv_heads_repeated_round_robin": {"heads_of": "round_robin"},
    "group_index_by_kv_heads": {"heads_of": "by_kv_heads"},
    "repeated_along_wrong_axis/positions": {"heads_of": "positions"},
    "repeated_along_wrong_axis/batch": {"heads_of": "batch"},
    "query_groups_averaged": {"queries": "group_mean"},
    "kv_heads_averaged": {"heads_of": "mean"},
    "keys_values_grouped_apart/values": {"values_of": "round_robin"},
    "keys_values_grouped_apart/keys": {"heads_of": "round_robin", "values_of": "interleave"},
}


def _gqa_signatures(query, key, value) -> dict[str, Callable]:
    """Every wrong variant on these inputs: the grouping's, then Lab 1's inside the heads."""
    heads, kv_heads, _ = _groups(query, key)
    query_len, key_len, head_dim = query.shape[-2], key.shape[-2], query.shape[-1]
    ones = torch.ones(query_len, key_len, dtype=torch.bool)
    inside = {
        # A decoder's mask: the queries as the last positions (a cache), or the first.
        "causal_mask_applied/bottom_right": {"mask": ones.tril(key_len - query_len)},
        "causal_mask_applied/top_left": {"mask": ones.tril()},
        **{k: v for k, v in ATTENTION_SIGNATURES.items() if k != "no_scaling"},
        "no_scaling": {"divisor": 1.0},
        "scaled_by_d_k": {"divisor": float(head_dim)},
        "scale_multiplied": {"divisor": 1 / math.sqrt(head_dim)},
        "scaled_by_all_heads_width/h": {"divisor": math.sqrt(heads * head_dim)},
        "scaled_by_all_heads_width/hkv": {"divisor": math.sqrt(kv_heads * head_dim)},
        "scaled_by_head_count/h": {"divisor": math.sqrt(heads)},
        "scaled_by_head_count/hkv": {"divisor": math.sqrt(kv_heads)},
    }
    return {
        name: (lambda kwargs=kwargs: _gqa_variant(query, key, value, **kwargs))
        for name, kwargs in {**_GQA_SIGNATURES, **inside}.items()
    }


def _gqa_probes() -> list[tuple]:
    """Probes with every size distinct: groups of 3 and of 2, multi-query with one query,
    and more key/value heads than a group has query heads."""
    g = torch.Generator().manual_seed(19)

    def probe(batch, heads, kv_heads, query_len, key_len, head_dim):
        return (
            randn(g, batch, heads, query_len, head_dim),
            randn(g, batch, kv_heads, key_len, head_dim),
            randn(g, batch, kv_heads, key_len, head_dim),
        )

    return [
        probe(1, 6, 2, 3, 5, 4),
        probe(2, 6, 3, 4, 7, 5),
        probe(1, 4, 1, 2, 6, 3),
        probe(1, 8, 4, 3, 5, 6),
    ]


def diagnose_grouped_query(fn: Callable) -> str | None:
    """Lab 9's diagnosis of a failing ``fn`` by its behaviour on the probes."""
    return diagnose_by_probes(fn, _gqa_probes(), _gqa_signatures, grouped_query_reference)


_HEADS_MISMATCH = re.compile(
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
    r"dimension 1|subscript \w+ has size (\d+) for operand \d+ which does not broadcast with "
    r"previously seen size (\d+)"
)


# attention_lab.attention.scaled_dot_product_attention's error for batch axes that do not
# broadcast: the heads of the query (group 1) and of the key (group 2).
_LIBRARY_SHAPES = re.compile(r"got query \[\d+, (\d+), [\d, ]*\], key \[\d+, (\d+), ")


def _shape_mistake(case: Case):
    query, key, value = case.args
    batch, heads, query_len, head_dim = query.shape
    kv_heads, key_len = key.shape[1], key.shape[2]
    group = heads // kv_heads

    def mistake(out_shape, w_shape) -> str | None:
        if len(out_shape) == 5 or len(w_shape) == 5:
            return "group_axis_not_merged"
        if tuple(out_shape) == (batch, query_len, heads * head_dim):
            return "heads_merged"
        if kv_heads != heads and kv_heads in (out_shape[1:2] + w_shape[1:2]):
            return "query_heads_reduced"
        if group > 1 and w_shape[-1:] == (group * key_len,):
            return "repeated_along_wrong_axis"
        if query_len != key_len and tuple(w_shape) == (batch, heads, key_len, query_len):
            return "scores_transposed"
        if key_len != head_dim and tuple(out_shape) == (batch, heads, query_len, key_len):
            return "output_is_weights"
        return None

    return mistake


def locate_grouping(args: tuple, got, expected) -> str:
    """Which key/value head each query head's weights (or output) come from, if every head's
    do come from one; else which heads are wrong and how."""
    query, key, value = args
    out, w = got
    heads, kv_heads, group = _groups(query, key)
    atol, rtol = tolerance(query.dtype)
    right = [h // group for h in range(heads)]

    def reads(candidates, mine) -> list[int] | None:
        """For each query head, the one candidate head its result matches, or None."""
        found = []
        for h in range(heads):
            hits = [j for j in range(kv_heads) if close(mine[:, h], candidates(h, j), atol, rtol)]
            if not hits:
                return None
            found.append(right[h] if right[h] in hits else hits[0])
        return found

    def as_list(heads_read):
        return "[" + ", ".join(map(str, heads_read)) + "]"

    def weights_with(h, j):
        one_head = (query[:, h : h + 1], key[:, j : j + 1], value[:, j : j + 1])
        return scaled_dot_product_attention(*one_head)[1][:, 0]  # [B, Tq, Tk]

    expected_out, expected_w = expected
    if w.shape == expected_w.shape and not close(w, expected_w, atol, rtol):
        found = reads(weights_with, w)
        if found is not None and found != right:
            return (
                f"query heads 0 to {heads - 1} take their weights from key/value heads "
                f"{as_list(found)}; they should read {as_list(right)}, head h // (H // Hkv)"
            )
        wrong = ~torch.isclose(w.double(), expected_w.double(), atol=atol, rtol=rtol)
        bad = wrong.flatten(2).any(dim=-1).any(dim=0)  # [H]
        return (
            f"the weights of query head {indices(bad)} differ"
            + (" (the others are right)" if not bad.all() else "")
            + ": "
            + locate_pair((out, w), expected).removeprefix("the weights are right, ")
        )
    if out.shape == expected_out.shape:
        found = reads(lambda h, j: expected_w[:, h] @ value[:, j], out)
        if found is not None and found != right:
            return (
                f"the weights are right, but query heads 0 to {heads - 1} sum the values of "
                f"heads {as_list(found)}; they should use {as_list(right)}, as their keys do"
            )
    return locate_pair((out, w), expected)


def _first_line_of_errors(fn: Callable) -> Callable:
    """``fn``, whose TypeErrors keep only their first line: PyTorch lists every overload of a
    function called with a wrong argument (a float group size), which would bury the advice."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as error:
            first, _, rest = str(error).partition("\n")
            if not rest:
                raise
            raise TypeError(first.removesuffix(":") + " ...") from error

    return wrapped


def _gqa_cases() -> list[Case]:
    g = torch.Generator().manual_seed(9)

    def case(name, batch, heads, kv_heads, query_len, key_len, head_dim, dtype=torch.float32):
        return Case(
            name,
            (
                randn(g, batch, heads, query_len, head_dim, dtype=dtype),
                randn(g, batch, kv_heads, key_len, head_dim, dtype=dtype),
                randn(g, batch, kv_heads, key_len, head_dim, dtype=dtype),
            ),
        )

    return [
        case("B=2, H=4 query heads, Hkv=2, 3 queries, 5 keys, Dh=6", 2, 4, 2, 3, 5, 6),
        case("self-attention, H=6, Hkv=3 (groups of 2), T=4, Dh=8", 1, 6, 3, 4, 4, 8),
        case("groups of 3: H=6, Hkv=2, 2 queries, 7 keys, Dh=4", 2, 6, 2, 2, 7, 4),
        case("multi-query: H=4, Hkv=1, one query, 7 keys", 2, 4, 1, 1, 7, 8),
        case("multi-head: H = Hkv = 3", 1, 3, 3, 5, 5, 4),
        case("float64, H=8, Hkv=2, T=5", 1, 8, 2, 5, 5, 4, torch.float64),
    ]


def check_grouped_query_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value) -> (output, weights)`` (Lab 9).

    ``fn`` receives ``query`` ``[B, H, Tq, Dh]`` and ``key`` and ``value`` ``[B, Hkv, Tk, Dh]``
    with ``Hkv`` dividing ``H``, and must attend with query head ``h`` to key/value head
    ``h // (H // Hkv)``, returning ``output`` ``[B, H, Tq, Dh]`` and ``weights``
    ``[B, H, Tq, Tk]``: the grouping of ``repeat_interleave`` that
    ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)`` and
    :meth:`attention_lab.attention.MultiHeadAttention.attend` use. Cases: groups of 2 and 3,
    ``Tq != Tk``, multi-query attention with one query, multi-head attention (``Hkv = H``),
    ``float64``.

    On a failure it probes ``fn`` with inputs of its own (every size distinct) and names the
    mistake whose behaviour ``fn`` shows on all of them, or says which key/value head each
    query head reads, or which heads are wrong.

    Mistakes it names: ``kv_heads_repeated_round_robin``, ``kv_heads_wrong_count``,
    ``group_index_by_kv_heads``, ``repeated_along_wrong_axis``, ``query_groups_averaged``,
    ``keys_values_grouped_apart``,
    ``query_heads_reduced``, ``kv_heads_averaged``, ``group_axis_not_merged``,
    ``heads_merged``, ``group_not_int``, ``expand_cannot_repeat``,
    ``scaled_by_all_heads_width``, ``scaled_by_head_count``, ``causal_mask_applied``,
    ``no_scaling``, ``scaled_by_d_k``, ``softmax_axis``, ``keys_values_swapped``,
    ``scores_transposed``, ``scaled_after_softmax``, ``pair_swapped``, ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _gqa_cases()
    diagnosis = cache(lambda: diagnose_grouped_query(fn))
    for case in cases:
        heads, kv_heads, _ = _groups(*case.args[:2])

        def error_hint(error, heads=heads, kv_heads=kv_heads):
            found = diagnosis()
            if found:
                return found
            text = str(error)
            if isinstance(error, TypeError | IndexError) and "float" in text:
                return "group_not_int"
            if "The expanded size of the tensor" in text:
                return "expand_cannot_repeat"
            # The library's attention names the shapes that met: keys with other than H heads.
            met = _LIBRARY_SHAPES.search(text)
            if met and int(met.group(2)) != heads:
                return "kv_heads_wrong_count"
            mismatch = _HEADS_MISMATCH.search(text)
            if mismatch and kv_heads not in (1, heads):
                sizes = {int(s) for s in mismatch.groups() if s is not None}
                if heads in sizes and len(sizes) == 2:
                    return "kv_heads_wrong_count"
            # A matrix product whose inner sizes differ (not the heads': handled above).
            inner = "Expected size" in text or "cannot be multiplied" in text
            return matmul_error(error) if inner else None

        expected = grouped_query_reference(*case.args)
        result = run(_first_line_of_errors(fn), case, error_hint)
        compare_pair(
            name_of(fn),
            case,
            result,
            expected,
            {},
            _shape_mistake(case),
            fallback=lambda got: diagnosis(),
            locate=lambda got, expected=expected, args=case.args: locate_grouping(
                args, got, expected
            ),
        )
    success(fn, cases)
