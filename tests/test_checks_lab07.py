"""Lab 7's check: online softmax loops written three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.
"""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab import checks
from attention_lab.checks import MISTAKES

check = checks.check_online_softmax


def flat(error: BaseException) -> str:
    return " ".join(str(error).split())


def with_(fn, **deviation):
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs, **deviation)

    wrong.__name__ = f"{fn.__name__}_with_{'_'.join(deviation)}"
    return wrong


def online_attention(
    query,
    key,
    value,
    block_size,
    *,
    rescale_sum=True,
    rescale_acc=True,
    invert=False,
    divide=True,
    drop_last=False,
    maximum="running",
    start=-math.inf,
    scale=True,
    full_scores=False,
):
    q = query / math.sqrt(query.shape[-1]) if scale else query
    if full_scores:
        every_score = q @ key.transpose(-2, -1)
    row_max = torch.full((*q.shape[:-1], 1), start, dtype=q.dtype)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=q.dtype)
    key_len = key.shape[-2]
    stop = key_len // block_size * block_size if drop_last else key_len
    for begin in range(0, stop, block_size):
        end = begin + block_size
        if full_scores:
            scores = every_score[..., begin:end]
        else:
            scores = q @ key[..., begin:end, :].transpose(-2, -1)
        if maximum == "none":
            new_max = torch.zeros_like(row_max)
        elif maximum == "block":
            new_max = scores.amax(dim=-1, keepdim=True)
        else:
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(new_max - row_max) if invert else torch.exp(row_max - new_max)
        p = torch.exp(scores - new_max)
        row_sum = (row_sum * rescale if rescale_sum else row_sum) + p.sum(dim=-1, keepdim=True)
        acc = (acc * rescale if rescale_acc else acc) + p @ value[..., begin:end, :]
        row_max = new_max
    return acc / row_sum if divide else acc


def online_in_float64(query, key, value, block_size):
    return online_attention(query.double(), key.double(), value.double(), block_size)


RIGHT = [online_attention]
WRONG = [
    (check, with_(online_attention, rescale_sum=False), "sum_not_rescaled"),
    (check, with_(online_attention, rescale_acc=False), "acc_not_rescaled"),
    (check, with_(online_attention, rescale_sum=False, rescale_acc=False), "nothing_rescaled"),
    (check, with_(online_attention, invert=True), "rescale_inverted"),
    (check, with_(online_attention, divide=False), "not_divided_by_sum"),
    (check, with_(online_attention, drop_last=True), "last_block_dropped"),
    (check, with_(online_attention, maximum="none"), "online_overflow"),
    (check, with_(online_attention, maximum="block"), "online_overflow"),
    (check, with_(online_attention, start=0.0), "max_started_at_zero"),
    (check, with_(online_attention, full_scores=True), "full_score_matrix"),
    (check, with_(online_attention, scale=False), "no_scaling"),
    (check, online_in_float64, "wrong_dtype"),
]


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_a_right_implementation_passes(fn, capsys):
    check(fn)
    assert capsys.readouterr().out.startswith(f"✓ {fn.__name__} matches the library")


@pytest.mark.parametrize(
    ("check", "wrong", "mistake"), WRONG, ids=[f"{w.__name__}-{key}" for _, w, key in WRONG]
)
def test_a_mistake_is_rejected_and_named(check, wrong, mistake):
    with pytest.raises(AssertionError) as info:
        check(wrong)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    assert "on case '" in message
    lines = str(info.value).splitlines()
    assert len(lines) <= 8 and all(len(line) <= 76 for line in lines[1:])


def test_every_mistake_of_the_lab_is_proved():
    from attention_lab.checks import online_softmax

    assert set(online_softmax.MISTAKES) <= {key for _, _, key in WRONG}
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    assert {key for _, _, key in WRONG} <= documented
