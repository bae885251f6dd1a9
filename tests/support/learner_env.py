"""The learner's environment: a virtual environment built from ``requirements-learn.txt`` alone.

Building it takes about three minutes on the 2-core machine (pip installs PyTorch's CPU wheel,
JupyterLab and the rest, one file at a time, on one core), so it is cached in
``~/.cache/attention-lab/`` (or ``$XDG_CACHE_HOME``) under the hash of the requirements file and
the Python version. ``make test`` builds it in the background while it creates the project's own
``.venv`` (both are pip on one core each), and ``tests/runs/test_learner_environment.py`` reads
it; the test builds it itself when it is missing (a test run by hand).

Standard library only: it runs before ``.venv`` exists::

    python3 tests/support/learner_env.py      # build it unless it is cached; print what it is
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements-learn.txt"
# PyTorch's CPU index cannot be reached here; pip takes the CPU wheel from this machine.
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-lab"


def key() -> str:
    """The hash of the requirements file and of this Python's version (the environment's)."""
    text = REQUIREMENTS.read_text(encoding="utf-8")
    return hashlib.sha256(f"{sys.version_info[:2]}\n{text}".encode()).hexdigest()[:16]


def _du(path: Path) -> int:
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def build() -> dict:
    """The cached environment, built first (by this Python) if missing:
    ``{"path", "install_seconds", "bytes"}``.

    Under a file lock, so the background build that ``make test`` starts and a test that asks
    for the environment meanwhile never build it twice; a build that failed halfway leaves no
    ``measured.json`` and is redone."""
    cache = _cache()
    cache.mkdir(parents=True, exist_ok=True)
    digest = key()
    env = cache / f"learner-venv-{digest}"
    record = env / "measured.json"
    with open(cache / f"learner-venv-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.is_file():
            shutil.rmtree(env, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
            local = cache / f"requirements-{digest}.txt"
            text = REQUIREMENTS.read_text(encoding="utf-8")
            local.write_text(text.replace(CPU_INDEX, ""), encoding="utf-8")
            start = time.monotonic()
            subprocess.run(
                [str(env / "bin" / "python"), "-m", "pip", "install", "-q",
                 "--disable-pip-version-check", "-r", str(local)],
                check=True,
            )  # fmt: skip
            seconds = time.monotonic() - start
            record.write_text(json.dumps({"install_seconds": round(seconds), "bytes": _du(env)}))
    return {"path": env, **json.loads(record.read_text())}


if __name__ == "__main__":
    built = build()
    print(
        f"learner environment: {built['path']} ({built['bytes'] / 2**20:.0f} MiB, "
        f"installed in {built['install_seconds']} s)"
    )
