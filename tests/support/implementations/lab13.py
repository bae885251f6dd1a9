"""Lab 13's learner code, used as data: one step of the gated delta rule.

Written as a learner writes it: right steps written otherwise than the page's solution, and wrong
ones with one mistake of the check's catalogue each (check_gated_delta_step in
attention_lab.checks), with matrix products and ``unsqueeze`` where the check's own variants
broadcast, so that a test passes only if the check recognises a mistake by what the step does.
``RIGHT`` lists implementations, ``WRONG`` ``(check, implementation, mistake key)``.
test_checks_lab13.py and test_checks.py run them through the check.
"""

from __future__ import annotations

import math

import torch

from attention_lab import checks

check = checks.check_gated_delta_step


# ---------------------------------------------------------------------------------------------
# Right steps, written differently.


def step_with_einsum(query, key, value, beta, decay, state):
    decayed = state * decay.exp()[..., None, None]
    predicted = torch.einsum("bhkv,bhk->bhv", decayed, key)
    state = decayed + torch.einsum("bhk,bhv->bhkv", key, beta[..., None] * (value - predicted))
    return torch.einsum("bhkv,bhk->bhv", state, query) / math.sqrt(query.shape[-1]), state


def step_in_place(query, key, value, beta, decay, state):
    """The state forgotten and corrected in place, as a decoding loop that owns it may do."""
    state.mul_(torch.exp(decay).unsqueeze(-1).unsqueeze(-1))
    predicted = (key.unsqueeze(-2) @ state).squeeze(-2)  # k^T S
    error = (value - predicted) * beta.unsqueeze(-1)
    state.add_(key.unsqueeze(-1) @ error.unsqueeze(-2))
    scaled = query * query.shape[-1] ** -0.5  # the models' code scales the query
    return (scaled.unsqueeze(-2) @ state).squeeze(-2), state


def step_as_a_projection(query, key, value, beta, decay, state):
    """The docstring's other form: (I - beta k k^T) S' + beta k v^T."""
    key_dim = key.shape[-1]
    eye = torch.eye(key_dim, dtype=key.dtype)
    b = beta[..., None, None]
    outer = key.unsqueeze(-1) * key.unsqueeze(-2)  # k k^T: [B, H, Dk, Dk]
    decayed = torch.exp(decay)[..., None, None] * state
    state = (eye - b * outer) @ decayed + b * key.unsqueeze(-1) * value.unsqueeze(-2)
    return (state * query.unsqueeze(-1)).sum(dim=-2) / key_dim**0.5, state


RIGHT = [step_with_einsum, step_in_place, step_as_a_projection]


# ---------------------------------------------------------------------------------------------
# Wrong steps: one mistake each.


def step(
    query,
    key,
    value,
    beta,
    decay,
    state,
    *,
    forget="exp",
    forget_when="first",
    predict_from="decayed",
    use_beta=True,
    beta_on="error",
    predict=True,
    sign=1.0,
    scale="query",
    read="new",
    swap=None,
    orientation=None,
    gates="broadcast",
    returned="pair",
):
    if swap == "everywhere":
        query, key = key, query
    factor = {
        "exp": torch.exp(decay),
        "none": torch.ones_like(decay),
        "decay": decay,
        "exp_minus": torch.exp(-decay),
    }[forget]
    if gates != "decay_flat":
        factor = factor.unsqueeze(-1).unsqueeze(-1)
    decayed = state if forget_when == "after" else factor * state
    source = state if predict_from == "old" else decayed
    k = key / math.sqrt(key.shape[-1]) if scale == "both" else key
    if orientation == "prediction":
        predicted = (source @ k.unsqueeze(-1)).squeeze(-1)  # S' k
    else:
        predicted = (k.unsqueeze(-2) @ source).squeeze(-2)  # k^T S'
    error = value - predicted if predict else value
    if beta_on == "value":  # k (beta v - S'^T k)^T
        error, use_beta = beta.unsqueeze(-1) * value - predicted, False
    if sign < 0:
        error = predicted - value
    if use_beta:
        error = error * (beta if gates == "beta_flat" else beta.unsqueeze(-1))
    if orientation == "write":
        new = decayed + error.unsqueeze(-1) @ k.unsqueeze(-2)  # (v - S'^T k) k^T
    else:
        new = decayed + k.unsqueeze(-1) @ error.unsqueeze(-2)
    if forget_when == "after":
        new = factor * new
    seen = {"new": new, "decayed": decayed, "old": state}[read]
    reader = key if swap == "readout" else query
    if scale in ("query", "both"):
        reader = reader / math.sqrt(query.shape[-1])
    if orientation == "readout":
        output = (seen @ reader.unsqueeze(-1)).squeeze(-1)  # S q
    else:
        output = (reader.unsqueeze(-2) @ seen).squeeze(-2)  # q^T S
    if returned == "triple":
        return output, new, decayed
    if returned == "float32":
        return output.float(), new.float()
    return output, new


def named(**deviation):
    def wrong(query, key, value, beta, decay, state):
        return step(query, key, value, beta, decay, state, **deviation)

    wrong.__name__ = "step_with_" + "_".join(f"{k}_{v}" for k, v in deviation.items())
    wrong.__name__ = "".join(c if c.isalnum() else "_" for c in wrong.__name__)
    return wrong


def step_returning_the_output_only(query, key, value, beta, decay, state):
    return step(query, key, value, beta, decay, state)[0]


WRONG = [
    (check, named(forget="none"), "delta_decay_missing"),
    (check, named(forget_when="after"), "delta_decay_after_write"),
    (check, named(forget="decay"), "delta_decay_without_exp"),
    (check, named(forget="exp_minus"), "delta_decay_sign"),
    (check, named(predict_from="old"), "delta_prediction_undecayed"),
    (check, named(use_beta=False), "delta_beta_missing"),
    (check, named(beta_on="value"), "delta_beta_on_value"),
    (check, named(predict=False), "delta_no_prediction"),
    (check, named(predict=False, use_beta=False, forget="none"), "delta_no_prediction"),
    (check, named(sign=-1.0), "delta_correction_sign"),
    (check, named(scale="none"), "delta_no_scaling"),
    (check, named(scale="both"), "delta_key_scaled"),
    (check, named(read="decayed"), "delta_output_before_write"),
    (check, named(read="old"), "delta_output_before_write"),
    (check, named(swap="readout"), "delta_query_key_swapped"),
    (check, named(swap="everywhere"), "delta_query_key_swapped"),
    (check, named(orientation="prediction"), "delta_state_axes"),
    (check, named(orientation="write"), "delta_state_axes"),
    (check, named(orientation="readout"), "delta_state_axes"),
    (check, named(gates="beta_flat"), "delta_gates_not_broadcast"),
    (check, named(gates="decay_flat"), "delta_gates_not_broadcast"),
    (check, named(returned="triple"), "delta_step_not_a_pair"),
    (check, step_returning_the_output_only, "delta_step_not_a_pair"),
    (check, named(returned="float32"), "wrong_dtype"),
]
