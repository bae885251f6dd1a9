"""Lab 6: the check of masked mean pooling and cosine search."""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab.bert import mean_pool
from attention_lab.checks._core import (
    Case,
    Result,
    check_callable,
    compare,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    tolerance,
    two_tensors,
)

__all__ = ["check_pooling_and_search"]

MISTAKES = register_mistakes(
    {
        "mean_over_padding": (
            "the mean runs over the padding too: multiply the token vectors by the mask, sum "
            "over the tokens, and divide by the number of real tokens, mask.sum(dim=1), not by T"
        ),
        "pool_mask_not_unsqueezed": (
            "the mask [B, T] does not broadcast against the token vectors [B, T, D]: give it a "
            "trailing axis, mask[..., None] (or mask.unsqueeze(-1)), shape [B, T, 1], so that "
            "it multiplies every feature of a token"
        ),
        "empty_sequence_nan": (
            "NaN for a sequence that is all padding: it has 0 real tokens and 0 / 0 is NaN; "
            "clamp the count (count.clamp(min=1e-9)) so that its pooled vector is 0, and "
            "normalise with F.normalize, which leaves a zero vector at 0 instead of dividing "
            "by its length 0"
        ),
        "cosine_not_normalised": (
            "the scores are dot products of unnormalised vectors, not cosines: scale each "
            "pooled vector to length 1 first, F.normalize(pooled, dim=-1), then multiply"
        ),
        "normalised_wrong_axis": (
            "vectors normalised over the wrong axis: dim=0 scales each feature across the "
            "batch; each sentence's vector [D] must have length 1, F.normalize(pooled, dim=-1)"
        ),
        "normalised_one_side": (
            "only one side normalised: the cosine needs both the queries' and the documents' "
            "vectors scaled to length 1"
        ),
        "search_scores_transposed": (
            "the scores are [N, Q], or ranked over the queries: compute queries @ documents.T, "
            "[Q, N], one row per query, and rank each row over the documents, "
            "scores.topk(k, dim=-1)"
        ),
        "ranked_ascending": (
            "the ranking is upside down: you took the k smallest scores; the best matches have "
            "the largest cosine, scores.topk(k, dim=-1) (largest=True, the default)"
        ),
    }
)


def _search_reference(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """The library's pooling, unit vectors, cosine scores [Q, N] and the top k indices [Q, k]."""
    queries = F.normalize(mean_pool(query_hidden, query_mask), dim=-1)  # [Q, D]
    documents = F.normalize(mean_pool(doc_hidden, doc_mask), dim=-1)  # [N, D]
    scores = queries @ documents.T  # [Q, N]
    return scores, scores.topk(k, dim=-1).indices


def _search_variant(query_hidden, query_mask, doc_hidden, doc_mask, k, mistake: str):
    """Pooling and search with one deliberate deviation, computed in float64."""

    def pool(hidden, mask):
        hidden, weights = hidden.double(), mask.double()[..., None]  # [B, T, D], [B, T, 1]
        if mistake == "mean_over_padding":
            return hidden.mean(dim=1)  # [B, D]
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)  # [B, D]

    queries, documents = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    if mistake == "normalised_wrong_axis":
        queries, documents = F.normalize(queries, dim=0), F.normalize(documents, dim=0)
    elif mistake == "normalised_one_side/queries":
        queries = F.normalize(queries, dim=-1)
    elif mistake == "normalised_one_side/documents":
        documents = F.normalize(documents, dim=-1)
    elif mistake != "cosine_not_normalised":
        queries, documents = F.normalize(queries, dim=-1), F.normalize(documents, dim=-1)
    scores = queries @ documents.T  # [Q, N]
    top = scores.topk(k, dim=-1, largest=mistake != "ranked_ascending").indices  # [Q, k]
    return scores.to(query_hidden.dtype), top


_SEARCH_MISTAKES = (
    "mean_over_padding",
    "cosine_not_normalised",
    "normalised_wrong_axis",
    "normalised_one_side/queries",
    "normalised_one_side/documents",
    "ranked_ascending",
)


def _search_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)

    def mask(lengths, length, dtype=torch.int64):
        return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).to(dtype)

    def case(name, queries, documents, k, dtype=torch.float32, mask_dtype=torch.int64):
        (q_lengths, q_len), (d_lengths, d_len), width = queries, documents, 8
        args = (
            randn(g, len(q_lengths), q_len, width, dtype=dtype),
            mask(q_lengths, q_len, mask_dtype),
            randn(g, len(d_lengths), d_len, width, dtype=dtype),
            mask(d_lengths, d_len, mask_dtype),
            k,
        )
        return Case(name, args)

    return [
        case(
            "2 queries of 4 and 2 tokens, 6 documents of 1 to 5 tokens, D=8, k=3",
            ([4, 2], 4),
            ([5, 3, 1, 4, 2, 5], 5),
            3,
        ),
        case(
            "3 queries, 4 documents, bool masks, k=2",
            ([3, 1, 2], 3),
            ([2, 6, 4, 1], 6),
            2,
            mask_dtype=torch.bool,
        ),
        case(
            "a document that is all padding (0 real tokens), k=3",
            ([2, 3], 3),
            ([4, 0, 2, 3], 4),
            3,
        ),
        case("one query, one document, k=1", ([2], 3), ([3], 3), 1),
        case("float64 inputs, k=2", ([3, 1], 3), ([2, 2, 5], 5), 2, dtype=torch.float64),
    ]


def check_pooling_and_search(fn: Callable) -> None:
    """Check a learner's ``fn(query_hidden, query_mask, doc_hidden, doc_mask, k)`` (Lab 6).

    ``fn`` receives the token vectors of ``Q`` queries, ``query_hidden`` ``[Q, Tq, D]``, and of
    ``N`` documents, ``doc_hidden`` ``[N, Tn, D]``, with their tokenizer masks ``[Q, Tq]`` and
    ``[N, Tn]`` (1 or ``True`` = real token, 0 or ``False`` = padding), and an int ``k``. It
    must mean-pool every sequence over its real tokens
    (:func:`attention_lab.bert.mean_pool`), scale the pooled vectors to length 1, and
    return ``(scores, top)``: the cosine similarities ``[Q, N]`` in the inputs' dtype, and the
    indices ``[Q, k]`` of each query's ``k`` best documents, best first. Cases: integer masks,
    bool masks, a document with no real token (its scores are 0), one query and one document,
    ``float64``.

    Mistakes it names: ``mean_over_padding``, ``pool_mask_not_unsqueezed``,
    ``empty_sequence_nan``, ``cosine_not_normalised``, ``normalised_wrong_axis``,
    ``normalised_one_side``, ``search_scores_transposed``, ``ranked_ascending``,
    ``not_a_pair``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _search_cases()
    fn_name = name_of(fn)

    def error_hint(error: Exception) -> str | None:
        if "must match the size of tensor" in str(error):
            return "pool_mask_not_unsqueezed"
        # topk(k) along an axis shorter than k: every case has k <= N, but not always k <= Q.
        return "search_scores_transposed" if "selected index k out of range" in str(error) else None

    for case in cases:
        query_hidden, query_mask, doc_hidden, doc_mask, k = case.args
        num_queries, num_docs = query_hidden.shape[0], doc_hidden.shape[0]
        expected_scores, expected_top = _search_reference(*case.args)
        result = run(fn, case, error_hint)
        two_tensors(fn_name, case, result)
        scores, top = result

        def shape_mistake(name, shapes, q=num_queries, n=num_docs):
            transposed = name == "scores" and shapes[0] == (n, q) and n != q
            return "search_scores_transposed" if transposed else None

        def nonfinite(name, bad, doc_mask=doc_mask):
            empty = (doc_mask.long().sum(dim=1) == 0)[None, :]  # [1, N]
            return "NaN or inf", "empty_sequence_nan" if not (bad & ~empty).any() else None

        compare(
            fn_name,
            case,
            [
                Result("scores", scores, expected_scores),
                Result("top indices", top, expected_top, exact=True, dtype=False, finite=False),
            ],
            tolerance(expected_scores.dtype),
            variants={
                key: lambda key=key, args=case.args: _search_variant(*args, key)
                for key in _SEARCH_MISTAKES
            },
            shape_mistake=shape_mistake,
            nonfinite=nonfinite,
        )
    success(fn, cases)
