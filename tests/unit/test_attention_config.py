"""AttentionConfig: every combination of Part VI's options either builds a working
MultiHeadAttention or raises a clear error naming a field it got wrong."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab.attention import MultiHeadAttention
from attention_lab.attention_config import AttentionConfig
from attention_lab.masks import causal_mask
from support.tensors import random_inputs

LINEAR = {"rope_type": "linear", "factor": 2.0}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}

# Each field's values: good ones, and bad ones with the error they must raise.
FIELDS = {
    "num_kv_heads": [None, 1, 2, 3, 4, (0, ValueError), (2.0, TypeError)],
    "head_dim": [None, 3, 4, 6, (0, ValueError), ("4", TypeError)],
    "qk_norm": [False, True, (1, TypeError)],
    "norm_eps": [1e-6, 1e-5, (0.0, ValueError)],
    "rope_layout": [None, "half", "interleaved", ("neox", ValueError)],
    "rope_base": [10000.0, 500.0, (1.0, ValueError)],
    "rope_scaling": [None, LINEAR, DYNAMIC, ({"rope_type": "cubic"}, ValueError)],
    "alibi": [False, True, ("yes", TypeError)],
    "sinks": [False, True, (None, TypeError)],
    "softcap": [None, 5.0, (0.0, ValueError), ("5", TypeError)],
    "top_k": [None, 1, 3, 9, (0, ValueError), (2.0, TypeError)],
}


DEFAULTS = {field.name: field.default for field in dataclasses.fields(AttentionConfig)}


def rule_breaks(fields, d_model, num_heads):
    """The names of the fields a configuration gets wrong, found without the library: bad
    values, the combinations with no meaning, and sizes that do not fit the layer. A field
    with a bad value counts as its default in the combinations."""
    broken = {name for name, value in fields.items() if isinstance(value, tuple)}
    value = {name: DEFAULTS[name] if name in broken else v for name, v in fields.items()}
    rope = value["rope_layout"] is not None
    if not rope and (value["rope_scaling"] is not None or value["rope_base"] != 10000.0):
        broken |= {"rope_base", "rope_scaling"}
    if value["norm_eps"] != 1e-6 and not value["qk_norm"]:
        broken |= {"norm_eps", "qk_norm"}
    if rope and value["alibi"]:
        broken |= {"alibi", "rope_layout"}
    kv_heads = value["num_kv_heads"] or num_heads
    if num_heads % kv_heads:
        broken |= {"num_kv_heads", "num_heads"}
    head_dim = value["head_dim"]
    if head_dim is None and d_model % num_heads:
        broken |= {"d_model", "num_heads"}
    elif rope and (head_dim or d_model // num_heads) % 2:
        broken |= {"head_dim"}
    elif rope and value["rope_scaling"] is DYNAMIC and (head_dim or d_model // num_heads) == 2:
        broken |= {"head_dim", "rope_scaling"}  # dynamic NTK's exponent Dh / (Dh - 2)
    return broken


@settings(max_examples=300, deadline=None)
@given(
    fields=st.fixed_dictionaries(
        {name: st.sampled_from(values) for name, values in FIELDS.items()}
    ),
    d_model=st.sampled_from([8, 12, 16]),
    num_heads=st.sampled_from([1, 2, 4]),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_every_combination_builds_a_working_layer_or_raises_naming_a_field(
    fields, d_model, num_heads, bias, seed
):
    broken = rule_breaks(fields, d_model, num_heads)
    values = {name: v[0] if isinstance(v, tuple) else v for name, v in fields.items()}
    errors = (ValueError, *{v[1] for v in fields.values() if isinstance(v, tuple)})

    def build():
        config = AttentionConfig(**values)
        return MultiHeadAttention(d_model, num_heads, config=config, bias=bias).double().eval()

    if broken:
        with pytest.raises(errors) as raised:
            build()
        assert any(name in str(raised.value) for name in broken), (broken, raised.value)
        return
    attention = build()
    config = attention.config
    head_dim = config.head_dim or d_model // num_heads
    kv_heads = config.num_kv_heads or num_heads
    assert attention.k_proj.out_features == kv_heads * head_dim
    assert (attention.rotary is not None) is (config.rope_layout is not None)
    assert (attention.q_norm is not None) is config.qk_norm
    assert (attention.sink_logits is not None) is config.sinks
    if config.sinks:
        with torch.no_grad():
            attention.sink_logits.normal_()
    (x,) = random_inputs([[2, 5, d_model]], torch.float64, seed=seed)
    output, weights = attention(x, mask=causal_mask(5))
    assert output.shape == (2, 5, d_model) and weights.shape == (2, num_heads, 5, 5)
    assert torch.isfinite(output).all()
    sums = weights.sum(dim=-1)
    if config.sinks:
        assert (sums < 1).all()  # the sink takes part of every row's weight
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))


def test_config_is_frozen_and_its_scaling_a_read_only_copy():
    scaling = dict(LINEAR)
    config = AttentionConfig(rope_layout="half", rope_scaling=scaling)
    scaling["factor"] = 8.0
    assert config.rope_scaling["factor"] == 2.0
    with pytest.raises(TypeError):
        config.rope_scaling["factor"] = 4.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.alibi = True
    assert config == AttentionConfig(rope_layout="half", rope_scaling=LINEAR)


def test_a_layer_refuses_what_is_not_a_config():
    with pytest.raises(TypeError, match="config must be None or an AttentionConfig"):
        MultiHeadAttention(8, 2, config={"num_kv_heads": 1})


def test_no_config_is_the_attention_of_2017():
    attention = MultiHeadAttention(8, 2)
    assert attention.config == AttentionConfig()
    assert attention.score_modifiers(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)) is None
    assert {name for name, _ in attention.named_parameters()} == {
        f"{proj}.{kind}"
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj")
        for kind in ("weight", "bias")
    }
