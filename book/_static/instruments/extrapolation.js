// Chapter 18's instrument: positions past the training length L, for RoPE (with no scaling,
// linear interpolation, dynamic NTK or YaRN), ALiBi and the sinusoidal encoding, computed in the
// page (float64) as attention_lab.positional defines them:
// - RoPE: rope_frequencies(head_dim, base=..., scaling=..., seq_len=...): inv_freq[i] =
//   base^(-2i / Dh), rescaled by the chosen scaling, and YaRN's attention factor a, by which
//   rotary_embedding multiplies its cosines and sines (so a score by a^2). The score of q = k =
//   (1, ..., 1) rotated Delta positions apart is a^2 * sum_i 2 cos(Delta * inv_freq[i]): the
//   textbook decay curve. "dynamic" rescales with the sequence's length, taken here as Delta + 1
//   (a query Delta positions after the first key), as rotary_embedding takes it by default.
// - ALiBi: the bias -m_h * Delta of each head, slopes as alibi_slopes (BLOOM's, for any count).
// - sinusoidal: the dot products PE(p) . PE(q) of sinusoidal_encoding's rows for every q,
//   sum_i cos((q - p) * w_i) with w_i = 1 / base^(2i / d).
// For RoPE and the sinusoidal encoding, each pair of features turns by an angle; training on
// distances (positions) 0 .. L - 1 showed pair i the angles 0 .. (L - 1) * inv_freq_unscaled[i],
// the whole circle if that reaches 2 pi. A pair whose angle at the chosen distance, taken modulo
// 2 pi, lies past that range is "out of range": no distance in training turned it so far.
// compute() is pure; the page's state and compute() are window.attentionInstruments.extrapolation.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  // seaborn's "colorblind" palette less its two lightest colours (too faint on a white page);
  // heads 8 to 15 reuse it dashed, and the table names every head, so colour is never the only cue.
  var PALETTE = ["#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#949494",
    "#56b4e9"];
  var BLUE = "#0173b2", VERMILLION = "#d55e00";
  var TWO_PI = 2 * Math.PI;
  var H = 190, LEFT = 56, RIGHT = 10, TOP = 12, BOTTOM = 150, FONT = 13;
  var ENCODINGS = [["rope", "RoPE (rotary)"], ["alibi", "ALiBi (linear bias)"],
    ["sinusoidal", "sinusoidal (added)"]];
  var SCALINGS = [["none", "none"], ["linear", "linear (position interpolation)"],
    ["dynamic", "dynamic NTK"], ["yarn", "YaRN"]];

  // attention_lab.positional.rope_frequencies: [inv_freq (Float64Array, Dh / 2), factor].
  // scaling: "none", "linear", "dynamic" or "yarn"; factor s; trained = original L; seqLen for
  // "dynamic". YaRN with transformers' defaults (beta_fast 32, beta_slow 1, truncate).
  function ropeFrequencies(headDim, base, scaling, factor, trained, seqLen) {
    var half = headDim / 2, inv = new Float64Array(half), attention = 1, i;
    if (scaling === "dynamic") {
      var length = Math.max(seqLen, trained);
      var stretch = (factor * length) / trained;
      base = base * Math.pow(stretch - (factor - 1), headDim / (headDim - 2));
    }
    for (i = 0; i < half; i++) inv[i] = Math.pow(base, -((2 * i) / headDim));
    if (scaling === "linear") {
      for (i = 0; i < half; i++) inv[i] = inv[i] / factor;
    } else if (scaling === "yarn") {
      attention = factor <= 1 ? 1 : 0.1 * Math.log(factor) + 1;
      var turning = function (rotations) {
        return (headDim * Math.log(trained / (rotations * TWO_PI))) / (2 * Math.log(base));
      };
      var low = Math.max(Math.floor(turning(32)), 0);
      var high = Math.min(Math.ceil(turning(1)), headDim - 1);
      if (low === high) high += 0.001;
      for (i = 0; i < half; i++) {
        var keep = 1 - Math.min(1, Math.max(0, (i - low) / (high - low)));
        inv[i] = (inv[i] / factor) * (1 - keep) + inv[i] * keep;
      }
    }
    return [inv, attention];
  }

  // attention_lab.positional.alibi_slopes: 2^(-8h/P) for the largest power of two P <= H, then
  // the odd-numbered terms of the sequence for 2P.
  function alibiSlopes(heads) {
    var power = Math.pow(2, Math.floor(Math.log2(heads)));
    var slopes = [], k;
    for (k = 1; k <= power; k++) slopes.push(Math.pow(2, (-8 * k) / power));
    for (k = 1; slopes.length < heads; k += 2) slopes.push(Math.pow(2, (-8 * k) / (2 * power)));
    return Float64Array.from(slopes);
  }

  // Each pair's angle at `at` (modulo 2 pi) against the angles 0 .. (L - 1) * unscaled[i].
  function pairAngles(inv, unscaled, at, trained) {
    var n = inv.length, angle = new Float64Array(n), seen = new Float64Array(n);
    var outside = [];
    for (var i = 0; i < n; i++) {
      angle[i] = (at * inv[i]) % TWO_PI;
      var reach = (trained - 1) * unscaled[i];
      seen[i] = Math.min(TWO_PI, reach);
      if (reach < TWO_PI && angle[i] > reach) outside.push(i);
    }
    return { angle: angle, seen: seen, outside: outside };
  }

  // The last row that does not depend on the chosen distance or position (RoPE's scores, the
  // sinusoidal encoding's sum of cosines): a slider's move recomputes only what does.
  var memo = {};

  // settings: encoding, scaling, factor, headDim, base, trained (L), at (the distance, or the
  // position for the sinusoidal encoding), heads (ALiBi). Rows run over 0 .. 8L.
  function compute(settings) {
    var L = settings.trained, n = 8 * L + 1, at = settings.at, d = settings.headDim;
    var out = Object.assign({}, settings, { span: n - 1 });
    var i, x;
    if (settings.encoding === "alibi") {
      var slopes = alibiSlopes(settings.heads);
      var rows = [], atBias = new Float64Array(slopes.length);
      var trainedBias = new Float64Array(slopes.length);
      for (var h = 0; h < slopes.length; h++) {
        var row = new Float64Array(n);
        for (x = 0; x < n; x++) row[x] = slopes[h] * (0 - x);
        rows.push(row);
        atBias[h] = row[at];
        trainedBias[h] = row[L - 1];
      }
      return Object.assign(out, { slopes: slopes, bias: rows, atBias: atBias,
        trainedBias: trainedBias });
    }
    var unscaled = ropeFrequencies(d, settings.base, "none", 1, L, 1)[0];
    if (settings.encoding === "sinusoidal") {
      // sinusoidal_encoding's frequencies 1 / base^(2i/d). PE(p) . PE(q) = sum_i sin(p w) sin(q w)
      // + cos(p w) cos(q w) = sum_i cos((q - p) w_i): a function g of |q - p|, computed once for
      // 0 .. 8L (a slider's move then only reads it).
      var pairs = d / 2, p = at, dots = new Float64Array(n), w = new Float64Array(pairs);
      for (i = 0; i < pairs; i++) w[i] = 1 / Math.pow(settings.base, (2 * i) / d);
      var sinKey = ["sinusoidal", d, settings.base, L].join("/");
      if (memo.key !== sinKey) {
        var g = new Float64Array(n);
        for (x = 0; x < n; x++) {
          var s = 0;
          for (i = 0; i < pairs; i++) s += Math.cos(x * w[i]);
          g[x] = s;
        }
        memo = { key: sinKey, row: g };
      }
      for (x = 0; x < n; x++) dots[x] = memo.row[Math.abs(x - p)];
      return Object.assign(out, { dots: dots, frequencies: w },
        pairAngles(w, unscaled, p, L));
    }
    // RoPE. Every scaling but "dynamic" has one set of frequencies for every distance.
    var scaling = settings.scaling, factor = settings.factor;
    var fixed = scaling === "dynamic" ? null
      : ropeFrequencies(d, settings.base, scaling, factor, L, n);
    var key = [d, settings.base, scaling, factor, L].join("/");
    var scores = memo.key === key ? memo.row : new Float64Array(n);
    for (x = memo.key === key ? n : 0; x < n; x++) {
      var f = fixed || ropeFrequencies(d, settings.base, scaling, factor, L, x + 1);
      var inv = f[0], sum = 0;
      for (i = 0; i < inv.length; i++) sum += 2 * Math.cos(x * inv[i]);
      scores[x] = f[1] * f[1] * sum;
    }
    memo = { key: key, row: scores };
    var chosen = fixed || ropeFrequencies(d, settings.base, scaling, factor, L, at + 1);
    return Object.assign(out, { scores: scores, invFreq: chosen[0], attentionFactor: chosen[1],
      unscaled: unscaled }, pairAngles(chosen[0], unscaled, at, L));
  }

  function text(x, y, content, attributes) {
    // Ink, grid and marker colours come from instruments.css, which follows the theme.
    var t = core.svg("text", Object.assign({ x: x, y: y, "font-size": FONT,
      class: "instrument-ink" }, attributes || {}));
    t.textContent = content;
    return t;
  }

  function tick(v) {
    if (v === 0) return "0";
    var a = Math.abs(v);
    return a >= 1e4 || a < 0.01 ? v.toExponential(1) : Number(v.toPrecision(3)).toString();
  }

  function start(plot, title) {
    var W = Math.max(280, Math.round(plot.getBoundingClientRect().width) || 600);
    plot.setAttribute("viewBox", "0 0 " + W + " " + H);
    while (plot.lastChild) plot.removeChild(plot.lastChild);
    var t = core.svg("title", {});
    t.textContent = title;
    plot.append(t);
    return W;
  }

  // Rows against 0 .. n - 1, with [0, L) shaded and the chosen x marked. Where there are more
  // values than pixels, each pixel column draws its lowest and highest value (the envelope).
  function rowChart(plot, series, low, high, L, marker, title, xLabel) {
    var W = start(plot, title);
    var n = series[0][0].length;
    var x = function (q) { return LEFT + (q / Math.max(1, n - 1)) * (W - LEFT - RIGHT); };
    var y = function (v) { return BOTTOM - ((v - low) / (high - low)) * (BOTTOM - TOP); };
    plot.append(core.svg("rect", { x: x(0), y: TOP, width: x(L - 1) - x(0), height: BOTTOM - TOP,
      class: "instrument-band" }));
    // 0 gets a tick of its own when it lies between the ends, far enough from both to be read.
    var room = function (v) { return Math.abs(y(v) - y(0)) >= 18; };
    var ticks = !(low < 0 && high > 0) ? [low, (low + high) / 2, high]
      : room(low) && room(high) ? [low, 0, high] : [low, high];
    ticks.forEach(function (v) {
      plot.append(core.svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v),
        class: "instrument-gridline", "stroke-width": 1 }));
      plot.append(text(LEFT - 6, y(v) + 4, tick(v), { "text-anchor": "end" }));
    });
    var columns = Math.max(1, W - LEFT - RIGHT);
    series.forEach(function (s) {
      var values = s[0], points = [];
      if (n <= 2 * columns) {
        for (var q = 0; q < n; q++) points.push(x(q).toFixed(1) + "," + y(values[q]).toFixed(1));
      } else {
        for (var c = 0; c < columns; c++) {
          var q0 = Math.floor((c * n) / columns), q1 = Math.floor(((c + 1) * n) / columns);
          var lo = Infinity, hi = -Infinity;
          for (var k = q0; k < q1; k++) {
            lo = Math.min(lo, values[k]);
            hi = Math.max(hi, values[k]);
          }
          var px = (LEFT + c + 0.5).toFixed(1);
          points.push(px + "," + y(hi).toFixed(1), px + "," + y(lo).toFixed(1));
        }
      }
      var line = { points: points.join(" "), fill: "none", stroke: s[1], "stroke-width": 1.6,
        "stroke-linejoin": "round" };
      if (s[2]) line["stroke-dasharray"] = "6 3";
      plot.append(core.svg("polyline", line));
    });
    plot.append(core.svg("line", { x1: x(marker), x2: x(marker), y1: TOP, y2: BOTTOM,
      class: "instrument-marker", "stroke-width": 1.2, "stroke-dasharray": "4 3" }));
    plot.append(text(LEFT, BOTTOM + 18, "0"));
    plot.append(text(x(L), BOTTOM + 18, "L", { "text-anchor": "middle" }));
    plot.append(text(W - RIGHT, BOTTOM + 18, String(n - 1), { "text-anchor": "end" }));
    plot.append(text((LEFT + W - RIGHT) / 2, BOTTOM + 34, xLabel, { "text-anchor": "middle" }));
  }

  // One column per pair: the angles training showed it (shaded, from 0) and its angle now (a
  // dot inside that range, a diamond outside it).
  function pairChart(plot, result, title) {
    var W = start(plot, title);
    var n = result.angle.length, out = {};
    result.outside.forEach(function (i) { out[i] = true; });
    var slot = (W - LEFT - RIGHT) / n;
    var y = function (v) { return BOTTOM - (v / TWO_PI) * (BOTTOM - TOP); };
    [[0, "0"], [Math.PI, "\u03c0"], [TWO_PI, "2\u03c0"]].forEach(function (t) {
      plot.append(core.svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(t[0]), y2: y(t[0]),
        class: "instrument-gridline", "stroke-width": 1 }));
      plot.append(text(LEFT - 6, y(t[0]) + 4, t[1], { "text-anchor": "end" }));
    });
    var r = Math.max(2, Math.min(5, slot * 0.35));
    for (var i = 0; i < n; i++) {
      var cx = LEFT + (i + 0.5) * slot;
      plot.append(core.svg("rect", { x: cx - slot * 0.35, width: slot * 0.7, y: y(result.seen[i]),
        height: y(0) - y(result.seen[i]), class: "instrument-band" }));
      var cy = y(result.angle[i]);
      if (out[i]) {
        plot.append(core.svg("path", { d: "M" + cx + "," + (cy - r - 1) + " l" + (r + 1) + "," +
          (r + 1) + " l" + -(r + 1) + "," + (r + 1) + " l" + -(r + 1) + "," + -(r + 1) + "Z",
        fill: VERMILLION }));
      } else {
        plot.append(core.svg("circle", { cx: cx, cy: cy, r: r, fill: BLUE }));
      }
    }
    plot.append(text(LEFT, BOTTOM + 18, "0"));
    plot.append(text(W - RIGHT, BOTTOM + 18, String(n - 1), { "text-anchor": "end" }));
    plot.append(text((LEFT + W - RIGHT) / 2, BOTTOM + 34, "pair i (fast to slow)",
      { "text-anchor": "middle" }));
  }

  function legendItems(legend, items) {
    legend.textContent = "";
    items.forEach(function (item) {
      var swatch = document.createElement("span");
      swatch.className = "instrument-swatch";
      swatch.style.background = item[0];
      if (item[2]) swatch.style.transform = "rotate(45deg) scale(0.8)";
      else if (item[2] === false) swatch.style.borderRadius = "50%";
      swatch.setAttribute("aria-hidden", "true");
      var label = document.createElement("span");
      label.textContent = item[1];
      var entry = document.createElement("span");
      entry.style.whiteSpace = "nowrap";  // a swatch stays beside its name
      entry.append(swatch, label);
      legend.append(entry, " ");
    });
  }

  function least(values) {
    var m = Infinity;
    for (var i = 0; i < values.length; i++) m = Math.min(m, values[i]);
    return m;
  }

  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function select(options, value) {
    var el = document.createElement("select");
    options.forEach(function (o) { el.add(new Option(o[1], o[0], false, o[0] === value)); });
    return el;
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var id = "instrument-" + body.dataset.instrument;
    var controls = core.element("div", "instrument-controls");
    var encoding = core.field(id + "-encoding", "Encoding", select(ENCODINGS, config.encoding));
    encoding.output.remove();
    var scaling = core.field(id + "-scaling", "RoPE scaling", select(SCALINGS, config.scaling));
    scaling.output.remove();
    var factor = core.field(id + "-factor", "Scaling factor s =", core.range(0, 4, 1,
      config.logFactor));
    var width = core.field(id + "-width", "Head width =", core.range(3, 7, 1, config.logHeadDim));
    var base = core.field(id + "-base", "base =", core.range(3, 6, 1, config.logBase));
    var trained = core.field(id + "-trained", "Trained length L =", core.range(4, 12, 1,
      config.logTrained));
    var heads = core.field(id + "-heads", "ALiBi heads =", core.range(1, 16, 1, config.heads));
    var at = core.field(id + "-at", "Distance \u0394 =", core.range(0, 8 * Math.pow(2,
      config.logTrained), 1, config.at));
    controls.append(encoding.wrap, scaling.wrap, factor.wrap, width.wrap, base.wrap,
      trained.wrap, heads.wrap, at.wrap);

    var rowCaption = core.element("p", "instrument-caption");
    var rowPlot = core.svg("svg", { viewBox: "0 0 600 " + H, role: "img",
      class: "instrument-plot" });
    var rowLegend = core.element("p", "instrument-legend");
    var pairCaption = core.element("p", "instrument-caption");
    var pairPlot = core.svg("svg", { viewBox: "0 0 600 " + H, role: "img",
      class: "instrument-plot" });
    var pairLegend = core.element("p", "instrument-legend");
    var tableId = id + "-table-caption";
    var tableCaption = core.element("p", "instrument-caption");
    tableCaption.id = tableId;
    var scroll = core.scrollingTable("ALiBi's heads, scrollable", tableId);
    var status = core.status();
    body.textContent = "";
    body.append(controls, rowCaption, rowPlot, rowLegend, pairCaption, pairPlot, pairLegend,
      tableCaption, scroll.scroller, status);

    var state = window.attentionInstruments.extrapolation;

    function update() {
      var kind = encoding.input.value;
      var L = Math.pow(2, Number(trained.input.value)), span = 8 * L;
      at.input.max = String(span);
      var x = Math.min(Number(at.input.value), span);
      var s = Math.pow(2, Number(factor.input.value));
      var d = Math.pow(2, Number(width.input.value));
      var b = Math.pow(10, Number(base.input.value));
      var rope = kind === "rope";
      scaling.wrap.hidden = !rope;
      factor.wrap.hidden = !rope || scaling.input.value === "none";
      width.wrap.hidden = base.wrap.hidden = kind === "alibi";
      heads.wrap.hidden = kind !== "alibi";
      var word = kind === "sinusoidal" ? "Position p" : "Distance \u0394";
      at.wrap.querySelector("label").firstChild.textContent = word + " =";
      width.wrap.querySelector("label").firstChild.textContent =
        kind === "sinusoidal" ? "Model width d_model =" : "Head width =";
      factor.output.value = String(s);
      factor.input.setAttribute("aria-valuetext", "factor " + s);  // the slider holds log2 s
      width.output.value = String(d);
      width.input.setAttribute("aria-valuetext", "width " + d);
      base.output.value = grouped(b);
      base.input.setAttribute("aria-valuetext", "base " + grouped(b));
      trained.output.value = grouped(L);
      trained.input.setAttribute("aria-valuetext", grouped(L) + " positions");
      heads.output.value = heads.input.value;
      at.output.value = grouped(x) + " (" + core.format(x / L) + " L)";
      at.input.setAttribute("aria-valuetext", word.toLowerCase() + " " + grouped(x) + ", " +
        core.format(x / L) + " times L");
      var result = compute({ encoding: kind, scaling: scaling.input.value, factor: s,
        headDim: d, base: b, trained: L, at: x, heads: Number(heads.input.value) });
      Object.assign(state, result);
      state.runs += 1;
      var trainedText = "training saw " + (kind === "sinusoidal" ? "positions" : "distances") +
        " 0 to " + grouped(L - 1) + " (shaded)";
      [pairCaption, pairPlot, pairLegend].forEach(function (el) {
        el.toggleAttribute("hidden", kind === "alibi");  // an SVG element has no .hidden
      });
      [tableCaption, scroll.scroller].forEach(function (el) {
        el.toggleAttribute("hidden", kind !== "alibi");
      });
      if (kind === "alibi") {
        alibiView(result, L, x, trainedText);
        return;
      }
      var pairs = d / 2, outside = result.outside.length;
      var where = kind === "sinusoidal" ? "at position " + grouped(x) : "at distance " +
        grouped(x);
      if (rope) {
        var a2 = result.attentionFactor * result.attentionFactor;
        var dynamic = scaling.input.value === "dynamic";
        rowCaption.textContent = "The score of q = k = (1, \u2026, 1) rotated \u0394 apart, " +
          "q\u00b7R(\u0394)k, for every distance 0 to " + grouped(span) + " (8 L)" +
          (dynamic ? ", each with the frequencies of a sequence \u0394 + 1 long" : "") + "; " +
          trainedText + ", the dashed line marks \u0394 = " + grouped(x) + ". At \u0394 = 0 it " +
          "is " + core.format(result.scores[0]) + (a2 !== 1 ? " = " + d + " \u00d7 " +
          core.format(a2) + ", YaRN's attention factor " + core.format(result.attentionFactor) +
          " squared" : " = the head width") + ".";
        rowChart(rowPlot, [[result.scores, BLUE]], Math.min(0, least(result.scores)),
          result.scores[0], L, x, "Score against the distance, up to 8 L", "distance \u0394");
      } else {
        rowCaption.textContent = "Dot products PE(" + grouped(x) + ") \u00b7 PE(q) for every " +
          "position q from 0 to " + grouped(span) + " (8 L); " + trainedText + ". The largest, " +
          "d_model / 2 = " + core.format(result.dots[x]) + ", is at q = p.";
        rowChart(rowPlot, [[result.dots, BLUE]], Math.min(0, least(result.dots)), d / 2, L, x,
          "Dot product of position p with every position", "position q");
      }
      rowLegend.hidden = true;
      pairCaption.textContent = "Each of the " + pairs + " pairs of features, fastest first: " +
        "shaded, the angles that " + (kind === "sinusoidal" ? "positions" : "distances") +
        " 0 to " + grouped(L - 1) + " turned it to (the whole circle for the fast ones); " +
        "marked, its angle " + where + ", modulo 2\u03c0" +
        (rope && scaling.input.value !== "none" ? ", with " + scaling.input.selectedOptions[0]
          .textContent + " scaling by s = " + s : "") + ".";
      pairChart(pairPlot, result, "Each pair's angle " + where + " against the angles training " +
        "showed it: " + outside + " of " + pairs + " outside");
      legendItems(pairLegend, [[BLUE, "within what training showed", false],
        [VERMILLION, "outside it", true]]);
      var unit = kind === "sinusoidal" ? "position" : "distance";
      var sentence = "At " + unit + " " + grouped(x) + ", " + (outside === 0
        ? "no pair of " + pairs + " has turned further than the " + unit + "s in training (0 to " +
          grouped(L - 1) + ") turned it."
        : outside + " of " + pairs + " pairs " + (outside === 1 ? "has" : "have") +
          " turned further than any " + unit + " in training (0 to " + grouped(L - 1) +
          ") turned " + (outside === 1 ? "it" : "them") + ".");
      if (rope) {
        sentence += " The score there is " + core.format(result.scores[x]) + ", against " +
          core.format(result.scores[0]) + " at \u0394 = 0.";
        if (scaling.input.value === "yarn") {
          sentence += " YaRN multiplies cosines and sines by its attention factor 0.1 ln s + 1 = " +
            core.format(result.attentionFactor) + ", so every score by " + core.format(a2) + ".";
        }
      } else {
        sentence += " PE(p) \u00b7 PE(q) depends on p \u2212 q alone, so its row has the same " +
          "shape at every p; the encoding of p itself is what training never saw.";
      }
      status.textContent = sentence;
    }

    function alibiView(result, L, x, trainedText) {
      var H_ = result.slopes.length, span = result.span;
      rowCaption.textContent = "ALiBi's bias \u2212m\u2095\u00b7\u0394 for each of the " + H_ +
        " heads, for every distance 0 to " + grouped(span) + " (8 L); " + trainedText +
        ", the dashed line marks \u0394 = " + grouped(x) + ".";
      var series = result.bias.map(function (row, h) {
        return [row, PALETTE[h % PALETTE.length], h >= PALETTE.length];
      });
      var lowest = least(result.bias.map(function (row) { return row[span]; }));
      rowChart(rowPlot, series, lowest, 0, L, x,
        "Each head's bias against the distance, up to 8 L", "distance \u0394");
      rowLegend.hidden = false;
      legendItems(rowLegend, Array.from(result.slopes, function (m, h) {
        return [PALETTE[h % PALETTE.length], "head " + h + (h >= PALETTE.length ? " (dashed)"
          : "")];
      }));
      tableCaption.textContent = "Each head's slope m, its bias at \u0394 = " + grouped(x) +
        " and at \u0394 = L \u2212 1 = " + grouped(L - 1) + ", the farthest distance in training.";
      var table = scroll.table;
      table.textContent = "";
      var head = table.createTHead().insertRow();
      ["head", "slope m", "bias at \u0394 = " + grouped(x), "bias at L \u2212 1"].forEach(
        function (t) {
          var th = document.createElement("th");
          th.scope = "col";
          th.textContent = t;
          head.append(th);
        });
      var tbody = table.createTBody();
      for (var h = 0; h < H_; h++) {
        var row = tbody.insertRow();
        var th = document.createElement("th");
        th.scope = "row";
        th.textContent = String(h);
        row.append(th);
        [core.format(result.slopes[h]), core.format(result.atBias[h]),
          core.format(result.trainedBias[h])].forEach(function (t) {
          row.insertCell().textContent = t;
        });
      }
      var steep = result.atBias[0], gentle = result.atBias[0], hs = 0, hg = 0;
      for (h = 1; h < H_; h++) {
        if (result.atBias[h] < steep) { steep = result.atBias[h]; hs = h; }
        if (result.atBias[h] > gentle) { gentle = result.atBias[h]; hg = h; }
      }
      status.textContent = "At distance " + grouped(x) + " the biases run from " +
        core.format(steep) + " (head " + hs + ", slope " + core.format(result.slopes[hs]) +
        ") to " + core.format(gentle) + " (head " + hg + ", slope " +
        core.format(result.slopes[hg]) + ")" + (x >= L ? "; each is lower than that head's " +
        "lowest in training, but it is the same straight line, with nothing new to turn." : ".");
    }

    [factor, width, base, trained, heads, at].forEach(function (f) {
      f.input.addEventListener("input", update);
    });
    [encoding, scaling].forEach(function (f) { f.input.addEventListener("change", update); });
    update();
    core.redrawOnResize(rowPlot, update);
  }

  window.attentionInstruments.extrapolation = { runs: 0, compute: compute,
    ropeFrequencies: ropeFrequencies, alibiSlopes: alibiSlopes };
  core.start("extrapolation", setUp);
  if (typeof module !== "undefined") {
    module.exports = { compute: compute, ropeFrequencies: ropeFrequencies,
      alibiSlopes: alibiSlopes };
  }
})();
