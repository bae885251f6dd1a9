"""The book's own static files reach the built book after an edit to them alone
(``attention_book.offline_assets.refresh_own_static``): Sphinx copies static files only when it
writes a page."""

from __future__ import annotations

import os

from attention_book.offline_assets import refresh_own_static


def test_a_changed_or_new_static_file_is_copied_and_an_unchanged_one_left(tmp_path):
    source, static = tmp_path / "book_static", tmp_path / "html_static"
    (source / "live").mkdir(parents=True)
    (static / "live").mkdir(parents=True)
    (source / "custom.css").write_text("table { color: red; }")
    (static / "custom.css").write_text("table { color: blue; }")  # the copy before the edit
    (source / "same.js").write_text("1;")
    (static / "same.js").write_text("1;")
    os.utime(static / "same.js", (1, 1))
    (source / "live" / "box.js").write_text("new file;")

    copied = refresh_own_static(source, static)

    assert copied == ["custom.css", "live/box.js"]
    assert (static / "custom.css").read_text() == "table { color: red; }"
    assert (static / "live" / "box.js").read_text() == "new file;"
    assert os.stat(static / "same.js").st_mtime == 1  # not rewritten
    assert refresh_own_static(source, static) == []  # a second build copies nothing
