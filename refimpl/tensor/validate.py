"""Argument checks of the Tensor API (spec/api_errors.md): one helper per kind of argument, each raising the SpecError
subclass that API.ERRORS gives for the fault, with the clause first and the argument named. Ops call them on their
arguments before they build any graph, so a refused call leaves nothing behind."""
from __future__ import annotations

import operator
from typing import Any, Sequence

from refimpl.dtype import py_scalar
from refimpl.helpers import SpecIndexError, SpecOverflowError, SpecRuntimeError, SpecTypeError, SpecValueError

# API.ARGS.int-range: the Python ints some integer dtype holds (int64's minimum to uint64's maximum)
INT_LO, INT_HI = -(1 << 63), (1 << 64) - 1


def integer(v: Any, name: str, clause: str = "API.ARGS.size") -> int:
  """An int argument: a Python int or anything with __index__ (numpy ints, a bound Variable, API.VARIABLE.value); a
  float, even 2.0, is a TypeError (API.ARGS.size)."""
  if isinstance(v, float) or not hasattr(type(v), "__index__"):
    raise SpecTypeError(clause, f"{name}={v!r} must be an int, not {type(v).__name__}")
  return operator.index(v)


def size(v: Any, name: str = "size", clause: str = "API.ARGS.size") -> int:
  """A size: an int >= 0 (API.ARGS.size)."""
  n = integer(v, name, clause)
  if n < 0: raise SpecValueError(clause, f"{name}={n} is negative: sizes are ints >= 0")
  return n


def shape(shape: Sequence[Any], name: str = "shape", clause: str = "API.ARGS.size", infer: bool = False
          ) -> tuple[int, ...]:
  """A shape: sizes >= 0, and -1 where the op infers a size (`infer`, API.ARGS.infer); `f(2, 3)` and `f((2, 3))`
  alike."""
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = shape[0]
  out = tuple(integer(s, name, clause) for s in shape)
  for s in out:
    if s < 0 and not (infer and s == -1):
      raise SpecValueError("API.ARGS.infer" if infer else clause, f"{name}={out}: {s} is not a size (ints >= 0"
                           f"{', or -1 for one inferred size' if infer else ''})")
  return out


def positive(v: Any, name: str, clause: str = "API.ARGS.positive") -> int:
  """A stride, dilation, kernel size or count that must be >= 1 (API.ARGS.positive)."""
  n = integer(v, name, clause)
  if n < 1: raise SpecValueError(clause, f"{name}={n} must be >= 1")
  return n


def per_axis(v: Any, m: int, name: str, clause: str = "API.ARGS.count", least: int | None = 1) -> tuple[int, ...]:
  """One int per spatial axis from an int or a sequence of `m` ints (API.ARGS.count), each >= `least` (None: any)."""
  vals = (v,) * m if not isinstance(v, (tuple, list)) else tuple(v)
  if len(vals) != m: raise SpecValueError(clause, f"{name}={v!r} needs 1 or {m} values, one per spatial axis")
  out = tuple(integer(x, name, "API.ARGS.size") for x in vals)
  if least is not None and any(x < least for x in out):
    raise SpecValueError("API.ARGS.positive" if least == 1 else "API.ARGS.size",
                         f"{name}={v!r}: each must be >= {least}")
  return out


def axis(a: Any, ndim: int, name: str = "axis", clause: str = "API.ARGS.axis") -> int:
  """An axis of a tensor of `ndim` axes, negative from the end: in [-n, n) with n = max(ndim, 1), so a 0-d tensor has
  axis 0 (and -1) as in torch (API.ARGS.axis). Returns it in [0, n)."""
  a = integer(a, name, clause)
  n = max(ndim, 1)
  if not -n <= a < n: raise SpecIndexError(clause, f"{name}={a} is out of range for a tensor of {ndim} dims "
                                           f"(expected [{-n}, {n - 1}])")
  return a % n


def axes(v: Any, ndim: int, name: str = "axis", clause: str = "API.ARGS.axes") -> tuple[int, ...]:
  """An int or a sequence of axes, each an API.ARGS.axis, none named twice (API.ARGS.axes); in the given order."""
  given = (v,) if not isinstance(v, (tuple, list)) else tuple(v)
  out = tuple(axis(a, ndim, name) for a in given)
  if len(set(out)) != len(out):
    raise SpecValueError(clause, f"{name}={v!r} names axis {next(a for a in out if out.count(a) > 1)} more than once")
  return out


def nonzero_step(step: Any, name: str = "step", clause: str = "API.ARGS.step") -> Any:
  """A step of a range: any number but 0 (API.ARGS.step)."""
  if step == 0: raise SpecValueError(clause, f"{name}=0: a range's step must not be 0")
  return step


def python_int(v: int, what: str = "value", clause: str = "API.ARGS.int-range", inferred: bool = False) -> int:
  """A Python int that must become an integer dtype fits one of them, [-2**63, 2**64) (API.ARGS.int-range); inside
  that range DT.CONST wraps it into the target type. With `inferred` (no dtype given: the int takes int64 at most,
  DT.DEFAULT.wide) it must fit int64."""
  hi = (1 << 63) - 1 if inferred else INT_HI
  if not INT_LO <= v <= hi:
    raise SpecOverflowError(clause, f"{what} {v} fits no integer dtype {'without a dtype given ' if inferred else ''}"
                            f"(the range is [-2**63, 2**{63 if inferred else 64} - 1])")
  return v


def ints_in_data(data: Any, inferred: bool = False, clause: str = "API.ARGS.int-range") -> None:
  """Every Python int in nested lists or tuples fits an integer dtype (API.ARGS.int-range, see python_int)."""
  stack = [data]
  while stack:
    x = stack.pop()
    if isinstance(x, (list, tuple)): stack.extend(x)
    elif isinstance(x, int) and not isinstance(x, bool): python_int(x, "the element", clause, inferred)


def operands(ok: bool, clause: str, message: str) -> None:
  """Operands that must fit together and do not (API.ARGS.operands): RuntimeError, as torch."""
  if not ok: raise SpecRuntimeError(clause, message)


def value(ok: bool, clause: str, message: str) -> None:
  """An argument whose value is refused (ValueError, API.ERRORS)."""
  if not ok: raise SpecValueError(clause, message)


def kind(ok: bool, clause: str, message: str) -> None:
  """An argument of the wrong type (TypeError, API.ERRORS)."""
  if not ok: raise SpecTypeError(clause, message)


def index(ok: bool, clause: str, message: str) -> None:
  """An index or axis out of range (IndexError, API.ERRORS)."""
  if not ok: raise SpecIndexError(clause, message)


_KNOWN_DEVICES: set[str] = set()


def device(name: Any) -> str:
  """A device name, canonical ('cpu' -> 'CPU', 'CL:0' -> 'CL'), whose base is a registered device (DEV.REGISTRY):
  an unknown name is a ValueError when the tensor is made, not when it is first realized."""
  from refimpl.device import Device
  if not isinstance(name, str): raise SpecTypeError("DEV.REGISTRY", f"device={name!r} must be a str")
  canon = Device.canonicalize(name)
  base = canon.partition(":")[0]
  if base not in _KNOWN_DEVICES:
    _KNOWN_DEVICES.update(Device.names())
    if base not in _KNOWN_DEVICES:
      raise SpecValueError("DEV.REGISTRY", f"device={name!r}: no device named {base!r}; registered: "
                           f"{sorted(_KNOWN_DEVICES)}")
  return canon


def int_exponent(dtype: Any, x: Any) -> None:
  """An integer tensor's Python exponent is not a negative int (TENSOR.POW.int-negative, torch's refusal: the values
  are known here, unlike a tensor exponent's, which OP.POW.negative-exponent defines)."""
  py = py_scalar(x)
  if isinstance(py, int) and not isinstance(py, bool) and py < 0:
    raise SpecValueError("TENSOR.POW.int-negative", f"an integer tensor ({dtype!r}) to the negative power {py}: cast "
                         "it to a float first")
