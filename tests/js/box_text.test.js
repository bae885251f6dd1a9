// The live box's views in words and numbers (book/_static/live/box_text.js), under `node --test`.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const boxText = require("../../book/_static/live/box_text.js");

// Two layers of three heads over T = 2 tokens: weight = a distinct number per position.
const dims = [2, 3, 2, 2];
const weights = Float32Array.from({ length: 2 * 3 * 2 * 2 }, (_, i) => i / 100);

test("a head's button in the grid: row by row, H to a row", () => {
  assert.equal(boxText.cellIndex([6, 12], 0, 0), 0);
  assert.equal(boxText.cellIndex([6, 12], 0, 11), 11);
  assert.equal(boxText.cellIndex([6, 12], 1, 0), 12);
  assert.equal(boxText.cellIndex([6, 12, 9, 9], 5, 11), 71);
});

test("the colour scale tops at 1, or at the head's own largest weight", () => {
  assert.equal(boxText.scale(false, weights, dims, 1, 2), 1);
  assert.equal(boxText.scale(true, weights, dims, 1, 2), weights[23]);
  assert.equal(boxText.differenceRange(false, 0.3), 1);
  assert.equal(boxText.differenceRange(true, 0.3), 0.3);
  assert.equal(boxText.differenceRange(true, 0), 1); // two equal sentences: no zero scale
});

test("the query list: none, then each token with its position", () => {
  assert.deepEqual(boxText.queryOptions(["[CLS]", "<b>", "[SEP]"]),
    [[-1, "none"], [0, "0: [CLS]"], [1, "1: <b>"], [2, "2: [SEP]"]]);
});

test("clip cuts a label to the width, with an ellipsis", () => {
  const measure = (s) => 10 * s.length; // 10 px a character
  assert.equal(boxText.clip("short", measure), "short");
  assert.equal(boxText.clip("x".repeat(16), measure), "x".repeat(16)); // 160 px: fits
  assert.equal(boxText.clip("x".repeat(20), measure), "x".repeat(15) + "…");
  assert.equal(boxText.clip("abcdef", measure, 40), "abc…");
  assert.equal(boxText.clip("abcdef", measure, 5), "a…"); // never less than one character
});

test("the maps' titles and labels name the layer, the head and the tokens", () => {
  assert.equal(boxText.gridHeading([6, 12, 9, 9]), "All heads (rows: layers 0–5; columns: heads 0–11)");
  assert.equal(boxText.largeTitle(2, 5), "Layer 2, head 5: rows are queries, columns keys");
  assert.equal(boxText.largeLabel(2, 5, 12),
    "Attention of layer 2, head 5 over 12 tokens; choose a query row to read its weights");
  assert.equal(boxText.legendLabel(1, false), "Colour scale from 0 (dark purple) to 1.00 (yellow)");
  assert.equal(boxText.legendLabel(0.456, true),
    "Colour scale from 0 (dark purple) to 0.46 (yellow), this head's largest weight");
});

test("two sentences: the second's map, and their difference or why there is none", () => {
  assert.equal(boxText.secondTitle(0, 3), "Second sentence, layer 0, head 3");
  assert.equal(boxText.secondLabel(0, 3, 6), "Attention of layer 0, head 3 in the second sentence, 6 tokens");
  assert.deepEqual(boxText.differenceTokens(["[CLS]", "man", "bites", "dog"], ["[CLS]", "dog", "bites", "man"]),
    ["[CLS]", "man / dog", "bites", "dog / man"]);
  assert.equal(boxText.differenceLabel(1, 2, 0.4567), "Second sentence minus first, layer 1, head 2; largest change 0.46");
  assert.match(boxText.differenceText(1, 0.4567), /\(scale ±1\.00\)\. Largest change in this head: 0\.46\.$/);
  assert.equal(boxText.noDifference(12, 6), "The difference is drawn for two sentences of the same " +
    "number of tokens (here 12 and 6), such as the same words in another order.");
});

test("the head view: its heading, the key that says when to draw again, the toggle's words", () => {
  assert.equal(boxText.headViewHeading(3, 12), "Head view: layer 3, its 12 heads, one colour each");
  assert.equal(boxText.headViewKey(3, -1, [true, false, true], "dark"), "3|-1|101|dark");
  assert.notEqual(boxText.headViewKey(3, 0, [true], ""), boxText.headViewKey(3, 1, [true], ""));
  assert.equal(boxText.toggleAllText(2), "Hide all");
  assert.equal(boxText.toggleAllText(0), "Show all");
});

test("every query's lines are drawn up to 6000, and faint lines left out", () => {
  assert.equal(boxText.tooManyLines(22, -1, 12), false); // 5808 lines
  assert.equal(boxText.tooManyLines(23, -1, 12), true); // 6348
  assert.equal(boxText.tooManyLines(23, 4, 12), false); // one query's lines
  assert.equal(boxText.tooManyLines(512, -1, 0), false); // no head shown
  assert.equal(boxText.lineThreshold(128), 0.001);
  assert.equal(boxText.lineThreshold(129), 0.01);
});

test("the head view's caption: too many lines, every query's, or one query's", () => {
  const tokens = (T) => Array.from({ length: T }, (_, i) => "t" + i);
  assert.equal(boxText.headViewCaption(tokens(100), 0, -1, 12, 12),
    "Point at a token on the left, or focus it, to draw its lines (100 tokens are too many to " +
    "draw every query's lines at once).");
  assert.equal(boxText.headViewCaption(tokens(5), 0, -1, 12, 12),
    "Every query's lines are drawn; point at a token on the left, or focus it, to see its own.");
  assert.equal(boxText.headViewCaption(tokens(5), 2, 3, 12, 12),
    "Layer 2, query 3 (t3): the keys each of the 12 heads weighs most:");
  assert.equal(boxText.headViewCaption(tokens(5), 2, 3, 4, 12),
    "Layer 2, query 3 (t3): the keys each of 4 of 12 heads weighs most:");
});
