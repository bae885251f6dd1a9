// The live box's downloads (book/_static/live/fetching.js) with a fake cache and fetch.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const fetching = require("../../book/_static/live/fetching.js");

// Cache Storage's interface over a Map of url -> Response.
function fakeCache(entries) {
  const store = new Map(entries || []);
  return {
    store,
    match: (url) => Promise.resolve(store.has(url) ? store.get(url).clone() : undefined),
    put: (url, response) => { store.set(url, response); return Promise.resolve(); },
    keys: () => Promise.resolve([...store.keys()].map((url) => ({ url }))),
    delete: (request) => Promise.resolve(store.delete(request.url)),
  };
}

function fakeFetch(files) {
  const asked = [];
  const get = (url) => {
    asked.push(url);
    if (!(url in files)) return Promise.resolve(new Response("missing", { status: 404 }));
    return Promise.resolve(new Response(files[url]));
  };
  return { get, asked };
}

test("a file the cache lacks comes from the server, is counted and kept", async () => {
  const cache = fakeCache();
  const server = fakeFetch({ "http://b/model.onnx": new Uint8Array([1, 2, 3, 4, 5]) });
  const counted = { network: 0, cache: 0 };
  const bytes = await fetching.fetchBytes("http://b/model.onnx", cache,
    (n, fromCache) => { counted[fromCache ? "cache" : "network"] += n; }, server.get);
  assert.deepEqual(Array.from(bytes), [1, 2, 3, 4, 5]);
  assert.deepEqual(counted, { network: 5, cache: 0 });
  assert.ok(cache.store.has("http://b/model.onnx"));
  // The second time: from the cache, the server not asked.
  const again = { network: 0, cache: 0 };
  const bytes2 = await fetching.fetchBytes("http://b/model.onnx", cache,
    (n, fromCache) => { again[fromCache ? "cache" : "network"] += n; }, server.get);
  assert.deepEqual(Array.from(bytes2), [1, 2, 3, 4, 5]);
  assert.deepEqual(again, { network: 0, cache: 5 });
  assert.equal(server.asked.length, 1);
});

test("without a cache the server is asked each time; an HTTP error names the file", async () => {
  const server = fakeFetch({ "http://b/a.json": "{}" });
  await fetching.fetchBytes("http://b/a.json", null, () => {}, server.get);
  await fetching.fetchBytes("http://b/a.json", null, () => {}, server.get);
  assert.equal(server.asked.length, 2);
  await assert.rejects(fetching.fetchBytes("http://b/x/gone.wasm", null, () => {}, server.get), /gone\.wasm: HTTP 404/);
});

test("dropStale keeps only the files a page still names", async () => {
  const cache = fakeCache([["http://b/old.onnx", new Response("x")], ["http://b/new.onnx", new Response("y")]]);
  await fetching.dropStale(cache, ["http://b/new.onnx"]);
  assert.deepEqual([...cache.store.keys()], ["http://b/new.onnx"]);
  await fetching.dropStale(null, []); // no cache: nothing to do
});

test("cachedBytes adds up the sizes of the files the cache holds", async () => {
  const cache = fakeCache([["http://b/model.onnx", new Response("x")]]);
  const sizes = { "http://b/model.onnx": 45e6, "http://b/ort.mjs": 0.1e6 };
  assert.equal(await fetching.cachedBytes(cache, sizes), 45e6);
  assert.equal(await fetching.cachedBytes(null, sizes), 0);
});

test("the button says what the click downloads, and only that", () => {
  assert.equal(fetching.buttonLabel(60.1e6, 0), "Load the model (60.1 MB download)");
  assert.equal(fetching.buttonLabel(60.1e6, 59.9e6), "Load the model (0.2 MB download; 59.9 MB already kept by this browser)");
  assert.equal(fetching.buttonLabel(60.1e6, null), "Load the model (up to 60.1 MB download)");
});

test("the status while loading does not call cached bytes a download", () => {
  assert.equal(fetching.progressText(3e6, 0, 60.1e6, true), "Downloading: 3.0 MB of 60.1 MB…");
  const revisit = fetching.progressText(0.1e6, 45e6, 60.1e6, true);
  assert.equal(revisit, "Loading: 45.1 MB of 60.1 MB (45.0 MB from this browser's storage, 0.1 MB downloaded)…");
  assert.equal(fetching.progressText(3e6, 0, 60.1e6, false), "Loading: 3.0 MB of up to 60.1 MB…");
});
