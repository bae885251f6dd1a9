// The live box's drawing arithmetic (book/_static/live/drawing.js), under `node --test`.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const drawing = require("../../book/_static/live/drawing.js");
const viridis = require("../../book/_static/live/viridis.js");

// Two layers of three heads over T = 2 tokens: weight = a distinct number per position.
const dims = [2, 3, 2, 2];
const weights = Float32Array.from({ length: 2 * 3 * 2 * 2 }, (_, i) => i / 100);

test("colour looks a weight up as matplotlib does: entry floor(x * 256), clipped", () => {
  assert.deepEqual(drawing.colour(0, 1, viridis), viridis[0]);
  assert.deepEqual(drawing.colour(1, 1, viridis), viridis[255]);
  assert.deepEqual(drawing.colour(0.5, 1, viridis), viridis[128]);
  assert.deepEqual(drawing.colour(0.999, 1, viridis), viridis[255]);
  assert.deepEqual(drawing.colour(1 / 256 - 1e-9, 1, viridis), viridis[0]);
  assert.deepEqual(drawing.colour(1 / 256, 1, viridis), viridis[1]);
  assert.deepEqual(drawing.colour(-0.2, 1, viridis), viridis[0]);
  assert.deepEqual(drawing.colour(3, 1, viridis), viridis[255]);
  // On a head's own scale, its largest weight is the top colour.
  assert.deepEqual(drawing.colour(0.25, 0.25, viridis), viridis[255]);
  assert.deepEqual(drawing.colour(0.125, 0.25, viridis), viridis[128]);
});

test("the table has matplotlib's ends: dark purple and yellow", () => {
  assert.equal(viridis.length, 256);
  assert.deepEqual(viridis[0], [68, 1, 84]);
  assert.deepEqual(viridis[255], [253, 231, 36]);
});

test("diverging is white at 0, the ends at -1 and 1, clipped beyond", () => {
  assert.deepEqual(drawing.diverging(0), [255, 255, 255]);
  assert.deepEqual(drawing.diverging(-1), [33, 102, 172]);
  assert.deepEqual(drawing.diverging(1), [178, 24, 43]);
  assert.deepEqual(drawing.diverging(5), [178, 24, 43]);
  assert.deepEqual(drawing.diverging(0.5), [217, 140, 149]);
});

test("a head's block sits at (layer * H + head) * T * T in [L, H, T, T]", () => {
  assert.equal(drawing.headOffset(dims, 0, 0), 0);
  assert.equal(drawing.headOffset(dims, 0, 2), 8);
  assert.equal(drawing.headOffset(dims, 1, 0), 12);
  assert.equal(drawing.headOffset(dims, 1, 2), 20);
  // query 1, key 0 of layer 1, head 2: offset 20 + 1 * 2 + 0
  assert.equal(drawing.weightAt(weights, dims, 1, 2, 1, 0), weights[22]);
});

test("headMax is the head's largest weight, 1 for an all-zero head", () => {
  assert.equal(drawing.headMax(weights, dims, 1, 2), weights[23]);
  assert.equal(drawing.headMax(new Float32Array(24), dims, 0, 1), 1);
});

test("paintHead writes one opaque RGBA pixel per weight, row by row", () => {
  const square = [1, 1, 2, 2];
  const w = Float32Array.of(0, 1, 0.5, 0.25);
  const pixels = drawing.paintHead(new Uint8ClampedArray(16), w, square, 0, 0, 1, viridis);
  assert.deepEqual(Array.from(pixels.subarray(0, 4)), [...viridis[0], 255]);
  assert.deepEqual(Array.from(pixels.subarray(4, 8)), [...viridis[255], 255]);
  assert.deepEqual(Array.from(pixels.subarray(8, 12)), [...viridis[128], 255]);
  assert.deepEqual(Array.from(pixels.subarray(12, 16)), [...viridis[64], 255]);
  const map = drawing.paintMap(new Uint8ClampedArray(16), 2, (q, k) => [q, k, 7]);
  assert.deepEqual(Array.from(map), [0, 0, 7, 255, 0, 1, 7, 255, 1, 0, 7, 255, 1, 1, 7, 255]);
});

test("the large map's layout: 14 to 36 px cells with labels, to fit without past 128 tokens", () => {
  const short = drawing.mapLayout(12, 40, 800);
  assert.deepEqual([short.margin, short.cell, short.labelled], [48, 36, 12 <= 128]);
  assert.equal(short.size, 48 + 36 * 12);
  const phone = drawing.mapLayout(27, 60, 330); // a 27-token map in a phone's box overflows
  assert.equal(phone.cell, 14);
  assert.ok(phone.size > 330);
  const long = drawing.mapLayout(512, 80, 700);
  assert.deepEqual([long.margin, long.cell, long.labelled], [4, 3, false]);
  assert.equal(drawing.mapLayout(5, 500, 800).margin, 168); // labels cut at 160 px
});

test("cellAt finds the query and key under a point, null off the map", () => {
  const g = { margin: 10, cell: 5, T: 3 };
  assert.deepEqual(drawing.cellAt(g, 10, 10), { query: 0, key: 0 });
  assert.deepEqual(drawing.cellAt(g, 24.9, 16), { query: 1, key: 2 });
  assert.equal(drawing.cellAt(g, 9, 12), null);
  assert.equal(drawing.cellAt(g, 12, 25), null);
});

test("rowText lists the row's largest weights, largest first", () => {
  const w = Float32Array.of(0.1, 0.6, 0.3, 0.2, 0.2, 0.6, 0.5, 0.25, 0.25);
  const text = drawing.rowText(w, [1, 1, 3, 3], ["[CLS]", "cat", "[SEP]"], 0, 0, 0, 2);
  assert.equal(text, "Query 0 ([CLS]) attends most to: 1 cat 0.60; 2 [SEP] 0.30");
  assert.match(drawing.rowText(w, [1, 1, 3, 3], ["a", "b", "c"], 0, 0, -1, 5), /^Choose a query row/);
  assert.equal(drawing.cellText(w, [1, 1, 3, 3], ["a", "b", "c"], 0, 0, 2, 0), "query 2 (c) → key 0 (a): 0.500");
});

test("difference is second minus first for one head, null for other lengths", () => {
  const d = drawing.difference(weights, dims, weights.map((v) => v * 2), dims, 1, 1);
  assert.deepEqual([d.layer, d.head], [1, 1]);
  assert.deepEqual(Array.from(d.values), Array.from(weights.subarray(16, 20)));
  assert.equal(d.largest, weights[19]);
  assert.equal(drawing.difference(weights, dims, new Float32Array(54), [2, 3, 3, 3], 0, 0), null);
});

test("overflow says which edges hide more of a scrolling box", () => {
  assert.deepEqual(drawing.overflow(0, 300, 300), { scrolls: false, left: false, right: false });
  assert.deepEqual(drawing.overflow(0, 500, 300), { scrolls: true, left: false, right: true });
  assert.deepEqual(drawing.overflow(100, 500, 300), { scrolls: true, left: true, right: true });
  assert.deepEqual(drawing.overflow(200, 500, 300), { scrolls: true, left: true, right: false });
});

test("the grid's label and moves follow the model's shape, not a constant", () => {
  assert.equal(drawing.gridLabel([6, 12, 5, 5]), "All 72 heads: rows are layers 0 to 5, columns heads 0 to 11");
  assert.equal(drawing.gridLabel([2, 3, 5, 5]), "All 6 heads: rows are layers 0 to 1, columns heads 0 to 2");
  assert.deepEqual(drawing.gridMove(dims, 0, 0, "ArrowRight"), { layer: 0, head: 1 });
  assert.deepEqual(drawing.gridMove(dims, 1, 2, "ArrowRight"), { layer: 1, head: 2 });
  assert.deepEqual(drawing.gridMove(dims, 1, 2, "ArrowDown"), { layer: 1, head: 2 });
  assert.deepEqual(drawing.gridMove(dims, 1, 1, "Home"), { layer: 1, head: 0 });
  assert.deepEqual(drawing.gridMove(dims, 0, 0, "End"), { layer: 0, head: 2 });
  assert.equal(drawing.gridMove(dims, 0, 0, "a"), null);
});

test("colours parse from hex and rgb() text", () => {
  assert.deepEqual(drawing.parseColour("#3a3f47"), [58, 63, 71]);
  assert.deepEqual(drawing.parseColour(" #fff "), [255, 255, 255]);
  assert.deepEqual(drawing.parseColour("rgb(20, 24, 30)"), [20, 24, 30]);
  assert.deepEqual(drawing.parseColour("rgba(1, 2, 3, 0.5)"), [1, 2, 3]);
  assert.equal(drawing.parseColour("red"), null);
  assert.equal(drawing.parseColour(""), null);
});

test("contrast is WCAG 2's: 21 for black on white, 1 for a colour on itself", () => {
  assert.equal(drawing.contrast([0, 0, 0], [255, 255, 255]), 21);
  assert.equal(drawing.contrast([68, 1, 84], [68, 1, 84]), 1);
  // The box's grey axis numbers of before on the dark theme's page: 1.68:1.
  assert.equal(drawing.contrast([58, 63, 71], [20, 24, 30]).toFixed(2), "1.68");
  assert.equal(drawing.luminance([255, 255, 255]), 1);
});

test("ink on a colour is dark on light cells and light on dark ones, and always readable", () => {
  assert.deepEqual(drawing.ink(viridis[255]), [0, 0, 0]);
  assert.deepEqual(drawing.ink(viridis[0]), [255, 255, 255]);
  for (const c of viridis) assert.ok(drawing.contrast(c, drawing.ink(c)) >= 4.5);
  // The head view's keys: the dark theme's page shaded towards its blue.
  for (let t = 0; t <= 1; t += 0.01) {
    const bg = drawing.mix([22, 25, 31], [79, 163, 224], t);
    assert.ok(drawing.contrast(bg, drawing.ink(bg)) >= 4.5);
  }
  // Any two inks: the one that contrasts more.
  assert.deepEqual(drawing.ink([240, 240, 240], [30, 30, 30], [250, 250, 250]), [30, 30, 30]);
});

test("mix goes from one colour to the other", () => {
  assert.deepEqual(drawing.mix([0, 0, 0], [255, 255, 255], 0), [0, 0, 0]);
  assert.deepEqual(drawing.mix([0, 0, 0], [255, 255, 255], 1), [255, 255, 255]);
  assert.deepEqual(drawing.mix([0, 0, 0], [200, 100, 50], 0.5), [100, 50, 25]);
  assert.equal(drawing.css([1, 2, 3]), "rgb(1, 2, 3)");
});

test("a cell's number: two decimals without the leading zero, signed for a difference", () => {
  assert.equal(drawing.cellNumber(0.2213), ".22");
  assert.equal(drawing.cellNumber(0.999), "1");
  assert.equal(drawing.cellNumber(0.001), "0");
  assert.equal(drawing.cellNumber(0.05, true), "+.05");
  assert.equal(drawing.cellNumber(-0.123, true), "\u2212.12");
  assert.equal(drawing.cellNumber(-0.001, true), "0");
});

test("weights are written in cells of 28 px and more, and only on a labelled map", () => {
  assert.equal(drawing.showsNumbers(drawing.mapLayout(16, 60, 1200)), true); // 36 px cells
  assert.equal(drawing.showsNumbers(drawing.mapLayout(16, 60, 390)), false); // 19 px
  assert.equal(drawing.showsNumbers(drawing.mapLayout(200, 60, 100000)), false); // unlabelled
});

test("every viridis and every diverging cell takes an ink of 4.5:1 or more", () => {
  for (let v = -1; v <= 1; v += 0.01) {
    const c = drawing.diverging(v);
    assert.ok(drawing.contrast(c, drawing.ink(c)) >= 4.5, String(v));
  }
});
