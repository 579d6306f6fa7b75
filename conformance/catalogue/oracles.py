"""Executable-spec oracles for the catalogue: expected values computed with `refimpl.uop.semantics.exec_alu`, one
element at a time, for the inputs where torch is undefined or differs from the spec on purpose (DESIGN.md, "Three
oracles"). Each returns a numpy array of the result dtype (bfloat16 values as float32)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from conformance.strategies import NP, Case
from refimpl.dtype import to_dtype
from refimpl.uop import Ops
from refimpl.uop.semantics import alu_result_dtype, exec_alu

__all__ = ["py_value", "alu", "elementwise", "floordiv", "mod"]


def py_value(v, dtype: str):
  """A numpy scalar as the Python value of the value model (OP.VALUES): bool, int or float."""
  if dtype == "bool": return bool(v)
  if dtype.startswith(("int", "uint")): return int(v)
  return float(v)


def elementwise(fn: Callable[..., object], out: Callable[[Case], str]) -> Callable[[Case], np.ndarray]:
  """An oracle that broadcasts the inputs and applies `fn(dtypes, *python_values)` to each position; `out(case)` is
  the result dtype."""
  def oracle(case: Case) -> np.ndarray:
    arrays = np.broadcast_arrays(*case.inputs)
    shape = arrays[0].shape if arrays else ()
    dt = out(case)
    flat = [fn(case, *(py_value(a[i], d) for a, d in zip(arrays, case.dtypes))) for i in np.ndindex(shape)]
    return np.array(flat, dtype=NP[dt]).reshape(shape)
  return oracle


def alu(op: str, target: Callable[[Case], str] | None = None) -> Callable[[Case], np.ndarray]:
  """exec_alu of `op` on the broadcast inputs (the last input's dtype is the operand dtype, so WHERE's bool condition
  comes first); `target(case)` names the result dtype of CAST and BITCAST."""
  o = Ops[op]

  def out(case: Case) -> str:
    if target is not None: return target(case)
    src = to_dtype(case.dtypes[-1])
    return next(n for n in NP if to_dtype(n) == alu_result_dtype(o, src))

  def fn(case: Case, *vals):
    src = to_dtype(case.dtypes[-1])
    return exec_alu(o, to_dtype(out(case)), list(vals), src)
  return elementwise(fn, out)


def _floordiv(case: Case, a: int, b: int) -> int:
  # Tensor `//` on integers is floor division; at b = 0 it keeps CDIV's answer (OP.CDIV.zero), and INT_MIN // -1
  # wraps (OP.CDIV.overflow): both are what exec_alu's CDIV gives there
  dt = to_dtype(case.dtypes[0])
  if b == 0: return exec_alu(Ops.CDIV, dt, [a, b])
  from refimpl.dtype import wrap_int
  return wrap_int(a // b, dt)


def _mod(case: Case, a: int, b: int) -> int:
  # the remainder with the divisor's sign (Python's %); at b = 0 CMOD's answer, a (OP.CMOD.zero)
  return a if b == 0 else a % b


floordiv = elementwise(_floordiv, lambda case: case.dtypes[0])
mod = elementwise(_mod, lambda case: case.dtypes[0])
