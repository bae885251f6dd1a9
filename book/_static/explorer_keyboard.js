// Keyboard controls for the interactive explorers. plotly.js draws its buttons, dropdowns and
// sliders in SVG, which the keyboard cannot reach (Tab skips them). Under each explorer
// (a figure.explorer, see book/_ext/attention_book/interactive_figure.py) this adds one native
// <select> per plotly control, labelled with the control's own name, offering the same choices
// and applying them the same way (plotly's method and arguments), so the figure's controls and
// these stay in step.
(function () {
  "use strict";

  // The name plotly shows beside a control: the margin annotation level with it.
  function nameOf(gd, y, fallback) {
    var best = null;
    (gd.layout.annotations || []).forEach(function (a) {
      if (a.xanchor !== "right" || a.xref !== "paper" || a.yref !== "paper") return;
      var d = Math.abs(a.y - y);
      if (d < 0.12 && (!best || d < best.d)) best = { d: d, text: a.text };
    });
    return best ? best.text : fallback;
  }

  function fill(select, labels, active) {
    var same = select.options.length === labels.length &&
      labels.every(function (l, i) { return select.options[i].text === String(l); });
    if (!same) {
      select.textContent = "";
      labels.forEach(function (l) {
        var option = document.createElement("option");
        option.text = String(l);
        select.add(option);
      });
    }
    select.selectedIndex = active || 0;
  }

  function apply(gd, choice, key, index) {
    var update = {};
    update[key] = index;
    return window.Plotly[choice.method].apply(null, [gd].concat(choice.args)).then(function () {
      return window.Plotly.relayout(gd, update);
    });
  }

  function build(figure, gd) {
    var group = document.createElement("div");
    group.className = "explorer-keyboard";
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Controls of the explorer, for the keyboard");
    var controls = [];
    var add = function (kind, i, name) {
      var id = gd.id + "-" + kind + "-" + i;
      var label = document.createElement("label");
      label.htmlFor = id;
      label.textContent = name;
      var select = document.createElement("select");
      select.id = id;
      select.dataset.control = kind + " " + i;
      var field = document.createElement("span");
      field.className = "explorer-keyboard-field";
      field.append(label, select);
      group.append(field);
      controls.push({ kind: kind, i: i, select: select });
      return select;
    };
    (gd.layout.updatemenus || []).forEach(function (menu, i) {
      var select = add("menu", i, nameOf(gd, menu.y, "option " + (i + 1)));
      select.addEventListener("change", function () {
        var choice = gd.layout.updatemenus[i].buttons[select.selectedIndex];
        apply(gd, choice, "updatemenus[" + i + "].active", select.selectedIndex);
      });
    });
    (gd.layout.sliders || []).forEach(function (slider, i) {
      var select = add("slider", i, nameOf(gd, slider.y, "step"));
      select.addEventListener("change", function () {
        var step = gd.layout.sliders[i].steps[select.selectedIndex];
        apply(gd, step, "sliders[" + i + "].active", select.selectedIndex);
      });
    });
    if (!controls.length) return;
    var sync = function () {
      controls.forEach(function (c) {
        if (c.kind === "menu") {
          var menu = gd.layout.updatemenus[c.i];
          fill(c.select, menu.buttons.map(function (b) { return b.label; }), menu.active);
        } else {
          var slider = gd.layout.sliders[c.i];
          fill(c.select, slider.steps.map(function (s) { return s.label; }), slider.active);
        }
      });
    };
    sync();
    // Every way a plotly control changes the figure: a button or step whose method is
    // relayout, update or restyle (ch03's layer buttons, ch09's head slider), and the
    // controls' own events, which fire once their "active" is set.
    [
      "plotly_relayout", "plotly_update", "plotly_restyle", "plotly_buttonclicked",
      "plotly_sliderchange", "plotly_animated",
    ].forEach(function (event) { gd.on(event, sync); });
    figure.insertBefore(group, figure.querySelector("figcaption"));
  }

  function start() {
    document.querySelectorAll("figure.explorer").forEach(function (figure) {
      var gd = figure.querySelector(".plotly-graph-div");
      var tries = 0;
      (function wait() {
        if (gd && gd._fullLayout && gd.on && window.Plotly) {
          build(figure, gd);
        } else if (gd && tries++ < 300) {
          setTimeout(wait, 100);
        }
      })();
    });
  }

  if (document.readyState === "complete") {
    start();
  } else {
    window.addEventListener("load", start);
  }
})();
