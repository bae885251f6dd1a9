// The live box's views in words and numbers: the titles and labels of the maps, the legend, the
// comparison of two sentences and the head view, and the index maths behind them. Pure (no DOM):
// box.js puts what these return into its elements. Unit-tested in tests/js/box_text.test.js.
//
// The weights are the model's Float32Array [L, H, T, T] (layer, head, query, key); `dims` is
// that shape.
(function (root) {
  "use strict";

  var ns = (root.liveAttention = root.liveAttention || {});
  var drawing = ns.drawing || require("./drawing.js");
  var headView = ns.headView || require("./head_view.js");

  // Before a query is chosen, the head view draws every query's lines up to this many.
  var ALL_PAIRS = 6000;
  // Labels on the maps' axes are cut to this width (px), with an ellipsis.
  var LABEL_WIDTH = 160;

  // A head's button in the grid of L x H: its index in the grid's list, row by row.
  function cellIndex(dims, layer, head) {
    return layer * dims[1] + head;
  }

  // The top of the colour scale: 1, or the head's largest weight when each head has its own.
  function scale(perHead, weights, dims, layer, head) {
    return perHead ? drawing.headMax(weights, dims, layer, head) : 1;
  }

  // The ends of the difference's colour scale: ±1, or ± the largest change on the head's scale.
  function differenceRange(perHead, largest) {
    return perHead ? (largest || 1) : 1;
  }

  // The query list's entries, [value, text]: none, then "i: token" for each token.
  function queryOptions(tokens) {
    return [[-1, "none"]].concat(tokens.map(function (t, i) { return [i, i + ": " + t]; }));
  }

  // text cut to `width` px as measure(text) measures it, with an ellipsis.
  function clip(text, measure, width) {
    var most = width === undefined ? LABEL_WIDTH : width;
    if (measure(text) <= most) return text;
    while (text.length > 1 && measure(text + "…") > most) text = text.slice(0, -1);
    return text + "…";
  }

  function gridHeading(dims) {
    return "All heads (rows: layers 0–" + (dims[0] - 1) + "; columns: heads 0–" + (dims[1] - 1) + ")";
  }

  function largeTitle(layer, head) {
    return "Layer " + layer + ", head " + head + ": rows are queries, columns keys";
  }

  function largeLabel(layer, head, T) {
    return "Attention of layer " + layer + ", head " + head + " over " + T + " tokens; " +
      "choose a query row to read its weights";
  }

  function legendLabel(top, perHead) {
    return "Colour scale from 0 (dark purple) to " + top.toFixed(2) + " (yellow)" +
      (perHead ? ", this head's largest weight" : "");
  }

  // ---- two sentences --------------------------------------------------------------------

  function secondTitle(layer, head) {
    return "Second sentence, layer " + layer + ", head " + head;
  }

  function secondLabel(layer, head, T) {
    return "Attention of layer " + layer + ", head " + head + " in the second sentence, " + T + " tokens";
  }

  // The difference map's labels: the token where both sentences hold the same, else "first / second".
  function differenceTokens(first, second) {
    return second.map(function (t, j) { return t === first[j] ? t : first[j] + " / " + t; });
  }

  function differenceLabel(layer, head, largest) {
    return "Second sentence minus first, layer " + layer + ", head " + head + "; largest change " +
      largest.toFixed(2);
  }

  function differenceText(range, largest) {
    return "Second minus first, cell by cell: the query and key at the same " +
      "positions, whichever words they hold. Red where the second sentence puts more " +
      "weight, blue where less, white where the same (scale ±" + range.toFixed(2) + "). " +
      "Largest change in this head: " + largest.toFixed(2) + ".";
  }

  function noDifference(T1, T2) {
    return "The difference is drawn for two sentences of the same number " +
      "of tokens (here " + T1 + " and " + T2 + "), such as the same words in another order.";
  }

  // ---- the head view --------------------------------------------------------------------

  function headViewHeading(layer, H) {
    return "Head view: layer " + layer + ", its " + H + " heads, one colour each";
  }

  // What the head view shows, as a key: it is drawn again only when this changes (or the weights).
  function headViewKey(layer, query, shownHeads, theme) {
    return [layer, query, shownHeads.map(Number).join(""), theme].join("|");
  }

  // Whether the lines of every query (none chosen) would be too many to draw.
  function tooManyLines(T, query, shownCount) {
    return query < 0 && T * T * shownCount > ALL_PAIRS;
  }

  // Lines fainter than this are left out: their opacity is their weight, so they would not
  // show; past 128 tokens, where there are thousands, the bar is higher.
  function lineThreshold(T) {
    return T > 128 ? 0.01 : 0.001;
  }

  // The head view's caption (the summary's list follows it when a query is chosen).
  function headViewCaption(tokens, layer, query, shownCount, H) {
    var T = tokens.length;
    if (tooManyLines(T, query, shownCount)) {
      return "Point at a token on the left, or focus it, to draw its lines (" + T +
        " tokens are too many to draw every query's lines at once).";
    }
    if (query < 0) return "Every query's lines are drawn; point at a token on the left, or focus it, to see its own.";
    return headView.caption(tokens, layer, query, shownCount, H) + ":";
  }

  function toggleAllText(shownCount) {
    return shownCount ? "Hide all" : "Show all";
  }

  var boxText = {
    ALL_PAIRS: ALL_PAIRS,
    LABEL_WIDTH: LABEL_WIDTH,
    cellIndex: cellIndex,
    scale: scale,
    differenceRange: differenceRange,
    queryOptions: queryOptions,
    clip: clip,
    gridHeading: gridHeading,
    largeTitle: largeTitle,
    largeLabel: largeLabel,
    legendLabel: legendLabel,
    secondTitle: secondTitle,
    secondLabel: secondLabel,
    differenceTokens: differenceTokens,
    differenceLabel: differenceLabel,
    differenceText: differenceText,
    noDifference: noDifference,
    headViewHeading: headViewHeading,
    headViewKey: headViewKey,
    tooManyLines: tooManyLines,
    lineThreshold: lineThreshold,
    headViewCaption: headViewCaption,
    toggleAllText: toggleAllText
  };
  ns.boxText = boxText;
  if (typeof module !== "undefined") module.exports = boxText;
})(globalThis);
