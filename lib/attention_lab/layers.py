"""The Transformer block: feed-forward network, encoder and decoder layers, a small encoder.

Each layer wraps :class:`~attention_lab.attention.MultiHeadAttention` with the two things that
make deep stacks trainable: a residual connection around every sub-layer and a LayerNorm. Both
arrangements are supported:

- **post-norm** (``norm_first=False``, the original paper): ``x = norm(x + sublayer(x))``;
- **pre-norm** (``norm_first=True``, most models since GPT-2): ``x = x + sublayer(norm(x))``.

The parameter names follow PyTorch's ``nn.TransformerEncoderLayer`` (``linear1``, ``linear2``,
``norm1``, ``norm2``, ...), and ``from_torch`` copies a PyTorch layer so the two can be checked
against each other. Masks keep the library's one polarity: ``torch.bool``, ``True`` = may attend
(PyTorch's layers use the opposite for bool masks: pass ``~mask`` to them).

The blocks take their sizes as arguments; the assembled :class:`TransformerEncoder` takes a
frozen :class:`EncoderConfig` (or its fields as keyword arguments), as every model of the
library does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import (
    ModelConfig,
    check_activation,
    check_bool,
    check_id_range,
    check_int,
    check_probability,
    check_real_above,
    check_sequence,
    check_token_ids,
)
from attention_lab.attention import MultiHeadAttention
from attention_lab.attention_config import AttentionConfig
from attention_lab.caches import KVCache, decode_step
from attention_lab.positional import SinusoidalPositionalEncoding

__all__ = [
    "DecoderLayer",
    "EncoderConfig",
    "EncoderLayer",
    "FeedForward",
    "GatedFeedForward",
    "TransformerEncoder",
    "embed_tokens",
    "encoder_layers",
    "token_embedding",
]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _torch_activation_name(module: nn.Module) -> str:
    """The name of a PyTorch layer's activation, if it is one this library has."""
    activation = module.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (
        isinstance(activation, nn.GELU) and activation.approximate == "none"
    ):
        return "gelu"
    raise ValueError(
        f"module uses activation {activation!r}; only relu and exact gelu are supported"
    )


class FeedForward(nn.Module):
    """The position-wise feed-forward network: ``linear2(dropout(activation(linear1(x))))``.

    The same two-layer network is applied to every position independently; it widens each
    vector to ``d_ff`` (4 × ``d_model`` by default), applies the non-linearity, and projects
    back.

    Args:
        d_model: Model width ``D``, a positive int.
        d_ff: Hidden width, a positive int; ``4 * d_model`` when ``None``.
        dropout: Dropout probability after the activation, in ``[0, 1)``.
        activation: ``"relu"`` (the original paper) or ``"gelu"`` (exact, as in BERT).

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> FeedForward(d_model=8)(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        d_ff = 4 * d_model if d_ff is None else d_ff
        check_int(d_ff, "d_ff")
        check_probability(dropout, "dropout")
        check_activation(activation)
        self.d_model = d_model
        self.d_ff = d_ff
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the network to every position.

        Args:
            x: Shape ``[B, T, D]``, a floating dtype.

        Returns:
            Shape ``[B, T, D]``.

        Raises:
            TypeError: If ``x`` is not a floating tensor.
            ValueError: If ``x`` does not have shape ``[B, T, D]``.
        """
        check_sequence(x, "x", self.d_model)
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # [B, T, d_ff]
        return self.linear2(self.dropout(hidden))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class GatedFeedForward(nn.Module):
    """The gated feed-forward network of today's language models (SwiGLU; Llama, Qwen, Mistral).

    ``down_proj(silu(gate_proj(x)) * up_proj(x))``: a second projection ``up_proj`` of the same
    width, multiplied element by element with the activated ``gate_proj``, takes the place of
    the single widening map of :class:`FeedForward`. Three ``[D, F]``-sized matrices instead of
    two: with ``F = 8D / 3`` (the default, rounded down) the network has about as many weights
    as the classic one at ``F = 4D``, ``3 * D * 8D/3 = 8D^2``. No biases, as in those models.

    Args:
        d_model: Model width ``D``, a positive int.
        d_ff: Hidden width ``F``, a positive int; ``8 * d_model // 3`` when ``None``.
        dropout: Dropout probability on the gated hidden vector, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> ffn = GatedFeedForward(d_model=12)
        >>> ffn.d_ff, ffn(torch.randn(2, 5, 12)).shape
        (32, torch.Size([2, 5, 12]))
    """

    def __init__(self, d_model: int, d_ff: int | None = None, *, dropout: float = 0.0) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        d_ff = 8 * d_model // 3 if d_ff is None else d_ff
        check_int(d_ff, "d_ff")
        check_probability(dropout, "dropout")
        self.d_model = d_model
        self.d_ff = d_ff
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the network to every position.

        Args:
            x: Shape ``[B, T, D]``, a floating dtype.

        Returns:
            Shape ``[B, T, D]``.

        Raises:
            TypeError: If ``x`` is not a floating tensor.
            ValueError: If ``x`` does not have shape ``[B, T, D]``.
        """
        check_sequence(x, "x", self.d_model)
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # [B, T, d_ff]
        return self.down_proj(self.dropout(hidden))  # [B, T, D]

    @classmethod
    def from_hf(cls, module: nn.Module) -> GatedFeedForward:
        """Copy a ``transformers`` gated MLP (``LlamaMLP``, ``Qwen3MLP``, ``MistralMLP``).

        Args:
            module: A module with bias-free ``gate_proj``, ``up_proj`` and ``down_proj`` and a
                SiLU activation ``act_fn`` (checked by what it computes).

        Returns:
            A new ``GatedFeedForward`` with copies of the weights, the same dtype, device and
            training mode, computing the same outputs.

        Raises:
            TypeError: If ``module`` lacks those projections.
            ValueError: If a projection has a bias or the activation is not SiLU.
        """
        names = ("gate_proj", "up_proj", "down_proj", "act_fn")
        missing = [name for name in names if not hasattr(module, name)]
        if not isinstance(module, nn.Module) or missing:
            raise TypeError(
                f"module must be a gated MLP like LlamaMLP, got {type(module).__name__} "
                f"without {missing}"
            )
        projections = (module.gate_proj, module.up_proj, module.down_proj)
        if any(projection.bias is not None for projection in projections):
            raise ValueError("module's projections have biases; GatedFeedForward has none")
        weight = module.gate_proj.weight
        # Read the activation by what it computes: transformers wraps SiLU in its own class.
        probe = torch.linspace(-4, 4, 9, dtype=weight.dtype, device=weight.device)
        if not torch.allclose(module.act_fn(probe), F.silu(probe)):
            raise ValueError(f"module's activation {module.act_fn} is not SiLU")
        ours = cls(weight.shape[1], weight.shape[0])
        ours.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for mine, theirs in zip(
                (ours.gate_proj, ours.up_proj, ours.down_proj), projections, strict=True
            ):
                mine.weight.copy_(theirs.weight)
        return ours.train(module.training)

    def extra_repr(self) -> str:
        return "activation='silu', gated"


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention and a feed-forward network, each with a residual and a
    LayerNorm, in the post-norm or the pre-norm arrangement.

    Post-norm (``norm_first=False``)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(feed_forward(x)))

    Pre-norm (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(feed_forward(norm2(x)))

    Args:
        d_model: Model width ``D``, a positive int divisible by ``num_heads``.
        num_heads: Number of attention heads ``H``.
        d_ff: Hidden width of the feed-forward network.
        dropout: Dropout probability on the attention weights, inside the feed-forward
            network and on each sub-layer's output, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: ``False`` for post-norm, ``True`` for pre-norm.
        layer_norm_eps: The ``eps`` of both LayerNorms, a positive float (BERT uses ``1e-12``).
        attention: ``None``, or the
            :class:`~attention_lab.attention_config.AttentionConfig` of the self-attention
            (Part VI: shared key/value heads, QK-norm, rotary embeddings, ALiBi, sinks, a
            softcap), handed to its :class:`~attention_lab.attention.MultiHeadAttention`.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> layer = EncoderLayer(d_model=8, num_heads=2, d_ff=32)
        >>> x, weights = layer(torch.randn(3, 5, 8))
        >>> x.shape, weights.shape
        (torch.Size([3, 5, 8]), torch.Size([3, 2, 5, 5]))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        attention: AttentionConfig | None = None,
    ) -> None:
        super().__init__()
        check_bool(norm_first, "norm_first")
        check_real_above(layer_norm_eps, "layer_norm_eps", 0.0)
        self.self_attn = MultiHeadAttention(d_model, num_heads, config=attention, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.d_model = d_model
        self.norm_first = norm_first

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the layer.

        Args:
            x: Shape ``[B, T, D]``, a floating dtype.
            mask: Optional, ``torch.bool``, broadcastable to ``[B, H, T, T]``; ``True`` where a
                position may attend, e.g. ``padding_mask(token_ids)`` (``[B, 1, 1, T]``).

        Returns:
            A pair ``(x, weights)``: the new representation, shape ``[B, T, D]``, and the
            self-attention weights, shape ``[B, H, T, T]``.

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``mask`` is not a bool tensor.
            ValueError: If the shapes do not fit.
        """
        check_sequence(x, "x", self.d_model)
        if self.norm_first:
            attended, weights = self.self_attn(self.norm1(x), mask=mask)
            x = x + self.dropout1(attended)
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            attended, weights = self.self_attn(x, mask=mask)
            x = self.norm1(x + self.dropout1(attended))
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x, weights

    def decode(self, x: torch.Tensor, cache: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the layer, causally, on new positions only: :meth:`forward` with
        :func:`~attention_lab.caches.decode_step` (which reads and extends ``cache``) in place
        of the full self-attention. The new positions' rows equal those of :meth:`forward` over
        the whole sequence with the causal mask.

        Args:
            x: The new positions, shape ``[B, Tn, D]``, a floating dtype.
            cache: The :class:`~attention_lab.caches.KVCache` of this layer's earlier
                positions; updated in place.

        Returns:
            A pair ``(x, weights)``: shape ``[B, Tn, D]``, and the new rows' weights over every
            position held, ``[B, H, Tn, L]``.

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``cache`` is not a ``KVCache``.
            ValueError: If the shapes do not fit the layer or the cache.
        """
        check_sequence(x, "x", self.d_model)
        if self.norm_first:
            attended, weights = decode_step(self.self_attn, self.norm1(x), cache)
            x = x + self.dropout1(attended)
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            attended, weights = decode_step(self.self_attn, x, cache)
            x = self.norm1(x + self.dropout1(attended))
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x, weights

    @classmethod
    def from_torch(cls, module: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Build an ``EncoderLayer`` with the weights of a PyTorch ``nn.TransformerEncoderLayer``.

        The copy computes what ``module`` computes for batch-first inputs (transpose them
        first if ``module`` is not ``batch_first``). Give it the library's mask (``True`` = may
        attend) where ``module`` gets the inverse (``src_mask=~mask`` or
        ``src_key_padding_mask=~keep``). It has the same dropout, norm placement, activation,
        LayerNorm eps, training mode, device and dtype.

        Args:
            module: The PyTorch layer to copy; relu or exact gelu, with biases.

        Returns:
            A new ``EncoderLayer`` holding copies of the weights.

        Raises:
            TypeError: If ``module`` is not an ``nn.TransformerEncoderLayer``.
            ValueError: If ``module`` uses a feature this class cannot represent.
        """
        layer = _copy_of_torch_layer(cls, module, nn.TransformerEncoderLayer)
        return layer.train(module.training)


def _copy_of_torch_layer(cls: type, module: nn.Module, expected: type) -> nn.Module:
    """A ``cls`` configured like PyTorch's ``module`` with its self-attention, feed-forward and
    LayerNorm weights copied (what encoder and decoder layers share)."""
    if not isinstance(module, expected):
        raise TypeError(f"module must be an nn.{expected.__name__}, got {type(module).__name__}")
    layer = cls(
        module.linear1.in_features,
        module.self_attn.num_heads,
        module.linear1.out_features,
        dropout=module.dropout.p,
        activation=_torch_activation_name(module),
        norm_first=module.norm_first,
        layer_norm_eps=module.norm1.eps,
    )
    _copy_sublayers(layer, module)
    layer.self_attn = MultiHeadAttention.from_torch(module.self_attn)
    return layer


def _copy_sublayers(layer: nn.Module, module: nn.Module) -> None:
    """Copy the feed-forward and LayerNorm weights that our layers and PyTorch's share."""
    if module.linear1.bias is None or module.norm1.bias is None:
        raise ValueError("module was built with bias=False, which this class cannot represent")
    weight = module.linear1.weight
    layer.to(device=weight.device, dtype=weight.dtype)
    pairs = [
        (layer.feed_forward.linear1, module.linear1),
        (layer.feed_forward.linear2, module.linear2),
        (layer.norm1, module.norm1),
        (layer.norm2, module.norm2),
    ]
    if hasattr(module, "norm3"):
        pairs.append((layer.norm3, module.norm3))
    with torch.no_grad():
        for ours, theirs in pairs:
            ours.weight.copy_(theirs.weight)
            ours.bias.copy_(theirs.bias)


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the encoder's output
    (``memory``), and a feed-forward network, each with a residual and a LayerNorm.

    Post-norm (``norm_first=False``)::

        x = norm1(x + dropout1(self_attn(x, self_mask)))
        x = norm2(x + dropout2(cross_attn(x, memory, memory_mask)))
        x = norm3(x + dropout3(feed_forward(x)))

    Pre-norm applies each LayerNorm to the sub-layer's input instead, as in
    :class:`EncoderLayer`. The queries of the cross-attention come from the decoder, its keys
    and values from ``memory``: each target position reads the whole source sentence.

    Args:
        d_model: Model width ``D``, a positive int divisible by ``num_heads``.
        num_heads: Number of attention heads ``H`` (both attentions).
        d_ff: Hidden width of the feed-forward network.
        dropout: Dropout probability, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: ``False`` for post-norm, ``True`` for pre-norm.
        layer_norm_eps: The ``eps`` of the three LayerNorms.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        check_bool(norm_first, "norm_first")
        check_real_above(layer_norm_eps, "layer_norm_eps", 0.0)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.d_model = d_model
        self.norm_first = norm_first

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        *,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run the layer.

        Args:
            x: Shape ``[B, Tq, D]``: the target sequence so far.
            memory: Shape ``[B, Tk, D]``: the encoder's output for the source sequence.
            self_mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, Tq, Tq]``,
                usually ``causal_mask(Tq)`` (combined with the target's padding mask).
            memory_mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, Tq, Tk]``,
                usually the source's ``padding_mask`` (``[B, 1, 1, Tk]``).

        Returns:
            A triple ``(x, self_weights, cross_weights)``: shape ``[B, Tq, D]``, the
            self-attention weights ``[B, H, Tq, Tq]`` and the cross-attention weights
            ``[B, H, Tq, Tk]`` (target positions × source positions).

        Raises:
            TypeError: If an input is not a floating tensor or a mask is not a bool tensor.
            ValueError: If the shapes do not fit.
        """
        check_sequence(x, "x", self.d_model)
        check_sequence(memory, "memory", self.d_model)
        if self.norm_first:
            attended, self_weights = self.self_attn(self.norm1(x), mask=self_mask)
            x = x + self.dropout1(attended)
            attended, cross_weights = self.cross_attn(self.norm2(x), memory, mask=memory_mask)
            x = x + self.dropout2(attended)
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            attended, self_weights = self.self_attn(x, mask=self_mask)
            x = self.norm1(x + self.dropout1(attended))
            attended, cross_weights = self.cross_attn(x, memory, mask=memory_mask)
            x = self.norm2(x + self.dropout2(attended))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return x, self_weights, cross_weights

    @classmethod
    def from_torch(cls, module: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Build a ``DecoderLayer`` with the weights of a PyTorch ``nn.TransformerDecoderLayer``.

        PyTorch calls the cross-attention ``multihead_attn``; masks are passed inverted, as
        for :meth:`EncoderLayer.from_torch`.

        Args:
            module: The PyTorch layer to copy; relu or exact gelu, with biases.

        Returns:
            A new ``DecoderLayer`` holding copies of the weights.

        Raises:
            TypeError: If ``module`` is not an ``nn.TransformerDecoderLayer``.
            ValueError: If ``module`` uses a feature this class cannot represent.
        """
        layer = _copy_of_torch_layer(cls, module, nn.TransformerDecoderLayer)
        layer.cross_attn = MultiHeadAttention.from_torch(module.multihead_attn)
        return layer.train(module.training)


def encoder_layers(config: Any, **options: Any) -> nn.ModuleList:
    """The stack of an assembled model: ``config.num_layers`` :class:`EncoderLayer` blocks.

    Every block has the config's ``d_model``, ``num_heads``, ``d_ff`` and ``dropout``; what
    differs between the models (activation, norm placement, LayerNorm ``eps``, the attention's
    options) comes in ``options``. The blocks are built one after another, so each draws its
    initial weights from the global generator in turn.

    Args:
        config: A model's config with those five fields and ``num_layers``:
            :class:`EncoderConfig`, :class:`~attention_lab.bert.BertEncoderConfig` or
            :class:`~attention_lab.language_model.DecoderConfig`.
        **options: Further keyword arguments of :class:`EncoderLayer`.

    Returns:
        An ``nn.ModuleList`` of ``config.num_layers`` new layers.
    """
    return nn.ModuleList(
        EncoderLayer(
            config.d_model, config.num_heads, config.d_ff, dropout=config.dropout, **options
        )
        for _ in range(config.num_layers)
    )


def token_embedding(vocab_size: int, d_model: int) -> nn.Embedding:
    """A token embedding for :func:`embed_tokens`, its entries drawn from ``N(0, 1 / d_model)``.

    :class:`TransformerEncoder`, :class:`~attention_lab.seq2seq.Seq2SeqTransformer` and
    :class:`~attention_lab.language_model.DecoderLM` embed their tokens with it.

    Args:
        vocab_size: Number of token ids ``V``, a positive int.
        d_model: Model width ``D``, a positive int.

    Returns:
        An ``nn.Embedding`` of ``V`` rows of width ``D``.

    Raises:
        TypeError: If an argument is not an int.
        ValueError: If an argument is not positive.

    Example:
        >>> torch.manual_seed(0) and None
        >>> embedding = token_embedding(1000, 64)
        >>> round(embedding.weight.std().item() * 64**0.5, 1)
        1.0
    """
    check_int(vocab_size, "vocab_size")
    check_int(d_model, "d_model")
    embedding = nn.Embedding(vocab_size, d_model)
    # Entries of size 1/sqrt(D), so that after the multiplication by sqrt(D) in embed_tokens the
    # token part has entries of size about 1, like the positional encoding it is added to.
    # nn.Embedding's default (size 1) would make it sqrt(D) times larger: the positions
    # would be drowned, and a post-norm first layer's softmax saturated before training.
    nn.init.normal_(embedding.weight, mean=0.0, std=d_model**-0.5)
    return embedding


def embed_tokens(embedding: nn.Embedding, token_ids: torch.Tensor) -> torch.Tensor:
    """Look the tokens up and multiply by √D, as "Attention Is All You Need" does.

    Args:
        embedding: An ``nn.Embedding`` of width ``D``, e.g. from :func:`token_embedding`.
        token_ids: Integer ids of any shape, values in ``[0, V)``.

    Returns:
        The embeddings times ``sqrt(D)``: shape ``[*token_ids.shape, D]``.

    Example:
        >>> embedding = nn.Embedding(5, 4)
        >>> ids = torch.tensor([[1, 3]])
        >>> torch.equal(embed_tokens(embedding, ids), embedding(ids) * 2.0)
        True
    """
    return embedding(token_ids) * math.sqrt(embedding.embedding_dim)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderConfig(ModelConfig):
    """The settings of a :class:`TransformerEncoder`, checked when it is created.

    Args:
        vocab_size: Number of token ids, a positive int.
        d_model: Model width ``D``, divisible by ``num_heads``.
        num_layers: Number of encoder layers, a positive int.
        num_heads: Heads per layer ``H``, a positive int.
        d_ff: Hidden width of each feed-forward network, a positive int.
        max_len: Positions whose encoding is precomputed (longer inputs still work).
        dropout: Dropout probability everywhere, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: ``False`` for post-norm layers, ``True`` for pre-norm.
        layer_norm_eps: The ``eps`` of every LayerNorm, a positive float.

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range, e.g. ``d_model`` not divisible by
            ``num_heads``.

    Example:
        >>> EncoderConfig(vocab_size=100, d_model=16, num_layers=2, num_heads=4, d_ff=32,
        ...               max_len=20).dropout
        0.1
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    max_len: int
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    layer_norm_eps: float = 1e-5


class TransformerEncoder(nn.Module):
    """A small Transformer encoder: token embedding × √d_model, plus the sinusoidal positional
    encoding, then ``num_layers`` :class:`EncoderLayer` blocks (and a final LayerNorm when the
    layers are pre-norm, whose last residual is otherwise never normalised).

    The embedding starts with entries drawn from ``N(0, 1 / d_model)``, so token and position
    enter the first layer at the same scale (``nn.Embedding``'s default, ``N(0, 1)``, would make
    the tokens √d_model times larger).

    Args:
        config: An :class:`EncoderConfig`; or the vocabulary size, with the other fields of
            :class:`EncoderConfig` as keyword arguments.
        **options: The fields of :class:`EncoderConfig`, when ``config`` is not one.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> encoder = TransformerEncoder(100, d_model=16, num_layers=2, num_heads=4, d_ff=32,
        ...                              max_len=20)
        >>> hidden, attentions = encoder(torch.randint(0, 100, (3, 7)))
        >>> hidden.shape, len(attentions), attentions[0].shape
        (torch.Size([3, 7, 16]), 2, torch.Size([3, 4, 7, 7]))
    """

    def __init__(self, config: EncoderConfig | int | None = None, /, **options: Any) -> None:
        super().__init__()
        self.config = config = EncoderConfig.from_arguments(config, options)
        self.embedding = token_embedding(config.vocab_size, config.d_model)
        self.positional = SinusoidalPositionalEncoding(
            config.d_model, config.max_len, dropout=config.dropout
        )
        self.layers = encoder_layers(
            config,
            activation=config.activation,
            norm_first=config.norm_first,
            layer_norm_eps=config.layer_norm_eps,
        )
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self, token_ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Encode a batch of token ids.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype, values in ``[0, vocab_size)``.
            mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, T, T]``, e.g.
                ``padding_mask(token_ids)``. ``None`` lets every position attend everywhere
                (padding included): pass the padding mask when a batch is padded.

        Returns:
            A pair ``(hidden, attentions)``: shape ``[B, T, D]``, and a list with one
            ``[B, H, T, T]`` tensor of attention weights per layer.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor or ``mask`` is not bool.
            ValueError: If ``token_ids`` is not 2-D or holds an id outside the vocabulary.
        """
        check_token_ids(token_ids, "token_ids")
        check_id_range(token_ids, "token_ids", self.config.vocab_size, "vocab_size")
        x = embed_tokens(self.embedding, token_ids)  # [B, T, D], embeddings × sqrt(D)
        x = self.positional(x)  # [B, T, D]
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask)
            attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, attentions
