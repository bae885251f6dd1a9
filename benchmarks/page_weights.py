"""How heavy is each page of the built book, and how much of that do the interactive figures add?

For every HTML page of a built book (default: ``_build/html``; ``make book`` first) this prints
the page's total weight: the HTML file itself plus every script, stylesheet and image the page
loads by a tag (``<script src>``, ``<link rel="stylesheet">``, ``<img src>``), each counted once
per page, as a browser with an empty cache would fetch them. Fonts and the MathJax components
that MathJax fetches on demand are not counted: they are the same for every page with math.

It also says whether the page loads plotly.js, and how many bytes its plotly figures take inside
the HTML (each ``plotly-graph-div`` and the script that draws it). The last column, the weight
without the explorers, is the total minus plotly.js and the figures.

Usage: ``python benchmarks/page_weights.py [path/to/_build/html]``.
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
PLOTLY_JS = "plotly.min.js"
# One plotly figure as plotly.io.to_html(full_html=False) writes it: the div, then its script.
FIGURE = re.compile(r'<div id="[^"]*" class="plotly-graph-div".*?</script>', re.DOTALL)


class Resources(HTMLParser):
    """Collects the URLs of the scripts, stylesheets and images a page loads by a tag."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script" and found.get("src"):
            self.urls.append(found["src"])
        elif (
            tag == "link" and "stylesheet" in (found.get("rel") or "").split() and found.get("href")
        ):
            self.urls.append(found["href"])
        elif tag == "img" and found.get("src"):
            self.urls.append(found["src"])


def local_file(page: Path, url: str, html_dir: Path) -> Path | None:
    """The file a relative URL of ``page`` points to, or None for data: and outside URLs."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    return target if target.is_relative_to(html_dir.resolve()) else None


def weigh(page: Path, html_dir: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    parser = Resources()
    parser.feed(text)
    files = {f for url in parser.urls if (f := local_file(page, url, html_dir)) is not None}
    missing = sorted(str(f) for f in files if not f.is_file())
    assets = sum(f.stat().st_size for f in files if f.is_file())
    plotly = sum(f.stat().st_size for f in files if f.name == PLOTLY_JS and f.is_file())
    figures = FIGURE.findall(text)
    html_bytes = len(text.encode("utf-8"))
    figure_bytes = sum(len(f.encode("utf-8")) for f in figures)
    total = html_bytes + assets
    return {
        "page": str(page.relative_to(html_dir)),
        "html": html_bytes,
        "assets": assets,
        "total": total,
        "plotly_js": plotly,
        "figures": len(figures),
        "figure_bytes": figure_bytes,
        "without": total - plotly - figure_bytes,
        "missing": missing,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=ROOT / "_build" / "html")
    args = parser.parse_args(argv)
    html_dir: Path = args.html_dir
    if not (html_dir / "index.html").is_file():
        print(f"no built book in {html_dir}: run `make book` first", file=sys.stderr)
        return 1
    pages = sorted(
        p
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )
    rows = [weigh(page, html_dir) for page in pages]
    width = max(len(r["page"]) for r in rows)
    header = (
        f"{'page':<{width}}  {'HTML':>9}  {'assets':>9}  {'total':>10}  {'plotly.js':>9}  "
        f"{'figures':>7}  {'fig. bytes':>10}  {'without':>10}"
    )
    print("Page weights in bytes (HTML + the scripts, styles and images it loads)")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['page']:<{width}}  {r['html']:>9,}  {r['assets']:>9,}  {r['total']:>10,}  "
            f"{('yes' if r['plotly_js'] else 'no'):>9}  {r['figures']:>7}  "
            f"{r['figure_bytes']:>10,}  {r['without']:>10,}"
        )
    problems = [f"{r['page']}: missing {m}" for r in rows for m in r["missing"]]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
