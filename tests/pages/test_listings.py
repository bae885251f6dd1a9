"""Part I's listings of the library show Part I's attention: none of the options that Part VI
adds (shared key/value heads, QK-norm, ALiBi, sinks, softcapping, RoPE scaling) appears in the
code chapters 02 to 05 include, read as Sphinx reads a ``literalinclude``."""

import re

import pytest
from sphinx.directives.code import LiteralInclude, LiteralIncludeReader

from support.paths import ROOT

CHAPTERS = ROOT / "notebooks_src" / "chapters"
PART_I = ["02_scaled_dot_product_attention", "03_multi_head_attention", "05_masks"]
# Words only Part VI's code uses. The seam's own name (modifiers, score_modifiers) may show:
# it is one line that is None in Parts I to V.
PART_VI_WORDS = (
    "num_kv_heads", "repeat", "alibi", "sink", "softcap", "q_norm", "qk_norm", "scaling",
    "dynamic",
)  # fmt: skip
BLOCK = re.compile(r"^```\{literalinclude\} (\S+)\n((?::[\w-]+:.*\n)*)```", re.MULTILINE)


class _Config:
    source_encoding = "utf-8-sig"


def listings(page):
    """(options, code) of every literalinclude of a library file on ``page``."""
    text = (CHAPTERS / f"{page}.md").read_text()
    for argument, option_text in BLOCK.findall(text):
        if "lib/attention_lab" not in argument:
            continue
        options = dict(re.findall(r"^:([\w-]+):[ \t]*(.*?)[ \t]*$", option_text, re.MULTILINE))
        reader_options = {
            key: LiteralInclude.option_spec[key](value)
            for key, value in options.items()
            if key not in ("language", "caption")
        }
        path = (CHAPTERS / argument).resolve()
        code, _ = LiteralIncludeReader(str(path), reader_options, _Config()).read()
        yield options, code


@pytest.mark.parametrize("page", PART_I)
def test_part_one_listings_show_no_part_six_option(page):
    shown = list(listings(page))
    assert shown, f"{page} includes no library code"
    for options, code in shown:
        found = [word for word in PART_VI_WORDS if word in code]
        assert not found, f"{page}: {options.get('pyobject')} shows {found}"


def test_chapter_04_shows_the_rotation_without_its_scalings():
    rotations = [
        code
        for options, code in listings("04_positional_encoding")
        if options.get("pyobject") == "RotaryEmbedding.forward"
    ]
    assert len(rotations) == 1
    assert not [word for word in PART_VI_WORDS if word in rotations[0]]
    assert "torch.cos(angle)" in rotations[0]  # the rotation itself is shown
