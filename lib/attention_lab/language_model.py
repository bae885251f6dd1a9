"""A small decoder-only Transformer (a GPT in miniature), how it generates, and a language to
train it on.

- :class:`DecoderConfig`: the frozen settings of a model.
- :class:`DecoderLM`: token embedding plus a position signal (sinusoidal by default; learned,
  rotary, ALiBi or none by choice), a stack of the library's pre-norm
  :class:`~attention_lab.layers.EncoderLayer` run with a causal mask (the block of GPT-2), a
  final LayerNorm and a linear head that gives logits over the vocabulary at every position.
  Called as ``model(token_ids, mask)``, so :func:`attention_lab.training.train` trains it to
  predict each next token unchanged. ``layer_types`` makes it a hybrid: some layers a
  :class:`RecurrentLayer` (a recurrence on a fixed-size state, Part VII) instead of attention.
  :meth:`DecoderLM.decode` runs new positions only, through a
  :class:`~attention_lab.caches.KVCache` per attention layer and a
  :class:`~attention_lab.linear.RecurrentState` per recurrent one.
- :class:`RecurrentLayer`: the pre-norm block around a
  :class:`~attention_lab.linear.GatedDeltaNet` mixer.
- :func:`generate`: greedy or temperature sampling, one token per step, cached or not (alike).
- :class:`BracketLanguage`: a synthetic language whose rules are known (balanced brackets of
  bounded depth and length), so a generated sentence can be checked against them.
- :func:`next_token_data`: sentences turned into (input, next-token target) pairs.

Nothing here prints, and nothing draws from PyTorch's global random generator: sampling draws
from a ``torch.Generator`` seeded by the caller.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from attention_lab._validation import (
    ModelConfig,
    check_bool,
    check_id_range,
    check_int,
    check_real_above,
    check_sequence,
    check_token_ids,
)
from attention_lab.attention_config import AttentionConfig
from attention_lab.caches import KVCache
from attention_lab.layers import FeedForward, embed_tokens, encoder_layers, token_embedding
from attention_lab.linear import RULES, GatedDeltaNet, RecurrentState
from attention_lab.masks import causal_mask, check_mask, combine_masks
from attention_lab.positional import sinusoidal_encoding

# The position embeddings a DecoderLM can add to its token embeddings
# (DecoderConfig.position_embedding; None adds none).
POSITION_EMBEDDINGS = ("sinusoidal", "learned")
#: What a layer of a :class:`DecoderLM` may mix its tokens with
#: (``DecoderConfig.layer_types``): softmax attention, or a :class:`RecurrentLayer`'s rule.
LAYER_TYPES = ("attention", "gated_delta", "delta", "linear")

__all__ = [
    "LAYER_TYPES",
    "POSITION_EMBEDDINGS",
    "BracketLanguage",
    "DecoderConfig",
    "DecoderLM",
    "RecurrentLayer",
    "generate",
    "next_token_data",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecoderConfig(ModelConfig):
    """The settings of a :class:`DecoderLM`, checked when it is created.

    Args:
        vocab_size: Number of token ids ``V``, a positive int.
        max_len: Longest sequence the model reads or generates, a positive int (the positional
            encoding and the key/value caches are sized for it).
        d_model: Model width ``D``, divisible by ``num_heads``.
        num_layers: Number of layers, a positive int.
        num_heads: Attention heads per layer ``H``, a positive int.
        d_ff: Hidden width of each feed-forward network; ``4 * d_model`` when ``None``.
        dropout: Dropout probability everywhere, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"`` (GPT-2's choice).
        causal: ``True`` (a language model): position ``t`` attends to positions ``<= t``.
            ``False`` removes the causal mask, to show what it is for: every position then
            also sees the tokens after it.
        position_embedding: What is added to each token's embedding to say where it is:
            ``"sinusoidal"`` (the default, the encoding of "Attention Is All You Need"),
            ``"learned"`` (a table of ``max_len`` trained rows, GPT-2's) or ``None``. A model
            whose positions act inside attention (a rotary embedding, ALiBi) has ``None`` and
            says so in ``attention``; ``None`` with neither leaves only the causal mask to tell
            positions apart (NoPE).
        attention: The :class:`~attention_lab.attention_config.AttentionConfig` of every
            layer's self-attention (Part VI: shared key/value heads, QK-norm, a rotary
            embedding and its scaling, ALiBi, sinks, a softcap); the attention of 2017 by
            default. A model with ``"dynamic"`` RoPE scaling has no key/value cache: its
            frequencies change with the length.
        layer_types: ``None`` (every layer attends), or one entry of :data:`LAYER_TYPES` per
            layer, bottom up: ``"attention"`` for an attention layer, ``"gated_delta"``,
            ``"delta"`` or ``"linear"`` for a :class:`RecurrentLayer`
            running that rule with ``num_heads`` heads at the same width (Part VII). A hybrid
            stacks both, as Qwen3-Next and Kimi Linear put three linear layers below each
            attention layer: ``("gated_delta",) * 3 + ("attention",)``. Recurrent layers are
            causal by construction, so a model with one needs ``causal=True``.

    Raises:
        TypeError: If a field has the wrong type.
        ValueError: If a field is out of range, e.g. ``d_model`` not divisible by
            ``num_heads`` or ``num_heads`` not by ``attention.num_kv_heads``, or a position
            embedding is added beside a rotary embedding or ALiBi (two position signals).

    Example:
        >>> DecoderConfig(vocab_size=5, max_len=16, d_model=32, num_heads=2).d_ff
        128
        >>> rotary = AttentionConfig(rope_layout="half")
        >>> DecoderConfig(vocab_size=5, max_len=16, position_embedding=None, attention=rotary)
        ... # doctest: +ELLIPSIS
        DecoderConfig(vocab_size=5, ..., attention=AttentionConfig(...), layer_types=None)
    """

    vocab_size: int
    max_len: int
    d_model: int = 32
    num_layers: int = 2
    num_heads: int = 2
    d_ff: int | None = None
    dropout: float = 0.0
    activation: str = "gelu"
    causal: bool = True
    position_embedding: str | None = "sinusoidal"
    attention: AttentionConfig = dataclasses.field(default_factory=AttentionConfig)
    layer_types: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.d_ff is None:
            check_int(self.d_model, "d_model")
            # A frozen dataclass: fill in the default the way dataclasses document it.
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        super().__post_init__()
        if self.position_embedding is not None and self.position_embedding not in (
            POSITION_EMBEDDINGS
        ):
            raise ValueError(
                f"position_embedding must be None, 'sinusoidal' or 'learned', "
                f"got {self.position_embedding!r}"
            )
        attention = self.attention
        if not isinstance(attention, AttentionConfig):
            raise TypeError(f"attention must be an AttentionConfig, got {type(attention).__name__}")
        attention.layer_shape(self.d_model, self.num_heads)  # the layers' width checks, when made
        inside = (
            "a rotary embedding"
            if attention.rope_layout is not None
            else ("ALiBi" if attention.alibi else None)
        )
        if self.position_embedding is not None and inside is not None:
            raise ValueError(
                f"position_embedding={self.position_embedding!r} and {inside} in attention are "
                "two position signals; set position_embedding=None for a model whose positions "
                "act inside attention"
            )
        types = self.layer_types
        if types is not None:
            if not isinstance(types, tuple) or not all(isinstance(t, str) for t in types):
                raise TypeError(f"layer_types must be None or a tuple of str, got {types!r}")
            if len(types) != self.num_layers:
                raise ValueError(
                    f"layer_types must name num_layers={self.num_layers} layers, got {len(types)}"
                )
            unknown = sorted({t for t in types if t not in LAYER_TYPES})
            if unknown:
                raise ValueError(f"layer_types must be among {LAYER_TYPES}, got {unknown}")
            if not self.causal and any(t != "attention" for t in types):
                raise ValueError(
                    "a recurrent layer is causal by construction: causal=False needs "
                    "layer_types of attention only"
                )

    @property
    def recurrent(self) -> bool:
        """Whether some layer is a recurrence rather than attention."""
        return self.layer_types is not None and any(t != "attention" for t in self.layer_types)


class RecurrentLayer(nn.Module):
    """A pre-norm block whose token mixer is a recurrence on a fixed-size state, not attention:
    the layer a hybrid stacks beside its attention layers (Part VII).

    ::

        x = x + dropout1(mixer(norm1(x)))
        x = x + dropout2(feed_forward(norm2(x)))

    ``mixer`` is a :class:`~attention_lab.linear.GatedDeltaNet` with ``rule`` (the gated delta
    rule, the delta rule or linear attention's additive rule) and ``num_heads`` heads of width
    ``d_model // num_heads`` for its queries, keys and values, so that it is as wide as a
    :class:`~attention_lab.layers.EncoderLayer`'s attention. The mixer is causal by
    construction: position ``t`` reads a state written by positions ``<= t`` only, so the layer
    takes no mask.

    Args:
        d_model: Model width ``D``, a positive int divisible by ``num_heads``.
        num_heads: Heads of the mixer, a positive int.
        d_ff: Hidden width of the feed-forward network.
        rule: ``"gated_delta"``, ``"delta"`` or ``"linear"``.
        dropout: Dropout probability inside the feed-forward network and on each sub-layer's
            output, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
        chunk_size: The mixer's chunk length, or ``None`` for token by token.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range or ``d_model`` is not divisible by
            ``num_heads``.

    Example:
        >>> layer = RecurrentLayer(d_model=8, num_heads=2, d_ff=32, rule="delta")
        >>> x, weights = layer(torch.randn(3, 5, 8))
        >>> x.shape, weights
        (torch.Size([3, 5, 8]), None)
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        rule: str = "gated_delta",
        dropout: float = 0.0,
        activation: str = "gelu",
        chunk_size: int | None = 64,
    ) -> None:
        super().__init__()
        check_int(d_model, "d_model")
        check_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        width = d_model // num_heads
        self.mixer = GatedDeltaNet(
            d_model, num_heads, num_heads, width, width, chunk_size=chunk_size, rule=rule
        )
        self.feed_forward = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.d_model = d_model

    def forward(
        self, x: torch.Tensor, state: RecurrentState | None = None
    ) -> tuple[torch.Tensor, None]:
        """Run the layer on ``x`` ``[B, T, D]``, a floating dtype; with ``state``
        (:meth:`~attention_lab.linear.GatedDeltaNet.new_state`), ``x`` holds the positions that
        follow those the state has taken in, and the state is updated in place.

        Returns:
            A pair ``(x, None)``: the new representation ``[B, T, D]``, and ``None`` where an
            attention layer returns its weights (a recurrence keeps no ``T x T`` matrix).

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``state`` not a ``RecurrentState``.
            ValueError: If its shape does not fit, or the state has no room for ``T`` more.
        """
        check_sequence(x, "x", self.d_model)
        x = x + self.dropout1(self.mixer(self.norm1(x), state))
        x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        return x, None

    def decode(self, x: torch.Tensor, state: RecurrentState) -> tuple[torch.Tensor, None]:
        """:meth:`forward` with ``state``, as :class:`DecoderLM` decodes: the new positions'
        rows of :meth:`forward` over the whole sequence, up to rounding."""
        return self(x, state)


def _check_cacheable(
    model: DecoderLM,
    fix: str = "call the model on the whole sequence instead (generate: use_cache=False)",
) -> None:
    """Raise if ``model``'s rotary embedding has "dynamic" scaling, which no cache
    reproduces (its frequencies change with the length)."""
    for layer in model.layers:
        if isinstance(layer, RecurrentLayer):
            continue
        if layer.self_attn.rotary is not None:
            layer.self_attn.rotary.check_cacheable("config.attention.rope_scaling", fix)
        return  # every attention layer has the same configuration


class DecoderLM(nn.Module):
    """A decoder-only Transformer language model: logits for the next token at every position.

    ``token_ids`` are embedded (× √D, from an embedding initialised at ``N(0, 1/D)`` as in
    :class:`~attention_lab.layers.TransformerEncoder`), the position signal of
    ``config.position_embedding`` is added (the sinusoidal encoding by default; a rotary
    embedding and ALiBi act in each attention layer instead, ``config.attention``), then
    ``num_layers`` pre-norm :class:`~attention_lab.layers.EncoderLayer` blocks run with the
    causal mask, a final LayerNorm normalises the last residual, and a linear head turns every
    position's vector into ``V`` logits. A decoder-only model has no encoder to attend to, so
    its block is an encoder layer whose self-attention is masked: the block of GPT-2.

    Args:
        config: A :class:`DecoderConfig`; or the vocabulary size, with the other fields of
            :class:`DecoderConfig` as keyword arguments.
        **options: The fields of :class:`DecoderConfig`, when ``config`` is not one.

    Raises:
        TypeError: If ``config`` is neither a :class:`DecoderConfig` nor an int, or a field
            has the wrong type.
        ValueError: If a field is out of range.

    Example:
        >>> torch.manual_seed(0) and None
        >>> model = DecoderLM(DecoderConfig(vocab_size=5, max_len=8))
        >>> logits, attentions = model(torch.tensor([[1, 3, 4, 2]]))
        >>> logits.shape, attentions[0].shape
        (torch.Size([1, 4, 5]), torch.Size([1, 2, 4, 4]))
    """

    def __init__(self, config: DecoderConfig | int | None = None, /, **options: Any) -> None:
        super().__init__()
        self.config = config = DecoderConfig.from_arguments(config, options)
        self.embedding = token_embedding(config.vocab_size, config.d_model)
        if config.position_embedding == "sinusoidal":
            self.register_buffer(
                "position_encoding",
                sinusoidal_encoding(config.max_len, config.d_model),  # [max_len, D]
                persistent=False,
            )
        elif config.position_embedding == "learned":
            # One trained row per position, initialised at N(0, 1) like nn.Embedding's.
            self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        if config.recurrent:
            self.layers = nn.ModuleList(
                encoder_layers(
                    dataclasses.replace(config, num_layers=1, layer_types=None),
                    activation=config.activation,
                    norm_first=True,
                    attention=config.attention,
                )[0]
                if kind == "attention"
                else RecurrentLayer(
                    config.d_model,
                    config.num_heads,
                    config.d_ff,
                    rule=kind,
                    dropout=config.dropout,
                    activation=config.activation,
                )
                for kind in config.layer_types
            )
        else:
            self.layers = encoder_layers(
                config, activation=config.activation, norm_first=True, attention=config.attention
            )
        self.final_norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def _embed(self, token_ids: torch.Tensor, start: int) -> torch.Tensor:
        """Embed positions ``start .. start + T - 1``; ``token_ids`` is ``[B, T]``."""
        check_token_ids(token_ids, "token_ids")
        check_id_range(token_ids, "token_ids", self.config.vocab_size, "vocab_size")
        end = start + token_ids.shape[1]
        if end > self.config.max_len:
            raise ValueError(
                f"the model reads at most max_len={self.config.max_len} positions, got {end}"
            )
        tokens = embed_tokens(self.embedding, token_ids)  # [B, T, D], embeddings × sqrt(D)
        if self.config.position_embedding == "sinusoidal":
            tokens = tokens + self.position_encoding[start:end]  # [B, T, D]
        elif self.config.position_embedding == "learned":
            tokens = tokens + self.position_embedding.weight[start:end]  # [B, T, D]
        # A rotary embedding and ALiBi act inside attention; with neither, only the causal
        # mask tells positions apart.
        return self.dropout(tokens)  # [B, T, D]

    def forward(
        self, token_ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for the next token at every position of whole sequences.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype, ids in ``[0, V)``, ``T <= max_len``.
            mask: Optional ``torch.bool`` mask broadcastable to ``[B, H, T, T]``, ``True`` =
                may attend, e.g. ``padding_mask(token_ids)``. It is combined with the causal
                mask (unless the model was configured with ``causal=False``).

        Returns:
            A pair ``(logits, attentions)``: shape ``[B, T, V]`` (row ``t`` scores the token at
            ``t + 1``), and per layer one ``[B, H, T, T]`` tensor of attention weights (``None``
            for a recurrent layer).

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor or ``mask`` is not bool.
            ValueError: If ``token_ids`` is not 2-D, holds an id outside the vocabulary or is
                longer than ``max_len``, ``mask`` does not broadcast with the causal mask, or a
                mask is given to a model with recurrent layers.
        """
        x = self._embed(token_ids, 0)  # [B, T, D]
        if mask is not None:
            check_mask(mask)
            if self.config.recurrent:
                raise ValueError(
                    "a recurrent layer reads every earlier position and takes no mask: pad on "
                    "the right (a causal model never reads the padding after a token) and pass "
                    "mask=None"
                )
        if self.config.causal:
            causal = causal_mask(token_ids.shape[1], device=token_ids.device)  # [T, T]
            mask = causal if mask is None else combine_masks(causal, mask)  # [.., T, T]
        attentions = []
        for layer in self.layers:
            x, weights = layer(x) if isinstance(layer, RecurrentLayer) else layer(x, mask)
            attentions.append(weights)
        return self.head(self.final_norm(x)), attentions  # [B, T, V]

    def new_caches(self, batch_size: int) -> list[KVCache | RecurrentState]:
        """What each layer keeps while it decodes ``batch_size`` sequences of up to ``max_len``
        positions, empty, in the model's dtype and device: an attention layer's
        :class:`~attention_lab.caches.KVCache` (its ``num_kv_heads`` key/value heads, for
        ``max_len`` positions), a recurrent layer's
        :class:`~attention_lab.linear.RecurrentState` (a fixed size, whatever the length).

        Raises:
            TypeError: If ``batch_size`` is not an int.
            ValueError: If ``batch_size`` is not positive or the rotary embedding has
                ``"dynamic"`` scaling (no cache reproduces it).
        """
        _check_cacheable(self)
        weight = self.embedding.weight
        max_len = self.config.max_len
        return [
            layer.mixer.new_state(batch_size, max_len)
            if isinstance(layer, RecurrentLayer)
            else KVCache(
                batch_size,
                layer.self_attn.num_kv_heads,
                layer.self_attn.head_dim,
                max_len,
                dtype=weight.dtype,
                device=weight.device,
            )
            for layer in self.layers
        ]

    def decode(
        self, token_ids: torch.Tensor, caches: list[KVCache | RecurrentState]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for ``Tn`` new positions that follow the positions held in ``caches``.

        Each attention layer projects only the new positions, appends their keys and values
        to its cache and attends over everything held; each recurrent layer
        (``config.layer_types``) runs the new positions from its state and leaves the state
        after them. Fed a sequence in pieces (a prompt, then one token at a time), it gives
        the logits that :meth:`forward` gives for the whole sequence, up to floating-point
        rounding.

        Args:
            token_ids: Shape ``[B, Tn]``, an integer dtype: the new tokens.
            caches: The list from :meth:`new_caches`, one per layer, all holding the same
                earlier positions of the same ``B`` sequences; updated in place.

        Returns:
            A pair ``(logits, attentions)``: shape ``[B, Tn, V]``, and per layer the weights
            ``[B, H, Tn, L]`` with ``L`` the positions held after this call (``None`` for a
            recurrent layer).

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor or ``caches`` not the list
                :meth:`new_caches` returns.
            ValueError: If the model is not causal (a cache reproduces only causal
                attention) or its rotary embedding has ``"dynamic"`` scaling (its frequencies
                change with the length), the caches do not fit the model, or the positions
                would exceed ``max_len``.
        """
        if not self.config.causal:
            raise ValueError(
                "decode needs a causal model: with causal=False every earlier position would "
                "also attend to the new ones, which a key/value cache cannot update"
            )
        _check_cacheable(self)
        if not isinstance(caches, list) or not all(
            isinstance(c, KVCache | RecurrentState) for c in caches
        ):
            raise TypeError(
                "caches must be the list of KVCache and RecurrentState that new_caches returns"
            )
        if len(caches) != len(self.layers):
            raise ValueError(
                f"caches must hold one entry per layer ({len(self.layers)}), got {len(caches)}"
            )
        for i, (layer, cache) in enumerate(zip(self.layers, caches, strict=True)):
            wanted = RecurrentState if isinstance(layer, RecurrentLayer) else KVCache
            if not isinstance(cache, wanted):
                raise ValueError(
                    f"layer {i} needs a {wanted.__name__}, got a {type(cache).__name__}: "
                    "use the list new_caches returns"
                )
        held = {len(cache) for cache in caches}
        if len(held) != 1:
            raise ValueError(f"the caches hold different numbers of positions: {sorted(held)}")
        x = self._embed(token_ids, held.pop())  # [B, Tn, D]
        attentions = []
        for layer, cache in zip(self.layers, caches, strict=True):
            x, weights = layer.decode(x, cache)
            attentions.append(weights)
        return self.head(self.final_norm(x)), attentions  # [B, Tn, V]


def generate(
    model: DecoderLM,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    greedy: bool = False,
    seed: int = 0,
    use_cache: bool = True,
) -> torch.Tensor:
    """Extend every prompt by ``max_new_tokens`` tokens, one token per step.

    At each step the model's logits for the last position choose the next token: the largest
    (``greedy=True``), or a draw from ``softmax(logits / temperature)``, from a
    ``torch.Generator`` seeded with ``seed``. Without the cache, every step runs the model on
    the whole sequence so far; with it, the first step runs the prompt through
    :meth:`DecoderLM.decode` and every later step only the newest token. The two give the same
    tokens. The model runs in evaluation mode without gradients and is left in its mode.

    Args:
        model: A :class:`DecoderLM`.
        prompt_ids: Shape ``[B, P]`` with ``P >= 1``, an integer dtype, ids in ``[0, V)``.
        max_new_tokens: Tokens to add, a non-negative int; ``P + max_new_tokens`` may not
            exceed the model's ``max_len``.
        temperature: Divides the logits before sampling, a positive float: below 1 sharpens
            the distribution, above 1 flattens it. Ignored when ``greedy``.
        greedy: Take the most likely token instead of sampling.
        seed: Seed of the sampling generator, a non-negative int.
        use_cache: Run new tokens through what :meth:`DecoderLM.new_caches` returns, a
            key/value cache per attention layer and a state per recurrent layer (causal models
            only).

    Returns:
        Shape ``[B, P + max_new_tokens]``, ``torch.long``: the prompts followed by the new
        tokens.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range, the sequence would exceed ``max_len``, or
            ``use_cache`` is asked of a model with ``causal=False`` or with ``"dynamic"`` RoPE
            scaling.

    Example:
        >>> torch.manual_seed(0) and None
        >>> model = DecoderLM(DecoderConfig(vocab_size=5, max_len=8))
        >>> generate(model, torch.tensor([[1, 3]]), 4, greedy=True).shape
        torch.Size([1, 6])
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a DecoderLM, got {type(model).__name__}")
    check_token_ids(prompt_ids, "prompt_ids")
    if prompt_ids.shape[1] == 0:
        raise ValueError("prompt_ids must hold at least one token per sequence, got P = 0")
    check_id_range(prompt_ids, "prompt_ids", model.config.vocab_size, "vocab_size")
    check_int(max_new_tokens, "max_new_tokens", minimum=0)
    check_real_above(temperature, "temperature", 0.0)
    check_bool(greedy, "greedy")
    check_int(seed, "seed", minimum=0)
    check_bool(use_cache, "use_cache")
    total = prompt_ids.shape[1] + max_new_tokens
    if total > model.config.max_len:
        raise ValueError(
            f"P + max_new_tokens = {total} exceeds the model's max_len={model.config.max_len}"
        )
    if use_cache and not model.config.causal:
        raise ValueError("use_cache=True needs a causal model; pass use_cache=False")
    if use_cache:
        _check_cacheable(model, "pass use_cache=False")

    generator = torch.Generator(device=prompt_ids.device).manual_seed(seed)
    ids = prompt_ids.long()  # [B, P]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            caches = model.new_caches(ids.shape[0]) if use_cache else None
            new = ids  # [B, Tn]: what the cache has not seen yet
            for _ in range(max_new_tokens):
                if use_cache:
                    logits = model.decode(new, caches)[0][:, -1]  # [B, V]
                else:
                    logits = model(ids)[0][:, -1]  # [B, V]
                if greedy:
                    new = logits.argmax(dim=-1, keepdim=True)  # [B, 1]
                else:
                    probabilities = torch.softmax(logits / temperature, dim=-1)  # [B, V]
                    new = torch.multinomial(probabilities, 1, generator=generator)  # [B, 1]
                ids = torch.cat([ids, new], dim=1)  # [B, T + 1]
    finally:
        model.train(was_training)
    return ids


@dataclasses.dataclass(frozen=True)
class BracketLanguage:
    """A synthetic language of balanced brackets whose rules are known exactly.

    A sentence is ``BOS``, then between 2 and ``max_brackets`` brackets that are balanced (no
    ``)`` without an open ``(``, every ``(`` closed) and never nested deeper than
    ``max_depth``, then ``EOS``. The token ids are fixed: ``PAD = 0``, ``BOS = 1``,
    ``EOS = 2``, ``OPEN = 3`` (``(``) and ``CLOSE = 4`` (``)``), so ``vocab_size = 5``.

    :meth:`sample` writes sentences as a speaker who, at every step, picks uniformly among the
    tokens the rules allow next (:meth:`allowed_next`); an ``(`` is allowed only if it can still
    be closed within ``max_brackets``. So the lowest mean loss a model that sees only the tokens
    so far can reach on its sentences is the mean of ``log(number of allowed tokens)`` over the
    predicted positions (a model that reads ahead, without the causal mask, can go lower).

    Args:
        max_depth: Deepest nesting allowed, a positive int.
        max_brackets: Most brackets in a sentence, an even int >= 2.

    Raises:
        TypeError: If an argument is not an int.
        ValueError: If an argument is out of range.

    Example:
        >>> language = BracketLanguage(max_depth=2, max_brackets=6)
        >>> language.is_valid(torch.tensor([[1, 3, 3, 4, 4, 2], [1, 3, 3, 3, 4, 4]])).tolist()
        [True, False]
        >>> language.text(torch.tensor([1, 3, 4, 3, 4, 2, 0]))
        '()()'
    """

    max_depth: int = 4
    max_brackets: int = 20

    PAD = 0
    BOS = 1
    EOS = 2
    OPEN = 3
    CLOSE = 4
    vocab_size = 5

    def __post_init__(self) -> None:
        check_int(self.max_depth, "max_depth")
        check_int(self.max_brackets, "max_brackets", minimum=2)
        if self.max_brackets % 2:
            raise ValueError(f"max_brackets must be even, got {self.max_brackets}")

    @property
    def max_len(self) -> int:
        """The length in tokens of the longest sentence (``BOS``, ``max_brackets`` brackets and
        ``EOS``)."""
        return self.max_brackets + 2

    def allowed_next(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Which tokens the rules allow after each prefix.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype: sentences (or prefixes) starting
                with ``BOS``.

        Returns:
            Shape ``[B, T, V]``, ``torch.bool``: entry ``[b, t, v]`` is ``True`` iff token
            ``v`` may follow ``token_ids[b, :t + 1]``. After ``EOS``, or after a prefix that
            already broke a rule, nothing is allowed.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor.
            ValueError: If ``token_ids`` is not 2-D.
        """
        check_token_ids(token_ids, "token_ids")
        opens = (token_ids == self.OPEN).long().cumsum(dim=1)  # [B, T]
        closes = (token_ids == self.CLOSE).long().cumsum(dim=1)  # [B, T]
        depth, brackets = opens - closes, opens + closes  # [B, T] each
        # A prefix is still sound if it starts with BOS, holds no PAD, BOS or EOS after that,
        # and has never gone below depth 0 or above max_depth.
        bracket = (token_ids == self.OPEN) | (token_ids == self.CLOSE)  # [B, T]
        position = torch.arange(token_ids.shape[1], device=token_ids.device)  # [T]
        well_placed = torch.where(position == 0, token_ids == self.BOS, bracket)  # [B, T]
        in_range = (depth >= 0) & (depth <= self.max_depth)  # [B, T]
        sound = (well_placed & in_range).long().cumprod(dim=1).bool()  # [B, T]
        allowed = torch.zeros(  # [B, T, V]
            *token_ids.shape, self.vocab_size, dtype=torch.bool, device=token_ids.device
        )
        # An ( needs room for itself and for closing everything then open.
        allowed[..., self.OPEN] = (
            sound & (depth < self.max_depth) & (brackets + 1 + depth + 1 <= self.max_brackets)
        )
        allowed[..., self.CLOSE] = sound & (depth > 0)
        allowed[..., self.EOS] = sound & (depth == 0) & (brackets >= 2)
        return allowed

    def is_valid(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Whether each row is a sentence of the language, read up to its first ``EOS``.

        Args:
            token_ids: Shape ``[B, T]``, an integer dtype; what follows the first ``EOS`` is
                ignored (generated rows go on after it).

        Returns:
            Shape ``[B]``, ``torch.bool``: ``True`` iff the row starts with ``BOS``, every token
            up to and including its first ``EOS`` was allowed by :meth:`allowed_next`, and it
            has an ``EOS``.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor.
            ValueError: If ``token_ids`` is not 2-D.
        """
        allowed = self.allowed_next(token_ids)  # [B, T, V]
        following = token_ids[:, 1:].unsqueeze(-1)  # [B, T - 1, 1]
        legal = allowed[:, :-1].gather(-1, following).squeeze(-1)  # [B, T - 1]
        ended = (token_ids[:, 1:] == self.EOS).long().cumsum(dim=1)  # [B, T - 1]
        # Positions up to and including the first EOS must be legal.
        counted = (ended == 0) | ((ended == 1) & (token_ids[:, 1:] == self.EOS))  # [B, T - 1]
        has_end = (token_ids[:, 1:] == self.EOS).any(dim=1)  # [B]: False when T = 1
        return (legal | ~counted).all(dim=1) & has_end & (token_ids[:, 0] == self.BOS)

    def sample(self, num_sentences: int, *, seed: int = 0) -> torch.Tensor:
        """Sentences written by the uniform speaker, padded to ``max_len``.

        Args:
            num_sentences: How many, a positive int.
            seed: Seed of a ``torch.Generator``, a non-negative int.

        Returns:
            Shape ``[N, max_len]``, ``torch.long``: ``BOS``, the brackets, ``EOS``, then
            ``PAD``.

        Raises:
            TypeError: If an argument is not an int.
            ValueError: If an argument is out of range.
        """
        check_int(num_sentences, "num_sentences")
        check_int(seed, "seed", minimum=0)
        generator = torch.Generator().manual_seed(seed)
        ids = torch.full((num_sentences, 1), self.BOS)  # [N, 1]
        for _ in range(self.max_len - 1):
            allowed = self.allowed_next(ids)[:, -1]  # [N, V]
            done = ~allowed.any(dim=-1)  # [N]: ended with EOS
            weights = torch.where(done[:, None], 1.0, allowed.float())  # [N, V]
            drawn = torch.multinomial(weights, 1, generator=generator)  # [N, 1]
            drawn[done] = self.PAD
            ids = torch.cat([ids, drawn], dim=1)  # [N, t + 1]
        return ids

    def text(self, token_ids: torch.Tensor) -> str:
        """One sentence as brackets: ``BOS``, ``EOS`` and what follows it and ``PAD`` dropped;
        any other id (a broken row) is written as ``?``.

        Args:
            token_ids: Shape ``[T]``, an integer dtype.

        Raises:
            TypeError: If ``token_ids`` is not an integer tensor.
            ValueError: If ``token_ids`` is not 1-D.
        """
        if not isinstance(token_ids, torch.Tensor):
            raise TypeError(f"token_ids must be a torch.Tensor, got {type(token_ids).__name__}")
        if token_ids.ndim != 1:
            raise ValueError(f"token_ids must have shape [T], got {list(token_ids.shape)}")
        check_token_ids(token_ids[None], "token_ids")
        symbols, shown = [], {self.OPEN: "(", self.CLOSE: ")", self.PAD: ""}
        for index, token in enumerate(token_ids.tolist()):
            if token == self.EOS:
                break
            if index == 0 and token == self.BOS:
                continue
            symbols.append(shown.get(token, "?"))
        return "".join(symbols)


def next_token_data(sentences: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs for next-token prediction: each sentence without its last token, and without its
    first.

    Position ``t`` of the inputs holds token ``t``, the same position of the targets token
    ``t + 1``: a model whose row ``t`` scores the next token learns from every position of
    every sentence at once.

    Args:
        sentences: Shape ``[N, T]`` with ``T >= 2``, an integer dtype.

    Returns:
        A pair ``(inputs, targets)``, each ``[N, T - 1]``.

    Raises:
        TypeError: If ``sentences`` is not an integer tensor.
        ValueError: If ``sentences`` is not 2-D or shorter than 2 tokens.

    Example:
        >>> next_token_data(torch.tensor([[1, 3, 4, 2]]))
        (tensor([[1, 3, 4]]), tensor([[3, 4, 2]]))
    """
    check_token_ids(sentences, "sentences", rows="N")
    if sentences.shape[1] < 2:
        raise ValueError(f"sentences need at least 2 tokens, got T = {sentences.shape[1]}")
    return sentences[:, :-1], sentences[:, 1:]  # [N, T - 1] each
