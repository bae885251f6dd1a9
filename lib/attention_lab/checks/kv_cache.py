"""Lab 8: the check of decoding one token at a time with a key/value cache.

The learner writes one *step*: the check holds the loop and feeds the tokens one at a time, so
a step cannot see a token that has not been decoded yet, and the check sees the cache after
every step.
"""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

# The attention checks register the mistakes this one shares with them (softmax_axis,
# no_scaling, scaled_by_sqrt_d_model, heads_and_width_swapped, heads_interleaved,
# heads_not_merged).
import attention_lab.checks.multi_head  # noqa: F401
import attention_lab.checks.sdpa  # noqa: F401
from attention_lab.attention import MultiHeadAttention
from attention_lab.checks._core import (
    Case,
    Result,
    call_quietly,
    check_callable,
    close,
    compare,
    difference,
    differing,
    fail,
    listed,
    match_variant,
    name_of,
    randn,
    register_mistakes,
    run,
    shape_where,
    success,
    the,
    tolerance,
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
            "(the number of tokens already in the cache, keys.shape[2]), so add row t of the "
            "encoding, not row 0"
        ),
        "positions_off_by_one": (
            "every token gets the position after its own: the token decoded at step t sits at "
            "position t, the number of tokens in the cache *before* it is appended (the first "
            "token is at position 0)"
        ),
        "no_positions": (
            "no positional encoding: add the encoding of each token's position to its "
            "embedding before the projections"
        ),
        "positions_not_in_values": (
            "the position reaches the queries and keys but not the values: add the encoding "
            "to the token's embedding once, and project that sum with all three of q_proj, "
            "k_proj and v_proj"
        ),
        "positions_after_projection": (
            "the encoding is added after the projections: add it to the token's embedding, "
            "token + encoding, and project that sum with q_proj, k_proj and v_proj"
        ),
        "cache_replaced": (
            "the cache is replaced instead of extended: each new token then sees only itself; "
            "append its key and value to the keys and values of the earlier tokens"
        ),
        "cache_not_returned": (
            "the cache you return is the one you received: return the extended keys and "
            "values, (keys, values) after torch.cat, so that the next step sees them"
        ),
        "cache_keys_values_swapped": (
            "keys and values swapped in the cache: return (keys, values), in the order the "
            "step receives them, keys first"
        ),
        "appended_after_attending": (
            "the new token attends before its own key and value are in the cache, so it cannot "
            "see itself (and the first token sees nothing); append first, then attend"
        ),
        "out_proj_missing": (
            "the output projection is missing: after merging the heads to [B, 1, D], apply "
            "attention.out_proj"
        ),
        "prefix_recomputed": (
            "the earlier tokens are projected again at every step: with a cache, project only "
            "the new token (one query, one key, one value per step) and reuse the cached keys "
            "and values of the earlier ones"
        ),
        "positions_one_behind": (
            "every token after the first gets the position before its own: the token decoded "
            "at step t sits at position t, keys.shape[2] before the append, so add row t of "
            "sinusoidal_encoding(t + 1, D), its last row"
        ),
        "position_from_wrong_axis": (
            "every token gets the same position: t is the number of cached positions, "
            "keys.shape[2] of keys [B, H, t, Dh], not len(cache), the batch, the heads or the "
            "head width"
        ),
        "positions_in_some_projections": (
            "the position reaches some of the projections but not all: add the encoding to "
            "the token's embedding once, and project that sum with all three of q_proj, "
            "k_proj and v_proj"
        ),
        "positions_added_twice": (
            "the encoding is added twice: add row t of the encoding to the token's embedding "
            "once, then project that sum"
        ),
        "value_from_wrong_layer": (
            "the value is projected with another layer than v_proj: the query comes from "
            "q_proj, the key from k_proj and the value from v_proj"
        ),
        "key_from_wrong_layer": (
            "the key is projected with another layer than k_proj: the query comes from "
            "q_proj, the key from k_proj and the value from v_proj"
        ),
        "query_from_wrong_layer": (
            "the query is projected with another layer than q_proj: the query comes from "
            "q_proj, the key from k_proj and the value from v_proj"
        ),
        "projections_mixed_up": (
            "the projections are mixed up: the query comes from q_proj, the key from k_proj "
            "and the value from v_proj"
        ),
        "weight_not_transposed": (
            "a projection by hand uses its weight untransposed: a Linear layer's weight is "
            "[out, in] and computes x @ weight.T + bias (call the layer, layer(x), to be sure)"
        ),
        "projection_bias_missing": (
            "a projection by hand without its bias: a Linear layer computes "
            "x @ weight.T + bias (call the layer, layer(x), to be sure)"
        ),
        "cache_prepended": (
            "the new key and value are put before the cached ones: the cache keeps positions "
            "in order, so append at the end, torch.cat([keys, k], dim=2)"
        ),
        "attends_to_first_only": (
            "the new token attends only to the first cached position: its query may see every "
            "key in the cache, no mask needed (is_causal=True, or the first row of a causal "
            "mask, lets one query see key 0 only)"
        ),
        "residual_added": (
            "the token's embedding is added to the output: the step returns the attention's "
            "output alone, out_proj of the merged heads, with no residual connection"
        ),
        "encoding_not_indexed": (
            "the whole encoding table is added to the token: sinusoidal_encoding(t + 1, D) is "
            "[t + 1, D], one row per position; add only row t, [t]"
        ),
        "appended_twice": (
            "the new key and value are appended twice: each step adds one position to the "
            "cache, torch.cat([keys, k], dim=2) once"
        ),
        "cache_not_split": (
            "the cache holds the keys and values before the split into heads: store them as "
            "[B, H, t + 1, Dh], the k and v your attention uses"
        ),
        "output_squeezed": (
            "the output lost its position axis: return [B, 1, D], one position for the new "
            "token (no squeeze, or out.view(B, 1, D))"
        ),
        "mask_not_needed": (
            "a causal mask for t + 1 queries: the step has one query, the newest token, which "
            "may see every key in the cache, so it needs no mask"
        ),
        "attends_to_itself_only": (
            "the new token attends only to itself: its query must see every key in the cache, "
            "the earlier tokens' and its own (attention(x) on the token alone sees only it)"
        ),
        "projection_missing": (
            "a projection is missing: the query, key and value are q_proj(x), k_proj(x) and "
            "v_proj(x), each with its own layer"
        ),
        "out_proj_wrong_layer": (
            "the merged heads go through another layer than out_proj: the step ends with "
            "attention.out_proj"
        ),
        "encoding_one_row_short": (
            "the encoding table is one row short: the token at position t takes row t, so "
            "the table needs t + 1 rows, sinusoidal_encoding(t + 1, D)[t] (one row at t = 0)"
        ),
        "embedding_scaled": (
            "the token's embedding is scaled before the encoding is added: this lab adds the "
            "encoding to the embedding as it is, token + encoding"
        ),
        "batch_hard_coded": (
            "your step is right for a batch of one sequence and wrong for several: a 1 (a "
            "size, a slice [:1] or [0], a squeeze) stands where the batch B = token.shape[0] "
            "belongs"
        ),
        "step_not_a_pair": (
            "a step returns a pair (output, cache): the output [B, 1, D] of the new token and "
            "the cache as a pair of tensors (keys, values), each [B, H, t + 1, Dh]"
        ),
    }
)


def _empty_cache(attention: MultiHeadAttention, batch: int, dtype: torch.dtype):
    """The cache before the first step: keys and values of no token, [B, H, 0, Dh] each."""
    shape = (batch, attention.num_heads, 0, attention.head_dim)
    return torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)


def _expected(attention: MultiHeadAttention, x: torch.Tensor):
    """Outputs [B, T, D], keys and values [B, H, T, Dh] of causal attention on x + positions,
    computed on the whole sequence at once."""
    batch, length, d_model = x.shape
    inputs = x + sinusoidal_encoding(length, d_model).to(x.dtype)  # [B, T, D]
    split = (batch, length, attention.num_heads, attention.head_dim)
    with torch.no_grad():
        output, _ = attention(inputs, mask=causal_mask(length))  # [B, T, D]
        keys = attention.k_proj(inputs).view(split).transpose(1, 2)  # [B, H, T, Dh]
        values = attention.v_proj(inputs).view(split).transpose(1, 2)  # [B, H, T, Dh]
    return output, keys, values


# Each mistake as the deviations of one step from the right one (see _step_variant). A key may
# carry a suffix after a slash: several ways of making one mistake, named alike.
_DEVIATIONS: dict[str, dict] = {
    "positions_restart": {"position": "zero"},
    "positions_off_by_one": {"position": "next"},
    "positions_one_behind": {"position": "previous"},
    "position_from_wrong_axis/heads": {"position": "heads"},
    "position_from_wrong_axis/width": {"position": "head_dim"},
    "position_from_wrong_axis/batch": {"position": "batch"},
    "position_from_wrong_axis/pair": {"position": "pair"},
    "no_positions": {"positions_into": ""},
    "positions_not_in_values": {"positions_into": "qk"},
    "positions_in_some_projections/q": {"positions_into": "q"},
    "positions_in_some_projections/k": {"positions_into": "k"},
    "positions_in_some_projections/v": {"positions_into": "v"},
    "positions_in_some_projections/qv": {"positions_into": "qv"},
    "positions_in_some_projections/kv": {"positions_into": "kv"},
    "positions_after_projection": {"positions_into": "", "positions_after": "qk"},
    "positions_after_projection/qkv": {"positions_into": "", "positions_after": "qkv"},
    "positions_added_twice": {"positions_twice": True},
    "embedding_scaled": {"embedding_scale": "sqrt_d_model"},
    "value_from_wrong_layer/k": {"layers": "qkk"},
    "value_from_wrong_layer/q": {"layers": "qkq"},
    "key_from_wrong_layer/q": {"layers": "qqv"},
    "key_from_wrong_layer/v": {"layers": "qvv"},
    "query_from_wrong_layer/k": {"layers": "kkv"},
    "query_from_wrong_layer/v": {"layers": "vkv"},
    "projections_mixed_up/kv": {"layers": "qvk"},
    "projections_mixed_up/qk": {"layers": "kqv"},
    "projections_mixed_up/qv": {"layers": "vkq"},
    "projections_mixed_up/vqk": {"layers": "vqk"},
    "projections_mixed_up/kvq": {"layers": "kvq"},
    "projection_missing/v": {"layers": "qki"},
    "projection_missing/k": {"layers": "qiv"},
    "projection_missing/q": {"layers": "ikv"},
    "projection_missing/kv": {"layers": "qii"},
    "out_proj_wrong_layer/q": {"out_layer": "q"},
    "out_proj_wrong_layer/k": {"out_layer": "k"},
    "out_proj_wrong_layer/v": {"out_layer": "v"},
    "weight_not_transposed": {"linear": "weight_not_transposed"},
    "weight_not_transposed/qkv": {"linear": "weight_not_transposed", "by_hand": "qkv"},
    "projection_bias_missing": {"linear": "no_bias"},
    "projection_bias_missing/qkv": {"linear": "no_bias", "by_hand": "qkv"},
    "heads_and_width_swapped": {"split": "width_first"},
    "heads_interleaved": {"split": "interleaved", "merge": "width_first"},
    "heads_interleaved/split_only": {"split": "interleaved"},
    "cache_replaced": {"cache": "replace"},
    "cache_prepended": {"cache": "prepend"},
    "cache_not_returned": {"return_cache": "received"},
    "cache_keys_values_swapped": {"return_cache": "swapped"},
    "appended_after_attending": {"append_after": True},
    "keys_values_swapped": {"attend": "swapped"},
    "attends_to_first_only": {"attend": "first_only"},
    "attends_to_itself_only": {"attend": "self_only"},
    "softmax_axis": {"softmax_dim": -2},
    "no_softmax": {"softmax": False},
    "no_scaling": {"divisor": "one"},
    "scaled_by_sqrt_d_model": {"divisor": "sqrt_d_model"},
    "scaled_by_d_k": {"divisor": "head_dim"},
    "scale_multiplied": {"divisor": "inverse"},
    "scaled_by_sequence_length": {"divisor": "sqrt_keys"},
    "weights_times_keys": {"attend": "times_keys"},
    "merge_wrong_permutation": {"merge": "width_first"},
    "out_proj_missing": {"out_proj": False},
    "residual_added": {"residual": "token"},
    "residual_added/positioned": {"residual": "positioned"},
}


def _step_variant(attention, token, cache, position, mistake: str):
    """One decoding step with the deviations of ``mistake`` (see :data:`_DEVIATIONS`), written
    as a learner writes it."""
    deviation = _DEVIATIONS[mistake]
    batch, _, d_model = token.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    keys, values = cache
    where = {
        "zero": 0,
        "next": position + 1,
        "previous": max(position - 1, 0),
        "heads": heads,
        "head_dim": head_dim,
        "batch": batch,
        "pair": 2,  # len(cache)
    }.get(deviation.get("position"), position)
    encoding = sinusoidal_encoding(where + 1, d_model)[where].to(token.dtype)  # [D]
    scale = math.sqrt(d_model) if deviation.get("embedding_scale") else 1.0
    positioned = token * scale + encoding  # [B, 1, D]
    if deviation.get("positions_twice"):
        positioned = positioned + encoding
    into = deviation.get("positions_into", "qkv")
    after = deviation.get("positions_after", "")
    layers = {
        "q": attention.q_proj,
        "k": attention.k_proj,
        "v": attention.v_proj,
        "o": attention.out_proj,
        "i": torch.nn.Identity(),  # no projection
    }
    linear = deviation.get("linear")
    by_hand = deviation.get("by_hand", "qkvo")

    def project(layer, x, name):
        if linear is None or name not in by_hand:
            return layer(x)
        if linear == "no_bias":
            return x @ layer.weight.T
        return x @ layer.weight + layer.bias  # the weight as [D_in, D_out]: it is [D_out, D_in]

    projected = []
    for name, layer_name in zip("qkv", deviation.get("layers", "qkv"), strict=True):
        y = project(layers[layer_name], positioned if name in into else token, name)
        projected.append(y + encoding if name in after else y)
    if deviation.get("split") == "width_first":
        split = (batch, 1, head_dim, heads)
    else:
        split = (batch, 1, heads, head_dim)
    if deviation.get("split") == "interleaved":  # feature f to head f % H
        q, k, v = (y.view(batch, 1, head_dim, heads).permute(0, 3, 1, 2) for y in projected)
    else:
        q, k, v = (y.view(split).transpose(1, 2) for y in projected)  # [B, H, 1, Dh]
    attend_keys, attend_values = keys, values
    mode = deviation.get("cache", "append")
    if mode == "replace":
        keys, values = k, v
    elif mode == "prepend":
        keys, values = torch.cat([k, keys], dim=2), torch.cat([v, values], dim=2)
    else:
        keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
    if not deviation.get("append_after"):
        attend_keys, attend_values = keys, values
    attend = deviation.get("attend")
    if attend == "swapped":
        attend_keys, attend_values = attend_values, attend_keys
    if attend == "times_keys":
        attend_values = attend_keys
    if attend == "self_only":
        attend_keys, attend_values = k, v
    if attend == "first_only":
        attend_keys, attend_values = attend_keys[:, :, :1], attend_values[:, :, :1]
    divisor = {
        "one": 1.0,
        "sqrt_d_model": math.sqrt(d_model),
        "head_dim": head_dim,
        "inverse": 1 / math.sqrt(head_dim),
        "sqrt_keys": math.sqrt(attend_keys.shape[2]),
    }.get(deviation.get("divisor"), math.sqrt(head_dim))
    scores = q @ attend_keys.transpose(-2, -1) / divisor  # [B, H, 1, t + 1]
    if deviation.get("softmax", True):
        weights = scores.softmax(dim=deviation.get("softmax_dim", -1))
    else:
        weights = scores
    out = weights @ attend_values  # [B, H, 1, Dh]
    if deviation.get("merge") == "width_first":
        out = out.permute(0, 2, 3, 1).reshape(batch, 1, d_model)  # [B, 1, D]
    else:
        out = out.transpose(1, 2).reshape(batch, 1, d_model)  # [B, 1, D]
    if deviation.get("out_proj", True):
        out = project(layers[deviation.get("out_layer", "o")], out, "o")
    residual = deviation.get("residual")
    if residual:
        out = out + (token if residual == "token" else positioned)
    returned = deviation.get("return_cache")
    if returned == "received":
        return out, cache
    if returned == "swapped":
        return out, (values, keys)
    return out, (keys, values)


def _decode_variant(attention, x, mistake: str):
    """(outputs [B, T, D], keys, values) of the whole loop with one deviation at every step."""
    cache = _empty_cache(attention, x.shape[0], x.dtype)
    outputs = []
    with torch.no_grad():
        for t in range(x.shape[1]):
            out, cache = _step_variant(attention, x[:, t : t + 1], cache, t, mistake)
            outputs.append(out)
    return torch.cat(outputs, dim=1), *cache


def _decode_cases() -> list[Case]:
    g = torch.Generator().manual_seed(8)

    def case(name, batch, length, d_model, num_heads, seed, dtype=torch.float32):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            attention = MultiHeadAttention(d_model, num_heads).eval().to(dtype)
        return Case(name, (attention, randn(g, batch, length, d_model, dtype=dtype)))

    return [
        case("B=2, 6 tokens, d_model=8, 2 heads", 2, 6, 8, 2, seed=1),
        case("a single token", 1, 1, 8, 2, seed=2),
        case("B=1, 9 tokens, d_model=16, 4 heads", 1, 9, 16, 4, seed=3),
        case("one head, B=3, 4 tokens, d_model=6", 3, 4, 6, 1, seed=4),
        # A module in float64: the cache and the output must keep its dtype.
        case("float64, B=2, 5 tokens, d_model=8, 2 heads", 2, 5, 8, 2, seed=5, dtype=torch.float64),
    ]


def _cache_shape_mistake(tensor, expected, received: torch.Tensor) -> str | None:
    """The mistake behind a cache tensor of the wrong shape after a step (expected
    [B, H, t+1, Dh]); ``received`` is what the step received in its place."""
    batch, heads, length, head_dim = expected
    shape = tuple(tensor.shape)
    if tensor.shape == received.shape and torch.equal(tensor, received):
        return "cache_not_returned"
    if shape == (batch, heads, 1, head_dim):
        return "cache_replaced"
    if shape == (batch, heads, length + 1, head_dim):
        return "appended_twice"
    if shape == (batch, length, heads * head_dim):
        return "cache_not_split"
    if shape == (batch, head_dim, length, heads) and heads != head_dim:
        return "heads_and_width_swapped"
    if math.prod(shape) == math.prod(expected):
        return "cache_wrong_axis"
    return None


def _right_for_one_sequence(fn: Callable, attention: MultiHeadAttention, x: torch.Tensor) -> bool:
    """Whether ``fn``, given a batch of several sequences, decodes the first of them alone
    right (outputs and cache at every step): a probe of a size fixed at 1 where B belongs."""
    if x.shape[0] == 1:
        return False
    one = x[:1]  # [1, T, D]
    expected = _expected(attention, one)
    cache = _empty_cache(attention, 1, x.dtype)
    outputs = []
    for t in range(one.shape[1]):
        result = call_quietly(fn, (attention, one[:, t : t + 1], cache))
        try:
            output, cache = result[0], tuple(result[1])
        except (TypeError, IndexError):
            return False
        outputs.append(output)
    got = (torch.cat(outputs, dim=1), *cache)
    tol = tolerance(x.dtype)
    return all(close(g, e, *tol) for g, e in zip(got, expected, strict=True))


def _once(compute: Callable, *args) -> Callable:
    """``compute(*args)`` as a function of nothing that computes it once (the diagnosis and the
    comparison both look at the variants)."""
    memo: list = []

    def result():
        if not memo:
            memo.append(compute(*args))
        return memo[0]

    return result


def _output_shape_mistake(shape: torch.Size, sizes: tuple[int, ...], widened: bool) -> str | None:
    """The mistake behind a step's output of the wrong shape (expected [B, 1, D]); ``sizes``
    are (B, H, t, Dh, D) at step t, ``widened`` whether q_proj received t + 1 positions."""
    batch, heads, t, head_dim, d_model = sizes
    if shape == (batch, heads, 1, head_dim):
        return "heads_not_merged"
    if shape == (batch, d_model):
        return "output_squeezed"
    if widened and shape == (batch, t + 1, d_model):
        return "encoding_not_indexed"
    return None


def check_kv_cache_decoding(fn: Callable) -> None:
    """Check a learner's decoding step ``fn(attention, token, cache) -> (output, cache)`` (Lab 8).

    The check holds the loop: it feeds a sequence ``x`` ``[B, T, D]`` (embeddings without
    positions) to ``fn`` one token at a time, ``token = x[:, t:t+1]`` ``[B, 1, D]``, with the
    cache ``fn`` returned at the step before (at step 0, empty keys and values ``[B, H, 0, Dh]``).
    A step must add the sinusoidal encoding of the token's position ``t`` (the number of tokens
    already in the cache; :func:`~attention_lab.positional.sinusoidal_encoding`), project the
    token with the module's ``q_proj``, ``k_proj`` and ``v_proj``, append its key and value to
    the cache, attend from its query to every cached position, project the merged heads with
    ``out_proj``, and return the output ``[B, 1, D]`` and the cache ``(keys, values)``, each
    ``[B, H, t + 1, Dh]``. The outputs of all steps must equal the module's causal
    self-attention on the whole sequence, ``attention(x + encoding, mask=causal_mask(T))``, and
    the cache its keys and values. A step sees only the tokens fed so far, and the rows that
    ``k_proj`` projects are counted: one token per step. Cases: two heads, a single token,
    four heads, one head, and a module in float64 (the output and cache keep its dtype).

    Mistakes it names: ``cache_wrong_axis``, ``positions_restart``, ``positions_off_by_one``,
    ``positions_one_behind``, ``position_from_wrong_axis``, ``no_positions``,
    ``positions_not_in_values``, ``positions_in_some_projections``,
    ``positions_after_projection``, ``positions_added_twice``, ``encoding_not_indexed``,
    ``encoding_one_row_short``, ``embedding_scaled``,
    ``value_from_wrong_layer``, ``key_from_wrong_layer``, ``query_from_wrong_layer``,
    ``projections_mixed_up``, ``weight_not_transposed``, ``projection_bias_missing``,
    ``cache_replaced``, ``cache_prepended``, ``appended_twice``, ``cache_not_split``,
    ``cache_not_returned``, ``cache_keys_values_swapped``, ``appended_after_attending``,
    ``keys_values_swapped``, ``attends_to_first_only``, ``weights_times_keys``,
    ``out_proj_missing``, ``out_proj_wrong_layer``, ``projection_missing``,
    ``mask_not_needed``, ``attends_to_itself_only``, ``residual_added``, ``output_squeezed``,
    ``prefix_recomputed``, ``batch_hard_coded``,
    ``step_not_a_pair``, ``softmax_axis``, ``no_softmax``, ``no_scaling``,
    ``scaled_by_sqrt_d_model``, ``scaled_by_d_k``, ``scale_multiplied``,
    ``scaled_by_sequence_length``, ``heads_and_width_swapped``, ``heads_interleaved``,
    ``merge_wrong_permutation``, ``heads_not_merged``, ``wrong_dtype`` (see :data:`MISTAKES`).

    Args:
        fn: The learner's step function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case (and the step) and the likely mistake, or where the result goes wrong (or
            saying that ``fn`` is still the stub).
    """
    check_callable(fn)
    cases = _decode_cases()
    fn_name = name_of(fn)

    for case in cases:
        attention, x = case.args
        batch, length, d_model = x.shape
        heads, head_dim = attention.num_heads, attention.head_dim

        outputs: list[torch.Tensor] = []  # the steps' outputs so far

        # The token vectors each projection received at the current step: (layer, rows).
        projected: list[tuple[str, int]] = []

        def widened(t: int, seen=projected, b=batch) -> bool:
            """Whether q_proj received t + 1 positions at step t: a token widened by the
            whole encoding table [t + 1, D]."""
            return t > 0 and ("q_proj", b * (t + 1)) in seen

        def error_hint(
            error: Exception,
            h=heads,
            dh=head_dim,
            b=batch,
            done=outputs,
            row=batch * d_model,
            args=case.args,
        ) -> str | None:
            text = str(error)
            t = len(done)  # the step that raised
            if f"is invalid for input of size {row * (t + 1)}" in text and widened(t):
                return "encoding_not_indexed"  # a token [B, t + 1, D] viewed as [B, 1, ...]
            if t == 0 and "out of bounds for dimension 0 with size 0" in text:
                return "encoding_one_row_short"  # sinusoidal_encoding(t, D)[t or -1] at t = 0
            if "does not broadcast to the attention scores" in text and "mask" in text:
                return "mask_not_needed"
            if f"broadcast shape [{b}, {h}, {t + 1}, {t + 1}]" in text:
                return "mask_not_needed"  # F.scaled_dot_product_attention, attn_mask [t+1, t+1]
            if f"Expected size {h} but got size {dh}" in text and h != dh:
                return "heads_and_width_swapped"  # a key [B, Dh, 1, H] beside the cache
            wrong_cat = "must match except in dimension" in text and "dimension 2" not in text
            wrong_heads = "do not broadcast together" in text or "must have the same Dk" in text
            if wrong_cat or wrong_heads:
                return "cache_wrong_axis"
            return "batch_hard_coded" if _right_for_one_sequence(fn, *args) else None

        expected_output, expected_keys, expected_values = _expected(attention, x)
        cache = _empty_cache(attention, batch, x.dtype)
        rows: list[int] = []  # the token vectors k_proj projected at each step
        for t in range(length):
            step = Case(f"{case.name}, step t={t}", (attention, x[:, t : t + 1], cache))
            projected.clear()
            hooks = [
                getattr(attention, name).register_forward_hook(
                    lambda module, inputs, output, name=name, seen=projected: seen.append(
                        (name, inputs[0].shape[:-1].numel())
                    )
                )
                for name in ("q_proj", "k_proj", "v_proj")
            ]
            try:
                result = run(fn, step, error_hint)
            finally:
                for hook in hooks:
                    hook.remove()
            if not (
                isinstance(result, tuple | list)
                and len(result) == 2
                and isinstance(result[0], torch.Tensor)
                and isinstance(result[1], tuple | list)
                and len(result[1]) == 2
                and all(isinstance(r, torch.Tensor) for r in result[1])
            ):
                fail(fn_name, step, f"it returned {type(result).__name__}", "step_not_a_pair")
            output, new_cache = result
            if output.shape != (batch, 1, d_model):
                fail(
                    fn_name,
                    step,
                    f"the output has shape {list(output.shape)}, expected {[batch, 1, d_model]}",
                    _output_shape_mistake(
                        output.shape, (batch, heads, t, head_dim, d_model), widened(t)
                    )
                    or ("batch_hard_coded" if _right_for_one_sequence(fn, *case.args) else None),
                    where=shape_where(output.shape, torch.Size((batch, 1, d_model))),
                )
            expected_shape = (batch, heads, t + 1, head_dim)
            for name, tensor, received in zip(("keys", "values"), new_cache, cache, strict=True):
                if tensor.shape != expected_shape:
                    fail(
                        fn_name,
                        step,
                        f"the cached {name} have shape {list(tensor.shape)}, expected "
                        f"{list(expected_shape)}",
                        _cache_shape_mistake(tensor, expected_shape, received),
                        where=shape_where(tensor.shape, torch.Size(expected_shape)),
                    )
            # The earlier tokens projected again: k_proj projects more rows at this step than
            # at the first, where there was nothing to project again. (A step that calls
            # k_proj twice on its one token projects as many rows at every step: its values
            # show what it did.)
            rows.append(sum(n for name, n in projected if name == "k_proj"))
            if t and rows[t] > max(rows[0], batch):
                fail(
                    fn_name,
                    step,
                    f"k_proj projected {rows[t]} token vectors at this step and {rows[0]} at "
                    "the first",
                    "prefix_recomputed",
                )
            outputs.append(output)
            cache = tuple(new_cache)
        got = (torch.cat(outputs, dim=1), *cache)
        expected = (expected_output, expected_keys, expected_values)
        tol = tolerance(x.dtype)
        variants = {key: _once(_decode_variant, attention, x, key) for key in _DEVIATIONS}

        def diagnose(got, variants=variants, expected=expected, case=case, tol=tol):
            mistake = match_variant(got, variants, tol)
            if mistake:
                return None  # compare names it
            if _right_for_one_sequence(fn, *case.args):
                return _problem(got, expected, tol), "batch_hard_coded"
            fail(
                fn_name, case, _problem(got, expected, tol), None, where=_where(got, expected, tol)
            )

        # No NaN step: a NaN shows as a difference. The dtype step matters in the float64
        # case, where a cache made without dtype= turns float32.
        compare(
            fn_name,
            case,
            [
                Result("outputs", got[0], expected_output, finite=False),
                Result("cached keys", got[1], expected_keys, finite=False),
                Result("cached values", got[2], expected_values, finite=False),
            ],
            tol,
            variants=variants,
            diagnose=diagnose,
        )
    success(fn, cases)


def _problem(got, expected, tol) -> str:
    """The first result that differs and by how much, as compare says it."""
    for name, g, e in zip(("outputs", "cached keys", "cached values"), got, expected, strict=True):
        if not torch.allclose(g.double(), e.double(), atol=tol[0], rtol=tol[1]):
            return f"{the(name, 'differs')}: {difference(g, e)}"
    return "the results differ"


def _where(got, expected, tol) -> str:
    """Which steps' outputs and which positions of the cache differ."""
    out_steps = differing(got[0], expected[0], 1, *tol)
    key_rows = differing(got[1], expected[1], 2, *tol)
    value_rows = differing(got[2], expected[2], 2, *tol)
    parts = []
    if out_steps:
        first = out_steps[0]
        parts.append(
            f"the outputs are right up to step {first - 1} and differ from step {first} on"
            if first
            else "the output differs from the first step on"
        )
    for name, rows in (("keys", key_rows), ("values", value_rows)):
        if rows:
            parts.append(f"the cached {name} differ at positions {listed(rows)}")
        else:
            parts.append(f"the cached {name} are right")
    if not key_rows and not value_rows and out_steps:
        parts.append("so look at the attention from the new query to the cache, or at out_proj")
    return "; ".join(parts)
