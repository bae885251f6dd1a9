// Chapter 04's instrument: the sinusoidal positional encoding for the reader's d_model, max_len
// and base, computed in the page (float64), as attention_lab.positional.sinusoidal_encoding
// defines it: PE[pos, 2i] = sin(pos / base^(2i / d)), PE[pos, 2i + 1] = cos(the same angle).
// Three views: the encoding as a heatmap (position down, dimension across) with the chosen
// position marked; one pair of dimensions (2i, 2i + 1) over the positions; and the dot products
// PE(p) . PE(q) of the chosen position p with every position q. Nothing is random here.
// State: window.attentionInstruments.positional.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  var BLUE = "#0173b2", ORANGE = "#de8f05";
  var H = 170, LEFT = 52, RIGHT = 10, TOP = 12, BOTTOM = 136, FONT = 13;

  function encoding(maxLen, d, base) {
    var pe = new Float64Array(maxLen * d);
    for (var i = 0; 2 * i < d; i++) {
      var frequency = 1 / Math.pow(base, (2 * i) / d);
      for (var pos = 0; pos < maxLen; pos++) {
        var angle = pos * frequency;
        pe[pos * d + 2 * i] = Math.sin(angle);
        if (2 * i + 1 < d) pe[pos * d + 2 * i + 1] = Math.cos(angle);
      }
    }
    return pe;
  }

  function dots(pe, maxLen, d, p) {
    var out = new Float64Array(maxLen);
    for (var q = 0; q < maxLen; q++) {
      var s = 0;
      for (var k = 0; k < d; k++) s += pe[p * d + k] * pe[q * d + k];
      out[q] = s;
    }
    return out;
  }

  function text(x, y, content, attributes) {
    // Ink, grid and marker colours come from instruments.css, which follows the theme.
    var t = core.svg("text", Object.assign({ x: x, y: y, "font-size": FONT,
      class: "instrument-ink" }, attributes || {}));
    t.textContent = content;
    return t;
  }

  // A line chart of the series [[values, colour, name]] against the positions 0..n-1.
  function lineChart(plot, series, low, high, marker, title, xLabel) {
    var W = Math.max(280, Math.round(plot.getBoundingClientRect().width) || 600);
    plot.setAttribute("viewBox", "0 0 " + W + " " + H);
    while (plot.lastChild) plot.removeChild(plot.lastChild);
    var t = core.svg("title", {});
    t.textContent = title;
    plot.append(t);
    var n = series[0][0].length;
    var x = function (q) { return LEFT + (q / Math.max(1, n - 1)) * (W - LEFT - RIGHT); };
    var y = function (v) { return BOTTOM - ((v - low) / (high - low)) * (BOTTOM - TOP); };
    [low, (low + high) / 2, high].forEach(function (tick) {
      plot.append(core.svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(tick), y2: y(tick),
        class: "instrument-gridline", "stroke-width": 1 }));
      plot.append(text(LEFT - 6, y(tick) + 4, Number(tick.toPrecision(3)).toString(),
        { "text-anchor": "end" }));
    });
    series.forEach(function (s) {
      var points = Array.from(s[0], function (v, q) {
        return x(q).toFixed(1) + "," + y(v).toFixed(1);
      }).join(" ");
      plot.append(core.svg("polyline", { points: points, fill: "none", stroke: s[1],
        "stroke-width": 1.8 }));
    });
    plot.append(core.svg("line", { x1: x(marker), x2: x(marker), y1: TOP, y2: BOTTOM,
      class: "instrument-marker", "stroke-width": 1.2, "stroke-dasharray": "4 3" }));
    plot.append(text(LEFT, BOTTOM + 20, "0"));
    plot.append(text(W - RIGHT, BOTTOM + 20, String(n - 1), { "text-anchor": "end" }));
    plot.append(text((LEFT + W - RIGHT) / 2, BOTTOM + 20, xLabel, { "text-anchor": "middle" }));
  }

  // -1 blue, 0 white, +1 orange-red (a diverging scale).
  function rgb(v) {
    var t = Math.max(-1, Math.min(1, v));
    return t < 0
      ? [Math.round(255 + t * (255 - 33)), Math.round(255 + t * (255 - 102)), Math.round(255 + t * (255 - 172))]
      : [Math.round(255 - t * (255 - 178)), Math.round(255 - t * (255 - 24)), Math.round(255 - t * (255 - 43))];
  }

  // Sines (even dimensions) in the left half, cosines (odd dimensions) in the right half, split
  // as the chapter's heatmap figure splits them: interleaved, the two alternate column by column, and a column
  // per pixel or less beats into stripes that are not in the data. Each half is painted at the
  // canvas's shown size in device pixels: a pixel shows the mean of the cells it covers (or the
  // one cell it falls in), so neither many positions nor many dimensions alias into bands.
  var GAP = 6; // CSS px between the halves
  function paint(canvas, pe, maxLen, d) {
    var scale = window.devicePixelRatio || 1;
    var shownWidth = canvas.clientWidth || d + GAP;
    var rows = Math.min(maxLen, Math.max(1, Math.round((canvas.clientHeight || maxLen) * scale)));
    var gap = Math.round(GAP * scale);
    var half = Math.max(1, Math.floor((Math.round(shownWidth * scale) - gap) / 2));
    var cols = 2 * half + gap;
    var pairs = d / 2;
    canvas.width = cols;
    canvas.height = rows;
    // Sharp rows only when each covers at least 2 pixels; a row stretched by a fraction of a
    // pixel, nearest-neighbour, beats against its neighbours into false stripes.
    var sharp = rows * 2 <= (canvas.clientHeight || 0) * scale;
    canvas.style.imageRendering = sharp ? "pixelated" : "auto";
    var context = canvas.getContext("2d");
    var image = context.createImageData(cols, rows);
    for (var r = 0; r < rows; r++) {
      var r0 = Math.floor((r * maxLen) / rows);
      var r1 = Math.max(r0 + 1, Math.floor(((r + 1) * maxLen) / rows));
      for (var c = 0; c < cols; c++) {
        var k = 4 * (r * cols + c);
        var parity = c < half ? 0 : c >= half + gap ? 1 : -1;
        if (parity < 0) {  // the gap: transparent, the page shows through in either theme
          image.data[k] = image.data[k + 1] = image.data[k + 2] = image.data[k + 3] = 0;
          continue;
        }
        var x = parity ? c - half - gap : c;
        var i0 = Math.floor((x * pairs) / half);
        var i1 = Math.max(i0 + 1, Math.floor(((x + 1) * pairs) / half));
        var sum = 0;
        for (var p = r0; p < r1; p++) {
          for (var i = i0; i < i1; i++) sum += pe[p * d + 2 * i + parity];
        }
        var colour = rgb(sum / ((r1 - r0) * (i1 - i0)));
        image.data[k] = colour[0];
        image.data[k + 1] = colour[1];
        image.data[k + 2] = colour[2];
        image.data[k + 3] = 255;
      }
    }
    context.putImageData(image, 0, 0);
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = document.createElement("div");
    controls.className = "instrument-controls";
    var width = core.field(id + "-d", "d_model =", core.range(2, 512, 2, config.dModel));
    var length = core.field(id + "-len", "max_len =", core.range(10, 1000, 10, config.maxLen));
    var base = core.field(id + "-base", "base =", core.range(1, 5, 0.5, config.logBase));
    var position = core.field(id + "-pos", "Position p =", core.range(0, config.maxLen - 1, 1,
      config.position));
    var pair = core.field(id + "-pair", "Pair i =", core.range(0, config.dModel / 2 - 1, 1,
      config.pair));
    controls.append(width.wrap, length.wrap, base.wrap, position.wrap, pair.wrap);

    var heatCaption = core.element("p", "instrument-caption");
    var frame = document.createElement("div");
    frame.className = "instrument-heatmap";
    var canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    var line = document.createElement("div");
    line.className = "instrument-heatmap-line";
    line.setAttribute("aria-hidden", "true");
    frame.append(canvas, line);
    var pairCaption = core.element("p", "instrument-caption");
    var pairPlot = core.svg("svg", { viewBox: "0 0 600 " + H, role: "img",
      class: "instrument-plot" });
    var legend = document.createElement("p");
    legend.className = "instrument-legend";
    var dotCaption = core.element("p", "instrument-caption");
    var dotPlot = core.svg("svg", { viewBox: "0 0 600 " + H, role: "img",
      class: "instrument-plot" });
    var status = core.status();
    body.textContent = "";
    body.append(controls, heatCaption, frame, pairCaption, pairPlot, legend, dotCaption, dotPlot,
      status);

    var state = (window.attentionInstruments.positional = { runs: 0 });
    var painted = "";
    var computed = "";

    function update() {
      var d = Number(width.input.value), maxLen = Number(length.input.value);
      var b = Math.pow(10, Number(base.input.value));
      position.input.max = String(maxLen - 1);
      pair.input.max = String(d / 2 - 1);
      var p = Math.min(Number(position.input.value), maxLen - 1);
      var i = Math.min(Number(pair.input.value), d / 2 - 1);
      width.output.value = String(d);
      length.output.value = String(maxLen);
      var shownBase = Number(b.toPrecision(3)).toString();
      base.output.value = shownBase;
      base.input.setAttribute("aria-valuetext", "base = " + shownBase);
      position.output.value = String(p);
      pair.output.value = String(i) + " (dimensions " + 2 * i + " and " + (2 * i + 1) + ")";
      pair.input.setAttribute("aria-valuetext", "pair " + i + ", dimensions " + 2 * i + " and " +
        (2 * i + 1));
      var key = d + "/" + maxLen + "/" + b;
      if (key !== computed) {
        state.encoding = encoding(maxLen, d, b);
        computed = key;
      }
      // Painted again when the settings or the canvas's shown size change (see paint).
      var look = key + "/" + canvas.clientWidth + "x" + canvas.clientHeight;
      if (look !== painted) {
        paint(canvas, state.encoding, maxLen, d);
        painted = look;
      }
      var pe = state.encoding;
      var row = dots(pe, maxLen, d, p);
      Object.assign(state, { dModel: d, maxLen: maxLen, base: b, position: p, pair: i,
        dots: row });
      state.runs += 1;
      line.style.top = ((p + 0.5) / maxLen) * 100 + "%";
      canvas.setAttribute("aria-label", "Heatmap of the encoding, " + maxLen + " positions down " +
        "by " + d + " dimensions across, the " + d / 2 + " sines (even dimensions) in the left " +
        "half and the " + d / 2 + " cosines (odd dimensions) in the right half, blue for -1, " +
        "white for 0, red for +1; position " + p + " is marked. In each half the left columns " +
        "change fast down the positions, the right ones slowly.");
      heatCaption.textContent = "The encoding: position 0 to " + (maxLen - 1) + " down; " +
        "across, the sines (dimensions 0, 2, \u2026, " + (d - 2) + ") on the left and the " +
        "cosines (1, 3, \u2026, " + (d - 1) + ") on the right (blue \u22121, white 0, red +1); " +
        "the line marks position " + p + ".";
      var sine = new Float64Array(maxLen), cosine = new Float64Array(maxLen);
      for (var q = 0; q < maxLen; q++) {
        sine[q] = pe[q * d + 2 * i];
        cosine[q] = pe[q * d + 2 * i + 1];
      }
      var wavelength = 2 * Math.PI * Math.pow(b, (2 * i) / d);
      pairCaption.textContent = "Dimensions " + 2 * i + " (sine) and " + (2 * i + 1) +
        " (cosine) over the positions: wavelength " + core.format(wavelength) + " positions, " +
        core.format(maxLen / wavelength) + " periods over " + maxLen + " positions.";
      lineChart(pairPlot, [[sine, BLUE], [cosine, ORANGE]], -1, 1, p,
        "Sine and cosine of pair " + i + " against the position", "position");
      legend.textContent = "";
      [[BLUE, "dimension " + 2 * i + ", sine"], [ORANGE, "dimension " + (2 * i + 1) + ", cosine"]]
        .forEach(function (item) {
          var swatch = document.createElement("span");
          swatch.className = "instrument-swatch";
          swatch.style.background = item[0];
          swatch.setAttribute("aria-hidden", "true");
          var label = document.createElement("span");
          label.textContent = item[1];
          legend.append(swatch, label, " ");
        });
      var low = Math.min.apply(null, Array.from(row));
      var best = -1;
      for (q = 0; q < maxLen; q++) {
        if (q !== p && (best < 0 || row[q] > row[best])) best = q;
      }
      // Positions p - k and p + k have the same dot product with p (it depends on k only), so
      // the most similar position is often a tie: name every position that shares the maximum.
      var tied = [];
      for (q = 0; q < maxLen; q++) {
        if (q !== p && best >= 0 && Math.abs(row[q] - row[best]) <= 1e-9) tied.push(q);
      }
      dotCaption.textContent = "Dot products PE(" + p + ") \u00b7 PE(q) for every position q: " +
        "largest at q = p, where it is d_model / 2 = " + core.format(row[p]) + ".";
      lineChart(dotPlot, [[row, BLUE]], Math.min(0, low), d / 2, p,
        "Dot product of position " + p + " with every position", "position q");
      var neighbours = [p - 1, p + 1].filter(function (q) { return q >= 0 && q < maxLen; });
      status.textContent = "Position " + p + ": PE(p) \u00b7 PE(p) = " + core.format(row[p]) +
        (neighbours.length ? "; with its neighbours " + neighbours.map(function (q) {
          return "PE(" + q + ") " + core.format(row[q]);
        }).join(", ") : "") + (tied.length > 1 ? "; the most similar other positions are " +
        tied.slice(0, -1).join(", ") + " and " + tied[tied.length - 1] + " (" +
        core.format(row[best]) + " each)." : best >= 0 ? "; the most similar other position is " +
        best + " (" + core.format(row[best]) + ")." : ".");
    }
    [width.input, length.input, base.input, position.input, pair.input].forEach(function (el) {
      el.addEventListener("input", update);
    });
    update();
    core.redrawOnResize(dotPlot, update);
  }

  core.start("positional", setUp);
})();
