"""The built HTML book: offline, complete, built from the current library, reproducible."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import yaml

from support import page_weights
from support.paths import ROOT

EXTERNAL = re.compile(r"^(https?:)?//", re.IGNORECASE)
PLOTLY_JS = "_static/vendor/plotly/plotly-cartesian.min.js"


class Resources(HTMLParser):
    """Collects every resource a page loads: scripts, stylesheets, images, frames, fonts."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[tuple[str, str]] = []  # (tag, url)
        self.images: list[dict[str, str | None]] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.loads.append((tag, a["src"]))
            self.scripts.append(a["src"])
        elif tag == "link" and a.get("href"):
            rel = (a.get("rel") or "").lower()
            if any(r in rel for r in ("stylesheet", "preload", "icon", "modulepreload")):
                self.loads.append((tag, a["href"]))
        elif tag in ("img", "iframe", "source", "video", "audio", "embed") and a.get("src"):
            self.loads.append((tag, a["src"]))
            if tag == "img":
                self.images.append(a)


def pages(html_dir: Path) -> list[Path]:
    return sorted(p for p in html_dir.rglob("*.html") if "_static" not in p.parts)


def parse(page: Path) -> Resources:
    r = Resources()
    r.feed(page.read_text(encoding="utf-8"))
    return r


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return files


def test_every_toc_page_is_built(html_dir):
    for f in toc_files():
        assert (html_dir / f"{f}.html").is_file(), f"{f} is in _toc.yml but was not built"


def test_no_page_loads_anything_from_the_network(html_dir):
    offenders = []
    for page in pages(html_dir):
        for tag, url in parse(page).loads:
            if EXTERNAL.match(url):
                offenders.append(f"{page.relative_to(html_dir)}: <{tag}> {url}")
    assert not offenders, "pages load remote resources:\n" + "\n".join(offenders)


def test_css_loads_no_remote_fonts_or_images(html_dir):
    offenders = []
    for css in html_dir.rglob("*.css"):
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", css.read_text(errors="replace")):
            if EXTERNAL.match(url):
                offenders.append(f"{css.relative_to(html_dir)}: {url}")
    assert not offenders, "\n".join(offenders)


def test_every_local_resource_exists(html_dir):
    missing = []
    for page in pages(html_dir):
        for tag, url in parse(page).loads:
            if EXTERNAL.match(url) or url.startswith(("data:", "#")):
                continue
            target = (page.parent / url.split("?")[0].split("#")[0]).resolve()
            if not target.exists():
                missing.append(f"{page.relative_to(html_dir)}: <{tag}> {url}")
    assert not missing, "\n".join(missing)


def test_mathjax_is_served_from_the_book(html_dir):
    es5 = html_dir / "_static" / "vendor" / "mathjax" / "es5"
    assert (es5 / "startup.js").is_file()
    assert any((es5 / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    chapter = html_dir / "notebooks_src/chapters/02_scaled_dot_product_attention.html"
    scripts = parse(chapter).scripts
    # Sphinx appends ?v=<checksum> once the file exists in the output from an earlier build.
    assert any(s.split("?")[0].endswith("vendor/mathjax/es5/startup.js") for s in scripts)


def test_vendored_trees_do_not_add_scripts_to_every_page(html_dir):
    # Jupyter Book adds every .js under the static paths to each page: a vendored MathJax there
    # would add ~100 scripts. Each page loads only the theme's scripts plus MathJax where needed.
    for page in pages(html_dir):
        scripts = parse(page).scripts
        vendored = [s for s in scripts if "/vendor/" in s]
        assert len(vendored) <= 2, (page.name, vendored)
        assert len(scripts) < 30, (page.name, len(scripts))


def test_plotly_js_only_on_pages_with_plotly_figures(html_dir):
    assert (html_dir / "_static" / "vendor" / "plotly" / "plotly-cartesian.min.js").is_file()
    for page in pages(html_dir):
        text = page.read_text(encoding="utf-8")
        loads_plotly = any("plotly" in s for s in parse(page).scripts)
        assert loads_plotly == ('class="plotly-graph-div"' in text), page.name


def test_plotly_js_is_loaded_exactly_where_there_is_a_figure(html_dir):
    pages = [html_dir / page for page in page_weights.built_pages(html_dir)]
    with_figures = []
    for page in pages:
        text = page.read_text()
        has_figure = 'class="plotly-graph-div"' in text
        assert (PLOTLY_JS in text) == has_figure, (
            f"{page.relative_to(html_dir)}: plotly.js loaded={PLOTLY_JS in text}, "
            f"figure={has_figure}"
        )
        with_figures += [page] if has_figure else []
    names = {page.name[:2] for page in with_figures}
    # Chapters 02's, 04's and 05's explorers became instruments (test_browser_instruments.py).
    assert {"03", "09"} <= names, f"explorers are missing: only {sorted(names)}"
    assert (html_dir / PLOTLY_JS).stat().st_size > 1_000_000


def test_every_figure_has_alt_text(html_dir):
    for f in toc_files():
        for img in parse(html_dir / f"{f}.html").images:
            if "logo" in (img.get("class") or ""):
                continue
            assert (img.get("alt") or "").strip(), f"{f}: image {img.get('src')} has no alt text"


def test_front_end_packages_match_the_lock_and_plotly_python(html_dir):
    # package.json pins exactly; the plotly.js bundle is the version plotly (Python) bundles.
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    for name, version in {**package["dependencies"], **package["devDependencies"]}.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (name, version)
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name
    import plotly

    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    python_js = re.search(r"plotly\.js v(\S+)", bundled.read_text()[:300]).group(1)
    assert package["dependencies"]["plotly.js-cartesian-dist-min"] == python_js
    served = html_dir / "_static" / "vendor" / "plotly" / "plotly-cartesian.min.js"
    assert f"v{python_js}" in served.read_text()[:300]


def test_the_theme_icon_script_is_not_loaded(html_dir):
    for page in pages(html_dir):
        scripts = parse(page).scripts
        assert not any("fontawesome.js" in s for s in scripts), page.name


def test_the_icon_font_subset_has_every_icon_the_pages_use(html_dir):
    from fontTools.ttLib import TTFont

    icons = html_dir / "_static" / "vendor" / "fontawesome"
    subset = set(TTFont(icons / "webfonts" / "fa-solid-900.subset.woff").getBestCmap())
    full = set(TTFont(icons / "webfonts" / "fa-solid-900.ttf").getBestCmap())
    assert 10 < len(subset) < len(full) / 10
    theme_css = (html_dir / "_static" / "styles" / "pydata-sphinx-theme.css").read_text()
    for page in pages(html_dir):
        for name in set(re.findall(r'class="[^"]*\bfa-solid\b[^"]*"', page.read_text())):
            for icon in re.findall(r"\bfa-([a-z0-9-]+)", name):
                rule = re.search(rf'\.fa-{icon}:before[^{{]*\{{content:"\\([0-9a-f]+)"', theme_css)
                if rule:  # a modifier such as fa-lg has no glyph
                    assert int(rule.group(1), 16) in subset, (page.name, icon)


def test_every_explorer_has_a_caption_and_a_text_alternative(html_dir):
    texts = yaml.safe_load((ROOT / "book" / "explorers.yml").read_text())
    found = set()
    for page in pages(html_dir):
        text = page.read_text(encoding="utf-8")
        for div_id in re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', text):
            found.add(div_id)
            figure = re.search(
                rf'<figure class="explorer" aria-labelledby="{div_id}-caption" '
                rf'aria-describedby="{div_id}-text">.*?</figure>',
                text,
                re.DOTALL,
            )
            assert figure, f"{page.name}: {div_id} is not in a captioned figure"
            assert f'id="{div_id}"' in figure.group(0)
            assert texts[div_id]["operate"].split()[0] in figure.group(0)
        # The instruments (attention_book.instruments) write their own captioned figure.
        instruments = r'<figure class="explorer instrument" id="instrument-([a-z0-9_-]+)"'
        for name in re.findall(instruments, text):
            figure_id = f"instrument-{name}"
            found.add(figure_id)
            figure = re.search(rf'<figure [^>]*id="{figure_id}".*?</figure>', text, re.DOTALL)
            assert f'aria-describedby="{figure_id}-text"' in figure.group(0)
            assert f'data-instrument="{name}"' in figure.group(0)
            assert texts[figure_id]["operate"].split()[0] in figure.group(0)
    assert found == set(texts), "book/explorers.yml lists exactly the explorers in the book"


CAPTION_NUMBER = re.compile(r'<span class="caption-number">Fig\. (\d+)\.(\d+) </span>')


def test_explorers_and_instruments_are_numbered_with_the_figures(html_dir):
    """Each explorer and instrument has a figure number, and a page's numbers run 1, 2, 3 ..."""
    explorers = 0
    for page in pages(html_dir):
        text = page.read_text(encoding="utf-8")
        for figure in re.findall(r'<figure class="explorer.*?</figure>', text, re.DOTALL):
            explorers += 1
            assert CAPTION_NUMBER.search(figure), f"{page.name}: an explorer has no number"
        numbers = CAPTION_NUMBER.findall(text)
        if numbers:
            chapter = {c for c, _ in numbers}
            assert len(chapter) == 1, f"{page.name}: figures of several chapters {chapter}"
            assert [int(n) for _, n in numbers] == list(range(1, len(numbers) + 1)), page.name
    assert explorers >= 6


def test_accessible_markup_for_folded_cells_and_citations(html_dir):
    chapter = (html_dir / "notebooks_src/chapters/02_scaled_dot_product_attention.html").read_text()
    assert "<summary>" in chapter and 'aria-label="Toggle hidden content"' not in chapter
    bibliography = (html_dir / "book" / "bibliography.html").read_text()
    assert 'role="list" class="citation-list"' in bibliography
    assert 'role="listitem"' in bibliography and "doc-biblioentry" not in bibliography


def lib_hash() -> str:
    """The same hash the Makefile computes over lib's .py, .css and .js files (sha256sum of
    sha256sum lines)."""
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "lib").rglob("*")
        if p.suffix in {".py", ".css", ".js"} and "__pycache__" not in p.parts
    )
    lines = "".join(f"{hashlib.sha256((ROOT / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


def test_book_was_built_from_the_current_library(html_dir):
    recorded = (html_dir.parent / ".lib-hash").read_text().strip()
    assert recorded == lib_hash(), "lib/ changed after the last `make book`: rebuild"


def test_makefile_computes_the_same_library_hash():
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "print-lib-hash"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == lib_hash()


def test_every_chapter_shows_its_reading_time(html_dir):
    """Under each chapter's title: minutes at 200 words a minute for its words of prose."""
    chapters = sorted((html_dir / "notebooks_src" / "chapters").glob("*.html"))
    assert len(chapters) >= 11
    for page in chapters:
        text = page.read_text(encoding="utf-8")
        found = re.search(
            r'<p class="reading-time">About (\d+) minutes to read \(([\d,]+) words of prose',
            text,
        )
        assert found, f"{page.name}: no reading time"
        minutes, words = int(found[1]), int(found[2].replace(",", ""))
        assert minutes == -(-words // 200), page.name
        # The count leaves code, outputs and folded blocks out, so it is below the page's words.
        body = re.sub(r"<[^>]+>", " ", text.split("<main", 1)[1])
        assert 1000 < words < len(body.split()), (page.name, words)


def test_no_id_is_used_twice_on_a_page(html_dir):
    """Duplicate ids break links, labels (aria-labelledby) and the scripts that find an element.

    sphinx-exercise gives every exercise's and solution's body the same id (``exercise-content``,
    ``solution-content``); nothing links to them, and that markup is the extension's, not ours.
    """
    theirs = {"exercise-content", "solution-content"}
    problems = []
    for page in pages(html_dir):
        ids = re.findall(r'<[a-zA-Z][^>]*?\sid="([^"]+)"', page.read_text(encoding="utf-8"))
        twice = sorted({i for i in ids if ids.count(i) > 1} - theirs)
        if twice:
            problems.append(f"{page.relative_to(html_dir)}: {twice[:5]}")
    assert not problems, "\n".join(problems)
