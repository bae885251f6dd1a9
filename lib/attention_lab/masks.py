"""Boolean attention masks: which keys each query may attend to.

Every mask in ``attention_lab`` has one polarity: a ``torch.bool`` tensor in which ``True``
means "may attend" and ``False`` means "blocked", broadcastable to ``[..., Tq, Tk]``. This is the
convention of ``torch.nn.functional.scaled_dot_product_attention``. Masks combine with ``&``.

Where there are fewer queries than keys (``Tq < Tk``, new tokens attending to a KV cache), the
queries are the *last* ``Tq`` positions: query row ``i`` sits at position ``Tk - Tq + i``, and
the masks here line up bottom-right. ``scaled_dot_product_attention(..., is_causal=True)`` in
PyTorch lines up top-left instead (row ``i`` at position ``i``), which is wrong for a cache.
"""

from collections.abc import Callable

import torch

from attention_lab._validation import check_int

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""A FlexAttention-style mask function ``(b, h, q_idx, kv_idx) -> bool tensor``."""


def check_mask(mask: torch.Tensor, name: str = "mask") -> None:
    """Check that ``mask`` follows the library's mask convention.

    Every function and module that accepts a mask calls this, so a mask in the wrong
    convention fails early with a message that says how to convert it.

    Args:
        mask: Shape broadcastable to ``[..., Tq, Tk]``, dtype ``torch.bool``, ``True`` where a
            query may attend to a key. Only the type and dtype are checked here.
        name: The argument name used in error messages.

    Raises:
        TypeError: If ``mask`` is not a tensor, or its dtype is not ``torch.bool``. The message
            shows the conversion for both common 0/1 conventions.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.bool tensor with True = may attend, got {type(mask).__name__}."
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a torch.bool tensor with True = may attend, got {mask.dtype}. "
            f"Convert with {name}.bool() if 1 means 'may attend', or ~{name}.bool() if 1 means "
            "'blocked' (the convention of some tutorials)."
        )


def causal_mask(size: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Mask that lets each position attend to itself and to earlier positions only.

    Args:
        size: Sequence length ``T``, a non-negative int.
        device: Device of the result; the default device if ``None``.

    Returns:
        Shape ``[T, T]``, dtype ``torch.bool``: entry ``[i, j]`` is ``True`` iff ``j <= i``,
        i.e. on and below the diagonal.

    Raises:
        TypeError: If ``size`` is not an int.
        ValueError: If ``size`` is negative.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    check_int(size, "size", minimum=0)
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(token_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Mask that stops every query from attending to padding tokens.

    Args:
        token_ids: Shape ``[B, T]``, an integer dtype: a batch of padded token id sequences.
        pad_id: The id that marks padding.

    Returns:
        Shape ``[B, 1, 1, T]``, dtype ``torch.bool``: ``True`` where the token is not padding.
        The two singleton dimensions let it broadcast over heads and queries in
        ``[B, H, Tq, Tk]``.

    Raises:
        TypeError: If ``token_ids`` is not an integer tensor or ``pad_id`` is not an int.
        ValueError: If ``token_ids`` is not two-dimensional.

    Example:
        >>> padding_mask(torch.tensor([[5, 7, 0]])).shape
        torch.Size([1, 1, 1, 3])
    """
    if not isinstance(token_ids, torch.Tensor):
        raise TypeError(f"token_ids must be a torch.Tensor, got {type(token_ids).__name__}")
    if token_ids.dtype == torch.bool or token_ids.dtype.is_floating_point or token_ids.is_complex():
        raise TypeError(f"token_ids must have an integer dtype, got {token_ids.dtype}")
    if token_ids.ndim != 2:
        raise ValueError(f"token_ids must have shape [B, T], got {list(token_ids.shape)}")
    check_int(pad_id, "pad_id", minimum=None)
    return (token_ids != pad_id)[:, None, None, :]  # [B, 1, 1, T]


def combine_masks(*masks: torch.Tensor) -> torch.Tensor:
    """Combine masks so that a query may attend to a key only if every mask allows it.

    Args:
        *masks: One or more masks of dtype ``torch.bool`` whose shapes broadcast together,
            for example a causal mask ``[T, T]`` and a padding mask ``[B, 1, 1, T]``.

    Returns:
        The logical AND of all masks, dtype ``torch.bool``, with the broadcast shape (for the
        example above ``[B, 1, T, T]``). A single mask is returned unchanged.

    Raises:
        TypeError: If a mask is not a ``torch.bool`` tensor.
        ValueError: If no mask is given or the shapes do not broadcast together.

    Example:
        >>> ids = torch.tensor([[4, 9, 0]])
        >>> combine_masks(causal_mask(3), padding_mask(ids)).shape
        torch.Size([1, 1, 3, 3])
    """
    if not masks:
        raise ValueError("combine_masks needs at least one mask in masks, got none")
    for index, mask in enumerate(masks):
        check_mask(mask, name=f"masks[{index}]")
    shapes = [list(mask.shape) for mask in masks]
    try:
        torch.broadcast_shapes(*(mask.shape for mask in masks))
    except RuntimeError:
        raise ValueError(f"masks cannot be broadcast together, got shapes {shapes}") from None
    combined = masks[0]
    for mask in masks[1:]:
        combined = combined & mask
    return combined


def sliding_window_mask(
    size: int, window: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Causal mask that lets each position see only itself and the ``window - 1`` before it.

    Position ``i`` may attend to positions ``i - window + 1 .. i``: ``window`` keys in all (fewer
    at the start). This is the convention of Mistral's and Gemma's sliding windows in
    ``transformers`` (``sliding_window_overlay`` and a causal mask: ``i - window < j <= i``).

    Args:
        size: Sequence length ``T``, a non-negative int.
        window: Keys each query sees, counting itself, a positive int. ``window >= T`` gives
            :func:`causal_mask`.
        device: Device of the result; the default device if ``None``.

    Returns:
        Shape ``[T, T]``, dtype ``torch.bool``: entry ``[i, j]`` is ``True`` iff
        ``i - window < j <= i``.

    Raises:
        TypeError: If ``size`` or ``window`` is not an int.
        ValueError: If ``size`` is negative or ``window`` is not positive.

    Example:
        >>> sliding_window_mask(4, 2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    check_int(size, "size", minimum=0)
    check_int(window, "window")
    ones = torch.ones(size, size, dtype=torch.bool, device=device)
    # tril keeps j <= i; triu(-(window - 1)) keeps j >= i - window + 1.
    return ones.tril() & ones.triu(-(window - 1))


def document_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """Causal mask for several documents packed into one sequence: no attention across them.

    Position ``i`` may attend to position ``j`` iff ``j <= i`` and both belong to the same
    document. Packed training puts short documents end to end; this mask keeps each one as if
    it were alone (block-diagonal, causal within each block).

    Args:
        document_ids: Shape ``[T]`` or ``[B, T]``, an integer dtype: the document each position
            belongs to. Documents need not be contiguous or numbered in order.

    Returns:
        Dtype ``torch.bool``, shape ``[T, T]`` for ``[T]`` ids, or ``[B, 1, T, T]`` for
        ``[B, T]`` ids (broadcasting over the heads of ``[B, H, T, T]``), on the device of
        ``document_ids``.

    Raises:
        TypeError: If ``document_ids`` is not an integer tensor.
        ValueError: If ``document_ids`` is not one- or two-dimensional.

    Example:
        >>> document_mask(torch.tensor([0, 0, 1])).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [0, 0, 1]], dtype=torch.int32)
    """
    if not isinstance(document_ids, torch.Tensor):
        raise TypeError(f"document_ids must be a torch.Tensor, got {type(document_ids).__name__}")
    if (
        document_ids.dtype == torch.bool
        or document_ids.is_floating_point()
        or document_ids.is_complex()
    ):
        raise TypeError(f"document_ids must have an integer dtype, got {document_ids.dtype}")
    if document_ids.ndim not in (1, 2):
        raise ValueError(
            f"document_ids must have shape [T] or [B, T], got {list(document_ids.shape)}"
        )
    same = document_ids[..., :, None] == document_ids[..., None, :]  # [..., T, T]
    mask = same & causal_mask(document_ids.shape[-1], device=document_ids.device)
    return mask if document_ids.ndim == 1 else mask[:, None]  # [T, T] or [B, 1, T, T]


def prefix_lm_mask(
    size: int, prefix_len: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Mask of a prefix language model: the prefix sees itself whole, the rest is causal.

    Every position may attend to the first ``prefix_len`` positions (so the prefix attends
    bidirectionally within itself), and to itself and earlier positions, as in T5's prefix-LM
    and PaliGemma: ``j < prefix_len or j <= i``.

    Args:
        size: Sequence length ``T``, a non-negative int.
        prefix_len: Length of the bidirectional prefix, a non-negative int (0 gives
            :func:`causal_mask`; ``T`` or more, a mask of all ``True``).
        device: Device of the result; the default device if ``None``.

    Returns:
        Shape ``[T, T]``, dtype ``torch.bool``.

    Raises:
        TypeError: If ``size`` or ``prefix_len`` is not an int.
        ValueError: If either is negative.

    Example:
        >>> prefix_lm_mask(4, 2).int()
        tensor([[1, 1, 0, 0],
                [1, 1, 0, 0],
                [1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    check_int(size, "size", minimum=0)
    check_int(prefix_len, "prefix_len", minimum=0)
    in_prefix = torch.arange(size, device=device) < prefix_len  # [T], indexed by key
    return causal_mask(size, device=device) | in_prefix


def from_mask_mod(
    mask_mod: MaskMod,
    q_len: int,
    kv_len: int,
    *,
    batch: int | None = None,
    heads: int | None = None,
    q_offset: int = 0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The boolean mask of a FlexAttention-style mask function.

    ``mask_mod(b, h, q_idx, kv_idx)`` says whether query ``q_idx`` may attend to key
    ``kv_idx`` in batch row ``b`` and head ``h``, as in ``torch.nn.attention.flex_attention``
    and ``transformers.masking_utils`` (``lambda b, h, q_idx, kv_idx: kv_idx <= q_idx`` is the
    causal mask). It is called once, with integer tensors that broadcast to ``[B, H, Tq, Tk]``
    (``b`` and ``h`` are 0 when ``batch`` and ``heads`` are not given), so it must be written
    with tensor operations (``&``, ``|``, indexing, ``torch.where``), not ``if``; the same
    restriction as FlexAttention's.

    Row ``i`` is called with ``q_idx = q_offset + i``. The default, ``q_offset=0``, lines the
    queries up top-left, as FlexAttention's ``create_mask`` and ``flex_attention`` do (and
    PyTorch's ``is_causal=True``), so a rule gives the mask FlexAttention gives for every
    ``Tq`` and ``Tk``. New tokens attending to a KV cache are the last ``Tq`` of ``Tk``
    positions: pass ``q_offset=Tk - Tq`` (bottom-right), and a causal ``mask_mod`` gives the
    mask a cache needs.

    Args:
        mask_mod: A callable ``(b, h, q_idx, kv_idx) -> torch.bool tensor``.
        q_len: Number of queries ``Tq``, a non-negative int.
        kv_len: Number of keys ``Tk``, a non-negative int.
        batch: Batch size ``B``, or ``None`` for no batch dimension.
        heads: Number of heads ``H``, or ``None`` for no head dimension. If only one of
            ``batch`` and ``heads`` is given, the other dimension has size 1.
        q_offset: Position of the first query, a non-negative int: 0 (top-left, as
            FlexAttention) or ``Tk - Tq`` (bottom-right, for queries after a cache).
        device: Device of the index tensors and of the result; the default device if ``None``.

    Returns:
        Dtype ``torch.bool``: shape ``[Tq, Tk]``, or ``[B, H, Tq, Tk]`` if ``batch`` or
        ``heads`` is given.

    Raises:
        TypeError: If ``mask_mod`` is not callable or does not return a ``torch.bool`` tensor,
            or a size is not an int.
        ValueError: If a size or ``q_offset`` is negative, or the result of ``mask_mod`` does
            not broadcast to the mask's shape.

    Example:
        >>> causal = lambda b, h, q_idx, kv_idx: kv_idx <= q_idx
        >>> from_mask_mod(causal, 2, 4).int()  # top-left, as FlexAttention
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0]], dtype=torch.int32)
        >>> from_mask_mod(causal, 2, 4, q_offset=2).int()  # the last 2 of 4: after a cache
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    if not callable(mask_mod):
        raise TypeError(f"mask_mod must be callable, got {type(mask_mod).__name__}")
    check_int(q_len, "q_len", minimum=0)
    check_int(kv_len, "kv_len", minimum=0)
    for value, name in ((batch, "batch"), (heads, "heads")):
        if value is not None:
            check_int(value, name)
    check_int(q_offset, "q_offset", minimum=0)
    batched = batch is not None or heads is not None
    shape = (batch or 1, heads or 1, q_len, kv_len) if batched else (q_len, kv_len)
    b = torch.arange(batch or 1, device=device)[:, None, None, None]  # [B, 1, 1, 1]
    h = torch.arange(heads or 1, device=device)[None, :, None, None]  # [1, H, 1, 1]
    q_idx = q_offset + torch.arange(q_len, device=device)[:, None]  # [Tq, 1]
    kv_idx = torch.arange(kv_len, device=device)  # [Tk]
    if not batched:
        b, h = b[0, 0, 0, 0], h[0, 0, 0, 0]  # scalars: 0
    allowed = mask_mod(b, h, q_idx, kv_idx)
    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool:
        kind = allowed.dtype if isinstance(allowed, torch.Tensor) else type(allowed).__name__
        raise TypeError(
            f"mask_mod must return a torch.bool tensor (True = may attend), got {kind}; write "
            "it with tensor comparisons, e.g. kv_idx <= q_idx"
        )
    try:
        return torch.broadcast_to(allowed, shape).clone()
    except RuntimeError:
        raise ValueError(
            f"mask_mod returned shape {list(allowed.shape)}, which does not broadcast to "
            f"{list(shape)}"
        ) from None


def topk_mask(scores: torch.Tensor, k: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The keys each query keeps: its ``k`` highest-scoring visible keys, as a boolean mask.

    Args:
        scores: ``[..., Tq, Tk]``, a floating dtype.
        k: How many keys each query keeps, ``1 <= k <= Tk``. A query that may see fewer than
            ``k`` keys keeps all of them.
        mask: ``None`` or a ``torch.bool`` mask broadcastable to ``scores`` (``True`` = may
            attend): blocked keys are never kept.

    Returns:
        ``torch.bool`` ``[..., Tq, Tk]``: ``True`` at the kept keys. Ties at the ``k``-th score
        are broken by ``torch.topk``.

    Raises:
        TypeError: If ``scores`` is not a floating tensor, ``k`` not an int, or ``mask`` not
            ``torch.bool``.
        ValueError: If ``k`` is not positive or larger than ``Tk``.
    """
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
        raise TypeError(f"scores must be a floating tensor, got {type(scores).__name__}")
    check_int(k, "k")
    if scores.ndim < 2 or k > scores.shape[-1]:
        raise ValueError(f"k must be at most the number of keys, Tk = {scores.shape[-1]}; got {k}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a torch.bool tensor (True = may attend)")
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.topk(k, dim=-1).indices  # [..., Tq, k]
    kept = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, top, True)
    # A query that sees fewer than k keys had blocked ones fill its top k: drop them.
    return kept & mask if mask is not None else kept
