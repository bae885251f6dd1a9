"""Book support: what the pages and the learners' notebooks call besides the attention library.

Nothing here computes attention; nothing in the attention library needs it. It ships in the same
wheel because the learners' notebooks call it.

- ``attention_lab.book.quiz``: self-grading quizzes that work in the static HTML (built on
  ``jupyterquiz``; its style and script are the package files ``quiz.css`` and ``quiz.js``).
- ``attention_lab.book.display``: the notebook's PNG formatter that sends every matplotlib
  figure as a 256-colour PNG (``use_palette_png``).
- ``attention_lab.book.explorers``: an interactive figure as the book's HTML fragment and as
  plotly JSON for JupyterLab (``show``, ``to_html``).

The modules import no other part of ``attention_lab``, and this package imports none of them:
``import attention_lab.book.explorers`` loads plotly, not matplotlib.
"""
