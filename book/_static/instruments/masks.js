// Chapter 05's instrument: one head's attention weights over a padded sequence, with the masks
// and the fill value the reader chooses, computed in the page. Draws (core.js's generator, one
// stream): the queries, T x Dh normals, then the keys, T x Dh; scores q_i . k_j / sqrt(Dh).
// Positions holding padding are blocked as keys by the padding mask; the causal mask blocks key
// j > i. Blocked scores are replaced by the fill before the softmax:
// - "-inf": the textbook fill; a row with every key blocked is 0 / 0, NaN;
// - "-1e9": such a row is uniform, 1/T on every key, padding included;
// - "library": attention_lab's, the most negative float64, then such rows set to 0.
// State: window.attentionInstruments.masks.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  var DH = 4;
  var FILLS = { "-inf": "\u2212inf", "-1e9": "\u22121e9", library: "the library's" };
  var FILL_NOTES = {
    "-inf": "Blocked scores become \u2212inf (masked_fill), then the softmax.",
    "-1e9": "Blocked scores become \u22121e9 (masked_fill), then the softmax.",
    library: "attention_lab: blocked scores become the most negative float64, then the " +
      "softmax, then rows with no key are set to 0.",
  };

  function compute(settings) {
    var T = settings.length, n = settings.real;
    var rng = core.generator(settings.seed);
    var query = rng.normals(T * DH), keys = rng.normals(T * DH);
    // Position p holds a real token iff it is among the n on the chosen side.
    var isReal = new Uint8Array(T);
    for (var p = 0; p < T; p++) isReal[p] = settings.side === "left" ? p >= T - n : p < n;
    var allowed = new Uint8Array(T * T), scores = new Float64Array(T * T);
    var weights = new Float64Array(T * T), empty = [];
    var fill = settings.fill === "-inf" ? -Infinity
      : settings.fill === "-1e9" ? -1e9 : -Number.MAX_VALUE;
    for (var i = 0; i < T; i++) {
      var row = new Float64Array(T), any = false;
      for (var j = 0; j < T; j++) {
        var s = 0;
        for (var d = 0; d < DH; d++) s += query[i * DH + d] * keys[j * DH + d];
        s /= Math.sqrt(DH);
        scores[i * T + j] = s;
        var ok = (!settings.padding || isReal[j]) && (!settings.causal || j <= i);
        allowed[i * T + j] = ok ? 1 : 0;
        any = any || ok;
        row[j] = ok ? s : fill;
      }
      var p_ = core.softmax(row, 1);
      if (!any) {
        empty.push(i);
        if (settings.fill === "library") p_.fill(0);
      }
      weights.set(p_, i * T);
    }
    return Object.assign({}, settings, { query: query, keys: keys, isReal: isReal,
      scores: scores, allowed: allowed, weights: weights, emptyRows: empty });
  }

  function label(state, p) {
    return p + (state.isReal[p] ? "" : " pad");
  }

  // Light blue for large weights, white for 0, in both themes; core.inkOn picks each cell's ink.
  function colour(w) {
    var t = Math.min(1, w);
    var mix = function (a, b) { return Math.round(a + (b - a) * t); };
    return [mix(255, 107), mix(255, 174), mix(255, 214)];
  }

  function drawTable(table, caption, state) {
    var T = state.length;
    table.textContent = "";
    caption.textContent = FILL_NOTES[state.fill] + " Attention weights: a row per query, a " +
      "column per key (" +
      (state.side === "left" ? "left" : "right") + "-padded, " + state.real + " real tokens of " +
      T + ")";
    var head = table.createTHead().insertRow();
    var corner = document.createElement("th");
    corner.textContent = "q \\ k";
    corner.scope = "col";
    head.append(corner);
    for (var j = 0; j < T; j++) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = label(state, j);
      head.append(th);
    }
    var body = table.createTBody();
    for (var i = 0; i < T; i++) {
      var tr = body.insertRow();
      var rowHead = document.createElement("th");
      rowHead.scope = "row";
      rowHead.textContent = label(state, i);
      tr.append(rowHead);
      for (j = 0; j < T; j++) {
        var w = state.weights[i * T + j], cell = tr.insertCell();
        var blocked = !state.allowed[i * T + j];
        if (blocked) {
          cell.className = "instrument-blocked";
          var hidden = document.createElement("span");
          hidden.className = "instrument-sr";
          hidden.textContent = "blocked ";
          cell.append(hidden);
        }
        if (isNaN(w)) {
          cell.classList.add("instrument-nan");
        } else {
          var rgb = colour(w);
          cell.style.backgroundColor = "rgb(" + rgb.join(",") + ")";
          cell.style.color = core.inkOn(rgb);
        }
        cell.append(isNaN(w) ? "NaN" : w.toFixed(2));
      }
    }
  }

  function describe(state) {
    var rows = state.emptyRows, T = state.length;
    if (rows.length === 0) {
      return "Every query may attend to at least one key: no row is fully masked, and every " +
        "blocked weight is 0 whichever the fill.";
    }
    var which = (rows.length === 1 ? "query " : "queries ") + rows.join(", ");
    var what = state.fill === "-inf"
      ? "with \u2212inf their weights are NaN (0 / 0), and NaN spreads to everything computed from them."
      : state.fill === "-1e9"
        ? "with \u22121e9 their rows are uniform, 1/" + T + " on every key, padding included."
        : "the library sets their rows to 0, so their outputs are 0.";
    if (rows.length === 1) {
      what = what.replace("their weights are", "its weights are").replace("their rows are uniform",
        "its row is uniform").replace("sets their rows to 0, so their outputs are", "sets its row to 0, so its output is");
    }
    return rows.length + (rows.length === 1 ? " query has no key it" : " queries have no key they") +
      " may attend to (" + which + "): " + what;
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = document.createElement("div");
    controls.className = "instrument-controls";
    var length = core.field(id + "-length", "Sequence length T =", core.range(2, 10, 1,
      config.length));
    var real = core.field(id + "-real", "Real tokens =", core.range(1, config.length, 1,
      config.real));
    var sideSelect = document.createElement("select");
    [["left", "on the left"], ["right", "on the right"]].forEach(function (o) {
      sideSelect.add(new Option(o[1], o[0], false, o[0] === config.side));
    });
    var side = core.field(id + "-side", "Padding", sideSelect);
    side.output.remove();
    var fillSelect = document.createElement("select");
    Object.keys(FILLS).forEach(function (k) {
      fillSelect.add(new Option(FILLS[k], k, false, k === config.fill));
    });
    var fill = core.field(id + "-fill", "Fill for blocked scores", fillSelect);
    fill.output.remove();
    function checkbox(name, text, checked) {
      var wrap = document.createElement("div");
      wrap.className = "instrument-field instrument-check";
      var input = document.createElement("input");
      input.type = "checkbox";
      input.id = id + "-" + name;
      input.checked = checked;
      var labelEl = document.createElement("label");
      labelEl.htmlFor = input.id;
      labelEl.textContent = text;
      wrap.append(input, labelEl);
      return { wrap: wrap, input: input };
    }
    var padding = checkbox("padding", "Padding mask", config.padding);
    var causal = checkbox("causal", "Causal mask", config.causal);
    var seed = core.seedField(id + "-seed", config.seed, function () { update(); });
    var seedInput = seed.input;
    var checks = document.createElement("div");
    checks.className = "instrument-field";
    checks.append(padding.wrap, causal.wrap);
    controls.append(length.wrap, real.wrap, side.wrap, checks, fill.wrap, seed.wrap);

    var caption = core.element("p", "instrument-caption");
    caption.id = id + "-caption-text";
    var weightsTable = core.scrollingTable(
      "Attention weights (scrolls sideways on a narrow screen)", caption.id);
    var scroller = weightsTable.scroller;
    var table = weightsTable.table;
    var status = core.status();
    body.textContent = "";
    body.append(controls, caption, scroller, status);

    var state = (window.attentionInstruments.masks = { runs: 0 });
    function update() {
      var s = seedInput.value === "" ? NaN : Number(seedInput.value);
      if (!Number.isInteger(s) || s < 0 || s > 4294967295) {
        status.textContent = "The seed must be a whole number from 0 to 4294967295.";
        return;
      }
      var T = Number(length.input.value);
      real.input.max = String(T);
      if (Number(real.input.value) > T) real.input.value = String(T);
      length.output.value = String(T);
      real.output.value = String(Number(real.input.value));
      var result = compute({ seed: s, length: T, real: Number(real.input.value),
        side: sideSelect.value, padding: padding.input.checked, causal: causal.input.checked,
        fill: fillSelect.value });
      Object.assign(state, result);
      state.runs += 1;
      drawTable(table, caption, result);
      status.textContent = describe(result);
    }
    [length.input, real.input, seedInput].forEach(function (el) {
      el.addEventListener("input", update);
    });
    [sideSelect, fillSelect, padding.input, causal.input].forEach(function (el) {
      el.addEventListener("change", update);
    });
    update();
  }

  core.start("masks", setUp);
})();
