"""Part VI's changes to the attention scores, behind one seam.

Today's models change the scores of :func:`attention_lab.attention.scaled_dot_product_attention`
in three ways between the scaling and the weights: a cap (Gemma 2's softcapping), a bias added
to the scores (ALiBi's distance penalty), and sink logits that join each row's softmax without
a value (GPT-OSS). :class:`ScoreModifiers` holds the three, checks them, and applies them in the
order those models apply them, so the attention function itself keeps the shape of the 2017
formula: it calls :meth:`ScoreModifiers.apply` on the scaled scores and
:meth:`ScoreModifiers.softmax` in place of ``torch.softmax``. FlexAttention separates such a
``score_mod`` from the mask in the same way.
"""

import dataclasses

import torch

from attention_lab._validation import check_real_above

__all__ = ["ScoreModifiers"]


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}"
    return type(value).__name__


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ScoreModifiers:
    """A cap, a bias and sink logits for the scaled attention scores; each optional.

    Applied in this order after the scaling (as Gemma 2 and GPT-OSS order them): ``softcap``
    replaces each score ``s`` by ``softcap * tanh(s / softcap)`` (Gemma 2), which keeps every
    score within ``(-softcap, softcap)``; ``bias`` is added (e.g. ALiBi's,
    :func:`attention_lab.positional.alibi_bias`); then the attention function blocks the
    masked keys; then ``sink_logits`` adds one more logit per head to each row's softmax: it
    takes part of the weight, but has no value, so the weights of a row sum to less than 1.

    Args:
        softcap: ``None``, or the cap of the scaled scores, a real number greater than 0.
        bias: ``None``, or a floating tensor broadcastable to the scores ``[..., Tq, Tk]``.
        sink_logits: ``None``, or a floating tensor of shape ``[H]``, one logit per head, for
            scores of shape ``[..., H, Tq, Tk]``.

    Raises:
        TypeError: If ``bias`` or ``sink_logits`` is not a floating tensor, or ``softcap`` not
            a real number.
        ValueError: If ``softcap`` is not greater than 0 or ``sink_logits`` is not 1-D.

    Example:
        >>> capped = ScoreModifiers(softcap=2.0)
        >>> capped.apply(torch.tensor([[-100.0, 0.0, 100.0]]))
        tensor([[-2.,  0.,  2.]])
    """

    softcap: float | None = None
    bias: torch.Tensor | None = None
    sink_logits: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.softcap is not None:
            check_real_above(self.softcap, "softcap", 0)
        if self.bias is not None and (
            not isinstance(self.bias, torch.Tensor) or not self.bias.is_floating_point()
        ):
            raise TypeError(f"bias must be a floating torch.Tensor, got {_describe(self.bias)}")
        sinks = self.sink_logits
        if sinks is not None:
            if not isinstance(sinks, torch.Tensor) or not sinks.is_floating_point():
                raise TypeError(
                    f"sink_logits must be a floating torch.Tensor, got {_describe(sinks)}"
                )
            if sinks.ndim != 1:
                raise ValueError(
                    f"sink_logits must have shape [H], one logit per head, got {list(sinks.shape)}"
                )

    def check(self, scores_shape: tuple[int, ...]) -> None:
        """Raise if the bias or the sink logits do not fit scores of shape ``scores_shape``.

        Args:
            scores_shape: The shape ``[..., Tq, Tk]`` of the scores they will modify.

        Raises:
            ValueError: If ``bias`` does not broadcast to ``scores_shape``, or ``sink_logits``
                does not have one logit per head (the axis ``-3`` of the scores).
        """
        scores_shape = tuple(scores_shape)
        if self.bias is not None:
            try:
                fits = torch.broadcast_shapes(self.bias.shape, scores_shape) == scores_shape
            except RuntimeError:
                fits = False
            if not fits:
                raise ValueError(
                    f"bias of shape {list(self.bias.shape)} does not broadcast to the attention "
                    f"scores [..., Tq, Tk] = {list(scores_shape)}"
                )
        sinks = self.sink_logits
        if sinks is not None and (len(scores_shape) < 3 or sinks.shape != (scores_shape[-3],)):
            raise ValueError(
                f"sink_logits must have shape [H], one logit per head of the scores "
                f"[..., H, Tq, Tk] = {list(scores_shape)}, got {list(sinks.shape)}"
            )

    def apply(self, scores: torch.Tensor) -> torch.Tensor:
        """The scaled scores capped, then biased.

        Args:
            scores: Shape ``[..., Tq, Tk]``, the scaled scores ``q · k / sqrt(Dk)``.

        Returns:
            Shape ``[..., Tq, Tk]``, the same dtype.
        """
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        if self.bias is not None:
            scores = scores + self.bias.to(scores.dtype)  # [..., Tq, Tk]
        return scores

    def softmax(self, scores: torch.Tensor, dim: int = -1, *, dtype: torch.dtype) -> torch.Tensor:
        """The weights of each row: ``torch.softmax``, with each head's sink logit in the sum.

        Args:
            scores: Shape ``[..., H, Tq, Tk]``, the modified and masked scores.
            dim: The key axis; only ``-1`` with sink logits.
            dtype: The dtype the softmax is computed in, as ``torch.softmax``'s.

        Returns:
            Shape ``[..., H, Tq, Tk]`` in ``dtype``: each row sums to 1, or to less than 1 with
            sink logits (the sink's own weight is dropped).
        """
        if self.sink_logits is None:
            return torch.softmax(scores, dim=dim, dtype=dtype)
        if dim != -1:
            raise ValueError(f"sink logits join the last axis of the scores, got dim={dim}")
        # One more column per row, the head's sink logit; its weight is dropped after the
        # softmax, so it only enlarges the denominator.
        sinks = self.sink_logits.to(scores.dtype)[:, None, None].expand(*scores.shape[:-1], 1)
        with_sink = torch.cat([scores, sinks], dim=-1)  # [..., H, Tq, Tk + 1]
        return torch.softmax(with_sink, dim=-1, dtype=dtype)[..., :-1]  # [..., H, Tq, Tk]
