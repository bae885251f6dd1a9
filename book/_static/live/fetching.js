// The live box's downloads: the model's files fetched from this book's own _static folder and
// kept in the browser's Cache Storage (where it has one: pages served over https or from this
// machine), so that a later visit reads them without the network; and the words that say how
// much a click will download. Runs in the model's worker (model_worker.js) and, for the button's
// label, on the page. Unit-tested in tests/js/fetching.test.js with a fake cache and fetch.
//
// The files' names carry a hash of their content where it can change (the model), so a new
// build's files are fetched afresh; entries that no page names any more are dropped.
(function (root) {
  "use strict";

  var CACHE_NAME = "attention-by-running-it-live";

  function megabytes(n) {
    return (n / 1e6).toFixed(1) + " MB";
  }

  // The browser's cache for the model's files, or null where there is none.
  function openCache(scope) {
    var where = scope || root;
    if (!where.caches || !where.isSecureContext) return Promise.resolve(null);
    return where.caches.open(CACHE_NAME).catch(function () { return null; });
  }

  function dropStale(cache, keep) {
    if (!cache) return Promise.resolve();
    return cache.keys().then(function (requests) {
      requests.forEach(function (r) { if (keep.indexOf(r.url) < 0) cache.delete(r); });
    }).catch(function () {});
  }

  // The bytes of a response's body, each chunk counted by onBytes(n) as it arrives.
  function readBytes(response, onBytes) {
    if (!response.body || !response.body.getReader) {
      return response.arrayBuffer().then(function (buffer) {
        onBytes(buffer.byteLength);
        return new Uint8Array(buffer);
      });
    }
    var reader = response.body.getReader();
    var chunks = [];
    var length = 0;
    function pump() {
      return reader.read().then(function (step) {
        if (step.done) {
          var bytes = new Uint8Array(length);
          var offset = 0;
          chunks.forEach(function (chunk) { bytes.set(chunk, offset); offset += chunk.length; });
          return bytes;
        }
        chunks.push(step.value);
        length += step.value.length;
        onBytes(step.value.length);
        return pump();
      });
    }
    return pump();
  }

  // The bytes of url from `cache` (when it holds them) or the server (then stored in `cache`);
  // onBytes(n, fromCache) counts them as they arrive. `fetcher` is fetch.
  function fetchBytes(url, cache, onBytes, fetcher) {
    var get = fetcher || root.fetch.bind(root);
    return (cache ? cache.match(url) : Promise.resolve(undefined))
      .then(function (hit) {
        if (hit) return { response: hit, fromCache: true };
        return get(url).then(function (response) {
          if (!response.ok) throw new Error(url.split("/").pop() + ": HTTP " + response.status);
          if (cache) cache.put(url, response.clone()).catch(function () {});
          return { response: response, fromCache: false };
        });
      })
      .then(function (got) {
        return readBytes(got.response, function (n) { onBytes(n, got.fromCache); });
      });
  }

  // How many of `sizes` ({url: bytes}) the cache already holds, in bytes (0 without a cache).
  function cachedBytes(cache, sizes) {
    if (!cache) return Promise.resolve(0);
    var urls = Object.keys(sizes);
    return Promise.all(urls.map(function (url) {
      return cache.match(url).then(function (hit) { return hit ? sizes[url] : 0; });
    })).then(function (parts) {
      return parts.reduce(function (a, b) { return a + b; }, 0);
    }).catch(function () { return 0; });
  }

  // The load button's words. total: every file's bytes; kept: bytes this browser's Cache
  // Storage holds already, or null where the page cannot see a cache (then the HTTP cache may
  // still hold the files, and only an upper bound is known).
  function buttonLabel(total, kept) {
    if (kept === null) return "Load the model (up to " + megabytes(total) + " download)";
    if (kept <= 0) return "Load the model (" + megabytes(total) + " download)";
    return "Load the model (" + megabytes(total - kept) + " download; " + megabytes(kept) +
      " already kept by this browser)";
  }

  // The status line while the files arrive: network and cache bytes so far, of total.
  function progressText(network, cache, total, cacheVisible) {
    if (!cacheVisible) return "Loading: " + megabytes(network + cache) + " of up to " + megabytes(total) + "…";
    if (cache === 0) return "Downloading: " + megabytes(network) + " of " + megabytes(total) + "…";
    return "Loading: " + megabytes(network + cache) + " of " + megabytes(total) + " (" +
      megabytes(cache) + " from this browser's storage, " + megabytes(network) + " downloaded)…";
  }

  var fetching = {
    CACHE_NAME: CACHE_NAME,
    megabytes: megabytes,
    openCache: openCache,
    dropStale: dropStale,
    readBytes: readBytes,
    fetchBytes: fetchBytes,
    cachedBytes: cachedBytes,
    buttonLabel: buttonLabel,
    progressText: progressText
  };
  var ns = (root.liveAttention = root.liveAttention || {});
  ns.fetching = fetching;
  if (typeof module !== "undefined") module.exports = fetching;
})(globalThis);
