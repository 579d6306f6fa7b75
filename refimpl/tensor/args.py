"""Argument helpers of the Tensor API: shapes, axes, per-axis tuples, conv paddings and broadcasting."""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.helpers import SpecError


def _shape_arg(shape) -> tuple[int, ...]:
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = shape[0]
  return tuple(int(s) for s in shape)


def _axis(a: int, n: int) -> int:
  """A possibly negative axis number, checked against `n` axes."""
  if not -max(n, 1) <= a < max(n, 1): raise IndexError(f"axis {a} is out of range for {n} dims")
  return a % max(n, 1)


_BITS_INT = {1: dtypes.uint8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _tuple(x, n: int) -> tuple[int, ...]:
  return (int(x),) * n if isinstance(x, int) else tuple(int(v) for v in x)


def _conv_padding(padding, m: int) -> tuple[tuple[int, int], ...]:
  """Per spatial axis (before, after) from an int, m ints, or 2m ints in tinygrad's last-axis-first order."""
  if isinstance(padding, int): return ((padding, padding),) * m
  padding = tuple(int(p) for p in padding)
  if len(padding) == m: return tuple((p, p) for p in padding)
  if len(padding) == 2 * m: return tuple((padding[2 * i], padding[2 * i + 1]) for i in reversed(range(m)))
  raise ValueError(f"padding {padding} for {m} spatial axes")


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
  """numpy broadcasting: align right, size-1 axes stretch (DT-independent, UOP.EXPAND)."""
  n = max(len(a), len(b))
  a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
  out = []
  for x, y in zip(a, b):
    if x != y and 1 not in (x, y): raise SpecError("UOP.EXPAND", f"shapes {a} and {b} do not broadcast")
    out.append(y if x == 1 else x)
  return tuple(out)

