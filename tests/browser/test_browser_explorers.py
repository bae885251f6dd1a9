"""The interactive explorers in the built book, operated in headless Chromium like a reader would.

Every plotly figure on every page must render (that plotly.js is loaded exactly by the pages
that have one is test_book.py's). For each explorer the tests click its real controls (buttons,
dropdown entries, slider steps, with the mouse) and read the figure's data back from the page
(``document.getElementById(id).data``) to check that it changed to the state the control
stands for. Screenshots of each explorer at desktop (1280 px) and phone (375 px) widths go to
tests/screenshots/ (ignored by git).

Explorer 1 lives in chapter 09; without that page built the test skips (fails with CI=true).
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from attention_lab import interactive
from attention_lab.book import explorers
from support import page_weights
from support.browser import DESKTOP, SCREENSHOTS, Tab
from support.prerequisites import missing

CHAPTERS = "notebooks_src/chapters"
PLOTLY_JS = "_static/vendor/plotly/plotly-cartesian.min.js"
MARKUP = "<img src=x onerror=alert(1)>"

# Where a control is, in viewport coordinates, after scrolling it into view. Controls are
# found through the data plotly.js binds to its SVG groups (``__data__``): menu ``_index`` and
# button/step ``label``.
_MENU_BUTTON = """([id, menu, label]) => {
  const gd = document.getElementById(id);
  const centre = (el) => {
    el.scrollIntoView({block: 'center'});
    const r = el.getBoundingClientRect();
    return {x: r.x + r.width / 2, y: r.y + r.height / 2};
  };
  for (const group of gd.querySelectorAll('.updatemenu-header-group')) {
    const options = group.__data__;
    if (!options || options._index !== menu) continue;
    if (options.type === 'dropdown') return {dropdown: true, ...centre(group)};
    for (const b of group.querySelectorAll('.updatemenu-button')) {
      if (b.__data__.label === label) return centre(b);
    }
  }
  return null;
}"""
_DROPDOWN_ENTRY = """([id, label]) => {
  const gd = document.getElementById(id);
  for (const b of gd.querySelectorAll('.updatemenu-dropdown-button')) {
    if (b.__data__.label === label) {
      const r = b.getBoundingClientRect();
      return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }
  }
  return null;
}"""
_SLIDER_STEP = """([id, label]) => {
  const gd = document.getElementById(id);
  const group = gd.querySelector('.slider-group');
  group.scrollIntoView({block: 'center'});
  const rail = group.querySelector('.slider-rail-touch-rect').getBoundingClientRect();
  for (const l of group.querySelectorAll('.slider-label-group')) {
    if (l.__data__.step.label === label) {
      const r = l.getBoundingClientRect();
      return {x: r.x + r.width / 2, y: rail.y + rail.height / 2};
    }
  }
  return null;
}"""
_ACTIVE_LABEL = """([id, menu, label]) => {
  const m = document.getElementById(id).layout.updatemenus[menu];
  return m.buttons[m.active ?? 0].label === label;
}"""
_RENDERED = """(id) => {
  const gd = document.getElementById(id);
  return !!(gd && gd._fullLayout && gd.querySelector('.main-svg')
            && gd.querySelectorAll('.heatmaplayer image, .trace').length > 0);
}"""


class Reader(Tab):
    """One page in Chromium; records console errors, dialogs and requests leaving the machine."""

    def __init__(self, browser, server: str, path: str):
        # plotly.js is 4.6 MB of JavaScript to parse: generous limits for a busy machine.
        super().__init__(browser, server, timeout=120_000, viewport=DESKTOP)
        if path:
            self.goto(path)

    def wait_rendered(self, div_id: str) -> None:
        self.page.wait_for_function(_RENDERED, arg=div_id)

    def data(self, div_id: str, expression: str):
        """Evaluate ``expression`` with ``gd`` bound to the figure's div."""
        return self.page.evaluate(
            f"(id) => {{ const gd = document.getElementById(id); return {expression}; }}", div_id
        )

    def click_button(self, div_id: str, menu: int, label: str) -> None:
        # plotly.js animates a dropdown opening and closing; on a busy machine a click that
        # lands mid-animation is dropped. So a click counts once the menu shows the button as
        # active, and is repeated (at most three times) if it does not.
        for _ in range(3):
            where = self.page.evaluate(_MENU_BUTTON, [div_id, menu, label])
            assert where, f"{div_id}: no button {label!r} in menu {menu}"
            if where.get("dropdown"):
                self.page.mouse.click(where["x"], where["y"])
                self.page.wait_for_timeout(300)
                where = self.page.evaluate(_DROPDOWN_ENTRY, [div_id, label])
                assert where, f"{div_id}: no dropdown entry {label!r}"
            self.page.mouse.click(where["x"], where["y"])
            try:
                self.page.wait_for_function(_ACTIVE_LABEL, arg=[div_id, menu, label], timeout=3_000)
            except PlaywrightTimeout:
                continue
            self.page.wait_for_timeout(300)  # let the closing dropdown finish
            return
        raise AssertionError(f"{div_id}: clicking {label!r} in menu {menu} did not select it")

    def click_step(self, div_id: str, label: str) -> None:
        where = self.page.evaluate(_SLIDER_STEP, [div_id, label])
        assert where, f"{div_id}: no slider step {label!r}"
        self.page.mouse.click(where["x"], where["y"])
        self.page.wait_for_timeout(200)

    def screenshots(self, div_id: str) -> None:
        """The figure at desktop and phone widths; the page must not scroll sideways."""
        SCREENSHOTS.mkdir(exist_ok=True)
        for width in (1280, 375):
            self.page.set_viewport_size({"width": width, "height": 900})
            self.page.wait_for_function(
                "([id, w]) => document.getElementById(id)._fullLayout.width <= w",
                arg=[div_id, width],
            )
            self.page.wait_for_timeout(300)
            figure = self.page.locator(f"#{div_id}")
            figure.scroll_into_view_if_needed()
            figure.screenshot(path=str(SCREENSHOTS / f"{div_id}_{width}.png"))
            overflow = self.page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, f"{div_id}: the page overflows {width} px by {overflow} px"
        self.page.set_viewport_size(DESKTOP)

    def close(self) -> None:
        assert not self.errors, self.errors
        assert not self.dialogs, f"a dialog fired: {self.dialogs}"
        assert not self.outside, f"requests left the machine: {self.outside}"
        super().close()


def chapter(html_dir: Path, prefix: str) -> str:
    found = sorted(html_dir.glob(f"{CHAPTERS}/{prefix}_*.html"))
    if not found:
        missing(f"chapter {prefix} is not in the built book")
    return str(found[0].relative_to(html_dir))


def built_pages(html_dir: Path) -> list[Path]:
    return [html_dir / page for page in page_weights.built_pages(html_dir)]


# --- every page ----------------------------------------------------------------------------


def test_every_plotly_figure_renders(browser, server, html_dir):
    problems = []
    for page in built_pages(html_dir):
        text = page.read_text()
        if 'class="plotly-graph-div"' not in text:
            continue
        reader = Reader(browser, server, str(page.relative_to(html_dir)))
        ids = reader.page.evaluate(
            "() => [...document.querySelectorAll('.plotly-graph-div')].map(d => d.id)"
        )
        assert ids, page
        for div_id in ids:
            try:
                reader.wait_rendered(div_id)
            except Exception as error:  # noqa: BLE001 - reported with the page's name below
                problems.append(f"{page.name}#{div_id}: not rendered ({error})")
        reader.close()
    assert not problems, "\n".join(problems)


def test_markup_in_a_token_is_shown_as_text_and_runs_nothing(browser, server):
    tokens = ["[CLS]", MARKUP, "[SEP]"]
    weights = [[[[1 / 3] * 3] * 3]]  # [L, H, T, T] = [1, 1, 3, 3]
    import torch

    fig = interactive.attention_explorer({MARKUP: (tokens, torch.tensor(weights))})
    fragment = explorers.to_html(fig, div_id="markup")
    reader = Reader(browser, server, "")
    reader.page.set_content(
        f'<!doctype html><html><head><script src="{server}/{PLOTLY_JS}"></script></head>'
        f"<body>{fragment}</body></html>"
    )
    reader.wait_rendered("markup")
    assert reader.page.evaluate("() => document.querySelectorAll('img').length") == 0
    labels = reader.data(
        "markup", "[...gd.querySelectorAll('.ytick text')].map(t => t.textContent)"
    )
    assert labels == tokens  # the markup is visible, character for character
    header = reader.data("markup", "gd.querySelector('.updatemenu-header text').textContent")
    assert header == MARKUP  # the dropdown's label too
    reader.close()


# --- the explorers ----------------------------------------------------------------------------


def visible(reader: Reader, div_id: str) -> list[int]:
    return reader.data(
        div_id, "gd.data.map((t, i) => [t.visible, i]).filter(v => v[0] !== false).map(v => v[1])"
    )


def keyboard_choice(reader: Reader, select_id: str) -> str:
    """The option the keyboard's <select> under an explorer shows, once it has caught up."""
    select = reader.page.locator(f"#{select_id}")
    select.wait_for(state="attached")
    return select.evaluate("s => s.options[s.selectedIndex].text")


def test_heads_explorer(browser, server, html_dir):
    div = "explorer-heads"
    reader = Reader(browser, server, chapter(html_dir, "03"))
    reader.wait_rendered(div)
    assert reader.data(div, "gd.data.length") == 12
    seen = []
    for layer in ("3", "0", "5"):
        reader.click_button(div, 0, layer)
        state = reader.data(
            div,
            "({active: gd.layout.updatemenus[0].active, z: gd.data.map(t => t.z),"
            f" stored: gd.layout.updatemenus[0].buttons[{layer}].args[0].z}})",
        )
        assert state["active"] == int(layer)
        assert state["z"] == state["stored"]  # all 12 heads show the chosen layer
        # The keyboard's menu under the explorer follows a click on plotly's own button
        # (a "restyle" button, which fires no relayout event).
        assert keyboard_choice(reader, f"{div}-menu-0") == layer
        seen.append(state["z"])
    assert len({repr(z) for z in seen}) == 3  # three layers, three different sets of maps
    reader.screenshots(div)
    reader.close()


def test_attention_explorer(browser, server, html_dir):
    div = "explorer-attention"
    reader = Reader(browser, server, chapter(html_dir, "09"))
    reader.wait_rendered(div)
    sentences = reader.data(div, "gd.layout.updatemenus[0].buttons.map(b => b.label)")
    assert len(sentences) >= 6
    # The gallery holds the "it" sentence, both word orders and a long-range agreement.
    texts = reader.data(
        div,
        "gd.layout.updatemenus[0].buttons.map(b => b.args[1]['yaxis.ticktext'].join(' '))",
    )
    for wanted in (
        "[CLS] the cat sat on the mat because it was tired . [SEP]",
        "[CLS] dog bites man . [SEP]",
        "[CLS] man bites dog . [SEP]",
    ):
        assert wanted in texts, (wanted, texts)
    assert any(label.startswith("long range") for label in sentences), sentences
    heads = reader.data(div, "gd.layout.sliders[0].steps.length")
    layers = reader.data(div, "gd.layout.updatemenus[1].buttons.length")
    shown = (
        "(() => { const i = gd.data.findIndex(t => t.visible !== false);"
        " return {i, z: gd.data[i].z}; })()"
    )
    reader.click_button(div, 0, sentences[1])
    assert visible(reader, div) == [1]
    ticks = reader.data(div, "gd.layout.yaxis.ticktext")
    assert ticks == reader.data(
        div, "gd.layout.updatemenus[0].buttons[1].args[1]['yaxis.ticktext']"
    )
    layer = str(layers - 1)
    reader.click_button(div, 1, layer)
    assert reader.data(div, "gd.layout.sliders[0].active") == 0
    assert keyboard_choice(reader, f"{div}-menu-0") == sentences[1]
    assert keyboard_choice(reader, f"{div}-menu-1") == layer
    assert keyboard_choice(reader, f"{div}-slider-0") == "0"
    after_layer = reader.data(div, shown)
    stored = reader.data(div, f"gd.layout.updatemenus[1].buttons[{layer}].args[0].z[1]")
    assert after_layer["z"] == stored
    head = str(heads - 1)
    reader.click_step(div, head)
    after_head = reader.data(div, shown)
    assert after_head["i"] == 1 and after_head["z"] != after_layer["z"]
    assert after_head["z"] == reader.data(
        div, f"gd.layout.sliders[0].steps[{head}].args[0].z[1]"
    )  # the steps of the chosen layer
    assert reader.data(div, "gd.layout.sliders[0].active") == heads - 1
    assert keyboard_choice(reader, f"{div}-slider-0") == head  # a "restyle" step
    # Hover over a cell: query token, key token and weight.
    reader.page.locator(f"#{div} .nsewdrag").first.hover()
    reader.page.wait_for_function(  # the hover label is drawn
        "(id) => (document.getElementById(id).querySelector('.hoverlayer') || {}).textContent",
        arg=div,
    )
    hover = reader.data(div, "(gd.querySelector('.hoverlayer') || {}).textContent || ''")
    assert "query:" in hover and "key:" in hover and "weight:" in hover
    reader.screenshots(div)
    reader.close()
