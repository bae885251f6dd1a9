"""Tests for attention_lab.masks: one polarity, True = may attend."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.masks import causal_mask, check_mask, combine_masks, padding_mask


@pytest.mark.parametrize("size", [0, 1, 2, 5, 17])
def test_causal_mask_matches_tril(size):
    mask = causal_mask(size)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, torch.tril(torch.ones(size, size)).bool())


def test_causal_mask_lets_query_i_attend_key_j_iff_j_le_i():
    mask = causal_mask(4)
    for i in range(4):
        for j in range(4):
            assert mask[i, j].item() == (j <= i)


def test_causal_mask_device():
    assert causal_mask(3, device="cpu").device == torch.device("cpu")
    assert causal_mask(3, device="meta").device == torch.device("meta")


def test_padding_mask_on_padded_batch():
    token_ids = torch.tensor(
        [
            [5, 3, 8, 0, 0],
            [7, 0, 0, 0, 0],
            [1, 2, 3, 4, 6],
        ]
    )
    expected = torch.tensor(
        [
            [True, True, True, False, False],
            [True, False, False, False, False],
            [True, True, True, True, True],
        ]
    )
    mask = padding_mask(token_ids)
    assert mask.dtype == torch.bool
    assert mask.shape == (3, 1, 1, 5)
    assert torch.equal(mask[:, 0, 0, :], expected)


def test_padding_mask_custom_pad_id():
    token_ids = torch.tensor([[4, 9, 9], [0, 0, 9]], dtype=torch.int32)
    mask = padding_mask(token_ids, pad_id=9)
    assert torch.equal(mask[:, 0, 0, :], torch.tensor([[True, False, False], [True, True, False]]))


def test_padding_mask_broadcasts_over_heads_and_queries():
    token_ids = torch.tensor([[5, 3, 0], [7, 0, 0]])
    scores = torch.zeros(2, 4, 6, 3)  # [B, H, Tq, Tk]
    mask = padding_mask(token_ids).expand_as(scores)
    for b in range(2):
        for h in range(4):
            for q in range(6):
                assert torch.equal(mask[b, h, q], token_ids[b] != 0)


def test_combine_masks_broadcasts_causal_and_padding():
    token_ids = torch.tensor([[5, 3, 0, 0], [7, 2, 2, 0]])
    combined = combine_masks(causal_mask(4), padding_mask(token_ids))
    assert combined.shape == (2, 1, 4, 4)
    assert combined.dtype == torch.bool
    for b in range(2):
        for i in range(4):
            for j in range(4):
                assert combined[b, 0, i, j].item() == (j <= i and token_ids[b, j].item() != 0)


def test_combine_masks_is_logical_and_of_many():
    generator = torch.Generator().manual_seed(0)
    masks = [torch.rand(2, 3, 4, generator=generator) > 0.3 for _ in range(3)]
    masks.append(torch.rand(4, generator=generator) > 0.3)
    expected = masks[0] & masks[1] & masks[2] & masks[3]
    assert torch.equal(combine_masks(*masks), expected)


def test_combine_masks_single_mask_is_returned_unchanged():
    mask = causal_mask(3)
    assert torch.equal(combine_masks(mask), mask)


@pytest.mark.parametrize(
    ("one_means", "convert"),
    [("may attend", lambda mask: mask.bool()), ("blocked", lambda mask: ~mask.bool())],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_check_mask_message_shows_a_conversion_that_works(one_means, convert, dtype):
    allowed = causal_mask(4)
    mask = (allowed if one_means == "may attend" else ~allowed).to(dtype)
    with pytest.raises(TypeError, match="torch.bool") as excinfo:
        check_mask(mask)
    message = str(excinfo.value)
    assert str(dtype) in message
    assert "mask.bool() if 1 means 'may attend'" in message
    assert "~mask.bool() if 1 means 'blocked'" in message
    # The conversion the message recommends for this convention recovers the bool mask.
    assert torch.equal(convert(mask), allowed)


def test_check_mask_uses_the_argument_name_and_accepts_bool():
    check_mask(causal_mask(2))
    with pytest.raises(TypeError, match=r"attn_mask must .* attn_mask\.bool\(\)"):
        check_mask(torch.ones(2, 2), name="attn_mask")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: causal_mask(-1), ValueError, "size"),
        (lambda: causal_mask(2.0), TypeError, "size"),
        (lambda: causal_mask(True), TypeError, "size"),
        (lambda: causal_mask(torch.tensor(3.0)), TypeError, "size"),
        (lambda: padding_mask([[1, 2, 0]]), TypeError, "token_ids"),
        (lambda: padding_mask(torch.tensor([[1.0, 0.0]])), TypeError, "token_ids"),
        (lambda: padding_mask(torch.tensor([[True, False]])), TypeError, "token_ids"),
        (lambda: padding_mask(torch.tensor([1, 2, 0])), ValueError, "token_ids"),
        (lambda: padding_mask(torch.tensor([[1, 2, 0]]), pad_id=0.5), TypeError, "pad_id"),
        (lambda: padding_mask(torch.tensor([[1, 2, 0]]), pad_id=None), TypeError, "pad_id"),
        (lambda: combine_masks(), ValueError, "masks"),
        (lambda: combine_masks(causal_mask(2), torch.ones(2, 2)), TypeError, r"masks\[1\]"),
        (lambda: combine_masks(causal_mask(2), causal_mask(3)), ValueError, r"\[2, 2\], \[3, 3\]"),
        (lambda: check_mask([[True]]), TypeError, "mask"),
        (lambda: check_mask(None), TypeError, "mask"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# The masks through the attention modules: broadcasting over heads and batch, half precision.

LEFT_PADDED_IDS = torch.tensor(
    [
        [0, 0, 4, 9, 2],  # left padding: under a causal mask, queries 0 and 1 see no key
        [3, 1, 4, 1, 5],
        [0, 0, 0, 0, 0],  # an empty slot in the batch: every query sees no key
    ]
)


def broadcast_masks(token_ids):
    """Each mask shape the chapter on masks feeds to MultiHeadAttention, by name."""
    length = token_ids.shape[1]
    causal = causal_mask(length)
    padding = padding_mask(token_ids)
    return {
        "padding [B, 1, 1, Tk]": padding,
        "causal [Tq, Tk]": causal,
        "causal [1, 1, Tq, Tk]": causal[None, None],
        "combined [B, 1, Tq, Tk]": combine_masks(causal, padding),
    }


@pytest.mark.parametrize("mask_name", list(broadcast_masks(LEFT_PADDED_IDS)))
def test_masks_broadcast_through_multi_head_attention_like_expanded_masks(mask_name):
    batch, length, d_model, num_heads = 3, 5, 8, 2
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, num_heads, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(1))
    token_ids = LEFT_PADDED_IDS.clone()
    token_ids[2, 0] = 7  # no empty slot: nn.MultiheadAttention would return NaN for it
    mask = broadcast_masks(token_ids)[mask_name]
    expanded = mask.expand(batch, num_heads, length, length)  # [B, H, Tq, Tk]

    output, weights = ours(x, mask=mask)
    expanded_output, expanded_weights = ours(x, mask=expanded.clone())
    assert weights.shape == (batch, num_heads, length, length)
    assert torch.equal(weights, expanded_weights)
    assert torch.equal(output, expanded_output)
    assert torch.equal(weights[~expanded], torch.zeros_like(weights[~expanded]))

    # Reference: PyTorch's module, with the masks converted to its True = blocked polarity.
    torch_masks = {}
    if "padding" in mask_name or "combined" in mask_name:
        torch_masks["key_padding_mask"] = token_ids == 0  # [B, Tk]
    if "causal" in mask_name or "combined" in mask_name:
        torch_masks["attn_mask"] = ~causal_mask(length)  # [Tq, Tk]
    expected_output, expected_weights = theirs(
        x, x, x, need_weights=True, average_attn_weights=False, **torch_masks
    )
    if "combined" in mask_name:
        # Left padding leaves query 0 of batch 0 with no visible key: PyTorch gives NaN there,
        # the library zeros. Everywhere else the two agree.
        empty = ~expanded.any(dim=-1)  # [B, H, Tq]
        assert expected_weights[empty].isnan().all()
        assert torch.equal(weights[empty], torch.zeros_like(weights[empty]))
        expected_weights = expected_weights.masked_fill(empty[..., None], 0.0)
        keep = ~empty.any(dim=1)  # [B, Tq]
        torch.testing.assert_close(output[keep], expected_output[keep])
    else:
        torch.testing.assert_close(output, expected_output)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_combined_masks_on_a_half_precision_batch(dtype):
    batch, num_heads, length, head_dim = 3, 2, 5, 4
    generator = torch.Generator().manual_seed(3)
    query, key, value = (
        torch.randn(batch, num_heads, length, head_dim, generator=generator) for _ in range(3)
    )  # [B, H, T, Dh] each, float32
    mask = combine_masks(causal_mask(length), padding_mask(LEFT_PADDED_IDS))  # [B, 1, T, T]
    empty = ~mask.expand(batch, num_heads, length, length).any(dim=-1)  # [B, H, Tq]
    assert empty[0, :, :2].all() and empty[2].all() and not empty[1].any()

    output, weights = scaled_dot_product_attention(
        query.to(dtype), key.to(dtype), value.to(dtype), mask
    )
    assert output.dtype == weights.dtype == dtype
    assert not output.isnan().any() and not weights.isnan().any()
    blocked = ~mask.expand_as(weights)
    assert torch.equal(weights[blocked], torch.zeros_like(weights[blocked]))
    assert torch.equal(output[empty], torch.zeros_like(output[empty]))
    tolerance = (
        {"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {"atol": 2e-2, "rtol": 2e-2}
    )
    row_sums = weights[~empty].float().sum(dim=-1)
    torch.testing.assert_close(row_sums, torch.ones_like(row_sums), **tolerance)
    # Reference: PyTorch in float32 from the same rounded inputs, on the rows that see a key.
    rounded = [tensor.to(dtype).float() for tensor in (query, key, value)]
    expected = F.scaled_dot_product_attention(*rounded, attn_mask=mask)
    torch.testing.assert_close(output[~empty].float(), expected[~empty], **tolerance)
