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

One module per lab holds its check, its cases, its wrong variants and the explanations of its
mistakes: ``sdpa`` (Lab 1, and the attention variants the next labs reuse), ``multi_head``
(2), ``positional`` (3), ``masks`` (4), ``encoder`` (5), ``search`` (6), ``online_softmax``
(7), ``kv_cache`` (8), ``grouped_query`` (9), ``window_masks`` (10), ``alibi`` (11),
``linear_step`` (12) and ``delta_step`` (13).
``_core`` holds what they share: the case record, running the learner's function, the one
comparison routine (shape, dtype, NaN or inf, values, diagnosis) and the failure message.
"""

from __future__ import annotations

from attention_lab.checks import _core
from attention_lab.checks.alibi import check_alibi_bias, check_alibi_slopes
from attention_lab.checks.delta_step import check_gated_delta_step
from attention_lab.checks.encoder import check_encoder_layer
from attention_lab.checks.grouped_query import check_grouped_query_attention
from attention_lab.checks.kv_cache import check_kv_cache_decoding
from attention_lab.checks.linear_step import check_linear_attention_step
from attention_lab.checks.masks import check_masked_attention
from attention_lab.checks.multi_head import check_multi_head_attention
from attention_lab.checks.online_softmax import check_online_softmax
from attention_lab.checks.positional import check_sinusoidal_encoding
from attention_lab.checks.sdpa import check_scaled_dot_product_attention
from attention_lab.checks.search import check_pooling_and_search
from attention_lab.checks.window_masks import check_document_mask, check_sliding_window_mask

__all__ = [
    "MISTAKES",
    "check_alibi_bias",
    "check_alibi_slopes",
    "check_document_mask",
    "check_encoder_layer",
    "check_gated_delta_step",
    "check_grouped_query_attention",
    "check_kv_cache_decoding",
    "check_linear_attention_step",
    "check_masked_attention",
    "check_multi_head_attention",
    "check_online_softmax",
    "check_pooling_and_search",
    "check_scaled_dot_product_attention",
    "check_sinusoidal_encoding",
    "check_sliding_window_mask",
]

#: Every mistake a check can recognise, by key, with the explanation it prints (each lab
#: module adds its own; importing this package imports them all).
MISTAKES: dict[str, str] = _core.MISTAKES
