"""Lab 6's check: searches written three right ways pass; every mistake is named.

The implementations are written as a learner writes them, apart from the variants the check
computes, so a test passes only if the check recognises the mistake by what the function does.
"""

from __future__ import annotations

import pytest
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks
from attention_lab.checks import MISTAKES

check = checks.check_pooling_and_search


def flat(error: BaseException) -> str:
    return " ".join(str(error).split())


def with_(fn, **deviation):
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs, **deviation)

    wrong.__name__ = f"{fn.__name__}_with_{'_'.join(deviation)}"
    return wrong


def search(
    query_hidden,
    query_mask,
    doc_hidden,
    doc_mask,
    k,
    *,
    pool="masked",
    unsqueeze=True,
    clamp=True,
    normalise="both",
    dim=-1,
    transpose=False,
    rank="topk",
):
    def mean_pool(hidden, mask):
        if pool == "all":
            return hidden.mean(dim=1)
        weights = mask.unsqueeze(-1) if unsqueeze else mask
        weights = weights.to(hidden.dtype)
        count = weights.sum(dim=1)
        if clamp:
            count = count.clamp(min=1e-9)
        return (hidden * weights).sum(dim=1) / count

    queries, documents = mean_pool(query_hidden, query_mask), mean_pool(doc_hidden, doc_mask)
    if normalise == "by_hand":
        queries = queries / queries.norm(dim=-1, keepdim=True)
        documents = documents / documents.norm(dim=-1, keepdim=True)
    if normalise in ("both", "queries"):
        queries = F.normalize(queries, dim=dim)
    if normalise in ("both", "documents"):
        documents = F.normalize(documents, dim=dim)
    scores = documents @ queries.T if transpose else queries @ documents.T
    if rank == "argsort":
        return scores, scores.argsort(dim=-1)[:, :k]
    if rank == "over_queries":
        return scores, scores.topk(k, dim=0).indices
    return scores, scores.topk(k, dim=-1).indices


def scores_only(*args):
    return search(*args)[0]


def search_in_float64(query_hidden, query_mask, doc_hidden, doc_mask, k):
    return search(query_hidden.double(), query_mask, doc_hidden.double(), doc_mask, k)


RIGHT = [search]
WRONG = [
    (check, with_(search, pool="all"), "mean_over_padding"),
    (check, with_(search, unsqueeze=False), "pool_mask_not_unsqueezed"),
    (check, with_(search, clamp=False), "empty_sequence_nan"),
    (check, with_(search, normalise="by_hand"), "empty_sequence_nan"),
    (check, with_(search, normalise="none"), "cosine_not_normalised"),
    (check, with_(search, dim=0), "normalised_wrong_axis"),
    (check, with_(search, normalise="queries"), "normalised_one_side"),
    (check, with_(search, normalise="documents"), "normalised_one_side"),
    (check, with_(search, transpose=True), "search_scores_transposed"),
    (check, with_(search, rank="over_queries"), "search_scores_transposed"),
    (check, with_(search, rank="argsort"), "ranked_ascending"),
    (check, scores_only, "not_a_pair"),
    (check, search_in_float64, "wrong_dtype"),
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
    from attention_lab.checks import search

    assert set(search.MISTAKES) <= {key for _, _, key in WRONG}
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    assert {key for _, _, key in WRONG} <= documented
