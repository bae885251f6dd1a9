"""Tests of attention_lab.book.explorers: an explorer as the book's HTML and as plotly JSON."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest
import torch

from attention_lab import interactive
from attention_lab.book import explorers
from support.tensors import random_inputs

MARKUP = "<img src=x onerror=alert(1)>"


def random_weights(*shape: int, seed: int = 0) -> torch.Tensor:
    (scores,) = random_inputs([shape], seed=seed)
    return torch.softmax(3 * scores, dim=-1)


def small_figure() -> go.Figure:
    tokens = ["the", "cat", MARKUP]
    return interactive.heads_explorer(tokens, random_weights(2, 2, 3, 3))


def test_to_html_is_a_fragment_without_plotly_js_and_is_stable():
    fig = small_figure()
    first = explorers.to_html(fig, div_id="explorer-test")
    again = explorers.to_html(small_figure(), div_id="explorer-test")
    assert first == again  # same figure, same id: the same bytes
    assert '<div id="explorer-test" class="plotly-graph-div"' in first
    assert "<html" not in first and "<script src" not in first
    assert "Plotly.newPlot" in first and len(first) < 200_000  # plotly.js alone is 4.6 MB
    assert '"responsive": true' in first and '"displaylogo": false' in first


@pytest.mark.parametrize("div_id", ["1abc", "has space", "", 'x"><script>alert(1)</script>'])
def test_to_html_rejects_a_bad_div_id(div_id):
    with pytest.raises(ValueError, match="div_id"):
        explorers.to_html(small_figure(), div_id=div_id)


def test_show_offers_the_page_html_and_plotly_json_of_the_same_figure():
    fig = small_figure()
    bundle = explorers.show(fig, div_id="explorer-test")._repr_mimebundle_()
    assert set(bundle) == {"text/html", explorers.PLOTLY_MIMETYPE}
    assert bundle["text/html"] == explorers.to_html(fig, div_id="explorer-test")
    spec = bundle[explorers.PLOTLY_MIMETYPE]
    assert spec["config"] == explorers.CONFIG
    # The JSON is the figure itself: plotly rebuilds the same figure from it.
    assert go.Figure(spec["data"], spec["layout"]).to_dict() == fig.to_dict()
    # Escaped token labels stay escaped in the JSON that JupyterLab draws.
    assert MARKUP not in json.dumps(spec)


def test_show_checks_its_arguments_like_to_html():
    with pytest.raises(TypeError, match="fig"):
        explorers.show({"data": []}, div_id="a")
    with pytest.raises(ValueError, match="div_id"):
        explorers.show(small_figure(), div_id="1abc")


def test_to_html_rejects_wrong_types():
    with pytest.raises(TypeError, match="fig"):
        explorers.to_html({"data": []}, div_id="a")
    with pytest.raises(TypeError, match="div_id"):
        explorers.to_html(small_figure(), div_id=3)
