"""A small model that predicts one token per position, and the plain loop that trains it.

Enough to watch attention learn a patterned task (such as ``attention_lab.data.reversal_task``)
on a CPU in seconds, with nothing hidden in a framework:

- :class:`TokenClassifier`: a :class:`~attention_lab.layers.TransformerEncoder` with a linear
  head that turns every position's vector into logits over the vocabulary, set up by a
  :class:`TokenClassifierConfig`.
- :func:`token_loss`: cross-entropy over the positions whose target is not padding.
- :func:`train`: AdamW on random mini-batches, reproducible from one seed; it returns the loss
  of every step.
- :func:`evaluate`: loss and token and sequence accuracy, without gradients.
- :func:`pattern_share`: how much of each query's attention falls on the keys a pattern
  expects, to measure whether a trained head does what the task needs.

Padding uses id 0 by default, the convention of ``attention_lab.data`` and of BERT's vocabulary.
Nothing here prints; pass a ``callback`` to :func:`train` to watch progress.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import (
    check_id_range,
    check_int,
    check_logits_and_targets,
    check_real_above,
    check_token_ids,
)
from attention_lab.layers import EncoderConfig, TransformerEncoder
from attention_lab.masks import padding_mask

__all__ = [
    "Evaluation",
    "TokenClassifier",
    "TokenClassifierConfig",
    "evaluate",
    "pattern_share",
    "token_loss",
    "train",
]


def _check_pad_id(pad_id: int | None) -> None:
    if pad_id is not None:
        check_int(pad_id, "pad_id", minimum=None)


def _check_pair(inputs: torch.Tensor | tuple[torch.Tensor, ...], targets: torch.Tensor) -> int:
    """Require integer ``[N, T]`` inputs (or a tuple of ``[N, *]`` integer tensors) and targets
    with the same number ``N >= 1`` of examples, which is returned."""
    check_token_ids(targets, "targets", rows="N")
    if isinstance(inputs, tuple):
        if not inputs:
            raise ValueError("inputs must be a tensor or a non-empty tuple of tensors, got ()")
        for index, tensor in enumerate(inputs):
            check_token_ids(tensor, f"inputs[{index}]", rows="N")
        sizes = [tensor.shape[0] for tensor in inputs]
        if any(size != targets.shape[0] for size in sizes):
            raise ValueError(
                "every tensor of inputs must have as many examples N as targets, got "
                f"{sizes} and {targets.shape[0]}"
            )
    else:
        check_token_ids(inputs, "inputs", rows="N")
        if inputs.shape != targets.shape:
            raise ValueError(
                "inputs and targets must have the same shape [N, T], got "
                f"{list(inputs.shape)} and {list(targets.shape)}"
            )
    if targets.shape[0] == 0:
        raise ValueError("inputs must hold at least one example, got N = 0")
    return targets.shape[0]


def _attention_mask(token_ids: torch.Tensor, pad_id: int | None) -> torch.Tensor | None:
    """The padding mask ``[B, 1, 1, T]`` of a batch, or ``None`` when nothing is padding."""
    if pad_id is None or not (token_ids == pad_id).any():
        return None
    return padding_mask(token_ids, pad_id)


def _logits(
    model: nn.Module, inputs: torch.Tensor | tuple[torch.Tensor, ...], pad_id: int | None
) -> torch.Tensor:
    """Run ``model`` and return its logits, whether it returns them alone or first in a tuple.

    One tensor is passed with its padding mask, ``model(token_ids, mask)``; a tuple of tensors
    is passed as it is, ``model(*inputs)``, and the model masks its own padding.
    """
    if isinstance(inputs, tuple):
        output = model(*inputs)
    else:
        output = model(inputs, _attention_mask(inputs, pad_id))
    logits = output[0] if isinstance(output, tuple | list) else output
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ValueError(
            "model must return logits of shape [B, T, V] (alone or first in a tuple), got "
            f"{list(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__}"
        )
    return logits


def _rows(
    inputs: torch.Tensor | tuple[torch.Tensor, ...], rows: torch.Tensor
) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The examples ``rows`` of the inputs: of the tensor, or of every tensor of the tuple."""
    if isinstance(inputs, tuple):
        return tuple(tensor[rows] for tensor in inputs)
    return inputs[rows]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenClassifierConfig(EncoderConfig):
    """The settings of a :class:`TokenClassifier`: those of its encoder,
    :class:`~attention_lab.layers.EncoderConfig`, with no dropout by default (a small task
    trained for seconds does not need it).

    Example:
        >>> TokenClassifierConfig(vocab_size=10, d_model=16, num_layers=1, num_heads=2,
        ...                       d_ff=32, max_len=8).dropout
        0.0
    """

    dropout: float = 0.0


class TokenClassifier(nn.Module):
    """A Transformer encoder with a linear head: logits over the vocabulary at every position.

    For sequence-to-sequence tasks whose output has one token per input position, such as
    reversing or shifting a sequence. Every output position sees the whole input through
    self-attention, so any rearrangement of the input can be learned.

    The encoder's token embedding starts at the scale of the positional encoding (see
    :class:`~attention_lab.layers.TransformerEncoder`), which a task about positions needs.

    Args:
        config: A :class:`TokenClassifierConfig`; or the vocabulary size ``V`` (of the inputs
            and the predicted outputs), with its other fields as keyword arguments.
        **options: The fields of :class:`TokenClassifierConfig`, when ``config`` is not one.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range (for example ``d_model`` not divisible by
            ``num_heads``).

    Example:
        >>> model = TokenClassifier(10, d_model=16, num_layers=1, num_heads=2, d_ff=32,
        ...                         max_len=8)
        >>> logits, attentions = model(torch.randint(1, 10, (3, 8)))
        >>> logits.shape, attentions[0].shape
        (torch.Size([3, 8, 10]), torch.Size([3, 2, 8, 8]))
    """

    def __init__(
        self, config: TokenClassifierConfig | int | None = None, /, **options: Any
    ) -> None:
        super().__init__()
        self.config = config = TokenClassifierConfig.from_arguments(config, options)
        self.encoder = TransformerEncoder(config)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(
        self, token_ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Predict a token at every position.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``.
            mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, T, T]``, ``True`` =
                may attend, e.g. ``padding_mask(token_ids)``.

        Returns:
            A pair ``(logits, attentions)``: shape ``[B, T, V]``, and the encoder's list of
            ``[B, H, T, T]`` attention weights, one per layer.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor or ``mask`` is not bool.
            ValueError: If ``token_ids`` is not 2-D or holds an id outside the vocabulary.
        """
        hidden, attentions = self.encoder(token_ids, mask)  # [B, T, D]
        return self.head(hidden), attentions  # [B, T, V]


def token_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int | None = 0
) -> torch.Tensor:
    """Mean cross-entropy over the positions whose target is not padding.

    Args:
        logits: Shape ``[B, T, V]``, a floating dtype: unnormalised scores over the vocabulary.
        targets: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``.
        pad_id: Target id that is skipped (it contributes neither to the sum nor to the count),
            or ``None`` to count every position.

    Returns:
        A scalar tensor: the mean of ``-log softmax(logits)[b, t, targets[b, t]]`` over the
        counted positions. ``NaN`` if no position is counted.

    Raises:
        TypeError: If ``logits`` is not a floating tensor, ``targets`` not an integer tensor, or
            ``pad_id`` not an int.
        ValueError: If the shapes do not fit together, or a counted target is outside
            ``[0, V)``.
    """
    check_logits_and_targets(logits, targets)
    _check_pad_id(pad_id)
    vocab_size = logits.shape[-1]
    # Padding targets are skipped, so they may lie outside the vocabulary (e.g. -100).
    counted = targets if pad_id is None else targets[targets != pad_id]  # [counted]
    check_id_range(counted, "targets", vocab_size, "V")
    # cross_entropy wants the classes in dimension 1; flatten the positions instead.
    return F.cross_entropy(
        logits.reshape(-1, vocab_size),  # [B*T, V]
        targets.reshape(-1),  # [B*T]
        ignore_index=-100 if pad_id is None else pad_id,
    )


def train(
    model: nn.Module,
    inputs: torch.Tensor | tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = None,
    pad_id: int | None = 0,
    seed: int = 0,
    callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Train ``model`` to map ``inputs`` to ``targets`` with AdamW, one mini-batch per step.

    Each epoch visits the examples in a new random order, drawn from a ``torch.Generator``
    seeded with ``seed``; dropout draws from the global generator, which is seeded with
    ``seed`` for the duration of the call and then restored. So the same model, data and seed
    give the same losses and the same trained weights, and the caller's random state is left
    as it was. Inputs equal to ``pad_id`` are masked out of attention, targets equal to it out
    of the loss. The model is in training mode during the loop and is left in the mode it was
    in before.

    Args:
        model: Called as ``model(token_ids [B, T], mask)``, where ``mask`` is ``None`` or the
            ``[B, 1, 1, T]`` padding mask; returns logits ``[B, T, V]``, alone or first in a
            tuple (as :class:`TokenClassifier` does). When ``inputs`` is a tuple, called as
            ``model(*batch)`` with the same rows of every tensor of the tuple, and masks its
            own padding (as :class:`~attention_lab.seq2seq.Seq2SeqTransformer` does with
            ``(source, decoder_input)``).
        inputs: Shape ``[N, T]``, an integer dtype: the training inputs; or a tuple of integer
            tensors ``[N, *]``, batched together.
        targets: Shape ``[N, T]``, an integer dtype: the token to predict at every position
            (the ``T`` of the logits, which with a tuple of inputs may differ from theirs).
        steps: Number of optimisation steps, a positive int.
        batch_size: Examples per step, a positive int at most ``N``.
        lr: AdamW learning rate, a positive float.
        weight_decay: AdamW's decoupled weight decay, a float >= 0.
        max_grad_norm: If given, gradients are clipped to this total norm before each step.
        pad_id: Padding id of ``inputs`` and ``targets``, or ``None`` if there is no padding.
        seed: Seed of the batch order and of dropout, a non-negative int.
        callback: If given, called after every step as ``callback(step, loss)``, with ``step``
            counting from 0; for example to print progress. ``train`` itself prints nothing.

    Returns:
        The training loss of every step, ``steps`` Python floats.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range, ``inputs`` and ``targets`` differ in
            shape (a tuple's tensors: in the number of examples), or ``batch_size`` exceeds the
            number of examples.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    num_examples = _check_pair(inputs, targets)
    check_int(steps, "steps")
    check_int(batch_size, "batch_size")
    if batch_size > num_examples:
        raise ValueError(
            f"batch_size={batch_size} is larger than the number of examples N={num_examples}"
        )
    check_real_above(lr, "lr", 0.0)
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, numbers.Real):
        raise TypeError(f"weight_decay must be a real number >= 0, got {weight_decay!r}")
    if not 0 <= weight_decay < math.inf:
        raise ValueError(f"weight_decay must be a finite real number >= 0, got {weight_decay}")
    if max_grad_norm is not None:
        check_real_above(max_grad_norm, "max_grad_norm", 0.0)
    _check_pad_id(pad_id)
    check_int(seed, "seed", minimum=0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")

    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters")
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay)
    order_generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(num_examples, generator=order_generator)  # [N]
    cursor = 0
    history = []
    was_training = model.training
    model.train()
    try:
        # fork_rng restores the global CPU generator afterwards; seeding it fixes dropout.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for step in range(steps):
                if cursor + batch_size > num_examples:  # a new epoch, in a new order
                    order = torch.randperm(num_examples, generator=order_generator)  # [N]
                    cursor = 0
                batch = order[cursor : cursor + batch_size]  # [B]
                cursor += batch_size
                logits = _logits(model, _rows(inputs, batch), pad_id)  # [B, T, V]
                loss = token_loss(logits, targets[batch], pad_id=pad_id)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(parameters, max_grad_norm)
                optimizer.step()
                history.append(loss.item())
                if callback is not None:
                    callback(step, history[-1])
    finally:
        model.train(was_training)
    return history


class Evaluation(NamedTuple):
    """What :func:`evaluate` measures on a data set, as three named floats.

    - ``loss``: mean cross-entropy over the non-padding target positions.
    - ``token_accuracy``: share of non-padding target positions predicted exactly, in
      ``[0, 1]``.
    - ``sequence_accuracy``: share of examples whose every non-padding position is right.
    """

    loss: float
    token_accuracy: float
    sequence_accuracy: float


def evaluate(
    model: nn.Module,
    inputs: torch.Tensor | tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    *,
    pad_id: int | None = 0,
) -> Evaluation:
    """Measure ``model`` on a data set in evaluation mode (no dropout), without gradients.

    The prediction at a position is the id with the largest logit. The model is left in the
    mode it was in before.

    Args:
        model: As for :func:`train`.
        inputs: Shape ``[N, T]``, an integer dtype; or a tuple of integer tensors ``[N, *]``
            passed to the model together, as for :func:`train`.
        targets: Shape ``[N, T]``, an integer dtype.
        pad_id: Padding id, masked out of attention and left out of every measure; ``None``
            counts every position.

    Returns:
        An :class:`Evaluation` of plain Python floats.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If ``inputs`` and ``targets`` differ in shape or are empty, or if every
            target is padding.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_pair(inputs, targets)
    _check_pad_id(pad_id)
    counted = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    if not counted.any():
        raise ValueError(f"every target is padding (pad_id={pad_id}): nothing to evaluate")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = _logits(model, inputs, pad_id)  # [N, T, V]
    finally:
        model.train(was_training)
    loss = token_loss(logits, targets, pad_id=pad_id).item()
    correct = (logits.argmax(dim=-1) == targets) | ~counted  # [N, T]: padding counts as right
    token_accuracy = ((correct & counted).sum() / counted.sum()).item()
    sequence_accuracy = correct.all(dim=-1).float().mean().item()
    return Evaluation(loss, token_accuracy, sequence_accuracy)


def pattern_share(weights: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """The share of each query's attention that falls on the keys a pattern marks.

    A head that does exactly what the pattern asks scores 1; a head that spreads its weight
    evenly over ``Tk`` keys scores ``k / Tk`` for a row in which the pattern marks ``k`` keys.

    Args:
        weights: Attention weights of shape ``[..., Tq, Tk]``, rows summing to 1, such as the
            ``[B, H, T, T]`` weights of a layer.
        pattern: ``torch.bool`` of shape broadcastable to ``[..., Tq, Tk]``, ``True`` on the
            (query, key) pairs the task needs, e.g. ``torch.eye(T).flip(-1).bool()`` for
            reversal.

    Returns:
        Shape ``[..., Tq]``: for every query, the sum of its weights on the marked keys.

    Raises:
        TypeError: If ``weights`` is not a floating tensor or ``pattern`` not a bool tensor.
        ValueError: If the shapes do not broadcast to the shape of ``weights``.

    Example:
        >>> uniform = torch.full((4, 4), 0.25)
        >>> pattern_share(uniform, torch.eye(4).flip(-1).bool())
        tensor([0.2500, 0.2500, 0.2500, 0.2500])
    """
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        kind = weights.dtype if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise TypeError(f"weights must be a floating torch.Tensor, got {kind}")
    if weights.ndim < 2:
        raise ValueError(f"weights must have shape [..., Tq, Tk], got {list(weights.shape)}")
    if not isinstance(pattern, torch.Tensor) or pattern.dtype != torch.bool:
        kind = pattern.dtype if isinstance(pattern, torch.Tensor) else type(pattern).__name__
        raise TypeError(
            f"pattern must be a torch.bool tensor, True on the expected (query, key) pairs, "
            f"got {kind}; convert a 0/1 pattern with pattern.bool()"
        )
    try:
        fits = torch.broadcast_shapes(pattern.shape, weights.shape) == weights.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"pattern of shape {list(pattern.shape)} does not broadcast to the shape of "
            f"weights {list(weights.shape)}"
        )
    return (weights * pattern).sum(dim=-1)  # [..., Tq]
