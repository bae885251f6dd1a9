"""Running the book's pages under other seeds and other numeric configurations.

A trained model's path depends on the last bits of every matrix product, and those bits change
with the CPU's vector width, the BLAS kernel and the thread count. The book's claims about trained
models must hold on any reader's machine, so the tests execute every page under numeric
configurations other than the build's (the portability run) and the trained chapters under other
seeds (the seed sweep), and fail on any cell error, which includes every page's own asserts.

Used by ``support.runs`` (which executes and stores every run the tests read) and from the command
line by an author measuring a claim's spread::

    .venv/bin/python tests/support/numerics.py \
        notebooks_src/chapters/08_watching_attention_learn.md \
        --seeds 0 1 2 3 4 --configs default avx2 baseline

which prints each glued value per run and every failing cell, and exits non-zero if a cell failed.
Runs are stored in ``_build/runs/`` by their inputs, so asking again is free.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Environment overrides standing in for other readers' machines. Each is applied to a fresh
# kernel (the variables are read once, when torch and MKL load). Order matters: the portability
# run takes the first two that change this machine's numerics (see `effective_configurations`).
CONFIGURATIONS: dict[str, dict[str, str]] = {
    "default": {},
    # A CPU with AVX2 but no AVX-512 (a common laptop and cloud CPU): ATen's kernels, MKL's GEMM
    # and oneDNN all limited to AVX2.
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    },
    # An older laptop: ATen's scalar kernels, MKL's SSE4.2 code path, one thread.
    "baseline": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    },
    # Fallbacks for a machine on which the two above change nothing.
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "mkl-avx": {"MKL_ENABLE_INSTRUCTIONS": "AVX"},
    "one-thread": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    # MKL's most compatible code path (SSE2), which MKL takes on AMD CPUs too, where it ignores
    # MKL_ENABLE_INSTRUCTIONS: measured on an AMD EPYC, where only this and the ATen settings
    # above changed the probe's weights.
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
}

# Test kernels run two at a time on two cores: their OpenMP threads wait without spinning, as
# the build's and pytest's do (README.md, "Tests", says why and what it was measured to save).
PASSIVE_WAITS = "PASSIVE"

# The line every trained page sets its seed with; the sweep rewrites it.
SEED_LINE = re.compile(r"^SEED = \d+\b", re.MULTILINE)

GLUE_PREFIX = "application/papermill.record/"

# A short training run, as the pages train (one thread, as several pages pin it): the hash of its
# weights tells whether a configuration changes this machine's numerics.
_PROBE = textwrap.dedent(
    """
    import hashlib, torch
    from attention_lab.data import reversal_task
    from attention_lab.training import TokenClassifier, train
    torch.set_num_threads(1)
    inputs, targets = reversal_task(256, 12, 8, seed=0)
    torch.manual_seed(0)
    model = TokenClassifier(12, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=8)
    train(model, inputs, targets, steps=20, batch_size=32, lr=3e-3, seed=0)
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    print(digest.hexdigest())
    """
)


def environment(config: str) -> dict[str, str]:
    """The full environment of a kernel run under ``config``: this process's, plus its overrides
    (and the variables the book's build sets)."""
    env = dict(os.environ)
    for name in (
        "ATEN_CPU_CAPABILITY",
        "MKL_ENABLE_INSTRUCTIONS",
        "ONEDNN_MAX_CPU_ISA",
        "MKL_CBWR",
    ):
        env.pop(name, None)  # the build's configuration is the machine's own
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONHASHSEED": "0"})
    env.update(CONFIGURATIONS[config])
    env.setdefault("OMP_WAIT_POLICY", PASSIVE_WAITS)
    return env


def weights_digest(config: str) -> str:
    """SHA-256 of a short training run's weights under ``config``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=environment(config),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the probe training run failed under {config!r}:\n{done.stderr}")
    return done.stdout.strip()


def effective_configurations(count: int = 2) -> tuple[list[str], dict[str, str]]:
    """The first ``count`` configurations whose numerics differ from the default's and from
    each other's on this machine, and every digest measured (to report)."""
    digests = {"default": weights_digest("default")}
    chosen: list[str] = []
    for name in CONFIGURATIONS:
        if name == "default" or len(chosen) == count:
            continue
        digests[name] = weights_digest(name)
        if digests[name] not in {digests["default"], *(digests[c] for c in chosen)}:
            chosen.append(name)
    return chosen, digests


def errors(nb) -> list[str]:
    """One line per error raised in a cell that is not tagged ``raises-exception``."""
    found = []
    for index, cell in enumerate(nb.cells):
        if "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                found.append(f"cell {index} ({first[:60]}): {output.ename}: {output.evalue}")
    return found


def pngs(nb) -> list[bytes]:
    """The PNGs a notebook drew, in order, except those of cells that time things on this CPU
    (tagged ``measured``): wall-clock measurements differ between runs by nature."""
    found = []
    for cell in nb.cells:
        if "measured" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            for mime, data in output.get("data", {}).items():
                if mime.endswith("image/png"):
                    found.append(base64.b64decode(data))
    return found


def glued(nb) -> dict[str, str]:
    """Every value the notebook glued, by name, as its text/plain form."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime, data in output.get("data", {}).items():
                if mime.startswith(GLUE_PREFIX) and mime.endswith("text/plain"):
                    name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                    if name:
                        values[name] = data
    return values


def differing(runs: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The glued names whose values differ between runs: name -> {run: value}."""
    names = sorted(set().union(*(r.keys() for r in runs.values())))
    return {
        n: {run: values.get(n, "—") for run, values in runs.items()}
        for n in names
        if len({values.get(n) for values in runs.values()}) > 1
    }


BUILD_EXECUTED = ROOT / "_build" / "jupyter_execute" / "notebooks_src"


def build_glue(page: str) -> dict[str, str]:
    """The values the book's own build glued on ``page`` (e.g. "chapters/08_…"), if built."""
    path = BUILD_EXECUTED / f"{page}.glue.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {name: entry.get("data", {}).get("text/plain", "") for name, entry in data.items()}


def _short(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value if len(value) <= 40 else value[:37] + "..."
    return f"{number:.4g}"


def summary(
    configurations: dict | None,
    glue: dict[str, dict[str, dict[str, str]]],
    sweep: dict[str, dict[str, dict[str, str]]],
) -> list[tuple[str, list[str]]]:
    """Sections of text for the terminal summary: ``configurations`` is ``{"chosen", "digests"}``;
    ``glue`` page -> run -> {name: value} under other configurations; ``sweep`` page -> seed ->
    {name: value}."""
    sections = []
    if configurations:
        chosen = configurations["chosen"]
        digests = configurations["digests"]
        lines = [f"used: {', '.join(chosen) or 'none'} (the build runs 'default')"]
        lines += [
            f"  {name}: weights {digest[:12]}  {CONFIGURATIONS[name] or '(as the machine is)'}"
            for name, digest in digests.items()
        ]
        sections.append(("numeric configurations (short training run's weights)", lines))
    lines = []
    for page, runs in sorted(glue.items()):
        build = build_glue(page)
        runs = {"build": build, **runs}
        for name, values in differing(runs).items():
            if name in build:
                lines.append(
                    f"{page} {name}: "
                    + " | ".join(f"{run} {_short(v)}" for run, v in values.items())
                )
    if glue:
        if not lines:
            lines = ["none"]
        sections.append(("glued values that differ between numeric configurations", lines))
    lines = []
    for page, runs in sorted(sweep.items()):
        runs = {"0": build_glue(page), **runs}
        for name in sorted(set().union(*(r.keys() for r in runs.values()))):
            try:
                numbers = [float(r[name]) for r in runs.values() if name in r]
            except ValueError:
                continue
            if len(set(numbers)) > 1:
                lines.append(
                    f"{page} {name}: {min(numbers):.4g} to {max(numbers):.4g} "
                    f"over seeds {', '.join(s for s, r in runs.items() if name in r)}"
                )
    if sweep:
        sections.append(("seed sweep: each glued number's range", lines or ["no number varied"]))
    return sections


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path)
    parser.add_argument("--seeds", nargs="*", type=int, default=[None])
    parser.add_argument("--configs", nargs="*", default=["default"], choices=CONFIGURATIONS)
    parser.add_argument("--json", type=Path, help="also write every run's glued values here")
    args = parser.parse_args()
    if __package__ in (None, ""):  # run as a script: make `support` importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support import runs as page_runs

    results = {}
    failed = 0
    for source in args.sources:
        runs = {}
        for seed in args.seeds:
            for config in args.configs:
                label = f"seed={seed if seed is not None else 'page'} {config}"
                print(f"{source.name}: {label} …", file=sys.stderr, flush=True)
                run = page_runs.Run(page_runs.page_of(source), "book", config, seed)
                nb = page_runs.get(run)  # stored in _build/runs/, so a second ask is free
                for line in errors(nb):
                    print(f"  FAILED {label}: {line}", flush=True)
                    failed += 1
                runs[label] = glued(nb)
        results[source.name] = runs
        print(f"\n{source.name}: glued values over {len(runs)} runs")
        names = sorted(set().union(*(r.keys() for r in runs.values())))
        for name in names:
            values = [runs[label].get(name, "—") for label in runs]
            mark = " " if len(set(values)) == 1 else "*"
            print(f" {mark} {name}: " + " | ".join(values))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if failed:
        sys.exit(f"{failed} failing cell(s): see FAILED above")


if __name__ == "__main__":
    _main()
