"""A BERT encoder built from this library's parts, and mean pooling into sentence vectors.

BERT (and all-MiniLM-L6-v2, the book's pretrained model) is an encoder: :class:`BertEmbedding`
(word + learned position + token type embeddings, then LayerNorm) followed by post-norm
:class:`~attention_lab.layers.EncoderLayer` blocks with GELU. :class:`BertEncoder` assembles
them, its sizes set by a :class:`BertEncoderConfig`; :func:`key_mask` turns a tokenizer's 1/0
``attention_mask`` into the library's boolean key mask; :func:`mean_pool` averages the hidden
states of the real tokens, as sentence-transformers does.

Pure PyTorch: nothing here imports ``transformers``. Loading MiniLM's trained weights into a
:class:`BertEncoder` is :func:`attention_lab.pretrained.encoder_from_minilm`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from attention_lab._validation import (
    ModelConfig,
    check_id_range,
    check_int,
    check_probability,
    check_real_above,
    check_token_ids,
)
from attention_lab.layers import encoder_layers
from attention_lab.masks import padding_mask

__all__ = ["BertEncoderConfig", "BertEmbedding", "BertEncoder", "key_mask", "mean_pool"]


class BertEmbedding(nn.Module):
    """BERT's input embedding: word + learned position + token type, then LayerNorm and dropout.

    Position ``t`` of every sequence gets row ``t`` of a learned ``[max_len, D]`` table (the
    same idea as :class:`~attention_lab.positional.LearnedPositionalEmbedding`); the token type
    (segment) table tells the first sentence of a pair (type 0) from the second (type 1).

    Args:
        vocab_size: Number of token ids, a positive int.
        d_model: Model width ``D``, a positive int.
        max_len: Number of learned positions, a positive int (512 for BERT).
        type_vocab_size: Number of token types, a positive int (2 for BERT).
        layer_norm_eps: The LayerNorm's ``eps``, a positive float (BERT uses ``1e-12``).
        dropout: Dropout probability after the LayerNorm, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> embed = BertEmbedding(100, d_model=8, max_len=16)
        >>> embed(torch.tensor([[2, 5, 7]])).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int,
        type_vocab_size: int = 2,
        *,
        layer_norm_eps: float = 1e-12,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        for value, name in (
            (vocab_size, "vocab_size"),
            (d_model, "d_model"),
            (max_len, "max_len"),
            (type_vocab_size, "type_vocab_size"),
        ):
            check_int(value, name)
        check_real_above(layer_norm_eps, "layer_norm_eps", 0.0)
        check_probability(dropout, "dropout")
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.type_vocab_size = type_vocab_size
        self.word = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.token_type = nn.Embedding(type_vocab_size, d_model)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Embed a batch of token ids.

        Args:
            input_ids: Shape ``[B, T]``, an integer dtype, values in ``[0, vocab_size)``,
                ``T <= max_len``.
            token_type_ids: Optional, shape ``[B, T]``, an integer dtype, values in
                ``[0, type_vocab_size)``; all zeros (one sentence) when ``None``.

        Returns:
            Shape ``[B, T, D]``.

        Raises:
            TypeError: If an argument is not an integer tensor.
            ValueError: If a shape or an id is out of range.
        """
        check_token_ids(input_ids, "input_ids")
        check_id_range(input_ids, "input_ids", self.vocab_size, "vocab_size")
        if input_ids.shape[1] > self.max_len:
            raise ValueError(
                f"input_ids may hold at most max_len={self.max_len} positions, "
                f"got {input_ids.shape[1]}"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        check_token_ids(token_type_ids, "token_type_ids", like=input_ids)
        check_id_range(token_type_ids, "token_type_ids", self.type_vocab_size, "type_vocab_size")
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # [T]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))  # [B, T, D]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BertEncoderConfig(ModelConfig):
    """The settings of a :class:`BertEncoder`, checked when it is created.

    Args:
        vocab_size: Number of token ids, a positive int.
        d_model: Model width ``D``, divisible by ``num_heads``.
        num_layers: Number of encoder layers, a positive int.
        num_heads: Heads per layer ``H``, a positive int.
        d_ff: Hidden width of each feed-forward network.
        max_len: Number of learned positions.
        type_vocab_size: Number of token types.
        layer_norm_eps: The ``eps`` of every LayerNorm (BERT uses ``1e-12``).
        dropout: Dropout probability everywhere, in ``[0, 1)`` (inactive in ``eval()`` mode).

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range.

    Example:
        >>> BertEncoderConfig(vocab_size=100, d_model=16, num_layers=2, num_heads=4, d_ff=32,
        ...                   max_len=20).type_vocab_size
        2
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    max_len: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1


class BertEncoder(nn.Module):
    """A BERT-style encoder built from this library's parts: :class:`BertEmbedding`, then
    ``num_layers`` post-norm :class:`~attention_lab.layers.EncoderLayer` blocks with GELU.

    This is the architecture of all-MiniLM-L6-v2 (and of BERT);
    :func:`~attention_lab.pretrained.encoder_from_minilm` builds one and loads MiniLM's trained
    weights into it. The attention inside is
    :class:`~attention_lab.attention.MultiHeadAttention`, the class the earlier chapters build.

    Args:
        config: A :class:`BertEncoderConfig`; or the vocabulary size, with the other fields of
            :class:`BertEncoderConfig` as keyword arguments.
        **options: The fields of :class:`BertEncoderConfig`, when ``config`` is not one.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> encoder = BertEncoder(100, d_model=16, num_layers=2, num_heads=4, d_ff=32,
        ...                       max_len=20).eval()
        >>> hidden, attentions = encoder(torch.tensor([[2, 5, 7, 0]]),
        ...                              attention_mask=torch.tensor([[1, 1, 1, 0]]))
        >>> hidden.shape, len(attentions), attentions[0].shape
        (torch.Size([1, 4, 16]), 2, torch.Size([1, 4, 4, 4]))
    """

    def __init__(self, config: BertEncoderConfig | int | None = None, /, **options: Any) -> None:
        super().__init__()
        self.config = config = BertEncoderConfig.from_arguments(config, options)
        self.embedding = BertEmbedding(
            config.vocab_size,
            config.d_model,
            config.max_len,
            config.type_vocab_size,
            layer_norm_eps=config.layer_norm_eps,
            dropout=config.dropout,
        )
        self.layers = encoder_layers(
            config, activation="gelu", norm_first=False, layer_norm_eps=config.layer_norm_eps
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Encode a batch of token ids, as a ``transformers`` BERT model is called.

        Args:
            input_ids: Shape ``[B, T]``, an integer dtype: the tokenizer's ``input_ids``.
            attention_mask: Optional, shape ``[B, T]``: the tokenizer's ``attention_mask``,
                1 for a real token and 0 for padding (a ``torch.bool`` tensor with ``True`` for
                real tokens is accepted too). It becomes the library's key mask,
                ``True`` = may attend, of shape ``[B, 1, 1, T]``. ``None`` means no padding.
            token_type_ids: Optional, shape ``[B, T]``: the tokenizer's ``token_type_ids``.

        Returns:
            A pair ``(hidden_states, attentions)``: the last layer's output, shape
            ``[B, T, D]``, and a list with one ``[B, H, T, T]`` tensor of attention weights per
            layer. A padding position's own row is computed (it attends to the real tokens)
            but nothing attends to it.

        Raises:
            TypeError: If an argument is not a tensor of the expected dtype.
            ValueError: If a shape or a value is out of range.
        """
        x = self.embedding(input_ids, token_type_ids)  # [B, T, D]
        mask = None if attention_mask is None else key_mask(attention_mask, like=input_ids)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask)
            attentions.append(weights)
        return x, attentions


def key_mask(
    attention_mask: torch.Tensor, like: torch.Tensor | None = None, *, like_name: str = "input_ids"
) -> torch.Tensor:
    """Turn a tokenizer's 1/0 ``attention_mask`` into the library's boolean key mask.

    Tokenizers mark real tokens with 1 and padding with 0, so ``attention_mask`` plays the part
    of the token ids in :func:`~attention_lab.masks.padding_mask` with ``pad_id=0``.

    Args:
        attention_mask: Shape ``[B, T]``, integer values in ``{0, 1}`` (1 = real token) or
            ``torch.bool`` (``True`` = real token).
        like: Optional ``[B, T]`` tensor (the ``input_ids``) whose shape it must have.
        like_name: What ``like`` is, for the error message.

    Returns:
        Shape ``[B, 1, 1, T]``, dtype ``torch.bool``: ``True`` where a key may be attended to.

    Raises:
        TypeError: If ``attention_mask`` is not an integer or bool tensor.
        ValueError: If it is not ``[B, T]`` (or not the shape of ``like``) or holds a value
            other than 0 and 1.

    Example:
        >>> key_mask(torch.tensor([[1, 1, 0]])).flatten().tolist()
        [True, True, False]
    """
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dtype == torch.bool:
        attention_mask = attention_mask.long()
    check_token_ids(attention_mask, "attention_mask", like=like, like_name=like_name)
    check_id_range(attention_mask, "attention_mask", 2)
    return padding_mask(attention_mask, pad_id=0)  # [B, 1, 1, T]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average each sequence's token vectors over its real tokens, skipping the padding.

    Args:
        hidden: Shape ``[B, T, D]``, a floating dtype: an encoder's last hidden states.
        attention_mask: Shape ``[B, T]``: the tokenizer's mask, 1 (or ``True``) for a real
            token and 0 (or ``False``) for padding.

    Returns:
        Shape ``[B, D]``: ``sum_t mask[b, t] * hidden[b, t] / sum_t mask[b, t]``. A sequence
        with no real token gets zeros (its count is clamped to ``1e-9``, as in
        sentence-transformers, instead of dividing by zero).

    Raises:
        TypeError: If ``hidden`` is not a floating tensor or ``attention_mask`` is not an
            integer or bool tensor.
        ValueError: If the shapes do not fit or the mask holds a value other than 0 and 1.

    Example:
        >>> hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
        >>> mean_pool(hidden, torch.tensor([[1, 1, 0]]))
        tensor([[2., 3.]])
    """
    if not isinstance(hidden, torch.Tensor):
        raise TypeError(f"hidden must be a torch.Tensor, got {type(hidden).__name__}")
    if not hidden.is_floating_point():
        raise TypeError(f"hidden must have a floating dtype, got {hidden.dtype}")
    if hidden.ndim != 3:
        raise ValueError(f"hidden must have shape [B, T, D], got {list(hidden.shape)}")
    mask = key_mask(attention_mask, like=hidden[..., 0], like_name="hidden's first two axes")
    weights = mask[:, 0, 0, :, None]  # [B, 1, 1, T] -> [B, T, 1]
    weights = weights.to(hidden.dtype)
    total = (hidden * weights).sum(dim=1)  # [B, D]
    count = weights.sum(dim=1).clamp(min=1e-9)  # [B, 1]
    return total / count
