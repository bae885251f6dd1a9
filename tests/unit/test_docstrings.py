"""The examples in the library's docstrings run and print what they say (they are on the API page).

Every module is run with doctest; a module whose docstrings hold examples must pass all of them.
Examples that draw random numbers seed their own generator, so their printed values are stable.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re

import pytest

import attention_lab

MODULES = sorted(info.name for info in pkgutil.iter_modules(attention_lab.__path__))
# Modules whose public functions and classes carry examples (the others return figures, run
# checks, load the pretrained model or hold private helpers, where an example would print
# nothing useful or take long).
WITH_EXAMPLES = {
    "attention",
    "bert",
    "circuits",
    "data",
    "efficient",
    "language_model",
    "layers",
    "masks",
    "positional",
    "seq2seq",
    "training",
}


def test_the_list_names_real_modules():
    assert WITH_EXAMPLES <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(f"attention_lab.{name}")
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0
    if name in WITH_EXAMPLES:
        assert tried >= 3, f"attention_lab.{name} has only {tried} example lines"


def test_every_shape_letter_is_defined_on_the_notation_page():
    """A capitalised name inside a shape (``# [B, T, V]``, ``Shape ``[N, D]``) is in its table."""
    from support.paths import ROOT

    notation = (ROOT / "book" / "notation.md").read_text()
    defined = set(re.findall(r"^\| `(\w+)` \|", notation, flags=re.MULTILINE))
    shape = re.compile(r"(?:#\s*(?:\w+\s+)?|[Ss]hape ``)\[([^\]\n]+)\]")
    sources = [
        *(ROOT / "lib" / "attention_lab").rglob("*.py"),
        *(ROOT / "notebooks_src").rglob("*.md"),
    ]
    used: dict[str, str] = {}
    for path in sources:
        for inside in shape.findall(path.read_text()):
            for letter in re.findall(r"\b[A-Z][a-z]?\b", inside):
                used.setdefault(letter, path.name)
    assert used, "no shape comments found"
    missing = {letter: where for letter, where in used.items() if letter not in defined}
    assert not missing, f"shape letters not defined in book/notation.md: {missing}"
