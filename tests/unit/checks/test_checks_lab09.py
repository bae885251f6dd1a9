"""Lab 9's check: right implementations of grouped-query attention written in other ways
pass; each mistake of its catalogue, written the way a learner writes it, is named; an unknown
one is located.

The implementations it runs are in ``support/implementations/lab09.py``.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from attention_lab.attention import MultiHeadAttention
from attention_lab.attention_config import AttentionConfig
from attention_lab.checks import MISTAKES, check_grouped_query_attention
from attention_lab.checks.grouped_query import grouped_query_reference
from support.implementations.lab09 import RIGHT, WRONG, attend, with_repeat_interleave
from support.messages import flat


@pytest.mark.parametrize("fn", RIGHT, ids=[fn.__name__ for fn in RIGHT])
def test_right_implementations_pass(fn, capsys):
    check_grouped_query_attention(fn)
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (6, 3), (6, 2), (4, 1), (3, 3)])
def test_the_reference_is_pytorchs_enable_gqa_and_the_module(heads, kv_heads):
    g = torch.Generator().manual_seed(0)
    query = torch.randn(2, heads, 3, 4, generator=g)
    key, value = (torch.randn(2, kv_heads, 5, 4, generator=g) for _ in range(2))
    output, weights = grouped_query_reference(query, key, value)
    torch.testing.assert_close(
        output, F.scaled_dot_product_attention(query, key, value, enable_gqa=True)
    )
    module = MultiHeadAttention(
        heads * 4, heads, config=AttentionConfig(num_kv_heads=kv_heads), bias=False
    ).eval()
    with torch.no_grad():
        module.out_proj.weight.copy_(torch.eye(heads * 4))
        merged, module_weights = module.attend(query, key, value)
    torch.testing.assert_close(module_weights, weights)
    torch.testing.assert_close(merged, output.transpose(1, 2).reshape(2, 3, heads * 4))


@pytest.mark.parametrize(("fn", "mistake"), WRONG, ids=[fn.__name__ for fn, _ in WRONG])
def test_a_mistake_is_named(fn, mistake):
    with pytest.raises(AssertionError) as info:
        check_grouped_query_attention(fn)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    lines = str(info.value).splitlines()
    assert len(lines) <= 8 and all(len(line) <= 76 for line in lines)


def test_an_unknown_grouping_is_located_head_by_head():
    def groups_shifted_by_one(query, key, value):
        heads, kv_heads = query.shape[1], key.shape[1]
        which = (torch.arange(heads) // (heads // kv_heads) + 1) % kv_heads
        return attend(query, key[:, which], value[:, which])

    with pytest.raises(AssertionError) as info:
        check_grouped_query_attention(groups_shifted_by_one)
    message = flat(info.value)
    assert "Likely mistake" not in message
    assert "query heads 0 to 3 take their weights from key/value heads [1, 1, 0, 0]" in message
    assert "they should read [0, 0, 1, 1]" in message


def test_values_grouped_otherwise_than_the_keys_are_named():
    def values_round_robin(query, key, value):
        group = query.shape[1] // key.shape[1]
        _, weights = with_repeat_interleave(query, key, value)
        return weights @ value.repeat(1, group, 1, 1), weights

    with pytest.raises(AssertionError) as info:
        check_grouped_query_attention(values_round_robin)
    message = flat(info.value)
    assert "Likely mistake: the keys and the values expanded two different ways" in message
