"""Lab 5: the check of an encoder layer built from its parts."""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    check_callable,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
)
from attention_lab.checks.sdpa import compare_pair
from attention_lab.layers import EncoderLayer
from attention_lab.masks import padding_mask

__all__ = ["check_encoder_layer"]

MISTAKES = register_mistakes(
    {
        "pre_norm_instead_of_post_norm": (
            "pre-norm computed for a post-norm layer (layer.norm_first is False): "
            "x = norm1(x + attention(x)), then x = norm2(x + feed_forward(x))"
        ),
        "post_norm_instead_of_pre_norm": (
            "post-norm computed for a pre-norm layer (layer.norm_first is True): "
            "x = x + attention(norm1(x)), then x = x + feed_forward(norm2(x))"
        ),
        "no_attention_residual": (
            "missing residual connection around the attention: add the sub-layer's input back"
        ),
        "no_feed_forward_residual": (
            "missing residual connection around the feed-forward network: add its input back"
        ),
        "norm_outside_residual": (
            "LayerNorm applied to the sub-layer's output before the residual sum: post-norm "
            "normalises the sum, norm(x + sublayer(x))"
        ),
        "norms_swapped": (
            "norm1 and norm2 swapped: norm1 belongs to the attention, norm2 to the feed-forward"
        ),
        "norm1_used_twice": (
            "norm1 used for both sub-layers: the feed-forward sub-layer has its own LayerNorm, "
            "norm2, with its own learned scale and shift"
        ),
        "pre_norm_residual_normalised": (
            "the pre-norm residual adds the normalised x: normalise only the sub-layer's input "
            "and add the sub-layer's output to the unnormalised x, x = x + attention(norm1(x)), "
            "not h = norm1(x); x = h + attention(h)"
        ),
        "encoder_mask_ignored": (
            "the mask is not passed to the self-attention: layer.self_attn(..., mask=mask)"
        ),
    }
)


def _encoder_variant(layer: EncoderLayer, x: torch.Tensor, mask, mistake: str) -> tuple:
    """The layer computed with one deliberate deviation (evaluation mode: no dropout)."""
    attend, ff, norm1, norm2 = layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2
    pre = layer.norm_first
    if mistake == "norms_swapped":
        norm1, norm2 = norm2, norm1
    if mistake == "norm1_used_twice":
        norm2 = norm1
    if mistake in ("pre_norm_instead_of_post_norm", "post_norm_instead_of_pre_norm"):
        pre = not pre
    if mistake == "encoder_mask_ignored":
        mask = None
    attention_residual = mistake != "no_attention_residual"
    feed_forward_residual = mistake != "no_feed_forward_residual"
    if pre and mistake.startswith("pre_norm_residual_normalised"):
        h = norm1(x)
        attended, weights = attend(h, mask=mask)
        x = h + attended
        # Some make the mistake in the attention sub-layer only.
        x = x + ff(norm2(x)) if mistake.endswith("/attention") else norm2(x) + ff(norm2(x))
    elif pre:
        attended, weights = attend(norm1(x), mask=mask)
        x = x + attended if attention_residual else attended
        x = x + ff(norm2(x)) if feed_forward_residual else ff(norm2(x))
    elif mistake == "norm_outside_residual":
        attended, weights = attend(x, mask=mask)
        x = x + norm1(attended)
        x = x + norm2(ff(x))
    else:
        attended, weights = attend(x, mask=mask)
        x = norm1(x + attended if attention_residual else attended)
        x = norm2(x + ff(x) if feed_forward_residual else ff(x))
    return x, weights


_ENCODER_MISTAKES = (
    "pre_norm_instead_of_post_norm",
    "post_norm_instead_of_pre_norm",
    "no_attention_residual",
    "no_feed_forward_residual",
    "norm_outside_residual",
    "norms_swapped",
    "norm1_used_twice",
    "pre_norm_residual_normalised",
    "pre_norm_residual_normalised/attention",
    "encoder_mask_ignored",
)


_ARRANGEMENT_MISTAKES = {
    "pre_norm_instead_of_post_norm",
    "post_norm_instead_of_pre_norm",
    "norm_outside_residual",
    "pre_norm_residual_normalised",
    "pre_norm_residual_normalised/attention",
}


def _refuse_forward(*args, **kwargs):
    raise RuntimeError(
        "the check hands you a layer whose own forward is switched off: build the layer from "
        "its parts (layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2, "
        "layer.dropout1, layer.dropout2) instead of calling layer(x)"
    )


def _encoder_cases() -> list[Case]:
    g = torch.Generator().manual_seed(3)
    token_ids = torch.tensor([[4, 9, 2, 7, 5], [3, 8, 6, 0, 0]])  # [B, T], 0 = padding

    def layer(norm_first: bool, activation: str = "relu", seed: int = 0) -> EncoderLayer:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = EncoderLayer(
                16, 4, 32, dropout=0.1, activation=activation, norm_first=norm_first
            ).eval()
            with torch.no_grad():
                # Distinct, non-trivial norms, so that swapping or skipping one shows.
                for norm in (module.norm1, module.norm2):
                    norm.weight.copy_(1 + 0.5 * torch.randn(16))
                    norm.bias.copy_(0.5 * torch.randn(16))
        return module

    return [
        Case("post-norm layer, x [2, 5, 16], no mask", (randn(g, 2, 5, 16), layer(False, seed=1))),
        Case(
            "post-norm layer with a padding mask [2, 1, 1, 5]",
            (randn(g, 2, 5, 16), layer(False, seed=2)),
            {"mask": padding_mask(token_ids)},
        ),
        Case(
            "pre-norm layer (norm_first=True) with a padding mask",
            (randn(g, 2, 5, 16), layer(True, seed=3)),
            {"mask": padding_mask(token_ids)},
        ),
        Case("a single token, post-norm", (randn(g, 1, 1, 16), layer(False, seed=4))),
        Case(
            "GELU activation, pre-norm, x [3, 4, 16]",
            (randn(g, 3, 4, 16), layer(True, "gelu", seed=5)),
        ),
    ]


def check_encoder_layer(fn: Callable) -> None:
    """Check a learner's ``fn(x, layer, mask=None) -> (x, weights)`` (Lab 5).

    ``fn`` receives ``x`` ``[B, T, D]``, an :class:`attention_lab.layers.EncoderLayer` in
    evaluation mode (so dropout does nothing), and optionally a ``torch.bool`` mask. It must
    compute the layer from its parts (``layer.self_attn``, ``layer.feed_forward``,
    ``layer.norm1``, ``layer.norm2``, ``layer.dropout1``, ``layer.dropout2``), in the post-norm
    or pre-norm arrangement that ``layer.norm_first`` selects, and return the new ``x``
    ``[B, T, D]`` and the attention weights ``[B, H, T, T]``. The layer's own ``forward`` is
    switched off during the check. Cases: post-norm, with a padding mask, pre-norm, a single
    token, and a GELU layer.

    Mistakes it names: ``pre_norm_instead_of_post_norm``, ``post_norm_instead_of_pre_norm``,
    ``pre_norm_residual_normalised``, ``no_attention_residual``, ``no_feed_forward_residual``,
    ``norm_outside_residual``, ``norms_swapped``, ``norm1_used_twice``,
    ``encoder_mask_ignored``, ``pair_swapped``, ``not_a_pair``, ``wrong_dtype`` (see
    :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _encoder_cases()
    for case in cases:
        x, layer = case.args
        mask = case.kwargs.get("mask")
        with torch.no_grad():
            expected = EncoderLayer.forward(layer, x, mask)
        # Mistakes that differ from the right answer for this layer's arrangement.
        wrong_arrangement = (
            {
                "post_norm_instead_of_pre_norm",
                "pre_norm_residual_normalised",
                "pre_norm_residual_normalised/attention",
            }
            if layer.norm_first
            else {"pre_norm_instead_of_post_norm", "norm_outside_residual"}
        )
        variants = {
            key: lambda key=key, layer=layer, x=x, mask=mask: _encoder_variant(layer, x, mask, key)
            for key in _ENCODER_MISTAKES
            if key in wrong_arrangement or key not in _ARRANGEMENT_MISTAKES
        }
        layer.forward = _refuse_forward
        try:
            result = run(fn, case)
        finally:
            del layer.forward
        with torch.no_grad():
            compare_pair(name_of(fn), case, result, expected, variants)
    success(fn, cases)
