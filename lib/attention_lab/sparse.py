"""Sparse attention: each query reads only the keys that score highest.

:func:`~attention_lab.masks.topk_mask` keeps, for each query, the ``k`` visible keys of highest
score; :func:`topk_attention` runs scaled dot-product attention over them. Which scores pick the
keys is the design question: the attention's own ``q . k`` (exact top-k, which still computes every
score), or a cheaper scorer's. DeepSeek-V3.2's :class:`LightningIndexer` is such a scorer: heads
with a ReLU that share one small key per position score every key (queries from the compressed
query latent, keys from the hidden states; 64 heads of width 128 in DeepSeek-V3.2-Exp's
configuration), and only the top ``k`` keys are attended with the full attention (DeepSeek Sparse
Attention).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import check_int
from attention_lab.attention import scaled_dot_product_attention
from attention_lab.masks import topk_mask
from attention_lab.positional import RotaryEmbedding

__all__ = ["LightningIndexer", "topk_attention"]


def topk_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    k: int,
    *,
    scores: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention over each query's top ``k`` keys.

    Args:
        query: ``[..., Tq, Dk]``.
        key: ``[..., Tk, Dk]``.
        value: ``[..., Tk, Dv]``.
        k: How many keys each query reads (see :func:`~attention_lab.masks.topk_mask`).
        scores: ``None`` (the attention's own scores ``q . k / sqrt(Dk)`` pick the keys) or a
            scorer's ``[..., Tq, Tk]`` (an indexer's), broadcastable to the attention's.
        mask: ``None`` or a ``torch.bool`` mask (``True`` = may attend).

    Returns:
        ``(output, weights)`` as :func:`~attention_lab.attention.scaled_dot_product_attention`
        returns them: the weights are 0 outside each query's kept keys.

    Raises:
        TypeError: As :func:`~attention_lab.masks.topk_mask` and the attention raise it
            (inputs not tensors).
        ValueError: As :func:`~attention_lab.masks.topk_mask` and the attention raise it
            (``k`` or shapes).
    """
    check_int(k, "k")
    if isinstance(key, torch.Tensor) and key.ndim >= 2 and k > key.shape[-2]:
        raise ValueError(f"k must be at most the number of keys, Tk = {key.shape[-2]}; got {k}")
    if scores is None:  # the ranking is the attention's own logits
        return scaled_dot_product_attention(query, key, value, mask, top_k=k)
    kept = topk_mask(scores, k, mask)
    return scaled_dot_product_attention(query, key, value, kept)


class LightningIndexer(torch.nn.Module):
    """DeepSeek-V3.2's lightning indexer: a cheap scorer of every key that picks the top ``k``.

    For the hidden states ``x`` ``[B, T, D]`` and the query's compressed residual ``c``
    ``[B, T, R]`` (the MLA query's low-rank latent, after its norm): ``H`` indexer heads of
    width ``Dh`` project their queries from ``c``, one key per position comes from ``x``
    (projected and LayerNorm-ed), the first ``rope_dim`` features of both are rotated (half
    layout), and key ``j``'s score for query ``i`` is
    ``sum_h w_h(x_i) * relu(q_{i,h} . k_j / sqrt(Dh))`` with per-head weights
    ``w(x_i) = x_i W_w / sqrt(H)``. :meth:`forward` returns each query's top ``k`` keys.

    Args:
        d_model: ``D``.
        q_rank: ``R``, the width of the compressed query residual.
        num_heads: ``H``.
        head_dim: ``Dh``.
        rope_dim: How many leading features of each query and key are rotated (even).
        top_k: How many keys each query keeps.
        base: The rotary base.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If a size is not positive, or ``rope_dim`` is odd or wider than ``Dh``.
    """

    def __init__(
        self,
        d_model: int,
        q_rank: int,
        num_heads: int,
        head_dim: int,
        rope_dim: int,
        top_k: int,
        *,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        for name, size in (
            ("d_model", d_model),
            ("q_rank", q_rank),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("rope_dim", rope_dim),
            ("top_k", top_k),
        ):
            check_int(size, name)
        if rope_dim % 2 or rope_dim > head_dim:
            raise ValueError(f"rope_dim must be even and at most head_dim, got {rope_dim}")
        self.num_heads, self.head_dim, self.rope_dim = num_heads, head_dim, rope_dim
        self.top_k = top_k
        self.q_proj = torch.nn.Linear(q_rank, num_heads * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(d_model, head_dim, bias=False)
        self.k_norm = torch.nn.LayerNorm(head_dim, eps=1e-6)
        self.weights_proj = torch.nn.Linear(d_model, num_heads, bias=False)
        # Half layout, as DeepSeek's indexer rotates (its MLA attention interleaves).
        self.rotary = RotaryEmbedding(rope_dim, base=base, layout="half")

    def _rotated(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rot, rest = x.split([self.rope_dim, self.head_dim - self.rope_dim], dim=-1)
        return torch.cat([self.rotary(rot, positions), rest], dim=-1)

    def index_scores(
        self,
        x: torch.Tensor,
        q_resid: torch.Tensor,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The indexer's score of every key for every query, ``[B, T, T]`` (``float32`` at
        least; ``-inf`` where ``mask``, ``torch.bool`` ``[B or 1, T, T]``, blocks)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3:
            raise ValueError(f"x must be a tensor [B, T, D], got {type(x).__name__}")
        batch, length, _ = x.shape
        if not isinstance(q_resid, torch.Tensor) or q_resid.shape[:2] != x.shape[:2]:
            raise ValueError("q_resid must be [B, T, R] with x's B and T")
        if positions is None:
            positions = torch.arange(length, device=x.device)
        work = torch.promote_types(x.dtype, torch.float32)
        q = self.q_proj(q_resid).view(batch, length, self.num_heads, self.head_dim)
        q = self._rotated(q.transpose(1, 2), positions)  # [B, H, T, Dh]
        k = self._rotated(self.k_norm(self.k_proj(x)), positions)  # [B, T, Dh]
        scores = F.relu((q.to(work) @ k.to(work).transpose(-2, -1)[:, None]) * self.head_dim**-0.5)
        weights = self.weights_proj(x).to(work) * self.num_heads**-0.5  # [B, T, H]
        total = (weights.transpose(1, 2)[..., None] * scores).sum(dim=1)  # [B, T, T]
        if mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                raise TypeError("mask must be a torch.bool tensor (True = may attend)")
            total = total.masked_fill(~mask, float("-inf"))
        return total

    def forward(
        self,
        x: torch.Tensor,
        q_resid: torch.Tensor,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Each query's top ``min(top_k, T)`` keys, ``[B, T, k]`` (int64 indices, best first;
        with a mask, a query that sees fewer keys also lists some blocked ones, as the model's
        does: :func:`~attention_lab.masks.topk_mask` gives the kept set alone)."""
        scores = self.index_scores(x, q_resid, positions, mask)
        return scores.topk(min(self.top_k, scores.shape[-1]), dim=-1).indices

    @classmethod
    def from_hf(cls, module: torch.nn.Module) -> LightningIndexer:
        """This indexer with the weights of transformers' ``DeepseekV32Indexer`` ``module`` (its
        rotary base from the module's config; a scaled RoPE is refused)."""
        rope = getattr(module.config, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"only the unscaled RoPE is supported, got {rope.get('rope_type')!r}")
        indexer = cls(
            module.hidden_size,
            module.q_lora_rank,
            module.n_heads,
            module.head_dim,
            module.qk_rope_head_dim,
            module.index_topk,
            base=rope.get("rope_theta", 10000.0),
        )
        with torch.no_grad():
            indexer.q_proj.weight.copy_(module.wq_b.weight)
            indexer.k_proj.weight.copy_(module.wk.weight)
            indexer.k_norm.load_state_dict(module.k_norm.state_dict())
            indexer.weights_proj.weight.copy_(module.weights_proj.weight)
        return indexer
