"""What the checks of labs 12 and 13 share: a step that takes a state and returns the next one.

Both labs' learners write one step of a recurrence (:mod:`~attention_lab.checks.linear_step`,
:mod:`~attention_lab.checks.delta_step`): it takes one position's inputs and the state of the
positions before it and returns a tuple whose first entry is the output and whose second is the
new state ``[B, H, Dk, Dv]``. The two checks differ in the step and its mistakes; how a call is
made, how its mistake is read from probes and how a tuple of results is compared are the same,
and live here.
"""

from __future__ import annotations

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    Result,
    call_quietly,
    compare,
    fail,
    name_of,
    run,
    same_behaviour,
    tolerance,
)


def fresh(args: tuple) -> tuple:
    """Copies of a call's tensors: a step that updates its state in place (right) must not
    change the check's."""
    return tuple(x.clone() for x in args)


def probe_mistake(
    fn: Callable, probes: list[tuple], variant: Callable, deviations: dict
) -> str | None:
    """The mistake whose behaviour ``fn`` shows on every probe (a call's arguments), crashes
    included: the first key of ``deviations`` (``name`` or ``name/form``) for which
    ``variant(*args, key)`` behaves as ``fn`` does, against the right ``variant(*args)``."""
    got = [call_quietly(fn, fresh(args)) for args in probes]
    right = [variant(*args) for args in probes]
    for key in deviations:
        expected = [lambda args=args, key=key: variant(*args, key) for args in probes]
        if same_behaviour(got, expected, right):
            return key.partition("/")[0]
    return None


def compare_step(
    fn: Callable,
    case: Case,
    expected: tuple[torch.Tensor, ...],
    names: tuple[str, ...],
    *,
    not_a_tuple: str,
    state_transposed: str,
    variant: Callable,
    deviations: dict,
    mistake: Callable[[], str | None],
    locate: Callable,
) -> tuple:
    """Run ``fn`` on a copy of ``case``'s arguments (query, key, value, ...) and compare its
    results, named ``names`` (the state second), with ``expected``; return them.

    A result that is not a tuple of ``len(names)`` tensors fails with ``not_a_tuple``; a state
    of shape ``[B, H, Dv, Dk]`` with ``state_transposed``; any other mismatch with the
    deviation ``variant(*case.args, key)`` it equals, else ``mistake()`` (the probes' verdict),
    else where ``locate(got)`` says the results go wrong."""
    fn_name = name_of(fn)
    result = run(fn, Case(case.name, fresh(case.args)), lambda error: mistake())
    if not (
        isinstance(result, tuple | list)
        and len(result) == len(names)
        and all(isinstance(r, torch.Tensor) for r in result)
    ):
        what = type(result).__name__
        what = f"a {what} of {len(result)}" if isinstance(result, tuple | list) else what
        fail(fn_name, case, f"it returned {what}", not_a_tuple)
    batch, heads, key_dim = case.args[1].shape
    value_dim = case.args[2].shape[-1]

    def shape_mistake(name: str, shapes) -> str | None:
        if name == "state" and tuple(shapes[1]) == (batch, heads, value_dim, key_dim):
            return state_transposed
        return mistake()

    compare(
        fn_name,
        case,
        [Result(n, r, e) for n, r, e in zip(names, result, expected, strict=True)],
        tolerance(expected[0].dtype),
        variants={key: lambda key=key, args=case.args: variant(*args, key) for key in deviations},
        shape_mistake=shape_mistake,
        nonfinite=lambda name, bad: ("NaN or inf", mistake()),
        fallback=lambda got: mistake(),
        locate=locate,
    )
    return tuple(result)
