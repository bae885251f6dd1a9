"""`make bench-mqar`: chapter 22's five models on MQAR at several widths, over several seeds.

Chapter 22 trains five decoders (softmax attention, linear attention, DeltaNet, Gated DeltaNet
and a Gated DeltaNet / attention hybrid) at one width, ``d_model = 32``, on multi-query
associative recall (``attention_lab.data.multiquery_recall``, Arora et al., 2023, "Zoology").
This repeats that recipe exactly (the page's data, model, schedule and seed scheme) for each
width in ``--widths`` (4 heads each, so heads of width ``d_model / 4``) and each seed in
``--seeds``, and measures recall (``evaluate(...).token_accuracy``, the share of queries whose
value is the likeliest token) on the page's test sets of 2, 4 and 6 pairs. 8 pairs do not fit
in the page's 24 tokens (the generator needs ``4 * pairs <= seq_len``), and a longer sequence
would be another task, so there is no 8-pair column. At ``d_model = 32`` a seed's numbers are
the page's for that seed (same recipe, same thread count).

The table gives, per width and model, the mean recall over the seeds and its range (min-max),
the parameter count, and each layer's token-mixing memory: a recurrent layer's state (value
heads x ``Dk`` x ``Dv`` floats, read from the layer's modules) and an attention layer's key/value
cache at the task's 24 tokens (2 x key/value heads x head width x 24 floats).

Results are printed and written to ``benchmarks/results/`` as ``mqar.csv`` (one row per seed,
width, model and number of pairs) and ``mqar.md``.

Usage: ``python benchmarks/mqar.py [--seeds 0 1 2] [--widths 16 32 64] [--threads N]
[--quick]`` (``--quick``: seed 0, widths 16 and 32).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import torch

from attention_lab.data import IGNORE_INDEX, multiquery_recall
from attention_lab.language_model import DecoderLM, RecurrentLayer
from attention_lab.training import evaluate, train

RESULTS = Path(__file__).resolve().parent / "results"

# Chapter 22's task and schedule ("Five models on MQAR"); keep them equal to the page's.
VOCAB, LENGTH = 32, 24
TRAIN_PAIRS, STEPS, BATCH, LR = [2, 4, 6], 300, 48, 3e-3
TEST_EXAMPLES = 256
NUM_LAYERS, NUM_HEADS = 2, 4
MODELS = {
    "softmax attention": None,
    "linear attention": ("linear", "linear"),
    "DeltaNet": ("delta", "delta"),
    "Gated DeltaNet": ("gated_delta", "gated_delta"),
    "hybrid (Gated DeltaNet, attention)": ("gated_delta", "attention"),
}


def task(seed: int):
    """The page's training data (2, 4 and 6 pairs mixed) and test sets for ``seed``."""
    parts = [
        multiquery_recall(STEPS * BATCH // len(TRAIN_PAIRS), n, LENGTH, VOCAB, seed=seed * 100 + n)
        for n in TRAIN_PAIRS
    ]
    inputs = torch.cat([x for x, _ in parts])  # [N, T]
    labels = torch.cat([y for _, y in parts])
    tests = {
        n: multiquery_recall(TEST_EXAMPLES, n, LENGTH, VOCAB, seed=seed * 100 + 50 + n)
        for n in TRAIN_PAIRS
    }
    return inputs, labels, tests


def build(width: int, layer_types, seed: int) -> DecoderLM:
    torch.manual_seed(seed)  # initial weights, as the page seeds them
    return DecoderLM(
        vocab_size=VOCAB,
        max_len=LENGTH,
        d_model=width,
        num_layers=NUM_LAYERS,
        num_heads=NUM_HEADS,
        position_embedding="sinusoidal" if layer_types is None else None,
        layer_types=layer_types,
    )


def mixer_memory(model: DecoderLM) -> list[str]:
    """Per layer, bottom up, the floats its token mixer keeps for one sequence of LENGTH."""
    sizes = []
    for layer in model.layers:
        if isinstance(layer, RecurrentLayer):
            mixer = layer.mixer
            key_dim = mixer.k_proj.weight.shape[0] // mixer.num_key_heads
            value_dim = mixer.norm_weight.numel()
            heads = mixer.v_proj.weight.shape[0] // value_dim
            floats = heads * key_dim * value_dim  # one Dk x Dv state per value head
            sizes.append(f"state {heads}×{key_dim}×{value_dim} = {floats}")
        else:
            attn = layer.self_attn
            floats = 2 * attn.num_kv_heads * attn.head_dim * LENGTH
            sizes.append(f"K/V cache 2×{attn.num_kv_heads}×{attn.head_dim}×{LENGTH} = {floats}")
    return sizes


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--quick", action="store_true", help="seed 0, widths 16 and 32")
    args = parser.parse_args()
    seeds, widths = ([0], [16, 32]) if args.quick else (args.seeds, args.widths)
    torch.set_num_threads(args.threads)

    started = time.perf_counter()
    records = []  # one per seed, width, model and number of pairs
    params: dict[tuple[int, str], int] = {}
    memory: dict[tuple[int, str], list[str]] = {}
    for seed in seeds:
        inputs, labels, tests = task(seed)
        for width in widths:
            for name, layer_types in MODELS.items():
                begun = time.perf_counter()
                model = build(width, layer_types, seed)
                params[width, name] = sum(p.numel() for p in model.parameters())
                memory[width, name] = mixer_memory(model)
                # pad_id=IGNORE_INDEX: no input is padding, and the loss skips non-queries.
                train(
                    model,
                    inputs,
                    labels,
                    steps=STEPS,
                    batch_size=BATCH,
                    lr=LR,
                    pad_id=IGNORE_INDEX,
                    seed=seed,
                )
                model.eval()
                recalls = {
                    n: evaluate(model, *tests[n], pad_id=IGNORE_INDEX).token_accuracy
                    for n in TRAIN_PAIRS
                }
                seconds = time.perf_counter() - begun
                for n, value in recalls.items():
                    records.append(
                        {
                            "seed": seed,
                            "d_model": width,
                            "model": name,
                            "pairs": n,
                            "recall": repr(value),  # full precision, to compare with the page
                            "parameters": params[width, name],
                            "train+eval seconds": f"{seconds:.1f}",
                        }
                    )
                shown = " ".join(f"{n}p={v:.3f}" for n, v in recalls.items())
                print(
                    f"seed {seed}  d_model {width:>3}  {name:<36} {shown}  {seconds:6.1f} s",
                    flush=True,
                )
    total = time.perf_counter() - started

    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "mqar.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)

    def cell(width: int, name: str, n: int) -> str:
        values = [
            float(r["recall"])
            for r in records
            if r["d_model"] == width and r["model"] == name and r["pairs"] == n
        ]
        mean = sum(values) / len(values)
        if len(values) == 1:
            return f"{mean:.3f}"
        return f"{mean:.3f} ({min(values):.3f}–{max(values):.3f})"

    header = ["d_model", "model", "parameters", "token mixer per layer (floats), bottom up"]
    header += [f"{n} pairs" for n in TRAIN_PAIRS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for width in widths:
        for name in MODELS:
            row = [str(width), name, f"{params[width, name]:,}", "; ".join(memory[width, name])]
            row += [cell(width, name, n) for n in TRAIN_PAIRS]
            lines.append("| " + " | ".join(row) + " |")
    seed_list = ", ".join(map(str, seeds))
    machine = (
        f"{cpu_name()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)"
    )
    spread = "mean (min–max) over the seeds" if len(seeds) > 1 else "one seed"
    report = [
        "# MQAR recall across widths (chapter 22's five models)",
        "",
        f"Machine: {machine}. Seeds: {seed_list} ({len(seeds)}). Sweep time: {total:.0f} s.",
        "",
        f"Recall on {TEST_EXAMPLES} test examples per number of pairs ({LENGTH} tokens, "
        f"vocabulary {VOCAB}), {spread}; {NUM_LAYERS} layers, {NUM_HEADS} heads, "
        f"{STEPS} steps of {BATCH}, lr {LR}. A recurrent state is value heads × Dk × Dv; "
        f"a K/V cache is 2 × heads × head width × {LENGTH} tokens.",
        "",
        *lines,
    ]
    (RESULTS / "mqar.md").write_text("\n".join(report) + "\n")
    print("\n" + "\n".join(report))
    print(f"\nwrote {RESULTS / 'mqar.csv'} and {RESULTS / 'mqar.md'} in {total:.0f} s")


if __name__ == "__main__":
    main()
