// The live box's model glue (book/_static/live/model.js): the pure text helpers, and the engine's
// messages with a fake runtime and tokenizer in place of onnxruntime-web's.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const model = require("../../book/_static/live/model.js");

test("truncate cuts as Python's truncation=True: the first max - 1 tokens, then [SEP]", () => {
  const ids = [101, 5, 6, 7, 8, 102];
  const tokens = ["[CLS]", "a", "b", "c", "d", "[SEP]"];
  assert.deepEqual(model.truncate(ids, tokens, 6), { ids, tokens, truncatedFrom: null });
  assert.deepEqual(model.truncate(ids, tokens, 4), {
    ids: [101, 5, 6, 102], tokens: ["[CLS]", "a", "b", "[SEP]"], truncatedFrom: 6,
  });
});

test("the truncation note counts the tokens left out", () => {
  assert.equal(model.truncationNote("Your text", 602, 512),
    "Your text is 602 tokens; the model reads at most 512, so the last 90 tokens were left out: " +
    "the first 510 are shown, between [CLS] and [SEP].");
  assert.match(model.truncationNote("Your text", 513, 512), /the last 1 token was left out/);
});

test("unknownWords names each word holding a piece the vocabulary lacks, once", () => {
  const known = new Set(["the", "cafe", "ramen"]);
  const tokenize = (w) => [...w].some((c) => c > "\u2000") ? ["[UNK]"] : (known.has(w) ? [w] : ["##" + w]);
  assert.deepEqual(model.unknownWords("the 東京 ramen ☕ 東京 cafe", tokenize, "[UNK]"), ["東京", "☕"]);
  assert.deepEqual(model.unknownWords("the cafe", tokenize, "[UNK]"), []);
});

test("the [UNK] line says what happened, and only when there is an [UNK]", () => {
  assert.equal(model.unknownNote(["[CLS]", "a", "[SEP]"], [], "[UNK]", 30522), null);
  const line = model.unknownNote(["[CLS]", "[UNK]", "[UNK]", "x", "[UNK]", "[SEP]"], ["東京", "🙂"], "[UNK]", 30522);
  assert.match(line, /^\[UNK\] \(3 tokens here\): “東京”, “🙂” use characters outside the model's vocabulary of 30,522 word pieces/);
  assert.equal(line.split("\n").length, 1);
  assert.match(model.unknownNote(["[UNK]"], ["☕"], "[UNK]", 30522), /^\[UNK\] \(1 token here\): “☕” uses /);
});

test("attentionDims takes [L, H, T, T] from the output and checks it", () => {
  assert.deepEqual(model.attentionDims([6, 12, 9, 9], 9), [6, 12, 9, 9]);
  assert.deepEqual(model.attentionDims([2, 3, 4, 4], 4), [2, 3, 4, 4]);
  assert.throws(() => model.attentionDims([6, 12, 9, 8], 9), /not \[L, H, 9, 9\]/);
  assert.throws(() => model.attentionDims([72, 9, 9], 9), /not \[L, H/);
});

// A runtime that returns [2, 3, T, T] attentions, each weight = 1 / T.
function fakeRuntime() {
  class Tensor { constructor(type, data, dims) { Object.assign(this, { type, data, dims }); } }
  const created = [];
  return {
    created,
    env: { wasm: {} },
    Tensor,
    InferenceSession: {
      create: (bytes, options) => {
        created.push([bytes.length, options]);
        return Promise.resolve({
          run: (feeds) => {
            const T = feeds.input_ids.dims[1];
            assert.equal(feeds.input_ids.type, "int64");
            const data = new Float32Array(2 * 3 * T * T).fill(1 / T);
            return Promise.resolve({ attentions: { dims: [2, 3, T, T], data } });
          },
        });
      },
    },
  };
}

class FakeTokenizer {
  constructor(json, config) { this.config = config; }
  encode(text) {
    const words = text.split(" ");
    const tokens = ["[CLS]", ...words.map((w) => (w === "🙂" ? "[UNK]" : w)), "[SEP]"];
    return { ids: tokens.map((_, i) => i + 100), tokens };
  }
  tokenize(word) { return word === "🙂" ? ["[UNK]"] : [word]; }
  get_vocab() { return new Map([["a", 0], ["b", 1], ["[UNK]", 2]]); }
}

function engineWith(runtime) {
  const posted = [];
  const files = {
    "u:ort": runtime,
    "u:tok": { Tokenizer: FakeTokenizer },
  };
  const engine = model.createEngine({
    post: (message, transfer) => posted.push([message, transfer]),
    importModule: (url) => Promise.resolve(files[url]),
    openCache: () => Promise.resolve(null),
    dropStale: () => Promise.resolve(),
    fetchBytes: (url, cache, onBytes) => {
      const text = url.endsWith("config") ? '{"unk_token": "[UNK]"}' : url.endsWith("tokenizer") ? "{}" : "bytes";
      onBytes(text.length, false);
      return Promise.resolve(new TextEncoder().encode(text));
    },
    now: () => 0,
  });
  return { engine, posted };
}

const URLS = { ort: "u:ort", ortDir: "u:dir/", wasm: "u:wasm", tokenizers: "u:tok", model: "u:model", tokenizer: "u:tokenizer", tokenizerConfig: "u:config" };

test("the engine loads, then answers a run with the output's shape and the [UNK] words", async () => {
  const runtime = fakeRuntime();
  const { engine, posted } = engineWith(runtime);
  await engine.handle({ type: "load", urls: URLS });
  const types = posted.map(([m]) => m.type);
  assert.deepEqual(types.slice(-2), ["stage", "loaded"]);
  assert.deepEqual(posted.at(-1)[0], { type: "loaded", vocabSize: 3, unk: "[UNK]" });
  assert.equal(runtime.env.wasm.numThreads, 1);
  assert.equal(runtime.env.wasm.wasmPaths, "u:dir/");
  assert.equal(runtime.created.length, 2); // the warm-up graph, then the model
  await engine.handle({ type: "run", id: 7, text: "a 🙂 b c", maxTokens: 512 });
  const [result, transfer] = posted.at(-1);
  assert.equal(result.type, "result");
  assert.equal(result.id, 7);
  assert.deepEqual(result.dims, [2, 3, 6, 6]); // the model's L and H, not constants
  assert.equal(result.attentions.length, 2 * 3 * 6 * 6);
  assert.deepEqual(transfer, [result.attentions.buffer]);
  assert.deepEqual(result.unknownWords, ["🙂"]);
  await engine.handle({ type: "run", id: 8, text: "a b c d e f", maxTokens: 4 });
  const cut = posted.at(-1)[0];
  assert.deepEqual([cut.ids.length, cut.truncatedFrom, cut.tokens.at(-1)], [4, 8, "[SEP]"]);
});

test("the engine answers a failure instead of throwing", async () => {
  const { engine, posted } = engineWith(fakeRuntime());
  await engine.handle({ type: "run", id: 3, text: "a", maxTokens: 512 }); // before any load
  assert.equal(posted.at(-1)[0].type, "failed");
  assert.equal(posted.at(-1)[0].id, 3);
  await engine.handle({ type: "load", urls: { ...URLS, tokenizers: "u:none" } });
  assert.deepEqual([posted.at(-1)[0].type, posted.at(-1)[0].during], ["failed", "load"]);
});
