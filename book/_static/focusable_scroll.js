// A box that scrolls sideways (a wide table, a long equation on a phone: see custom.css) must be
// reachable from the keyboard, or its hidden part cannot be read without a mouse (WCAG 2.1.1).
// Each such box in the article that holds nothing focusable becomes a focus stop.
(function () {
  function mark() {
    var candidates = document.querySelectorAll(".bd-article table, .bd-article mjx-container, .bd-article pre");
    candidates.forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      var style = getComputedStyle(box);
      var canScroll = /auto|scroll/.test(style.overflowX + " " + style.overflowY);
      if (scrolls && canScroll && !box.hasAttribute("tabindex") && !box.querySelector("a, button, input, select, textarea, [tabindex]")) {
        box.setAttribute("tabindex", "0");
      }
    });
  }
  window.addEventListener("load", function () {
    mark();
    var mathjax = window.MathJax;
    if (mathjax && mathjax.startup && mathjax.startup.promise) mathjax.startup.promise.then(mark);
  });
})();
