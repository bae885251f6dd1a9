"""Lab 6's learner code, used as data: pooling and search.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_pooling_and_search in attention_lab.checks). ``check`` is the check; ``RIGHT`` lists
implementations, ``WRONG`` ``(check, implementation, mistake key)``. test_checks_lab06.py and
test_checks.py run them through the check.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks
from support.implementations import with_

check = checks.check_pooling_and_search


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
    keepdim=True,
    similarity="all_pairs",
    over=1,
):
    def mean_pool(hidden, mask, side):
        if pool == "all" or pool == f"all_for_{side}":
            return hidden.mean(dim=1)
        if pool == "sum_all_over_real":
            return hidden.sum(dim=1) / mask.sum(dim=1, keepdim=True)
        if pool == "first":
            return hidden[:, 0, :]
        if pool == "max":
            return hidden.max(dim=1).values
        if pool == "normalised_tokens":
            hidden = F.normalize(hidden, dim=-1)
        if pool == "inverted":
            mask = 1 - mask.long()
        weights = mask.unsqueeze(-1) if unsqueeze else mask
        weights = weights.to(hidden.dtype)
        count = weights.sum(dim=1) if keepdim else weights.sum(dim=1).squeeze(-1)
        if clamp:
            count = count.clamp(min=1e-9)
        return (hidden * weights).sum(dim=over) / count

    queries = mean_pool(query_hidden, query_mask, "queries")
    documents = mean_pool(doc_hidden, doc_mask, "documents")
    if normalise == "length_without_keepdim":
        queries = queries / queries.norm(dim=-1)
        documents = documents / documents.norm(dim=-1)
    if normalise == "by_hand":
        queries = queries / queries.norm(dim=-1, keepdim=True)
        documents = documents / documents.norm(dim=-1, keepdim=True)
    if normalise in ("both", "queries"):
        queries = F.normalize(queries, dim=dim)
    if normalise in ("both", "documents"):
        documents = F.normalize(documents, dim=dim)
    scores = documents @ queries.T if transpose else queries @ documents.T
    if similarity == "row_by_row":
        scores = (queries * documents).sum(dim=-1)
    if rank == "sorted":
        ranked = scores.sort(dim=-1, descending=True)
        return ranked.values, ranked.indices[:, :k]
    if rank == "skip_best":
        return scores, scores.argsort(dim=-1, descending=True)[:, 1 : k + 1]
    if rank == "one_more":
        return scores, scores.topk(min(k + 1, scores.shape[-1]), dim=-1).indices
    if rank == "argsort":
        return scores, scores.argsort(dim=-1)[:, :k]
    if rank == "argsort_last":
        return scores, scores.argsort(dim=-1)[:, -k:]
    if rank == "values":
        return scores, scores.topk(k, dim=-1).values
    if rank == "over_queries":
        return scores, scores.topk(k, dim=0).indices
    if rank == "over_queries_transposed":
        return scores, scores.topk(min(k, scores.shape[0]), dim=0).indices.T
    return scores, scores.topk(k, dim=-1).indices


def scores_only(*args):
    return search(*args)[0]


def search_in_float64(query_hidden, query_mask, doc_hidden, doc_mask, k):
    return search(query_hidden.double(), query_mask, doc_hidden.double(), doc_mask, k)


def search_with_float32_weights(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """The mask made float32 weights: float16 token vectors are promoted, scores float32."""

    def pool(hidden, mask):
        weights = mask.unsqueeze(-1).float()  # [B, T, 1]
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    queries = F.normalize(pool(query_hidden, query_mask), dim=-1)
    documents = F.normalize(pool(doc_hidden, doc_mask), dim=-1)
    scores = queries @ documents.T
    return scores, scores.topk(k, dim=-1).indices


def search_with_einsum_and_sort(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Right: a bool mask, torch.where for the padding, norms by hand with a floor, sort."""

    def pool(hidden, mask):
        keep = mask.bool().unsqueeze(-1)  # [B, T, 1]
        total = torch.where(keep, hidden, torch.zeros(())).sum(1)
        return total / keep.sum(1).clamp(min=1)

    q, d = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    q = q / q.norm(dim=1, keepdim=True).clamp(min=1e-12)
    d = d / d.norm(dim=1, keepdim=True).clamp(min=1e-12)
    scores = torch.einsum("qd,nd->qn", q, d)
    order = scores.sort(dim=1, descending=True).indices
    return scores, order[:, :k]


def search_with_cosine_similarity(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Right: a pooled sum (the cosine ignores the length), F.cosine_similarity, one row at
    a time."""

    def pooled_sum(hidden, mask):
        return (hidden * mask[:, :, None].to(hidden.dtype)).sum(dim=1)

    q, d = pooled_sum(query_hidden, query_mask), pooled_sum(doc_hidden, doc_mask)
    rows = [F.cosine_similarity(q[i : i + 1], d, dim=-1, eps=1e-30) for i in range(len(q))]
    scores = torch.stack(rows)
    return scores, torch.stack([row.topk(k).indices for row in rows])


def search_pooling_the_last_token(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: the last real token stands for the sequence (as a decoder's embedding does)."""

    def last(hidden, mask):
        lengths = mask.long().sum(dim=1)  # [B]
        return torch.stack([h[max(int(n) - 1, 0)] for h, n in zip(hidden, lengths, strict=True)])

    queries = F.normalize(last(query_hidden, query_mask), dim=-1)
    documents = F.normalize(last(doc_hidden, doc_mask), dim=-1)
    scores = queries @ documents.T
    return scores, scores.topk(k).indices


def search_divided_by_squared_length(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: each pooled vector divided by its squared length (the square root forgotten)."""

    def unit(hidden, mask):
        m = mask.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return pooled / pooled.pow(2).sum(-1, keepdim=True).clamp(min=1e-12)

    scores = unit(query_hidden, query_mask) @ unit(doc_hidden, doc_mask).T
    return scores, scores.topk(k, dim=1).indices


def search_query_by_query_over_all_documents_norm(
    query_hidden, query_mask, doc_hidden, doc_mask, k
):
    """Wrong: a cosine per query in a loop, divided by the norm of the whole documents matrix
    (no dim) instead of each document's length."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    q, d = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    rows = [d @ q[i] / (q[i].norm() * d.norm()) for i in range(len(q))]
    scores = torch.stack(rows)
    return scores, scores.topk(k, dim=-1).indices


def search_everything_over_one_norm(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """Wrong: both sides divided by their whole matrix's norm, as if normalising a tensor."""

    def pool(hidden, mask):
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    q, d = pool(query_hidden, query_mask), pool(doc_hidden, doc_mask)
    scores = (q / q.norm()) @ (d / d.norm()).T
    return scores, scores.topk(k, dim=-1).indices


RIGHT = [search, search_with_einsum_and_sort, search_with_cosine_similarity]
WRONG = [
    (check, search_pooling_the_last_token, "pooled_last_token"),
    (check, search_divided_by_squared_length, "normalised_wrong_norm"),
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
    (check, search_with_float32_weights, "wrong_dtype"),
    (check, with_(search, pool="sum_all_over_real"), "mean_over_padding"),
    (check, with_(search, pool="normalised_tokens"), "tokens_normalised_before_pooling"),
    (
        check,
        with_(search, pool="normalised_tokens", normalise="none"),
        "tokens_normalised_before_pooling",
    ),
    (check, search_query_by_query_over_all_documents_norm, "normalised_by_whole_matrix"),
    (check, search_everything_over_one_norm, "normalised_by_whole_matrix"),
    (check, with_(search, pool="first"), "pooled_first_token"),
    (check, with_(search, pool="max"), "max_pooled"),
    (check, with_(search, pool="inverted"), "pool_mask_inverted"),
    (check, with_(search, rank="values"), "top_values_not_indices"),
    (check, with_(search, rank="argsort_last"), "top_not_best_first"),
    (check, with_(search, rank="skip_best"), "top_skips_best"),
    (check, with_(search, rank="sorted"), "scores_returned_sorted"),
    (check, with_(search, over=-1), "pooled_over_features"),
    (check, with_(search, pool="all_for_queries"), "mean_over_padding"),
    (check, with_(search, pool="all_for_documents"), "mean_over_padding"),
    (check, with_(search, rank="over_queries_transposed"), "search_scores_transposed"),
    (check, with_(search, rank="one_more"), "top_wrong_count"),
    (check, with_(search, keepdim=False), "sequence_sum_without_keepdim"),
    (check, with_(search, normalise="length_without_keepdim"), "sequence_sum_without_keepdim"),
    (check, with_(search, similarity="row_by_row"), "scores_row_by_row"),
]
