"""The site's ``_notebooks/``: what each page's download menu links to.

Every page's learner's notebook and the quizzes' JSON files (``attention_book.notebook_converter``),
the library as a wheel built offline from ``lib/``, ``requirements.txt``, and one zip of all of it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from . import ROOT
from .notebook_converter import write_notebooks

HTML_DIR_NAME = "_notebooks"  # in the built book's HTML folder
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
    wheels = sorted(out_dir.glob("attention_lab-*.whl"))
    if not wheels:
        raise RuntimeError("pip wheel wrote no attention_lab wheel")
    return wheels[-1]


def write_downloads(index: dict, outdir: Path, log=print) -> Path:
    """The site's ``_notebooks/``: notebooks, quizzes, the wheel, requirements and one zip."""
    target = outdir / HTML_DIR_NAME
    if target.exists():
        shutil.rmtree(target)
    files = write_notebooks(index, target, outdir, log=lambda _m: None)
    wheel = build_wheel(target)
    shutil.copy2(ROOT / "requirements.txt", target / "requirements.txt")
    with zipfile.ZipFile(target / ZIP_NAME, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in [*files, wheel, target / "requirements.txt"]:
            archive.write(path, (Path("attention-lab-notebooks") / path.relative_to(target)))
    log(f"learner_notebooks: {len(files)} files, {wheel.name} and {ZIP_NAME} in {target}")
    return target
