"""Lab 12: the check of one step of causal linear attention, written as a recurrence.

The learner writes the step of Katharopoulos et al. (2020, section 3.4): from the state of the
positions so far, ``S`` ``[B, H, Dk, Dv]`` and the key sum ``z`` ``[B, H, Dk]``, and one
position's query, key and value, the position's output ``phi(q)^T S / phi(q) . z`` and the
updated ``S`` and ``z``, with ``phi = elu + 1``. The check gives the step states made from a
history of earlier positions and compares its output with the library's
:func:`~attention_lab.linear.linear_attention` over the whole history; its last case feeds a
sequence one position at a time, each step receiving the state the step before returned.
"""

from __future__ import annotations

import functools

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab.checks._core import (
    Case,
    check_callable,
    close,
    randn,
    register_mistakes,
    success,
    tolerance,
)
from attention_lab.checks._state_step import compare_step, probe_mistake
from attention_lab.linear import FEATURE_MAPS, linear_attention

__all__ = ["check_linear_attention_step"]

MISTAKES = register_mistakes(
    {
        "linear_phi_missing": (
            "the feature map is missing: apply phi(x) = elu(x) + 1 to the query and to the key "
            "(both) before they touch the state, F.elu(x) + 1"
        ),
        "linear_phi_on_value": (
            "the feature map is applied to the value too: phi = elu + 1 maps the query and the "
            "key only; the state adds phi(k) v^T with the value as it is"
        ),
        "linear_no_normaliser": (
            "the output is not divided by the normaliser: return phi(q)^T S / phi(q) . z, "
            "with z the running sum of phi(k), as the softmax divides by its sum"
        ),
        "linear_normaliser_before_update": (
            "the normaliser uses the key sum from before this position: add phi(k) to z "
            "first, then divide by phi(q) . z (at the first position the old z is 0)"
        ),
        "linear_output_before_update": (
            "the output reads the state from before this position: update S and z with this "
            "position's key and value first, then read phi(q)^T S / phi(q) . z (a query sees "
            "its own key, as in causal attention)"
        ),
        "linear_state_transposed": (
            "the state is written the wrong way round, v phi(k)^T: it is [B, H, Dk, Dv], one "
            "row per key feature, so add phi(k) v^T, phi_k[..., :, None] * value[..., None, :]"
        ),
        "linear_readout_transposed": (
            "the state is read the wrong way round, S phi(q): the state is [B, H, Dk, Dv], so "
            "the query's features meet its rows, phi(q)^T S, a sum over the Dk axis"
        ),
        "linear_relu_features": (
            "the feature map is relu: this lab's is elu(x) + 1, positive everywhere, so the "
            "normaliser phi(q) . z is never 0 (relu gives 0 for every negative entry)"
        ),
        "linear_exp_features": (
            "the feature map is exp: this lab's is elu(x) + 1, F.elu(x) + 1, which equals "
            "x + 1 for x > 0 and exp(x) below"
        ),
        "linear_elu_without_one": (
            "the feature map is elu without the + 1: elu(x) is negative for x < 0, and the "
            "normaliser can then be 0 or change sign; phi(x) = F.elu(x) + 1 is positive"
        ),
        "linear_state_not_returned": (
            "the state and key sum returned are the ones received: return the updated S and z, "
            "so that the next position sees this one"
        ),
        "linear_normaliser_keepdim": (
            "the normaliser lost its last axis: phi(q) . z summed without keepdim is [B, H], "
            "which broadcasts against the wrong axes of the [B, H, Dv] numerator; use "
            "sum(dim=-1, keepdim=True)"
        ),
        "linear_step_not_a_triple": (
            "a step returns three tensors, (output, state, key_sum): the output [B, H, Dv], "
            "the updated state [B, H, Dk, Dv] and key sum [B, H, Dk]"
        ),
    }
)

_PHI = {
    "elu+1": FEATURE_MAPS["elu+1"],
    "none": lambda x: x,
    "relu": F.relu,
    "exp": torch.exp,
    "elu": F.elu,
}

# Each mistake as the deviations of one step from the right one (see _step_variant). A key may
# carry a suffix after a slash: several ways of making one mistake, named alike.
_DEVIATIONS: dict[str, dict[str, object]] = {
    "linear_phi_missing": {"phi_q": "none", "phi_k": "none"},
    "linear_phi_missing/query": {"phi_q": "none"},
    "linear_phi_missing/key": {"phi_k": "none"},
    "linear_phi_on_value": {"phi_v": "elu+1"},
    "linear_no_normaliser": {"normalise": False},
    "linear_normaliser_before_update": {"denominator": "old"},
    "linear_output_before_update": {"numerator": "old", "denominator": "old"},
    "linear_output_before_update/numerator": {"numerator": "old"},
    "linear_state_transposed": {"write": "transposed"},
    # Written and read the other way round: the output is right, the state transposed.
    "linear_state_transposed/consistent": {"write": "transposed", "readout": "transposed"},
    "linear_readout_transposed": {"readout": "transposed"},
    "linear_relu_features": {"phi_q": "relu", "phi_k": "relu"},
    "linear_exp_features": {"phi_q": "exp", "phi_k": "exp"},
    "linear_elu_without_one": {"phi_q": "elu", "phi_k": "elu"},
    "linear_state_not_returned": {"returned": "received"},
    "linear_normaliser_keepdim": {"keepdim": False},
}


def _step_variant(query, key, value, state, key_sum, mistake: str | None = None):
    """One step, in float64, with the deviations of ``mistake`` (none: the right step), written
    as a learner writes it, so that it crashes where the learner's code would."""
    deviation = _DEVIATIONS[mistake] if mistake else {}
    q, k, v, s, z = (x.double() for x in (query, key, value, state, key_sum))
    phi_q = _PHI[deviation.get("phi_q", "elu+1")](q)  # [B, H, Dk]
    phi_k = _PHI[deviation.get("phi_k", "elu+1")](k)  # [B, H, Dk]
    v = _PHI[deviation.get("phi_v", "none")](v)  # [B, H, Dv]
    if deviation.get("write") == "transposed":
        new_state = s + v[..., :, None] * phi_k[..., None, :]  # [B, H, Dv, Dk] + [B, H, Dk, Dv]
    else:
        new_state = s + phi_k[..., :, None] * v[..., None, :]  # [B, H, Dk, Dv]
    new_sum = z + phi_k  # [B, H, Dk]
    read = s if deviation.get("numerator") == "old" else new_state
    if deviation.get("readout") == "transposed":
        numerator = (read @ phi_q[..., :, None])[..., 0]  # S phi(q): [B, H, Dk or Dv]
    else:
        numerator = (phi_q[..., None, :] @ read)[..., 0, :]  # phi(q)^T S: [B, H, Dv]
    sums = z if deviation.get("denominator") == "old" else new_sum
    denominator = (phi_q * sums).sum(dim=-1, keepdim=deviation.get("keepdim", True))
    output = numerator / denominator if deviation.get("normalise", True) else numerator
    if deviation.get("returned") == "received":
        return output, s, z
    return output, new_state, new_sum


def _state_of(key: torch.Tensor, value: torch.Tensor):
    """S = sum_j phi(k_j) v_j^T ``[B, H, Dk, Dv]`` and z = sum_j phi(k_j) ``[B, H, Dk]`` of
    the positions of ``key`` ``[B, H, T, Dk]`` and ``value`` ``[B, H, T, Dv]``."""
    phi_k = FEATURE_MAPS["elu+1"](key)  # [B, H, T, Dk]
    return phi_k.transpose(-2, -1) @ value, phi_k.sum(dim=2)


def _history(g: torch.Generator, shape: tuple[int, ...], dtype=torch.float32):
    """A sequence of ``T + 1`` positions for ``shape = (B, H, Dk, Dv, T)``: the step's
    arguments (the last position's query, key and value, and the state of the ``T`` before it)
    and the library's results for that position (output, state, key sum), in ``dtype``."""
    batch, heads, key_dim, value_dim, length = shape
    query = randn(g, batch, heads, length + 1, key_dim, dtype=torch.float64)
    key = randn(g, batch, heads, length + 1, key_dim, dtype=torch.float64)
    value = randn(g, batch, heads, length + 1, value_dim, dtype=torch.float64)
    state, key_sum = _state_of(key[:, :, :length], value[:, :, :length])
    args = (query[:, :, -1], key[:, :, -1], value[:, :, -1], state, key_sum)
    output = linear_attention(query, key, value, form="parallel")[:, :, -1]  # [B, H, Dv]
    expected = (output, *_state_of(key, value))
    return tuple(x.to(dtype) for x in args), tuple(x.to(dtype) for x in expected)


# (B, H, Dk, Dv, earlier positions) of the probes a diagnosis runs: Dk != Dv, Dk = Dv (where a
# transposed state has the right shape), a zero state (where an old normaliser is 0), H = Dv
# (where a normaliser without keepdim broadcasts), and every size equal.
_PROBES = ((2, 3, 4, 5, 3), (1, 2, 4, 4, 4), (2, 2, 3, 2, 0), (1, 3, 2, 3, 2), (3, 3, 3, 3, 2))


def _probe_mistake(fn: Callable) -> str | None:
    """The mistake whose behaviour ``fn`` shows on every probe, crashes included."""
    g = torch.Generator().manual_seed(120)
    probes = [_history(g, shape)[0] for shape in _PROBES]
    return probe_mistake(fn, probes, _step_variant, _DEVIATIONS)


def _step_cases() -> list[tuple[Case, tuple[torch.Tensor, ...]]]:
    """The single steps: each case with the library's (output, state, key sum)."""
    g = torch.Generator().manual_seed(12)

    def case(name, shape, dtype=torch.float32):
        args, expected = _history(g, shape, dtype)
        return Case(name, args), expected

    return [
        case("B=2, H=2, Dk=4, Dv=3, after 5 positions", (2, 2, 4, 3, 5)),
        case("Dk = Dv = 4, after 3 positions", (1, 2, 4, 4, 3)),
        case("the first position (S and z zeros), B=2, H=3, Dk=3, Dv=2", (2, 3, 3, 2, 0)),
        case("one head, B=1, Dk=8, Dv=2, after 9 positions", (1, 1, 8, 2, 9)),
        case("float64, B=2, H=2, Dk=4, Dv=4, after 4 positions", (2, 2, 4, 4, 4), torch.float64),
    ]


def _where(got, expected, tol) -> str:
    """Which of the three results are right, and where to look for the first wrong one."""
    names = ("output", "state", "key sum")
    right = [close(g, e, *tol) for g, e in zip(got, expected, strict=True)]
    if right[1] and right[2]:
        return (
            "the state and the key sum are right, the output is not: look at the readout, "
            "phi(q)^T S / phi(q) . z with this position's S and z"
        )
    wrong = [name for name, ok in zip(names, right, strict=True) if not ok]
    advice = "the key sum is z + phi(k)" if not right[2] else "the state is S + phi(k) v^T"
    verb = "differs" if len(wrong) == 1 else "differ"
    return f"the {' and the '.join(wrong)} {verb}: {advice}, with phi(x) = elu(x) + 1"


def _compare_step(fn: Callable, case: Case, expected, mistake: Callable[[], str | None]):
    """Run ``fn`` on ``case`` and compare its three results with ``expected``; return them."""
    tol = tolerance(expected[0].dtype)
    return compare_step(
        fn, case, expected, ("output", "state", "key sum"),
        not_a_tuple="linear_step_not_a_triple", state_transposed="linear_state_transposed",
        variant=_step_variant, deviations=_DEVIATIONS, mistake=mistake,
        locate=lambda got: _where(got, expected, tol),
    )  # fmt: skip


# The last case: a sequence fed one position at a time. [B, H, T, Dk] and Dv.
_SEQUENCE = ((2, 2, 7, 3), 5)


def _check_sequence(fn: Callable, mistake: Callable[[], str | None]) -> Case:
    """Feed a sequence to ``fn`` one position at a time from zeros, each step the state the step
    before returned, and compare each step with ``linear_attention(..., form="parallel")`` at
    that position; return the case."""
    g = torch.Generator().manual_seed(13)
    shape, value_dim = _SEQUENCE
    query, key = randn(g, *shape, dtype=torch.float64), randn(g, *shape, dtype=torch.float64)
    value = randn(g, *shape[:3], value_dim, dtype=torch.float64)  # [B, H, T, Dv]
    batch, heads, length, key_dim = shape
    outputs = linear_attention(query, key, value, form="parallel")  # [B, H, T, Dv]
    name = f"a sequence of {length} positions fed one at a time, Dk={key_dim}, Dv={value_dim}"
    state = torch.zeros(batch, heads, key_dim, value_dim)  # [B, H, Dk, Dv]
    key_sum = torch.zeros(batch, heads, key_dim)  # [B, H, Dk]
    for t in range(length):
        inputs = (x[:, :, t].float() for x in (query, key, value))
        step = Case(f"{name}, position t={t}", (*inputs, state, key_sum))
        expected = (outputs[:, :, t], *_state_of(key[:, :, : t + 1], value[:, :, : t + 1]))
        _, state, key_sum = _compare_step(fn, step, tuple(x.float() for x in expected), mistake)
    return Case(name, ())


def check_linear_attention_step(fn: Callable) -> None:
    """Check a learner's step of causal linear attention (Lab 12),
    ``fn(query, key, value, state, key_sum) -> (output, state, key_sum)``.

    ``query`` and ``key`` are one position's ``[B, H, Dk]``, ``value`` ``[B, H, Dv]``;
    ``state`` ``S`` ``[B, H, Dk, Dv]`` and ``key_sum`` ``z`` ``[B, H, Dk]`` are the sums over the
    positions before it, ``sum_j phi(k_j) v_j^T`` and ``sum_j phi(k_j)``, with Katharopoulos et
    al.'s ``phi(x) = elu(x) + 1``. The step adds the position, ``S + phi(k) v^T`` and
    ``z + phi(k)``, and returns the output ``phi(q)^T S / phi(q) . z`` ``[B, H, Dv]`` read from
    the updated state, with the updated ``S`` and ``z``. The output must equal that of the
    library's :func:`~attention_lab.linear.linear_attention` (``form="parallel"``, causal) at
    the last position of the history the state was made from. Cases: ``Dk != Dv``,
    ``Dk = Dv`` (where a transposed state has the right shape), the first position (a zero
    state), one head with a long history, ``float64``, and a sequence of 7 positions fed one at
    a time, each step receiving the state the step before returned.

    Mistakes it names: ``linear_phi_missing``, ``linear_phi_on_value``,
    ``linear_no_normaliser``, ``linear_normaliser_before_update``,
    ``linear_output_before_update``, ``linear_state_transposed``,
    ``linear_readout_transposed``, ``linear_relu_features``, ``linear_exp_features``,
    ``linear_elu_without_one``, ``linear_state_not_returned``, ``linear_normaliser_keepdim``,
    ``linear_step_not_a_triple``, ``wrong_dtype`` (see :data:`MISTAKES`). The mistake is read
    from what the step does on a battery of probes (crashes included); when none fits, the
    message says which of the output, the state and the key sum are wrong.

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
