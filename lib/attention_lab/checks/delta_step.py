"""Lab 13: the check of one step of the gated delta rule (Gated DeltaNet, Yang et al., 2025).

The learner writes the step the library's :func:`~attention_lab.linear.delta_rule` takes at
each position: forget, ``S' = exp(decay) S``; correct what the state predicts for the key toward
the value, ``S = S' + beta k (v - S'^T k)^T``; read, ``S^T q / sqrt(Dk)``. The state is
``[B, H, Dk, Dv]``, one row per key channel, as the library and the models' kernels hold it (the
paper writes its transpose). The check compares each step with ``delta_rule`` run over that one
position from the step's state; its last case feeds a sequence one position at a time, each step
receiving the state the step before returned.
"""

from __future__ import annotations

import functools

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch

from attention_lab.checks._core import (
    Case,
    call_quietly,
    check_callable,
    close,
    randn,
    register_mistakes,
    success,
    tolerance,
)
from attention_lab.checks._state_step import compare_step, fresh, probe_mistake
from attention_lab.linear import delta_rule

__all__ = ["check_gated_delta_step"]

MISTAKES = register_mistakes(
    {
        "delta_decay_missing": (
            "the state is not decayed: multiply it by exp(decay) first, S' = exp(decay) S "
            "(without the decay this is DeltaNet's rule, which never forgets)"
        ),
        "delta_decay_after_write": (
            "the decay comes after the write: forget first, S' = exp(decay) S, then predict "
            "from S' and write; decaying the written state forgets this position's correction "
            "too"
        ),
        "delta_decay_without_exp": (
            "the state is multiplied by decay itself: decay is the log of the forgetting "
            "factor (<= 0), so the factor is exp(decay), in (0, 1]; decay * S flips the "
            "state's sign"
        ),
        "delta_decay_sign": (
            "the factor is exp(-decay), above 1: decay is already the log of the forgetting "
            "factor, <= 0, so multiply the state by exp(decay)"
        ),
        "delta_prediction_undecayed": (
            "the prediction is read from the state before the decay: predict from the decayed "
            "state, S'^T k with S' = exp(decay) S, the state that the write corrects"
        ),
        "delta_beta_missing": (
            "beta is missing from the correction: the write is beta k (v - S'^T k)^T, with "
            "beta [B, H] the step's learning rate, broadcast as beta[..., None]"
        ),
        "delta_beta_on_value": (
            "beta scales the value alone: it is the learning rate of the whole correction, "
            "beta k (v - S'^T k)^T; k (beta v - S'^T k)^T still subtracts the full prediction "
            "when beta = 0, so the state changes when it should only forget"
        ),
        "delta_no_prediction": (
            "the write adds k v^T without subtracting the prediction (that is linear "
            "attention): the delta rule writes the error, beta k (v - S'^T k)^T, with S'^T k "
            "what the decayed state predicts for k"
        ),
        "delta_correction_sign": (
            "the correction has the wrong sign: the state moves toward the value, "
            "S' + beta k (v - S'^T k)^T, the value minus the prediction, added"
        ),
        "delta_no_scaling": (
            "the output is not scaled: the library reads S^T q / sqrt(Dk), as the models' code "
            "does by scaling the query by 1 / sqrt(Dk)"
        ),
        "delta_key_scaled": (
            "the key is scaled by 1 / sqrt(Dk) too: only the readout's query is scaled; the "
            "prediction and the write use the unit key as it is"
        ),
        "delta_output_before_write": (
            "the output reads the state before this position's write: forget and write "
            "first, then read the new state, S^T q / sqrt(Dk)"
        ),
        "delta_query_key_swapped": (
            "the query and the key are swapped: the key writes (the prediction S'^T k and the "
            "write k (v - S'^T k)^T) and the query reads, S^T q / sqrt(Dk)"
        ),
        "delta_state_axes": (
            "the state is used the wrong way round: it is [B, H, Dk, Dv], one row per key "
            "channel, so the prediction is S'^T k and the readout S^T q (sums over the Dk "
            "axis), and the write k (v - S'^T k)^T"
        ),
        "delta_gates_not_broadcast": (
            "beta or decay, [B, H], is used without trailing axes, so it broadcasts against the "
            "last axes: scale the state [B, H, Dk, Dv] by decay.exp()[..., None, None] and the "
            "error [B, H, Dv] by beta[..., None]"
        ),
        "delta_step_not_a_pair": (
            "a step returns two tensors, (output, state): the output [B, H, Dv] and the "
            "updated state [B, H, Dk, Dv]"
        ),
    }
)

# Each mistake as the deviations of one step from the right one (see _step_variant). A key may
# carry a suffix after a slash: several ways of making one mistake, named alike.
_DEVIATIONS: dict[str, dict[str, object]] = {
    "delta_decay_missing": {"factor": "one"},
    "delta_decay_after_write": {"decay_after": True},
    "delta_decay_without_exp": {"factor": "log"},
    "delta_decay_sign": {"factor": "exp_of_minus"},
    "delta_prediction_undecayed": {"predict_from": "old"},
    "delta_beta_missing": {"beta": False},
    "delta_beta_on_value": {"beta_on": "value"},
    "delta_no_prediction": {"predict": False},
    "delta_no_prediction/no_beta": {"predict": False, "beta": False},
    "delta_no_prediction/linear_attention": {"predict": False, "beta": False, "factor": "one"},
    "delta_correction_sign": {"sign": -1.0},
    "delta_no_scaling": {"scale": False},
    "delta_key_scaled": {"key_scaled": True},
    "delta_output_before_write": {"read_from": "decayed"},
    "delta_output_before_write/old": {"read_from": "old"},
    "delta_query_key_swapped": {"read_with": "key"},
    "delta_query_key_swapped/throughout": {"swap": True},
    "delta_state_axes/prediction": {"axes": "prediction"},
    "delta_state_axes/readout": {"axes": "readout"},
    "delta_state_axes/write": {"axes": "write"},
    "delta_gates_not_broadcast/beta": {"beta_axes": False},
    "delta_gates_not_broadcast/decay": {"decay_axes": False},
}


def _step_variant(query, key, value, beta, decay, state, mistake: str | None = None):
    """One step, in float64, with the deviations of ``mistake`` (none: the right step), written
    as a learner writes it, so that it crashes where the learner's code would."""
    deviation = _DEVIATIONS[mistake] if mistake else {}
    q, k, v, b, g, s = (x.double() for x in (query, key, value, beta, decay, state))
    if deviation.get("swap"):
        q, k = k, q
    factor = {"exp": g.exp(), "one": torch.ones_like(g), "log": g, "exp_of_minus": (-g).exp()}[
        deviation.get("factor", "exp")
    ]  # [B, H]
    if deviation.get("decay_axes", True):
        factor = factor[..., None, None]  # [B, H, 1, 1]
    decayed = s if deviation.get("decay_after") else factor * s  # S': [B, H, Dk, Dv]
    source = s if deviation.get("predict_from") == "old" else decayed
    write_key = k * k.shape[-1] ** -0.5 if deviation.get("key_scaled") else k  # [B, H, Dk]
    if deviation.get("axes") == "prediction":
        predicted = (source @ write_key[..., :, None])[..., 0]  # S' k: [B, H, Dk or Dv]
    else:
        predicted = (write_key[..., :, None] * source).sum(dim=-2)  # S'^T k: [B, H, Dv]
    error = v - predicted if deviation.get("predict", True) else v  # [B, H, Dv]
    rate = b[..., None] if deviation.get("beta_axes", True) else b  # [B, H, 1] or [B, H]
    rate = rate if deviation.get("beta", True) else 1.0
    if deviation.get("beta_on") == "value":
        error, rate = rate * v - predicted, 1.0  # k (beta v - S'^T k)^T
    correction = deviation.get("sign", 1.0) * rate * error  # [B, H, Dv]
    if deviation.get("axes") == "write":
        new = decayed + correction[..., :, None] * write_key[..., None, :]  # + [B, H, Dv, Dk]
    else:
        new = decayed + write_key[..., :, None] * correction[..., None, :]  # [B, H, Dk, Dv]
    if deviation.get("decay_after"):
        new = factor * new
    read = {"new": new, "decayed": decayed, "old": s}[deviation.get("read_from", "new")]
    reader = k if deviation.get("read_with") == "key" else q  # [B, H, Dk]
    scale = q.shape[-1] ** -0.5 if deviation.get("scale", True) else 1.0
    if deviation.get("axes") == "readout":
        output = (read @ reader[..., :, None])[..., 0] * scale  # S q: [B, H, Dk or Dv]
    else:
        output = (reader[..., :, None] * read).sum(dim=-2) * scale  # S^T q: [B, H, Dv]
    return output, new


def _expected(query, key, value, beta, decay, state):
    """The library's (output [B, H, Dv], state [B, H, Dk, Dv]) of one step, in float64:
    ``delta_rule`` over that one position, from ``state``."""
    q, k, v, b, g, s = (x.double() for x in (query, key, value, beta, decay, state))
    output, new_state = delta_rule(
        q[:, :, None],  # [B, H, 1, Dk]
        k[:, :, None],
        v[:, :, None],  # [B, H, 1, Dv]
        b[:, :, None],  # [B, H, 1]
        decay=g[:, :, None],
        initial_state=s,
        return_state=True,
    )
    return output[:, :, 0], new_state


def _sequence(g: torch.Generator, shape: tuple[int, ...], forgetting=(-1.0, 0.0)):
    """Queries and keys of unit length ``[B, H, T, Dk]``, values ``[B, H, T, Dv]``, beta in
    ``[0, 1)`` and decay in ``forgetting`` ``[B, H, T]``, all float64, for
    ``shape = (B, H, Dk, Dv, T)``."""
    batch, heads, key_dim, value_dim, length = shape
    query = randn(g, batch, heads, length, key_dim, dtype=torch.float64)
    key = randn(g, batch, heads, length, key_dim, dtype=torch.float64)
    query, key = (x / x.norm(dim=-1, keepdim=True) for x in (query, key))
    value = randn(g, batch, heads, length, value_dim, dtype=torch.float64)
    beta = torch.rand(batch, heads, length, generator=g, dtype=torch.float64)
    low, high = forgetting
    decay = low + (high - low) * torch.rand(batch, heads, length, generator=g, dtype=torch.float64)
    return query, key, value, beta, decay


def _history(g: torch.Generator, shape: tuple[int, ...], dtype=torch.float32, **kwargs):
    """One step's arguments (query, key, value, beta, decay, state) for ``shape = (B, H, Dk,
    Dv, T)``: a position after ``T`` others, whose state ``delta_rule`` gives, and the library's
    (output, state) for that step, in ``dtype``."""
    batch, heads, key_dim, value_dim, length = shape
    *inputs, beta, decay = _sequence(g, (batch, heads, key_dim, value_dim, length + 1), **kwargs)
    _, state = delta_rule(
        *(x[:, :, :length] for x in inputs),
        beta[:, :, :length],
        decay=decay[:, :, :length],
        return_state=True,
    )  # [B, H, Dk, Dv]
    args = (*(x[:, :, -1] for x in inputs), beta[:, :, -1], decay[:, :, -1], state)
    return tuple(x.to(dtype) for x in args), tuple(x.to(dtype) for x in _expected(*args))


# (B, H, Dk, Dv, earlier positions) of the probes a diagnosis runs: Dk != Dv, Dk = Dv (where a
# state used the wrong way round has the right shape), a zero state, H = Dv, every size equal.
_PROBES = ((2, 3, 4, 5, 3), (1, 2, 4, 4, 4), (2, 2, 3, 2, 0), (1, 3, 2, 3, 2), (3, 3, 3, 3, 2))


def _probe_mistake(fn: Callable) -> str | None:
    """The mistake whose behaviour ``fn`` shows on every probe, crashes included."""
    g = torch.Generator().manual_seed(130)
    probes = [_history(g, shape)[0] for shape in _PROBES]
    return probe_mistake(fn, probes, _step_variant, _DEVIATIONS)


def _step_cases() -> list[tuple[Case, tuple[torch.Tensor, ...]]]:
    """The single steps: each case with the library's (output, state)."""
    g = torch.Generator().manual_seed(13)

    def case(name, shape, dtype=torch.float32, **kwargs):
        args, expected = _history(g, shape, dtype, **kwargs)
        return Case(name, args), expected

    return [
        case("B=2, H=2, Dk=4, Dv=3, after 5 positions", (2, 2, 4, 3, 5)),
        case("Dk = Dv = 4, after 3 positions", (1, 2, 4, 4, 3)),
        case("the first position (a zero state), B=2, H=3, Dk=3, Dv=2", (2, 3, 3, 2, 0)),
        case(
            "one head, B=1, Dk=8, Dv=2, decay from -4 to -2, after 6 positions",
            (1, 1, 8, 2, 6),
            forgetting=(-4.0, -2.0),
        ),
        case("float64, B=2, H=2, Dk=4, Dv=5, after 4 positions", (2, 2, 4, 5, 4), torch.float64),
    ]


def _where(fn: Callable, case: Case, got, expected, tol) -> str:
    """Which result is wrong; for a wrong state, whether the forgetting alone is right (the
    step with beta = 0 only forgets)."""
    if close(got[1], expected[1], *tol):
        return (
            "the state is right, the output is not: read the new state, S^T q / sqrt(Dk), a "
            "sum over the Dk axis"
        )
    query, key, value, beta, decay, state = case.args
    args = (query, key, value, torch.zeros_like(beta), decay, state)
    forgot = call_quietly(fn, fresh(args))
    only_forgetting = _expected(*args)[1].to(state.dtype)
    if (
        isinstance(forgot, tuple | list)
        and len(forgot) == 2
        and close(forgot[1], only_forgetting, *tol)
    ):
        return (
            "with beta = 0 (the step only forgets) your state is right, so the forgetting "
            "is: look at the prediction S'^T k, the error v - S'^T k and the write "
            "beta k (...)^T"
        )
    # The same unit key, a zero value and a state with nothing along the key: the right step
    # then predicts 0 and writes 0 at any beta, and so does any write k (a v - b S'^T k)^T, so
    # what is left is the forgetting, exp(decay) S.
    along = (key[..., :, None] * state).sum(dim=-2)  # k^T S: [B, H, Dv]
    across = state - key[..., :, None] * along[..., None, :]  # [B, H, Dk, Dv], k^T across = 0
    args = (query, key, torch.zeros_like(value), torch.zeros_like(beta), decay, across)
    forgot = call_quietly(fn, fresh(args))
    if (
        isinstance(forgot, tuple | list)
        and len(forgot) == 2
        and close(forgot[1], _expected(*args)[1].to(state.dtype), *tol)
    ):
        return (
            "with beta = 0 the step only forgets, exp(decay) S, and your state differs there; "
            "with a zero value and a state that predicts 0 for the key it is right, so the "
            "forgetting is, but your step writes when beta = 0: beta multiplies the whole "
            "correction, beta k (v - S'^T k)^T"
        )
    return (
        "with beta = 0 the step only forgets, exp(decay) S, and your state differs there "
        "too: look at the decay first"
    )


def _compare_step(fn: Callable, case: Case, expected, mistake: Callable[[], str | None]):
    """Run ``fn`` on ``case`` and compare its two results with ``expected``; return them."""
    tol = tolerance(expected[0].dtype)
    return compare_step(
        fn, case, expected, ("output", "state"),
        not_a_tuple="delta_step_not_a_pair", state_transposed="delta_state_axes",
        variant=_step_variant, deviations=_DEVIATIONS, mistake=mistake,
        locate=lambda got: _where(fn, case, got, expected, tol),
    )  # fmt: skip


# The last case: a sequence fed one position at a time, (B, H, Dk, Dv, T).
_SEQUENCE = (2, 2, 3, 5, 7)


def _check_sequence(fn: Callable, mistake: Callable[[], str | None]) -> Case:
    """Feed a sequence to ``fn`` one position at a time from a zero state, each step the state
    the step before returned, and compare each step with ``delta_rule(..., qk_l2norm=False)``
    over the positions so far; return the case."""
    g = torch.Generator().manual_seed(131)
    batch, heads, key_dim, value_dim, length = _SEQUENCE
    inputs = _sequence(g, _SEQUENCE)
    outputs = delta_rule(*inputs[:4], decay=inputs[4], qk_l2norm=False)  # [B, H, T, Dv]
    name = f"a sequence of {length} positions fed one at a time, Dk={key_dim}, Dv={value_dim}"
    state = torch.zeros(batch, heads, key_dim, value_dim)  # [B, H, Dk, Dv]
    for t in range(length):
        step = Case(f"{name}, position t={t}", (*(x[:, :, t].float() for x in inputs), state))
        _, so_far = delta_rule(
            *(x[:, :, : t + 1] for x in inputs[:4]),
            decay=inputs[4][:, :, : t + 1],
            return_state=True,
        )
        expected = (outputs[:, :, t].float(), so_far.float())
        _, state = _compare_step(fn, step, expected, mistake)
    return Case(name, ())


def check_gated_delta_step(fn: Callable) -> None:
    """Check a learner's step of the gated delta rule (Lab 13),
    ``fn(query, key, value, beta, decay, state) -> (output, state)``.

    ``query`` and ``key`` are one position's ``[B, H, Dk]``, each of unit length, ``value``
    ``[B, H, Dv]``, ``beta`` ``[B, H]`` in ``[0, 1]`` (the learning rate), ``decay``
    ``[B, H]`` (the log of the forgetting factor, ``<= 0``) and ``state`` ``S``
    ``[B, H, Dk, Dv]``. The step forgets, ``S' = exp(decay) S``, corrects the decayed state's
    prediction for the key toward the value, ``S' + beta k (v - S'^T k)^T``, and returns the
    output ``S^T q / sqrt(Dk)`` ``[B, H, Dv]`` read from the new state, with the new state. Each
    step must equal the library's :func:`~attention_lab.linear.delta_rule` over that position
    from the same state (``decay`` per head, ``qk_l2norm=False``: the keys are given unit
    length). Cases: ``Dk != Dv``, ``Dk = Dv`` (where a state used the wrong way round has the
    right shape), the first position (a zero state), one head with strong forgetting,
    ``float64``, and a sequence of 7 positions fed one at a time, each step receiving the state
    the step before returned.

    Mistakes it names: ``delta_decay_missing``, ``delta_decay_after_write``,
    ``delta_decay_without_exp``, ``delta_decay_sign``, ``delta_prediction_undecayed``,
    ``delta_beta_missing``, ``delta_beta_on_value``, ``delta_no_prediction``,
    ``delta_correction_sign``, ``delta_no_scaling``, ``delta_key_scaled``,
    ``delta_output_before_write``, ``delta_query_key_swapped``, ``delta_state_axes``,
    ``delta_gates_not_broadcast``, ``delta_step_not_a_pair``, ``wrong_dtype`` (see
    :data:`MISTAKES`). The mistake is read from what the step does on a
    battery of probes (crashes included); when none fits, the message says whether the output
    or the state is wrong, and for a wrong state whether the step is right when it only forgets
    (``beta = 0``), and if not, whether it still writes then (probed with a zero value and a
    state that predicts 0 for the key, where any write of the error vanishes).

    Args:
        fn: The learner's step function.

    Raises:
        TypeError: If ``fn`` is not callable.
        AssertionError: On the first case where ``fn`` differs from the library, naming the
            case and the likely mistake, or where the result goes wrong (or saying that ``fn``
            is still the stub).
    """
    check_callable(fn)
    mistake = functools.cache(lambda: _probe_mistake(fn))
    steps = _step_cases()
    for case, expected in steps:
        _compare_step(fn, case, expected, mistake)
    success(fn, [*(case for case, _ in steps), _check_sequence(fn, mistake)])
