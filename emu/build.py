"""A small builder for hand-written linear programs (tests, examples, benchmarks).

`Builder.add(u)` appends `u` after any of its sources not yet in the list, so expressions built with UOp's Python
operators can be added in one call; control flow (RANGE/END, IF/ENDIF, BARRIER) is appended where it is called."""
from __future__ import annotations

from refimpl.device import LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.uop import Ops
from refimpl.uop.ops import UOp


class Builder:
  def __init__(self, name: str):
    self.name, self.uops, self._seen = name, [], set()

  def add(self, u: UOp) -> UOp:
    """Append `u` (and, first, its sources that are not in the list yet)."""
    for s in u.src:
      if s not in self._seen: self.add(s)
    if u not in self._seen: self._seen.add(u); self.uops.append(u)
    return u

  # ---- parameters and memory ----
  def glob(self, slot: int, dtype: DType, size: int = -1) -> UOp:
    return self.add(UOp(Ops.DEFINE_GLOBAL, dtype.ptr(size), arg=slot))
  def local(self, name: str, dtype: DType, size: int) -> UOp:
    return self.add(UOp(Ops.DEFINE_LOCAL, dtype.ptr(size, "local"), arg=name))
  def reg(self, arg: int, dtype: DType, size: int = 1) -> UOp:
    return self.add(UOp(Ops.DEFINE_REG, dtype.ptr(size, "reg"), arg=arg))
  def var(self, name: str, lo: int, hi: int) -> UOp: return self.add(UOp.variable(name, lo, hi))
  def const(self, dtype: DType, value) -> UOp: return self.add(UOp.const(dtype, value))
  def special(self, name: str, size: int | UOp) -> UOp:
    size = size if isinstance(size, UOp) else UOp.const(dtypes.int32, size)
    return self.add(UOp(Ops.SPECIAL, size.dtype, (size,), name))

  def index(self, ptr: UOp, idx, gate: UOp | None = None) -> UOp:
    idx = idx if isinstance(idx, UOp) else UOp.const(dtypes.int32, idx)
    return self.add(UOp(Ops.INDEX, ptr.dtype, (ptr, idx) + ((gate,) if gate is not None else ())))
  def load(self, ptr: UOp, idx, gate: UOp | None = None, arg=None) -> UOp:
    """LOAD of ptr[idx]; `arg` tells apart two loads of one address (a UOp appears once in a program)."""
    return self.add(UOp(Ops.LOAD, ptr.dtype.base, (self.index(ptr, idx, gate),), arg))
  def store(self, ptr: UOp, idx, value, gate: UOp | None = None, *ranges: UOp) -> UOp:
    value = value if isinstance(value, UOp) else UOp.const(ptr.dtype.base, value)
    return self.add(UOp(Ops.STORE, dtypes.void, (self.index(ptr, idx, gate), value, *ranges)))

  # ---- control flow ----
  def range(self, end, rid=0, dtype: DType = dtypes.int32) -> UOp:
    end = end if isinstance(end, UOp) else UOp.const(dtype, end)
    return self.add(UOp(Ops.RANGE, end.dtype, (end,), (rid, "r")))
  def end(self, last: UOp, *ranges: UOp) -> UOp: return self.add(UOp(Ops.END, dtypes.void, (last, *ranges)))
  def if_(self, cond: UOp) -> UOp: return self.add(UOp(Ops.IF, dtypes.void, (cond,)))
  def endif(self, if_: UOp) -> UOp: return self.add(UOp(Ops.ENDIF, dtypes.void, (if_,)))
  def barrier(self, *deps: UOp) -> UOp: return self.add(UOp(Ops.BARRIER, dtypes.void, deps))
  def reduce(self, op: Ops, value: UOp, *ranges: UOp) -> UOp:
    return self.add(UOp(Ops.REDUCE, value.dtype, (value, *ranges), op))

  def program(self, global_size=(1, 1, 1), local_size=(1, 1, 1)) -> LinearProgram:
    return LinearProgram(self.name, tuple(self.uops), tuple(global_size), tuple(local_size))
