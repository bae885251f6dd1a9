"""A learner's notebooks in a real JupyterLab, driven in Chromium.

The pinned JupyterLab serves a copy of the built book's ``_notebooks/`` on a free loopback port
with a token. Chromium opens a chapter notebook and a lab workbook, runs every cell, and the
rendered page must show the figures, the explorer (drawn by JupyterLab's plotly renderer, offline),
no raw MyST, and no console error; no request may leave the machine.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

from support.browser import SCREENSHOTS, Tab

LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(html_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("learner") / "notebooks"
    shutil.copytree(html_dir / "_notebooks", root)
    settings = tmp_path_factory.mktemp("lab-settings")
    # Render every cell (JupyterLab 4 draws only the cells in view by default), so the DOM can
    # be counted; no update checks or news from the network.
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    notifications = (
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    )
    notifications.parent.mkdir(parents=True)
    notifications.write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path_factory.mktemp("lab-workspaces")),
        "JUPYTER_RUNTIME_DIR": str(tmp_path_factory.mktemp("lab-runtime")),
        "HF_HUB_OFFLINE": "1",
    }
    log = (tmp_path_factory.mktemp("lab-log") / "jupyterlab.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.allow_root=True",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.extension_manager=readonly",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start; see {log.name}")
                time.sleep(0.5)
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _run_notebook(browser, jupyterlab, path: str, name: str):
    """Open ``path`` in JupyterLab, run all cells, and return the page with what it saw."""
    base, token = jupyterlab
    tab = Tab(browser)  # records console and page errors; routed here to the lab's hosts
    page, errors, outside = tab.page, tab.errors, tab.outside

    def route(route):
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    # A workspace of its own, reset: only this notebook is open, and Run All acts on it.
    page.goto(f"{base}/lab/workspaces/{name}/tree/{path}?reset&token={token}", timeout=120_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
        " === 'idle'",
        timeout=120_000,
    )
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
    )
    # Run All resolves when the queue is done: wait until no cell is still queued or running.
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.jp-InputArea-prompt')]"
        ".some(p => p.textContent.includes('*'))",
        timeout=600_000,
    )
    page.wait_for_timeout(1500)  # the last outputs' renderers (plotly) finish drawing
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{name}.png"))
    return page, outside, errors


# The notebook's own model, as JupyterLab holds it after the run: every error output, with the
# tags of the cell that raised it.
ERRORS = """() => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const found = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i).toJSON();
    for (const output of cell.outputs || []) {
      if (output.output_type === 'error') {
        found.push({tags: (cell.metadata.tags || []), ename: output.ename,
                    evalue: output.evalue, traceback: output.traceback.join('\\n')});
      }
    }
  }
  return found;
}"""


def test_a_chapter_runs_in_jupyterlab_with_its_figures_and_explorer(browser, jupyterlab, html_dir):
    # Chapter 03 has both kinds of interactive part: a plotly explorer, which JupyterLab draws
    # from the notebook's plotly JSON, and an instrument, which computes in the book's page and
    # is a note pointing to the kernel here.
    page, outside, errors = _run_notebook(
        browser, jupyterlab, "chapters/03_multi_head_attention.ipynb", "chapter-03"
    )
    try:
        built = html_dir / "notebooks_src/chapters/03_multi_head_attention.html"
        figures = built.read_text(encoding="utf-8").count('<figure class="align-default"')
        images = page.locator(".jp-OutputArea-output img").count()
        assert figures >= 3 and images >= figures, (images, figures)
        assert page.locator(".jp-OutputArea-output .main-svg").count() >= 1, "no explorer drawn"
        assert page.get_by_text("Interactive instrument.").count() >= 1
        text = page.locator(".jp-Notebook").inner_text()
        assert "{glue" not in text and "{numref}" not in text and "```{" not in text
        assert "Fig. 3.1." in text
        raised = page.evaluate(ERRORS)
        assert all("raises-exception" in e["tags"] for e in raised), raised
        assert "Exception reporting mode" not in text
        # The quiz's math is typeset, offline: the converter rendered it as MathML, which the
        # browser draws itself (JupyterLab's MathJax does not reach the quiz's script).
        quiz = page.locator("[id='quiz_03_multi_head_attention']")
        assert quiz.count() == 1, "the quiz is not shown"
        maths = quiz.locator("math")
        assert maths.count() >= 3, maths.count()
        box = maths.first.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0, box
        shown = quiz.inner_text()
        assert "\\(" not in shown and "$" not in shown, shown[:500]
        maths.first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "jupyterlab-chapter-03-quiz.png"))
        assert not outside, f"requests left the machine: {outside}"
        assert not errors, f"console errors: {errors}"
        # Scrolled to the explorer: look at it in the screenshot.
        page.locator(".jp-OutputArea-output .main-svg").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "jupyterlab-chapter-03-explorer.png"))
    finally:
        page.close()


def test_a_lab_workbook_stops_at_the_check_with_its_message(browser, jupyterlab):
    page, outside, errors = _run_notebook(
        browser, jupyterlab, "labs/01_scaled_dot_product_attention.ipynb", "lab-01"
    )
    try:
        raised = page.evaluate(ERRORS)
        # The check of the stub raises (the cell is tagged raises-exception, so Run All goes on):
        # that is the only error, and it says what to do.
        assert len(raised) == 1, raised
        assert "raises-exception" in raised[0]["tags"]
        assert "still the stub" in " ".join(raised[0]["evalue"].split())
        shown = page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        )
        message = "\n".join(shown.all_inner_texts())
        assert "still the" in message and "stub." in message
        shown.first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "jupyterlab-lab-01-check.png"))
        # %xmode Minimal: the message, not 20-30 lines of the checker's frames.
        lines = [line for line in message.splitlines() if line.strip()]
        assert len(lines) <= 8, message
        assert not re.search(r"checks\.py", message), message
        assert not outside, f"requests left the machine: {outside}"
        assert not errors, f"console errors: {errors}"
    finally:
        page.close()
