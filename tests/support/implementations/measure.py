"""What the labs' checks say about a set of implementations written blind: one row per function.

``python -m support.implementations.measure MODULE [--labs 01,02] [--json FILE]`` (from
``tests/``, with the library importable) imports ``MODULE`` (a file path or a module of this
package), whose ``LABS`` maps a lab to ``{"check": name, "correct": [fn, ...], "wrong": [(fn,
description), ...]}``, passes each function to its check, and prints a Markdown table per lab:
the outcome (passed, or the message's first line), the mistake the message names (its key in
``attention_lab.checks._core.MISTAKES``), or ``located`` when it says only where the result goes
wrong, or ``unknown`` when it says neither. Whether a named mistake is the one the function makes
is a reader's judgement (or the module's ``NAMES``: function name -> the keys that name it).

Each check runs in this process, one thread, its printed line captured; a check that raises
anything but ``AssertionError`` is reported as ``crashed``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import torch

from attention_lab import checks
from attention_lab.checks._core import MISTAKES, UNKNOWN


def _squash(text: str) -> str:
    return " ".join(text.split())


_BY_TEXT = {_squash(text): key for key, text in MISTAKES.items()}


def verdict(check: str, fn) -> dict:
    """``{"outcome": "passed" | "failed" | "crashed", "mistake": key | "located" | "unknown" |
    None, "message": str}`` for ``fn`` under the check named ``check``."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            getattr(checks, check)(fn)
    except AssertionError as error:
        message = _squash(str(error))
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        return {
            "outcome": "crashed",
            "mistake": None,
            "message": f"{type(error).__name__}: {error}",
        }
    else:
        return {"outcome": "passed", "mistake": None, "message": ""}
    head, _, likely = message.partition("Likely mistake: ")
    if likely:
        text = likely.removesuffix(".")
        key = "unknown" if text == _squash(UNKNOWN) else _BY_TEXT.get(text, "named?")
    elif "Where it goes wrong: " in message:
        key = "located"
    else:
        key = "unknown"
    return {"outcome": "failed", "mistake": key, "message": message}


def load(name: str):
    path = Path(name)
    if path.suffix == ".py" and path.is_file():
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name if "." in name else f"support.implementations.{name}")


def measure(module, labs=None) -> dict:
    """lab -> list of rows (fn name, kind, description, verdict)."""
    found = {}
    for lab, entry in module.LABS.items():
        if labs and lab.split("-")[0] not in labs and lab not in labs:
            continue
        rows = []
        for fn in entry["correct"]:
            rows.append(
                {
                    "fn": fn.__name__,
                    "kind": "correct",
                    "description": "",
                    **verdict(entry["check"], fn),
                }
            )
        for fn, description in entry["wrong"]:
            rows.append(
                {
                    "fn": fn.__name__,
                    "kind": "wrong",
                    "description": description,
                    **verdict(entry["check"], fn),
                }
            )
        found[lab] = rows
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module")
    parser.add_argument("--labs", default="")
    parser.add_argument("--json")
    parser.add_argument("--full", action="store_true", help="print whole messages")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    module = load(args.module)
    labs = [lab for lab in args.labs.split(",") if lab]
    found = measure(module, labs)
    names = getattr(module, "NAMES", {})
    for lab, rows in found.items():
        print(f"\n## Lab {lab}\n\n| function | kind | outcome | mistake named | expected |")
        print("|---|---|---|---|---|")
        for row in rows:
            outcome = row["outcome"] if row["outcome"] != "failed" else row["message"][:90]
            print(
                f"| {row['fn']} | {row['kind']} | {outcome} | {row['mistake'] or '-'} | "
                f"{'/'.join(names.get(row['fn'], ())) or '-'} |"
            )
            if args.full and row["message"]:
                print(f"|  |  | {row['message']} |  |  |")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
