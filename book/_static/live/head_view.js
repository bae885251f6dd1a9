// The live box's head view (BertViz's head view): for one layer, lines from a chosen query token,
// listed on the left, to every key token, listed on the right, one colour per head, each line as
// strong as its attention weight. Pure arithmetic (no DOM), unit-tested in
// tests/js/head_view.test.js; box.js draws what these functions return as SVG.
//
// The weights are the model's Float32Array [L, H, T, T] (layer, head, query, key); `dims` is
// that shape.
(function (root) {
  "use strict";

  // One colour per head, as BertViz does (d3's category10 for the first 10 heads); past 10,
  // mid-tone colours of Tableau 20b, which show on the light page and on the dark one (the pale
  // half of Tableau 20 would vanish on white).
  var PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#6b6ecf", "#8ca252", "#bd9e39", "#ad494a", "#a55194", "#5254a3"
  ];

  function headColour(head) {
    return PALETTE[head % PALETTE.length];
  }

  // The layout of the two columns: T rows of `rowHeight` px, the query column's right edge at
  // `labelWidth`, the key column's left edge `gap` px further. Lines run from the right edge of
  // the query's row to the left edge of the key's row, through the row's middle.
  function layout(T, labelWidth, options) {
    var o = options || {};
    var rowHeight = o.rowHeight === undefined ? 22 : o.rowHeight;
    var gap = o.gap === undefined ? 160 : o.gap;
    var pad = o.pad === undefined ? 4 : o.pad;
    var left = Math.ceil(labelWidth) + pad; // where lines start
    var right = left + gap; // where lines end
    return {
      T: T,
      rowHeight: rowHeight,
      top: pad,
      labelWidth: Math.ceil(labelWidth),
      x1: left,
      x2: right,
      width: right + Math.ceil(labelWidth) + 2 * pad,
      height: 2 * pad + T * rowHeight
    };
  }

  // The y of row i's middle.
  function rowY(g, i) {
    return g.top + (i + 0.5) * g.rowHeight;
  }

  // A weight's look: opacity w (BertViz draws a line's opacity as its weight), a width of 1 to
  // maxWidth px growing with w; a line under `hidden` (1e-3 by default) is left out.
  function lineStyle(w, maxWidth) {
    var x = Math.max(0, Math.min(1, w));
    return { opacity: x, width: 1 + ((maxWidth || 4) - 1) * x };
  }

  // The lines of one layer from one query (or, for query -1, from every query, as BertViz
  // shows before a token is chosen): for every head shown (`shown[h]` true, or all heads when
  // `shown` is omitted) and every key, { head, query, key, weight, colour, x1, y1, x2, y2,
  // opacity, width }. Lines of weight below `threshold` (default 0.001) are left out, as they
  // would be invisible; the weights are the model's, unchanged.
  function lines(weights, dims, layer, query, g, shown, threshold) {
    var H = dims[1];
    var T = dims[2];
    var cut = threshold === undefined ? 1e-3 : threshold;
    var out = [];
    if (query >= T) return out;
    var from = query < 0 ? 0 : query;
    var to = query < 0 ? T - 1 : query;
    for (var q = from; q <= to; q++) {
      for (var h = 0; h < H; h++) {
        if (shown && !shown[h]) continue;
        var base = ((layer * H + h) * T + q) * T;
        for (var k = 0; k < T; k++) {
          var w = weights[base + k];
          if (!(w >= cut)) continue;
          var s = lineStyle(w);
          out.push({
            head: h,
            query: q,
            key: k,
            weight: w,
            colour: headColour(h),
            x1: g.x1,
            y1: rowY(g, q),
            x2: g.x2,
            y2: rowY(g, k),
            opacity: s.opacity,
            width: s.width
          });
        }
      }
    }
    return out;
  }

  // How strongly each key is attended to over the heads shown: the mean weight, in [0, 1] (for
  // shading the key column, as BertViz does).
  function keyShade(weights, dims, layer, query, shown) {
    var H = dims[1];
    var T = dims[2];
    var sums = new Array(T).fill(0);
    var n = 0;
    if (query < 0 || query >= T) return sums;
    for (var h = 0; h < H; h++) {
      if (shown && !shown[h]) continue;
      n++;
      var base = ((layer * H + h) * T + query) * T;
      for (var k = 0; k < T; k++) sums[k] += weights[base + k];
    }
    return sums.map(function (s) { return n ? s / n : 0; });
  }

  // The query one key away from `query` among T tokens (ArrowUp/Down, Home, End), or null.
  function move(T, query, key) {
    if (key === "ArrowUp" || key === "ArrowLeft") return Math.max(0, query - 1);
    if (key === "ArrowDown" || key === "ArrowRight") return Math.min(T - 1, query + 1);
    if (key === "Home") return 0;
    if (key === "End") return T - 1;
    return null;
  }

  // The text alternative: for each head shown, the `count` keys it weighs most for this query.
  // [{ head, text }], text as "head 3: 5 cat 0.41, 0 [CLS] 0.30, 7 . 0.12".
  function summary(weights, dims, tokens, layer, query, shown, count) {
    var H = dims[1];
    var T = dims[2];
    var out = [];
    if (query < 0 || query >= T) return out;
    for (var h = 0; h < H; h++) {
      if (shown && !shown[h]) continue;
      var base = ((layer * H + h) * T + query) * T;
      var row = [];
      for (var k = 0; k < T; k++) row.push([weights[base + k], k]);
      row.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
      out.push({
        head: h,
        text: "head " + h + ": " + row.slice(0, count || 3).map(function (p) {
          return p[1] + " " + tokens[p[1]] + " " + p[0].toFixed(2);
        }).join(", ")
      });
    }
    return out;
  }

  // The headline of the text alternative.
  function caption(tokens, layer, query, shownCount, H) {
    if (query < 0 || query >= tokens.length) return "Point at a token, or focus one, to see where it looks.";
    return "Layer " + layer + ", query " + query + " (" + tokens[query] + "): the keys each of " +
      (shownCount === H ? "the " + H + " heads" : shownCount + " of " + H + " heads") + " weighs most";
  }

  var headView = {
    PALETTE: PALETTE,
    headColour: headColour,
    layout: layout,
    rowY: rowY,
    lineStyle: lineStyle,
    lines: lines,
    keyShade: keyShade,
    move: move,
    summary: summary,
    caption: caption
  };
  var ns = (root.liveAttention = root.liveAttention || {});
  ns.headView = headView;
  if (typeof module !== "undefined") module.exports = headView;
})(globalThis);
