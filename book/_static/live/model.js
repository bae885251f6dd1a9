// The live box's model: MiniLM's tokenizer (@huggingface/tokenizers) and the exported ONNX
// graph run by ONNX Runtime's single-threaded WebAssembly build (onnxruntime-web).
//
// createEngine() is the model behind messages: box.js sends it {type: "load"} once and
// {type: "run"} for each sentence, and it answers with "progress", "stage", "loaded", "result"
// and "failed" messages. It runs in a worker (model_worker.js), so that neither compiling the
// runtime, nor building the session, nor a 512-token sentence holds up the page; where a worker
// cannot start, box.js runs the same engine on the page's thread.
//
// The text helpers (truncation as Python's tokenizer truncates, the words that became [UNK])
// are pure and unit-tested in tests/js/model.test.js, as is the engine with a fake runtime.
(function (root) {
  "use strict";

  // The sentence's ids and tokens, cut as Python's truncation=True, max_length=maxTokens cuts
  // them: the first maxTokens - 1 tokens, then the closing special token ([SEP]).
  // truncatedFrom is the uncut length, or null.
  function truncate(ids, tokens, maxTokens) {
    if (ids.length <= maxTokens) return { ids: ids, tokens: tokens, truncatedFrom: null };
    return {
      ids: ids.slice(0, maxTokens - 1).concat([ids[ids.length - 1]]),
      tokens: tokens.slice(0, maxTokens - 1).concat([tokens[tokens.length - 1]]),
      truncatedFrom: ids.length
    };
  }

  // What the reader is told when a text was cut: how many tokens were left out.
  function truncationNote(what, truncatedFrom, maxTokens) {
    var dropped = truncatedFrom - maxTokens;
    return what + " is " + truncatedFrom + " tokens; the model reads at most " + maxTokens +
      ", so the last " + dropped + (dropped === 1 ? " token was" : " tokens were") +
      " left out: the first " + (maxTokens - 2) + " are shown, between [CLS] and [SEP].";
  }

  // The words of text (split at white space) that hold a piece the vocabulary lacks:
  // tokenizeWord(word) -> tokens, unk the tokenizer's unknown token. Each word once, in order.
  function unknownWords(text, tokenizeWord, unk) {
    var found = [];
    text.split(/\s+/).forEach(function (word) {
      if (word && found.indexOf(word) < 0 && tokenizeWord(word).indexOf(unk) >= 0) found.push(word);
    });
    return found;
  }

  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function quoted(words) {
    var shown = words.slice(0, 5).map(function (w) { return "“" + w + "”"; });
    return shown.join(", ") + (words.length > 5 ? " and " + (words.length - 5) + " more" : "");
  }

  // One line for the box when tokens hold [UNK]s (null when they hold none).
  function unknownNote(tokens, words, unk, vocabSize) {
    var count = tokens.filter(function (t) { return t === unk; }).length;
    if (count === 0) return null;
    return unk + " (" + count + (count === 1 ? " token" : " tokens") + " here): " +
      (words.length ? quoted(words) + " use" + (words.length === 1 ? "s" : "") + " " : "") +
      "characters outside the model's vocabulary of " + grouped(vocabSize) + " word pieces " +
      "(most Chinese, Japanese and Korean characters, emoji), so the model sees the same " +
      "“unknown” token in their place, whatever they say.";
  }

  // The shape of the attentions output, [L, H, T, T], checked: the box takes the numbers of
  // layers and heads from it, not from a constant.
  function attentionDims(dims, T) {
    var d = Array.from(dims, Number);
    if (d.length !== 4 || d[2] !== T || d[3] !== T || d[0] < 1 || d[1] < 1) {
      throw new Error("the model's attentions have shape [" + d.join(", ") + "], not [L, H, " + T + ", " + T + "]");
    }
    return d;
  }

  // A 70-byte ONNX graph (y = Identity(x)): creating a session from it starts ONNX Runtime
  // (compiles its WebAssembly) while the model is still downloading.
  var WARM_UP = "CAgSADo6ChAKAXgSAXkiCElkZW50aXR5EgR3YXJtWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQEQ==";

  // The engine. deps:
  //   post(message, transfer)      sends a message back to the page
  //   importModule(url)            import(url), the vendored ES modules
  //   openCache(), dropStale(cache, keep), fetchBytes(url, cache, onBytes)   fetching.js's
  //   now()                        a clock in ms
  function createEngine(deps) {
    var ort = null;
    var session = null;
    var tokenizer = null;
    var unk = "[UNK]";
    var vocabSize = 0;

    function startRuntime(module, wasmBytes, ortDir) {
      ort = module;
      ort.env.logLevel = "error";
      ort.env.wasm.numThreads = 1; // single-threaded: no SharedArrayBuffer, no special headers
      ort.env.wasm.proxy = false; // this engine is already off the page's thread
      ort.env.wasm.wasmPaths = ortDir; // its default points at a CDN
      ort.env.wasm.wasmBinary = wasmBytes;
      var bytes = Uint8Array.from(atob(WARM_UP), function (c) { return c.charCodeAt(0); });
      return ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
    }

    // urls: ort (ort.wasm.min.mjs), ortDir, wasm, tokenizers (tokenizers.min.mjs), model,
    // tokenizer, tokenizerConfig.
    function load(urls) {
      var received = { network: 0, cache: 0 };
      var lastPost = -Infinity;
      function onBytes(n, fromCache) {
        received[fromCache ? "cache" : "network"] += n;
        var t = deps.now();
        if (t - lastPost < 50) return; // a message per 50 ms, not per chunk
        lastPost = t;
        deps.post({ type: "progress", network: received.network, cache: received.cache });
      }
      var decoder = new TextDecoder();
      return deps.openCache().then(function (cache) {
        deps.dropStale(cache, [urls.wasm, urls.model, urls.tokenizer, urls.tokenizerConfig]);
        var runtime = Promise.all([
          deps.importModule(urls.ort),
          deps.fetchBytes(urls.wasm, cache, onBytes)
        ]).then(function (parts) { return startRuntime(parts[0], parts[1], urls.ortDir); });
        return Promise.all([
          runtime,
          deps.importModule(urls.tokenizers),
          deps.fetchBytes(urls.model, cache, onBytes),
          deps.fetchBytes(urls.tokenizer, cache, onBytes),
          deps.fetchBytes(urls.tokenizerConfig, cache, onBytes)
        ]);
      }).then(function (parts) {
        deps.post({ type: "stage", stage: "download", network: received.network, cache: received.cache });
        var tokenizerConfig = JSON.parse(decoder.decode(parts[4]));
        tokenizer = new parts[1].Tokenizer(JSON.parse(decoder.decode(parts[3])), tokenizerConfig);
        if (typeof tokenizerConfig.unk_token === "string") unk = tokenizerConfig.unk_token;
        vocabSize = tokenizer.get_vocab(true).size;
        return ort.InferenceSession.create(parts[2], {
          executionProviders: ["wasm"],
          graphOptimizationLevel: "all"
        });
      }).then(function (created) {
        session = created;
        deps.post({ type: "loaded", vocabSize: vocabSize, unk: unk });
      });
    }

    function run(message) {
      var started = deps.now();
      var encoded = tokenizer.encode(message.text);
      var cut = truncate(encoded.ids, encoded.tokens, message.maxTokens);
      var T = cut.ids.length;
      var input = new ort.Tensor("int64", BigInt64Array.from(cut.ids, function (i) { return BigInt(i); }), [1, T]);
      return session.run({ input_ids: input }).then(function (out) {
        var dims = attentionDims(out.attentions.dims, T);
        var data = out.attentions.data;
        // A view of the runtime's memory cannot be handed over: copy it then.
        var own = data.byteOffset === 0 && data.buffer.byteLength === data.byteLength ? data : data.slice();
        var words = cut.tokens.indexOf(unk) >= 0
          ? unknownWords(message.text, function (w) { return tokenizer.tokenize(w); }, unk)
          : [];
        deps.post({
          type: "result",
          id: message.id,
          ids: cut.ids,
          tokens: cut.tokens,
          truncatedFrom: cut.truncatedFrom,
          dims: dims,
          attentions: own,
          unknownWords: words,
          modelMs: deps.now() - started
        }, [own.buffer]);
      });
    }

    // One message from the page; failures are answered, never thrown.
    function handle(message) {
      var work = message.type === "load" ? load(message.urls)
        : message.type === "run" ? Promise.resolve(message).then(run)
        : Promise.reject(new Error("unknown message " + message.type));
      return work.catch(function (error) {
        deps.post({
          type: "failed",
          id: message.id === undefined ? null : message.id,
          during: message.type,
          message: String(error && error.message ? error.message : error)
        });
      });
    }

    return { handle: handle };
  }

  var model = {
    truncate: truncate,
    truncationNote: truncationNote,
    unknownWords: unknownWords,
    unknownNote: unknownNote,
    attentionDims: attentionDims,
    createEngine: createEngine
  };
  var ns = (root.liveAttention = root.liveAttention || {});
  ns.model = model;
  if (typeof module !== "undefined") module.exports = model;
})(globalThis);
