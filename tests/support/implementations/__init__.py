"""Learner code used as data: implementations of the labs' functions, right and wrong, written
as learners write them, which the checks' tests (test_checks*.py) run through the checks.

``labNN.py`` holds lab NN's (``RIGHT``, ``WRONG`` and the lab's check); ``independent_labs.py``
those written blind, from the lab pages alone (``independent_labs_baseline.md``);
``blind_a.py``, ``blind_b.py`` and ``blind_c.py`` three more sets written blind, from the labs'
contracts alone, to tune the checks on and to measure them (``blind_sets_measured.md``, made
with ``measure.py``).
"""


def with_(fn, **deviation):
    """``fn`` with the keyword arguments ``deviation`` always passed: the wrong variant of a
    learner-style implementation whose keywords each introduce one mistake, named after them."""

    def wrong(*args, **kwargs):
        return fn(*args, **kwargs, **deviation)

    wrong.__name__ = f"{fn.__name__}_with_{'_'.join(deviation)}"
    return wrong
