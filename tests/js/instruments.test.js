// The pure parts of the Part VI instruments (book/_static/instruments/mask_composer.js and
// cache_memory.js), under `node --test`: the examples of attention_lab.masks' docstrings and
// of CacheShape's. tests/test_browser_instruments.py checks the same functions in the page
// against the library itself.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");

// The scripts are classic browser scripts: core.js hangs its functions on window, and start()
// finds no instrument in an empty document.
globalThis.window = globalThis;
globalThis.document = { readyState: "complete", querySelectorAll: () => [] };
require("../../book/_static/instruments/core.js");
const composer = require("../../book/_static/instruments/mask_composer.js");
const cache = require("../../book/_static/instruments/cache_memory.js");

const BASE = { seed: 0, order: "none", prefix: 0, padding: false, pads: 1, side: "right",
  window: false, windowSize: 1, documents: false };

function mask(settings) {
  const T = settings.length;
  const parsed = composer.parseLengths(settings.lengths || "1", T);
  const state = composer.compute(Object.assign({}, BASE, settings,
    { documentIds: parsed.ids, documentLengths: parsed.lengths }));
  const rows = [];
  for (let i = 0; i < T; i++) rows.push(Array.from(state.allowed.slice(i * T, (i + 1) * T)));
  return { rows, state };
}

test("parseLengths: the documents of T positions, cut at T, the rest one more", () => {
  assert.deepEqual(Array.from(composer.parseLengths("3,2,4", 9).ids), [0, 0, 0, 1, 1, 2, 2, 2, 2]);
  assert.deepEqual(composer.parseLengths("3,2,4", 6).lengths, [3, 2, 1]);
  assert.deepEqual(composer.parseLengths(" 2 2 ", 6).lengths, [2, 2, 2]);
  for (const wrong of ["", "3,x", "0,2", "2.5", "-1"]) {
    assert.ok(composer.parseLengths(wrong, 6).error, wrong);
  }
});

test("each mask is its rule, as in attention_lab.masks' examples", () => {
  assert.deepEqual(mask({ length: 3, order: "causal" }).rows, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]);
  // prefix_lm_mask(4, 2)
  assert.deepEqual(mask({ length: 4, order: "prefix", prefix: 2 }).rows,
    [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]);
  // sliding_window_mask(4, 2): i sees i - 1 and i
  assert.deepEqual(mask({ length: 4, window: true, windowSize: 2 }).rows,
    [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]);
  // document_mask(tensor([0, 0, 1]))
  assert.deepEqual(mask({ length: 3, documents: true, lengths: "2,1" }).rows,
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]);
  // padding_mask of [[5, 7, 0]]: the last key blocked for every query
  assert.deepEqual(mask({ length: 3, padding: true, pads: 1, side: "right" }).rows,
    [[1, 1, 0], [1, 1, 0], [1, 1, 0]]);
});

test("the composed mask is the AND of the chosen ones", () => {
  const { rows, state } = mask({ length: 4, order: "prefix", prefix: 2, window: true,
    windowSize: 2 });
  // The window is causal itself: the prefix's look-ahead is gone.
  assert.deepEqual(rows, [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]);
  assert.deepEqual(state.parts.map((p) => p.name), ["prefix", "window"]);
  assert.equal(state.allowedCount, 7);
});

test("a query with no key gets a row of 0; every other row sums to 1", () => {
  const { state } = mask({ length: 5, order: "causal", padding: true, pads: 2, side: "left" });
  assert.deepEqual(state.emptyRows, [0, 1]);
  for (let i = 0; i < 5; i++) {
    const row = Array.from(state.weights.slice(i * 5, (i + 1) * 5));
    const sum = row.reduce((a, b) => a + b, 0);
    if (i < 2) assert.deepEqual(row, [0, 0, 0, 0, 0]);
    else assert.ok(Math.abs(sum - 1) < 1e-15, String(sum));
    row.forEach((w, j) => { if (!state.allowed[i * 5 + j]) assert.equal(w, 0); });
  }
});

test("cache bytes: numbers per position times kept positions, batch and bytes", () => {
  const models = [
    { name: "gqa", kind: "grouped-query", num_layers: 32, num_heads: 32, head_dim: 128,
      num_kv_heads: 8, window: null, kv_lora_rank: null, rope_dim: null },
    { name: "mla", kind: "latent", num_layers: 61, num_heads: 128, head_dim: 128,
      num_kv_heads: null, window: null, kv_lora_rank: 512, rope_dim: 64 },
    { name: "window", kind: "grouped-query", num_layers: 32, num_heads: 32, head_dim: 128,
      num_kv_heads: 8, window: 4096, kv_lora_rank: null, rope_dim: null },
  ];
  const r = cache.compute({ context: 8192, batchSize: 1, bytesPerNumber: 2 }, models);
  // CacheShape's example: Llama 3 8B's cache of 8,192 tokens at 16 bits is 1 GiB.
  assert.equal(r.rows[0].numbersPerToken, 65536);
  assert.equal(r.rows[0].bytes, 2 ** 30);
  assert.equal(r.rows[1].numbersPerToken, 61 * 576);
  assert.equal(r.rows[2].kept, 4096);
  assert.equal(r.rows[2].bytes, 2 ** 29);
  assert.equal(r.largest, "gqa");
  assert.equal(r.smallest, "window");
  const big = cache.compute({ context: 2 ** 17, batchSize: 256, bytesPerNumber: 4 }, models);
  assert.equal(big.rows[0].bytes, 65536 * 2 ** 17 * 256 * 4);
});

test("readable: binary units, three significant digits", () => {
  assert.equal(cache.readable(1), "1 byte");
  assert.equal(cache.readable(1023), "1,023 bytes");
  assert.equal(cache.readable(1024), "1.00 KiB");
  assert.equal(cache.readable(2 ** 30), "1.00 GiB");
  assert.equal(cache.readable(575668224), "549 MiB");
  assert.equal(cache.readable(2 ** 26), "64.0 MiB");
});
