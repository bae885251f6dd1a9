"""Tests for attention_lab.data: synthetic sentences, padding, and their pandas tables."""

import numpy as np
import pandas
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pad_sequence as torch_pad_sequence

from attention_lab.data import (
    IGNORE_INDEX,
    generate_synthetic_data,
    multiquery_recall,
    pad_sequences,
    reversal_task,
    to_frame,
    validate_frame,
)
from attention_lab.masks import padding_mask

sentences = st.lists(st.lists(st.integers(0, 50), max_size=8), max_size=6)


def from_frame(frame: pandas.DataFrame) -> list[list[int]]:
    """Read sentences back out of a table: the first ``length`` position values of each row."""
    positions = frame.drop(columns="length")
    return [
        [int(value) for value in positions.iloc[row, :length]]
        for row, length in enumerate(frame["length"])
    ]


# generate_synthetic_data


@given(
    num_sentences=st.integers(0, 20),
    vocab_size=st.integers(1, 50),
    max_length=st.integers(0, 30),
    seed=st.integers(0, 2**32),
)
def test_generated_ids_and_lengths_are_in_range(num_sentences, vocab_size, max_length, seed):
    data = generate_synthetic_data(num_sentences, vocab_size, max_length, seed=seed)
    assert isinstance(data, list) and len(data) == num_sentences
    for sentence in data:
        assert isinstance(sentence, list)
        if max_length == 0:
            assert sentence == []
        else:
            assert 1 <= len(sentence) <= max_length
        # Plain Python ints, not numpy scalars (type() is exact: a bool or np.int64 would fail).
        assert all(type(token) is int for token in sentence)
        assert all(0 <= token < vocab_size for token in sentence)


def test_generated_lengths_cover_the_whole_range():
    data = generate_synthetic_data(2000, vocab_size=7, max_length=6, seed=1)
    assert {len(sentence) for sentence in data} == {1, 2, 3, 4, 5, 6}
    assert {token for sentence in data for token in sentence} == set(range(7))


def test_same_seed_same_data_different_seed_different_data():
    first = generate_synthetic_data(20, vocab_size=100, max_length=10, seed=7)
    assert generate_synthetic_data(20, vocab_size=100, max_length=10, seed=7) == first
    assert generate_synthetic_data(20, vocab_size=100, max_length=10, seed=8) != first


def test_seed_none_draws_fresh_data():
    first = generate_synthetic_data(20, vocab_size=1000, max_length=10)
    second = generate_synthetic_data(20, vocab_size=1000, max_length=10)
    assert first != second


def test_generation_leaves_global_random_state_alone():
    # The legacy global numpy state is exactly what must stay untouched.
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()  # noqa: NPY002
    generate_synthetic_data(10, vocab_size=5, max_length=5, seed=3)
    reversal_task(4, vocab_size=5, length=3, seed=3)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])  # noqa: NPY002


def test_max_length_zero_gives_empty_sentences():
    assert generate_synthetic_data(3, vocab_size=5, max_length=0, seed=0) == [[], [], []]
    assert generate_synthetic_data(0, vocab_size=5, max_length=4, seed=0) == []


# Bad arguments: each must raise the right exception naming the argument.

BAD_ARGUMENTS = [
    (generate_synthetic_data, (True, 5, 5), {}, TypeError, "num_sentences"),
    (generate_synthetic_data, (-1, 5, 5), {}, ValueError, "num_sentences"),
    (generate_synthetic_data, (3, 5.0, 5), {}, TypeError, "vocab_size"),
    (generate_synthetic_data, (3, 0, 5), {}, ValueError, "vocab_size"),
    (generate_synthetic_data, (3, 5, "4"), {}, TypeError, "max_length"),
    (generate_synthetic_data, (3, 5, -2), {}, ValueError, "max_length"),
    (generate_synthetic_data, (3, 5, 5), {"seed": 1.5}, TypeError, "seed"),
    (pad_sequences, ([[1, 2], [3, True]],), {}, TypeError, "sequences[1][1]"),
    (pad_sequences, ([[1, 2.0]],), {}, TypeError, "sequences[0][1]"),
    (pad_sequences, ([[1], "ab"],), {}, TypeError, "sequences[1]"),
    (pad_sequences, ([[1], [[2]]],), {}, TypeError, "sequences[1][0]"),
    (pad_sequences, ("abc",), {}, TypeError, "sequences"),
    (pad_sequences, (torch.tensor([[1, 2]]),), {}, TypeError, "sequences"),
    (pad_sequences, ([[1]],), {"pad_id": False}, TypeError, "pad_id"),
    (pad_sequences, ([[1]],), {"length": -1}, ValueError, "length"),
    (pad_sequences, ([[1]],), {"length": 2.0}, TypeError, "length"),
    (pad_sequences, ([[1], [2, 2**63]],), {}, ValueError, "sequences[1][1]"),
    (reversal_task, (4, 1, 3), {}, ValueError, "vocab_size"),
    (reversal_task, (4, 5, True), {}, TypeError, "length"),
    (reversal_task, (4, 5, 3), {"seed": -1}, ValueError, "seed"),
    (to_frame, ([[1, None]],), {}, TypeError, "sequences[0][1]"),
    (to_frame, ({0: [1]},), {}, TypeError, "sequences"),
    (to_frame, (torch.tensor([[1.0, 2.0]]),), {}, TypeError, "sequences"),
    (to_frame, (torch.tensor([1, 2]),), {}, ValueError, "sequences"),
    (to_frame, ([[1]],), {"pad_id": "0"}, TypeError, "pad_id"),
    (validate_frame, ({"length": [1]},), {"vocab_size": 5}, TypeError, "frame"),
    (validate_frame, (to_frame([[1]]),), {"vocab_size": True}, TypeError, "vocab_size"),
    (validate_frame, (to_frame([[1]]),), {"vocab_size": 0}, ValueError, "vocab_size"),
]


@pytest.mark.parametrize(
    "function, args, kwargs, error, name",
    BAD_ARGUMENTS,
    ids=[f"{case[0].__name__}-{case[4]}-{index}" for index, case in enumerate(BAD_ARGUMENTS)],
)
def test_bad_arguments_raise_naming_the_argument(function, args, kwargs, error, name):
    with pytest.raises(error) as info:
        function(*args, **kwargs)
    assert name in str(info.value)


def test_bool_message_matches_the_library_style():
    with pytest.raises(
        TypeError, match=r"^num_sentences must be a non-negative int, got bool True"
    ):
        generate_synthetic_data(True, 5, 5)


# pad_sequences


def test_pad_sequences_matches_a_manual_reference():
    padded = pad_sequences([[5, 3, 8], [7], []], pad_id=9)
    expected = torch.tensor([[5, 3, 8], [7, 9, 9], [9, 9, 9]])
    assert padded.dtype == torch.int64
    assert torch.equal(padded, expected)


def test_pad_sequences_to_a_fixed_length():
    padded = pad_sequences([[5, 3], [7]], length=4)
    assert torch.equal(padded, torch.tensor([[5, 3, 0, 0], [7, 0, 0, 0]]))


def test_pad_sequences_refuses_to_truncate():
    with pytest.raises(ValueError, match=r"sequences\[1\].*length=2"):
        pad_sequences([[1, 2], [1, 2, 3]], length=2)


@pytest.mark.parametrize("length, width", [(None, 0), (3, 3)])
def test_pad_sequences_of_no_sentences(length, width):
    padded = pad_sequences([], length=length)
    assert padded.shape == (0, width)
    assert padded.dtype == torch.int64


def test_pad_sequences_accepts_numpy_ints_and_tuples():
    padded = pad_sequences(((np.int64(4), 2), [np.int32(1)]))
    assert torch.equal(padded, torch.tensor([[4, 2], [1, 0]]))


@given(batch=st.lists(st.lists(st.integers(-5, 50), max_size=8), min_size=1, max_size=6))
def test_pad_sequences_matches_torch_pad_sequence(batch):
    pad_id = -1
    expected = torch_pad_sequence(
        [torch.tensor(sentence, dtype=torch.int64) for sentence in batch],
        batch_first=True,
        padding_value=pad_id,
    )
    torch.testing.assert_close(pad_sequences(batch, pad_id=pad_id), expected, rtol=0, atol=0)


@given(batch=st.lists(st.lists(st.integers(1, 50), max_size=8), min_size=1, max_size=6))
def test_padding_mask_marks_exactly_the_real_tokens(batch):
    # Ids start at 1, so the default pad_id 0 never occurs in the data.
    mask = padding_mask(pad_sequences(batch))[:, 0, 0, :]  # [B, T]
    width = max(len(sentence) for sentence in batch)
    expected = torch.tensor(
        [[position < len(sentence) for position in range(width)] for sentence in batch]
    ).reshape(len(batch), width)  # [B, T], also when width is 0
    assert torch.equal(mask, expected)


# reversal_task


def test_reversal_targets_are_the_inputs_reversed():
    inputs, targets = reversal_task(50, vocab_size=12, length=7, seed=0)
    assert inputs.shape == targets.shape == (50, 7)
    assert inputs.dtype == targets.dtype == torch.int64
    assert torch.equal(targets, inputs.flip(-1))
    assert torch.equal(targets[:, 0], inputs[:, -1])
    # 0 is reserved for padding; every other id is used.
    assert int(inputs.min()) >= 1 and int(inputs.max()) < 12
    assert set(inputs.unique().tolist()) == set(range(1, 12))


def test_reversal_is_seeded_and_targets_are_a_copy():
    inputs, targets = reversal_task(5, vocab_size=9, length=4, seed=3)
    again, _ = reversal_task(5, vocab_size=9, length=4, seed=3)
    other, _ = reversal_task(5, vocab_size=9, length=4, seed=4)
    assert torch.equal(inputs, again)
    assert not torch.equal(inputs, other)
    targets[0, 0] = 0
    assert int(inputs[0, -1]) != 0


# to_frame


def test_to_frame_layout():
    frame = to_frame([[5, 3, 8], [7], []])
    assert list(frame.columns) == ["length", "pos_0", "pos_1", "pos_2"]
    assert frame["length"].dtype == np.dtype("int64")
    assert all(frame[column].dtype == pandas.Int64Dtype() for column in frame.columns[1:])
    assert frame.index.name == "sentence"
    assert frame["length"].tolist() == [3, 1, 0]
    assert frame.loc[0, "pos_2"] == 8
    # Past the end the table holds <NA>, not a padding id.
    assert frame.loc[1, ["pos_1", "pos_2"]].isna().all()
    assert frame.loc[2].drop("length").isna().all()


def test_to_frame_of_no_sentences():
    frame = to_frame([])
    assert list(frame.columns) == ["length"]
    assert len(frame) == 0 and frame.index.name == "sentence"
    validate_frame(frame, vocab_size=1)


@given(batch=sentences)
def test_to_frame_round_trip(batch):
    frame = to_frame(batch)
    assert from_frame(frame) == batch
    assert validate_frame(frame, vocab_size=51) is None


def test_to_frame_from_a_padded_tensor():
    batch = [[5, 3, 8], [7], []]
    frame = to_frame(pad_sequences(batch, pad_id=-1), pad_id=-1)
    pandas.testing.assert_frame_equal(frame, to_frame(batch))


def test_to_frame_rejects_padding_inside_a_tensor_sentence():
    with pytest.raises(ValueError, match=r"sequences\[1\].*pad_id=0"):
        to_frame(torch.tensor([[1, 2, 0], [3, 0, 4]]))


# validate_frame: each corruption fails with a message that names the problem.


def corrupt(change):
    frame = to_frame([[1, 2, 3], [4, 5], [6]])
    changed = change(frame)  # None when the change edits the frame in place
    return frame if changed is None else changed


def set_value(row, column, value):
    def change(frame):
        frame.loc[row, column] = value

    return change


CORRUPTIONS = {
    "missing column": (lambda f: f.drop(columns="pos_1"), r"missing columns \['pos_1'\]"),
    "missing length": (lambda f: f.drop(columns="length"), r"missing column 'length'"),
    "extra column": (lambda f: f.assign(note="x"), r"unexpected columns \['note'\]"),
    "padded name": (lambda f: f.rename(columns={"pos_2": "pos_02"}), r"unexpected.*'pos_02'"),
    "duplicate column": (
        lambda f: pandas.concat([f, f[["pos_2"]]], axis=1),
        r"duplicate columns: 'pos_2'",
    ),
    "misordered columns": (
        lambda f: f[["length", "pos_1", "pos_0", "pos_2"]],
        r"out of order: column 1 is 'pos_1', expected 'pos_0'",
    ),
    "length first": (
        lambda f: f[["pos_0", "length", "pos_1", "pos_2"]],
        r"out of order: column 0 is 'pos_0', expected 'length'",
    ),
    "float length": (
        lambda f: f.astype({"length": "float64"}),
        r"'length' must have dtype int64, got float64",
    ),
    "nullable length": (
        lambda f: f.astype({"length": "Int64"}),
        r"'length' must have dtype int64, got Int64",
    ),
    "numpy position dtype": (
        lambda f: f.astype({"pos_0": "int64"}),
        r"'pos_0' must have the nullable dtype Int64, got int64",
    ),
    "float position dtype": (
        lambda f: f.astype({"pos_1": "float64"}),
        r"'pos_1' must have the nullable dtype Int64, got float64",
    ),
    "index name": (lambda f: f.rename_axis("row"), r"index must be named 'sentence'"),
    "missing inside": (
        set_value(0, "pos_1", pandas.NA),
        r"row 0: 'length' is 3 but the row has 2 non-missing values; "
        r"column 'pos_1' is missing a value inside the sentence",
    ),
    "value after end": (
        set_value(2, "pos_2", 7),
        r"row 2: 'length' is 1 but the row has 2 non-missing values; "
        r"column 'pos_2' holds 7 after the end",
    ),
    "padding after end": (set_value(2, "pos_1", 0), r"row 2: .*'pos_1' holds 0 after the end"),
    "length too small": (
        set_value(0, "length", 2),
        r"row 0: 'length' is 2 but the row has 3 non-missing values",
    ),
    "length too large": (
        set_value(1, "length", 3),
        r"row 1: 'length' is 3 but the row has 2 non-missing values",
    ),
    "length beyond columns": (
        set_value(1, "length", 4),
        r"row 1: length 4 is more than the 3 position columns",
    ),
    "gap with matching count": (
        # Row 1 keeps two values but moves one past its end: only the positions are wrong.
        lambda f: set_value(1, "pos_1", pandas.NA)(f) or set_value(1, "pos_2", 5)(f),
        r"row 1: 'length' is 2; column 'pos_1' is missing a value inside the sentence; "
        r"column 'pos_2' holds 5 after the end",
    ),
    "negative length": (set_value(2, "length", -1), r"row 2: length -1 is negative"),
    "id too large": (
        set_value(1, "pos_1", 10),
        r"row 1, column 'pos_1': token id 10 is outside \[0, vocab_size=10\)",
    ),
    "negative id": (
        set_value(0, "pos_0", -3),
        r"row 0, column 'pos_0': token id -3 is outside \[0, vocab_size=10\)",
    ),
}


def test_validate_frame_passes_on_to_frame_output():
    assert validate_frame(corrupt(lambda frame: None), vocab_size=10) is None


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_validate_frame_names_each_corruption(kind):
    change, message = CORRUPTIONS[kind]
    with pytest.raises(ValueError, match=message):
        validate_frame(corrupt(change), vocab_size=10)


def test_validate_frame_names_the_row_label_of_a_filtered_frame():
    frame = to_frame([[1], [2], [30]])
    frame = frame[frame["pos_0"] > 1]  # boolean filtering keeps labels 1 and 2
    with pytest.raises(ValueError, match=r"row 2, column 'pos_0': token id 30"):
        validate_frame(frame, vocab_size=10)


# --- Multi-query associative recall -------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    num_pairs=st.integers(1, 6), extra=st.integers(0, 6), vocab_extra=st.integers(0, 9),
    power_a=st.sampled_from([0.01, 0.3, 1.0]), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_multiquery_recall_asks_every_key_once_and_labels_its_value(
    num_pairs, extra, vocab_extra, power_a, seed
):
    seq_len = 4 * num_pairs + 2 * extra
    vocab = 2 * num_pairs + 2 + vocab_extra
    inputs, labels = multiquery_recall(5, num_pairs, seq_len, vocab, power_a=power_a, seed=seed)
    assert inputs.shape == labels.shape == (5, seq_len) and inputs.dtype == torch.int64
    context = 2 * num_pairs
    for row, label in zip(inputs.tolist(), labels.tolist(), strict=True):
        keys, values = row[0:context:2], row[1:context:2]
        assert len(set(keys)) == num_pairs
        assert all(1 <= k < vocab // 2 for k in keys) and all(
            vocab // 2 <= v < vocab for v in values
        )
        answer = dict(zip(keys, values, strict=True))
        asked = [(t, x) for t, x in enumerate(row) if t >= context and x != 0]
        assert sorted(x for _, x in asked) == sorted(keys)  # each key once, nothing else
        assert all((t - context) % 2 == 0 for t, _ in asked)
        scored = {t: y for t, y in enumerate(label) if y != IGNORE_INDEX}
        assert scored == {t: answer[x] for t, x in asked}


def test_multiquery_recall_draws_short_gaps_by_the_power_law_and_is_seeded():
    inputs, _ = multiquery_recall(4000, 1, 34, 8, power_a=0.01, seed=0)
    gaps = (inputs[:, 2:] != 0).float().argmax(dim=1) // 2  # the one query's offset / 2
    p = 0.01 * torch.arange(1, 17, dtype=torch.float64) ** (0.01 - 1)
    p /= p.sum()
    share = (gaps == 0).double().mean()
    margin = 5 * (p[0] * (1 - p[0]) / 4000) ** 0.5  # five binomial standard deviations
    assert abs(share - p[0]) < margin, (share, p[0])
    again, _ = multiquery_recall(4000, 1, 34, 8, power_a=0.01, seed=0)
    assert torch.equal(inputs, again)


def test_multiquery_recall_refuses_sizes_that_do_not_fit():
    with pytest.raises(ValueError, match="at least 4 \\* num_pairs"):
        multiquery_recall(1, 5, 18, 40)
    with pytest.raises(ValueError, match="even"):
        multiquery_recall(1, 2, 9, 40)
    with pytest.raises(ValueError, match="fewer than num_pairs"):
        multiquery_recall(1, 4, 16, 8)
    with pytest.raises(ValueError, match=r"power_a must lie in \(0, 1\]"):
        multiquery_recall(1, 2, 8, 10, power_a=0.0)
