// Chapter 17's instrument: masks as functions, composed. The reader chooses an order (causal,
// prefix-LM, or none), and any of a padding mask, a sliding window and packed documents; the
// composed mask is the AND of the chosen masks, as attention_lab.masks.combine_masks makes it:
// - causal: j <= i (causal_mask);
// - prefix-LM, which replaces causal: j < P or j <= i (prefix_lm_mask);
// - padding: key j is not a pad (padding_mask; the pads on the side chosen);
// - sliding window: i - W < j <= i (sliding_window_mask: i sees i - W + 1 .. i);
// - documents: same document and j <= i (document_mask; lengths "3,2,4" give ids 0 0 0 1 1 2 2 2 2).
// The window and the document mask are causal themselves, so with prefix-LM they take the
// prefix's look-ahead back, as combine_masks does. One head's weights then follow for seeded
// random queries and keys (core.js's generator, one stream: queries T x Dh, then keys T x Dh,
// Dh = 4, scores q_i . k_j / sqrt(Dh)), blocked scores filled as attention_lab fills them and
// rows with no key set to 0. compute() and parseLengths() are pure; the page's state and both
// functions are window.attentionInstruments.mask_composer.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  var DH = 4;
  var ORDERS = {
    causal: "Causal",
    prefix: "Prefix-LM (replaces causal)",
    none: "None (bidirectional)",
  };

  // Document lengths typed by the reader ("3,2,4" or "3 2 4") -> the document of each of the T
  // positions. Lengths past T are cut (``typed`` is then their sum, more than T, for the page to
  // say so); positions after the last length form one more document.
  function parseLengths(text, T) {
    var parts = String(text).split(/[\s,;]+/).filter(function (p) { return p !== ""; });
    if (parts.length === 0) return { error: "Type the documents' lengths, e.g. 3,2,4." };
    var lengths = [];
    for (var k = 0; k < parts.length; k++) {
      if (!/^[0-9]+$/.test(parts[k]) || Number(parts[k]) < 1) {
        return { error: "Each document length must be a whole number of at least 1 (got \u201c" +
          parts[k] + "\u201d)." };
      }
      lengths.push(Number(parts[k]));
    }
    var ids = new Int32Array(T), used = [], p = 0, typed = 0;
    for (k = 0; k < lengths.length; k++) typed += lengths[k];
    for (k = 0; k < lengths.length && p < T; k++) {
      var n = Math.min(lengths[k], T - p);
      for (var i = 0; i < n; i++) ids[p + i] = k;
      used.push(n);
      p += n;
    }
    if (p < T) {
      for (i = p; i < T; i++) ids[i] = used.length;
      used.push(T - p);
    }
    return { ids: ids, lengths: used, typed: typed };
  }

  function maskOf(T, rule) {
    var m = new Uint8Array(T * T);
    for (var i = 0; i < T; i++) for (var j = 0; j < T; j++) m[i * T + j] = rule(i, j) ? 1 : 0;
    return m;
  }

  // settings: seed, length T, order ("causal", "prefix", "none"), prefix P, padding (bool),
  // pads, side ("left", "right"), window (bool), windowSize W, documents (bool), documentIds.
  function compute(settings) {
    var T = settings.length;
    var isReal = new Uint8Array(T), parts = [], p;
    for (p = 0; p < T; p++) {
      isReal[p] = !settings.padding ? 1
        : settings.side === "left" ? (p >= settings.pads ? 1 : 0) : (p < T - settings.pads ? 1 : 0);
    }
    if (settings.order === "causal") {
      parts.push({ name: "causal", text: "causal", allowed: maskOf(T, function (i, j) {
        return j <= i;
      }) });
    } else if (settings.order === "prefix") {
      var P = settings.prefix;
      parts.push({ name: "prefix", text: "prefix-LM, P = " + P, allowed: maskOf(T,
        function (i, j) { return j < P || j <= i; }) });
    }
    if (settings.padding) {
      parts.push({ name: "padding", text: "padding, " + settings.pads + " on the " + settings.side,
        allowed: maskOf(T, function (i, j) { return isReal[j] === 1; }) });
    }
    if (settings.window) {
      var W = settings.windowSize;
      parts.push({ name: "window", text: "window, W = " + W, allowed: maskOf(T,
        function (i, j) { return i - W < j && j <= i; }) });
    }
    var ids = settings.documentIds;
    if (settings.documents) {
      parts.push({ name: "documents", text: "documents", allowed: maskOf(T, function (i, j) {
        return ids[i] === ids[j] && j <= i;
      }) });
    }
    var allowed = new Uint8Array(T * T).fill(1);
    parts.forEach(function (part) {
      for (var k = 0; k < T * T; k++) allowed[k] &= part.allowed[k];
    });

    var rng = core.generator(settings.seed);
    var query = rng.normals(T * DH), keys = rng.normals(T * DH);
    var weights = new Float64Array(T * T), empty = [];
    for (var i = 0; i < T; i++) {
      var row = new Float64Array(T), any = false;
      for (var j = 0; j < T; j++) {
        var s = 0;
        for (var d = 0; d < DH; d++) s += query[i * DH + d] * keys[j * DH + d];
        s /= Math.sqrt(DH);
        var ok = allowed[i * T + j] === 1;
        any = any || ok;
        // attention_lab's fill: the most negative float, then rows with no key set to 0.
        row[j] = ok ? s : -Number.MAX_VALUE;
      }
      var w = core.softmax(row, 1);
      if (!any) {
        empty.push(i);
        w.fill(0);
      }
      weights.set(w, i * T);
    }
    var count = 0;
    for (var k = 0; k < T * T; k++) count += allowed[k];
    return Object.assign({}, settings, { isReal: isReal, parts: parts, allowed: allowed,
      allowedCount: count, query: query, keys: keys, weights: weights, emptyRows: empty });
  }

  // Shades as chapter 05's instrument: white for 0 to light blue for 1, in both themes.
  function colour(w) {
    var t = Math.min(1, w);
    var mix = function (a, b) { return Math.round(a + (b - a) * t); };
    return [mix(255, 107), mix(255, 174), mix(255, 214)];
  }

  function paint(canvas, T, allowed) {
    canvas.width = T;
    canvas.height = T;
    var context = canvas.getContext("2d");
    var image = context.createImageData(T, T);
    for (var k = 0; k < T * T; k++) {
      var c = allowed[k] ? [8, 69, 148] : [255, 255, 255];
      image.data.set([c[0], c[1], c[2], 255], 4 * k);
    }
    context.putImageData(image, 0, 0);
  }

  function positionLabel(state, p) {
    var th = document.createElement("th");
    th.append(String(p));
    var notes = [];
    if (state.documents) notes.push("d" + state.documentIds[p]);
    if (!state.isReal[p]) notes.push("pad");
    if (notes.length) {
      var small = core.element("span", "instrument-sub");
      small.textContent = notes.join(" ");
      th.append(" ", small);
    }
    return th;
  }

  function drawGrid(table, state, cellOf) {
    var T = state.length;
    table.textContent = "";
    var head = table.createTHead().insertRow();
    var corner = document.createElement("th");
    corner.scope = "col";
    corner.textContent = "q \\ k";
    head.append(corner);
    for (var j = 0; j < T; j++) {
      var th = positionLabel(state, j);
      th.scope = "col";
      head.append(th);
    }
    var body = table.createTBody();
    for (var i = 0; i < T; i++) {
      var tr = body.insertRow();
      var rowHead = positionLabel(state, i);
      rowHead.scope = "row";
      tr.append(rowHead);
      for (j = 0; j < T; j++) {
        var cell = tr.insertCell(), k = i * T + j;
        if (!state.allowed[k]) {
          cell.className = "instrument-blocked";
          var hidden = core.element("span", "instrument-sr");
          hidden.textContent = "blocked ";
          cell.append(hidden);
        }
        var shown = cellOf(k);
        var rgb = shown.rgb;
        cell.style.backgroundColor = "rgb(" + rgb.join(",") + ")";
        cell.style.color = core.inkOn(rgb);
        cell.append(shown.text);
      }
    }
  }

  function describe(state) {
    var T = state.length;
    var names = state.parts.map(function (p) { return p.text; });
    var text = names.length === 0
      ? "No mask: every query may attend to every key (" + T * T + " pairs). "
      : "The composed mask is " + names.join(" AND ") + ": " + state.allowedCount + " of " +
        T * T + " query\u2013key pairs may attend. ";
    if (state.documents) {
      text += "Documents of lengths " + state.documentLengths.join(", ") + ". ";
      if (state.documentsTyped > T) {
        text += "The lengths typed add up to " + state.documentsTyped + ", more than the " + T +
          " positions: the documents are cut at " + T + ". ";
      }
    }
    if (state.order === "prefix" && (state.window || state.documents)) {
      var both = state.window && state.documents;
      text += "The " + (both ? "window and the document mask never let" : state.window
        ? "window never lets" : "document mask never lets") + " a query see a later key, so " +
        "AND takes back the prefix's look-ahead: P changes nothing here. ";
    }
    var rows = state.emptyRows;
    if (rows.length === 0) {
      text += "Every query has at least one key, and every row of weights sums to 1.";
    } else {
      text += (rows.length === 1 ? "Query " + rows[0] + " has" : "Queries " + rows.join(", ") +
        " have") + " no key " + (rows.length === 1 ? "it" : "they") + " may attend to: the " +
        "library sets " + (rows.length === 1 ? "its row" : "their rows") + " of weights to 0.";
    }
    return text;
  }

  function checkbox(id, text, checked) {
    var wrap = core.element("div", "instrument-field instrument-check");
    var input = document.createElement("input");
    input.type = "checkbox";
    input.id = id;
    input.checked = checked;
    var label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = text;
    wrap.append(input, label);
    return { wrap: wrap, input: input };
  }

  function menu(id, text, options, value) {
    var select = document.createElement("select");
    options.forEach(function (o) { select.add(new Option(o[1], o[0], false, o[0] === value)); });
    var f = core.field(id, text, select);
    f.output.remove();
    return f;
  }

  function group(title, parts) {
    var box = core.element("fieldset", "instrument-group");
    var legend = document.createElement("legend");
    legend.textContent = title;
    box.append(legend);
    parts.forEach(function (p) { box.append(p.wrap); });
    return box;
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = core.element("div", "instrument-controls");
    var length = core.field(id + "-length", "Sequence length T =", core.range(2, 12, 1,
      config.length));
    var order = menu(id + "-order", "Order", Object.keys(ORDERS).map(function (k) {
      return [k, ORDERS[k]];
    }), config.order);
    var prefix = core.field(id + "-prefix", "Prefix length P =", core.range(0, config.length, 1,
      config.prefix));
    var padding = checkbox(id + "-padding", "Padding mask", config.padding);
    var pads = core.field(id + "-pads", "Pad positions =", core.range(1, config.length, 1,
      config.pads));
    var side = menu(id + "-side", "Side of the pads", [["left", "left"], ["right", "right"]],
      config.side);
    var windowOn = checkbox(id + "-window", "Sliding window", config.window);
    var windowSize = core.field(id + "-window-size", "Window W =", core.range(1, config.length, 1,
      config.windowSize));
    var documents = checkbox(id + "-documents", "Documents (packed)", config.documents);
    var lengthsInput = document.createElement("input");
    lengthsInput.type = "text";
    lengthsInput.value = config.lengths;
    lengthsInput.spellcheck = false;
    lengthsInput.autocomplete = "off";
    var lengths = core.field(id + "-lengths", "Document lengths", lengthsInput);
    lengths.output.remove();
    var seed = core.seedField(id + "-seed", config.seed, function () { update(); });
    controls.append(
      group("Sequence and order", [length, order, prefix]),
      group("Padding", [padding, pads, side]),
      group("Window and documents", [windowOn, windowSize, documents, lengths]),
      seed.wrap);

    var partsCaption = core.element("p", "instrument-caption");
    var partsRow = core.element("div", "instrument-heads instrument-parts");
    var maskCaption = core.element("p", "instrument-caption");
    maskCaption.id = id + "-mask-caption";
    var maskTable = core.scrollingTable(
      "The composed mask (scrolls sideways on a narrow screen)", maskCaption.id);
    var weightsCaption = core.element("p", "instrument-caption");
    weightsCaption.id = id + "-weights-caption";
    var weightsTable = core.scrollingTable(
      "One head's weights (scrolls sideways on a narrow screen)", weightsCaption.id);
    var status = core.status();
    body.textContent = "";
    body.append(controls, partsCaption, partsRow, maskCaption, maskTable.scroller,
      weightsCaption, weightsTable.scroller, status);

    var state = window.attentionInstruments.mask_composer;
    function update() {
      var s = seed.input.value === "" ? NaN : Number(seed.input.value);
      if (!Number.isInteger(s) || s < 0 || s > 4294967295) {
        status.textContent = "The seed must be a whole number from 0 to 4294967295.";
        return;
      }
      var T = Number(length.input.value);
      [prefix, pads, windowSize].forEach(function (f) {
        f.input.max = String(T);
        if (Number(f.input.value) > T) f.input.value = String(T);
        f.output.value = String(Number(f.input.value));
      });
      length.output.value = String(T);
      prefix.input.disabled = order.input.value !== "prefix";
      pads.input.disabled = side.input.disabled = !padding.input.checked;
      windowSize.input.disabled = !windowOn.input.checked;
      lengthsInput.disabled = !documents.input.checked;
      var parsed = parseLengths(lengthsInput.value, T);
      if (documents.input.checked && parsed.error) {
        lengthsInput.setAttribute("aria-invalid", "true");
        status.textContent = parsed.error;
        return;
      }
      lengthsInput.removeAttribute("aria-invalid");
      var result = compute({ seed: s, length: T, order: order.input.value,
        prefix: Number(prefix.input.value), padding: padding.input.checked,
        pads: Number(pads.input.value), side: side.input.value, window: windowOn.input.checked,
        windowSize: Number(windowSize.input.value), documents: documents.input.checked,
        documentIds: parsed.ids || new Int32Array(T), documentLengths: parsed.lengths || [],
        documentsTyped: parsed.typed || 0 });
      Object.assign(state, result);
      state.runs += 1;

      partsCaption.textContent = result.parts.length === 0
        ? "No mask chosen: every query sees every key."
        : "The chosen masks (dark = may attend), AND-ed into the composed mask:";
      partsRow.textContent = "";
      result.parts.concat(result.parts.length > 1
        ? [{ name: "composed", text: "composed (AND)", allowed: result.allowed }] : [])
        .forEach(function (part) {
          var figure = core.element("div", "instrument-head");
          var canvas = document.createElement("canvas");
          canvas.setAttribute("role", "img");
          var n = 0;
          for (var k = 0; k < T * T; k++) n += part.allowed[k];
          canvas.setAttribute("aria-label", "The " + part.text + " mask: " + n + " of " + T * T +
            " pairs may attend.");
          paint(canvas, T, part.allowed);
          var label = document.createElement("span");
          label.textContent = part.text;
          figure.append(canvas, label);
          partsRow.append(figure);
        });
      maskCaption.textContent = "The composed mask, True (1) = may attend: a row per query, " +
        "a column per key" + (result.documents ? " (d = document)" : "") + ".";
      drawGrid(maskTable.table, result, function (k) {
        return result.allowed[k] ? { rgb: colour(1), text: "1" } : { rgb: colour(0), text: "0" };
      });
      weightsCaption.textContent = "One head's attention weights under that mask, for seeded " +
        "random queries and keys of width " + DH + "; blocked cells are hatched.";
      drawGrid(weightsTable.table, result, function (k) {
        var w = result.weights[k];
        return { rgb: colour(w), text: w.toFixed(2) };
      });
      status.textContent = describe(result);
    }
    [length.input, prefix.input, pads.input, windowSize.input, seed.input, lengthsInput]
      .forEach(function (el) { el.addEventListener("input", update); });
    [order.input, side.input, padding.input, windowOn.input, documents.input]
      .forEach(function (el) { el.addEventListener("change", update); });
    update();
  }

  window.attentionInstruments.mask_composer = { runs: 0, compute: compute,
    parseLengths: parseLengths };
  core.start("mask_composer", setUp);
  if (typeof module !== "undefined") module.exports = { compute: compute, parseLengths: parseLengths };
})();
