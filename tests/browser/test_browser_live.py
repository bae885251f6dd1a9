"""Chapter 09's live attention box, in headless Chromium: MiniLM run in the page, offline.

The page is served locally and every request that leaves that server is refused. Before the
button is pressed nothing of the model loads; after it, sentences the book never saw are typed
into the box and the page's own tokens, ids and attention weights (``window.liveAttention``) are
compared with the PyTorch model's (``attention_lab.pretrained``). Also: an empty box, a text over
512 tokens, markup that must stay text, the keyboard, the model in a worker while the page
answers, the focus kept while loading, a revisit that downloads nothing, the [UNK] line, a map
that scrolls on a phone, the head view's lines (the model's weights for the query chosen), the
labels' contrast in the theme's light and dark modes, the site served from a sub-path, a phone's
390 px viewport (screenshots in ``tests/screenshots/``) and a page opened as a file.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from support.accessibility import blocking, run_axe
from support.browser import (
    DESKTOP,
    NO_SIDEWAYS_SCROLL,
    PHONE,
    Tab,
    element_screenshot,
    fits_the_width,
)
from support.server import serve

PAGE = "notebooks_src/chapters/09_attention_in_a_pretrained_model.html"
# Sentences that are not in the chapter's gallery: one with non-ASCII letters, marks and an
# emoji, one of about 60 tokens, one that would run a script if it were ever parsed as markup.
UNSEEN = [
    "Zoë's café in Zürich serves crème brûlée, 東京 ramen and ☕ — naïve? 🙂",
    (
        "When the committee finally published its long report on the river's slow recovery, "
        "the fishermen who had waited for years were surprised to read that the salmon they "
        "remembered from their childhood had quietly returned to the upper valley."
    ),
    'Attention <img src=x onerror=alert(1)> "quoted" <script>alert(2)</script> & done.',
]
# fp16 weights, fp32 arithmetic: every weight rounded to 11 significant bits moves the weights by
# about 1e-3 at most (measured: 1.4e-3); the bound for fp16 is 5e-3.
ATOL_ATTENTION = 5e-3


def reference(sentence: str) -> tuple[list[int], list[str], np.ndarray]:
    """ids, tokens and attention [L, H, T, T] of the PyTorch model (truncated at 512 tokens)."""
    from attention_lab.pretrained import load_minilm

    tokenizer, model = load_minilm()
    batch = tokenizer(sentence, return_tensors="pt", truncation=True, max_length=512)
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    ids = batch["input_ids"][0].tolist()
    weights = torch.cat(out.attentions).numpy()  # [L, H, T, T]
    return ids, tokenizer.convert_ids_to_tokens(ids), weights


# The page's state; the attention weights of the heads listed (flat indices layer * 12 + head),
# or of all 72 when none is listed.
READ_STATE = """(heads) => {
  const s = window.liveAttention;
  let attentions = null;
  if (s.attentions) {
    const size = s.shape[2] * s.shape[3];
    attentions = heads.length === 0 ? Array.from(s.attentions)
      : heads.flatMap((h) => Array.from(s.attentions.subarray(h * size, (h + 1) * size)));
  }
  return {status: s.status, sentence: s.sentence, ids: s.ids, tokens: s.tokens,
          truncatedFrom: s.truncatedFrom, shape: s.shape, runs: s.runs, attentions,
          message: document.querySelector('#live-attention .live-status').textContent};
}"""


class Watched(Tab):
    """A local-only tab that records requests, console errors and dialogs."""

    def __init__(self, context, base: str) -> None:
        super().__init__(context, base, timeout=120_000)

    def load_model(self, url: str) -> None:
        self.page.goto(url, wait_until="load")
        self.page.click("#live-attention .live-load")
        self.page.wait_for_function(
            "() => window.liveAttention.status === 'ready' && window.liveAttention.runs > 0",
            timeout=180_000,
        )

    def type(self, text: str, heads: tuple[int, ...] = ()) -> dict:
        runs = self.page.evaluate("() => window.liveAttention.runs")
        self.page.fill("#live-text", text)
        # A run that started before the text changed may end first: wait for this text's run.
        self.page.wait_for_function(
            "([n, text]) => window.liveAttention.runs > n && window.liveAttention.sentence === text"
            " && window.liveAttention.status === 'ready'",
            arg=[runs, text],
            timeout=60_000,
        )
        return self.page.evaluate(READ_STATE, list(heads))


def model_downloads(urls: list[str]) -> list[str]:
    return [
        u
        for u in urls
        if re.search(r"\.onnx$|onnxruntime-web|/vendor/tokenizers/|tokenizer(_config)?\.json", u)
    ]


@pytest.fixture(scope="module")
def live(browser, server):
    watched = Watched(browser, server)
    # A first visit: an earlier test's failed load may have kept the runtime in the cache.
    watched.page.goto(f"{server}/{PAGE}", wait_until="load")
    watched.page.evaluate("() => caches.delete('attention-by-running-it-live')")
    watched.load_model(f"{server}/{PAGE}")
    yield watched
    watched.close()


def test_nothing_of_the_model_loads_before_the_click(browser, server, html_dir):
    watched = Watched(browser, server)
    try:
        watched.page.goto(f"{server}/{PAGE}", wait_until="load")
        watched.page.wait_for_load_state("networkidle")
        assert watched.page.evaluate("() => window.liveAttention.status") == "idle"
        assert not model_downloads(watched.requests), model_downloads(watched.requests)
        button = watched.page.text_content("#live-attention .live-load")
        config = json.loads(watched.page.get_attribute("#live-attention", "data-config"))
    finally:
        watched.close()
    # The button states what the click downloads: the files' sizes, added up.
    total = sum((html_dir / "_static" / name).stat().st_size for name in config["sizes"])
    assert total == config["total"]
    assert f"({total / 1e6:.1f} MB download)" in button
    assert config["precision"] == "float16"


def test_a_failed_download_says_why_and_keeps_the_explorer(browser, server):
    watched = Watched(browser, server)
    button = "#live-attention .live-load"
    focused = f"() => document.activeElement === document.querySelector('{button}')"
    try:
        watched.page.goto(f"{server}/{PAGE}", wait_until="load")
        watched.page.evaluate("() => caches.delete('attention-by-running-it-live')")
        watched.page.route("**/*.onnx", lambda route: route.abort())
        watched.page.focus(button)
        watched.page.keyboard.press("Enter")
        # While it loads, the button says it is unavailable without dropping the focus.
        assert watched.page.get_attribute(button, "aria-disabled") == "true"
        assert watched.page.evaluate(focused)
        watched.page.wait_for_function("() => window.liveAttention.status === 'error'")
        message = watched.page.text_content("#live-attention .live-status")
        assert "could not be loaded" in message and "explorer" in message
        assert watched.page.is_enabled(button)  # and it can be tried again
        assert watched.page.get_attribute(button, "aria-disabled") is None
        assert watched.page.evaluate(focused)
        assert watched.page.locator("#explorer-attention").count() == 1
    finally:
        watched.close()


@pytest.mark.parametrize("sentence", UNSEEN, ids=["non-ascii", "sixty-tokens", "markup"])
def test_typed_sentences_match_the_python_model(live, sentence):
    state = live.type(sentence)
    ids, tokens, weights = reference(sentence)
    assert state["status"] == "ready"
    assert state["sentence"] == sentence
    assert state["ids"] == ids
    assert state["tokens"] == tokens
    assert state["shape"] == list(weights.shape)
    got = np.asarray(state["attentions"], dtype=np.float32).reshape(weights.shape)
    assert np.abs(got - weights).max() <= ATOL_ATTENTION
    if "sixty" in sentence or len(ids) > 50:
        assert 50 <= len(ids) <= 70, len(ids)
    # A line in the box says what [UNK] is, and which words became one; none without an [UNK].
    note = live.page.locator("#live-attention .live-unknown")
    if "[UNK]" in tokens:
        assert note.is_visible()
        text = note.text_content()
        assert f"({tokens.count('[UNK]')} tokens here)" in text and "vocabulary" in text
        assert "☕" in text and "🙂" in text
    else:
        assert note.is_hidden()


def test_markup_stays_text_and_nothing_runs(live):
    live.type(UNSEEN[2])
    box = live.page.locator("#live-attention")
    assert box.locator("img, script").count() == 0
    options = live.page.eval_on_selector_all("#live-query option", "(os) => os.map(o => o.text)")
    assert any("<" in text for text in options), options
    assert not live.dialogs, live.dialogs


def test_the_model_runs_in_a_worker_and_the_page_answers_meanwhile(live):
    assert live.page.evaluate("() => window.liveAttention.inWorker") is True
    live.type("Dog bites man.")
    live.page.fill("#live-text", "attention " * 600)  # 512 tokens: seconds of work
    live.page.wait_for_function("() => window.liveAttention.computing", timeout=10_000)
    # The page's thread answers while the model computes: this call returns before the run ends,
    # the status says what is happening and the maps are marked busy.
    during = live.page.evaluate(
        """() => {
          const box = document.querySelector('#live-attention');
          return [window.liveAttention.computing, box.querySelector('.live-status').textContent,
                  box.querySelector('.live-views').getAttribute('aria-busy')];
        }"""
    )
    assert during[0] is True
    assert during[1].startswith("Computing") and during[2] == "true"
    live.page.wait_for_function(
        "() => !window.liveAttention.computing && window.liveAttention.shape?.[2] === 512",
        timeout=120_000,
    )
    assert live.page.get_attribute("#live-attention .live-views", "aria-busy") == "false"


def test_the_empty_box_gives_a_hint(live):
    state = live.type("   ")
    assert state["tokens"] is None
    assert "Type a sentence" in state["message"]
    assert live.page.locator("#live-attention .live-body").is_hidden()


def test_a_text_over_512_tokens_is_truncated_with_a_message(live):
    text = "attention " * 600
    heads = (0, 37, 71)  # layer 0 head 0, layer 3 head 1, layer 5 head 11: 3 x 512 x 512 weights
    state = live.type(text, heads)
    ids, _, weights = reference(text)
    assert state["shape"] == [6, 12, 512, 512]
    assert state["ids"] == ids
    assert state["truncatedFrom"] == 602
    assert "at most 512, so the last 90 tokens were left out" in state["message"]
    got = np.asarray(state["attentions"], dtype=np.float32).reshape(len(heads), 512, 512)
    expected = weights.reshape(72, 512, 512)[list(heads)]
    assert np.abs(got - expected).max() <= ATOL_ATTENTION


def test_a_second_sentence_over_512_tokens_says_how_many_tokens_were_left_out(live):
    live.type("Dog bites man.")
    live.page.check("#live-compare")
    note = live.page.locator("#live-attention .live-compare-input .live-note")
    text = "attention " * 700  # 702 tokens with [CLS] and [SEP]
    live.page.fill("#live-text-b", text)
    live.page.wait_for_function(
        "(text) => window.liveAttention.second?.sentence === text", arg=text, timeout=60_000
    )
    assert live.page.evaluate("() => window.liveAttention.second.truncatedFrom") == 702
    assert live.page.evaluate("() => window.liveAttention.second.ids.length") == 512
    assert note.is_visible()
    assert "702 tokens" in note.text_content()
    assert "the last 190 tokens were left out" in note.text_content()
    assert live.page.evaluate("() => window.liveAttention.truncatedFrom") is None  # the first: not
    live.page.fill("#live-text-b", "Man bites dog.")
    live.page.wait_for_function("() => window.liveAttention.second?.sentence === 'Man bites dog.'")
    assert note.is_hidden()
    live.page.uncheck("#live-compare")
    live.page.wait_for_function("() => window.liveAttention.second === null")


def test_the_maps_are_drawn_again_when_the_window_is_resized(live):
    # Twelve tokens: at 1280 px the map's cells are at their largest (36 px), wider than a
    # phone's column; at 390 px they must shrink to fit the box.
    live.type("The cat sat on the mat because it was tired.")
    live.page.check("#live-compare")
    second = "The dog sat on the rug because it was tired."
    live.page.fill("#live-text-b", second)
    # This pair's difference (an earlier test's pair may have left one of its own).
    live.page.wait_for_function(
        "(b) => window.liveAttention.second?.sentence === b"
        " && window.liveAttention.difference !== null",
        arg=second,
    )
    # [box width, drawn map width] of every map shown.
    widths = """() => Array.from(document.querySelectorAll('#live-attention .live-large'))
        .filter((box) => box.offsetParent !== null)
        .map((box) => [box.clientWidth, box.firstChild.getBoundingClientRect().width])"""
    wide = live.page.evaluate(widths)
    assert len(wide) == 3  # the head, the second sentence, the difference
    try:
        live.page.set_viewport_size(PHONE)
        live.page.wait_for_function(
            f"() => ({widths})().every(([box, canvas]) => canvas <= box)", timeout=10_000
        )
        narrow = live.page.evaluate(widths)
        assert all(canvas < PHONE["width"] for _, canvas in narrow), narrow
        assert all(n[1] < w[1] for n, w in zip(narrow, wide, strict=True)), (narrow, wide)
        live.page.set_viewport_size(DESKTOP)
        live.page.wait_for_function(
            f"(wide) => JSON.stringify(({widths})()) === JSON.stringify(wide)", arg=wide
        )
    finally:
        live.page.set_viewport_size(DESKTOP)
        live.page.uncheck("#live-compare")
        live.page.wait_for_function("() => window.liveAttention.second === null")


def test_the_grid_and_the_switch_work_from_the_keyboard(live):
    live.type("The cat sat on the mat.")
    live.page.focus("#live-attention .live-cell[aria-pressed=true]")
    live.page.keyboard.press("ArrowRight")
    live.page.keyboard.press("ArrowDown")
    pressed = live.page.get_attribute(".live-cell[aria-pressed=true]", "aria-label")
    assert pressed == "layer 1, head 1"
    assert live.page.evaluate("() => document.activeElement.getAttribute('aria-label')") == pressed
    assert live.page.input_value("#live-layer") == "1"
    assert "Layer 1, head 1" in live.page.text_content(".live-large-title")
    fixed = live.page.get_attribute(".live-legend", "aria-label")
    assert "to 1.00" in fixed
    live.page.focus("#live-per-head")
    live.page.keyboard.press("Space")
    scaled = live.page.get_attribute(".live-legend", "aria-label")
    assert scaled != fixed and "largest weight" in scaled
    live.page.keyboard.press("Space")  # back to the fixed 0-1 scale
    live.page.select_option("#live-query", "2")
    assert live.page.text_content(".live-readout").startswith("Query 2 (cat)")


# The head view's lines as drawn: [head, query, key, weight, opacity] from their data attributes.
READ_LINES = """() => Array.from(document.querySelectorAll('#live-attention .live-hv-lines line'))
  .map((l) => [+l.dataset.head, +l.dataset.query, +l.dataset.key, +l.dataset.weight,
               +l.getAttribute('stroke-opacity')])"""


def test_the_head_view_draws_the_models_weights_for_the_chosen_query(live):
    sentence = "The animal didn't cross the street because it was too tired."
    state = live.type(sentence)
    L, H, T, _ = state["shape"]
    weights = np.asarray(state["attentions"], dtype=np.float32).reshape(L, H, T, T)
    _, tokens, expected = reference(sentence)
    assert state["tokens"] == tokens
    layer = 4
    live.page.select_option("#live-layer", str(layer))
    assert f"layer {layer}" in live.page.text_content(".live-hv-heading")
    query = tokens.index("it")
    token = live.page.locator(".live-hv-queries .live-hv-token").nth(query)
    token.hover()
    live.page.wait_for_function(
        "(q) => document.querySelectorAll('.live-hv-lines line').length > 0 && Array.from("
        "document.querySelectorAll('.live-hv-lines line')).every((l) => +l.dataset.query === q)",
        arg=query,
    )
    assert token.get_attribute("aria-pressed") == "true"
    assert live.page.input_value("#live-query") == str(query)  # the box's query row follows
    lines = np.asarray(live.page.evaluate(READ_LINES))
    drawn = {(int(h), int(k)): w for h, _, k, w, _ in lines}
    # Every line carries the page's weight for (layer, head, query, key) exactly, its opacity is
    # that weight, and the lines left out are the invisible ones (under 0.001).
    for (h, k), w in drawn.items():
        assert w == float(weights[layer, h, query, k])
    assert np.allclose(lines[:, 4], lines[:, 3], atol=6e-4)
    for h in range(H):
        for k in range(T):
            if (h, k) not in drawn:
                assert weights[layer, h, query, k] < 1e-3
    # and the page's weights are the PyTorch model's.
    page = np.zeros((H, T), dtype=np.float32)
    for (h, k), w in drawn.items():
        page[h, k] = w
    python = np.where(page > 0, expected[layer, :, query, :], 0)
    assert np.abs(page - python).max() <= ATOL_ATTENTION
    # The text alternative: each head's top key, with its weight.
    items = live.page.eval_on_selector_all(
        ".live-hv-summary li", "(ls) => ls.map((l) => l.textContent)"
    )
    assert len(items) == H
    for h, text in enumerate(items):
        k = int(np.argmax(weights[layer, h, query]))
        assert text.startswith(f"head {h}: {k} {tokens[k]} {weights[layer, h, query, k]:.2f}")
    # A head switched off draws no line and leaves the list; switched on, it is back.
    live.page.click(".live-hv-toggle >> nth=3")
    assert live.page.get_attribute(".live-hv-toggle >> nth=3", "aria-pressed") == "false"
    assert 3 not in {int(h) for h, *_ in live.page.evaluate(READ_LINES)}
    assert len(live.page.query_selector_all(".live-hv-summary li")) == H - 1
    live.page.click(".live-hv-toggle >> nth=3")
    assert len(live.page.evaluate(READ_LINES)) == len(lines)
    # The keyboard: the chosen token has the tab stop; arrow keys choose the next query.
    live.page.focus(".live-hv-queries .live-hv-token[tabindex='0']")
    live.page.keyboard.press("ArrowDown")
    pressed = live.page.get_attribute(".live-hv-queries [aria-pressed=true]", "data-index")
    assert pressed == str(query + 1)
    assert live.page.evaluate("() => document.activeElement.dataset.index") == pressed
    assert {int(q) for _, q, *_ in live.page.evaluate(READ_LINES)} == {query + 1}
    live.page.keyboard.press("Home")
    assert live.page.get_attribute(".live-hv-queries [aria-pressed=true]", "data-index") == "0"
    live.page.select_option("#live-layer", "0")


# WCAG 2's contrast of an element's computed colour on the first opaque background under it.
CONTRASTS = """(selectors) => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = (c) => { const v = c.slice(0, 3).map((x) => { x /= 255;
    return x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const ground = (e) => { for (; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length < 4 || c[3] > 0) return c; } return [255, 255, 255]; };
  const out = {};
  for (const s of selectors) {
    out[s] = Array.from(document.querySelectorAll(s)).filter((e) => e.getClientRects().length)
      .map((e) => { const a = lum(rgb(getComputedStyle(e).color)), b = lum(ground(e));
        return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); });
  }
  return out;
}"""
LABELS = [
    "#live-attention .live-axis",  # the grid's layer and head numbers
    "#live-attention .live-legend span",  # the colour scale's ends
    "#live-attention .live-hv-keys .live-hv-token",  # keys shaded by weight
    "#live-attention .live-hv-summary li",
    "#live-attention .live-hv-toggle",
    "#live-attention .live-status",
]


def set_theme(tab, theme: str) -> None:
    """The theme's switch: pydata-sphinx-theme sets data-theme (and data-mode) on <html>."""
    tab.evaluate(
        "(t) => { const html = document.documentElement; html.dataset.mode = t;"
        " html.dataset.theme = t; }",
        theme,
    )


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_labels_are_readable_in_both_themes(live, axe, theme):
    live.type("The cat sat on the mat.")
    live.page.hover(".live-hv-queries .live-hv-token >> nth=2")
    try:
        set_theme(live.page, theme)
        # The canvases are drawn again in the theme's colours (the maps' labels, the shades).
        live.page.wait_for_function(
            "(t) => getComputedStyle(document.querySelector('#live-attention'))"
            ".getPropertyValue('--live-bg').trim() === (t === 'dark' ? '#121212' : '#ffffff')",
            arg=theme,
        )
        ratios = live.page.evaluate(CONTRASTS, LABELS)
        for selector, values in ratios.items():
            assert values, f"nothing measured for {selector}"
            assert min(values) >= 4.5, (theme, selector, min(values))
        # axe-core on the box (the rest of the page in dark mode is tested on its own).
        found = blocking(run_axe(live.page, axe, within="#live-attention"))
        assert not found, found
        box = live.page.locator("#live-attention")
        element_screenshot(box, f"live_attention_{theme}_1280px")
        live.page.set_viewport_size(PHONE)
        live.page.wait_for_timeout(400)  # the maps are drawn again to the new width
        element_screenshot(box, f"live_attention_{theme}_390px")
    finally:
        live.page.set_viewport_size(DESKTOP)
        set_theme(live.page, "light")


def test_two_sentences_side_by_side_and_their_difference(live):
    live.type("Dog bites man.")
    live.page.check("#live-compare")
    live.page.wait_for_function("() => window.liveAttention.second !== null")
    runs = live.page.evaluate("() => window.liveAttention.runs")
    live.page.fill("#live-text-b", "Man bites dog.")
    live.page.wait_for_function(
        "(n) => window.liveAttention.second?.sentence === 'Man bites dog.'"
        " && window.liveAttention.difference !== null",
        arg=runs,
    )
    live.page.select_option("#live-layer", "2")
    live.page.select_option("#live-head", "9")
    got = live.page.evaluate(
        "() => { const d = window.liveAttention.difference;"
        " return [d.layer, d.head, Array.from(d.values), d.largest]; }"
    )
    _, _, first = reference("Dog bites man.")
    _, _, second = reference("Man bites dog.")
    expected = second[2, 9] - first[2, 9]  # [T, T]: the same 6 tokens, in another order
    assert got[:2] == [2, 9]
    values = np.asarray(got[2], dtype=np.float32).reshape(expected.shape)
    assert np.abs(values - expected).max() <= 2 * ATOL_ATTENTION  # two maps' errors add up
    assert abs(got[3] - np.abs(expected).max()) <= 2 * ATOL_ATTENTION
    assert live.page.locator(".live-compare-views").is_visible()
    # Sentences of different lengths: side by side, and a message instead of the difference.
    live.page.fill("#live-text-b", "A much longer second sentence than the first one.")
    live.page.wait_for_function("() => window.liveAttention.difference === null")
    assert "same number of tokens" in live.page.text_content(".live-compare-views")
    live.page.uncheck("#live-compare")
    live.page.wait_for_function("() => window.liveAttention.second === null")
    assert live.page.locator(".live-compare-views").is_hidden()


def test_the_loaded_box_is_accessible(live, axe):
    # axe-core (WCAG 2.0/2.1 A and AA) on the page once the box shows its views, comparison on.
    live.type("Dog bites man.")
    live.page.check("#live-compare")
    live.page.fill("#live-text-b", "Man bites dog.")
    live.page.wait_for_function("() => window.liveAttention.difference !== null")
    result = run_axe(live.page, axe)
    live.page.uncheck("#live-compare")
    found = blocking(result)
    assert not found, found


def test_no_console_error_no_dialog_no_request_outside(live, server):
    assert not live.errors, live.errors
    assert not live.dialogs, live.dialogs
    assert all(u.startswith((server, "data:", "blob:")) for u in live.requests)
    # What the click fetched: the runtime, the model and the tokenizer, from this server.
    fetched = model_downloads(live.requests)
    assert any(u.endswith(".onnx") for u in fetched)
    assert any(u.endswith("ort-wasm-simd-threaded.wasm") for u in fetched)


def test_a_second_visit_loads_from_the_browser_cache(live, browser, server):
    # After the first load (the `live` tab), the files are in the browser's cache.
    again = Watched(browser, server)
    try:
        again.page.goto(f"{server}/{PAGE}", wait_until="load")
        config = json.loads(again.page.get_attribute("#live-attention", "data-config"))
        # The button does not promise a download of what the browser has kept.
        again.page.wait_for_function(
            "() => /kept by this browser/.test("
            "document.querySelector('#live-attention .live-load').textContent)"
        )
        label = again.page.text_content("#live-attention .live-load")
        assert f"({config['total'] / 1e6:.1f} MB download)" not in label, label
        again.load_model(f"{server}/{PAGE}")
        read = again.page.evaluate("() => window.liveAttention.loadBytes")
        assert read["network"] == 0 and read["cache"] > 40e6, read
        # The large files come from the cache (the small scripts may be asked again).
        large = [u for u in model_downloads(again.requests) if re.search(r"\.(onnx|wasm|json)$", u)]
        assert not large, large
        assert again.page.evaluate("() => window.liveAttention.ids") is not None
        assert not again.errors, again.errors
    finally:
        again.close()


@pytest.fixture(scope="module")
def sub_path_server(html_dir):
    # The book served from /course/book/ (as on a project's GitHub Pages site).
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "course").mkdir()
        (Path(root) / "course" / "book").symlink_to(html_dir.resolve())
        with serve(root) as base:
            yield base


def test_from_a_sub_path_on_a_phone(browser, sub_path_server):
    watched = Watched(browser, sub_path_server)
    try:
        watched.page.set_viewport_size(PHONE)
        watched.load_model(f"{sub_path_server}/course/book/{PAGE}")
        sentence = UNSEEN[0]
        state = watched.type(sentence)
        ids, _, weights = reference(sentence)
        assert state["ids"] == ids
        got = np.asarray(state["attentions"], dtype=np.float32).reshape(weights.shape)
        assert np.abs(got - weights).max() <= ATOL_ATTENTION
        assert all("/course/book/" in u for u in model_downloads(watched.requests))
        # Readable at 390 px: the page does not scroll sideways; the large map scrolls in its box.
        box = fits_the_width(watched.page, "#live-attention")
        # The map is wider than its box: a line says it scrolls, the hidden edge is shaded, and
        # the box takes the keyboard focus (so arrow keys scroll it).
        scroll = watched.page.locator("#live-attention .live-large").first
        frame = watched.page.locator("#live-attention .live-frame").first
        assert watched.page.locator("#live-attention .live-scroll-hint").first.is_visible()
        assert "live-more-right" in frame.get_attribute("class")
        assert scroll.get_attribute("tabindex") == "0"
        scroll.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
        watched.page.wait_for_function(
            "() => document.querySelector('#live-attention .live-frame')"
            ".classList.contains('live-more-left')"
        )
        assert "live-more-right" not in frame.get_attribute("class")
        scroll.evaluate("(el) => { el.scrollLeft = 0; }")
        element_screenshot(box, "live_attention_390px_subpath")
        assert not watched.errors, watched.errors
    finally:
        watched.close()


def test_a_desktop_screenshot(live):
    box = live.page.locator("#live-attention")
    live.type(UNSEEN[0])
    assert live.page.evaluate(NO_SIDEWAYS_SCROLL)
    element_screenshot(box, "live_attention")
    live.type("Dog bites man.")
    live.page.check("#live-compare")
    live.page.fill("#live-text-b", "Man bites dog.")
    live.page.wait_for_function("() => window.liveAttention.difference !== null")
    assert live.page.evaluate(NO_SIDEWAYS_SCROLL)
    element_screenshot(box, "live_attention_compare")
    live.page.uncheck("#live-compare")


def test_a_page_opened_as_a_file_says_why_the_model_cannot_load(browser, html_dir):
    tab = browser.new_page()
    try:
        tab.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file:") else route.abort()
            ),
        )
        tab.goto((html_dir / PAGE).resolve().as_uri(), wait_until="load")
        assert tab.evaluate("() => window.liveAttention.status") == "unavailable"
        assert tab.is_disabled("#live-attention .live-load")
        assert "opened as a file" in tab.text_content("#live-attention .live-status")
        # The precomputed explorer is still there.
        assert tab.locator("#explorer-attention").count() == 1
    finally:
        tab.close()
