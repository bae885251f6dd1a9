"""Heads that copy: a two-layer attention-only model, repeated sequences, and head scores.

The smallest model in which induction heads form (Olsson et al., 2022, "In-context Learning
and Induction Heads"): token embedding plus positions, layers of causal multi-head attention
that each *add* to a residual stream, no feed-forward network, no normalisation, and an
unembedding. Because nothing but attention writes to the stream, every head's contribution can
be taken out exactly, which is what an ablation needs.

- :class:`AttentionOnlyTransformer`: the model, set up by an :class:`AttentionOnlyConfig`.
  Called as ``model(token_ids, mask)`` it returns ``(logits, attentions)``, so
  :func:`attention_lab.training.train` trains it unchanged; the keyword ``ablate`` takes heads
  out (zeroed) or forces their pattern.
- :func:`head_contributions`: what each head of a
  :class:`~attention_lab.attention.MultiHeadAttention` adds to the residual stream,
  ``[B, H, T, D]``; they sum (plus the output bias) to its output.
- :func:`repeated_sequences`: random tokens whose second half repeats the first, seeded;
  :func:`repeat_pairs` turns them into next-token inputs and targets that keep only the
  targets the first copy predicts.
- :func:`previous_token_score` and :func:`induction_score`: the two scores of Olsson et al.,
  the mean attention from each position to the one before it, and from each position of the
  repeated half to the token after its earlier occurrence.
- :func:`loss_by_position`: cross-entropy at every position, averaged over the batch
  (optionally leaving padded targets out).

Heads and layers are counted from 0.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import (
    ModelConfig,
    check_id_range,
    check_int,
    check_logits_and_targets,
    check_sequence,
    check_token_ids,
)
from attention_lab.attention import MultiHeadAttention
from attention_lab.masks import causal_mask, check_mask, combine_masks
from attention_lab.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = [
    "AttentionOnlyConfig",
    "AttentionOnlyTransformer",
    "head_contributions",
    "induction_score",
    "loss_by_position",
    "previous_token_score",
    "repeat_pairs",
    "repeated_sequences",
]

_POSITIONAL = ("learned", "sinusoidal")


def head_contributions(
    attention: MultiHeadAttention, x: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """What each head of ``attention`` writes to the residual stream, for given weights.

    Multi-head attention concatenates the heads' outputs and projects them with ``out_proj``.
    The projection is linear, so its result is a sum over heads: head ``h`` contributes
    ``(weights[:, h] @ v_h) @ W_O[:, h-th slice].T``. The contributions plus ``out_proj.bias``
    equal the module's output when ``weights`` are the module's own.

    Args:
        attention: A :class:`~attention_lab.attention.MultiHeadAttention` used as
            self-attention (its values are projections of ``x``).
        x: Shape ``[B, T, D]``, the input of the self-attention.
        weights: Shape ``[B, H, T, T]``, the attention pattern of every head (rows need not be
            the module's own: an ablation can pass any pattern).

    Returns:
        Shape ``[B, H, T, D]``: head ``h``'s term of the output, without the output bias.

    Raises:
        TypeError: If ``attention`` is not a ``MultiHeadAttention`` or a tensor is not floating.
        ValueError: If the shapes do not fit together.
    """
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"attention must be a MultiHeadAttention, got {type(attention).__name__}")
    check_sequence(x, "x", attention.d_model)
    batch, seq_len, d_model = x.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    expected = (batch, heads, seq_len, seq_len)
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        raise TypeError("weights must be a floating torch.Tensor of shape [B, H, T, T]")
    if tuple(weights.shape) != expected:
        raise ValueError(
            f"weights must have shape [B, H, T, T] = {list(expected)}, got {list(weights.shape)}"
        )
    value = attention.v_proj(x).view(batch, seq_len, heads, head_dim)  # [B, T, H, Dh]
    value = value.transpose(1, 2)  # [B, H, T, Dh]
    mixed = weights.to(value.dtype) @ value  # [B, H, T, Dh]
    # out_proj.weight is [D, H * Dh]; its columns h*Dh .. (h+1)*Dh - 1 read head h.
    w_out = attention.out_proj.weight.view(d_model, heads, head_dim)  # [D, H, Dh]
    return torch.einsum("bhte,dhe->bhtd", mixed, w_out)  # [B, H, T, D]


def _check_ablate(ablate: object, num_layers: int, num_heads: int, seq_len: int) -> dict:
    """Validate ``ablate`` and return it as a dict ``{(layer, head): None | [B?, T, T]}``."""
    if ablate is None:
        return {}
    if not isinstance(ablate, Mapping):
        raise TypeError(
            "ablate must be a mapping {(layer, head): None or a [T, T] pattern}, got "
            f"{type(ablate).__name__}"
        )
    checked = {}
    for where, pattern in ablate.items():
        if (
            not isinstance(where, tuple)
            or len(where) != 2
            or not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in where)
        ):
            raise TypeError(f"ablate's keys must be (layer, head) pairs of ints, got {where!r}")
        layer, head = where
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(
                f"ablate names head {head} of layer {layer}, but the model has layers "
                f"0..{num_layers - 1} and heads 0..{num_heads - 1}"
            )
        if pattern is not None:
            if not isinstance(pattern, torch.Tensor) or not pattern.is_floating_point():
                raise TypeError(
                    f"the pattern for {where} must be None (zero the head) or a floating "
                    f"tensor [T, T] or [B, T, T], got {type(pattern).__name__}"
                )
            if pattern.ndim not in (2, 3) or tuple(pattern.shape[-2:]) != (seq_len, seq_len):
                raise ValueError(
                    f"the pattern for {where} must have shape [T, T] or [B, T, T] with "
                    f"T = {seq_len}, got {list(pattern.shape)}"
                )
        checked[(int(layer), int(head))] = pattern
    return checked


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionOnlyConfig(ModelConfig):
    """The settings of an :class:`AttentionOnlyTransformer`, checked when it is created.

    Args:
        vocab_size: Number of token ids ``V``, a positive int.
        d_model: Width ``D`` of the residual stream, divisible by ``num_heads``.
        num_layers: Number of attention layers, a positive int.
        num_heads: Heads ``H`` per layer, a positive int.
        max_len: Longest sequence the model accepts, a positive int.
        positional: ``"learned"`` (a trained vector per position) or ``"sinusoidal"``.

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range.

    Example:
        >>> AttentionOnlyConfig(vocab_size=10, d_model=16, num_layers=2, num_heads=2,
        ...                     max_len=8).positional
        'learned'
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    max_len: int
    positional: str = "learned"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.positional not in _POSITIONAL:
            raise ValueError(f"positional must be one of {_POSITIONAL}, got {self.positional!r}")


class AttentionOnlyTransformer(nn.Module):
    """A decoder made of attention alone: embed, add positions, attention layers, unembed.

    Each layer is a causal :class:`~attention_lab.attention.MultiHeadAttention` whose output is
    added to the residual stream: ``x = x + attention(x, mask)``. There is no feed-forward
    network and no normalisation, so the final stream is the embedding plus a sum of head
    contributions (see :func:`head_contributions`), and the logits are its linear read-out by
    ``unembedding``. Every position attends to itself and earlier positions only, so the
    logits at position ``t`` predict token ``t + 1``.

    Args:
        config: An :class:`AttentionOnlyConfig`; or the vocabulary size ``V``, with the other
            fields of :class:`AttentionOnlyConfig` as keyword arguments.
        **options: The fields of :class:`AttentionOnlyConfig`, when ``config`` is not one.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> model = AttentionOnlyTransformer(10, d_model=16, num_layers=2, num_heads=2,
        ...                                  max_len=8)
        >>> logits, attentions = model(torch.randint(0, 10, (3, 8)))
        >>> logits.shape, len(attentions), attentions[0].shape
        (torch.Size([3, 8, 10]), 2, torch.Size([3, 2, 8, 8]))
    """

    def __init__(self, config: AttentionOnlyConfig | int | None = None, /, **options: Any) -> None:
        super().__init__()
        self.config = config = AttentionOnlyConfig.from_arguments(config, options)
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        if config.positional == "learned":
            self.positional = LearnedPositionalEmbedding(config.max_len, config.d_model)
        else:
            self.positional = SinusoidalPositionalEncoding(config.d_model, config.max_len)
        self.layers = nn.ModuleList(
            MultiHeadAttention(config.d_model, config.num_heads) for _ in range(config.num_layers)
        )
        self.unembedding = nn.Linear(config.d_model, config.vocab_size)

    def forward(
        self,
        token_ids: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        ablate: Mapping[tuple[int, int], torch.Tensor | None] | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for the next token at every position, and every layer's attention.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``, ``T <= max_len``.
            mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, T, T]`` (``True`` =
                may attend), combined with the causal mask, e.g. a padding mask.
            ablate: Optional ``{(layer, head): pattern}``. With ``pattern=None`` the head's
                contribution to the stream is removed (zero ablation). With a floating
                ``[T, T]`` or ``[B, T, T]`` pattern the head mixes its values with that pattern
                instead of its own. The returned attentions are the patterns actually used.

        Returns:
            A pair ``(logits, attentions)``: logits of shape ``[B, T, V]``, and a list of one
            ``[B, H, T, T]`` weight tensor per layer.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor, ``mask`` is not bool, or
                ``ablate`` is malformed.
            ValueError: If ``token_ids`` is not 2-D, holds an id outside ``[0, V)`` or is
                longer than ``max_len``, ``mask`` does not broadcast with the causal mask
                ``[T, T]``, or ``ablate`` names a head the model lacks.
        """
        check_token_ids(token_ids, "token_ids")
        check_id_range(token_ids, "token_ids", self.config.vocab_size, "V")
        seq_len = token_ids.shape[1]
        if seq_len > self.config.max_len:
            raise ValueError(
                f"token_ids has T={seq_len} positions, more than max_len={self.config.max_len}"
            )
        ablations = _check_ablate(ablate, len(self.layers), self.config.num_heads, seq_len)
        allowed = causal_mask(seq_len, device=token_ids.device)  # [T, T]
        if mask is not None:
            check_mask(mask)
            allowed = combine_masks(allowed, mask)  # broadcast to [B, H, T, T]
        x = self.positional(self.embedding(token_ids))  # [B, T, D]
        attentions = []
        for index, layer in enumerate(self.layers):
            out, weights = layer(x, mask=allowed)  # [B, T, D], [B, H, T, T]
            heads_here = {h: p for (i, h), p in ablations.items() if i == index}
            if heads_here:
                weights = weights.clone()
                keep = torch.ones(self.config.num_heads, dtype=x.dtype, device=x.device)  # [H]
                for head, pattern in heads_here.items():
                    if pattern is None:
                        keep[head] = 0.0
                    else:
                        weights[:, head] = pattern.to(weights.dtype)  # [B, T, T]
                contributions = head_contributions(layer, x, weights)  # [B, H, T, D]
                out = (contributions * keep[:, None, None]).sum(dim=1)  # [B, T, D]
                if layer.out_proj.bias is not None:
                    out = out + layer.out_proj.bias
            attentions.append(weights)
            x = x + out  # [B, T, D]
        return self.unembedding(x), attentions  # [B, T, V]


def repeated_sequences(
    num_sequences: int,
    vocab_size: int,
    half_length: int,
    *,
    seed: int,
    min_half_length: int | None = None,
) -> torch.Tensor:
    """Random token sequences whose second half repeats the first, padded to one length.

    Each sequence is a block of ``L`` ids drawn uniformly and independently from ``[1, V)``
    (repeats within a block are allowed), followed by a copy of the block, then padding id 0 up
    to length ``2 * half_length``. ``L`` is ``half_length`` for every sequence, or, if
    ``min_half_length`` is given, drawn uniformly from ``min_half_length .. half_length`` for
    each sequence: a varying ``L`` means the distance back to the earlier occurrence varies, so
    no fixed positional offset finds it. Everything is drawn from a ``torch.Generator`` seeded
    with ``seed``.

    For next-token training take ``inputs, targets = seqs[:, :-1], seqs[:, 1:]``: the target
    at position ``t`` is the token at ``t + 1``. Targets at ``t = L .. 2 L - 2`` repeat the
    block and can be read off the first half; targets at ``t < L`` cannot be predicted.

    Args:
        num_sequences: ``N``, a positive int.
        vocab_size: ``V``, the number of ids including the padding id 0, an int >= 2.
        half_length: ``L``, or the largest ``L``, a positive int.
        seed: Seed of the draw, a non-negative int; the same seed gives the same sequences.
        min_half_length: Smallest ``L``, an int in ``1 .. half_length``, or ``None`` for the
            same ``L = half_length`` everywhere (no padding).

    Returns:
        Shape ``[N, 2 * half_length]``, dtype ``torch.long``: for each sequence with block
        length ``L``, ``seqs[n, L:2 L] == seqs[n, :L]`` and ``seqs[n, 2 L:] == 0``.

    Raises:
        TypeError: If an argument is not an int.
        ValueError: If an argument is out of range.

    Example:
        >>> seqs = repeated_sequences(2, 10, 3, seed=0)
        >>> seqs.shape, bool((seqs[:, 3:] == seqs[:, :3]).all()), bool((seqs > 0).all())
        (torch.Size([2, 6]), True, True)
    """
    check_int(num_sequences, "num_sequences")
    check_int(vocab_size, "vocab_size", minimum=2)
    check_int(half_length, "half_length")
    check_int(seed, "seed", minimum=0)
    if min_half_length is not None:
        check_int(min_half_length, "min_half_length")
        if min_half_length > half_length:
            raise ValueError(
                f"min_half_length={min_half_length} is larger than half_length={half_length}"
            )
    generator = torch.Generator().manual_seed(seed)
    block = torch.randint(1, vocab_size, (num_sequences, half_length), generator=generator)
    if min_half_length is None:
        return torch.cat([block, block], dim=1)  # [N, 2 L]
    lengths = torch.randint(
        min_half_length, half_length + 1, (num_sequences, 1), generator=generator
    )  # [N, 1]
    position = torch.arange(2 * half_length)  # [2 L]
    # Position p holds block[p] in the first copy, block[p - L] in the second, then padding.
    source = torch.where(position < lengths, position, position - lengths)  # [N, 2 L]
    source = source.clamp(max=half_length - 1)  # padding positions read anything; zeroed below
    seqs = block.gather(1, source)  # [N, 2 L]
    return seqs.masked_fill(position >= 2 * lengths, 0)


def repeat_pairs(seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token inputs and targets for :func:`repeated_sequences`, keeping only the targets
    that the first copy predicts.

    ``inputs, targets = seqs[:, :-1], seqs[:, 1:]``, then every target that cannot be read off
    the earlier copy is set to the padding id 0, which :func:`~attention_lab.training.train`
    and :func:`~attention_lab.training.evaluate` leave out: the first block (new random
    tokens), the first token of the repeat (nothing says where the block ended when its length
    varies) and the padding. What is left, the targets at ``t = L .. 2 L - 2`` of a sequence
    with block length ``L``, needs a model that finds the token's earlier occurrence and copies
    the one after it (an induction head), whatever the sequence's length. The block length of
    each sequence is read off as half its non-padding tokens.

    Args:
        seqs: Shape ``[N, S]``, an integer dtype, as :func:`repeated_sequences` returns (ids
            of the blocks >= 1, padding 0 at the end), ``S >= 2``.

    Returns:
        A pair ``(inputs, targets)``, each ``[N, S - 1]``, ``targets`` a new tensor.

    Raises:
        TypeError: If ``seqs`` is not an integer tensor.
        ValueError: If ``seqs`` is not 2-D with at least 2 positions.

    Example:
        >>> inputs, targets = repeat_pairs(torch.tensor([[5, 6, 7, 5, 6, 7]]))
        >>> inputs.tolist(), targets.tolist()
        ([[5, 6, 7, 5, 6]], [[0, 0, 0, 6, 7]])
    """
    check_token_ids(seqs, "seqs")
    if seqs.shape[1] < 2:
        raise ValueError(f"seqs needs at least 2 positions, got {list(seqs.shape)}")
    inputs, targets = seqs[:, :-1], seqs[:, 1:].clone()  # [N, S - 1] each
    lengths = (seqs != 0).sum(dim=1, keepdim=True) // 2  # [N, 1], the block length L
    position = torch.arange(targets.shape[1], device=seqs.device)  # [S - 1]
    return inputs, targets.masked_fill(position < lengths, 0)  # padding stays 0


def _check_weights(weights: torch.Tensor) -> None:
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        kind = weights.dtype if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise TypeError(f"weights must be a floating torch.Tensor [..., T, T], got {kind}")
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must be self-attention weights [..., T, T], got {list(weights.shape)}"
        )


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """The mean attention from each position to the position just before it.

    ``mean over t = 1 .. T-1 of weights[..., t, t - 1]``: 1 for a head that always attends to
    the previous token, and ``mean(1 / (t + 1))`` for a causal head that spreads its weight
    evenly.

    Args:
        weights: Shape ``[..., T, T]`` with ``T >= 2``, a floating dtype: attention weights
            (queries on the rows), e.g. a model's ``[B, H, T, T]``.

    Returns:
        Shape ``[...]``: one score per matrix, e.g. ``[B, H]``; average over ``B`` for a head's
        score.

    Raises:
        TypeError: If ``weights`` is not a floating tensor.
        ValueError: If ``weights`` is not ``[..., T, T]`` with ``T >= 2``.
    """
    _check_weights(weights)
    if weights.shape[-1] < 2:
        raise ValueError(f"weights need T >= 2 positions, got T = {weights.shape[-1]}")
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)  # [...]


def induction_score(weights: torch.Tensor, half_length: int) -> torch.Tensor:
    """The mean attention from each repeated token to the token after its earlier occurrence.

    For a sequence whose positions ``L .. 2 L - 1`` repeat positions ``0 .. L - 1``, the token
    at ``t >= L`` occurred before at ``t - L``; an induction head attends from ``t`` to the
    token that followed it, at ``t - L + 1``, and so predicts the token at ``t + 1``. The score
    averages that weight over the queries whose next token is in the repeat,
    ``t = L .. 2 L - 2``: ``mean of weights[..., t, t - L + 1]``. It is 1 for a perfect
    induction head, and about ``1 / (t + 1)`` per query for a causal head that spreads its
    weight evenly.

    Args:
        weights: Shape ``[..., T, T]``, a floating dtype, with ``T >= 2 L - 1``, e.g. the
            ``[B, H, T, T]`` weights for the inputs ``seqs[:, :-1]`` of
            :func:`repeated_sequences` (``T = 2 L - 1``).
        half_length: ``L``, the length of the repeated block, an int >= 2.

    Returns:
        Shape ``[...]``: one score per matrix, e.g. ``[B, H]``.

    Raises:
        TypeError: If ``weights`` is not a floating tensor or ``half_length`` not an int.
        ValueError: If ``weights`` is not square, ``half_length < 2`` or ``T < 2 L - 1``.
    """
    _check_weights(weights)
    check_int(half_length, "half_length", minimum=2)
    seq_len = weights.shape[-1]
    if seq_len < 2 * half_length - 1:
        raise ValueError(
            f"weights cover T = {seq_len} positions; the repeat of a block of half_length "
            f"L = {half_length} needs T >= 2 L - 1 = {2 * half_length - 1}"
        )
    # Entry i of the diagonal at offset -(L - 1) is [i + L - 1, i]: queries L .. 2L - 2 are
    # entries 1 .. L - 1.
    diagonal = weights.diagonal(offset=-(half_length - 1), dim1=-2, dim2=-1)  # [..., T - L + 1]
    return diagonal[..., 1:half_length].mean(dim=-1)  # [...]


def loss_by_position(
    logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int | None = None
) -> torch.Tensor:
    """Cross-entropy at every position, averaged over the batch.

    Args:
        logits: Shape ``[B, T, V]``, a floating dtype.
        targets: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``.
        pad_id: If given, targets equal to it are left out of each position's mean (as
            :func:`~attention_lab.training.evaluate` leaves them out); a position whose
            targets are all ``pad_id`` gets NaN.

    Returns:
        Shape ``[T]``: ``mean over b of -log softmax(logits[b, t])[targets[b, t]]``, over the
        ``b`` whose target is not ``pad_id``.

    Raises:
        TypeError: If ``logits`` is not floating or ``targets`` not an integer tensor.
        ValueError: If the shapes do not fit or a target is outside ``[0, V)``.
    """
    check_logits_and_targets(logits, targets)
    check_id_range(targets, "targets", logits.shape[-1], "V")
    if pad_id is not None:
        check_int(pad_id, "pad_id", minimum=0)
    # cross_entropy wants the classes in dimension 1.
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # [B, T]
    if pad_id is None:
        return losses.mean(dim=0)  # [T]
    kept = targets != pad_id  # [B, T]
    # 0 / 0 = NaN where nothing is kept: no loss was measured there.
    return (losses * kept).sum(dim=0) / kept.sum(dim=0)  # [T]
