"""``glue`` for a learner's notebook, which runs without the book's Sphinx stack.

The book's pages glue numbers into their prose with myst-nb's ``glue``. A learner's notebook has
those numbers filled in already (by ``make notebooks``), so there it only needs the call not to
fail: the converter turns a page's ``from myst_nb import glue`` into ``from
attention_lab.book.glue import glue``. Where myst-nb is installed (the author's environment),
this is myst-nb's own ``glue``; where it is not, a value glued with ``display=False`` is
dropped and any other is displayed, as myst-nb would display it.
"""

from __future__ import annotations

__all__ = ["glue"]


def glue(name: str, variable: object, display: bool = True) -> None:
    """Glue ``variable`` under ``name`` with myst-nb if it is installed, else show it or not.

    Args:
        name: The key the book's prose uses (``{glue:text}`name```).
        variable: The value, e.g. a number or a figure.
        display: Whether to also display the value in the notebook.
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(variable)
        return
    myst_glue(name, variable, display)
