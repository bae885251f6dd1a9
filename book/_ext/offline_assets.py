"""Serve MathJax and plotly.js from the built book itself, so every page renders offline.

Both libraries come from installed, pinned Python packages (``django-static-mathjax`` ships
MathJax 3's ``es5/`` build, ``plotly`` ships ``plotly.min.js``) and are copied into
``<outdir>/_static/vendor/`` when the HTML build finishes. They are deliberately *not* in the
source ``_static`` folder: Jupyter Book adds every ``.js``/``.css`` found under the static paths
to every page, and MathJax alone would add a hundred scripts to each.

plotly.js (4.6 MB) is linked only from pages whose body contains a plotly figure.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

VENDOR = "vendor"
# The parts of MathJax's es5/ build that the tex-chtml component loads (eagerly or on demand,
# e.g. the context menu's accessibility explorer); the other combined bundles are not needed.
MATHJAX_PARTS = (
    "tex-chtml.js",
    "startup.js",
    "loader.js",
    "core.js",
    "input",
    "output",
    "ui",
    "a11y",
    "adaptors",
    "sre",
)
PLOTLY_JS = f"{VENDOR}/plotly/plotly.min.js"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the package {name!r} is not installed; run `make book` to set up .venv"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def mathjax_source() -> Path:
    """The ``es5`` folder of the MathJax 3 build shipped by ``django-static-mathjax``."""
    return _package_dir("mathjax") / "static" / "mathjax" / "es5"


def plotly_source() -> Path:
    """``plotly.min.js`` as shipped inside the installed ``plotly`` package."""
    return _package_dir("plotly") / "package_data" / "plotly.min.js"


def _copy_assets(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static" / VENDOR
    mathjax_to = static / "mathjax" / "es5"
    source = mathjax_source()
    for part in MATHJAX_PARTS:
        src, dst = source / part, mathjax_to / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    plotly_to = Path(app.outdir) / "_static" / PLOTLY_JS
    plotly_to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(plotly_source(), plotly_to)
    logger.info("offline_assets: copied MathJax and plotly.js into %s", static)


def _plotly_where_needed(app: Sphinx, pagename, templatename, context, doctree) -> None:
    # The builder restores its script list after each page, so this adds to this page only.
    # The attribute as plotly writes it: a page that only mentions the class (escaped, as in
    # the API reference) needs no plotly.js.
    if 'class="plotly-graph-div"' in context.get("body", ""):
        app.builder.add_js_file(PLOTLY_JS, priority=400)


def _check_sources(app: Sphinx) -> None:
    # Fail at the start of a build, not at its end, when a vendored asset is missing.
    for path in (mathjax_source() / "tex-chtml.js", plotly_source()):
        if not path.is_file():
            raise RuntimeError(f"offline_assets: {path} is missing; reinstall requirements.txt")


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_sources)
    app.connect("html-page-context", _plotly_where_needed)
    app.connect("build-finished", _copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
