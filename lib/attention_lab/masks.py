"""Boolean attention masks: which keys each query may attend to.

Every mask in ``attention_lab`` has one polarity: a ``torch.bool`` tensor in which ``True``
means "may attend" and ``False`` means "blocked", broadcastable to ``[..., Tq, Tk]``. This is the
convention of ``torch.nn.functional.scaled_dot_product_attention``. Masks combine with ``&``.
"""

import torch

from attention_lab._validation import check_int


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
