// Printing a page (with custom.css's print stylesheet). Just before the browser lays the page
// out for print (the beforeprint event, which Chromium's "Save as PDF" also fires):
// - a page shown in the dark theme is printed in the light one, the theme's own colours for
//   white paper, and switched back afterwards;
// - each quiz gets its answers after its last question: on paper there is nothing to click, so
//   the questions print with their choices, and the answers follow them (removed afterwards);
// - the text descriptions of the explorers and instruments are unfolded, since their controls do
//   nothing on paper, and folded again afterwards.
(function () {
  "use strict";

  var restore = [];

  // The correct answers of one jupyterquiz question (.Quiz), as nodes to append: the chosen
  // choices of a multiple-choice question, or the accepted values of a numeric one.
  function answersOf(question) {
    var out = [];
    question.querySelectorAll('.MCButton[data-correct="true"]').forEach(function (button) {
      var text = button.querySelector("span") || button;
      out.push(Array.from(text.childNodes, function (n) { return n.cloneNode(true); }));
    });
    var input = question.querySelector(".Input-text[data-answers]");
    if (input) {
      JSON.parse(input.dataset.answers).forEach(function (a) {
        if (!a.correct) return;
        var text = a.type === "range" ? a.range[0] + " to " + a.range[1] : String(a.value);
        if (a.type === "range" || "value" in a) out.push([document.createTextNode(text)]);
      });
    }
    return out;
  }

  function answerKey(quiz) {
    var key = document.createElement("div");
    key.className = "quiz-print-answers";
    var title = document.createElement("p");
    title.className = "quiz-print-title";
    title.textContent = "Answers to the quiz";
    var list = document.createElement("ol");
    quiz.querySelectorAll(".Quiz").forEach(function (question) {
      var item = document.createElement("li");
      answersOf(question).forEach(function (nodes, i) {
        if (i > 0) item.append(" or ");
        item.append.apply(item, nodes);
      });
      list.append(item);
    });
    key.append(title, list);
    return key;
  }

  window.addEventListener("beforeprint", function () {
    var root = document.documentElement;
    if (root.dataset.theme === "dark") {
      root.dataset.theme = "light";
      restore.push(function () { root.dataset.theme = "dark"; });
    }
    document.querySelectorAll('[id^="quiz_"]').forEach(function (quiz) {
      if (!quiz.querySelector(".Quiz")) return;
      var key = answerKey(quiz);
      quiz.after(key);
      restore.push(function () { key.remove(); });
    });
    document.querySelectorAll("details.explorer-text:not([open])").forEach(function (details) {
      details.open = true;
      restore.push(function () { details.open = false; });
    });
  });

  window.addEventListener("afterprint", function () {
    while (restore.length) restore.pop()();
  });
})();
