"""Lab 12's learner code, used as data: one step of causal linear attention.

Written as a learner writes it: right steps written otherwise than the page's solution, and wrong
ones with one mistake of the check's catalogue each (check_linear_attention_step in
attention_lab.checks), with matrix products and ``unsqueeze`` where the check's own variants
broadcast, so that a test passes only if the check recognises a mistake by what the step does.
``RIGHT`` lists implementations, ``WRONG`` ``(check, implementation, mistake key)``.
test_checks_lab12.py and test_checks.py run them through the check.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab import checks

check = checks.check_linear_attention_step


def phi(x):
    return F.elu(x) + 1


# ---------------------------------------------------------------------------------------------
# Right steps, written differently.


def step_with_einsum(query, key, value, state, key_sum):
    phi_q, phi_k = phi(query), phi(key)
    state = state + torch.einsum("bhk,bhv->bhkv", phi_k, value)
    key_sum = key_sum + phi_k
    numerator = torch.einsum("bhk,bhkv->bhv", phi_q, state)
    denominator = torch.einsum("bhk,bhk->bh", phi_q, key_sum)
    return numerator / denominator[..., None], state, key_sum


def step_in_place(query, key, value, state, key_sum):
    """The state and the sum updated in place, as a decoding loop that owns them may do."""
    phi_q = torch.where(query > 0, query + 1, query.exp())  # elu + 1, written out
    phi_k = torch.where(key > 0, key + 1, key.exp())
    state.add_(phi_k.unsqueeze(-1) * value.unsqueeze(-2))
    key_sum.add_(phi_k)
    output = (phi_q.unsqueeze(-2) @ state).squeeze(-2)
    return output / (phi_q * key_sum).sum(-1, keepdim=True), state, key_sum


def step_with_a_column_of_ones(query, key, value, state, key_sum):
    """The library's trick: z is the state of a value that is always 1, one more column."""
    phi_q, phi_k = phi(query), phi(key)
    both = torch.cat([state, key_sum.unsqueeze(-1)], dim=-1)  # [B, H, Dk, Dv + 1]
    ones = torch.ones_like(value[..., :1])
    both = both + phi_k.unsqueeze(-1) * torch.cat([value, ones], dim=-1).unsqueeze(-2)
    read = (phi_q.unsqueeze(-1) * both).sum(dim=-2)  # [B, H, Dv + 1]
    return read[..., :-1] / read[..., -1:], both[..., :-1], both[..., -1]


RIGHT = [step_with_einsum, step_in_place, step_with_a_column_of_ones]


# ---------------------------------------------------------------------------------------------
# Wrong steps: one mistake each.


def step(
    query,
    key,
    value,
    state,
    key_sum,
    *,
    features="elu+1",
    mapped="qk",
    write="k v",
    read="after",
    normaliser="new",
    divide=True,
    readout="q S",
    keepdim=True,
    returned="updated",
):
    feature = {
        "elu+1": lambda x: F.elu(x) + 1.0,
        "relu": torch.relu,
        "exp": torch.exp,
        "elu": F.elu,
    }[features]
    phi_q = feature(query) if "q" in mapped else query
    phi_k = feature(key) if "k" in mapped else key
    v = feature(value) if "v" in mapped else value
    if write == "k v":
        new_state = state + phi_k.unsqueeze(-1) @ v.unsqueeze(-2)
    else:  # v k^T
        new_state = state + v.unsqueeze(-1) @ phi_k.unsqueeze(-2)
    new_sum = key_sum + phi_k
    seen = new_state if read == "after" else state
    if readout == "q S":
        numerator = (phi_q.unsqueeze(-2) @ seen).squeeze(-2)
    else:  # S q
        numerator = (seen @ phi_q.unsqueeze(-1)).squeeze(-1)
    sums = new_sum if normaliser == "new" else key_sum
    denominator = (phi_q * sums).sum(dim=-1, keepdim=keepdim)
    output = numerator / denominator if divide else numerator
    if returned == "received":
        return output, state, key_sum
    if returned == "nested":
        return output, (new_state, new_sum)
    if returned == "float32":
        return output.float(), new_state.float(), new_sum.float()
    return output, new_state, new_sum


def named(**deviation):
    def wrong(query, key, value, state, key_sum):
        return step(query, key, value, state, key_sum, **deviation)

    wrong.__name__ = "step_with_" + "_".join(f"{k}_{v}" for k, v in deviation.items())
    wrong.__name__ = "".join(c if c.isalnum() else "_" for c in wrong.__name__)
    return wrong


def step_kept_the_other_way_round(query, key, value, state, key_sum):
    """The state held as [B, H, Dv, Dk] throughout: written v phi(k)^T, read S phi(q). Right
    output where Dk = Dv, a state of the wrong orientation, and a crash where Dk != Dv."""
    phi_q, phi_k = phi(query), phi(key)
    state = state + value.unsqueeze(-1) * phi_k.unsqueeze(-2)
    key_sum = key_sum + phi_k
    output = (state @ phi_q.unsqueeze(-1)).squeeze(-1)
    return output / (phi_q * key_sum).sum(-1, keepdim=True), state, key_sum


def step_returning_the_output_only(query, key, value, state, key_sum):
    return step(query, key, value, state, key_sum)[0]


WRONG = [
    (check, named(mapped=""), "linear_phi_missing"),
    (check, named(mapped="k"), "linear_phi_missing"),
    (check, named(mapped="q"), "linear_phi_missing"),
    (check, named(mapped="qkv"), "linear_phi_on_value"),
    (check, named(divide=False), "linear_no_normaliser"),
    (check, named(normaliser="old"), "linear_normaliser_before_update"),
    (check, named(read="before", normaliser="old"), "linear_output_before_update"),
    (check, named(read="before"), "linear_output_before_update"),
    (check, named(write="v k"), "linear_state_transposed"),
    (check, step_kept_the_other_way_round, "linear_state_transposed"),
    (check, named(readout="S q"), "linear_readout_transposed"),
    (check, named(features="relu"), "linear_relu_features"),
    (check, named(features="exp"), "linear_exp_features"),
    (check, named(features="elu"), "linear_elu_without_one"),
    (check, named(returned="received"), "linear_state_not_returned"),
    (check, named(keepdim=False), "linear_normaliser_keepdim"),
    (check, named(returned="nested"), "linear_step_not_a_triple"),
    (check, step_returning_the_output_only, "linear_step_not_a_triple"),
    (check, named(returned="float32"), "wrong_dtype"),
]
