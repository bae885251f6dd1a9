"""The rule test_figure_text.py applies to every figure's text (``support.figures.rendered_px``),
and the figures whose page sources carry the ``tap-to-open`` class: those of ``TAP_TO_OPEN``.
Neither needs a build.
"""

from __future__ import annotations

import re

import pytest

from support import runs
from support.figures import SMALLEST, TAP_TO_OPEN, rendered_px

SOURCES = runs.sources()


def test_the_tap_to_open_figures_and_only_they_carry_the_class():
    marked = set()
    for source in SOURCES:
        marked |= set(
            re.findall(r"name: (fig-[\w-]+)\n\s+classes: tap-to-open\n", source.read_text())
        )
    assert marked == TAP_TO_OPEN


def test_the_rule_scales_a_wide_figure_down_and_a_narrow_one_not():
    assert rendered_px(10, 100, 1000, 500) == pytest.approx(10 * 100 / 72 / 2)
    assert rendered_px(10, 100, 400, 500) == pytest.approx(10 * 100 / 72)
    assert rendered_px(10, 100, 1000, 390) < SMALLEST  # a 10-inch figure on a phone
