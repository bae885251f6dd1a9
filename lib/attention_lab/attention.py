"""Scaled dot-product attention and the attention modules built on it.

Each query position takes a weighted average of the value vectors; the weights say how well the
query matches each key. :func:`scaled_dot_product_attention` is that computation as a function,
:class:`SelfAttention` is one learned head, and :class:`MultiHeadAttention` runs several heads
side by side. All three return ``(output, weights)`` so the weights can be inspected and plotted.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from attention_lab._validation import (
    check_bool,
    check_int,
    check_probability,
    check_sequence,
)
from attention_lab.attention_config import AttentionConfig
from attention_lab.masks import check_mask, topk_mask
from attention_lab.positional import ROPE_SCALINGS, RotaryEmbedding, alibi_bias
from attention_lab.score_modifiers import ScoreModifiers


def check_attention_inputs(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float,
    *,
    modifiers: ScoreModifiers | None = None,
) -> None:
    """Check the arguments of :func:`scaled_dot_product_attention`, or raise.

    Every function that computes attention from ``query``, ``key`` and ``value`` (this one,
    :func:`attention_lab.efficient.tiled_attention`) calls it, so all of them accept and reject
    the same inputs with the same messages.

    Args:
        query: Shape ``[..., Tq, Dk]``, a floating dtype.
        key: Shape ``[..., Tk, Dk]``, same dtype as ``query``.
        value: Shape ``[..., Tk, Dv]``, same dtype as ``query``; the leading dimensions of the
            three broadcast together.
        mask: ``None``, or a ``torch.bool`` tensor broadcastable to ``[..., Tq, Tk]``.
        dropout_p: A probability in ``[0, 1)``.
        modifiers: ``None``, or a :class:`~attention_lab.score_modifiers.ScoreModifiers` whose
            bias and sink logits fit the scores ``[..., Tq, Tk]``.

    Raises:
        TypeError: If an input is not a tensor, not floating point, or the dtypes differ; if
            ``mask`` is not a ``torch.bool`` tensor; if ``dropout_p`` is not a number, or
            ``modifiers`` not a ``ScoreModifiers``.
        ValueError: If the shapes are inconsistent, ``mask`` does not broadcast to
            ``[..., Tq, Tk]``, ``dropout_p`` is outside ``[0, 1)``, or ``modifiers`` does not
            fit the scores.
    """
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if not tensor.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {tensor.dtype}")
        if tensor.ndim < 2:
            raise ValueError(f"{name} must have shape [..., T, D], got {list(tensor.shape)}")
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(
            "query, key and value must have the same dtype, "
            f"got {query.dtype}, {key.dtype} and {value.dtype}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            "query [..., Tq, Dk] and key [..., Tk, Dk] must have the same Dk, "
            f"got query {list(query.shape)} and key {list(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "key [..., Tk, Dk] and value [..., Tk, Dv] must have the same Tk, "
            f"got key {list(key.shape)} and value {list(value.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
        torch.broadcast_shapes(batch, value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            "the batch dimensions of query, key and value do not broadcast together, got "
            f"query {list(query.shape)}, key {list(key.shape)} and value {list(value.shape)}"
        ) from None
    if mask is not None:
        check_mask(mask)
        scores_shape = (*batch, query.shape[-2], key.shape[-2])
        try:
            broadcastable = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except RuntimeError:
            broadcastable = False
        if not broadcastable:
            raise ValueError(
                f"mask of shape {list(mask.shape)} does not broadcast to the attention "
                f"scores [..., Tq, Tk] = {list(scores_shape)}"
            )
    check_probability(dropout_p, "dropout_p")
    if modifiers is not None:
        if not isinstance(modifiers, ScoreModifiers):
            raise TypeError(
                f"modifiers must be None or a ScoreModifiers, got {type(modifiers).__name__}"
            )
        modifiers.check((*batch, query.shape[-2], key.shape[-2]))


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    modifiers: ScoreModifiers | None = None,
    top_k: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as in "Attention Is All You Need": ``softmax(Q K^T / sqrt(Dk)) V``.

    ``modifiers`` holds the changes today's models make to the scores (Part VI): a cap and a
    bias applied to the scaled scores before the mask, and extra logits, one per head, that
    join the softmax (:class:`~attention_lab.score_modifiers.ScoreModifiers`). ``top_k``
    (Part VII) then keeps, for each query, only its ``top_k`` highest logits among the keys
    ``mask`` lets it see (:func:`~attention_lab.masks.topk_mask`): exact top-k attention. Every
    score is still computed, so it saves no work: it is the definition, not a fast kernel.

    Blocked positions get a weight of exactly 0. A query row in which every key is blocked is
    defined rather than NaN: its weights and its output are all 0, in every floating dtype. For
    ``float16`` and ``bfloat16`` inputs the softmax is computed in ``float32``.

    Args:
        query: Shape ``[..., Tq, Dk]``, a floating dtype.
        key: Shape ``[..., Tk, Dk]``, same dtype as ``query``.
        value: Shape ``[..., Tk, Dv]``, same dtype as ``query``. The leading dimensions of
            ``query``, ``key`` and ``value`` broadcast together.
        mask: Optional, dtype ``torch.bool``, broadcastable to ``[..., Tq, Tk]``: ``True``
            where the query may attend to the key (see ``attention_lab.masks``).
        dropout_p: Dropout probability in ``[0, 1)`` applied to the weights that multiply
            ``value``, whenever it is positive (as in PyTorch's function; modules pass 0 in
            evaluation mode).
        modifiers: Optional :class:`~attention_lab.score_modifiers.ScoreModifiers`.
        top_k: ``None`` (every visible key), or how many keys each query keeps,
            ``1 <= top_k <= Tk``; a query that sees fewer keeps all it sees. Ties at the
            ``top_k``-th logit are broken by ``torch.topk``.

    Returns:
        A pair ``(output, weights)``. ``output`` has shape ``[..., Tq, Dv]``. ``weights`` has
        shape ``[..., Tq, Tk]``; it is the attention distribution before dropout, so each row
        sums to 1 unless all its keys are blocked (then 0) or ``modifiers`` adds logits to
        the softmax (then less than 1). Both have the dtype of ``query``.

    Raises:
        TypeError: If an input is not a tensor, not floating point, or the dtypes differ; if
            ``mask`` is not a ``torch.bool`` tensor; if ``dropout_p`` is not a number or
            ``top_k`` not an int.
        ValueError: If the shapes are inconsistent, ``mask`` (or the modifiers' bias) does not
            broadcast to ``[..., Tq, Tk]``, ``dropout_p`` is outside ``[0, 1)``, or ``top_k``
            is not positive or larger than ``Tk``.

    Example:
        >>> query, key, value = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
        >>> output, weights = scaled_dot_product_attention(query, key, value)
        >>> output.shape, weights.shape
        (torch.Size([2, 3, 6]), torch.Size([2, 3, 5]))
    """
    check_attention_inputs(query, key, value, mask, dropout_p, modifiers=modifiers)
    if top_k is not None:
        check_int(top_k, "top_k")
        if top_k > key.shape[-2]:
            raise ValueError(
                f"top_k must be at most the number of keys, Tk = {key.shape[-2]}; got {top_k}"
            )
    scores = query @ key.transpose(-2, -1)  # [..., Tq, Tk]
    # In place: the product is a fresh tensor, and each pass over [..., Tq, Tk] costs time.
    scores.div_(math.sqrt(query.shape[-1]))
    if modifiers is not None:
        scores = modifiers.apply(scores)  # Part VI's changes to the scores
    if top_k is not None:
        # Part VII: rank the logits the softmax will see; keep each query's top_k visible keys.
        mask = topk_mask(scores.detach(), top_k, mask)  # [..., Tq, Tk]
    if mask is not None:
        # The most negative finite value, not -inf: a row with every key blocked then has a
        # uniform softmax instead of 0 / 0 = NaN, and is zeroed below.
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    # Half-precision exponentials and sums lose too much: compute in at least float32.
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)
    softmax = torch.softmax if modifiers is None else modifiers.softmax  # Part VI's softmax
    weights = softmax(scores, dim=-1, dtype=softmax_dtype).to(scores.dtype)
    if mask is not None:
        # Blocked weights underflow to exactly 0 already, except in a row whose keys are all
        # blocked (its softmax is uniform). Zero those rows, found on the small mask.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # broadcastable to [..., Tq, 1]
        if empty_rows.any():
            weights = weights.masked_fill(empty_rows, 0.0)
    attended = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    output = attended @ value  # [..., Tq, Dv]
    return output, weights


class SelfAttention(nn.Module):
    """One head of self-attention: queries, keys and values are projections of the same input.

    The projections are the ``nn.Linear(d_model, head_dim)`` layers ``q_proj``, ``k_proj`` and
    ``v_proj``, named as in :class:`MultiHeadAttention`. There is no output projection.

    Args:
        d_model: Width ``D`` of the input, a positive int.
        head_dim: Width ``Dh`` of the queries, keys, values and output, a positive int.
        bias: Whether the three projections have a bias.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``d_model`` or ``head_dim`` is not positive.

    Example:
        >>> attend = SelfAttention(d_model=8, head_dim=4)
        >>> output, weights = attend(torch.randn(2, 5, 8))
        >>> output.shape, weights.shape
        (torch.Size([2, 5, 4]), torch.Size([2, 1, 5, 5]))
    """

    def __init__(self, d_model: int, head_dim: int, *, bias: bool = True) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        check_int(head_dim, "head_dim")
        check_bool(bias, "bias")
        self.d_model = d_model
        self.head_dim = head_dim
        self.q_proj = nn.Linear(d_model, head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, head_dim, bias=bias)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Let every position of ``x`` attend to every position it is allowed to.

        Args:
            x: Shape ``[B, T, D]``, floating dtype of the module's parameters.
            mask: Optional, dtype ``torch.bool``, broadcastable to ``[B, 1, T, T]``: ``True``
                where a query may attend to a key, e.g. ``causal_mask(T)`` or
                ``padding_mask(token_ids)``.

        Returns:
            A pair ``(output, weights)``: ``output`` of shape ``[B, T, Dh]`` and ``weights`` of
            shape ``[B, 1, T, T]`` (one head), both in the dtype of ``x``.

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``mask`` is not a bool tensor.
            ValueError: If ``x`` is not ``[B, T, D]`` or ``mask`` does not broadcast.
        """
        check_sequence(x, "x", self.d_model)
        # The head dimension H = 1 gives weights the shape every attention module returns.
        query = self.q_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        key = self.k_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        value = self.v_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        output, weights = scaled_dot_product_attention(query, key, value, mask)
        return output.squeeze(1), weights  # [B, T, Dh], [B, 1, T, T]


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, with the same parameters as ``nn.MultiheadAttention``,
    and, through an :class:`~attention_lab.attention_config.AttentionConfig`, the grouped-query
    attention, QK-norm, rotary embeddings, ALiBi, sinks and softcap of today's models.

    The input is projected by ``q_proj``, ``k_proj`` and ``v_proj``, split into heads of width
    ``head_dim``, attended per head in one batched call to :func:`scaled_dot_product_attention`,
    merged back and projected by ``out_proj``. Without a ``config``, each projection is an
    ``nn.Linear(d_model, d_model)`` and there are ``num_heads`` heads of width
    ``Dh = d_model // num_heads``, as in "Attention Is All You Need".

    What a ``config`` adds (Part VI):

    - ``num_kv_heads`` (grouped-query attention: Llama, Qwen, Mistral): keys and values are
      projected to only ``Hkv`` heads (``k_proj`` and ``v_proj`` are
      ``nn.Linear(d_model, Hkv * Dh)``), each shared by ``num_heads // num_kv_heads``
      consecutive query heads: query head ``h`` uses key/value head ``h // (H // Hkv)``, the
      grouping of ``repeat_interleave`` that
      ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)`` and
      ``transformers``' ``repeat_kv`` use (:meth:`repeat_kv`). ``num_kv_heads=1`` is
      multi-query attention. A KV cache then holds ``Hkv`` heads instead of ``H``.
    - ``qk_norm`` adds ``q_norm`` and ``k_norm``, each an ``nn.RMSNorm(head_dim)``, applied
      to every head's queries and keys before the rotation (Qwen3).
    - ``rope_layout`` rotates the queries and keys of every head with ``rotary``, a
      :class:`~attention_lab.positional.RotaryEmbedding` of that layout, base and scaling,
      built once with the module (for ``"dynamic"`` scaling, its frequencies are computed at
      each call for its length).
    - ``alibi``, ``sinks`` (a learned logit per head, ``sink_logits``) and ``softcap`` change
      the scores, through :meth:`score_modifiers`
      (:class:`~attention_lab.score_modifiers.ScoreModifiers`).

    Args:
        d_model: Model width ``D``, a positive int; divisible by ``num_heads`` unless the
            config gives ``head_dim``.
        num_heads: Number of query heads ``H``, a positive int.
        config: ``None`` (the attention of 2017), or an ``AttentionConfig``.
        bias: Whether the four projections have a bias.
        dropout: Dropout probability on the attention weights in training mode, in ``[0, 1)``.

    Attributes:
        config: The ``AttentionConfig`` (a default one when none was given).
        num_kv_heads: ``Hkv``, resolved (``num_heads`` when the config leaves it ``None``).
        head_dim: ``Dh``, resolved.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range, ``d_model`` is not divisible by
            ``num_heads`` (without ``head_dim``), ``num_heads`` not by ``num_kv_heads``, or a
            rotary embedding is asked for with an odd ``head_dim``.

    Example:
        >>> attend = MultiHeadAttention(d_model=8, num_heads=2)
        >>> output, weights = attend(torch.randn(3, 5, 8))
        >>> output.shape, weights.shape
        (torch.Size([3, 5, 8]), torch.Size([3, 2, 5, 5]))
        >>> grouped = AttentionConfig(num_kv_heads=2, rope_layout="half")
        >>> gqa = MultiHeadAttention(8, 4, config=grouped)
        >>> gqa.k_proj, gqa(torch.randn(3, 5, 8))[1].shape
        (Linear(in_features=8, out_features=4, bias=True), torch.Size([3, 4, 5, 5]))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        config: AttentionConfig | None = None,
        bias: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        check_int(num_heads, "num_heads")
        if config is None:
            config = AttentionConfig()
        if not isinstance(config, AttentionConfig):
            raise TypeError(
                f"config must be None or an AttentionConfig, got {type(config).__name__}"
            )
        head_dim, num_kv_heads = config.layer_shape(d_model, num_heads)
        check_bool(bias, "bias")
        check_probability(dropout, "dropout")
        self.config = config
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, num_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)
        self.out_proj = nn.Linear(num_heads * head_dim, d_model, bias=bias)
        eps = config.norm_eps
        self.q_norm = nn.RMSNorm(head_dim, eps=eps) if config.qk_norm else None
        self.k_norm = nn.RMSNorm(head_dim, eps=eps) if config.qk_norm else None
        self.rotary = None
        if config.rope_layout is not None:
            self.rotary = RotaryEmbedding(
                head_dim,
                base=config.rope_base,
                layout=config.rope_layout,
                scaling=config.rope_scaling,
            )
        self.sink_logits = nn.Parameter(torch.zeros(num_heads)) if config.sinks else None
        # ALiBi's bias for the last (Tq, Tk, device, dtype) seen, built once per shape rather
        # than at every forward pass (a plain attribute, as RotaryEmbedding keeps its
        # frequencies: not in the state dict, since it is a function of the shape alone).
        self._alibi: tuple[tuple, torch.Tensor] | None = None

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` to ``key``/``value``; self-attention if they are omitted.

        Args:
            query: Shape ``[B, Tq, D]``, floating dtype of the module's parameters.
            key: Shape ``[B, Tk, D]``; defaults to ``query``.
            value: Shape ``[B, Tk, D]``; defaults to ``key``.
            mask: Optional, dtype ``torch.bool``, broadcastable to ``[B, H, Tq, Tk]``: ``True``
                where a query may attend to a key, e.g. ``causal_mask(T)`` (``[T, T]``) or
                ``padding_mask(token_ids)`` (``[B, 1, 1, Tk]``).
            positions: Only with ``rope``: shape ``[Tq]``, an integer dtype, the positions of
                the queries (and of the keys, in self-attention). Defaults to ``0 .. Tq - 1``;
                keys given separately are at ``0 .. Tk - 1``.

        Returns:
            A pair ``(output, weights)``: ``output`` of shape ``[B, Tq, D]`` and ``weights`` of
            shape ``[B, H, Tq, Tk]``, the per-head attention distribution before dropout. A
            query whose keys are all blocked gets weights 0 and the output ``out_proj(0)``.

        Raises:
            TypeError: If an input is not a floating tensor, ``mask`` is not a bool tensor or
                ``positions`` not an integer tensor.
            ValueError: If the shapes do not match ``[B, Tq, D]``, ``[B, Tk, D]``,
                ``[B, H, Tq, Tk]`` and ``[Tq]``, or ``positions`` is given without ``rope``.
        """
        q, k, v = self.project(query, key, value, positions=positions)
        return self.attend(q, k, v, mask)  # [B, Tq, D], [B, H, Tq, Tk]

    def project(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The per-head queries, keys and values: projected, split, normalised and rotated.

        The first half of :meth:`forward`; :func:`attention_lab.caches.decode_step` calls it
        on new tokens, stores their keys and values in a cache, then calls :meth:`attend`.

        Args:
            query: Shape ``[B, Tq, D]``, floating dtype of the module's parameters.
            key: Shape ``[B, Tk, D]``; defaults to ``query``.
            value: Shape ``[B, Tk, D]``; defaults to ``key``.
            positions: As in :meth:`forward`.

        Returns:
            A triple ``(q, k, v)`` of shapes ``[B, H, Tq, Dh]``, ``[B, Hkv, Tk, Dh]`` and
            ``[B, Hkv, Tk, Dh]``.

        Raises:
            TypeError: As :meth:`forward`.
            ValueError: As :meth:`forward`.
        """
        self_attention = key is None
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        if positions is not None and self.rotary is None:
            raise ValueError(
                "positions is given, but the module has no rotary embedding (config.rope_layout)"
            )
        q = self._split_heads(self.q_proj(query))  # [B, H, Tq, Dh]
        k = self._split_heads(self.k_proj(key))  # [B, Hkv, Tk, Dh]
        v = self._split_heads(self.v_proj(value))  # [B, Hkv, Tk, Dh]
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # over Dh, per head and position
        if self.rotary is not None:
            key_positions = positions if self_attention else None  # None: 0 .. Tk - 1
            q, k = self.rotary(q, positions), self.rotary(k, key_positions)
        return q, k, v

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention of every query head to its group's key/value head, merged and projected.

        The second half of :meth:`forward`. Each key/value head is repeated for the
        ``H // Hkv`` query heads of its group (``repeat_interleave``: query head ``h`` reads
        key/value head ``h // (H // Hkv)``).

        Args:
            q: Shape ``[B, H, Tq, Dh]``, as :meth:`project` returns.
            k: Shape ``[B, Hkv, Tk, Dh]``, e.g. every key a cache holds.
            v: Shape ``[B, Hkv, Tk, Dh]``.
            mask: As in :meth:`forward`.

        Returns:
            A pair ``(output, weights)`` as :meth:`forward` returns.

        Raises:
            ValueError: If ``k`` or ``v`` does not have ``Hkv`` heads, or ``mask`` does not
                broadcast to ``[B, H, Tq, Tk]``.
        """
        for name, tensor in (("k", k), ("v", v)):
            if tensor.ndim != 4 or tensor.shape[1] != self.num_kv_heads:
                raise ValueError(
                    f"{name} must have shape [B, Hkv, Tk, Dh] with Hkv={self.num_kv_heads}, "
                    f"got {list(tensor.shape)}"
                )
        k, v = self.repeat_kv(k), self.repeat_kv(v)  # [B, H, Tk, Dh]
        dropout_p = self.dropout if self.training else 0.0
        modifiers = self.score_modifiers(q, k)
        # config.top_k keys per query, or all of them when there are no more (short inputs).
        top_k = None if self.config.top_k is None else min(self.config.top_k, k.shape[-2])
        output, weights = scaled_dot_product_attention(
            q, k, v, mask, dropout_p=dropout_p, modifiers=modifiers, top_k=top_k
        )
        batch, _, query_len, _ = output.shape
        output = output.transpose(1, 2)  # [B, Tq, H, Dh]
        output = output.reshape(batch, query_len, self.num_heads * self.head_dim)  # [B, Tq, H*Dh]
        return self.out_proj(output), weights

    def logits(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        *,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Every head's attention logits: the scaled scores ``q · k / sqrt(Dh)`` before the
        softcap, the ALiBi bias and the mask, the numbers whose growth QK-norm and softcapping
        are there to stop.

        Args:
            query: Shape ``[B, Tq, D]``, as in :meth:`forward`.
            key: Shape ``[B, Tk, D]``; defaults to ``query``.
            positions: As in :meth:`forward`.

        Returns:
            Shape ``[B, H, Tq, Tk]``, with the queries and keys that :meth:`forward` attends
            with (normalised, rotated, each key/value head repeated for its group).

        Raises:
            TypeError: As :meth:`forward`.
            ValueError: As :meth:`forward`.
        """
        q, k, _ = self.project(query, key, positions=positions)
        k = self.repeat_kv(k)  # [B, H, Tk, Dh]
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # [B, H, Tq, Tk]

    def repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        """Each key/value head repeated for the query heads of its group.

        Query head ``h`` reads key/value head ``h // (H // Hkv)``: ``repeat_interleave``, as
        ``transformers``' ``repeat_kv`` and PyTorch's ``enable_gqa=True`` group them.

        Args:
            x: Keys or values, shape ``[B, Hkv, Tk, Dh]``.

        Returns:
            Shape ``[B, H, Tk, Dh]``; ``x`` itself when every query head has its own.
        """
        group = self.num_heads // self.num_kv_heads
        if group == 1:
            return x
        return x.repeat_interleave(group, dim=1)  # [B, H, Tk, Dh]

    def score_modifiers(self, q: torch.Tensor, k: torch.Tensor) -> ScoreModifiers | None:
        """The changes to the scores that the config asks for, or ``None`` (Parts I to V).

        ALiBi's bias (built once per shape and kept) for queries at the last ``Tq`` of the
        ``Tk`` positions (as with a cache),
        the sink logits and the softcap, as
        :class:`~attention_lab.score_modifiers.ScoreModifiers`.

        Args:
            q: Shape ``[B, H, Tq, Dh]``.
            k: Shape ``[B, H, Tk, Dh]``.

        Returns:
            ``ScoreModifiers`` for scores ``[B, H, Tq, Tk]``, or ``None`` if the config has
            neither ``alibi``, ``sinks`` nor ``softcap``.
        """
        config = self.config
        if not (config.alibi or config.sinks or config.softcap is not None):
            return None
        bias = None
        if config.alibi:
            key = (q.shape[-2], k.shape[-2], q.device, q.dtype)  # Tq, Tk, where, in what
            if self._alibi is None or self._alibi[0] != key:
                built = alibi_bias(self.num_heads, key[0], key[1]).to(q.device, q.dtype)
                self._alibi = (key, built)  # [H, Tq, Tk]
            bias = self._alibi[1]
        return ScoreModifiers(softcap=config.softcap, bias=bias, sink_logits=self.sink_logits)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = x.shape  # width: the heads side by side, H * Dh
        num_heads = width // self.head_dim
        x = x.view(batch, seq_len, num_heads, self.head_dim)  # [B, T, H, Dh]
        return x.transpose(1, 2)  # [B, H, T, Dh]

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            check_sequence(tensor, name, self.d_model)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                "key [B, Tk, D] and value [B, Tk, D] must have the same B and Tk, "
                f"got key {list(key.shape)} and value {list(value.shape)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(
                "query [B, Tq, D] and key [B, Tk, D] must have the same batch size B, "
                f"got query {list(query.shape)} and key {list(key.shape)}"
            )

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Build a ``MultiHeadAttention`` with the weights of a PyTorch ``nn.MultiheadAttention``.

        The result computes the same output and per-head weights as ``module`` called with
        ``need_weights=True, average_attn_weights=False`` (transpose the inputs first if
        ``module`` is not ``batch_first``). It has the same dropout and training mode and lives
        on the same device, in the same dtype.

        Args:
            module: The PyTorch module to copy. Its key and value widths must equal
                ``embed_dim``, it must not use ``add_bias_kv`` or ``add_zero_attn``, and either
                all or none of its projections have a bias.

        Returns:
            A new ``MultiHeadAttention`` holding copies of the weights.

        Raises:
            TypeError: If ``module`` is not an ``nn.MultiheadAttention``.
            ValueError: If ``module`` uses a feature this class cannot represent.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"module must be an nn.MultiheadAttention, got {type(module).__name__}")
        if not module._qkv_same_embed_dim:
            raise ValueError(
                f"module has kdim={module.kdim} and vdim={module.vdim}, but MultiHeadAttention "
                f"needs both equal to embed_dim={module.embed_dim}"
            )
        if module.bias_k is not None:
            raise ValueError("module uses add_bias_kv=True, which MultiHeadAttention lacks")
        if module.add_zero_attn:
            raise ValueError("module uses add_zero_attn=True, which MultiHeadAttention lacks")
        in_bias, out_bias = module.in_proj_bias, module.out_proj.bias
        if (in_bias is None) != (out_bias is None):
            raise ValueError(
                "module has a bias on some projections but not all (in_proj_bias is "
                f"{'set' if in_bias is not None else 'None'}, out_proj.bias is "
                f"{'set' if out_bias is not None else 'None'}); MultiHeadAttention needs "
                "all or none"
            )
        attention = cls(
            module.embed_dim, module.num_heads, bias=in_bias is not None, dropout=module.dropout
        )
        weight = module.in_proj_weight
        attention.to(device=weight.device, dtype=weight.dtype)
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        with torch.no_grad():
            # in_proj_weight stacks the query, key and value weights: [3 * D, D].
            for projection, part in zip(projections, weight.chunk(3), strict=True):
                projection.weight.copy_(part)
            attention.out_proj.weight.copy_(module.out_proj.weight)
            if in_bias is not None:
                for projection, part in zip(projections, in_bias.chunk(3), strict=True):
                    projection.bias.copy_(part)
                attention.out_proj.bias.copy_(out_bias)
        return attention.train(module.training)

    @classmethod
    def from_hf(cls, module: nn.Module) -> "MultiHeadAttention":
        """Build a ``MultiHeadAttention`` with the weights of a Llama- or Qwen3-style attention.

        ``module`` is the attention layer of a ``transformers`` model such as ``LlamaAttention``,
        ``Qwen3Attention``, ``MistralAttention``, ``GptOssAttention`` or ``Gemma2Attention``:
        separate ``q_proj``, ``k_proj``, ``v_proj`` and ``o_proj``, grouped-query attention, the
        rotary embedding in the ``"half"`` layout (scaled as its configuration's
        ``rope_parameters`` say), and, where the model has them, the RMSNorms ``q_norm`` and
        ``k_norm`` (Qwen3), the sink logits ``sinks`` (GPT-OSS) and the configuration's
        ``attn_logit_softcapping`` (Gemma 2). The result computes the
        same output and weights as ``module`` run with the eager attention implementation, the
        cos/sin of the model's rotary embedding and the same mask (transformers' float mask,
        0 where allowed). It has the same dtype, device, dropout and training mode.
        transformers is not imported: the module is read by its attributes. A sliding window is
        not copied: transformers builds it into the mask (see
        :func:`attention_lab.masks.sliding_window_mask`).

        Args:
            module: The attention layer to copy.

        Returns:
            A new ``MultiHeadAttention`` holding copies of the weights, with
            ``config.rope_layout == "half"``.

        Raises:
            TypeError: If ``module`` lacks the attributes of such an attention layer.
            ValueError: If it uses a feature this class cannot represent: a partial rotary
                embedding or a scaling other than those of
                :func:`~attention_lab.positional.rope_frequencies`, a scale other than
                ``1 / sqrt(Dh)``, or a bias on some projections only.
        """
        names = ("q_proj", "k_proj", "v_proj", "o_proj", "config", "head_dim")
        missing = [name for name in names if not hasattr(module, name)]
        if not isinstance(module, nn.Module) or missing:
            raise TypeError(
                "module must be a transformers attention layer like LlamaAttention or "
                f"Qwen3Attention, got {type(module).__name__} without {missing}"
            )
        config, head_dim = module.config, module.head_dim
        rope = getattr(config, "rope_parameters", None) or {
            "rope_type": "default",
            "rope_theta": getattr(config, "rope_theta", 10000.0),
        }
        rope_type = rope.get("rope_type", "default")
        if rope_type not in ("default", *ROPE_SCALINGS):
            raise ValueError(
                f"module's rotary embedding has rope_type={rope_type!r}; MultiHeadAttention "
                f"has the default one and {ROPE_SCALINGS}"
            )
        if rope.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)) != 1:
            raise ValueError("module rotates only part of each head (partial_rotary_factor)")
        scaling = None
        if rope_type != "default":
            scaling = {
                key: value
                for key, value in rope.items()
                if key not in ("rope_theta", "partial_rotary_factor")
                and (value is not None or key == "rope_type")
            }
            if rope_type == "dynamic":
                scaling.setdefault(
                    "original_max_position_embeddings", config.max_position_embeddings
                )
        if not math.isclose(getattr(module, "scaling", head_dim**-0.5), head_dim**-0.5):
            raise ValueError(f"module scales scores by {module.scaling}, not 1/sqrt({head_dim})")
        projections = (module.q_proj, module.k_proj, module.v_proj, module.o_proj)
        biases = {projection.bias is not None for projection in projections}
        if len(biases) != 1:
            raise ValueError(
                "module has a bias on some projections but not all; MultiHeadAttention needs "
                "all or none"
            )
        q_norm = getattr(module, "q_norm", None)
        attention = cls(
            module.q_proj.in_features,
            module.q_proj.out_features // head_dim,
            config=AttentionConfig(
                num_kv_heads=module.k_proj.out_features // head_dim,
                head_dim=head_dim,
                qk_norm=q_norm is not None,
                norm_eps=float(getattr(q_norm, "variance_epsilon", 1e-6)),
                rope_layout="half",
                rope_base=float(rope["rope_theta"]),
                rope_scaling=scaling,
                sinks=getattr(module, "sinks", None) is not None,
                softcap=getattr(config, "attn_logit_softcapping", None),
            ),
            bias=biases.pop(),
            dropout=float(getattr(config, "attention_dropout", 0.0)),
        )
        weight = module.q_proj.weight
        attention.to(device=weight.device, dtype=weight.dtype)
        ours = (attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj)
        pairs = list(zip(ours, projections, strict=True))
        if q_norm is not None:
            pairs += [(attention.q_norm, q_norm), (attention.k_norm, module.k_norm)]
        with torch.no_grad():
            if attention.sink_logits is not None:
                attention.sink_logits.copy_(module.sinks)
            for mine, theirs in pairs:
                mine.weight.copy_(theirs.weight)
                if getattr(theirs, "bias", None) is not None:
                    mine.bias.copy_(theirs.bias)
        return attention.train(module.training)
