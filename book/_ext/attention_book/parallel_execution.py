"""Pages executed on every core before Sphinx reads them.

myst-nb (``execute_notebooks: cache``) executes each page when Sphinx reads it, one at a time, and
Sphinx's own ``-j`` is refused under ``-W`` by an extension the book relies on. So, when the
builder starts, this extension reads every MyST notebook page as myst-nb reads it, and executes the
ones whose code is not in the execution cache yet, ``execution_workers`` at a time (default: the
CPU count, at most 2; the environment variable ``BOOK_EXECUTION_WORKERS`` overrides both),
longest first, their kernels' OpenMP threads waiting without spinning (``_share_the_cores``);
the pages listed in ``execution_run_alone`` (their prose
reports timings taken on this CPU) run afterwards, one at a time, so no timing is taken beside
another kernel. Each result goes into the cache exactly as myst-nb stores it (same notebook hash,
same record), so myst-nb then reads it from the cache. A page that fails is not cached: myst-nb
executes it again while reading and reports the failing cell with its traceback, as without
this extension. Outside cache mode it does nothing.

Once every page is read, it writes each page's executed notebook, with its outputs, to
``_build/jupyter_execute/`` (myst-nb writes a page taken from the cache there without them).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
# How myst-nb's reader of MyST notebooks is named in the cache's project records.
MYST_NB_READER = {"type": "plugin", "name": "myst_nb_md"}


def _read(path: Path):
    """The page as myst-nb reads it (the notebook whose code cells the cache hashes), or None."""
    from myst_nb.core.read import is_myst_markdown_notebook, read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    text = path.read_text(encoding="utf-8")
    if not is_myst_markdown_notebook(text):
        return None
    return read_myst_markdown_notebook(
        text, config=MdParserConfig(), add_source_map=True, path=str(path)
    )


def _share_the_cores() -> None:
    """Run in each worker process before its first page: the kernels it starts wait for work
    without spinning (OpenMP's passive wait policy), unless the environment already says how;
    why, and what it was measured to save and not to change: README.md, "Tests". The pages
    that run alone keep OpenMP's default."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _execute(path: str, timeout: int, allow_errors: bool) -> tuple[str, float, str, dict | None]:
    """Run in a worker process: execute one page in its folder. Returns (path, seconds, the
    error's name or "", the executed notebook or None). The parent process writes the cache, so
    two workers never write its database at once."""
    from jupyter_cache.executors.utils import single_nb_execution
    from traitlets.config import Config

    nb = _read(Path(path))
    # Unix sockets in a folder of the kernel's own, not TCP ports, which two kernels starting at
    # once can collide on (as tests/support/runs.py's `execute` explains).
    with tempfile.TemporaryDirectory(prefix="attention-lab-kernel-") as sockets:
        result = single_nb_execution(
            nb, cwd=str(Path(path).parent), allow_errors=allow_errors, timeout=timeout,
            meta_override=True,
            config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}}),
        )  # fmt: skip
    if result.err is not None:
        return path, result.time, result.err.__class__.__name__, None
    return path, result.time, "", nb


def execute_pages(app) -> None:
    nb_config = app.env.mystnb_config  # myst-nb's, completed by its own builder-inited handler
    if nb_config.execution_mode != "cache" or nb_config.execution_in_temp:
        return
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    config = app.config
    cache = get_cache(nb_config.execution_cache_path)
    srcdir = Path(app.srcdir)
    excluded = {"_build", ".venv", "node_modules", "lib", "tests", "benchmarks"}
    todo = []
    for path in sorted(srcdir.rglob("*.md")):
        relative = path.relative_to(srcdir)
        if excluded & set(relative.parts):
            continue
        nb = _read(path)
        if nb is None:
            continue
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            todo.append(str(relative.with_suffix("")))
    if not todo:
        return
    override = os.environ.get("BOOK_EXECUTION_WORKERS", "")
    workers = int(override or 0) or config.execution_workers or min(os.cpu_count() or 1, 2)
    alone = [page for page in todo if page in set(config.execution_run_alone)]
    shared = [page for page in todo if page not in alone]
    # Longest first: by the time the page took when last executed here (kept beside the cache,
    # which `make book` clears when lib/ changes); a page never timed counts as long if it
    # trains a model (it sets `SEED = `), else as short.
    timings = Path(nb_config.execution_cache_path).parent / "page_seconds.json"
    seconds = json.loads(timings.read_text()) if timings.is_file() else {}

    def expected(page: str) -> float:
        if page in seconds:
            return seconds[page]
        trains = "\nSEED = " in (srcdir / f"{page}.md").read_text(encoding="utf-8")
        return 60.0 if trains else 10.0

    shared.sort(key=expected, reverse=True)
    logger.info(
        f"[parallel_execution] executing {len(todo)} page(s): {len(shared)} on {workers} "
        f"workers, then {len(alone)} alone"
    )
    args = (nb_config.execution_timeout, nb_config.execution_allow_errors)
    start = time.monotonic()

    def report(path: str, took: float, error: str, nb: dict | None) -> None:
        page = Path(path).relative_to(srcdir)
        if error:
            logger.info(
                f"[parallel_execution] {page}: {error} after {took:.1f} s (myst-nb reruns it)"
            )
            return
        # As myst-nb records a page it executed itself (myst_nb/core/execute/cache.py).
        record = cache.add_nb_to_project(path, read_data=MYST_NB_READER)
        cache.cache_notebook_bundle(
            CacheBundleIn(nbformat.from_dict(nb), record.uri, data={"execution_seconds": took}),
            check_validity=False,
            overwrite=True,
        )
        seconds[str(page.with_suffix(""))] = round(took, 1)
        timings.write_text(json.dumps(seconds, indent=1, sort_keys=True))
        logger.info(f"[parallel_execution] {page}: {took:.1f} s")

    if shared:
        initializer = _share_the_cores if workers > 1 else None
        with ProcessPoolExecutor(max_workers=workers, initializer=initializer) as pool:
            futures = [pool.submit(_execute, str(srcdir / f"{p}.md"), *args) for p in shared]
            for future in as_completed(futures):
                report(*future.result())
    for page in alone:
        report(*_execute(str(srcdir / f"{page}.md"), *args))
    logger.info(f"[parallel_execution] pages executed in {time.monotonic() - start:.0f} s")


def write_executed(app, env) -> None:
    """Write each page's executed notebook, outputs included, to ``_build/jupyter_execute/``.

    myst-nb writes that file itself, but when it takes a page from the cache it writes the
    notebook it read (without outputs), and with this extension every page comes from the cache.
    The tests compare a rerun's figures with these (tests/support/numerics.py)."""
    nb_config = env.mystnb_config
    if nb_config.execution_mode != "cache":
        return
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(nb_config.execution_cache_path)
    output = Path(nb_config.output_folder)
    for docname in sorted(env.found_docs):
        source = Path(env.doc2path(docname))
        if source.suffix != ".md":
            continue
        nb = _read(source)
        if nb is None:
            continue
        try:
            _, merged = cache.merge_match_into_notebook(nb)
        except KeyError:  # not executed (a failing page): myst-nb has reported it
            continue
        target = output / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(nbformat.writes(merged), encoding="utf-8")


def setup(app):
    app.add_config_value("execution_workers", 0, "env", types=[int])
    app.add_config_value("execution_run_alone", [], "env", types=[list])
    app.connect("builder-inited", execute_pages)
    app.connect("env-updated", write_executed)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
