"""Memory-efficient attention: the exact result without the full ``[Tq, Tk]`` score matrix.

:func:`attention_lab.attention.scaled_dot_product_attention` builds every score at once, so its
memory grows as ``Tq * Tk``. :func:`tiled_attention` visits the keys one block at a time and
keeps, for each query, only a running maximum, a running sum and a running weighted sum of
values: the "online softmax" behind FlashAttention. The result is the same attention output, in
memory that grows only linearly with the sequence length at a fixed block size.

Decoding one token at a time has a cost problem of its own: recomputing the keys and values of
the whole prefix for every new token. :class:`KVCache` keeps them, and :func:`decode_step` runs a
:class:`~attention_lab.attention.MultiHeadAttention` on the new tokens only.
:func:`peak_memory` counts the tensor memory a call allocates, to compare such methods.
"""

import math
import weakref
from dataclasses import dataclass

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable  # noqa: UP035

import torch
from torch.utils import _pytree
from torch.utils._python_dispatch import TorchDispatchMode

from attention_lab._validation import (
    check_cache_room,
    check_cache_sizes,
    check_int,
    check_sequence,
)
from attention_lab.attention import (
    MultiHeadAttention,
    check_attention_inputs,
)
from attention_lab.masks import causal_mask

__all__ = [
    "PUBLISHED_CACHE_SHAPES",
    "CacheShape",
    "KVCache",
    "decode_step",
    "peak_memory",
    "tiled_attention",
]


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


class KVCache:
    """The keys and values of the positions decoded so far, for one attention layer.

    The storage for ``max_len`` positions is allocated once; :meth:`append` writes the keys and
    values of new positions after the ones already held, and returns views of everything held.

    Args:
        batch_size: Number of sequences ``B`` decoded side by side, a positive int.
        num_heads: Number of key/value heads, a positive int: the ``num_kv_heads`` of the
            attention layer (``H`` for multi-head attention, fewer for grouped-query
            attention, 1 for multi-query attention).
        head_dim: Width ``Dh`` of one head's keys and values, a positive int.
        max_len: The most positions the cache can hold, a positive int.
        dtype: Floating dtype of the keys and values.
        device: Device of the keys and values.

    Attributes:
        keys: Shape ``[B, H, max_len, Dh]``; the first ``len(cache)`` positions are filled.
        values: Shape ``[B, H, max_len, Dh]``, filled like ``keys``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If a size is not positive.

    Example:
        >>> cache = KVCache(batch_size=2, num_heads=4, head_dim=8, max_len=16)
        >>> keys, values = cache.append(torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8))
        >>> len(cache), keys.shape
        (3, torch.Size([2, 4, 3, 8]))
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        head_dim: int,
        max_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        check_cache_sizes(
            {
                "batch_size": batch_size,
                "num_heads": num_heads,
                "head_dim": head_dim,
                "max_len": max_len,
            },
            dtype,
        )
        shape = (batch_size, num_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # [B, H, max_len, Dh]
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # [B, H, max_len, Dh]
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def max_len(self) -> int:
        """The most positions the cache can hold."""
        return self.keys.shape[2]

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the keys and values of ``Tn`` new positions after those already held.

        Args:
            key: Shape ``[B, H, Tn, Dh]``, the cache's dtype.
            value: Shape ``[B, H, Tn, Dh]``, the cache's dtype.

        Returns:
            A pair ``(keys, values)`` of views of every position held, each of shape
            ``[B, H, len(cache), Dh]``.

        Raises:
            TypeError: If ``key`` or ``value`` is not a tensor of the cache's dtype.
            ValueError: If a shape does not match, or the cache would hold more than
                ``max_len`` positions.
        """
        self._check_new(key, value)
        start, end = self._length, self._length + key.shape[2]
        self.keys[:, :, start:end] = key
        self.values[:, :, start:end] = value
        self._length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # [B, H, len, Dh] twice

    def _check_new(self, key: torch.Tensor, value: torch.Tensor) -> None:
        batch, heads, _, head_dim = self.keys.shape
        for name, tensor in (("key", key), ("value", value)):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
            if tensor.dtype != self.keys.dtype:
                raise TypeError(
                    f"{name} must have the cache's dtype {self.keys.dtype}, got {tensor.dtype}"
                )
            if tensor.ndim != 4 or (tensor.shape[0], tensor.shape[1], tensor.shape[3]) != (
                batch,
                heads,
                head_dim,
            ):
                raise ValueError(
                    f"{name} must have shape [B, H, Tn, Dh] = [{batch}, {heads}, Tn, {head_dim}],"
                    f" got {list(tensor.shape)}"
                )
        if key.shape[2] != value.shape[2]:
            raise ValueError(
                f"key and value must hold the same number of positions Tn, got {key.shape[2]} "
                f"and {value.shape[2]}"
            )
        check_cache_room(self._length, key.shape[2], self.max_len)

    def reset(self) -> None:
        """Forget every position held (the storage is kept and overwritten later)."""
        self._length = 0


def _check_decode_inputs(attention: MultiHeadAttention, x: torch.Tensor, cache: KVCache) -> None:
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"attention must be a MultiHeadAttention, got {type(attention).__name__}")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if attention.rotary is not None:
        attention.rotary.check_cacheable(
            "attention's rope_scaling",
            "run attention(x, mask=causal_mask(T)) on the whole sequence instead, or use a "
            "scaling with fixed frequencies ('linear', 'yarn', 'llama3')",
        )
    check_sequence(x, "x", attention.d_model)
    batch = x.shape[0]
    expected = (batch, attention.num_kv_heads, attention.head_dim)
    held = (cache.keys.shape[0], cache.keys.shape[1], cache.keys.shape[3])
    if held != expected:
        raise ValueError(
            f"cache holds [B, Hkv, Dh] = {list(held)}, but x and attention need "
            f"{list(expected)} (a cache holds the num_kv_heads key/value heads)"
        )


def decode_step(
    attention: MultiHeadAttention, x: torch.Tensor, cache: KVCache
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal self-attention for ``Tn`` new positions, reusing the cached earlier positions.

    Only the new positions are projected: their keys and values are appended to ``cache``, and
    their queries attend to every position held, each new position to itself and those before
    it. Feeding a sequence through ``decode_step`` in pieces (one token at a time, or a prompt
    first and then one token at a time) gives the same outputs and weights as
    ``attention(x, mask=causal_mask(T))`` on the whole sequence, while each step costs
    ``O(Tn * len(cache))`` attention work instead of ``O(T^2)``.

    Args:
        attention: The attention layer whose projections are used.
        x: Shape ``[B, Tn, D]``, the inputs of the new positions, in the module's dtype.
        cache: The keys and values of the earlier positions of the same sequences, for the
            same layer, with ``B``, ``Hkv`` (the layer's ``num_kv_heads``) and ``Dh``
            matching; updated in place. With a rotary embedding the new positions are
            counted from ``len(cache)``.

    Returns:
        A pair ``(output, weights)``: ``output`` of shape ``[B, Tn, D]`` and ``weights`` of
        shape ``[B, H, Tn, len(cache)]`` (``len(cache)`` after the new positions are added).

    Raises:
        TypeError: If ``attention`` is not a ``MultiHeadAttention``, ``cache`` not a
            ``KVCache``, or ``x`` not a floating tensor.
        ValueError: If ``x`` is not ``[B, Tn, D]``, the cache's sizes do not match, the
            cache is full, or ``attention`` has ``"dynamic"`` RoPE scaling (its frequencies
            change with the length, so cached keys would need rotating again at every step).

    Example:
        >>> attention = MultiHeadAttention(d_model=8, num_heads=2).eval()
        >>> cache = KVCache(batch_size=1, num_heads=2, head_dim=4, max_len=10)
        >>> for token in torch.randn(1, 3, 8).split(1, dim=1):
        ...     output, weights = decode_step(attention, token, cache)
        >>> output.shape, weights.shape
        (torch.Size([1, 1, 8]), torch.Size([1, 2, 1, 3]))
    """
    _check_decode_inputs(attention, x, cache)
    new_len, start = x.shape[1], len(cache)
    # The new positions are start .. start + Tn - 1: the rotary embedding needs them.
    positions = torch.arange(start, start + new_len) if attention.rope is not None else None
    q, k, v = attention.project(x, positions=positions)  # [B, H, Tn, Dh], [B, Hkv, Tn, Dh] x2
    keys, values = cache.append(k, v)  # [B, Hkv, L, Dh] twice, L = len(cache)
    # New position i sits at L - Tn + i and may attend to positions 0 .. L - Tn + i. A single
    # new position may attend to everything held, so it needs no mask.
    mask = causal_mask(len(cache), device=x.device)[-new_len:] if new_len > 1 else None
    return attention.attend(q, keys, values, mask)  # [B, Tn, D], [B, H, Tn, L]


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


@dataclass(frozen=True)
class CacheShape:
    """The part of a model's attention settings that decides the size of its decoding cache.

    Multi-head attention caches a key and a value of width ``Dh`` for each of its ``H`` heads, per
    position and layer; grouped-query attention caches ``Hkv < H`` heads, multi-query attention
    one; multi-head latent attention (DeepSeek-V2/V3) caches one latent of width ``R`` and one
    shared RoPE key of width ``Dr`` (:class:`~attention_lab.latent_attention.LatentCache`); a
    sliding window of ``W`` positions (Mistral 7B v0.1) keeps at most ``W`` positions per layer.

    Args:
        num_layers: Number of attention layers ``L``, a positive int.
        num_heads: Number of query heads ``H``, a positive int.
        head_dim: Width ``Dh`` of one head's keys and values, a positive int.
        num_kv_heads: Key/value heads ``Hkv``, a positive divisor of ``num_heads``; ``None``
            means ``num_heads`` (multi-head attention). Unused by latent attention.
        window: Sliding-window size ``W`` (positions kept per layer), or ``None`` for none.
        kv_lora_rank: Latent width ``R`` of multi-head latent attention, or ``None``.
        rope_dim: Width ``Dr`` of latent attention's shared RoPE key; given exactly when
            ``kv_lora_rank`` is.

    Raises:
        TypeError: If a field is not an int (or ``None`` where allowed).
        ValueError: If a size is not positive, ``num_kv_heads`` does not divide ``num_heads``,
            or only one of ``kv_lora_rank`` and ``rope_dim`` is given.

    Example:
        >>> llama3_8b = CacheShape(num_layers=32, num_heads=32, head_dim=128, num_kv_heads=8)
        >>> llama3_8b.kind, llama3_8b.numbers_per_token
        ('grouped-query', 65536)
        >>> llama3_8b.cache_bytes(8192) / 2**30  # GiB at 16 bits, one sequence of 8,192 tokens
        1.0
    """

    num_layers: int
    num_heads: int
    head_dim: int
    num_kv_heads: int | None = None
    window: int | None = None
    kv_lora_rank: int | None = None
    rope_dim: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_layers", "num_heads", "head_dim"):
            check_int(getattr(self, name), name)
        for name in ("num_kv_heads", "window", "kv_lora_rank", "rope_dim"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name)
        if self.num_kv_heads is not None and self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}"
            )
        if (self.kv_lora_rank is None) != (self.rope_dim is None):
            raise ValueError("latent attention needs both kv_lora_rank and rope_dim, or neither")

    @property
    def kind(self) -> str:
        """The kind of attention, one of ``"multi-head"``, ``"grouped-query"``, ``"multi-query"``
        and ``"latent"``."""
        if self.kv_lora_rank is not None:
            return "latent"
        kv_heads = self.num_heads if self.num_kv_heads is None else self.num_kv_heads
        if kv_heads == self.num_heads:
            return "multi-head"
        return "multi-query" if kv_heads == 1 else "grouped-query"

    @property
    def numbers_per_token(self) -> int:
        """The count of numbers cached per position over all layers.

        ``L * 2 * Hkv * Dh`` for multi-head, grouped-query and multi-query attention, and
        ``L * (R + Dr)`` for latent attention.
        """
        if self.kv_lora_rank is not None:
            return self.num_layers * (self.kv_lora_rank + self.rope_dim)
        kv_heads = self.num_heads if self.num_kv_heads is None else self.num_kv_heads
        return self.num_layers * 2 * kv_heads * self.head_dim

    def cache_bytes(self, context: int, *, batch_size: int = 1, bytes_per_number: int = 2) -> int:
        """Bytes the cache holds after ``context`` positions of ``batch_size`` sequences.

        Args:
            context: Positions decoded so far, a non-negative int.
            batch_size: Sequences decoded side by side, a positive int.
            bytes_per_number: 2 for 16-bit numbers (bfloat16, float16), 4 for float32, 1 for
                8-bit; a positive int.

        Returns:
            ``numbers_per_token * min(context, W) * batch_size * bytes_per_number``.
        """
        check_int(context, "context", minimum=0)
        check_int(batch_size, "batch_size")
        check_int(bytes_per_number, "bytes_per_number")
        kept = context if self.window is None else min(context, self.window)
        return self.numbers_per_token * kept * batch_size * bytes_per_number


# Published attention settings (each model's config.json on its release), the ones a decoding
# cache depends on. tests/test_cache_shapes.py checks those that transformers' default
# configurations also describe (Llama 2 7B, Falcon 7B, Mistral 7B v0.1, DeepSeek-V3).
PUBLISHED_CACHE_SHAPES: dict[str, CacheShape] = {
    "Llama 2 7B": CacheShape(num_layers=32, num_heads=32, head_dim=128),
    "Falcon 7B": CacheShape(num_layers=32, num_heads=71, head_dim=64, num_kv_heads=1),
    "Llama 3 8B": CacheShape(num_layers=32, num_heads=32, head_dim=128, num_kv_heads=8),
    "Qwen3 8B": CacheShape(num_layers=36, num_heads=32, head_dim=128, num_kv_heads=8),
    "Mistral 7B v0.1": CacheShape(
        num_layers=32, num_heads=32, head_dim=128, num_kv_heads=8, window=4096
    ),
    "DeepSeek-V3": CacheShape(
        num_layers=61, num_heads=128, head_dim=128, kv_lora_rank=512, rope_dim=64
    ),
}
