"""Lab 7: the check of the online softmax, attention one block of keys at a time."""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    Result,
    check_callable,
    compare,
    expect_tensor,
    fail,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    tolerance,
)
from attention_lab.efficient import peak_memory, tiled_attention

__all__ = ["check_online_softmax"]

MISTAKES = register_mistakes(
    {
        "sum_not_rescaled": (
            "the running sum is not rescaled when the running maximum grows: multiply it by "
            "exp(m_old - m_new) before adding the new block, as you do for the weighted sum"
        ),
        "acc_not_rescaled": (
            "the weighted sum of values is not rescaled when the running maximum grows: "
            "multiply it by exp(m_old - m_new) before adding the new block, as you do for the "
            "sum"
        ),
        "nothing_rescaled": (
            "nothing is rescaled when the running maximum grows: the sum and the weighted sum "
            "so far were computed relative to the old maximum; multiply both by "
            "exp(m_old - m_new)"
        ),
        "rescale_inverted": (
            "rescaling factor inverted: going from the old maximum to a larger new one "
            "multiplies the sums by exp(m_old - m_new), which is at most 1, not by "
            "exp(m_new - m_old); with the maximum starting at -inf, the inverted factor is inf "
            "on the first block, and 0 * inf is NaN"
        ),
        "not_divided_by_sum": (
            "the output is not divided by the running sum: after the last block return acc / "
            "row_sum, the softmax-weighted average"
        ),
        "last_block_dropped": (
            "the last, shorter block is skipped: when Tk is not a multiple of block_size, the "
            "blocks are range(0, Tk, block_size), and the last one holds the remaining keys"
        ),
        "online_overflow": (
            "exp overflowed on large scores (inf or NaN): subtract the running maximum, the "
            "largest score in this block and every block before it, torch.maximum(row_max, "
            "block_max), before exponentiating"
        ),
        "max_started_at_zero": (
            "NaN when every score is far below 0: the running maximum must start at -inf (or "
            "torch.finfo(dtype).min), not at 0; from 0, exp(score - 0) underflows to 0 and the "
            "sum is 0"
        ),
        "full_score_matrix": (
            "the whole [Tq, Tk] score matrix was built: compute only one block of scores, "
            "[..., Tq, block_size], at a time, so that memory does not grow with Tq * Tk"
        ),
    }
)


def _online_variant(query, key, value, block_size: int, mistake: str) -> torch.Tensor:
    """Block-wise attention with one deliberate deviation, computed in float64."""
    q = query.double() / math.sqrt(query.shape[-1])  # [..., Tq, Dk]
    k, v = key.double(), value.double()
    key_len = k.shape[-2]
    if mistake == "last_block_dropped":
        key_len = key_len // block_size * block_size
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=torch.float64)  # [..., Tq, 1]
    row_sum = torch.zeros_like(row_max)  # [..., Tq, 1]
    acc = torch.zeros(*torch.broadcast_shapes(q.shape[:-2], v.shape[:-2]), q.shape[-2], v.shape[-1])
    acc = acc.double()  # [..., Tq, Dv]
    for start in range(0, key_len, block_size):
        block = slice(start, start + block_size)
        scores = q @ k[..., block, :].transpose(-2, -1)  # [..., Tq, Tb]
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # [..., Tq, 1]
        rescale = torch.exp(row_max - new_max)  # [..., Tq, 1]
        if mistake == "rescale_inverted":
            rescale = torch.exp(new_max - row_max).nan_to_num(nan=1.0)  # the first block: inf - inf
        p = torch.exp(scores - new_max)  # [..., Tq, Tb]
        keep_sum = mistake in ("sum_not_rescaled", "nothing_rescaled")
        keep_acc = mistake in ("acc_not_rescaled", "nothing_rescaled")
        row_sum = (row_sum if keep_sum else row_sum * rescale) + p.sum(dim=-1, keepdim=True)
        acc = (acc if keep_acc else acc * rescale) + p @ v[..., block, :]
        row_max = new_max
    output = acc if mistake == "not_divided_by_sum" else acc / row_sum
    return output.to(query.dtype)


_ONLINE_MISTAKES = (
    "sum_not_rescaled",
    "acc_not_rescaled",
    "nothing_rescaled",
    "rescale_inverted",
    "not_divided_by_sum",
    "last_block_dropped",
)


def _online_cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)

    def case(name, shapes, block_size, scale=1.0, dtype=torch.float32, **kwargs):
        tensors = tuple(randn(g, *shape, dtype=dtype) for shape in shapes)
        args = (scale * tensors[0], scale * tensors[1], tensors[2], block_size)
        return Case(name, args, **kwargs)

    # Every score far below 0: q . k = -400 for every pair, so each row is uniform.
    negative = (torch.full((1, 2, 4), 10.0), torch.full((1, 6, 4), -10.0))
    return [
        case(
            "B=2, 3 queries, 8 keys in blocks of 4, d_k=4, d_v=6",
            [(2, 3, 4), (2, 8, 4), (2, 8, 6)],
            4,
        ),
        case(
            "10 keys in blocks of 4: the last block holds 2", [(2, 3, 4), (2, 10, 4), (2, 10, 6)], 4
        ),
        case("blocks of 1: one key at a time", [(1, 4, 8), (1, 5, 8), (1, 5, 8)], 1),
        case("block_size 16 > 6 keys: a single block", [(2, 3, 8), (2, 6, 8), (2, 6, 8)], 16),
        case("heads [2, 3, 7, 8], blocks of 3", [(2, 3, 7, 8), (2, 3, 7, 8), (2, 3, 7, 8)], 3),
        case(
            "large scores (hundreds apart), 12 keys in blocks of 3",
            [(1, 4, 8), (1, 12, 8), (1, 12, 4)],
            3,
            scale=10.0,
            large_scores=True,
        ),
        Case(
            "every score far below 0 (-200), 6 keys in blocks of 2",
            (*negative, randn(g, 1, 6, 3), 2),
        ),
        case(
            "float64 inputs, blocks of 5",
            [(2, 4, 8), (2, 12, 8), (2, 12, 8)],
            5,
            dtype=torch.float64,
        ),
        case(
            "a long sequence: 4 queries, 2048 keys in blocks of 64 (memory is counted)",
            [(1, 4, 16), (1, 2048, 16), (1, 2048, 16)],
            64,
            count_memory=True,
        ),
    ]


def check_online_softmax(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, block_size) -> output`` (Lab 7).

    ``fn`` receives ``query`` ``[..., Tq, Dk]``, ``key`` ``[..., Tk, Dk]``, ``value``
    ``[..., Tk, Dv]`` and an int ``block_size``, and must return the output of scaled
    dot-product attention, ``[..., Tq, Dv]`` in the dtype of ``query``, computed as
    :func:`attention_lab.efficient.tiled_attention` does: the keys visited one block at a time
    with an online softmax (a running maximum, a running sum and a running weighted sum of
    values per query). Cases: full blocks, a shorter last block, blocks of 1, a single block,
    four-dimensional inputs, scores hundreds apart, scores far below 0, ``float64``, and a long
    sequence on which the memory the call allocates is counted
    (:func:`~attention_lab.efficient.peak_memory`): it must stay below the size of the full
    ``[Tq, Tk]`` scores.

    Mistakes it names: ``sum_not_rescaled``, ``acc_not_rescaled``, ``nothing_rescaled``,
    ``rescale_inverted``, ``not_divided_by_sum``, ``last_block_dropped``, ``online_overflow``,
    ``max_started_at_zero``, ``full_score_matrix``, ``no_scaling``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _online_cases()
    fn_name = name_of(fn)
    for case in cases:
        query, key, value, block_size = case.args
        expected = tiled_attention(query, key, value, block_size=block_size)
        if case.count_memory:
            results: list = []
            peak = peak_memory(lambda case=case, results=results: results.append(run(fn, case)))
            (output,) = results
        else:
            output, peak = run(fn, case), 0
        if isinstance(output, tuple | list):
            fail(
                fn_name,
                case,
                f"it returned a {type(output).__name__} of {len(output)}; return only the output"
                " tensor (the point is never to hold the weights)",
                None,
            )
        expect_tensor(fn_name, case, output)

        def nonfinite(name, bad, query=query, key=key, case=case):
            scores = query.double() @ key.double().transpose(-2, -1) / math.sqrt(query.shape[-1])
            if case.large_scores:
                return "NaN or inf", "online_overflow"
            if scores.amax() < -100:
                # exp(score - 0) underflows to 0 in float32 below about -100: a maximum that
                # started at 0 leaves a sum of 0, and 0 / 0.
                return "NaN or inf", "max_started_at_zero"
            # Scores of a few units cannot overflow a correct loop: inf there comes from the
            # inverted factor exp(m_new - m_old) on the first block, where m_old = -inf.
            return "NaN or inf", "rescale_inverted"

        variants = {
            key: lambda key=key, args=case.args: (_online_variant(*args, key),)
            for key in _ONLINE_MISTAKES
        }
        variants["no_scaling"] = lambda q=query, k=key, v=value, b=block_size: (
            _online_variant(q * math.sqrt(q.shape[-1]), k, v, b, ""),
        )
        compare(
            fn_name,
            case,
            [Result("output", output, expected)],
            tolerance(expected.dtype),
            variants=variants,
            nonfinite=nonfinite,
        )
        full_scores = query.shape[-2] * key.shape[-2] * query.element_size()
        full_scores *= math.prod(torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
        if peak >= full_scores:
            fail(
                fn_name,
                case,
                f"the call allocated {peak:,} bytes at its peak, at least the {full_scores:,} "
                "bytes of the full score matrix",
                "full_score_matrix",
            )
    success(fn, cases)
