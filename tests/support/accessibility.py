"""axe-core's accessibility audit, run in a Playwright page.

axe-core is pinned in package.json and installed into node_modules/ by ``make book``. A test
that audits asks for the ``axe`` fixture (tests/conftest.py), which skips it locally and fails
it under ``CI=true`` when the script is missing, and passes the path it gets to :func:`run_axe`:
an audit cannot pass by not running.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_A_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = ("critical", "serious")

_RUN = """([within, tags]) => axe.run(within === null ? document : within,
  {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})"""


def run_axe(page, axe: Path, within: str | None = None) -> dict:
    """axe-core's result for ``page`` (or the element ``within``, a CSS selector): its WCAG
    2.0/2.1 A and AA violations. ``axe`` is the script's path, from the ``axe`` fixture."""
    page.add_script_tag(path=str(axe))
    return page.evaluate(_RUN, [within, WCAG_A_AA])


def blocking(result: dict) -> list[tuple[str, str, list]]:
    """The critical and serious violations of an axe-core result: id, help, first 3 targets."""
    return [
        (v["id"], v["help"], [n["target"] for n in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in BLOCKING
    ]
