// The live box's side of the model's messages and the timing of its work
// (book/_static/live/box_runs.js), under `node --test`, with fake workers, engines and clocks.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const boxRuns = require("../../book/_static/live/box_runs.js");

// A worker that records what it is sent; the test plays its side with answer() and fail().
function fakeWorker() {
  return {
    sent: [],
    terminated: false,
    postMessage(message) { this.sent.push(message); },
    terminate() { this.terminated = true; },
    answer(data) { this.onmessage({ data }); },
    fail(message) {
      const event = { message, prevented: false, preventDefault() { this.prevented = true; } };
      this.onerror(event);
      return event;
    },
  };
}

// An engine on this thread that records what it handles.
function fakeEngine() {
  const engine = { handled: [], post: null };
  engine.handle = (message) => engine.handled.push(message);
  return engine;
}

function connection(startWorker) {
  const seen = { messages: [], places: [], engine: null };
  const conn = boxRuns.connect({
    startWorker,
    startEngine(post) {
      seen.engine = fakeEngine();
      seen.engine.post = post;
      return seen.engine;
    },
    onMessage: (m) => seen.messages.push(m),
    onPlace: (inWorker) => seen.places.push(inWorker),
  });
  return { conn, seen };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

test("deferred: a promise settled from outside", async () => {
  const d = boxRuns.deferred();
  d.resolve(3);
  assert.equal(await d.promise, 3);
  const e = boxRuns.deferred();
  e.reject(new Error("no"));
  await assert.rejects(e.promise, /no/);
});

test("connect: messages wait for the worker to start, then go to it; its answers come back", () => {
  const worker = fakeWorker();
  const { conn, seen } = connection(() => worker);
  conn.send({ type: "load" });
  assert.deepEqual(worker.sent, []);
  assert.deepEqual(seen.places, []);
  worker.answer({ type: "started" });
  assert.deepEqual(seen.places, [true]);
  assert.deepEqual(worker.sent, [{ type: "load" }]);
  conn.send({ type: "run", id: 1 });
  assert.equal(worker.sent.length, 2);
  worker.answer({ type: "loaded" });
  assert.deepEqual(seen.messages, [{ type: "loaded" }]); // "started" is not passed on
  assert.equal(seen.engine, null);
  conn.close();
  assert.equal(worker.terminated, true);
});

test("connect: where no worker starts, the engine runs on this thread with the same messages", () => {
  const { conn, seen } = connection(() => { throw new Error("no workers here"); });
  assert.deepEqual(seen.places, [false]);
  conn.send({ type: "load" });
  assert.deepEqual(seen.engine.handled, [{ type: "load" }]);
  seen.engine.post({ type: "loaded" });
  assert.deepEqual(seen.messages, [{ type: "loaded" }]);
  conn.close(); // nothing to stop
});

test("connect: a worker that fails before it starts gives way to the engine on this thread", () => {
  const worker = fakeWorker();
  const { conn, seen } = connection(() => worker);
  conn.send({ type: "load" });
  const event = worker.fail("refused");
  assert.equal(event.prevented, true);
  assert.equal(worker.terminated, true);
  assert.deepEqual(seen.places, [false]);
  assert.deepEqual(seen.engine.handled, [{ type: "load" }]);
  assert.deepEqual(seen.messages, []);
});

test("connect: a worker that fails once started answers 'failed' during 'worker'", () => {
  const worker = fakeWorker();
  const { seen } = connection(() => worker);
  worker.answer({ type: "started" });
  worker.fail("");
  assert.deepEqual(seen.messages, [
    { type: "failed", id: null, during: "worker", message: "the model's worker stopped" },
  ]);
  assert.equal(seen.engine, null);
});

// A channel over a fake connection: `sent` holds what the page sends, reply() answers.
function channel(loading = () => true) {
  const made = [];
  const onLoading = [];
  const ch = boxRuns.createChannel({
    connect(onMessage) {
      const c = { sent: [], closed: false, reply: onMessage };
      c.send = (m) => c.sent.push(m);
      c.close = () => { c.closed = true; };
      made.push(c);
      return c;
    },
    onLoading: (m) => onLoading.push(m.type),
    loading,
  });
  return { ch, made, onLoading };
}

test("channel: a load resolves on 'loaded'; progress and stage go to onLoading", async () => {
  const { ch, made, onLoading } = channel();
  const loaded = ch.load({ model: "m.onnx" });
  assert.deepEqual(made[0].sent, [{ type: "load", urls: { model: "m.onnx" } }]);
  made[0].reply({ type: "progress", network: 1, cache: 0 });
  made[0].reply({ type: "stage", stage: "download", network: 2, cache: 0 });
  made[0].reply({ type: "loaded", vocabSize: 30522, unk: "[UNK]" });
  assert.deepEqual(onLoading, ["progress", "stage"]);
  assert.equal((await loaded).vocabSize, 30522);
});

test("channel: each run is answered by its id, in whatever order", async () => {
  const { ch, made } = channel();
  ch.load({});
  const a = ch.run("first", 512);
  const b = ch.run("second", 512);
  const [ra, rb] = made[0].sent.slice(1);
  assert.deepEqual(ra, { type: "run", id: 1, text: "first", maxTokens: 512 });
  assert.equal(rb.id, 2);
  made[0].reply({ type: "result", id: 2, tokens: ["b"] });
  made[0].reply({ type: "result", id: 1, tokens: ["a"] });
  made[0].reply({ type: "result", id: 7, tokens: ["?"] }); // no such run: ignored
  assert.deepEqual((await a).tokens, ["a"]);
  assert.deepEqual((await b).tokens, ["b"]);
});

test("channel: a failure fails its run, or the load, or everything waiting when the worker stops", async () => {
  let isLoading = true;
  const { ch, made } = channel(() => isLoading);
  const load = ch.load({});
  made[0].reply({ type: "failed", id: null, during: "load", message: "HTTP 404" });
  await assert.rejects(load, /HTTP 404/);

  const again = ch.load({});
  assert.equal(made[0].closed, true); // a new load, a new connection
  made[1].reply({ type: "loaded" });
  await again;
  isLoading = false;
  const one = ch.run("x", 512);
  const two = ch.run("y", 512);
  assert.deepEqual(made[1].sent.slice(1).map((m) => m.id), [1, 2]);
  made[1].reply({ type: "failed", id: 1, during: "run", message: "bad text" });
  await assert.rejects(one, /bad text/);
  made[1].reply({ type: "failed", id: null, during: "worker", message: "stopped" });
  await assert.rejects(two, /stopped/);

  // The worker stops while loading: the load fails too.
  isLoading = true;
  const third = ch.load({});
  made[2].reply({ type: "failed", id: null, during: "worker", message: "stopped" });
  await assert.rejects(third, /stopped/);
});

test("serial: one run at a time; calls made meanwhile run once, after it", async () => {
  const order = [];
  let release;
  let calls = 0;
  const run = boxRuns.serial(() => {
    calls += 1;
    order.push("start " + calls);
    if (calls === 1) return new Promise((resolve) => { release = resolve; }).then(() => order.push("end 1"));
    order.push("end " + calls);
    return Promise.resolve();
  }, (error) => order.push("error " + error.message));
  const first = run();
  await flush();
  assert.deepEqual(order, ["start 1"]);
  const second = run();
  const third = run();
  assert.equal(second, third); // the queued run, shared
  await flush();
  assert.deepEqual(order, ["start 1"]); // still waiting for the first
  release();
  await first;
  await third;
  assert.deepEqual(order, ["start 1", "end 1", "start 2", "end 2"]);
  assert.equal(calls, 2);
});

test("serial: a failure goes to onError and the next call still runs", async () => {
  const errors = [];
  let n = 0;
  const run = boxRuns.serial(() => {
    n += 1;
    return n === 1 ? Promise.reject(new Error("boom")) : Promise.resolve();
  }, (error) => errors.push(error.message));
  await run();
  await run();
  assert.deepEqual(errors, ["boom"]);
  assert.equal(n, 2);
});

test("debounce: the work runs once, `ms` after the last call", () => {
  const pending = new Map();
  let now = 0;
  let nextId = 1;
  const clock = {
    setTimeout(fn, ms) { const id = nextId++; pending.set(id, { fn, at: now + ms }); return id; },
    clearTimeout(id) { pending.delete(id); },
  };
  const advance = (ms) => {
    now += ms;
    for (const [id, t] of [...pending]) if (t.at <= now) { pending.delete(id); t.fn(); }
  };
  let runs = 0;
  const later = boxRuns.debounce(() => { runs += 1; }, 250, clock);
  later();
  advance(200);
  later(); // typing goes on: put off again
  advance(200);
  assert.equal(runs, 0);
  advance(50);
  assert.equal(runs, 1);
  advance(1000);
  assert.equal(runs, 1);
});

test("nextTask resolves after the current task", async () => {
  let after = false;
  const next = boxRuns.nextTask().then(() => after);
  after = true;
  assert.equal(await next, true);
});
