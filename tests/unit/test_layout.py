"""The library's layout: which module may import which, read from the source with ``ast``.

``ALLOWED`` is the layering of README.md's Layout section (and DESIGN.md's diagram) as data: an
arrow means "may import", and nothing imports upward. Every import counts, also one inside a
function (``pretrained.attention_grid`` imports ``plotting`` when it draws). A module inside a
subpackage that is not listed on its own (``checks/...``) belongs to its package's entry, and
imports inside one such package are free. No module imports another module's private
(underscore) name; ``_validation`` is a private module whose names any module may import.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

LIB = ROOT / "lib" / "attention_lab"

# The attention library, bottom up; then what stands beside it.
CORE = {
    "_validation": set(),
    "masks": {"_validation"},
    "positional": {"_validation"},
    "score_modifiers": {"_validation"},
    "attention_config": {"_validation", "positional"},
    "attention": {"_validation", "attention_config", "masks", "positional", "score_modifiers"},
    "caches": {"_validation", "attention", "masks"},
    "latent_attention": {"_validation", "attention", "caches", "positional"},
    "layers": {"_validation", "attention", "attention_config", "caches", "positional"},
    "efficient": {"_validation", "attention"},
    "linear": {"_validation"},
    "sparse": {"_validation", "attention", "masks", "positional"},
    "training": {"_validation", "layers", "masks"},
    "circuits": {"_validation", "attention", "masks", "positional"},
    "seq2seq": {"_validation", "layers", "masks", "positional"},
    "language_model": {
        "_validation",
        "attention_config",
        "caches",
        "layers",
        "linear",
        "masks",
        "positional",
    },
    "bert": {"_validation", "layers", "masks"},
    "data": {"_validation", "masks"},
}
ALLOWED = {
    **CORE,
    # Loading MiniLM into our BERT; attention_grid draws with plotting.
    "pretrained": {"_validation", "bert", "plotting"},
    # Figures: tensors in, figure out, no model code.
    "plotting": {"_validation"},
    "interactive": {"_validation"},
    # The labs' self-checks run any part of the attention library (pooling from bert).
    "checks": set(CORE),
    # Book support imports nothing from the library.
    "book": set(),
    "book.quiz": set(),
    "book.display": set(),
    "book.explorers": set(),
    "book.glue": set(),
    "__init__": {"attention", "layers", "masks", "positional"},
}


def module_name(path: Path) -> str:
    """``lib/attention_lab/book/quiz.py`` -> ``book.quiz``; a package's ``__init__`` -> it."""
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(LIB.rglob("*.py"))}


def unit(name: str) -> str:
    """The entry of ``ALLOWED`` a module belongs to: its own, else its package's."""
    while name not in ALLOWED and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def is_module(name: str) -> bool:
    return name in MODULES or any(other.startswith(name + ".") for other in MODULES)


def imports(name: str) -> list[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` for every import of ``attention_lab`` in it."""
    path = MODULES[name]
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("attention_lab."):
                    found.append((alias.name.removeprefix("attention_lab."), None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from .x import y
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == "attention_lab" or (node.module or "").startswith("attention_lab."):
                source = node.module.removeprefix("attention_lab").lstrip(".")
            else:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}".lstrip(".")
                if is_module(submodule):  # from attention_lab import plotting
                    found.append((submodule, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return found


def test_every_module_has_a_place_in_the_layering():
    assert set(MODULES) >= {"attention", "bert", "book.quiz", "pretrained"}
    assert all(unit(name) in ALLOWED for name in MODULES), sorted(
        name for name in MODULES if unit(name) not in ALLOWED
    )


def test_the_layering_has_no_cycle():
    # A cycle would be an arrow back up; graphlib raises CycleError if there is one.
    assert list(graphlib.TopologicalSorter(ALLOWED).static_order())


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_follow_the_layering(name):
    mine = unit(name)
    wrong = sorted(
        f"line {line}: {source}"
        for source, _, line in imports(name)
        if unit(source) != mine and unit(source) not in ALLOWED[mine]
    )
    assert not wrong, f"attention_lab.{name} may import only {sorted(ALLOWED[mine])}: {wrong}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_is_imported_across_modules(name):
    private = sorted(
        f"line {line}: from attention_lab.{source} import {imported}"
        for source, imported, line in imports(name)
        if imported and imported.startswith("_") and source != name
    )
    assert not private, f"attention_lab.{name} imports private names: {private}"


@pytest.mark.parametrize("name", ["attention", "interactive", "bert", "book.explorers"])
def test_importing_does_not_load_matplotlib(name):
    code = (
        f"import sys, attention_lab.{name}\n"
        "loaded = [m for m in ('matplotlib', 'matplotlib.pyplot') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


# A module a reader can hold in mind: past this, it holds more than one concept and is split
# (latent attention left attention.py that way).
MAX_LINES = 800


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_the_line_budget(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"attention_lab.{name} has {lines} lines, over {MAX_LINES}: split it"
