"""GatedFeedForward against transformers' LlamaMLP and Qwen3MLP, and its parameter count."""

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab.layers import FeedForward, GatedFeedForward

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import LlamaConfig, Qwen3Config
    from transformers.models.llama.modeling_llama import LlamaMLP
    from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP


@pytest.mark.parametrize(
    ("config_class", "mlp_class"), [(LlamaConfig, LlamaMLP), (Qwen3Config, Qwen3MLP)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_from_hf_matches_transformers(config_class, mlp_class, dtype):
    config = config_class(hidden_size=16, intermediate_size=40, num_attention_heads=2)
    torch.manual_seed(0)
    theirs = mlp_class(config).to(dtype).eval()
    ours = GatedFeedForward.from_hf(theirs)
    assert (ours.d_model, ours.d_ff, ours.gate_proj.weight.dtype) == (16, 40, dtype)
    x = torch.randn(2, 7, 16, dtype=dtype, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x))


def test_from_hf_rejects_other_modules():
    with pytest.raises(TypeError, match="gated MLP"):
        GatedFeedForward.from_hf(torch.nn.Linear(2, 2))
    config = LlamaConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2)
    mlp = LlamaMLP(config)
    mlp.act_fn = torch.nn.GELU()
    with pytest.raises(ValueError, match="not SiLU"):
        GatedFeedForward.from_hf(mlp)


@given(st.integers(3, 300))
def test_default_width_keeps_the_classic_weight_count(d_model):
    gated, classic = GatedFeedForward(d_model), FeedForward(d_model)
    gated_weights = sum(p.numel() for p in gated.parameters())
    classic_weights = classic.linear1.weight.numel() + classic.linear2.weight.numel()
    assert gated_weights == 3 * d_model * (8 * d_model // 3)
    # 8 D^2 for both, less what rounding 8D/3 down removes (at most 2 D of the 3 D per unit).
    assert 0 <= classic_weights - gated_weights < 3 * d_model


def test_position_wise_and_bad_input():
    ffn = GatedFeedForward(8, 12)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(2))
    order = torch.tensor([4, 2, 0, 1, 3])
    with torch.no_grad():
        torch.testing.assert_close(ffn(x[:, order]), ffn(x)[:, order])
    with pytest.raises(ValueError, match="x"):
        ffn(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="d_ff"):
        GatedFeedForward(8, 0)
