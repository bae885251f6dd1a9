"""Where things are: the repository's root and the built book's HTML.

Test modules import these from here (conftest.py is pytest's, not a module to import).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
