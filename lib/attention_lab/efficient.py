"""Memory-efficient attention: the exact result without the full ``[Tq, Tk]`` score matrix.

:func:`attention_lab.attention.scaled_dot_product_attention` builds every score at once, so its
memory grows as ``Tq * Tk``. :func:`tiled_attention` visits the keys one block at a time and
keeps, for each query, only a running maximum, a running sum and a running weighted sum of
values: the "online softmax" behind FlashAttention. The result is the same attention output, in
memory that grows only linearly with the sequence length at a fixed block size.

:func:`peak_memory` counts the tensor memory a call allocates, to compare such methods. The
decoding caches are in :mod:`attention_lab.caches`.
"""

import math
import weakref

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch
from torch.utils import _pytree
from torch.utils._python_dispatch import TorchDispatchMode

from attention_lab._validation import check_int
from attention_lab.attention import check_attention_inputs

__all__ = ["peak_memory", "tiled_attention"]


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
    check_attention_inputs(query, key, value, mask, dropout_p=0.0)
    check_int(block_size, "block_size")
    query_len, key_len = query.shape[-2], key.shape[-2]
    scale = math.sqrt(query.shape[-1])
    # Half-precision exponentials and sums lose too much: accumulate in at least float32.
    work_dtype = torch.promote_types(query.dtype, torch.float32)
    # Scaling the queries once costs Tq * Dk operations; scaling every block of scores would
    # cost Tq * Tk, one more pass over the quantity this function is built to keep small.
    q = query.to(work_dtype) / scale  # [..., Tq, Dk]
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
        scores = q @ k_block.transpose(-2, -1)  # [..., Tq, Tb], already scaled
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


class _PeakMemoryMode(TorchDispatchMode):
    """Tracks the bytes of tensor storage allocated by operations and not yet freed."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: dict[int, weakref.ref] = {}  # data_ptr -> weak reference to the storage

    def _freed(self, data_ptr: int, nbytes: int) -> None:
        self.live -= nbytes
        self._tracked.pop(data_ptr, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        # An output that shares an input's storage (a view, or an op returning its input)
        # allocated nothing.
        inputs = {
            arg.untyped_storage().data_ptr()
            for arg in _pytree.tree_leaves((args, kwargs))
            if isinstance(arg, torch.Tensor)
        }
        for output in _pytree.tree_leaves(result):
            if not isinstance(output, torch.Tensor):
                continue
            storage = output.untyped_storage()
            data_ptr, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or data_ptr in inputs or data_ptr in self._tracked:
                continue
            self._tracked[data_ptr] = weakref.ref(
                storage, lambda _, ptr=data_ptr, size=nbytes: self._freed(ptr, size)
            )
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        return result


def peak_memory(function: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The most tensor memory, in bytes, that a call of ``function`` holds at any one time.

    Every PyTorch operation run during the call is intercepted (a ``TorchDispatchMode``): the
    storage of each new result is counted when it is created and uncounted when it is freed,
    and the largest total is returned. Tensors that existed before the call (the inputs) are
    not counted; the result of ``function`` is, while it lives. The count is exact and
    deterministic, independent of the machine's load, but it sees only tensors that PyTorch
    operations return: scratch memory that a fused kernel (such as
    ``torch.nn.functional.scaled_dot_product_attention``) allocates inside itself is invisible
    to it.

    Args:
        function: Any callable that runs PyTorch operations.
        *args: Positional arguments for ``function``.
        **kwargs: Keyword arguments for ``function``.

    Returns:
        The peak number of bytes of tensor storage allocated during the call and alive at once.

    Raises:
        TypeError: If ``function`` is not callable.

    Example:
        >>> peak_memory(lambda: torch.zeros(1000, dtype=torch.float32) + 1)
        8000
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {type(function).__name__}")
    with _PeakMemoryMode() as recorder:
        function(*args, **kwargs)
    return recorder.peak
