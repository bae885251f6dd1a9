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

from attention_lab._validation import check_bool, check_int, check_probability, check_sequence
from attention_lab.masks import check_mask


def check_attention_inputs(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float,
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

    Raises:
        TypeError: If an input is not a tensor, not floating point, or the dtypes differ; if
            ``mask`` is not a ``torch.bool`` tensor; if ``dropout_p`` is not a number.
        ValueError: If the shapes are inconsistent, ``mask`` does not broadcast to
            ``[..., Tq, Tk]``, or ``dropout_p`` is outside ``[0, 1)``.
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


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as in "Attention Is All You Need": ``softmax(Q K^T / sqrt(Dk)) V``.

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

    Returns:
        A pair ``(output, weights)``. ``output`` has shape ``[..., Tq, Dv]``. ``weights`` has
        shape ``[..., Tq, Tk]``; it is the attention distribution before dropout, so each row
        sums to 1 unless all its keys are blocked. Both have the dtype of ``query``.

    Raises:
        TypeError: If an input is not a tensor, not floating point, or the dtypes differ; if
            ``mask`` is not a ``torch.bool`` tensor; if ``dropout_p`` is not a number.
        ValueError: If the shapes are inconsistent, ``mask`` does not broadcast to
            ``[..., Tq, Tk]``, or ``dropout_p`` is outside ``[0, 1)``.

    Example:
        >>> query, key, value = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
        >>> output, weights = scaled_dot_product_attention(query, key, value)
        >>> output.shape, weights.shape
        (torch.Size([2, 3, 6]), torch.Size([2, 3, 5]))
    """
    check_attention_inputs(query, key, value, mask, dropout_p)
    scores = query @ key.transpose(-2, -1)  # [..., Tq, Tk]
    # In place: the product is a fresh tensor, and each pass over [..., Tq, Tk] costs time.
    scores.div_(math.sqrt(query.shape[-1]))
    if mask is not None:
        # The most negative finite value, not -inf: a row with every key blocked then has a
        # uniform softmax instead of 0 / 0 = NaN, and is zeroed below.
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    # Half-precision exponentials and sums lose too much: compute in at least float32.
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)
    weights = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(scores.dtype)
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

    The projections are the ``nn.Linear(embed_dim, head_dim)`` layers ``q_proj``, ``k_proj`` and
    ``v_proj``, named as in :class:`MultiHeadAttention`. There is no output projection.

    Args:
        embed_dim: Width ``D`` of the input, a positive int.
        head_dim: Width ``Dh`` of the queries, keys, values and output, a positive int.
        bias: Whether the three projections have a bias.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``embed_dim`` or ``head_dim`` is not positive.

    Example:
        >>> attend = SelfAttention(embed_dim=8, head_dim=4)
        >>> output, weights = attend(torch.randn(2, 5, 8))
        >>> output.shape, weights.shape
        (torch.Size([2, 5, 4]), torch.Size([2, 1, 5, 5]))
    """

    def __init__(self, embed_dim: int, head_dim: int, *, bias: bool = True) -> None:
        super().__init__()
        check_int(embed_dim, "embed_dim")
        check_int(head_dim, "head_dim")
        check_bool(bias, "bias")
        self.embed_dim = embed_dim
        self.head_dim = head_dim
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, head_dim, bias=bias)

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
        check_sequence(x, "x", self.embed_dim)
        # The head dimension H = 1 gives weights the shape every attention module returns.
        query = self.q_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        key = self.k_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        value = self.v_proj(x).unsqueeze(1)  # [B, 1, T, Dh]
        output, weights = scaled_dot_product_attention(query, key, value, mask)
        return output.squeeze(1), weights  # [B, T, Dh], [B, 1, T, T]


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, with the same parameters as ``nn.MultiheadAttention``.

    The input is projected by ``q_proj``, ``k_proj`` and ``v_proj`` (each
    ``nn.Linear(d_model, d_model)``), split into ``num_heads`` heads of width
    ``Dh = d_model // num_heads``, attended per head in one batched call to
    :func:`scaled_dot_product_attention`, merged back and projected by ``out_proj``.

    Args:
        d_model: Model width ``D``, a positive int divisible by ``num_heads``.
        num_heads: Number of heads ``H``, a positive int.
        bias: Whether the four projections have a bias.
        dropout: Dropout probability on the attention weights in training mode, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range or ``d_model`` is not divisible by
            ``num_heads``.

    Example:
        >>> attend = MultiHeadAttention(d_model=8, num_heads=2)
        >>> output, weights = attend(torch.randn(3, 5, 8))
        >>> output.shape, weights.shape
        (torch.Size([3, 5, 8]), torch.Size([3, 2, 5, 5]))
    """

    def __init__(
        self, d_model: int, num_heads: int, *, bias: bool = True, dropout: float = 0.0
    ) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        check_int(num_heads, "num_heads")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        check_bool(bias, "bias")
        check_probability(dropout, "dropout")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` to ``key``/``value``; self-attention if they are omitted.

        Args:
            query: Shape ``[B, Tq, D]``, floating dtype of the module's parameters.
            key: Shape ``[B, Tk, D]``; defaults to ``query``.
            value: Shape ``[B, Tk, D]``; defaults to ``key``.
            mask: Optional, dtype ``torch.bool``, broadcastable to ``[B, H, Tq, Tk]``: ``True``
                where a query may attend to a key, e.g. ``causal_mask(T)`` (``[T, T]``) or
                ``padding_mask(token_ids)`` (``[B, 1, 1, Tk]``).

        Returns:
            A pair ``(output, weights)``: ``output`` of shape ``[B, Tq, D]`` and ``weights`` of
            shape ``[B, H, Tq, Tk]``, the per-head attention distribution before dropout. A
            query whose keys are all blocked gets weights 0 and the output ``out_proj(0)``.

        Raises:
            TypeError: If an input is not a floating tensor or ``mask`` is not a bool tensor.
            ValueError: If the shapes do not match ``[B, Tq, D]``, ``[B, Tk, D]`` and
                ``[B, H, Tq, Tk]``.
        """
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        q = self._split_heads(self.q_proj(query))  # [B, H, Tq, Dh]
        k = self._split_heads(self.k_proj(key))  # [B, H, Tk, Dh]
        v = self._split_heads(self.v_proj(value))  # [B, H, Tk, Dh]
        dropout_p = self.dropout if self.training else 0.0
        output, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)
        batch, _, query_len, _ = output.shape
        output = output.transpose(1, 2)  # [B, Tq, H, Dh]
        output = output.reshape(batch, query_len, self.d_model)  # [B, Tq, D]
        return self.out_proj(output), weights

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        x = x.view(batch, seq_len, self.num_heads, self.head_dim)  # [B, T, H, Dh]
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
