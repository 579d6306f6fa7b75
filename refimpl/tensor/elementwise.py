"""Elementwise arithmetic: casts, broadcasting and promotion (DT.PROMOTE), + - * /, comparisons, where,
floor division and remainder, pow, bitwise ops and the dtype shorthands."""
from __future__ import annotations

import functools
import math
import operator

from refimpl.dtype import (DTypeLike, dtypes, least_upper_dtype, least_upper_float, py_scalar, scalar_result_dtype,
                           to_dtype)
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor import validate
from refimpl.tensor.args import _broadcast_shape
from refimpl.tensor.core import Tensor


_SIGNED_OF_SIZE = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _argfix(args: tuple) -> tuple:
  """f(a, b) and f([a, b]) alike."""
  return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else args


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
      if dtypes.is_int(out) and isinstance(py := py_scalar(y), int) and not isinstance(py, bool):
        validate.python_int(py, "the scalar operand")   # API.ARGS.int-range: DT.CONST wraps inside 64 bits only
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

  def add(self, x, reverse=False) -> Tensor:
    """self + x with broadcasting and promotion (DT.PROMOTE, DT.SCALAR-PROMOTE); `reverse` computes x + self."""
    a, b = self._broadcasted(x, reverse); return a._alu(Ops.ADD, b)
  def sub(self, x, reverse=False) -> Tensor:
    """self - x with broadcasting and promotion; `reverse` computes x - self."""
    a, b = self._broadcasted(x, reverse); return a._alu(Ops.SUB, b)
  def mul(self, x, reverse=False) -> Tensor:
    """self * x with broadcasting and promotion; `reverse` computes x * self."""
    a, b = self._broadcasted(x, reverse); return a._alu(Ops.MUL, b)

  def div(self, x, reverse=False, rounding_mode=None) -> Tensor:
    """self / x (TENSOR.DIV). rounding_mode None: true division, integer operands are divided as default floats
    (DT.PROMOTE.float). 'trunc' and 'floor': the exact quotient rounded toward zero or down, in the promoted dtype
    (integers stay integers, TENSOR.DIV.rounding)."""
    if rounding_mode not in (None, "trunc", "floor"):
      raise SpecValueError("TENSOR.DIV.rounding", f"rounding_mode={rounding_mode!r} is not None, 'trunc' or 'floor'")
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is None:
      dt = least_upper_float(a.dtype)
      return a.cast(dt)._alu(Ops.FDIV, b.cast(dt))
    if a.dtype == dtypes.bool:
      raise SpecTypeError("TENSOR.DIV.rounding",
                          f"rounding_mode={rounding_mode!r} division of bool tensors (torch refuses "
                      "it too)")
    if rounding_mode == "floor": return a._floordiv(b)
    # TENSOR.DIV.rounding: integers truncate with CDIV (x / 0 = -1, OP.CDIV.zero); floats truncate the exact quotient
    return a._trunc_quotient(b)[0] if dtypes.is_float(a.dtype) else a._alu(Ops.CDIV, b)

  def _trunc_quotient(self, y: Tensor) -> tuple[Tensor, Tensor]:
    """trunc(x / y) of the exact quotient for floats, and the remainder x - trunc(x / y) * y rounded once (fmod).
    Rounding x / y can carry its magnitude up onto the next integer (rounding is monotone), never further while
    |x / y| < 2**p; then MULACC's exact residual x - q*y has the sign opposite to x, and q is one too far from 0
    (ACC.RANGE). The residual's sign decides, as in _float_floor_quotient. The residual is computed as -(q*y - x)
    for an x with the sign bit set (s = -1, multiplications by +-1 are exact), so that an exact zero comes out as a
    zero of x's sign (TENSOR.FMOD.sign) without a WHERE that would cut its gradient."""
    # the quotient is a step function: its gradient is 0, and it is built on detached operands so that FDIV's rule
    # never divides that zero by a zero divisor (0/0 = NaN, where torch's gradient is 0)
    q = self.detach()._alu(Ops.FDIV, y.detach()).trunc()
    s = self._signbit().where(-1.0, 1.0).cast(self.dtype)   # one MULACC for both signs: no WHERE whose zero
    r = s * (-(s * q))._alu(Ops.MULACC, y, s * self)       # cotangent could meet an infinite q (0 * inf)
    over = ((r < 0) & (self > 0)) | ((r > 0) & (self < 0))
    step = q.sign()
    fixed = over.where(q - step, q)
    # a quotient corrected from +-1 to 0 takes the sign of the exact quotient, as trunc(-0.9) = -0.0
    return (over & (fixed == 0)).where(q * 0, fixed), over.where(r + y * step, r)

  def _signbit(self) -> Tensor:
    """Whether the sign bit is set: x < 0 for integers; for floats also -0.0 and a NaN with its sign bit set."""
    if not dtypes.is_float(self.dtype): return self < 0
    return self.bitcast(_SIGNED_OF_SIZE[self.dtype.itemsize]) < 0

  def maximum(self, x) -> Tensor:
    """Elementwise max; NaN propagates (OP.MAX.nan)."""
    a, b = self._broadcasted(x); return a._alu(Ops.MAX, b)
  def minimum(self, x) -> Tensor:
    """Elementwise min; NaN propagates (floats: -max(-a, -b))."""
    a, b = self._broadcasted(x)
    return -((-a).maximum(-b)) if dtypes.is_float(a.dtype) else (a < b).where(a, b)

  def __lt__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPLT, y)
  def __gt__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._alu(Ops.CMPLT, y)
  def __eq__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPEQ, y)  # type: ignore[override]
  def __ne__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPNE, y)  # type: ignore[override]
  __hash__ = object.__hash__

  def where(self, x, y) -> Tensor:
    """`x` where this tensor is true (nonzero), else `y`; both broadcast, their dtypes promote (OP.WHERE)."""
    if isinstance(x, Tensor): a, b = x._broadcasted(y)
    elif isinstance(y, Tensor): b, a = y._broadcasted(x)
    else: a, b = Tensor(x, device=self.device)._broadcasted(y)
    shape = _broadcast_shape(self.shape, a.shape)
    c, a, b = self.cast(dtypes.bool)._expand_to(shape), a._expand_to(shape), b._expand_to(shape)
    return Tensor(UOp(Ops.WHERE, a.dtype, (c.uop, a.uop, b.uop)))

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
      raise SpecValueError("OP.BITCAST.size", f"cannot bitcast {self.dtype!r} to {dtype!r}: itemsizes differ")
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
    q = self.detach()._alu(Ops.FDIV, y.detach()).floor()   # a step function: gradient 0 (see _trunc_quotient)
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
    if self.dtype == dtypes.bool: raise SpecTypeError("OP.CDIV", "floor division of bool tensors")
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
    if self.dtype == dtypes.bool: raise SpecTypeError("OP.CMOD", "remainder of bool tensors")
    _, r, fix = self._floor_correction(y)
    return fix.where(r + y, r)

  def pow(self, x, reverse: bool = False) -> Tensor:
    """self ** x with the POW op (OP.POW): an int tensor to an int power stays int (negative powers follow
    OP.POW.negative-exponent where torch raises); a float operand makes it float. bool ** bool is a | ~b."""
    if not reverse and dtypes.is_int(self.dtype) and not isinstance(x, Tensor): validate.int_exponent(self.dtype, x)
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: return a | b.logical_not()
    return a._alu(Ops.POW, b)
  def __pow__(self, y) -> Tensor: return self.pow(y)
  def __rpow__(self, y) -> Tensor: return self.pow(y, True)

  # bitwise (bool and int only)
  def _bitwise(self, op: Ops, y, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(y, reverse)
    if dtypes.is_float(x.dtype): raise SpecTypeError(f"OP.{op.name}", f"bitwise {op.name} of {x.dtype!r}")
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
    if dtypes.is_float(self.dtype): raise SpecTypeError("OP.XOR", f"bitwise not of {self.dtype!r}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1



  # named forms of the operators (tinygrad's names), with `reverse` where tinygrad has it
  def eq(self, x) -> Tensor:
    """self == x elementwise, as bool (OP.CMPEQ: NaN equals nothing)."""
    return self == x
  def ne(self, x) -> Tensor:
    """self != x elementwise, as bool (OP.CMPNE: NaN differs from everything)."""
    return self != x
  def mod(self, x, reverse=False) -> Tensor:
    """Remainder with the sign of the divisor, as `%` (torch.remainder); `reverse` computes x % self."""
    a, b = self._broadcasted(x, reverse); return a._mod(b)
  def bitwise_and(self, x, reverse=False) -> Tensor:
    """self & x for bool and integer tensors (OP.AND)."""
    return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse=False) -> Tensor:
    """self | x for bool and integer tensors (OP.OR)."""
    return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse=False) -> Tensor:
    """self ^ x for bool and integer tensors (OP.XOR)."""
    return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self) -> Tensor:
    """~self: every bit flipped (logical not for bool, OP.XOR)."""
    return ~self
  def lshift(self, x, reverse=False) -> Tensor:
    """self << x for integers (TENSOR.SHIFT: the count is taken modulo the bit width, OP.SHL.count)."""
    return self._bitwise(Ops.SHL, x, reverse)
  def rshift(self, x, reverse=False) -> Tensor:
    """self >> x for integers, arithmetic for signed dtypes (TENSOR.SHIFT, OP.SHR.count)."""
    return self._bitwise(Ops.SHR, x, reverse)

  def fmod(self, x) -> Tensor:
    """C's remainder, with the sign of the dividend (TENSOR.FMOD). Integers: CMOD (x fmod 0 = x, OP.CMOD.zero).
    Floats: x - trunc(x / y) * y of the exact quotient, rounded once, so exact while |x / y| < 2**p (ACC.RANGE)."""
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: raise SpecTypeError("TENSOR.FMOD", "fmod of bool tensors")
    if not dtypes.is_float(a.dtype): return a._alu(Ops.CMOD, b)
    _, r = a._trunc_quotient(b)   # TENSOR.FMOD.sign: a zero remainder has the dividend's sign
    finite = (a - a) == 0
    return (b.isinf() & finite).where(a, r)   # TENSOR.FMOD.special: x fmod +-inf = x for finite x

  def copysign(self, other) -> Tensor:
    """|self| with the sign of `other` (TENSOR.COPYSIGN): -0.0 counts as negative (its sign bit), a NaN as positive
    (a NaN's sign is no value of the spec, OP.VALUES.nan). The result dtype is the promoted one (tinygrad's; torch
    makes integers float)."""
    a, b = self._broadcasted(other)
    if a.dtype == dtypes.bool: raise SpecTypeError("TENSOR.COPYSIGN", "copysign of bool tensors")
    mag = a.abs()
    negative = (b < 0) | ((b == 0) & b._signbit())   # TENSOR.COPYSIGN.zero, TENSOR.COPYSIGN.nan
    return negative.where(-mag, mag)

  def lerp(self, end, weight) -> Tensor:
    """self + (end - self) * weight with broadcasting and promotion (TENSOR.LERP)."""
    return self + (end - self) * weight

  def square(self) -> Tensor:
    """self * self (TENSOR.SQUARE)."""
    return self * self

  def logaddexp(self, other) -> Tensor:
    """log(e**self + e**other) as max + log1p(e**-|self - other|) (TENSOR.LOGADDEXP): no overflow, and equal
    operands (infinities included) give max + ln 2, with the gradient split in halves as torch's."""
    a, b = self._broadcasted(other)
    dt = least_upper_float(a.dtype)
    a, b = a.cast(dt), b.cast(dt)
    d = (a == b).where(0.0, a - b)
    return a.maximum(b) + (-d.abs())._softplus_stable()

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan=False) -> Tensor:
    """|self - other| <= atol + rtol * |other| for finite values, equality for infinities, and NaN close to NaN
    only with equal_nan (TENSOR.ISCLOSE). Integer and bool operands are compared in the default float."""
    a, b = self._broadcasted(other)
    dt = least_upper_float(a.dtype)
    a, b = a.cast(dt), b.cast(dt)
    close = (a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= atol + rtol * b.abs()))
    return (close | (a.isnan() & b.isnan())) if equal_nan else close

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan=False) -> Tensor:
    """Whether every element is close (isclose(...).all(), a 0-d bool tensor; TENSOR.ISCLOSE)."""
    return self.isclose(other, rtol, atol, equal_nan).all()

  # tinygrad's small building blocks
  def alu(self, op: Ops, *src: Tensor) -> Tensor:
    """The ALU op `op` applied elementwise to self and `src` (TENSOR.ALU): no broadcasting and no promotion; the
    operands must have equal shapes, and dtypes the op accepts (OP.ALU)."""
    from refimpl.uop import GroupOp
    from refimpl.uop.semantics import alu_result_dtype
    if op not in GroupOp.ALU: raise SpecTypeError("TENSOR.ALU", f"{op!r} is not an ALU op")
    arity = 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3
    if len(src) + 1 != arity: raise SpecTypeError("TENSOR.ALU", f"{op.name} takes {arity} operands, got {len(src) + 1}")
    if not all(isinstance(s, Tensor) for s in src): raise SpecTypeError("TENSOR.ALU", "the operands must be Tensors")
    ops = (self, *src)
    if any(t.shape != self.shape for t in ops):
      raise SpecRuntimeError("TENSOR.ALU", f"operand shapes {[t.shape for t in ops]} differ (alu does not broadcast)")
    values = ops[1:] if op is Ops.WHERE else ops
    if op is Ops.WHERE and self.dtype != dtypes.bool:
      raise SpecTypeError("TENSOR.ALU", f"the condition of WHERE is {self.dtype!r}, not bool")
    if any(t.dtype != values[0].dtype for t in values):
      raise SpecTypeError("TENSOR.ALU", f"operand dtypes {[t.dtype for t in ops]} differ (alu does not promote)")
    out = alu_result_dtype(op, values[0].dtype)   # OP.ALU: a dtype the op does not accept is a SpecError
    return Tensor(UOp(op, out, tuple(t.uop for t in ops)))

  @staticmethod
  def const(b, dtype: DTypeLike | None = None) -> Tensor:
    """A 0-d tensor holding `b` (TENSOR.CONST): of `dtype`, else the default dtype of the Python value (DT.DEFAULT)."""
    return Tensor(b, dtype=dtype)
  def const_like(self, b, dtype: DTypeLike | None = None) -> Tensor:
    """`b` in this tensor's shape, of `dtype` or this tensor's dtype, on its device (TENSOR.CONST)."""
    return Tensor.full(self.shape, b, dtype=dtype if dtype is not None else self.dtype, device=self.device)
  def ufix(self, x) -> Tensor:
    """`x` as a tensor to combine with this one (TENSOR.UFIX): a Tensor as it is, a Python value as a 0-d tensor of
    the dtype it takes next to this tensor (DT.SCALAR-PROMOTE), on this tensor's device."""
    if isinstance(x, Tensor): return x
    return Tensor(x, dtype=scalar_result_dtype(self.dtype, x), device=self.device)
  def usum(self, *uops) -> Tensor:
    """self + uops[0] + uops[1] + ... left to right (`|` when self is bool); a single list or tuple is unpacked
    (TENSOR.USUM)."""
    return functools.reduce(operator.or_ if self.dtype == dtypes.bool else operator.add, _argfix(uops), self)
  def uprod(self, *uops) -> Tensor:
    """self * uops[0] * uops[1] * ... left to right (`&` when self is bool); a single list or tuple is unpacked
    (TENSOR.USUM)."""
    return functools.reduce(operator.and_ if self.dtype == dtypes.bool else operator.mul, _argfix(uops), self)

  __add__, __sub__, __mul__, __truediv__ = add, sub, mul, div
  def __radd__(self, y): return self.add(y, True)
  def __rsub__(self, y): return self.sub(y, True)
  def __rmul__(self, y): return self.mul(y, True)
  def __rtruediv__(self, y): return self.div(y, True)
