"""`make bench-live`: chapter 09's live attention box in headless Chromium, timed.

Over a local server (``_build/html``; ``make book`` first), with an empty browser cache:

- **download**: the bytes the button's click fetches (the ONNX model, ONNX Runtime's
  WebAssembly build, the tokenizer), as files and as a static host sends them (gzip for text and
  for the .wasm and .onnx files, as GitHub Pages does);
- **first map**: from the click to the first attention map drawn (``window.liveAttention``'s
  ``firstMapMs``), with an empty cache and again with the files in the browser's cache. Served
  from this machine, the download itself takes next to no time: what is measured is compiling the
  WebAssembly, loading the model and the first run;
- **per sentence**: tokenising, running the model and drawing the 72 maps and the large one, for
  sentences of 16 and 64 tokens (median of ``REPEATS`` runs, ``lastRunMs``), and once for a text
  cut at 512 tokens;
- **the page's longest task**: the longest task on the page's main thread (a
  ``PerformanceObserver`` of ``longtask`` entries, which are tasks over 50 ms) from the click to
  the first map, and while the sentences above are computed; and how many took over 200 ms. While
  such a task runs the page cannot answer a click or a key.

Goals: first map <= 3 s, each sentence <= 300 ms, no main-thread task over 200 ms. The numbers
depend on the machine and its load; nothing fails on them (tests never assert a time). Results:
``benchmarks/results/live_attention.txt``.

Usage: ``PYTHONPATH=tests python benchmarks/live_attention.py [path/to/_build/html]``.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import re
import statistics
import sys
import time
from pathlib import Path

from support import browser, server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = "notebooks_src/chapters/09_attention_in_a_pretrained_model.html"
GOAL_FIRST_MAP_MS = 3000
GOAL_SENTENCE_MS = 300
GOAL_LONG_TASK_MS = 200
# Long tasks on the page's main thread, from the page's start: [startTime, duration] in ms.
RECORD_LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]);
}).observe({type: "longtask", buffered: true});
"""
REPEATS = 9
TEXT = (
    "the river rose slowly through the night while the village slept and by morning the old "
    "bridge that had stood for two hundred years was gone so the children who crossed it "
    "every day to reach the school on the far bank waited with their teachers for the ferry "
    "that the council had promised would run until a new bridge was built next summer"
).split()


def sentence_of(n_tokens: int, shift: int) -> str:
    """A sentence of exactly ``n_tokens`` tokens ([CLS] and [SEP] included), from word ``shift``."""
    from attention_lab.pretrained import load_tokenizer

    tokenizer = load_tokenizer()
    words = (TEXT[shift:] + TEXT) * 2
    for k in range(1, len(words)):
        text = " ".join(words[:k])
        count = len(tokenizer(text)["input_ids"])
        if count == n_tokens:
            return text
        if count > n_tokens:
            break
    raise ValueError(f"no sentence of {n_tokens} tokens from word {shift}")


def served_bytes(path: Path) -> int:
    data = path.read_bytes()
    return min(len(data), len(gzip.compress(data, compresslevel=6, mtime=0)))


def now(tab) -> float:
    return tab.evaluate("() => performance.now()")


def long_tasks(tab, since: float) -> list[float]:
    """The durations of the page's main-thread tasks over 50 ms that started after ``since``."""
    return tab.evaluate(
        "(t) => window.__longTasks.filter(([s]) => s >= t).map(([, d]) => d)", since
    )


def load(context, base: str) -> tuple[object, dict, float, list[float]]:
    tab = browser.Tab(context, base, timeout=120_000).page
    tab.add_init_script(RECORD_LONG_TASKS)
    tab.goto(f"{base}/{PAGE}", wait_until="load")
    tab.wait_for_load_state("networkidle")
    clicked = now(tab)
    start = time.perf_counter()
    tab.click("#live-attention .live-load")
    tab.wait_for_function(
        "() => window.liveAttention.status === 'ready' && window.liveAttention.firstMapMs",
        timeout=300_000,
    )
    wall = (time.perf_counter() - start) * 1000
    return tab, tab.evaluate("() => window.liveAttention.loadMs"), wall, long_tasks(tab, clicked)


def run_once(tab, text: str) -> tuple[float, list[int]]:
    """Type ``text``; its ``lastRunMs`` and shape once its maps are drawn."""
    runs = tab.evaluate("() => window.liveAttention.runs")
    tab.fill("#live-text", text)
    tab.wait_for_function(
        "([n, text]) => window.liveAttention.runs > n && window.liveAttention.sentence === text",
        arg=[runs, text],
        timeout=300_000,
    )
    return tab.evaluate("() => [window.liveAttention.lastRunMs, window.liveAttention.shape]")


def per_sentence(tab, n_tokens: int) -> float:
    times = []
    for k in range(REPEATS):
        ms, shape = run_once(tab, sentence_of(n_tokens, k))
        assert shape[2] == n_tokens, (shape, n_tokens)
        times.append(ms)
    return statistics.median(times)


def longest(durations: list[float]) -> str:
    over = sum(d > GOAL_LONG_TASK_MS for d in durations)
    top = max(durations, default=0.0)
    verdict = "met" if over == 0 else "MISSED"
    return (
        f"{top:.0f} ms ({over} of {len(durations)} tasks over 50 ms took over "
        f"{GOAL_LONG_TASK_MS} ms; goal: none: {verdict})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=ROOT / "_build" / "html")
    args = parser.parse_args(argv)
    html_dir: Path = args.html_dir.resolve()
    page = html_dir / PAGE
    if not page.is_file():
        print(f"no built chapter 09 in {html_dir}: run `make book` first", file=sys.stderr)
        return 1
    found = re.search(r'data-config="([^"]*)"', page.read_text(encoding="utf-8"))
    config = json.loads(html.unescape(found.group(1)))
    files = [html_dir / "_static" / name for name in config["sizes"]]
    raw = sum(f.stat().st_size for f in files)
    gz = sum(served_bytes(f) for f in files)
    with server.serve(html_dir) as base, browser.chromium("live-attention-chromium-") as context:
        tab, cold, cold_wall, load_tasks = load(context, base)
        typed = now(tab)
        times = {n: per_sentence(tab, n) for n in (16, 64)}
        long_ms, long_shape = run_once(tab, "attention " * 600)  # cut at 512 tokens
        assert long_shape[2] == 512, long_shape
        run_tasks = long_tasks(tab, typed)
        in_worker = tab.evaluate("() => window.liveAttention.inWorker")
        tab.close()
        # The files now in the browser's cache.
        tab, warm, _, warm_tasks = load(context, base)
        tab.close()

    def verdict(value: float, goal: float) -> str:
        return f"goal <= {goal:.0f} ms: {'met' if value <= goal else 'MISSED'}"

    lines = [
        "Chapter 09's live attention box in headless Chromium (local server; machine under load)",
        f"download on the click: {raw / 1e6:.1f} MB of files, {gz / 1e6:.1f} MB gzip-compressed "
        f"({len(files)} files; model {config['precision']})",
        f"click -> first attention map, empty cache: {cold['firstMap']:.0f} ms (files in "
        f"{cold['download']:.0f} ms, model ready at {cold['session']:.0f} ms; Python's clock: "
        f"{cold_wall:.0f} ms); {verdict(cold['firstMap'], GOAL_FIRST_MAP_MS)}",
        f"click -> first attention map, files cached: {warm['firstMap']:.0f} ms (files in "
        f"{warm['download']:.0f} ms, model ready at {warm['session']:.0f} ms); "
        f"{verdict(warm['firstMap'], GOAL_FIRST_MAP_MS)}",
    ]
    for n, ms in times.items():
        lines.append(
            f"one sentence of {n} tokens (tokenise, run, draw; median of {REPEATS}): "
            f"{ms:.0f} ms; {verdict(ms, GOAL_SENTENCE_MS)}"
        )
    lines += [
        f"one text cut at 512 tokens (tokenise, run, draw; once): {long_ms:.0f} ms",
        f"the model runs in a worker: {'yes' if in_worker else 'no (the page runs it itself)'}",
        f"longest main-thread task, click -> first map, empty cache: {longest(load_tasks)}",
        f"longest main-thread task, click -> first map, files cached: {longest(warm_tasks)}",
        f"longest main-thread task while the sentences above were typed and computed: "
        f"{longest(run_tasks)}",
    ]
    report = "\n".join(lines)
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "live_attention.txt").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
