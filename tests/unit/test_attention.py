"""Tests for attention_lab.attention against PyTorch's own attention."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_lab.attention import MultiHeadAttention, SelfAttention, scaled_dot_product_attention
from attention_lab.attention_config import AttentionConfig
from attention_lab.masks import causal_mask, combine_masks, padding_mask
from support.tensors import HALF_TOLERANCE, random_inputs

SHAPES = {
    # name: (query, key, value)
    "square": ([2, 3, 5, 8], [2, 3, 5, 8], [2, 3, 5, 8]),
    "tq_ne_tk": ([2, 4, 8], [2, 6, 8], [2, 6, 8]),
    "dv_ne_dk": ([2, 4, 8], [2, 6, 8], [2, 6, 3]),
    "extra_batch_dims": ([2, 3, 2, 4, 8], [2, 3, 2, 6, 8], [2, 3, 2, 6, 5]),
    "broadcast_batch": ([2, 3, 4, 8], [1, 3, 6, 8], [1, 3, 6, 8]),
    "single_token": ([1, 1, 4], [1, 1, 4], [1, 1, 4]),
    "no_batch": ([4, 8], [6, 8], [6, 5]),
}
MASK_KINDS = ["none", "causal", "padding", "combined", "broadcast_1_1_tq_tk", "full"]


def make_mask(kind, scores_shape, seed=0):
    """A bool mask (True = may attend) of the given kind that broadcasts to scores_shape."""
    *batch, tq, tk = scores_shape
    generator = torch.Generator().manual_seed(seed)
    causal = torch.ones(tq, tk, dtype=torch.bool).tril()  # [Tq, Tk]
    padding_shape = [batch[0], *[1] * (len(batch) - 1), 1, tk] if batch else [1, tk]
    padding = torch.rand(padding_shape, generator=generator) > 0.4  # [B, 1, ..., 1, Tk]
    padding[..., 0] = True
    if kind == "none":
        return None
    if kind == "causal":
        return causal
    if kind == "padding":
        return padding
    if kind == "combined":
        return combine_masks(causal, padding)
    if kind == "broadcast_1_1_tq_tk":
        mask = torch.rand([*[1] * len(batch), tq, tk], generator=generator) > 0.5
    elif kind == "full":
        mask = torch.rand(scores_shape, generator=generator) > 0.5
    mask[..., 0] = True
    return mask


def scores_shape(query, key):
    return [
        *torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]),
        query.shape[-2],
        key.shape[-2],
    ]


def reference(query, key, value, mask):
    """PyTorch's output, and its weights obtained by attending to an identity matrix."""
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    tk = key.shape[-2]
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    identity = torch.eye(tk, dtype=query.dtype).expand(*batch, tk, tk)  # [..., Tk, Tk]
    weights = F.scaled_dot_product_attention(query, key, identity, attn_mask=mask)
    return output, weights


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("shape_name", list(SHAPES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torch(shape_name, mask_kind, dtype):
    query, key, value = random_inputs(SHAPES[shape_name], dtype)
    mask = make_mask(mask_kind, scores_shape(query, key))
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    expected_output, expected_weights = reference(query, key, value, mask)
    assert output.dtype == weights.dtype == dtype
    torch.testing.assert_close(output, expected_output)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("mask_kind", ["none", "combined", "full"])
@pytest.mark.parametrize("shape_name", ["square", "dv_ne_dk", "no_batch"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_matches_float32_reference(shape_name, mask_kind, dtype):
    query, key, value = random_inputs(SHAPES[shape_name], dtype)
    mask = make_mask(mask_kind, scores_shape(query, key))
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    assert output.dtype == weights.dtype == dtype
    expected_output, expected_weights = reference(query.float(), key.float(), value.float(), mask)
    torch.testing.assert_close(output.float(), expected_output, **HALF_TOLERANCE[dtype])
    torch.testing.assert_close(weights.float(), expected_weights, **HALF_TOLERANCE[dtype])


def test_scale_is_one_over_sqrt_dk():
    query = torch.tensor([[1.0, 1.0, 1.0, 1.0]])  # [Tq=1, Dk=4]
    key = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])  # [Tk=2, Dk=4]
    value = torch.eye(2)
    _, weights = scaled_dot_product_attention(query, key, value)
    # Scores are 4 / sqrt(4) = 2 and 0.
    expected = torch.softmax(torch.tensor([[2.0, 0.0]]), dim=-1)
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_fully_masked_rows_are_zero_not_nan(dtype):
    query, key, value = random_inputs(([2, 3, 4, 8], [2, 3, 5, 8], [2, 3, 5, 6]), dtype)
    mask = torch.ones(2, 3, 4, 5, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of batch 0 may attend nothing
    mask[1, 2] = False  # every query of head 2 in batch 1
    mask[1, 0, 3, 1:] = False  # a row with one allowed key, for contrast
    blocked_rows = ~mask.any(dim=-1)  # [B, H, Tq]
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    assert not output.isnan().any() and not weights.isnan().any()
    assert torch.equal(weights[blocked_rows], torch.zeros_like(weights[blocked_rows]))
    assert torch.equal(output[blocked_rows], torch.zeros_like(output[blocked_rows]))
    assert torch.equal(weights[1, 0, 3], torch.tensor([1, 0, 0, 0, 0], dtype=dtype))
    row_sums = weights[~blocked_rows].float().sum(dim=-1)
    tolerance = HALF_TOLERANCE.get(dtype, {"atol": 1e-6, "rtol": 0})
    torch.testing.assert_close(row_sums, torch.ones_like(row_sums), **tolerance)


def test_fully_masked_rows_have_finite_gradients():
    query, key, value = random_inputs(([3, 4], [5, 4], [5, 2]))
    for tensor in (query, key, value):
        tensor.requires_grad_(True)
    mask = causal_mask(5)[:3].clone()
    mask[1] = False
    output, _ = scaled_dot_product_attention(query, key, value, mask)
    output.sum().backward()
    for tensor in (query, key, value):
        assert torch.isfinite(tensor.grad).all()
    assert torch.equal(query.grad[1], torch.zeros(4))


def test_dropout_drops_weights_used_for_the_output_but_returns_the_distribution():
    query, key = random_inputs(([2, 6, 4], [2, 8, 4]))
    value = torch.eye(8).expand(2, 8, 8)  # the output is then the weights actually used
    _, expected_weights = scaled_dot_product_attention(query, key, value)
    torch.manual_seed(0)
    output, weights = scaled_dot_product_attention(query, key, value, dropout_p=0.25)
    torch.manual_seed(0)
    again, _ = scaled_dot_product_attention(query, key, value, dropout_p=0.25)
    assert torch.equal(weights, expected_weights)
    assert torch.equal(output, again)
    kept = output != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(output[kept], (expected_weights / 0.75)[kept])


# Cheap examples over a wide space of shapes and masks: more than the suite's budget.
@settings(max_examples=60)
@given(
    data=st.data(),
    batch=st.integers(1, 3),
    query_len=st.integers(1, 6),
    key_len=st.integers(1, 6),
    dim=st.integers(1, 8),
    scale=st.floats(0.1, 10.0),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    seed=st.integers(0, 2**31 - 1),
)
def test_rows_sum_to_one_and_blocked_weights_are_zero(
    data, batch, query_len, key_len, dim, scale, dtype, seed
):
    mask = torch.from_numpy(
        data.draw(hnp.arrays(np.bool_, (batch, query_len, key_len)), label="mask")
    )
    generator = torch.Generator().manual_seed(seed)
    query = (scale * torch.randn(batch, query_len, dim, generator=generator)).to(dtype)
    key = (scale * torch.randn(batch, key_len, dim, generator=generator)).to(dtype)
    value = torch.randn(batch, key_len, dim, generator=generator).to(dtype)
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    assert not weights.isnan().any() and not output.isnan().any()
    assert (weights[~mask] == 0).all()
    allowed_rows = mask.any(dim=-1)
    row_sums = weights.float().sum(dim=-1)
    tolerance = 1e-2 if dtype in HALF_TOLERANCE else 1e-5
    torch.testing.assert_close(
        row_sums[allowed_rows], torch.ones_like(row_sums[allowed_rows]), atol=tolerance, rtol=0
    )
    assert (row_sums[~allowed_rows] == 0).all()


@given(
    batch=st.integers(1, 3),
    seq_len=st.integers(1, 7),
    num_heads=st.integers(1, 4),
    head_dim=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_attention_modules_are_permutation_equivariant(batch, seq_len, num_heads, head_dim, seed):
    torch.manual_seed(seed)
    d_model = num_heads * head_dim
    modules = [
        MultiHeadAttention(d_model, num_heads).double(),
        SelfAttention(d_model, head_dim).double(),
    ]
    x = torch.randn(batch, seq_len, d_model, dtype=torch.float64)
    permutation = torch.randperm(seq_len)
    for module in modules:
        output, weights = module(x)
        permuted_output, permuted_weights = module(x[:, permutation])
        torch.testing.assert_close(permuted_output, output[:, permutation])
        torch.testing.assert_close(
            permuted_weights, weights[:, :, permutation][:, :, :, permutation]
        )


def torch_and_ours(d_model=8, num_heads=2, *, bias=True, batch_first=True, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=batch_first)
    # Nonzero biases, so a bias copied to the wrong projection cannot go unnoticed.
    if bias:
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
            theirs.out_proj.bias.normal_()
    theirs.eval()
    return theirs, MultiHeadAttention.from_torch(theirs)


@pytest.mark.parametrize("mask_kind", ["none", "causal", "key_padding", "per_head"])
@pytest.mark.parametrize("attention_kind", ["self", "cross"])
@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_matches_nn_multihead_attention(bias, attention_kind, mask_kind):
    batch, query_len, d_model, num_heads = 3, 5, 12, 3
    key_len = query_len if attention_kind == "self" else 7
    theirs, ours = torch_and_ours(d_model, num_heads, bias=bias)
    assert not ours.training
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(batch, query_len, d_model, generator=generator)
    if attention_kind == "self":
        key = value = query
    else:
        key = torch.randn(batch, key_len, d_model, generator=generator)
        value = torch.randn(batch, key_len, d_model, generator=generator)
    token_ids = torch.randint(1, 9, (batch, key_len), generator=generator)
    token_ids[0, -2:] = 0
    token_ids[1, 1:] = 0

    mask, torch_masks = None, {}
    if mask_kind == "causal":
        mask = torch.ones(query_len, key_len, dtype=torch.bool).tril()  # [Tq, Tk]
        torch_masks = {"attn_mask": ~mask}  # PyTorch's bool attn_mask uses True = blocked
    elif mask_kind == "key_padding":
        mask = padding_mask(token_ids)  # [B, 1, 1, Tk]
        torch_masks = {"key_padding_mask": token_ids == 0}
    elif mask_kind == "per_head":
        mask = torch.rand(batch, num_heads, query_len, key_len, generator=generator) > 0.5
        mask[..., 0] = True
        blocked = ~mask.reshape(batch * num_heads, query_len, key_len)  # [B * H, Tq, Tk]
        torch_masks = {"attn_mask": blocked}

    expected_output, expected_weights = theirs(
        query, key, value, need_weights=True, average_attn_weights=False, **torch_masks
    )
    output, weights = ours(query, key, value, mask=mask)
    assert weights.shape == (batch, num_heads, query_len, key_len)
    torch.testing.assert_close(output, expected_output)
    torch.testing.assert_close(weights, expected_weights)


def test_from_torch_sequence_first_module():
    theirs, ours = torch_and_ours(batch_first=False)
    generator = torch.Generator().manual_seed(2)
    query = torch.randn(2, 5, 8, generator=generator)  # [B, T, D]
    mask = causal_mask(5)
    expected_output, expected_weights = theirs(
        query.transpose(0, 1),  # [T, B, D]
        query.transpose(0, 1),  # [T, B, D]
        query.transpose(0, 1),  # [T, B, D]
        attn_mask=~mask,
        average_attn_weights=False,
    )
    output, weights = ours(query, mask=mask)
    torch.testing.assert_close(output, expected_output.transpose(0, 1))  # [B, T, D]
    torch.testing.assert_close(weights, expected_weights)


def test_from_torch_keeps_dtype_dropout_and_mode():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(8, 4, dropout=0.3, batch_first=True).double()
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.training and ours.dropout == 0.3
    assert all(p.dtype == torch.float64 for p in ours.parameters())
    assert all(p.device == theirs.in_proj_weight.device for p in ours.parameters())
    theirs.eval()
    ours.eval()
    query = torch.randn(2, 3, 8, dtype=torch.float64)
    expected_output, _ = theirs(query, query, query)
    torch.testing.assert_close(ours(query)[0], expected_output)


def test_from_torch_copies_rather_than_shares():
    theirs, ours = torch_and_ours()
    with torch.no_grad():
        ours.q_proj.weight.zero_()
    assert theirs.in_proj_weight.abs().sum() > 0


@pytest.mark.parametrize(
    ("make_module", "error", "match"),
    [
        (lambda: nn.Linear(8, 8), TypeError, "module must be an nn.MultiheadAttention"),
        (lambda: nn.MultiheadAttention(8, 2, kdim=4, vdim=4), ValueError, "kdim=4 and vdim=4"),
        (lambda: nn.MultiheadAttention(8, 2, vdim=6), ValueError, "vdim=6"),
        (lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True), ValueError, "add_bias_kv"),
        (lambda: nn.MultiheadAttention(8, 2, add_zero_attn=True), ValueError, "add_zero_attn"),
    ],
)
def test_from_torch_rejects_what_it_cannot_represent(make_module, error, match):
    module = make_module()
    with pytest.raises(error, match=match):
        MultiHeadAttention.from_torch(module)


def test_from_torch_rejects_bias_on_some_projections_only():
    without_out_bias = nn.MultiheadAttention(8, 2)
    without_out_bias.out_proj.bias = None
    without_in_bias = nn.MultiheadAttention(8, 2, bias=False)
    without_in_bias.out_proj.bias = nn.Parameter(torch.zeros(8))
    for module in (without_out_bias, without_in_bias):
        with pytest.raises(ValueError, match="bias on some projections but not all"):
            MultiHeadAttention.from_torch(module)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("d_model", "num_heads"), [(8, 2), (12, 3), (16, 16)])
def test_parameter_count_equals_torch(d_model, num_heads, bias):
    def count(module):
        return sum(p.numel() for p in module.parameters())

    ours = MultiHeadAttention(d_model, num_heads, bias=bias)
    assert count(ours) == count(nn.MultiheadAttention(d_model, num_heads, bias=bias))


def test_key_and_value_default_to_query():
    _, ours = torch_and_ours()
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 8, generator=generator)
    y = torch.randn(2, 4, 8, generator=generator)
    for got, expected in zip(ours(x), ours(x, x, x), strict=True):
        assert torch.equal(got, expected)
    for got, expected in zip(ours(x, y), ours(x, y, y), strict=True):
        assert torch.equal(got, expected)


def test_multi_head_dropout_only_in_training_mode():
    torch.manual_seed(0)
    ours = MultiHeadAttention(8, 2, dropout=0.5)
    without_dropout = MultiHeadAttention(8, 2)
    without_dropout.load_state_dict(ours.state_dict())
    x = torch.randn(2, 6, 8)
    expected_output, expected_weights = without_dropout(x)
    output, weights = ours.eval()(x)
    assert torch.equal(output, expected_output)
    ours.train()
    torch.manual_seed(1)
    output, weights = ours(x)
    torch.manual_seed(1)
    again, _ = ours(x)
    assert torch.equal(output, again)
    assert not torch.allclose(output, expected_output)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_multi_head_fully_masked_query_outputs_out_proj_bias(dtype):
    _, ours = torch_and_ours()
    ours.to(dtype)
    x = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(4)).to(dtype)
    mask = causal_mask(4).clone()
    mask[2] = False
    output, weights = ours(x, mask=mask)
    assert not output.isnan().any()
    assert torch.equal(weights[:, :, 2], torch.zeros_like(weights[:, :, 2]))
    assert torch.equal(output[:, 2], ours.out_proj.bias.detach().expand(2, 8))


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch(bias, mask_kind):
    torch.manual_seed(0)
    module = SelfAttention(d_model=6, head_dim=4, bias=bias)
    x = torch.randn(3, 5, 6)
    token_ids = torch.tensor([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0], [5, 6, 7, 8, 9]])
    mask = {"none": None, "causal": causal_mask(5), "padding": padding_mask(token_ids)}[mask_kind]
    output, weights = module(x, mask)
    assert output.shape == (3, 5, 4) and weights.shape == (3, 1, 5, 5)
    projected = [
        F.linear(x, layer.weight, layer.bias).unsqueeze(1)  # [B, 1, T, Dh]
        for layer in (module.q_proj, module.k_proj, module.v_proj)
    ]
    # The projections are named as in MultiHeadAttention.
    assert {name.split(".")[0] for name in module.state_dict()} == {"q_proj", "k_proj", "v_proj"}
    expected_output, expected_weights = reference(*projected, mask)
    torch.testing.assert_close(output, expected_output.squeeze(1))
    torch.testing.assert_close(weights, expected_weights)


def _mha(**kwargs):
    return MultiHeadAttention(8, 2, **kwargs)


_q, _k, _v = torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: scaled_dot_product_attention(_q.tolist(), _k, _k), TypeError, "query"),
        (lambda: scaled_dot_product_attention(_q, _k.long(), _k), TypeError, "key"),
        (lambda: scaled_dot_product_attention(_q, _k, _v.double()), TypeError, "value .*dtype"),
        (lambda: scaled_dot_product_attention(_q[0, 0], _k, _v), ValueError, "query"),
        (lambda: scaled_dot_product_attention(_q, _k[..., :6], _v), ValueError, "query .*key"),
        (lambda: scaled_dot_product_attention(_q, _k, _v[:, :3]), ValueError, "key .*value"),
        (
            lambda: scaled_dot_product_attention(_q, torch.randn(3, 4, 8), torch.randn(3, 4, 5)),
            ValueError,
            "batch dimensions of query, key and value",
        ),
        (lambda: scaled_dot_product_attention(_q, _k, _v, torch.ones(3, 4)), TypeError, "mask"),
        (
            lambda: scaled_dot_product_attention(_q, _k, _v, causal_mask(4)),
            ValueError,
            r"mask of shape \[4, 4\]",
        ),
        (
            lambda: scaled_dot_product_attention(_q, _k, _v, torch.ones(5, 3, 4).bool()),
            ValueError,
            "mask",
        ),
        (lambda: scaled_dot_product_attention(_q, _k, _v, dropout_p=1.0), ValueError, "dropout_p"),
        (lambda: scaled_dot_product_attention(_q, _k, _v, dropout_p=-0.1), ValueError, "dropout_p"),
        (lambda: scaled_dot_product_attention(_q, _k, _v, dropout_p="0"), TypeError, "dropout_p"),
        (
            lambda: MultiHeadAttention(10, 4),
            ValueError,
            "^d_model=10 is not divisible by num_heads=4$",
        ),
        (lambda: MultiHeadAttention(0, 1), ValueError, "d_model"),
        (lambda: MultiHeadAttention(8, 0), ValueError, "num_heads"),
        (lambda: MultiHeadAttention(8, 2.0), TypeError, "num_heads"),
        (lambda: MultiHeadAttention(True, 1), TypeError, "d_model"),
        (lambda: _mha(dropout=1.0), ValueError, "dropout"),
        (lambda: _mha(dropout=None), TypeError, "dropout"),
        (lambda: _mha(bias=1), TypeError, "bias"),
        (lambda: SelfAttention(0, 4), ValueError, "d_model"),
        (lambda: SelfAttention(8, 2.5), TypeError, "head_dim"),
        (lambda: SelfAttention(8, 4)(torch.randn(2, 3, 6)), ValueError, r"x must .*\[B, T, 8\]"),
        (lambda: _mha()(torch.randn(3, 8)), ValueError, "query"),
        (lambda: _mha()(torch.ones(2, 3, 8, dtype=torch.long)), TypeError, "query"),
        (lambda: _mha()(_q, torch.randn(2, 4, 6)), ValueError, "key"),
        (lambda: _mha()(_q, _k, torch.randn(2, 5, 8)), ValueError, "value"),
        (lambda: _mha()(_q, torch.randn(3, 4, 8)), ValueError, "query .*key"),
        (lambda: _mha()(_q, mask=torch.ones(3, 3)), TypeError, "mask"),
        (lambda: _mha()(_q, mask=causal_mask(4)), ValueError, "mask"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"qk_norm": True, "rope_layout": "half"},
        {"softcap": 1.0, "num_kv_heads": 2},
        {"alibi": True},
    ],
    ids=["plain", "qk_norm-rope", "softcap-gqa", "alibi"],
)
def test_logits_are_the_scores_that_forward_turns_into_weights(options):
    """softmax(cap(logits) + bias, masked) is forward's weights: the logits are the scaled
    scores before the cap, the bias and the mask."""
    from attention_lab.positional import alibi_bias

    torch.manual_seed(0)
    config = AttentionConfig(**options)
    attention = MultiHeadAttention(d_model=16, num_heads=4, config=config).eval()
    x = 3 * torch.randn(2, 6, 16)  # [B, T, D]
    mask = causal_mask(6)
    logits = attention.logits(x)  # [B, H, T, T]
    assert logits.shape == (2, 4, 6, 6)
    scores = logits
    if config.softcap is not None:
        scores = config.softcap * torch.tanh(scores / config.softcap)
        assert logits.abs().max() > config.softcap  # the logits themselves are not capped
    if config.alibi:
        scores = scores + alibi_bias(4, 6, 6).float()
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(attention(x, mask=mask)[1], expected)


def explicit_topk_mask(logits, k, mask):
    """The top-k mask written out: for each row, the visible keys whose logit is among the k
    largest visible logits (a sort, not torch.topk); with no ties, the k best."""
    visible = mask.expand_as(logits)
    ranked = logits.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True).values
    kth = ranked[..., min(k, logits.shape[-1]) - 1 : min(k, logits.shape[-1])]  # [..., Tq, 1]
    return visible & (logits >= kth)


@given(
    tq=st.integers(1, 7),
    tk=st.integers(1, 9),
    data=st.data(),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_top_k_is_pytorch_s_attention_with_the_explicit_top_k_mask(tq, tk, data, causal, seed):
    """top_k=k is F.scaled_dot_product_attention with the mask of each query's k best visible
    logits (a sort, not torch.topk), before and after an ALiBi-like bias."""
    from attention_lab.score_modifiers import ScoreModifiers

    top_k = data.draw(st.integers(1, tk))
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, t, 4, generator=generator, dtype=torch.float64)
               for t in (tq, tk, tk))  # fmt: skip
    mask = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq) if causal else None
    bias = torch.randn(3, tq, tk, generator=generator, dtype=torch.float64)
    for modifiers in (None, ScoreModifiers(bias=bias)):
        logits = q @ k.transpose(-2, -1) / 2.0  # sqrt(Dk) = 2
        if modifiers is not None:
            logits = logits + bias
        visible = torch.ones(tq, tk, dtype=torch.bool) if mask is None else mask
        kept = explicit_topk_mask(logits, top_k, visible)
        output, weights = scaled_dot_product_attention(
            q, k, v, mask, modifiers=modifiers, top_k=top_k
        )
        reference_mask = kept if modifiers is None else torch.where(kept, bias, float("-inf"))
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=reference_mask)
        seen = kept.any(dim=-1, keepdim=True)  # rows with a key: PyTorch's are NaN otherwise
        torch.testing.assert_close(output.masked_fill(~seen, 0), expected.masked_fill(~seen, 0))
        assert ((weights > 0) == kept).all()
        assert (kept.sum(-1) == visible.sum(-1).clamp(max=top_k)).all()


@pytest.mark.parametrize(
    ("top_k", "error", "match"),
    [(0, ValueError, "top_k must be a positive int"),
     (6, ValueError, "top_k must be at most the number of keys, Tk = 5"),
     (2.0, TypeError, "top_k must be a positive int"), (True, TypeError, "top_k must be")],
)  # fmt: skip
def test_a_bad_top_k_is_refused(top_k, error, match):
    q = torch.randn(1, 3, 4)
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, torch.randn(1, 5, 4), torch.randn(1, 5, 4), top_k=top_k)


@pytest.mark.parametrize("top_k", [1, 2, 4, 6, 9])
@pytest.mark.parametrize(
    "options", [{}, {"num_kv_heads": 2, "softcap": 2.0}, {"alibi": True}],
    ids=["plain", "gqa-softcap", "alibi"],
)  # fmt: skip
def test_top_k_attends_to_each_query_s_top_k_visible_keys(top_k, options):
    """AttentionConfig(top_k=k) is the module with the explicit top-k mask of its own logits
    (capped, biased), and with k at least the number of keys it is the module unchanged."""
    from attention_lab.positional import alibi_bias

    torch.manual_seed(0)
    dense = MultiHeadAttention(16, 4, config=AttentionConfig(**options)).double().eval()
    sparse = MultiHeadAttention(16, 4, config=AttentionConfig(**options, top_k=top_k))
    sparse = sparse.double().eval()
    sparse.load_state_dict(dense.state_dict())
    x = torch.randn(2, 6, 16, dtype=torch.float64)  # [B, T, D]
    mask = causal_mask(6)
    logits = dense.logits(x)  # [B, H, T, T]
    if "softcap" in options:
        logits = options["softcap"] * torch.tanh(logits / options["softcap"])
    if options.get("alibi"):
        logits = logits + alibi_bias(4, 6, 6).double()
    kept = explicit_topk_mask(logits, top_k, mask)
    assert (kept.sum(-1) == torch.arange(1, 7).clamp(max=top_k)).all()
    expected = dense(x, mask=kept)
    output, weights = sparse(x, mask=mask)
    torch.testing.assert_close(output, expected[0])
    torch.testing.assert_close(weights, expected[1])
    assert ((weights > 0) == kept).all()
    if top_k >= 6:
        torch.testing.assert_close(output, dense(x, mask=mask)[0], rtol=0, atol=0)
