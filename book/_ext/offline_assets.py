"""Serve the book's front-end libraries from the built book itself, so every page renders offline.

Each library comes from an installed, pinned package and is copied into
``<outdir>/_static/vendor/`` when the HTML build finishes:

- MathJax 3 (its ``es5/`` build) from the Python package ``django-static-mathjax``, loaded as
  ``startup.js`` plus the components ``_config.yml`` names;
- plotly.js from npm's ``plotly.js-cartesian-dist-min``: the partial bundle with the trace types
  the explorers draw (heatmap, scatter, bar), a third of the full bundle's size, at the version
  the Python ``plotly`` package bundles (checked at the start of a build);
- Font Awesome's stylesheet and webfonts from npm's ``@fortawesome/fontawesome-free``, in place
  of the theme's 1.5 MB icon script (see ``book/_templates/static/webpack-macros.html``).

npm packages are pinned in ``package.json`` / ``package-lock.json`` and installed into
``node_modules/`` by ``make book`` (``npm ci``). They are deliberately *not* in the source
``_static`` folder: Jupyter Book adds every ``.js``/``.css`` found under the static paths to
every page, and MathJax alone would add a hundred scripts to each.

plotly.js is linked only from pages whose body contains a plotly figure (Sphinx itself links
MathJax only from pages with math).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

VENDOR = "vendor"
# The parts of MathJax's es5/ build that pages load: startup.js, then the components that
# _config.yml's mathjax3_config lists (TeX input, CommonHTML output and its fonts, the assistive
# MathML for screen readers), and what they load on demand. The combined tex-chtml.js would add
# the context menu, 108 KB compressed, to every page with math.
MATHJAX_PARTS = (
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
PLOTLY_PACKAGE = "plotly.js-cartesian-dist-min"
PLOTLY_JS = f"{VENDOR}/plotly/plotly-cartesian.min.js"
FONTAWESOME_PACKAGE = "@fortawesome/fontawesome-free"
# What the stylesheets linked by book/_templates/static/webpack-macros.html need.
FONTAWESOME_FILES = (
    "LICENSE.txt",
    "css/fontawesome.min.css",
    "css/solid.min.css",
    "webfonts/fa-solid-900.woff2",
    "webfonts/fa-solid-900.ttf",
)
# sha256 of pydata-sphinx-theme 0.17.1's static/webpack-macros.html, the file our override in
# book/_templates/static/ was made from. Another theme release must be looked at again.
THEME_MACROS_SHA256 = "b1f893e4416c7cc7cf9ed5f2e7a46cf9f94f653cd8c848138bf45a2fda166f67"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the package {name!r} is not installed; run `make book` to set up .venv"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def node_modules(app: Sphinx) -> Path:
    return Path(app.confdir) / "node_modules"


def mathjax_source() -> Path:
    """The ``es5`` folder of the MathJax 3 build shipped by ``django-static-mathjax``."""
    return _package_dir("mathjax") / "static" / "mathjax" / "es5"


def plotly_python_bundle_version() -> str:
    """The plotly.js version that the installed Python ``plotly`` package bundles."""
    bundled = _package_dir("plotly") / "package_data" / "plotly.min.js"
    with bundled.open(encoding="utf-8") as f:
        head = f.read(200)
    found = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", head)
    if not found:
        raise RuntimeError(f"offline_assets: no plotly.js version in the header of {bundled}")
    return found.group(1)


def _npm_package(app: Sphinx, name: str) -> tuple[Path, str]:
    folder = node_modules(app) / name
    manifest = folder / "package.json"
    if not manifest.is_file():
        raise RuntimeError(
            f"offline_assets: the npm package {name!r} is not installed in {node_modules(app)}; "
            "run `make book` (it runs `npm ci`; Node.js and npm must be installed)"
        )
    return folder, json.loads(manifest.read_text(encoding="utf-8"))["version"]


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
    plotly_dir, _ = _npm_package(app, PLOTLY_PACKAGE)
    plotly_to = Path(app.outdir) / "_static" / PLOTLY_JS
    plotly_to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(plotly_dir / "plotly-cartesian.min.js", plotly_to)
    shutil.copy2(plotly_dir / "LICENSE", plotly_to.parent / "LICENSE")
    fontawesome_dir, _ = _npm_package(app, FONTAWESOME_PACKAGE)
    for name in FONTAWESOME_FILES:
        dst = static / "fontawesome" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(fontawesome_dir / name, dst)
    logger.info("offline_assets: copied MathJax, plotly.js and Font Awesome into %s", static)


def _plotly_where_needed(app: Sphinx, pagename, templatename, context, doctree) -> None:
    # The builder restores its script list after each page, so this adds to this page only.
    # The attribute as plotly writes it: a page that only mentions the class (escaped, as in
    # the API reference) needs no plotly.js.
    if 'class="plotly-graph-div"' in context.get("body", ""):
        app.builder.add_js_file(PLOTLY_JS, priority=400)


def _check_sources(app: Sphinx) -> None:
    # Fail at the start of a build, not at its end, when a vendored asset is missing or stale.
    if not (mathjax_source() / "startup.js").is_file():
        raise RuntimeError(
            f"offline_assets: {mathjax_source()} is missing; reinstall requirements.txt"
        )
    _, plotly_version = _npm_package(app, PLOTLY_PACKAGE)
    python_version = plotly_python_bundle_version()
    if plotly_version != python_version:
        raise RuntimeError(
            f"offline_assets: {PLOTLY_PACKAGE} is {plotly_version} but the Python plotly package "
            f"bundles plotly.js {python_version}; pin {PLOTLY_PACKAGE} to {python_version} in "
            "package.json and run `npm install` to update package-lock.json"
        )
    _npm_package(app, FONTAWESOME_PACKAGE)
    theme_macros = (
        _package_dir("pydata_sphinx_theme")
        / "theme"
        / "pydata_sphinx_theme"
        / "static"
        / "webpack-macros.html"
    )
    if hashlib.sha256(theme_macros.read_bytes()).hexdigest() != THEME_MACROS_SHA256:
        raise RuntimeError(
            f"offline_assets: {theme_macros} is not the file that "
            "book/_templates/static/webpack-macros.html overrides (another pydata-sphinx-theme "
            "release?); carry its changes into the override, then update THEME_MACROS_SHA256"
        )


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_sources)
    app.connect("html-page-context", _plotly_where_needed)
    app.connect("build-finished", _copy_assets)
    return {"version": "1.1", "parallel_read_safe": True, "parallel_write_safe": True}
