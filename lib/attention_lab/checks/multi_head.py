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
)

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
        "heads_interleaved": (
            "features dealt to the heads in turn (a view as [B, T, Dh, H]): head h takes the "
            "contiguous features h * Dh to (h + 1) * Dh - 1, so view as [B, T, H, Dh]"
        ),
        "weights_summed": (
            "weights summed over heads: return every head's weights, [B, H, Tq, Tk]"
        ),
        "weights_of_one_head": (
            "the weights of one head only: return every head's weights, [B, H, Tq, Tk]"
        ),
        "softmax_over_heads": (
            "softmax over the heads axis: the scores are [B, H, Tq, Tk], so dim=1 normalises "
            "each key's score across the heads; each query's row must be normalised over the "
            "keys, dim=-1"
        ),
        "softmax_over_batch": (
            "softmax over the batch axis (dim=0 of [B, H, Tq, Tk]): each query's row must be "
            "normalised over the keys, dim=-1"
        ),
        "head_slices_overlap": (
            "head h's slice starts at feature h instead of h * Dh, so the heads' slices overlap: "
            "head h takes x[..., h * Dh:(h + 1) * Dh]"
        ),
        "head_dim_not_int": (
            "the head width computed with /, which gives a float that view and reshape refuse: "
            "use integer division, head_dim = d_model // num_heads"
        ),
        "heads_averaged": (
            "the heads' outputs averaged instead of concatenated: the output keeps every "
            "head's Dh features side by side, transpose(1, 2).reshape(B, Tq, D)"
        ),
        "split_from_query": (
            "the keys or the values split from the query (a copy-paste slip?): split each "
            "tensor from its own input, k = split(key), v = split(value)"
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
    weights_kept="all",
    key_from="key",
    value_from="value",
    **attention,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split, attend, merge with one deliberate deviation. ``split`` is ``"right"``,
    ``"no_transpose"``, ``"interleaved"`` (features dealt to heads in turn) or ``"swapped"``
    (``num_heads`` and ``head_dim`` swapped); ``merge`` is ``"right"``, ``"no_transpose"``,
    ``"none"`` or a permutation of ``[B, H, Tq, Dh]``'s axes such as ``(0, 2, 3, 1)``;
    ``weights_kept`` ``"mean"``, ``"sum"`` or ``"first"``; ``attention`` are the arguments of
    :func:`~attention_lab.checks.sdpa.attention_variant` inside the heads."""
    batch, query_len, d_model = query.shape
    head_dim = d_model // num_heads

    def split_heads(x):
        if split == "overlap":
            return torch.stack([x[..., h : h + head_dim] for h in range(num_heads)], dim=1)
        if split == "no_transpose":
            return x.reshape(batch, num_heads, x.shape[1], head_dim)  # [B, H, T, Dh], scrambled
        if split == "interleaved":
            return x.view(batch, x.shape[1], head_dim, num_heads).permute(0, 3, 1, 2)  # [B,H,T,Dh]
        if split == "swapped":
            return x.view(batch, x.shape[1], head_dim, num_heads).transpose(1, 2)  # [B,Dh,T,H]
        return x.view(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)  # [B, H, T, Dh]

    sources = {"query": query, "key": key, "value": value}
    q = split_heads(query)
    k, v = split_heads(sources[key_from]), split_heads(sources[value_from])
    if split == "swapped" and "divisor" not in attention:
        attention["divisor"] = math.sqrt(head_dim)  # the learner's head_dim, now q's length
    output, weights = attention_variant(q, k, v, **attention)
    if merge == "none":
        pass
    elif merge == "mean":
        output = output.mean(dim=1)  # [B, Tq, Dh]
    elif merge == "no_transpose":
        output = output.reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    elif isinstance(merge, tuple):
        output = output.permute(merge).reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    else:
        output = output.transpose(1, 2).reshape(batch, query_len, d_model)  # [B, Tq, D]
    kept = {
        "all": lambda: weights,
        "mean": lambda: weights.mean(dim=1),
        "sum": lambda: weights.sum(dim=1),
        "first": lambda: weights[:, 0],
        "last": lambda: weights[:, -1],
        # The same, kept as [B, 1, Tq, Tk] and repeated for every head: the right shape.
        "mean_expanded": lambda: weights.mean(dim=1, keepdim=True).expand_as(weights),
        "sum_expanded": lambda: weights.sum(dim=1, keepdim=True).expand_as(weights),
        "first_expanded": lambda: weights[:, :1].expand_as(weights),
        "last_expanded": lambda: weights[:, -1:].expand_as(weights),
    }
    return output, kept[weights_kept]()


# Orders of [B, H, Tq, Dh]'s axes that keep the batch first but do not give [B, Tq, H, Dh]; the
# identity is merge_without_transpose.
_WRONG_MERGES = ((0, 1, 3, 2), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1))

_MHA_SIGNATURES = {
    "merge_without_transpose": {"merge": "no_transpose"},
    "split_without_transpose": {"split": "no_transpose"},
    "split_and_merge_without_transpose": {"split": "no_transpose", "merge": "no_transpose"},
    **{
        f"merge_wrong_permutation/{''.join(map(str, order))}": {"merge": order}
        for order in _WRONG_MERGES
    },
    "heads_interleaved": {"split": "interleaved"},
    "heads_interleaved/merged": {"split": "interleaved", "merge": (0, 2, 3, 1)},
    "heads_and_width_swapped": {"split": "swapped"},
    "heads_and_width_swapped/own_width": {"split": "swapped", "divisor": None},
    "heads_not_merged": {"merge": "none"},
    "weights_averaged": {"weights_kept": "mean"},
    "weights_averaged/expanded": {"weights_kept": "mean_expanded"},
    "weights_summed": {"weights_kept": "sum"},
    "weights_summed/expanded": {"weights_kept": "sum_expanded"},
    "weights_of_one_head": {"weights_kept": "first"},
    "weights_of_one_head/last": {"weights_kept": "last"},
    "weights_of_one_head/expanded": {"weights_kept": "first_expanded"},
    "weights_of_one_head/last_expanded": {"weights_kept": "last_expanded"},
    "softmax_over_heads": {"dim": 1},
    "softmax_over_batch": {"dim": 0},
    "head_slices_overlap": {"split": "overlap"},
    "heads_averaged": {"merge": "mean"},
    "split_from_query/key": {"key_from": "query"},
    "split_from_query/value": {"value_from": "query"},
    "split_from_query/both": {"key_from": "query", "value_from": "query"},
}


def _mha_signatures(query, key, value, num_heads) -> dict[str, Callable]:
    """Every wrong variant of multi-head attention on these inputs: the head bookkeeping's, then
    Lab 1's inside every head."""
    d_model = query.shape[-1]
    head_dim = d_model // num_heads
    inside = {
        **{k: v for k, v in ATTENTION_SIGNATURES.items() if k != "no_scaling"},
        "scaled_by_sqrt_d_model": {"divisor": math.sqrt(d_model)},
        "no_scaling": {"divisor": 1.0},
        "scaled_by_d_k": {"divisor": float(head_dim)},
        "scale_multiplied": {"divisor": 1 / math.sqrt(head_dim)},
        "scaled_by_head_count": {"divisor": math.sqrt(num_heads)},
        "sqrt_as_half_power": {"divisor": head_dim / 2},
        "sqrt_as_half_power/inline": {"divisor": 2.0 * head_dim},
    }
    return {
        key_: (lambda kwargs=kwargs: _mha_variant(query, key, value, num_heads, **kwargs))
        for key_, kwargs in {**_MHA_SIGNATURES, **inside}.items()
    }


def _mha_probes() -> list[tuple]:
    """Probes: cross-attention with every size distinct, self-attention with two heads, and
    three heads of width 2 on a square input."""
    g = torch.Generator().manual_seed(11)
    return [
        (randn(g, 2, 3, 12), randn(g, 2, 5, 12), randn(g, 2, 5, 12), 3),
        (*(3 * [randn(g, 2, 4, 8)]), 2),
        (randn(g, 1, 4, 6), randn(g, 1, 4, 6), randn(g, 1, 4, 6), 3),
    ]


def locate_heads(got, expected, num_heads) -> str:
    """Which heads' weights, or which heads' slots of the output, are wrong."""
    out, w = got
    expected_out, expected_w = expected
    atol, rtol = tolerance(expected_out.dtype)
    if w.shape == expected_w.shape and not close(w, expected_w, atol, rtol):
        wrong = ~torch.isclose(w.double(), expected_w.double(), atol=atol, rtol=rtol)
        heads = wrong.flatten(2).any(dim=-1).any(dim=0)  # [H]
        return (
            f"the weights of head {indices(heads)} differ"
            + (" (the others are right)" if not heads.all() else "")
            + ": "
            + locate_pair((out, w), expected).removeprefix("the weights are right, ")
        )
    head_dim = expected_out.shape[-1] // num_heads
    wrong = ~torch.isclose(out.double(), expected_out.double(), atol=atol, rtol=rtol)
    slots = wrong.view(*wrong.shape[:-1], num_heads, head_dim).any(dim=-1).flatten(0, -2).any(0)
    return (
        "the weights of every head are right; the output differs in the features of head "
        f"{indices(slots)} (head h fills features h * Dh to (h + 1) * Dh - 1): check the merge"
    )


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

    On a failure it probes ``fn`` with inputs of its own and names the mistake whose behaviour
    ``fn`` shows on all of them, or says which heads' weights or which heads' features of the
    output are wrong.

    Mistakes it names: ``merge_without_transpose``, ``merge_wrong_permutation``,
    ``split_without_transpose``, ``split_and_merge_without_transpose``, ``heads_interleaved``,
    ``split_with_query_length``, ``heads_and_width_swapped``, ``heads_not_merged``,
    ``weights_averaged``, ``weights_summed``, ``weights_of_one_head``, ``view_after_transpose``,
    ``softmax_over_heads``, ``softmax_over_batch``, ``head_slices_overlap``, ``split_from_query``,
    ``sqrt_as_half_power``, ``heads_averaged``, ``head_dim_not_int``,
    ``scaled_by_sqrt_d_model``, ``scaled_by_head_count``, ``no_scaling``,
    ``scaled_after_softmax``, ``softmax_axis``,
    ``keys_values_swapped``, ``scores_transposed``, ``pair_swapped``, ``not_a_pair``,
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
    diagnosis = cache(
        lambda: diagnose_by_probes(fn, _mha_probes(), _mha_signatures, _mha_reference)
    )
    for case in cases:
        query, key, value, num_heads = case.args
        batch, query_len, d_model = query.shape
        key_len = key.shape[1]

        def error_hint(error, b=batch, tq=query_len, tk=key_len, d=d_model):
            # view(B, Tq, H, Dh) of a [B, Tk, D] tensor: "shape '[...]' is invalid for input
            # of size B * Tk * D".
            if tq != tk and f"is invalid for input of size {b * tk * d}" in str(error):
                return "split_with_query_length"
            if isinstance(error, TypeError) and "float" in str(error):
                return "head_dim_not_int"
            return _view_error(error) or diagnosis()

        expected = _mha_reference(*case.args)
        result = run(fn, case, error_hint)
        compare_pair(
            name_of(fn),
            case,
            result,
            expected,
            {},
            lambda out, w: diagnosis(),
            fallback=lambda got: diagnosis(),
            locate=lambda got, expected=expected, h=num_heads: locate_heads(got, expected, h),
        )
    success(fn, cases)
