// The live attention box of chapter 09: all-MiniLM-L6-v2 run in the reader's browser.
//
// The page holds the box (book/_ext/attention_book/live_attention.py writes it: a text field, a
// button that states the download size) and loads, in this order, viridis.js (the colour
// table), drawing.js, head_view.js, fetching.js, model.js, box_state.js (the box's state
// machine and status words), box_text.js (the views' words and index maths), box_runs.js (the
// model's messages, one run at a time) and this file, as classic scripts so that a page opened
// from disk still runs them. This file is the box's DOM: it builds the views, wires the events
// to box_state.js's transitions and shows what they leave in the state. Nothing downloads
// anything until the button is pressed; then model_worker.js fetches, from this book's own
// _static folder, ONNX Runtime's single-threaded WebAssembly build, the exported model and the
// tokenizer, and runs the model on every sentence typed, off the page's thread. Tokens are
// shown as text only (textContent, <option> text, canvas fillText), never as markup.
//
// window.liveAttention holds the modules and, as the box's one state object, the fields
// box_state.js's create() lists (status, sentence, tokens, attentions, shape, runs, timings...),
// read by the tests and the benchmark.
(function (root) {
  "use strict";

  var live = (root.liveAttention = root.liveAttention || {});
  var drawing = live.drawing;
  var headView = live.headView;
  var fetching = live.fetching;
  var model = live.model;
  var boxState = live.boxState;
  var boxText = live.boxText;
  var boxRuns = live.boxRuns;
  var table = live.viridis;
  var here = new URL(".", document.currentScript.src); // .../_static/live/
  var vendor = new URL("../vendor/", here);

  var state = boxState.create(live);

  // The box's elements: its fixed parts (root, field, button, progress, status, views: from
  // the page, on init), `view` (the maps, the head view, the comparison: built on the first
  // result), and what drawing keeps between draws.
  var dom = {
    view: null,
    listening: false, // the field and the window's size are watched (once the model is loaded)
    drawn: 0, // which drawing is the latest: an older one stops at its next step
    pixelCanvas: null // the T x T canvas a map's cells are painted on before scaling
  };

  // A colour of the box's theme (live_attention.css: custom properties that follow the theme's
  // light or dark mode), as [r, g, b].
  function themeColour(name, fallback) {
    var text = getComputedStyle(dom.root).getPropertyValue(name);
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

  // The box's fixed parts as the state has them (box_state.js's controls()).
  function render() {
    var c = boxState.controls(state);
    if (c.status !== null && dom.status.textContent !== c.status) dom.status.textContent = c.status;
    if (c.button !== null) dom.button.textContent = c.button;
    dom.button.disabled = c.buttonDisabled;
    if (c.buttonBusy) dom.button.setAttribute("aria-disabled", "true");
    else dom.button.removeAttribute("aria-disabled");
    if (c.buttonHidden && !dom.button.hidden) {
      // The button goes: keep keyboard focus in the box, on the sentence.
      if (document.activeElement === dom.button) dom.field.focus();
      dom.button.hidden = true;
    }
    dom.progress.hidden = c.progressHidden;
    dom.progress.value = c.progressValue;
    if (c.computing || dom.views.hasAttribute("aria-busy")) {
      dom.root.classList.toggle("live-computing", c.computing);
      dom.views.setAttribute("aria-busy", c.computing ? "true" : "false");
    }
  }

  // ---- the model, in a worker (box_runs.js) ----------------------------------------------

  var channel = boxRuns.createChannel({
    connect: function (onMessage) {
      return boxRuns.connect({
        startWorker: function () { return new Worker(new URL("model_worker.js", here).href); },
        startEngine: function (post) {
          return model.createEngine({
            post: post,
            importModule: function (url) { return import(url); },
            openCache: function () { return fetching.openCache(root); },
            dropStale: fetching.dropStale,
            fetchBytes: function (url, cache, onBytes) { return fetching.fetchBytes(url, cache, onBytes); },
            now: function () { return performance.now(); }
          });
        },
        onMessage: onMessage,
        onPlace: function (inWorker) { state.inWorker = inWorker; }
      });
    },
    onLoading: function (message) {
      if (message.type === "stage") boxState.downloaded(state, message.network, message.cache, performance.now());
      else boxState.progress(state, message.network, message.cache);
      render();
    },
    loading: function () { return state.status === "loading"; }
  });

  // ---- loading -------------------------------------------------------------------------

  // The bytes of the page's downloads ({url: bytes}), by their URL.
  function sizesByUrl() {
    var sizes = {};
    Object.keys(state.config.sizes).forEach(function (path) {
      sizes[new URL("../" + path, here).href] = state.config.sizes[path];
    });
    return sizes;
  }

  // Before the click: what does this browser keep already? The button says what remains.
  function checkKept() {
    if (!state.cacheVisible) return Promise.resolve();
    return fetching.openCache(root)
      .then(function (cache) { return fetching.cachedBytes(cache, sizesByUrl()); })
      .then(function (kept) {
        boxState.kept(state, kept);
        render();
      });
  }

  function load() {
    if (!boxState.startLoad(state, performance.now())) return;
    render();
    var ortDir = new URL("onnxruntime-web/", vendor);
    channel.load({
      ort: new URL("ort.wasm.min.mjs", ortDir).href,
      ortDir: ortDir.href,
      wasm: new URL("ort-wasm-simd-threaded.wasm", ortDir).href,
      tokenizers: new URL("tokenizers/tokenizers.min.mjs", vendor).href,
      model: new URL(state.config.model, here).href,
      tokenizer: new URL("tokenizer.json", here).href,
      tokenizerConfig: new URL("tokenizer_config.json", here).href
    })
      .then(function (info) {
        boxState.loaded(state, info, performance.now());
        render();
        listen();
        return compute();
      })
      .then(function () {
        boxState.firstMap(state, performance.now());
      })
      .catch(function (error) {
        if (boxState.loadFailed(state, error)) render();
      });
  }

  // A sentence typed (either field): computed once typing pauses.
  var typed = boxRuns.debounce(function () { compute(); }, 250);

  // The maps are drawn to the width of their box: draw them again when it changes (a window
  // resized, a phone turned), once the resizing has paused.
  var resized = boxRuns.debounce(function () {
    var view = dom.view;
    if (state.status !== "ready" || !state.attentions || !view || view.body.hidden) return;
    if (view.large.scroll.clientWidth !== view.drawnWidth) drawLarge();
  }, 150);

  function listen() {
    if (dom.listening) return;
    dom.listening = true;
    dom.field.addEventListener("input", typed);
    window.addEventListener("resize", resized);
  }

  // ---- computing -----------------------------------------------------------------------

  // One run at a time; a request made while one is under way is run after it, once, on the
  // text as it is then.
  var compute = boxRuns.serial(function () {
    return computeFirst().then(computeSecond);
  }, function (error) {
    boxState.runFailed(state, error);
    render();
  });

  function computeFirst() {
    var sentence = dom.field.value;
    if (sentence.trim() === "") {
      boxState.empty(state, sentence);
      if (dom.view) dom.view.body.hidden = true;
      render();
      return Promise.resolve();
    }
    var started = performance.now();
    boxState.startRun(state);
    render();
    return channel.run(sentence, state.config.maxTokens).then(function (out) {
      boxState.result(state, sentence, out);
      if (!dom.view) buildViews(out.dims);
      var view = dom.view;
      dom.views.hidden = false;
      view.body.hidden = false;
      var note = model.unknownNote(out.tokens, out.unknownWords, state.unk, state.vocabSize);
      view.unknown.hidden = !note;
      view.unknown.textContent = note || "";
      return draw();
    }).then(function () {
      boxState.shown(state, performance.now() - started);
      render();
    });
  }

  function computeSecond() {
    var view = dom.view;
    var text = view ? view.secondField.value : "";
    if (!view || !view.compareBox.checked || text.trim() === "") {
      boxState.second(state, null, null);
      if (view) drawCompare();
      return Promise.resolve();
    }
    return channel.run(text, state.config.maxTokens).then(function (out) {
      boxState.second(state, text, out);
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
    var selected = state.selected;
    var layerSelect = el("select", { id: "live-layer" });
    var headSelect = el("select", { id: "live-head" });
    for (var l = 0; l < L; l++) layerSelect.appendChild(option(l, String(l)));
    for (var h = 0; h < H; h++) headSelect.appendChild(option(h, String(h)));
    var querySelect = el("select", { id: "live-query" });
    var scaleBox = el("input", { type: "checkbox", id: "live-per-head" });
    layerSelect.addEventListener("change", function () { select(+layerSelect.value, selected.head); });
    headSelect.addEventListener("change", function () { select(selected.layer, +headSelect.value); });
    querySelect.addEventListener("change", function () {
      boxState.chooseQuery(state, +querySelect.value);
      drawLarge();
      drawHeadView();
    });
    scaleBox.addEventListener("change", function () { boxState.perHead(state, scaleBox.checked); redraw(); });

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
    secondField.addEventListener("input", typed);

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
      el("p", { className: "live-heading", text: boxText.gridHeading(dims) }),
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
    dom.views.appendChild(body);
    dom.view = {
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
      if (state.attentions && !dom.view.body.hidden) drawLarge();
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  function onCell(event) {
    var cell = event.currentTarget;
    select(+cell.dataset.layer, +cell.dataset.head);
  }

  function onCellKey(event) {
    var view = dom.view;
    var to = drawing.gridMove(view.dims, state.selected.layer, state.selected.head, event.key);
    if (!to) return;
    event.preventDefault();
    select(to.layer, to.head);
    view.cells[boxText.cellIndex(view.dims, to.layer, to.head)].button.focus();
  }

  function select(layer, head) {
    var view = dom.view;
    boxState.select(state, layer, head);
    view.layerSelect.value = String(layer);
    view.headSelect.value = String(head);
    view.cells.forEach(function (c) {
      var on = c.layer === layer && c.head === head;
      c.button.setAttribute("aria-pressed", on ? "true" : "false");
      c.button.tabIndex = on ? 0 : -1;
    });
    if (state.attentions) drawLarge();
  }

  // The top of the colour scale for one head of `weights`.
  function top(weights, dims, layer, head) {
    return boxText.scale(state.selected.perHead, weights, dims, layer, head);
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

  // Every map again, in tasks of their own: the query list, the large map, then the grid in
  // slices of about 30 ms (72 maps of a 512-token sentence are 19 million pixels).
  function draw() {
    var token = ++dom.drawn;
    var view = dom.view;
    var rows = document.createDocumentFragment();
    boxText.queryOptions(state.tokens).forEach(function (o) { rows.appendChild(option(o[0], o[1])); });
    view.querySelect.replaceChildren(rows);
    view.querySelect.value = String(state.selected.query);
    return boxRuns.nextTask().then(function () {
      if (token !== dom.drawn) return;
      drawLarge();
      return paintGrid(token);
    });
  }

  // The large map now, the grid after (the same sentence on another scale).
  function redraw() {
    drawLarge();
    return paintGrid(++dom.drawn);
  }

  function paintGrid(token) {
    var cells = dom.view.cells;
    var i = 0;
    return new Promise(function (resolve) {
      function slice() {
        if (token !== dom.drawn) return resolve();
        var until = performance.now() + 30;
        while (i < cells.length && performance.now() < until) paintCell(cells[i++]);
        if (i < cells.length) setTimeout(slice, 0);
        else resolve();
      }
      setTimeout(slice, 0);
    });
  }

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
    var pixelCanvas = dom.pixelCanvas = dom.pixelCanvas || document.createElement("canvas");
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
      var measure = function (text) { return ctx.measureText(text).width; };
      tokens.forEach(function (t, i) {
        ctx.fillText(boxText.clip(t, measure), g.margin - 4, g.margin + (i + 0.5) * g.cell);
      });
      ctx.save();
      ctx.rotate(-Math.PI / 2); // column labels read upwards, ending above their column
      ctx.textAlign = "left";
      tokens.forEach(function (t, i) {
        ctx.fillText(boxText.clip(t, measure), -(g.margin - 4), g.margin + (i + 0.5) * g.cell);
      });
      ctx.restore();
    }
    showOverflow(target.scroll);
    return g;
  }

  // The large map: one head, the tokens on both axes.
  function drawLarge() {
    var view = dom.view;
    var dims = state.shape;
    var layer = state.selected.layer;
    var head = state.selected.head;
    var scale = top(state.attentions, dims, layer, head);
    view.drawnWidth = view.large.scroll.clientWidth;
    view.geometry = drawMap(view.large, state.tokens, function (pixels) {
      drawing.paintHead(pixels, state.attentions, dims, layer, head, scale, table);
    }, state.selected.query, function (q, k) {
      return drawing.cellNumber(drawing.weightAt(state.attentions, dims, layer, head, q, k));
    });
    view.title.textContent = boxText.largeTitle(layer, head);
    view.large.scroll.setAttribute("aria-label", boxText.largeLabel(layer, head, dims[2]));
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

  function buildHeadView(H) {
    boxState.showHeads(state, H);
    var toggles = el("div", { className: "live-hv-toggles", role: "group", "aria-label": "Heads shown in the head view" });
    var buttons = [];
    for (var h = 0; h < H; h++) {
      var b = el("button", { type: "button", className: "live-hv-toggle", "aria-pressed": "true", "aria-label": "head " + h, text: String(h) });
      b.style.setProperty("--live-head", headView.headColour(h));
      b.dataset.head = h;
      b.addEventListener("click", function (event) {
        boxState.toggleHead(state, +event.currentTarget.dataset.head);
        drawHeadView();
      });
      toggles.appendChild(b);
      buttons.push(b);
    }
    var all = el("button", { type: "button", className: "live-hv-all", text: "Hide all" });
    all.addEventListener("click", function () {
      boxState.toggleAllHeads(state);
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
      var to = headView.move(T, Math.max(0, state.selected.query), event.key);
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
  var largeSoon = boxRuns.debounce(function () { if (state.attentions) drawLarge(); }, 120);

  function chooseQuery(q) {
    if (!boxState.chooseQuery(state, q)) return;
    dom.view.querySelect.value = String(q);
    dom.view.readout.textContent = rowText();
    drawHeadView();
    largeSoon();
  }

  function drawHeadView() {
    var view = dom.view;
    if (!view || !state.attentions) return;
    var hv = view.hv;
    var dims = state.shape;
    var T = dims[2];
    var H = dims[1];
    var layer = state.selected.layer;
    var q = state.selected.query;
    var shownHeads = state.shownHeads;
    var theme = document.documentElement.getAttribute("data-theme") || "";
    var key = boxText.headViewKey(layer, q, shownHeads, theme);
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
    hv.all.textContent = boxText.toggleAllText(shownCount);
    hv.heading.textContent = boxText.headViewHeading(layer, H);

    // The lines: x from 0 to 100 in the SVG's units, stretched to its column (their widths in
    // px, unstretched); y in px, one row of ROW px per token.
    var g = headView.layout(T, 0, { rowHeight: ROW, gap: 100, pad: 0 });
    hv.svg.setAttribute("viewBox", "0 0 100 " + g.height);
    hv.svg.setAttribute("height", String(g.height));
    var lines = [];
    if (!boxText.tooManyLines(T, q, shownCount)) {
      lines = headView.lines(state.attentions, dims, layer, q, g, shownHeads, boxText.lineThreshold(T));
    }
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
    hv.caption.textContent = boxText.headViewCaption(state.tokens, layer, q, shownCount, H);
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
    var view = dom.view;
    var b = state.second;
    var on = view.compareBox.checked;
    var cut = on && b && b.truncatedFrom;
    view.secondNote.hidden = !cut;
    view.secondNote.textContent = cut ? model.truncationNote("The second sentence", b.truncatedFrom, state.config.maxTokens) : "";
    if (!on || !b || !b.attentions || !state.attentions) {
      view.compareViews.hidden = true;
      return;
    }
    view.compareViews.hidden = false;
    var layer = state.selected.layer;
    var head = state.selected.head;
    var T = b.shape[2];
    var scale = top(b.attentions, b.shape, layer, head);
    drawMap(view.second, b.tokens, function (pixels) {
      drawing.paintHead(pixels, b.attentions, b.shape, layer, head, scale, table);
    }, -1, function (q, k) {
      return drawing.cellNumber(drawing.weightAt(b.attentions, b.shape, layer, head, q, k));
    });
    view.secondTitle.textContent = boxText.secondTitle(layer, head);
    view.second.scroll.setAttribute("aria-label", boxText.secondLabel(layer, head, T));
    var d = drawing.difference(state.attentions, state.shape, b.attentions, b.shape, layer, head);
    state.difference = d;
    if (!d) {
      view.diff.frame.hidden = true;
      view.diff.hint.hidden = true;
      view.diffText.textContent = boxText.noDifference(state.shape[2], T);
      return;
    }
    var range = boxText.differenceRange(state.selected.perHead, d.largest);
    view.diff.frame.hidden = false;
    drawMap(view.diff, boxText.differenceTokens(state.tokens, b.tokens), function (pixels) {
      drawing.paintMap(pixels, T, function (q, k) { return drawing.diverging(d.values[q * T + k] / range); });
    }, -1, function (q, k) { return drawing.cellNumber(d.values[q * T + k], true); });
    view.diff.scroll.setAttribute("aria-label", boxText.differenceLabel(layer, head, d.largest));
    view.diffText.textContent = boxText.differenceText(range, d.largest);
  }

  // The colour scale: a bar of 200 colours, its ends as text (in the theme's ink).
  function drawLegend(scale) {
    var view = dom.view;
    var ctx = view.legendBar.getContext("2d");
    for (var x = 0; x < 200; x++) {
      var c = drawing.colour(x, 199, table);
      ctx.fillStyle = "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
      ctx.fillRect(x, 0, 1, 14);
    }
    view.legendHigh.textContent = scale.toFixed(2);
    view.legend.setAttribute("aria-label", boxText.legendLabel(scale, state.selected.perHead));
  }

  function rowText() {
    var s = state.selected;
    return drawing.rowText(state.attentions, state.shape, state.tokens, s.layer, s.head, s.query, 5);
  }

  function onHover(event) {
    var view = dom.view;
    if (!view.geometry || !state.attentions) return;
    var rect = view.large.canvas.getBoundingClientRect();
    var at = drawing.cellAt(view.geometry, event.clientX - rect.left, event.clientY - rect.top);
    if (!at || view.geometry.T !== state.shape[2]) return;
    view.readout.textContent = drawing.cellText(state.attentions, state.shape, state.tokens,
      state.selected.layer, state.selected.head, at.query, at.key);
  }

  // ---- start ---------------------------------------------------------------------------

  function init() {
    var node = document.getElementById("live-attention");
    if (!node) return;
    Object.assign(dom, {
      root: node,
      field: node.querySelector(".live-text"),
      button: node.querySelector(".live-load"),
      progress: node.querySelector(".live-progress"),
      status: node.querySelector(".live-status"),
      views: node.querySelector(".live-views")
    });
    boxState.setUp(state, JSON.parse(node.dataset.config), {
      protocol: location.protocol,
      webAssembly: typeof WebAssembly === "object" && typeof BigInt64Array === "function",
      cacheVisible: Boolean(root.caches && root.isSecureContext)
    });
    render();
    if (state.status === "unavailable") return;
    dom.button.addEventListener("click", load);
    checkKept().catch(function () {});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})(globalThis);
