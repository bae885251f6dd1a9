"""attention_lab.checks: right answers pass, stubs and every classic mistake fail, by name.

The wrong implementations below are written the way a learner writes them (``-inf`` fills,
``view`` and ``reshape``, explicit loops of the formula), independently of the variants the
checks compute internally, so a test passes only if the check recognises the mistake by what the
function does.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from attention_lab import checks
from attention_lab.checks import MISTAKES
from support import implementations, labs
from support.implementations import (
    lab05,
    lab06,
    lab07,
    lab08,
    lab09,
    lab10,
    lab11,
    lab12,
    lab13,
    with_,
)
from support.messages import flat

IMPLEMENTATIONS = Path(implementations.__file__).parent

# ---------------------------------------------------------------------------------------------
# Learner-style implementations: right by default, each keyword introduces one mistake.


def attention(
    query,
    key,
    value,
    mask=None,
    *,
    dim=-1,
    scale="sqrt_dk",
    softmax=True,
    times="value",
    order="output_first",
    transpose_scores=False,
    mask_mode="right",
    fill=None,
    naive_exp=False,
    as_float32=False,
    zero_masked_rows=True,
):
    d_k = query.size(-1)
    if transpose_scores:
        scores = key @ query.transpose(-2, -1)
    else:
        scores = torch.matmul(query, key.transpose(-2, -1))
    scores = {
        "sqrt_dk": scores / math.sqrt(d_k),
        "none": scores,
        "dk": scores / d_k,
        "times": scores * math.sqrt(d_k),
        "after_softmax": scores,
    }[scale]
    if mask is not None and mask_mode == "multiply":
        scores = scores * mask
    if mask is not None and mask_mode in ("right", "inverted"):
        blocked = ~mask if mask_mode == "right" else mask
        fill_value = torch.finfo(scores.dtype).min if fill is None else fill
        scores = scores.masked_fill(blocked, fill_value)
    if not softmax:
        weights = scores
    elif naive_exp:
        exponentials = torch.exp(scores)
        weights = exponentials / exponentials.sum(dim=dim, keepdim=True)
    else:
        weights = F.softmax(scores, dim=dim)
    if scale == "after_softmax":
        weights = weights / math.sqrt(d_k)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    if mask is not None and mask_mode == "right" and zero_masked_rows:
        weights = weights.masked_fill(~mask, 0.0)
    output = weights @ {"value": value, "key": key}.get(times, value)
    if times == "nothing":
        output = weights
    if as_float32:
        output, weights = output.float(), weights.float()
    if order == "single":
        return output
    if order == "weights_first":
        return weights, output
    return output, weights


def multi_head(
    query,
    key,
    value,
    num_heads,
    *,
    split="right",
    merge="right",
    scale="sqrt_dk",
    dim=-1,
    average=False,
):
    batch, query_len, d_model = query.shape
    head_dim = d_model // num_heads

    def split_heads(x):
        length = query_len if split == "query_length" else x.size(1)
        if split == "no_transpose":
            return x.view(batch, num_heads, length, head_dim)
        if split == "swapped":
            return x.view(batch, length, head_dim, num_heads).transpose(1, 2)
        return x.view(batch, length, num_heads, head_dim).transpose(1, 2)

    q, k, v = split_heads(query), split_heads(key), split_heads(value)
    scores = q @ k.transpose(-2, -1)
    divisor = {"sqrt_dk": math.sqrt(head_dim), "sqrt_d_model": math.sqrt(d_model)}
    if scale != "after_softmax":
        scores = scores / divisor.get(scale, 1.0)
    weights = torch.softmax(scores, dim=dim)
    if scale == "after_softmax":
        weights = weights / math.sqrt(head_dim)
    out = weights @ v
    if merge == "none":
        return out, weights
    if merge == "no_transpose":
        out = out.contiguous().view(batch, query_len, d_model)
    elif merge == "permute_0231":
        out = out.permute(0, 2, 3, 1).reshape(batch, query_len, d_model)
    elif merge == "view_after_transpose":
        out = out.transpose(1, 2).view(batch, query_len, d_model)
    else:
        out = out.transpose(1, 2).contiguous().view(batch, query_len, d_model)
    return out, weights.mean(dim=1) if average else weights


def encoding(
    max_len,
    d_model,
    *,
    swap=False,
    exponent="2i",
    layout="interleaved",
    start=0,
    invert=False,
    transpose=False,
    odd_safe=True,
):
    # The angles in float64, as the lab asks (float32 angles are a mistake of their own).
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    position = torch.arange(start, start + max_len, dtype=torch.float64).unsqueeze(1)
    if exponent == "column":
        for j in range(d_model):
            angle = position[:, 0] / 10000 ** (j / d_model)
            pe[:, j] = torch.sin(angle) if j % 2 == 0 else torch.cos(angle)
        return pe.float()
    i = torch.arange(0, (d_model + 1) // 2, dtype=torch.float64)
    power = 10000 ** ((2 * i if exponent == "2i" else i) / d_model)
    angle = position * power if invert else position / power
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    n_cos = d_model // 2 if odd_safe else (d_model + 1) // 2
    if layout == "halves":
        pe = torch.cat([first(angle), second(angle)[:, : d_model // 2]], dim=1)
    else:
        pe[:, 0::2] = first(angle)
        pe[:, 1::2] = second(angle)[:, :n_cos]
    pe = pe.float()
    return pe.T if transpose else pe


def masked(**deviation):
    """A four-argument masked attention with one deviation."""

    def wrong(query, key, value, mask):
        return attention(query, key, value, mask, **deviation)

    wrong.__name__ = f"masked_attention_with_{'_'.join(deviation) or 'nothing_wrong'}"
    return wrong


def unmasked(**deviation):
    def wrong(query, key, value):
        return attention(query, key, value, **deviation)

    wrong.__name__ = f"attention_with_{'_'.join(deviation) or 'nothing_wrong'}"
    return wrong


def ignores_mask(query, key, value, mask):
    return attention(query, key, value)


def stub(*args, **kwargs):
    raise NotImplementedError("write your implementation here")


# ---------------------------------------------------------------------------------------------
# Right answers pass.

RIGHT = [
    (checks.check_scaled_dot_product_attention, unmasked()),
    (checks.check_multi_head_attention, multi_head),
    (checks.check_sinusoidal_encoding, encoding),
    (checks.check_masked_attention, masked()),
    # Labs 5 to 13 keep their implementations and their mistakes in support/implementations/.
    (checks.check_encoder_layer, lab05.RIGHT[0]),
    (checks.check_pooling_and_search, lab06.RIGHT[0]),
    (checks.check_online_softmax, lab07.RIGHT[0]),
    (checks.check_kv_cache_decoding, lab08.RIGHT[0]),
    (checks.check_grouped_query_attention, lab09.RIGHT[0]),
    (checks.check_sliding_window_mask, lab10.RIGHT[0][1]),
    (checks.check_document_mask, lab10.RIGHT[-1][1]),
    (checks.check_alibi_slopes, lab11.slopes_loop),
    (checks.check_alibi_bias, lab11.bias_right),
    (checks.check_linear_attention_step, lab12.RIGHT[0]),
    (checks.check_gated_delta_step, lab13.RIGHT[0]),
]
CHECK_IDS = [check.__name__ for check, _ in RIGHT]


def lab_modules() -> list:
    """The labs' learner code, support/implementations/labNN.py, imported: each holds RIGHT
    (right implementations written differently) and WRONG (one mistake each) for its lab's
    check, CHECK (or check); test_checks_labNN.py holds the tests particular to its lab."""
    paths = sorted(IMPLEMENTATIONS.glob("lab*.py"))
    return [importlib.import_module(f"support.implementations.{path.stem}") for path in paths]


def lab_rights() -> list[tuple]:
    """(check, right implementation) of every lab's test file."""
    found = []
    for module in lab_modules():
        check = getattr(module, "CHECK", None) or getattr(module, "check", None)
        # A lab with two checks lists (check, implementation) pairs.
        found += [row if isinstance(row, tuple) else (check, row) for row in module.RIGHT]
    return found


# Every right implementation: this file's for Labs 1 to 4 and those of support/implementations/.
ALL_RIGHT = RIGHT[:4] + lab_rights()


@pytest.mark.parametrize(
    ("check", "fn"),
    ALL_RIGHT,
    ids=[f"{check.__name__.removeprefix('check_')}-{fn.__name__}" for check, fn in ALL_RIGHT],
)
def test_a_right_implementation_passes_with_one_line(check, fn, capsys):
    check(fn)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"✓ {fn.__name__} matches the library on all")
    assert len(lines[0]) <= 76  # fits the book's code column without scrolling


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_the_stub_fails_with_a_helpful_message(check, fn):
    with pytest.raises(AssertionError) as info:
        check(stub)
    assert "still the stub" in flat(info.value)
    message = flat(info.value)
    assert 'Replace the line "raise NotImplementedError(...)" with your implementation' in message
    # The book shows messages with the traceback lexer, which fails on backticks (a warning).
    assert "`" not in message
    assert info.value.__cause__ is None  # no NotImplementedError traceback on top


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_a_non_callable_is_a_type_error(check, fn):
    with pytest.raises(TypeError, match="fn must be a function"):
        check("my_function")


# ---------------------------------------------------------------------------------------------
# Every mistake is rejected, and named.

WRONG = [
    # check, wrong implementation, key of the mistake the message must name
    (checks.check_scaled_dot_product_attention, unmasked(dim=-2), "softmax_axis"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="none"), "no_scaling"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="dk"), "scaled_by_d_k"),
    (checks.check_scaled_dot_product_attention, unmasked(scale="times"), "scale_multiplied"),
    (checks.check_scaled_dot_product_attention, unmasked(softmax=False), "no_softmax"),
    (
        checks.check_scaled_dot_product_attention,
        unmasked(scale="after_softmax"),
        "scaled_after_softmax",
    ),
    (
        checks.check_scaled_dot_product_attention,
        unmasked(transpose_scores=True),
        "scores_transposed",
    ),
    (checks.check_scaled_dot_product_attention, unmasked(times="key"), "weights_times_keys"),
    (checks.check_scaled_dot_product_attention, unmasked(times="nothing"), "output_is_weights"),
    (checks.check_scaled_dot_product_attention, unmasked(order="weights_first"), "pair_swapped"),
    (checks.check_scaled_dot_product_attention, unmasked(order="single"), "not_a_pair"),
    (checks.check_scaled_dot_product_attention, unmasked(naive_exp=True), "overflow"),
    (checks.check_scaled_dot_product_attention, unmasked(as_float32=True), "wrong_dtype"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="no_transpose"),
        "merge_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="permute_0231"),
        "merge_wrong_permutation",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="no_transpose"),
        "split_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="query_length"),
        "split_with_query_length",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="no_transpose", merge="no_transpose"),
        "split_and_merge_without_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, split="swapped"),
        "heads_and_width_swapped",
    ),
    (checks.check_multi_head_attention, with_(multi_head, merge="none"), "heads_not_merged"),
    (checks.check_multi_head_attention, with_(multi_head, average=True), "weights_averaged"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, merge="view_after_transpose"),
        "view_after_transpose",
    ),
    (
        checks.check_multi_head_attention,
        with_(multi_head, scale="sqrt_d_model"),
        "scaled_by_sqrt_d_model",
    ),
    (checks.check_multi_head_attention, with_(multi_head, scale="none"), "no_scaling"),
    (
        checks.check_multi_head_attention,
        with_(multi_head, scale="after_softmax"),
        "scaled_after_softmax",
    ),
    (checks.check_multi_head_attention, with_(multi_head, dim=-2), "softmax_axis"),
    (checks.check_sinusoidal_encoding, with_(encoding, swap=True), "sin_cos_swapped"),
    (checks.check_sinusoidal_encoding, with_(encoding, exponent="i"), "frequency_i_not_2i"),
    (
        checks.check_sinusoidal_encoding,
        with_(encoding, exponent="column"),
        "frequency_column_index",
    ),
    (checks.check_sinusoidal_encoding, with_(encoding, invert=True), "frequency_inverted"),
    (checks.check_sinusoidal_encoding, with_(encoding, layout="halves"), "halves_not_interleaved"),
    (checks.check_sinusoidal_encoding, with_(encoding, start=1), "positions_from_one"),
    (checks.check_sinusoidal_encoding, with_(encoding, transpose=True), "encoding_transposed"),
    (checks.check_sinusoidal_encoding, with_(encoding, odd_safe=False), "odd_d_model"),
    (checks.check_masked_attention, masked(mask_mode="inverted"), "mask_polarity"),
    (checks.check_masked_attention, masked(mask_mode="inverted", fill=-1e9), "mask_polarity"),
    (checks.check_masked_attention, ignores_mask, "mask_ignored"),
    (checks.check_masked_attention, masked(mask_mode="after_softmax"), "mask_after_softmax"),
    (checks.check_masked_attention, masked(mask_mode="multiply"), "scores_times_mask"),
    (checks.check_masked_attention, masked(scale="after_softmax"), "scaled_after_softmax"),
    (
        checks.check_masked_attention,
        masked(fill=float("-inf"), zero_masked_rows=False),
        "nan_fully_masked",
    ),
    (checks.check_masked_attention, masked(zero_masked_rows=False), "uniform_fully_masked"),
    (checks.check_masked_attention, masked(fill=-1e9), "fill_overflow"),
    (checks.check_masked_attention, masked(dim=-2), "softmax_axis"),
    (checks.check_masked_attention, masked(scale="none"), "no_scaling"),
    (checks.check_masked_attention, masked(scale="dk"), "scaled_by_d_k"),
    (checks.check_masked_attention, masked(scale="times"), "scale_multiplied"),
    (checks.check_masked_attention, masked(softmax=False), "no_softmax"),
    (checks.check_masked_attention, masked(transpose_scores=True), "scores_transposed"),
    (checks.check_masked_attention, masked(times="key"), "weights_times_keys"),
    (checks.check_masked_attention, masked(times="nothing"), "output_is_weights"),
    (checks.check_masked_attention, masked(order="weights_first"), "pair_swapped"),
]


def lab_tests() -> list[tuple]:
    """(check, wrong, key) of the labs' learner code, support/implementations/labNN.py: each has
    WRONG = [(wrong implementation, key), ...] with CHECK, or [(check, wrong, key), ...]."""
    found = []
    for module in lab_modules():
        for row in module.WRONG:
            found.append(row if len(row) == 3 else (module.CHECK, *row))
    return found


# Every wrong implementation of every lab: this file's and those of support/implementations/.
ALL_WRONG = WRONG + lab_tests()


@pytest.mark.parametrize(
    ("check", "wrong", "mistake"),
    ALL_WRONG,
    ids=[
        f"{check.__name__.removeprefix('check_')}-{wrong.__name__}-{key}"
        for check, wrong, key in ALL_WRONG
    ],
)
def test_a_mistake_is_rejected_and_named(check, wrong, mistake):
    with pytest.raises(AssertionError) as info:
        check(wrong)
    message = flat(info.value)
    assert f"Likely mistake: {MISTAKES[mistake]}" in message, message
    assert "on case '" in message  # names the first failing case
    lines = str(info.value).splitlines()
    # A few lines that fit the book's code column (the first follows "AssertionError: ").
    assert len(lines) <= 8 and all(len(line) <= 76 for line in lines[1:])


def test_every_mistake_the_checks_know_is_proved_by_a_wrong_implementation():
    assert {key for _, _, key in ALL_WRONG} == set(MISTAKES)
    assert not any("`" in text for text in MISTAKES.values())  # see the stub test


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_every_mistake_a_labs_module_registers_is_proved_on_its_check(check, fn):
    module = sys.modules[check.__module__]
    registered = set(module.MISTAKES)
    # A module with two checks (Labs 10 and 11) proves its mistakes on either of them.
    siblings = {c for c, _ in RIGHT if c.__module__ == check.__module__}
    assert registered <= {key for c, _, key in ALL_WRONG if c in siblings}


@pytest.mark.parametrize(("check", "fn"), RIGHT, ids=CHECK_IDS)
def test_a_check_documents_every_mistake_it_is_tested_on(check, fn):
    documented = {key for key in MISTAKES if f"``{key}``" in check.__doc__}
    tested = {key for c, _, key in ALL_WRONG if c is check}
    assert tested <= documented
    # The rest are the shared ones (a pair returned the wrong way round, a dtype ...), proved
    # on another check that goes through the same code.
    shared = {"pair_swapped", "not_a_pair", "wrong_dtype"}
    assert documented - tested <= shared


def test_a_crash_names_the_case_and_keeps_the_learners_traceback():
    def crashes(query, key, value):
        return query @ value  # wrong shapes: a RuntimeError

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(crashes)
    assert "raised RuntimeError on case 'batch of 2" in flat(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_unknown_mistake_still_names_case_and_difference():
    def off_by_a_bit(query, key, value):
        output, weights = attention(query, key, value)
        return output + 0.1, weights

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(off_by_a_bit)
    message = flat(info.value)
    assert "the output differs: largest difference 0.1" in message
    assert "Where it goes wrong: the weights are right, the output is not" in message


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    for check, fn in RIGHT:
        check(fn)
    assert torch.equal(torch.get_rng_state(), before)


# Each example runs the whole check: a few are enough and the suite's budget would be slow.
@settings(max_examples=8)
@given(shift=st.floats(min_value=-3, max_value=3).filter(lambda s: abs(s) > 1e-2))
def test_any_shifted_output_is_rejected(shift):
    """Whatever the learner's output is off by, the check does not pass it."""

    def shifted(query, key, value):
        output, weights = attention(query, key, value)
        return output + shift, weights

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(shifted)
    assert "does not match the library" in flat(info.value)


# Each example runs the whole check: a few are enough and the suite's budget would be slow.
@settings(max_examples=6)
@given(scale=st.floats(min_value=0.05, max_value=20).filter(lambda s: abs(s - 1) > 0.05))
def test_any_other_temperature_is_rejected(scale):
    def rescaled(query, key, value):
        return attention(query * scale, key, value)

    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(rescaled)
    assert "the weights differ" in flat(info.value)


# ---------------------------------------------------------------------------------------------
# The labs' own code: the solution in each page passes its check, the stub in it fails.

LAB_CHECKS = {
    "01_scaled_dot_product_attention": "check_scaled_dot_product_attention",
    "02_multi_head_attention": "check_multi_head_attention",
    "03_positional_encoding": "check_sinusoidal_encoding",
    "04_masks": "check_masked_attention",
    "05_encoder_layer": "check_encoder_layer",
    "06_pooling_and_search": "check_pooling_and_search",
    "07_online_softmax": "check_online_softmax",
    "08_kv_cache_decoding": "check_kv_cache_decoding",
    "09_grouped_query_attention": "check_grouped_query_attention",
    # Two functions: the checks in the order the stub defines them.
    "10_window_and_document_masks": ("check_sliding_window_mask", "check_document_mask"),
    "11_alibi": ("check_alibi_slopes", "check_alibi_bias"),
    "12_linear_attention_step": "check_linear_attention_step",
    "13_gated_delta_step": "check_gated_delta_step",
}


def run_lab_cells(*sources: str) -> dict:
    namespace: dict = {}
    for source in sources:
        lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]
        exec(compile("\n".join(lines), "<lab>", "exec"), namespace)  # noqa: S102 - our own pages
    return namespace


def lab_checks(lab: str) -> list:
    """The checks of a lab, in the order of the functions its stub defines."""
    names = LAB_CHECKS[lab]
    return [getattr(checks, name) for name in ((names,) if isinstance(names, str) else names)]


@pytest.mark.parametrize("lab", sorted(LAB_CHECKS))
def test_the_labs_solution_passes_its_check(lab, capsys):
    page = labs.read(lab)
    namespace = run_lab_cells(*page.setup, page.stub, *page.solution)
    functions = [namespace[name] for name in page.functions]
    assert len(functions) == len(lab_checks(lab))
    for check, fn in zip(lab_checks(lab), functions, strict=True):
        capsys.readouterr()
        check(fn)
        assert "matches the library on all" in capsys.readouterr().out


@pytest.mark.parametrize("lab", sorted(LAB_CHECKS))
def test_the_labs_stub_fails_its_check_with_a_helpful_message(lab):
    page = labs.read(lab)
    namespace = run_lab_cells(*page.setup, page.stub)
    functions = [namespace[name] for name in page.functions]
    for check, fn in zip(lab_checks(lab), functions, strict=True):
        with pytest.raises(AssertionError) as info:
            check(fn)
        assert "still the stub" in flat(info.value)
