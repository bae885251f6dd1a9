"""Instruments: explorers computed in the reader's browser from the reader's settings.

As a Sphinx extension this module gives pages the directive ``instrument`` with one argument,
the instrument's name (e.g. ``scaling``). It writes

- a ``<figure class="explorer instrument" id="instrument-<name>">`` with the caption and the text
  alternative of ``book/explorers.yml``'s entry ``instrument-<name>`` (the same fields as the
  plotly explorers': ``caption``, ``shows``, ``operate``);
- inside it, ``<div class="instrument-body" data-instrument="<name>" data-config="...">``, which
  the browser code fills with its controls and its numbers (with JavaScript off it says so, and
  the text alternative stays);

and links the browser code, ``book/_static/instruments/`` (``instruments.css``, ``core.js`` and
``<name>.js``) and the buttons' ``book/_static/controls/button.css``, from the pages that hold an
instrument, and no other. Where an instrument shows the library's own data (the published model
shapes of the cache and hybrid instruments), ``LIBRARY_DATA`` adds it to ``data-config`` from
``attention_lab`` when the page is built, so the browser code holds no copy. The code is plain
JavaScript computing in float64 on typed arrays; nothing is fetched. Its random inputs come from
a seeded generator described in ``core.js``, which ``tests/browser/test_browser_instruments.py``
reproduces in Python to compare the page's numbers with ``attention_lab``'s.

A learner's notebook has no page to compute in: there the directive becomes a note pointing to
the chapter's *Try it yourself* cell (``attention_book.notebook_converter``).
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from .interactive_figure import EXPLORERS, InteractiveFigure, explorer_entry
from .offline_assets import STATIC, copy_static

CODE = STATIC / "instruments"
# Each instrument's settings when the page opens (the reader changes them).
DEFAULTS = {
    # ch02: d_k = 2**logDk, T_k keys, temperature 2**logTemperature, the generator's seed.
    "scaling": {"seed": 0, "logDk": 10, "numKeys": 16, "logTemperature": 0},
    # ch05: T positions, `real` of them real tokens, padding on one side; the masks; the fill.
    "masks": {
        "seed": 0,
        "length": 6,
        "real": 3,
        "side": "left",
        "padding": True,
        "causal": True,
        "fill": "library",
    },
    # ch04: d_model, max_len, base = 10**logBase, the position p and the pair i shown.
    "positional": {"dModel": 64, "maxLen": 100, "logBase": 4, "position": 10, "pair": 7},
    # ch03: d_model D, H heads (a divisor of D), T tokens, the generator's seed.
    "heads": {"seed": 0, "dModel": 24, "heads": 3, "length": 6},
    # ch17: T positions; the order (causal, prefix-LM with its prefix P, none); a padding mask
    # (pads on one side), a sliding window of W, documents of the given lengths, each on or off.
    "mask_composer": {
        "seed": 0,
        "length": 9,
        "order": "causal",
        "prefix": 3,
        "padding": False,
        "pads": 2,
        "side": "right",
        "window": False,
        "windowSize": 3,
        "documents": True,
        "lengths": "3,2,4",
    },
    # ch16: context 2**logContext positions, batch 2**logBatch, bytes per number; the models'
    # shapes are added from the library when the page is built (LIBRARY_DATA).
    "cache_memory": {"logContext": 13, "logBatch": 0, "bytesPerNumber": 2},
    # ch21: the model (a name in PUBLISHED_HYBRID_SHAPES), context 2**logContext positions,
    # batch 2**logBatch, bytes per number; the models' shapes are added from the library when the
    # page is built (LIBRARY_DATA).
    "hybrid_memory": {
        "model": "Qwen3-Next-80B-A3B",
        "logContext": 15,
        "logBatch": 0,
        "bytesPerNumber": 2,
    },
    # ch18: the encoding (rope, alibi, sinusoidal); RoPE's scaling (none, linear, dynamic, yarn)
    # and its factor 2**logFactor; head width 2**logHeadDim; base 10**logBase; the trained length
    # L = 2**logTrained; the distance (the position, for sinusoidal) `at`, up to 8 L; ALiBi's heads.
    "extrapolation": {
        "encoding": "rope",
        "scaling": "none",
        "logFactor": 2,
        "logHeadDim": 6,
        "logBase": 4,
        "logTrained": 8,
        "at": 512,
        "heads": 8,
    },
}
_BODY = re.compile(r'data-instrument="([a-z][a-z0-9_-]*)"')


def published_cache_shapes() -> list[dict]:
    """``attention_lab.caches.PUBLISHED_CACHE_SHAPES`` as the cache instrument reads them.

    One dict per model, in the library's order: ``name``, ``kind`` and the fields of
    :class:`~attention_lab.caches.CacheShape` (``num_layers``, ``num_heads``, ...; ``None``
    where unset). The page computes its sizes from these, so the library is their one source.
    """
    from attention_lab.caches import PUBLISHED_CACHE_SHAPES  # imports torch: only when used

    return [
        {"name": name, "kind": shape.kind, **dataclasses.asdict(shape)}
        for name, shape in PUBLISHED_CACHE_SHAPES.items()
    ]


def published_hybrid_shapes() -> list[dict]:
    """``attention_lab.caches.PUBLISHED_HYBRID_SHAPES`` as the hybrid instrument reads them.

    One dict per model, in the library's order: ``name``, the fields of
    :class:`~attention_lab.caches.HybridShape`, and ``attention`` as a dict of its
    :class:`~attention_lab.caches.CacheShape`'s fields and ``kind``. The page computes its
    sizes from these, so the library is their one source.
    """
    from attention_lab.caches import PUBLISHED_HYBRID_SHAPES  # imports torch: only when used

    return [
        {
            "name": name,
            **dataclasses.asdict(shape),
            "attention": {"kind": shape.attention.kind, **dataclasses.asdict(shape.attention)},
        }
        for name, shape in PUBLISHED_HYBRID_SHAPES.items()
    ]


# Settings taken from attention_lab when the page is built: the instrument's data-config gets
# each key with the function's result, and the page depends on the library module named.
LIBRARY_DATA = {
    "cache_memory": ("attention_lab.caches", {"models": published_cache_shapes}),
    "hybrid_memory": ("attention_lab.caches", {"models": published_hybrid_shapes}),
}


def figure(name: str, entry: dict, config: dict) -> InteractiveFigure:
    """The instrument's place: its (empty) body, numbered and captioned when the page is written."""
    body = (
        f'<div class="instrument-body" data-instrument="{name}" '
        f'data-config="{html.escape(json.dumps(config))}">\n'
        "<p>This instrument computes in your browser, with JavaScript, which is turned off here; "
        "the text description below says what it shows.</p>\n</div>"
    )
    key = f"instrument-{name}"
    return InteractiveFigure(
        ids=[key], key=key, kind="instrument", caption=entry["caption"], body=body
    )


class Instrument(SphinxDirective):
    """``{instrument} <name>``: the named instrument, captioned from ``book/explorers.yml``."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        if name not in DEFAULTS or not (CODE / f"{name}.js").is_file():
            raise self.error(f"unknown instrument {name!r}; known: {sorted(DEFAULTS)}")
        self.env.note_dependency(str(Path(self.env.app.confdir) / EXPLORERS))
        self.env.note_dependency(__file__)
        entry = explorer_entry(self.env.app, f"instrument-{name}", self.env.docname, "instrument")
        config = dict(DEFAULTS[name])
        if name in LIBRARY_DATA:
            module, data = LIBRARY_DATA[name]
            self.env.note_dependency(importlib.import_module(module).__file__)
            config.update({key: function() for key, function in data.items()})
        return [figure(name, entry, config)]


def _link_code(app: Sphinx, pagename, templatename, context, doctree) -> None:
    names = sorted(set(_BODY.findall(context.get("body", ""))))
    if names:
        app.builder.add_css_file("controls/button.css")
        app.builder.add_css_file("instruments/instruments.css")
        app.builder.add_js_file("instruments/core.js", priority=600)
        for name in names:
            app.builder.add_js_file(f"instruments/{name}.js", priority=601)


def _copy_code(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        copy_static(app, "instruments", "controls")


def setup(app: Sphinx) -> dict:
    app.setup_extension("attention_book.interactive_figure")  # the node an instrument becomes
    app.add_directive("instrument", Instrument)
    app.connect("html-page-context", _link_code)
    app.connect("build-finished", _copy_code)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
