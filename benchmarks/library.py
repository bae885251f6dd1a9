"""`make bench`: the library against PyTorch and transformers, as ratios measured in one process.

Each row times a library function or module against a reference doing the same work, the two
interleaved (see ``timing.py``), and reports median milliseconds and the median paired ratio
(library / reference; below 1 means the library is faster). The target is a ratio of at most
1.10 for the same work. Rows whose reference does less work (it skips the attention weights)
are shown for information and marked "info". For every missed target the two sides are profiled
with ``torch.profiler`` and their most expensive operators written next to the table.

The last part compares ``tiled_attention`` with ``F.scaled_dot_product_attention`` as the
sequence grows, in time and in peak memory (resident-set growth in a separate process, see
``memory_worker.py``).

Results are printed and written to ``benchmarks/results/`` as CSV and markdown.

Usage: ``python benchmarks/library.py [--threads N] [--quick]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import Comparison, compare
from torch import nn

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.efficient import tiled_attention
from attention_lab.layers import EncoderLayer

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 1.10


@dataclass
class Row:
    group: str
    candidate: str
    reference: str
    comparison: Comparison
    same_work: bool  # False: the reference skips work the candidate does (info only)
    note: str = ""

    @property
    def verdict(self) -> str:
        if not self.same_work:
            return "info"
        return "met" if self.comparison.ratio <= TARGET else "MISSED"


@dataclass
class Case:
    """One comparison, with the callables kept so that a missed target can be profiled."""

    row: Row
    candidate_fn: Callable[[], object]
    reference_fn: Callable[[], object]


def seeded(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None):
    """The textbook formula in plain PyTorch, returning the weights too."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, H, T, T]
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = scores.softmax(dim=-1)  # [B, H, T, T]
    return weights @ v, weights


def sdpa_cases(repeats: int) -> list[Case]:
    batch, heads, seq_len, head_dim = 8, 8, 256, 64
    q, k, v = (seeded(batch, heads, seq_len, head_dim, seed=s) for s in range(3))
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # [T, T]
    shape = f"B={batch} H={heads} T={seq_len} Dh={head_dim}"
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v)[0], plain_attention(q, k, v)[0]
    )

    def ours():
        return scaled_dot_product_attention(q, k, v)

    def plain():
        return plain_attention(q, k, v)

    def ours_masked():
        return scaled_dot_product_attention(q, k, v, causal)

    def plain_masked():
        return plain_attention(q, k, v, causal)

    def fused():
        return F.scaled_dot_product_attention(q, k, v)

    group = f"scaled_dot_product_attention ({shape})"
    return [
        Case(
            Row(
                group,
                "library, with weights",
                "plain PyTorch formula",
                compare(ours, plain, repeats=repeats),
                True,
            ),
            ours,
            plain,
        ),
        Case(
            Row(
                group,
                "library, causal mask",
                "plain formula, masked_fill(-inf)",
                compare(ours_masked, plain_masked, repeats=repeats),
                True,
            ),
            ours_masked,
            plain_masked,
        ),
        Case(
            Row(
                group,
                "library, with weights",
                "F.scaled_dot_product_attention",
                compare(ours, fused, repeats=repeats),
                False,
                "reference returns no weights",
            ),
            ours,
            fused,
        ),
    ]


def mha_case(repeats: int) -> list[Case]:
    batch, seq_len, d_model, heads = 8, 256, 512, 8
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(reference).eval()
    x = seeded(batch, seq_len, d_model)
    with torch.no_grad():
        expected = reference(x, x, x, need_weights=True, average_attn_weights=False)
        got = ours(x)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])

    def candidate():
        return ours(x)

    def torch_side():
        return reference(x, x, x, need_weights=True, average_attn_weights=False)

    row = Row(
        f"MultiHeadAttention (B={batch} T={seq_len} D={d_model} H={heads})",
        "library MultiHeadAttention",
        "nn.MultiheadAttention(need_weights=True, average_attn_weights=False)",
        compare(candidate, torch_side, repeats=repeats),
        True,
    )
    return [Case(row, candidate, torch_side)]


def encoder_layer_cases(repeats: int) -> list[Case]:
    batch, seq_len, d_model, heads, d_ff = 4, 256, 512, 8, 2048
    torch.manual_seed(0)
    reference = nn.TransformerEncoderLayer(
        d_model, heads, d_ff, dropout=0.1, batch_first=True
    ).eval()
    ours = EncoderLayer.from_torch(reference).eval()
    x = seeded(batch, seq_len, d_model)
    with torch.no_grad():
        torch.testing.assert_close(ours(x)[0], reference(x))

    def candidate():
        return ours(x)

    def same_work():
        # nn.TransformerEncoderLayer's post-norm forward, written out with its own submodules so
        # that its attention returns the per-head weights as ours does: the same work.
        attended, weights = reference.self_attn(
            x, x, x, need_weights=True, average_attn_weights=False
        )
        h = reference.norm1(x + reference.dropout1(attended))  # [B, T, D]
        hidden = reference.activation(reference.linear1(h))  # [B, T, d_ff]
        out = reference.norm2(h + reference.dropout2(reference.linear2(reference.dropout(hidden))))
        return out, weights

    with torch.no_grad():
        expected, expected_weights = same_work()
        torch.testing.assert_close(expected, reference(x))
        torch.testing.assert_close(ours(x)[1], expected_weights)

    def fast_path():
        return reference(x)

    def slow_path():
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            return reference(x)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)

    group = f"EncoderLayer (B={batch} T={seq_len} D={d_model} H={heads} d_ff={d_ff})"
    return [
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "its submodules, self_attn(need_weights=True, average_attn_weights=False)",
                compare(candidate, same_work, repeats=repeats),
                True,
            ),
            candidate,
            same_work,
        ),
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "nn.TransformerEncoderLayer, fast path off",
                compare(candidate, slow_path, repeats=repeats),
                False,
                "reference attends with F.scaled_dot_product_attention, no weights",
            ),
            candidate,
            slow_path,
        ),
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "nn.TransformerEncoderLayer, fused fast path",
                compare(candidate, fast_path, repeats=repeats),
                False,
                "fused kernel, no weights",
            ),
            candidate,
            fast_path,
        ),
    ]


def minilm_cases(repeats: int) -> list[Case]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModel
    from transformers.utils import logging

    from attention_lab.pretrained import encoder_from_minilm, load_minilm, model_path

    tokenizer, _ = load_minilm()
    logging.disable_progress_bar()
    # Without the pooler (one more Linear on [CLS]), which our encoder does not compute either;
    # leaving it out is deliberate, so its "unused weights" load report is silenced.
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        eager, sdpa = (
            AutoModel.from_pretrained(
                model_path(),
                local_files_only=True,
                attn_implementation=kind,
                add_pooling_layer=False,
            ).eval()
            for kind in ("eager", "sdpa")
        )
    finally:
        logging.set_verbosity(verbosity)
    ours = encoder_from_minilm()
    words = "the cat sat on the mat while the dog slept by the warm fire".split()
    sentences = [" ".join(words[i % 5 :] + words[: i % 7] * 3) for i in range(8)]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden, _ = ours(**batch)
        torch.testing.assert_close(hidden, eager(**batch).last_hidden_state, atol=1e-4, rtol=1e-4)
    shape = f"B={batch['input_ids'].shape[0]} T={batch['input_ids'].shape[1]}, 6 layers"

    def candidate():
        return ours(**batch)

    def eager_side():
        return eager(**batch, output_attentions=True)

    def sdpa_side():
        return sdpa(**batch)

    group = f"MiniLM encoder ({shape})"
    return [
        Case(
            Row(
                group,
                "encoder_from_minilm()",
                "transformers BertModel, eager, output_attentions=True",
                compare(candidate, eager_side, repeats=repeats),
                True,
            ),
            candidate,
            eager_side,
        ),
        Case(
            Row(
                group,
                "encoder_from_minilm()",
                "transformers BertModel, sdpa",
                compare(candidate, sdpa_side, repeats=repeats),
                False,
                "reference returns no weights",
            ),
            candidate,
            sdpa_side,
        ),
    ]


def tiled_cases(lengths: list[int], repeats: int) -> list[Case]:
    heads, head_dim, block_size = 2, 64, 128
    cases = []
    for seq_len in lengths:
        q, k, v = (seeded(1, heads, seq_len, head_dim, seed=s) for s in range(3))
        torch.testing.assert_close(
            tiled_attention(q, k, v, block_size=block_size), F.scaled_dot_product_attention(q, k, v)
        )

        def candidate(q=q, k=k, v=v):
            return tiled_attention(q, k, v, block_size=block_size)

        def reference(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v)

        # Fewer repeats for the long sequences: each call is quadratic in T.
        reps = max(3, repeats * 512 // seq_len)
        row = Row(
            f"tiled_attention (B=1 H={heads} Dh={head_dim} block={block_size})",
            f"tiled_attention T={seq_len}",
            "F.scaled_dot_product_attention",
            compare(candidate, reference, repeats=reps),
            False,
            "reference is a fused C++ kernel; tiled is the teaching version in Python",
        )
        cases.append(Case(row, candidate, reference))
    return cases


def tiled_memory(lengths: list[int]) -> dict[str, dict[int, int]]:
    """Peak resident-set growth per method and T, each method in a fresh process."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    peaks = {}
    for method in ("torch_sdpa", "tiled", "library_full"):
        out = subprocess.run(
            [sys.executable, str(HERE / "memory_worker.py"), method, *map(str, lengths)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        peaks[method] = {int(t): b for t, b in json.loads(out).items()}
    return peaks


def top_operators(function: Callable[[], object], count: int = 6) -> str:
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        function()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                function()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=count)


def milliseconds(seconds: float) -> str:
    return f"{1000 * seconds:.2f}"


def table(rows: list[Row]) -> list[dict[str, str]]:
    return [
        {
            "benchmark": r.group,
            "library": r.candidate,
            "reference": r.reference,
            "library ms": milliseconds(r.comparison.candidate_s),
            "reference ms": milliseconds(r.comparison.reference_s),
            "ratio": f"{r.comparison.ratio:.2f}",
            "ratio IQR": f"{r.comparison.ratio_low:.2f}-{r.comparison.ratio_high:.2f}",
            "pairs": str(r.comparison.repeats),
            "target <= 1.10": r.verdict,
            "note": r.note,
        }
        for r in rows
    ]


def markdown(records: list[dict[str, str]]) -> str:
    header = list(records[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r[h] for h in header) + " |" for r in records]
    return "\n".join(lines)


def text_table(records: list[dict[str, str]], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(r[c]) for r in records)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    group = None
    for r in records:
        if r["benchmark"] != group:
            group = r["benchmark"]
            lines.append(f"[{group}]")
        lines.append("  ".join(r[c].ljust(widths[c]) for c in columns))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter sequences")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    repeats = 5 if args.quick else 11
    lengths = [512, 1024, 2048] if args.quick else [512, 1024, 2048, 4096]
    started = time.perf_counter()

    cases: list[Case] = []
    for make in (sdpa_cases, mha_case, encoder_layer_cases, minilm_cases):
        cases += make(repeats)
        print(f"... {cases[-1].row.group}: done", file=sys.stderr)
    cases += tiled_cases(lengths, repeats)
    print("... tiled_attention timing: done", file=sys.stderr)
    memory = tiled_memory(lengths)

    RESULTS.mkdir(exist_ok=True)
    rows = [case.row for case in cases]
    records = table(rows)
    with open(RESULTS / "library.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)

    memory_records = [
        {
            "T": str(t),
            "F.sdpa MiB": f"{memory['torch_sdpa'][t] / 2**20:.1f}",
            "tiled MiB": f"{memory['tiled'][t] / 2**20:.1f}",
            "library full MiB": f"{memory['library_full'][t] / 2**20:.1f}",
            "score matrix MiB": f"{2 * t * t * 4 / 2**20:.1f}",
        }
        for t in lengths
    ]
    with open(RESULTS / "tiled_memory.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(memory_records[0]))
        writer.writeheader()
        writer.writerows(memory_records)

    profiles = []
    for case in cases:
        if case.row.verdict == "MISSED":
            profiles.append(
                f"## {case.row.group}: {case.row.candidate} vs {case.row.reference}\n\n"
                f"library:\n```\n{top_operators(case.candidate_fn)}```\n\n"
                f"reference:\n```\n{top_operators(case.reference_fn)}```\n"
            )

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {torch.get_num_threads()} thread(s), load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    report = [
        "# attention_lab benchmarks",
        "",
        f"Machine: {machine}.",
        "Times are medians over interleaved pairs; ratio = median of library / reference per "
        f"pair (target <= {TARGET}).",
        "",
        markdown(records),
        "",
        "## tiled_attention memory (peak resident-set growth of one call, fresh process; "
        "B=1 H=2 Dh=64, block 128)",
        "",
        markdown(memory_records),
        "",
        *profiles,
    ]
    (RESULTS / "library.md").write_text("\n".join(report))

    print(f"\n{machine}\n")
    columns = [
        "library",
        "reference",
        "library ms",
        "reference ms",
        "ratio",
        "ratio IQR",
        "target <= 1.10",
    ]
    print(text_table(records, columns))
    print("\nPeak memory of one call (resident-set growth, fresh process, B=1 H=2 Dh=64):\n")
    print(
        text_table([{"benchmark": "memory", **r} for r in memory_records], list(memory_records[0]))
    )
    missed = [r for r in rows if r.verdict == "MISSED"]
    if missed:
        print(f"\n{len(missed)} target(s) missed; operator profiles in {RESULTS / 'library.md'}")
    print(
        f"\nwrote {RESULTS / 'library.csv'}, {RESULTS / 'tiled_memory.csv'} and "
        f"{RESULTS / 'library.md'} in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
