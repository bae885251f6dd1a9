// Chapter 21's instrument: what a published hybrid model (attention layers among linear-attention
// layers) holds per batch of sequences while it decodes, per kind of layer, against what the same
// model would hold with attention in every layer. The models' shapes are
// attention_lab.caches.PUBLISHED_HYBRID_SHAPES, written into the page's data-config when the
// book is built (book/_ext/attention_book/instruments.py): this file holds no model's numbers.
// For context T, batch B and b bytes a number (HybridShape.memory_bytes):
// - cache: the attention layers' CacheShape.cache_bytes, numbers per position (La * 2 * Hkv * Dh,
//   or La * (R + Dr) for latent attention) * min(T, W) * B * b;
// - state: Ll * (Hv * Dk * Dv + (conv_size - 1) * (2 * Hk * Dk + Hv * Dv)) * B * b, the linear
//   layers' states and the inputs their causal convolutions still need, at any T;
// - all attention: the cache with La + Ll attention layers.
// Sizes are whole numbers below 2^53, exact in a float64. compute() is pure; the page's state and
// compute are window.attentionInstruments.hybrid_memory.
(function () {
  "use strict";
  var core = window.attentionInstruments.core;
  var grouped = core.grouped, readable = core.readable;
  // Colour-blind-safe colours (seaborn's "colorblind"), one per part; the text names each part.
  var COLOURS = { cache: "#0173b2", state: "#de8f05", total: "#029e73", all: "#949494" };

  // Numbers one linear layer keeps per sequence: its state and its convolution's window.
  function statePerLayer(m) {
    var channels = 2 * m.num_key_heads * m.key_dim + m.num_value_heads * m.value_dim;
    return m.num_value_heads * m.key_dim * m.value_dim + (m.conv_size - 1) * channels;
  }

  // settings: context, batchSize, bytesPerNumber; m: one entry of data-config's models.
  function compute(settings, m) {
    var a = m.attention, per = settings.batchSize * settings.bytesPerNumber;
    var layers = a.num_layers + m.num_linear_layers;
    var kept = a.window === null ? settings.context : Math.min(settings.context, a.window);
    var perToken = core.cacheNumbersPerToken(a, a.num_layers);
    var stateNumbers = m.num_linear_layers * statePerLayer(m);
    var cache = perToken * kept * per, state = stateNumbers * per;
    var allAttention = core.cacheNumbersPerToken(a, layers) * kept * per;
    // The first context at which the cache holds more than the state (B and b cancel): none if
    // a window stops the cache below it.
    var passes = Math.floor(stateNumbers / perToken) + 1;
    if (a.window !== null && passes > a.window) passes = null;
    return Object.assign({}, settings, { name: m.name, kind: a.kind, layers: layers,
      attentionLayers: a.num_layers, linearLayers: m.num_linear_layers, kept: kept,
      cacheNumbersPerToken: perToken, stateNumbers: stateNumbers, statePerLayer: statePerLayer(m),
      cache: cache, state: state, total: cache + state, allAttention: allAttention,
      ratio: allAttention / (cache + state), passes: passes });
  }

  function times(x) {
    return x >= 10 ? String(Math.round(x)) : x.toFixed(1);
  }

  // How a cache's numbers per position come about, for `layers` attention layers of shape a.
  function cacheText(a, layers) {
    var n = grouped(core.cacheNumbersPerToken(a, layers));
    if (a.kv_lora_rank !== null) {
      return layers + " latent-attention layers \u00d7 (latent " + a.kv_lora_rank +
        " + RoPE key " + a.rope_dim + ") = " + n + " numbers per position";
    }
    var kv = a.num_kv_heads === null ? a.num_heads : a.num_kv_heads;
    return layers + " attention layers \u00d7 2 (key, value) \u00d7 " + kv + " key/value head" +
      (kv === 1 ? "" : "s") + " \u00d7 width " + a.head_dim + " = " + n + " numbers per position";
  }

  function stateText(r, m) {
    return r.linearLayers + " linear layers \u00d7 (state " + m.num_value_heads + " heads \u00d7 " +
      m.key_dim + " \u00d7 " + m.value_dim + " + convolution window " + (m.conv_size - 1) +
      " \u00d7 " + grouped(2 * m.num_key_heads * m.key_dim + m.num_value_heads * m.value_dim) +
      " channels) = " + grouped(r.stateNumbers) + " numbers, at any context";
  }

  function setUp(body) {
    var config = JSON.parse(body.dataset.config || "{}");
    var models = config.models || [];
    var id = "instrument-" + body.dataset.instrument;
    var controls = core.element("div", "instrument-controls");
    var choice = document.createElement("select");
    models.forEach(function (m) {
      choice.add(new Option(m.name, m.name, false, m.name === config.model));
    });
    var model = core.field(id + "-model", "Model", choice);
    model.output.remove();
    var fields = core.memoryControls(id, config, 20);
    controls.append.apply(controls, [model.wrap].concat(fields.wraps));

    var caption = core.element("p", "instrument-caption");
    var list = core.element("ul", "instrument-models");
    var status = core.status();
    body.textContent = "";
    body.append(controls, caption, list, status);

    var state = window.attentionInstruments.hybrid_memory;
    function update() {
      var m = models.filter(function (x) { return x.name === choice.value; })[0] || models[0];
      var chosen = fields.read(), settings = chosen.settings;
      var T = settings.context;
      var r = compute(settings, m);
      Object.assign(state, r);
      state.runs += 1;
      caption.textContent = "What " + m.name + " holds after " + grouped(T) + " positions of " +
        chosen.sequences + ", " + (8 * settings.bytesPerNumber) + " bits a number; each bar " +
        "is in proportion to the largest.";
      var parts = [
        ["cache", "Attention layers' cache", r.attentionLayers + " of " + r.layers +
          " layers; grows with the context", cacheText(m.attention, r.attentionLayers) +
          (r.kept < T ? "; keeps the last " + grouped(r.kept) + " of " + grouped(T) : ""),
          r.cache],
        ["state", "Linear layers' state", r.linearLayers + " of " + r.layers +
          " layers; fixed", stateText(r, m), r.state],
        ["total", "Total", "cache + state", "what a sequence holds in this hybrid", r.total],
        ["all", "The same model, every layer attention", r.layers + " attention layers",
          cacheText(m.attention, r.layers), r.allAttention],
      ];
      var top = Math.max(r.total, r.allAttention);
      list.textContent = "";
      parts.forEach(function (p) {
        var item = core.memoryItem(p[1], p[2], p[3], p[4], top, COLOURS[p[0]]);
        item.dataset.part = p[0];
        list.append(item);
      });
      status.textContent = "At " + grouped(T) + " positions " + m.name + " holds " +
        readable(r.total) + ", " + readable(r.cache) + " of cache and " + readable(r.state) +
        " of state; with attention in all " + r.layers + " layers it would hold " +
        readable(r.allAttention) + ", " + times(r.ratio) + " times as much. " +
        (r.passes === null ? "Its cache never passes its state."
          : "Its cache passes its state at " + grouped(r.passes) + " positions.");
    }
    fields.onChange(update);
    choice.addEventListener("change", update);
    update();
  }

  window.attentionInstruments.hybrid_memory = { runs: 0, compute: compute };
  core.start("hybrid_memory", setUp);
  if (typeof module !== "undefined") module.exports = { compute: compute };
})();
