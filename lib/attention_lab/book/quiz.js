(function () {
  function start() {
    var MathJax = window.MathJax && typeof window.MathJax.typeset === "function"
      ? window.MathJax : undefined;
/*QUIZ*/
    label(document.getElementById(/*ID*/));
  }
  // jupyterquiz's numeric field has a <label> that is not tied to it, and its feedback appears
  // silently: tie the label to the field, describe the field by its question, and make each
  // feedback a status message that screen readers announce when it changes.
  function readable(element) {
    var mj = window.MathJax, tex = new Map();
    if (mj && mj.startup && mj.startup.document && mj.startup.document.getMathItemsWithin) {
      mj.startup.document.getMathItemsWithin(element).forEach(function (item) {
        tex.set(item.typesetRoot, item.math);
      });
    }
    function text(node) {
      if (tex.has(node)) return tex.get(node);
      if (node.nodeType === 3) return node.textContent;
      if (node.nodeType !== 1 || node.tagName === "INPUT") return "";
      return Array.prototype.map.call(node.childNodes, text).join("");
    }
    return text(element).replace(/\s+/g, " ").trim();
  }
  function label(quiz) {
    if (!quiz) return;
    quiz.querySelectorAll(".Quiz").forEach(function (wrapper) {
      var question = wrapper.querySelector("[id^='quizQn']");
      var answers = wrapper.querySelector(".Answer");
      if (question && answers && answers.querySelector("input[type='radio']")) {
        answers.setAttribute("role", "radiogroup");
        answers.setAttribute("aria-labelledby", question.id);
      }
      // An answer that is all math ("$T^2$") has no text a screen reader can name the radio
      // button by once MathJax has drawn it: name it by its TeX source instead.
      wrapper.querySelectorAll("label.MCButton").forEach(function (choice) {
        var radio = choice.querySelector("input[type='radio']");
        if (radio && choice.querySelector("mjx-container")) {
          radio.setAttribute("aria-label", readable(choice));
        }
      });
      wrapper.querySelectorAll("input.Input-text").forEach(function (input) {
        var text = input.previousElementSibling;
        if (text && text.tagName === "LABEL") text.htmlFor = input.id;
        if (question) input.setAttribute("aria-describedby", question.id);
      });
      wrapper.querySelectorAll(".Feedback").forEach(function (feedback) {
        feedback.setAttribute("role", "status");
      });
    });
  }
  function whenTypesetterReady() {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(start);
    } else {
      start();
    }
  }
  if (document.readyState === "complete") {
    whenTypesetterReady();
  } else {
    window.addEventListener("load", whenTypesetterReady);
  }
})();
