// The live box's drawing arithmetic: colour maps, where a head's weights sit in the model's
// output, the large map's layout, and the text read out for a row or a cell. Pure functions (no
// DOM, no canvas), unit-tested in tests/js/drawing.test.js; box.js puts their results on the page.
//
// The attention weights are one Float32Array laid out as the model returns them, [L, H, T, T]:
// layer, head, query row, key column. `dims` is that shape, [L, H, T, T].
(function (root) {
  "use strict";

  // The colour of weight v on a scale from 0 to top, looked up in `table` (256 RGB bytes,
  // matplotlib's viridis from viridis.js) as matplotlib's colour maps do: entry floor(x * N) for
  // x = v / top in [0, 1), the last entry for x = 1, and x clipped to [0, 1].
  function colour(v, top, table) {
    var x = top > 0 ? v / top : 0;
    var n = table.length;
    var i = Math.floor(Math.min(1, Math.max(0, x)) * n);
    return table[Math.min(n - 1, i)];
  }

  // Blue (less weight in the second sentence), white (the same), red (more): v in [-1, 1].
  function diverging(v) {
    var x = Math.max(-1, Math.min(1, v));
    var end = x < 0 ? [33, 102, 172] : [178, 24, 43];
    var t = Math.abs(x);
    return [
      Math.round(255 + (end[0] - 255) * t),
      Math.round(255 + (end[1] - 255) * t),
      Math.round(255 + (end[2] - 255) * t)
    ];
  }

  // The offset of head (layer, head)'s T x T block in the flat [L, H, T, T] array.
  function headOffset(dims, layer, head) {
    var T = dims[2];
    return (layer * dims[1] + head) * T * T;
  }

  // The largest weight of one head (1 if the head is all zeros, so that it can divide).
  function headMax(weights, dims, layer, head) {
    var T = dims[2];
    var base = headOffset(dims, layer, head);
    var m = 0;
    for (var i = 0; i < T * T; i++) if (weights[base + i] > m) m = weights[base + i];
    return m > 0 ? m : 1;
  }

  // One head as RGBA pixels (one pixel per weight, row by row), into `pixels`
  // (a Uint8ClampedArray of 4 * T * T bytes, an ImageData's data).
  function paintHead(pixels, weights, dims, layer, head, top, table) {
    var T = dims[2];
    var base = headOffset(dims, layer, head);
    for (var i = 0; i < T * T; i++) {
      var c = colour(weights[base + i], top, table);
      pixels[4 * i] = c[0];
      pixels[4 * i + 1] = c[1];
      pixels[4 * i + 2] = c[2];
      pixels[4 * i + 3] = 255;
    }
    return pixels;
  }

  // Any T x T map as RGBA pixels: rgb(q, k) -> [r, g, b].
  function paintMap(pixels, T, rgb) {
    for (var q = 0; q < T; q++) {
      for (var k = 0; k < T; k++) {
        var c = rgb(q, k);
        var i = 4 * (q * T + k);
        pixels[i] = c[0];
        pixels[i + 1] = c[1];
        pixels[i + 2] = c[2];
        pixels[i + 3] = 255;
      }
    }
    return pixels;
  }

  // The large map's geometry: labels of `labelWidth` px (cut at 160) in a margin, then T cells
  // filling `available` px. Cells of at least 14 px keep the labels readable; past 128 tokens the
  // map is drawn to fit (3 px a cell at least) and the labels are left out.
  function mapLayout(T, labelWidth, boxWidth) {
    var labelled = T <= 128;
    var margin = Math.ceil(Math.min(labelWidth, 160)) + 8;
    var available = Math.max(200, boxWidth - margin - 4);
    if (!labelled) margin = 4;
    var cell = Math.max(labelled ? 14 : 3, Math.min(36, Math.floor(available / T)));
    return { margin: margin, cell: cell, T: T, labelled: labelled, size: margin + cell * T };
  }

  // Cells this large (px) have room for their weight written in them.
  var NUMBER_CELL = 28;

  function showsNumbers(geometry) {
    return geometry.labelled && geometry.cell >= NUMBER_CELL;
  }

  // A weight as written in its cell: two decimals without the leading zero (".22", "1", "0");
  // signed, for a difference ("+.05", "−.12", "0").
  function cellNumber(v, signed) {
    var text = Math.abs(v).toFixed(2);
    if (text === "0.00") return "0";
    if (text === "1.00") text = "1";
    else text = text.replace(/^0/, "");
    if (!signed) return v < 0 ? "\u2212" + text : text;
    return (v < 0 ? "\u2212" : "+") + text;
  }

  // The (query, key) under a point (x, y) px from the map's top left corner, or null.
  function cellAt(geometry, x, y) {
    var k = Math.floor((x - geometry.margin) / geometry.cell);
    var q = Math.floor((y - geometry.margin) / geometry.cell);
    if (q < 0 || k < 0 || q >= geometry.T || k >= geometry.T) return null;
    return { query: q, key: k };
  }

  // The weight of query q on key k in one head.
  function weightAt(weights, dims, layer, head, q, k) {
    return weights[headOffset(dims, layer, head) + q * dims[2] + k];
  }

  // A query row as text: its `count` largest weights, largest first.
  function rowText(weights, dims, tokens, layer, head, query, count) {
    if (query < 0) return "Choose a query row, or point at a cell, to read weights.";
    var T = dims[2];
    var base = headOffset(dims, layer, head) + query * T;
    var row = [];
    for (var k = 0; k < T; k++) row.push([weights[base + k], k]);
    row.sort(function (x, y) { return y[0] - x[0]; });
    return "Query " + query + " (" + tokens[query] + ") attends most to: " +
      row.slice(0, count || 5).map(function (p) {
        return p[1] + " " + tokens[p[1]] + " " + p[0].toFixed(2);
      }).join("; ");
  }

  function cellText(weights, dims, tokens, layer, head, q, k) {
    return "query " + q + " (" + tokens[q] + ") → key " + k + " (" + tokens[k] + "): " +
      weightAt(weights, dims, layer, head, q, k).toFixed(3);
  }

  // One head of the second sentence minus the same head of the first, when both have T tokens:
  // { values: Float32Array [T, T], largest: the largest |change| }, or null.
  function difference(first, firstDims, second, secondDims, layer, head) {
    var T = secondDims[2];
    if (firstDims[2] !== T) return null;
    var a = headOffset(firstDims, layer, head);
    var b = headOffset(secondDims, layer, head);
    var values = new Float32Array(T * T);
    var largest = 0;
    for (var i = 0; i < T * T; i++) {
      values[i] = second[b + i] - first[a + i];
      largest = Math.max(largest, Math.abs(values[i]));
    }
    return { layer: layer, head: head, values: values, largest: largest };
  }

  // Which edges of a scrolling box hide more of its content: a shadow is drawn on those.
  function overflow(scrollLeft, scrollWidth, clientWidth) {
    return {
      scrolls: scrollWidth > clientWidth + 1,
      left: scrollLeft > 1,
      right: scrollLeft + clientWidth < scrollWidth - 1
    };
  }

  // "All 72 heads: rows are layers 0 to 5, columns heads 0 to 11" for dims [6, 12, T, T].
  function gridLabel(dims) {
    return "All " + dims[0] * dims[1] + " heads: rows are layers 0 to " + (dims[0] - 1) +
      ", columns heads 0 to " + (dims[1] - 1);
  }

  // The head one arrow key away from (layer, head) in the grid, kept inside it; null for
  // another key. Home and End go to the row's first and last head.
  function gridMove(dims, layer, head, key) {
    var moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    var move = moves[key];
    if (key === "Home") move = [0, -head];
    if (key === "End") move = [0, dims[1] - 1 - head];
    if (!move) return null;
    return {
      layer: Math.min(dims[0] - 1, Math.max(0, layer + move[0])),
      head: Math.min(dims[1] - 1, Math.max(0, head + move[1]))
    };
  }

  // ---- ink on colour (WCAG 2) ----

  // "#rrggbb", "#rgb" or "rgb(r, g, b)" / "rgba(...)" as [r, g, b] (0-255); null otherwise.
  function parseColour(text) {
    var t = String(text || "").trim();
    var m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(t);
    if (m) {
      var hex = m[1].length === 3 ? m[1].replace(/./g, "$&$&") : m[1];
      return [0, 2, 4].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
    }
    m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/i.exec(t);
    return m ? [+m[1], +m[2], +m[3]] : null;
  }

  // WCAG 2's relative luminance of an sRGB colour [r, g, b] (0-255).
  function luminance(rgb) {
    var c = rgb.map(function (v) {
      var x = v / 255;
      return x <= 0.04045 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }

  // WCAG 2's contrast ratio of two colours, 1 to 21.
  function contrast(a, b) {
    var la = luminance(a);
    var lb = luminance(b);
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  }

  // The ink for text on a cell of colour rgb: dark or light, whichever contrasts more (black or
  // white by default: one of them is at least 4.58:1 on any colour).
  function ink(rgb, dark, light) {
    var d = dark || [0, 0, 0];
    var l = light || [255, 255, 255];
    return contrast(rgb, d) >= contrast(rgb, l) ? d : l;
  }

  // a and b mixed: t = 0 is a, t = 1 is b (rounded to whole bytes).
  function mix(a, b, t) {
    var x = Math.max(0, Math.min(1, t));
    return [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * x); });
  }

  function css(rgb) {
    return "rgb(" + rgb[0] + ", " + rgb[1] + ", " + rgb[2] + ")";
  }

  var drawing = {
    colour: colour,
    diverging: diverging,
    headOffset: headOffset,
    headMax: headMax,
    paintHead: paintHead,
    paintMap: paintMap,
    mapLayout: mapLayout,
    showsNumbers: showsNumbers,
    cellNumber: cellNumber,
    cellAt: cellAt,
    weightAt: weightAt,
    rowText: rowText,
    cellText: cellText,
    difference: difference,
    overflow: overflow,
    gridLabel: gridLabel,
    gridMove: gridMove,
    parseColour: parseColour,
    luminance: luminance,
    contrast: contrast,
    ink: ink,
    mix: mix,
    css: css
  };
  var ns = (root.liveAttention = root.liveAttention || {});
  ns.drawing = drawing;
  if (typeof module !== "undefined") module.exports = drawing;
})(globalThis);
