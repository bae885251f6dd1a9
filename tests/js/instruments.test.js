// The pure parts of the Part VI and VII instruments (book/_static/instruments/mask_composer.js,
// cache_memory.js, extrapolation.js and hybrid_memory.js), under `node --test`: the examples of
// attention_lab.masks' docstrings, of CacheShape's, HybridShape's and attention_lab.positional's.
// tests/browser/test_browser_instruments.py checks the same functions in the page against the
// library itself.
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
const extrapolation = require("../../book/_static/instruments/extrapolation.js");
const hybrid = require("../../book/_static/instruments/hybrid_memory.js");

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
  // What was typed is kept, so the page can say the documents were cut.
  assert.equal(composer.parseLengths("3,2,4", 6).typed, 9);
  assert.equal(composer.parseLengths("2 2", 6).typed, 4);
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

// Qwen3-Next-80B-A3B's and Kimi-Linear-48B-A3B's shapes as the page's data-config holds them.
const QWEN3_NEXT = { name: "qwen3-next", num_linear_layers: 36, num_key_heads: 16,
  num_value_heads: 32, key_dim: 128, value_dim: 128, conv_size: 4,
  attention: { kind: "grouped-query", num_layers: 12, num_heads: 16, head_dim: 256,
    num_kv_heads: 2, window: null, kv_lora_rank: null, rope_dim: null } };
const KIMI_LINEAR = { name: "kimi-linear", num_linear_layers: 20, num_key_heads: 32,
  num_value_heads: 32, key_dim: 128, value_dim: 128, conv_size: 4,
  attention: { kind: "latent", num_layers: 7, num_heads: 32, head_dim: 128, num_kv_heads: null,
    window: null, kv_lora_rank: 512, rope_dim: 64 } };

test("hybrid memory: a growing cache, a fixed state, against attention in every layer", () => {
  // HybridShape's example: Qwen3-Next at 262,144 tokens, 16 bits: a 6 GiB cache, 24 GiB were
  // every layer attention, and 48 layers' worth of state 19,759,104 numbers.
  const r = hybrid.compute({ context: 2 ** 18, batchSize: 1, bytesPerNumber: 2 }, QWEN3_NEXT);
  assert.equal(r.layers, 48);
  assert.equal(r.cacheNumbersPerToken, 12 * 2 * 2 * 256);
  assert.equal(r.statePerLayer, 32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128));
  assert.equal(r.stateNumbers, 19759104);
  assert.equal(r.cache, 6 * 2 ** 30);
  assert.equal(r.allAttention, 24 * 2 ** 30);
  assert.equal(r.state, 2 * 19759104);
  assert.equal(r.total, r.cache + r.state);
  assert.equal(r.ratio, r.allAttention / r.total);
  // 19,759,104 = 1,608 x 12,288: the cache equals the state at 1,608 positions, passes it after.
  assert.equal(r.passes, 1609);
  // The state does not grow with the context; batch and bytes scale every part alike.
  const short = hybrid.compute({ context: 256, batchSize: 1, bytesPerNumber: 2 }, QWEN3_NEXT);
  assert.equal(short.state, r.state);
  assert.ok(short.cache < short.state);
  const big = hybrid.compute({ context: 2 ** 18, batchSize: 8, bytesPerNumber: 4 }, QWEN3_NEXT);
  for (const part of ["cache", "state", "total", "allAttention"]) {
    assert.equal(big[part], 16 * r[part], part);
  }
  // Latent attention caches its latent and its RoPE key: 7 x 576 numbers per position.
  const kimi = hybrid.compute({ context: 2 ** 20, batchSize: 1, bytesPerNumber: 2 }, KIMI_LINEAR);
  assert.equal(kimi.cacheNumbersPerToken, 7 * 576);
  assert.equal(kimi.allAttention, 27 * 576 * 2 ** 20 * 2);
  assert.equal(kimi.stateNumbers, 20 * (32 * 128 * 128 + 3 * 3 * 32 * 128));
  assert.ok(kimi.allAttention < 2 ** 53);
});

test("hybrid memory: a windowed cache that stops below the state never passes it", () => {
  const windowed = Object.assign({}, QWEN3_NEXT,
    { attention: Object.assign({}, QWEN3_NEXT.attention, { window: 1024 }) });
  const r = hybrid.compute({ context: 4096, batchSize: 1, bytesPerNumber: 2 }, windowed);
  assert.equal(r.kept, 1024);
  assert.equal(r.passes, null);
  assert.equal(r.cache, 12288 * 1024 * 2);
});

const ROPE = { encoding: "rope", scaling: "none", factor: 4, headDim: 64, base: 1e4, trained: 256,
  at: 512, heads: 8 };

test("rope frequencies: rope_frequencies' example and YaRN's attention factor", () => {
  // rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4}): inv_freq * 4, 1.0
  const [inv, factor] = extrapolation.ropeFrequencies(8, 1e4, "linear", 4, 32, 1);
  Array.from(inv).forEach((v, i) => assert.ok(Math.abs(4 * v - 10 ** -i) < 1e-15, String(v)));
  assert.equal(factor, 1);
  const yarn = extrapolation.ropeFrequencies(64, 1e4, "yarn", 16, 256, 1);
  assert.ok(Math.abs(yarn[1] - (0.1 * Math.log(16) + 1)) < 1e-15);
  // YaRN keeps the fast pairs and divides the slowest by s.
  const plain = extrapolation.ropeFrequencies(64, 1e4, "none", 1, 256, 1)[0];
  assert.equal(yarn[0][0], plain[0]);
  assert.ok(Math.abs(yarn[0][31] * 16 / plain[31] - 1) < 1e-15);
  // Dynamic NTK changes nothing while the sequence fits in L, and slows every pair past it.
  assert.deepEqual(extrapolation.ropeFrequencies(64, 1e4, "dynamic", 4, 256, 256)[0], plain);
  const longer = extrapolation.ropeFrequencies(64, 1e4, "dynamic", 4, 256, 1024)[0];
  for (let i = 1; i < 32; i++) assert.ok(longer[i] < plain[i]);
});

test("alibi slopes: alibi_slopes' examples, BLOOM's for 6 heads", () => {
  assert.deepEqual(Array.from(extrapolation.alibiSlopes(6)),
    [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]);
  assert.deepEqual(Array.from(extrapolation.alibiSlopes(8)),
    [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]);
  const r = extrapolation.compute(Object.assign({}, ROPE, { encoding: "alibi", heads: 6 }));
  assert.equal(r.bias.length, 6);
  assert.equal(r.bias[0].length, 8 * 256 + 1);
  assert.deepEqual(Array.from(r.atBias), [-128, -32, -8, -2, -256, -64]);
  assert.equal(r.bias[4][0], 0);
});

test("rope score: Dh at distance 0; the pairs outside what training showed", () => {
  const r = extrapolation.compute(ROPE);
  assert.equal(r.scores.length, 8 * 256 + 1);
  assert.ok(Math.abs(r.scores[0] - 64) < 1e-12);
  assert.equal(r.outside.length, 16);  // the opening state the caption describes
  assert.equal(r.scores[512].toFixed(3), "11.864");
  // The farthest trained distance: nothing outside. One further: every pair short of a turn.
  assert.deepEqual(extrapolation.compute(Object.assign({}, ROPE, { at: 255 })).outside, []);
  const past = extrapolation.compute(Object.assign({}, ROPE, { at: 256 }));
  const short = Array.from(past.unscaled).filter((w) => 255 * w < 2 * Math.PI).length;
  assert.equal(past.outside.length, short);
  assert.equal(short, 19);
  // Position interpolation by s: no pair outside up to s (L - 1).
  const linear = Object.assign({}, ROPE, { scaling: "linear", factor: 4 });
  assert.deepEqual(extrapolation.compute(Object.assign({}, linear, { at: 1020 })).outside, []);
  assert.ok(extrapolation.compute(Object.assign({}, linear, { at: 1028 })).outside.length > 0);
  // YaRN's factor a multiplies the score by a^2.
  const yarn = extrapolation.compute(Object.assign({}, ROPE, { scaling: "yarn" }));
  const a = 0.1 * Math.log(4) + 1;
  assert.ok(Math.abs(yarn.scores[0] - 64 * a * a) < 1e-12);
});

test("sinusoidal: PE(p) . PE(q) is d_model / 2 at q = p and depends on p - q", () => {
  const r = extrapolation.compute(Object.assign({}, ROPE, { encoding: "sinusoidal", at: 700 }));
  assert.ok(Math.abs(r.dots[700] - 32) < 1e-12);
  for (const k of [1, 5, 300]) assert.ok(Math.abs(r.dots[700 - k] - r.dots[700 + k]) < 1e-10);
});
