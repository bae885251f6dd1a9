"""Argument checks shared by every module (a private leaf: it imports nothing from the package).

The module is private to the package, its names are not: any module of the package may import
them. Each raises ``TypeError`` for the wrong type and ``ValueError`` for a wrong value, with a
message that names the argument, as the library's contract promises. :class:`ModelConfig` is
the base of the assembled models' config dataclasses: the checks of the fields they share.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Self

import numpy as np
import torch


def check_int(value: int, name: str, minimum: int | None = 1) -> None:
    """Require an int (not a bool) that is at least ``minimum`` (any int if it is None)."""
    kind = {None: "an", 0: "a non-negative", 1: "a positive"}.get(minimum, f"a >= {minimum}")
    # bool is a subclass of int, but d_model=True is always a mistake.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {kind} int, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be {kind} int, got {value}")


def check_probability(value: float, name: str) -> None:
    """Require a real number in ``[0, 1)``, e.g. a dropout rate."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(value).__name__} {value!r}")
    # The negated comparison also rejects NaN.
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be a float in [0, 1), got {value}")


def check_bool(value: bool, name: str) -> None:
    """Require a real ``bool`` (not 0/1)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


def check_activation(activation: str) -> None:
    """Require the name of an activation the layers have: ``"relu"`` or ``"gelu"``."""
    if not isinstance(activation, str):
        raise TypeError(
            f"activation must be 'relu' or 'gelu', got {type(activation).__name__} {activation!r}"
        )
    if activation not in ("relu", "gelu"):
        raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")


def check_real_above(value: float, name: str, lower: float) -> None:
    """Require a finite real number greater than ``lower``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number > {lower}, got {type(value).__name__} {value!r}"
        )
    if not (lower < value < math.inf):
        raise ValueError(f"{name} must be a finite real number > {lower}, got {value}")


def check_cache_sizes(sizes: dict[str, int], dtype: torch.dtype) -> None:
    """Require a cache's sizes (each a positive int, checked in order) and a floating dtype."""
    for name, value in sizes.items():
        check_int(value, name)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")


def check_cache_room(held: int, new: int, max_len: int) -> None:
    """Require room in a cache holding ``held`` of ``max_len`` positions for ``new`` more."""
    if held + new > max_len:
        raise ValueError(
            f"the cache holds {held} of max_len={max_len} positions and cannot take {new} more"
        )


def check_token_ids(
    ids: torch.Tensor,
    name: str,
    *,
    rows: str = "B",
    like: torch.Tensor | None = None,
    like_name: str = "input_ids",
) -> None:
    """Require an integer tensor of shape ``[rows, T]``, the shape of ``like`` if one is given."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {ids.dtype}")
    if ids.ndim != 2:
        raise ValueError(f"{name} must have shape [{rows}, T], got {list(ids.shape)}")
    if like is not None and ids.shape != like.shape:
        raise ValueError(
            f"{name} must have shape [{rows}, T] = {list(like.shape)}, that of {like_name}, "
            f"got {list(ids.shape)}"
        )


def check_id_range(ids: torch.Tensor, name: str, limit: int, limit_name: str = "") -> None:
    """Require every value of the integer tensor ``ids`` (any shape) to lie in ``[0, limit)``."""
    if ids.numel() and (ids.min() < 0 or ids.max() >= limit):
        named = f" ({limit_name}={limit})" if limit_name else ""
        raise ValueError(
            f"{name} must hold values in [0, {limit}){named}, got values from "
            f"{int(ids.min())} to {int(ids.max())}"
        )


def check_sequence(x: torch.Tensor, name: str, width: int) -> None:
    """Require a floating tensor of shape ``[B, T, width]``: a batch of token vectors."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    if x.ndim != 3 or x.shape[-1] != width:
        raise ValueError(f"{name} must have shape [B, T, {width}], got {list(x.shape)}")


def check_logits_and_targets(logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Raise unless ``logits`` is a floating ``[B, T, V]`` tensor and ``targets`` ``[B, T]`` ids."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        kind = logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise TypeError(f"logits must be a floating torch.Tensor, got {kind}")
    check_token_ids(targets, "targets")
    if logits.ndim != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(
            "logits must have shape [B, T, V] with [B, T] the shape of targets, got "
            f"logits {list(logits.shape)} and targets {list(targets.shape)}"
        )


def as_float_array(
    values: torch.Tensor | np.ndarray, name: str, shape: str, hints: dict[int, str] | None = None
) -> np.ndarray:
    """Convert ``values`` to a float64 NumPy array whose rank matches ``shape``, or raise.

    ``shape`` is the expected shape as written in messages, e.g. ``"[Tq, Tk]"``; ``hints`` maps
    a wrong rank to a sentence telling the caller how to get the right one. The figure modules
    (``plotting``, ``interactive``) call it on whatever tensor or array a page hands them.

    Raises:
        TypeError: If ``values`` is neither a tensor nor convertible to an array of numbers.
        ValueError: If its rank is not that of ``shape``, or it is empty.
    """
    if isinstance(values, torch.Tensor):
        # float64 holds float32, float16 and bfloat16 values exactly, so nothing is rounded.
        array = values.detach().cpu().to(torch.float64).numpy()
    else:
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"{name} must be a torch.Tensor or a NumPy array of numbers, "
                f"got {type(values).__name__}"
            ) from error
    ndim = shape.count(",") + 1
    if array.ndim != ndim:
        hint = (hints or {}).get(array.ndim, "")
        raise ValueError(
            f"{name} must be {ndim}-D with shape {shape}, got shape {tuple(array.shape)}."
            + (f" {hint}" if hint else "")
        )
    if array.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(array.shape)}")
    return array


# The sizes a model config may hold: each, where a config has it, is a positive int.
_CONFIG_SIZES = (
    "vocab_size",
    "source_vocab_size",
    "target_vocab_size",
    "type_vocab_size",
    "max_len",
    "d_model",
    "num_layers",
    "num_decoder_layers",
    "num_heads",
    "d_ff",
)


class ModelConfig:
    """The base of the assembled models' settings, each a frozen, keyword-only dataclass.

    Its ``__post_init__`` checks the fields the configs share, whichever of them a config has:
    the sizes (``vocab_size``, ``d_model``, ``num_layers``, ``num_heads``, ``d_ff``,
    ``max_len``, ...) are positive ints, ``dropout`` lies in ``[0, 1)``, ``activation`` is
    ``"relu"`` or ``"gelu"``, ``norm_first`` and ``causal`` are bools, ``layer_norm_eps`` is
    positive, and ``d_model`` is divisible by ``num_heads``. A subclass fills in its ``None``
    defaults before calling it and checks its own fields after.
    """

    def __post_init__(self) -> None:
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        for name in _CONFIG_SIZES:
            if name in fields:
                check_int(fields[name], name)
        if "dropout" in fields:
            check_probability(fields["dropout"], "dropout")
        if "activation" in fields:
            check_activation(fields["activation"])
        for name in ("norm_first", "causal"):
            if name in fields:
                check_bool(fields[name], name)
        if "layer_norm_eps" in fields:
            check_real_above(fields["layer_norm_eps"], "layer_norm_eps", 0.0)
        if "d_model" in fields and "num_heads" in fields:
            d_model, num_heads = fields["d_model"], fields["num_heads"]
            if d_model % num_heads:
                raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")

    @classmethod
    def from_arguments(cls, config: Self | int | None, options: dict[str, Any]) -> Self:
        """The config a model's constructor was given, or the one its arguments describe.

        ``Model(config)`` passes ``config``, returned as it is; ``Model(vocab_size, d_model=...,
        ...)`` passes the config's first field (the vocabulary size) and the other fields as
        keyword arguments, and ``Model(vocab_size=..., ...)`` passes ``None`` and all of them.

        Raises:
            TypeError: If ``config`` is neither an instance of ``cls`` nor an int, if a config
                comes with keyword arguments, or if a keyword is not a field of ``cls``.
            ValueError: If a field is out of range.
        """
        first = dataclasses.fields(cls)[0].name
        if isinstance(config, cls):
            if options:
                raise TypeError(
                    f"pass the {cls.__name__} or keyword arguments, not both; got "
                    f"{', '.join(options)} besides the config"
                )
            return config
        if config is None:
            return cls(**options)
        if isinstance(config, bool) or not isinstance(config, numbers.Integral):
            raise TypeError(
                f"config must be an instance of {cls.__name__} or an int ({first}), got "
                f"{type(config).__name__}"
            )
        return cls(**{first: config}, **options)
