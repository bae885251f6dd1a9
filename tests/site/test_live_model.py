"""The ONNX file the build serves for chapter 09's live box (attention_book.live_attention).

Run with onnxruntime in Python, it gives the PyTorch model's attention weights and hidden states
on sentences that are not in the chapter's gallery; its weights are float16 (not int8), its
sequence length is dynamic, and it is the export of the current model and exporter.
"""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
import torch

from attention_book import live_attention
from support.paths import ROOT

PAGE = "notebooks_src/chapters/09_attention_in_a_pretrained_model.html"
SENTENCES = [
    "A heron waited by the canal until the barges had passed.",
    "Zoë's café in Zürich serves crème brûlée, 東京 ramen and ☕ — naïve? 🙂",
    "x",
    "Every committee member who read the draft agreed that its second appendix, unlike the "
    "first, was too long to print.",
]
# Weights rounded to float16 (11 significant bits), arithmetic in float32. Attention weights
# move by about 1e-3 at most (measured: 1.4e-3); the bound for a float16 model is 5e-3.
ATOL_ATTENTION = 5e-3
# Hidden states are larger numbers (up to about 10 in size): measured max |diff| 4e-3; the bound
# is 2e-3 of the largest value of the sentence's hidden states (about 2e-2), float16's relative
# rounding error (4.9e-4) compounded over the six layers.
RTOL_HIDDEN = 2e-3


@pytest.fixture(scope="module")
def served(html_dir):
    """The page's configuration of the box and the path of the model file it downloads."""
    text = (html_dir / PAGE).read_text(encoding="utf-8")
    found = re.search(r'id="live-attention" data-config="([^"]*)"', text)
    assert found, "chapter 09 has no live attention box"
    config = json.loads(html.unescape(found.group(1)))
    return config, html_dir / "_static" / "live" / config["model"]


@pytest.fixture(scope="module")
def session(served):
    import onnxruntime

    _, path = served
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("sentence", SENTENCES)
def test_onnx_matches_the_pytorch_model(session, sentence):
    from attention_lab.pretrained import load_minilm

    tokenizer, model = load_minilm()
    batch = tokenizer(sentence, return_tensors="pt", truncation=True, max_length=512)
    attentions, hidden = session.run(None, {"input_ids": batch["input_ids"].numpy()})
    with torch.no_grad():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
    expected_attn = torch.cat(out.attentions).numpy()  # [L, H, T, T]
    expected_hidden = torch.cat(out.hidden_states).numpy()  # [L + 1, T, D]
    assert attentions.shape == expected_attn.shape == (6, 12, *batch["input_ids"].shape[1:] * 2)
    assert hidden.shape == expected_hidden.shape
    assert np.abs(attentions - expected_attn).max() <= ATOL_ATTENTION
    scale = np.abs(expected_hidden).max()
    assert np.abs(hidden - expected_hidden).max() <= RTOL_HIDDEN * scale
    np.testing.assert_allclose(attentions.sum(-1), 1.0, atol=1e-5)  # rows still sum to 1


def test_the_check_can_fail(session):
    # The same comparison catches a wrong model: another sentence's attention is far off.
    from attention_lab.pretrained import attention_maps, load_tokenizer

    _, weights = attention_maps("One two three four.")  # [L, H, 7, 7]
    ids = load_tokenizer()("Five six seven eight.", return_tensors="np")["input_ids"]
    attentions, _ = session.run(None, {"input_ids": ids})
    assert attentions.shape == weights.shape
    assert np.abs(attentions - weights.numpy()).max() > ATOL_ATTENTION


def test_weights_are_float16_and_length_is_dynamic(served):
    import onnx

    config, path = served
    model = onnx.load(str(path))
    types = {init.data_type for init in model.graph.initializer if len(init.dims) >= 2}
    assert types == {onnx.TensorProto.FLOAT16}
    (input_ids,) = model.graph.input
    assert input_ids.type.tensor_type.shape.dim[1].dim_param  # symbolic, not a fixed length
    assert config["precision"] == "float16"
    assert config["sizes"][f"live/{config['model']}"] == path.stat().st_size
    # Half of float32's 4 bytes for each of MiniLM's 22.7 million weights, plus the graph.
    assert 44e6 < path.stat().st_size < 47e6


def test_the_book_serves_the_current_export():
    # The cache key names the served file: a changed model or exporter gives a new key, so a
    # rebuild exports again (and a browser fetches the new file instead of its cached copy).
    key = live_attention.cache_key()
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert key == live_attention.cache_key()
    exported = ROOT / "_build" / "html" / "_static" / "live" / f"{key}-{live_attention.FILENAME}"
    assert exported.is_file()
