"""Lab 2: the check of multi-head attention (splitting and merging heads)."""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.attention import MultiHeadAttention
from attention_lab.checks._core import (
    Case,
    check_callable,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
)
from attention_lab.checks.sdpa import attention_variant, compare_pair

__all__ = ["check_multi_head_attention"]

MISTAKES = register_mistakes(
    {
        "scaled_by_sqrt_d_model": (
            "wrong scaling: you divided by sqrt(d_model) instead of sqrt(d_k), the width of one "
            "head (d_k = d_model / num_heads)"
        ),
        "merge_without_transpose": (
            "heads merged with view/reshape without the transpose: [B, H, Tq, Dh] must become "
            "[B, Tq, H, Dh] (transpose(1, 2)) before reshaping to [B, Tq, D]"
        ),
        "split_without_transpose": (
            "heads split with view/reshape straight to [B, H, T, Dh]: view as [B, T, H, Dh] "
            "first, then transpose(1, 2)"
        ),
        "split_and_merge_without_transpose": (
            "heads split and merged with view/reshape but no transpose: each 'head' then mixes "
            "positions; view as [B, T, H, Dh] and transpose(1, 2), and transpose back before "
            "merging"
        ),
        "merge_wrong_permutation": (
            "heads merged with the wrong permutation: [B, H, Tq, Dh] must become "
            "[B, Tq, H, Dh], permute(0, 2, 1, 3) or transpose(1, 2), before reshaping to "
            "[B, Tq, D]; another order (such as permute(0, 2, 3, 1), which gives "
            "[B, Tq, Dh, H]) interleaves the heads' features or mixes positions"
        ),
        "split_with_query_length": (
            "keys or values split with the query's length: in cross-attention Tk differs from "
            "Tq, so split each tensor with its own length, x.view(B, x.shape[1], num_heads, "
            "head_dim)"
        ),
        "heads_and_width_swapped": (
            "num_heads and head_dim swapped: split into num_heads heads of width "
            "d_model // num_heads, i.e. view(B, T, num_heads, head_dim)"
        ),
        "heads_not_merged": ("heads not merged: the output must be [B, Tq, D], not [B, H, Tq, Dh]"),
        "weights_averaged": (
            "weights averaged over heads: return every head's weights, [B, H, Tq, Tk]"
        ),
        "view_after_transpose": (
            "heads merged with .view() right after transpose(1, 2): the transposed tensor is "
            "not contiguous, so view cannot merge its last two axes; use .reshape(B, Tq, D), "
            "or .contiguous().view(B, Tq, D)"
        ),
    }
)


def _mha_variant(
    query,
    key,
    value,
    num_heads,
    *,
    split="right",
    merge="right",
    divisor=None,
    dim=-1,
    scale_after_softmax=False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split, attend, merge with one deliberate deviation. ``merge`` is ``"right"``,
    ``"no_transpose"`` or a permutation of ``[B, H, Tq, Dh]``'s axes such as ``(0, 2, 3, 1)``."""
    batch, query_len, d_model = query.shape
    head_dim = d_model // num_heads

    def split_heads(x):
        if split == "no_transpose":
            return x.reshape(batch, num_heads, x.shape[1], head_dim)  # [B, H, T, Dh], scrambled
        return x.view(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)  # [B, H, T, Dh]

    q, k, v = split_heads(query), split_heads(key), split_heads(value)
    output, weights = attention_variant(
        q, k, v, divisor=divisor, dim=dim, scale_after_softmax=scale_after_softmax
    )
    if merge == "no_transpose":
        output = output.reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    elif isinstance(merge, tuple):
        output = output.permute(merge).reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    else:
        output = output.transpose(1, 2).reshape(batch, query_len, d_model)  # [B, Tq, D]
    return output, weights


# Orders of [B, H, Tq, Dh]'s axes that keep the batch first but do not give [B, Tq, H, Dh]; the
# identity is merge_without_transpose.
_WRONG_MERGES = ((0, 1, 3, 2), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1))


def _mha_reference(query, key, value, num_heads):
    """The library's MultiHeadAttention with identity projections: split, attend, merge."""
    d_model = query.shape[-1]
    with torch.random.fork_rng(devices=[]):  # the initial weights are overwritten anyway
        module = MultiHeadAttention(d_model, num_heads, bias=False).to(query.dtype).eval()
    with torch.no_grad():
        for projection in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
            projection.weight.copy_(torch.eye(d_model))
        return module(query, key, value)


def _view_error(error: Exception) -> str | None:
    """``view`` on a transposed (non-contiguous) tensor: the heads merged without a copy."""
    return "view_after_transpose" if "view size is not compatible" in str(error) else None


def _mha_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    return [
        Case(
            "B=2, 3 queries, 5 keys, d_model=12, 3 heads of width 4",
            (randn(g, 2, 3, 12), randn(g, 2, 5, 12), randn(g, 2, 5, 12), 3),
        ),
        Case(
            "self-attention, T=6, d_model=16, 2 heads of width 8",
            (*(3 * [randn(g, 2, 6, 16)]), 2),
        ),
        Case("one head, d_model=8", (randn(g, 1, 4, 8), randn(g, 1, 4, 8), randn(g, 1, 4, 8), 1)),
        Case(
            "heads of width 1 (num_heads = d_model = 4)",
            (randn(g, 2, 3, 4), randn(g, 2, 3, 4), randn(g, 2, 3, 4), 4),
        ),
        Case(
            "a single token, 2 heads",
            (randn(g, 1, 1, 6), randn(g, 1, 1, 6), randn(g, 1, 1, 6), 2),
        ),
        Case(
            "float64 inputs, 4 heads",
            (*(randn(g, 2, 5, 16, dtype=torch.float64) for _ in range(3)), 4),
        ),
    ]


def check_multi_head_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, num_heads) -> (output, weights)`` (Lab 2).

    ``fn`` receives already projected ``query`` ``[B, Tq, D]``, ``key`` and ``value``
    ``[B, Tk, D]`` and ``num_heads`` ``H``. It must split each into ``H`` heads of width
    ``Dh = D // H`` (``[B, H, T, Dh]``), attend in every head, and merge the heads back,
    returning ``output`` ``[B, Tq, D]`` and ``weights`` ``[B, H, Tq, Tk]``: the same as
    :class:`attention_lab.attention.MultiHeadAttention` with identity projections. Cases:
    cross-attention with ``Tq != Tk``, self-attention, one head, heads of width 1, a single
    token, ``float64``.

    Mistakes it names: ``merge_without_transpose``, ``merge_wrong_permutation``,
    ``split_without_transpose``, ``split_and_merge_without_transpose``,
    ``split_with_query_length``, ``heads_and_width_swapped``, ``heads_not_merged``,
    ``weights_averaged``, ``view_after_transpose``, ``scaled_by_sqrt_d_model``, ``no_scaling``,
    ``scaled_after_softmax``, ``softmax_axis``, ``pair_swapped``, ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _mha_cases()
    for case in cases:
        query, key, value, num_heads = case.args
        batch, query_len, d_model = query.shape
        key_len = key.shape[1]

        def shape_mistake(
            out_shape, w_shape, b=batch, tq=query_len, tk=key_len, h=num_heads, d=d_model
        ):
            if w_shape == (b, d // h, tq, tk) and h != d // h:
                return "heads_and_width_swapped"
            if w_shape == (b, tq, tk):
                return "weights_averaged"
            if out_shape == (b, h, tq, d // h):
                return "heads_not_merged"
            return None

        def variant(q=query, k=key, v=value, h=num_heads, **kwargs):
            return lambda: _mha_variant(q, k, v, h, **kwargs)

        variants = {
            "merge_without_transpose": variant(merge="no_transpose"),
            "split_without_transpose": variant(split="no_transpose"),
            "split_and_merge_without_transpose": variant(
                split="no_transpose", merge="no_transpose"
            ),
            **{
                f"merge_wrong_permutation/{''.join(map(str, order))}": variant(merge=order)
                for order in _WRONG_MERGES
            },
            "scaled_by_sqrt_d_model": variant(divisor=math.sqrt(d_model)),
            "no_scaling": variant(divisor=1.0),
            "scaled_after_softmax": variant(scale_after_softmax=True),
            "softmax_axis": variant(dim=-2),
        }

        def error_hint(error, b=batch, tq=query_len, tk=key_len, d=d_model):
            # view(B, Tq, H, Dh) of a [B, Tk, D] tensor: "shape '[...]' is invalid for input
            # of size B * Tk * D".
            if tq != tk and f"is invalid for input of size {b * tk * d}" in str(error):
                return "split_with_query_length"
            return _view_error(error)

        result = run(fn, case, error_hint)
        compare_pair(
            name_of(fn),
            case,
            result,
            _mha_reference(*case.args),
            variants,
            shape_mistake,
        )
    success(fn, cases)
