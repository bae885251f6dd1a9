"""Memory-efficient attention: the exact result without the full ``[Tq, Tk]`` score matrix.

:func:`attention_lab.attention.scaled_dot_product_attention` builds every score at once, so its
memory grows as ``Tq * Tk``. :func:`tiled_attention` visits the keys one block at a time and
keeps, for each query, only a running maximum, a running sum and a running weighted sum of
values: the "online softmax" behind FlashAttention. The result is the same attention output, in
memory that grows only linearly with the sequence length at a fixed block size.
"""

import math

import torch

from attention_lab._validation import check_int
from attention_lab.attention import _check_attention_inputs


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    block_size: int = 128,
) -> torch.Tensor:
    """Exact scaled dot-product attention, computed one block of keys at a time.

    The result equals the output of ``softmax(Q K^T / sqrt(Dk)) V``, but the scores are never
    held for all keys at once: each step computes the scores of the queries against one block of
    ``Tb <= block_size`` keys, ``[..., Tq, Tb]``, and folds them into three running quantities
    per query row, updated with an online softmax:

    - ``row_max`` (``m`` in the FlashAttention paper), the largest score seen so far, which is
      subtracted before ``exp`` so that it cannot overflow;
    - ``row_sum`` (``l``), the sum of ``exp(score - row_max)`` over the keys seen so far;
    - ``acc``, the sum of ``exp(score - row_max) * value`` over the keys seen so far.

    When a block raises the maximum from ``m_old`` to ``m_new``, the earlier ``row_sum`` and
    ``acc`` are rescaled by ``exp(m_old - m_new)``, so at the end ``acc / row_sum`` is the
    softmax-weighted average of the values. Memory therefore grows as ``Tq * block_size``
    instead of ``Tq * Tk``.

    Unlike :func:`~attention_lab.attention.scaled_dot_product_attention`, this function returns
    no attention weights: the ``[..., Tq, Tk]`` weights are exactly what it avoids materialising.
    There is no dropout either.

    Blocked keys contribute nothing. A query row in which every key is blocked gets the output
    0, never NaN, in every floating dtype. For ``float16`` and ``bfloat16`` inputs the scores,
    exponentials and running sums are kept in ``float32``.

    Args:
        query: Shape ``[..., Tq, Dk]``, a floating dtype.
        key: Shape ``[..., Tk, Dk]``, same dtype as ``query``.
        value: Shape ``[..., Tk, Dv]``, same dtype as ``query``. The leading dimensions of
            ``query``, ``key`` and ``value`` broadcast together.
        mask: Optional, dtype ``torch.bool``, broadcastable to ``[..., Tq, Tk]``: ``True``
            where the query may attend to the key (see ``attention_lab.masks``).
        block_size: Number of keys per block, a positive int. The last block holds the
            remaining ``Tk % block_size`` keys if ``Tk`` is not a multiple of it.

    Returns:
        The attention output, shape ``[..., Tq, Dv]``, with the dtype of ``query``.

    Raises:
        TypeError: If an input is not a tensor, not floating point, or the dtypes differ; if
            ``mask`` is not a ``torch.bool`` tensor; if ``block_size`` is not an int.
        ValueError: If the shapes are inconsistent, ``mask`` does not broadcast to
            ``[..., Tq, Tk]``, or ``block_size`` is not positive.

    Example:
        >>> query, key, value = torch.randn(2, 3, 4), torch.randn(2, 50, 4), torch.randn(2, 50, 6)
        >>> tiled_attention(query, key, value, block_size=16).shape
        torch.Size([2, 3, 6])
    """
    _check_attention_inputs(query, key, value, mask, dropout_p=0.0)
    check_int(block_size, "block_size")
    query_len, key_len = query.shape[-2], key.shape[-2]
    scale = math.sqrt(query.shape[-1])
    # Half-precision exponentials and sums lose too much: accumulate in at least float32.
    work_dtype = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work_dtype)  # [..., Tq, Dk]
    if mask is not None:
        # Give the mask its full key axis (a view: no copy) so it can be sliced per block; its
        # other axes stay as they are and broadcast against each block's scores.
        mask = mask.expand(*mask.shape[:-1], key_len)  # [..., Tq or 1, Tk]

    rows_shape = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query_len, 1)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    # A finite floor instead of -inf: exp(m_old - m_new) and exp(score - m_new) are then never
    # exp(-inf - (-inf)) = NaN, even for a row whose keys have all been blocked so far.
    like_query = {"dtype": work_dtype, "device": query.device}
    row_max = torch.full(rows_shape, torch.finfo(work_dtype).min, **like_query)  # [..., Tq, 1]
    row_sum = torch.zeros(rows_shape, **like_query)  # [..., Tq, 1]
    acc = torch.zeros(*batch, query_len, value.shape[-1], **like_query)  # [..., Tq, Dv]

    for start in range(0, key_len, block_size):
        block = slice(start, start + block_size)
        k_block = key[..., block, :].to(work_dtype)  # [..., Tb, Dk]
        v_block = value[..., block, :].to(work_dtype)  # [..., Tb, Dv]
        scores = q @ k_block.transpose(-2, -1) / scale  # [..., Tq, Tb]
        if mask is not None:
            # exp(-inf - row_max) = 0: a blocked key adds nothing to row_sum or acc.
            scores = torch.where(mask[..., block], scores, -math.inf)  # [..., Tq, Tb]
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # [..., Tq, 1]
        # Re-express the sums so far relative to the new maximum.
        rescale = torch.exp(row_max - new_max)  # [..., Tq, 1]
        p = torch.exp(scores - new_max)  # [..., Tq, Tb]
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)  # [..., Tq, 1]
        acc = acc * rescale + p @ v_block  # [..., Tq, Dv]
        row_max = new_max

    # The row maximum contributes exp(0) = 1 to row_sum, so row_sum >= 1 unless every key of the
    # row was blocked; then row_sum = 0 and acc = 0, and clamping at 1 turns 0 / 0 into an exact
    # 0 (with a finite gradient) without changing any other row.
    return (acc / row_sum.clamp_min(1.0)).to(query.dtype)
