// The live box's side of the model's messages, and the timing of its work: the connection to
// the engine (model.js) in a worker, or on the page's thread where a worker cannot start; the
// channel that turns the engine's answers into promises (the load, each sentence's run); one run
// at a time; work put off until typing or resizing pauses. No DOM: box.js passes in what starts
// a worker and the engine. Unit-tested in tests/js/box_runs.test.js with fake workers and clocks.
(function (root) {
  "use strict";

  function deferred() {
    var d = {};
    d.promise = new Promise(function (resolve, reject) { d.resolve = resolve; d.reject = reject; });
    return d;
  }

  // A connection to the engine: send(message); every answer goes to onMessage. deps:
  //   startWorker()        a Worker running model_worker.js (it may throw)
  //   startEngine(post)    model.createEngine on this thread, its answers to post
  //   onMessage(message)   the engine's answers
  //   onPlace(inWorker)    where the engine runs, once known
  // The worker says "started" once it runs; messages sent before are queued. Where the worker
  // cannot start (a browser without workers, or one that refuses the script), the same engine
  // runs on the page's thread: the same code and numbers, but the page waits while the model
  // starts and computes. A worker that fails after it started answers "failed" (during "worker").
  function connect(deps) {
    var queue = [];
    var target = null;
    var worker = null;

    function onThisThread() {
      deps.onPlace(false);
      target = deps.startEngine(deps.onMessage).handle;
      queue.splice(0).forEach(target);
    }

    try {
      worker = deps.startWorker();
    } catch {
      onThisThread();
    }
    if (worker) {
      worker.onmessage = function (event) {
        if (event.data.type !== "started") return deps.onMessage(event.data);
        deps.onPlace(true);
        target = function (message) { worker.postMessage(message); };
        queue.splice(0).forEach(target);
      };
      worker.onerror = function (event) {
        event.preventDefault();
        if (target) {
          deps.onMessage({ type: "failed", id: null, during: "worker", message: event.message || "the model's worker stopped" });
          return;
        }
        worker.terminate();
        worker = null;
        onThisThread();
      };
    }
    return {
      send: function (message) { if (target) target(message); else queue.push(message); },
      close: function () { if (worker) worker.terminate(); }
    };
  }

  // The engine behind promises. deps:
  //   connect(onMessage)   a connection as connect() makes (a new one for each load)
  //   onLoading(message)   the load's "progress" and "stage" messages
  //   loading()            whether a load is under way (a failed worker fails it then)
  // load(urls) resolves with the "loaded" message; run(text, maxTokens) with the "result".
  function createChannel(deps) {
    var connection = null;
    var pending = null; // the load
    var waiting = {}; // run id -> deferred
    var nextId = 1;

    function failAll(error) {
      Object.keys(waiting).forEach(function (id) { waiting[id].reject(error); delete waiting[id]; });
    }

    function onMessage(message) {
      if (message.type === "progress" || message.type === "stage") {
        deps.onLoading(message);
      } else if (message.type === "loaded") {
        pending.resolve(message);
      } else if (message.type === "result") {
        if (!waiting[message.id]) return;
        waiting[message.id].resolve(message);
        delete waiting[message.id];
      } else if (message.type === "failed") {
        var error = new Error(message.message);
        if (message.id !== null && waiting[message.id]) {
          waiting[message.id].reject(error);
          delete waiting[message.id];
        } else if (message.during === "load") {
          pending.reject(error);
        } else {
          failAll(error);
          if (deps.loading()) pending.reject(error);
        }
      }
    }

    function load(urls) {
      if (connection) connection.close();
      connection = deps.connect(onMessage);
      pending = deferred();
      connection.send({ type: "load", urls: urls });
      return pending.promise;
    }

    function run(text, maxTokens) {
      var id = nextId++;
      waiting[id] = deferred();
      connection.send({ type: "run", id: id, text: text, maxTokens: maxTokens });
      return waiting[id].promise;
    }

    return { load: load, run: run, onMessage: onMessage };
  }

  // task() one call at a time: a call made while one is under way runs after it, once (however
  // many calls were made meanwhile); a failure goes to onError. Returns the call's promise.
  function serial(task, onError) {
    var running = Promise.resolve();
    var queued = false;
    return function () {
      if (queued) return running;
      queued = true;
      running = running.then(function () {
        queued = false;
        return task();
      }).catch(onError);
      return running;
    };
  }

  // fn() once calls have paused for `ms`: each call puts it off again. `timers` (setTimeout,
  // clearTimeout) defaults to the page's.
  function debounce(fn, ms, timers) {
    var clock = timers || root;
    var timer = null;
    return function () {
      clock.clearTimeout(timer);
      timer = clock.setTimeout(function () { fn(); }, ms);
    };
  }

  // The next task of the page's event loop: work split across tasks lets the page answer in
  // between (a click, a key, a repaint).
  function nextTask() {
    return new Promise(function (resolve) { root.setTimeout(resolve, 0); });
  }

  var boxRuns = {
    deferred: deferred,
    connect: connect,
    createChannel: createChannel,
    serial: serial,
    debounce: debounce,
    nextTask: nextTask
  };
  var ns = (root.liveAttention = root.liveAttention || {});
  ns.boxRuns = boxRuns;
  if (typeof module !== "undefined") module.exports = boxRuns;
})(globalThis);
