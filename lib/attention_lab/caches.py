"""The decoding caches: what a model keeps of the positions it has decoded, and how big it is.

Decoding one token at a time has a cost problem of its own: recomputing the keys and values of
the whole prefix for every new token. :class:`KVCache` keeps them for one layer, and
:func:`decode_step` runs a :class:`~attention_lab.attention.MultiHeadAttention` on the new
tokens only. :class:`LatentCache` is what multi-head latent attention
(:class:`~attention_lab.latent_attention.LatentAttention`) keeps instead: one small latent and
one shared rotated key per position. :class:`CacheShape` sizes a cache from a model's attention
settings, and ``PUBLISHED_CACHE_SHAPES`` holds those of published models. :class:`HybridShape`
sizes what a hybrid model (attention layers among linear-attention layers) holds per sequence,
and ``PUBLISHED_HYBRID_SHAPES`` holds those of published hybrids.
"""

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import torch

from attention_lab._validation import (
    check_cache_room,
    check_cache_sizes,
    check_int,
    check_sequence,
)
from attention_lab.attention import MultiHeadAttention
from attention_lab.masks import causal_mask

__all__ = [
    "PUBLISHED_CACHE_SHAPES",
    "PUBLISHED_HYBRID_SHAPES",
    "CacheShape",
    "HybridMemory",
    "HybridShape",
    "KVCache",
    "LatentCache",
    "decode_step",
]


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


class LatentCache:
    """What latent attention caches per position: the latent and the shared RoPE key.

    The cache of :class:`~attention_lab.latent_attention.LatentAttention`.

    Multi-head latent attention rebuilds every head's keys and values from one small latent
    vector per position, so the cache holds ``kv_lora_rank + qk_rope_head_dim`` numbers per
    position and layer, instead of ``2 * H * Dh`` for multi-head attention.

    Args:
        batch_size: Number of sequences ``B``, a positive int.
        kv_lora_rank: Width ``R`` of the latent, a positive int.
        rope_dim: Width ``Dr`` of the RoPE key, a positive int.
        max_len: The most positions the cache can hold, a positive int.
        dtype: Floating dtype of the stored tensors.
        device: Device of the stored tensors.

    Attributes:
        latents: Shape ``[B, max_len, R]``; the first ``len(cache)`` positions are filled.
        rope_keys: Shape ``[B, max_len, Dr]``, the rotated keys shared by every head.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If a size is not positive.

    Example:
        >>> cache = LatentCache(batch_size=1, kv_lora_rank=8, rope_dim=4, max_len=16)
        >>> cache.numbers_per_position
        12
    """

    def __init__(
        self,
        batch_size: int,
        kv_lora_rank: int,
        rope_dim: int,
        max_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        check_cache_sizes(
            {
                "batch_size": batch_size,
                "kv_lora_rank": kv_lora_rank,
                "rope_dim": rope_dim,
                "max_len": max_len,
            },
            dtype,
        )
        self.latents = torch.zeros(batch_size, max_len, kv_lora_rank, dtype=dtype, device=device)
        self.rope_keys = torch.zeros(batch_size, max_len, rope_dim, dtype=dtype, device=device)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def numbers_per_position(self) -> int:
        """The count of numbers stored per position and sequence, ``R + Dr``."""
        return self.latents.shape[-1] + self.rope_keys.shape[-1]

    def append(
        self, latent: torch.Tensor, rope_key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``Tn`` new positions after those held; return views of every position held.

        Args:
            latent: Shape ``[B, Tn, R]``, the cache's dtype.
            rope_key: Shape ``[B, Tn, Dr]``, the cache's dtype.

        Returns:
            A pair ``(latents, rope_keys)`` of shapes ``[B, len(cache), R]`` and
            ``[B, len(cache), Dr]``.

        Raises:
            ValueError: If a shape or dtype does not match, or the cache would overflow.
        """
        new_len = latent.shape[1]
        for name, tensor, store in (
            ("latent", latent, self.latents),
            ("rope_key", rope_key, self.rope_keys),
        ):
            expected = (store.shape[0], new_len, store.shape[2])
            if tensor.shape != expected or tensor.dtype != store.dtype:
                raise ValueError(
                    f"{name} must have shape {list(expected)} and dtype {store.dtype}, got "
                    f"{list(tensor.shape)} and {tensor.dtype}"
                )
        check_cache_room(self._length, new_len, self.latents.shape[1])
        end = self._length + new_len
        self.latents[:, self._length : end] = latent
        self.rope_keys[:, self._length : end] = rope_key
        self._length = end
        return self.latents[:, :end], self.rope_keys[:, :end]  # [B, L, R], [B, L, Dr]


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
    positions = torch.arange(start, start + new_len) if attention.rotary is not None else None
    q, k, v = attention.project(x, positions=positions)  # [B, H, Tn, Dh], [B, Hkv, Tn, Dh] x2
    keys, values = cache.append(k, v)  # [B, Hkv, L, Dh] twice, L = len(cache)
    # New position i sits at L - Tn + i and may attend to positions 0 .. L - Tn + i. A single
    # new position may attend to everything held, so it needs no mask.
    mask = causal_mask(len(cache), device=x.device)[-new_len:] if new_len > 1 else None
    return attention.attend(q, keys, values, mask)  # [B, Tn, D], [B, H, Tn, L]


@dataclass(frozen=True)
class CacheShape:
    """The part of a model's attention settings that decides the size of its decoding cache.

    Multi-head attention caches a key and a value of width ``Dh`` for each of its ``H`` heads, per
    position and layer; grouped-query attention caches ``Hkv < H`` heads, multi-query attention
    one; multi-head latent attention (DeepSeek-V2/V3) caches one latent of width ``R`` and one
    shared RoPE key of width ``Dr`` (:class:`LatentCache`); a sliding window of ``W`` positions
    (Mistral 7B v0.1) keeps at most ``W`` positions per layer.

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
# cache depends on. tests/unit/test_cache_shapes.py checks those that transformers' default
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


class HybridMemory(NamedTuple):
    """What a hybrid model holds per batch, in bytes (:meth:`HybridShape.memory_bytes`), as
    four named ints.

    - ``cache``: the attention layers' key/value (or latent) cache, growing with the context.
    - ``state``: the linear layers' states and convolution windows, the same at any context.
    - ``total``: ``cache + state``.
    - ``all_attention``: the cache the same model would hold if every layer were one of its
      attention layers.
    """

    cache: int
    state: int
    total: int
    all_attention: int


@dataclass(frozen=True)
class HybridShape:
    """A hybrid model's layers, as far as they decide what a sequence holds while it is decoded.

    The attention layers keep a cache that grows with the context (``attention``, whose
    ``num_layers`` counts the attention layers only). Each of the ``num_linear_layers`` linear
    layers (Gated DeltaNet in Qwen3-Next, Kimi Delta Attention in Kimi Linear:
    :func:`~attention_lab.linear.delta_rule`) keeps, per sequence, whatever the context:

    - its state, ``[Hv, Dk, Dv]``: ``Hv * Dk * Dv`` numbers;
    - the inputs its causal convolution over ``conv_size`` positions still needs, the last
      ``conv_size - 1`` positions of the ``2 * Hk * Dk + Hv * Dv`` convolved channels (queries,
      keys and values): ``(conv_size - 1) * (2 * Hk * Dk + Hv * Dv)`` numbers. (transformers'
      cache keeps a window of ``conv_size`` positions, one more than the convolution needs.)

    Args:
        attention: The attention layers' :class:`CacheShape`.
        num_linear_layers: Number of linear layers, a positive int.
        num_key_heads: ``Hk``, the linear layers' query/key heads, a positive int.
        num_value_heads: ``Hv``, their value heads, a positive multiple of ``Hk``.
        key_dim: ``Dk``, a positive int.
        value_dim: ``Dv``, a positive int.
        conv_size: The causal convolution's kernel length, a positive int.

    Raises:
        TypeError: If ``attention`` is not a :class:`CacheShape` or a size is not an int.
        ValueError: If a size is not positive or ``Hv`` is not a multiple of ``Hk``.

    Example:
        >>> qwen3_next = PUBLISHED_HYBRID_SHAPES["Qwen3-Next-80B-A3B"]
        >>> qwen3_next.num_layers, qwen3_next.state_numbers  # per sequence, any context
        (48, 19759104)
        >>> memory = qwen3_next.memory_bytes(262_144)  # 16-bit numbers, one sequence
        >>> memory.cache / 2**30, memory.all_attention / 2**30
        (6.0, 24.0)
    """

    attention: CacheShape
    num_linear_layers: int
    num_key_heads: int
    num_value_heads: int
    key_dim: int
    value_dim: int
    conv_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.attention, CacheShape):
            raise TypeError(f"attention must be a CacheShape, got {type(self.attention).__name__}")
        for name in (
            "num_linear_layers",
            "num_key_heads",
            "num_value_heads",
            "key_dim",
            "value_dim",
            "conv_size",
        ):
            check_int(getattr(self, name), name)
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(
                f"num_value_heads={self.num_value_heads} must be a multiple of "
                f"num_key_heads={self.num_key_heads}"
            )

    @property
    def num_layers(self) -> int:
        """Every layer, attention and linear."""
        return self.attention.num_layers + self.num_linear_layers

    @property
    def state_numbers_per_layer(self) -> int:
        """How many numbers one linear layer keeps per sequence (its state and its
        convolution's window)."""
        heads, keys, values = self.num_value_heads, self.key_dim, self.value_dim
        channels = 2 * self.num_key_heads * keys + heads * values
        return heads * keys * values + (self.conv_size - 1) * channels

    @property
    def state_numbers(self) -> int:
        """Numbers all the linear layers keep per sequence, at any context."""
        return self.num_linear_layers * self.state_numbers_per_layer

    def memory_bytes(
        self, context: int, *, batch_size: int = 1, bytes_per_number: int = 2
    ) -> HybridMemory:
        """Bytes held after ``context`` positions of ``batch_size`` sequences.

        Args:
            context: Positions decoded so far, a non-negative int.
            batch_size: Sequences decoded side by side, a positive int.
            bytes_per_number: 2 for 16-bit numbers, 4 for float32, 1 for 8-bit; a positive int.

        Returns:
            A :class:`HybridMemory`: the attention layers' cache
            (:meth:`CacheShape.cache_bytes`), the linear layers' state
            (``state_numbers * batch_size * bytes_per_number``, held from the first position on),
            their total, and the cache of the same model with attention in all its layers.

        Raises:
            TypeError: If an argument is not an int.
            ValueError: If ``context`` is negative or another argument not positive.
        """
        sizes = {"batch_size": batch_size, "bytes_per_number": bytes_per_number}
        cache = self.attention.cache_bytes(context, **sizes)
        state = self.state_numbers * batch_size * bytes_per_number
        every_layer = dataclasses.replace(self.attention, num_layers=self.num_layers)
        return HybridMemory(cache, state, cache + state, every_layer.cache_bytes(context, **sizes))


# Published hybrids, from each release's config.json. tests/unit/test_linear.py checks them
# against transformers' configuration classes: Qwen3NextConfig()'s defaults are
# Qwen3-Next-80B-A3B's; KimiLinearConfig() needs the release's linear_attn_config, whose
# full_attn_layers [4, 8, 12, 16, 20, 24, 27] make 7 attention layers (the class's default
# layer_types have 6).
PUBLISHED_HYBRID_SHAPES: dict[str, HybridShape] = {
    # 48 layers: 12 x (3 Gated DeltaNet, 1 gated attention); attention 16 query heads, 2
    # key/value heads of width 256; Gated DeltaNet 16 query/key and 32 value heads of width 128.
    "Qwen3-Next-80B-A3B": HybridShape(
        attention=CacheShape(num_layers=12, num_heads=16, head_dim=256, num_kv_heads=2),
        num_linear_layers=36,
        num_key_heads=16,
        num_value_heads=32,
        key_dim=128,
        value_dim=128,
        conv_size=4,
    ),
    # 27 layers: 20 Kimi Delta Attention, 7 multi-head latent attention (DeepSeek-V3's
    # latent 512 and RoPE key 64, 32 heads); KDA 32 heads of width 128 for q, k and v.
    "Kimi-Linear-48B-A3B": HybridShape(
        attention=CacheShape(
            num_layers=7, num_heads=32, head_dim=128, kv_lora_rank=512, rope_dim=64
        ),
        num_linear_layers=20,
        num_key_heads=32,
        num_value_heads=32,
        key_dim=128,
        value_dim=128,
        conv_size=4,
    ),
}
