// The live attention box of chapter 09: all-MiniLM-L6-v2 run in the reader's browser.
//
// The page holds the box (book/_ext/attention_book/live_attention.py writes it: a text field, a
// button that states the download size). Nothing below downloads anything until the button is pressed; then
// it fetches, from this book's own _static folder, ONNX Runtime's single-threaded WebAssembly
// build, the exported model and the model's tokenizer, and runs the model on every sentence
// typed. Tokens are shown as text only (textContent, <option> text, canvas fillText), never as
// markup. The state is exposed as window.liveAttention for the tests and the benchmark:
//   status: "idle" | "unavailable" | "loading" | "ready" | "error"
//   sentence, ids, tokens, truncatedFrom, attentions (Float32Array [L, H, T, T]), shape [L, H, T, T]
//   runs (sentences computed), lastRunMs (tokenise + model + drawing), firstMapMs (from the click)
(function () {
  "use strict";

  var script = document.currentScript;
  var here = new URL(".", script.src); // .../_static/live/
  var vendor = new URL("../vendor/", here);
  var LAYERS = 6;
  var HEADS = 12;
  var CLS = 101;
  var SEP = 102;
  // Viridis, 9 stops: dark purple (0) to yellow (1).
  var VIRIDIS = [
    [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
    [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]
  ];

  var state = (window.liveAttention = {
    status: "idle",
    sentence: null,
    ids: null,
    tokens: null,
    truncatedFrom: null,
    attentions: null,
    shape: null,
    runs: 0,
    lastRunMs: null,
    firstMapMs: null,
    second: null, // the second sentence when comparing: sentence, ids, tokens, truncatedFrom, attentions
    difference: null, // second minus first for the chosen head, when both have T tokens
    loadMs: {}, // from the click: download (all files), session (model ready), firstMap
    error: null
  });

  var root, config, field, button, progress, status, views;
  var ort, session, tokenizer;
  var selected = { layer: 0, head: 0, query: -1 };
  var perHead = false;
  var ui = {};
  var pending = null;

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

  function say(text) {
    status.textContent = text;
  }

  function megabytes(n) {
    return (n / 1e6).toFixed(1) + " MB";
  }

  function colour(v) {
    var x = Math.min(1, Math.max(0, v)) * (VIRIDIS.length - 1);
    var i = Math.min(VIRIDIS.length - 2, Math.floor(x));
    var t = x - i;
    var a = VIRIDIS[i];
    var b = VIRIDIS[i + 1];
    return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
  }

  // ---- loading -------------------------------------------------------------------------

  var received = 0;

  // The files are kept in the browser's Cache Storage (where it has one: pages served over
  // https or from this machine), so a later visit loads them without the network. Their names
  // carry a hash of their content where it can change (the model), so a new build's files
  // are fetched afresh; entries that no page names any more are dropped.
  var CACHE_NAME = "attention-by-running-it-live";
  var cacheOpened = null;

  function openCache() {
    if (!cacheOpened) {
      cacheOpened = window.caches && window.isSecureContext
        ? caches.open(CACHE_NAME).catch(function () { return null; })
        : Promise.resolve(null);
    }
    return cacheOpened;
  }

  function dropStale(keep) {
    return openCache().then(function (cache) {
      if (!cache) return;
      return cache.keys().then(function (requests) {
        requests.forEach(function (r) { if (keep.indexOf(r.url) < 0) cache.delete(r); });
      });
    }).catch(function () {});
  }

  // The bytes of url, from the cache or the server, counted into the progress bar.
  function fetchBytes(url) {
    return openCache()
      .then(function (cache) {
        return (cache ? cache.match(url) : Promise.resolve(undefined)).then(function (hit) {
          if (hit) return hit;
          return fetch(url).then(function (response) {
            if (!response.ok) throw new Error(url.split("/").pop() + ": HTTP " + response.status);
            if (cache) cache.put(url, response.clone()).catch(function () {});
            return response;
          });
        });
      })
      .then(readBytes);
  }

  function readBytes(response) {
    if (!response.body || !response.body.getReader) {
      return response.arrayBuffer().then(function (buffer) {
        received += buffer.byteLength;
        showProgress();
        return new Uint8Array(buffer);
      });
    }
    var reader = response.body.getReader();
    var chunks = [];
    var length = 0;
    function pump() {
      return reader.read().then(function (step) {
        if (step.done) {
          var bytes = new Uint8Array(length);
          var offset = 0;
          chunks.forEach(function (chunk) { bytes.set(chunk, offset); offset += chunk.length; });
          return bytes;
        }
        chunks.push(step.value);
        length += step.value.length;
        received += step.value.length;
        showProgress();
        return pump();
      });
    }
    return pump();
  }

  function showProgress() {
    if (state.status !== "loading") return; // an error already said what happened
    progress.value = Math.min(received, config.total);
    say("Downloading: " + megabytes(received) + " of " + megabytes(config.total) + "…");
  }

  // A 70-byte ONNX graph (y = Identity(x)): creating a session from it starts ONNX Runtime
  // (compiles its WebAssembly) while the model is still downloading.
  var WARM_UP = "CAgSADo6ChAKAXgSAXkiCElkZW50aXR5EgR3YXJtWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQEQ==";

  function startRuntime(module, wasmBytes, ortUrl) {
    ort = module;
    ort.env.logLevel = "error";
    ort.env.wasm.numThreads = 1; // single-threaded: no SharedArrayBuffer, no special headers
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = ortUrl.href; // its default points at a CDN
    ort.env.wasm.wasmBinary = wasmBytes;
    var bytes = Uint8Array.from(atob(WARM_UP), function (c) { return c.charCodeAt(0); });
    return ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
  }

  function load() {
    var started = performance.now();
    received = 0;
    button.disabled = true;
    progress.hidden = false;
    state.status = "loading";
    say("Downloading: 0.0 MB of " + megabytes(config.total) + "…");
    var ortUrl = new URL("onnxruntime-web/", vendor);
    var decoder = new TextDecoder();
    var urls = {
      wasm: new URL("ort-wasm-simd-threaded.wasm", ortUrl).href,
      model: new URL(config.model, here).href,
      tokenizer: new URL("tokenizer.json", here).href,
      tokenizerConfig: new URL("tokenizer_config.json", here).href
    };
    dropStale(Object.keys(urls).map(function (k) { return urls[k]; }));
    var runtime = Promise.all([
      import(new URL("ort.wasm.min.mjs", ortUrl).href),
      fetchBytes(urls.wasm)
    ]).then(function (parts) { return startRuntime(parts[0], parts[1], ortUrl); });
    Promise.all([
      runtime,
      import(new URL("tokenizers/tokenizers.min.mjs", vendor).href),
      fetchBytes(urls.model),
      fetchBytes(urls.tokenizer),
      fetchBytes(urls.tokenizerConfig)
    ])
      .then(function (parts) {
        state.loadMs.download = performance.now() - started;
        var Tokenizer = parts[1].Tokenizer;
        tokenizer = new Tokenizer(
          JSON.parse(decoder.decode(parts[3])),
          JSON.parse(decoder.decode(parts[4]))
        );
        say("Starting the model…");
        return ort.InferenceSession.create(parts[2], {
          executionProviders: ["wasm"],
          graphOptimizationLevel: "all"
        });
      })
      .then(function (created) {
        state.loadMs.session = performance.now() - started;
        session = created;
        progress.hidden = true;
        buildViews();
        views.hidden = false;
        window.addEventListener("resize", onResize);
        // The button disappears: keep keyboard focus in the box, on the sentence.
        if (document.activeElement === button) field.focus();
        button.hidden = true;
        state.status = "ready";
        return compute();
      })
      .then(function () {
        state.firstMapMs = state.loadMs.firstMap = performance.now() - started;
        field.addEventListener("input", function () {
          clearTimeout(pending);
          pending = setTimeout(compute, 250);
        });
      })
      .catch(function (error) {
        state.status = "error";
        state.error = String(error && error.message ? error.message : error);
        progress.hidden = true;
        button.disabled = false;
        say(
          "The model could not be loaded (" + state.error + "). The explorer of eight " +
          "sentences above still works; press the button to try again."
        );
      });
  }

  // ---- computing -----------------------------------------------------------------------

  var running = Promise.resolve();

  // The sentence's ids and tokens, cut as Python's truncation=True, max_length=512 cuts them
  // (the first 510 tokens, then [SEP]); truncatedFrom is the uncut length, or null.
  function encode(text) {
    var encoded = tokenizer.encode(text);
    var ids = encoded.ids;
    var tokens = encoded.tokens;
    if (ids.length <= config.maxTokens) return { ids: ids, tokens: tokens, truncatedFrom: null };
    return {
      ids: ids.slice(0, config.maxTokens - 1).concat([SEP]),
      tokens: tokens.slice(0, config.maxTokens - 1).concat(["[SEP]"]),
      truncatedFrom: ids.length
    };
  }

  // What the reader is told when a text was cut: how many tokens were left out.
  function truncationNote(what, truncatedFrom) {
    var dropped = truncatedFrom - config.maxTokens;
    return what + " is " + truncatedFrom + " tokens; the model reads at most " + config.maxTokens +
      ", so the last " + dropped + (dropped === 1 ? " token was" : " tokens were") +
      " left out: the first " + (config.maxTokens - 2) + " are shown, between [CLS] and [SEP].";
  }

  function run(ids) {
    var T = ids.length;
    var input = new ort.Tensor("int64", BigInt64Array.from(ids, function (i) { return BigInt(i); }), [1, T]);
    return session.run({ input_ids: input });
  }

  function compute() {
    running = running.then(computeNow, computeNow).then(computeSecond, computeSecond);
    return running;
  }

  function computeNow() {
    var sentence = field.value;
    if (sentence.trim() === "") {
      state.sentence = sentence;
      state.ids = state.tokens = state.attentions = state.shape = null;
      state.runs += 1;
      ui.body.hidden = true;
      say("Type a sentence in the box above to see its attention.");
      return Promise.resolve();
    }
    var started = performance.now();
    var encoded = encode(sentence);
    var ids = encoded.ids;
    var tokens = encoded.tokens;
    var truncatedFrom = encoded.truncatedFrom;
    var T = ids.length;
    return run(ids).then(function (out) {
      var attentions = out.attentions;
      state.sentence = sentence;
      state.ids = ids;
      state.tokens = tokens;
      state.truncatedFrom = truncatedFrom;
      state.attentions = attentions.data;
      state.shape = attentions.dims.slice();
      if (ids[0] !== CLS) throw new Error("the tokenizer did not start with [CLS]");
      ui.body.hidden = false;
      selected.query = Math.min(selected.query, T - 1);
      draw();
      state.lastRunMs = performance.now() - started;
      state.runs += 1;
      say(
        (truncatedFrom ? truncationNote("Your text", truncatedFrom) + " " : "") +
        T + " tokens, 6 layers × 12 heads, computed in " + Math.round(state.lastRunMs) + " ms."
      );
    });
  }

  // ---- views ---------------------------------------------------------------------------

  function option(value, text) {
    var node = document.createElement("option");
    node.value = String(value);
    node.textContent = text;
    return node;
  }

  function buildViews() {
    var layerSelect = el("select", { id: "live-layer" });
    var headSelect = el("select", { id: "live-head" });
    for (var l = 0; l < LAYERS; l++) layerSelect.appendChild(option(l, String(l)));
    for (var h = 0; h < HEADS; h++) headSelect.appendChild(option(h, String(h)));
    var querySelect = el("select", { id: "live-query" });
    var scaleBox = el("input", { type: "checkbox", id: "live-per-head" });
    layerSelect.addEventListener("change", function () { select(+layerSelect.value, selected.head); });
    headSelect.addEventListener("change", function () { select(selected.layer, +headSelect.value); });
    querySelect.addEventListener("change", function () { selected.query = +querySelect.value; drawLarge(); });
    scaleBox.addEventListener("change", function () { perHead = scaleBox.checked; draw(); });

    var controls = el("div", { className: "live-controls" }, [
      el("span", {}, [el("label", { for: "live-layer", text: "Layer " }), layerSelect]),
      el("span", {}, [el("label", { for: "live-head", text: "Head " }), headSelect]),
      el("span", {}, [el("label", { for: "live-query", text: "Query row " }), querySelect]),
      el("span", {}, [scaleBox, el("label", { for: "live-per-head", text: " Scale each head to its own maximum" })])
    ]);

    // The 6 x 12 grid: one button per head, arrow keys move between them (one tab stop).
    var grid = el("div", { className: "live-grid", role: "group", "aria-label": "All 72 heads: rows are layers 0 to 5, columns heads 0 to 11" });
    grid.appendChild(el("span", { className: "live-corner", "aria-hidden": "true", text: "" }));
    for (h = 0; h < HEADS; h++) grid.appendChild(el("span", { className: "live-axis", "aria-hidden": "true", text: String(h) }));
    ui.cells = [];
    for (l = 0; l < LAYERS; l++) {
      grid.appendChild(el("span", { className: "live-axis", "aria-hidden": "true", text: String(l) }));
      for (h = 0; h < HEADS; h++) {
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
        ui.cells.push({ button: cell, canvas: canvas });
      }
    }

    var compareBox = el("input", { type: "checkbox", id: "live-compare" });
    var secondField = el("textarea", { id: "live-text-b", className: "live-text", rows: "2", spellcheck: "false" });
    secondField.value = "Man bites dog.";
    var secondLabel = el("label", { for: "live-text-b", className: "live-label", text: "Second sentence" });
    var secondNote = el("p", { className: "live-note", role: "status" });
    secondNote.hidden = true;
    var secondCanvas = el("canvas", { className: "live-large-canvas" });
    var secondBox = el("div", { className: "live-large", tabindex: "0", role: "img" }, [secondCanvas]);
    var diffCanvas = el("canvas", { className: "live-large-canvas" });
    var diffBox = el("div", { className: "live-large", tabindex: "0", role: "img" }, [diffCanvas]);
    var secondTitle = el("p", { className: "live-heading" });
    var diffText = el("p", { className: "live-readout" });
    var compareViews = el("div", { className: "live-compare-views" }, [
      secondTitle, secondBox,
      el("p", { className: "live-heading", text: "Difference, position by position" }), diffBox, diffText
    ]);
    compareViews.hidden = true;
    var compareInput = el("div", { className: "live-compare-input" }, [secondLabel, secondField, secondNote]);
    compareInput.hidden = true;
    compareBox.addEventListener("change", function () {
      compareInput.hidden = !compareBox.checked;
      compute();
    });
    secondField.addEventListener("input", function () {
      clearTimeout(pending);
      pending = setTimeout(compute, 250);
    });
    ui.compareBox = compareBox;
    ui.secondField = secondField;
    ui.secondNote = secondNote;
    ui.secondCanvas = secondCanvas;
    ui.secondBox = secondBox;
    ui.diffCanvas = diffCanvas;
    ui.diffBox = diffBox;
    ui.secondTitle = secondTitle;
    ui.diffText = diffText;
    ui.compareViews = compareViews;

    var large = el("canvas", { className: "live-large-canvas" });
    var largeBox = el("div", { className: "live-large", tabindex: "0", role: "img" }, [large]);
    var readout = el("p", { className: "live-readout" });
    var legend = el("canvas", { className: "live-legend", width: "240", height: "34", role: "img" });
    large.addEventListener("mousemove", onHover);
    large.addEventListener("mouseleave", function () { readout.textContent = rowText(); });

    ui.body = el("div", { className: "live-body" }, [
      controls,
      el("p", { className: "live-heading", text: "All heads (rows: layers 0–5; columns: heads 0–11)" }),
      grid,
      el("p", { className: "live-heading live-large-title" }),
      largeBox,
      legend,
      readout,
      el("div", { className: "live-compare" }, [
        el("span", {}, [compareBox, el("label", { for: "live-compare", text: " Compare with a second sentence" })]),
        compareInput,
        compareViews
      ])
    ]);
    views.appendChild(ui.body);
    ui.layerSelect = layerSelect;
    ui.headSelect = headSelect;
    ui.querySelect = querySelect;
    ui.large = large;
    ui.largeBox = largeBox;
    ui.readout = readout;
    ui.legend = legend;
    ui.title = ui.body.querySelector(".live-large-title");
    select(0, 0);
  }

  function onCell(event) {
    var cell = event.currentTarget;
    select(+cell.dataset.layer, +cell.dataset.head);
  }

  function onCellKey(event) {
    var moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    var move = moves[event.key];
    if (event.key === "Home") move = [0, -selected.head];
    if (event.key === "End") move = [0, HEADS - 1 - selected.head];
    if (!move) return;
    event.preventDefault();
    var l = Math.min(LAYERS - 1, Math.max(0, selected.layer + move[0]));
    var h = Math.min(HEADS - 1, Math.max(0, selected.head + move[1]));
    select(l, h);
    ui.cells[l * HEADS + h].button.focus();
  }

  function select(layer, head) {
    selected.layer = layer;
    selected.head = head;
    ui.layerSelect.value = String(layer);
    ui.headSelect.value = String(head);
    ui.cells.forEach(function (c, i) {
      var on = i === layer * HEADS + head;
      c.button.setAttribute("aria-pressed", on ? "true" : "false");
      c.button.tabIndex = on ? 0 : -1;
    });
    if (state.attentions) drawLarge();
  }

  function headMax(layer, head, T) {
    var a = state.attentions;
    var base = (layer * HEADS + head) * T * T;
    var m = 0;
    for (var i = 0; i < T * T; i++) if (a[base + i] > m) m = a[base + i];
    return m > 0 ? m : 1;
  }

  function paint(canvas, layer, head, T) {
    canvas.width = T;
    canvas.height = T;
    var ctx = canvas.getContext("2d");
    var image = ctx.createImageData(T, T);
    var a = state.attentions;
    var base = (layer * HEADS + head) * T * T;
    var top = perHead ? headMax(layer, head, T) : 1;
    for (var i = 0; i < T * T; i++) {
      var c = colour(a[base + i] / top);
      image.data[4 * i] = c[0];
      image.data[4 * i + 1] = c[1];
      image.data[4 * i + 2] = c[2];
      image.data[4 * i + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
  }

  function draw() {
    var T = state.tokens.length;
    for (var l = 0; l < LAYERS; l++) {
      for (var h = 0; h < HEADS; h++) paint(ui.cells[l * HEADS + h].canvas, l, h, T);
    }
    ui.querySelect.textContent = "";
    ui.querySelect.appendChild(option(-1, "none"));
    state.tokens.forEach(function (token, i) { ui.querySelect.appendChild(option(i, i + ": " + token)); });
    ui.querySelect.value = String(selected.query);
    drawLarge();
  }

  // The large map: one head, the tokens on both axes (drawn as text on the canvas).
  // One map on a canvas: value(q, k) -> [r, g, b] for each cell, the tokens on both axes
  // (drawn as text), the query row outlined. Returns the cell geometry.
  function drawMap(canvas, box, tokens, value, query) {
    var T = tokens.length;
    var font = "12px system-ui, sans-serif";
    var ctx = canvas.getContext("2d");
    ctx.font = font;
    var labelWidth = 0;
    tokens.forEach(function (t) { labelWidth = Math.max(labelWidth, ctx.measureText(t).width); });
    var margin = Math.ceil(Math.min(labelWidth, 160)) + 8;
    var available = Math.max(200, box.clientWidth - margin - 4);
    // Cells of at least 14 px keep the labels readable; past 128 tokens the map is drawn to
    // fit (3 px at least) and the labels are left out.
    var labelled = T <= 128;
    if (!labelled) margin = 4;
    var cell = Math.max(labelled ? 14 : 3, Math.min(36, Math.floor(available / T)));
    var size = margin + cell * T;
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(size * ratio);
    canvas.height = Math.ceil(size * ratio);
    canvas.style.width = size + "px";
    canvas.style.height = size + "px";
    ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, size, size);
    for (var q = 0; q < T; q++) {
      for (var k = 0; k < T; k++) {
        var c = value(q, k);
        ctx.fillStyle = "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
        ctx.fillRect(margin + k * cell, margin + q * cell, cell, cell);
      }
    }
    if (query >= 0 && query < T) {
      ctx.strokeStyle = "#d62728";
      ctx.lineWidth = 2;
      ctx.strokeRect(margin + 1, margin + query * cell + 1, cell * T - 2, cell - 2);
    }
    ctx.font = font;
    ctx.fillStyle = "#222";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    if (labelled) {
      tokens.forEach(function (t, i) { ctx.fillText(clip(ctx, t), margin - 4, margin + (i + 0.5) * cell); });
      ctx.save();
      ctx.rotate(-Math.PI / 2); // column labels read upwards, ending above their column
      ctx.textAlign = "left";
      tokens.forEach(function (t, i) { ctx.fillText(clip(ctx, t), -(margin - 4), margin + (i + 0.5) * cell); });
      ctx.restore();
    }
    return { margin: margin, cell: cell, T: T };
  }

  function drawLarge() {
    var tokens = state.tokens;
    var T = tokens.length;
    var layer = selected.layer;
    var head = selected.head;
    var a = state.attentions;
    var base = (layer * HEADS + head) * T * T;
    var top = perHead ? headMax(layer, head, T) : 1;
    ui.drawnWidth = ui.largeBox.clientWidth;
    ui.geometry = drawMap(ui.large, ui.largeBox, tokens, function (q, k) {
      return colour(a[base + q * T + k] / top);
    }, selected.query);
    ui.title.textContent = "Layer " + layer + ", head " + head + ": rows are queries, columns keys";
    ui.largeBox.setAttribute(
      "aria-label",
      "Attention of layer " + layer + ", head " + head + " over " + T + " tokens; " +
      "choose a query row to read its weights"
    );
    drawLegend(top);
    ui.readout.textContent = rowText();
    drawCompare();
  }

  // ---- two sentences side by side --------------------------------------------------------

  // Blue (less weight in the second sentence), white (the same), red (more): v in [-1, 1].
  function diverging(v) {
    var x = Math.max(-1, Math.min(1, v));
    var end = x < 0 ? [33, 102, 172] : [178, 24, 43];
    var t = Math.abs(x);
    return [255 + (end[0] - 255) * t, 255 + (end[1] - 255) * t, 255 + (end[2] - 255) * t];
  }

  function drawCompare() {
    var b = state.second;
    var cut = ui.compareBox.checked && b && b.truncatedFrom;
    ui.secondNote.hidden = !cut;
    ui.secondNote.textContent = cut ? truncationNote("The second sentence", b.truncatedFrom) : "";
    if (!ui.compareBox.checked || !b || !b.attentions || !state.attentions) {
      ui.compareViews.hidden = true;
      return;
    }
    ui.compareViews.hidden = false;
    var layer = selected.layer;
    var head = selected.head;
    var T = b.tokens.length;
    var base = (layer * HEADS + head) * T * T;
    var top = 1;
    if (perHead) {
      top = 0;
      for (var i = 0; i < T * T; i++) top = Math.max(top, b.attentions[base + i]);
      top = top || 1;
    }
    drawMap(ui.secondCanvas, ui.secondBox, b.tokens, function (q, k) {
      return colour(b.attentions[base + q * T + k] / top);
    }, -1);
    ui.secondTitle.textContent = "Second sentence, layer " + layer + ", head " + head;
    ui.secondBox.setAttribute("aria-label", "Attention of layer " + layer + ", head " + head +
      " in the second sentence, " + T + " tokens");
    var A = state.tokens.length;
    if (A !== T) {
      ui.diffBox.hidden = true;
      ui.diffText.textContent = "The difference is drawn for two sentences of the same number " +
        "of tokens (here " + A + " and " + T + "), such as the same words in another order.";
      state.difference = null;
      return;
    }
    var a = state.attentions;
    var diff = new Float32Array(T * T);
    var largest = 0;
    for (i = 0; i < T * T; i++) {
      diff[i] = b.attentions[base + i] - a[base + i];
      largest = Math.max(largest, Math.abs(diff[i]));
    }
    state.difference = { layer: layer, head: head, values: diff, largest: largest };
    var scale = perHead ? (largest || 1) : 1;
    ui.diffBox.hidden = false;
    drawMap(ui.diffCanvas, ui.diffBox, b.tokens.map(function (t, j) {
      return t === state.tokens[j] ? t : state.tokens[j] + " / " + t;
    }), function (q, k) { return diverging(diff[q * T + k] / scale); }, -1);
    ui.diffBox.setAttribute("aria-label", "Second sentence minus first, layer " + layer +
      ", head " + head + "; largest change " + largest.toFixed(2));
    ui.diffText.textContent = "Second minus first, cell by cell: the query and key at the same " +
      "positions, whichever words they hold. Red where the second sentence puts more " +
      "weight, blue where less, white where the same (scale ±" + scale.toFixed(2) + "). " +
      "Largest change in this head: " + largest.toFixed(2) + ".";
  }

  function computeSecond() {
    var text = ui.secondField.value;
    if (!ui.compareBox.checked || text.trim() === "") {
      state.second = null;
      drawCompare();
      return Promise.resolve();
    }
    var encoded = encode(text);
    return run(encoded.ids).then(function (out) {
      state.second = {
        sentence: text,
        ids: encoded.ids,
        tokens: encoded.tokens,
        truncatedFrom: encoded.truncatedFrom,
        attentions: out.attentions.data
      };
      drawCompare();
    });
  }

  function clip(ctx, text) {
    if (ctx.measureText(text).width <= 160) return text;
    while (text.length > 1 && ctx.measureText(text + "…").width > 160) text = text.slice(0, -1);
    return text + "…";
  }

  function drawLegend(top) {
    var canvas = ui.legend;
    var ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    for (var x = 0; x < 200; x++) {
      var c = colour(x / 199);
      ctx.fillStyle = "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
      ctx.fillRect(20 + x, 2, 1, 14);
    }
    ctx.fillStyle = "#222";
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "top";
    ctx.textAlign = "center";
    ctx.fillText("0", 20, 19);
    ctx.fillText(top.toFixed(2), 220, 19);
    canvas.setAttribute("aria-label", "Colour scale from 0 (dark purple) to " + top.toFixed(2) + " (yellow)" +
      (perHead ? ", this head's largest weight" : ""));
  }

  // The chosen query row as text: its five largest weights.
  function rowText() {
    if (selected.query < 0) return "Choose a query row, or point at a cell, to read weights.";
    var T = state.tokens.length;
    var base = ((selected.layer * HEADS + selected.head) * T + selected.query) * T;
    var row = [];
    for (var k = 0; k < T; k++) row.push([state.attentions[base + k], k]);
    row.sort(function (x, y) { return y[0] - x[0]; });
    return "Query " + selected.query + " (" + state.tokens[selected.query] + ") attends most to: " +
      row.slice(0, 5).map(function (p) { return p[1] + " " + state.tokens[p[1]] + " " + p[0].toFixed(2); }).join("; ");
  }

  function onHover(event) {
    var g = ui.geometry;
    if (!g) return;
    var box = ui.large.getBoundingClientRect();
    var k = Math.floor((event.clientX - box.left - g.margin) / g.cell);
    var q = Math.floor((event.clientY - box.top - g.margin) / g.cell);
    if (q < 0 || k < 0 || q >= g.T || k >= g.T) return;
    var T = g.T;
    var w = state.attentions[((selected.layer * HEADS + selected.head) * T + q) * T + k];
    ui.readout.textContent = "query " + q + " (" + state.tokens[q] + ") → key " + k + " (" +
      state.tokens[k] + "): " + w.toFixed(3);
  }

  // The maps are drawn to the width of their box: draw them again when it changes (a window
  // resized, a phone turned), once the resizing has paused.
  var resizing = null;

  function onResize() {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      if (state.status !== "ready" || !state.attentions || ui.body.hidden) return;
      if (ui.largeBox.clientWidth !== ui.drawnWidth) drawLarge();
    }, 150);
  }

  // ---- start ---------------------------------------------------------------------------

  function init() {
    root = document.getElementById("live-attention");
    if (!root) return;
    config = JSON.parse(root.dataset.config);
    field = root.querySelector(".live-text");
    button = root.querySelector(".live-load");
    progress = root.querySelector(".live-progress");
    status = root.querySelector(".live-status");
    views = root.querySelector(".live-views");
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
      button.disabled = true;
      say(reason);
      return;
    }
    button.addEventListener("click", load);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
