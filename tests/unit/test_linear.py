"""``attention_lab.linear``: linear attention's three forms against each other and against the
formula written out, and the delta rule against the code Qwen3-Next and Kimi Linear run
(transformers' ``torch_recurrent_gated_delta_rule``, ``torch_chunk_gated_delta_rule``,
``recurrent_kimi_delta_attention`` and ``chunk_kimi_delta_attention``, their PyTorch paths), and
``GatedDeltaNet.from_hf`` against ``Qwen3NextGatedDeltaNet`` (small random configurations)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab.linear import (
    FEATURE_MAPS,
    RULES,
    GatedDeltaNet,
    delta_rule,
    linear_attention,
)
from support.tensors import random_inputs

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import Qwen3NextConfig
    from transformers.models.kimi_linear.modeling_kimi_linear import (
        chunk_kimi_delta_attention,
        recurrent_kimi_delta_attention,
    )
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        Qwen3NextGatedDeltaNet,
        torch_chunk_gated_delta_rule,
        torch_recurrent_gated_delta_rule,
    )

pytestmark = pytest.mark.usefixtures("one_thread")


def written_out(query, key, value, phi, causal, normalize):
    """Linear attention one query and one key at a time, in float64."""
    q, k, v = phi(query.double()), phi(key.double()), value.double()
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64)
    length = q.shape[-2]
    for i in range(length):
        total = torch.zeros(*q.shape[:-2], v.shape[-1], dtype=torch.float64)
        norm = torch.zeros(*q.shape[:-2], 1, dtype=torch.float64)
        for j in range(i + 1 if causal else length):
            similarity = (q[..., i, :] * k[..., j, :]).sum(-1, keepdim=True)
            total, norm = total + similarity * v[..., j, :], norm + similarity
        out[..., i, :] = total / norm if normalize else total
    return out


@settings(max_examples=25, deadline=None)
@given(
    length=st.integers(1, 11),
    widths=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    causal=st.booleans(),
    normalize=st.booleans(),
    feature_map=st.sampled_from(["elu+1", "relu", None]),
    chunk_size=st.integers(1, 12),
    seed=st.integers(0, 2**16),
)
def test_the_three_forms_are_the_formula_written_out(
    length, widths, causal, normalize, feature_map, chunk_size, seed
):
    if feature_map != "elu+1":
        normalize = False  # relu's sum can be 0 (an error), the identity's any sign (refused)
    dk, dv = widths
    q, k, v = random_inputs([(2, 3, length, dk), (2, 3, length, dk), (2, 3, length, dv)], seed=seed)
    phi = FEATURE_MAPS.get(feature_map, lambda x: x)
    expected = written_out(q, k, v, phi, causal, normalize).float()
    for form in ("parallel", "recurrent", "chunked"):
        got = linear_attention(
            q,
            k,
            v,
            feature_map=feature_map,
            causal=causal,
            form=form,
            chunk_size=chunk_size,
            normalize=normalize,
        )
        assert got.dtype == torch.float32 and got.shape == (2, 3, length, dv)
        torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-5, msg=form)


def test_a_callable_feature_map_and_the_dtype_are_kept():
    q, k, v = random_inputs([(1, 2, 6, 4)] * 3, torch.float64, seed=1)
    got = linear_attention(q, k, v, feature_map=torch.exp, form="chunked", chunk_size=4)
    expected = written_out(q, k, v, torch.exp, causal=True, normalize=True)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected)
    half = linear_attention(q.half(), k.half(), v.half(), form="recurrent")
    assert half.dtype == torch.float16  # computed in float32, rounded once at the end
    expected = linear_attention(q.half().float(), k.half().float(), v.half().float())
    torch.testing.assert_close(half, expected.half())


def test_an_empty_sequence_gives_an_empty_output():
    empty = torch.zeros(2, 3, 0, 4)
    for form in ("parallel", "recurrent", "chunked"):
        assert linear_attention(empty, empty, empty, form=form).shape == (2, 3, 0, 4)
    state = torch.ones(2, 3, 4, 4)
    out, passed = delta_rule(
        empty, empty, empty, torch.zeros(2, 3, 0), initial_state=state, return_state=True
    )
    assert out.shape == (2, 3, 0, 4) and torch.equal(passed, state)


# --- The delta rule against the models' code --------------------------------------------------


def to_models(x):
    """[B, H, T, ...] -> the models' [B, T, H, ...]."""
    return x.transpose(1, 2)


def delta_inputs(batch, key_heads, value_heads, length, dk, dv, *, channel_decay, seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "query": torch.randn(batch, key_heads, length, dk, generator=g),
        "key": torch.randn(batch, key_heads, length, dk, generator=g),
        "value": torch.randn(batch, value_heads, length, dv, generator=g),
        "beta": torch.rand(batch, value_heads, length, generator=g),
        "decay": -0.5
        * torch.rand(batch, value_heads, length, *((dk,) if channel_decay else ()), generator=g),
        "state": torch.randn(batch, value_heads, dk, dv, generator=g),
    }


QWEN_SHAPES = [  # (B, Hk, Hv, T, Dk, Dv): value heads grouped 1, 2 and 4 to a key head
    (2, 2, 2, 19, 8, 6),
    (1, 2, 4, 37, 8, 5),
    (2, 1, 4, 64, 4, 4),
]


def agrees_with_the_models(x, state, chunk_size, recurrent, chunked):
    """Our rule on ``x`` (``delta_inputs``) against a model's two functions, each called as
    transformers' signatures take them: output and final state, within float32's rounding."""
    args = [to_models(x[n]) for n in ("query", "key", "value", "decay", "beta")]
    references = (
        recurrent(*args, state, True, use_qk_l2norm_in_kernel=True),
        chunked(
            *args,
            chunk_size=16,
            initial_state=state,
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        ),
    )
    ours, ours_state = delta_rule(
        *(x[n] for n in ("query", "key", "value", "beta")),
        decay=x["decay"],
        chunk_size=chunk_size,
        initial_state=state,
        return_state=True,
        qk_l2norm=True,
    )
    for reference, reference_state in references:
        torch.testing.assert_close(ours, to_models(reference), atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(ours_state, reference_state, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "shape", QWEN_SHAPES, ids=lambda s: "B{}-Hk{}-Hv{}-T{}-Dk{}-Dv{}".format(*s)
)
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "initial_state"])
@pytest.mark.parametrize("chunk_size", [None, 1, 7, 16, 64], ids=lambda c: f"chunk{c}")
def test_gated_delta_rule_is_qwen3_next_s(shape, with_state, chunk_size):
    x = delta_inputs(*shape, channel_decay=False, seed=7)
    state = x["state"] if with_state else None
    agrees_with_the_models(
        x, state, chunk_size, torch_recurrent_gated_delta_rule, torch_chunk_gated_delta_rule
    )


@pytest.mark.parametrize("chunk_size", [None, 5, 64], ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "initial_state"])
def test_a_decay_per_key_channel_is_kimi_delta_attention_s(chunk_size, with_state):
    x = delta_inputs(2, 3, 3, 41, 8, 6, channel_decay=True, seed=11)
    state = x["state"] if with_state else None
    agrees_with_the_models(
        x, state, chunk_size, recurrent_kimi_delta_attention, chunk_kimi_delta_attention
    )


def test_without_a_decay_it_is_deltanet_the_models_rule_with_no_forgetting():
    x = delta_inputs(1, 2, 2, 23, 4, 3, channel_decay=False, seed=3)
    args = [to_models(x[n]) for n in ("query", "key", "value")]
    zero = torch.zeros_like(to_models(x["beta"]))
    reference, _ = torch_recurrent_gated_delta_rule(
        *args, zero, to_models(x["beta"]), use_qk_l2norm_in_kernel=True
    )
    for chunk_size in (None, 8):
        ours = delta_rule(
            x["query"], x["key"], x["value"], x["beta"], chunk_size=chunk_size, qk_l2norm=True
        )
        torch.testing.assert_close(ours, to_models(reference), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("channel_decay", [False, True], ids=["per_head", "per_channel"])
@pytest.mark.parametrize("cut", [1, 10, 22])
def test_a_sequence_fed_in_pieces_gives_the_whole(channel_decay, cut):
    x = delta_inputs(2, 2, 4, 23, 6, 5, channel_decay=channel_decay, seed=5)
    names = ("query", "key", "value", "beta", "decay")
    whole, whole_state = delta_rule(
        *(x[n] for n in names[:4]), decay=x["decay"], return_state=True, qk_l2norm=True
    )
    first, state = delta_rule(
        *(x[n][:, :, :cut] for n in names[:4]),
        decay=x["decay"][:, :, :cut],
        return_state=True,
        qk_l2norm=True,
    )
    rest, final = delta_rule(
        *(x[n][:, :, cut:] for n in names[:4]),
        decay=x["decay"][:, :, cut:],
        chunk_size=4,
        initial_state=state,
        return_state=True,
        qk_l2norm=True,
    )
    torch.testing.assert_close(torch.cat([first, rest], dim=2), whole, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(final, whole_state, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("channel_decay", [False, True], ids=["per_head", "per_channel"])
def test_chunks_keep_small_decays_after_a_large_one_and_forget_at_minus_infinity(channel_decay):
    # A running sum of log decays would swamp the -0.01 steps after a -1e6 one in float32.
    x = delta_inputs(1, 2, 2, 70, 4, 3, channel_decay=channel_decay, seed=8)
    decay = torch.full_like(x["decay"], -0.01)
    decay[:, :, 0] = -1e6
    decay[:, :, 40] = float("-inf")  # a factor of 0: the state is wiped
    args = (x["query"], x["key"], x["value"], x["beta"])
    recurrent = delta_rule(*args, decay=decay, qk_l2norm=True)
    for chunk_size in (16, 64):
        chunked = delta_rule(*args, decay=decay, chunk_size=chunk_size, qk_l2norm=True)
        assert not chunked.isnan().any()
        torch.testing.assert_close(chunked, recurrent, atol=2e-6, rtol=1e-5)
    # After the wipe the output is that of a sequence that starts at position 40.
    start = delta_rule(*(a[:, :, 40:] for a in args), decay=decay[:, :, 40:], qk_l2norm=True)
    torch.testing.assert_close(recurrent[:, :, 40:], start, atol=2e-6, rtol=1e-5)


def test_chunks_agree_with_the_recurrence_on_keys_of_any_length():
    # Without the unit-length keys the state may grow; in float64 both forms still agree.
    x = delta_inputs(2, 1, 3, 33, 5, 4, channel_decay=True, seed=12)
    args = [x[n].double() for n in ("query", "key", "value", "beta")]
    recurrent = delta_rule(*args, decay=x["decay"].double())
    chunked = delta_rule(*args, decay=x["decay"].double(), chunk_size=8)
    torch.testing.assert_close(chunked, recurrent, atol=1e-9, rtol=1e-9)


def test_with_unit_keys_a_full_step_writes_the_value_exactly():
    # beta = 1, no decay: after the step, the state maps the (unit) key to its value exactly.
    key, value, start = random_inputs([(1, 1, 1, 4), (1, 1, 1, 3), (1, 1, 4, 3)], torch.float64, 9)
    key = F.normalize(key, dim=-1)
    _, state = delta_rule(
        key, key, value, torch.ones(1, 1, 1, dtype=torch.float64),
        initial_state=start, return_state=True,
    )  # fmt: skip
    torch.testing.assert_close(key[0, 0] @ state[0, 0], value[0, 0])


def test_the_dtype_is_kept_and_float16_computes_in_float32():
    x = delta_inputs(1, 1, 1, 9, 4, 4, channel_decay=False, seed=2)
    half = delta_rule(
        x["query"].half(), x["key"].half(), x["value"].half(), x["beta"].half(),
        decay=x["decay"].half(), qk_l2norm=True,
    )  # fmt: skip
    full = delta_rule(
        x["query"].half().float(), x["key"].half().float(), x["value"].half().float(),
        x["beta"].half().float(), decay=x["decay"].half().float(), qk_l2norm=True,
    )  # fmt: skip
    assert half.dtype == torch.float16
    torch.testing.assert_close(half, full.half())


# --- The layer -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("key_heads", "value_heads"), [(2, 2), (2, 4), (1, 3)])
@pytest.mark.parametrize("chunk_size", [None, 8, 64], ids=lambda c: f"chunk{c}")
def test_gated_deltanet_is_qwen3_next_s_layer(key_heads, value_heads, chunk_size):
    torch.manual_seed(0)  # modules draw their weights from the global generator
    config = Qwen3NextConfig(
        hidden_size=32,
        linear_num_key_heads=key_heads,
        linear_num_value_heads=value_heads,
        linear_key_head_dim=8,
        linear_value_head_dim=6,
        linear_conv_kernel_dim=4,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=64,
        vocab_size=50,
    )
    reference = Qwen3NextGatedDeltaNet(config, layer_idx=0).eval()
    assert reference.layer_type == "linear_attention"
    with torch.no_grad():  # every weight random, the norm's and the gates' included
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.3)
        reference.A_log.uniform_(-1.0, 1.0)
    ours = GatedDeltaNet.from_hf(reference, chunk_size=chunk_size).eval()
    x = random_inputs([(2, 19, 32)], seed=1)[0]
    with torch.no_grad():
        expected = reference(x)
        got = ours(x)
    assert expected.abs().mean() > 0.1  # a layer that does something
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_gated_deltanet_decodes_as_qwen3_next_s_layer_does_with_its_cache():
    """A prompt, then token by token, then a piece: our RecurrentState against transformers'
    DynamicCache of the same configuration (its conv and recurrent states), step by step."""
    from transformers import DynamicCache

    torch.manual_seed(0)
    config = Qwen3NextConfig(
        hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        intermediate_size=64, vocab_size=50,
    )  # fmt: skip
    reference = Qwen3NextGatedDeltaNet(config, layer_idx=0).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.3)
        reference.A_log.uniform_(-1.0, 1.0)
    ours = GatedDeltaNet.from_hf(reference).eval()
    x = random_inputs([(2, 12, 32)], seed=2)[0]
    cache, state = DynamicCache(config=config), ours.new_state(2, max_len=12)
    start = 0
    with torch.no_grad():
        whole = ours(x)
        for size in (5, 1, 1, 2, 3):
            piece = x[:, start : start + size]
            expected = reference(piece, cache_params=cache)
            got = ours(piece, state)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(got, whole[:, start : start + size], atol=1e-5, rtol=1e-5)
            start += size
    assert len(state) == 12
    torch.testing.assert_close(state.state, cache.get_recurrent_state(0, state_idx=0))
    assert expected.abs().mean() > 0.1  # a layer that does something


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("chunk_size", [None, 4], ids=lambda c: f"chunk{c}")
def test_every_rule_fed_in_pieces_with_its_state_gives_the_whole(rule, chunk_size):
    layer = _random_layer(rule, chunk_size=chunk_size)
    x = random_inputs([(2, 13, 24)], seed=5)[0]
    state = layer.new_state(2, max_len=13)
    with torch.no_grad():
        whole = layer(x)
        pieces = [layer(x[:, a:b], state) for a, b in ((0, 1), (1, 3), (3, 9), (9, 10), (10, 13))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=1e-5, rtol=1e-4)
    assert len(state) == 13
    assert state.conv.shape == (2, layer.conv.in_channels, 3)
    torch.testing.assert_close(  # the window holds the convolution's last three inputs
        state.conv,
        torch.cat([layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)], -1)[:, -3:].mT,
    )


def test_a_call_that_fails_leaves_the_state_as_it_was_and_detach_cuts_the_graph():
    layer = _random_layer("gated_delta", chunk_size=None)
    state = layer.new_state(2, max_len=6)
    x = random_inputs([(2, 4, 24)], seed=6)[0]
    with torch.no_grad():
        layer(x[:, :2], state)
    before = (state.state.clone(), state.conv.clone(), len(state))
    with pytest.raises(RuntimeError):  # a width the projections do not take
        layer(torch.zeros(2, 1, 23, dtype=x.dtype), state)
    with pytest.raises(ValueError, match="holds 2 positions and max_len=6: 5 more"):
        layer(torch.zeros(2, 5, 24, dtype=x.dtype), state)
    with pytest.raises(TypeError, match="state holds torch.float32, the layer computes in"):
        layer.double()(x[:, :1].double(), state)
    layer.float()
    assert torch.equal(state.state, before[0]) and torch.equal(state.conv, before[1])
    assert len(state) == before[2] == 2
    out = layer(x[:, 2:3].requires_grad_(), state)
    assert state.state.requires_grad and not state.detach().state.requires_grad
    out.sum().backward()  # the piece's own graph is intact


def _random_layer(rule, chunk_size=8, seed=0):
    torch.manual_seed(seed)  # modules draw their weights from the global generator
    layer = GatedDeltaNet(24, 2, 4, 6, 5, rule=rule, chunk_size=chunk_size).eval()
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(0.0, 0.3)
    return layer


def test_the_delta_rule_is_the_gated_layer_that_never_forgets():
    gated, plain = _random_layer("gated_delta"), _random_layer("delta")
    assert not hasattr(plain, "decay_proj") and not hasattr(plain, "A_log")
    shared = {
        name: p for name, p in gated.named_parameters() if name in dict(plain.named_parameters())
    }
    plain.load_state_dict(shared)  # every weight of the plain layer, from the gated one
    with torch.no_grad():
        gated.A_log.fill_(float("-inf"))  # decay = -exp(A_log) * softplus(...) = 0
        x = random_inputs([(2, 13, 24)], seed=1)[0]
        assert (plain(x) - _random_layer("delta", seed=5)(x)).abs().max() > 1e-2  # weights matter
        torch.testing.assert_close(plain(x), gated(x))


def test_the_linear_rule_is_the_sum_over_earlier_positions_written_out():
    layer = _random_layer("linear")
    assert not hasattr(layer, "beta_proj")
    x = random_inputs([(2, 13, 24)], seed=2)[0]
    with torch.no_grad():
        got = layer(x)
        # The layer's projections and convolution, then the quadratic formula by hand.
        mixed = torch.cat([layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)], dim=-1)
        mixed = F.silu(layer.conv(mixed.transpose(1, 2))[..., :13]).transpose(1, 2)
        q, k, v = mixed.split([12, 12, 20], dim=-1)
        q = F.elu(q.reshape(2, 13, 2, 6)) + 1  # [B, T, Hk, Dk]
        k = F.elu(k.reshape(2, 13, 2, 6)) + 1
        v = v.reshape(2, 13, 4, 5)  # [B, T, Hv, Dv]; value heads 0, 1 read key head 0
        q, k = q.repeat_interleave(2, dim=2), k.repeat_interleave(2, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k).tril()  # [B, Hv, T, T], j <= t only
        out = torch.einsum("bhts,bshd->bthd", scores, v)  # [B, T, Hv, Dv]
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + layer.eps)
        gate = layer.gate_proj(x).reshape(2, 13, 4, 5)
        out = layer.norm_weight * out * F.silu(gate)
        expected = layer.out_proj(out.reshape(2, 13, 20))
    assert expected.abs().mean() > 0.05
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("rule", RULES)
def test_every_rule_is_causal_and_its_chunks_are_the_recurrence(rule):
    chunked, stepped = _random_layer(rule, chunk_size=4), _random_layer(rule, chunk_size=None)
    x = random_inputs([(2, 11, 24)], seed=3)[0]
    changed = x.clone()
    changed[:, 7:] = random_inputs([(2, 4, 24)], seed=4)[0]
    with torch.no_grad():
        out = chunked(x)
        torch.testing.assert_close(stepped(x), out, atol=1e-5, rtol=1e-4)
        later = chunked(changed)
    torch.testing.assert_close(later[:, :7], out[:, :7])  # the past never reads the future
    assert (later[:, 7:] - out[:, 7:]).abs().max() > 1e-3


def test_gated_deltanet_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="rule must be one of"):
        GatedDeltaNet(32, 2, 2, 8, 6, rule="mamba")


def test_gated_deltanet_refuses_heads_that_do_not_group():
    with pytest.raises(ValueError, match="multiple of num_key_heads"):
        GatedDeltaNet(32, 2, 3, 8, 6)
    with pytest.raises(ValueError, match=r"x must be a tensor \[B, T, D\]"):
        GatedDeltaNet(32, 2, 4, 8, 6)(torch.zeros(19, 32))


# --- Bad input ----------------------------------------------------------------------------------


def test_linear_attention_refuses_bad_input():
    q = k = v = torch.zeros(1, 2, 5, 4)
    with pytest.raises(ValueError, match="form must be one of"):
        linear_attention(q, k, v, form="fast")
    with pytest.raises(ValueError, match="feature_map must be one of"):
        linear_attention(q, k, v, feature_map="softplus")
    with pytest.raises(ValueError, match="pass normalize=False"):
        linear_attention(q, k, v, feature_map=None)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        linear_attention(q, k, v, form="chunked", chunk_size=0)
    with pytest.raises(ValueError, match="same shape"):
        linear_attention(q, torch.zeros(1, 2, 6, 4), v)
    with pytest.raises(ValueError, match="value must be"):
        linear_attention(q, k, torch.zeros(1, 2, 6, 4))
    with pytest.raises(TypeError, match="floating"):
        linear_attention(q, k, torch.zeros(1, 2, 5, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="keep the shape"):
        linear_attention(q, k, v, feature_map=lambda x: x.sum(-1))
    with pytest.raises(ValueError, match="normaliser .* is 0"):  # relu of negative queries
        linear_attention(-torch.ones(1, 2, 5, 4), k + 1, v, feature_map="relu")
    with pytest.raises(TypeError, match="share one dtype"):
        linear_attention(q, k.double(), v)


def test_delta_rule_refuses_bad_input():
    x = delta_inputs(1, 2, 4, 5, 3, 2, channel_decay=False, seed=1)
    q, k, v, beta = x["query"], x["key"], x["value"], x["beta"]
    with pytest.raises(ValueError, match="multiple of the key heads"):
        delta_rule(q, k, v[:, :3], beta[:, :3])
    with pytest.raises(ValueError, match="same shape"):
        delta_rule(q, k[..., :2], v, beta)
    with pytest.raises(ValueError, match=r"value must be \[B, Hv, T, Dv\]"):
        delta_rule(q, k, v[:, :, :4], beta)
    with pytest.raises(ValueError, match=r"beta must lie in \[0, 1\]"):
        delta_rule(q, k, v, beta + 1)
    with pytest.raises(ValueError, match="beta must be a tensor"):
        delta_rule(q, k, v, beta[:, :2])
    with pytest.raises(ValueError, match="must be <= 0"):
        delta_rule(q, k, v, beta, decay=-x["decay"] + 0.1)
    with pytest.raises(ValueError, match="decay must be"):
        delta_rule(q, k, v, beta, decay=x["decay"][..., None].expand(-1, -1, -1, 5))
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        delta_rule(q, k, v, beta, chunk_size=0)
    with pytest.raises(ValueError, match="initial_state must be"):
        delta_rule(q, k, v, beta, initial_state=torch.zeros(1, 4, 3, 3))
    with pytest.raises(TypeError, match="return_state must be a bool"):
        delta_rule(q, k, v, beta, return_state=1)
    with pytest.raises(TypeError, match="share one dtype"):
        delta_rule(q, k.double(), v, beta)
    with pytest.raises(TypeError, match="beta must be a floating tensor"):
        delta_rule(q, k, v, (beta > 0.5).long())
    with pytest.raises(ValueError, match="must be <= 0"):
        delta_rule(q, k, v, beta, decay=torch.full_like(beta, float("nan")))


# --- what a hybrid holds: attention_lab.caches.HybridShape and PUBLISHED_HYBRID_SHAPES --------

# Kimi-Linear-48B-A3B's config.json (moonshotai, 2025): its linear_attn_config, whose layer
# lists (1-indexed) KimiLinearConfig reads; the class's own default layer_types differ.
KIMI_LINEAR_ATTN_CONFIG = {
    "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
    "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
    "head_dim": 128,
    "num_heads": 32,
    "short_conv_kernel_size": 4,
}


def independent_count(config, context, batch, bytes_per_number, latent=False):
    """Cache, state and all-attention bytes counted from a transformers config's own fields."""
    full = config.layer_types.count("full_attention")
    linear = config.layer_types.count("linear_attention")
    assert full + linear == config.num_hidden_layers
    if latent:  # MLA: the latent and the decoupled RoPE key, per position and layer
        per_layer = config.kv_lora_rank + config.qk_rope_head_dim
        heads = values = config.linear_num_heads
        key_heads, width, conv = heads, config.linear_head_dim, config.linear_conv_kernel_dim
        key_width = value_width = width
    else:
        per_layer = 2 * config.num_key_value_heads * config.head_dim
        key_heads, heads = config.linear_num_key_heads, config.linear_num_value_heads
        key_width, value_width = config.linear_key_head_dim, config.linear_value_head_dim
        conv = config.linear_conv_kernel_dim
        values = heads
    per_sequence = context * batch * bytes_per_number
    state = heads * key_width * value_width
    window = (conv - 1) * (2 * key_heads * key_width + values * value_width)
    return (
        full * per_layer * per_sequence,
        linear * (state + window) * batch * bytes_per_number,
        config.num_hidden_layers * per_layer * per_sequence,
    )


@pytest.mark.parametrize("context", [0, 1, 4096, 32_768, 262_144, 1_048_576])
@pytest.mark.parametrize(("batch", "bytes_per_number"), [(1, 2), (8, 4), (3, 1)])
@pytest.mark.parametrize("name", ["Qwen3-Next-80B-A3B", "Kimi-Linear-48B-A3B"])
def test_published_hybrids_hold_what_their_configurations_say(
    name, context, batch, bytes_per_number
):
    from transformers import KimiLinearConfig

    from attention_lab.caches import PUBLISHED_HYBRID_SHAPES

    if name == "Qwen3-Next-80B-A3B":  # the class's defaults are the release's
        config, latent = Qwen3NextConfig(), False
    else:
        config, latent = KimiLinearConfig(linear_attn_config=KIMI_LINEAR_ATTN_CONFIG), True
        assert KimiLinearConfig().layer_types.count("full_attention") == 6  # not the release's
    shape = PUBLISHED_HYBRID_SHAPES[name]
    assert shape.attention.kind == ("latent" if latent else "grouped-query")
    assert shape.num_layers == config.num_hidden_layers
    memory = shape.memory_bytes(context, batch_size=batch, bytes_per_number=bytes_per_number)
    cache, state, all_attention = independent_count(
        config, context, batch, bytes_per_number, latent
    )
    assert (memory.cache, memory.state, memory.all_attention) == (cache, state, all_attention)
    assert memory.total == cache + state


def test_a_hybrid_s_state_is_the_size_of_what_delta_rule_and_the_layer_keep():
    # A small hybrid, its state counted against the tensors the library's code keeps: the state
    # delta_rule returns, and the last conv_size - 1 inputs of GatedDeltaNet's convolution.
    from attention_lab.caches import CacheShape, HybridShape

    batch, key_heads, value_heads, key_dim, value_dim, conv_size = 3, 2, 4, 5, 6, 4
    shape = HybridShape(
        attention=CacheShape(num_layers=1, num_heads=4, head_dim=8, num_kv_heads=2),
        num_linear_layers=3,
        num_key_heads=key_heads,
        num_value_heads=value_heads,
        key_dim=key_dim,
        value_dim=value_dim,
        conv_size=conv_size,
    )
    length = 7
    query, key = torch.randn(2, batch, key_heads, length, key_dim)
    value = torch.randn(batch, value_heads, length, value_dim)
    beta = torch.rand(batch, value_heads, length)
    _, state = delta_rule(query, key, value, beta, return_state=True)  # float32
    layer = GatedDeltaNet(16, key_heads, value_heads, key_dim, value_dim, conv_size=conv_size)
    channels, _, kernel = layer.conv.weight.shape  # depthwise: [channels, 1, conv_size]
    window = torch.zeros(batch, channels, kernel - 1)  # the inputs the next step still needs
    one_layer = state.nbytes + window.nbytes
    memory = shape.memory_bytes(length, batch_size=batch, bytes_per_number=4)
    assert memory.state == shape.num_linear_layers * one_layer
    assert shape.memory_bytes(10 * length, batch_size=batch, bytes_per_number=4).state == (
        memory.state
    )  # the same at any context
    assert memory.cache == shape.attention.cache_bytes(length, batch_size=batch, bytes_per_number=4)
    assert memory.all_attention == 4 * memory.cache  # 4 layers of attention instead of 1


def test_a_hybrid_shape_refuses_bad_input():
    from attention_lab.caches import CacheShape, HybridShape

    attention = CacheShape(num_layers=1, num_heads=2, head_dim=4)
    sizes = dict(
        num_linear_layers=1, num_key_heads=2, num_value_heads=4, key_dim=4, value_dim=4, conv_size=4
    )
    with pytest.raises(TypeError, match="CacheShape"):
        HybridShape(attention={"num_layers": 1}, **sizes)
    with pytest.raises(ValueError, match="multiple of num_key_heads"):
        HybridShape(attention=attention, **{**sizes, "num_value_heads": 3})
    with pytest.raises(ValueError, match="num_linear_layers"):
        HybridShape(attention=attention, **{**sizes, "num_linear_layers": 0})
    shape = HybridShape(attention=attention, **sizes)
    with pytest.raises(ValueError, match="context"):
        shape.memory_bytes(-1)
    with pytest.raises(TypeError, match="batch_size"):
        shape.memory_bytes(8, batch_size=1.5)
