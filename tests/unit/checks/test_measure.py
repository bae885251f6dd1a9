"""``support.implementations.measure``, the tool behind ``blind_sets_measured.md``, reads a
check's answer as the table reports it: passed, the key of the mistake it names, or located."""

from __future__ import annotations

from support.implementations import blind_tuning, measure


def test_the_answers_are_read_as_passed_named_or_located():
    entry = blind_tuning.LABS["01"]
    check = entry["check"]
    assert measure.verdict(check, entry["correct"][0])["outcome"] == "passed"
    named = measure.verdict(check, blind_tuning.lab01_wrong_no_scaling)
    assert (named["outcome"], named["mistake"]) == ("failed", "no_scaling")
    located = measure.verdict(
        check_name := blind_tuning.LABS["10-window"]["check"],
        blind_tuning.lab10w_wrong_negative_slice_wraps,
    )
    assert check_name == "check_sliding_window_mask"
    assert (located["outcome"], located["mistake"]) == ("failed", "located")
    assert "Where it goes wrong" in located["message"]
