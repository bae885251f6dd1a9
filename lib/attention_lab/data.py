"""Synthetic token sequences, padding, and pandas tables that show and validate them.

A sentence here is a list of token ids (plain Python ints). Sentences have different lengths;
:func:`pad_sequences` turns a batch of them into one ``[B, T]`` tensor and
``attention_lab.masks.padding_mask`` then hides the padding from attention.
:func:`multiquery_recall` makes the recall task on which fixed-size states are measured
(Part VII). :func:`to_frame`
lays a batch out as a ``pandas.DataFrame`` that keeps the truth (positions past a sentence's
end are missing, not padding), and :func:`validate_frame` checks such a table.

Randomness always comes from a local ``numpy.random.Generator``: nothing here reads or changes
global random state, so a page that fixes ``seed`` gets the same data on every build.
"""

import numbers
import re

import numpy as np
import pandas
import torch

from attention_lab._validation import check_int

# Token ids become int64 tensors; a Python int outside this range cannot be stored in one.
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_POSITION_COLUMN = re.compile(r"pos_(0|[1-9][0-9]*)")


def _check_seed(seed: int | None) -> None:
    """Require ``None`` or a non-negative int, the seeds ``numpy.random.default_rng`` accepts."""
    if seed is not None:
        check_int(seed, "seed", minimum=0)


def _check_token_id(value: int, name: str) -> None:
    """Require an int (not a bool) token id that fits in int64."""
    # bool is a subclass of int, but a True among token ids is always a mistake.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int token id, got {type(value).__name__} {value!r}")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{name} must fit in int64, got {value}")


def _check_sequences(sequences: list[list[int]]) -> list[list[int]]:
    """Check a batch of sentences and return it as lists of plain Python ints."""
    if not isinstance(sequences, list | tuple):
        # A tensor here is most likely a batch that is already padded.
        hint = " (already padded? then no padding is needed)" if torch.is_tensor(sequences) else ""
        raise TypeError(
            "sequences must be a list of lists of int token ids, "
            f"got {type(sequences).__name__}{hint}"
        )
    checked = []
    for index, sequence in enumerate(sequences):
        # A string is a sequence too, but its items are characters, not token ids.
        if not isinstance(sequence, list | tuple):
            raise TypeError(
                f"sequences[{index}] must be a list of int token ids, "
                f"got {type(sequence).__name__} {sequence!r}"
            )
        for position, token in enumerate(sequence):
            _check_token_id(token, f"sequences[{index}][{position}]")
        checked.append([int(token) for token in sequence])
    return checked


def generate_synthetic_data(
    num_sentences: int, vocab_size: int, max_length: int, *, seed: int | None = None
) -> list[list[int]]:
    """Draw random sentences of random lengths: a batch to pad, mask and tabulate.

    Each sentence's length is drawn uniformly from ``[1, max_length]`` and each of its token
    ids uniformly from ``[0, vocab_size)``. The tokens carry no pattern; use
    :func:`reversal_task` for data a model can learn.

    Args:
        num_sentences: How many sentences, a non-negative int.
        vocab_size: Number of distinct token ids, a positive int.
        max_length: Longest possible sentence, a non-negative int. If it is 0 every sentence
            is empty.
        seed: Seed of a local ``numpy.random.Generator``: the same seed gives the same
            sentences. ``None`` draws fresh randomness on every call.

    Returns:
        ``num_sentences`` lists of plain Python ints, each of length in ``[1, max_length]``
        (0 when ``max_length`` is 0).

    Raises:
        TypeError: If an argument is not an int, or is a bool.
        ValueError: If ``num_sentences``, ``max_length`` or ``seed`` is negative, or
            ``vocab_size`` is less than 1.

    Example:
        >>> generate_synthetic_data(2, vocab_size=10, max_length=4, seed=0)
        [[5, 2, 3, 0], [0, 0, 1]]
    """
    check_int(num_sentences, "num_sentences", minimum=0)
    check_int(vocab_size, "vocab_size", minimum=1)
    check_int(max_length, "max_length", minimum=0)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    if max_length == 0:
        lengths = np.zeros(num_sentences, dtype=np.int64)
    else:
        lengths = rng.integers(1, max_length, size=num_sentences, endpoint=True)
    # One draw for all tokens, split afterwards: faster than one draw per sentence.
    tokens = rng.integers(0, vocab_size, size=int(lengths.sum()))
    pieces = np.split(tokens, np.cumsum(lengths)[:-1]) if num_sentences else []
    # tolist() yields plain Python ints, not numpy scalars.
    return [piece.tolist() for piece in pieces]


def pad_sequences(
    sequences: list[list[int]], *, pad_id: int = 0, length: int | None = None
) -> torch.Tensor:
    """Stack sentences of different lengths into one tensor, filling the tail with ``pad_id``.

    Args:
        sequences: ``B`` sentences, each a list of int token ids.
        pad_id: The id written after each sentence's end. To recover the sentences with
            ``attention_lab.masks.padding_mask``, choose an id that no sentence contains.
        length: Width ``T`` of the result. ``None`` uses the longest sentence. A sentence
            longer than ``length`` is an error: nothing is truncated silently.

    Returns:
        Shape ``[B, T]``, dtype ``torch.int64``: row ``i`` holds ``sequences[i]`` followed by
        ``pad_id``. An empty batch gives shape ``[0, T]`` with ``T = length or 0``.

    Raises:
        TypeError: If ``sequences`` is not a list of lists, a token id is not an int (or is a
            bool; the message names the sentence index and position), or ``pad_id`` or
            ``length`` is not an int.
        ValueError: If ``length`` is negative, a sentence is longer than ``length``, or an id
            does not fit in int64.

    Example:
        >>> pad_sequences([[5, 3, 8], [7]])
        tensor([[5, 3, 8],
                [7, 0, 0]])
    """
    checked = _check_sequences(sequences)
    _check_token_id(pad_id, "pad_id")
    if length is not None:
        check_int(length, "length", minimum=0)
        for index, sequence in enumerate(checked):
            if len(sequence) > length:
                raise ValueError(
                    f"sequences[{index}] has {len(sequence)} tokens, more than length={length}; "
                    "pad_sequences does not truncate (shorten the sentence or raise length)"
                )
        width = length
    else:
        width = max((len(sequence) for sequence in checked), default=0)
    padded = torch.full((len(checked), width), pad_id, dtype=torch.int64)  # [B, T]
    for index, sequence in enumerate(checked):
        if sequence:
            padded[index, : len(sequence)] = torch.tensor(sequence, dtype=torch.int64)
    return padded


def reversal_task(
    num_sentences: int, vocab_size: int, length: int, *, seed: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Make a learnable task: read a sequence, output it reversed.

    Every output position ``t`` must copy input position ``T - 1 - t``, so a model solves the
    task only by attending to the right place: the attention weights of a trained model show
    an anti-diagonal.

    Token ids are drawn uniformly from ``[1, vocab_size)``, never 0, so that 0 stays free to
    serve as the padding id (the default ``pad_id`` of :func:`pad_sequences` and of
    ``attention_lab.masks.padding_mask``).

    Args:
        num_sentences: Number of examples ``N``, a non-negative int.
        vocab_size: Number of distinct ids including the reserved 0, an int >= 2.
        length: Length ``T`` of every sequence, a non-negative int.
        seed: Seed of a local ``numpy.random.Generator``; ``None`` draws fresh randomness.

    Returns:
        ``(inputs, targets)``, each of shape ``[N, T]`` and dtype ``torch.int64``, with
        ``targets`` equal to ``inputs.flip(-1)``.

    Raises:
        TypeError: If an argument is not an int, or is a bool.
        ValueError: If ``num_sentences``, ``length`` or ``seed`` is negative, or
            ``vocab_size`` is less than 2 (id 0 is reserved, so at least one more is needed).

    Example:
        >>> inputs, targets = reversal_task(1, vocab_size=10, length=4, seed=0)
        >>> inputs, targets
        (tensor([[8, 6, 5, 3]]), tensor([[3, 5, 6, 8]]))
    """
    check_int(num_sentences, "num_sentences", minimum=0)
    check_int(vocab_size, "vocab_size", minimum=2)
    check_int(length, "length", minimum=0)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(num_sentences, length), dtype=np.int64)  # [N, T]
    inputs = torch.from_numpy(ids)  # [N, T]
    return inputs, inputs.flip(-1)  # flip copies, so the two tensors share no memory


#: The label of a position whose prediction is not scored (PyTorch's cross-entropy skips it).
IGNORE_INDEX = -100


def multiquery_recall(
    num_examples: int,
    num_pairs: int,
    seq_len: int,
    vocab_size: int,
    *,
    power_a: float = 0.01,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-query associative recall (MQAR), the task of Arora et al. (2023, "Zoology").

    Each example opens with ``num_pairs`` key-value pairs, ``k1 v1 k2 v2 ...``, keys from
    ``[1, V // 2)`` and values from ``[V // 2, V)``, no key twice. The rest of the sequence is 0
    (a filler) except that every key comes back once, as a query, at an even offset ``2 g`` of
    that part; a model must answer it with its value, at the query's own position (the next
    token it predicts). The gaps ``g`` are drawn without replacement with probability
    ``p(g) ~ power_a * (g + 1) ** (power_a - 1)``: a small ``power_a`` makes short gaps far
    likelier, as a repeated bigram in text comes back soon more often than late (``1.0`` is
    uniform). This follows the layout of Zoology's ``multiquery_ar``, except that the positions
    between the queries hold 0 where Zoology's default (``random_non_queries=True``) draws
    random tokens, which makes the task easier; the draws are this library's own (a local
    ``numpy.random.Generator``), so the same seed gives the same data here, not Zoology's.

    Args:
        num_examples: ``N``, a non-negative int.
        num_pairs: Key-value pairs per example, a positive int with ``4 * num_pairs <=
            seq_len`` (the queries need room).
        seq_len: ``T``, even.
        vocab_size: ``V``, an int with ``V // 2 - 1 >= num_pairs`` (enough distinct keys) and
            ``V - V // 2 >= num_pairs`` (values).
        power_a: The power law's exponent, a real number in ``(0, 1]``.
        seed: Seed of a local ``numpy.random.Generator``; ``None`` draws fresh randomness.

    Returns:
        ``(inputs, labels)``, both ``[N, T]`` ``torch.int64``: ``labels`` holds each query's
        value at the query's position and :data:`IGNORE_INDEX` everywhere else.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If a size is out of range or ``seq_len`` is odd.

    Example:
        >>> inputs, labels = multiquery_recall(1, num_pairs=2, seq_len=8, vocab_size=10, seed=0)
        >>> inputs.shape, int((labels != IGNORE_INDEX).sum())
        (torch.Size([1, 8]), 2)
    """
    check_int(num_examples, "num_examples", minimum=0)
    check_int(num_pairs, "num_pairs")
    check_int(seq_len, "seq_len")
    check_int(vocab_size, "vocab_size")
    _check_seed(seed)
    if isinstance(power_a, bool) or not isinstance(power_a, numbers.Real):
        raise TypeError(f"power_a must be a real number, got {type(power_a).__name__}")
    if not 0 < power_a <= 1:
        raise ValueError(f"power_a must lie in (0, 1], got {power_a}")
    if seq_len % 2 or 4 * num_pairs > seq_len:
        raise ValueError(
            f"seq_len must be even and at least 4 * num_pairs = {4 * num_pairs}, got {seq_len}"
        )
    half = vocab_size // 2
    if half - 1 < num_pairs or vocab_size - half < num_pairs:
        raise ValueError(
            f"vocab_size {vocab_size} has {half - 1} keys and {vocab_size - half} values, "
            f"fewer than num_pairs = {num_pairs}"
        )
    rng = np.random.default_rng(seed)
    context = 2 * num_pairs
    space = (seq_len - context) // 2  # offsets a query may take, each two positions apart
    p = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    p /= p.sum()
    inputs = np.zeros((num_examples, seq_len), dtype=np.int64)
    labels = np.full((num_examples, seq_len), IGNORE_INDEX, dtype=np.int64)
    for n in range(num_examples):
        keys = rng.choice(np.arange(1, half), size=num_pairs, replace=False)
        values = rng.choice(np.arange(half, vocab_size), size=num_pairs, replace=False)
        gaps = rng.choice(space, size=num_pairs, replace=False, p=p)
        inputs[n, 0:context:2], inputs[n, 1:context:2] = keys, values
        inputs[n, context + 2 * gaps] = keys  # each key asked once
        labels[n, context + 2 * gaps] = values  # answered at the query's own position
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def _unpad(token_ids: torch.Tensor, pad_id: int) -> list[list[int]]:
    """Turn a padded ``[B, T]`` tensor back into sentences, requiring padding only at the end."""
    if token_ids.dtype == torch.bool or token_ids.is_floating_point() or token_ids.is_complex():
        raise TypeError(f"sequences must have an integer dtype, got {token_ids.dtype}")
    if token_ids.ndim != 2:
        raise ValueError(f"sequences must have shape [B, T], got {list(token_ids.shape)}")
    real = token_ids != pad_id  # [B, T]
    lengths = real.sum(dim=1)  # [B]
    positions = torch.arange(token_ids.shape[1])  # [T]
    # Padding inside a sentence would make the lengths ambiguous: refuse rather than guess.
    prefix = positions < lengths[:, None]  # [B, T]
    bad_rows = (real != prefix).any(dim=1).nonzero().flatten().tolist()
    if bad_rows:
        raise ValueError(
            f"sequences[{bad_rows[0]}] contains pad_id={pad_id} before a real token; "
            "a padded tensor may hold pad_id only after each sentence's end"
        )
    rows = token_ids.tolist()
    return [row[:count] for row, count in zip(rows, lengths.tolist(), strict=True)]


def to_frame(sequences: list[list[int]] | torch.Tensor, *, pad_id: int = 0) -> pandas.DataFrame:
    """Lay a batch of sentences out as a table: one row per sentence, one column per position.

    The table keeps the truth: positions past a sentence's end are missing (``<NA>``), not
    padding. Padding is a separate step (:func:`pad_sequences`).

    Args:
        sequences: ``B`` sentences, each a list of int token ids; or a padded tensor of shape
            ``[B, T]`` with an integer dtype, in which ``pad_id`` may appear only after each
            sentence's end.
        pad_id: The padding id of a tensor ``sequences``; ignored for lists.

    Returns:
        A ``pandas.DataFrame`` with index ``0 .. B-1`` named ``"sentence"`` and columns
        ``"length"`` (dtype ``int64``) then ``"pos_0"`` ... ``"pos_{T-1}"`` (nullable dtype
        ``Int64``), where ``T`` is the longest sentence's length.

    Raises:
        TypeError: If ``sequences`` is not a list of lists of ints (the message names the
            sentence index and position of a bad token) or an integer tensor, or ``pad_id``
            is not an int.
        ValueError: If a tensor ``sequences`` is not two-dimensional or has padding before a
            real token.

    Example:
        >>> to_frame([[5, 3], [7]])  # doctest: +NORMALIZE_WHITESPACE
                  length  pos_0  pos_1
        sentence
        0              2      5      3
        1              1      7   <NA>
    """
    _check_token_id(pad_id, "pad_id")
    if isinstance(sequences, torch.Tensor):
        checked = _unpad(sequences, pad_id)
    else:
        checked = _check_sequences(sequences)
    lengths = np.array([len(sequence) for sequence in checked], dtype=np.int64)  # [B]
    width = int(lengths.max()) if len(checked) else 0
    values = np.zeros((len(checked), width), dtype=np.int64)  # [B, T]
    for index, sequence in enumerate(checked):
        values[index, : len(sequence)] = sequence
    missing = np.arange(width) >= lengths[:, None]  # [B, T], True past each sentence's end
    columns = {"length": lengths}
    for position in range(width):
        columns[f"pos_{position}"] = pandas.arrays.IntegerArray(
            values[:, position].copy(), missing[:, position].copy()
        )
    index = pandas.RangeIndex(len(checked), name="sentence")
    return pandas.DataFrame(columns, index=index)


def _check_columns(frame: pandas.DataFrame) -> list[str]:
    """Check the column names and order; return the position columns."""
    columns = list(frame.columns)
    duplicates = sorted({repr(c) for c in columns if columns.count(c) > 1})
    if duplicates:
        raise ValueError(f"frame has duplicate columns: {', '.join(duplicates)}")
    if "length" not in columns:
        raise ValueError("frame is missing column 'length'")
    extra = [c for c in columns if c != "length" and not _is_position_column(c)]
    if extra:
        raise ValueError(
            f"frame has unexpected columns {extra}; expected 'length' then 'pos_0', 'pos_1', ..."
        )
    positions = sorted(int(c[len("pos_") :]) for c in columns if c != "length")
    width = positions[-1] + 1 if positions else 0
    missing = [f"pos_{p}" for p in sorted(set(range(width)) - set(positions))]
    if missing:
        raise ValueError(f"frame is missing columns {missing} (it has up to 'pos_{width - 1}')")
    expected = ["length"] + [f"pos_{p}" for p in range(width)]
    for place, (got, want) in enumerate(zip(columns, expected, strict=True)):
        if got != want:
            raise ValueError(
                f"frame's columns are out of order: column {place} is {got!r}, expected "
                f"{want!r} (the order is 'length', 'pos_0', 'pos_1', ...)"
            )
    return expected[1:]


def _is_position_column(name: object) -> bool:
    """Whether ``name`` is a canonical position column: ``pos_0``, ``pos_12``, not ``pos_01``."""
    return isinstance(name, str) and _POSITION_COLUMN.fullmatch(name) is not None


def _row(frame: pandas.DataFrame, row: int) -> str:
    """Name row ``row`` (a position) by its index label, as ``frame.loc`` would find it."""
    label = frame.index[row]
    # A numpy scalar's repr is "np.int64(3)"; the reader wants "3".
    return repr(label.item() if isinstance(label, np.generic) else label)


def validate_frame(frame: pandas.DataFrame, *, vocab_size: int) -> None:
    """Check that a table has exactly the layout :func:`to_frame` produces, with valid ids.

    Use it on a table that was edited, filtered or loaded from a file before turning it back
    into sentences: it names the first problem instead of letting it surface later as a wrong
    result.

    Args:
        frame: The table to check: index named ``"sentence"``, columns ``"length"`` (dtype
            ``int64``) then ``"pos_0"`` ... ``"pos_{T-1}"`` (dtype ``Int64``). Row ``r`` holds
            ``length`` token ids in its first ``length`` position columns and ``<NA>`` in the
            rest.
        vocab_size: Token ids must lie in ``[0, vocab_size)``; a positive int.

    Returns:
        ``None`` if the table is valid.

    Raises:
        TypeError: If ``frame`` is not a ``pandas.DataFrame`` or ``vocab_size`` is not an int.
        ValueError: Naming the first problem found: a missing, extra, duplicate or misordered
            column; a wrong dtype; a wrong index name; a negative length or one longer than
            the number of position columns; a missing value before a sentence's end or a value
            after it; a ``length`` that does not match the number of non-missing values; or
            a token id outside ``[0, vocab_size)``. Row problems name the row and column.
    """
    if not isinstance(frame, pandas.DataFrame):
        raise TypeError(f"frame must be a pandas.DataFrame, got {type(frame).__name__}")
    check_int(vocab_size, "vocab_size", minimum=1)
    position_columns = _check_columns(frame)

    if frame["length"].dtype != np.dtype("int64"):
        raise ValueError(f"column 'length' must have dtype int64, got {frame['length'].dtype}")
    for column in position_columns:
        if frame[column].dtype != pandas.Int64Dtype():
            raise ValueError(
                f"column {column!r} must have the nullable dtype Int64, got {frame[column].dtype}"
            )
    if frame.index.name != "sentence":
        raise ValueError(f"frame's index must be named 'sentence', got {frame.index.name!r}")

    lengths = frame["length"].to_numpy()  # [B]
    width = len(position_columns)
    negative = np.flatnonzero(lengths < 0)
    if negative.size:
        row = negative[0]
        raise ValueError(f"row {_row(frame, row)}: length {lengths[row]} is negative")
    too_long = np.flatnonzero(lengths > width)
    if too_long.size:
        row = too_long[0]
        raise ValueError(
            f"row {_row(frame, row)}: length {lengths[row]} is more than the {width} "
            "position columns"
        )

    positions = frame[position_columns]
    missing = positions.isna().to_numpy(dtype=bool)  # [B, T]
    inside = np.arange(width) < lengths[:, None]  # [B, T], True before each sentence's end
    counts = (~missing).sum(axis=1)  # [B]
    # A gap inside a sentence and a value after its end are the two ways a row can break;
    # the count tells which of "length" or the values is likely wrong, so report both.
    gap = missing & inside  # [B, T]
    spill = ~missing & ~inside  # [B, T]
    bad_rows = np.flatnonzero((gap | spill).any(axis=1))
    if bad_rows.size:
        row = bad_rows[0]
        problems = []
        for position in np.flatnonzero(gap[row] | spill[row]):
            column = position_columns[position]
            if gap[row, position]:
                problems.append(f"column {column!r} is missing a value inside the sentence")
            else:
                value = positions.iat[row, position]
                problems.append(f"column {column!r} holds {value} after the end of the sentence")
        count_note = (
            f"'length' is {lengths[row]} but the row has {counts[row]} non-missing values"
            if counts[row] != lengths[row]
            else f"'length' is {lengths[row]}"
        )
        raise ValueError(
            f"row {_row(frame, row)}: {count_note}; {'; '.join(problems[:3])}. Row values must "
            "fill exactly the first 'length' position columns, with <NA> (not padding) after them"
        )

    ids = positions.to_numpy(dtype=np.int64, na_value=0)  # [B, T]
    out_of_range = ~missing & ((ids < 0) | (ids >= vocab_size))  # [B, T]
    bad = np.argwhere(out_of_range)
    if bad.size:
        row, position = bad[0]
        raise ValueError(
            f"row {_row(frame, row)}, column {position_columns[position]!r}: token id "
            f"{ids[row, position]} is outside [0, vocab_size={vocab_size})"
        )
