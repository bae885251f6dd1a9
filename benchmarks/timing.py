"""Paired timing: a candidate and its reference, run alternately in the same process.

Machine load drifts over seconds (other processes, frequency scaling, memory pressure), so two
functions timed one after the other can differ by more than they really do. Here each repeat
runs both, alternating which goes first, and the ratio is taken within each pair: drift that is
slow compared with one pair cancels. Medians make the result robust to the odd slow run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Comparison:
    """Median seconds of a candidate and its reference, and the median of their paired ratios."""

    candidate_s: float
    reference_s: float
    ratio: float  # median over pairs of candidate / reference
    ratio_low: float  # 25th percentile of the paired ratios
    ratio_high: float  # 75th percentile of the paired ratios
    repeats: int


def _once(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def compare(
    candidate: Callable[[], object],
    reference: Callable[[], object],
    *,
    repeats: int = 15,
    warmup: int = 2,
) -> Comparison:
    """Time ``candidate`` against ``reference``, interleaved, without autograd.

    Args:
        candidate: A function of no arguments (the library's side).
        reference: A function of no arguments doing the same work (PyTorch's side).
        repeats: Number of timed pairs.
        warmup: Untimed pairs first (allocator, thread pool, lazy initialisation).

    Returns:
        The medians and the paired-ratio quartiles.
    """
    candidate_times, reference_times, ratios = [], [], []
    with torch.inference_mode():
        for _ in range(warmup):
            candidate()
            reference()
        for i in range(repeats):
            # Alternate the order (ABBA...) so neither side always runs on a warmer cache.
            if i % 2 == 0:
                c, r = _once(candidate), _once(reference)
            else:
                r, c = _once(reference), _once(candidate)
            candidate_times.append(c)
            reference_times.append(r)
            ratios.append(c / r)
    low, _, high = statistics.quantiles(ratios, n=4) if repeats > 1 else (ratios[0],) * 3
    return Comparison(
        candidate_s=statistics.median(candidate_times),
        reference_s=statistics.median(reference_times),
        ratio=statistics.median(ratios),
        ratio_low=low,
        ratio_high=high,
        repeats=repeats,
    )
