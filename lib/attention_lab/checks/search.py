"""Lab 6: the check of masked mean pooling and cosine search."""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab.bert import mean_pool
from attention_lab.checks._core import (
    BROADCAST_ERROR,
    PRODUCT_ERROR,
    Case,
    Result,
    check_callable,
    close,
    compare,
    difference,
    fail,
    listed,
    match_variant,
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
            "the mean runs over the padding too (for the queries, the documents or both): "
            "multiply the token vectors by the mask, sum over the tokens, and divide by the "
            "number of real tokens, mask.sum(dim=1), not by T"
        ),
        "pool_mask_not_unsqueezed": (
            "the mask [B, T] does not broadcast against the token vectors [B, T, D]: give it a "
            "trailing axis, mask[..., None] (or mask.unsqueeze(-1)), shape [B, T, 1], so that "
            "it multiplies every feature of a token"
        ),
        "normalised_wrong_norm": (
            "each pooled vector is divided by another size than its length: divide by the "
            "square root of its sum of squares, x.norm(dim=-1, keepdim=True), or use "
            "F.normalize(x, dim=-1)"
        ),
        "pooled_last_token": (
            "the sentence vector is the last token's vector: mean-pool over all the real "
            "tokens, (hidden * mask[..., None]).sum(dim=1) / mask.sum(dim=1)"
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
        "tokens_normalised_before_pooling": (
            "the token vectors are scaled to length 1 before the mean: pool the raw token "
            "vectors first, then scale each pooled sentence vector to length 1 (the mean of "
            "unit vectors is shorter than 1, and scaling it again still weighs every token "
            "alike instead of by its length)"
        ),
        "normalised_by_whole_matrix": (
            "the pooled vectors are divided by the length of the whole matrix, x.norm() with "
            "no dim (the square root of the sum of squares over every sentence), not each by "
            "its own length: F.normalize(x, dim=-1), or x / x.norm(dim=-1, keepdim=True)"
        ),
        "pooled_first_token": (
            "the sentence vector is the first token's vector: mean-pool over all the real "
            "tokens, (hidden * mask[..., None]).sum(dim=1) / mask.sum(dim=1)"
        ),
        "max_pooled": (
            "the sentence vector is a maximum over the tokens: this lab mean-pools, "
            "(hidden * mask[..., None]).sum(dim=1) / mask.sum(dim=1)"
        ),
        "pool_mask_inverted": (
            "the mask is read the wrong way round: 1 (or True) marks a real token and 0 the "
            "padding, so multiply by mask itself, not by 1 - mask (or ~mask)"
        ),
        "top_values_not_indices": (
            "the second result holds the best scores, not the documents' indices: return "
            "scores.topk(k, dim=-1).indices"
        ),
        "top_not_best_first": (
            "the k best documents are there but not best first: topk sorts from the largest "
            "down (or sort with descending=True); argsort(...)[:, -k:] puts the best last"
        ),
        "top_skips_best": (
            "the ranking skips the best document: after sorting best first, keep the first k "
            "columns, [:, :k] (or scores.topk(k, dim=-1)), not [:, 1:k + 1]; no document is the "
            "query itself here"
        ),
        "top_wrong_count": (
            "off by one in how many documents are kept: each query keeps exactly k, "
            "scores.topk(k, dim=-1) or argsort(...)[:, :k]"
        ),
        "sequence_sum_without_keepdim": (
            "a sum over each sequence taken without keepdim (the number of real tokens, or the "
            "length of the pooled vector): it is [B] and then divides along the features; "
            "keep [B, 1], mask.sum(dim=1, keepdim=True) or x.norm(dim=-1, keepdim=True)"
        ),
        "scores_row_by_row": (
            "each query compared only with the document in the same row (an elementwise "
            "product, or cosine_similarity of the two [Q, D] and [N, D] tensors): compare every "
            "query with every document, queries @ documents.T, [Q, N]"
        ),
        "pooled_over_features": (
            "the pooling sums over the features, not the tokens: each sequence's vector is then "
            "[T] instead of [D]; sum over the tokens, dim=1, (hidden * mask[..., None]).sum(dim=1)"
        ),
        "scores_returned_sorted": (
            "the scores are returned sorted: return the [Q, N] matrix in the documents' order, "
            "scores[q, n] for document n; only the indices are ranked"
        ),
        "ranked_ascending": (
            "the ranking is upside down: you took the k smallest scores; the best matches have "
            "the largest cosine, scores.topk(k, dim=-1) (largest=True, the default)"
        ),
    }
)


def _search_reference(query_hidden, query_mask, doc_hidden, doc_mask, k):
    """The library's pooling, unit vectors, cosine scores [Q, N] and the top k indices [Q, k].

    Half-precision inputs are pooled in float64 and the scores rounded to their dtype at the
    end (in float16 the pooling's own clamp of 1e-9 rounds to 0)."""
    dtype = query_hidden.dtype
    if dtype in (torch.float16, torch.bfloat16):
        query_hidden, doc_hidden = query_hidden.double(), doc_hidden.double()
    queries = F.normalize(mean_pool(query_hidden, query_mask), dim=-1)  # [Q, D]
    documents = F.normalize(mean_pool(doc_hidden, doc_mask), dim=-1)  # [N, D]
    scores = queries @ documents.T  # [Q, N]
    return scores.to(dtype), scores.topk(k, dim=-1).indices


def _search_variant(query_hidden, query_mask, doc_hidden, doc_mask, k, mistake: str):
    """Pooling and search with one deliberate deviation, computed in float64."""
    mistake, _, how = mistake.partition("/")

    def pool(hidden, mask, side):
        hidden, weights = hidden.double(), mask.double()[..., None]  # [B, T, D], [B, T, 1]
        count = weights.sum(dim=1).clamp(min=1e-9)  # [B, 1]
        if mistake == "mean_over_padding" and how in ("queries", "documents"):
            return hidden.mean(dim=1) if how == side else (hidden * weights).sum(dim=1) / count
        if mistake == "mean_over_padding":
            return hidden.sum(dim=1) / count if how == "sum" else hidden.mean(dim=1)  # [B, D]
        if mistake == "pooled_first_token":
            return hidden[:, 0]  # [B, D]
        if mistake == "pooled_last_token":
            last = (weights[..., 0].sum(dim=1).long() - 1).clamp(min=0)  # [B]
            return hidden[:, -1] if how == "position" else hidden[torch.arange(len(last)), last]
        if mistake == "max_pooled":
            hidden = hidden.masked_fill(weights == 0, -math.inf) if how == "masked" else hidden
            return hidden.amax(dim=1).nan_to_num(neginf=0.0)  # [B, D]
        if mistake == "pool_mask_inverted":
            weights = 1 - weights
            count = weights.sum(dim=1).clamp(min=1e-9)
        if mistake == "tokens_normalised_before_pooling":
            hidden = F.normalize(hidden, dim=-1)
        return (hidden * weights).sum(dim=1) / count  # [B, D]

    queries = pool(query_hidden, query_mask, "queries")
    documents = pool(doc_hidden, doc_mask, "documents")
    if mistake == "normalised_wrong_axis":
        queries, documents = F.normalize(queries, dim=0), F.normalize(documents, dim=0)
    elif mistake == "normalised_by_whole_matrix":
        # The documents' whole [N, D] matrix; the queries' too, or each query its own length
        # (as a loop over the queries computes q @ documents.T / (q.norm() * documents.norm())).
        whole = queries.norm() if how == "both" else queries.norm(dim=-1, keepdim=True)
        queries, documents = queries / whole, documents / documents.norm()
    elif mistake == "tokens_normalised_before_pooling" and how == "only":
        pass  # the mean of unit vectors, never scaled to length 1 again
    elif mistake == "normalised_one_side":
        side = {"queries": queries, "documents": documents}
        side[how] = F.normalize(side[how], dim=-1)
        queries, documents = side["queries"], side["documents"]
    elif mistake == "normalised_wrong_norm":

        def size(x):
            return (x * x).sum(-1, keepdim=True) if how == "squared" else x.abs().sum(-1, True)

        queries, documents = queries / size(queries), documents / size(documents)
    elif mistake != "cosine_not_normalised":
        queries, documents = F.normalize(queries, dim=-1), F.normalize(documents, dim=-1)
    scores = queries @ documents.T  # [Q, N]
    ranked = scores.topk(k, dim=-1, largest=mistake != "ranked_ascending")  # [Q, k]
    top = ranked.values if mistake == "top_values_not_indices" else ranked.indices
    if mistake == "scores_returned_sorted":
        scores = scores.sort(dim=-1, descending=True).values
    if mistake == "top_skips_best":
        top = scores.topk(min(k + 1, scores.shape[-1]), dim=-1).indices[:, 1 : k + 1]
    if mistake == "top_not_best_first":
        top = top.flip(-1)
    return scores.to(query_hidden.dtype), top


_SEARCH_MISTAKES = (
    "mean_over_padding",
    "mean_over_padding/sum",
    "mean_over_padding/queries",
    "mean_over_padding/documents",
    "tokens_normalised_before_pooling",
    "tokens_normalised_before_pooling/only",
    "pooled_first_token",
    "pooled_last_token/real",
    "pooled_last_token/position",
    "max_pooled",
    "max_pooled/masked",
    "pool_mask_inverted",
    "cosine_not_normalised",
    "normalised_wrong_axis",
    "normalised_wrong_norm/squared",
    "normalised_wrong_norm/l1",
    "normalised_one_side/queries",
    "normalised_one_side/documents",
    "normalised_by_whole_matrix/documents",
    "normalised_by_whole_matrix/both",
    "ranked_ascending",
    "top_values_not_indices",
    "top_not_best_first",
    "top_skips_best",
    "scores_returned_sorted",
)


def _search_error(error: Exception, case: Case) -> str | None:
    """The mistake a crash of the pooling or the scores points to, by the two sizes PyTorch
    could not broadcast: a token count against the width or the batch (the mask without its
    trailing axis), the width against the batch (a count without keepdim), the queries against
    the documents (one score per row)."""
    text = str(error)
    # topk(k) along an axis shorter than k: every case has k <= N, but not always k <= Q.
    if "selected index k out of range" in text:
        return "search_scores_transposed"
    query_hidden, _, doc_hidden, _, _ = case.args
    product = PRODUCT_ERROR.search(text)
    inner = {int(size) for size in product.groups()} if product else set()
    if len(inner) == 2 and inner == {query_hidden.shape[1], doc_hidden.shape[1]}:
        return "pooled_over_features"  # [Q, Tq] @ [Tn, N]
    found = BROADCAST_ERROR.search(text)
    if not found:
        return None
    sizes = {int(size) for size in found.groups()[:2]}
    axis = found.group(3)
    (q, t_q, width), (n, t_n, _) = query_hidden.shape, doc_hidden.shape
    if sizes in ({t_q, width}, {t_n, width}) and axis not in (None, "2"):
        # A mask [B, T] against vectors [B, T, D] fails on axis 2; a count [T] against
        # sums [B, D] (a count over the batch axis) on axis 1, with the same two sizes.
        return None
    if sizes in ({t_q, width}, {t_n, width}, {q, t_q}, {n, t_n}):
        return "pool_mask_not_unsqueezed"
    if sizes in ({width, q}, {width, n}):
        return "sequence_sum_without_keepdim"
    return "scores_row_by_row" if sizes == {q, n} else None


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
        # The scores come back in the inputs' dtype: a mask turned into float32 weights
        # promotes float16 token vectors, which float32 and float64 inputs cannot show.
        case("float16 inputs, k=2", ([3, 2], 3), ([4, 1, 3, 2], 4), 2, dtype=torch.float16),
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
    ``float64``, ``float16``.

    Mistakes it names: ``mean_over_padding``, ``pool_mask_not_unsqueezed``,
    ``pool_mask_inverted``, ``tokens_normalised_before_pooling``, ``pooled_first_token``,
    ``max_pooled``, ``empty_sequence_nan``, ``cosine_not_normalised``,
    ``normalised_wrong_axis``, ``normalised_wrong_norm``, ``normalised_by_whole_matrix``,
    ``pooled_last_token``,
    ``normalised_one_side``, ``search_scores_transposed``,
    ``ranked_ascending``, ``top_values_not_indices``, ``top_not_best_first``,
    ``top_skips_best``, ``top_wrong_count``, ``sequence_sum_without_keepdim``,
    ``scores_row_by_row``, ``scores_returned_sorted``, ``pooled_over_features``, ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`). When none fits, the message says whether the
    scores or only the ranking are wrong, and which queries and documents (padded or not).

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

    for case in cases:
        query_hidden, query_mask, doc_hidden, doc_mask, k = case.args
        num_queries, num_docs = query_hidden.shape[0], doc_hidden.shape[0]
        expected_scores, expected_top = _search_reference(*case.args)
        result = run(fn, case, lambda error, case=case: _search_error(error, case))
        two_tensors(fn_name, case, result)
        scores, top = result

        def shape_mistake(name, shapes, q=num_queries, n=num_docs, k=k):
            if name == "scores" and shapes[0] == (n, q) and n != q:
                return "search_scores_transposed"
            if name == "scores" and shapes[0] == (min(q, n),) and q == n:
                return "scores_row_by_row"
            if name == "top indices" and shapes[1][:1] == (n,) and n != q:
                return "search_scores_transposed"  # ranked over the queries, one row per document
            if name == "top indices" and shapes[1] in ((q, k - 1), (q, k + 1)):
                return "top_wrong_count"
            return None

        def nonfinite(name, bad, doc_mask=doc_mask):
            empty = (doc_mask.long().sum(dim=1) == 0)[None, :]  # [1, N]
            return "NaN or inf", "empty_sequence_nan" if not (bad & ~empty).any() else None

        tol = tolerance(expected_scores.dtype)
        variants = {
            key: lambda key=key, args=case.args: _search_variant(*args, key)
            for key in _SEARCH_MISTAKES
        }
        context = (variants, case, expected_scores, expected_top, tol)

        def diagnose(got, context=context):
            variants, case, expected_scores, expected_top, tol = context
            if match_variant(got, variants, tol):
                return None  # compare names it
            if close(got[0], expected_scores, *tol):
                problem = f"the top indices are {got[1].tolist()}, expected {expected_top.tolist()}"
            else:
                problem = f"the scores differ: {difference(got[0], expected_scores)}"
            fail(fn_name, case, problem, None, where=_where(got, case, expected_scores, tol))

        compare(
            fn_name,
            case,
            [
                Result("scores", scores, expected_scores),
                Result("top indices", top, expected_top, exact=True, dtype=False, finite=False),
            ],
            tol,
            variants=variants,
            shape_mistake=shape_mistake,
            nonfinite=nonfinite,
            diagnose=diagnose,
        )
    success(fn, cases)


def _where(got, case: Case, expected_scores: torch.Tensor, tol) -> str:
    """Which part of the search is wrong: the ranking of right scores, or the scores of which
    sequences (padded or not)."""
    scores, top = got
    _, query_mask, _, doc_mask, k = case.args
    if close(scores, expected_scores, *tol):
        own = scores.topk(k, dim=-1).indices  # [Q, k]
        if top.shape == own.shape and torch.equal(top.sort(-1).values, own.sort(-1).values):
            return (
                "your scores are right and so is the set of each query's k best documents, "
                "but not their order: best first"
            )
        return (
            "your scores are right, so the ranking is wrong: each row of the indices must be "
            "that query's k largest scores over the documents (dim=-1), best first"
        )
    bad = ~torch.isclose(scores.double(), expected_scores.double(), atol=tol[0], rtol=tol[1])
    padded_docs = (doc_mask.long().sum(dim=1) < doc_mask.shape[1]).tolist()  # [N]
    padded_queries = (query_mask.long().sum(dim=1) < query_mask.shape[1]).tolist()  # [Q]
    bad_docs = bad.any(dim=0).nonzero().flatten().tolist()
    bad_queries = bad.any(dim=1).nonzero().flatten().tolist()
    unpadded_right = not any(
        bad[q, n]
        for q in range(bad.shape[0])
        for n in range(bad.shape[1])
        if not padded_queries[q] and not padded_docs[n]
    )
    if unpadded_right and any(not p for p in padded_docs) and any(not p for p in padded_queries):
        return (
            "the scores between sequences without padding are right, those involving a padded "
            f"sequence (documents {listed(bad_docs)}) are not: look at how the mask enters the "
            "pooling"
        )
    return (
        f"the scores differ for queries {listed(bad_queries)} and documents {listed(bad_docs)}, "
        "padded or not: look at the pooling's sum and count, then at the scaling to length 1 "
        "(each pooled vector [D] over dim=-1) and the product queries @ documents.T"
    )
