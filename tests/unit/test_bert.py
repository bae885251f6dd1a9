"""bert: our BERT encoder's embedding and input checks, the key mask and mean pooling.

Pure PyTorch, no model loaded: the comparison of the encoder with ``transformers``' BERT running
MiniLM's weights is in test_pretrained.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab.bert import BertEmbedding, BertEncoder, BertEncoderConfig, key_mask, mean_pool


def test_import_does_not_import_transformers():
    code = "import sys, attention_lab.bert\nassert 'transformers' not in sys.modules\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"input_ids": torch.tensor([[1.0, 2.0]])}, TypeError, "input_ids"),
        ({"input_ids": [[1, 2]]}, TypeError, "input_ids"),
        ({"input_ids": torch.tensor([1, 2])}, ValueError, "input_ids"),
        ({"input_ids": torch.tensor([[1, 100]])}, ValueError, "input_ids"),
        ({"input_ids": torch.ones(1, 13, dtype=torch.long)}, ValueError, "input_ids"),
        ({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 2]])},
         ValueError, "attention_mask"),
        ({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1.0, 0.0]])},
         TypeError, "attention_mask"),
        ({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 1, 1]])},
         ValueError, "attention_mask"),
        ({"input_ids": torch.tensor([[1, 2]]), "token_type_ids": torch.tensor([[0, 2]])},
         ValueError, "token_type_ids"),
        ({"input_ids": torch.tensor([[1, 2]]), "token_type_ids": torch.tensor([[0]])},
         ValueError, "token_type_ids"),
    ],
)  # fmt: skip
def test_encoder_rejects_bad_input(kwargs, error, name):
    encoder = BertEncoder(50, d_model=16, num_layers=1, num_heads=4, d_ff=24, max_len=12).eval()
    with pytest.raises(error, match=name):
        encoder(**kwargs)


@pytest.mark.parametrize(
    "kwargs, error, name",
    [({"vocab_size": 0}, ValueError, "vocab_size"), ({"max_len": 2.0}, TypeError, "max_len"),
     ({"type_vocab_size": True}, TypeError, "type_vocab_size"),
     ({"layer_norm_eps": 0.0}, ValueError, "layer_norm_eps"),
     ({"dropout": 1.0}, ValueError, "dropout")],
)  # fmt: skip
def test_embedding_rejects_bad_arguments(kwargs, error, name):
    arguments = {"vocab_size": 10, "d_model": 8, "max_len": 4} | kwargs
    with pytest.raises(error, match=name):
        BertEmbedding(**arguments)


def test_encoder_from_a_config_equals_the_encoder_from_keywords():
    fields = {"d_model": 16, "num_layers": 1, "num_heads": 4, "d_ff": 24, "max_len": 12}
    config = BertEncoderConfig(vocab_size=50, **fields)
    assert (config.type_vocab_size, config.layer_norm_eps, config.dropout) == (2, 1e-12, 0.1)
    torch.manual_seed(0)
    from_keywords = BertEncoder(50, **fields)
    torch.manual_seed(0)
    torch.testing.assert_close(BertEncoder(config).state_dict(), from_keywords.state_dict())
    assert from_keywords.config == config


def test_embedding_is_word_plus_position_plus_type_then_layernorm():
    torch.manual_seed(0)
    embed = BertEmbedding(10, 8, 6, layer_norm_eps=1e-12, dropout=0.0)
    ids = torch.tensor([[3, 1, 4, 1]])
    types = torch.tensor([[0, 0, 1, 1]])
    raw = embed.word.weight[ids] + embed.position.weight[:4] + embed.token_type.weight[types]
    expected = torch.nn.functional.layer_norm(
        raw, (8,), embed.norm.weight, embed.norm.bias, eps=1e-12
    )
    torch.testing.assert_close(embed(ids, types), expected)


# ---------------------------------------------------------------------------------- masks


def test_key_mask_converts_the_tokenizer_convention():
    mask = key_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    torch.testing.assert_close(
        key_mask(torch.tensor([[True, False]])), key_mask(torch.tensor([[1, 0]]))
    )


@pytest.mark.parametrize(
    "mask, error",
    [(torch.tensor([[0.0, 1.0]]), TypeError), ([[1, 0]], TypeError),
     (torch.tensor([[1, 2]]), ValueError), (torch.tensor([[-1, 1]]), ValueError),
     (torch.tensor([1, 0]), ValueError)],
)  # fmt: skip
def test_key_mask_rejects_bad_input(mask, error):
    with pytest.raises(error, match="attention_mask"):
        key_mask(mask)


# ---------------------------------------------------------------------------------- pooling


def test_mean_pool_matches_a_loop():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 5, 4, generator=generator)
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    expected = torch.stack(
        [hidden[b, : int(attention_mask[b].sum())].mean(dim=0) for b in range(3)]
    )
    torch.testing.assert_close(mean_pool(hidden, attention_mask), expected)


def test_mean_pool_of_an_all_padding_row_is_zero():
    pooled = mean_pool(torch.ones(1, 3, 2), torch.zeros(1, 3, dtype=torch.long))
    assert torch.all(pooled == 0) and not pooled.isnan().any()


@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    noise=st.floats(-1e3, 1e3, allow_nan=False),
)
def test_mean_pool_ignores_whatever_sits_in_padding(lengths, noise):
    generator = torch.Generator().manual_seed(len(lengths))
    hidden = torch.randn(len(lengths), 6, 3, generator=generator)
    attention_mask = (torch.arange(6)[None, :] < torch.tensor(lengths)[:, None]).long()
    changed = hidden.masked_fill(~attention_mask.bool()[..., None], noise)
    torch.testing.assert_close(
        mean_pool(hidden, attention_mask), mean_pool(changed, attention_mask)
    )


@pytest.mark.parametrize(
    "hidden, attention_mask, error, name",
    [(torch.ones(1, 2, 3, dtype=torch.long), torch.ones(1, 2), TypeError, "hidden"),
     (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.long), ValueError, "hidden"),
     ("hidden", torch.ones(1, 2, dtype=torch.long), TypeError, "hidden"),
     (torch.ones(1, 2, 3), torch.ones(1, 3, dtype=torch.long), ValueError, "attention_mask"),
     (torch.ones(1, 2, 3), torch.ones(1, 2), TypeError, "attention_mask")],
)  # fmt: skip
def test_mean_pool_rejects_bad_input(hidden, attention_mask, error, name):
    with pytest.raises(error, match=name):
        mean_pool(hidden, attention_mask)


def test_mean_pool_names_hidden_when_the_mask_does_not_fit_it():
    with pytest.raises(ValueError, match=r"attention_mask must have shape \[B, T\] = \[1, 2\]"):
        mean_pool(torch.ones(1, 2, 3), torch.ones(1, 3, dtype=torch.long))
