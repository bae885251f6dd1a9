"""Multi-head latent attention (DeepSeek-V2 and V3).

Keys and values rebuilt from one small latent vector per position, with a decoupled RoPE key
shared by every head: :class:`LatentAttention`. Its cache,
:class:`~attention_lab.caches.LatentCache`, holds the latent and the rotated key instead of
every head's keys and values; chapter 16 compares it with grouped-query attention's.
"""

import math

import torch
from torch import nn

from attention_lab._validation import (
    check_bool,
    check_int,
    check_probability,
    check_real_above,
    check_sequence,
)
from attention_lab.attention import scaled_dot_product_attention
from attention_lab.caches import LatentCache
from attention_lab.positional import ROTARY_LAYOUTS, RotaryEmbedding


class LatentAttention(nn.Module):
    """Multi-head latent attention (MLA) of DeepSeek-V2 and V3, with its decoupled RoPE part.

    Keys and values are not projected from the input directly: the input is compressed to one
    latent vector of width ``R = kv_lora_rank`` per position (``kv_a_proj``, then the RMSNorm
    ``kv_a_norm``), and every head's keys (their ``Dn = qk_nope_head_dim`` position-free part)
    and values (``Dv = v_head_dim``) are rebuilt from it by ``kv_b_proj``. RoPE cannot pass
    through that up-projection, so each key also has a part of width
    ``Dr = qk_rope_head_dim``, projected by ``kv_a_proj`` too, rotated (by ``rotary``, a
    :class:`~attention_lab.positional.RotaryEmbedding`), and shared by all heads.
    Each query has both parts (``Dn + Dr``), projected by ``q_proj`` or, with ``q_lora_rank``,
    through a compressed query (``q_a_proj``, ``q_a_norm``, ``q_b_proj``). A cache
    (:class:`~attention_lab.caches.LatentCache`) holds only the latent and the RoPE key:
    ``R + Dr`` numbers per position instead of ``2 * H * Dh``.

    Args:
        d_model: Model width ``D``, a positive int.
        num_heads: Number of heads ``H``, a positive int.
        kv_lora_rank: Width ``R`` of the key/value latent, a positive int.
        qk_nope_head_dim: Width ``Dn`` of each head's position-free query/key part.
        qk_rope_head_dim: Width ``Dr`` of the rotated part, a positive even int.
        v_head_dim: Width ``Dv`` of each head's values.
        q_lora_rank: Width of the compressed query, or ``None`` for a direct ``q_proj``.
        rope_layout: ``"interleaved"`` (DeepSeek's ``rope_interleave=True``) or ``"half"``.
        rope_base: The rotary embedding's ``base``.
        norm_eps: The ``eps`` of the RMSNorms.
        bias: Whether ``q_a_proj``, ``kv_a_proj`` and ``out_proj`` have a bias.
        dropout: Dropout probability on the attention weights in training mode, in ``[0, 1)``.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is out of range.

    Example:
        >>> mla = LatentAttention(32, 4, kv_lora_rank=8, qk_nope_head_dim=6,
        ...                       qk_rope_head_dim=4, v_head_dim=5)
        >>> output, weights = mla(torch.randn(2, 3, 32))
        >>> output.shape, weights.shape
        (torch.Size([2, 3, 32]), torch.Size([2, 4, 3, 3]))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_layout: str = "interleaved",
        rope_base: float = 10000.0,
        norm_eps: float = 1e-6,
        bias: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        sizes = {
            "d_model": d_model,
            "num_heads": num_heads,
            "kv_lora_rank": kv_lora_rank,
            "qk_nope_head_dim": qk_nope_head_dim,
            "qk_rope_head_dim": qk_rope_head_dim,
            "v_head_dim": v_head_dim,
        }
        if q_lora_rank is not None:
            sizes["q_lora_rank"] = q_lora_rank
        for name, value in sizes.items():
            check_int(value, name)
        if qk_rope_head_dim % 2:
            raise ValueError(
                f"qk_rope_head_dim must be even (pairs rotate), got {qk_rope_head_dim}"
            )
        if rope_layout not in ROTARY_LAYOUTS:
            raise ValueError(f"rope_layout must be 'half' or 'interleaved', got {rope_layout!r}")
        check_real_above(rope_base, "rope_base", 1)
        check_real_above(norm_eps, "norm_eps", 0)
        check_bool(bias, "bias")
        check_probability(dropout, "dropout")
        self.d_model, self.num_heads = d_model, num_heads
        self.kv_lora_rank, self.q_lora_rank = kv_lora_rank, q_lora_rank
        self.nope_dim, self.rope_dim, self.v_head_dim = (
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        )
        self.rope_base, self.dropout = float(rope_base), float(dropout)
        self.rotary = RotaryEmbedding(qk_rope_head_dim, base=self.rope_base, layout=rope_layout)
        query_width = num_heads * (qk_nope_head_dim + qk_rope_head_dim)
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, query_width, bias=False)
        else:
            self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_a_norm = nn.RMSNorm(q_lora_rank, eps=norm_eps)
            self.q_b_proj = nn.Linear(q_lora_rank, query_width, bias=False)
        self.kv_a_proj = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias)
        self.kv_a_norm = nn.RMSNorm(kv_lora_rank, eps=norm_eps)
        self.kv_b_proj = nn.Linear(
            kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False
        )
        self.out_proj = nn.Linear(num_heads * v_head_dim, d_model, bias=bias)

    def new_cache(self, batch_size: int, max_len: int) -> LatentCache:
        """An empty :class:`~attention_lab.caches.LatentCache` for this layer, in its dtype and
        on its device."""
        weight = self.kv_a_proj.weight
        return LatentCache(
            batch_size,
            self.kv_lora_rank,
            self.rope_dim,
            max_len,
            dtype=weight.dtype,
            device=weight.device,
        )

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        positions: torch.Tensor | None = None,
        cache: LatentCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Self-attention of ``x``, optionally after the positions a cache holds.

        Args:
            x: Shape ``[B, T, D]``, floating dtype of the module's parameters.
            mask: Optional, dtype ``torch.bool``, broadcastable to ``[B, H, T, L]`` where ``L``
                is ``T`` plus the positions the cache held before (e.g. ``causal_mask(T)`` without
                a cache, ``causal_mask(L)[-T:]`` with one; a single new token needs none).
            positions: Shape ``[T]``, an integer dtype; defaults to ``len(cache) .. + T - 1``
                (``0 .. T - 1`` without a cache).
            cache: A :class:`~attention_lab.caches.LatentCache` for this layer, extended in place
                by ``x``'s latents.

        Returns:
            A pair ``(output, weights)`` of shapes ``[B, T, D]`` and ``[B, H, T, L]``.

        Raises:
            TypeError: If ``x`` is not a floating tensor or ``cache`` not a ``LatentCache``.
            ValueError: If a shape does not match or the cache is full.
        """
        check_sequence(x, "x", self.d_model)
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache, got {type(cache).__name__}")
        batch, seq_len, _ = x.shape
        start = len(cache) if cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + seq_len)
        if self.q_lora_rank is None:
            q = self.q_proj(x)  # [B, T, H * (Dn + Dr)]
        else:
            q = self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))  # [B, T, H * (Dn + Dr)]
        q = q.view(batch, seq_len, self.num_heads, -1).transpose(1, 2)  # [B, H, T, Dn + Dr]
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        latent, k_rope = self.kv_a_proj(x).split([self.kv_lora_rank, self.rope_dim], dim=-1)
        latent = self.kv_a_norm(latent)  # [B, T, R]
        q_rope = self.rotary(q_rope, positions)  # [B, H, T, Dr]
        k_rope = self.rotary(k_rope, positions)  # [B, T, Dr]
        if cache is not None:
            latent, k_rope = cache.append(latent, k_rope)  # [B, L, R], [B, L, Dr]
        keys_len = latent.shape[1]
        kv = self.kv_b_proj(latent).view(batch, keys_len, self.num_heads, -1)  # [B, L, H, Dn+Dv]
        k_nope, v = kv.transpose(1, 2).split([self.nope_dim, self.v_head_dim], dim=-1)
        k_rope = k_rope[:, None].expand(-1, self.num_heads, -1, -1)  # [B, H, L, Dr], shared
        query = torch.cat((q_nope, q_rope), dim=-1)  # [B, H, T, Dn + Dr]
        key = torch.cat((k_nope, k_rope), dim=-1)  # [B, H, L, Dn + Dr]
        dropout_p = self.dropout if self.training else 0.0
        output, weights = scaled_dot_product_attention(query, key, v, mask, dropout_p=dropout_p)
        output = output.transpose(1, 2).reshape(batch, seq_len, -1)  # [B, T, H * Dv]
        return self.out_proj(output), weights

    @classmethod
    def from_hf(cls, module: nn.Module) -> "LatentAttention":
        """Build a ``LatentAttention`` with the weights of transformers' ``DeepseekV3Attention``.

        The result computes the same output and weights as ``module`` run with the eager
        attention implementation and the model's rotary embedding. transformers is not
        imported: the module is read by its attributes.

        Args:
            module: The attention layer to copy.

        Returns:
            A new ``LatentAttention`` holding copies of the weights, in ``module``'s dtype,
            device and training mode.

        Raises:
            TypeError: If ``module`` lacks the attributes of such a layer.
            ValueError: If its rotary embedding is scaled (YaRN) or its score scale is not
                ``1 / sqrt(Dn + Dr)``.
        """
        names = ("kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj", "config")
        missing = [name for name in names if not hasattr(module, name)]
        if not isinstance(module, nn.Module) or missing:
            raise TypeError(
                "module must be a transformers DeepseekV3Attention, got "
                f"{type(module).__name__} without {missing}"
            )
        config = module.config
        rope = getattr(config, "rope_parameters", None) or {"rope_type": "default"}
        if rope.get("rope_type", "default") != "default":
            raise ValueError(
                f"module's rotary embedding has rope_type={rope['rope_type']!r}; "
                "LatentAttention has only the default one"
            )
        head_dim = module.qk_nope_head_dim + module.qk_rope_head_dim
        if not math.isclose(module.scaling, head_dim**-0.5):
            raise ValueError(f"module scales scores by {module.scaling}, not 1/sqrt({head_dim})")
        attention = cls(
            module.hidden_size,
            module.num_heads,
            kv_lora_rank=module.kv_lora_rank,
            qk_nope_head_dim=module.qk_nope_head_dim,
            qk_rope_head_dim=module.qk_rope_head_dim,
            v_head_dim=module.v_head_dim,
            q_lora_rank=module.q_lora_rank,
            rope_layout="interleaved" if getattr(config, "rope_interleave", True) else "half",
            rope_base=float(rope.get("rope_theta", 10000.0)),
            norm_eps=float(module.kv_a_layernorm.variance_epsilon),
            bias=module.kv_a_proj_with_mqa.bias is not None,
            dropout=float(getattr(config, "attention_dropout", 0.0)),
        )
        weight = module.kv_a_proj_with_mqa.weight
        attention.to(device=weight.device, dtype=weight.dtype)
        pairs = [
            (attention.kv_a_proj, module.kv_a_proj_with_mqa),
            (attention.kv_a_norm, module.kv_a_layernorm),
            (attention.kv_b_proj, module.kv_b_proj),
            (attention.out_proj, module.o_proj),
        ]
        if module.q_lora_rank is None:
            pairs.append((attention.q_proj, module.q_proj))
        else:
            pairs += [
                (attention.q_a_proj, module.q_a_proj),
                (attention.q_a_norm, module.q_a_layernorm),
                (attention.q_b_proj, module.q_b_proj),
            ]
        with torch.no_grad():
            for mine, theirs in pairs:
                mine.weight.copy_(theirs.weight)
                if getattr(theirs, "bias", None) is not None:
                    mine.bias.copy_(theirs.bias)
        return attention.train(module.training)
