"""Argument helpers of the Tensor API: shapes, axes, per-axis tuples, conv paddings and broadcasting. The checks
themselves are refimpl/tensor/validate.py's (spec/api_errors.md)."""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.helpers import SpecRuntimeError, SpecValueError
from refimpl.tensor import validate


def _shape_arg(shape, name: str = "shape") -> tuple[int, ...]:
  """A shape of sizes >= 0 given as f(2, 3) or f((2, 3)) (API.ARGS.size)."""
  return validate.shape(shape, name)


def _axis(a: int, n: int, name: str = "axis") -> int:
  """A possibly negative axis number, checked against `n` axes (API.ARGS.axis)."""
  return validate.axis(a, n, name)


_BITS_INT = {1: dtypes.uint8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _tuple(x, n: int, name: str = "argument", least: int | None = 1) -> tuple[int, ...]:
  """One int per spatial axis, each >= `least` (API.ARGS.count, API.ARGS.positive)."""
  return validate.per_axis(x, n, name, least=least)


def _conv_padding(padding, m: int) -> tuple[tuple[int, int], ...]:
  """Per spatial axis (before, after) from an int, m ints, or 2m ints in tinygrad's last-axis-first order."""
  if not isinstance(padding, (tuple, list)):
    p = validate.integer(padding, "padding")
    return ((p, p),) * m
  padding = tuple(validate.integer(p, "padding") for p in padding)
  if len(padding) == m: return tuple((p, p) for p in padding)
  if len(padding) == 2 * m: return tuple((padding[2 * i], padding[2 * i + 1]) for i in reversed(range(m)))
  raise SpecValueError("API.ARGS.count", f"padding={padding} needs 1, {m} or {2 * m} values for {m} spatial axes")


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
  """numpy broadcasting: align right, size-1 axes stretch (DT-independent, UOP.EXPAND). Shapes that do not broadcast
  are operands that do not fit (API.ARGS.operands: RuntimeError)."""
  n = max(len(a), len(b))
  a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
  out = []
  for x, y in zip(a, b):
    if x != y and 1 not in (x, y): raise SpecRuntimeError("UOP.EXPAND", f"shapes {a} and {b} do not broadcast")
    out.append(y if x == 1 else x)
  return tuple(out)
