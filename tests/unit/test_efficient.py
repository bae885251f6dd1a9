"""Tests for attention_lab.efficient: tiled attention against PyTorch's and the library's own."""

import itertools

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.efficient import peak_memory, tiled_attention
from attention_lab.masks import causal_mask, combine_masks, padding_mask
from support.tensors import HALF_TOLERANCE, random_inputs

CASES = {
    # name: (query, key, value, block_size)
    "tk_multiple_of_block": ([2, 8, 8], [2, 16, 8], [2, 16, 8], 4),
    "tk_not_multiple_of_block": ([2, 3, 10, 8], [2, 3, 23, 8], [2, 3, 23, 8], 4),
    "tk_below_block": ([2, 5, 8], [2, 7, 8], [2, 7, 8], 128),
    "block_size_1": ([2, 4, 8], [2, 6, 8], [2, 6, 8], 1),
    "tq_gt_tk": ([2, 9, 8], [2, 5, 8], [2, 5, 8], 2),
    "dv_ne_dk": ([2, 6, 8], [2, 10, 8], [2, 10, 3], 3),
    "extra_batch_dims": ([2, 3, 2, 5, 8], [2, 3, 2, 11, 8], [2, 3, 2, 11, 5], 4),
    "broadcast_batch": ([2, 3, 4, 8], [1, 3, 9, 8], [1, 3, 9, 8], 2),
    "no_batch": ([4, 8], [9, 8], [9, 5], 4),
}
MASK_KINDS = ["none", "causal", "padding", "combined"]


def make_mask(kind, query, key, seed=0):
    """A bool mask (True = may attend) that lets every query attend to at least key 0."""
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    query_len, key_len = query.shape[-2], key.shape[-2]
    # Position i of the queries may attend to keys 0..i, also when Tq != Tk.
    causal = causal_mask(max(query_len, key_len))[:query_len, :key_len]  # [Tq, Tk]
    batch_size = batch[0] if batch else 1
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(0, 3, (batch_size, key_len), generator=generator)  # [B, Tk]
    token_ids[:, 0] = 1  # never padding, so no row is fully blocked
    padding = padding_mask(token_ids)  # [B, 1, 1, Tk]
    # One singleton per further batch dimension and for Tq, so it broadcasts over them.
    padding = padding.view(batch_size, *[1] * max(len(batch) - 1, 0), 1, key_len)
    if not batch:
        padding = padding[0]  # [1, Tk]
    return {
        "none": None,
        "causal": causal,
        "padding": padding,
        "combined": combine_masks(causal, padding),
    }[kind]


def torch_reference(query, key, value, mask):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torch(case, mask_kind, dtype):
    *shapes, block_size = CASES[case]
    query, key, value = random_inputs(shapes, dtype)
    mask = make_mask(mask_kind, query, key)
    output = tiled_attention(query, key, value, mask, block_size=block_size)
    expected = torch_reference(query, key, value, mask)
    assert output.dtype == dtype
    assert output.shape == expected.shape
    torch.testing.assert_close(output, expected)


@pytest.mark.parametrize("mask_kind", ["none", "combined"])
@pytest.mark.parametrize("case", ["tk_not_multiple_of_block", "dv_ne_dk", "no_batch"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_matches_float32_reference(case, mask_kind, dtype):
    *shapes, block_size = CASES[case]
    query, key, value = random_inputs(shapes, dtype)
    mask = make_mask(mask_kind, query, key)
    output = tiled_attention(query, key, value, mask, block_size=block_size)
    assert output.dtype == dtype
    expected = torch_reference(query.float(), key.float(), value.float(), mask)
    torch.testing.assert_close(output.float(), expected, **HALF_TOLERANCE[dtype])


@pytest.mark.parametrize(("dtype", "key_len"), [(torch.float16, 4096), (torch.bfloat16, 512)])
def test_half_precision_accumulates_in_float32(dtype, key_len):
    # Equal scores and one key per block: the running sum grows by 1 per block. In float16 it
    # would stall at 2048 (bfloat16: 256), where adding 1 no longer changes it. The first
    # quarter of the values are 1 and the rest 0, so the exact output is 0.25.
    query = torch.zeros(1, 4, dtype=dtype)
    key = torch.zeros(key_len, 4, dtype=dtype)
    value = (torch.arange(key_len) < key_len // 4).to(dtype)[:, None]  # [Tk, 1]
    output = tiled_attention(query, key, value, block_size=1)
    assert torch.equal(output, torch.full((1, 1), 0.25, dtype=dtype))


@pytest.mark.parametrize("mask_kind", ["none", "causal", "combined", "blocked_rows"])
@pytest.mark.parametrize("case", ["tk_not_multiple_of_block", "extra_batch_dims", "no_batch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_library_attention(case, mask_kind, dtype):
    *shapes, block_size = CASES[case]
    query, key, value = random_inputs(shapes, dtype, seed=1)
    if mask_kind == "blocked_rows":
        mask = make_mask("combined", query, key).clone()
        mask[..., 1, :] = False  # query 1 may attend nothing
    else:
        mask = make_mask(mask_kind, query, key)
    expected, _ = scaled_dot_product_attention(query, key, value, mask)
    output = tiled_attention(query, key, value, mask, block_size=block_size)
    torch.testing.assert_close(output, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", [1, 2, 128])
def test_fully_masked_rows_are_zero_not_nan(dtype, block_size):
    query, key, value = random_inputs(([2, 3, 4, 8], [2, 3, 5, 8], [2, 3, 5, 6]), dtype)
    mask = torch.ones(2, 3, 4, 5, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of batch 0 may attend nothing
    mask[1, 2] = False  # every query of head 2 in batch 1
    mask[1, 0, 3, :4] = False  # a row whose only allowed key is in the last block
    blocked_rows = ~mask.any(dim=-1)  # [B, H, Tq]
    output = tiled_attention(query, key, value, mask, block_size=block_size)
    assert output.dtype == dtype
    assert not output.isnan().any()
    assert torch.equal(output[blocked_rows], torch.zeros_like(output[blocked_rows]))
    # The row with a single allowed key copies that key's value.
    assert torch.equal(output[1, 0, 3], value[1, 0, 4])


def test_fully_masked_rows_have_finite_gradients_equal_to_the_library_ones():
    shapes = ([3, 4], [5, 4], [5, 2])
    inputs = random_inputs(shapes, torch.float64)
    for tensor in inputs:
        tensor.requires_grad_(True)
    mask = causal_mask(5)[:3].clone()
    mask[1] = False
    tiled_attention(*inputs, mask, block_size=2).pow(2).sum().backward()
    grads = [tensor.grad.clone() for tensor in inputs]
    for tensor in inputs:
        tensor.grad = None
    scaled_dot_product_attention(*inputs, mask)[0].pow(2).sum().backward()
    for grad, tensor in zip(grads, inputs, strict=True):
        assert torch.isfinite(grad).all()
        torch.testing.assert_close(grad, tensor.grad)
    assert torch.equal(grads[0][1], torch.zeros(4, dtype=torch.float64))


def test_empty_key_sequence_gives_zero_output():
    query, key, value = random_inputs(([2, 3, 4], [2, 0, 4], [2, 0, 5]))
    output = tiled_attention(query, key, value, block_size=2)
    assert torch.equal(output, torch.zeros(2, 3, 5))


@given(
    data=st.data(),
    batch=st.integers(1, 3),
    query_len=st.integers(1, 12),
    key_len=st.integers(1, 40),
    key_dim=st.integers(1, 8),
    value_dim=st.integers(1, 8),
    block_size=st.integers(1, 48),
    scale=st.floats(0.1, 10.0),
    mask_layout=st.sampled_from(["none", "full", "shared", "keys_only", "per_batch_keys"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_property_matches_library_attention(
    data, batch, query_len, key_len, key_dim, value_dim, block_size, scale, mask_layout, seed
):
    mask_shape = {
        "none": None,
        "full": (batch, query_len, key_len),
        "shared": (query_len, key_len),
        "keys_only": (key_len,),
        "per_batch_keys": (batch, 1, key_len),
    }[mask_layout]
    mask = None
    if mask_shape is not None:
        drawn = data.draw(hnp.arrays(np.bool_, mask_shape), label="mask")
        mask = torch.from_numpy(drawn)
    generator = torch.Generator().manual_seed(seed)
    query = scale * torch.randn(batch, query_len, key_dim, generator=generator, dtype=torch.float64)
    key = scale * torch.randn(batch, key_len, key_dim, generator=generator, dtype=torch.float64)
    value = torch.randn(batch, key_len, value_dim, generator=generator, dtype=torch.float64)
    expected, _ = scaled_dot_product_attention(query, key, value, mask)
    output = tiled_attention(query, key, value, mask, block_size=block_size)
    assert not output.isnan().any()
    torch.testing.assert_close(output, expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"block_size": 0}, ValueError, "block_size"),
        ({"block_size": -3}, ValueError, "block_size"),
        ({"block_size": True}, TypeError, "block_size"),
        ({"block_size": 2.5}, TypeError, "block_size"),
        ({"block_size": "4"}, TypeError, "block_size"),
        ({"mask": torch.ones(3, 5, dtype=torch.int64)}, TypeError, r"mask\.bool\(\)"),
        ({"mask": torch.ones(3, 5)}, TypeError, "mask"),
        ({"mask": torch.ones(4, 5, dtype=torch.bool)}, ValueError, "mask"),
        ({"mask": torch.ones(2, 2, 3, 5, dtype=torch.bool)}, ValueError, "mask"),
        ({"query": torch.randn(2, 3, 6)}, ValueError, "query"),
        ({"query": torch.ones(2, 3, 4, dtype=torch.int64)}, TypeError, "query"),
        ({"query": torch.randn(4)}, ValueError, "query"),
        ({"key": torch.randn(2, 5, 4, dtype=torch.float64)}, TypeError, "key"),
        ({"value": torch.randn(2, 6, 7)}, ValueError, "value"),
        ({"value": [[1.0]]}, TypeError, "value"),
        ({"key": torch.randn(3, 5, 4), "value": torch.randn(3, 5, 7)}, ValueError, "batch"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(kwargs, error, match):
    arguments = {
        "query": torch.randn(2, 3, 4),
        "key": torch.randn(2, 5, 4),
        "value": torch.randn(2, 5, 7),
        "mask": None,
        "block_size": 2,
    }
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        tiled_attention(**arguments)


class LargestAllocation(TorchDispatchMode):
    """Records the number of elements of the largest tensor any operation allocates.

    Views (slices, transposes, ``expand``) share their input's memory and are not counted.
    """

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not func.is_view:
            outputs = result if isinstance(result, tuple | list) else (result,)
            for output in outputs:
                if isinstance(output, torch.Tensor):
                    self.largest = max(self.largest, output.numel())
        return result


def largest_allocation(function, *args, **kwargs):
    with LargestAllocation() as recorder:
        function(*args, **kwargs)
    return recorder.largest


def test_memory_grows_linearly_with_sequence_length():
    batch, heads, dim, block_size = 1, 1, 16, 64
    largest_tiled, largest_full = {}, {}
    for seq_len in (256, 512, 1024):
        query, key, value = random_inputs([[batch, heads, seq_len, dim]] * 3)
        mask = combine_masks(
            causal_mask(seq_len), padding_mask(torch.ones(batch, seq_len, dtype=torch.int64))
        )  # [B, 1, T, T], made before recording: it is an input
        largest_tiled[seq_len] = largest_allocation(
            tiled_attention, query, key, value, mask, block_size=block_size
        )
        largest_full[seq_len] = largest_allocation(
            scaled_dot_product_attention, query, key, value, mask
        )
        # The largest intermediate is one block of scores, never the full [Tq, Tk] matrix.
        assert largest_tiled[seq_len] == batch * heads * seq_len * block_size
        assert largest_full[seq_len] >= batch * heads * seq_len * seq_len
    # Doubling T doubles the tiled memory but quadruples the full one.
    assert largest_tiled[512] == 2 * largest_tiled[256]
    assert largest_tiled[1024] == 2 * largest_tiled[512]
    assert largest_full[512] == 4 * largest_full[256]
    assert largest_full[1024] == 4 * largest_full[512]


def test_memory_recorder_sees_allocations():
    # Guards the memory test: the recorder must count a fresh allocation and skip a view.
    x = torch.ones(2, 3)
    assert largest_allocation(lambda: x.expand(10, 2, 3)) == 0
    assert largest_allocation(lambda: x.expand(10, 2, 3).clone()) == 60


# peak_memory: the dispatcher-level allocation counter the chapter and the benchmarks use.


def test_peak_memory_counts_live_storage_exactly():
    def two_at_once():
        a = torch.ones(1000)  # 4000 bytes
        b = torch.ones(500, dtype=torch.float64)  # 4000 bytes, while a lives
        return a, b

    def one_after_another():
        for _ in range(3):
            torch.ones(1000).sum()  # each 4000-byte tensor is freed before the next

    assert peak_memory(two_at_once) == 8000
    assert peak_memory(one_after_another) == 4000 + 4
    assert peak_memory(torch.zeros, 10, 10) == 400


def test_peak_memory_ignores_inputs_and_views():
    x = torch.ones(100, 100)
    assert peak_memory(lambda: x.view(10_000)[:5].unsqueeze(0)) == 0  # views only
    assert peak_memory(lambda: x.t().reshape(10_000)) == 40_000  # a copy: t() is not contiguous
    assert peak_memory(lambda: x.contiguous()) == 0  # returns its input
    assert peak_memory(lambda: x.clone()) == 40_000


def test_peak_memory_sees_the_score_matrix_of_full_attention():
    query, key, value = random_inputs([[1, 1, 512, 16]] * 3)
    scores_bytes = 512 * 512 * 4
    full = peak_memory(scaled_dot_product_attention, query, key, value)
    tiled = peak_memory(tiled_attention, query, key, value, block_size=64)
    assert full >= 2 * scores_bytes  # scores and weights live together
    assert tiled < scores_bytes  # a few [Tq, block_size] blocks, never [Tq, Tk]


def test_peak_memory_rejects_a_non_callable():
    with pytest.raises(TypeError, match="function must be callable"):
        peak_memory(42)


@pytest.mark.parametrize("use_mask", [False, True])
def test_peak_live_memory_of_tiled_attention_is_linear_in_sequence_length(use_mask):
    # The largest single allocation (above) could stay small while blocks pile up; the peak of
    # live memory cannot: if tiled_attention kept its blocks alive it would grow like T².
    peaks_tiled, peaks_full = [], []
    for seq_len in (256, 512, 1024, 2048):
        query, key, value = random_inputs([[1, 2, seq_len, 16]] * 3)
        mask = causal_mask(seq_len) if use_mask else None
        peaks_tiled.append(peak_memory(tiled_attention, query, key, value, mask, block_size=64))
        peaks_full.append(peak_memory(scaled_dot_product_attention, query, key, value, mask))
    for smaller, larger in itertools.pairwise(peaks_tiled):
        assert 1.9 <= larger / smaller <= 2.1, peaks_tiled
    for smaller, larger in itertools.pairwise(peaks_full):
        assert larger / smaller >= 3.8, peaks_full
