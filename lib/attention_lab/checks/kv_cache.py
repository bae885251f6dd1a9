"""Lab 8: the check of decoding one token at a time with a key/value cache."""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.attention import MultiHeadAttention
from attention_lab.checks._core import (
    Case,
    Result,
    check_callable,
    compare,
    fail,
    name_of,
    randn,
    register_mistakes,
    run,
    success,
    tolerance,
    two_tensors,
)
from attention_lab.masks import causal_mask
from attention_lab.positional import sinusoidal_encoding

__all__ = ["check_kv_cache_decoding"]

MISTAKES = register_mistakes(
    {
        "cache_wrong_axis": (
            "the cache grows along the wrong axis: keys and values are [B, H, t, Dh] and grow "
            "along the positions, dim=2 (torch.cat([keys, k], dim=2)), not along the batch, "
            "the heads or the head width"
        ),
        "positions_restart": (
            "every new token gets position 0: the token decoded at step t sits at position t "
            "(the number of tokens already in the cache), so add row t of the encoding, not "
            "row 0"
        ),
        "no_positions": (
            "no positional encoding: add the encoding of each token's position to its "
            "embedding before the projections"
        ),
        "cache_replaced": (
            "the cache is replaced instead of extended: each new token then sees only itself; "
            "append its key and value to the keys and values of the earlier tokens"
        ),
        "appended_after_attending": (
            "the new token attends before its own key and value are in the cache, so it cannot "
            "see itself (and the first token sees nothing); append first, then attend"
        ),
        "prefix_recomputed": (
            "the whole prefix is projected again at every step: with a cache, project only the "
            "new token (one query, one key, one value per step) and reuse the cached keys and "
            "values of the earlier ones"
        ),
    }
)


def _decode_reference(attention: MultiHeadAttention, x: torch.Tensor, mistake: str = ""):
    """Outputs [B, T, D] and keys [B, H, T, Dh] of causal attention over ``x`` plus positions,
    computed at once, with one deliberate deviation."""
    batch, length, d_model = x.shape
    encoding = sinusoidal_encoding(length, d_model).to(x.dtype)  # [T, D]
    if mistake == "positions_restart":
        encoding = encoding[:1]  # [1, D]: position 0 for every token
    inputs = x if mistake == "no_positions" else x + encoding  # [B, T, D]
    mask = causal_mask(length)  # [T, T]
    if mistake == "cache_replaced":
        mask = torch.eye(length, dtype=torch.bool)  # each token sees only itself
    elif mistake == "appended_after_attending":
        mask = causal_mask(length).tril(diagonal=-1)  # only the earlier tokens
    with torch.no_grad():
        output, _ = attention(inputs, mask=mask)
        keys = attention.k_proj(inputs).view(
            batch, length, attention.num_heads, -1
        )  # [B, T, H, Dh]
    return output, keys.transpose(1, 2)  # [B, T, D], [B, H, T, Dh]


_DECODE_MISTAKES = (
    "positions_restart",
    "no_positions",
    "cache_replaced",
    "appended_after_attending",
)


def _decode_cases() -> list[Case]:
    g = torch.Generator().manual_seed(8)

    def case(name, batch, length, d_model, num_heads, seed):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            attention = MultiHeadAttention(d_model, num_heads).eval()
        return Case(name, (attention, randn(g, batch, length, d_model)))

    return [
        case("B=2, 6 tokens, d_model=8, 2 heads", 2, 6, 8, 2, seed=1),
        case("a single token", 1, 1, 8, 2, seed=2),
        case("B=1, 9 tokens, d_model=16, 4 heads", 1, 9, 16, 4, seed=3),
        case("one head, B=3, 4 tokens, d_model=6", 3, 4, 6, 1, seed=4),
    ]


def check_kv_cache_decoding(fn: Callable) -> None:
    """Check a learner's ``fn(attention, x) -> (outputs, keys)`` (Lab 8).

    ``fn`` receives a :class:`~attention_lab.attention.MultiHeadAttention` in evaluation mode
    and token embeddings ``x`` ``[B, T, D]`` without positions. It must decode them one token at
    a time, as a generating decoder does: at step ``t`` add the sinusoidal encoding of position
    ``t`` (:func:`~attention_lab.positional.sinusoidal_encoding`) to token ``t``, project it
    with the module's ``q_proj``, ``k_proj`` and ``v_proj``, append its key and value to a cache
    ``[B, H, t + 1, Dh]``, attend from its query to every cached position, and project the
    merged heads with ``out_proj``. It returns the outputs of all steps ``[B, T, D]`` and the
    cached keys at the end ``[B, H, T, Dh]``: the same as the module's causal self-attention
    on the whole sequence, ``attention(x + encoding, mask=causal_mask(T))``, and its keys.
    The rows that ``k_proj`` projects are counted: with a cache, each token is projected once.
    Cases: two heads, a single token, four heads, one head.

    Mistakes it names: ``cache_wrong_axis``, ``positions_restart``, ``no_positions``,
    ``cache_replaced``, ``appended_after_attending``, ``prefix_recomputed``, ``not_a_pair``
    (see :data:`MISTAKES`).

    Args:
        fn: The learner's function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake (or saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _decode_cases()
    fn_name = name_of(fn)

    def error_hint(error: Exception) -> str | None:
        text = str(error)
        wrong_cat = "must match except in dimension" in text and "dimension 2" not in text
        wrong_heads = "do not broadcast together" in text or "must have the same Dk" in text
        return "cache_wrong_axis" if wrong_cat or wrong_heads else None

    for case in cases:
        attention, x = case.args
        batch, length, _ = x.shape
        expected_output, expected_keys = _decode_reference(attention, x)
        projected = []
        hook = attention.k_proj.register_forward_hook(
            lambda module, inputs, output, rows=projected: rows.append(inputs[0].shape[:-1].numel())
        )
        try:
            result = run(fn, case, error_hint)
        finally:
            hook.remove()
        two_tensors(fn_name, case, result)
        output, keys = result

        def shape_mistake(name, shapes, keys=keys, expected_keys=expected_keys):
            if name != "cached keys":
                return None
            if keys.numel() == expected_keys.numel():
                return "cache_wrong_axis"
            # Only the last token's key is left: [B, H, 1, Dh].
            last_only = (*expected_keys.shape[:2], 1, expected_keys.shape[3])
            return "cache_replaced" if keys.shape == last_only else None

        # Values only, no dtype or NaN step: the learner's tensors come out of the module's own
        # projections, in x's dtype, and a NaN shows as a difference.
        compare(
            fn_name,
            case,
            [
                Result("outputs", output, expected_output, dtype=False, finite=False),
                Result("cached keys", keys, expected_keys, dtype=False, finite=False),
            ],
            tolerance(x.dtype),
            variants={
                key: lambda key=key, a=attention, x=x: _decode_reference(a, x, key)
                for key in _DECODE_MISTAKES
            },
            shape_mistake=shape_mistake,
        )
        if sum(projected) > batch * length:
            fail(
                fn_name,
                case,
                f"k_proj projected {sum(projected)} token vectors for {batch} x {length} tokens",
                "prefix_recomputed",
            )
    success(fn, cases)
