"""The site's ``_notebooks/``: what each page's download menu links to.

Every page's learner's notebook, the quizzes' JSON files and the learner's requirements
(``requirements-learn.txt``: what the notebooks import, JupyterLab, PyTorch's CPU build; see
``attention_book.notebook_converter``), the library as a wheel built offline from ``lib/``, and
one zip of all of it. The notebooks' set-up cell installs the wheel and the requirements from
here when it runs outside a prepared environment (on Colab, say).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from . import ROOT
from .notebook_converter import NOTEBOOKS_FOLDER, wheel_name, write_notebooks

HTML_DIR_NAME = NOTEBOOKS_FOLDER  # in the built book's HTML folder
ZIP_NAME = "attention-lab-notebooks.zip"


def build_wheel(out_dir: Path) -> Path:
    """The library as a wheel, built offline from a copy of its sources."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "src"
        tree.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, tree / name)
        shutil.copytree(
            ROOT / "lib", tree / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-index",
                "--no-build-isolation",
                "--disable-pip-version-check",
                "-w",
                str(out_dir),
                str(tree),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"building the attention_lab wheel failed:\n{result.stderr}")
    wheel = out_dir / wheel_name()  # the name the notebooks' set-up cell installs
    if not wheel.is_file():
        raise RuntimeError(f"pip wheel wrote no {wheel.name}")
    return wheel


def write_downloads(index: dict, outdir: Path, log=print) -> Path:
    """The site's ``_notebooks/``: notebooks, quizzes, requirements, the wheel and one zip."""
    target = outdir / HTML_DIR_NAME
    if target.exists():
        shutil.rmtree(target)
    files = write_notebooks(index, target, log=lambda _m: None)
    wheel = build_wheel(target)
    with zipfile.ZipFile(target / ZIP_NAME, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in [*files, wheel]:
            archive.write(path, (Path("attention-lab-notebooks") / path.relative_to(target)))
    log(f"learner_notebooks: {len(files)} files, {wheel.name} and {ZIP_NAME} in {target}")
    return target
