// Chapter 16's instrument: the size of the key/value cache of published models, side by side,
// for the context length, batch size and precision the reader chooses. The models' shapes are
// attention_lab.caches.PUBLISHED_CACHE_SHAPES, written into the page's data-config when the
// book is built (book/_ext/attention_book/instruments.py): this file holds no model's numbers.
// Per position, all layers (CacheShape.numbers_per_token):
// - multi-head, grouped-query, multi-query: L * 2 * Hkv * Dh (a key and a value per kept head);
// - latent (multi-head latent attention): L * (R + Dr) (the latent and the shared RoPE key);
// and the cache (CacheShape.cache_bytes) holds numbers_per_token * min(context, W) * batch *
// bytes per number, W the sliding window where there is one. Sizes are whole numbers below 2^53,
// exact in a float64. compute() and readable() are pure; the page's state and both functions are
// window.attentionInstruments.cache_memory.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  // Colour-blind-safe colours (seaborn's "colorblind"), one per kind; the text names the kind.
  var COLOURS = { "multi-head": "#0173b2", "grouped-query": "#029e73",
    "multi-query": "#d55e00", latent: "#cc78bc" };
  var grouped = core.grouped, readable = core.readable; // 1,234,567; "1.00 GiB"

  function numbersPerToken(m) {
    return core.cacheNumbersPerToken(m, m.num_layers);
  }

  // settings: context, batchSize, bytesPerNumber; models: data-config's list, in its order.
  function compute(settings, models) {
    var rows = models.map(function (m) {
      var perToken = numbersPerToken(m);
      var kept = m.window === null ? settings.context : Math.min(settings.context, m.window);
      var bytes = perToken * kept * settings.batchSize * settings.bytesPerNumber;
      return { name: m.name, kind: m.kind, model: m, numbersPerToken: perToken, kept: kept,
        bytes: bytes, readable: readable(bytes) };
    });
    var largest = rows.reduce(function (a, b) { return b.bytes > a.bytes ? b : a; });
    var smallest = rows.reduce(function (a, b) { return b.bytes < a.bytes ? b : a; });
    return Object.assign({}, settings, { rows: rows, largest: largest.name,
      smallest: smallest.name, ratio: largest.bytes / smallest.bytes });
  }

  // How a model's numbers per position come about, in words and numbers.
  function shapeText(row) {
    var m = row.model, n = grouped(row.numbersPerToken);
    if (row.kind === "latent") {
      return m.num_layers + " layers \u00d7 (latent " + m.kv_lora_rank + " + RoPE key " +
        m.rope_dim + ") = " + n + " numbers per position";
    }
    var kv = m.num_kv_heads === null ? m.num_heads : m.num_kv_heads;
    var heads = row.kind === "multi-head" ? kv + " heads"
      : kv + " key/value head" + (kv === 1 ? "" : "s") + " for " + m.num_heads + " query heads";
    return m.num_layers + " layers \u00d7 2 (key, value) \u00d7 " + heads + " \u00d7 width " +
      m.head_dim + " = " + n + " numbers per position";
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var models = config.models || [];
    var id = "instrument-" + body.dataset.instrument;
    var controls = core.element("div", "instrument-controls");
    var fields = core.memoryControls(id, config, 17);
    controls.append.apply(controls, fields.wraps);

    var caption = core.element("p", "instrument-caption");
    var list = core.element("ul", "instrument-models");
    var status = core.status();
    body.textContent = "";
    body.append(controls, caption, list, status);

    var state = window.attentionInstruments.cache_memory;
    function update() {
      var chosen = fields.read(), settings = chosen.settings;
      var T = settings.context;
      var result = compute(settings, models);
      Object.assign(state, result);
      state.runs += 1;
      var top = 0;
      result.rows.forEach(function (r) { top = Math.max(top, r.bytes); });
      caption.textContent = "The key/value cache after " + grouped(T) + " positions of " +
        chosen.sequences + ", " + (8 * settings.bytesPerNumber) + " bits a number; each bar " +
        "is in proportion to the largest.";
      list.textContent = "";
      result.rows.forEach(function (r) {
        var kind = r.kind + " attention" + (r.model.window === null ? "" : ", sliding window of " +
          grouped(r.model.window) + " positions");
        var shape = shapeText(r) + (r.kept < T ? "; keeps the last " + grouped(r.kept) + " of " +
          grouped(T) : "");
        list.append(core.memoryItem(r.name, kind, shape, r.bytes, top,
          COLOURS[r.kind] || "#949494"));
      });
      var big = result.rows.filter(function (r) { return r.name === result.largest; })[0];
      var small = result.rows.filter(function (r) { return r.name === result.smallest; })[0];
      status.textContent = "The largest cache is " + big.name + "'s, " + big.readable +
        "; the smallest " + small.name + "'s, " + small.readable + ", " +
        (result.ratio >= 10 ? Math.round(result.ratio) : result.ratio.toFixed(1)) +
        " times smaller.";
    }
    fields.onChange(update);
    update();
  }

  window.attentionInstruments.cache_memory = { runs: 0, compute: compute, readable: readable };
  core.start("cache_memory", setUp);
  if (typeof module !== "undefined") module.exports = { compute: compute, readable: readable };
})();
