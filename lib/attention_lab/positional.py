"""Positional encodings: how a Transformer learns where each token sits in the sequence.

Attention by itself ignores order: permuting the tokens just permutes its output. Adding a
different vector to each position's embedding gives the model the order back, either a fixed
one (:func:`sinusoidal_encoding`, :class:`SinusoidalPositionalEncoding`) or a learned one
(:class:`LearnedPositionalEmbedding`). :func:`rotary_embedding` instead rotates the queries and
keys of each head, so that attention scores depend on relative positions;
:class:`RotaryEmbedding` is the same rotation as a module that computes its frequencies once.

Two questions decide what happens past the length a model was trained on.
:func:`rope_frequencies` gives RoPE's rotation speeds, optionally rescaled the ways today's
models stretch their context (linear interpolation, dynamic NTK, YaRN, Llama 3's), in the
dictionary form ``transformers`` reads from a model's configuration. :func:`alibi_slopes` and
:func:`alibi_bias` give ALiBi's alternative: no rotation at all, a penalty on each score that
grows linearly with distance.
"""

import math
from collections.abc import Mapping

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


def _check_rotary_inputs(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """Validate the tensors given to :func:`rotary_embedding`; return the positions ``[T]``."""
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


ROPE_SCALINGS = ("linear", "dynamic", "yarn", "llama3")
"""The ``rope_type`` values :func:`rope_frequencies` accepts in its ``scaling`` dictionary."""

# The parameters each scaling needs, and those it may take (transformers' names).
_SCALING_KEYS = {
    "linear": ({"factor"}, set()),
    "dynamic": ({"factor", "original_max_position_embeddings"}, set()),
    "yarn": (
        {"factor", "original_max_position_embeddings"},
        {"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    ),
    "llama3": (
        {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
        set(),
    ),
}


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term, ``0.1 * mscale * ln(factor) + 1`` (1 if factor <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _check_scaling(scaling: dict, seq_len: int | None) -> tuple[str, dict]:
    if not isinstance(scaling, Mapping):
        raise TypeError(f"scaling must be None or a dict, got {type(scaling).__name__}")
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in ROPE_SCALINGS:
        raise ValueError(f"scaling['rope_type'] must be one of {ROPE_SCALINGS}, got {kind!r}")
    required, optional = _SCALING_KEYS[kind]
    params = {k: v for k, v in scaling.items() if k not in ("rope_type", "type")}
    missing = required - params.keys()
    if missing:
        raise ValueError(f"rope_type {kind!r} needs {sorted(missing)} in scaling")
    unknown = params.keys() - required - optional
    if unknown:
        raise ValueError(f"rope_type {kind!r} takes no {sorted(unknown)}")
    check_real_above(params["factor"], "scaling['factor']", 0)
    if "original_max_position_embeddings" in params:
        check_int(params["original_max_position_embeddings"], "original_max_position_embeddings")
    if kind == "dynamic":
        if seq_len is None:
            raise ValueError("rope_type 'dynamic' rescales with the length: give seq_len")
        check_int(seq_len, "seq_len")
    return kind, params


def rope_scaling_type(scaling: dict) -> str:
    """Check a RoPE scaling dictionary (see :func:`rope_frequencies`) and return its type.

    Args:
        scaling: A dictionary in the form of a ``transformers`` configuration's
            ``rope_parameters``, e.g. ``{"rope_type": "linear", "factor": 4}``.

    Returns:
        Its ``rope_type``, one of :data:`ROPE_SCALINGS`.

    Raises:
        TypeError: If ``scaling`` is not a dict, or a parameter has the wrong type.
        ValueError: If it names an unknown ``rope_type``, lacks or adds a parameter, or a
            parameter is out of range.

    Example:
        >>> rope_scaling_type({"rope_type": "linear", "factor": 4})
        'linear'
    """
    return _check_scaling(scaling, 1)[0]


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: dict | None = None,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, float]:
    """RoPE's inverse frequencies, optionally rescaled for contexts longer than the training one.

    Feature pair ``i`` of a head is rotated by ``position * inv_freq[i]`` with
    ``inv_freq[i] = base ** (-2i / Dh)``: fast rotations for the first pairs, wavelengths up
    to ``2 * pi * base`` for the last. A model that saw positions up to ``L`` during training
    meets angles it never saw beyond ``L``; the scalings slow the rotations down so that a
    longer context maps into angles it knows. ``scaling`` is a dictionary in the form of a
    ``transformers`` configuration's ``rope_parameters`` (its ``rope_theta`` is ``base``):

    - ``{"rope_type": "linear", "factor": s}``: position interpolation, every frequency / ``s``;
    - ``{"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": L}``:
      "NTK-aware" scaling of the base, by an amount that grows with the current length
      ``seq_len`` (no change up to ``L``);
    - ``{"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L, ...}``:
      fast pairs kept, slow pairs interpolated, a linear ramp between (``beta_fast``,
      ``beta_slow``), and an attention factor ``0.1 ln s + 1`` that sharpens the softmax;
    - ``{"rope_type": "llama3", "factor": s, "low_freq_factor": a, "high_freq_factor": b,
      "original_max_position_embeddings": L}``: Llama 3.1's: wavelengths under ``L / b``
      kept, over ``L / a`` divided by ``s``, smoothly between.

    Args:
        head_dim: The rotated width ``Dh``, a positive even int.
        base: ``rope_theta``, a real number greater than 1 (Llama 3 uses 500,000).
        scaling: ``None``, or a dictionary as above.
        seq_len: The current sequence length; needed by ``"dynamic"`` only.

    Returns:
        A pair ``(inv_freq, attention_factor)``: shape ``[Dh / 2]``, ``torch.float64``; and the
        float by which the rotary embedding multiplies its cosines and sines (1.0 except for
        YaRN), as ``transformers`` does.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``head_dim`` is odd or not positive, ``base <= 1``, ``scaling`` names
            an unknown ``rope_type`` or lacks (or adds) a parameter, or ``"dynamic"`` has no
            ``seq_len``.

    Example:
        >>> inv_freq, factor = rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4})
        >>> inv_freq * 4, factor
        (tensor([1.0000, 0.1000, 0.0100, 0.0010], dtype=torch.float64), 1.0)
    """
    check_int(head_dim, "head_dim")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (features rotate in pairs), got {head_dim}")
    check_real_above(base, "base", 1)
    if scaling is None:
        kind, params = "default", {}
    else:
        kind, params = _check_scaling(scaling, seq_len)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # [Dh / 2]
    if kind == "dynamic":
        length = max(seq_len, params["original_max_position_embeddings"])
        stretch = params["factor"] * length / params["original_max_position_embeddings"]
        base = base * (stretch - (params["factor"] - 1)) ** (head_dim / (head_dim - 2))
    inv_freq = base**-exponents  # [Dh / 2]
    attention_factor = 1.0
    if kind == "linear":
        inv_freq = inv_freq / params["factor"]
    elif kind == "yarn":
        inv_freq, attention_factor = _yarn(inv_freq, head_dim, base, params)
    elif kind == "llama3":
        inv_freq = _llama3(inv_freq, params)
    return inv_freq, attention_factor


def _yarn(inv_freq: torch.Tensor, head_dim: int, base: float, params: dict) -> tuple:
    factor = params["factor"]
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    length = params["original_max_position_embeddings"]

    def pair_turning(rotations: float) -> float:
        # The (fractional) pair index whose wavelength fits `rotations` times into `length`.
        return head_dim * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = pair_turning(params.get("beta_fast") or 32)
    high = pair_turning(params.get("beta_slow") or 1)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # as transformers does, to avoid dividing by 0
    pairs = torch.arange(head_dim // 2, dtype=torch.float64)  # [Dh / 2]
    # 1 for the fast pairs (kept as they are), 0 for the slow ones (interpolated by factor).
    keep = 1 - ((pairs - low) / (high - low)).clamp(0, 1)  # [Dh / 2]
    return inv_freq / factor * (1 - keep) + inv_freq * keep, float(attention_factor)


def _llama3(inv_freq: torch.Tensor, params: dict) -> torch.Tensor:
    factor, length = params["factor"], params["original_max_position_embeddings"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / inv_freq  # [Dh / 2]
    # Between the two wavelengths, blend from "divided by factor" (long) to "kept" (short).
    smooth = ((length / wavelength - low) / (high - low)).clamp(0, 1)  # [Dh / 2]
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return torch.where(
        wavelength < length / high,
        inv_freq,
        torch.where(wavelength > length / low, inv_freq / factor, blended),
    )


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes: head ``h`` penalises a key ``d`` positions back by ``slope * d``.

    For ``H`` a power of two the slopes are the geometric sequence ``2 ** (-8 (h + 1) / H)``,
    ``h = 0 .. H - 1`` (for 8 heads: 1/2, 1/4, ..., 1/256). For other head counts, as in the
    ALiBi paper's code and BLOOM: the sequence for the largest power of two ``P < H``, followed
    by every other slope of the sequence for ``2P`` (its odd-numbered terms), up to ``H``.

    Args:
        num_heads: Number of heads ``H``, a positive int.

    Returns:
        Shape ``[H]``, ``torch.float64``, every slope in ``(0, 1)``, distinct.

    Raises:
        TypeError: If ``num_heads`` is not an int.
        ValueError: If ``num_heads`` is not positive.

    Example:
        >>> alibi_slopes(6)
        tensor([0.2500, 0.0625, 0.0156, 0.0039, 0.5000, 0.1250], dtype=torch.float64)
    """
    check_int(num_heads, "num_heads")

    def geometric(count: int) -> torch.Tensor:
        return 2.0 ** (-8.0 * torch.arange(1, count + 1, dtype=torch.float64) / count)  # [count]

    power = 2 ** math.floor(math.log2(num_heads))
    extra = geometric(2 * power)[0::2][: num_heads - power]  # terms 1, 3, 5, ... counting from 1
    return torch.cat([geometric(power), extra])  # [H]


def alibi_bias(num_heads: int, q_len: int, kv_len: int | None = None) -> torch.Tensor:
    """ALiBi's additive score bias: ``-slope_h * (i - j)`` for query position ``i``, key ``j``.

    Added to the scaled scores before the softmax (e.g. as ``bias=`` of
    :func:`attention_lab.attention.scaled_dot_product_attention`), it replaces positional
    encodings: nearer keys are preferred, by an amount growing linearly with distance, at every
    length, trained or not. As with the library's masks, when ``q_len < kv_len`` (decoding
    with a cache) the queries are the last ``q_len`` positions: query row ``r`` is position
    ``kv_len - q_len + r``. Keys after the query get a positive bias; the causal mask is what
    blocks them. (BLOOM adds ``slope * j`` and MPT ``slope * (j - kv_len + 1)`` instead: the same
    up to a constant per row, which the softmax ignores.)

    Args:
        num_heads: Number of heads ``H``, a positive int.
        q_len: Number of queries ``Tq``, a positive int.
        kv_len: Number of keys ``Tk >= Tq``, a positive int; ``q_len`` when ``None``.

    Returns:
        Shape ``[H, Tq, Tk]``, ``torch.float64``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If a size is not positive, or ``kv_len < q_len``.

    Example:
        >>> alibi_bias(1, 3)[0]
        tensor([[ 0.0000,  0.0039,  0.0078],
                [-0.0039,  0.0000,  0.0039],
                [-0.0078, -0.0039,  0.0000]], dtype=torch.float64)
    """
    check_int(num_heads, "num_heads")
    check_int(q_len, "q_len")
    kv_len = q_len if kv_len is None else kv_len
    check_int(kv_len, "kv_len")
    if kv_len < q_len:
        raise ValueError(
            f"kv_len must be at least q_len (the queries are the last positions), "
            f"got q_len={q_len} and kv_len={kv_len}"
        )
    query_pos = torch.arange(kv_len - q_len, kv_len, dtype=torch.float64)  # [Tq]
    key_pos = torch.arange(kv_len, dtype=torch.float64)  # [Tk]
    offset = key_pos[None, :] - query_pos[:, None]  # [Tq, Tk], j - i (no -0.0 on the diagonal)
    return alibi_slopes(num_heads)[:, None, None] * offset  # [H, Tq, Tk]


ROTARY_LAYOUTS = ("interleaved", "half")
"""The two ways of pairing a head's features for :func:`rotary_embedding`."""


def rotary_embedding(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    scaling: dict | None = None,
    seq_len: int | None = None,
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

    With ``scaling`` the angles use :func:`rope_frequencies`' rescaled frequencies, and the
    result is multiplied by its attention factor (YaRN's), as ``transformers`` multiplies its
    cosines and sines.

    This function builds a :class:`RotaryEmbedding` for ``x``'s width and applies it once; a
    layer that rotates at every call holds the module, whose frequencies are computed once.

    Args:
        x: Shape ``[..., T, Dh]`` with an even ``Dh``, a floating dtype: queries or keys.
        positions: Shape ``[T]``, an integer dtype: the position of each of the ``T`` vectors
            (negative positions rotate the other way). Defaults to ``0 .. T - 1``.
        base: Sets the longest wavelength, ``2 * pi * base``; a real number greater than 1.
        layout: ``"interleaved"`` or ``"half"``: which features are rotated together.
        scaling: ``None`` or a RoPE scaling dictionary (see :func:`rope_frequencies`).
        seq_len: The current length for ``"dynamic"`` scaling; the largest position + 1 when
            ``None``.

    Returns:
        Shape ``[..., T, Dh]``, same dtype and device as ``x``. Every feature pair keeps its
        length.

    Raises:
        TypeError: If ``x`` is not a floating tensor, ``positions`` is not an integer tensor,
            or ``base`` is not a number.
        ValueError: If ``x`` has fewer than 2 dimensions or an odd ``Dh``, ``positions`` is not
            of shape ``[T]``, ``base <= 1``, ``layout`` is not one of the two, or ``scaling``
            is not valid (see :func:`rope_frequencies`).

    Example:
        >>> q = torch.randn(2, 4, 5, 8)  # [B, H, T, Dh]
        >>> rotary_embedding(q).shape
        torch.Size([2, 4, 5, 8])
    """
    _check_layout(layout)
    check_real_above(base, "base", 1)
    positions = _check_rotary_inputs(x, positions)  # [T]
    rotary = RotaryEmbedding(x.shape[-1], base=base, layout=layout, scaling=scaling)
    return rotary(x, positions, seq_len=seq_len)  # [..., T, Dh]


def _check_layout(layout: str) -> None:
    if layout not in ROTARY_LAYOUTS:
        raise ValueError(f"layout must be 'interleaved' or 'half', got {layout!r}")


class RotaryEmbedding(nn.Module):
    """The rotary position embedding of one head width, with its frequencies computed once.

    The module form of :func:`rotary_embedding`, as today's models hold it: an attention layer
    builds one and rotates its queries and keys with it at every call, so the inverse
    frequencies of :func:`rope_frequencies` (and YaRN's attention factor) are computed when it
    is built, not at every rotation. ``"dynamic"`` scaling is the exception: its frequencies
    depend on the current length, so each call computes those of its own length.

    The frequencies are held as plain tensor attributes, not buffers: they are not saved in
    a state dict (they are a fixed function of the arguments), and ``.to()`` or ``.half()``
    neither moves nor rounds them. The angles are computed from them in ``float64`` on the CPU,
    then the cosines and sines are moved to the device and dtype of the input.

    Args:
        head_dim: The rotated width ``Dh``, a positive even int.
        base: Sets the longest wavelength, ``2 * pi * base``; a real number greater than 1.
        layout: ``"interleaved"`` or ``"half"``: which features are rotated together (see
            :func:`rotary_embedding`).
        scaling: ``None`` or a RoPE scaling dictionary (see :func:`rope_frequencies`).

    Attributes:
        inv_freq: Shape ``[Dh / 2]``, ``torch.float64``, on the CPU: the inverse frequencies
            (for ``"dynamic"`` scaling those of lengths up to the training length, which it
            leaves unscaled).
        attention_factor: The float multiplying the cosines and sines (1.0 except for YaRN).
        dynamic: Whether the frequencies depend on the length (``"dynamic"`` scaling).

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``head_dim`` is odd or not positive, ``base <= 1``, ``layout`` is not
            one of the two, or ``scaling`` is not valid (see :func:`rope_frequencies`).

    Example:
        >>> rotary = RotaryEmbedding(8, layout="half")
        >>> q = torch.randn(2, 4, 5, 8)  # [B, H, T, Dh]
        >>> torch.equal(rotary(q), rotary_embedding(q, layout="half"))
        True
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        scaling: dict | None = None,
    ) -> None:
        super().__init__()
        _check_layout(layout)
        # A placeholder length for "dynamic": up to the training length it changes nothing.
        inv_freq, factor = rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=1)
        scaling = None if scaling is None else dict(scaling)  # a copy, safe from later edits
        self.head_dim, self.base, self.layout, self.scaling = head_dim, base, layout, scaling
        self.inv_freq, self.attention_factor = inv_freq, factor
        self.dynamic = scaling is not None and rope_scaling_type(scaling) == "dynamic"

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        seq_len: int | None = None,
    ) -> torch.Tensor:
        """Rotate each feature pair of ``x`` by its position's angles, as :func:`rotary_embedding`.

        Args:
            x: Shape ``[..., T, Dh]``, a floating dtype: queries or keys.
            positions: Shape ``[T]``, an integer dtype: the position of each of the ``T``
                vectors. Defaults to ``0 .. T - 1``.
            seq_len: The current length for ``"dynamic"`` scaling; the largest position + 1
                when ``None``.

        Returns:
            Shape ``[..., T, Dh]``, same dtype and device as ``x``; exactly what
            :func:`rotary_embedding` returns for the module's arguments.

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``positions`` not an integer tensor.
            ValueError: If ``x``'s last dimension is not ``head_dim``, ``positions`` is not of
                shape ``[T]``, or ``"dynamic"`` scaling has neither ``seq_len`` nor a position.
        """
        positions = _check_rotary_inputs(x, positions)  # [T]
        head_dim = x.shape[-1]
        if head_dim != self.head_dim:
            raise ValueError(
                f"x must have shape [..., T, Dh] with Dh = head_dim = {self.head_dim}, "
                f"got {list(x.shape)}"
            )
        inv_freq, factor = self.frequencies(positions, seq_len)  # [Dh / 2], a float
        # The angles are computed in float64 on the CPU: in float32, pos * frequency is off by
        # about 1e-3 rad at position 10_000, and some accelerators have no float64.
        angle = positions.cpu().to(torch.float64)[:, None] * inv_freq  # [T, Dh / 2]
        # Half-precision inputs are rotated in float32 and rounded once at the end.
        compute_dtype = torch.promote_types(x.dtype, torch.float32)
        cos = (factor * torch.cos(angle)).to(device=x.device, dtype=compute_dtype)  # [T, Dh / 2]
        sin = (factor * torch.sin(angle)).to(device=x.device, dtype=compute_dtype)  # [T, Dh / 2]
        # Pair axis last for "interleaved" (features 2i, 2i + 1), first for "half" (i, i + Dh / 2).
        pair_axis = -1 if self.layout == "interleaved" else -2
        split = (head_dim // 2, 2) if self.layout == "interleaved" else (2, head_dim // 2)
        pairs = x.to(compute_dtype).unflatten(-1, split)  # [..., T, Dh/2, 2] or [..., T, 2, Dh/2]
        first, second = pairs.unbind(pair_axis)  # [..., T, Dh / 2] each
        rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), pair_axis)
        return rotated.flatten(-2).to(x.dtype)  # [..., T, Dh]

    def frequencies(
        self, positions: torch.Tensor, seq_len: int | None = None
    ) -> tuple[torch.Tensor, float]:
        """The inverse frequencies and attention factor that rotate ``positions``.

        Those computed when the module was built, except for ``"dynamic"`` scaling, whose
        frequencies depend on the current length: ``seq_len``, or the largest position + 1.

        Args:
            positions: Shape ``[T]``, an integer dtype.
            seq_len: The current length for ``"dynamic"`` scaling, or ``None``.

        Returns:
            A pair as :func:`rope_frequencies` returns it: shape ``[Dh / 2]``,
            ``torch.float64``, and a float.
        """
        if not self.dynamic:
            return self.inv_freq, self.attention_factor
        if seq_len is None and len(positions):
            seq_len = int(positions.max()) + 1
        return rope_frequencies(
            self.head_dim, base=self.base, scaling=self.scaling, seq_len=seq_len
        )

    def check_cacheable(self, setting: str, fix: str) -> None:
        """Refuse a key/value cache for a ``"dynamic"`` scaling.

        Keys are rotated before they are cached; with ``"dynamic"`` scaling the frequencies
        change with the length, so keys rotated at earlier lengths no longer match the full pass.

        Args:
            setting: What the caller calls the scaling, for the message
                (``"config.rope_scaling"``).
            fix: What to do instead, for the message.

        Raises:
            ValueError: If the scaling is ``"dynamic"``.
        """
        if self.dynamic:
            raise ValueError(
                f"{setting} has rope_type 'dynamic', whose frequencies depend on the current "
                "length: every cached key would need re-rotating as the length grows, so a "
                f"key/value cache cannot reproduce the full pass; {fix}"
            )

    def extra_repr(self) -> str:
        scaling = "" if self.scaling is None else f", scaling={self.scaling}"
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}{scaling}"
