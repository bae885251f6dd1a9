"""The instruments (attention_book.instruments) in headless Chromium, checked against attention_lab.

An instrument computes in the page, in JavaScript, from the reader's settings. Its random inputs
come from the seeded generator of ``book/_static/instruments/core.js``, which this file
reproduces in Python (:class:`Mulberry32`): the page's draws are compared with the reproduction,
and the page's own draws are then fed to the library, whose numbers the page's must match.

Tolerances are derived, not tuned. The page computes a dot product of ``n`` terms in float64; the
library computes it again in another order (float64, or float32 for a model's dtype). Each
result is within ``gamma(n) * sum_i |q_i k_i|`` of the exact one (``gamma(n) = n u / (1 - n u)``,
``u`` the unit roundoff), so the softmax's inputs differ by at most ``delta`` (:func:`bound`).
Shifting a softmax's inputs by at most ``delta`` scales every weight by a factor within
``exp(+-2 delta)``; the entropy, the Jacobian and the spread follow from the weights' bounds.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch
import yaml

from attention_lab.attention import scaled_dot_product_attention
from support.accessibility import blocking, run_axe
from support.browser import (
    CHOOSE_THEME,
    DESKTOP,
    NO_SIDEWAYS_SCROLL,
    PHONE,
    ROOT,
    THEMES,
    Tab,
    element_screenshot,
    fits_the_width,
)

PAGE = "notebooks_src/chapters/02_scaled_dot_product_attention.html"
MASKS_PAGE = "notebooks_src/chapters/05_masks.html"
U64, U32 = 2.0**-53, 2.0**-24
MASK = 0xFFFFFFFF


class Mulberry32:
    """core.js's generator in Python: the same uint32 stream, uniforms and normals."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK
        self.spare: float | None = None

    def next(self) -> int:
        self.state = (self.state + 0x6D2B79F5) & MASK
        a = self.state
        t = ((a ^ (a >> 15)) * (1 | a)) & MASK  # Math.imul keeps the low 32 bits
        t = ((t + (((t ^ (t >> 7)) * (61 | t)) & MASK)) & MASK) ^ t
        return (t ^ (t >> 14)) & MASK

    def uniform(self) -> float:
        return (self.next() + 0.5) / 2**32

    def normal(self) -> float:
        if self.spare is not None:
            z, self.spare = self.spare, None
            return z
        r = math.sqrt(-2 * math.log(self.uniform()))
        angle = 2 * math.pi * self.uniform()
        self.spare = r * math.sin(angle)
        return r * math.cos(angle)

    def normals(self, n: int) -> np.ndarray:
        return np.array([self.normal() for _ in range(n)])


def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def bound(query: torch.Tensor, keys: torch.Tensor, scale: float, u: float) -> float:
    """Largest difference between two computations of the softmax's inputs q.k_j / scale."""
    # Per term: q and k rounded to the dtype, the factor, the product, up to n - 1 additions,
    # sqrt(d_k) and the division by it: at most n + 6 roundings.
    n = query.shape[-1] + 6
    magnitude = (query.abs() * keys.abs()).sum(-1).max().item()  # max_j sum_i |q_i k_ji|
    return 2 * gamma(n, u) * magnitude / scale


def weight_bounds(p: np.ndarray, delta: float, u: float = U64) -> np.ndarray:
    """|p'_i - p_i| for inputs moved by at most delta, plus the softmax's own roundings (an exp
    per weight, a sum of Tk terms and a division, in either computation)."""
    return p * (math.expm1(2 * delta) + 2 * (len(p) + 4) * u) + 8 * u


# --- driving the page ----------------------------------------------------------------------

READ = """() => {
  const s = window.attentionInstruments.scaling;
  const row = (r) => ({weights: Array.from(r.weights), maxWeight: r.maxWeight,
    entropy: r.entropy, jacobianNorm: r.jacobianNorm, spread: r.spread});
  return {seed: s.seed, dK: s.dK, numKeys: s.numKeys, temperature: s.temperature, runs: s.runs,
    query: Array.from(s.query), keys: Array.from(s.keys), scores: Array.from(s.scores),
    unscaled: row(s.unscaled), scaled: row(s.scaled),
    status: document.querySelector('#instrument-scaling .instrument-status').textContent,
    table: Array.from(document.querySelectorAll('#instrument-scaling td'), (c) => c.textContent)};
}"""
SET_RANGE = """([selector, value]) => {
  const el = document.querySelector(selector);
  el.value = String(value);
  el.dispatchEvent(new Event('input', {bubbles: true}));
}"""


class Instrument(Tab):
    """A chapter's instrument in a local-only tab; records console errors, dialogs and requests.

    With ``theme`` (light or dark), the page opens as after a reader's earlier choice of it."""

    def __init__(
        self,
        browser,
        server: str,
        viewport=DESKTOP,
        path: str = PAGE,
        name: str = "scaling",
        theme: str | None = None,
    ) -> None:
        super().__init__(browser, server, timeout=120_000, viewport=viewport)
        self.name, self.path, self.theme = name, path, theme
        if theme is not None:  # the reader's stored choice, before the page's first script
            self.page.add_init_script(CHOOSE_THEME.format(theme))
        self.goto(path)
        self.page.wait_for_function(f"() => window.attentionInstruments?.{name}?.runs > 0")

    def state(self) -> dict:
        reader = {
            "scaling": READ,
            "masks": READ_MASKS,
            "positional": READ_PE,
            "heads": READ_HEADS,
            "mask_composer": READ_COMPOSER,
            "cache_memory": READ_CACHE,
            "hybrid_memory": READ_HYBRID,
            "extrapolation": READ_EXTRAPOLATION,
        }
        reader = reader[self.name]
        return self.page.evaluate(reader)

    def set_range(self, name: str, value: float) -> None:
        self.page.evaluate(SET_RANGE, [f"#instrument-{self.name}-{name}", value])


@pytest.fixture(scope="module")
def scaling_page(browser, server):
    with Instrument(browser, server) as tab:
        yield tab


def assert_accessible(instrument: Instrument, axe) -> None:
    """No critical or serious axe-core violation (WCAG 2.0/2.1 A and AA) in the instrument, in
    the state the module's tests left it (other settings than its defaults). The whole page, with
    the instrument drawn at its defaults, is audited in both themes by its visit
    (test_browser_pages.py)."""
    found = blocking(run_axe(instrument.page, axe, within=f"#instrument-{instrument.name}"))
    assert not found, found


@contextlib.contextmanager
def on_a_phone(browser, server, name: str, theme: str | None = None):
    """The instrument ``name`` in a 390 px tab (in ``theme``, if given), for the block to set up
    or measure; then checked: no sideways scroll, the box within the width (screenshot), no
    error, no request leaving the machine."""
    phone = Instrument(browser, server, PHONE, path=INSTRUMENT_PAGES[name], name=name, theme=theme)
    try:
        yield phone
        box = fits_the_width(phone.page, f"#instrument-{name}")
        themed = "" if theme is None else f"_{theme}"
        element_screenshot(box, f"instrument_{name}{themed}_390px")
        assert not phone.errors, phone.errors
        assert all(u.startswith((server, "data:", "blob:")) for u in phone.requests)
    finally:
        phone.close()


def assert_local(instrument: Instrument, server) -> None:
    """No error and no request leaving the machine while the module's tests used the instrument.
    (Each page's first visit is weighed against the budget by test_browser_pages.py.)"""
    assert not instrument.errors, instrument.errors
    assert all(u.startswith((server, "data:", "blob:")) for u in instrument.requests)


def accessible_on_a_phone_and_light(instrument, browser, server, axe, prepare=None):
    """Every instrument: accessible, a desktop screenshot, readable at 390 px (after
    ``prepare(phone)``), no error, nothing fetched from outside. The phone's tab opens in the
    instrument's theme."""
    assert_accessible(instrument, axe)
    name, theme = instrument.name, instrument.theme
    themed = "" if theme is None else f"_{theme}_1280px"
    element_screenshot(instrument.page.locator(f"#instrument-{name}"), f"instrument_{name}{themed}")
    with on_a_phone(browser, server, name, theme) as phone:
        if prepare is not None:
            prepare(phone)
    assert_local(instrument, server)


def check_against_the_library(state: dict) -> dict:
    """Compare the page's draws and numbers with Mulberry32 and attention_lab; the errors."""
    d_k, num_keys, tau = state["dK"], state["numKeys"], state["temperature"]
    # 1. The page drew what the generator says: the query, then the keys row by row. Math.log,
    # sin and cos may differ from C's by an ulp, hence not bit for bit.
    rng = Mulberry32(state["seed"])
    expected_query, expected_keys = rng.normals(d_k), rng.normals(num_keys * d_k)
    np.testing.assert_allclose(state["query"], expected_query, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(state["keys"], expected_keys, rtol=1e-14, atol=1e-15)
    # 2. The page's inputs, exactly, to the library.
    query = torch.tensor(state["query"], dtype=torch.float64).reshape(1, d_k)  # [Tq, Dk]
    keys = torch.tensor(state["keys"], dtype=torch.float64).reshape(num_keys, d_k)  # [Tk, Dk]
    errors = {}
    for name, scale in (("unscaled", tau), ("scaled", tau * math.sqrt(d_k))):
        row = state[name]
        # The library divides by sqrt(d_k): a query multiplied by sqrt(d_k) / scale gives the
        # softmax of q.k / scale.
        factor = math.sqrt(d_k) / scale
        for dtype, u in ((torch.float64, U64), (torch.float32, U32)):
            q, k = query.to(dtype), keys.to(dtype)
            _, weights = scaled_dot_product_attention(q * factor, k, k)  # [1, Tk]
            library = weights[0].double().numpy()
            delta = bound(query, keys, scale, u)
            allowed = weight_bounds(library, delta, u)
            got = np.asarray(row["weights"])
            assert (np.abs(got - library) <= allowed).all(), (name, dtype, got - library)
            errors[(name, str(dtype))] = float(np.abs(got - library).max())
        # Entropy, Jacobian norm and spread against PyTorch in float64, on the library's inputs.
        inputs = (query @ keys.T)[0] / scale  # [Tk]
        p = torch.softmax(inputs, dim=-1)
        jacobian = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=-1), inputs)
        delta = bound(query, keys, scale, U64)
        a = weight_bounds(p.numpy(), delta)
        pn = p.numpy()
        entropy_tol = float((a * (np.abs(np.log(np.where(pn > 0, pn, 1.0))) + 1)).sum())
        d_jacobian = a[:, None] * np.abs(np.eye(num_keys) - pn[None, :]) + pn[:, None] * a
        jacobian_tol = float(np.linalg.norm(d_jacobian)) + 8 * U64
        entropy = -torch.special.xlogy(p, p).sum().item()
        assert abs(row["entropy"] - entropy) <= entropy_tol, (name, row["entropy"], entropy)
        norm = torch.linalg.matrix_norm(jacobian).item()
        assert abs(row["jacobianNorm"] - norm) <= jacobian_tol, (name, row["jacobianNorm"], norm)
        spread = inputs.std(correction=0).item()
        assert abs(row["spread"] - spread) <= delta + 8 * U64 * inputs.abs().max().item()
        assert row["maxWeight"] == max(row["weights"])
        errors[(name, "jacobian")] = abs(row["jacobianNorm"] - norm) / norm
    return errors


# --- the tests -----------------------------------------------------------------------------


def test_default_settings_match_the_library_and_the_prose(scaling_page):
    state = scaling_page.state()
    assert (state["seed"], state["dK"], state["numKeys"], state["temperature"]) == (0, 1024, 16, 1)
    check_against_the_library(state)
    # The text description's claims at these settings (book/explorers.yml): all the weight on
    # one key, a Jacobian more than a billion times smaller than the scaled row's, whose
    # largest weight is 0.35.
    assert state["unscaled"]["maxWeight"] > 0.9995  # shown as 1.000
    ratio = state["scaled"]["jacobianNorm"] / state["unscaled"]["jacobianNorm"]
    assert ratio > 1e9, ratio
    assert f"{state['scaled']['maxWeight']:.2f}" == "0.35"
    assert "times smaller without scaling" in state["status"]
    assert f"{state['unscaled']['maxWeight']:.3f}" in state["table"]


def test_settings_from_the_keyboard_and_the_seed_field(scaling_page):
    tab = scaling_page.page
    tab.focus("#instrument-scaling-dk")
    for _ in range(4):  # 2**10 -> 2**6
        tab.keyboard.press("ArrowLeft")
    tab.focus("#instrument-scaling-tau")
    for _ in range(3):  # log2 tau 0 -> 0.75
        tab.keyboard.press("ArrowRight")
    scaling_page.set_range("keys", 7)
    tab.fill("#instrument-scaling-seed", "12345")
    state = scaling_page.state()
    assert (state["seed"], state["dK"], state["numKeys"]) == (12345, 64, 7)
    assert state["temperature"] == pytest.approx(2**0.75)
    assert tab.get_attribute("#instrument-scaling-dk", "aria-valuetext") == "d_k = 64"
    check_against_the_library(state)
    # Resample: the next seed, new draws, still the library's numbers.
    tab.focus("#instrument-scaling .instrument-button")
    tab.keyboard.press("Enter")
    again = scaling_page.state()
    assert again["seed"] == 12346 and tab.input_value("#instrument-scaling-seed") == "12346"
    assert again["query"] != state["query"]
    check_against_the_library(again)
    tab.fill("#instrument-scaling-seed", "-3")
    assert "whole number" in scaling_page.state()["status"]
    tab.fill("#instrument-scaling-seed", "0")


def test_the_prose_claims_hold_in_the_page(scaling_page):
    scaling_page.set_range("keys", 16)
    scaling_page.set_range("tau", 0)
    scaling_page.page.fill("#instrument-scaling-seed", "0")
    scaling_page.set_range("dk", 10)
    at_1024 = scaling_page.state()
    # d_k = 1: scaling divides by 1, the two rows coincide.
    scaling_page.set_range("dk", 0)
    one = scaling_page.state()
    assert one["unscaled"]["weights"] == one["scaled"]["weights"]
    # d_k = 1024 and tau = 32 = sqrt(1024): the unscaled row is the scaled row at tau = 1.
    scaling_page.set_range("dk", 10)
    scaling_page.set_range("tau", 5)
    hot = scaling_page.state()
    np.testing.assert_allclose(
        hot["unscaled"]["weights"], at_1024["scaled"]["weights"], rtol=1e-12, atol=1e-15
    )
    check_against_the_library(hot)
    # Resampling at d_k = 1024: nearly one-hot for most seeds, but not for all.
    scaling_page.set_range("tau", 0)
    largest = []
    for _ in range(20):
        scaling_page.page.click("#instrument-scaling .instrument-button")
        largest.append(scaling_page.state()["unscaled"]["maxWeight"])
    assert sum(m > 0.99 for m in largest) > 10 and min(largest) < 0.99, largest
    scaling_page.page.fill("#instrument-scaling-seed", "0")


def test_the_widest_and_smallest_settings(scaling_page):
    # 32 keys of width 1024 at tau = 1/4: the most saturated row the sliders allow.
    scaling_page.set_range("dk", 10)
    scaling_page.set_range("keys", 32)
    scaling_page.set_range("tau", -2)
    errors = check_against_the_library(scaling_page.state())
    assert errors[("scaled", "torch.float64")] < 1e-12
    scaling_page.set_range("keys", 2)
    scaling_page.set_range("dk", 0)
    check_against_the_library(scaling_page.state())
    scaling_page.set_range("keys", 16)
    scaling_page.set_range("dk", 10)
    scaling_page.set_range("tau", 0)


def test_the_instrument_is_accessible(scaling_page, axe):
    assert_accessible(scaling_page, axe)
    # Every control has a label a screen reader announces.
    unnamed = scaling_page.page.evaluate(
        "() => Array.from(document.querySelectorAll('#instrument-scaling input'))"
        ".filter((i) => !i.labels || i.labels.length === 0).map((i) => i.id)"
    )
    assert not unnamed, unnamed


def test_readable_on_a_phone(browser, server):
    with on_a_phone(browser, server, "scaling") as phone:
        # The chart's smallest text, in CSS pixels: its font size times the viewBox's scale.
        smallest = phone.page.evaluate(
            """() => {
              const svg = document.querySelector('#instrument-scaling svg');
              const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
              const sizes = Array.from(svg.querySelectorAll('text'),
                                       (t) => Number(t.getAttribute('font-size')));
              return Math.min(...sizes) * scale;
            }"""
        )
        assert smallest >= 9, smallest  # the book's floor for figure text (test_figure_text.py)


def test_a_desktop_screenshot(scaling_page):
    assert scaling_page.page.evaluate(NO_SIDEWAYS_SCROLL)
    element_screenshot(scaling_page.page.locator("#instrument-scaling"), "instrument_scaling")


def test_no_error_no_request_outside_and_no_plotly(scaling_page, server):
    assert not [u for u in scaling_page.requests if "plotly" in u]
    assert_local(scaling_page, server)


# --- chapter 05: masks and fills -------------------------------------------------------------

READ_MASKS = """() => {
  const s = window.attentionInstruments.masks;
  return {seed: s.seed, length: s.length, real: s.real, side: s.side, padding: s.padding,
    causal: s.causal, fill: s.fill, runs: s.runs, query: Array.from(s.query),
    keys: Array.from(s.keys), allowed: Array.from(s.allowed), weights: Array.from(s.weights),
    emptyRows: s.emptyRows,
    status: document.querySelector('#instrument-masks .instrument-status').textContent,
    cells: Array.from(document.querySelectorAll('#instrument-masks td'), (c) => c.textContent)};
}"""
HEAD_DIM = 4  # masks.js's DH


@pytest.fixture(scope="module")
def masks_page(browser, server):
    with Instrument(browser, server, path=MASKS_PAGE, name="masks") as tab:
        yield tab


def library_mask(state: dict) -> torch.Tensor | None:
    """The mask attention_lab builds for the page's settings, [T, T], or None for no mask."""
    from attention_lab.masks import causal_mask, combine_masks, padding_mask

    length, real = state["length"], state["real"]
    ids = list(range(1, real + 1))  # 0 is the padding id
    ids = [0] * (length - real) + ids if state["side"] == "left" else ids + [0] * (length - real)
    chosen = []
    if state["padding"]:
        chosen.append(padding_mask(torch.tensor([ids])))  # [1, 1, 1, T]
    if state["causal"]:
        chosen.append(causal_mask(length))  # [T, T]
    if not chosen:
        return None
    return combine_masks(*chosen).expand(1, 1, length, length)[0, 0]  # [T, T]


def check_masks(state: dict) -> np.ndarray:
    """Compare the page's draws, mask and weights with Mulberry32 and attention_lab."""
    length = state["length"]
    rng = Mulberry32(state["seed"])
    drawn = rng.normals(length * HEAD_DIM), rng.normals(length * HEAD_DIM)
    np.testing.assert_allclose(state["query"], drawn[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(state["keys"], drawn[1], rtol=1e-14, atol=1e-15)
    query = torch.tensor(state["query"], dtype=torch.float64).reshape(length, HEAD_DIM)
    keys = torch.tensor(state["keys"], dtype=torch.float64).reshape(length, HEAD_DIM)
    mask = library_mask(state)
    allowed = torch.ones(length, length, dtype=torch.bool) if mask is None else mask
    assert state["allowed"] == allowed.flatten().int().tolist()
    empty = (~allowed.any(dim=-1)).nonzero().flatten().tolist()  # queries with no key
    assert state["emptyRows"] == empty
    got = np.asarray(state["weights"], dtype=np.float64).reshape(length, length)
    delta = bound(query, keys, math.sqrt(HEAD_DIM), U64)
    if state["fill"] == "library":
        for dtype, u in ((torch.float64, U64), (torch.float32, U32)):
            _, weights = scaled_dot_product_attention(
                query.to(dtype), keys.to(dtype), keys.to(dtype), mask
            )  # [Tq, Tk]
            expected = weights.double().numpy()
            allowed_error = weight_bounds(expected, bound(query, keys, 2.0, u), u)
            assert (np.abs(got - expected) <= allowed_error).all(), (dtype, got - expected)
    else:
        scores = query @ keys.T / math.sqrt(HEAD_DIM)  # [Tq, Tk]
        filled = scores.masked_fill(~allowed, float(state["fill"]))
        expected = torch.softmax(filled, dim=-1).numpy()
        assert np.array_equal(np.isnan(got), np.isnan(expected))
        finite = ~np.isnan(expected)
        tolerance = weight_bounds(expected, delta)[finite]
        assert (np.abs(got[finite] - expected[finite]) <= tolerance).all()
    # Blocked keys of a query that has a key get exactly 0, whatever the fill.
    rows_with_a_key = allowed.any(dim=-1).numpy()
    blocked = ~allowed.numpy() & rows_with_a_key[:, None]
    assert (got[blocked] == 0).all()
    return got


def test_masks_defaults_match_the_library_and_the_prose(masks_page):
    state = masks_page.state()
    settings = [state[k] for k in ("seed", "length", "real", "side", "padding", "causal", "fill")]
    assert settings == [0, 6, 3, "left", True, True, "library"]
    weights = check_masks(state)
    assert state["emptyRows"] == [0, 1, 2]  # the text description's claim
    assert (weights[:3] == 0).all()
    assert "queries 0, 1, 2" in state["status"] and "to 0" in state["status"]


def test_masks_the_three_fills_of_an_empty_row(masks_page):
    tab = masks_page.page
    library = np.asarray(masks_page.state()["weights"]).reshape(6, 6)
    tab.select_option("#instrument-masks-fill", "-inf")
    state = masks_page.state()
    weights = check_masks(state)
    assert np.isnan(weights[:3]).all() and not np.isnan(weights[3:]).any()
    assert state["cells"][:18] == ["blocked NaN"] * 18 and "NaN" in state["status"]
    np.testing.assert_array_equal(weights[3:], library[3:])  # every other row as it was
    tab.select_option("#instrument-masks-fill", "-1e9")
    weights = check_masks(masks_page.state())
    assert (weights[:3] == 1 / 6).all()  # uniform over every key, padding included
    np.testing.assert_array_equal(weights[3:], library[3:])
    tab.select_option("#instrument-masks-fill", "library")


def test_masks_right_padding_and_each_mask_alone_empty_no_row(masks_page):
    tab = masks_page.page
    tab.select_option("#instrument-masks-side", "right")
    by_fill = {}
    for fill in ("-inf", "-1e9", "library"):
        tab.select_option("#instrument-masks-fill", fill)
        state = masks_page.state()
        assert state["emptyRows"] == [] and "no row is fully masked" in state["status"]
        by_fill[fill] = check_masks(state)
    np.testing.assert_array_equal(by_fill["-inf"], by_fill["-1e9"])  # the three fills agree
    np.testing.assert_array_equal(by_fill["-inf"], by_fill["library"])
    tab.select_option("#instrument-masks-side", "left")
    for alone in ("padding", "causal"):
        other = "causal" if alone == "padding" else "padding"
        tab.uncheck(f"#instrument-masks-{other}")
        state = masks_page.state()
        assert state["emptyRows"] == [], alone
        check_masks(state)
        tab.check(f"#instrument-masks-{other}")
    tab.uncheck("#instrument-masks-padding")
    tab.uncheck("#instrument-masks-causal")
    check_masks(masks_page.state())  # no mask at all
    tab.check("#instrument-masks-padding")
    tab.check("#instrument-masks-causal")
    tab.select_option("#instrument-masks-fill", "library")


def test_masks_from_the_keyboard_with_other_settings(masks_page):
    tab = masks_page.page
    tab.focus("#instrument-masks-length")
    for _ in range(3):  # T = 6 -> 9
        tab.keyboard.press("ArrowRight")
    tab.focus("#instrument-masks-real")
    tab.keyboard.press("ArrowRight")  # 3 -> 4 real tokens
    tab.focus("#instrument-masks-causal")
    tab.keyboard.press("Space")  # causal off
    tab.keyboard.press("Space")  # and on again
    tab.fill("#instrument-masks-seed", "2024")
    tab.click("#instrument-masks .instrument-button")
    state = masks_page.state()
    assert (state["seed"], state["length"], state["real"], state["causal"]) == (2025, 9, 4, True)
    assert state["emptyRows"] == [0, 1, 2, 3, 4]
    for fill in ("-inf", "-1e9", "library"):
        tab.select_option("#instrument-masks-fill", fill)
        check_masks(masks_page.state())
    # The number of real tokens cannot exceed T.
    masks_page.set_range("length", 2)
    state = masks_page.state()
    assert state["real"] == 2 and state["length"] == 2
    check_masks(state)
    masks_page.set_range("length", 6)
    masks_page.set_range("real", 3)
    tab.fill("#instrument-masks-seed", "0")
    tab.select_option("#instrument-masks-fill", "library")


def test_masks_accessible_readable_on_a_phone_and_light(masks_page, browser, server, axe):
    accessible_on_a_phone_and_light(
        masks_page,
        browser,
        server,
        axe,
        prepare=lambda phone: phone.set_range("length", 10),
    )


# --- chapter 04: the sinusoidal encoding --------------------------------------------------------

PE_PAGE = "notebooks_src/chapters/04_positional_encoding.html"
READ_PE = """() => {
  const s = window.attentionInstruments.positional;
  return {dModel: s.dModel, maxLen: s.maxLen, base: s.base, position: s.position, pair: s.pair,
    runs: s.runs, encoding: Array.from(s.encoding), dots: Array.from(s.dots),
    status: document.querySelector('#instrument-positional .instrument-status').textContent};
}"""


@pytest.fixture(scope="module")
def pe_page(browser, server):
    with Instrument(browser, server, path=PE_PAGE, name="positional") as tab:
        yield tab


def check_encoding(state: dict) -> None:
    """The page's encoding and dot products against sinusoidal_encoding and the closed form."""
    from attention_lab.positional import sinusoidal_encoding

    d, max_len, base, p = state["dModel"], state["maxLen"], state["base"], state["position"]
    got = np.asarray(state["encoding"]).reshape(max_len, d)
    library = sinusoidal_encoding(max_len, d, base).double().numpy()  # [T, D], float32 values
    # The library rounds its float64 values to float32: at most half an ulp, 2**-25 for values in
    # [0.5, 1]; the two float64 computations of an angle pos / base**(2i/d) differ by a few
    # ulps of the angle (at most ~1e3 here), far below that.
    assert np.abs(got - library).max() <= 2.0**-25 + 1e-12
    # Dot products: each entry of either encoding is within e = 2**-25 of the other, so a dot
    # product of d terms (|entries| <= 1) moves by at most d * (2 e + e**2).
    expected = library @ library[p]  # [T]
    e = 2.0**-25
    assert np.abs(np.asarray(state["dots"]) - expected).max() <= d * (2 * e + e * e) + 1e-12
    # In float64 the page's dot products are the closed form sum_i cos(w_i (q - p)): they depend
    # only on the offset (the chapter's property), up to float64 rounding of d terms.
    w = 1 / base ** (np.arange(0, d, 2) / d)  # [D / 2]
    closed = np.cos(np.outer(np.arange(max_len) - p, w)).sum(axis=1)  # [T]
    np.testing.assert_allclose(state["dots"], closed, rtol=0, atol=d * 1e-12)
    assert state["dots"][p] == pytest.approx(d / 2, abs=d * 1e-15)
    assert int(np.argmax(state["dots"])) == p


def test_positional_defaults_match_the_library(pe_page):
    state = pe_page.state()
    assert (state["dModel"], state["maxLen"], state["base"], state["position"]) == (
        64,
        100,
        1e4,
        10,
    )
    check_encoding(state)
    dots = np.asarray(state["dots"])
    p = state["position"]
    np.testing.assert_allclose(dots[p - 10 : p][::-1], dots[p + 1 : p + 11], atol=1e-12)
    # p - 1 and p + 1 tie: the sentence names both.
    assert f"the most similar other positions are {p - 1} and {p + 1}" in state["status"]


def test_positional_the_prose_claims_and_other_settings(pe_page):
    tab = pe_page.page
    # d_model = 16: pair 7 (dimensions 14, 15) is the last and barely moves over 100 positions.
    pe_page.set_range("d", 16)
    pe_page.set_range("pair", 7)
    state = pe_page.state()
    check_encoding(state)
    encoding = np.asarray(state["encoding"]).reshape(100, 16)
    assert np.abs(encoding[:, 14]).max() < 0.05
    # d_model = 128: the same pair completes almost six periods.
    pe_page.set_range("d", 128)
    caption = tab.text_content("#instrument-positional .instrument-caption:nth-of-type(2)")
    state = pe_page.state()
    check_encoding(state)
    periods = 100 / (2 * math.pi * 1e4 ** (14 / 128))
    assert 5.5 < periods < 6 and f"{periods:.3f} periods" in caption, caption
    # Dimensions 0 and 1 are sin(pos) and cos(pos) at every width.
    encoding = np.asarray(state["encoding"]).reshape(100, 128)
    np.testing.assert_allclose(encoding[:, 0], np.sin(np.arange(100)), atol=1e-15)
    # From the keyboard: a longer sequence, another base and position.
    tab.focus("#instrument-positional-len")
    tab.keyboard.press("End")  # max_len = 1000
    tab.focus("#instrument-positional-base")
    tab.keyboard.press("ArrowLeft")  # base = 10**3.5
    tab.focus("#instrument-positional-pos")
    tab.keyboard.press("End")  # the last position
    state = pe_page.state()
    assert state["maxLen"] == 1000 and state["position"] == 999
    assert state["base"] == pytest.approx(10**3.5)
    check_encoding(state)
    pe_page.set_range("d", 510)
    pe_page.set_range("pos", 0)
    check_encoding(pe_page.state())
    pe_page.set_range("d", 64)
    pe_page.set_range("len", 100)
    pe_page.set_range("base", 4)
    pe_page.set_range("pos", 10)


def test_positional_accessible_readable_on_a_phone_and_light(pe_page, browser, server, axe):
    accessible_on_a_phone_and_light(pe_page, browser, server, axe)


# --- chapter 03: multi-head attention's split ------------------------------------------------

HEADS_PAGE = "notebooks_src/chapters/03_multi_head_attention.html"
READ_HEADS = """() => {
  const s = window.attentionInstruments.heads;
  return {seed: s.seed, dModel: s.dModel, heads: s.heads, headDim: s.headDim, length: s.length,
    runs: s.runs, query: Array.from(s.query), keys: Array.from(s.keys), split: Array.from(s.split),
    weights: Array.from(s.weights),
    options: Array.from(document.querySelectorAll('#instrument-heads-h option'), (o) => o.value),
    canvases: document.querySelectorAll('#instrument-heads canvas').length,
    status: document.querySelector('#instrument-heads .instrument-status').textContent};
}"""


@pytest.fixture(scope="module")
def heads_page(browser, server):
    with Instrument(browser, server, path=HEADS_PAGE, name="heads") as tab:
        yield tab


def check_heads(state: dict) -> np.ndarray:
    """The page's draws, split and weights against Mulberry32 and MultiHeadAttention."""
    from attention_lab.attention import MultiHeadAttention

    d, h, t = state["dModel"], state["heads"], state["length"]
    rng = Mulberry32(state["seed"])
    drawn = rng.normals(t * d), rng.normals(t * d)
    np.testing.assert_allclose(state["query"], drawn[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(state["keys"], drawn[1], rtol=1e-14, atol=1e-15)
    assert state["headDim"] == d // h and state["canvases"] == h
    assert state["options"] == [str(n) for n in range(1, d + 1) if d % n == 0]
    query = torch.tensor(state["query"], dtype=torch.float64).reshape(1, t, d)  # [B, T, D]
    keys = torch.tensor(state["keys"], dtype=torch.float64).reshape(1, t, d)  # [B, T, D]
    got = np.asarray(state["weights"]).reshape(h, t, t)
    for dtype, u in ((torch.float64, U64), (torch.float32, U32)):
        module = MultiHeadAttention(d, h, bias=False).to(dtype).eval()
        with torch.no_grad():
            for projection in (module.q_proj, module.k_proj, module.v_proj):
                projection.weight.copy_(torch.eye(d, dtype=dtype))  # the page's Q and K as is
            if dtype == torch.float64:  # the library's split, exactly the page's
                split = module._split_heads(query)  # [B, H, T, Dh]
                assert np.array_equal(np.asarray(state["split"]), split.flatten().numpy())
            _, weights = module(query.to(dtype), keys.to(dtype), keys.to(dtype))  # [B, H, T, T]
        expected = weights[0].double().numpy()  # [H, T, T]
        for head in range(h):
            part = slice(head * (d // h), (head + 1) * (d // h))
            delta = bound(query[0, :, part], keys[0, :, part], math.sqrt(d // h), u)
            allowed = weight_bounds(expected[head], delta, u)
            assert (np.abs(got[head] - expected[head]) <= allowed).all(), (dtype, head)
    return got


def test_heads_defaults_match_the_library(heads_page):
    state = heads_page.state()
    assert [state[k] for k in ("seed", "dModel", "heads", "length")] == [0, 24, 3, 6]
    weights = check_heads(state)
    # The text description's claim: the three heads' maps differ.
    assert (
        np.abs(weights[0] - weights[1]).max() > 0.1 and np.abs(weights[1] - weights[2]).max() > 0.1
    )
    assert "every head sees 8 of the 24 features" in state["status"]


def test_heads_other_settings_from_the_keyboard(heads_page):
    tab = heads_page.page
    tab.select_option("#instrument-heads-h", "8")
    state = heads_page.state()
    assert state["heads"] == 8 and state["headDim"] == 3
    check_heads(state)
    tab.focus("#instrument-heads-d")
    tab.keyboard.press("ArrowRight")  # D = 25: 8 does not divide it, so H falls back to 1
    state = heads_page.state()
    assert (state["dModel"], state["heads"]) == (25, 1) and state["options"] == ["1", "5", "25"]
    check_heads(state)
    heads_page.set_range("d", 64)
    tab.select_option("#instrument-heads-h", "16")
    heads_page.set_range("t", 12)
    tab.click("#instrument-heads .instrument-button")  # resample: seed 1
    state = heads_page.state()
    assert (state["seed"], state["dModel"], state["heads"], state["length"]) == (1, 64, 16, 12)
    check_heads(state)
    # The table shows the chosen head's weights.
    tab.select_option("#instrument-heads-show", "5")
    cells = tab.eval_on_selector_all("#instrument-heads td", "(cs) => cs.map((c) => c.textContent)")
    shown = np.asarray(state["weights"]).reshape(16, 12, 12)[5]
    assert cells == [f"{w:.2f}" for w in shown.flatten()]
    heads_page.set_range("d", 24)
    tab.select_option("#instrument-heads-h", "3")
    heads_page.set_range("t", 6)
    tab.fill("#instrument-heads-seed", "0")


def test_heads_accessible_readable_on_a_phone_and_light(heads_page, browser, server, axe):
    accessible_on_a_phone_and_light(heads_page, browser, server, axe)


# --- chapter 17: masks as functions, composed ---------------------------------------------------

COMPOSER_PAGE = "notebooks_src/chapters/17_masks_as_functions.html"
COMPOSER = "#instrument-mask_composer"
SETTINGS = (
    "seed",
    "length",
    "order",
    "prefix",
    "padding",
    "pads",
    "side",
    "window",
    "windowSize",
    "documents",
)
READ_COMPOSER = """() => {
  const s = window.attentionInstruments.mask_composer;
  const box = document.querySelector('#instrument-mask_composer');
  const tables = box.querySelectorAll('table');
  return {seed: s.seed, length: s.length, order: s.order, prefix: s.prefix, padding: s.padding,
    pads: s.pads, side: s.side, window: s.window, windowSize: s.windowSize,
    documents: s.documents, documentIds: Array.from(s.documentIds),
    documentLengths: s.documentLengths, runs: s.runs, query: Array.from(s.query),
    keys: Array.from(s.keys), allowed: Array.from(s.allowed), weights: Array.from(s.weights),
    parts: s.parts.map((p) => ({name: p.name, allowed: Array.from(p.allowed)})),
    emptyRows: s.emptyRows, allowedCount: s.allowedCount,
    lengthsText: document.querySelector('#instrument-mask_composer-lengths').value,
    status: box.querySelector('.instrument-status').textContent,
    maskCells: Array.from(tables[0].querySelectorAll('td'), (c) => c.textContent),
    weightCells: Array.from(tables[1].querySelectorAll('td'), (c) => c.textContent),
    maps: box.querySelectorAll('.instrument-parts canvas').length};
}"""
# compute() itself, on settings given by the test: parseLengths, then compute, for each.
COMPUTE_COMPOSER = """(list) => list.map((settings) => {
  const api = window.attentionInstruments.mask_composer;
  const parsed = api.parseLengths(settings.lengths, settings.length);
  const s = api.compute(Object.assign({}, settings, {documentIds: parsed.ids,
    documentLengths: parsed.lengths}));
  return Object.assign({}, settings, {documentIds: Array.from(s.documentIds),
    documentLengths: s.documentLengths, query: Array.from(s.query), keys: Array.from(s.keys),
    allowed: Array.from(s.allowed), weights: Array.from(s.weights), emptyRows: s.emptyRows,
    allowedCount: s.allowedCount,
    parts: s.parts.map((p) => ({name: p.name, allowed: Array.from(p.allowed)}))});
})"""


@pytest.fixture(scope="module")
def composer_page(browser, server):
    with Instrument(browser, server, path=COMPOSER_PAGE, name="mask_composer") as tab:
        yield tab


def document_ids(lengths: str, length: int) -> list[int]:
    """The documents of T positions for typed lengths: cut at T, the rest one more document."""
    ids: list[int] = []
    for number, n in enumerate(int(x) for x in lengths.replace(",", " ").split()):
        ids += [number] * n
    ids = ids[:length]
    return ids + [ids[-1] + 1 if ids else 0] * (length - len(ids))


def library_parts(state: dict) -> dict[str, torch.Tensor]:
    """attention_lab.masks' mask for each part the page chose, by its name, each [T, T]."""
    from attention_lab.masks import (
        causal_mask,
        document_mask,
        padding_mask,
        prefix_lm_mask,
        sliding_window_mask,
    )

    length = state["length"]
    parts = {}
    if state["order"] == "causal":
        parts["causal"] = causal_mask(length)
    elif state["order"] == "prefix":  # prefix-LM replaces causal
        parts["prefix"] = prefix_lm_mask(length, state["prefix"])
    if state["padding"]:
        real = list(range(1, length - state["pads"] + 1))  # 0 is the padding id
        pads = [0] * state["pads"]
        ids = pads + real if state["side"] == "left" else real + pads
        parts["padding"] = padding_mask(torch.tensor([ids]))[0, 0].expand(length, length)
    if state["window"]:
        parts["window"] = sliding_window_mask(length, state["windowSize"])
    if state["documents"]:
        parts["documents"] = document_mask(torch.tensor(state["documentIds"]))
    return parts


def check_composer(state: dict) -> np.ndarray:
    """The page's draws, masks and weights against Mulberry32 and attention_lab; the weights."""
    from attention_lab.masks import combine_masks

    length = state["length"]
    if state["documents"] and "lengths" in state:  # the typed lengths, read as Python reads them
        assert state["documentIds"] == document_ids(state["lengths"], length)
    rng = Mulberry32(state["seed"])
    drawn = rng.normals(length * HEAD_DIM), rng.normals(length * HEAD_DIM)
    np.testing.assert_allclose(state["query"], drawn[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(state["keys"], drawn[1], rtol=1e-14, atol=1e-15)
    # Each chosen mask is the library's, and the composed one is their combine_masks (AND).
    parts = library_parts(state)
    assert [p["name"] for p in state["parts"]] == list(parts)
    for part in state["parts"]:
        assert part["allowed"] == parts[part["name"]].flatten().int().tolist(), part["name"]
    mask = combine_masks(*parts.values()) if parts else None  # [T, T]
    allowed = torch.ones(length, length, dtype=torch.bool) if mask is None else mask
    assert state["allowed"] == allowed.flatten().int().tolist()
    assert state["allowedCount"] == int(allowed.sum())
    assert state["emptyRows"] == (~allowed.any(dim=-1)).nonzero().flatten().tolist()
    # One head's weights: scaled_dot_product_attention with that mask, in float64 and float32.
    query = torch.tensor(state["query"], dtype=torch.float64).reshape(length, HEAD_DIM)
    keys = torch.tensor(state["keys"], dtype=torch.float64).reshape(length, HEAD_DIM)
    got = np.asarray(state["weights"], dtype=np.float64).reshape(length, length)
    for dtype, u in ((torch.float64, U64), (torch.float32, U32)):
        _, weights = scaled_dot_product_attention(
            query.to(dtype), keys.to(dtype), keys.to(dtype), mask
        )  # [Tq, Tk]
        expected = weights.double().numpy()
        tolerance = weight_bounds(expected, bound(query, keys, 2.0, u), u)
        assert (np.abs(got - expected) <= tolerance).all(), (dtype, got - expected)
    # Blocked weights and rows with no key are exactly 0, as the library makes them.
    assert (got[~allowed.numpy()] == 0).all()
    return got


def test_composer_defaults_match_the_library_and_the_prose(composer_page):
    state = composer_page.state()
    settings = [state[k] for k in SETTINGS]
    assert settings == [0, 9, "causal", 3, False, 2, "right", False, 3, True]
    assert state["lengthsText"] == "3,2,4"
    state["lengths"] = state["lengthsText"]
    check_composer(state)
    # The text description's claims: three causal triangles, 19 of the 81 pairs, no empty row.
    assert state["documentIds"] == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert state["allowedCount"] == 19 and state["emptyRows"] == []
    assert "causal AND documents: 19 of 81" in state["status"]
    assert state["maps"] == 3  # causal, documents, and their AND
    assert state["maskCells"][:3] == ["1", "blocked 0", "blocked 0"]
    weights = np.asarray(state["weights"]).reshape(9, 9)
    assert state["weightCells"] == [
        ("" if a else "blocked ") + f"{w:.2f}"
        for a, w in zip(state["allowed"], weights.flatten(), strict=True)
    ]


def test_composer_compute_over_many_settings(composer_page):
    # compute() itself, on settings the controls may not reach in one step: every order with
    # every extra mask, padding on both sides (left padding with causal empties rows), windows
    # of 1 and of T, documents cut at T or leaving a last one, and several seeds.
    cases = []
    for seed, length in ((0, 9), (7, 5), (123, 12), (4294967295, 2)):
        for order in ("causal", "prefix", "none"):
            for padding, window, documents in (
                (False, False, False),
                (True, False, False),
                (False, True, False),
                (False, False, True),
                (True, True, True),
            ):
                for side in ("left", "right") if padding else ("right",):
                    cases.append(
                        {
                            "seed": seed,
                            "length": length,
                            "order": order,
                            "prefix": min(3, length),
                            "padding": padding,
                            "pads": min(2, length),
                            "side": side,
                            "window": window,
                            "windowSize": 1 if seed == 7 else min(3, length),
                            "documents": documents,
                            "lengths": "4 1" if seed == 7 else "3,2,4",
                        }
                    )
    results = composer_page.page.evaluate(COMPUTE_COMPOSER, cases)
    empty = 0
    for state in results:
        check_composer(state)
        empty += bool(state["emptyRows"])
    assert empty > 0  # some cases have queries with no key, whose rows are 0
    # Typed lengths: cut at T, the rest one more document, mistakes refused.
    parse = "([text, T]) => window.attentionInstruments.mask_composer.parseLengths(text, T)"
    assert composer_page.page.evaluate(parse, ["3,2,4", 6])["lengths"] == [3, 2, 1]
    assert composer_page.page.evaluate(parse, ["2 2", 6])["lengths"] == [2, 2, 2]
    for wrong in ("", "3,x", "0,2", "2.5"):
        assert "error" in composer_page.page.evaluate(parse, [wrong, 6]), wrong


def test_composer_from_the_keyboard_with_other_settings(composer_page):
    tab = composer_page.page
    # Prefix-LM with P = 4 and a window of 2: the window, causal itself, takes the look-ahead back.
    tab.focus(f"{COMPOSER}-order")
    tab.select_option(f"{COMPOSER}-order", "prefix")
    tab.focus(f"{COMPOSER}-prefix")
    tab.keyboard.press("ArrowRight")  # P = 3 -> 4
    tab.focus(f"{COMPOSER}-documents")
    tab.keyboard.press("Space")  # documents off
    tab.focus(f"{COMPOSER}-window")
    tab.keyboard.press("Space")  # window on
    tab.focus(f"{COMPOSER}-window-size")
    tab.keyboard.press("ArrowLeft")  # W = 3 -> 2
    state = composer_page.state()
    assert (state["order"], state["prefix"], state["window"], state["windowSize"]) == (
        "prefix",
        4,
        True,
        2,
    )
    assert not state["documents"]
    weights = check_composer(state)
    assert np.triu(weights, 1).max() == 0  # no query sees a later key
    assert "takes back the prefix's look-ahead: P changes nothing" in state["status"]
    # Without the window the prefix sees itself whole.
    tab.focus(f"{COMPOSER}-window")
    tab.keyboard.press("Space")
    state = composer_page.state()
    allowed = np.asarray(check_composer(state)) > 0
    assert allowed[:4, :4].all() and not allowed[:4, 4:].any()
    # Left padding with causal: the pads see no key; their rows are 0.
    tab.select_option(f"{COMPOSER}-order", "causal")
    tab.focus(f"{COMPOSER}-padding")
    tab.keyboard.press("Space")
    tab.select_option(f"{COMPOSER}-side", "left")
    composer_page.set_range("pads", 3)
    state = composer_page.state()
    assert (state["padding"], state["pads"], state["side"]) == (True, 3, "left")
    weights = check_composer(state)
    assert state["emptyRows"] == [0, 1, 2] and (weights[:3] == 0).all()
    assert "Queries 0, 1, 2 have no key" in state["status"]
    # Documents typed from the keyboard, a longer sequence, another seed.
    tab.focus(f"{COMPOSER}-documents")
    tab.keyboard.press("Space")
    tab.fill(f"{COMPOSER}-lengths", "5, 4")
    composer_page.set_range("length", 12)
    tab.fill(f"{COMPOSER}-seed", "41")
    tab.click(f"{COMPOSER} .instrument-button")  # resample: seed 42
    state = composer_page.state()
    assert (state["seed"], state["length"], state["documentLengths"]) == (42, 12, [5, 4, 3])
    assert "cut at" not in state["status"]
    state["lengths"] = state["lengthsText"]
    check_composer(state)
    # Documents longer than the sequence are cut at T, and the status says so.
    tab.fill(f"{COMPOSER}-lengths", "5, 9")
    state = composer_page.state()
    assert state["documentLengths"] == [5, 7]
    cut = "add up to 14, more than the 12 positions: the documents are cut at 12"
    assert cut in state["status"]
    tab.fill(f"{COMPOSER}-lengths", "5, 4")
    state = composer_page.state()
    assert state["documentLengths"] == [5, 4, 3]
    # A mistake in the lengths is said, and nothing is recomputed until it is mended.
    runs = state["runs"]
    tab.fill(f"{COMPOSER}-lengths", "5,-1")
    state = composer_page.state()
    assert "whole number" in state["status"] and state["runs"] == runs
    assert tab.get_attribute(f"{COMPOSER}-lengths", "aria-invalid") == "true"
    tab.fill(f"{COMPOSER}-lengths", "3,2,4")
    tab.select_option(f"{COMPOSER}-side", "right")
    tab.uncheck(f"{COMPOSER}-padding")
    tab.select_option(f"{COMPOSER}-order", "none")
    state = composer_page.state()
    state["lengths"] = state["lengthsText"]
    check_composer(state)  # documents alone: still causal inside each document
    # Back to the opening settings.
    tab.select_option(f"{COMPOSER}-order", "causal")
    composer_page.set_range("length", 9)
    composer_page.set_range("pads", 2)
    composer_page.set_range("prefix", 3)
    composer_page.set_range("window-size", 3)
    tab.fill(f"{COMPOSER}-seed", "0")
    assert [composer_page.state()[k] for k in SETTINGS] == [
        0,
        9,
        "causal",
        3,
        False,
        2,
        "right",
        False,
        3,
        True,
    ]


# --- chapter 16: the cache of published models ---------------------------------------------------

CACHE_PAGE = "notebooks_src/chapters/16_sharing_keys_and_values.html"
CACHE = "#instrument-cache_memory"
READ_CACHE = """() => {
  const s = window.attentionInstruments.cache_memory;
  const box = document.querySelector('#instrument-cache_memory');
  return {context: s.context, batchSize: s.batchSize, bytesPerNumber: s.bytesPerNumber,
    runs: s.runs, largest: s.largest, smallest: s.smallest,
    rows: s.rows.map((r) => ({name: r.name, kind: r.kind, numbersPerToken: r.numbersPerToken,
      kept: r.kept, bytes: r.bytes, readable: r.readable})),
    config: JSON.parse(box.querySelector('.instrument-body').dataset.config),
    sizes: Array.from(box.querySelectorAll('.instrument-model-size'), (p) => p.textContent),
    names: Array.from(box.querySelectorAll('.instrument-model-name'), (p) => p.textContent),
    bars: Array.from(box.querySelectorAll('.instrument-bar span'),
                     (b) => b.getBoundingClientRect().width),
    status: box.querySelector('.instrument-status').textContent};
}"""


@pytest.fixture(scope="module")
def cache_page(browser, server):
    with Instrument(browser, server, path=CACHE_PAGE, name="cache_memory") as tab:
        yield tab


def check_cache(state: dict) -> None:
    """Every model's numbers against CacheShape.cache_bytes, exactly (whole numbers < 2**53)."""
    from attention_lab.caches import PUBLISHED_CACHE_SHAPES

    assert [r["name"] for r in state["rows"]] == list(PUBLISHED_CACHE_SHAPES)
    for row in state["rows"]:
        shape = PUBLISHED_CACHE_SHAPES[row["name"]]
        expected = shape.cache_bytes(
            state["context"],
            batch_size=state["batchSize"],
            bytes_per_number=state["bytesPerNumber"],
        )
        assert expected < 2**53
        assert row["bytes"] == expected, row
        assert row["numbersPerToken"] == shape.numbers_per_token and row["kind"] == shape.kind
        assert row["kept"] == min(state["context"], shape.window or state["context"])
    largest = max(state["rows"], key=lambda r: r["bytes"])
    assert state["largest"] == largest["name"]
    if "bars" in state:  # the longest bar is the largest cache, the others in proportion
        top = max(state["bars"])
        for row, width in zip(state["rows"], state["bars"], strict=True):
            assert width == pytest.approx(top * row["bytes"] / largest["bytes"], abs=1.0)
        assert state["sizes"] == [f"{r['readable']} ({r['bytes']:,} bytes)" for r in state["rows"]]


def test_cache_shapes_come_from_the_library(cache_page):
    # One source: the page's data-config holds the library's shapes, field for field.
    import dataclasses

    from attention_lab.caches import PUBLISHED_CACHE_SHAPES

    models = cache_page.state()["config"]["models"]
    assert models == [
        {"name": name, "kind": shape.kind, **dataclasses.asdict(shape)}
        for name, shape in PUBLISHED_CACHE_SHAPES.items()
    ]
    assert {m["kind"] for m in models} >= {"multi-head", "multi-query", "grouped-query", "latent"}
    assert any(m["window"] for m in models)
    script = (ROOT / "book" / "_static" / "instruments" / "cache_memory.js").read_text()
    assert not [name for name in PUBLISHED_CACHE_SHAPES if name in script]  # no copy in JS


def test_cache_defaults_match_the_library_and_the_prose(cache_page):
    state = cache_page.state()
    assert (state["context"], state["batchSize"], state["bytesPerNumber"]) == (8192, 1, 2)
    check_cache(state)
    # The text description's claims at these settings.
    shown = dict(zip([r["name"] for r in state["rows"]], state["sizes"], strict=True))
    assert shown["Llama 2 7B"].startswith("4.00 GiB") and shown["Llama 3 8B"].startswith("1.00 GiB")
    assert shown["Mistral 7B v0.1"].startswith("512 MiB")
    assert shown["DeepSeek-V3"].startswith("549 MiB") and shown["Falcon 7B"].startswith("64.0 MiB")
    assert "keeps the last 4,096 of 8,192" in cache_page.page.text_content(CACHE)
    assert "Falcon 7B's, 64.0 MiB, 64 times smaller" in state["status"]


def test_cache_from_the_keyboard_and_over_many_settings(cache_page):
    tab = cache_page.page
    tab.focus(f"{CACHE}-context")
    tab.keyboard.press("End")  # 2**17 positions
    tab.focus(f"{CACHE}-batch")
    for _ in range(3):  # 8 sequences
        tab.keyboard.press("ArrowRight")
    tab.focus(f"{CACHE}-precision")
    tab.select_option(f"{CACHE}-precision", "4")
    state = cache_page.state()
    assert (state["context"], state["batchSize"], state["bytesPerNumber"]) == (131072, 8, 4)
    assert tab.get_attribute(f"{CACHE}-context", "aria-valuetext") == "131,072 positions"
    check_cache(state)
    tab.focus(f"{CACHE}-context")
    tab.keyboard.press("Home")  # 256 positions: shorter than Mistral's window
    tab.select_option(f"{CACHE}-precision", "1")
    state = cache_page.state()
    assert (state["context"], state["bytesPerNumber"]) == (256, 1)
    check_cache(state)
    # compute() itself over the sliders' whole grid.
    models = state["config"]["models"]
    compute = (
        "([settings, models]) => settings.map((s) => "
        "window.attentionInstruments.cache_memory.compute(s, models))"
    )
    grid = [
        {"context": 2**c, "batchSize": 2**b, "bytesPerNumber": n}
        for c in range(8, 18)
        for b in range(9)
        for n in (1, 2, 4)
    ]
    for settings, result in zip(grid, tab.evaluate(compute, [grid, models]), strict=True):
        check_cache({**settings, **result})
    # Readable units: binary, three significant digits.
    readable = "(b) => window.attentionInstruments.cache_memory.readable(b)"
    for number, text in (
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (1024, "1.00 KiB"),
        (1536 * 1024, "1.50 MiB"),
        (575_668_224, "549 MiB"),
        (2**30 * 9 // 8, "1.13 GiB"),
        (2**40 * 3, "3.00 TiB"),
        (2**50, "1024 TiB"),
    ):
        assert tab.evaluate(readable, number) == text, number
    tab.focus(f"{CACHE}-context")
    cache_page.set_range("context", 13)
    cache_page.set_range("batch", 0)
    tab.select_option(f"{CACHE}-precision", "2")


# --- chapter 21: what a hybrid holds, cache and state ---------------------------------------------

HYBRID_PAGE = "notebooks_src/chapters/21_linear_attention_is_an_rnn.html"
HYBRID = "#instrument-hybrid_memory"
READ_HYBRID = """() => {
  const s = window.attentionInstruments.hybrid_memory;
  const box = document.querySelector('#instrument-hybrid_memory');
  return {name: s.name, context: s.context, batchSize: s.batchSize,
    bytesPerNumber: s.bytesPerNumber, runs: s.runs, kind: s.kind, layers: s.layers,
    kept: s.kept, cacheNumbersPerToken: s.cacheNumbersPerToken, stateNumbers: s.stateNumbers,
    cache: s.cache, state: s.state, total: s.total, allAttention: s.allAttention,
    passes: s.passes,
    config: JSON.parse(box.querySelector('.instrument-body').dataset.config),
    parts: Array.from(box.querySelectorAll('.instrument-model'), (li) => li.dataset.part),
    sizes: Array.from(box.querySelectorAll('.instrument-model-size'), (p) => p.textContent),
    bars: Array.from(box.querySelectorAll('.instrument-bar span'),
                     (b) => b.getBoundingClientRect().width),
    readable: Array.from([s.cache, s.state, s.total, s.allAttention],
                         (b) => window.attentionInstruments.core.readable(b)),
    status: box.querySelector('.instrument-status').textContent};
}"""


@pytest.fixture(scope="module")
def hybrid_page(browser, server):
    with Instrument(browser, server, path=HYBRID_PAGE, name="hybrid_memory") as tab:
        yield tab


def check_hybrid(state: dict) -> None:
    """The page's numbers against HybridShape.memory_bytes, exactly (whole numbers < 2**53)."""
    from attention_lab.caches import PUBLISHED_HYBRID_SHAPES

    shape = PUBLISHED_HYBRID_SHAPES[state["name"]]
    memory = shape.memory_bytes(
        state["context"],
        batch_size=state["batchSize"],
        bytes_per_number=state["bytesPerNumber"],
    )
    assert memory.all_attention < 2**53
    shown = (state["cache"], state["state"], state["total"], state["allAttention"])
    assert shown == (memory.cache, memory.state, memory.total, memory.all_attention), state
    assert state["kind"] == shape.attention.kind and state["layers"] == shape.num_layers
    assert state["cacheNumbersPerToken"] == shape.attention.numbers_per_token
    assert state["stateNumbers"] == shape.state_numbers
    # The first context whose cache holds more than the state, from the library.
    one = shape.memory_bytes(state["passes"])
    before = shape.memory_bytes(state["passes"] - 1)
    assert one.cache > one.state and before.cache <= before.state
    if "bars" in state:  # four parts, each bar in proportion to the largest
        assert state["parts"] == ["cache", "state", "total", "all"]
        sizes = [memory.cache, memory.state, memory.total, memory.all_attention]
        top, largest = max(state["bars"]), max(sizes)
        for size, width in zip(sizes, state["bars"], strict=True):
            assert width == pytest.approx(top * size / largest, abs=1.0)
        assert state["sizes"] == [
            f"{text} ({size:,} bytes)" for text, size in zip(state["readable"], sizes, strict=True)
        ]


def test_hybrid_shapes_come_from_the_library(hybrid_page):
    # One source: the page's data-config holds the library's shapes, field for field.
    import dataclasses

    from attention_lab.caches import PUBLISHED_HYBRID_SHAPES

    models = hybrid_page.state()["config"]["models"]
    assert models == [
        {
            "name": name,
            **dataclasses.asdict(shape),
            "attention": {"kind": shape.attention.kind, **dataclasses.asdict(shape.attention)},
        }
        for name, shape in PUBLISHED_HYBRID_SHAPES.items()
    ]
    assert {m["attention"]["kind"] for m in models} == {"grouped-query", "latent"}
    script = (ROOT / "book" / "_static" / "instruments" / "hybrid_memory.js").read_text()
    assert not [name for name in PUBLISHED_HYBRID_SHAPES if name in script]  # no copy in JS


def test_hybrid_defaults_match_the_library_and_the_prose(hybrid_page):
    state = hybrid_page.state()
    assert (state["name"], state["context"], state["batchSize"], state["bytesPerNumber"]) == (
        "Qwen3-Next-80B-A3B",
        32768,
        1,
        2,
    )
    check_hybrid(state)
    # The text description's claims at these settings.
    assert [size.split(" (")[0] for size in state["sizes"]] == [
        "768 MiB",
        "37.7 MiB",
        "806 MiB",
        "3.00 GiB",
    ]
    assert state["passes"] == 1609
    assert "3.8 times as much" in state["status"] and "at 1,609 positions" in state["status"]
    description = EXPLORER_TEXTS["instrument-hybrid_memory"]["shows"]
    for claim in ("768 MiB", "37.7 MiB", "806 MiB", "3.00 GiB", "3.8 times", "1,609"):
        assert claim in description, claim


def test_hybrid_from_the_keyboard_and_over_many_settings(hybrid_page):
    tab = hybrid_page.page
    tab.focus(f"{HYBRID}-context")
    tab.keyboard.press("End")  # 2**20 positions
    tab.focus(f"{HYBRID}-batch")
    for _ in range(3):  # 8 sequences
        tab.keyboard.press("ArrowRight")
    tab.focus(f"{HYBRID}-precision")
    tab.select_option(f"{HYBRID}-precision", "4")
    state = hybrid_page.state()
    assert (state["context"], state["batchSize"], state["bytesPerNumber"]) == (2**20, 8, 4)
    assert tab.get_attribute(f"{HYBRID}-context", "aria-valuetext") == "1,048,576 positions"
    check_hybrid(state)
    tab.focus(f"{HYBRID}-model")
    tab.select_option(f"{HYBRID}-model", "Kimi-Linear-48B-A3B")
    tab.focus(f"{HYBRID}-context")
    tab.keyboard.press("Home")  # 256 positions: the state is larger than the cache
    state = hybrid_page.state()
    assert (state["name"], state["context"], state["kind"]) == (
        "Kimi-Linear-48B-A3B",
        256,
        "latent",
    )
    assert state["cache"] < state["state"]
    check_hybrid(state)
    # compute() itself over the controls' whole grid, for every model.
    compute = (
        "([settings, models]) => settings.map((s) => window.attentionInstruments.hybrid_memory"
        ".compute(s, models.filter((m) => m.name === s.model)[0]))"
    )
    models = state["config"]["models"]
    grid = [
        {"model": m["name"], "context": 2**c, "batchSize": 2**b, "bytesPerNumber": n}
        for m in models
        for c in range(8, 21)
        for b in range(9)
        for n in (1, 2, 4)
    ]
    for settings, result in zip(grid, tab.evaluate(compute, [grid, models]), strict=True):
        assert result["name"] == settings["model"]
        check_hybrid({**settings, **result})
    tab.select_option(f"{HYBRID}-model", "Qwen3-Next-80B-A3B")
    hybrid_page.set_range("context", 15)
    hybrid_page.set_range("batch", 0)
    tab.select_option(f"{HYBRID}-precision", "2")
    assert not hybrid_page.errors, hybrid_page.errors


# --- chapter 18: positions past the training length -------------------------------------------

EXTRAPOLATION_PAGE = "notebooks_src/chapters/18_positions_past_training_length.html"
# The instrument's caption and text description, whose claims the tests check in the page.
EXPLORER_TEXTS = yaml.safe_load((ROOT / "book" / "explorers.yml").read_text(encoding="utf-8"))
EXTRAPOLATION = "#instrument-extrapolation"
READ_EXTRAPOLATION = """() => {
  const s = window.attentionInstruments.extrapolation;
  const list = (a) => (a === undefined ? null : Array.from(a));
  return {encoding: s.encoding, scaling: s.scaling, factor: s.factor, headDim: s.headDim,
    base: s.base, trained: s.trained, at: s.at, heads: s.heads, span: s.span, runs: s.runs,
    scores: list(s.scores), invFreq: list(s.invFreq), attentionFactor: s.attentionFactor,
    angle: list(s.angle), seen: list(s.seen), outside: list(s.outside), dots: list(s.dots),
    slopes: list(s.slopes), bias: s.bias ? s.bias.map((r) => Array.from(r)) : null,
    atBias: list(s.atBias), trainedBias: list(s.trainedBias),
    status: document.querySelector('#instrument-extrapolation .instrument-status').textContent};
}"""


@pytest.fixture(scope="module")
def extrapolation_page(browser, server):
    with Instrument(browser, server, path=EXTRAPOLATION_PAGE, name="extrapolation") as tab:
        yield tab


def library_scaling(state: dict) -> dict | None:
    """The page's RoPE scaling as rope_frequencies' dictionary (YaRN with its defaults)."""
    kind, factor, length = state["scaling"], state["factor"], state["trained"]
    if kind == "none":
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    return {"rope_type": kind, "factor": factor, "original_max_position_embeddings": length}


def check_pairs(state: dict, inv: np.ndarray, unscaled: np.ndarray, tolerance: np.ndarray) -> None:
    """Each pair's angle at the chosen distance (mod 2 pi) and the range training showed it; the
    pairs outside it, as the library's frequencies place them, but for an angle within
    ``tolerance`` of its range's end (where the two computations may round either way)."""
    at, length = state["at"], state["trained"]
    angle = np.fmod(at * inv, 2 * math.pi)  # [pairs]
    reach = (length - 1) * unscaled  # [pairs]
    seen = np.minimum(2 * math.pi, reach)
    assert np.abs(np.asarray(state["angle"]) - angle).max() <= tolerance.max() + 8 * U64
    assert np.abs(np.asarray(state["seen"]) - seen).max() <= length * unscaled.max() * 16 * U64
    outside = set(np.flatnonzero((reach < 2 * math.pi) & (angle > reach)).tolist())
    unsure = set(np.flatnonzero(np.abs(angle - reach) <= tolerance + length * unscaled * 16 * U64))
    assert set(state["outside"]) ^ outside <= unsure, (state["outside"], sorted(outside))


def check_extrapolation(state: dict) -> dict:
    """The page's rows against attention_lab.positional; the largest differences.

    Both sides compute base ** (-2i / Dh) with the same rounded exponent, and dynamic NTK's
    rescaled base with the same +, -, * and / (each rounded alike) and one pow: a pow within an
    ulp on either side, the page's frequencies are within 16 u of the library's (relative). An
    angle Delta * inv then differs by Delta * inv * 17 u, its cosine (within an ulp either side)
    by that plus 2 u; the sum of Dh / 2 terms of size 2 a^2 adds gamma(Dh / 2) of its magnitude.
    """
    from attention_lab.positional import (
        alibi_bias,
        alibi_slopes,
        rope_frequencies,
        rotary_embedding,
        sinusoidal_encoding,
    )

    n, at, length = state["span"] + 1, state["at"], state["trained"]
    assert state["span"] == 8 * length and 0 <= at <= state["span"]
    errors = {}
    if state["encoding"] == "alibi":
        slopes = alibi_slopes(state["heads"]).numpy()
        got = np.asarray(state["slopes"])
        assert np.abs(got - slopes).max() <= 2 * U64 * slopes.max()
        # alibi_bias's last query row, read from the last key back: -slope * Delta.
        library = alibi_bias(state["heads"], 1, n)[:, 0].flip(-1).numpy()  # [H, 8L + 1]
        bias = np.asarray(state["bias"])
        # Slopes an ulp apart (2 ** x by pow on one side, exp2 on the other) move the bias by
        # Delta times that; each product is rounded once on either side.
        allowed = np.abs(got - slopes)[:, None] * np.arange(n) + 2 * U64 * np.abs(library)
        assert (np.abs(bias - library) <= allowed).all()
        assert np.array_equal(state["atBias"], bias[:, at])
        assert np.array_equal(state["trainedBias"], bias[:, length - 1])
        errors["alibi"] = float(np.abs(bias - library).max())
        return errors
    d, base = state["headDim"], state["base"]
    unscaled = rope_frequencies(d, base=base)[0].numpy()  # [Dh / 2]
    if state["encoding"] == "sinusoidal":
        encoding = sinusoidal_encoding(n, d, base).double().numpy()  # [8L + 1, D], float32 values
        expected = encoding @ encoding[at]  # [8L + 1]
        # As check_encoding: entries within e = 2**-25 of the exact ones (the library's float32),
        # a dot product of d terms within d * (2 e + e**2). The page sums cos((q - p) w_i) in
        # float64: each angle (at most 8L, w_i <= 1) within 4 u of 8L, each cosine 2 u more.
        e = 2.0**-25
        difference = np.abs(np.asarray(state["dots"]) - expected)
        assert (
            difference.max() <= d * (2 * e + e * e) + d / 2 * (4 * n + 2) * U64 + gamma(d, U64) * d
        )
        errors["sinusoidal"] = float(difference.max())
        check_pairs(state, unscaled, unscaled, at * unscaled * 17 * U64 + 2 * U64)
        return errors
    scaling = library_scaling(state)
    inv, factor = rope_frequencies(d, base=base, scaling=scaling, seq_len=at + 1)
    inv = inv.numpy()
    got = np.asarray(state["invFreq"])
    assert (np.abs(got - inv) <= 16 * U64 * inv).all(), np.abs(got / inv - 1).max()
    assert abs(state["attentionFactor"] - factor) <= 4 * U64 * factor
    distances = np.arange(n, dtype=np.float64)  # [8L + 1]
    if state["scaling"] == "dynamic":  # the frequencies of a sequence of Delta + 1 positions
        table = np.stack(
            [
                rope_frequencies(d, base=base, scaling=scaling, seq_len=t + 1)[0].numpy()
                for t in range(n)
            ]
        )  # [8L + 1, Dh / 2]
        library = factor * factor * 2 * np.cos(distances[:, None] * table).sum(axis=1)
    else:  # rotary_embedding itself: every position of (1, ..., 1), each scored with position 0
        ones = torch.ones(n, d, dtype=torch.float64)
        rotated = rotary_embedding(ones, base=base, scaling=scaling, seq_len=n)  # [8L + 1, Dh]
        library = (rotated @ rotated[0]).numpy()  # [8L + 1]
        table = np.broadcast_to(inv, (n, d // 2))
    a2 = factor * factor
    terms = 2 * a2 * (distances[:, None] * table * 17 * U64 + 2 * U64)  # [8L + 1, Dh / 2]
    allowed = terms.sum(axis=1) + 2 * gamma(d // 2 + 1, U64) * a2 * d  # [8L + 1]
    difference = np.abs(np.asarray(state["scores"]) - library)
    assert (difference <= allowed).all(), (difference.max(), allowed.min())
    assert state["scores"][0] == pytest.approx(a2 * d, rel=d * U64)
    errors[f"rope/{state['scaling']}"] = float(difference.max())
    check_pairs(state, inv, unscaled, at * inv * 17 * U64 + 2 * U64)
    return errors


def largest(errors: dict, new: dict) -> None:
    for key, value in new.items():
        errors[key] = max(value, errors.get(key, 0.0))


def test_extrapolation_defaults_match_the_library_and_the_caption(extrapolation_page):
    state = extrapolation_page.state()
    settings = [state[k] for k in ("encoding", "scaling", "headDim", "base", "trained", "at")]
    assert settings == ["rope", "none", 64, 1e4, 256, 512]
    print(check_extrapolation(state))
    # The text description's claims (book/explorers.yml) at the opening settings.
    shows = " ".join(EXPLORER_TEXTS["instrument-extrapolation"]["shows"].split())
    assert "16 of the 32 pairs are outside" in shows and "the score is 11.864, against 64" in shows
    assert len(state["outside"]) == 16 and len(state["angle"]) == 32
    assert "16 of 32 pairs have turned further" in state["status"]
    assert f"{state['scores'][512]:.3f}" == "11.864" and "11.864, against 64.000" in state["status"]


def test_extrapolation_the_caption_claims_from_the_keyboard(extrapolation_page):
    tab, page = extrapolation_page.page, extrapolation_page
    shows = " ".join(EXPLORER_TEXTS["instrument-extrapolation"]["shows"].split())
    assert "at Δ = 255 no pair is outside, and at Δ = 256, one past training, 19 are" in shows
    assert "with linear scaling by s = 4 none is outside at Δ = 512" in shows
    tab.focus(f"{EXTRAPOLATION}-scaling")
    tab.select_option(f"{EXTRAPOLATION}-scaling", "linear")
    state = page.state()
    assert (state["scaling"], state["factor"]) == ("linear", 4)
    print(check_extrapolation(state))
    assert state["outside"] == []  # linear by 4: every angle at 512 was seen by 128
    tab.select_option(f"{EXTRAPOLATION}-scaling", "none")
    tab.focus(f"{EXTRAPOLATION}-at")
    for _ in range(256):  # 512 -> 256, one position a key press
        tab.keyboard.press("ArrowLeft")
    state = page.state()
    assert state["at"] == 256
    print(check_extrapolation(state))
    assert len(state["outside"]) == 19  # just past training: every pair short of a full turn
    tab.keyboard.press("ArrowLeft")  # 255, the farthest trained distance: none
    state = page.state()
    assert state["at"] == 255 and state["outside"] == []
    page.set_range("at", 512)


def test_extrapolation_scalings_and_encodings_from_the_keyboard(extrapolation_page):
    tab, page = extrapolation_page.page, extrapolation_page
    errors = {}
    for kind in ("yarn", "dynamic", "linear"):
        tab.focus(f"{EXTRAPOLATION}-scaling")
        tab.select_option(f"{EXTRAPOLATION}-scaling", kind)
        tab.focus(f"{EXTRAPOLATION}-factor")
        tab.keyboard.press("End")  # s = 16
        tab.focus(f"{EXTRAPOLATION}-width")
        tab.keyboard.press("End")  # Dh = 128
        state = page.state()
        assert (state["scaling"], state["factor"], state["headDim"]) == (kind, 16, 128)
        assert tab.get_attribute(f"{EXTRAPOLATION}-factor", "aria-valuetext") == "factor 16"
        largest(errors, check_extrapolation(state))
        if kind == "yarn":
            assert state["attentionFactor"] == pytest.approx(0.1 * math.log(16) + 1)
            assert "attention factor 0.1 ln s + 1 = 1.277" in state["status"]
        tab.focus(f"{EXTRAPOLATION}-trained")
        tab.keyboard.press("Home")  # L = 16, the chapter's: the row ends at 128
        tab.focus(f"{EXTRAPOLATION}-base")
        tab.keyboard.press("End")  # base 10**6
        state = page.state()
        assert (state["trained"], state["at"], state["base"]) == (16, 128, 1e6)
        largest(errors, check_extrapolation(state))
        page.set_range("trained", 8)
        page.set_range("base", 4)
        page.set_range("width", 6)
        page.set_range("factor", 2)
        page.set_range("at", 512)
    # The longest row the sliders allow, dynamic NTK: 8 * 4096 distances.
    tab.select_option(f"{EXTRAPOLATION}-scaling", "dynamic")
    caption = tab.text_content(f"{EXTRAPOLATION} .instrument-caption")
    assert "each with the frequencies of a sequence Δ + 1 long" in caption, caption
    page.set_range("width", 4)
    page.set_range("trained", 12)
    page.set_range("at", 20000)
    largest(errors, check_extrapolation(page.state()))
    page.set_range("trained", 8)
    page.set_range("width", 6)
    page.set_range("at", 512)
    tab.select_option(f"{EXTRAPOLATION}-scaling", "none")
    # ALiBi, with a head count that is not a power of two (BLOOM's slopes).
    tab.focus(f"{EXTRAPOLATION}-encoding")
    tab.select_option(f"{EXTRAPOLATION}-encoding", "alibi")
    tab.focus(f"{EXTRAPOLATION}-heads")
    for _ in range(4):
        tab.keyboard.press("ArrowRight")  # 12 heads
    state = page.state()
    assert (state["encoding"], state["heads"]) == ("alibi", 12)
    largest(errors, check_extrapolation(state))
    assert state["slopes"][8] == pytest.approx(2**-0.5)
    assert tab.locator(f"{EXTRAPOLATION} tbody tr").count() == 12
    page.set_range("heads", 8)
    # The sinusoidal encoding at the last position, 8 L.
    tab.select_option(f"{EXTRAPOLATION}-encoding", "sinusoidal")
    tab.focus(f"{EXTRAPOLATION}-at")
    tab.keyboard.press("End")
    state = page.state()
    assert (state["encoding"], state["at"]) == ("sinusoidal", 2048)
    width_label = tab.text_content(f"label[for='{EXTRAPOLATION[1:]}-width']")
    assert width_label.startswith("Model width d_model = 64"), width_label  # not a head's width
    largest(errors, check_extrapolation(state))
    assert int(np.argmax(state["dots"])) == 2048
    tab.select_option(f"{EXTRAPOLATION}-encoding", "rope")
    page.set_range("at", 512)
    print(errors)


def test_extrapolation_compute_over_many_settings(extrapolation_page):
    compute = (
        "(grid) => grid.map((s) => { const r = window.attentionInstruments.extrapolation"
        ".compute(s); const list = (a) => (a === undefined ? null : Array.from(a));"
        " return {...s, span: r.span, scores: list(r.scores), invFreq: list(r.invFreq),"
        " attentionFactor: r.attentionFactor, angle: list(r.angle), seen: list(r.seen),"
        " outside: list(r.outside), dots: list(r.dots), slopes: list(r.slopes),"
        " bias: r.bias ? r.bias.map((b) => Array.from(b)) : null, atBias: list(r.atBias),"
        " trainedBias: list(r.trainedBias)}; })"
    )
    grid = [
        {
            "encoding": "rope",
            "scaling": kind,
            "factor": s,
            "headDim": d,
            "base": 10.0**b,
            "trained": 32,
            "at": at,
            "heads": 1,
        }
        for kind in ("none", "linear", "dynamic", "yarn")
        for s in (1, 2, 8)
        for d in (8, 64)
        for b in (3, 4, 6)
        for at in (0, 31, 32, 100, 256)
    ]
    grid += [
        {
            "encoding": "alibi",
            "scaling": "none",
            "factor": 1,
            "headDim": 8,
            "base": 1e4,
            "trained": 32,
            "at": 100,
            "heads": h,
        }
        for h in range(1, 17)
    ]
    grid += [
        {
            "encoding": "sinusoidal",
            "scaling": "none",
            "factor": 1,
            "headDim": d,
            "base": 1e4,
            "trained": 64,
            "at": at,
            "heads": 1,
        }
        for d in (8, 128)
        for at in (0, 63, 64, 300)
    ]
    errors = {}
    for state in extrapolation_page.page.evaluate(compute, grid):
        largest(errors, check_extrapolation(state))
    print(errors)


# --- the Part VI and VII instruments: accessible in both themes, readable on a phone, screenshots


THEME_SHOWN = "() => document.documentElement.dataset.theme"
UNLABELLED = """(name) => Array.from(document.querySelectorAll(
  `#instrument-${name} input, #instrument-${name} select`))
  .filter((i) => !i.labels || !i.labels.length).map((i) => i.id)"""


@pytest.mark.parametrize(
    "name", ["mask_composer", "cache_memory", "extrapolation", "hybrid_memory"]
)
@pytest.mark.parametrize("theme", THEMES)
def test_part_six_and_seven_instruments_accessible_and_readable(browser, server, axe, name, theme):
    def prepare(phone: Instrument) -> None:
        assert phone.page.evaluate(THEME_SHOWN) == theme
        if name == "mask_composer":  # the widest table the sliders allow
            phone.set_range("length", 12)

    path = INSTRUMENT_PAGES[name]
    with Instrument(browser, server, path=path, name=name, theme=theme) as instrument:
        assert instrument.page.evaluate(THEME_SHOWN) == theme
        unnamed = instrument.page.evaluate(UNLABELLED, name)  # every control has a label
        assert not unnamed, unnamed
        accessible_on_a_phone_and_light(instrument, browser, server, axe, prepare=prepare)


# --- both themes ---------------------------------------------------------------------------------

# The WCAG 2 contrast of every piece of text the instruments draw against what is behind it: a
# table cell's own colour, or the page's. SVG text (the charts' ticks and labels) is measured by
# its fill, which axe-core does not check.
CONTRASTS = """(selector) => {
  const parse = (c) => {
    const v = c.match(/[\\d.]+/g).map(Number);
    return {rgb: v.slice(0, 3), alpha: v.length > 3 ? v[3] : 1};
  };
  const lum = (rgb) => {
    const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const behind = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c.alpha > 0.5) return c.rgb;
    }
    return parse(getComputedStyle(document.body).backgroundColor).rgb;
  };
  return Array.from(document.querySelectorAll(selector), (el) => {
    const style = getComputedStyle(el);
    const ink = parse(el instanceof SVGElement ? style.fill : style.color).rgb;
    const [a, b] = [lum(ink), lum(behind(el.closest('svg') || el))].sort((x, y) => y - x);
    return {text: el.textContent.trim(), ratio: (a + 0.05) / (b + 0.05)};
  }).filter((r) => r.text);
}"""
TEXT = ".instrument-body td, .instrument-body th, .instrument-plot text, .instrument-body p"

INSTRUMENT_PAGES = {
    "scaling": PAGE,
    "heads": HEADS_PAGE,
    "positional": PE_PAGE,
    "masks": MASKS_PAGE,
    "mask_composer": COMPOSER_PAGE,
    "cache_memory": CACHE_PAGE,
    "extrapolation": EXTRAPOLATION_PAGE,
    "hybrid_memory": HYBRID_PAGE,
}


@pytest.mark.parametrize("name", INSTRUMENT_PAGES)
def test_readable_in_both_themes_and_restyled_by_the_switch(browser, server, name):
    # The theme's switch sets data-theme on <html> while the page is open: the instruments'
    # text must follow at once, each weight cell keeping an ink of at least 4.5:1 on its colour.
    tab = Instrument(browser, server, path=INSTRUMENT_PAGES[name], name=name)
    try:
        if name == "masks":  # empty rows of NaN, blocked cells and large weights, all at once
            tab.page.select_option("#instrument-masks-fill", "-inf")
        if name == "heads":  # two tokens: weights near 0 and 1, dark and light cells
            tab.set_range("t", 2)
            for seed in range(20):
                tab.page.fill("#instrument-heads-seed", str(seed))
                top = "() => Math.max(...window.attentionInstruments.heads.weights)"
                if tab.page.evaluate(top) > 0.9:
                    break
        fills = {}
        for theme in ("dark", "light", "dark"):
            tab.page.evaluate(f"() => {{ document.documentElement.dataset.theme = '{theme}'; }}")
            rows = tab.page.evaluate(CONTRASTS, TEXT)
            assert len(rows) >= 10, rows
            worst = min(rows, key=lambda r: r["ratio"])
            assert worst["ratio"] >= 4.5, (theme, worst)
            fills[theme] = tab.page.evaluate(
                "() => Array.from(document.querySelectorAll('.instrument-plot text'),"
                " (t) => getComputedStyle(t).fill).join()"
            )
            if name == "heads":  # dark cells get white ink, light ones black
                inks = tab.page.evaluate(
                    "() => new Set(Array.from(document.querySelectorAll('.instrument-grid td'),"
                    " (c) => getComputedStyle(c).color)).size"
                )
                assert inks == 2, inks
            if name == "masks":
                assert tab.page.locator("td.instrument-nan").count() > 0
        if name in ("scaling", "positional", "extrapolation"):
            assert fills["dark"] != fills["light"], fills
        element_screenshot(tab.page.locator(f"#instrument-{name}"), f"instrument_{name}_dark")
        assert not tab.errors, tab.errors
    finally:
        tab.close()
