"""Tests for attention_lab.masks: one polarity, True = may attend."""

import pytest
import torch

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
