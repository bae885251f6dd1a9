"""The book's own Sphinx extensions, one module per job; ``_config.yml`` loads each by name.

=======================  ========================================================================
module                   what it does
=======================  ========================================================================
``offline_assets``       MathJax, plotly.js and the icon font copied from pinned packages into
                         the built book (no CDN)
``reading_time``         a chapter's reading time, from the words of its teaching path
``accessibility``        markup fixes: folded code cells' names, the bibliography's list items
``interactive_figure``   the ``InteractiveFigure`` node: explorers and instruments captioned,
                         described and numbered with the figures, from ``book/explorers.yml``
``instruments``          the ``{instrument}`` directive and its browser code
``live_attention``       chapter 09's live box: the ONNX export, the ``{live-attention}`` directive
``notebook_converter``   page -> learner's notebook (MyST to plain markdown, labs to workbooks);
                         ``python -m attention_book.notebook_converter DIR`` (``make notebooks``)
``notebook_downloads``   the site's ``_notebooks/``: the notebooks, the library's wheel, one zip
``learner_notebooks``    the build-time hook: the index of numbers, the downloads, the menu entry
``parallel_execution``   pages executed two at a time into myst-nb's cache before Sphinx reads
                         them (those whose prose reports timings alone)
=======================  ========================================================================

Imports run one way (an arrow: "imports"), and only public names cross modules::

    instruments        -> interactive_figure, offline_assets
    live_attention     -> offline_assets
    learner_notebooks  -> notebook_downloads, notebook_converter
    notebook_downloads -> notebook_converter

The rest import nothing of the package but :data:`ROOT`.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository, which is the book's root
