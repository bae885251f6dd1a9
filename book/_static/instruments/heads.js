// Chapter 03's instrument: multi-head attention's split, computed in the page. Draws (core.js's
// generator, one stream): the projected queries Q, T x D normals, then the projected keys K,
// T x D. Head h takes features h*Dh .. (h+1)*Dh - 1 of every query and key (Dh = D / H, as
// MultiHeadAttention's view [T, H, Dh] and transpose [H, T, Dh]) and computes its own weights
// softmax(q_h . k_h / sqrt(Dh)). State: window.attentionInstruments.heads.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  // Colour-blind-safe colours (seaborn's "colorblind"), one per head, cycled.
  var PALETTE = ["#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4",
    "#949494", "#ece133", "#56b4e9"];

  function compute(seed, D, H, T) {
    var rng = core.generator(seed);
    var query = rng.normals(T * D), keys = rng.normals(T * D);
    var Dh = D / H;
    var split = new Float64Array(H * T * Dh), weights = new Float64Array(H * T * T);
    for (var h = 0; h < H; h++) {
      for (var t = 0; t < T; t++) {
        for (var f = 0; f < Dh; f++) split[(h * T + t) * Dh + f] = query[t * D + h * Dh + f];
      }
      for (var i = 0; i < T; i++) {
        var scores = new Float64Array(T);
        for (var j = 0; j < T; j++) {
          var s = 0;
          for (f = 0; f < Dh; f++) s += query[i * D + h * Dh + f] * keys[j * D + h * Dh + f];
          scores[j] = s / Math.sqrt(Dh);
        }
        weights.set(core.softmax(scores, 1), (h * T + i) * T);
      }
    }
    return { seed: seed, dModel: D, heads: H, headDim: Dh, length: T, query: query,
      keys: keys, split: split, weights: weights };
  }

  function shade(w) {
    var mix = function (a, b) { return Math.round(a + (b - a) * Math.min(1, w)); };
    return [mix(255, 8), mix(255, 69), mix(255, 148)];
  }

  function paint(canvas, state, h) {
    var T = state.length;
    canvas.width = T;
    canvas.height = T;
    var context = canvas.getContext("2d");
    var image = context.createImageData(T, T);
    for (var k = 0; k < T * T; k++) {
      var c = shade(state.weights[h * T * T + k]);
      image.data.set([c[0], c[1], c[2], 255], 4 * k);
    }
    context.putImageData(image, 0, 0);
  }

  function divisors(D) {
    var out = [];
    for (var h = 1; h <= D; h++) if (D % h === 0) out.push(h);
    return out;
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = document.createElement("div");
    controls.className = "instrument-controls";
    var width = core.field(id + "-d", "d_model D =", core.range(1, 64, 1, config.dModel));
    var headSelect = document.createElement("select");
    var heads = core.field(id + "-h", "Heads H (divisors of D)", headSelect);
    heads.output.remove();
    var length = core.field(id + "-t", "Tokens T =", core.range(2, 12, 1, config.length));
    var seed = core.seedField(id + "-seed", config.seed, function () { update(); });
    var seedInput = seed.input;
    controls.append(width.wrap, heads.wrap, length.wrap, seed.wrap);

    var splitCaption = core.element("p", "instrument-caption");
    var strip = document.createElement("div");
    strip.className = "instrument-strip";
    strip.setAttribute("aria-hidden", "true");
    var splitList = document.createElement("ul");
    splitList.className = "instrument-split";
    var gridCaption = core.element("p", "instrument-caption");
    var grid = document.createElement("div");
    grid.className = "instrument-heads";
    var chooser = document.createElement("select");
    var chosen = core.field(id + "-show", "Weights of head", chooser);
    chosen.output.remove();
    var tableCaption = core.element("p", "instrument-caption");
    tableCaption.id = id + "-table-caption";
    var weightsTable = core.scrollingTable(
      "One head's weights (scrolls sideways on a narrow screen)", tableCaption.id);
    var scroller = weightsTable.scroller;
    var table = weightsTable.table;
    var status = core.status();
    body.textContent = "";
    body.append(controls, splitCaption, strip, splitList, gridCaption, grid, chosen.wrap,
      tableCaption, scroller, status);

    var state = (window.attentionInstruments.heads = { runs: 0 });

    function fillHeads(D, wanted) {
      var options = divisors(D);
      var H = options.indexOf(wanted) >= 0 ? wanted : 1;
      headSelect.textContent = "";
      options.forEach(function (h) {
        headSelect.add(new Option(h + " (width " + D / h + ")", String(h), false, h === H));
      });
      return H;
    }

    function drawTable(result, h) {
      var T = result.length;
      table.textContent = "";
      tableCaption.textContent = "Head " + h + "'s weights, from features " + h * result.headDim +
        " to " + ((h + 1) * result.headDim - 1) + ": a row per query, a column per key.";
      var head = table.createTHead().insertRow();
      var corner = document.createElement("th");
      corner.scope = "col";
      corner.textContent = "q \\ k";
      head.append(corner);
      for (var j = 0; j < T; j++) {
        var th = document.createElement("th");
        th.scope = "col";
        th.textContent = String(j);
        head.append(th);
      }
      var tbody = table.createTBody();
      for (var i = 0; i < T; i++) {
        var tr = tbody.insertRow();
        var rowHead = document.createElement("th");
        rowHead.scope = "row";
        rowHead.textContent = String(i);
        tr.append(rowHead);
        for (j = 0; j < T; j++) {
          var w = result.weights[(h * T + i) * T + j], cell = tr.insertCell();
          var c = shade(w);  // the colour of the same weight in the maps above
          cell.style.backgroundColor = "rgb(" + c.join(",") + ")";
          cell.style.color = core.inkOn(c);
          cell.textContent = w.toFixed(2);
        }
      }
    }

    function update() {
      var s = seedInput.value === "" ? NaN : Number(seedInput.value);
      if (!Number.isInteger(s) || s < 0 || s > 4294967295) {
        status.textContent = "The seed must be a whole number from 0 to 4294967295.";
        return;
      }
      var D = Number(width.input.value), T = Number(length.input.value);
      var H = fillHeads(D, Number(headSelect.value || config.heads));
      width.output.value = String(D);
      length.output.value = String(T);
      var result = compute(s, D, H, T);
      Object.assign(state, result);
      state.runs += 1;
      var Dh = result.headDim;
      splitCaption.textContent = "The " + D + " features of every query and key, split into " +
        H + (H === 1 ? " head" : " heads") + " of width D / H = " + Dh + ":";
      strip.textContent = "";
      for (var f = 0; f < D; f++) {
        var cell = document.createElement("span");
        cell.style.background = PALETTE[Math.floor(f / Dh) % PALETTE.length];
        strip.append(cell);
      }
      splitList.textContent = "";
      var shown = Math.min(H, 8);
      for (var h = 0; h < shown; h++) {
        var li = document.createElement("li");
        var swatch = document.createElement("span");
        swatch.className = "instrument-swatch";
        swatch.style.background = PALETTE[h % PALETTE.length];
        swatch.setAttribute("aria-hidden", "true");
        li.append(swatch, "head " + h + ": features " + h * Dh + "\u2013" + ((h + 1) * Dh - 1));
        splitList.append(li);
      }
      if (H > shown) {
        var more = document.createElement("li");
        more.textContent = "\u2026 head " + (H - 1) + ": features " + (H - 1) * Dh + "\u2013" +
          (D - 1);
        splitList.append(more);
      }
      gridCaption.textContent = "Each head's weights, " + T + " queries down by " + T +
        " keys across (darker = more weight):";
      grid.textContent = "";
      for (h = 0; h < H; h++) {
        var figure = document.createElement("div");
        figure.className = "instrument-head";
        var canvas = document.createElement("canvas");
        canvas.setAttribute("role", "img");
        var best = 0;
        for (var k = 1; k < T * T; k++) {
          if (result.weights[h * T * T + k] > result.weights[h * T * T + best]) best = k;
        }
        canvas.setAttribute("aria-label", "Head " + h + ": its largest weight, " +
          core.format(result.weights[h * T * T + best]) + ", is query " + Math.floor(best / T) +
          " to key " + (best % T) + ".");
        paint(canvas, result, h);
        var label = document.createElement("span");
        label.textContent = "head " + h;
        figure.append(canvas, label);
        grid.append(figure);
      }
      var wantedHead = Math.min(Number(chooser.value || 0), H - 1);
      chooser.textContent = "";
      for (h = 0; h < H; h++) chooser.add(new Option(String(h), String(h), false, h === wantedHead));
      drawTable(result, wantedHead);
      status.textContent = "D = " + D + ", H = " + H + ": every head sees " + Dh + " of the " + D +
        " features of each query and key, and divides its scores by \u221a" + Dh + ". " +
        "The weights are " + H + " \u00d7 " + T + " \u00d7 " + T + ", one " + T + " \u00d7 " + T +
        " map per head.";
    }
    fillHeads(config.dModel, config.heads);
    [width.input, length.input, seedInput].forEach(function (el) {
      el.addEventListener("input", update);
    });
    headSelect.addEventListener("change", update);
    chooser.addEventListener("change", function () { drawTable(state, Number(chooser.value)); });
    update();
  }

  core.start("heads", setUp);
})();
