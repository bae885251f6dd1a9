"""Tests of attention_lab.interactive: the stored states, the controls, the labels, the errors.

A click on a control is simulated with plotly.py's own ``plotly_restyle`` / ``plotly_relayout`` /
``plotly_update``, which apply a button's arguments with plotly.js's semantics; the browser tests
(test_browser_explorers.py) click the same controls in the built book.
"""

from __future__ import annotations

import ast
import html
import importlib
import itertools

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab import interactive
from attention_lab.book import explorers
from support.paths import ROOT
from support.tensors import random_inputs

MARKUP = "<img src=x onerror=alert(1)>"
ATOL = 0.5e-3  # values are stored with 3 decimals


def click(fig: go.Figure, control) -> None:
    """Apply a button's or slider step's arguments as plotly.js does on a click."""
    args = list(control.args)
    if control.method == "restyle":
        fig.plotly_restyle(args[0], args[1] if len(args) > 1 else None)
    elif control.method == "relayout":
        fig.plotly_relayout(args[0])
    elif control.method == "update":
        fig.plotly_update(args[0], args[1] if len(args) > 1 else None, *args[2:3])
    else:
        raise AssertionError(f"unexpected method {control.method}")


def button(fig: go.Figure, menu: int, label: str):
    (found,) = [b for b in fig.layout.updatemenus[menu].buttons if b.label == label]
    return found


def step(fig: go.Figure, label: str):
    (found,) = [s for s in fig.layout.sliders[0].steps if s.label == label]
    return found


def as_array(z) -> np.ndarray:
    """A stored z (nested lists, None for gaps) as a float array with NaN for gaps."""
    return np.array([[np.nan if v is None else v for v in row] for row in z], dtype=float)


def softmax_rows(scores: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores, dim=-1)


def random_weights(*shape: int, seed: int = 0) -> torch.Tensor:
    (scores,) = random_inputs([shape], seed=seed)
    return softmax_rows(3 * scores)


def test_markup_in_tokens_is_escaped_everywhere():
    gallery = {
        "<b>bold</b>": ([MARKUP, "b&c"], random_weights(1, 2, 2, 2)),
    }
    fig = interactive.attention_explorer(gallery)
    escaped = html.escape(MARKUP, quote=False)
    assert list(fig.layout.xaxis.ticktext) == [escaped, "b&amp;c"]
    assert list(fig.data[0].customdata[0][0]) == [escaped, escaped]
    assert fig.layout.updatemenus[0].buttons[0].label == "&lt;b&gt;bold&lt;/b&gt;"
    page = explorers.to_html(fig, div_id="markup")
    # No raw markup anywhere: not in the JSON, not in the labels.
    assert "<img" not in page and "onerror=alert(1)>" not in page and "<b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_interactive_imports_no_model_code():
    tree = ast.parse((ROOT / "lib" / "attention_lab" / "interactive.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    ours = {name for name in imported if name.startswith("attention_lab")}
    assert ours <= {"attention_lab._validation", "attention_lab.book.explorers"}, ours


def test_importing_prints_nothing_and_keeps_plotly_defaults(capsys):
    before = (pio.templates.default, pio.renderers.default)
    importlib.reload(interactive)
    assert (pio.templates.default, pio.renderers.default) == before
    assert capsys.readouterr() == ("", "")


@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=10_000))
def test_stored_weights_are_the_inputs_rounded(size, seed):
    weights = random_weights(1, 1, size, size, seed=seed)
    fig = interactive.heads_explorer([f"t{i}" for i in range(size)], weights)
    stored = as_array(fig.data[0].z)
    np.testing.assert_allclose(stored, weights[0, 0].numpy(), atol=ATOL, rtol=0)
    # Three decimals at most: the page stays light.
    assert np.array_equal(stored, np.round(stored, 3))


# --- explorer 1 ------------------------------------------------------------------------------


@pytest.fixture
def gallery():
    return {
        "short": (["[CLS]", "a", "[SEP]"], random_weights(3, 4, 3, 3, seed=1)),
        "longer": (["[CLS]", "the", "cat", "the", "[SEP]"], random_weights(3, 4, 5, 5, seed=2)),
        "markup": (["[CLS]", MARKUP, "[SEP]"], random_weights(3, 4, 3, 3, seed=3)),
    }


def visible_heatmap(fig: go.Figure) -> int:
    (index,) = [i for i, trace in enumerate(fig.data) if trace.visible in (True, None)]
    return index


def test_attention_explorer_starts_at_sentence_0_layer_0_head_0(gallery):
    fig = interactive.attention_explorer(gallery)
    assert len(fig.data) == 3 and visible_heatmap(fig) == 0
    for trace, (_, weights) in zip(fig.data, gallery.values(), strict=True):
        np.testing.assert_allclose(as_array(trace.z), weights[0, 0], atol=ATOL, rtol=0)
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["short", "longer", "markup"]
    assert [b.label for b in fig.layout.updatemenus[1].buttons] == ["0", "1", "2"]
    assert [s.label for s in fig.layout.sliders[0].steps] == ["0", "1", "2", "3"]
    assert "query: %{customdata[0]}" in fig.data[0].hovertemplate
    assert "weight: %{z:.3f}" in fig.data[0].hovertemplate
    # One colour scale, 0 to 1, for every head: equal colours are equal weights.
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
    assert not fig.layout.coloraxis.cauto


@pytest.mark.parametrize("order", ["sentence first", "sentence last"])
def test_attention_explorer_controls_compose(gallery, order):
    """Every (sentence, layer, head) is reached, whatever order the controls are used in."""
    labels = list(gallery)
    for (s, label), layer, head in itertools.product(enumerate(labels), (0, 2), (0, 3)):
        fig = interactive.attention_explorer(gallery)
        if order == "sentence first":
            click(fig, button(fig, 0, label))
        click(fig, button(fig, 1, str(layer)))
        assert fig.layout.sliders[0].active == 0  # a new layer starts at head 0
        np.testing.assert_allclose(
            as_array(fig.data[s].z), gallery[label][1][layer, 0], atol=ATOL, rtol=0
        )
        click(fig, step(fig, str(head)))
        if order == "sentence last":
            click(fig, button(fig, 0, label))
        assert visible_heatmap(fig) == s
        tokens = gallery[label][0]
        np.testing.assert_allclose(
            as_array(fig.data[s].z), gallery[label][1][layer, head], atol=ATOL, rtol=0
        )
        assert list(fig.layout.yaxis.ticktext) == [html.escape(t, quote=False) for t in tokens]
        assert list(fig.layout.yaxis.range) == [len(tokens) - 0.5, -0.5]  # query 0 on top


def test_attention_explorer_duplicate_tokens_keep_their_own_cells(gallery):
    # "the" appears twice in "longer": positions, not categories, so 5 distinct rows.
    fig = interactive.attention_explorer(gallery)
    click(fig, button(fig, 0, "longer"))
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4]
    assert np.shape(fig.data[1].z) == (5, 5)


def test_attention_explorer_cuts_long_labels():
    label = "a sentence label far longer than the dropdown should be"
    fig = interactive.attention_explorer({label: (["a", "b"], random_weights(1, 1, 2, 2))})
    shown = fig.layout.updatemenus[0].buttons[0].label
    assert len(shown) == 32 and shown.endswith("…") and label.startswith(shown[:-1])


@pytest.mark.parametrize(
    ("gallery", "error", "match"),
    [
        ([("a", (["x"], torch.ones(1, 1, 1, 1)))], TypeError, "gallery must be a dict"),
        ({}, ValueError, "at least one sentence"),
        ({1: (["x"], torch.ones(1, 1, 1, 1))}, TypeError, "keys must be str"),
        ({"a": torch.ones(1, 1, 1, 1)}, TypeError, "pair"),
        ({"a": (["x", "y"], torch.ones(1, 1, 1, 1))}, ValueError, "2 tokens"),
        ({"a": ("xy", torch.ones(1, 1, 2, 2))}, TypeError, "list of token strings"),
        ({"a": (["x", 2], torch.ones(1, 1, 2, 2))}, TypeError, "only str"),
        ({"a": (["x"], torch.ones(1, 1, 1))}, ValueError, r"\[L, H, T, T\]"),
        ({"a": (["x"], torch.ones(1, 1, 1, 2))}, ValueError, "self-attention"),
        (
            {"a": (["x"], torch.ones(1, 2, 1, 1)), "b": (["x"], torch.ones(1, 3, 1, 1))},
            ValueError,
            r"same \[L, H\]",
        ),
    ],
)
def test_attention_explorer_rejects_bad_input(gallery, error, match):
    with pytest.raises(error, match=match):
        interactive.attention_explorer(gallery)


# --- explorer 2 ------------------------------------------------------------------------------


def test_heads_explorer_layer_buttons_switch_every_head():
    weights = random_weights(3, 5, 4, 4, seed=4)
    tokens = ["a", "b", "a", "c"]
    fig = interactive.heads_explorer(tokens, weights, columns=2)
    assert len(fig.data) == 5
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["0", "1", "2"]
    # 5 heads in 2 columns: 3 rows; each head on its own axes.
    assert len({trace.xaxis for trace in fig.data}) == 5
    for layer in (2, 0, 1):
        click(fig, button(fig, 0, str(layer)))
        for head, trace in enumerate(fig.data):
            np.testing.assert_allclose(as_array(trace.z), weights[layer, head], atol=ATOL, rtol=0)
            assert trace.name == f"head {head}"
    # Queries label the first column only.
    assert list(fig.layout.yaxis.ticktext) == tokens
    assert set(fig.layout.yaxis2.ticktext) == {""}
    # One colour scale, 0 to 1, for every layer: equal colours are equal weights.
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
    assert not fig.layout.coloraxis.cauto


def test_heads_explorer_one_layer_has_no_buttons():
    fig = interactive.heads_explorer(["a", "b"], random_weights(1, 2, 2, 2))
    assert not fig.layout.updatemenus


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tokens": ["a"]}, ValueError, "1 tokens"),
        ({"weights": torch.ones(2, 2, 2)}, ValueError, r"\[L, H, T, T\]"),
        ({"weights": "weights"}, TypeError, "weights"),
        ({"columns": 0}, ValueError, "columns"),
        ({"columns": 1.5}, TypeError, "columns"),
        ({"row_height": 10}, ValueError, "row_height"),
    ],
)
def test_heads_explorer_rejects_bad_input(kwargs, error, match):
    arguments = {"tokens": ["a", "b"], "weights": random_weights(1, 2, 2, 2), **kwargs}
    with pytest.raises(error, match=match):
        interactive.heads_explorer(**arguments)
