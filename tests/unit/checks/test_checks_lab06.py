"""Lab 6's check: searches written three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.

The implementations it runs are in ``support/implementations/lab06.py``.
"""

from __future__ import annotations

import pytest
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks
from support.implementations.lab06 import check, search
from support.messages import flat


def test_an_unknown_mistake_says_which_scores_go_wrong():
    def search_squaring_the_mask(query_hidden, query_mask, doc_hidden, doc_mask, k):
        def pool(hidden, mask):
            w = mask[..., None].to(hidden.dtype)
            return (hidden * w).sum(1) / (w.sum(1) ** 2).clamp(min=1e-9) + hidden[:, -1] * 0.1

        q = F.normalize(pool(query_hidden, query_mask), dim=-1)
        d = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
        scores = q @ d.T
        return scores, scores.topk(k, dim=-1).indices

    with pytest.raises(AssertionError) as info:
        check(search_squaring_the_mask)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "Where it goes wrong: the scores differ for queries" in message


def test_right_scores_ranked_wrongly_are_located():
    def search_ranking_the_second_best_first(*args):
        scores, top = search(*args)
        return scores, top.roll(1, dims=-1)

    with pytest.raises(AssertionError) as info:
        check(search_ranking_the_second_best_first)
    assert "your scores are right and so is the set" in flat(info.value)


def test_a_count_over_the_batch_axis_is_not_called_a_mask_mistake():
    """count = mask.sum(dim=0) is [T]; dividing the sums [B, D] by it fails on the same two
    sizes (T and D) as a mask without its trailing axis, but on axis 1, not 2: the check must
    not name the mask, and says where the learner's code crashed instead."""

    def count_over_batch(query_hidden, query_mask, doc_hidden, doc_mask, k):
        def pool(hidden, mask):
            weights = mask.to(hidden.dtype)
            total = (hidden * weights.unsqueeze(-1)).sum(1)  # [B, D]
            return total / weights.sum(dim=0).clamp(min=1e-9)  # [T]: the wrong axis

        scores = (
            F.normalize(pool(query_hidden, query_mask), dim=-1)
            @ F.normalize(pool(doc_hidden, doc_mask), dim=-1).T
        )
        return scores, scores.topk(k, dim=-1).indices

    with pytest.raises(AssertionError) as info:
        checks.check_pooling_and_search(count_over_batch)
    message = " ".join(str(info.value).split())
    assert "Likely mistake" not in message, message
    assert "Where it goes wrong" in message and "weights.sum(dim=0)" in message
