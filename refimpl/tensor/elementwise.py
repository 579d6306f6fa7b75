"""Elementwise arithmetic: casts, broadcasting and promotion (DT.PROMOTE), + - * /, comparisons, where,
floor division and remainder, pow, bitwise ops and the dtype shorthands."""
from __future__ import annotations

import math


from refimpl.dtype import (DTypeLike, dtypes, least_upper_dtype, least_upper_float, scalar_result_dtype,
                           to_dtype)
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor.args import _broadcast_shape
from refimpl.tensor.core import Tensor


class ElementwiseOps:
  def cast(self, dtype: DTypeLike) -> Tensor:
    """Convert the values to `dtype` (OP.CAST: float to int truncates and saturates)."""
    dtype = to_dtype(dtype)
    return self if dtype == self.dtype else Tensor(UOp(Ops.CAST, dtype, (self.uop,)))

  def _broadcasted(self, y, reverse: bool = False) -> tuple[Tensor, Tensor]:
    if isinstance(y, Tensor):
      out = least_upper_dtype(self.dtype, y.dtype)
      x, y = self.cast(out), y.cast(out)
    else:
      out = scalar_result_dtype(self.dtype, y)
      x = self.cast(out)
      y = Tensor(UOp.const(out, y, x.device)).reshape((1,) * x.ndim)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x._expand_to(shape), y._expand_to(shape)

  def _expand_to(self, shape) -> Tensor:
    t = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    return t.expand(shape)

  def _alu(self, op: Ops, *src: Tensor) -> Tensor:
    dtype = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else self.dtype
    return Tensor(UOp(op, dtype, (self.uop, *(s.uop for s in src))))

  def add(self, y, reverse=False) -> Tensor:
    """x + y with broadcasting and promotion (DT.PROMOTE, DT.SCALAR-PROMOTE)."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.ADD, y)
  def sub(self, y, reverse=False) -> Tensor:
    """x - y with broadcasting and promotion."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.SUB, y)
  def mul(self, y, reverse=False) -> Tensor:
    """x * y with broadcasting and promotion."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.MUL, y)

  def div(self, y, reverse=False) -> Tensor:
    """True division: integer operands are divided as default floats (DT.PROMOTE.float)."""
    x, y = self._broadcasted(y, reverse)
    dt = least_upper_float(x.dtype)
    return x.cast(dt)._alu(Ops.FDIV, y.cast(dt))

  def maximum(self, y) -> Tensor:
    """Elementwise max; NaN propagates (OP.MAX.nan)."""
    x, y = self._broadcasted(y); return x._alu(Ops.MAX, y)
  def minimum(self, y) -> Tensor:
    """Elementwise min; NaN propagates (floats: -max(-x, -y))."""
    x, y = self._broadcasted(y)
    return -((-x).maximum(-y)) if dtypes.is_float(x.dtype) else (x < y).where(x, y)

  def __lt__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPLT, y)
  def __gt__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._alu(Ops.CMPLT, y)
  def __eq__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPEQ, y)  # type: ignore[override]
  def __ne__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPNE, y)  # type: ignore[override]
  __hash__ = object.__hash__

  def where(self, a, b) -> Tensor:
    """`a` where this bool tensor is true, else `b`."""
    if isinstance(a, Tensor): a_, b_ = a._broadcasted(b)
    elif isinstance(b, Tensor): b_, a_ = b._broadcasted(a)
    else:
      a_, b_ = Tensor(a, device=self.device)._broadcasted(b)
    shape = _broadcast_shape(self.shape, a_.shape)
    c, a_, b_ = self.cast(dtypes.bool)._expand_to(shape), a_._expand_to(shape), b_._expand_to(shape)
    return Tensor(UOp(Ops.WHERE, a_.dtype, (c.uop, a_.uop, b_.uop)))

  def __neg__(self) -> Tensor:
    return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.NEG)
  def neg(self) -> Tensor:
    """-x (logical not for bool, like tinygrad; torch refuses bool)."""
    return -self
  def logical_not(self) -> Tensor:
    """x == 0 as bool (NaN counts as true, so its logical not is false)."""
    return self.cast(dtypes.bool)._alu(Ops.CMPNE, Tensor(True, device=self.device)._expand_to(self.shape))
  def relu(self) -> Tensor:
    """max(x, 0), keeping -0.0 and NaN as they are (torch): x where x < 0 is false. At x = +-0 the value passes
    through DETACH, so the gradient there is 0 as in torch, and NaN still gets the cotangent (GRAD.CHECK.tensor)."""
    return (self < 0).where(0, (self == 0).where(self.detach(), self))
  def exp2(self) -> Tensor:
    """2**x (EXP2) in the default float for non-floats."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.EXP2)
  def log2(self) -> Tensor:
    """log2 x (LOG2)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.LOG2)
  def sqrt(self) -> Tensor:
    """Square root (SQRT)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.SQRT)
  def sin(self) -> Tensor:
    """Sine (SIN)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.SIN)
  def reciprocal(self) -> Tensor:
    """1 / x (RECIPROCAL)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.RECIPROCAL)

  def __le__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPLT, y) | x._alu(Ops.CMPEQ, y)
  def __ge__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._alu(Ops.CMPLT, y) | x._alu(Ops.CMPEQ, y)

  # dtype shorthands
  def float(self) -> Tensor:
    """Cast to float32."""
    return self.cast(dtypes.float32)
  def half(self) -> Tensor:
    """Cast to float16."""
    return self.cast(dtypes.float16)
  def double(self) -> Tensor:
    """Cast to float64."""
    return self.cast(dtypes.float64)
  def int(self) -> Tensor:
    """Cast to int32 (torch's .int() too)."""
    return self.cast(dtypes.int32)
  def long(self) -> Tensor:
    """Cast to int64."""
    return self.cast(dtypes.int64)
  def bool(self) -> Tensor:
    """Cast to bool (x != 0; NaN is true)."""
    return self.cast(dtypes.bool)

  def bitcast(self, dtype: DTypeLike) -> Tensor:
    """Reinterpret the bits as `dtype` of the same itemsize (OP.BITCAST)."""
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize:
      raise SpecError("OP.BITCAST.size", f"cannot bitcast {self.dtype!r} to {dtype!r}: itemsizes differ")
    return self if dtype == self.dtype else Tensor(UOp(Ops.BITCAST, dtype, (self.uop,)))

  # integer-valued division with torch's floor semantics
  def _floor_correction(self, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """CDIV and CMOD of integers, and the mask of the places where truncation and floor differ: a nonzero remainder
    whose sign differs from the divisor's. x // 0 and x % 0 keep OP.CDIV.zero / OP.CMOD.zero (-1 and x)."""
    q, r = self._alu(Ops.CDIV, y), self._alu(Ops.CMOD, y)
    fix = (r != 0) & ((r < 0) != (y < 0)) & (y != 0)
    return q, r, fix

  def __floordiv__(self, y) -> Tensor:
    """Floor division (torch's `//`). Integers: CDIV corrected by one where the signs call for it. Floats: the floor
    of the exact quotient: floor(x / y), less one where the rounded quotient landed on or past an integer the exact
    one does not reach (the residual x - q*y, from one MULACC, then has the wrong sign). Exact while |x / y| < 2**p;
    beyond that every float is an integer and the result is the rounded quotient (ACC.RANGE)."""
    x, y = self._broadcasted(y)
    return x._floordiv(y)
  def __rfloordiv__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._floordiv(y)

  def _float_floor_quotient(self, y: Tensor) -> tuple[Tensor, Tensor]:
    """floor(x / y) for floats and the residual x - floor(x / y) * y rounded once. Rounding x / y can only move it up
    to the next integer (rounding is monotone), so floor(FDIV) is the floor or one more; MULACC(-q, y, x) is the
    exact residual rounded once, and a nonzero residual whose sign differs from y's says it is one more. A NaN
    residual (0 * inf) corrects nothing."""
    q = self._alu(Ops.FDIV, y).floor()
    r = (-q)._alu(Ops.MULACC, y, self)
    over = ((r < 0) & (y > 0)) | ((r > 0) & (y < 0))
    return over.where(q - 1, q), over.where(r + y, r)

  def _floordiv(self, y: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype):
      q, _ = self._float_floor_quotient(y)
      # torch (and Python): a finite x over an infinite y of the other sign is -1, an infinite x gives NaN
      finite = (self - self) == 0
      q = (y.isinf() & (self != 0) & ((self < 0) != (y < 0))).where(-1.0, q)
      # torch: x // 0 is x / 0 for every x, so an infinite x gives an infinity there, not NaN
      return (finite | (y == 0)).where(q, math.nan)
    if self.dtype == dtypes.bool: raise SpecError("OP.CDIV", "floor division of bool tensors")
    q, _, fix = self._floor_correction(y)
    return fix.where(q - 1, q)

  def __mod__(self, y) -> Tensor:
    """Remainder with the sign of the divisor (torch's `%`, Python's). Integers: CMOD plus the divisor where the
    signs differ. Floats: x - floor(x / y) * y rounded once (a MULACC with the exact floor), so it is exact where
    torch's fmod-based result is, and a zero takes x's sign as torch's does. Where |x / y| >= 2**p the floor is not
    exact and neither is the remainder (ACC.MOD)."""
    x, y = self._broadcasted(y)
    return x._mod(y)
  def __rmod__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._mod(y)

  def _mod(self, y: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype):
      _, r = self._float_floor_quotient(y)
      r = (r == 0).where(self * 0, r)
      # torch (and Python): a finite x modulo an infinite y is x when the signs agree (or x is 0), else y
      finite = (self - self) == 0
      keep = (self == 0) | ((self < 0) == (y < 0))
      return (y.isinf() & finite).where(keep.where(self, y), r)
    if self.dtype == dtypes.bool: raise SpecError("OP.CMOD", "remainder of bool tensors")
    _, r, fix = self._floor_correction(y)
    return fix.where(r + y, r)

  def pow(self, y, reverse: bool = False) -> Tensor:
    """x ** y with the POW op (OP.POW): an int tensor to an int power stays int (negative powers follow
    OP.POW.negative-exponent where torch raises); a float operand makes it float. bool ** bool is x | ~y."""
    x, y = self._broadcasted(y, reverse)
    if x.dtype == dtypes.bool: return x | y.logical_not()
    return x._alu(Ops.POW, y)
  def __pow__(self, y) -> Tensor: return self.pow(y)
  def __rpow__(self, y) -> Tensor: return self.pow(y, True)

  # bitwise (bool and int only)
  def _bitwise(self, op: Ops, y, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(y, reverse)
    if dtypes.is_float(x.dtype): raise SpecError(f"OP.{op.name}", f"bitwise {op.name} of {x.dtype!r}")
    return x._alu(op, y)
  def __and__(self, y) -> Tensor: return self._bitwise(Ops.AND, y)
  def __or__(self, y) -> Tensor: return self._bitwise(Ops.OR, y)
  def __xor__(self, y) -> Tensor: return self._bitwise(Ops.XOR, y)
  def __rand__(self, y) -> Tensor: return self._bitwise(Ops.AND, y, True)
  def __ror__(self, y) -> Tensor: return self._bitwise(Ops.OR, y, True)
  def __rxor__(self, y) -> Tensor: return self._bitwise(Ops.XOR, y, True)
  def __lshift__(self, y) -> Tensor:
    """x << y; the count is taken modulo the bit width (OP.SHL.count)."""
    return self._bitwise(Ops.SHL, y)
  def __rshift__(self, y) -> Tensor:
    """x >> y: arithmetic for signed, logical for unsigned (OP.SHR)."""
    return self._bitwise(Ops.SHR, y)
  def __rlshift__(self, y) -> Tensor: return self._bitwise(Ops.SHL, y, True)
  def __rrshift__(self, y) -> Tensor: return self._bitwise(Ops.SHR, y, True)
  def __invert__(self) -> Tensor:
    """Bitwise not (logical not for bool): XOR with all ones."""
    if dtypes.is_float(self.dtype): raise SpecError("OP.XOR", f"bitwise not of {self.dtype!r}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1



  __add__, __sub__, __mul__, __truediv__ = add, sub, mul, div
  def __radd__(self, y): return self.add(y, True)
  def __rsub__(self, y): return self.sub(y, True)
  def __rmul__(self, y): return self.mul(y, True)
  def __rtruediv__(self, y): return self.div(y, True)
