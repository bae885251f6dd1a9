"""Self-checks for the labs: run a learner's function and compare it with the library's.

Each ``check_*`` function calls the learner's function on a list of cases (several shapes and
dtypes, masks, and edge cases such as a single token or a query whose keys are all blocked) and
compares the result with what the library computes. It prints one success line, or raises
``AssertionError`` naming the first case that does not match, what differs, and the likely
mistake.

The likely mistake is found by what the function *does*, not by reading its code: on a failing
case the check also computes the classic wrong versions (softmax over the wrong axis, a missing
or wrong scale, an inverted mask, heads merged without the transpose, sine and cosine swapped,
...) and reports the one the learner's result matches. :data:`MISTAKES` lists every mistake
the checks can name.

The checks run in a few hundred milliseconds, touch no global random state and need no
gradient: they run the learner's function under ``torch.no_grad()``.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.efficient import peak_memory, tiled_attention
from attention_lab.layers import EncoderLayer
from attention_lab.masks import causal_mask, combine_masks, padding_mask
from attention_lab.positional import sinusoidal_encoding
from attention_lab.pretrained import mean_pool

__all__ = [
    "MISTAKES",
    "check_encoder_layer",
    "check_kv_cache_decoding",
    "check_masked_attention",
    "check_multi_head_attention",
    "check_online_softmax",
    "check_pooling_and_search",
    "check_scaled_dot_product_attention",
    "check_sinusoidal_encoding",
]

#: Every mistake a check can recognise, by key, with the explanation it prints.
MISTAKES: dict[str, str] = {
    # Attention itself.
    "softmax_axis": (
        "softmax over the wrong axis: each query's row must be normalised over the keys, "
        "dim=-1, not over the queries (dim=-2)"
    ),
    "no_scaling": "missing scaling: divide the scores Q K^T by sqrt(d_k) before the softmax",
    "scaled_by_d_k": "wrong scaling: you divided by d_k instead of by sqrt(d_k)",
    "scale_multiplied": "wrong scaling: you multiplied by sqrt(d_k) instead of dividing by it",
    "scaled_by_sqrt_d_model": (
        "wrong scaling: you divided by sqrt(d_model) instead of sqrt(d_k), the width of one "
        "head (d_k = d_model / num_heads)"
    ),
    "no_softmax": "no softmax: the weights are the raw scaled scores; apply softmax over dim=-1",
    "scaled_after_softmax": (
        "scaling applied after the softmax: the weights then sum to 1/sqrt(d_k), not to 1; "
        "divide the scores by sqrt(d_k) before the softmax, which sharpens or flattens them"
    ),
    "scores_transposed": (
        "scores not Q K^T: compute query @ key.transpose(-2, -1), shape [..., Tq, Tk] (not "
        "K Q^T, nor Q K without transposing the keys); then weights @ value is [..., Tq, Dv]"
    ),
    "weights_times_keys": (
        "output not the weighted sum of values: you multiplied the weights by the keys; "
        "the output is weights @ value"
    ),
    "output_is_weights": (
        "output not the weighted sum of values: you returned the weights as the output; "
        "multiply them by the values (weights @ value)"
    ),
    "pair_swapped": "you returned (weights, output); return (output, weights)",
    "not_a_pair": "return a tuple (output, weights), not a single tensor",
    "overflow": (
        "the softmax overflowed on large scores (inf or NaN): subtract each row's maximum "
        "before exponentiating, or use torch.softmax"
    ),
    "wrong_dtype": (
        "the result has another dtype than the input: compute in the input's dtype (a "
        "tensor created without dtype= is float32)"
    ),
    # Heads.
    "merge_without_transpose": (
        "heads merged with view/reshape without the transpose: [B, H, Tq, Dh] must become "
        "[B, Tq, H, Dh] (transpose(1, 2)) before reshaping to [B, Tq, D]"
    ),
    "split_without_transpose": (
        "heads split with view/reshape straight to [B, H, T, Dh]: view as [B, T, H, Dh] "
        "first, then transpose(1, 2)"
    ),
    "split_and_merge_without_transpose": (
        "heads split and merged with view/reshape but no transpose: each 'head' then mixes "
        "positions; view as [B, T, H, Dh] and transpose(1, 2), and transpose back before merging"
    ),
    "merge_wrong_permutation": (
        "heads merged with the wrong permutation: [B, H, Tq, Dh] must become [B, Tq, H, Dh], "
        "permute(0, 2, 1, 3) or transpose(1, 2), before reshaping to [B, Tq, D]; another order "
        "(such as permute(0, 2, 3, 1), which gives [B, Tq, Dh, H]) interleaves the heads' "
        "features or mixes positions"
    ),
    "split_with_query_length": (
        "keys or values split with the query's length: in cross-attention Tk differs from Tq, "
        "so split each tensor with its own length, x.view(B, x.shape[1], num_heads, head_dim)"
    ),
    "heads_and_width_swapped": (
        "num_heads and head_dim swapped: split into num_heads heads of width "
        "d_model // num_heads, i.e. view(B, T, num_heads, head_dim)"
    ),
    "heads_not_merged": "heads not merged: the output must be [B, Tq, D], not [B, H, Tq, Dh]",
    "weights_averaged": "weights averaged over heads: return every head's weights, [B, H, Tq, Tk]",
    "view_after_transpose": (
        "heads merged with .view() right after transpose(1, 2): the transposed tensor is not "
        "contiguous, so view cannot merge its last two axes; use .reshape(B, Tq, D), or "
        ".contiguous().view(B, Tq, D)"
    ),
    # Positional encoding.
    "sin_cos_swapped": (
        "sine and cosine swapped: even columns (0, 2, 4, ...) hold the sine, odd columns the cosine"
    ),
    "frequency_i_not_2i": (
        "frequencies use i instead of 2i: column pair i has the angle "
        "pos / base ** (2i / d_model), not pos / base ** (i / d_model)"
    ),
    "frequency_column_index": (
        "each column uses its own index j in the exponent: the sine in column 2i and the "
        "cosine in column 2i + 1 share one frequency, 1 / base ** (2i / d_model)"
    ),
    "frequency_inverted": (
        "frequency inverted: divide the position by base ** (2i / d_model), do not multiply"
    ),
    "halves_not_interleaved": (
        "sines and cosines in two halves: interleave them, sine in column 2i and cosine in "
        "column 2i + 1"
    ),
    "positions_from_one": (
        "positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1)"
    ),
    "encoding_transposed": "the encoding is transposed: return [max_len, d_model]",
    "odd_d_model": (
        "an odd d_model fails: the last column is then a sine without a cosine partner, so "
        "there is one cosine column fewer than sine columns"
    ),
    # Masks.
    "mask_polarity": (
        "inverted mask polarity: True means 'may attend', so block where the mask is False "
        "(scores.masked_fill(~mask, ...))"
    ),
    "mask_ignored": "the mask is ignored: blocked keys must get a weight of exactly 0",
    "scores_times_mask": (
        "scores multiplied by the mask: a blocked score becomes 0, not a very negative number, "
        "and exp(0) = 1 still gives that key a weight; fill the blocked scores instead, "
        "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)"
    ),
    "mask_after_softmax": (
        "weights zeroed after the softmax without renormalising: the rows no longer sum to 1; "
        "mask the scores before the softmax"
    ),
    "nan_fully_masked": (
        "NaN in a fully masked row: filling with -inf gives 0 / 0 when every key is blocked; "
        "fill with torch.finfo(scores.dtype).min and set the weights of such rows to 0"
    ),
    "uniform_fully_masked": (
        "a fully masked row gets uniform weights: when every key is blocked the weights (and "
        "the output) must be 0; zero the blocked weights after the softmax"
    ),
    "fill_overflow": (
        "the fill value does not fit in float16 (e.g. -1e9): use torch.finfo(scores.dtype).min"
    ),
    # Encoder layer.
    "pre_norm_instead_of_post_norm": (
        "pre-norm computed for a post-norm layer (layer.norm_first is False): "
        "x = norm1(x + attention(x)), then x = norm2(x + feed_forward(x))"
    ),
    "post_norm_instead_of_pre_norm": (
        "post-norm computed for a pre-norm layer (layer.norm_first is True): "
        "x = x + attention(norm1(x)), then x = x + feed_forward(norm2(x))"
    ),
    "no_attention_residual": (
        "missing residual connection around the attention: add the sub-layer's input back"
    ),
    "no_feed_forward_residual": (
        "missing residual connection around the feed-forward network: add its input back"
    ),
    "norm_outside_residual": (
        "LayerNorm applied to the sub-layer's output before the residual sum: post-norm "
        "normalises the sum, norm(x + sublayer(x))"
    ),
    "norms_swapped": (
        "norm1 and norm2 swapped: norm1 belongs to the attention, norm2 to the feed-forward"
    ),
    "norm1_used_twice": (
        "norm1 used for both sub-layers: the feed-forward sub-layer has its own LayerNorm, "
        "norm2, with its own learned scale and shift"
    ),
    "pre_norm_residual_normalised": (
        "the pre-norm residual adds the normalised x: normalise only the sub-layer's input and "
        "add the sub-layer's output to the unnormalised x, x = x + attention(norm1(x)), "
        "not h = norm1(x); x = h + attention(h)"
    ),
    "encoder_mask_ignored": (
        "the mask is not passed to the self-attention: layer.self_attn(..., mask=mask)"
    ),
    # Pooling and search.
    "mean_over_padding": (
        "the mean runs over the padding too: multiply the token vectors by the mask, sum over "
        "the tokens, and divide by the number of real tokens, mask.sum(dim=1), not by T"
    ),
    "pool_mask_not_unsqueezed": (
        "the mask [B, T] does not broadcast against the token vectors [B, T, D]: give it a "
        "trailing axis, mask[..., None] (or mask.unsqueeze(-1)), shape [B, T, 1], so that it "
        "multiplies every feature of a token"
    ),
    "empty_sequence_nan": (
        "NaN for a sequence that is all padding: it has 0 real tokens and 0 / 0 is NaN; clamp "
        "the count (count.clamp(min=1e-9)) so that its pooled vector is 0, and normalise with "
        "F.normalize, which leaves a zero vector at 0 instead of dividing by its length 0"
    ),
    "cosine_not_normalised": (
        "the scores are dot products of unnormalised vectors, not cosines: scale each pooled "
        "vector to length 1 first, F.normalize(pooled, dim=-1), then multiply"
    ),
    "normalised_wrong_axis": (
        "vectors normalised over the wrong axis: dim=0 scales each feature across the batch; "
        "each sentence's vector [D] must have length 1, F.normalize(pooled, dim=-1)"
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
        "the ranking is upside down: you took the k smallest scores; the best matches have the "
        "largest cosine, scores.topk(k, dim=-1) (largest=True, the default)"
    ),
    # Online softmax.
    "sum_not_rescaled": (
        "the running sum is not rescaled when the running maximum grows: multiply it by "
        "exp(m_old - m_new) before adding the new block, as you do for the weighted sum"
    ),
    "acc_not_rescaled": (
        "the weighted sum of values is not rescaled when the running maximum grows: multiply "
        "it by exp(m_old - m_new) before adding the new block, as you do for the sum"
    ),
    "nothing_rescaled": (
        "nothing is rescaled when the running maximum grows: the sum and the weighted sum so "
        "far were computed relative to the old maximum; multiply both by exp(m_old - m_new)"
    ),
    "rescale_inverted": (
        "rescaling factor inverted: going from the old maximum to a larger new one multiplies "
        "the sums by exp(m_old - m_new), which is at most 1, not by exp(m_new - m_old); with "
        "the maximum starting at -inf, the inverted factor is inf on the first block, and "
        "0 * inf is NaN"
    ),
    "not_divided_by_sum": (
        "the output is not divided by the running sum: after the last block return acc / "
        "row_sum, the softmax-weighted average"
    ),
    "last_block_dropped": (
        "the last, shorter block is skipped: when Tk is not a multiple of block_size, the "
        "blocks are range(0, Tk, block_size), and the last one holds the remaining keys"
    ),
    "online_overflow": (
        "exp overflowed on large scores (inf or NaN): subtract the running maximum, the "
        "largest score in this block and every block before it, torch.maximum(row_max, "
        "block_max), before exponentiating"
    ),
    "max_started_at_zero": (
        "NaN when every score is far below 0: the running maximum must start at -inf (or "
        "torch.finfo(dtype).min), not at 0; from 0, exp(score - 0) underflows to 0 and the "
        "sum is 0"
    ),
    # Key/value cache.
    "cache_wrong_axis": (
        "the cache grows along the wrong axis: keys and values are [B, H, t, Dh] and grow "
        "along the positions, dim=2 (torch.cat([keys, k], dim=2)), not along the batch, the "
        "heads or the head width"
    ),
    "positions_restart": (
        "every new token gets position 0: the token decoded at step t sits at position t "
        "(the number of tokens already in the cache), so add row t of the encoding, not row 0"
    ),
    "no_positions": (
        "no positional encoding: add the encoding of each token's position to its embedding "
        "before the projections"
    ),
    "cache_replaced": (
        "the cache is replaced instead of extended: each new token then sees only itself; "
        "append its key and value to the keys and values of the earlier tokens"
    ),
    "appended_after_attending": (
        "the new token attends before its own key and value are in the cache, so it cannot "
        "see itself (and the first token sees nothing); append first, then attend"
    ),
    "prefix_recomputed": (
        "the whole prefix is projected again at every step: with a cache, project only the "
        "new token (one query, one key, one value per step) and reuse the cached keys and "
        "values of the earlier ones"
    ),
    "full_score_matrix": (
        "the whole [Tq, Tk] score matrix was built: compute only one block of scores, "
        "[..., Tq, block_size], at a time, so that memory does not grow with Tq * Tk"
    ),
}

_UNKNOWN = (
    "none of the common mistakes this check knows; print your intermediate tensors and "
    "compare them with the step-by-step computation in the chapter"
)


@dataclass
class _Case:
    """One call of the learner's function: a readable name and the arguments."""

    name: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    fully_masked_rows: torch.Tensor | None = None  # bool [..., Tq, 1] where every key is blocked
    large_scores: bool = False  # scores large enough to overflow a naive exp
    count_memory: bool = False  # the memory the call allocates is counted (Lab 7)


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _check_callable(fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a function (callable), got {type(fn).__name__}")


def _wrap(message: str, width: int = 76) -> str:
    """Wrap each line of ``message`` to ``width`` columns, leaving room on the first line for
    the ``AssertionError: `` in front of it, so that no line needs a horizontal scrollbar."""
    prefix = " " * len("AssertionError: ")
    lines = []
    for index, paragraph in enumerate(message.split("\n")):
        indent = prefix if index == 0 else ""
        wrapped = textwrap.wrap(
            paragraph,
            width,
            initial_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines += [wrapped[0].removeprefix(indent), *wrapped[1:]] if wrapped else [""]
    return "\n".join(lines)


def _fail(fn_name: str, case: _Case, problem: str, mistake: str | None) -> None:
    likely = MISTAKES[mistake] if mistake else _UNKNOWN
    raise AssertionError(
        _wrap(
            f"{fn_name} does not match the library on case '{case.name}': {problem}.\n"
            f"Likely mistake: {likely}."
        )
    )


def _two_tensors(fn_name: str, case: _Case, result) -> None:
    """Fail unless the learner's function returned two tensors (a tuple or a list)."""
    if not (
        isinstance(result, tuple | list)
        and len(result) == 2
        and all(isinstance(r, torch.Tensor) for r in result)
    ):
        _fail(fn_name, case, f"it returned {type(result).__name__}, not two tensors", "not_a_pair")


def _run(fn: Callable, case: _Case, error_hint: Callable[[Exception], str | None] | None = None):
    """Call ``fn`` on ``case``; turn the stub's NotImplementedError and crashes into messages."""
    fn_name = _name(fn)
    try:
        with torch.no_grad():
            return fn(*case.args, **case.kwargs)
    except NotImplementedError:
        raise AssertionError(
            _wrap(
                f"{fn_name} raised NotImplementedError: it is still the stub. Replace the line "
                '"raise NotImplementedError(...)" with your implementation, run that cell, '
                "then run this check again."
            )
        ) from None
    except Exception as error:
        mistake = error_hint(error) if error_hint else None
        likely = f"\nLikely mistake: {MISTAKES[mistake]}." if mistake else ""
        raise AssertionError(
            _wrap(f"{fn_name} raised {type(error).__name__} on case '{case.name}': {error}{likely}")
        ) from error


def _close(got: Any, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    return torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol)


def _difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    diff = (got.double() - expected.double()).abs().nan_to_num(nan=math.inf)
    index = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return (
        f"largest difference {diff.max().item():.3g} at index {list(index)} "
        f"(got {got[index].item():.4g}, expected {expected[index].item():.4g})"
    )


def _the(what: str, verb: str) -> str:
    """'the output differs', 'the weights differ': the verb agrees with the noun."""
    if what == "weights":
        verb = {"has": "have", "is": "are"}.get(verb, verb.removesuffix("s"))
    return f"the {what} {verb}"


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing a result computed in ``dtype`` with a float64 reference."""
    return {torch.float16: (3e-3, 3e-3), torch.bfloat16: (2e-2, 2e-2)}.get(dtype, (1e-5, 1e-4))


def _match_variant(
    got: Sequence[torch.Tensor], variants: dict[str, Callable[[], Sequence[torch.Tensor]]], tol
) -> str | None:
    """The key of the first wrong variant whose results all match ``got``.

    A key may carry a suffix after a slash (``"merge_wrong_permutation/0312"``): several ways of
    making one mistake, all named by the part before the slash.
    """
    for key, compute in variants.items():
        try:
            expected = compute()
        except RuntimeError:  # a variant that makes no sense for these shapes
            continue
        if all(_close(g, e, *tol) for g, e in zip(got, expected, strict=True)):
            return key.partition("/")[0]
    return None


def _check_pair(
    fn_name: str,
    case: _Case,
    result: Any,
    expected: tuple[torch.Tensor, torch.Tensor],
    variants: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]],
    shape_mistake: Callable[[torch.Size, torch.Size], str | None] = lambda out, w: None,
) -> None:
    """Compare a learner's ``(output, weights)`` with the library's, or fail with a diagnosis."""
    expected_out, expected_w = expected
    if isinstance(result, torch.Tensor):
        _fail(fn_name, case, f"it returned one tensor of shape {list(result.shape)}", "not_a_pair")
    _two_tensors(fn_name, case, result)
    out, w = result
    if (
        out.shape == expected_w.shape
        and w.shape == expected_out.shape
        and expected_out.shape != expected_w.shape
    ):
        _fail(fn_name, case, "the output has the weights' shape and the reverse", "pair_swapped")
    for what, got, want in (("output", out, expected_out), ("weights", w, expected_w)):
        if got.shape != want.shape:
            _fail(
                fn_name,
                case,
                f"{_the(what, 'has')} shape {list(got.shape)}, expected {list(want.shape)}",
                shape_mistake(out.shape, w.shape),
            )
    for what, got, want in (("output", out, expected_out), ("weights", w, expected_w)):
        if got.dtype != want.dtype:
            _fail(
                fn_name,
                case,
                f"{_the(what, 'is')} {got.dtype}, expected {want.dtype}",
                "wrong_dtype",
            )
    tol = _tolerance(expected_out.dtype)
    for what, got in (("output", out), ("weights", w)):
        bad = ~got.isfinite()
        if bad.any():
            rows = case.fully_masked_rows
            if rows is not None and not (bad & ~rows.expand_as(bad)).any():
                _fail(fn_name, case, f"{_the(what, 'contains')} NaN", "nan_fully_masked")
            mistake = "overflow" if case.large_scores else None
            _fail(fn_name, case, f"{_the(what, 'contains')} NaN or inf", mistake)
    if _close(out, expected_out, *tol) and _close(w, expected_w, *tol):
        return
    if case.fully_masked_rows is not None:
        rows = case.fully_masked_rows.expand_as(w)
        tk = w.shape[-1]
        uniform = torch.full_like(w.double(), 1.0 / tk)
        if rows.any() and torch.allclose(w.double()[rows], uniform[rows], atol=tol[0]):
            _fail(
                fn_name, case, "the weights of a fully masked row are not 0", "uniform_fully_masked"
            )
    what, got, want = (
        ("weights", w, expected_w)
        if not _close(w, expected_w, *tol)
        else ("output", out, expected_out)
    )
    mistake = _match_variant((out, w), variants, tol)
    if mistake is None and _close(out, expected_w, *tol):
        mistake = "output_is_weights"
    _fail(fn_name, case, f"{_the(what, 'differs')}: {_difference(got, want)}", mistake)


# ---------------------------------------------------------------------------------------------
# Wrong variants of attention, computed in float64 and cast back.


def _attention_variant(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    divisor: float | None = None,
    dim: int = -1,
    softmax: bool = True,
    use_keys: bool = False,
    scores_transposed: bool = False,
    invert_mask: bool = False,
    mask_after_softmax: bool = False,
    scale_after_softmax: bool = False,
    multiply_by_mask: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with one deliberate deviation; the defaults give the right answer."""
    dtype = query.dtype
    q, k, v = query.double(), key.double(), value.double()
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    scores = k @ q.transpose(-2, -1) if scores_transposed else q @ k.transpose(-2, -1)
    if not scale_after_softmax:
        scores = scores / divisor
    if mask is not None and invert_mask:
        mask = ~mask
    if mask is not None and multiply_by_mask:
        scores = scores * mask  # blocked scores become 0, and keep a weight
        mask = None
    if mask is not None and not mask_after_softmax:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim) if softmax else scores
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if scale_after_softmax:
        weights = weights / divisor
    output = weights @ (k if use_keys else v)
    return output.to(dtype), weights.to(dtype)


def _attention_variants(query, key, value, mask=None) -> dict[str, Callable]:
    d_k = query.shape[-1]

    def variant(**kwargs):
        return lambda: _attention_variant(query, key, value, mask, **kwargs)

    return {
        "softmax_axis": variant(dim=-2),
        "no_scaling": variant(divisor=1.0),
        "scaled_by_d_k": variant(divisor=float(d_k)),
        "scale_multiplied": variant(divisor=1 / math.sqrt(d_k)),
        "no_softmax": variant(softmax=False),
        "scaled_after_softmax": variant(scale_after_softmax=True),
        "weights_times_keys": variant(use_keys=True),
    }


def _attention_shape_mistake(query, key, value):
    """Names the mistake that gives a wrong output or weights shape, for the given inputs."""
    lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    tq, tk, d_k, d_v = query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]

    def mistake(out_shape, w_shape):
        if w_shape == (*lead, tk, tq) and tq != tk:
            return "scores_transposed"
        if out_shape == (*lead, tq, d_k) and d_k != d_v:
            return "weights_times_keys"
        if out_shape == (*lead, tq, tk) and tk != d_v:
            return "output_is_weights"
        return None

    return mistake


def _matmul_error(error: Exception) -> str | None:
    """A matrix product of mismatched shapes in attention: most often the keys' transpose."""
    text = str(error)
    shapes = ("cannot be multiplied", "Expected size", "must match the size")
    return "scores_transposed" if any(s in text for s in shapes) else None


def _view_error(error: Exception) -> str | None:
    """``view`` on a transposed (non-contiguous) tensor: the heads merged without a copy."""
    return "view_after_transpose" if "view size is not compatible" in str(error) else None


def _randn(generator: torch.Generator, *shape: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def _success(fn: Callable, cases: Sequence[_Case]) -> None:
    print(f"✓ {_name(fn)} matches the library on all {len(cases)} cases.")


# ---------------------------------------------------------------------------------------------
# Lab 1: scaled dot-product attention.


def _sdpa_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(0)
    return [
        _Case(
            "batch of 2, 3 queries, 5 keys, d_k=4, d_v=6",
            (_randn(g, 2, 3, 4), _randn(g, 2, 5, 4), _randn(g, 2, 5, 6)),
        ),
        _Case(
            "heads [B, H, T, Dh] = [2, 3, 7, 16]",
            (_randn(g, 2, 3, 7, 16), _randn(g, 2, 3, 7, 16), _randn(g, 2, 3, 7, 16)),
        ),
        _Case(
            "a single token [1, 1, 8]", (_randn(g, 1, 1, 8), _randn(g, 1, 1, 8), _randn(g, 1, 1, 8))
        ),
        _Case(
            "unbatched [Tq, Dk] = [4, 8], equal widths",
            (_randn(g, 4, 8), _randn(g, 4, 8), _randn(g, 4, 8)),
        ),
        _Case(
            "float64 inputs",
            tuple(_randn(g, 2, 4, 8, dtype=torch.float64) for _ in range(3)),
        ),
        _Case(
            "large scores (entries around 30)",
            (30 * _randn(g, 1, 4, 8), 30 * _randn(g, 1, 6, 8), _randn(g, 1, 6, 3)),
            large_scores=True,
        ),
    ]


def check_scaled_dot_product_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value) -> (output, weights)`` (Lab 1).

    ``fn`` receives ``query`` ``[..., Tq, Dk]``, ``key`` ``[..., Tk, Dk]`` and ``value``
    ``[..., Tk, Dv]`` and must return ``softmax(query @ key^T / sqrt(Dk)) @ value`` and the
    weights, as :func:`attention_lab.attention.scaled_dot_product_attention` does without a mask.
    Cases: a batch with ``Tq != Tk`` and ``Dk != Dv``, four-dimensional ``[B, H, T, Dh]``
    inputs, a single token, unbatched inputs, ``float64`` and large scores.

    Mistakes it names: ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``,
    ``scale_multiplied``, ``no_softmax``, ``scaled_after_softmax``, ``scores_transposed``,
    ``weights_times_keys``, ``output_is_weights``, ``pair_swapped``, ``not_a_pair``,
    ``overflow``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _sdpa_cases()
    for case in cases:
        result = _run(fn, case, _matmul_error)
        _check_pair(
            _name(fn),
            case,
            result,
            scaled_dot_product_attention(*case.args),
            _attention_variants(*case.args),
            _attention_shape_mistake(*case.args),
        )
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 2: multi-head attention (splitting and merging heads).


def _mha_variant(
    query,
    key,
    value,
    num_heads,
    *,
    split="right",
    merge="right",
    divisor=None,
    dim=-1,
    scale_after_softmax=False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split, attend, merge with one deliberate deviation. ``merge`` is ``"right"``,
    ``"no_transpose"`` or a permutation of ``[B, H, Tq, Dh]``'s axes such as ``(0, 2, 3, 1)``."""
    batch, query_len, d_model = query.shape
    head_dim = d_model // num_heads

    def split_heads(x):
        if split == "no_transpose":
            return x.reshape(batch, num_heads, x.shape[1], head_dim)  # [B, H, T, Dh], scrambled
        return x.view(batch, x.shape[1], num_heads, head_dim).transpose(1, 2)  # [B, H, T, Dh]

    q, k, v = split_heads(query), split_heads(key), split_heads(value)
    output, weights = _attention_variant(
        q, k, v, divisor=divisor, dim=dim, scale_after_softmax=scale_after_softmax
    )
    if merge == "no_transpose":
        output = output.reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    elif isinstance(merge, tuple):
        output = output.permute(merge).reshape(batch, query_len, d_model)  # [B, Tq, D], scrambled
    else:
        output = output.transpose(1, 2).reshape(batch, query_len, d_model)  # [B, Tq, D]
    return output, weights


# Orders of [B, H, Tq, Dh]'s axes that keep the batch first but do not give [B, Tq, H, Dh]; the
# identity is merge_without_transpose.
_WRONG_MERGES = ((0, 1, 3, 2), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1))


def _mha_reference(query, key, value, num_heads):
    """The library's MultiHeadAttention with identity projections: split, attend, merge."""
    d_model = query.shape[-1]
    with torch.random.fork_rng(devices=[]):  # the initial weights are overwritten anyway
        module = MultiHeadAttention(d_model, num_heads, bias=False).to(query.dtype).eval()
    with torch.no_grad():
        for projection in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
            projection.weight.copy_(torch.eye(d_model))
        return module(query, key, value)


def _mha_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(1)
    return [
        _Case(
            "B=2, 3 queries, 5 keys, d_model=12, 3 heads of width 4",
            (_randn(g, 2, 3, 12), _randn(g, 2, 5, 12), _randn(g, 2, 5, 12), 3),
        ),
        _Case(
            "self-attention, T=6, d_model=16, 2 heads of width 8",
            (*(3 * [_randn(g, 2, 6, 16)]), 2),
        ),
        _Case(
            "one head, d_model=8", (_randn(g, 1, 4, 8), _randn(g, 1, 4, 8), _randn(g, 1, 4, 8), 1)
        ),
        _Case(
            "heads of width 1 (num_heads = d_model = 4)",
            (_randn(g, 2, 3, 4), _randn(g, 2, 3, 4), _randn(g, 2, 3, 4), 4),
        ),
        _Case(
            "a single token, 2 heads",
            (_randn(g, 1, 1, 6), _randn(g, 1, 1, 6), _randn(g, 1, 1, 6), 2),
        ),
        _Case(
            "float64 inputs, 4 heads",
            (*(_randn(g, 2, 5, 16, dtype=torch.float64) for _ in range(3)), 4),
        ),
    ]


def check_multi_head_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, num_heads) -> (output, weights)`` (Lab 2).

    ``fn`` receives already projected ``query`` ``[B, Tq, D]``, ``key`` and ``value``
    ``[B, Tk, D]`` and ``num_heads`` ``H``. It must split each into ``H`` heads of width
    ``Dh = D // H`` (``[B, H, T, Dh]``), attend in every head, and merge the heads back,
    returning ``output`` ``[B, Tq, D]`` and ``weights`` ``[B, H, Tq, Tk]``: the same as
    :class:`attention_lab.attention.MultiHeadAttention` with identity projections. Cases:
    cross-attention with ``Tq != Tk``, self-attention, one head, heads of width 1, a single
    token, ``float64``.

    Mistakes it names: ``merge_without_transpose``, ``merge_wrong_permutation``,
    ``split_without_transpose``, ``split_and_merge_without_transpose``,
    ``split_with_query_length``, ``heads_and_width_swapped``, ``heads_not_merged``,
    ``weights_averaged``, ``view_after_transpose``, ``scaled_by_sqrt_d_model``, ``no_scaling``,
    ``scaled_after_softmax``, ``softmax_axis``, ``pair_swapped``, ``not_a_pair``,
    ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _mha_cases()
    for case in cases:
        query, key, value, num_heads = case.args
        batch, query_len, d_model = query.shape
        key_len = key.shape[1]

        def shape_mistake(
            out_shape, w_shape, b=batch, tq=query_len, tk=key_len, h=num_heads, d=d_model
        ):
            if w_shape == (b, d // h, tq, tk) and h != d // h:
                return "heads_and_width_swapped"
            if w_shape == (b, tq, tk):
                return "weights_averaged"
            if out_shape == (b, h, tq, d // h):
                return "heads_not_merged"
            return None

        def variant(q=query, k=key, v=value, h=num_heads, **kwargs):
            return lambda: _mha_variant(q, k, v, h, **kwargs)

        variants = {
            "merge_without_transpose": variant(merge="no_transpose"),
            "split_without_transpose": variant(split="no_transpose"),
            "split_and_merge_without_transpose": variant(
                split="no_transpose", merge="no_transpose"
            ),
            **{
                f"merge_wrong_permutation/{''.join(map(str, order))}": variant(merge=order)
                for order in _WRONG_MERGES
            },
            "scaled_by_sqrt_d_model": variant(divisor=math.sqrt(d_model)),
            "no_scaling": variant(divisor=1.0),
            "scaled_after_softmax": variant(scale_after_softmax=True),
            "softmax_axis": variant(dim=-2),
        }

        def error_hint(error, b=batch, tq=query_len, tk=key_len, d=d_model):
            # view(B, Tq, H, Dh) of a [B, Tk, D] tensor: "shape '[...]' is invalid for input
            # of size B * Tk * D".
            if tq != tk and f"is invalid for input of size {b * tk * d}" in str(error):
                return "split_with_query_length"
            return _view_error(error)

        result = _run(fn, case, error_hint)
        _check_pair(
            _name(fn),
            case,
            result,
            _mha_reference(*case.args),
            variants,
            shape_mistake,
        )
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 3: sinusoidal positional encoding.


def _encoding_variant(max_len: int, d_model: int, mistake: str) -> torch.Tensor:
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # [T, 1]
    if mistake == "positions_from_one":
        position = position + 1
    pair = torch.arange((d_model + 1) // 2, dtype=torch.float64)  # [ceil(D / 2)]: i
    exponent = (pair if mistake == "frequency_i_not_2i" else 2 * pair) / d_model
    angle = position / 10000.0**exponent  # [T, ceil(D / 2)]
    if mistake == "frequency_inverted":
        angle = position * 10000.0**exponent
    encoding = torch.empty(max_len, d_model, dtype=torch.float64)
    sin, cos = torch.sin(angle), torch.cos(angle)
    if mistake == "sin_cos_swapped":
        sin, cos = cos, sin
    if mistake == "halves_not_interleaved":
        encoding = torch.cat([sin, cos[:, : d_model // 2]], dim=1)  # [T, D]
    elif mistake == "frequency_column_index":
        column = torch.arange(d_model, dtype=torch.float64)  # [D]: j
        angle = position / 10000.0 ** (column / d_model)  # [T, D]
        encoding[:, 0::2] = torch.sin(angle[:, 0::2])
        encoding[:, 1::2] = torch.cos(angle[:, 1::2])
    else:
        encoding[:, 0::2] = sin
        encoding[:, 1::2] = cos[:, : d_model // 2]
    return encoding.to(torch.float32)


def _inverted_frequency(result: torch.Tensor, max_len: int, d_model: int) -> bool:
    """Whether ``result`` is the encoding with angles ``pos * base ** (2i / D)``.

    Those angles reach millions of radians, where float32 keeps no digit of the sine, so only
    the columns whose angles stay below 100 radians are compared.
    """
    expected = _encoding_variant(max_len, d_model, "frequency_inverted").double()
    pair = torch.arange(d_model, dtype=torch.float64) // 2  # [D]: i of each column
    largest_angle = (max_len - 1) * 10000.0 ** (2 * pair / d_model)  # [D]
    columns = largest_angle < 100
    if columns.all() or not columns.any():
        return False
    return torch.allclose(result.double()[:, columns], expected[:, columns], atol=1e-3)


_ENCODING_MISTAKES = (
    "sin_cos_swapped",
    "frequency_i_not_2i",
    "frequency_column_index",
    "frequency_inverted",
    "halves_not_interleaved",
    "positions_from_one",
)


def check_sinusoidal_encoding(fn: Callable) -> None:
    """Check a learner's ``fn(max_len, d_model) -> encoding`` (Lab 3).

    ``fn`` must return the ``[max_len, d_model]`` ``float32`` tensor of
    :func:`attention_lab.positional.sinusoidal_encoding` (base 10000): sines in the even
    columns, cosines in the odd ones, column pair ``i`` at the angle
    ``pos / 10000 ** (2i / d_model)``. Cases: 50 positions of width 16, 200 positions of width
    64, a single position, width 2, and an odd width.

    Mistakes it names: ``sin_cos_swapped``, ``frequency_i_not_2i``, ``frequency_column_index``,
    ``frequency_inverted``, ``halves_not_interleaved``, ``positions_from_one``,
    ``encoding_transposed``, ``odd_d_model``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = [
        _Case("50 positions, d_model=16", (50, 16)),
        _Case("200 positions, d_model=64", (200, 64)),
        _Case("a single position, d_model=8", (1, 8)),
        _Case("10 positions, d_model=2", (10, 2)),
        _Case("12 positions, odd d_model=7", (12, 7)),
    ]
    fn_name = _name(fn)
    for case in cases:
        max_len, d_model = case.args
        odd = d_model % 2 == 1
        result = _run(fn, case, lambda error, odd=odd: "odd_d_model" if odd else None)
        expected = sinusoidal_encoding(max_len, d_model)
        if not isinstance(result, torch.Tensor):
            _fail(fn_name, case, f"it returned {type(result).__name__}, not a tensor", None)
        if result.shape != expected.shape:
            transposed = result.shape == (d_model, max_len) and d_model != max_len
            mistake = "encoding_transposed" if transposed else ("odd_d_model" if odd else None)
            _fail(
                fn_name,
                case,
                f"the result has shape {list(result.shape)}, expected {list(expected.shape)}",
                mistake,
            )
        if result.dtype != torch.float32:
            _fail(fn_name, case, f"the result is {result.dtype}, expected float32", "wrong_dtype")
        tol = (1e-4, 1e-4)
        if _close(result, expected, *tol):
            continue
        mistake = next(
            (
                key
                for key in _ENCODING_MISTAKES
                if _close(result, _encoding_variant(max_len, d_model, key), *tol)
            ),
            None,
        )
        if mistake is None and _inverted_frequency(result, max_len, d_model):
            mistake = "frequency_inverted"
        if mistake is None and odd:
            mistake = "odd_d_model"
        _fail(fn_name, case, f"the values differ: {_difference(result, expected)}", mistake)
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 4: masks applied to attention.


def _masked_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(2)
    # Every row allows some keys and blocks others, so the inverted mask is defined too.
    random_mask = torch.tensor(
        [
            [True, False, True, False, True],
            [False, True, True, False, False],
            [True, True, False, True, False],
            [False, False, False, True, True],
        ]
    )[None, None]  # [1, 1, Tq, Tk]
    token_ids = torch.tensor([[5, 3, 8, 2, 9, 4], [7, 1, 6, 0, 0, 0]])  # [B, T], 0 = padding
    all_padding = torch.tensor([[4, 2, 0, 0], [0, 0, 0, 0]])  # the second sequence is empty

    def case(name, shapes, mask, dtype=torch.float32):
        args = tuple(_randn(g, *shape, dtype=dtype) for shape in shapes) + (mask,)
        tq, tk = args[0].shape[-2], args[1].shape[-2]
        full = ~mask.expand(*mask.shape[:-2], tq, tk).any(dim=-1, keepdim=True)  # [..., Tq, 1]
        return _Case(name, args, fully_masked_rows=full if full.any() else None)

    return [
        case(
            "a mask [1, 1, 4, 5] over 4 queries and 5 keys, 2 heads",
            [(2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 6)],
            random_mask,
        ),
        case("a causal mask [6, 6], 2 heads", [(2, 2, 6, 8)] * 3, causal_mask(6)),
        case(
            "a padding mask [2, 1, 1, 6]: the second sequence has 3 padding tokens",
            [(2, 3, 6, 4)] * 3,
            padding_mask(token_ids),
        ),
        case(
            "causal and padding masks combined, [2, 1, 6, 6]",
            [(2, 2, 6, 4)] * 3,
            combine_masks(causal_mask(6), padding_mask(token_ids)),
        ),
        case(
            "fully masked rows: the second sequence is all padding",
            [(2, 2, 4, 8)] * 3,
            padding_mask(all_padding),
        ),
        case(
            "a single token that may attend to itself",
            [(1, 1, 1, 4)] * 3,
            torch.ones(1, 1, dtype=torch.bool),
        ),
        case("float16 inputs, a causal mask", [(1, 2, 5, 8)] * 3, causal_mask(5), torch.float16),
    ]


def check_masked_attention(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, mask) -> (output, weights)`` (Lab 4).

    ``fn`` must compute scaled dot-product attention where ``mask`` (``torch.bool``,
    broadcastable to ``[..., Tq, Tk]``, ``True`` = may attend) blocks keys, exactly as
    :func:`attention_lab.attention.scaled_dot_product_attention`: blocked keys get a weight of
    exactly 0, and a query whose keys are all blocked gets weights and output 0, never NaN.
    Cases: an irregular mask, a causal mask, a padding mask, both combined, fully masked rows,
    a single token, and ``float16``.

    Mistakes it names: ``mask_polarity``, ``mask_ignored``, ``mask_after_softmax``,
    ``scores_times_mask``, ``nan_fully_masked``, ``uniform_fully_masked``, ``fill_overflow``,
    ``softmax_axis``, ``no_scaling``, ``scaled_by_d_k``, ``scale_multiplied``, ``no_softmax``,
    ``scaled_after_softmax``, ``scores_transposed``, ``weights_times_keys``,
    ``output_is_weights``, ``pair_swapped``, ``not_a_pair``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _masked_cases()

    def error_hint(error: Exception) -> str | None:
        return "fill_overflow" if "overflow" in str(error) else _matmul_error(error)

    for case in cases:
        query, key, value, mask = case.args
        variants = _attention_variants(query, key, value, mask)

        def variant(q=query, k=key, v=value, m=mask, **kwargs):
            return lambda: _attention_variant(q, k, v, m, **kwargs)

        variants = {
            "mask_polarity": variant(invert_mask=True),
            "mask_ignored": lambda q=query, k=key, v=value: _attention_variant(q, k, v),
            "mask_after_softmax": variant(mask_after_softmax=True),
            "scores_times_mask": variant(multiply_by_mask=True),
            **variants,
        }
        result = _run(fn, case, error_hint)
        _check_pair(
            _name(fn),
            case,
            result,
            scaled_dot_product_attention(query, key, value, mask),
            variants,
            _attention_shape_mistake(query, key, value),
        )
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 5: an encoder layer.


def _encoder_variant(layer: EncoderLayer, x: torch.Tensor, mask, mistake: str) -> tuple:
    """The layer computed with one deliberate deviation (evaluation mode: no dropout)."""
    attend, ff, norm1, norm2 = layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2
    pre = layer.norm_first
    if mistake == "norms_swapped":
        norm1, norm2 = norm2, norm1
    if mistake == "norm1_used_twice":
        norm2 = norm1
    if mistake in ("pre_norm_instead_of_post_norm", "post_norm_instead_of_pre_norm"):
        pre = not pre
    if mistake == "encoder_mask_ignored":
        mask = None
    attention_residual = mistake != "no_attention_residual"
    feed_forward_residual = mistake != "no_feed_forward_residual"
    if pre and mistake.startswith("pre_norm_residual_normalised"):
        h = norm1(x)
        attended, weights = attend(h, mask=mask)
        x = h + attended
        # Some make the mistake in the attention sub-layer only.
        x = x + ff(norm2(x)) if mistake.endswith("/attention") else norm2(x) + ff(norm2(x))
    elif pre:
        attended, weights = attend(norm1(x), mask=mask)
        x = x + attended if attention_residual else attended
        x = x + ff(norm2(x)) if feed_forward_residual else ff(norm2(x))
    elif mistake == "norm_outside_residual":
        attended, weights = attend(x, mask=mask)
        x = x + norm1(attended)
        x = x + norm2(ff(x))
    else:
        attended, weights = attend(x, mask=mask)
        x = norm1(x + attended if attention_residual else attended)
        x = norm2(x + ff(x) if feed_forward_residual else ff(x))
    return x, weights


_ENCODER_MISTAKES = (
    "pre_norm_instead_of_post_norm",
    "post_norm_instead_of_pre_norm",
    "no_attention_residual",
    "no_feed_forward_residual",
    "norm_outside_residual",
    "norms_swapped",
    "norm1_used_twice",
    "pre_norm_residual_normalised",
    "pre_norm_residual_normalised/attention",
    "encoder_mask_ignored",
)


_ARRANGEMENT_MISTAKES = {
    "pre_norm_instead_of_post_norm",
    "post_norm_instead_of_pre_norm",
    "norm_outside_residual",
    "pre_norm_residual_normalised",
    "pre_norm_residual_normalised/attention",
}


def _refuse_forward(*args, **kwargs):
    raise RuntimeError(
        "the check hands you a layer whose own forward is switched off: build the layer from "
        "its parts (layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2, "
        "layer.dropout1, layer.dropout2) instead of calling layer(x)"
    )


def _encoder_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(3)
    token_ids = torch.tensor([[4, 9, 2, 7, 5], [3, 8, 6, 0, 0]])  # [B, T], 0 = padding

    def layer(norm_first: bool, activation: str = "relu", seed: int = 0) -> EncoderLayer:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = EncoderLayer(
                16, 4, 32, dropout=0.1, activation=activation, norm_first=norm_first
            ).eval()
            with torch.no_grad():
                # Distinct, non-trivial norms, so that swapping or skipping one shows.
                for norm in (module.norm1, module.norm2):
                    norm.weight.copy_(1 + 0.5 * torch.randn(16))
                    norm.bias.copy_(0.5 * torch.randn(16))
        return module

    return [
        _Case(
            "post-norm layer, x [2, 5, 16], no mask", (_randn(g, 2, 5, 16), layer(False, seed=1))
        ),
        _Case(
            "post-norm layer with a padding mask [2, 1, 1, 5]",
            (_randn(g, 2, 5, 16), layer(False, seed=2)),
            {"mask": padding_mask(token_ids)},
        ),
        _Case(
            "pre-norm layer (norm_first=True) with a padding mask",
            (_randn(g, 2, 5, 16), layer(True, seed=3)),
            {"mask": padding_mask(token_ids)},
        ),
        _Case("a single token, post-norm", (_randn(g, 1, 1, 16), layer(False, seed=4))),
        _Case(
            "GELU activation, pre-norm, x [3, 4, 16]",
            (_randn(g, 3, 4, 16), layer(True, "gelu", seed=5)),
        ),
    ]


def check_encoder_layer(fn: Callable) -> None:
    """Check a learner's ``fn(x, layer, mask=None) -> (x, weights)`` (Lab 5).

    ``fn`` receives ``x`` ``[B, T, D]``, an :class:`attention_lab.layers.EncoderLayer` in
    evaluation mode (so dropout does nothing), and optionally a ``torch.bool`` mask. It must
    compute the layer from its parts (``layer.self_attn``, ``layer.feed_forward``,
    ``layer.norm1``, ``layer.norm2``, ``layer.dropout1``, ``layer.dropout2``), in the post-norm
    or pre-norm arrangement that ``layer.norm_first`` selects, and return the new ``x``
    ``[B, T, D]`` and the attention weights ``[B, H, T, T]``. The layer's own ``forward`` is
    switched off during the check. Cases: post-norm, with a padding mask, pre-norm, a single
    token, and a GELU layer.

    Mistakes it names: ``pre_norm_instead_of_post_norm``, ``post_norm_instead_of_pre_norm``,
    ``pre_norm_residual_normalised``, ``no_attention_residual``, ``no_feed_forward_residual``,
    ``norm_outside_residual``, ``norms_swapped``, ``norm1_used_twice``,
    ``encoder_mask_ignored``, ``pair_swapped``, ``not_a_pair``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _encoder_cases()
    for case in cases:
        x, layer = case.args
        mask = case.kwargs.get("mask")
        with torch.no_grad():
            expected = EncoderLayer.forward(layer, x, mask)
        # Mistakes that differ from the right answer for this layer's arrangement.
        wrong_arrangement = (
            {
                "post_norm_instead_of_pre_norm",
                "pre_norm_residual_normalised",
                "pre_norm_residual_normalised/attention",
            }
            if layer.norm_first
            else {"pre_norm_instead_of_post_norm", "norm_outside_residual"}
        )
        variants = {
            key: lambda key=key, layer=layer, x=x, mask=mask: _encoder_variant(layer, x, mask, key)
            for key in _ENCODER_MISTAKES
            if key in wrong_arrangement or key not in _ARRANGEMENT_MISTAKES
        }
        layer.forward = _refuse_forward
        try:
            result = _run(fn, case)
        finally:
            del layer.forward
        with torch.no_grad():
            _check_pair(_name(fn), case, result, expected, variants)
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 6: masked mean pooling and cosine search.


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


def _search_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(6)

    def mask(lengths, length, dtype=torch.int64):
        return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).to(dtype)

    def case(name, queries, documents, k, dtype=torch.float32, mask_dtype=torch.int64):
        (q_lengths, q_len), (d_lengths, d_len), width = queries, documents, 8
        args = (
            _randn(g, len(q_lengths), q_len, width, dtype=dtype),
            mask(q_lengths, q_len, mask_dtype),
            _randn(g, len(d_lengths), d_len, width, dtype=dtype),
            mask(d_lengths, d_len, mask_dtype),
            k,
        )
        return _Case(name, args)

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
    (:func:`attention_lab.pretrained.mean_pool`), scale the pooled vectors to length 1, and
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
    _check_callable(fn)
    cases = _search_cases()
    fn_name = _name(fn)

    def error_hint(error: Exception) -> str | None:
        if "must match the size of tensor" in str(error):
            return "pool_mask_not_unsqueezed"
        # topk(k) along an axis shorter than k: every case has k <= N, but not always k <= Q.
        return "search_scores_transposed" if "selected index k out of range" in str(error) else None

    for case in cases:
        query_hidden, query_mask, doc_hidden, doc_mask, k = case.args
        num_queries, num_docs = query_hidden.shape[0], doc_hidden.shape[0]
        expected_scores, expected_top = _search_reference(*case.args)
        result = _run(fn, case, error_hint)
        _two_tensors(fn_name, case, result)
        scores, top = result
        if scores.shape != expected_scores.shape:
            transposed = scores.shape == (num_docs, num_queries) and num_docs != num_queries
            _fail(
                fn_name,
                case,
                f"the scores have shape {list(scores.shape)}, "
                f"expected {list(expected_scores.shape)}",
                "search_scores_transposed" if transposed else None,
            )
        if top.shape != expected_top.shape:
            _fail(
                fn_name,
                case,
                f"the top indices have shape {list(top.shape)}, "
                f"expected {list(expected_top.shape)}",
                None,
            )
        if scores.dtype != expected_scores.dtype:
            _fail(
                fn_name,
                case,
                f"the scores are {scores.dtype}, expected {expected_scores.dtype}",
                "wrong_dtype",
            )
        bad = ~scores.isfinite()
        if bad.any():
            empty = (doc_mask.long().sum(dim=1) == 0)[None, :]  # [1, N]
            mistake = "empty_sequence_nan" if not (bad & ~empty).any() else None
            _fail(fn_name, case, "the scores contain NaN or inf", mistake)
        tol = _tolerance(expected_scores.dtype)
        if _close(scores, expected_scores, *tol) and torch.equal(top, expected_top):
            continue
        variants = {
            key: lambda key=key, args=case.args: _search_variant(*args, key)
            for key in _SEARCH_MISTAKES
        }
        mistake = _match_variant((scores, top), variants, tol)
        if not _close(scores, expected_scores, *tol):
            problem = f"the scores differ: {_difference(scores, expected_scores)}"
        else:
            problem = f"the top indices are {top.tolist()}, expected {expected_top.tolist()}"
        _fail(fn_name, case, problem, mistake)
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 7: the online softmax, attention one block of keys at a time.


def _online_variant(query, key, value, block_size: int, mistake: str) -> torch.Tensor:
    """Block-wise attention with one deliberate deviation, computed in float64."""
    q = query.double() / math.sqrt(query.shape[-1])  # [..., Tq, Dk]
    k, v = key.double(), value.double()
    key_len = k.shape[-2]
    if mistake == "last_block_dropped":
        key_len = key_len // block_size * block_size
    row_max = torch.full((*q.shape[:-1], 1), -math.inf, dtype=torch.float64)  # [..., Tq, 1]
    row_sum = torch.zeros_like(row_max)  # [..., Tq, 1]
    acc = torch.zeros(*torch.broadcast_shapes(q.shape[:-2], v.shape[:-2]), q.shape[-2], v.shape[-1])
    acc = acc.double()  # [..., Tq, Dv]
    for start in range(0, key_len, block_size):
        block = slice(start, start + block_size)
        scores = q @ k[..., block, :].transpose(-2, -1)  # [..., Tq, Tb]
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # [..., Tq, 1]
        rescale = torch.exp(row_max - new_max)  # [..., Tq, 1]
        if mistake == "rescale_inverted":
            rescale = torch.exp(new_max - row_max).nan_to_num(nan=1.0)  # the first block: inf - inf
        p = torch.exp(scores - new_max)  # [..., Tq, Tb]
        keep_sum = mistake in ("sum_not_rescaled", "nothing_rescaled")
        keep_acc = mistake in ("acc_not_rescaled", "nothing_rescaled")
        row_sum = (row_sum if keep_sum else row_sum * rescale) + p.sum(dim=-1, keepdim=True)
        acc = (acc if keep_acc else acc * rescale) + p @ v[..., block, :]
        row_max = new_max
    output = acc if mistake == "not_divided_by_sum" else acc / row_sum
    return output.to(query.dtype)


_ONLINE_MISTAKES = (
    "sum_not_rescaled",
    "acc_not_rescaled",
    "nothing_rescaled",
    "rescale_inverted",
    "not_divided_by_sum",
    "last_block_dropped",
)


def _online_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(7)

    def case(name, shapes, block_size, scale=1.0, dtype=torch.float32, **kwargs):
        tensors = tuple(_randn(g, *shape, dtype=dtype) for shape in shapes)
        args = (scale * tensors[0], scale * tensors[1], tensors[2], block_size)
        return _Case(name, args, **kwargs)

    # Every score far below 0: q . k = -400 for every pair, so each row is uniform.
    negative = (torch.full((1, 2, 4), 10.0), torch.full((1, 6, 4), -10.0))
    return [
        case(
            "B=2, 3 queries, 8 keys in blocks of 4, d_k=4, d_v=6",
            [(2, 3, 4), (2, 8, 4), (2, 8, 6)],
            4,
        ),
        case(
            "10 keys in blocks of 4: the last block holds 2", [(2, 3, 4), (2, 10, 4), (2, 10, 6)], 4
        ),
        case("blocks of 1: one key at a time", [(1, 4, 8), (1, 5, 8), (1, 5, 8)], 1),
        case("block_size 16 > 6 keys: a single block", [(2, 3, 8), (2, 6, 8), (2, 6, 8)], 16),
        case("heads [2, 3, 7, 8], blocks of 3", [(2, 3, 7, 8), (2, 3, 7, 8), (2, 3, 7, 8)], 3),
        case(
            "large scores (hundreds apart), 12 keys in blocks of 3",
            [(1, 4, 8), (1, 12, 8), (1, 12, 4)],
            3,
            scale=10.0,
            large_scores=True,
        ),
        _Case(
            "every score far below 0 (-200), 6 keys in blocks of 2",
            (*negative, _randn(g, 1, 6, 3), 2),
        ),
        case(
            "float64 inputs, blocks of 5",
            [(2, 4, 8), (2, 12, 8), (2, 12, 8)],
            5,
            dtype=torch.float64,
        ),
        case(
            "a long sequence: 4 queries, 2048 keys in blocks of 64 (memory is counted)",
            [(1, 4, 16), (1, 2048, 16), (1, 2048, 16)],
            64,
            count_memory=True,
        ),
    ]


def check_online_softmax(fn: Callable) -> None:
    """Check a learner's ``fn(query, key, value, block_size) -> output`` (Lab 7).

    ``fn`` receives ``query`` ``[..., Tq, Dk]``, ``key`` ``[..., Tk, Dk]``, ``value``
    ``[..., Tk, Dv]`` and an int ``block_size``, and must return the output of scaled
    dot-product attention, ``[..., Tq, Dv]`` in the dtype of ``query``, computed as
    :func:`attention_lab.efficient.tiled_attention` does: the keys visited one block at a time
    with an online softmax (a running maximum, a running sum and a running weighted sum of
    values per query). Cases: full blocks, a shorter last block, blocks of 1, a single block,
    four-dimensional inputs, scores hundreds apart, scores far below 0, ``float64``, and a long
    sequence on which the memory the call allocates is counted
    (:func:`~attention_lab.efficient.peak_memory`): it must stay below the size of the full
    ``[Tq, Tk]`` scores.

    Mistakes it names: ``sum_not_rescaled``, ``acc_not_rescaled``, ``nothing_rescaled``,
    ``rescale_inverted``, ``not_divided_by_sum``, ``last_block_dropped``, ``online_overflow``,
    ``max_started_at_zero``, ``full_score_matrix``, ``no_scaling``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _online_cases()
    fn_name = _name(fn)
    for case in cases:
        query, key, value, block_size = case.args
        expected = tiled_attention(query, key, value, block_size=block_size)
        if case.count_memory:
            results: list = []
            peak = peak_memory(lambda case=case, results=results: results.append(_run(fn, case)))
            (output,) = results
        else:
            output, peak = _run(fn, case), 0
        if isinstance(output, tuple | list):
            _fail(
                fn_name,
                case,
                f"it returned a {type(output).__name__} of {len(output)}; return only the output"
                " tensor (the point is never to hold the weights)",
                None,
            )
        if not isinstance(output, torch.Tensor):
            _fail(fn_name, case, f"it returned {type(output).__name__}, not a tensor", None)
        if output.shape != expected.shape:
            _fail(
                fn_name,
                case,
                f"the output has shape {list(output.shape)}, expected {list(expected.shape)}",
                None,
            )
        if output.dtype != expected.dtype:
            _fail(
                fn_name,
                case,
                f"the output is {output.dtype}, expected {expected.dtype}",
                "wrong_dtype",
            )
        if not output.isfinite().all():
            scores = query.double() @ key.double().transpose(-2, -1) / math.sqrt(query.shape[-1])
            if case.large_scores:
                mistake = "online_overflow"
            elif scores.amax() < -100:
                # exp(score - 0) underflows to 0 in float32 below about -100: a maximum that
                # started at 0 leaves a sum of 0, and 0 / 0.
                mistake = "max_started_at_zero"
            else:
                # Scores of a few units cannot overflow a correct loop: inf there comes from
                # the inverted factor exp(m_new - m_old) on the first block, where m_old = -inf.
                mistake = "rescale_inverted"
            _fail(fn_name, case, "the output contains NaN or inf", mistake)
        tol = _tolerance(expected.dtype)
        if not _close(output, expected, *tol):
            variants = {
                key: lambda key=key, args=case.args: (_online_variant(*args, key),)
                for key in _ONLINE_MISTAKES
            }
            variants["no_scaling"] = lambda q=query, k=key, v=value, b=block_size: (
                _online_variant(q * math.sqrt(q.shape[-1]), k, v, b, ""),
            )
            mistake = _match_variant((output,), variants, tol)
            _fail(fn_name, case, f"the output differs: {_difference(output, expected)}", mistake)
        full_scores = query.shape[-2] * key.shape[-2] * query.element_size()
        full_scores *= math.prod(torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
        if peak >= full_scores:
            _fail(
                fn_name,
                case,
                f"the call allocated {peak:,} bytes at its peak, at least the {full_scores:,} "
                "bytes of the full score matrix",
                "full_score_matrix",
            )
    _success(fn, cases)


# ---------------------------------------------------------------------------------------------
# Lab 8: decoding one token at a time with a key/value cache.


def _decode_reference(attention: MultiHeadAttention, x: torch.Tensor, mistake: str = ""):
    """Outputs [B, T, D] and keys [B, H, T, Dh] of causal attention over ``x`` plus positions,
    computed at once, with one deliberate deviation."""
    batch, length, d_model = x.shape
    encoding = sinusoidal_encoding(length, d_model).to(x.dtype)  # [T, D]
    if mistake == "positions_restart":
        encoding = encoding[:1]  # [1, D]: position 0 for every token
    inputs = x if mistake == "no_positions" else x + encoding  # [B, T, D]
    mask = causal_mask(length)  # [T, T]
    if mistake == "cache_replaced":
        mask = torch.eye(length, dtype=torch.bool)  # each token sees only itself
    elif mistake == "appended_after_attending":
        mask = causal_mask(length).tril(diagonal=-1)  # only the earlier tokens
    with torch.no_grad():
        output, _ = attention(inputs, mask=mask)
        keys = attention.k_proj(inputs).view(
            batch, length, attention.num_heads, -1
        )  # [B, T, H, Dh]
    return output, keys.transpose(1, 2)  # [B, T, D], [B, H, T, Dh]


_DECODE_MISTAKES = (
    "positions_restart",
    "no_positions",
    "cache_replaced",
    "appended_after_attending",
)


def _decode_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(8)

    def case(name, batch, length, d_model, num_heads, seed):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            attention = MultiHeadAttention(d_model, num_heads).eval()
        return _Case(name, (attention, _randn(g, batch, length, d_model)))

    return [
        case("B=2, 6 tokens, d_model=8, 2 heads", 2, 6, 8, 2, seed=1),
        case("a single token", 1, 1, 8, 2, seed=2),
        case("B=1, 9 tokens, d_model=16, 4 heads", 1, 9, 16, 4, seed=3),
        case("one head, B=3, 4 tokens, d_model=6", 3, 4, 6, 1, seed=4),
    ]


def check_kv_cache_decoding(fn: Callable) -> None:
    """Check a learner's ``fn(attention, x) -> (outputs, keys)`` (Lab 8).

    ``fn`` receives a :class:`~attention_lab.attention.MultiHeadAttention` in evaluation mode
    and token embeddings ``x`` ``[B, T, D]`` without positions. It must decode them one token at
    a time, as a generating decoder does: at step ``t`` add the sinusoidal encoding of position
    ``t`` (:func:`~attention_lab.positional.sinusoidal_encoding`) to token ``t``, project it
    with the module's ``q_proj``, ``k_proj`` and ``v_proj``, append its key and value to a cache
    ``[B, H, t + 1, Dh]``, attend from its query to every cached position, and project the
    merged heads with ``out_proj``. It returns the outputs of all steps ``[B, T, D]`` and the
    cached keys at the end ``[B, H, T, Dh]``: the same as the module's causal self-attention
    on the whole sequence, ``attention(x + encoding, mask=causal_mask(T))``, and its keys.
    The rows that ``k_proj`` projects are counted: with a cache, each token is projected once.
    Cases: two heads, a single token, four heads, one head.

    Mistakes it names: ``cache_wrong_axis``, ``positions_restart``, ``no_positions``,
    ``cache_replaced``, ``appended_after_attending``, ``prefix_recomputed``, ``not_a_pair``
    (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    _check_callable(fn)
    cases = _decode_cases()
    fn_name = _name(fn)

    def error_hint(error: Exception) -> str | None:
        text = str(error)
        wrong_cat = "must match except in dimension" in text and "dimension 2" not in text
        wrong_heads = "do not broadcast together" in text or "must have the same Dk" in text
        return "cache_wrong_axis" if wrong_cat or wrong_heads else None

    for case in cases:
        attention, x = case.args
        batch, length, _ = x.shape
        expected_output, expected_keys = _decode_reference(attention, x)
        projected = []
        hook = attention.k_proj.register_forward_hook(
            lambda module, inputs, output, rows=projected: rows.append(inputs[0].shape[:-1].numel())
        )
        try:
            result = _run(fn, case, error_hint)
        finally:
            hook.remove()
        _two_tensors(fn_name, case, result)
        output, keys = result
        if output.shape != expected_output.shape:
            _fail(
                fn_name,
                case,
                f"the outputs have shape {list(output.shape)}, "
                f"expected {list(expected_output.shape)}",
                None,
            )
        if keys.shape != expected_keys.shape:
            if keys.numel() == expected_keys.numel():
                mistake = "cache_wrong_axis"
            else:
                # Only the last token's key is left: [B, H, 1, Dh].
                last_only = (*expected_keys.shape[:2], 1, expected_keys.shape[3])
                mistake = "cache_replaced" if keys.shape == last_only else None
            _fail(
                fn_name,
                case,
                f"the cached keys have shape {list(keys.shape)}, "
                f"expected {list(expected_keys.shape)}",
                mistake,
            )
        tol = _tolerance(x.dtype)
        if not (_close(output, expected_output, *tol) and _close(keys, expected_keys, *tol)):
            variants = {
                key: lambda key=key, a=attention, x=x: _decode_reference(a, x, key)
                for key in _DECODE_MISTAKES
            }
            what, got, want = (
                ("outputs", output, expected_output)
                if not _close(output, expected_output, *tol)
                else ("cached keys", keys, expected_keys)
            )
            mistake = _match_variant((output, keys), variants, tol)
            _fail(fn_name, case, f"the {what} differ: {_difference(got, want)}", mistake)
        if sum(projected) > batch * length:
            _fail(
                fn_name,
                case,
                f"k_proj projected {sum(projected)} token vectors for {batch} x {length} tokens",
                "prefix_recomputed",
            )
    _success(fn, cases)
