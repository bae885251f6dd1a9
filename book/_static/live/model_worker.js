// The live box's worker: the model (model.js's engine) off the page's thread. box.js starts it
// with `new Worker(".../_static/live/model_worker.js")` and talks to it in messages; its first
// message, "started", tells the page that it runs (if it never comes, the page runs the same
// engine itself).
importScripts("fetching.js", "model.js");

(function (root) {
  "use strict";

  var live = root.liveAttention;
  var engine = live.model.createEngine({
    post: function (message, transfer) { root.postMessage(message, transfer || []); },
    importModule: function (url) { return import(url); },
    openCache: function () { return live.fetching.openCache(root); },
    dropStale: live.fetching.dropStale,
    fetchBytes: function (url, cache, onBytes) { return live.fetching.fetchBytes(url, cache, onBytes); },
    now: function () { return root.performance.now(); }
  });
  root.onmessage = function (event) { engine.handle(event.data); };
  root.postMessage({ type: "started" });
})(globalThis);
