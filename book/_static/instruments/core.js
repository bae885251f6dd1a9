// The instruments' shared arithmetic (book/_ext/attention_book/instruments.py links this file,
// then each instrument's own script, on the pages that hold one). Plain JavaScript, float64 throughout.
//
// Every random input comes from a seeded generator that tests/browser/test_browser_instruments.py
// reproduces in Python, so the page's numbers can be compared with attention_lab's:
// - mulberry32: a 32-bit state; each step adds 0x6D2B79F5 and mixes (uint32 out);
// - uniform(): (u + 0.5) / 2^32, in (0, 1), never 0;
// - normal(): Box-Muller on two uniforms u1, u2: r = sqrt(-2 ln u1), first r cos(2 pi u2), then
//   r sin(2 pi u2); one stream, used in the order the instrument draws.
(function () {
  "use strict";

  function generator(seed) {
    var a = seed >>> 0;
    var spare = null;
    function next() {
      a = (a + 0x6d2b79f5) | 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (t ^ (t >>> 14)) >>> 0;
    }
    function uniform() {
      return (next() + 0.5) / 4294967296;
    }
    function normal() {
      if (spare !== null) {
        var z = spare;
        spare = null;
        return z;
      }
      var r = Math.sqrt(-2 * Math.log(uniform()));
      var angle = 2 * Math.PI * uniform();
      spare = r * Math.sin(angle);
      return r * Math.cos(angle);
    }
    function normals(n) {
      var out = new Float64Array(n);
      for (var i = 0; i < n; i++) out[i] = normal();
      return out;
    }
    return { next: next, uniform: uniform, normal: normal, normals: normals };
  }

  // softmax of z / scale, the row's maximum subtracted first (as torch.softmax does).
  function softmax(z, scale) {
    var n = z.length, p = new Float64Array(n), max = -Infinity, sum = 0, i;
    for (i = 0; i < n; i++) max = Math.max(max, z[i] / scale);
    for (i = 0; i < n; i++) {
      p[i] = Math.exp(z[i] / scale - max);
      sum += p[i];
    }
    for (i = 0; i < n; i++) p[i] /= sum;
    return p;
  }

  // -sum p log p, with 0 log 0 = 0 (torch.special.xlogy), in nats.
  function entropy(p) {
    var h = 0;
    for (var i = 0; i < p.length; i++) if (p[i] > 0) h -= p[i] * Math.log(p[i]);
    return h;
  }

  // Frobenius norm of the softmax's Jacobian, J_ij = p_i (delta_ij - p_j).
  function jacobianNorm(p) {
    var s = 0;
    for (var i = 0; i < p.length; i++) {
      for (var j = 0; j < p.length; j++) {
        var v = p[i] * ((i === j ? 1 : 0) - p[j]);
        s += v * v;
      }
    }
    return Math.sqrt(s);
  }

  function max(p) {
    var m = -Infinity;
    for (var i = 0; i < p.length; i++) m = Math.max(m, p[i]);
    return m;
  }

  // Population standard deviation of z.
  function spread(z) {
    var mean = 0, v = 0, i;
    for (i = 0; i < z.length; i++) mean += z[i];
    mean /= z.length;
    for (i = 0; i < z.length; i++) v += (z[i] - mean) * (z[i] - mean);
    return Math.sqrt(v / z.length);
  }

  // A number for the reader: 3 decimals, or 3 significant digits in e-notation when tiny.
  function format(x) {
    if (x === 0) return "0";
    if (!isFinite(x)) return String(x);
    return Math.abs(x) >= 0.01 ? x.toFixed(3) : x.toExponential(2);
  }

  // 1234567 -> "1,234,567" (whole numbers).
  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  // Bytes in binary units with three significant digits: 1073741824 -> "1.00 GiB" (the memory
  // instruments, cache_memory.js and hybrid_memory.js).
  var UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  function readable(bytes) {
    var u = 0, v = bytes;
    while (v >= 1024 && u < UNITS.length - 1) {
      v /= 1024;
      u += 1;
    }
    if (u === 0) return grouped(bytes) + (bytes === 1 ? " byte" : " bytes");
    return v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + UNITS[u];
  }

  // The memory instruments' shared parts (cache_memory.js, hybrid_memory.js).
  // Numbers per position that `layers` attention layers of shape a keep (CacheShape's fields):
  // L * 2 * Hkv * Dh (a key and a value per kept head), or L * (R + Dr) for latent attention.
  function cacheNumbersPerToken(a, layers) {
    if (a.kv_lora_rank !== null) return layers * (a.kv_lora_rank + a.rope_dim);
    var kv = a.num_kv_heads === null ? a.num_heads : a.num_kv_heads;
    return layers * 2 * kv * a.head_dim;
  }

  var PRECISIONS = [[4, "32-bit (float32, 4 bytes)"], [2, "16-bit (bfloat16, 2 bytes)"],
    [1, "8-bit (1 byte)"]];

  // The context, batch and precision fields, powers of two up to 2^maxLogContext positions and
  // 2^8 sequences, starting from config's logContext, logBatch and bytesPerNumber. read() shows
  // the chosen values beside their sliders and returns { settings: { context, batchSize,
  // bytesPerNumber }, sequences: "1 sequence" or "4 sequences" }; onChange(update) calls update
  // on any change.
  function memoryControls(id, config, maxLogContext) {
    var context = field(id + "-context", "Context length =", range(8, maxLogContext, 1,
      config.logContext));
    var batch = field(id + "-batch", "Batch size =", range(0, 8, 1, config.logBatch));
    var select = document.createElement("select");
    PRECISIONS.forEach(function (p) {
      select.add(new Option(p[1], String(p[0]), false, p[0] === config.bytesPerNumber));
    });
    var precision = field(id + "-precision", "Precision", select);
    precision.output.remove();
    function read() {
      var T = Math.pow(2, Number(context.input.value));
      var B = Math.pow(2, Number(batch.input.value));
      context.output.value = grouped(T) + " positions";
      context.input.setAttribute("aria-valuetext", grouped(T) + " positions");
      batch.output.value = grouped(B) + (B === 1 ? " sequence" : " sequences");
      batch.input.setAttribute("aria-valuetext", batch.output.value);
      return { settings: { context: T, batchSize: B, bytesPerNumber: Number(select.value) },
        sequences: batch.output.value };
    }
    function onChange(update) {
      [context.input, batch.input].forEach(function (el) { el.addEventListener("input", update); });
      select.addEventListener("change", update);
    }
    return { wraps: [context.wrap, batch.wrap, precision.wrap], read: read, onChange: onChange };
  }

  // One row of a memory instrument's list: a bold name and what it is, how its size comes about,
  // a bar in proportion to `top` (hidden from screen readers: the size is written out) and the
  // size in binary units and in bytes.
  function memoryItem(name, what, shape, bytes, top, colour) {
    var item = element("li", "instrument-model");
    var title = element("p", "instrument-model-name");
    var strong = document.createElement("strong");
    strong.textContent = name;
    title.append(strong, ": " + what);
    var how = element("p", "instrument-model-shape");
    how.textContent = shape + ".";
    var bar = element("div", "instrument-bar");
    bar.setAttribute("aria-hidden", "true");
    var fill = document.createElement("span");
    fill.style.width = (top > 0 ? (100 * bytes) / top : 0) + "%";
    fill.style.background = colour;
    bar.append(fill);
    var size = element("p", "instrument-model-size");
    size.textContent = readable(bytes) + " (" + grouped(bytes) + " bytes)";
    item.append(title, how, bar, size);
    return item;
  }

  // WCAG 2 relative luminance of an sRGB colour [r, g, b] (0-255 each).
  function luminance(rgb) {
    var linear = rgb.map(function (c) {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
  }

  // The ink, black or white, that reads best on a cell painted rgb: the one of higher contrast,
  // which is at least 4.58:1 on any colour (WCAG AA asks 4.5:1). A cell's colour encodes its
  // number in both themes alike, so its ink depends on the cell, not on the theme.
  function inkOn(rgb) {
    var l = luminance(rgb);
    return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? "#000000" : "#ffffff";
  }

  var SVG = "http://www.w3.org/2000/svg";
  function svg(name, attributes) {
    var el = document.createElementNS(SVG, name);
    for (var k in attributes) el.setAttribute(k, attributes[k]);
    return el;
  }

  // A labelled control: <label for=id>text <output></label> and the input, in one field.
  function field(id, text, input) {
    var wrap = document.createElement("div");
    wrap.className = "instrument-field";
    var label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = text;
    var output = document.createElement("output");
    output.htmlFor = id;
    output.className = "instrument-value";
    input.id = id;
    label.append(" ", output);
    wrap.append(label, input);
    return { wrap: wrap, input: input, output: output };
  }

  function range(min, max, step, value) {
    var input = document.createElement("input");
    input.type = "range";
    input.min = String(min);
    input.max = String(max);
    input.step = String(step);
    input.value = String(value);
    return input;
  }

  // The seed field and its Resample button, for the instruments that draw random inputs.
  // Resample moves to the next seed (to 0 after an invalid one) and calls onChange.
  function seedField(id, seed, onChange) {
    var input = document.createElement("input");
    input.type = "number";
    input.min = "0";
    input.max = "4294967295";
    input.step = "1";
    input.value = String(seed);
    input.inputMode = "numeric";
    var wrapped = field(id, "Seed", input);
    wrapped.output.remove();
    var button = document.createElement("button");
    button.type = "button";
    button.className = "book-button instrument-button"; // book/_static/controls/button.css
    button.textContent = "Resample";
    wrapped.wrap.append(button);
    button.addEventListener("click", function () {
      var s = Number(input.value);
      input.value = String(Number.isInteger(s) && s >= 0 ? (s + 1) % 4294967296 : 0);
      onChange();
    });
    return { wrap: wrapped.wrap, input: input, button: button };
  }

  // A new element with the given class names.
  function element(tag, className) {
    var made = document.createElement(tag);
    made.className = className;
    return made;
  }

  // The status line under an instrument, which screen readers announce when it changes.
  function status() {
    var line = element("p", "instrument-status");
    line.setAttribute("role", "status");
    line.setAttribute("aria-live", "polite");
    return line;
  }

  // A grid table inside a focusable region that scrolls sideways on a narrow screen; the
  // table is named by the element with id captionId.
  function scrollingTable(label, captionId) {
    var scroller = element("div", "instrument-scroll");
    scroller.tabIndex = 0;
    scroller.setAttribute("role", "region");
    scroller.setAttribute("aria-label", label);
    var table = element("table", "instrument-table instrument-grid");
    table.setAttribute("aria-labelledby", captionId);
    scroller.append(table);
    return { scroller: scroller, table: table };
  }

  // Calls draw again whenever the element's width changes by a pixel or more (a phone turned,
  // the sidebar opened): the charts are drawn for the width they have.
  function redrawOnResize(element, draw) {
    if (!window.ResizeObserver) return;
    var shown = element.getBoundingClientRect().width;
    new ResizeObserver(function () {
      var width = element.getBoundingClientRect().width;
      if (Math.abs(width - shown) >= 1) {
        shown = width;
        draw();
      }
    }).observe(element);
  }

  // Sets up every instrument of this name on the page once the page is parsed.
  function start(name, setUp) {
    function run() {
      document.querySelectorAll('.instrument-body[data-instrument="' + name + '"]').forEach(setUp);
    }
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", run);
    } else {
      run();
    }
  }

  window.attentionInstruments = window.attentionInstruments || {};
  window.attentionInstruments.core = {
    generator: generator,
    softmax: softmax,
    entropy: entropy,
    jacobianNorm: jacobianNorm,
    max: max,
    spread: spread,
    format: format,
    grouped: grouped,
    readable: readable,
    cacheNumbersPerToken: cacheNumbersPerToken,
    memoryControls: memoryControls,
    memoryItem: memoryItem,
    luminance: luminance,
    inkOn: inkOn,
    svg: svg,
    field: field,
    seedField: seedField,
    element: element,
    status: status,
    scrollingTable: scrollingTable,
    start: start,
    redrawOnResize: redrawOnResize,
    range: range,
  };
})();
