// The live box's state machine (book/_static/live/box_state.js), under `node --test`: the
// phases a reader goes through, the status line and button words at each, what the box's fixed
// parts show, and the head and query chosen.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const boxState = require("../../book/_static/live/box_state.js");

// The box's data-config as the page holds it (sizes left out: the state does not read them).
const CONFIG = { model: "m.onnx", maxTokens: 512, total: 60_100_000, precision: "float16" };
const SERVED = { protocol: "http:", webAssembly: true, cacheVisible: true };
// A model's answer for 12 tokens: 6 layers of 12 heads.
const OUT = {
  ids: [101, 1, 2, 102], tokens: ["[CLS]", "a", "b", "[SEP]"], truncatedFrom: null,
  unknownWords: [], attentions: new Float32Array(6 * 12 * 12 * 12), dims: [6, 12, 12, 12],
};

function ready() {
  const s = boxState.create();
  boxState.setUp(s, CONFIG, SERVED);
  boxState.startLoad(s, 1000);
  boxState.downloaded(s, 60_000_000, 0, 4000);
  boxState.loaded(s, { vocabSize: 30522, unk: "[UNK]" }, 5000);
  return s;
}

test("the phases: each has a public status, and every move leads to a phase", () => {
  assert.deepEqual(Object.keys(boxState.NEXT).sort(), Object.keys(boxState.STATUS).sort());
  for (const targets of Object.values(boxState.NEXT)) {
    for (const phase of targets) assert.ok(phase in boxState.STATUS, phase);
  }
  assert.deepEqual([...new Set(Object.values(boxState.STATUS))].sort(),
    ["error", "idle", "loading", "ready", "unavailable"]);
});

test("a new state is idle, computes nothing, and sits on the object it is given", () => {
  const target = { model: "kept" };
  const s = boxState.create(target);
  assert.equal(s, target);
  assert.equal(s.model, "kept");
  assert.equal(s.phase, "idle");
  assert.equal(s.status, "idle");
  assert.equal(s.computing, false);
  assert.equal(s.runs, 0);
  assert.equal(s.inWorker, null);
  assert.deepEqual(s.selected, { layer: 0, head: 0, query: -1, perHead: false });
  // Two states share nothing.
  boxState.create().selected.layer = 3;
  assert.equal(boxState.create().selected.layer, 0);
});

test("enter follows the machine and refuses a move it lacks", () => {
  const s = boxState.create();
  assert.equal(boxState.enter(s, "shown"), false);
  assert.equal(s.phase, "idle");
  assert.equal(boxState.enter(s, "downloading"), true);
  assert.equal(s.status, "loading");
});

test("a page opened as a file, or without WebAssembly, is unavailable: the button is off", () => {
  const file = boxState.create();
  boxState.setUp(file, CONFIG, { protocol: "file:", webAssembly: true, cacheVisible: false });
  assert.equal(file.status, "unavailable");
  assert.match(boxState.statusText(file), /^This page was opened as a file.*make serve/);
  const c = boxState.controls(file);
  assert.equal(c.buttonDisabled, true);
  assert.equal(c.button, null);
  assert.equal(boxState.startLoad(file, 0), false);
  assert.equal(file.status, "unavailable");

  const old = boxState.create();
  boxState.setUp(old, CONFIG, { protocol: "https:", webAssembly: false, cacheVisible: true });
  assert.match(boxState.statusText(old), /^This browser lacks WebAssembly/);
  assert.equal(boxState.unavailableReason(SERVED), null);
});

test("before the click the button states the download, less what this browser keeps", () => {
  const s = boxState.create();
  assert.equal(boxState.buttonText(s), null); // no config yet
  boxState.setUp(s, CONFIG, SERVED);
  assert.equal(s.status, "idle");
  assert.equal(boxState.statusText(s), null);
  assert.equal(boxState.buttonText(s), null); // the page's words, until the cache answers
  boxState.kept(s, 0);
  assert.equal(boxState.buttonText(s), null);
  boxState.kept(s, 45_200_000);
  assert.equal(boxState.buttonText(s),
    "Load the model (14.9 MB download; 45.2 MB already kept by this browser)");
  boxState.startLoad(s, 0);
  assert.equal(boxState.buttonText(s), null); // the button is busy: its words stay

  const blind = boxState.create();
  boxState.setUp(blind, CONFIG, { protocol: "http:", webAssembly: true, cacheVisible: false });
  assert.equal(boxState.buttonText(blind), "Load the model (up to 60.1 MB download)");
});

test("loading: the progress bar and its words, then the model starting, then ready", () => {
  const s = boxState.create();
  boxState.setUp(s, CONFIG, SERVED);
  assert.equal(boxState.canLoad(s), true);
  assert.equal(boxState.startLoad(s, 1000), true);
  assert.equal(boxState.canLoad(s), false);
  assert.equal(boxState.startLoad(s, 2000), false); // a second click while loading
  assert.equal(s.loadStarted, 1000);
  let c = boxState.controls(s);
  assert.equal(c.status, "Downloading: 0.0 MB of 60.1 MB…");
  assert.deepEqual([c.buttonBusy, c.buttonHidden, c.progressHidden, c.progressValue], [true, false, false, 0]);

  boxState.progress(s, 20_000_000, 5_000_000);
  c = boxState.controls(s);
  assert.equal(c.progressValue, 25_000_000);
  assert.equal(c.status, "Loading: 25.0 MB of 60.1 MB (5.0 MB from this browser's storage, 20.0 MB downloaded)…");

  boxState.downloaded(s, 55_000_000, 5_100_000, 4000);
  assert.equal(s.phase, "starting");
  assert.equal(s.status, "loading");
  assert.equal(s.loadMs.download, 3000);
  assert.deepEqual(s.loadBytes, { network: 55_000_000, cache: 5_100_000 });
  assert.equal(boxState.statusText(s), "Starting the model…");
  assert.equal(boxState.controls(s).progressValue, 60_100_000);

  boxState.loaded(s, { vocabSize: 30522, unk: "[UNK]" }, 5500);
  assert.equal(s.status, "ready");
  assert.equal(s.loadMs.session, 4500);
  assert.equal(s.vocabSize, 30522);
  assert.equal(boxState.statusText(s), "Starting the model…");
  c = boxState.controls(s);
  assert.deepEqual([c.buttonBusy, c.buttonHidden, c.progressHidden], [true, true, true]);
  assert.equal(boxState.startLoad(s, 6000), false);
});

test("where the page cannot see the cache, loading counts up to the total", () => {
  const s = boxState.create();
  boxState.setUp(s, CONFIG, { protocol: "http:", webAssembly: true, cacheVisible: false });
  boxState.startLoad(s, 0);
  boxState.progress(s, 1_000_000, 0);
  assert.equal(boxState.statusText(s), "Loading: 1.0 MB of up to 60.1 MB…");
});

test("a failed load says why, frees the button, and a click tries again", () => {
  const s = boxState.create();
  boxState.setUp(s, CONFIG, SERVED);
  boxState.startLoad(s, 0);
  assert.equal(boxState.loadFailed(s, new Error("model.onnx: HTTP 404")), true);
  assert.equal(s.status, "error");
  assert.equal(s.error, "model.onnx: HTTP 404");
  const c = boxState.controls(s);
  assert.equal(c.status, "The model could not be loaded (model.onnx: HTTP 404). The explorer of " +
    "eight sentences above still works; press the button to try again.");
  assert.deepEqual([c.buttonBusy, c.buttonHidden, c.progressHidden, c.buttonDisabled], [false, false, true, false]);
  boxState.progress(s, 5, 5); // a late message changes nothing
  assert.deepEqual(s.progress, { network: 0, cache: 0 });
  assert.equal(boxState.startLoad(s, 10), true);
  assert.equal(s.error, null);
  assert.equal(boxState.loadFailed(s, "stopped"), true);
  assert.equal(s.error, "stopped");
});

test("once the model is loaded, a late load failure is left unsaid", () => {
  const s = ready();
  assert.equal(boxState.loadFailed(s, new Error("worker")), false);
  assert.equal(s.status, "ready");
  assert.equal(s.error, null);
});

test("a sentence: computing, then its numbers and the time it took", () => {
  const s = ready();
  assert.equal(boxState.startRun(s), true);
  assert.equal(s.computing, true);
  assert.equal(s.status, "ready");
  assert.equal(boxState.statusText(s), "Computing the attention of your sentence…");
  assert.equal(boxState.controls(s).computing, true);
  assert.equal(boxState.startRun(s), false); // one run at a time
  boxState.result(s, "A b.", OUT);
  assert.equal(s.sentence, "A b.");
  assert.deepEqual(s.shape, [6, 12, 12, 12]);
  assert.equal(s.attentions, OUT.attentions);
  assert.equal(s.runs, 0); // counted once drawn
  boxState.shown(s, 41.4);
  assert.equal(s.runs, 1);
  assert.equal(s.computing, false);
  assert.equal(s.lastRunMs, 41.4);
  assert.equal(boxState.statusText(s), "12 tokens, 6 layers × 12 heads, computed in 41 ms.");
  boxState.firstMap(s, 5600);
  assert.equal(s.firstMapMs, 4600);
  assert.equal(s.loadMs.firstMap, 4600);
});

test("a text cut at 512 tokens says so before its numbers", () => {
  const s = ready();
  boxState.startRun(s);
  boxState.result(s, "long", { ...OUT, truncatedFrom: 702, dims: [6, 12, 512, 512] });
  boxState.shown(s, 900);
  assert.equal(boxState.statusText(s),
    "Your text is 702 tokens; the model reads at most 512, so the last 190 tokens were left out: " +
    "the first 510 are shown, between [CLS] and [SEP]. 512 tokens, 6 layers × 12 heads, computed in 900 ms.");
});

test("an empty box: the sentence is forgotten and the reader asked for one", () => {
  const s = ready();
  boxState.startRun(s);
  boxState.result(s, "A b.", OUT);
  boxState.shown(s, 10);
  boxState.empty(s, "  ");
  assert.equal(s.sentence, "  ");
  assert.equal(s.attentions, null);
  assert.equal(s.tokens, null);
  assert.equal(s.shape, null);
  assert.equal(s.runs, 2);
  assert.equal(boxState.statusText(s), "Type a sentence in the box above to see its attention.");
  boxState.empty(s, "");
  assert.equal(s.runs, 3);
  assert.equal(boxState.startRun(s), true);
});

test("a sentence the model cannot read: said, and the next one runs", () => {
  const s = ready();
  boxState.startRun(s);
  boxState.runFailed(s, new Error("out of memory"));
  assert.equal(s.computing, false);
  assert.equal(s.status, "ready");
  assert.equal(s.error, null); // the model stays loaded
  assert.equal(boxState.statusText(s), "The model could not read this text (out of memory).");
  assert.equal(boxState.startRun(s), true);
});

test("the query row stays inside a shorter sentence", () => {
  const s = ready();
  s.selected.query = 30;
  boxState.startRun(s);
  boxState.result(s, "A b.", OUT);
  assert.equal(s.selected.query, 11);
  s.selected.query = -1;
  boxState.result(s, "A b.", OUT);
  assert.equal(s.selected.query, -1);
});

test("the second sentence is kept with its shape, or dropped", () => {
  const s = ready();
  boxState.second(s, "Man bites dog.", OUT);
  assert.deepEqual(Object.keys(s.second).sort(),
    ["attentions", "ids", "sentence", "shape", "tokens", "truncatedFrom"]);
  assert.equal(s.second.sentence, "Man bites dog.");
  assert.deepEqual(s.second.shape, [6, 12, 12, 12]);
  boxState.second(s, null, null);
  assert.equal(s.second, null);
});

test("the head, the query row, the scale and the head view's toggles", () => {
  const s = boxState.create();
  boxState.select(s, 2, 5);
  assert.deepEqual([s.selected.layer, s.selected.head], [2, 5]);
  assert.equal(boxState.chooseQuery(s, 3), true);
  assert.equal(boxState.chooseQuery(s, 3), false);
  assert.equal(s.selected.query, 3);
  boxState.perHead(s, true);
  assert.equal(s.selected.perHead, true);
  boxState.showHeads(s, 4);
  assert.deepEqual(s.shownHeads, [true, true, true, true]);
  boxState.toggleHead(s, 1);
  assert.deepEqual(s.shownHeads, [true, false, true, true]);
  boxState.toggleAllHeads(s); // some show: hide all
  assert.deepEqual(s.shownHeads, [false, false, false, false]);
  boxState.toggleAllHeads(s); // none shows: show all
  assert.deepEqual(s.shownHeads, [true, true, true, true]);
});
