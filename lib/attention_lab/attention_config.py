"""The options of today's attention layers (Part VI), as one validated object.

:class:`AttentionConfig` holds what a Llama-, Qwen3-, BLOOM-, GPT-OSS- or Gemma-2-style layer adds
to the attention of 2017: shared key/value heads, a head width of its own, QK-norm, a rotary
embedding and its scaling, ALiBi, sinks and a softcap. It is checked once, when it is made, and
passed down unchanged: :class:`~attention_lab.language_model.DecoderConfig` holds one,
:class:`~attention_lab.layers.EncoderLayer` hands it to its
:class:`~attention_lab.attention.MultiHeadAttention`. Parts I to V never need one:
``MultiHeadAttention(d_model, num_heads)`` is the attention of "Attention Is All You Need".
"""

import dataclasses
import types
from collections.abc import Mapping

from attention_lab._validation import check_bool, check_int, check_real_above
from attention_lab.positional import ROTARY_LAYOUTS, rope_scaling_type

__all__ = ["AttentionConfig"]

_DEFAULT_BASE = 10000.0
_DEFAULT_EPS = 1e-6


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionConfig:
    """The Part VI options of a :class:`~attention_lab.attention.MultiHeadAttention`.

    Frozen and checked when made: a wrong type or value raises at once, as does a combination
    that has no meaning (a RoPE base or scaling without a rotary embedding, a QK-norm ``eps``
    without QK-norm, or ALiBi beside a rotary embedding: ALiBi is the position signal of BLOOM
    and MPT *in place of* a rotation, Press et al. 2022, and no model adds both). The sizes
    that depend on the layer's width (``num_kv_heads`` dividing ``num_heads``, ``head_dim``)
    are checked by the layer that uses the configuration.

    Args:
        num_kv_heads: Key/value heads ``Hkv``, a positive int dividing the layer's
            ``num_heads``: each is shared by ``num_heads // num_kv_heads`` query heads
            (grouped-query attention; 1 is multi-query attention). ``None`` means
            ``num_heads`` (multi-head attention).
        head_dim: Width ``Dh`` of every head, a positive int; ``None`` means
            ``d_model // num_heads``. Qwen3's heads, for example, are wider than that.
        qk_norm: Whether every head's queries and keys are RMS-normalised before the rotation
            (Qwen3, OLMo 2).
        norm_eps: The ``eps`` of those two RMSNorms, a real number above 0 (``qk_norm`` only).
        rope_layout: ``None`` (no rotary embedding), ``"half"`` (Llama's and Qwen's) or
            ``"interleaved"`` (the RoFormer paper's): which features rotate together, the
            ``layout`` of :class:`~attention_lab.positional.RotaryEmbedding`.
        rope_base: The rotary embedding's ``base`` (``rope_theta`` in ``transformers``), a real
            number above 1.
        rope_scaling: ``None``, or a RoPE scaling dictionary in ``transformers``' form
            (``"linear"``, ``"dynamic"``, ``"yarn"``, ``"llama3"``; see
            :func:`~attention_lab.positional.rope_frequencies`). Held as a read-only copy. With
            ``"dynamic"`` scaling no key/value cache is possible: its frequencies change with
            the length.
        alibi: Whether ALiBi's linear distance penalty is added to every head's scores.
        sinks: Whether every head has a learned sink logit (GPT-OSS).
        softcap: ``None``, or the cap of the scaled scores (Gemma 2), a real number above 0.
        top_k: ``None``, or how many keys each query attends to at most, a positive int: its
            ``top_k`` visible keys of highest logit (after the softcap and the bias), by
            :func:`~attention_lab.masks.topk_mask`; a query that sees fewer keeps them all
            (Part VII's exact top-k attention, which still computes every score).

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range, ``rope_scaling`` is not valid, or the fields
            combine as described above.

    Example:
        >>> AttentionConfig(num_kv_heads=2, rope_layout="half").rope_base
        10000.0
        >>> AttentionConfig(rope_layout="half", alibi=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: alibi=True and rope_layout='half' are two position signals: ...
    """

    num_kv_heads: int | None = None
    head_dim: int | None = None
    qk_norm: bool = False
    norm_eps: float = _DEFAULT_EPS
    rope_layout: str | None = None
    rope_base: float = _DEFAULT_BASE
    rope_scaling: Mapping | None = None
    alibi: bool = False
    sinks: bool = False
    softcap: float | None = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_kv_heads", "head_dim", "top_k"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name)
        for name in ("qk_norm", "alibi", "sinks"):
            check_bool(getattr(self, name), name)
        check_real_above(self.norm_eps, "norm_eps", 0)
        if self.norm_eps != _DEFAULT_EPS and not self.qk_norm:
            raise ValueError(f"norm_eps={self.norm_eps} is the eps of QK-norm, but qk_norm=False")
        if self.rope_layout is not None and self.rope_layout not in ROTARY_LAYOUTS:
            raise ValueError(
                f"rope_layout must be None, 'half' or 'interleaved', got {self.rope_layout!r}"
            )
        check_real_above(self.rope_base, "rope_base", 1)
        if self.rope_layout is None and (
            self.rope_scaling is not None or self.rope_base != _DEFAULT_BASE
        ):
            raise ValueError("rope_base and rope_scaling need a rotary embedding (rope_layout)")
        if self.rope_layout is not None and self.head_dim is not None and self.head_dim % 2:
            raise ValueError(
                f"a rotary embedding rotates feature pairs and needs an even head_dim, "
                f"got {self.head_dim}"
            )
        if self.rope_scaling is not None:
            try:
                rope_scaling_type(self.rope_scaling)
            except (TypeError, ValueError) as error:
                raise type(error)(f"rope_scaling is not valid: {error}") from None
            # A read-only copy: editing the caller's dict afterwards changes nothing here, and
            # editing this one raises instead of changing nothing in a layer built from it.
            scaling = types.MappingProxyType(dict(self.rope_scaling))
            object.__setattr__(self, "rope_scaling", scaling)
        if self.alibi and self.rope_layout is not None:
            raise ValueError(
                f"alibi=True and rope_layout={self.rope_layout!r} are two position signals: "
                "ALiBi replaces the rotary embedding (BLOOM, MPT); choose one"
            )
        if self.softcap is not None:
            check_real_above(self.softcap, "softcap", 0)
            object.__setattr__(self, "softcap", float(self.softcap))
        object.__setattr__(self, "rope_base", float(self.rope_base))

    def layer_shape(self, d_model: int, num_heads: int) -> tuple[int, int]:
        """The head width and the number of key/value heads of a layer of this config.

        The one place the rules that need the layer's width are checked, for
        :class:`~attention_lab.attention.MultiHeadAttention` and for the model configs that
        build it (a :class:`~attention_lab.language_model.DecoderConfig` raises when made).

        Args:
            d_model: The layer's width ``D``, a positive int.
            num_heads: Its query heads ``H``, a positive int.

        Returns:
            ``(head_dim, num_kv_heads)``: ``head_dim``, or ``D // H`` when it is ``None``;
            ``num_kv_heads``, or ``H`` when it is ``None``.

        Raises:
            ValueError: If ``D`` is not divisible by ``H`` (with no ``head_dim``), ``H`` not by
                ``num_kv_heads``, a rotary embedding gets an odd head width, or ``"dynamic"``
                scaling a head width of 2 (its base would divide by zero).
        """
        head_dim = self.head_dim
        if head_dim is None:
            if d_model % num_heads != 0:
                raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
            head_dim = d_model // num_heads
        num_kv_heads = num_heads if self.num_kv_heads is None else self.num_kv_heads
        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}: each "
                "key/value head must serve the same number of query heads"
            )
        if self.rope_layout is not None and head_dim % 2:
            raise ValueError(
                f"a rotary embedding rotates feature pairs and needs an even head_dim, "
                f"got {head_dim} (d_model // num_heads = {d_model} // {num_heads})"
            )
        if self.rope_scaling is not None and head_dim <= 2:
            if rope_scaling_type(self.rope_scaling) == "dynamic":
                raise ValueError(
                    f"dynamic rope_scaling raises the base to the power head_dim / (head_dim - 2) "
                    f"and needs head_dim > 2, got {head_dim}"
                )
        return head_dim, num_kv_heads
