"""Serve the book's front-end libraries from the built book itself, so every page renders offline.

Each library comes from an installed, pinned package and is copied into
``<outdir>/_static/vendor/`` when the HTML build finishes:

- MathJax 3 (its ``es5/`` build) from the Python package ``django-static-mathjax``, loaded as
  ``startup.js`` plus the components ``_config.yml`` names;
- plotly.js from npm's ``plotly.js-cartesian-dist-min``: the partial bundle with the trace types
  the explorers draw (heatmap, scatter, bar), a third of the full bundle's size, at the version
  the Python ``plotly`` package bundles (checked at the start of a build);
- the theme's icon font, cut down to the icons the book shows: the theme's stylesheet already
  draws Font Awesome icons with its webfont, so its 1.5 MB icon script (which swaps each icon
  for an SVG) is not loaded (``book/_templates/static/webpack-macros.html``), and its 156 KB
  ``fa-solid-900.woff2`` is replaced by a subset of the same font (fontTools, from the theme's
  own ``.ttf``) holding the glyphs that the pages, the theme's scripts and its stylesheets use.

npm packages are pinned in ``package.json`` / ``package-lock.json`` and installed into
``node_modules/`` by ``make book`` (``npm ci``). They are deliberately *not* in the source
``_static`` folder: Jupyter Book adds every ``.js``/``.css`` found under the static paths to
every page, and MathJax alone would add a hundred scripts to each.

plotly.js is linked only from pages whose body contains a plotly figure (Sphinx itself links
MathJax only from pages with math).

The book's own static files (``book/_static``) are copied again where they changed even when no
page was rewritten, which Sphinx skips (``refresh_own_static``).
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

from . import ROOT

logger = logging.getLogger(__name__)

STATIC = ROOT / "book" / "_static"
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
ICON_DIR = f"{VENDOR}/fontawesome"
ICON_SUBSET = "webfonts/fa-solid-900.subset.woff"
ICON_CSS = f"{ICON_DIR}/solid-subset.css"
# Declared after the theme's stylesheet, this @font-face takes the place of the theme's for the
# same family and weight, so browsers fetch the subset and not the full font.
ICON_FACE = (
    '@font-face{font-display:block;font-family:"Font Awesome 6 Free";font-style:normal;'
    f'font-weight:900;src:url({ICON_SUBSET}) format("woff")}}\n'
)
# Font Awesome's class rules as the theme's stylesheet carries them: .fa-x:before{content:"\f002"}
_ICON_RULE = re.compile(r'([^{}]+)\{content:"\\([0-9a-fA-F]{4,5})"\}')
_ICON_CLASS = re.compile(r"\bfa-([a-z0-9-]+)")
_PRIVATE_USE = re.compile(r"\\([eEfF][0-9a-fA-F]{3})\b|([\ue000-\uf8ff])")
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


def npm_package(app: Sphinx, name: str) -> tuple[Path, str]:
    folder = node_modules(app) / name
    manifest = folder / "package.json"
    if not manifest.is_file():
        raise RuntimeError(
            f"offline_assets: the npm package {name!r} is not installed in {node_modules(app)}; "
            "run `make book` (it runs `npm ci`; Node.js and npm must be installed)"
        )
    return folder, json.loads(manifest.read_text(encoding="utf-8"))["version"]


def copy_static(app: Sphinx, *folders: str) -> None:
    """Copy each ``book/_static/<folder>/`` into the built book's ``_static/<folder>/``.

    For the ``build-finished`` handlers of the extensions whose browser code lives there: Sphinx
    copies the static folder only when a page was written, and the code must be current after
    every build.
    """
    for folder in folders:
        target = Path(app.outdir) / "_static" / folder
        target.mkdir(parents=True, exist_ok=True)
        for code in (STATIC / folder).iterdir():
            shutil.copy2(code, target / code.name)


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
    plotly_dir, _ = npm_package(app, PLOTLY_PACKAGE)
    plotly_to = Path(app.outdir) / "_static" / PLOTLY_JS
    plotly_to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(plotly_dir / "plotly-cartesian.min.js", plotly_to)
    shutil.copy2(plotly_dir / "LICENSE", plotly_to.parent / "LICENSE")
    _subset_icon_font(Path(app.outdir))
    logger.info("offline_assets: copied MathJax and plotly.js, cut the icon font, in %s", static)


def icon_codepoints(outdir: Path) -> set[int]:
    """The Font Awesome code points the built book can show.

    Those of every ``fa-<name>`` class in the pages and the theme's scripts, and every
    private-use character the stylesheets use outside Font Awesome's own class list (the theme's
    icons for admonitions, links and so on).
    """
    static = outdir / "_static"
    by_name: dict[str, int] = {}
    stylesheet_codes: set[int] = set()
    for css in static.rglob("*.css"):
        if VENDOR in css.relative_to(static).parts:
            continue
        text = css.read_text(encoding="utf-8", errors="replace")
        for selectors, code in _ICON_RULE.findall(text):
            for selector in selectors.split(","):
                name = selector.strip()
                if name.startswith(".fa-") and name.endswith(":before"):
                    by_name[name[4:-7]] = int(code, 16)
        rest = _ICON_RULE.sub("", text)
        for escaped, literal in _PRIVATE_USE.findall(rest):
            stylesheet_codes.add(int(escaped, 16) if escaped else ord(literal))
    names: set[str] = set()
    sources = [p for p in outdir.rglob("*.html") if "_sources" not in p.parts]
    sources += [
        p
        for p in static.rglob("*.js")
        if VENDOR not in p.relative_to(static).parts and p.name != "fontawesome.js"
    ]
    for path in sources:
        names |= set(_ICON_CLASS.findall(path.read_text(encoding="utf-8", errors="replace")))
    return stylesheet_codes | {by_name[n] for n in names if n in by_name}


def _subset_icon_font(outdir: Path) -> None:
    from fontTools import subset
    from fontTools.ttLib import TTFont

    icons = outdir / "_static" / ICON_DIR
    font = TTFont(icons / "webfonts" / "fa-solid-900.ttf")
    options = subset.Options()
    options.flavor = "woff"  # zlib: WOFF2 would need the brotli module
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=icon_codepoints(outdir))
    subsetter.subset(font)
    font.flavor = "woff"
    font.save(icons / ICON_SUBSET)
    (outdir / "_static" / ICON_CSS).write_text(ICON_FACE, encoding="utf-8")


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
    _, plotly_version = npm_package(app, PLOTLY_PACKAGE)
    python_version = plotly_python_bundle_version()
    if plotly_version != python_version:
        raise RuntimeError(
            f"offline_assets: {PLOTLY_PACKAGE} is {plotly_version} but the Python plotly package "
            f"bundles plotly.js {python_version}; pin {PLOTLY_PACKAGE} to {python_version} in "
            "package.json and run `npm install` to update package-lock.json"
        )
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


def refresh_own_static(source: Path, static: Path) -> list[str]:
    """Copy each file under ``source`` (the book's own ``html_static_path``) whose bytes differ
    from its copy under ``static`` (``<outdir>/_static``); the relative paths copied.

    Sphinx copies the static files only when it writes a page: after an edit to
    ``custom.css`` or a script alone, ``jupyter-book build .`` finds "no targets out of date" and
    would serve the old copy."""
    copied = []
    for src in sorted(p for p in source.rglob("*") if p.is_file()):
        dst = static / src.relative_to(source)
        if dst.is_file() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        copied.append(str(src.relative_to(source)))
    return copied


def _refresh_static(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for folder in app.config.html_static_path:
        if Path(folder).is_absolute():  # an extension's own (copybutton's): Sphinx's to copy
            continue
        copied = refresh_own_static(Path(app.confdir) / folder, static)
        if copied:
            logger.info(
                "offline_assets: %d changed static file(s) copied: %s",
                len(copied),
                ", ".join(copied),
            )


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_sources)
    app.connect("build-finished", _refresh_static)
    app.connect("html-page-context", _plotly_where_needed)
    app.connect("build-finished", _copy_assets)
    return {"version": "1.1", "parallel_read_safe": True, "parallel_write_safe": True}
