// The head view's arithmetic (book/_static/live/head_view.js), under `node --test`.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const headView = require("../../book/_static/live/head_view.js");

// Two layers of three heads over T = 3 tokens; each query row sums to 1.
const dims = [2, 3, 3, 3];
const rows = [
  [0.7, 0.2, 0.1], [0.0005, 0.4995, 0.5], [1, 0, 0], // layer 0 head 0: queries 0, 1, 2
  [0.3, 0.3, 0.4], [0.1, 0.1, 0.8], [0.25, 0.5, 0.25], // head 1
  [0, 1, 0], [0.5, 0, 0.5], [0.2, 0.2, 0.6], // head 2
];
const weights = Float32Array.from([...rows.flat(), ...rows.flat().map((w) => w / 2)]);
const tokens = ["[CLS]", "cat", "[SEP]"];

test("the layout puts rows of rowHeight px under each other, lines between the two columns", () => {
  const g = headView.layout(3, 50.2, { rowHeight: 20, gap: 100, pad: 4 });
  assert.equal(g.x1, 55);
  assert.equal(g.x2, 155);
  assert.equal(g.height, 4 * 2 + 3 * 20);
  assert.equal(headView.rowY(g, 0), 14);
  assert.equal(headView.rowY(g, 2), 54);
  const bare = headView.layout(3, 0, { rowHeight: 22, gap: 100, pad: 0 });
  assert.equal(bare.x1, 0);
  assert.equal(bare.x2, 100);
  assert.equal(bare.height, 66);
});

test("a line's opacity is its weight and its width grows with it from 1 px", () => {
  assert.deepEqual(headView.lineStyle(0), { opacity: 0, width: 1 });
  assert.deepEqual(headView.lineStyle(1), { opacity: 1, width: 4 });
  assert.deepEqual(headView.lineStyle(0.5, 5), { opacity: 0.5, width: 3 });
  assert.deepEqual(headView.lineStyle(1.5), { opacity: 1, width: 4 });
});

test("lines from one query carry the model's weights, one colour per head, the invisible left out", () => {
  const g = headView.layout(3, 0, { rowHeight: 10, gap: 100, pad: 0 });
  const ls = headView.lines(weights, dims, 0, 1, g);
  // head 0 query 1: key 0 (0.0005) is under the threshold; heads 1 and 2: keys of weight 0 drop.
  assert.deepEqual(ls.map((l) => [l.head, l.key]), [[0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 2]]);
  for (const l of ls) {
    assert.equal(l.query, 1);
    assert.equal(l.weight, weights[((0 * 3 + l.head) * 3 + 1) * 3 + l.key]);
    assert.equal(l.colour, headView.headColour(l.head));
    assert.equal(l.y1, 15);
    assert.equal(l.y2, 5 + 10 * l.key);
    assert.equal(l.x1, 0);
    assert.equal(l.x2, 100);
    assert.equal(l.opacity, l.weight);
  }
  // Layer 1 is layer 0 halved.
  const half = headView.lines(weights, dims, 1, 1, g, null, 0);
  assert.equal(half.length, 9);
  assert.equal(half[2].weight, Math.fround(0.5 / 2));
});

test("heads switched off draw no lines; query -1 draws every query's; a query out of range none", () => {
  const g = headView.layout(3, 0);
  const ls = headView.lines(weights, dims, 0, 0, g, [false, true, false]);
  assert.deepEqual(new Set(ls.map((l) => l.head)), new Set([1]));
  const all = headView.lines(weights, dims, 0, -1, g, null, 0);
  assert.equal(all.length, 3 * 3 * 3);
  assert.deepEqual(new Set(all.map((l) => l.query)), new Set([0, 1, 2]));
  assert.deepEqual(headView.lines(weights, dims, 0, 3, g), []);
});

test("heads have distinct colours, category10's first", () => {
  assert.equal(headView.headColour(0), "#1f77b4");
  const twelve = Array.from({ length: 12 }, (_, h) => headView.headColour(h));
  assert.equal(new Set(twelve).size, 12);
});

test("keys are shaded by their mean weight over the heads shown", () => {
  const m = headView.keyShade(weights, dims, 0, 2, null);
  assert.deepEqual(m.map((x) => x.toFixed(4)), [(1.45 / 3).toFixed(4), (0.7 / 3).toFixed(4), (0.85 / 3).toFixed(4)]);
  assert.deepEqual(headView.keyShade(weights, dims, 0, 2, [true, false, false]).map((x) => +x.toFixed(6)), [1, 0, 0]);
  assert.deepEqual(headView.keyShade(weights, dims, 0, -1, null), [0, 0, 0]);
});

test("arrow keys, Home and End move the query inside the sentence", () => {
  assert.equal(headView.move(3, 0, "ArrowDown"), 1);
  assert.equal(headView.move(3, 2, "ArrowDown"), 2);
  assert.equal(headView.move(3, 0, "ArrowUp"), 0);
  assert.equal(headView.move(3, 1, "ArrowLeft"), 0);
  assert.equal(headView.move(3, 1, "End"), 2);
  assert.equal(headView.move(3, 2, "Home"), 0);
  assert.equal(headView.move(3, 1, "a"), null);
});

test("the text alternative lists each shown head's top keys, largest first", () => {
  const s = headView.summary(weights, dims, tokens, 0, 1, [true, true, false], 2);
  assert.deepEqual(s, [
    { head: 0, text: "head 0: 2 [SEP] 0.50, 1 cat 0.50" },
    { head: 1, text: "head 1: 2 [SEP] 0.80, 0 [CLS] 0.10" },
  ]);
  assert.deepEqual(headView.summary(weights, dims, tokens, 0, -1, null, 2), []);
  assert.equal(headView.caption(tokens, 0, 1, 2, 3), "Layer 0, query 1 (cat): the keys each of 2 of 3 heads weighs most");
  assert.equal(headView.caption(tokens, 4, 0, 3, 3), "Layer 4, query 0 ([CLS]): the keys each of the 3 heads weighs most");
  assert.match(headView.caption(tokens, 0, -1, 3, 3), /Point at a token/);
});
