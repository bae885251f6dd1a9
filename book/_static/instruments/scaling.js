// Chapter 02's instrument: one random query against T_k random keys of width d_k, the softmax of
// the unscaled and of the scaled scores, computed in the page from the reader's settings.
// Draws (core.js's generator, one stream): the query, d_k normals; then the keys, row by row,
// T_k x d_k normals. Scores z_j = q . k_j; unscaled row softmax(z / tau), scaled row
// softmax(z / (tau sqrt(d_k))). State for tests and curious readers:
// window.attentionInstruments.scaling.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  var BLUE = "#0173b2", ORANGE = "#de8f05";
  // The chart is drawn at the width it is shown (a viewBox of as many units as CSS pixels),
  // so its 13-unit text is 13 px on a phone and on a desktop alike.
  var H = 230, LEFT = 44, RIGHT = 8, TOP = 14, BOTTOM = 190, FONT = 13;

  function compute(seed, dK, numKeys, temperature) {
    var rng = core.generator(seed);
    var query = rng.normals(dK);
    var keys = rng.normals(numKeys * dK);
    var scores = new Float64Array(numKeys);
    for (var j = 0; j < numKeys; j++) {
      var s = 0;
      for (var i = 0; i < dK; i++) s += query[i] * keys[j * dK + i];
      scores[j] = s;
    }
    function row(scale) {
      var weights = core.softmax(scores, scale);
      var inputs = scores.map(function (z) { return z / scale; });
      return {
        weights: weights,
        maxWeight: core.max(weights),
        entropy: core.entropy(weights),
        jacobianNorm: core.jacobianNorm(weights),
        spread: core.spread(inputs),
      };
    }
    return {
      seed: seed, dK: dK, numKeys: numKeys, temperature: temperature,
      query: query, keys: keys, scores: scores,
      unscaled: row(temperature), scaled: row(temperature * Math.sqrt(dK)),
    };
  }

  function text(x, y, content, attributes) {
    // Ink, grid and marker colours come from instruments.css, which follows the theme.
    var t = core.svg("text", Object.assign({ x: x, y: y, "font-size": FONT,
      class: "instrument-ink" }, attributes || {}));
    t.textContent = content;
    return t;
  }

  function draw(plot, state) {
    var W = Math.max(280, Math.round(plot.getBoundingClientRect().width) || 600);
    plot.setAttribute("viewBox", "0 0 " + W + " " + H);
    while (plot.lastChild) plot.removeChild(plot.lastChild);
    var title = core.svg("title", {});
    var n = state.numKeys;
    var order = Array.from({ length: n }, function (_, j) { return j; });
    var u = state.unscaled.weights, s = state.scaled.weights;
    order.sort(function (a, b) { return u[b] - u[a] || a - b; });
    title.textContent = "Bar chart of the " + n + " keys' weights, largest first. Without " +
      "scaling the largest is " + core.format(state.unscaled.maxWeight) + "; with scaling " +
      core.format(state.scaled.maxWeight) + ". A uniform row would give each key " +
      core.format(1 / n) + ".";
    plot.append(title);
    var y = function (p) { return BOTTOM - p * (BOTTOM - TOP); };
    [0, 0.5, 1].forEach(function (tick) {
      plot.append(core.svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(tick), y2: y(tick),
        class: "instrument-gridline", "stroke-width": 1 }));
      plot.append(text(LEFT - 6, y(tick) + 5, String(tick), { "text-anchor": "end" }));
    });
    var width = (W - RIGHT - LEFT) / n;
    order.forEach(function (j, rank) {
      var x = LEFT + rank * width;
      [[u[j], BLUE, 0.08], [s[j], ORANGE, 0.5]].forEach(function (bar) {
        var rect = core.svg("rect", { x: x + bar[2] * width, y: y(bar[0]),
          width: 0.42 * width, height: Math.max(0, BOTTOM - y(bar[0])), fill: bar[1] });
        var tip = core.svg("title", {});
        tip.textContent = "key " + j + ": unscaled " + core.format(u[j]) + ", scaled " +
          core.format(s[j]);
        rect.append(tip);
        plot.append(rect);
      });
    });
    plot.append(core.svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(1 / n), y2: y(1 / n),
      class: "instrument-marker", "stroke-width": 1.5, "stroke-dasharray": "5 4" }));
    plot.append(text(W - RIGHT, y(1 / n) - 5, "uniform, 1/" + n, { "text-anchor": "end" }));
    plot.append(text(LEFT, BOTTOM + 22, "the " + n + " keys, largest weight first"));
    plot.append(text(12, (TOP + BOTTOM) / 2, "weight",
      { transform: "rotate(-90 12 " + (TOP + BOTTOM) / 2 + ")", "text-anchor": "middle" }));
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = document.createElement("div");
    controls.className = "instrument-controls";
    var dK = core.field(id + "-dk", "Key width d_k =", core.range(0, 10, 1, config.logDk));
    var keys = core.field(id + "-keys", "Keys T_k =", core.range(2, 32, 1, config.numKeys));
    var tau = core.field(id + "-tau", "Temperature \u03c4 =",
      core.range(-2, 5, 0.25, config.logTemperature));
    var seed = core.seedField(id + "-seed", config.seed, function () { update(); });
    var seedInput = seed.input;
    controls.append(dK.wrap, keys.wrap, tau.wrap, seed.wrap);

    var plot = core.svg("svg", { viewBox: "0 0 600 " + H, role: "img",
      class: "instrument-plot", preserveAspectRatio: "xMidYMid meet" });
    var legend = document.createElement("p");
    legend.className = "instrument-legend";
    [[BLUE, "unscaled: softmax(q\u00b7k / \u03c4)"],
     [ORANGE, "scaled: softmax(q\u00b7k / (\u03c4 \u221ad_k))"]].forEach(function (item) {
      var swatch = document.createElement("span");
      swatch.className = "instrument-swatch";
      swatch.style.background = item[0];
      swatch.setAttribute("aria-hidden", "true");
      var label = document.createElement("span");
      label.textContent = item[1];
      legend.append(swatch, label, " ");
    });

    var table = document.createElement("table");
    table.className = "instrument-table";
    var caption = table.createCaption();
    caption.textContent = "The two rows, computed in your browser";
    var head = table.createTHead().insertRow();
    ["", "unscaled", "scaled"].forEach(function (h) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = h;
      head.append(th);
    });
    var tbody = table.createTBody();
    var measures = [
      ["maxWeight", "largest weight"],
      ["entropy", "entropy (nats)"],
      ["jacobianNorm", "\u2016Jacobian of the softmax\u2016"],
      ["spread", "spread of the softmax's input (std)"],
    ];
    var cells = {};
    measures.forEach(function (m) {
      var tr = tbody.insertRow();
      var th = document.createElement("th");
      th.scope = "row";
      th.textContent = m[1];
      tr.append(th);
      cells[m[0]] = [tr.insertCell(), tr.insertCell()];
      cells[m[0]].forEach(function (c) { c.dataset.measure = m[0]; });
    });
    var status = core.status();

    body.textContent = "";
    body.append(controls, plot, legend, table, status);

    var state = (window.attentionInstruments.scaling = { runs: 0 });

    function update() {
      var width = Math.pow(2, Number(dK.input.value));
      var n = Number(keys.input.value);
      var temperature = Math.pow(2, Number(tau.input.value));
      var s = seedInput.value === "" ? NaN : Number(seedInput.value);
      if (!Number.isInteger(s) || s < 0 || s > 4294967295) {
        status.textContent = "The seed must be a whole number from 0 to 4294967295.";
        return;
      }
      dK.output.value = String(width);
      dK.input.setAttribute("aria-valuetext", "d_k = " + width);
      keys.output.value = String(n);
      var shown = Number(temperature.toPrecision(3)).toString();
      tau.output.value = shown;
      tau.input.setAttribute("aria-valuetext", "\u03c4 = " + shown);
      var result = compute(s, width, n, temperature);
      Object.assign(state, result);
      state.runs += 1;
      measures.forEach(function (m) {
        cells[m[0]][0].textContent = core.format(result.unscaled[m[0]]);
        cells[m[0]][1].textContent = core.format(result.scaled[m[0]]);
      });
      caption.textContent = "The two rows for d_k = " + width + ", T_k = " + n + ", \u03c4 = " +
        shown + ", seed " + s + " (a uniform row has entropy ln " + n + " = " +
        core.format(Math.log(n)) + ")";
      draw(plot, result);
      var ratio = result.scaled.jacobianNorm / result.unscaled.jacobianNorm;
      status.textContent = "Seed " + s + ", d_k = " + width + ": without scaling the largest " +
        "weight is " + core.format(result.unscaled.maxWeight) + ", with scaling " +
        core.format(result.scaled.maxWeight) + ". " + (width === 1
          ? "At d_k = 1 the scale is 1: the two rows are the same."
          : ratio >= 1
          ? "The softmax's Jacobian is " + ratio.toPrecision(3) + " times smaller without scaling."
          : "The softmax's Jacobian is " + (1 / ratio).toPrecision(3) +
            " times larger without scaling.");
    }

    [dK.input, keys.input, tau.input, seedInput].forEach(function (input) {
      input.addEventListener("input", update);
    });
    update();
    // Redrawn at its new width when the page's column changes (a phone turned, a window resized).
    var shownWidth = plot.getBoundingClientRect().width;
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        var width = plot.getBoundingClientRect().width;
        if (Math.abs(width - shownWidth) >= 1 && state.runs > 0) {
          shownWidth = width;
          draw(plot, state);
        }
      }).observe(plot);
    }
  }

  core.start("scaling", setUp);
})();
