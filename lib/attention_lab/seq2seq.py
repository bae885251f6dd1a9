"""An encoder–decoder Transformer, a toy translation task with a known alignment, greedy decoding.

The decoder reads the source sentence through cross-attention: each target position's query
is compared with the keys of every source position. On a task where we know which source
position each target token comes from, the cross-attention weights can be checked against
that alignment:

- :func:`reversal_translation_task`: source sentences of varying length, padded; the target
  is the source reversed and moved into another vocabulary, so target position ``j`` of a
  sentence of length ``L`` is a translation of source position ``L - 1 - j``.
- :class:`Seq2SeqTransformer`: the library's :class:`~attention_lab.layers.TransformerEncoder`
  and a stack of :class:`~attention_lab.layers.DecoderLayer`, returning the logits and every
  layer's cross-attention weights, set up by a :class:`Seq2SeqConfig`. It builds its own masks
  from ``pad_id``.
- :func:`greedy_decode`: write a target one token at a time, each the most likely next token.

Train it with :func:`attention_lab.training.train`, passing the inputs as a pair
``(source, decoder_input)``. Ids: ``pad_id`` 0 in both vocabularies; ``bos_id`` 1 and
``eos_id`` 2 in the target vocabulary by default.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from attention_lab._validation import ModelConfig, check_id_range, check_int, check_token_ids
from attention_lab.layers import (
    DecoderLayer,
    EncoderConfig,
    TransformerEncoder,
    embed_tokens,
    token_embedding,
)
from attention_lab.masks import causal_mask, combine_masks, padding_mask
from attention_lab.positional import SinusoidalPositionalEncoding

__all__ = [
    "Seq2SeqConfig",
    "Seq2SeqOutput",
    "Seq2SeqTransformer",
    "TranslationTask",
    "greedy_decode",
    "reversal_translation_task",
]


class TranslationTask(NamedTuple):
    """A toy translation data set (see :func:`reversal_translation_task`).

    - ``source``: ``[N, S]`` source ids, padded with 0 at the end.
    - ``decoder_input``: ``[N, S + 1]``, ``bos_id`` followed by ``target`` without its last
      position (teacher forcing: the decoder reads the right answer so far).
    - ``target``: ``[N, S + 1]``, the translation followed by ``eos_id``, padded with 0.
    - ``alignment``: ``[N, S + 1, S]`` bool, ``True`` at (target position, source position)
      where the target token is the translation of that source token; the ``eos_id`` and
      padding rows are all ``False``.
    """

    source: torch.Tensor
    decoder_input: torch.Tensor
    target: torch.Tensor
    alignment: torch.Tensor


def reversal_translation_task(
    num_sentences: int,
    source_vocab_size: int,
    min_len: int,
    max_len: int,
    *,
    seed: int | None = None,
    bos_id: int = 1,
    eos_id: int = 2,
) -> TranslationTask:
    """Make a translation task whose alignment is known: reverse, and change vocabulary.

    Source ids are drawn uniformly from ``[1, source_vocab_size)`` (0 is padding), lengths
    ``L`` uniformly from ``[min_len, max_len]``. Source id ``k`` translates to target id
    ``k + 2``, above ``bos_id`` and ``eos_id``, so the target vocabulary has
    ``source_vocab_size + 2`` ids. The translation is written in reverse order: target
    position ``j < L`` aligns with source position ``L - 1 - j``.

    Args:
        num_sentences: Number of examples ``N``, a non-negative int.
        source_vocab_size: Source ids including the padding id 0, an int >= 2.
        min_len: Shortest sentence, a positive int.
        max_len: Longest sentence ``S``, an int >= ``min_len``.
        seed: Seed of a local ``numpy.random.Generator``; ``None`` draws fresh randomness.
        bos_id: Target id that starts every decoder input; 1 or 2.
        eos_id: Target id that ends every target; 1 or 2, not ``bos_id``.

    Returns:
        A :class:`TranslationTask` of ``torch.int64`` tensors (``alignment`` bool).

    Raises:
        TypeError: If an argument is not an int.
        ValueError: If an argument is out of range.

    Example:
        >>> task = reversal_translation_task(1, 10, 3, 4, seed=1)
        >>> task.source, task.target
        (tensor([[5, 7, 9, 0]]), tensor([[11,  9,  7,  2,  0]]))
        >>> task.alignment[0, :, :3].int()
        tensor([[0, 0, 1],
                [0, 1, 0],
                [1, 0, 0],
                [0, 0, 0],
                [0, 0, 0]], dtype=torch.int32)
    """
    check_int(num_sentences, "num_sentences", minimum=0)
    check_int(source_vocab_size, "source_vocab_size", minimum=2)
    check_int(min_len, "min_len")
    check_int(max_len, "max_len", minimum=min_len)
    check_int(bos_id, "bos_id")
    check_int(eos_id, "eos_id")
    if {bos_id, eos_id} != {1, 2}:
        raise ValueError(f"bos_id and eos_id must be 1 and 2 in some order, got {bos_id}, {eos_id}")
    if seed is not None:
        check_int(seed, "seed", minimum=0)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=num_sentences)  # [N]
    ids = rng.integers(1, source_vocab_size, size=(num_sentences, max_len))  # [N, S]
    positions = np.arange(max_len)  # [S]
    real = positions[None, :] < lengths[:, None]  # [N, S]
    source = np.where(real, ids, 0)  # [N, S]
    target = np.zeros((num_sentences, max_len + 1), dtype=np.int64)  # [N, S + 1]
    alignment = np.zeros((num_sentences, max_len + 1, max_len), dtype=bool)  # [N, S + 1, S]
    for n, length in enumerate(lengths):
        target[n, :length] = source[n, :length][::-1] + 2
        target[n, length] = eos_id
        alignment[n, np.arange(length), length - 1 - np.arange(length)] = True
    decoder_input = np.concatenate(
        [np.full((num_sentences, 1), bos_id), target[:, :-1]], axis=1
    )  # [N, S + 1]
    return TranslationTask(
        torch.from_numpy(source.astype(np.int64)),
        torch.from_numpy(decoder_input.astype(np.int64)),
        torch.from_numpy(target),
        torch.from_numpy(alignment),
    )


class Seq2SeqOutput(NamedTuple):
    """What :class:`Seq2SeqTransformer` returns (a tuple: the logits come first).

    - ``logits``: ``[B, T, V]`` scores for the next target token at every target position.
    - ``cross_attentions``: one ``[B, H, T, S]`` tensor per decoder layer: target positions ×
      source positions.
    - ``decoder_attentions``: one ``[B, H, T, T]`` tensor per decoder layer (causal).
    - ``encoder_attentions``: one ``[B, H, S, S]`` tensor per encoder layer.
    """

    logits: torch.Tensor
    cross_attentions: list[torch.Tensor]
    decoder_attentions: list[torch.Tensor]
    encoder_attentions: list[torch.Tensor]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seq2SeqConfig(ModelConfig):
    """The settings of a :class:`Seq2SeqTransformer`, checked when it is created.

    Args:
        source_vocab_size: Number of source ids ``Vs``, a positive int.
        target_vocab_size: Number of target ids ``V``, including ``pad_id``, ``bos_id`` and
            ``eos_id``.
        d_model: Model width ``D``, divisible by ``num_heads``.
        num_layers: Encoder layers, a positive int.
        num_heads: Attention heads ``H`` of every attention.
        d_ff: Hidden width of each feed-forward network.
        max_len: Positions whose encoding is precomputed.
        num_decoder_layers: Decoder layers; ``num_layers`` when ``None``.
        dropout: Dropout probability everywhere, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: ``False`` for post-norm layers, ``True`` for pre-norm (each stack then
            ends with a LayerNorm).
        pad_id: Padding id of source and target.
        bos_id: Target id that starts decoding.
        eos_id: Target id that ends a sentence.

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range, or the three special ids are not distinct ids
            of the target vocabulary.

    Example:
        >>> Seq2SeqConfig(source_vocab_size=10, target_vocab_size=12, d_model=16, num_layers=2,
        ...               num_heads=2, d_ff=32, max_len=8).num_decoder_layers
        2
    """

    source_vocab_size: int
    target_vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    max_len: int
    num_decoder_layers: int | None = None
    dropout: float = 0.0
    activation: str = "relu"
    norm_first: bool = False
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self) -> None:
        if self.num_decoder_layers is None:
            # A frozen dataclass: fill in the default the way dataclasses document it.
            object.__setattr__(self, "num_decoder_layers", self.num_layers)
        super().__post_init__()
        special = (("pad_id", self.pad_id), ("bos_id", self.bos_id), ("eos_id", self.eos_id))
        for name, value in special:
            check_int(value, name, minimum=0)
            if value >= self.target_vocab_size:
                raise ValueError(
                    f"{name}={value} is not an id of the target vocabulary "
                    f"(target_vocab_size={self.target_vocab_size})"
                )
        if len({self.pad_id, self.bos_id, self.eos_id}) != 3:
            raise ValueError(
                f"pad_id, bos_id and eos_id must differ, got {self.pad_id}, {self.bos_id}, "
                f"{self.eos_id}"
            )


class Seq2SeqTransformer(nn.Module):
    """An encoder–decoder Transformer: the source is encoded once, the decoder writes the target.

    The encoder is a :class:`~attention_lab.layers.TransformerEncoder`. The decoder embeds the
    target ids the same way (embedding × √D, entries drawn from ``N(0, 1/D)``, plus the
    sinusoidal encoding), runs ``num_decoder_layers`` :class:`~attention_lab.layers.DecoderLayer`
    blocks over it and the encoder's output, and a linear head gives the logits. Masks, built
    from ``pad_id`` in the library's polarity (``True`` = may attend):

    - encoder self-attention and cross-attention: the source padding mask ``[B, 1, 1, S]``, so
      no query ever attends to a padded source position;
    - decoder self-attention: causal & target padding, ``[B, 1, T, T]``.

    Args:
        config: A :class:`Seq2SeqConfig`; or the source vocabulary size, with the other fields
            of :class:`Seq2SeqConfig` as keyword arguments.
        **options: The fields of :class:`Seq2SeqConfig`, when ``config`` is not one.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range, or the three special ids are not distinct
            ids of the target vocabulary.

    Example:
        >>> model = Seq2SeqTransformer(10, target_vocab_size=12, d_model=16, num_layers=1,
        ...                            num_heads=2, d_ff=32, max_len=8)
        >>> out = model(torch.randint(1, 10, (3, 6)), torch.randint(1, 12, (3, 5)))
        >>> out.logits.shape, out.cross_attentions[0].shape
        (torch.Size([3, 5, 12]), torch.Size([3, 2, 5, 6]))
    """

    def __init__(self, config: Seq2SeqConfig | int | None = None, /, **options: Any) -> None:
        super().__init__()
        self.config = config = Seq2SeqConfig.from_arguments(config, options)
        # What every block of both stacks shares.
        block = {
            "dropout": config.dropout,
            "activation": config.activation,
            "norm_first": config.norm_first,
        }
        sizes = {"d_model": config.d_model, "num_heads": config.num_heads, "d_ff": config.d_ff}
        self.encoder = TransformerEncoder(
            EncoderConfig(
                vocab_size=config.source_vocab_size,
                num_layers=config.num_layers,
                max_len=config.max_len,
                **sizes,
                **block,
            )
        )
        self.embedding = token_embedding(config.target_vocab_size, config.d_model)
        self.positional = SinusoidalPositionalEncoding(
            config.d_model, config.max_len, dropout=config.dropout
        )
        self.layers = nn.ModuleList(
            DecoderLayer(**sizes, **block) for _ in range(config.num_decoder_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm_first else None
        self.head = nn.Linear(config.d_model, config.target_vocab_size)

    def encode(self, source_ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Encode the source once; :meth:`decode` reads the result.

        Args:
            source_ids: Shape ``[B, S]``, an integer dtype, ids in ``[0, Vs)``.

        Returns:
            A pair ``(memory, attentions)``: ``[B, S, D]`` and one ``[B, H, S, S]`` tensor of
            encoder self-attention weights per layer.

        Raises:
            TypeError: If ``source_ids`` is not an integer tensor.
            ValueError: If ``source_ids`` is not 2-D or holds an id outside the vocabulary.
        """
        check_token_ids(source_ids, "source_ids")
        return self.encoder(source_ids, padding_mask(source_ids, self.config.pad_id))

    def decode(
        self, target_ids: torch.Tensor, memory: torch.Tensor, source_ids: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Run the decoder over the target so far, reading the encoded source.

        Args:
            target_ids: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``: the decoder's
                input, usually ``bos_id`` followed by the target so far.
            memory: Shape ``[B, S, D]``, from :meth:`encode`.
            source_ids: Shape ``[B, S]``: the source, for its padding mask.

        Returns:
            A triple ``(logits, cross_attentions, decoder_attentions)``: ``[B, T, V]``, and
            per decoder layer ``[B, H, T, S]`` and ``[B, H, T, T]`` weights.

        Raises:
            TypeError: If the ids are not integer tensors.
            ValueError: If the shapes do not fit together or an id is outside the vocabulary.
        """
        self._check_pair(source_ids, target_ids)
        if memory.shape[:2] != source_ids.shape:
            raise ValueError(
                f"memory must have shape [B, S, D] with [B, S] = {list(source_ids.shape)}, the "
                f"shape of source_ids, got {list(memory.shape)}"
            )
        return self._decode(target_ids, memory, padding_mask(source_ids, self.config.pad_id))

    def _decode(
        self, target_ids: torch.Tensor, memory: torch.Tensor, source_keep: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """:meth:`decode` on checked inputs, given the source padding mask ``[B, 1, 1, S]``."""
        length = target_ids.shape[1]
        self_mask = combine_masks(
            causal_mask(length, device=target_ids.device),
            padding_mask(target_ids, self.config.pad_id),
        )  # [B, 1, T, T]
        x = embed_tokens(self.embedding, target_ids)  # [B, T, D], embeddings × sqrt(D)
        x = self.positional(x)  # [B, T, D]
        cross_attentions, decoder_attentions = [], []
        for layer in self.layers:
            x, self_weights, cross_weights = layer(
                x, memory, self_mask=self_mask, memory_mask=source_keep
            )
            decoder_attentions.append(self_weights)
            cross_attentions.append(cross_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.head(x), cross_attentions, decoder_attentions  # logits [B, T, V]

    def forward(self, source_ids: torch.Tensor, target_ids: torch.Tensor) -> Seq2SeqOutput:
        """Score the next target token at every target position (teacher forcing).

        Args:
            source_ids: Shape ``[B, S]``, an integer dtype, ids in ``[0, Vs)``, padded with
                ``pad_id`` at the end.
            target_ids: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``: the decoder's
                input, ``bos_id`` followed by the target without its last token.

        Returns:
            A :class:`Seq2SeqOutput` ``(logits, cross_attentions, decoder_attentions,
            encoder_attentions)``; ``logits[:, t]`` depends on ``target_ids[:, : t + 1]`` only.

        Raises:
            TypeError: If the ids are not integer tensors.
            ValueError: If the ids are not 2-D, differ in batch size, or hold an id outside
                their vocabulary.
        """
        self._check_pair(source_ids, target_ids)
        source_keep = padding_mask(source_ids, self.config.pad_id)  # [B, 1, 1, S]
        memory, encoder_attentions = self.encoder(source_ids, source_keep)  # [B, S, D]
        logits, cross, decoder = self._decode(target_ids, memory, source_keep)
        return Seq2SeqOutput(logits, cross, decoder, encoder_attentions)

    def _check_pair(self, source_ids: torch.Tensor, target_ids: torch.Tensor) -> None:
        check_token_ids(source_ids, "source_ids")
        check_token_ids(target_ids, "target_ids")
        if source_ids.shape[0] != target_ids.shape[0]:
            raise ValueError(
                "source_ids and target_ids must have the same batch size B, got "
                f"{source_ids.shape[0]} and {target_ids.shape[0]}"
            )
        config = self.config
        check_id_range(source_ids, "source_ids", config.source_vocab_size, "source_vocab_size")
        check_id_range(target_ids, "target_ids", config.target_vocab_size, "target_vocab_size")


def greedy_decode(model: Seq2SeqTransformer, source_ids: torch.Tensor, steps: int) -> torch.Tensor:
    """Translate by writing one token at a time, each the most likely after the ones before.

    The source is encoded, and its padding mask built, once. At every step the decoder runs
    over ``bos_id`` and the tokens written so far, and the argmax of the last position's logits
    is appended. A sentence that has written ``eos_id`` is finished: its later positions are
    ``pad_id``. The model runs in evaluation mode without gradients and is left in the mode it
    was in.

    Args:
        model: A :class:`Seq2SeqTransformer`.
        source_ids: Shape ``[B, S]``, an integer dtype, padded with ``model.config.pad_id``.
        steps: Tokens to write, a positive int (every sentence stops after ``steps``).

    Returns:
        Shape ``[B, steps]``, ``torch.int64``: the written tokens, without ``bos_id``.

    Raises:
        TypeError: If ``model`` is not a ``Seq2SeqTransformer``, ``source_ids`` not an integer
            tensor or ``steps`` not an int.
        ValueError: If ``source_ids`` is not 2-D or ``steps`` is not positive.

    Example:
        >>> model = Seq2SeqTransformer(10, target_vocab_size=12, d_model=16, num_layers=1,
        ...                            num_heads=2, d_ff=32, max_len=8)
        >>> greedy_decode(model, torch.randint(1, 10, (3, 6)), steps=7).shape
        torch.Size([3, 7])
    """
    if not isinstance(model, Seq2SeqTransformer):
        raise TypeError(f"model must be a Seq2SeqTransformer, got {type(model).__name__}")
    check_token_ids(source_ids, "source_ids")
    check_int(steps, "steps")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            source_keep = padding_mask(source_ids, model.config.pad_id)  # [B, 1, 1, S]
            memory, _ = model.encoder(source_ids, source_keep)  # [B, S, D]
            batch = source_ids.shape[0]
            written = torch.full((batch, 1), model.config.bos_id, dtype=torch.long)  # [B, 1]
            finished = torch.zeros(batch, dtype=torch.bool)  # [B]
            for _ in range(steps):
                logits, _, _ = model._decode(written, memory, source_keep)  # [B, t, V]
                token = logits[:, -1].argmax(dim=-1)  # [B]
                token = token.masked_fill(finished, model.config.pad_id)
                finished |= token == model.config.eos_id
                written = torch.cat([written, token[:, None]], dim=1)  # [B, t + 1]
    finally:
        model.train(was_training)
    return written[:, 1:]  # [B, steps]
