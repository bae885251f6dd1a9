"""Lab 7: the check of the online softmax, attention one block of keys at a time."""

from __future__ import annotations

import functools
import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Lab 1's check registers the scaling mistakes this one shares.
import attention_lab.checks.sdpa  # noqa: F401
from attention_lab.checks._core import (
    Case,
    Result,
    call_quietly,
    check_callable,
    close,
    compare,
    difference,
    expect_tensor,
    fail,
    match_variant,
    name_of,
    randn,
    register_mistakes,
    run,
    same_behaviour,
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
        "exp_with_old_max": (
            "the block's exponentials use the old running maximum: first update it, "
            "m_new = max(m_old, block max), then take p = exp(scores - m_new); with the "
            "maximum starting at -inf, exp(scores - m_old) is inf on the first block"
        ),
        "max_not_carried": (
            "the running maximum is never updated: after each block set row_max = new_max, "
            "or the next block's factor exp(row_max - new_max) is exp(-inf) = 0 and wipes out "
            "the blocks before it"
        ),
        "rescaled_after_adding": (
            "the rescaling comes after the new block is added: multiply the old sums by "
            "exp(m_old - m_new) first, then add the block's terms, which are already relative "
            "to m_new (row_sum * rescale + p.sum(-1), not (row_sum + p.sum(-1)) * rescale)"
        ),
        "blocks_stop_early": (
            "the loop stops before the last block: the blocks start at range(0, Tk, "
            "block_size), up to Tk itself, and the last one holds what is left"
        ),
        "block_slice_short": (
            "each block misses its last key: the stop of a slice is left out already, so a "
            "block is key[..., start:start + block_size, :], with no - 1"
        ),
        "new_block_rescaled": (
            "the factor exp(m_old - m_new) multiplies the new block's terms: it belongs to "
            "the old sums, row_sum and acc, which are relative to the old maximum; the "
            "block's p = exp(s - m_new) is already relative to the new one"
        ),
        "rescale_with_block_max": (
            "the factor uses the block's own maximum: rescale by exp(m_old - m_new), with "
            "m_new = max(m_old, block max) the new running maximum"
        ),
        "exp_with_block_max": (
            "the block's exponentials use the block's own maximum: take p = exp(s - m_new), "
            "with m_new the new running maximum, to which the rescaled sums are relative"
        ),
        "block_normalised": (
            "each block's weights are normalised on their own (a softmax per block): keep "
            "the exponentials p = exp(s - m_new) unnormalised in both running sums; the one "
            "division, acc / row_sum, comes after the last block"
        ),
        "keepdim_missing": (
            "your function is right with one query and wrong with several: a maximum or a sum "
            "over the keys without keepdim=True gives [..., Tq], which broadcasts against the "
            "wrong axis; keep [..., Tq, 1], amax(dim=-1, keepdim=True)"
        ),
        "acc_rescaled_twice": (
            "the weighted sum of values is rescaled twice per block: multiply it by "
            "exp(m_old - m_new) once, as you do the sum"
        ),
        "sum_rescaled_twice": (
            "the running sum is rescaled twice per block: multiply it by exp(m_old - m_new) "
            "once, as you do the weighted sum"
        ),
        "block_max_over_queries": (
            "the block's maximum is taken over the queries (dim=-2), one per key: each query "
            "needs the maximum of its own scores over the block's keys, "
            "scores.amax(dim=-1, keepdim=True), [..., Tq, 1]"
        ),
        "max_over_rows": (
            "the maximum is taken over more than each query's row (the whole block, or every "
            "row of the batch): each query needs its own, scores.amax(dim=-1, keepdim=True); "
            "a row far below the overall maximum then underflows to 0, and 0 / 0 is NaN"
        ),
        "normalised_without_old_sum": (
            "the output is kept normalised, but the old output is not weighted by its sum: "
            "new output = (old output * old sum * exp(m_old - m_new) + p @ v) / new sum; "
            "or keep acc unnormalised and divide by the sum once, after the last block"
        ),
        "full_score_matrix": (
            "the whole [Tq, Tk] score matrix was built: compute only one block of scores, "
            "[..., Tq, block_size], at a time, so that memory does not grow with Tq * Tk"
        ),
    }
)


def _online_variant(
    query, key, value, block_size: int, mistake: str, work: torch.dtype = torch.float64
) -> torch.Tensor:
    """Block-wise attention with one deliberate deviation, computed in ``work`` (float64, or
    the inputs' dtype to see where it underflows)."""
    mistake, _, how = mistake.partition("/")
    divisor = {
        "no_scaling": 1.0,
        "scaled_by_d_k": float(query.shape[-1]),
        "scaled_by_value_width": math.sqrt(value.shape[-1]),
    }.get(mistake, math.sqrt(query.shape[-1]))
    if (mistake, how) == ("scaled_by_sequence_length", "keys"):
        divisor = math.sqrt(key.shape[-2])
    if mistake == "scale_multiplied":
        divisor = 1 / math.sqrt(query.shape[-1])
    q = query.to(work) / divisor  # [..., Tq, Dk]
    k, v = key.to(work), value.to(work)
    key_len = k.shape[-2]
    stop = key_len
    if mistake == "last_block_dropped":
        key_len = stop = key_len // block_size * block_size
    if mistake == "blocks_stop_early":
        stop = key_len - block_size
    width = block_size - 1 if mistake == "block_slice_short" else block_size
    start = 0.0 if how == "zero_start" else -math.inf
    row_max = torch.full((*q.shape[:-1], 1), start, dtype=work)  # [..., Tq, 1]
    row_sum = torch.zeros_like(row_max)  # [..., Tq, 1]
    acc = torch.zeros(*torch.broadcast_shapes(q.shape[:-2], v.shape[:-2]), q.shape[-2], v.shape[-1])
    acc = acc.to(work)  # [..., Tq, Dv]
    for begin in range(0, stop, block_size):
        block = slice(begin, begin + width)
        scores = q @ k[..., block, :].transpose(-2, -1)  # [..., Tq, Tb]
        if (mistake, how) == ("scaled_by_sequence_length", "block"):
            scores = scores * math.sqrt(query.shape[-1]) / math.sqrt(scores.shape[-1])
        block_max = scores.amax(dim=-1, keepdim=True)  # [..., Tq, 1]
        if mistake == "block_max_over_queries":
            block_max = scores.amax(dim=-2, keepdim=True)  # [..., 1, Tb]
        if mistake == "max_over_rows":
            over = tuple(range(scores.ndim)) if how == "all" else (-2, -1)
            block_max = scores.amax(dim=over, keepdim=True)  # [..., 1, 1]
        new_max = torch.maximum(row_max, block_max)  # [..., Tq, 1]
        rescale = torch.exp(row_max - new_max)  # [..., Tq, 1]
        if mistake == "rescale_inverted":
            rescale = torch.exp(new_max - row_max).nan_to_num(nan=1.0)  # the first block: inf - inf
        if mistake == "rescale_with_block_max":
            rescale = torch.exp(row_max - block_max)
        reference = {"exp_with_old_max": row_max, "exp_with_block_max": block_max}
        p = torch.exp(scores - reference.get(mistake, new_max))  # [..., Tq, Tb]
        if mistake == "new_block_rescaled":
            p = p * rescale
            rescale = torch.ones_like(rescale)
        if mistake == "block_normalised":
            p = p / p.sum(dim=-1, keepdim=True)
        keep_sum = mistake in ("sum_not_rescaled", "nothing_rescaled")
        keep_acc = mistake in ("acc_not_rescaled", "nothing_rescaled")
        if mistake == "acc_rescaled_twice":
            acc = acc * rescale
        if mistake == "sum_rescaled_twice":
            row_sum = row_sum * rescale
        if mistake == "normalised_without_old_sum":  # acc holds the normalised output
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
            acc = (acc * rescale + p @ v[..., block, :]) / row_sum
        elif mistake == "rescaled_after_adding":
            row_sum = (row_sum + p.sum(dim=-1, keepdim=True)) * rescale
            acc = (acc + p @ v[..., block, :]) * rescale
        else:
            row_sum = (row_sum if keep_sum else row_sum * rescale) + p.sum(dim=-1, keepdim=True)
            acc = (acc if keep_acc else acc * rescale) + p @ v[..., block, :]
        if mistake != "max_not_carried":
            row_max = new_max
    divide = mistake not in ("not_divided_by_sum", "normalised_without_old_sum")
    divide = divide and how != "no_division"
    output = acc / row_sum if divide else acc
    return output.to(query.dtype)


class _FirstInfiniteExp(TorchDispatchMode):
    """Records the input shape of the first exponential that comes out +inf."""

    def __init__(self) -> None:
        super().__init__()
        self.shape: tuple[int, ...] | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if (
            self.shape is None
            and func.overloadpacket in (torch.ops.aten.exp, torch.ops.aten.exp_)
            and isinstance(result, torch.Tensor)
            and torch.isposinf(result).any()
        ):
            self.shape = tuple(args[0].shape)
        return result


def _infinite_exp_shape(fn: Callable, case: Case) -> tuple[int, ...] | None:
    """The input shape of the first exponential that overflows when ``fn`` runs on ``case``."""
    tracer = _FirstInfiniteExp()
    try:
        with torch.no_grad(), tracer:
            fn(*case.args, **case.kwargs)
    except Exception:  # noqa: BLE001 - the first run did not raise; only the trace matters
        pass
    return tracer.shape


_ONLINE_MISTAKES = (
    "exp_with_old_max/zero_start",
    "max_not_carried",
    "rescaled_after_adding",
    "no_scaling",
    "scaled_by_d_k",
    "scale_multiplied",
    "sum_not_rescaled",
    "acc_not_rescaled",
    "nothing_rescaled",
    "rescale_inverted",
    "not_divided_by_sum",
    "last_block_dropped",
    "blocks_stop_early",
    "block_slice_short",
    "new_block_rescaled",
    "rescale_with_block_max",
    "exp_with_block_max",
    "block_normalised",
    "block_normalised/no_division",
    "scaled_by_value_width",
    "scaled_by_sequence_length/keys",
    "scaled_by_sequence_length/block",
    "acc_rescaled_twice",
    "sum_rescaled_twice",
    "block_max_over_queries",
    "max_over_rows/all",
    "max_over_rows/block",
    "normalised_without_old_sum",
)

# Probes of a crash: the block as wide as the values (where a per-key maximum still runs),
# then not, with Tq, Tk, Dk all distinct, and a shorter last block.
_CRASH_PROBES = [
    ((2, 3, 4), (2, 12, 4), (2, 12, 4), 4),
    ((1, 5, 8), (1, 9, 8), (1, 9, 3), 3),
    ((2, 3, 4), (2, 12, 4), (2, 12, 6), 4),
    ((1, 2, 6), (1, 7, 6), (1, 7, 5), 5),
]


def _diagnose_by_probes(fn: Callable) -> str | None:
    """The mistake whose behaviour ``fn`` shows on every probe, crashes included."""
    g = torch.Generator().manual_seed(71)
    probes = [(randn(g, *q), randn(g, *k), randn(g, *v), block) for q, k, v, block in _CRASH_PROBES]
    got = [call_quietly(fn, args) for args in probes]
    right = [(tiled_attention(*args[:3], block_size=args[3]),) for args in probes]
    for key in _ONLINE_MISTAKES:
        expected = [lambda args=args, key=key: (_online_variant(*args, key),) for args in probes]
        if same_behaviour(got, expected, right):
            return key.partition("/")[0]
    return None


def _right_on_probes(fn: Callable, shapes: list[tuple]) -> bool:
    """Whether ``fn`` returns the right output on probes of the given shapes, each
    ``(query shape, key shape, value shape, block_size)``."""
    g = torch.Generator().manual_seed(70)
    for q_shape, k_shape, v_shape, block_size in shapes:
        args = (randn(g, *q_shape), randn(g, *k_shape), randn(g, *v_shape), block_size)
        expected = tiled_attention(*args[:3], block_size=block_size)
        got = call_quietly(fn, args)
        if not (isinstance(got, torch.Tensor) and close(got, expected, *tolerance(got.dtype))):
            return False
    return True


# Probes that hide a size taken from the wrong tensor (Tq = Tk, d_k = d_v), and probes with one
# query and one batch, which hide a reduction without keepdim (a [1, 1] broadcasts like
# [1, 1, 1]).
_SAME_SIZES = [((2, 6, 4), (2, 6, 4), (2, 6, 4), 4), ((1, 5, 8), (1, 5, 8), (1, 5, 8), 2)]
_ONE_QUERY = [((1, 1, 4), (1, 10, 4), (1, 10, 6), 4), ((1, 1, 8), (1, 7, 8), (1, 7, 3), 3)]


def _sizes_mistake(fn: Callable) -> str | None:
    """``sizes_mixed_up`` or ``keepdim_missing`` when ``fn``, wrong on a case, is right on the
    probes that hide that mistake (and on no probe that shows it)."""
    if _right_on_probes(fn, _SAME_SIZES):
        return "sizes_mixed_up"
    if _right_on_probes(fn, _ONE_QUERY):
        return "keepdim_missing"
    return None


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
            "B=2, 3 queries, 12 keys in blocks of 4, d_k=4, d_v=6",
            [(2, 3, 4), (2, 12, 4), (2, 12, 6)],
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
            "a long sequence: 256 queries, 2048 keys in blocks of 64 (memory is counted)",
            [(1, 256, 16), (1, 2048, 16), (1, 2048, 16)],
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
    ``max_started_at_zero``, ``exp_with_old_max``, ``max_not_carried``,
    ``rescaled_after_adding``, ``blocks_stop_early``, ``block_slice_short``,
    ``new_block_rescaled``, ``rescale_with_block_max``, ``exp_with_block_max``,
    ``block_normalised``, ``full_score_matrix``, ``no_scaling``, ``scaled_by_d_k``,
    ``scaled_by_value_width``, ``scaled_by_sequence_length``, ``scale_multiplied``,
    ``keepdim_missing``, ``sizes_mixed_up``, ``acc_rescaled_twice``, ``sum_rescaled_twice``,
    ``block_max_over_queries``, ``max_over_rows``, ``normalised_without_old_sum``,
    ``wrong_dtype`` (see :data:`MISTAKES`). NaN on
    ordinary scores is told apart by the shape of the first exponential that comes out infinite
    (traced while the function runs again). When no mistake fits, the message says whether the
    output is right with every key in one block, which separates the per-block arithmetic from
    the carrying of one block into the next.

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
    crash = functools.cache(lambda: _diagnose_by_probes(fn))
    for case in cases:
        query, key, value, block_size = case.args
        expected = tiled_attention(query, key, value, block_size=block_size)
        if case.count_memory:
            results: list = []
            peak = peak_memory(lambda case=case, results=results: results.append(run(fn, case)))
            (output,) = results
        else:
            output, peak = run(fn, case, lambda error: _sizes_mistake(fn) or crash()), 0
        if isinstance(output, tuple | list):
            fail(
                fn_name,
                case,
                f"it returned a {type(output).__name__} of {len(output)}; return only the output"
                " tensor (the point is never to hold the weights)",
                None,
            )
        expect_tensor(fn_name, case, output)

        def nonfinite(name, bad, query=query, key=key, case=case, block_size=block_size):
            scores = query.double() @ key.double().transpose(-2, -1) / math.sqrt(query.shape[-1])
            if case.large_scores:
                for how in ("all", "block"):
                    wrong = _online_variant(*case.args, f"max_over_rows/{how}", query.dtype)
                    if wrong.shape == bad.shape and torch.equal(~wrong.isfinite(), bad):
                        return "NaN or inf", "max_over_rows"
                return "NaN or inf", "online_overflow"
            if scores.amax() < -100:
                # exp(score - 0) underflows to 0 in float32 below about -100: a maximum that
                # started at 0 leaves a sum of 0, and 0 / 0.
                return "NaN or inf", "max_started_at_zero"
            # Scores of a few units cannot overflow a right loop. An exponential that is inf
            # all the same took a difference with the starting -inf the wrong way round: its
            # shape says which one, [..., Tq, 1] for the factor, [..., Tq, Tb] for the block.
            shape = _infinite_exp_shape(fn, case)
            if shape is not None and shape[-1] == 1 and min(block_size, key.shape[-2]) > 1:
                return "NaN or inf", "rescale_inverted"
            if shape is not None and shape[-1] > 1:
                return "NaN or inf", "exp_with_old_max"
            for mistake in ("rescaled_after_adding", "max_not_carried"):
                wrong = _online_variant(*case.args, mistake)
                if wrong.shape == bad.shape and torch.equal(wrong.isnan(), bad):
                    return "NaN", mistake
            return None

        variants = {
            key: lambda key=key, args=case.args: (_online_variant(*args, key),)
            for key in _ONLINE_MISTAKES
        }
        context = (variants, case, expected)

        def diagnose(got, context=context):
            variants, case, expected = context
            if match_variant(got, variants, tolerance(expected.dtype)):
                return None  # compare names it
            mistake = _sizes_mistake(fn)
            if mistake:
                return f"the output differs: {difference(got[0], expected)}", mistake
            fail(
                fn_name,
                case,
                f"the output differs: {difference(got[0], expected)}",
                None,
                where=_where(fn, case, expected),
            )

        compare(
            fn_name,
            case,
            [Result("output", output, expected)],
            tolerance(expected.dtype),
            variants=variants,
            nonfinite=nonfinite,
            diagnose=diagnose,
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


def _where(fn: Callable, case: Case, expected: torch.Tensor) -> str:
    """Which part of the loop is wrong, from two probes: the same inputs in one block holding
    every key, and in blocks of one key."""
    query, key, value, block_size = case.args
    tol = tolerance(expected.dtype)
    right = []
    for size in (key.shape[-2], 1):
        try:
            with torch.no_grad():
                got = fn(query, key, value, size)
        except Exception:  # noqa: BLE001 - a crash on a probe only means "not right"
            got = None
        right.append(isinstance(got, torch.Tensor) and close(got, expected, *tol))
    one_block, blocks_of_one = right
    if one_block and not blocks_of_one:
        return (
            f"with every key in one block your output is right, with block_size={block_size} "
            "it is not: the scores, the scaling and the final division are right, and the "
            "error is in how one block is carried into the next (the running maximum, the "
            "factor exp(m_old - m_new), the running sums, or the slicing of the blocks)"
        )
    if one_block and blocks_of_one:
        return (
            "your output is right in one block and in blocks of one key, but not in blocks "
            f"of {block_size}: look at how the keys are sliced into blocks (start, stop, the "
            "last shorter block) and at the sums over a block (dim=-1)"
        )
    return (
        "even with every key in one block the output is wrong, so the error is not (only) "
        "in the rescaling: check the scores q @ k_block^T / sqrt(d_k), the exponentials, "
        "the weighted sum p @ v_block and the final acc / row_sum"
    )
