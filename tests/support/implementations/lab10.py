"""Lab 10's learner code, used as data: sliding-window and document masks.

Written as a learner writes them: right implementations written otherwise than the page's
solution, and wrong ones with one mistake of the check's catalogue each
(check_sliding_window_mask and check_document_mask in attention_lab.checks). ``RIGHT`` lists
``(check, implementation)`` pairs, ``WRONG`` ``(check, implementation, mistake key)``.
test_checks_lab10.py and test_checks.py run them through the check.
"""

from __future__ import annotations

import torch

from attention_lab.checks import check_document_mask, check_sliding_window_mask
from attention_lab.masks import from_mask_mod


def grid(size):
    position = torch.arange(size)
    return position[:, None], position[None, :]  # query i [T, 1], key j [1, T]


def causal(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


# ---------------------------------------------------------------------------------------------
# Right, written differently.


def window_by_comparisons(size, window):
    i, j = grid(size)
    return (j <= i) & (i - j < window)


def window_as_a_difference_of_triangles(size, window):
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ~ones.tril(diagonal=-window)


def window_row_by_row(size, window):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, max(0, i - window + 1) : i + 1] = True
    return mask


def window_as_a_mask_mod(size, window):
    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window)

    return from_mask_mod(mask_mod, size, size)


def documents_by_comparing_ids(document_ids):
    same = document_ids[:, None] == document_ids[None, :]  # [T, T]
    return same & causal(len(document_ids))


def documents_pair_by_pair(document_ids):
    size = len(document_ids)
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        for j in range(i + 1):
            mask[i, j] = bool(document_ids[i] == document_ids[j])
    return mask


def documents_as_blocks(document_ids):
    _, counts = torch.unique_consecutive(document_ids, return_counts=True)
    return torch.block_diag(*(causal(int(n)) for n in counts))


def documents_by_segments(document_ids):
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[1:] = document_ids[1:] != document_ids[:-1]
    segment = starts.long().cumsum(0)
    return torch.tril(segment.unsqueeze(1) == segment.unsqueeze(0))


RIGHT = [
    (check_sliding_window_mask, window_by_comparisons),
    (check_sliding_window_mask, window_as_a_difference_of_triangles),
    (check_sliding_window_mask, window_row_by_row),
    (check_sliding_window_mask, window_as_a_mask_mod),
    (check_document_mask, documents_by_comparing_ids),
    (check_document_mask, documents_pair_by_pair),
    (check_document_mask, documents_as_blocks),
    (check_document_mask, documents_by_segments),
]


# ---------------------------------------------------------------------------------------------
# Wrong, one mistake each, learner-style.


def window_from_triu_of_window(size, window):
    ones = torch.ones(size, size, dtype=torch.bool)
    return ones.tril() & ones.triu(-window)


def window_of_the_keys_before(size, window):
    i, j = grid(size)
    return (j <= i) & (i - j < window - 1)


def window_both_ways(size, window):
    i, j = grid(size)
    return (i - j).abs() < window


def window_both_ways_inclusive(size, window):
    i, j = grid(size)
    return (i - j).abs() <= window


def window_transposed(size, window):
    return window_by_comparisons(size, window).T


def window_inverted(size, window):
    i, j = grid(size)
    return (j > i) | (i - j >= window)


def window_forgotten(size, window):
    return causal(size)


def window_without_causal(size, window):
    i, j = grid(size)
    return j > i - window


def window_loop_without_self(size, window):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, max(0, i - window + 1) : i] = True
    return mask


def window_positive_offset(size, window):
    ones = torch.ones(size, size, dtype=torch.bool)
    return torch.tril(ones) & torch.triu(ones, diagonal=window - 1)


def window_or(size, window):
    i, j = grid(size)
    return (j <= i) | (i - j < window)


def window_as_ints(size, window):
    return torch.ones(size, size, dtype=torch.long).tril().triu(-(window - 1))


def window_in_numpy(size, window):
    import numpy as np

    ones = np.ones((size, size), dtype=bool)
    return np.tril(ones) & np.triu(ones, -(window - 1))


def window_additive(size, window):
    allowed = window_by_comparisons(size, window)
    return torch.zeros(size, size).masked_fill(~allowed, float("-inf"))


def window_from_float_ones(size, window):
    ones = torch.ones(size, size)  # float32: & raises on it
    return torch.tril(ones) & torch.triu(ones, diagonal=-(window - 1))


def documents_by_one_hot(document_ids):
    one_hot = torch.nn.functional.one_hot(document_ids)  # [T, ids]: int64 ids only
    same = (one_hot @ one_hot.T).bool()
    return same & causal(len(document_ids))


def documents_with_a_float_causal_part(document_ids):
    same = document_ids[:, None] == document_ids[None, :]
    return same & torch.ones(len(document_ids), len(document_ids)).tril()  # bool & float


def documents_only(document_ids):
    return document_ids.unsqueeze(0) == document_ids.unsqueeze(1)


def documents_forgotten(document_ids):
    return causal(len(document_ids))


def documents_transposed(document_ids):
    return documents_by_comparing_ids(document_ids).mT


def documents_inverted(document_ids):
    same = document_ids[:, None] == document_ids[None, :]
    return ~same | ~causal(len(document_ids))


def documents_or(document_ids):
    return (document_ids[:, None] == document_ids[None, :]) | causal(len(document_ids))


def documents_strictly_before(document_ids):
    same = document_ids[:, None] == document_ids[None, :]
    return same & causal(len(document_ids)).tril(-1)


def documents_by_ends(document_ids):
    ends = torch.zeros_like(document_ids, dtype=torch.bool)
    ends[:-1] = document_ids[1:] != document_ids[:-1]  # marks each document's last token
    segment = ends.long().cumsum(0)
    return torch.tril(segment[:, None] == segment[None, :])


def documents_as_blocks_of_unique_ids(document_ids):
    _, counts = torch.unique(document_ids, return_counts=True)
    return torch.block_diag(*(causal(int(n)) for n in counts))


def documents_elementwise(document_ids):
    return document_ids == document_ids.reshape(-1)


def documents_as_floats(document_ids):
    return documents_by_comparing_ids(document_ids).float()


def documents_additive(document_ids):
    allowed = documents_by_comparing_ids(document_ids)
    return (~allowed).float() * -1e9


def window_by_unclamped_slices(size, window):
    """Each row's keys as a slice from i - window + 1, not clamped at 0."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, i - window + 1 : i + 1] = True
    return mask


def documents_by_order(document_ids):
    """The ids compared with >=: earlier documents leak into later ones."""
    ids = document_ids
    return (ids[:, None] >= ids[None, :]) & causal(ids.shape[0])


WRONG = [
    (check_sliding_window_mask, window_by_unclamped_slices, "window_slice_wraps"),
    (check_document_mask, documents_by_order, "documents_compared_by_order"),
    (check_sliding_window_mask, window_from_triu_of_window, "window_one_too_wide"),
    (check_sliding_window_mask, window_of_the_keys_before, "window_one_too_narrow"),
    (check_sliding_window_mask, window_both_ways, "window_symmetric"),
    (check_sliding_window_mask, window_both_ways_inclusive, "window_symmetric"),
    (check_sliding_window_mask, window_transposed, "window_transposed"),
    (check_sliding_window_mask, window_inverted, "mask_inverted"),
    (check_sliding_window_mask, window_forgotten, "window_ignored"),
    (check_sliding_window_mask, window_without_causal, "window_not_causal"),
    (check_sliding_window_mask, window_loop_without_self, "window_excludes_self"),
    (check_sliding_window_mask, window_positive_offset, "diagonal_offset_sign"),
    (check_sliding_window_mask, window_or, "combined_with_or"),
    (check_sliding_window_mask, window_as_ints, "mask_not_bool"),
    (check_sliding_window_mask, window_additive, "additive_mask"),
    (check_sliding_window_mask, window_in_numpy, "mask_not_a_tensor"),
    (check_sliding_window_mask, window_from_float_ones, "float_mask_combined"),
    (check_document_mask, documents_by_one_hot, "one_hot_of_ids"),
    (check_document_mask, documents_with_a_float_causal_part, "float_mask_combined"),
    (check_document_mask, documents_only, "document_not_causal"),
    (check_document_mask, documents_forgotten, "documents_ignored"),
    (check_document_mask, documents_transposed, "document_transposed"),
    (check_document_mask, documents_inverted, "mask_inverted"),
    (check_document_mask, documents_or, "combined_with_or"),
    (check_document_mask, documents_strictly_before, "document_excludes_self"),
    (check_document_mask, documents_by_ends, "document_boundary_shifted"),
    (check_document_mask, documents_as_blocks_of_unique_ids, "documents_sorted"),
    (check_document_mask, documents_elementwise, "ids_compared_elementwise"),
    (check_document_mask, documents_as_floats, "mask_not_bool"),
    (check_document_mask, documents_additive, "additive_mask"),
]
