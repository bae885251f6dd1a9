"""What every lab's check shares: the case record, running the learner's function, the one
comparison routine and the failure message (private to :mod:`attention_lab.checks`).

A check calls the learner's function on its cases with :func:`run` and hands each result to
:func:`compare`, which goes through the same steps for every lab: shape, dtype, NaN or inf,
closeness, then the diagnosis (the lab's wrong variants, the first one the result matches, and
the lab's own hooks). A failure is raised by :func:`fail`: the case, the problem, and the
explanation of the likely mistake from :data:`MISTAKES`, which every lab module fills with its
own mistakes through :func:`register_mistakes`.

The names here are public to the package's modules (the module itself is private), as in
``attention_lab._validation``.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import sysconfig
import textwrap
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

# typing's Callable, not collections.abc's: the API reference's nitpicky build resolves typing
# names without intersphinx.
from typing import Any, Callable, NoReturn  # noqa: UP035

import torch

#: Every mistake a check can recognise, by key, with the explanation it prints. Filled by the
#: lab modules (:func:`register_mistakes`); ``attention_lab.checks`` imports them all.
MISTAKES: dict[str, str] = {}


def register_mistakes(entries: dict[str, str]) -> dict[str, str]:
    """Add a lab's mistakes to :data:`MISTAKES` and return them.

    Args:
        entries: Key -> explanation, as :func:`fail` prints it after "Likely mistake: ".

    Returns:
        ``entries``, so that a module can keep its own table.

    Raises:
        ValueError: If a key is already registered with another explanation (two labs would
            then name one mistake two ways).
    """
    for key, text in entries.items():
        if MISTAKES.get(key, text) != text:
            raise ValueError(f"the mistake {key!r} is registered twice, with two explanations")
    MISTAKES.update(entries)
    return entries


# The mistakes that the shared steps below name themselves.
register_mistakes(
    {
        "not_a_pair": "return a tuple (output, weights), not a single tensor",
        "wrong_dtype": (
            "the result has another dtype than the input: compute in the input's dtype (a "
            "tensor created without dtype= is float32)"
        ),
    }
)

UNKNOWN = (
    "none of the common mistakes this check knows; print your intermediate tensors and "
    "compare them with the step-by-step computation in the chapter"
)


@dataclass
class Case:
    """One call of the learner's function: a readable name and the arguments."""

    name: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    fully_masked_rows: torch.Tensor | None = None  # bool [..., Tq, 1] where every key is blocked
    large_scores: bool = False  # scores large enough to overflow a naive exp
    count_memory: bool = False  # the memory the call allocates is counted (Lab 7)


def name_of(fn: Callable) -> str:
    """The learner's function's name, as the messages show it."""
    return getattr(fn, "__name__", type(fn).__name__)


def check_callable(fn: Any) -> None:
    """Raise ``TypeError`` unless ``fn`` can be called."""
    if not callable(fn):
        raise TypeError(f"fn must be a function (callable), got {type(fn).__name__}")


def wrap(message: str, width: int = 76) -> str:
    """Wrap each line of ``message`` to ``width`` columns, leaving room on the first line for
    the ``AssertionError: `` in front of it, so that no line needs a horizontal scrollbar."""
    prefix = " " * len("AssertionError: ")
    lines = []
    for index, paragraph in enumerate(message.split("\n")):
        indent = prefix if index == 0 else ""
        wrapped = textwrap.wrap(
            paragraph,
            width,
            initial_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines += [wrapped[0].removeprefix(indent), *wrapped[1:]] if wrapped else [""]
    return "\n".join(lines)


def fail(
    fn_name: str, case: Case, problem: str, mistake: str | None, where: str | None = None
) -> None:
    """Raise ``AssertionError``: ``fn_name`` differs on ``case`` by ``problem``, and the likely
    ``mistake`` (a key of :data:`MISTAKES`, or ``None`` when no known mistake fits). With no
    mistake, ``where`` (if given) says which part of the result is wrong, in place of
    :data:`UNKNOWN`."""
    if mistake or not where:
        last = f"Likely mistake: {MISTAKES[mistake] if mistake else UNKNOWN}."
    else:
        last = f"Where it goes wrong: {where}."
    raise AssertionError(
        wrap(f"{fn_name} does not match the library on case '{case.name}': {problem}.\n{last}")
    )


def expect_tensor(fn_name: str, case: Case, result: Any) -> None:
    """Fail unless the learner's function returned a tensor."""
    if not isinstance(result, torch.Tensor):
        fail(fn_name, case, f"it returned {type(result).__name__}, not a tensor", None)


def two_tensors(fn_name: str, case: Case, result: Any) -> None:
    """Fail unless the learner's function returned two tensors (a tuple or a list)."""
    if not (
        isinstance(result, tuple | list)
        and len(result) == 2
        and all(isinstance(r, torch.Tensor) for r in result)
    ):
        fail(fn_name, case, f"it returned {type(result).__name__}, not two tensors", "not_a_pair")


def _dtype_error(error: Exception) -> str | None:
    """``wrong_dtype`` for PyTorch's errors about tensors of two dtypes meeting (a tensor made
    in the default float32 beside the input's float64, say)."""
    text = str(error).lower()
    about_types = "dtype" in text or "scalar type" in text
    mixed = about_types and "double" in text and "float" in text
    return "wrong_dtype" if mixed else None


def run(fn: Callable, case: Case, error_hint: Callable[[Exception], str | None] | None = None):
    """Call ``fn`` on ``case``; turn the stub's NotImplementedError and crashes into messages.

    ``error_hint`` names the likely mistake behind an exception the learner's code raised;
    when it names none, :func:`read_crash` says what the crash means for the learner's shapes.
    """
    try:
        with torch.no_grad():
            return fn(*case.args, **case.kwargs)
    except NotImplementedError as error:
        if _is_the_stub(error):
            raise AssertionError(
                wrap(
                    f"{name_of(fn)} raised NotImplementedError: it is still the stub. Replace the "
                    'line "raise NotImplementedError(...)" with your implementation, run that '
                    "cell, then run this check again."
                )
            ) from None
        _crash(fn, case, error, error_hint)
    except Exception as error:
        _crash(fn, case, error, error_hint)


def _is_the_stub(error: NotImplementedError) -> bool:
    """Whether ``error`` came from a ``raise NotImplementedError`` line, as the stub raises it,
    rather than from PyTorch refusing an operation (``&`` on floats raises it too)."""
    frames = traceback.extract_tb(error.__traceback__)
    line = (frames[-1].line or "").strip() if frames else ""
    return not line or line.startswith("raise NotImplementedError")


def _crash(fn: Callable, case: Case, error: Exception, error_hint) -> NoReturn:
    """Raise the AssertionError that reports ``error``, raised by the learner's ``fn``."""
    fn_name = name_of(fn)
    mistake = (error_hint(error) if error_hint else None) or _dtype_error(error)
    if mistake:
        last = f"\nLikely mistake: {MISTAKES[mistake]}."
    else:
        try:
            where = read_crash(fn, case, error)
        except Exception:  # noqa: BLE001 - a reading that fails must not hide the crash
            where = None
        last = f"\nWhere it goes wrong: {where}." if where else ""
    text = str(error).strip()
    raise AssertionError(
        wrap(f"{fn_name} raised {type(error).__name__} on case '{case.name}': {text}{last}")
    ) from error


# Where the library, PyTorch, the installed packages and the standard library live: a frame
# outside them is the learner's.
_NOT_LEARNER = tuple(
    {
        os.path.dirname(os.path.abspath(torch.__file__)),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        *(os.path.abspath(sysconfig.get_path(name)) for name in ("stdlib", "purelib", "platlib")),
    }
)


def _learner_frame(error: Exception) -> traceback.FrameSummary | None:
    """The deepest frame of the traceback in the learner's code (a notebook cell or a file
    outside the library, PyTorch and the standard library), or ``None``."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename) if not frame.filename.startswith("<") else ""
        if not path.startswith(_NOT_LEARNER):
            return frame
    return None


def _arguments(fn: Callable, case: Case) -> list[tuple[str, Any]]:
    """The case's arguments under the names of the learner's parameters (``arg0``... when the
    signature cannot be read)."""
    try:
        bound = inspect.signature(fn).bind(*case.args, **case.kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(case.args)] + list(case.kwargs.items())


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{list(value.shape)}" + ("" if value.dtype.is_floating_point else f" {value.dtype}")
    if isinstance(value, bool | int | float) or value is None:
        return f"= {value!r}"
    return f"({type(value).__name__})"


def _sources_of(size: int, arguments: list[tuple[str, Any]]) -> list[str]:
    """Which of the case's sizes equal ``size``: ``value.shape[2]``, ``block_size``."""
    found = []
    for name, value in arguments:
        if isinstance(value, torch.Tensor):
            found += [f"{name}.shape[{axis}]" for axis, s in enumerate(value.shape) if s == size]
        elif isinstance(value, int) and not isinstance(value, bool) and value == size:
            found.append(name)
    return found


# PyTorch's text when two sizes do not broadcast: the two sizes, then the axis of the result.
BROADCAST_ERROR = re.compile(
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"
    r"(?: at non-singleton dimension (\d+))?"
)
# PyTorch's text when a matrix product's inner sizes differ: the two inner sizes.
PRODUCT_ERROR = re.compile(r"shapes cannot be multiplied \(\d+x(\d+) and (\d+)x\d+\)")

# PyTorch's errors about shapes: pattern (its first two groups the sizes) -> what the sizes
# mean, with {0}, {1} the sizes.
_SHAPE_ERRORS = (
    (
        BROADCAST_ERROR,
        "two tensors meet whose sizes along one axis are {0} and {1}, and only equal sizes "
        "or 1 broadcast (in an elementwise operation, or the batch axes of a product)",
    ),
    (
        PRODUCT_ERROR,
        "it multiplies matrices whose inner sizes differ: {0} columns against {1} rows",
    ),
    (
        re.compile(r"Expected size (\d+) but got size (\d+)"),
        "it joins or multiplies tensors whose sizes differ ({0} against {1}) along an axis "
        "that must agree",
    ),
    (
        re.compile(r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\)"),
        "it expands an axis of size {1} to {0}, and only an axis of size 1 expands",
    ),
    (
        re.compile(r"index (-?\d+) is out of bounds for dimension \d+ with size (\d+)"),
        "it reads index {0} along an axis of size {1}",
    ),
)


def read_crash(fn: Callable, case: Case, error: Exception) -> str | None:
    """What a crash inside the learner's code says about its shapes, in the learner's terms:
    the line that raised, what a shape error's sizes are (which argument's axis has each size),
    and the case's argument shapes. ``None`` when the traceback holds no line of the learner's
    code."""
    frame = _learner_frame(error)
    if frame is None:
        return None
    arguments = _arguments(inspect.unwrap(fn), case)
    line = (frame.line or "").strip()
    if len(line) > 60:
        line = line[:57] + "..."
    parts = [f'your line "{line}" (in {frame.name})' if line else f"your function {frame.name}"]
    for pattern, meaning in _SHAPE_ERRORS:
        found = pattern.search(str(error))
        if not found:
            continue
        sizes = [int(s) for s in found.groups()[:2]]
        parts.append(meaning.format(*sizes))
        named = ["0 is an empty slice (one that starts past the end of its axis)"] * (0 in sizes)
        for size in dict.fromkeys(sizes):
            sources = _sources_of(size, arguments) if size > 0 else []
            if sources:
                named.append(f"{size} is {' or '.join(sources[:3])}")
        if named:
            parts.append("on this case " + ", ".join(named))
        break
    inputs = ", ".join(f"{name} {_described(value)}" for name, value in arguments)
    return "; ".join(parts) + f" (your arguments: {inputs})"


def close(got: Any, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """Whether ``got`` is a tensor of ``expected``'s shape whose values are close to it."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    return torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol)


def difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    """Where ``got`` is farthest from ``expected``, and both values there."""
    diff = (got.double() - expected.double()).abs().nan_to_num(nan=math.inf)
    index = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return (
        f"largest difference {diff.max().item():.3g} at index {list(index)} "
        f"(got {got[index].item():.4g}, expected {expected[index].item():.4g})"
    )


# The names of results that take a plural verb.
_PLURAL = {"weights", "outputs", "cached keys", "scores", "top indices", "values", "cached values"}


def the(what: str, verb: str) -> str:
    """'the output differs', 'the weights differ': the verb agrees with the noun."""
    if what in _PLURAL:
        verb = {"has": "have", "is": "are"}.get(verb, verb.removesuffix("s"))
    return f"the {what} {verb}"


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing a result computed in ``dtype`` with a float64 reference."""
    return {torch.float16: (3e-3, 3e-3), torch.bfloat16: (2e-2, 2e-2)}.get(dtype, (1e-5, 1e-4))


def match_variant(
    got: Sequence[torch.Tensor], variants: dict[str, Callable[[], Sequence[torch.Tensor]]], tol
) -> str | None:
    """The key of the first wrong variant whose results all match ``got``.

    A key may carry a suffix after a slash (``"merge_wrong_permutation/0312"``): several ways of
    making one mistake, all named by the part before the slash.
    """
    for key, compute in variants.items():
        try:
            expected = compute()
        except RuntimeError:  # a variant that makes no sense for these shapes
            continue
        if all(close(g, e, *tol) for g, e in zip(got, expected, strict=True)):
            return key.partition("/")[0]
    return None


@dataclass
class Result:
    """One tensor the learner's function returned, beside the library's."""

    name: str  # as the messages say it: "output", "weights", "top indices"
    got: torch.Tensor
    expected: torch.Tensor
    exact: bool = False  # compared for equality (indices), not within a tolerance
    dtype: bool = True  # its dtype must be the expected one
    finite: bool = True  # NaN or inf is reported before the values are compared
    expected_dtype: str | None = None  # how the message names the expected dtype, if not str()
    values: str | None = None  # what the message calls its values when they differ, if not name

    def matches(self, tol: tuple[float, float]) -> bool:
        if self.exact:
            return torch.equal(self.got, self.expected)
        return close(self.got, self.expected, *tol)


def compare(
    fn_name: str,
    case: Case,
    results: Sequence[Result],
    tol: tuple[float, float],
    *,
    variants: dict[str, Callable[[], Sequence[torch.Tensor]]] | None = None,
    shape_mistake: Callable[[str, tuple[torch.Size, ...]], str | None] | None = None,
    nonfinite: Callable[[str, torch.Tensor], tuple[str, str | None] | None] | None = None,
    report_first: Sequence[str] = (),
    diagnose: Callable[[tuple[torch.Tensor, ...]], tuple[str, str] | None] | None = None,
    fallback: Callable[[tuple[torch.Tensor, ...]], str | None] | None = None,
    locate: Callable[[tuple[torch.Tensor, ...]], str | None] | None = None,
) -> None:
    """Compare the learner's results with the library's, or fail with a diagnosis.

    The steps, each over all ``results`` in order before the next: shapes (the mistake from
    ``shape_mistake(name, shapes of all results)``), dtypes (``wrong_dtype``), NaN or inf
    (``nonfinite(name, bool mask of the bad entries)`` gives what the result contains and the
    mistake, or ``None`` for "NaN or inf" and no known mistake), then the values, within
    ``tol = (atol, rtol)`` (or exactly, for an ``exact`` result). When a value differs:
    ``diagnose(got)`` may fail with its own ``(problem, mistake)``; otherwise the problem is the
    first differing result (those named in ``report_first`` before the others) and the mistake
    is the first of ``variants`` (key -> results of one wrong computation) that ``got`` matches,
    else ``fallback(got)``; when none fits, ``locate(got)`` may say which part of the result is
    wrong (see :func:`fail`).

    Args:
        fn_name: The learner's function's name.
        case: The case the results came from.
        results: The learner's tensors, each with the library's, all of them tensors.
        tol: ``(atol, rtol)`` for the values (see :func:`tolerance`).

    Raises:
        AssertionError: On the first step a result fails (see :func:`fail`).
    """
    shapes = tuple(result.got.shape for result in results)
    for result in results:
        if result.got.shape != result.expected.shape:
            fail(
                fn_name,
                case,
                f"{the(result.name, 'has')} shape {list(result.got.shape)}, "
                f"expected {list(result.expected.shape)}",
                shape_mistake(result.name, shapes) if shape_mistake else None,
                where=shape_where(result.got.shape, result.expected.shape),
            )
    for result in results:
        if result.dtype and result.got.dtype != result.expected.dtype:
            expected = result.expected_dtype or result.expected.dtype
            fail(
                fn_name,
                case,
                f"{the(result.name, 'is')} {result.got.dtype}, expected {expected}",
                "wrong_dtype",
            )
    for result in results:
        bad = ~result.got.isfinite() if result.finite else None
        if bad is not None and bad.any():
            found = nonfinite(result.name, bad) if nonfinite else None
            what, mistake = found or ("NaN or inf", None)
            fail(fn_name, case, f"{the(result.name, 'contains')} {what}", mistake)
    if all(result.matches(tol) for result in results):
        return
    got = tuple(result.got for result in results)
    special = diagnose(got) if diagnose else None
    if special:
        fail(fn_name, case, *special)
    ordered = sorted(results, key=lambda result: result.name not in report_first)
    result = next(result for result in ordered if not result.matches(tol))
    if result.exact:
        expected = result.expected.tolist()
        problem = f"{the(result.name, 'is')} {result.got.tolist()}, expected {expected}"
    else:
        what = result.values or result.name
        problem = f"{the(what, 'differs')}: {difference(result.got, result.expected)}"
    mistake = match_variant(got, variants, tol) if variants else None
    if mistake is None and fallback:
        mistake = fallback(got)
    where = locate(got) if mistake is None and locate else None
    fail(fn_name, case, problem, mistake, where)


def shape_where(got: torch.Size, expected: torch.Size) -> str:
    """Which axes of a wrongly shaped result are wrong, in words: axes in the wrong order, a
    missing or extra axis, or the first axis whose size differs."""
    got, expected = list(got), list(expected)
    if sorted(got) == sorted(expected) and len(set(expected)) == len(expected):
        order = [expected.index(size) for size in got]
        return (
            "the right axes in the wrong order: yours are the expected axes "
            f"{', '.join(map(str, order))} in that order (a transpose or permute too many or "
            "too few, or an operation along the wrong dim)"
        )
    if len(got) != len(expected):
        more = "more" if len(got) > len(expected) else "fewer"
        return (
            f"{more} axes than expected ({len(got)} instead of {len(expected)}): an axis kept "
            "or dropped by a reduction, a view or an unsqueeze"
        )
    axis = next(k for k, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
    return (
        f"axis {axis} has size {got[axis]}, expected {expected[axis]}: check which size each "
        "operation along that axis uses"
    )


def randn(generator: torch.Generator, *shape: int, dtype=torch.float32) -> torch.Tensor:
    """Standard normal entries drawn in float64 from ``generator``, then cast to ``dtype``."""
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def success(fn: Callable, cases: Sequence[Case]) -> None:
    """Print the one line of a check that passed."""
    print(f"✓ {name_of(fn)} matches the library on all {len(cases)} cases.")


def call_quietly(fn: Callable, args: tuple) -> Any:
    """``fn(*args)`` without gradients, or ``None`` if it raises (a probe of a diagnosis)."""
    try:
        with torch.no_grad():
            return fn(*args)
    except Exception:  # noqa: BLE001 - any crash is a behaviour the diagnosis reads
        return None


def same_behaviour(
    got: Sequence[Any],
    expected: Sequence[Callable[[], Sequence[torch.Tensor]]],
    right: Sequence[Sequence[torch.Tensor]],
    tol: tuple[float, float] | None = None,
) -> bool:
    """Whether a learner's results on a battery of probes are the signature of one mistake.

    ``got[i]`` is what the learner's function returned on probe ``i`` (``None`` if it raised),
    ``expected[i]()`` computes the wrong variant on that probe (raising ``RuntimeError`` where it
    makes no sense, as the learner's code would crash), ``right[i]`` the right results. The
    signature matches when the learner's function crashes exactly where the variant does, agrees
    with it everywhere else, and on at least one probe where both run the variant differs from the
    right answer.
    """
    telling = False
    for result, compute, correct in zip(got, expected, right, strict=True):
        try:
            wrong = compute()
        except (RuntimeError, IndexError, ValueError):
            wrong = None
        if (result is None) != (wrong is None):
            return False
        if wrong is None:  # both crash: consistent, but a crash alone tells nothing
            continue
        results = (result,) if isinstance(result, torch.Tensor) else result
        if not isinstance(results, tuple | list) or len(results) != len(wrong):
            return False
        for r, w in zip(results, wrong, strict=True):
            if not isinstance(r, torch.Tensor):
                return False
            atol, rtol = tol or tolerance(r.dtype)
            if r.shape != w.shape or not torch.allclose(
                r.double(), w.double(), atol=atol, rtol=rtol, equal_nan=True
            ):
                return False
        telling = telling or not all(
            w.shape == c.shape
            and torch.allclose(w.double(), c.double(), atol=1e-6, rtol=1e-5, equal_nan=True)
            for w, c in zip(wrong, correct, strict=True)
        )
    return telling


def differing(got: torch.Tensor, expected: torch.Tensor, dim: int, atol: float, rtol: float):
    """The indices along ``dim`` where ``got`` and ``expected`` differ anywhere (a list)."""
    bad = ~torch.isclose(got.double(), expected.double(), atol=atol, rtol=rtol)
    per_index = bad.movedim(dim, 0).reshape(bad.shape[dim], -1).any(dim=1)  # [size of dim]
    return per_index.nonzero().flatten().tolist()


def listed(indices: list[int], limit: int = 6) -> str:
    """'1, 2 and 4', or the first few and a count."""
    words = [str(i) for i in indices[:limit]]
    if len(indices) > limit:
        return f"{', '.join(words)} and {len(indices) - limit} more"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
