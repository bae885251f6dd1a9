"""``support.implementations.measure``, the tool behind ``blind_sets_measured.md``, reads a
check's answer as the table reports it: passed, the key of the mistake it names, or located."""

from __future__ import annotations

from attention_lab.masks import sliding_window_mask
from support.implementations import blind_a, measure


def _one_key_too_many(size, window):
    """The window's mask, with the last query also seeing the first key: no known mistake."""
    mask = sliding_window_mask(size, window).clone()
    mask[-1, 0] = True
    return mask


def test_the_answers_are_read_as_passed_named_or_located():
    entry = blind_a.LABS["01"]
    check = entry["check"]
    assert measure.verdict(check, entry["correct"][0])["outcome"] == "passed"
    named = measure.verdict(check, blind_a.lab01_wrong_no_scaling)
    assert (named["outcome"], named["mistake"]) == ("failed", "no_scaling")
    located = measure.verdict("check_sliding_window_mask", _one_key_too_many)
    assert (located["outcome"], located["mistake"]) == ("failed", "located")
    assert "Where it goes wrong" in located["message"]
