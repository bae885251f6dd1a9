"""Positional encodings: how a Transformer learns where each token sits in the sequence.

Attention by itself ignores order: permuting the tokens just permutes its output. Adding a
different vector to each position's embedding gives the model the order back.
"""

import torch
from torch import nn

from attention_lab._validation import check_int, check_probability, check_real_above


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal positional encoding of "Attention Is All You Need".

    Column pair ``(2i, 2i + 1)`` holds a sine and a cosine of the position at the angular
    frequency ``1 / base ** (2i / d_model)``::

        PE[pos, 2i]     = sin(pos / base ** (2i / d_model))
        PE[pos, 2i + 1] = cos(pos / base ** (2i / d_model))

    For an odd ``d_model`` the last column is a sine without its cosine partner.

    Args:
        max_len: Number of positions ``T``, a non-negative int.
        d_model: Model width ``D``, a positive int.
        base: Sets the longest wavelength, ``2 * pi * base``; a real number greater than 1.

    Returns:
        Shape ``[max_len, d_model]``, dtype ``torch.float32``, values in ``[-1, 1]``.

    Raises:
        TypeError: If ``max_len`` or ``d_model`` is not an int, or ``base`` is not a number.
        ValueError: If ``max_len < 0``, ``d_model < 1`` or ``base <= 1``.

    Example:
        >>> sinusoidal_encoding(4, 6).shape
        torch.Size([4, 6])
    """
    check_int(max_len, "max_len", minimum=0)
    check_int(d_model, "d_model")
    check_real_above(base, "base", 1)
    # float32 angles lose about 1e-3 at position 10_000; float64 keeps every digit we return.
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [ceil(D / 2)]
    angle = position / base ** (two_i / d_model)  # [T, ceil(D / 2)]
    encoding = torch.empty(max_len, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    # An odd d_model has one cosine column fewer than sine columns.
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.to(torch.float32)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal positional encoding to a batch of embeddings, then applies dropout.

    The encoding for the first ``max_len`` positions is precomputed in the non-persistent
    buffer ``encoding`` (shape ``[max_len, d_model]``; it follows ``.to()`` but is not saved in
    the state dict, since it is a fixed function of the arguments). Longer inputs still work:
    their encoding is computed on the fly.

    Args:
        d_model: Model width ``D``, a positive int.
        max_len: Number of positions to precompute, a non-negative int.
        base: Passed to :func:`sinusoidal_encoding`.
        dropout: Dropout probability applied to the sum, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> encode = SinusoidalPositionalEncoding(d_model=8)
        >>> encode(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self, d_model: int, max_len: int = 5000, *, base: float = 10000.0, dropout: float = 0.0
    ) -> None:
        super().__init__()
        check_probability(dropout, "dropout")
        self.d_model = d_model
        self.base = base
        self.register_buffer(
            "encoding", sinusoidal_encoding(max_len, d_model, base), persistent=False
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the encoding of positions ``0 .. T - 1`` to every sequence in the batch.

        Args:
            x: Shape ``[B, T, D]``, a floating dtype: token embeddings.

        Returns:
            Shape ``[B, T, D]``, same dtype and device as ``x``: ``dropout(x + PE[:T])``.

        Raises:
            TypeError: If ``x`` is not a tensor.
            ValueError: If ``x`` does not have shape ``[B, T, D]``.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape [B, T, {self.d_model}], got {list(x.shape)}")
        seq_len = x.shape[1]
        encoding = self.encoding
        if seq_len > encoding.shape[0]:
            encoding = sinusoidal_encoding(seq_len, self.d_model, self.base)
        encoding = encoding[:seq_len].to(dtype=x.dtype, device=x.device)
        return self.dropout(x + encoding)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.encoding.shape[0]}, base={self.base}"
