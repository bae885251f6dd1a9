// The live box's state machine: what the box is doing, what it holds (the sentence, its tokens
// and weights, the head chosen) and the words of its status line and button. Pure (no DOM):
// box.js feeds it events (the click, the model's messages, a run's result) and shows what
// controls(state) returns. Unit-tested in tests/js/box_state.test.js.
//
// The phases (the public status each stands for, read by the tests and the benchmark, in
// brackets), and where each leads (NEXT):
//
//   idle (idle)              -> downloading (the click), unavailable (a page opened as a file,
//                               or a browser without WebAssembly: the button is off)
//   downloading (loading)    -> starting (every file arrived), loaded, error
//   starting (loading)       -> loaded (the model's session is built), error
//   error (error)            -> downloading (the button, pressed again)
//   loaded, shown, empty, failed (ready)
//                            -> computing (a sentence's run), empty (only white space typed),
//                               failed (a run failed; the second sentence's run, when
//                               comparing, starts from shown or empty and can only fail)
//   computing (ready)        -> shown (its maps drawn), failed
(function (root) {
  "use strict";

  var ns = (root.liveAttention = root.liveAttention || {});
  var fetching = ns.fetching || require("./fetching.js");
  var model = ns.model || require("./model.js");

  var STATUS = {
    idle: "idle",
    unavailable: "unavailable",
    downloading: "loading",
    starting: "loading",
    loaded: "ready",
    computing: "ready",
    empty: "ready",
    shown: "ready",
    failed: "ready",
    error: "error"
  };

  var AFTER_RUN = ["computing", "empty", "failed"];
  var NEXT = {
    idle: ["unavailable", "downloading"],
    unavailable: [],
    downloading: ["starting", "loaded", "error"],
    starting: ["loaded", "error"],
    loaded: AFTER_RUN,
    computing: ["shown", "failed"],
    empty: AFTER_RUN,
    shown: AFTER_RUN,
    failed: AFTER_RUN,
    error: ["downloading"]
  };

  // The box's state, its fields set on `target` (box.js passes window.liveAttention, where the
  // tests read them):
  //   phase (above); status (its public name); computing: a sentence's run under way
  //   config: the box's data-config (model, maxTokens, sizes, total); cacheVisible: whether the
  //     page sees the browser's Cache Storage; reason: why the box is unavailable
  //   progress {network, cache}: bytes read so far; keptBytes: bytes kept before the click
  //   loadStarted (ms), loadMs {download, session, firstMap}, loadBytes {network, cache},
  //   firstMapMs; inWorker: whether the model runs in a worker (null before the click)
  //   vocabSize, unk: the tokenizer's, once loaded; error: why loading failed; runError: why
  //     a sentence's run failed
  //   sentence, ids, tokens, truncatedFrom, unknownWords, attentions (Float32Array
  //     [L, H, T, T]), shape [L, H, T, T]: the last sentence computed
  //   runs (sentences computed), lastRunMs (its run and drawing)
  //   second {sentence, ids, tokens, truncatedFrom, attentions, shape}: the second sentence
  //     when comparing; difference: second minus first in the chosen head (box.js sets it)
  //   selected {layer, head, query, perHead}: the head and query row chosen, the scale;
  //   shownHeads[h]: whether head h's lines show in the head view
  function create(target) {
    return Object.assign(target || {}, {
      phase: "idle",
      status: "idle",
      computing: false,
      config: null,
      cacheVisible: false,
      reason: null,
      progress: { network: 0, cache: 0 },
      keptBytes: null,
      loadStarted: 0,
      loadMs: {},
      loadBytes: null,
      firstMapMs: null,
      inWorker: null,
      vocabSize: 0,
      unk: "[UNK]",
      error: null,
      runError: null,
      sentence: null,
      ids: null,
      tokens: null,
      truncatedFrom: null,
      unknownWords: [],
      attentions: null,
      shape: null,
      runs: 0,
      lastRunMs: null,
      second: null,
      difference: null,
      selected: { layer: 0, head: 0, query: -1, perHead: false },
      shownHeads: null
    });
  }

  // Moves to `phase` if the machine allows it from the current one; returns whether it did.
  function enter(state, phase) {
    if (NEXT[state.phase].indexOf(phase) < 0) return false;
    state.phase = phase;
    state.status = STATUS[phase];
    state.computing = phase === "computing";
    return true;
  }

  function message(error) {
    return String(error && error.message ? error.message : error);
  }

  // Why this page cannot run the model, or null: env {protocol, webAssembly (the browser has
  // WebAssembly and BigInt64Array)}.
  function unavailableReason(env) {
    if (env.protocol === "file:") {
      return "This page was opened as a file, and browsers do not let a file:// page load " +
        "the model's files. Serve the book (make serve) to use this box; the explorer of " +
        "eight sentences above works as it is.";
    }
    if (!env.webAssembly) {
      return "This browser lacks WebAssembly, which the model needs; the explorer of eight " +
        "sentences above works as it is.";
    }
    return null;
  }

  // ---- events ---------------------------------------------------------------------------

  // The page is read: config (the box's data-config), env {protocol, webAssembly, cacheVisible}.
  function setUp(state, config, env) {
    state.config = config;
    state.cacheVisible = Boolean(env.cacheVisible);
    state.reason = unavailableReason(env);
    if (state.reason) enter(state, "unavailable");
  }

  // The browser's cache answered: it keeps `bytes` of the model's files already.
  function kept(state, bytes) {
    state.keptBytes = bytes;
  }

  // Whether the button starts a load now: not while one is under way or once it succeeded.
  function canLoad(state) {
    return NEXT[state.phase].indexOf("downloading") >= 0;
  }

  // The click: returns whether loading starts.
  function startLoad(state, now) {
    if (!enter(state, "downloading")) return false;
    state.loadStarted = now;
    state.error = null;
    state.progress = { network: 0, cache: 0 };
    return true;
  }

  // Bytes read so far, from the network and from the browser's cache.
  function progress(state, network, cache) {
    if (state.status !== "loading") return; // an error already said what happened
    state.progress = { network: network, cache: cache };
  }

  // Every file has arrived; the runtime builds the model's session.
  function downloaded(state, network, cache, now) {
    state.loadMs.download = now - state.loadStarted;
    state.loadBytes = { network: network, cache: cache };
    progress(state, network, cache);
    enter(state, "starting");
  }

  // The model is ready: info {vocabSize, unk} from the tokenizer.
  function loaded(state, info, now) {
    state.loadMs.session = now - state.loadStarted;
    state.vocabSize = info.vocabSize;
    state.unk = info.unk;
    enter(state, "loaded");
  }

  // The first sentence's maps are drawn.
  function firstMap(state, now) {
    state.firstMapMs = state.loadMs.firstMap = now - state.loadStarted;
  }

  // Loading failed; returns false when the model is loaded already (a sentence's failure was
  // said already).
  function loadFailed(state, error) {
    if (state.status === "ready") return false;
    state.error = message(error);
    return enter(state, "error");
  }

  // A sentence's run: the field holds only white space.
  function empty(state, sentence) {
    state.sentence = sentence;
    state.ids = state.tokens = state.attentions = state.shape = null;
    state.runs += 1;
    enter(state, "empty");
  }

  // A sentence's run starts.
  function startRun(state) {
    return enter(state, "computing");
  }

  // The model's answer for `sentence` (out: ids, tokens, truncatedFrom, unknownWords,
  // attentions, dims); the query row chosen stays inside the new sentence.
  function result(state, sentence, out) {
    state.sentence = sentence;
    state.ids = out.ids;
    state.tokens = out.tokens;
    state.truncatedFrom = out.truncatedFrom;
    state.unknownWords = out.unknownWords;
    state.attentions = out.attentions;
    state.shape = out.dims;
    state.selected.query = Math.min(state.selected.query, out.dims[2] - 1);
  }

  // Its maps are drawn, `ms` after the run started.
  function shown(state, ms) {
    state.lastRunMs = ms;
    state.runs += 1;
    enter(state, "shown");
  }

  function runFailed(state, error) {
    state.runError = message(error);
    enter(state, "failed");
  }

  // The second sentence's answer, or null when there is none to compare.
  function second(state, sentence, out) {
    state.second = out ? {
      sentence: sentence,
      ids: out.ids,
      tokens: out.tokens,
      truncatedFrom: out.truncatedFrom,
      attentions: out.attentions,
      shape: out.dims
    } : null;
  }

  // ---- the head, the query row, the scale ------------------------------------------------

  function select(state, layer, head) {
    state.selected.layer = layer;
    state.selected.head = head;
  }

  // Returns whether the query row changed.
  function chooseQuery(state, query) {
    if (query === state.selected.query) return false;
    state.selected.query = query;
    return true;
  }

  function perHead(state, on) {
    state.selected.perHead = on;
  }

  // The head view shows every one of H heads' lines at first.
  function showHeads(state, H) {
    state.shownHeads = [];
    for (var h = 0; h < H; h++) state.shownHeads.push(true);
  }

  function toggleHead(state, head) {
    state.shownHeads[head] = !state.shownHeads[head];
  }

  // "Hide all" while any head shows, "Show all" when none does.
  function toggleAllHeads(state) {
    var on = !state.shownHeads.some(Boolean);
    state.shownHeads = state.shownHeads.map(function () { return on; });
  }

  // ---- what the box shows ---------------------------------------------------------------

  // The status line, or null to leave the page's (empty) one.
  function statusText(state) {
    var total = state.config ? state.config.total : 0;
    switch (state.phase) {
      case "unavailable":
        return state.reason;
      case "downloading":
        return fetching.progressText(state.progress.network, state.progress.cache, total, state.cacheVisible);
      case "starting":
      case "loaded":
        return "Starting the model…";
      case "computing":
        return "Computing the attention of your sentence…";
      case "empty":
        return "Type a sentence in the box above to see its attention.";
      case "shown":
        return shownText(state);
      case "failed":
        return "The model could not read this text (" + state.runError + ").";
      case "error":
        return "The model could not be loaded (" + state.error + "). The explorer of eight " +
          "sentences above still works; press the button to try again.";
      default:
        return null;
    }
  }

  // "12 tokens, 6 layers × 12 heads, computed in 40 ms.", after the note of a cut text.
  function shownText(state) {
    var dims = state.shape;
    var cut = state.truncatedFrom
      ? model.truncationNote("Your text", state.truncatedFrom, state.config.maxTokens) + " "
      : "";
    return cut + dims[2] + " tokens, " + dims[0] + " layers × " + dims[1] + " heads, computed in " +
      Math.round(state.lastRunMs) + " ms.";
  }

  // The button's words before the click, or null to leave the page's ("Load the model (60.1 MB
  // download)"): less to download when this browser keeps some of the files already, "up to"
  // when the page cannot see the browser's cache.
  function buttonText(state) {
    if (state.phase !== "idle" || !state.config) return null;
    if (!state.cacheVisible) return fetching.buttonLabel(state.config.total, null);
    if (state.keptBytes > 0) return fetching.buttonLabel(state.config.total, state.keptBytes);
    return null;
  }

  // What the box's fixed parts show: status and button (text, or null to leave it); the button
  // disabled (unavailable), aria-disabled (loading or loaded: aria-disabled keeps the keyboard
  // focus, where disabled would drop it), hidden (loaded); the progress bar and its value; a run
  // under way (the views marked busy).
  function controls(state) {
    var total = state.config ? state.config.total : 0;
    return {
      status: statusText(state),
      button: buttonText(state),
      buttonDisabled: state.phase === "unavailable",
      buttonBusy: state.status === "loading" || state.status === "ready",
      buttonHidden: state.status === "ready",
      progressHidden: state.status !== "loading",
      progressValue: Math.min(state.progress.network + state.progress.cache, total),
      computing: state.computing
    };
  }

  var boxState = {
    STATUS: STATUS,
    NEXT: NEXT,
    create: create,
    enter: enter,
    unavailableReason: unavailableReason,
    setUp: setUp,
    kept: kept,
    canLoad: canLoad,
    startLoad: startLoad,
    progress: progress,
    downloaded: downloaded,
    loaded: loaded,
    firstMap: firstMap,
    loadFailed: loadFailed,
    empty: empty,
    startRun: startRun,
    result: result,
    shown: shown,
    runFailed: runFailed,
    second: second,
    select: select,
    chooseQuery: chooseQuery,
    perHead: perHead,
    showHeads: showHeads,
    toggleHead: toggleHead,
    toggleAllHeads: toggleAllHeads,
    statusText: statusText,
    buttonText: buttonText,
    controls: controls
  };
  ns.boxState = boxState;
  if (typeof module !== "undefined") module.exports = boxState;
})(globalThis);
