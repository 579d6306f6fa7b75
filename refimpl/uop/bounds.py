"""Value bounds of integer and bool UOps (spec/rewrites.md, RW.BOUNDS).

min_max(u) gives (lo, hi) with lo <= v <= hi for every value v that u can take. The symbolic rules lean on these
bounds, so each case below must be sound; tests/test_bounds.py checks them against evaluation on random graphs.
Interval arithmetic is done on unbounded Python ints; a result that leaves the dtype's range, where the real
operation would wrap, is widened to the whole range of the dtype."""
from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.dtype import dtypes, ConstType, PtrDType
from refimpl.uop.opcodes import Ops

if TYPE_CHECKING: from refimpl.uop.ops import UOp


def _full(u: UOp) -> tuple[ConstType, ConstType]:
  if u.dtype.count != 1 or u.dtype == dtypes.void or isinstance(u.dtype, PtrDType):
    return -float("inf"), float("inf")
  return dtypes.min(u.dtype), dtypes.max(u.dtype)


def _fit(u: UOp, lo, hi) -> tuple[ConstType, ConstType]:
  """The interval if it lies inside u's dtype, else the dtype's whole range (the operation may have wrapped)."""
  dlo, dhi = _full(u)
  if lo < dlo or hi > dhi: return dlo, dhi
  if dtypes.is_bool(u.dtype): return bool(lo), bool(hi)
  return lo, hi


def _trunc_div(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a >= 0) == (b > 0) else -q


def min_max(u: UOp) -> tuple[ConstType, ConstType]:
  if not (dtypes.is_int(u.dtype) or dtypes.is_bool(u.dtype)) or u.dtype.count != 1:
    if u.op is Ops.CONST and isinstance(u.arg, (int, float)): return u.arg, u.arg
    return _full(u)
  op, src = u.op, u.src
  if op is Ops.CONST: return u.arg, u.arg
  if op is Ops.DEFINE_VAR: return _fit(u, u.arg[1], u.arg[2])
  if op is Ops.BIND: return src[0].vmin, src[0].vmax
  if op is Ops.RANGE: return _fit(u, 0, max(0, src[0].vmax - 1))    # RANGE(end) runs 0 .. end-1
  if op is Ops.SPECIAL: return _fit(u, 0, max(0, src[0].vmax - 1))  # SPECIAL(size): a thread/group index
  if op is Ops.CAST:
    s = src[0]
    if dtypes.is_int(s.dtype) or dtypes.is_bool(s.dtype): return _fit(u, int(s.vmin), int(s.vmax))
    return _full(u)
  if op is Ops.WHERE:
    c, a, b = src
    if c.vmin == c.vmax: return (a.vmin, a.vmax) if c.vmin else (b.vmin, b.vmax)
    return min(a.vmin, b.vmin), max(a.vmax, b.vmax)
  if len(src) == 1:
    (a,) = src
    if op is Ops.NEG and not dtypes.is_bool(u.dtype): return _fit(u, -a.vmax, -a.vmin)
    return _full(u)
  a, b = src[0], src[1]
  if not all(dtypes.is_int(s.dtype) or dtypes.is_bool(s.dtype) for s in (a, b)): return _full(u)  # float compares
  alo, ahi, blo, bhi = int(a.vmin), int(a.vmax), int(b.vmin), int(b.vmax)
  if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
    if op is Ops.CMPLT:
      if ahi < blo: return True, True
      if alo >= bhi: return False, False
    elif ahi < blo or bhi < alo: return (op is Ops.CMPNE,) * 2
    elif alo == ahi == blo == bhi: return (op is Ops.CMPEQ,) * 2
    return False, True
  if op is Ops.ADD: return _fit(u, alo + blo, ahi + bhi)
  if op is Ops.SUB: return _fit(u, alo - bhi, ahi - blo)
  if op is Ops.MUL:
    corners = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
    return _fit(u, min(corners), max(corners))
  if op is Ops.MULACC:
    corners = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
    return _fit(u, min(corners) + int(src[2].vmin), max(corners) + int(src[2].vmax))
  if op is Ops.MAX: return _fit(u, max(alo, blo), max(ahi, bhi))
  if op is Ops.CDIV and blo == bhi and blo != 0:   # division by a known nonzero constant is monotonic in a
    q = (_trunc_div(alo, blo), _trunc_div(ahi, blo))
    return _fit(u, min(q), max(q))
  if op is Ops.CDIV and blo > 0:                   # positive divisor: |a / b| <= |a|
    return _fit(u, min(0, alo), max(0, ahi))
  if op is Ops.CMOD and blo > 0:                   # remainder has the sign of a and |a % b| < b, |a % b| <= |a|
    if alo >= 0 and ahi < blo: return alo, ahi
    return _fit(u, max(alo, -(bhi - 1)) if alo < 0 else 0, min(ahi, bhi - 1) if ahi > 0 else 0)
  if op is Ops.AND and (alo >= 0 or blo >= 0):     # a nonnegative operand bounds the result from both sides
    return _fit(u, 0, min(x for x in (ahi if alo >= 0 else None, bhi if blo >= 0 else None) if x is not None))
  if op in (Ops.OR, Ops.XOR) and alo >= 0 and blo >= 0:
    return _fit(u, 0 if op is Ops.XOR else max(alo, blo), (1 << max(ahi, bhi).bit_length()) - 1)
  if op is Ops.SHR and alo >= 0 and 0 <= blo == bhi < u.dtype.bits: return _fit(u, alo >> blo, ahi >> blo)
  if op is Ops.SHL and alo >= 0 and 0 <= blo == bhi < u.dtype.bits: return _fit(u, alo << blo, ahi << blo)
  return _full(u)
