"""Attention past quadratic: linear attention and the delta rule, each a recurrence on a state.

:func:`linear_attention` replaces the softmax's ``exp(q . k)`` by a product of features,
``phi(q) . phi(k)`` (Katharopoulos et al., 2020). Associativity then turns
``(phi(Q) phi(K)^T) V``, quadratic in the length, into ``phi(Q) (phi(K)^T V)``, and the causal
form into a recurrence on one ``[Dk, Dv]`` state per head,
``S_t = S_{t-1} + phi(k_t) v_t^T``, read by each query as ``phi(q_t)^T S_t``. The three forms
(quadratic with a mask, recurrent, chunked) compute the same output.

:func:`delta_rule` is the recurrence of DeltaNet and its gated successors (Schlag et al., 2021;
Yang et al., 2024 and 2025), which Qwen3-Next's Gated DeltaNet and Kimi Linear's Kimi Delta
Attention layers run: each step first forgets (the state times ``exp(decay_t)``, per head or per
key channel), then corrects what the state predicts for the key toward its value, one step of
online regression with learning rate ``beta_t``,
``S_t = S'_{t-1} + beta_t k_t (v_t - S'_{t-1}^T k_t)^T`` with ``S'_{t-1}`` the decayed state,
that is ``(I - beta_t k_t k_t^T) S'_{t-1} + beta_t k_t v_t^T``; the output is
``S_t^T q_t / sqrt(Dk)``. Token by token, or chunk by chunk (the same result).

Shapes follow the library: ``[B, H, T, D]``, queries and keys of width ``Dk``, values ``Dv``.
Both compute in ``float32`` at least (``float64`` stays ``float64``) and return the inputs' dtype.
"""

from __future__ import annotations

import math

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Callable  # noqa: UP035

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional name

from attention_lab._validation import check_bool, check_int

__all__ = [
    "FEATURE_MAPS",
    "RULES",
    "GatedDeltaNet",
    "RecurrentState",
    "delta_rule",
    "linear_attention",
]

#: The feature maps :func:`linear_attention` takes by name: ``"elu+1"`` (Katharopoulos et al.'s,
#: positive everywhere), ``"relu"``. ``None`` is the identity.
FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "elu+1": lambda x: F.elu(x) + 1.0,
    "relu": F.relu,
}
FORMS = ("parallel", "recurrent", "chunked")
#: The recurrences a :class:`GatedDeltaNet` layer may run (its ``rule``).
RULES = ("gated_delta", "delta", "linear")


def _check_tensors(query, key, value, names=("query", "key", "value")) -> None:
    for name, tensor in zip(names, (query, key, value), strict=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got {tensor.dtype}")
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(
            f"query, key and value must share one dtype, got {query.dtype}, {key.dtype} and "
            f"{value.dtype}"
        )


def linear_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    feature_map: str | Callable[[torch.Tensor], torch.Tensor] | None = "elu+1",
    causal: bool = True,
    form: str = "parallel",
    chunk_size: int = 64,
    normalize: bool = True,
) -> torch.Tensor:
    """Linear attention, ``phi(Q) phi(K)^T`` in place of ``exp(Q K^T)``, in one of three forms.

    With ``normalize`` (as Katharopoulos et al., 2020 define it) query ``i`` returns
    ``sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j)`` over the keys it may see (all of
    them, or with ``causal`` the keys ``j <= i``); without it, the numerator alone. The forms
    compute the same output and differ in cost:

    - ``"parallel"``: the ``[..., T, T]`` matrix of ``phi(q_i).phi(k_j)``, masked when causal,
      times the values: ``O(T^2 D)``, like softmax attention;
    - ``"recurrent"``: one ``[Dk, Dv]`` state per head, ``S_t = S_{t-1} + phi(k_t) v_t^T``
      (and a sum ``z_t = z_{t-1} + phi(k_t)`` for the normaliser), read by query ``t``:
      ``O(T Dk Dv)``, a loop over the positions; without ``causal``, every query reads the state
      of all the keys, ``phi(Q) (phi(K)^T V)``;
    - ``"chunked"``: the recurrence between chunks of ``chunk_size`` positions and the masked
      quadratic form inside each, as the models' kernels compute it.

    Args:
        query: ``[..., T, Dk]``.
        key: ``[..., T, Dk]``, the same leading dimensions and length as ``query``.
        value: ``[..., T, Dv]``.
        feature_map: A name in :data:`FEATURE_MAPS`, a callable applied to the queries and keys
            (it must keep their shape), or ``None`` for none (the identity).
        causal: Whether query ``i`` sees only the keys ``j <= i``.
        form: ``"parallel"``, ``"recurrent"`` or ``"chunked"``.
        chunk_size: The chunk length of the chunked form.
        normalize: Divide by ``phi(q_i) . sum_j phi(k_j)``. It needs features that keep the sum
            away from 0, as a positive feature map does (``"elu+1"``): with ``feature_map=None``
            the sum can be 0 or change sign, so that combination is refused (pass
            ``normalize=False``); with another map (``"relu"``), a sum of exactly 0 for some
            query raises ``ValueError`` rather than return NaN.

    Returns:
        The output ``[..., T, Dv]``, in the dtype of ``query``.

    Raises:
        TypeError: If an input is not a floating tensor, the three dtypes differ, or a flag is
            not a bool.
        ValueError: If the shapes do not match, ``form`` or ``feature_map`` is unknown,
            ``chunk_size`` is not positive, ``normalize`` is asked with no feature map, or a
            normaliser is 0.
    """
    _check_tensors(query, key, value)
    check_bool(causal, "causal")
    check_bool(normalize, "normalize")
    check_int(chunk_size, "chunk_size")
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if query.ndim < 2 or query.shape != key.shape:
        raise ValueError(
            f"query and key must have the same shape [..., T, Dk], got {list(query.shape)} "
            f"and {list(key.shape)}"
        )
    if value.shape[:-1] != key.shape[:-1]:
        raise ValueError(
            f"value must be [..., T, Dv] with the keys' leading dimensions and length "
            f"{list(key.shape[:-1])}, got {list(value.shape)}"
        )
    if feature_map is None:
        if normalize:
            raise ValueError(
                "normalize=True divides by phi(q) . sum phi(k), which only positive features "
                "keep away from 0; with feature_map=None that sum can be 0 or change sign: "
                "pass normalize=False"
            )
        phi = lambda x: x  # noqa: E731 - the identity, named like the others
    elif isinstance(feature_map, str):
        if feature_map not in FEATURE_MAPS:
            raise ValueError(
                f"feature_map must be one of {list(FEATURE_MAPS)}, got {feature_map!r}"
            )
        phi = FEATURE_MAPS[feature_map]
    elif callable(feature_map):
        phi = feature_map
    else:
        raise TypeError(f"feature_map must be a name, a callable or None, got {feature_map!r}")
    dtype = query.dtype
    if query.shape[-2] == 0:  # no positions: nothing to attend
        return value.new_zeros(value.shape)
    work = torch.promote_types(dtype, torch.float32)
    q, k = phi(query.to(work)), phi(key.to(work))
    if q.shape != query.shape or k.shape != key.shape:
        raise ValueError("feature_map must keep the shape of the queries and keys")
    v = value.to(work)
    # The normaliser rides along as one more value column of ones.
    if normalize:
        v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # [..., T, Dv + 1]
    if form == "parallel":
        out = _parallel(q, k, v, causal)
    elif form == "recurrent" or not causal:
        out = _recurrent(q, k, v) if causal else q @ (k.transpose(-2, -1) @ v)
    else:
        out = _chunked(q, k, v, chunk_size)
    if normalize:
        if (out[..., -1:] == 0).any():
            raise ValueError(
                "the normaliser phi(q) . sum phi(k) is 0 for some query (its features and the "
                "keys' share no positive coordinate): use a positive feature map such as "
                "'elu+1' (in float32 its features round to 0 below x = -17 or so), or "
                "normalize=False"
            )
        out = out[..., :-1] / out[..., -1:]
    return out.to(dtype)


def _parallel(q, k, v, causal: bool) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1)  # [..., T, T]
    if causal:
        length = scores.shape[-1]
        scores = scores.masked_fill(
            ~torch.ones(length, length, dtype=torch.bool, device=q.device).tril(), 0.0
        )
    return scores @ v


def _recurrent(q, k, v) -> torch.Tensor:
    state = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # [..., Dk, Dv]
    out = []
    for t in range(q.shape[-2]):
        state = state + k[..., t, :, None] * v[..., t, None, :]  # phi(k_t) v_t^T
        out.append((q[..., t, None, :] @ state)[..., 0, :])  # phi(q_t)^T S_t
    return torch.stack(out, dim=-2)


def _chunked(q, k, v, chunk_size: int) -> torch.Tensor:
    state = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # [..., Dk, Dv]
    out = []
    for start in range(0, q.shape[-2], chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (q, k, v))
        # What the earlier chunks left in the state, and the chunk's own causal part.
        out.append(qc @ state + _parallel(qc, kc, vc, causal=True))
        state = state + kc.transpose(-2, -1) @ vc
    return torch.cat(out, dim=-2)


def delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    beta: torch.Tensor,
    *,
    decay: torch.Tensor | None = None,
    chunk_size: int | None = None,
    initial_state: torch.Tensor | None = None,
    return_state: bool = False,
    qk_l2norm: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The (gated) delta rule: a ``[Dk, Dv]`` state per value head, corrected token by token.

    At each position ``t``, for each value head: the state is first multiplied by
    ``exp(decay_t)`` (per head, or per key channel: row ``c`` of the state by
    ``exp(decay_t[c])``), then moved toward predicting ``v_t`` from ``k_t``,
    ``S_t = S' + beta_t k_t (v_t - S'^T k_t)^T``, and read by the query,
    ``o_t = S_t^T q_t / sqrt(Dk)`` (the papers write ``S_t^T q_t``; the models' code scales the
    queries by ``1 / sqrt(Dk)``, and so does this). With ``decay=None`` this is DeltaNet's
    rule; a decay per
    head is Gated DeltaNet's (Qwen3-Next), one per key channel Kimi Delta Attention's (Kimi
    Linear). Both models normalise the queries and keys to unit length first
    (``qk_l2norm=True``, as their layers pass it: ``x * rsqrt(sum x^2 + 1e-6)``). With a unit key
    and ``beta`` in ``[0, 1]``, ``I - beta k k^T`` scales the state along ``k`` by
    ``1 - beta`` and leaves the rest, and the write makes the new component along ``k`` a mix of
    the old prediction and the value, ``(1 - beta) k^T S' + beta v^T``: the state stays bounded
    by its start and the values. With longer keys, ``beta |k|^2 > 2`` makes that factor exceed 1
    in size, and the state can grow from step to step without bound.

    Value heads may be a multiple of the query/key heads: key head ``j`` serves the value heads
    ``j * r .. (j + 1) * r - 1``, ``r = Hv // Hk`` (Qwen3-Next's grouping, whose published
    configuration has 16 key heads and 32 value heads).

    ``chunk_size=None`` runs the recurrence token by token; an int runs it chunk by chunk, each
    chunk's corrections solved at once (a unit lower-triangular system: the UT transform of
    Joffrain et al., 2006, as Yang et al., 2024 use it), which gives the same result. A
    sequence fed in pieces, each piece's ``initial_state`` the state the previous one
    returned, gives the output of the whole.

    Args:
        query: ``[B, Hk, T, Dk]``.
        key: ``[B, Hk, T, Dk]``.
        value: ``[B, Hv, T, Dv]``, ``Hv`` a multiple of ``Hk``.
        beta: ``[B, Hv, T]``, each step's learning rate, in ``[0, 1]``.
        decay: ``None``, or the log of each step's forgetting factor in ``[0, 1]``, so
            ``<= 0`` (``-inf`` forgets everything): ``[B, Hv, T]`` (one per head) or
            ``[B, Hv, T, Dk]`` (one per key channel).
        chunk_size: ``None`` (token by token) or the chunk length, a positive int.
        initial_state: ``[B, Hv, Dk, Dv]``, the state before the first position (zeros if
            ``None``).
        return_state: Also return the state after the last position.
        qk_l2norm: Normalise each query and key vector to unit length first.

    Returns:
        The output ``[B, Hv, T, Dv]`` in the dtype of ``query``, or ``(output, state)`` with the
        state ``[B, Hv, Dk, Dv]`` in the working dtype (``float32`` at least) if
        ``return_state``.

    Raises:
        TypeError: If an input is not a floating tensor, query, key and value differ in dtype,
            or a flag is not a bool (``beta``, ``decay`` and ``initial_state`` are computed in
            the working dtype whatever their floating dtype).
        ValueError: If the shapes do not match (heads that do not group, widths or lengths that
            differ), ``beta`` leaves ``[0, 1]``, ``decay`` is positive or NaN, or ``chunk_size``
            is not positive.
    """
    _check_tensors(query, key, value)
    check_bool(return_state, "return_state")
    check_bool(qk_l2norm, "qk_l2norm")
    if chunk_size is not None:
        check_int(chunk_size, "chunk_size")
    if query.ndim != 4 or query.shape != key.shape:
        raise ValueError(
            f"query and key must have the same shape [B, Hk, T, Dk], got {list(query.shape)} "
            f"and {list(key.shape)}"
        )
    batch, key_heads, length, key_dim = key.shape
    if value.ndim != 4 or value.shape[0] != batch or value.shape[2] != length:
        raise ValueError(
            f"value must be [B, Hv, T, Dv] with B = {batch} and T = {length}, got "
            f"{list(value.shape)}"
        )
    value_heads, value_dim = value.shape[1], value.shape[3]
    if value_heads % key_heads:
        raise ValueError(
            f"the value heads must be a multiple of the key heads, got {value_heads} value "
            f"heads for {key_heads} key heads"
        )
    heads = (batch, value_heads, length)
    if not isinstance(beta, torch.Tensor) or tuple(beta.shape) != heads:
        raise ValueError(f"beta must be a tensor [B, Hv, T] = {list(heads)}, got {_shape(beta)}")
    for name, tensor in (("beta", beta), ("decay", decay), ("initial_state", initial_state)):
        if (
            tensor is not None
            and isinstance(tensor, torch.Tensor)
            and not tensor.is_floating_point()
        ):
            raise TypeError(f"{name} must be a floating tensor, got {tensor.dtype}")
    if ((beta < 0) | (beta > 1)).any() or beta.isnan().any():
        raise ValueError("beta must lie in [0, 1]")
    if decay is not None:
        per = (heads, (*heads, key_dim))
        if not isinstance(decay, torch.Tensor) or tuple(decay.shape) not in per:
            raise ValueError(
                f"decay must be [B, Hv, T] = {list(heads)} or [B, Hv, T, Dk] = "
                f"{list(per[1])}, got {_shape(decay)}"
            )
        if (decay > 0).any() or decay.isnan().any():
            raise ValueError("decay is the log of a forgetting factor in [0, 1]: it must be <= 0")
    state_shape = (batch, value_heads, key_dim, value_dim)
    if initial_state is not None and (
        not isinstance(initial_state, torch.Tensor) or tuple(initial_state.shape) != state_shape
    ):
        raise ValueError(
            f"initial_state must be [B, Hv, Dk, Dv] = {list(state_shape)}, got "
            f"{_shape(initial_state)}"
        )

    dtype = query.dtype
    work = torch.promote_types(dtype, torch.float32)
    group = value_heads // key_heads
    q, k = (x.to(work).repeat_interleave(group, dim=1) for x in (query, key))  # [B, Hv, T, Dk]
    if qk_l2norm:
        q, k = (x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6) for x in (q, k))
    q = q * key_dim**-0.5
    v, b = value.to(work), beta.to(work)
    if decay is None:
        g = torch.zeros(*heads, 1, dtype=work, device=q.device)
    else:
        g = decay.to(work)
        g = g[..., None] if g.ndim == 3 else g  # [B, Hv, T, 1 or Dk]
    state = q.new_zeros(state_shape) if initial_state is None else initial_state.to(work).clone()
    if length == 0:  # no positions: the state passes through
        out = v.new_zeros(v.shape)
    elif chunk_size is None:
        out, state = _delta_recurrent(q, k, v, b, g, state)
    else:
        out, state = _delta_chunked(q, k, v, b, g, state, chunk_size)
    out = out.to(dtype)
    return (out, state) if return_state else out


def _shape(x) -> str:
    return str(list(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def _delta_recurrent(q, k, v, b, g, state):
    out = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t, :, None].exp()  # forget: [B, Hv, Dk or 1, 1]
        k_t, v_t = k[:, :, t], v[:, :, t]  # [B, Hv, Dk], [B, Hv, Dv]
        predicted = (k_t[..., None] * state).sum(dim=-2)  # S'^T k_t: [B, Hv, Dv]
        correction = b[:, :, t, None] * (v_t - predicted)  # [B, Hv, Dv]
        state = state + k_t[..., None] * correction[..., None, :]
        out.append((q[:, :, t, :, None] * state).sum(dim=-2))  # S_t^T q_t
    return torch.stack(out, dim=2), state


def _segment_sums(g: torch.Tensor) -> torch.Tensor:
    """``out[..., t, j, :] = g[..., j+1, :] + ... + g[..., t, :]`` for ``j <= t`` (0 on the
    diagonal), ``-inf`` above it, for ``g`` ``[B, H, C, Dk or 1]``: each sum taken from its own
    start, not as a difference of running sums, so a large decay early in a chunk does not
    swamp the small ones after it (Mamba-2's ``segsum``)."""
    size = g.shape[2]
    later = torch.ones(size, size, dtype=torch.bool, device=g.device).tril(-1)  # t > j
    steps = g[:, :, :, None, :].expand(-1, -1, -1, size, -1)  # [B, H, t, j, .] = g_t
    sums = steps.masked_fill(~later[:, :, None], 0.0).cumsum(dim=2)
    upper = ~torch.ones(size, size, dtype=torch.bool, device=g.device).tril()  # j > t
    return sums.masked_fill(upper[:, :, None], float("-inf"))


def _delta_chunked(q, k, v, b, g, state, chunk_size: int):
    """The delta rule one chunk at a time. Inside a chunk of C positions, with ``a_t`` the decay
    accumulated from the chunk's start through ``t`` (per channel) and ``u_t = S_t - S'`` the
    correction step ``t`` writes, ``u_t = beta_t (v_t - S0^T (a_t * k_t) - sum_{j<t}
    [(a_t / a_j * k_j) . k_t] u_j)``: a unit lower-triangular system for all ``u`` at once."""
    out = []
    for start in range(0, q.shape[2], chunk_size):
        stop = min(start + chunk_size, q.shape[2])
        qc, kc, vc, bc, gc = (x[:, :, start:stop] for x in (q, k, v, b, g))
        size = stop - start
        from_start = gc.cumsum(dim=2).exp()  # a_t: [B, Hv, C, Dk or 1]
        between = _segment_sums(gc).exp()  # a_t / a_j for j <= t, else 0: [B, Hv, C, C, .]
        # [(a_t / a_j * k_j) . k_t] and the same with q_t: [B, Hv, C, C]
        if gc.shape[-1] == 1:  # one decay per head: a scalar per pair of positions
            kk = (kc @ kc.transpose(-2, -1)) * between[..., 0]
            qk = (qc @ kc.transpose(-2, -1)) * between[..., 0]
        else:
            kk = (kc[:, :, :, None, :] * between * kc[:, :, None, :, :]).sum(dim=-1)
            qk = (qc[:, :, :, None, :] * between * kc[:, :, None, :, :]).sum(dim=-1)
        system = torch.eye(size, dtype=q.dtype, device=q.device) + bc[..., None] * kk.tril(-1)
        rhs = bc[..., None] * (vc - (kc * from_start) @ state)  # [B, Hv, C, Dv]
        u = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
        out.append((qc * from_start) @ state + qk @ u)
        to_end = between[:, :, -1]  # a_C / a_j: [B, Hv, C, Dk or 1]
        state = state * from_start[:, :, -1, :, None] + (kc * to_end).transpose(-2, -1) @ u
    return torch.cat(out, dim=2), state


class RecurrentState:
    """What one :class:`GatedDeltaNet` layer keeps between calls while it decodes: its state
    ``S`` and the last inputs of its causal convolution, for ``batch_size`` sequences.

    The recurrent layer's counterpart of :class:`~attention_lab.caches.KVCache`: its size does
    not grow with the positions decoded. :meth:`GatedDeltaNet.forward` with ``state=`` reads
    and updates it in place, so a sequence fed in pieces gives the outputs of the whole.

    Attributes:
        state: ``[B, Hv, Dk, Dv]``, in ``float32`` at least (the rule's working dtype); zeros
            before the first position.
        conv: ``[B, C, conv_size - 1]``: the convolution's inputs at the last ``conv_size - 1``
            positions (``C`` = ``2 Hk Dk + Hv Dv`` channels), zeros before the first position,
            as the convolution's own padding.
        max_len: The most positions the state may take in (the model's ``max_len``).

    Example:
        >>> layer = GatedDeltaNet(8, 2, 2, 4, 4)
        >>> state = layer.new_state(batch_size=3, max_len=16)
        >>> _ = layer(torch.randn(3, 5, 8), state=state)
        >>> len(state), state.state.shape, state.conv.shape
        (5, torch.Size([3, 2, 4, 4]), torch.Size([3, 24, 3]))
    """

    def __init__(self, state: torch.Tensor, conv: torch.Tensor, max_len: int) -> None:
        check_int(max_len, "max_len")
        self.state, self.conv, self.max_len = state, conv, max_len
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def nbytes(self) -> int:
        """Bytes the state and the convolution's window occupy, whatever the positions held."""
        return self.state.nbytes + self.conv.nbytes

    def detach(self) -> RecurrentState:
        """Cut the autograd graph behind the state, in place, and return it: the state keeps
        the graph of the calls that wrote it, so training on a long sequence in pieces
        (truncated backpropagation through time) detaches it between pieces."""
        self.state, self.conv = self.state.detach(), self.conv.detach()
        return self

    def _check_room(self, count: int) -> None:
        if self._length + count > self.max_len:
            raise ValueError(
                f"the state holds {self._length} positions and max_len={self.max_len}: "
                f"{count} more do not fit"
            )

    def _update(self, state: torch.Tensor, conv: torch.Tensor, count: int) -> None:
        """Take in ``count`` positions: the new state and window, all at once."""
        self.state, self.conv, self._length = state, conv, self._length + count


class GatedDeltaNet(torch.nn.Module):
    """Qwen3-Next's linear-attention layer: projections, a short causal convolution, gates, the
    gated delta rule, a gated RMS norm and the output projection.

    For ``x`` ``[B, T, D]``: queries, keys and values are projected (``Hk`` heads of width
    ``Dk`` for the queries and keys, ``Hv`` of width ``Dv`` for the values), passed together
    through a depthwise causal convolution over the last ``conv_size`` positions and a SiLU;
    each value head gets a learning rate ``beta = sigmoid(x W_b)`` and a forgetting rate
    ``decay = -exp(A_log) * softplus(x W_a + dt_bias)`` (the log of a factor in ``(0, 1]``), and
    :func:`delta_rule` runs with queries and keys normalised to unit length. Each head's output
    is RMS-normalised, scaled by a learned weight and multiplied by ``silu(x W_z)`` (the output
    gate), and the heads are merged and projected back to ``D``.

    The projections here are separate matrices; Qwen3-Next packs them into ``in_proj_qkvz`` and
    ``in_proj_ba`` grouped by key head, which :meth:`from_hf` unpacks.

    ``rule`` swaps the recurrence and keeps the rest of the layer, so that layers which differ
    only in how their state is written can be compared on one task: ``"gated_delta"`` (the
    default, Qwen3-Next's), ``"delta"`` (the same rule without forgetting: DeltaNet, Yang et
    al., 2024, which has no ``decay_proj``, ``A_log`` or ``dt_bias``) or ``"linear"`` (the
    additive rule of :func:`linear_attention`, ``S_t = S_{t-1} + phi(k_t) v_t^T`` with
    Katharopoulos et al.'s ``phi = elu + 1`` in place of the normalisation to unit length, and
    neither ``beta`` nor decay). The linear rule's normaliser ``phi(q) . sum phi(k)`` is left
    out: it divides each head's output by a positive number, which the RMS norm after it undoes.

    Args:
        d_model: The width ``D`` of the input and output.
        num_key_heads: ``Hk``, the heads of the queries and keys.
        num_value_heads: ``Hv``, a multiple of ``Hk``.
        key_dim: ``Dk``.
        value_dim: ``Dv``.
        conv_size: The causal convolution's kernel length (Qwen3-Next uses 4).
        eps: The RMS norm's epsilon.
        chunk_size: Passed to :func:`delta_rule` (``None`` for token by token; the linear rule
            runs :func:`linear_attention`'s recurrent form then, its chunked form otherwise).
        rule: ``"gated_delta"``, ``"delta"`` or ``"linear"``, one of :data:`RULES`.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If a size is not positive, the heads do not group or ``rule`` is unknown.
    """

    def __init__(
        self,
        d_model: int,
        num_key_heads: int,
        num_value_heads: int,
        key_dim: int,
        value_dim: int,
        *,
        conv_size: int = 4,
        eps: float = 1e-6,
        chunk_size: int | None = 64,
        rule: str = "gated_delta",
    ) -> None:
        super().__init__()
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        for name, size in (
            ("d_model", d_model),
            ("num_key_heads", num_key_heads),
            ("num_value_heads", num_value_heads),
            ("key_dim", key_dim),
            ("value_dim", value_dim),
            ("conv_size", conv_size),
        ):
            check_int(size, name)
        if num_value_heads % num_key_heads:
            raise ValueError(
                f"num_value_heads must be a multiple of num_key_heads, got {num_value_heads} "
                f"and {num_key_heads}"
            )
        if chunk_size is not None:
            check_int(chunk_size, "chunk_size")
        self.num_key_heads, self.num_value_heads = num_key_heads, num_value_heads
        self.key_dim, self.value_dim = key_dim, value_dim
        self.eps, self.chunk_size, self.rule = float(eps), chunk_size, rule
        keys, values = num_key_heads * key_dim, num_value_heads * value_dim
        linear = lambda n_in, n_out: torch.nn.Linear(n_in, n_out, bias=False)  # noqa: E731
        self.q_proj, self.k_proj = linear(d_model, keys), linear(d_model, keys)
        self.v_proj, self.gate_proj = linear(d_model, values), linear(d_model, values)
        if rule != "linear":
            self.beta_proj = linear(d_model, num_value_heads)
        if rule == "gated_delta":
            self.decay_proj = linear(d_model, num_value_heads)
        channels = 2 * keys + values
        # Depthwise and causal: channel c at position t sees channel c at t - conv_size + 1 .. t.
        self.conv = torch.nn.Conv1d(
            channels, channels, conv_size, groups=channels, padding=conv_size - 1, bias=False
        )
        if rule == "gated_delta":
            # Mamba-2's initialisation (Dao and Gu, 2024; mamba_ssm/modules/mamba2.py): A ~ U(1,
            # 16) and a step softplus(dt_bias) ~ logU(0.001, 0.1) (FLA's GatedDeltaNet draws A
            # from U(0, 16)), so each head starts out forgetting by exp(-A dt) per position,
            # between about 0.2 and 0.999; with transformers' initialisation of Qwen3-Next
            # (A ~ U(0.01, 16), dt_bias = 1) most heads forget nearly all at every step.
            step = torch.empty(num_value_heads).uniform_(math.log(1e-3), math.log(1e-1)).exp()
            inverse_softplus = step + torch.log(-torch.expm1(-step))
            self.A_log = torch.nn.Parameter(  # noqa: N815 - the models' name
                torch.empty(num_value_heads).uniform_(1.0, 16.0).log()
            )
            self.dt_bias = torch.nn.Parameter(inverse_softplus)
        self.norm_weight = torch.nn.Parameter(torch.ones(value_dim))
        self.out_proj = linear(values, d_model)

    def new_state(self, batch_size: int, max_len: int) -> RecurrentState:
        """An empty :class:`RecurrentState` for ``batch_size`` sequences of at most ``max_len``
        positions, on the device of the layer's weights: the convolution's window in their
        dtype, the state in ``float32`` at least (the rule's working dtype).

        Raises:
            TypeError: If ``batch_size`` or ``max_len`` is not an int.
            ValueError: If either is not positive.
        """
        check_int(batch_size, "batch_size")
        weight = self.q_proj.weight
        work = torch.promote_types(weight.dtype, torch.float32)
        shape = (batch_size, self.num_value_heads, self.key_dim, self.value_dim)
        conv = weight.new_zeros(batch_size, self.conv.in_channels, self.conv.kernel_size[0] - 1)
        return RecurrentState(weight.new_zeros(shape, dtype=work), conv, max_len)

    def forward(self, x: torch.Tensor, state: RecurrentState | None = None) -> torch.Tensor:
        """The layer's output ``[B, T, D]`` for ``x`` ``[B, T, D]``.

        With ``state`` (from :meth:`new_state`), ``x`` holds the positions that follow those the
        state has taken in: the layer starts from the state, and leaves the state after ``x``
        in it. Fed a sequence in pieces, it gives the outputs of the whole, up to rounding.

        The state is updated only once the whole call has succeeded.

        Raises:
            TypeError: If ``state`` is not a :class:`RecurrentState`, or holds another dtype
                than ``x``'s projections.
            ValueError: If ``x`` is not ``[B, T, D]``, or ``state`` is for another batch size
                or has no room for ``T`` more positions.
        """
        if not isinstance(x, torch.Tensor) or x.ndim != 3:
            raise ValueError(f"x must be a tensor [B, T, D], got {_shape(x)}")
        batch, length, _ = x.shape
        if state is not None:
            if not isinstance(state, RecurrentState):
                raise TypeError(
                    f"state must be a RecurrentState (new_state), got {type(state).__name__}"
                )
            if state.state.shape[0] != batch:
                raise ValueError(f"state is for {state.state.shape[0]} sequences, x holds {batch}")
            state._check_room(length)
        keys = self.num_key_heads * self.key_dim
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)
        if state is None:
            mixed = F.silu(self.conv(mixed.transpose(1, 2))[..., :length]).transpose(1, 2)
        else:
            if state.conv.dtype != mixed.dtype:
                raise TypeError(
                    f"state holds {state.conv.dtype}, the layer computes in {mixed.dtype}: "
                    "make the state with this layer's new_state"
                )
            # The window of earlier inputs stands in for the convolution's zero padding.
            # [B, C, conv_size - 1 + T]: the earlier inputs, then the new ones.
            window = torch.cat([state.conv, mixed.transpose(1, 2)], dim=-1)
            new_conv = window[..., window.shape[-1] - state.conv.shape[-1] :]
            convolved = F.conv1d(window, self.conv.weight, groups=self.conv.groups)
            mixed = F.silu(convolved).transpose(1, 2)  # [B, T, C]
        q, k, v = mixed.split([keys, keys, self.num_value_heads * self.value_dim], dim=-1)

        def heads(y, count, width):  # [B, T, count * width] -> [B, count, T, width]
            return y.reshape(batch, length, count, width).transpose(1, 2)

        q, k = (
            heads(q, self.num_key_heads, self.key_dim),
            heads(k, self.num_key_heads, self.key_dim),
        )
        v = heads(v, self.num_value_heads, self.value_dim)
        if self.rule == "linear":
            group = self.num_value_heads // self.num_key_heads
            q, k = (y.repeat_interleave(group, dim=1) for y in (q, k))  # [B, Hv, T, Dk]
            form = "recurrent" if self.chunk_size is None else "chunked"
            out = linear_attention(  # [B, Hv, T, Dv]
                q, k, v, form=form, chunk_size=self.chunk_size or 64, normalize=False
            )
            if state is not None:  # what the earlier positions left: phi(q_t)^T S, then S grows
                phi = FEATURE_MAPS["elu+1"]
                work = state.state.dtype
                phi_q, phi_k = phi(q.to(work)), phi(k.to(work))
                out = out + (phi_q @ state.state).to(out.dtype)
                state._update(state.state + phi_k.transpose(-2, -1) @ v.to(work), new_conv, length)
        else:
            beta = self.beta_proj(x).sigmoid().transpose(1, 2)  # [B, Hv, T]
            decay = None
            if self.rule == "gated_delta":
                rate = F.softplus(self.decay_proj(x).float() + self.dt_bias)  # [B, T, Hv]
                decay = (-self.A_log.float().exp() * rate).transpose(1, 2)  # [B, Hv, T], <= 0
            if state is None:
                out = delta_rule(
                    q, k, v, beta, decay=decay, chunk_size=self.chunk_size, qk_l2norm=True
                )  # [B, Hv, T, Dv]
            else:
                out, new_state = delta_rule(
                    q, k, v, beta, decay=decay, chunk_size=self.chunk_size, qk_l2norm=True,
                    initial_state=state.state, return_state=True,
                )  # fmt: skip
                state._update(new_state, new_conv, length)
        gate = heads(self.gate_proj(x), self.num_value_heads, self.value_dim)
        normed = out.float() * torch.rsqrt(out.float().pow(2).mean(-1, keepdim=True) + self.eps)
        out = (self.norm_weight * normed.to(x.dtype)) * F.silu(gate.float())
        merged = out.to(x.dtype).transpose(1, 2).reshape(batch, length, -1)  # [B, T, Hv * Dv]
        return self.out_proj(merged)

    @classmethod
    def from_hf(cls, module: torch.nn.Module, *, chunk_size: int | None = 64) -> GatedDeltaNet:
        """This layer with the weights of transformers' ``Qwen3NextGatedDeltaNet`` ``module``.

        Qwen3-Next packs ``in_proj_qkvz`` by key head (each head's query, key, values and
        gates side by side) and ``in_proj_ba`` likewise; they are unpacked into the separate
        projections. The convolution, ``A_log``, ``dt_bias``, the norm's weight and the output
        projection are copied as they are.

        Raises:
            ValueError: If the module's activation is not SiLU (the only one this layer runs).
        """
        if module.activation != "silu":
            raise ValueError(f"only the SiLU activation is supported, got {module.activation!r}")
        layer = cls(
            module.hidden_size,
            module.num_k_heads,
            module.num_v_heads,
            module.head_k_dim,
            module.head_v_dim,
            conv_size=module.conv_kernel_size,
            eps=module.layer_norm_epsilon,
            chunk_size=chunk_size,
        )
        key_heads, dk, dv = module.num_k_heads, module.head_k_dim, module.head_v_dim
        ratio = module.num_v_heads // key_heads
        qkvz = module.in_proj_qkvz.weight.reshape(key_heads, 2 * dk + 2 * ratio * dv, -1)
        q, k, v, z = qkvz.split([dk, dk, ratio * dv, ratio * dv], dim=1)
        ba = module.in_proj_ba.weight.reshape(key_heads, 2 * ratio, -1)
        b, a = ba.split([ratio, ratio], dim=1)
        with torch.no_grad():
            for target, packed in (
                (layer.q_proj, q),
                (layer.k_proj, k),
                (layer.v_proj, v),
                (layer.gate_proj, z),
                (layer.beta_proj, b),
                (layer.decay_proj, a),
            ):
                target.weight.copy_(packed.reshape(-1, packed.shape[-1]))
            layer.conv.weight.copy_(module.conv1d.weight)
            layer.A_log.copy_(module.A_log)
            layer.dt_bias.copy_(module.dt_bias)
            layer.norm_weight.copy_(module.norm.weight)
            layer.out_proj.weight.copy_(module.out_proj.weight)
        return layer
