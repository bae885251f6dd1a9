"""Tests for attention_lab.masks: one polarity, True = may attend."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, create_mask, flex_attention

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.masks import (
    causal_mask,
    check_mask,
    combine_masks,
    document_mask,
    from_mask_mod,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)


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


# --- masks as functions: each helper against FlexAttention's create_mask and flex_attention ---


def causal_mod(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx


def window_mod(window):
    # transformers' sliding_window_overlay and'ed with its causal_mask_function.
    return lambda b, h, q_idx, kv_idx: (kv_idx > q_idx - window) & (kv_idx <= q_idx)


def document_mod(document_ids):  # document_ids: [B, T]
    return lambda b, h, q_idx, kv_idx: (
        (document_ids[b, q_idx] == document_ids[b, kv_idx]) & (kv_idx <= q_idx)
    )


def prefix_mod(prefix_len):
    return lambda b, h, q_idx, kv_idx: (kv_idx < prefix_len) | (kv_idx <= q_idx)


def flex_mask(mask_mod, batch, heads, q_len, kv_len):
    return create_mask(mask_mod, batch, heads, q_len, kv_len, device="cpu")  # [B, H, Tq, Tk]


def flex_output(mask_mod, query, key, value):
    """flex_attention run eagerly on the CPU (its warning about running without
    torch.compile is expected here: the reference is the unfused implementation)."""
    batch, heads, q_len, _ = query.shape
    block_mask = create_block_mask(mask_mod, batch, heads, q_len, key.shape[-2], device="cpu")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
        return flex_attention(query, key, value, block_mask=block_mask)


DOCUMENT_IDS = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2, 2], [0, 1, 1, 1, 1, 1, 3, 3, 0]])


def helper_and_mod(name, size):
    """A mask helper's result, broadcast to [B, H, T, T], and the mask_mod it implements."""
    if name == "causal":
        return causal_mask(size), causal_mod
    if name == "sliding_window":
        return sliding_window_mask(size, 3), window_mod(3)
    if name == "document":
        ids = DOCUMENT_IDS[:, :size]
        return document_mask(ids), document_mod(ids)
    return prefix_lm_mask(size, 4), prefix_mod(4)


HELPERS = ["causal", "sliding_window", "document", "prefix_lm"]


@pytest.mark.parametrize("name", HELPERS)
@pytest.mark.parametrize("size", [1, 4, 9])
def test_mask_helpers_match_flex_create_mask(name, size):
    mask, mask_mod = helper_and_mod(name, size)
    expected = flex_mask(mask_mod, 2, 3, size, size)
    assert mask.dtype == torch.bool
    assert torch.equal(mask.expand(2, 3, size, size), expected)
    assert torch.equal(from_mask_mod(mask_mod, size, size, batch=2, heads=3), expected)


@pytest.mark.parametrize("name", HELPERS)
def test_attention_with_mask_helpers_matches_flex_attention(name):
    mask, mask_mod = helper_and_mod(name, 9)
    query, key, value = random_qkv((2, 3, 9, 8), (2, 3, 9, 8), (2, 3, 9, 8))
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    torch.testing.assert_close(output, flex_output(mask_mod, query, key, value))
    assert torch.equal(weights > 0, mask.expand_as(weights))  # exactly the allowed keys


def random_qkv(*shapes):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=generator) for shape in shapes]


@given(q_len=st.integers(0, 9), kv_len=st.integers(0, 9), rule=st.sampled_from(HELPERS))
def test_from_mask_mod_gives_what_flex_create_mask_gives_for_every_shape(q_len, kv_len, rule):
    # FlexAttention calls row i with q_idx = i (top-left) for any Tq and Tk, Tq > Tk included.
    _, mask_mod = helper_and_mod(rule, 9)
    if q_len and kv_len:
        expected = flex_mask(mask_mod, 2, 3, q_len, kv_len)
    else:
        # create_mask itself fails on an empty axis for some rules (its vmap indexes element
        # 0, e.g. for the sliding window); an empty mask has one right answer: no entries.
        expected = torch.zeros(2, 3, q_len, kv_len, dtype=torch.bool)
    assert torch.equal(from_mask_mod(mask_mod, q_len, kv_len, batch=2, heads=3), expected)


@pytest.mark.parametrize(("q_len", "kv_len"), [(3, 7), (1, 5), (4, 4)])
def test_from_mask_mod_q_offset_places_new_queries_after_a_cache(q_len, kv_len):
    # Tq new queries against Tk keys (Tk - Tq cached): bottom-right, as a KV cache needs.
    bottom_right = from_mask_mod(causal_mod, q_len, kv_len, q_offset=kv_len - q_len)
    assert torch.equal(bottom_right, causal_mask(kv_len)[-q_len:])
    shifted = flex_mask(
        lambda b, h, q, kv: causal_mod(b, h, q + kv_len - q_len, kv), 1, 1, q_len, kv_len
    )[0, 0]
    assert torch.equal(bottom_right, shifted)
    top_left = from_mask_mod(causal_mod, q_len, kv_len)
    assert torch.equal(top_left, bottom_right) == (q_len == kv_len)


def test_from_mask_mod_shapes_and_per_head_masks():
    per_head = lambda b, h, q_idx, kv_idx: kv_idx <= q_idx - h  # noqa: E731
    mask = from_mask_mod(per_head, 4, 4, heads=2)
    assert mask.shape == (1, 2, 4, 4)
    assert torch.equal(mask, flex_mask(per_head, 1, 2, 4, 4))
    assert from_mask_mod(causal_mod, 4, 4, batch=3).shape == (3, 1, 4, 4)
    assert from_mask_mod(causal_mod, 0, 0).shape == (0, 0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: from_mask_mod("causal", 2, 2), TypeError, "mask_mod must be callable"),
        (lambda: from_mask_mod(lambda b, h, q, kv: True, 2, 2), TypeError, "torch.bool"),
        (lambda: from_mask_mod(lambda b, h, q, kv: (kv - q).float(), 2, 2), TypeError, "float"),
        (lambda: from_mask_mod(causal_mod, 3, 2, q_offset=-1), ValueError, "q_offset"),
        (lambda: from_mask_mod(causal_mod, 3, 2, q_offset=1.0), TypeError, "q_offset"),
        (lambda: from_mask_mod(causal_mod, -1, 2), ValueError, "q_len"),
        (lambda: from_mask_mod(causal_mod, 2, 2, heads=0), ValueError, "heads"),
        (
            lambda: from_mask_mod(lambda b, h, q, kv: torch.ones(5, dtype=torch.bool), 2, 2),
            ValueError,
            "broadcast",
        ),
        (lambda: sliding_window_mask(4, 0), ValueError, "window"),
        (lambda: sliding_window_mask(4.0, 2), TypeError, "size"),
        (lambda: prefix_lm_mask(4, -1), ValueError, "prefix_len"),
        (lambda: document_mask(torch.zeros(3)), TypeError, "document_ids"),
        (lambda: document_mask([0, 1]), TypeError, "document_ids"),
        (lambda: document_mask(torch.zeros(1, 1, 3, dtype=torch.long)), ValueError, r"\[T\]"),
    ],
)
def test_function_mask_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_sliding_window_matches_transformers_mistral_masks():
    from transformers import MistralConfig
    from transformers.masking_utils import create_sliding_window_causal_mask

    config = MistralConfig(
        hidden_size=16,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_hidden_layers=1,
        intermediate_size=32,
        vocab_size=8,
        sliding_window=3,
    )
    embeds = torch.zeros(2, 9, 16)  # [B, T, D]: only its shape is read
    positions = torch.arange(9).expand(2, -1)
    for implementation in ("sdpa", "eager"):
        config._attn_implementation = implementation
        theirs = create_sliding_window_causal_mask(
            config, embeds, None, None, position_ids=positions, allow_is_causal_skip=False
        )
        allowed = theirs if theirs.dtype == torch.bool else theirs == 0  # eager: additive
        assert torch.equal(allowed, sliding_window_mask(9, 3).expand(2, 1, 9, 9)), implementation


@pytest.mark.parametrize(("q_len", "kv_len"), [(5, 5), (2, 6), (1, 6)])
def test_is_causal_is_top_left_and_the_library_bottom_right(q_len, kv_len):
    query, key, value = random_qkv((2, 3, q_len, 8), (2, 3, kv_len, 8), (2, 3, kv_len, 8))
    fused = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    top_left, _ = scaled_dot_product_attention(
        query, key, value, from_mask_mod(causal_mod, q_len, kv_len)
    )
    bottom_right, _ = scaled_dot_product_attention(query, key, value, causal_mask(kv_len)[-q_len:])
    torch.testing.assert_close(fused, top_left)
    if q_len == kv_len:
        torch.testing.assert_close(fused, bottom_right)
    else:  # the KV-cache trap: is_causal hides the cached keys the new queries may see
        assert not torch.allclose(fused, bottom_right)


@given(size=st.integers(0, 12), window=st.integers(1, 14))
def test_sliding_window_rows_hold_the_last_window_positions(size, window):
    mask = sliding_window_mask(size, window)
    assert torch.equal(mask, from_mask_mod(window_mod(window), size, size))
    assert torch.equal(mask.sum(-1), torch.arange(size).clamp(max=window - 1) + 1)
    assert torch.equal(mask & causal_mask(size), mask)
    if window >= size:
        assert torch.equal(mask, causal_mask(size))


@given(ids=st.lists(st.integers(0, 3), min_size=0, max_size=12))
def test_document_mask_is_causal_within_and_blocks_across_documents(ids):
    document_ids = torch.tensor(ids, dtype=torch.long)
    mask = document_mask(document_ids)
    size = len(ids)
    same = document_ids[:, None] == document_ids[None, :]
    assert torch.equal(mask, same & causal_mask(size))
    assert torch.equal(document_mask(document_ids[None])[0, 0], mask)
    assert mask.diagonal().all()  # every position sees itself: no empty rows
    assert torch.equal(document_mask(torch.zeros(size, dtype=torch.long)), causal_mask(size))


@given(size=st.integers(0, 12), prefix_len=st.integers(0, 14))
def test_prefix_lm_mask_is_bidirectional_in_the_prefix_and_causal_after(size, prefix_len):
    mask = prefix_lm_mask(size, prefix_len)
    prefix = min(size, prefix_len)
    assert mask[:prefix, :prefix].all()
    assert torch.equal(mask[prefix:, prefix:], causal_mask(size - prefix))
    assert not mask[:prefix, prefix:].any()
    assert torch.equal(mask, from_mask_mod(prefix_mod(prefix_len), size, size))
