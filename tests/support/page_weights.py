"""What a browser downloads for each page of the built book, compressed as a host serves it.

Every HTML page of a built book is opened in headless Chromium over a local server, and every
file it fetches is recorded: the HTML, scripts, stylesheets, images, fonts, and what scripts load
on demand (MathJax's components and fonts). Files referenced by a tag (``<script src>``,
``<link rel=stylesheet|preload>``, ``<img src>``) are counted even if the browser had not
fetched them yet (a lazy image below the fold). Each file is counted at its gzip-compressed
size (level 6, what a static host such as GitHub Pages sends) when it is text; images and fonts,
already compressed, at their size on disk.

Two numbers per page:

- **first visit**: everything the page needs, with an empty cache;
- **next page**: what the page still needs once the *shared* assets are cached, i.e. every file
  fetched by more than one page of the book (the theme, MathJax, plotly.js, Font Awesome). What
  remains is the page's own HTML and images.

The budget: every page at most ``FIRST_VISIT_BUDGET`` bytes on a first visit, and the median next
page at most ``NEXT_PAGE_BUDGET``. Figures are sent as 256-colour PNGs
(``plotting.use_palette_png``), which is what brings the pages with explorers and heatmaps under
the first-visit budget. Sizes are in bytes; KB = 1000 bytes, MB = 1000 KB.

Measured by ``make bench-weights`` (benchmarks/page_weights.py, the table) and checked by
tests/browser/test_browser_pages.py (every page, from its one visit),
tests/browser/test_browser_instruments.py (the instruments' pages) and
tests/unit/test_page_weights.py (the budget itself, on made-up numbers).
"""

from __future__ import annotations

import functools
import gzip
import statistics
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from support.browser import Tab

FIRST_VISIT_BUDGET = 1_500_000
NEXT_PAGE_BUDGET = 150_000
# Served compressed by a static host; anything else (PNG, WOFF2, ...) is already compressed.
TEXT_SUFFIXES = {".html", ".js", ".css", ".svg", ".json", ".txt", ".map", ".ttf", ".xml"}


class Resources(HTMLParser):
    """The URLs of the scripts, stylesheets, preloads and images a page references by a tag."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        rel = (found.get("rel") or "").split()
        if tag == "script" and found.get("src"):
            self.urls.append(found["src"])
        elif tag == "link" and ("stylesheet" in rel or "preload" in rel) and found.get("href"):
            self.urls.append(found["href"])
        elif tag == "img" and found.get("src"):
            self.urls.append(found["src"])


def built_pages(html_dir: Path) -> list[str]:
    """Every HTML page of the book, as paths relative to ``html_dir``."""
    return sorted(
        str(p.relative_to(html_dir))
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )


def local_file(html_dir: Path, page: str, url: str) -> Path | None:
    """The file ``url``, met in ``page`` (a path in ``html_dir``), points to; None if outside."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return None
    if parts.scheme or parts.netloc:
        path = unquote(parts.path).lstrip("/")
        target = (html_dir / path).resolve()
    else:
        target = ((html_dir / page).parent / unquote(parts.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_relative_to(html_dir.resolve()) else None


@functools.cache
def compressed_size(path: Path) -> int:
    """Bytes on the wire: gzip level 6 for text files, the file itself for the rest."""
    data = path.read_bytes()
    if path.suffix.lower() in TEXT_SUFFIXES:
        return min(len(data), len(gzip.compress(data, compresslevel=6, mtime=0)))
    return len(data)


def fetched_files(context, base: str, html_dir: Path, page: str) -> tuple[set[Path], list[str]]:
    """Open ``page`` in a new tab; return the local files it fetched or references, and the
    references to files that do not exist."""
    tab = Tab(context, base, timeout=120_000)
    tab.goto(page)
    settle(tab)
    tab.close()
    return files_of(html_dir, page, tab.requests)


def settle(tab: Tab) -> None:
    """Wait until ``tab`` has fetched all it will: the network quiet, MathJax done, and quiet
    again (MathJax fetches its fonts once typesetting is done)."""
    tab.page.wait_for_load_state("networkidle")
    tab.page.evaluate("() => window.MathJax?.startup?.promise")
    tab.page.wait_for_load_state("networkidle")


def files_of(html_dir: Path, page: str, requests: list[str]) -> tuple[set[Path], list[str]]:
    """The local files ``page`` fetched (``requests``, the URLs a tab recorded) or references by
    a tag, and its references to files that do not exist."""
    parser = Resources()
    parser.feed((html_dir / page).read_text(encoding="utf-8"))
    files, missing = set(), []
    for url in requests + parser.urls:
        target = local_file(html_dir, page, url)
        if target is None:
            continue
        if target.is_file():
            files.add(target)
        elif url in parser.urls:
            missing.append(f"{page}: {url}")
    return files, missing


def measure(context, base: str, html_dir: Path) -> tuple[list[dict], list[str]]:
    """Weigh every page of the book served at ``base`` from ``html_dir``.

    Returns one row per page (``page``, ``files``, ``first_visit``, ``next_page``, ``plotly``:
    whether it loads plotly.js) and the list of missing references.
    """
    per_page, missing = {}, []
    for page in built_pages(html_dir):
        files, gone = fetched_files(context, base, html_dir, page)
        per_page[page] = files
        missing += gone
    return weigh(html_dir, per_page), missing


def weigh(html_dir: Path, per_page: dict[str, set[Path]]) -> list[dict]:
    """One row per page from the files each fetched (see :func:`measure`)."""
    uses = Counter(f for files in per_page.values() for f in files)
    found = []
    for page, files in per_page.items():
        found.append(
            {
                "page": page,
                "files": len(files),
                "first_visit": sum(compressed_size(f) for f in files),
                "next_page": sum(compressed_size(f) for f in files if uses[f] == 1),
                "plotly": any("plotly" in f.name for f in files),
                "fetched": sorted(str(f.relative_to(html_dir.resolve())) for f in files),
            }
        )
    return found


def table(rows: list[dict]) -> str:
    width = max(len(r["page"]) for r in rows)
    header = (
        f"{'page':<{width}}  {'files':>5}  {'first visit KB':>14}  {'next page KB':>12}  plotly"
    )
    lines = [
        "Compressed bytes a browser downloads per page (gzip as a static host serves it)",
        header,
        "-" * len(header),
    ]
    for r in rows:
        lines.append(
            f"{r['page']:<{width}}  {r['files']:>5}  {r['first_visit'] / 1000:>14.1f}  "
            f"{r['next_page'] / 1000:>12.1f}  {'yes' if r['plotly'] else ''}"
        )
    firsts = [r["first_visit"] for r in rows]
    nexts = [r["next_page"] for r in rows]
    lines.append("-" * len(header))
    lines.append(
        f"{'median':<{width}}  {'':>5}  {statistics.median(firsts) / 1000:>14.1f}  "
        f"{statistics.median(nexts) / 1000:>12.1f}"
    )
    lines.append(
        f"{'largest':<{width}}  {'':>5}  {max(firsts) / 1000:>14.1f}  {max(nexts) / 1000:>12.1f}"
    )
    lines.append(
        f"budget: every page <= {FIRST_VISIT_BUDGET / 1000:.0f} KB first visit, "
        f"median next page <= {NEXT_PAGE_BUDGET / 1000:.0f} KB"
    )
    return "\n".join(lines)


def over_budget(rows: list[dict]) -> list[str]:
    """What breaks the budget, one line each; empty when the book is within it."""
    problems = []
    for r in rows:
        if r["first_visit"] > FIRST_VISIT_BUDGET:
            problems.append(
                f"{r['page']}: {r['first_visit']:,} bytes on a first visit > {FIRST_VISIT_BUDGET:,}"
            )
    median_next = statistics.median(r["next_page"] for r in rows)
    if median_next > NEXT_PAGE_BUDGET:
        problems.append(f"median next page: {median_next:,.0f} bytes > {NEXT_PAGE_BUDGET:,}")
    return problems


def first_visit(context, base: str, html_dir: Path, page: str) -> tuple[int, list[str]]:
    """The bytes ``page`` costs on a first visit, and its references to missing files."""
    files, missing = fetched_files(context, base, html_dir, page)
    return sum(compressed_size(f) for f in files), missing
