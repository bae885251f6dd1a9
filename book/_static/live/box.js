// The live attention box of chapter 09: all-MiniLM-L6-v2 run in the reader's browser.
//
// The page holds the box (book/_ext/attention_book/live_attention.py writes it: a text field, a
// button that states the download size) and loads, in this order, viridis.js (the colour
// table), drawing.js, head_view.js, fetching.js, model.js and this file, as classic scripts so
// that a page opened from disk still runs them. This file is the box: its DOM and events (the
// head view's too). Nothing downloads
// anything until the button is pressed; then model_worker.js fetches, from this book's own
// _static folder, ONNX Runtime's single-threaded WebAssembly build, the exported model and the
// tokenizer, and runs the model on every sentence typed, off the page's thread. Tokens are
// shown as text only (textContent, <option> text, canvas fillText), never as markup.
//
// window.liveAttention holds the modules (viridis, drawing, headView, fetching, model) and the
// box's state, read by the tests and the benchmark:
//   status: "idle" | "unavailable" | "loading" | "ready" | "error"; computing: a run under way
//   sentence, ids, tokens, truncatedFrom, unknownWords, attentions (Float32Array [L, H, T, T]),
//   shape [L, H, T, T] (the model's output: L layers, H heads)
//   runs (sentences computed), lastRunMs (tokenise + model + drawing), firstMapMs (from the click)
//   inWorker: whether the model runs in a worker (null before the click)
//   keptBytes: bytes of the model's files this browser had kept before the click (null: unknown)
(function (root) {
  "use strict";

  var live = (root.liveAttention = root.liveAttention || {});
  var drawing = live.drawing;
  var headView = live.headView;
  var fetching = live.fetching;
  var model = live.model;
  var table = live.viridis;
  var here = new URL(".", document.currentScript.src); // .../_static/live/
  var vendor = new URL("../vendor/", here);

  var state = Object.assign(live, {
    status: "idle",
    computing: false,
    sentence: null,
    ids: null,
    tokens: null,
    truncatedFrom: null,
    unknownWords: [],
    attentions: null,
    shape: null,
    runs: 0,
    lastRunMs: null,
    firstMapMs: null,
    second: null, // the second sentence when comparing: sentence, ids, tokens, truncatedFrom, attentions, shape
    difference: null, // second minus first for the chosen head, when both have T tokens
    loadMs: {}, // from the click: download (all files), session (model ready), firstMap
    loadBytes: null, // bytes read on the click: network, cache
    inWorker: null,
    keptBytes: null,
    error: null
  });

  // The box's fixed parts (from the page) and the views built on the first result.
  var box = null;
  var view = null;
  var selected = { layer: 0, head: 0, query: -1, perHead: false };
  var shownHeads = null; // the head view's toggles: shownHeads[h] true when head h's lines show

  // A colour of the box's theme (live_attention.css: custom properties that follow the theme's
  // light or dark mode), as [r, g, b].
  function themeColour(name, fallback) {
    var text = getComputedStyle(box.root).getPropertyValue(name);
    return drawing.parseColour(text) || fallback;
  }

  function el(tag, props, children) {
    var node = document.createElement(tag);
    Object.keys(props || {}).forEach(function (key) {
      if (key === "text") node.textContent = props[key];
      else if (key === "className") node.className = props[key];
      else node.setAttribute(key, props[key]);
    });
    (children || []).forEach(function (child) { node.appendChild(child); });
    return node;
  }

  function option(value, text) {
    var node = document.createElement("option");
    node.value = String(value);
    node.textContent = text;
    return node;
  }

  function say(text) {
    box.status.textContent = text;
  }

  function deferred() {
    var d = {};
    d.promise = new Promise(function (resolve, reject) { d.resolve = resolve; d.reject = reject; });
    return d;
  }

  // ---- the model, in a worker --------------------------------------------------------------

  // A connection to the engine (model.js): send(message); every answer goes to onMessage.
  function connect(onMessage) {
    var queue = [];
    var target = null;
    var worker = null;

    // Where a worker cannot start (a browser without workers, or one that refuses this
    // script), the same engine runs here, on the page's thread: the same code and numbers, but
    // the page waits while the model starts and computes.
    function onThisThread() {
      state.inWorker = false;
      var engine = model.createEngine({
        post: onMessage,
        importModule: function (url) { return import(url); },
        openCache: function () { return fetching.openCache(root); },
        dropStale: fetching.dropStale,
        fetchBytes: function (url, cache, onBytes) { return fetching.fetchBytes(url, cache, onBytes); },
        now: function () { return performance.now(); }
      });
      target = engine.handle;
      queue.splice(0).forEach(target);
    }

    try {
      worker = new Worker(new URL("model_worker.js", here).href);
    } catch {
      onThisThread();
    }
    if (worker) {
      worker.onmessage = function (event) {
        if (event.data.type !== "started") return onMessage(event.data);
        state.inWorker = true;
        target = function (message) { worker.postMessage(message); };
        queue.splice(0).forEach(target);
      };
      worker.onerror = function (event) {
        event.preventDefault();
        if (target) {
          onMessage({ type: "failed", id: null, during: "worker", message: event.message || "the model's worker stopped" });
          return;
        }
        worker.terminate();
        worker = null;
        onThisThread();
      };
    }
    return {
      send: function (message) { if (target) target(message); else queue.push(message); },
      close: function () { if (worker) worker.terminate(); }
    };
  }

  var connection = null;
  var loading = null;
  var waiting = {}; // run id -> deferred
  var nextId = 1;
  var loadStarted = 0;

  function onMessage(message) {
    if (message.type === "progress") {
      showProgress(message.network, message.cache);
    } else if (message.type === "stage") {
      state.loadMs.download = performance.now() - loadStarted;
      state.loadBytes = { network: message.network, cache: message.cache };
      showProgress(message.network, message.cache);
      say("Starting the model…");
    } else if (message.type === "loaded") {
      loading.resolve(message);
    } else if (message.type === "result") {
      waiting[message.id].resolve(message);
      delete waiting[message.id];
    } else if (message.type === "failed") {
      var error = new Error(message.message);
      if (message.id !== null && waiting[message.id]) {
        waiting[message.id].reject(error);
        delete waiting[message.id];
      } else if (message.during === "load") {
        loading.reject(error);
      } else {
        Object.keys(waiting).forEach(function (id) { waiting[id].reject(error); delete waiting[id]; });
        if (state.status === "loading") loading.reject(error);
      }
    }
  }

  function runModel(text) {
    var id = nextId++;
    waiting[id] = deferred();
    connection.send({ type: "run", id: id, text: text, maxTokens: box.config.maxTokens });
    return waiting[id].promise;
  }

  // ---- loading -------------------------------------------------------------------------

  function cacheVisible() {
    return Boolean(root.caches && root.isSecureContext);
  }

  function showProgress(network, cache) {
    if (state.status !== "loading") return; // an error already said what happened
    box.progress.value = Math.min(network + cache, box.config.total);
    say(fetching.progressText(network, cache, box.config.total, cacheVisible()));
  }

  // The bytes of the page's downloads ({url: bytes}), by their URL.
  function sizesByUrl() {
    var sizes = {};
    Object.keys(box.config.sizes).forEach(function (path) {
      sizes[new URL("../" + path, here).href] = box.config.sizes[path];
    });
    return sizes;
  }

  // Before the click: what does this browser keep already? The button says what remains.
  function checkKept() {
    if (!cacheVisible()) {
      box.button.textContent = fetching.buttonLabel(box.config.total, null);
      return Promise.resolve();
    }
    return fetching.openCache(root)
      .then(function (cache) { return fetching.cachedBytes(cache, sizesByUrl()); })
      .then(function (kept) {
        state.keptBytes = kept;
        if (kept > 0 && state.status === "idle") box.button.textContent = fetching.buttonLabel(box.config.total, kept);
      });
  }

  function load() {
    // aria-disabled, not disabled: a disabled button would drop the keyboard focus.
    if (box.button.getAttribute("aria-disabled") === "true") return;
    loadStarted = performance.now();
    box.button.setAttribute("aria-disabled", "true");
    box.progress.hidden = false;
    box.progress.value = 0;
    state.status = "loading";
    state.error = null;
    showProgress(0, 0);
    var ortDir = new URL("onnxruntime-web/", vendor);
    if (connection) connection.close();
    connection = connect(onMessage);
    loading = deferred();
    connection.send({
      type: "load",
      urls: {
        ort: new URL("ort.wasm.min.mjs", ortDir).href,
        ortDir: ortDir.href,
        wasm: new URL("ort-wasm-simd-threaded.wasm", ortDir).href,
        tokenizers: new URL("tokenizers/tokenizers.min.mjs", vendor).href,
        model: new URL(box.config.model, here).href,
        tokenizer: new URL("tokenizer.json", here).href,
        tokenizerConfig: new URL("tokenizer_config.json", here).href
      }
    });
    loading.promise
      .then(function (info) {
        state.loadMs.session = performance.now() - loadStarted;
        box.vocabSize = info.vocabSize;
        box.unk = info.unk;
        box.progress.hidden = true;
        // The button goes: keep keyboard focus in the box, on the sentence.
        if (document.activeElement === box.button) box.field.focus();
        box.button.hidden = true;
        state.status = "ready";
        listen();
        return compute();
      })
      .then(function () {
        state.firstMapMs = state.loadMs.firstMap = performance.now() - loadStarted;
      })
      .catch(function (error) {
        if (state.status === "ready") return; // a sentence's failure was said already
        state.status = "error";
        state.error = String(error && error.message ? error.message : error);
        box.progress.hidden = true;
        box.button.removeAttribute("aria-disabled");
        say(
          "The model could not be loaded (" + state.error + "). The explorer of eight " +
          "sentences above still works; press the button to try again."
        );
      });
  }

  var listening = false;
  var typing = null;

  function listen() {
    if (listening) return;
    listening = true;
    box.field.addEventListener("input", later);
    window.addEventListener("resize", onResize);
  }

  function later() {
    clearTimeout(typing);
    typing = setTimeout(compute, 250);
  }

  // ---- computing -----------------------------------------------------------------------

  // One run at a time; a request made while one is under way is run after it, once, on the
  // text as it is then.
  var running = Promise.resolve();
  var queued = false;

  function compute() {
    if (queued) return running;
    queued = true;
    running = running.then(function () {
      queued = false;
      return computeFirst().then(computeSecond);
    }).catch(function (error) {
      setComputing(false);
      say("The model could not read this text (" + (error && error.message ? error.message : error) + ").");
    });
    return running;
  }

  function setComputing(on) {
    state.computing = on;
    box.root.classList.toggle("live-computing", on);
    box.views.setAttribute("aria-busy", on ? "true" : "false");
  }

  function computeFirst() {
    var sentence = box.field.value;
    if (sentence.trim() === "") {
      state.sentence = sentence;
      state.ids = state.tokens = state.attentions = state.shape = null;
      state.runs += 1;
      if (view) view.body.hidden = true;
      say("Type a sentence in the box above to see its attention.");
      return Promise.resolve();
    }
    var started = performance.now();
    setComputing(true);
    say("Computing the attention of your sentence…");
    return runModel(sentence).then(function (out) {
      state.sentence = sentence;
      state.ids = out.ids;
      state.tokens = out.tokens;
      state.truncatedFrom = out.truncatedFrom;
      state.unknownWords = out.unknownWords;
      state.attentions = out.attentions;
      state.shape = out.dims;
      if (!view) buildViews(out.dims);
      box.views.hidden = false;
      view.body.hidden = false;
      selected.query = Math.min(selected.query, out.dims[2] - 1);
      var note = model.unknownNote(out.tokens, out.unknownWords, box.unk, box.vocabSize);
      view.unknown.hidden = !note;
      view.unknown.textContent = note || "";
      return draw();
    }).then(function () {
      var dims = state.shape;
      state.lastRunMs = performance.now() - started;
      state.runs += 1;
      setComputing(false);
      say(
        (state.truncatedFrom ? model.truncationNote("Your text", state.truncatedFrom, box.config.maxTokens) + " " : "") +
        dims[2] + " tokens, " + dims[0] + " layers × " + dims[1] + " heads, computed in " +
        Math.round(state.lastRunMs) + " ms."
      );
    });
  }

  function computeSecond() {
    var text = view ? view.secondField.value : "";
    if (!view || !view.compareBox.checked || text.trim() === "") {
      state.second = null;
      if (view) drawCompare();
      return Promise.resolve();
    }
    return runModel(text).then(function (out) {
      state.second = {
        sentence: text,
        ids: out.ids,
        tokens: out.tokens,
        truncatedFrom: out.truncatedFrom,
        attentions: out.attentions,
        shape: out.dims
      };
      drawCompare();
    });
  }

  // ---- views ---------------------------------------------------------------------------

  // A map's scrolling box inside a frame that shades the edges hiding more of the map, and a
  // line under it that says the map scrolls (shown only when it does).
  function scroller(canvas, label) {
    var scroll = el("div", { className: "live-large", tabindex: "0", role: "img", "aria-label": label }, [canvas]);
    var frame = el("div", { className: "live-frame" }, [scroll]);
    var hint = el("p", {
      className: "live-scroll-hint",
      text: "↔ This map is wider than the box: scroll it sideways (swipe, or focus it and use the arrow keys)."
    });
    hint.hidden = true;
    scroll.addEventListener("scroll", function () { showOverflow(scroll); }, { passive: true });
    return { scroll: scroll, frame: frame, hint: hint, canvas: canvas };
  }

  function showOverflow(scroll) {
    var o = drawing.overflow(scroll.scrollLeft, scroll.scrollWidth, scroll.clientWidth);
    var frame = scroll.parentNode;
    frame.classList.toggle("live-more-left", o.left);
    frame.classList.toggle("live-more-right", o.right);
    frame.nextSibling.hidden = !o.scrolls;
  }

  function buildViews(dims) {
    var L = dims[0];
    var H = dims[1];
    var layerSelect = el("select", { id: "live-layer" });
    var headSelect = el("select", { id: "live-head" });
    for (var l = 0; l < L; l++) layerSelect.appendChild(option(l, String(l)));
    for (var h = 0; h < H; h++) headSelect.appendChild(option(h, String(h)));
    var querySelect = el("select", { id: "live-query" });
    var scaleBox = el("input", { type: "checkbox", id: "live-per-head" });
    layerSelect.addEventListener("change", function () { select(+layerSelect.value, selected.head); });
    headSelect.addEventListener("change", function () { select(selected.layer, +headSelect.value); });
    querySelect.addEventListener("change", function () { selected.query = +querySelect.value; drawLarge(); drawHeadView(); });
    scaleBox.addEventListener("change", function () { selected.perHead = scaleBox.checked; redraw(); });

    var controls = el("div", { className: "live-controls" }, [
      el("span", {}, [el("label", { for: "live-layer", text: "Layer " }), layerSelect]),
      el("span", {}, [el("label", { for: "live-head", text: "Head " }), headSelect]),
      el("span", {}, [el("label", { for: "live-query", text: "Query row " }), querySelect]),
      el("span", {}, [scaleBox, el("label", { for: "live-per-head", text: " Scale each head to its own maximum" })])
    ]);

    // The L x H grid: one button per head, arrow keys move between them (one tab stop).
    var grid = el("div", { className: "live-grid", role: "group", "aria-label": drawing.gridLabel(dims) });
    grid.style.gridTemplateColumns = "1.2rem repeat(" + H + ", minmax(0, 1fr))";
    grid.appendChild(el("span", { className: "live-corner", "aria-hidden": "true", text: "" }));
    for (h = 0; h < H; h++) grid.appendChild(el("span", { className: "live-axis", "aria-hidden": "true", text: String(h) }));
    var cells = [];
    for (l = 0; l < L; l++) {
      grid.appendChild(el("span", { className: "live-axis", "aria-hidden": "true", text: String(l) }));
      for (h = 0; h < H; h++) {
        var canvas = el("canvas", { width: "1", height: "1" });
        var cell = el("button", {
          type: "button",
          className: "live-cell",
          "aria-label": "layer " + l + ", head " + h,
          "aria-pressed": "false",
          tabindex: "-1"
        }, [canvas]);
        cell.dataset.layer = l;
        cell.dataset.head = h;
        cell.addEventListener("click", onCell);
        cell.addEventListener("keydown", onCellKey);
        grid.appendChild(cell);
        cells.push({ button: cell, canvas: canvas, layer: l, head: h });
      }
    }

    var compareBox = el("input", { type: "checkbox", id: "live-compare" });
    var secondField = el("textarea", { id: "live-text-b", className: "live-text", rows: "2", spellcheck: "false" });
    secondField.value = "Man bites dog.";
    var secondLabel = el("label", { for: "live-text-b", className: "live-label", text: "Second sentence" });
    var secondNote = el("p", { className: "live-note", role: "status" });
    secondNote.hidden = true;
    var second = scroller(el("canvas", { className: "live-large-canvas" }), "");
    var diff = scroller(el("canvas", { className: "live-large-canvas" }), "");
    var secondTitle = el("p", { className: "live-heading" });
    var diffText = el("p", { className: "live-readout" });
    var compareViews = el("div", { className: "live-compare-views" }, [
      secondTitle, second.frame, second.hint,
      el("p", { className: "live-heading", text: "Difference, position by position" }), diff.frame, diff.hint, diffText
    ]);
    compareViews.hidden = true;
    var compareInput = el("div", { className: "live-compare-input" }, [secondLabel, secondField, secondNote]);
    compareInput.hidden = true;
    compareBox.addEventListener("change", function () {
      compareInput.hidden = !compareBox.checked;
      compute();
    });
    secondField.addEventListener("input", later);

    var large = scroller(el("canvas", { className: "live-large-canvas" }), "");
    var readout = el("p", { className: "live-readout" });
    var legendBar = el("canvas", { width: "200", height: "14", "aria-hidden": "true" });
    var legendLow = el("span", { className: "live-legend-low", "aria-hidden": "true", text: "0" });
    var legendHigh = el("span", { className: "live-legend-high", "aria-hidden": "true", text: "1.00" });
    var legend = el("div", { className: "live-legend", role: "img" }, [legendLow, legendBar, legendHigh]);
    var hv = buildHeadView(H);
    var unknown = el("p", { className: "live-note live-unknown" });
    unknown.hidden = true;
    var title = el("p", { className: "live-heading live-large-title" });
    large.canvas.addEventListener("mousemove", onHover);
    large.canvas.addEventListener("mouseleave", function () { readout.textContent = rowText(); });

    var body = el("div", { className: "live-body" }, [
      unknown,
      controls,
      el("p", {
        className: "live-heading",
        text: "All heads (rows: layers 0–" + (L - 1) + "; columns: heads 0–" + (H - 1) + ")"
      }),
      grid,
      title,
      large.frame,
      large.hint,
      legend,
      readout,
      hv.root,
      el("div", { className: "live-compare" }, [
        el("span", {}, [compareBox, el("label", { for: "live-compare", text: " Compare with a second sentence" })]),
        compareInput,
        compareViews
      ])
    ]);
    box.views.appendChild(body);
    view = {
      dims: dims.slice(0, 2),
      body: body,
      unknown: unknown,
      layerSelect: layerSelect,
      headSelect: headSelect,
      querySelect: querySelect,
      cells: cells,
      large: large,
      title: title,
      legend: legend,
      legendBar: legendBar,
      legendHigh: legendHigh,
      readout: readout,
      hv: hv,
      compareBox: compareBox,
      secondField: secondField,
      secondNote: secondNote,
      second: second,
      secondTitle: secondTitle,
      diff: diff,
      diffText: diffText,
      compareViews: compareViews,
      drawnWidth: 0,
      geometry: null
    };
    select(0, 0);
    // The theme's switch: the canvases and the head view's shades take the new mode's colours.
    new MutationObserver(function () {
      if (state.attentions && !view.body.hidden) drawLarge();
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  function onCell(event) {
    var cell = event.currentTarget;
    select(+cell.dataset.layer, +cell.dataset.head);
  }

  function onCellKey(event) {
    var to = drawing.gridMove(view.dims, selected.layer, selected.head, event.key);
    if (!to) return;
    event.preventDefault();
    select(to.layer, to.head);
    view.cells[to.layer * view.dims[1] + to.head].button.focus();
  }

  function select(layer, head) {
    selected.layer = layer;
    selected.head = head;
    view.layerSelect.value = String(layer);
    view.headSelect.value = String(head);
    view.cells.forEach(function (c) {
      var on = c.layer === layer && c.head === head;
      c.button.setAttribute("aria-pressed", on ? "true" : "false");
      c.button.tabIndex = on ? 0 : -1;
    });
    if (state.attentions) drawLarge();
  }

  function top(weights, dims, layer, head) {
    return selected.perHead ? drawing.headMax(weights, dims, layer, head) : 1;
  }

  function paintCell(cell) {
    var dims = state.shape;
    var T = dims[2];
    cell.canvas.width = T;
    cell.canvas.height = T;
    var ctx = cell.canvas.getContext("2d");
    var image = ctx.createImageData(T, T);
    drawing.paintHead(image.data, state.attentions, dims, cell.layer, cell.head,
      top(state.attentions, dims, cell.layer, cell.head), table);
    ctx.putImageData(image, 0, 0);
  }

  // The next task of the page's event loop: work split across tasks lets the page answer in
  // between (a click, a key, a repaint).
  function nextTask() {
    return new Promise(function (resolve) { setTimeout(resolve, 0); });
  }

  // Every map again, in tasks of their own: the query list, the large map, then the grid in
  // slices of about 30 ms (72 maps of a 512-token sentence are 19 million pixels).
  var drawn = 0; // which drawing is the latest: an older one stops at its next step

  function draw() {
    var token = ++drawn;
    var rows = document.createDocumentFragment();
    rows.appendChild(option(-1, "none"));
    state.tokens.forEach(function (t, i) { rows.appendChild(option(i, i + ": " + t)); });
    view.querySelect.replaceChildren(rows);
    view.querySelect.value = String(selected.query);
    return nextTask().then(function () {
      if (token !== drawn) return;
      drawLarge();
      return paintGrid(token);
    });
  }

  // The large map now, the grid after (the same sentence on another scale).
  function redraw() {
    drawLarge();
    return paintGrid(++drawn);
  }

  function paintGrid(token) {
    var i = 0;
    return new Promise(function (resolve) {
      function slice() {
        if (token !== drawn) return resolve();
        var until = performance.now() + 30;
        while (i < view.cells.length && performance.now() < until) paintCell(view.cells[i++]);
        if (i < view.cells.length) setTimeout(slice, 0);
        else resolve();
      }
      setTimeout(slice, 0);
    });
  }

  var pixelCanvas = null;

  // One map on a canvas: paint(pixels) fills T x T RGBA pixels; the tokens on both axes
  // (drawn as text), the query row outlined; where the cells are large enough, number(q, k) (its
  // text) written in each, in black or white to suit the cell's colour. Returns the geometry.
  function drawMap(target, tokens, paint, query, number) {
    var canvas = target.canvas;
    var T = tokens.length;
    var font = "12px system-ui, sans-serif";
    var ctx = canvas.getContext("2d");
    ctx.font = font;
    var labelWidth = 0;
    tokens.forEach(function (t) { labelWidth = Math.max(labelWidth, ctx.measureText(t).width); });
    var g = drawing.mapLayout(T, labelWidth, target.scroll.clientWidth);
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(g.size * ratio);
    canvas.height = Math.ceil(g.size * ratio);
    canvas.style.width = g.size + "px";
    canvas.style.height = g.size + "px";
    ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    var paper = themeColour("--live-bg", [255, 255, 255]);
    ctx.fillStyle = drawing.css(paper);
    ctx.fillRect(0, 0, g.size, g.size);
    // The cells: one pixel each on a T x T canvas, scaled up without smoothing.
    pixelCanvas = pixelCanvas || document.createElement("canvas");
    pixelCanvas.width = T;
    pixelCanvas.height = T;
    var pctx = pixelCanvas.getContext("2d");
    var image = pctx.createImageData(T, T);
    paint(image.data);
    pctx.putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(pixelCanvas, g.margin, g.margin, g.cell * T, g.cell * T);
    if (number && drawing.showsNumbers(g)) {
      ctx.font = "10px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      var px = image.data;
      for (var q = 0; q < T; q++) {
        for (var k = 0; k < T; k++) {
          var i = 4 * (q * T + k);
          ctx.fillStyle = drawing.css(drawing.ink([px[i], px[i + 1], px[i + 2]]));
          ctx.fillText(number(q, k), g.margin + (k + 0.5) * g.cell, g.margin + (q + 0.5) * g.cell);
        }
      }
    }
    if (query >= 0 && query < T) {
      ctx.strokeStyle = drawing.css(themeColour("--live-chosen", [214, 39, 40]));
      ctx.lineWidth = 2;
      ctx.strokeRect(g.margin + 1, g.margin + query * g.cell + 1, g.cell * T - 2, g.cell - 2);
    }
    ctx.font = font;
    ctx.fillStyle = drawing.css(themeColour("--live-ink", [31, 35, 40]));
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    if (g.labelled) {
      tokens.forEach(function (t, i) { ctx.fillText(clip(ctx, t), g.margin - 4, g.margin + (i + 0.5) * g.cell); });
      ctx.save();
      ctx.rotate(-Math.PI / 2); // column labels read upwards, ending above their column
      ctx.textAlign = "left";
      tokens.forEach(function (t, i) { ctx.fillText(clip(ctx, t), -(g.margin - 4), g.margin + (i + 0.5) * g.cell); });
      ctx.restore();
    }
    showOverflow(target.scroll);
    return g;
  }

  function clip(ctx, text) {
    if (ctx.measureText(text).width <= 160) return text;
    while (text.length > 1 && ctx.measureText(text + "…").width > 160) text = text.slice(0, -1);
    return text + "…";
  }

  // The large map: one head, the tokens on both axes.
  function drawLarge() {
    var dims = state.shape;
    var layer = selected.layer;
    var head = selected.head;
    var scale = top(state.attentions, dims, layer, head);
    view.drawnWidth = view.large.scroll.clientWidth;
    view.geometry = drawMap(view.large, state.tokens, function (pixels) {
      drawing.paintHead(pixels, state.attentions, dims, layer, head, scale, table);
    }, selected.query, function (q, k) {
      return drawing.cellNumber(drawing.weightAt(state.attentions, dims, layer, head, q, k));
    });
    view.title.textContent = "Layer " + layer + ", head " + head + ": rows are queries, columns keys";
    view.large.scroll.setAttribute(
      "aria-label",
      "Attention of layer " + layer + ", head " + head + " over " + dims[2] + " tokens; " +
      "choose a query row to read its weights"
    );
    drawLegend(scale);
    view.readout.textContent = rowText();
    drawHeadView();
    drawCompare();
  }

  // ---- the head view (BertViz's) ---------------------------------------------------------

  // The head view of the selected layer: query tokens on the left (buttons: pointing at one or
  // focusing it chooses it as the query; arrow keys move between them, one tab stop), keys on
  // the right, between them an SVG of lines in each head's colour, as strong as the weight
  // (head_view.js), and as text, the keys each head weighs most for the chosen query.
  var ROW = 22; // px, .live-hv's --live-row
  var ALL_PAIRS = 6000; // before a query is chosen, every query's lines are drawn up to this many

  function buildHeadView(H) {
    shownHeads = [];
    var toggles = el("div", { className: "live-hv-toggles", role: "group", "aria-label": "Heads shown in the head view" });
    var buttons = [];
    for (var h = 0; h < H; h++) {
      shownHeads.push(true);
      var b = el("button", { type: "button", className: "live-hv-toggle", "aria-pressed": "true", "aria-label": "head " + h, text: String(h) });
      b.style.setProperty("--live-head", headView.headColour(h));
      b.dataset.head = h;
      b.addEventListener("click", function (event) {
        var k = +event.currentTarget.dataset.head;
        shownHeads[k] = !shownHeads[k];
        drawHeadView();
      });
      toggles.appendChild(b);
      buttons.push(b);
    }
    var all = el("button", { type: "button", className: "live-hv-all", text: "Hide all" });
    all.addEventListener("click", function () {
      var on = !shownHeads.some(Boolean);
      shownHeads = shownHeads.map(function () { return on; });
      drawHeadView();
    });
    toggles.appendChild(all);
    var queries = el("div", { className: "live-hv-column live-hv-queries", role: "group", "aria-label": "Query tokens" });
    var keys = el("div", { className: "live-hv-column live-hv-keys", "aria-hidden": "true" });
    var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "live-hv-lines");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("preserveAspectRatio", "none");
    var grid = el("div", { className: "live-hv" }, [queries, svg, keys]);
    var scroll = el("div", { className: "live-hv-scroll" }, [grid]);
    var heading = el("p", { className: "live-heading live-hv-heading" });
    var caption = el("p", { className: "live-hv-caption" });
    var summary = el("ul", { className: "live-hv-summary" });
    var root = el("div", { className: "live-headview", role: "region", "aria-label": "Head view" }, [
      heading,
      el("p", {
        className: "live-note",
        text: "Point at a token on the left, or focus it (Tab, then the arrow keys), to see which " +
          "tokens it attends to: one line per head and key, in the head's colour, as strong as " +
          "the weight. The buttons show or hide each head's lines."
      }),
      toggles,
      scroll,
      caption,
      summary
    ]);
    queries.addEventListener("mouseover", function (event) {
      var t = event.target.closest(".live-hv-token");
      if (t) chooseQuery(+t.dataset.index);
    });
    queries.addEventListener("focusin", function (event) {
      var t = event.target.closest(".live-hv-token");
      if (t) chooseQuery(+t.dataset.index);
    });
    queries.addEventListener("keydown", function (event) {
      var T = state.shape ? state.shape[2] : 0;
      var to = headView.move(T, Math.max(0, selected.query), event.key);
      if (to === null) return;
      event.preventDefault();
      var target = queries.children[to];
      if (target) {
        target.focus();
        target.scrollIntoView({ block: "nearest" });
      }
    });
    return {
      root: root, heading: heading, toggles: buttons, all: all, queries: queries, keys: keys,
      svg: svg, caption: caption, summary: summary, drawnFor: null, drawnKey: "", tokensFor: null
    };
  }

  // A query chosen in the head view: the query row of the whole box (the list, the large map's
  // outline, the readout) follows it; the large map is drawn again once the pointer rests
  // (120 ms), not for every token it crosses (a 512-token map takes a while to draw).
  var largeLater = null;

  function chooseQuery(q) {
    if (q === selected.query) return;
    selected.query = q;
    view.querySelect.value = String(q);
    view.readout.textContent = rowText();
    drawHeadView();
    clearTimeout(largeLater);
    largeLater = setTimeout(function () { if (state.attentions) drawLarge(); }, 120);
  }

  function drawHeadView() {
    if (!view || !state.attentions) return;
    var hv = view.hv;
    var dims = state.shape;
    var T = dims[2];
    var H = dims[1];
    var layer = selected.layer;
    var q = selected.query;
    var theme = document.documentElement.getAttribute("data-theme") || "";
    var key = [layer, q, shownHeads.map(Number).join(""), theme].join("|");
    if (hv.drawnFor === state.attentions && hv.drawnKey === key) return;
    var fresh = hv.tokensFor !== state.attentions;
    hv.drawnFor = state.attentions;
    hv.drawnKey = key;
    if (fresh) {
      hv.tokensFor = state.attentions;
      var left = document.createDocumentFragment();
      var right = document.createDocumentFragment();
      state.tokens.forEach(function (t, i) {
        var b = el("button", { type: "button", className: "live-hv-token", tabindex: "-1", "aria-pressed": "false", text: t });
        b.setAttribute("aria-label", "query " + i + ": " + t);
        b.dataset.index = i;
        left.appendChild(b);
        var k = el("span", { className: "live-hv-token", text: t });
        k.dataset.index = i;
        right.appendChild(k);
      });
      hv.queries.replaceChildren(left);
      hv.keys.replaceChildren(right);
    }
    var shownCount = shownHeads.filter(Boolean).length;
    hv.toggles.forEach(function (b, h) { b.setAttribute("aria-pressed", shownHeads[h] ? "true" : "false"); });
    hv.all.textContent = shownCount ? "Hide all" : "Show all";
    hv.heading.textContent = "Head view: layer " + layer + ", its " + H + " heads, one colour each";

    // The lines: x from 0 to 100 in the SVG's units, stretched to its column (their widths in
    // px, unstretched); y in px, one row of ROW px per token.
    var g = headView.layout(T, 0, { rowHeight: ROW, gap: 100, pad: 0 });
    hv.svg.setAttribute("viewBox", "0 0 100 " + g.height);
    hv.svg.setAttribute("height", String(g.height));
    var lines = [];
    var tooMany = q < 0 && T * T * shownCount > ALL_PAIRS;
    // Lines under 0.001 (0.01 past 128 tokens, where there are thousands) are left out: their
    // opacity is their weight, so they would not show.
    if (!tooMany) lines = headView.lines(state.attentions, dims, layer, q, g, shownHeads, T > 128 ? 0.01 : 0.001);
    var frag = document.createDocumentFragment();
    lines.forEach(function (l) {
      var line = document.createElementNS("http://www.w3.org/2000/svg", "line");
      line.setAttribute("x1", l.x1);
      line.setAttribute("y1", l.y1);
      line.setAttribute("x2", l.x2);
      line.setAttribute("y2", l.y2);
      line.setAttribute("stroke", l.colour);
      line.setAttribute("stroke-opacity", l.opacity.toFixed(3));
      line.setAttribute("stroke-width", l.width.toFixed(2));
      line.setAttribute("vector-effect", "non-scaling-stroke");
      line.setAttribute("data-head", l.head);
      line.setAttribute("data-query", l.query);
      line.setAttribute("data-key", l.key);
      line.setAttribute("data-weight", String(l.weight));
      frag.appendChild(line);
    });
    hv.svg.replaceChildren(frag);

    // The query chosen (one tab stop: it, or the first token); the keys shaded by their mean
    // weight over the heads shown, their ink black or white to suit the shade (drawing.ink).
    var focusAt = q >= 0 ? q : 0;
    Array.prototype.forEach.call(hv.queries.children, function (b, i) {
      b.setAttribute("aria-pressed", i === q ? "true" : "false");
      b.tabIndex = i === focusAt ? 0 : -1;
    });
    var paper = themeColour("--live-bg", [255, 255, 255]);
    var shade = themeColour("--live-shade", [31, 119, 180]);
    var means = headView.keyShade(state.attentions, dims, layer, q, shownHeads);
    Array.prototype.forEach.call(hv.keys.children, function (k, i) {
      if (q < 0 || !shownCount) {
        k.style.background = "";
        k.style.color = "";
        return;
      }
      var bg = drawing.mix(paper, shade, means[i]);
      k.style.background = drawing.css(bg);
      k.style.color = drawing.css(drawing.ink(bg));
    });

    // The text alternative.
    hv.caption.textContent = tooMany
      ? "Point at a token on the left, or focus it, to draw its lines (" + T + " tokens are too many to draw every query's lines at once)."
      : q < 0
        ? "Every query's lines are drawn; point at a token on the left, or focus it, to see its own."
        : headView.caption(state.tokens, layer, q, shownCount, H) + ":";
    var items = document.createDocumentFragment();
    headView.summary(state.attentions, dims, state.tokens, layer, q, shownHeads, 3).forEach(function (s) {
      var li = el("li", { text: s.text });
      li.style.setProperty("--live-head", headView.headColour(s.head));
      items.appendChild(li);
    });
    hv.summary.replaceChildren(items);
  }

  // ---- two sentences side by side --------------------------------------------------------

  function drawCompare() {
    var b = state.second;
    var on = view.compareBox.checked;
    var cut = on && b && b.truncatedFrom;
    view.secondNote.hidden = !cut;
    view.secondNote.textContent = cut ? model.truncationNote("The second sentence", b.truncatedFrom, box.config.maxTokens) : "";
    if (!on || !b || !b.attentions || !state.attentions) {
      view.compareViews.hidden = true;
      return;
    }
    view.compareViews.hidden = false;
    var layer = selected.layer;
    var head = selected.head;
    var T = b.shape[2];
    var scale = top(b.attentions, b.shape, layer, head);
    drawMap(view.second, b.tokens, function (pixels) {
      drawing.paintHead(pixels, b.attentions, b.shape, layer, head, scale, table);
    }, -1, function (q, k) {
      return drawing.cellNumber(drawing.weightAt(b.attentions, b.shape, layer, head, q, k));
    });
    view.secondTitle.textContent = "Second sentence, layer " + layer + ", head " + head;
    view.second.scroll.setAttribute("aria-label", "Attention of layer " + layer + ", head " + head +
      " in the second sentence, " + T + " tokens");
    var d = drawing.difference(state.attentions, state.shape, b.attentions, b.shape, layer, head);
    state.difference = d;
    if (!d) {
      view.diff.frame.hidden = true;
      view.diff.hint.hidden = true;
      view.diffText.textContent = "The difference is drawn for two sentences of the same number " +
        "of tokens (here " + state.shape[2] + " and " + T + "), such as the same words in another order.";
      return;
    }
    var range = selected.perHead ? (d.largest || 1) : 1;
    view.diff.frame.hidden = false;
    drawMap(view.diff, b.tokens.map(function (t, j) {
      return t === state.tokens[j] ? t : state.tokens[j] + " / " + t;
    }), function (pixels) {
      drawing.paintMap(pixels, T, function (q, k) { return drawing.diverging(d.values[q * T + k] / range); });
    }, -1, function (q, k) { return drawing.cellNumber(d.values[q * T + k], true); });
    view.diff.scroll.setAttribute("aria-label", "Second sentence minus first, layer " + layer +
      ", head " + head + "; largest change " + d.largest.toFixed(2));
    view.diffText.textContent = "Second minus first, cell by cell: the query and key at the same " +
      "positions, whichever words they hold. Red where the second sentence puts more " +
      "weight, blue where less, white where the same (scale ±" + range.toFixed(2) + "). " +
      "Largest change in this head: " + d.largest.toFixed(2) + ".";
  }

  // The colour scale: a bar of 200 colours, its ends as text (in the theme's ink).
  function drawLegend(scale) {
    var canvas = view.legendBar;
    var ctx = canvas.getContext("2d");
    for (var x = 0; x < 200; x++) {
      var c = drawing.colour(x, 199, table);
      ctx.fillStyle = "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
      ctx.fillRect(x, 0, 1, 14);
    }
    view.legendHigh.textContent = scale.toFixed(2);
    view.legend.setAttribute("aria-label", "Colour scale from 0 (dark purple) to " + scale.toFixed(2) + " (yellow)" +
      (selected.perHead ? ", this head's largest weight" : ""));
  }

  function rowText() {
    return drawing.rowText(state.attentions, state.shape, state.tokens, selected.layer, selected.head, selected.query, 5);
  }

  function onHover(event) {
    if (!view.geometry || !state.attentions) return;
    var rect = view.large.canvas.getBoundingClientRect();
    var at = drawing.cellAt(view.geometry, event.clientX - rect.left, event.clientY - rect.top);
    if (!at || view.geometry.T !== state.shape[2]) return;
    view.readout.textContent = drawing.cellText(state.attentions, state.shape, state.tokens,
      selected.layer, selected.head, at.query, at.key);
  }

  // The maps are drawn to the width of their box: draw them again when it changes (a window
  // resized, a phone turned), once the resizing has paused.
  var resizing = null;

  function onResize() {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      if (state.status !== "ready" || !state.attentions || !view || view.body.hidden) return;
      if (view.large.scroll.clientWidth !== view.drawnWidth) drawLarge();
    }, 150);
  }

  // ---- start ---------------------------------------------------------------------------

  function init() {
    var node = document.getElementById("live-attention");
    if (!node) return;
    box = {
      root: node,
      config: JSON.parse(node.dataset.config),
      field: node.querySelector(".live-text"),
      button: node.querySelector(".live-load"),
      progress: node.querySelector(".live-progress"),
      status: node.querySelector(".live-status"),
      views: node.querySelector(".live-views"),
      vocabSize: 0,
      unk: "[UNK]"
    };
    var reason = null;
    if (location.protocol === "file:") {
      reason = "This page was opened as a file, and browsers do not let a file:// page load " +
        "the model's files. Serve the book (make serve) to use this box; the explorer of " +
        "eight sentences above works as it is.";
    } else if (typeof WebAssembly !== "object" || typeof BigInt64Array !== "function") {
      reason = "This browser lacks WebAssembly, which the model needs; the explorer of eight " +
        "sentences above works as it is.";
    }
    if (reason) {
      state.status = "unavailable";
      box.button.disabled = true;
      say(reason);
      return;
    }
    box.button.addEventListener("click", load);
    checkKept().catch(function () {});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})(globalThis);
