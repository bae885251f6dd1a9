"""Positional encodings: how a Transformer learns where each token sits in the sequence.

Attention by itself ignores order: permuting the tokens just permutes its output. Adding a
different vector to each position's embedding gives the model the order back, either a fixed
one (:func:`sinusoidal_encoding`, :class:`SinusoidalPositionalEncoding`) or a learned one
(:class:`LearnedPositionalEmbedding`). :func:`rotary_embedding` instead rotates the queries and
keys of each head, so that attention scores depend on relative positions.
"""

import torch
from torch import nn

from attention_lab._validation import check_int, check_probability, check_real_above, check_sequence


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
            TypeError: If ``x`` is not a floating tensor.
            ValueError: If ``x`` does not have shape ``[B, T, D]``.
        """
        check_sequence(x, "x", self.d_model)
        seq_len = x.shape[1]
        encoding = self.encoding
        if seq_len > encoding.shape[0]:
            encoding = sinusoidal_encoding(seq_len, self.d_model, self.base)
        encoding = encoding[:seq_len].to(dtype=x.dtype, device=x.device)
        return self.dropout(x + encoding)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.encoding.shape[0]}, base={self.base}"


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position, as BERT and GPT-2 do, then applies dropout.

    The vectors are the rows of the ``nn.Embedding(max_len, d_model)`` table ``embedding``,
    trained with the rest of the model (initialised like any ``nn.Embedding``, from a standard
    normal distribution). Unlike :class:`SinusoidalPositionalEncoding`, the table ends at
    ``max_len``: there is no row for position ``max_len`` or beyond, so longer inputs are
    rejected.

    Args:
        max_len: Number of positions ``T`` the table holds, a positive int.
        d_model: Model width ``D``, a positive int.
        dropout: Dropout probability applied to the sum, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> embed = LearnedPositionalEmbedding(max_len=16, d_model=8)
        >>> embed(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, max_len: int, d_model: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        check_int(max_len, "max_len")
        check_int(d_model, "d_model")
        check_probability(dropout, "dropout")
        self.max_len = max_len
        self.d_model = d_model
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the learned vectors of positions ``0 .. T - 1`` to every sequence in the batch.

        Args:
            x: Shape ``[B, T, D]``, a floating dtype, with ``T <= max_len``: token embeddings.

        Returns:
            Shape ``[B, T, D]``, same dtype and device as ``x``:
            ``dropout(x + embedding.weight[:T])``.

        Raises:
            TypeError: If ``x`` is not a floating tensor.
            ValueError: If ``x`` does not have shape ``[B, T, D]``, or if ``T > max_len``.
        """
        check_sequence(x, "x", self.d_model)
        seq_len = x.shape[1]
        if seq_len > self.max_len:
            raise ValueError(
                f"x has T={seq_len} positions but the learned table has max_len={self.max_len} "
                f"rows: a learned embedding has no vector for positions >= {self.max_len}"
            )
        table = self.embedding.weight[:seq_len]  # [T, D]
        return self.dropout(x + table.to(dtype=x.dtype))

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def _check_rotary_inputs(
    x: torch.Tensor, positions: torch.Tensor | None, base: float
) -> torch.Tensor:
    """Validate the arguments of :func:`rotary_embedding`; return the positions ``[T]``."""
    check_real_above(base, "base", 1)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must have a floating dtype, got {x.dtype}")
    if x.ndim < 2 or x.shape[-1] % 2 != 0:
        raise ValueError(
            f"x must have shape [..., T, Dh] with an even Dh (features are rotated in pairs), "
            f"got {list(x.shape)}"
        )
    seq_len = x.shape[-2]
    if positions is None:
        return torch.arange(seq_len)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(
            f"positions must have an integer dtype, got {positions.dtype} "
            f"(convert with positions.long())"
        )
    if positions.shape != (seq_len,):
        raise ValueError(
            f"positions must have shape [T] = [{seq_len}] to match x {list(x.shape)}, "
            f"got {list(positions.shape)}"
        )
    return positions


ROTARY_LAYOUTS = ("interleaved", "half")
"""The two ways of pairing a head's features for :func:`rotary_embedding`."""


def rotary_embedding(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Rotary position embedding (RoPE): rotate each feature pair by an angle set by position.

    Applied to the queries and keys of an attention head (not to the embeddings, and not to
    the values), it makes the score of a query at position ``m`` and a key at position ``n``
    depend on the positions only through ``m - n``. Feature pair ``(2i, 2i + 1)`` of the vector
    at position ``pos`` is rotated by the angle ``pos * base ** (-2i / Dh)``, the angle of the
    sinusoidal encoding's column pair ``(2i, 2i + 1)``::

        out[2i]     = x[2i] * cos(angle) - x[2i + 1] * sin(angle)
        out[2i + 1] = x[2i] * sin(angle) + x[2i + 1] * cos(angle)

    With ``layout="interleaved"`` (the default) the pairs are neighbours, as in the RoFormer
    paper. With ``layout="half"`` feature ``i`` is paired with feature ``i + Dh / 2`` and rotated
    by the angle of pair ``i``, as the ``rotate_half`` of Hugging Face ``transformers`` does for
    Llama, Qwen and Mistral::

        out[i]          = x[i] * cos(angle_i) - x[i + Dh/2] * sin(angle_i)
        out[i + Dh/2]   = x[i] * sin(angle_i) + x[i + Dh/2] * cos(angle_i)

    The two layouts differ by a fixed permutation of the features: the same rotation, but
    weights trained for one give different results under the other.

    Args:
        x: Shape ``[..., T, Dh]`` with an even ``Dh``, a floating dtype: queries or keys.
        positions: Shape ``[T]``, an integer dtype: the position of each of the ``T`` vectors
            (negative positions rotate the other way). Defaults to ``0 .. T - 1``.
        base: Sets the longest wavelength, ``2 * pi * base``; a real number greater than 1.
        layout: ``"interleaved"`` or ``"half"``: which features are rotated together.

    Returns:
        Shape ``[..., T, Dh]``, same dtype and device as ``x``. Every feature pair keeps its
        length.

    Raises:
        TypeError: If ``x`` is not a floating tensor, ``positions`` is not an integer tensor,
            or ``base`` is not a number.
        ValueError: If ``x`` has fewer than 2 dimensions or an odd ``Dh``, ``positions`` is not
            of shape ``[T]``, ``base <= 1``, or ``layout`` is not one of the two.

    Example:
        >>> q = torch.randn(2, 4, 5, 8)  # [B, H, T, Dh]
        >>> rotary_embedding(q).shape
        torch.Size([2, 4, 5, 8])
    """
    if layout not in ROTARY_LAYOUTS:
        raise ValueError(f"layout must be 'interleaved' or 'half', got {layout!r}")
    positions = _check_rotary_inputs(x, positions, base)  # [T]
    head_dim = x.shape[-1]
    # The angles are computed in float64 on the CPU: in float32, pos * frequency is off by
    # about 1e-3 rad at position 10_000, and some accelerators have no float64.
    two_i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # [Dh / 2]
    angle = positions.cpu().to(torch.float64)[:, None] / base ** (two_i / head_dim)  # [T, Dh/2]
    # Half-precision inputs are rotated in float32 and rounded once at the end.
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    cos = torch.cos(angle).to(device=x.device, dtype=compute_dtype)  # [T, Dh / 2]
    sin = torch.sin(angle).to(device=x.device, dtype=compute_dtype)  # [T, Dh / 2]
    # Pair axis last for "interleaved" (features 2i, 2i + 1), first for "half" (i, i + Dh / 2).
    pair_axis = -1 if layout == "interleaved" else -2
    split = (head_dim // 2, 2) if layout == "interleaved" else (2, head_dim // 2)
    pairs = x.to(compute_dtype).unflatten(-1, split)  # [..., T, Dh/2, 2] or [..., T, 2, Dh/2]
    first, second = pairs.unbind(pair_axis)  # [..., T, Dh / 2] each
    rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), pair_axis)
    return rotated.flatten(-2).to(x.dtype)  # [..., T, Dh]
