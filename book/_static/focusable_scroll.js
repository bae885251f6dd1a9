// A box that scrolls sideways (a wide table, a long equation on a phone: see custom.css) must be
// reachable from the keyboard, or its hidden part cannot be read without a mouse (WCAG 2.1.1).
// Each such box in the article that holds nothing focusable becomes a focus stop.
//
// A table that scrolls sideways also says so: on a phone its last columns are out of sight, and
// nothing else shows that they exist. A line above the table says it scrolls, shown only while
// the table is wider than its box (a ResizeObserver follows each table's width: a phone turned
// sideways, a window made wider).
(function () {
  var HINT = "table-scroll-hint";
  var HINT_TEXT = "This table is wider than the screen: scroll it sideways for its other columns.";

  function scrollsSideways(box) {
    return box.scrollWidth > box.clientWidth + 1;
  }

  function mark() {
    var candidates = document.querySelectorAll(".bd-article table, .bd-article mjx-container, .bd-article pre");
    candidates.forEach(function (box) {
      var scrolls = scrollsSideways(box) || box.scrollHeight > box.clientHeight + 1;
      var style = getComputedStyle(box);
      var canScroll = /auto|scroll/.test(style.overflowX + " " + style.overflowY);
      if (scrolls && canScroll && !box.hasAttribute("tabindex") && !box.querySelector("a, button, input, select, textarea, [tabindex]")) {
        box.setAttribute("tabindex", "0");
      }
    });
  }

  function hint(table) {
    var line = table.previousElementSibling;
    if (!line || !line.classList.contains(HINT)) {
      line = document.createElement("p");
      line.className = HINT;
      // For the eye: a screen reader announces the table's columns itself.
      line.setAttribute("aria-hidden", "true");
      line.textContent = HINT_TEXT;
      table.before(line);
    }
    line.hidden = !scrollsSideways(table);
  }

  function follow() {
    var tables = document.querySelectorAll(".bd-article table");
    tables.forEach(hint);
    if (!window.ResizeObserver) return;
    var observer = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) { hint(entry.target); });
      mark();
    });
    tables.forEach(function (table) { observer.observe(table); });
  }

  window.addEventListener("load", function () {
    mark();
    follow();
    var mathjax = window.MathJax;
    if (mathjax && mathjax.startup && mathjax.startup.promise) {
      // Typeset math changes the tables' widths too.
      mathjax.startup.promise.then(function () {
        mark();
        document.querySelectorAll(".bd-article table").forEach(hint);
      });
    }
  });
})();
