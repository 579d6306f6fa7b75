"""The executable semantics of the ALU ops on scalar values (spec/ops.md).

`exec_alu(op, dtype, operands, src_dtype)` gives the exact result the spec defines for one op on Python values of
the value model (OP.VALUES): bool for bool, an in-range int for integer types, an exactly representable float for
float types. Every op is total (OP.TOTAL): the only error is a SpecError for input the op does not accept (a dtype
outside ALU_DTYPES, a value outside its dtype, a wrong operand count). Constant folding and the emulator both call
this module, so it is the one place where the meaning of an ALU op is written down in code.

Each op (or family) is one small function whose docstring names its clause; `_IMPLS` maps Ops to them.
"""
from __future__ import annotations

import functools
import math
import struct
from typing import Callable, NamedTuple, Sequence

from refimpl.dtype import ConstType, DType, dtypes, round_float, wrap_int
from refimpl.helpers import SpecError
from refimpl.uop.opcodes import GroupOp, Ops

__all__ = ["ALU_DTYPES", "alu_result_dtype", "exec_alu", "float64_reference"]

_INF, _NAN = math.inf, math.nan


class _Scalar(NamedTuple):
  """What the hot path needs to know about a scalar dtype. Looked up once per call so that no DType is compared
  afterwards (DType equality and hashing build tuples, which would dominate the cost of an integer op)."""
  dtype: DType
  kind: str        # "bool", "int" or "float"
  lo: ConstType    # dtypes.min / dtypes.max
  hi: ConstType
  bits: int


def _scalar(dt: DType) -> _Scalar:
  kind = "bool" if dt == dtypes.bool else "int" if dtypes.is_int(dt) else "float"
  return _Scalar(dt, kind, dtypes.min(dt), dtypes.max(dt), dt.bits)


_SCALARS = {d: _scalar(d) for d in dtypes.all()}
_SCALARS_BY_ID = {id(d): t for d, t in _SCALARS.items()}   # the singletons: found without hashing
_BOOL = _SCALARS[dtypes.bool]


def _lookup(dt: DType) -> _Scalar | None:
  """The _Scalar of a scalar value dtype; None for vectors, pointers, void and anything that is not a DType."""
  t = _SCALARS_BY_ID.get(id(dt))
  if t is None and isinstance(dt, DType): t = _SCALARS.get(dt)   # a DType equal to a singleton but not it
  return t


# OP.ALU: the kinds of operand dtype each op accepts. The result dtype is the operand dtype, bool for comparisons,
# and the caller's target for CAST/BITCAST (see alu_result_dtype).
_NUM, _ANY = ("int", "float"), ("bool", "int", "float")
_ACCEPTS: dict[Ops, frozenset[str]] = {op: frozenset(kinds) for kinds, ops in [
  (("float",), (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.FDIV)),
  (_NUM, (Ops.NEG, Ops.SUB, Ops.POW, Ops.MULACC)),
  (_ANY, (Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.CAST, Ops.BITCAST)),
  (("int",), (Ops.CDIV, Ops.CMOD, Ops.SHL, Ops.SHR)),
  (("bool", "int"), (Ops.AND, Ops.OR, Ops.XOR))] for op in ops}
ALU_DTYPES: dict[Ops, frozenset[DType]] = {op: frozenset(t.dtype for t in _SCALARS.values() if t.kind in kinds)
                                           for op, kinds in _ACCEPTS.items()}


class _Rule(NamedTuple):
  """Everything exec_alu needs about one op, found with a single dict lookup (hashing an Ops member runs Python
  code, so the hot path does it once)."""
  clause: str                      # OP.<NAME>
  kinds: frozenset[str]            # accepted operand kinds
  arity: int
  impl: Callable[..., ConstType]   # impl(t, *operands), or impl(src, dst, x) for conversions
  result: str                      # "same", "bool" (comparisons) or "target" (CAST, BITCAST)
  has_cond: bool = False           # the first operand is a bool condition (WHERE)


def alu_result_dtype(op: Ops, src_dtype: DType) -> DType:
  """The result dtype of ALU op `op` on operands of `src_dtype` (OP.ALU): bool for comparisons, else `src_dtype`.
  CAST and BITCAST have no derived result dtype: their target is a parameter, so asking is a SpecError."""
  rule = _rule(op)
  if rule.result == "target": raise SpecError(rule.clause, f"the result dtype of {op.name} is its target")
  t = _accepted(op, rule, src_dtype)
  return dtypes.bool if rule.result == "bool" else t.dtype


def _rule(op: Ops) -> _Rule:
  rule = _RULES.get(op)
  if rule is None: raise SpecError("OP.ALU", f"{op!r} is not an ALU op")
  return rule


def _accepted(op: Ops, rule: _Rule, dt: DType) -> _Scalar:
  """The _Scalar of `dt` if `op` accepts operands of it, else a SpecError naming the op's clause (OP.ALU)."""
  t = _lookup(dt)
  if t is None or t.kind not in rule.kinds:
    raise SpecError(rule.clause, f"{op.name} does not accept operands of {dt!r}; it accepts {sorted(ALU_DTYPES[op])}")
  return t


def exec_alu(op: Ops, dtype: DType, operands: Sequence[ConstType], src_dtype: DType | None = None) -> ConstType:
  """The exact result of ALU op `op` on scalar `operands` (spec/ops.md, clause OP.<NAME>).

  `dtype` is the result dtype and `src_dtype` the operands' dtype (default: `dtype`); comparisons, CAST and BITCAST
  need it. WHERE takes (cond: bool, a, b) with a and b of `src_dtype`. Raises SpecError only for input the op does
  not accept; for accepted input the result is always defined (OP.TOTAL)."""
  rule = _rule(op)
  t = _accepted(op, rule, dtype if src_dtype is None else src_dtype)
  if len(operands) != rule.arity:
    raise SpecError(rule.clause, f"{op.name} takes {rule.arity} operand(s), got {len(operands)}: {tuple(operands)!r}")
  if rule.result == "target":
    _check_value(rule, operands[0], t)
    return rule.impl(t, _accepted(op, rule, dtype), operands[0])
  want = _BOOL if rule.result == "bool" else t
  if dtype is not want.dtype and _lookup(dtype) is not want:
    raise SpecError(rule.clause, f"{op.name} on {t.dtype!r} gives {want.dtype!r}, not {dtype!r}")
  if rule.has_cond: _check_value(rule, operands[0], _BOOL)   # WHERE's condition is bool whatever a and b are
  for v in (operands[1:] if rule.has_cond else operands): _check_value(rule, v, t)
  return rule.impl(t, *operands)


def _check_value(rule: _Rule, v: ConstType, t: _Scalar) -> None:
  """OP.VALUES: `v` must be a value of `t` in the model of spec/dtypes.md."""
  if t.kind == "bool": ok = v is True or v is False
  elif t.kind == "int": ok = type(v) is int and t.lo <= v <= t.hi
  else: ok = type(v) is float and _representable(v, t)
  if not ok: raise SpecError(rule.clause, f"{v!r} ({type(v).__name__}) is not a value of {t.dtype!r}")


def _representable(v: float, t: _Scalar) -> bool:
  """Whether the float `v` is a value of float type `t`. A round trip through struct's packing answers it several
  times faster than round_float (any rounding maps a representable value to itself and only those); bfloat16 values
  are the float32 values whose low 16 bits are zero."""
  if t.bits == 64 or v != v: return True
  is_bf16 = t.dtype is dtypes.bfloat16
  fmt = "<f" if t.bits == 32 or is_bf16 else "<e"
  try: packed = struct.pack(fmt, v)
  except OverflowError: return False   # finite, beyond the format's range
  return struct.unpack(fmt, packed)[0] == v and not (is_bf16 and packed[:2] != b"\0\0")


def _wrap(x: int, t: _Scalar) -> int:
  """DT.WRAP, with the in-range case (the common one) answered without calling wrap_int."""
  return x if t.lo <= x <= t.hi else wrap_int(x, t.dtype)


def _round(x: float, t: _Scalar) -> float:
  """OP.ROUND: round_float, skipped for float64 where Python's float ops already rounded once."""
  return x if t.bits == 64 else round_float(x, t.dtype)


# ---- exact rounding of rationals (OP.ROUND)

def _round_ratio(num: int, den: int, t: _Scalar) -> float:
  """num/den (den > 0) rounded once to float type `t`, ties to even, with subnormals and overflow to infinity
  (OP.ROUND). Pure integer arithmetic, so exact for any rational: MULACC needs this because a detour through
  float64 would round twice."""
  if num == 0: return 0.0
  ebits, mbits = dtypes.finfo(t.dtype)
  emax = (1 << (ebits - 1)) - 1
  n = abs(num)
  e = n.bit_length() - den.bit_length()            # 2**(e-1) < n/den < 2**(e+1)
  if (n << max(0, -e)) < (den << max(0, e)): e -= 1  # now 2**e <= n/den < 2**(e+1)
  e = max(e, 1 - emax)                              # below the normal range the step stays 2**(emin - mbits)
  shift = mbits - e                                 # the significand m counts steps of 2**-shift
  num_s, den_s = (n << shift, den) if shift >= 0 else (n, den << -shift)
  m, r = divmod(num_s, den_s)
  if 2 * r > den_s or (2 * r == den_s and m & 1): m += 1
  if m >> (mbits + 1): m, e = m >> 1, e + 1        # rounding carried into the next binade (m was 2**(mbits+1))
  mag = _INF if e > emax else math.ldexp(m, e - mbits)
  return -mag if num < 0 else mag


# ---- unary float ops

def _exp2(t: _Scalar, x: float) -> float:
  """OP.EXP2: 2**x as the float64 math library gives it, rounded once (OP.LIBM); overflow gives inf
  (OP.EXP2.overflow), underflow rounds to 0 (OP.EXP2.underflow)."""
  try: return _round(math.exp2(x), t)
  except OverflowError: return _INF


def _log2(t: _Scalar, x: float) -> float:
  """OP.LOG2 (OP.LIBM): log2(±0) = -inf (OP.LOG2.zero), log2(x<0) = nan (OP.LOG2.negative), log2(inf) = inf."""
  if x == 0: return -_INF
  if x < 0: return _NAN
  return _round(math.log2(x), t)


def _sin(t: _Scalar, x: float) -> float:
  """OP.SIN (OP.LIBM): sin(±inf) = nan (OP.SIN.inf); sin(-0.0) = -0.0."""
  if math.isinf(x): return _NAN
  return _round(math.sin(x), t)


def _sqrt(t: _Scalar, x: float) -> float:
  """OP.SQRT: correctly rounded square root; sqrt(x<0) = nan (OP.SQRT.negative), sqrt(-0.0) = -0.0
  (OP.SQRT.zero). float64 sqrt then one rounding is exact for p <= 24 bits (2p+2 <= 53)."""
  if x < 0: return _NAN
  return _round(math.sqrt(x), t)


def _reciprocal(t: _Scalar, x: float) -> float:
  """OP.RECIPROCAL: 1/x exactly as FDIV(1, x); 1/±0 = ±inf (OP.RECIPROCAL.zero)."""
  return _fdiv(t, 1.0, x)


def _trunc(t: _Scalar, x: float) -> float:
  """OP.TRUNC: round toward zero; keeps -0.0, ±inf and nan, and trunc(-0.5) = -0.0 (OP.TRUNC.special)."""
  if not math.isfinite(x): return x
  return math.copysign(float(math.trunc(x)), x)


def _neg(t: _Scalar, x: ConstType) -> ConstType:
  """OP.NEG: floats flip the sign, also of 0 and nan (OP.NEG.float); integers wrap, NEG(min) = min
  (OP.NEG.wrap). bool is not accepted (OP.NEG.bool)."""
  return -x if t.kind == "float" else _wrap(-x, t)


# ---- conversions

def _cast(src: _Scalar, dst: _Scalar, x: ConstType) -> ConstType:
  """OP.CAST is DT.CONST's conversion, so constant folding and execution share dtypes.as_const: OP.CAST.to-bool
  (x != 0, nan -> True), OP.CAST.from-bool (0/1), OP.CAST.wrap (int -> int), OP.CAST.int-to-float (rounded once
  from the exact int), OP.CAST.float-to-float (round_float), OP.CAST.truncate, OP.CAST.saturate and OP.CAST.nan
  (float -> int)."""
  return dtypes.as_const(x, dst.dtype)


# OP.BITCAST.nan: the bits the reference gives for any NaN: the positive quiet NaN with zero payload
_CANONICAL_NAN_BITS = {16: 0x7E00, 32: 0x7FC00000, 64: 0x7FF8000000000000}
_F32 = _SCALARS[dtypes.float32]


def _to_bits(x: ConstType, t: _Scalar) -> int:
  """The bit pattern of value `x` of `t`, as an unsigned int of t.bits bits (bool: 0 or 1)."""
  if t.kind != "float": return int(x) & ((1 << t.bits) - 1)
  if t.dtype is dtypes.bfloat16: return _to_bits(x, _F32) >> 16   # OP.BITCAST.bfloat16: the upper half of f32
  if x != x: return _CANONICAL_NAN_BITS[t.bits]
  return int.from_bytes(struct.pack("<" + t.dtype.fmt, x), "little")


def _from_bits(bits: int, t: _Scalar) -> ConstType:
  """The value of `t` whose bit pattern is `bits`."""
  if t.kind == "bool": return bits != 0                            # OP.BITCAST.bool
  if t.kind == "int": return wrap_int(bits, t.dtype)
  if t.dtype is dtypes.bfloat16: return _from_bits(bits << 16, _F32)
  return struct.unpack("<" + t.dtype.fmt, bits.to_bytes(t.bits // 8, "little"))[0]


def _bitcast(src: _Scalar, dst: _Scalar, x: ConstType) -> ConstType:
  """OP.BITCAST: reinterpret the bits; the dtypes must have the same itemsize (OP.BITCAST.size)."""
  if src.dtype.itemsize != dst.dtype.itemsize:
    raise SpecError("OP.BITCAST", f"cannot bitcast {src.dtype!r} ({src.dtype.itemsize} bytes) to {dst.dtype!r} "
                                  f"({dst.dtype.itemsize} bytes): BITCAST needs equal sizes")
  return _from_bits(_to_bits(x, src), dst)


# ---- binary arithmetic

def _add(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.ADD: floats round once (OP.ROUND; a float64 sum of narrower floats is exact); ints wrap (OP.ADD.wrap);
  bool is OR (OP.ADD.bool)."""
  if t.kind == "float": return _round(a + b, t)
  return (a or b) if t.kind == "bool" else _wrap(a + b, t)


def _sub(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.SUB: floats round once; ints wrap (OP.SUB.wrap)."""
  return _round(a - b, t) if t.kind == "float" else _wrap(a - b, t)


def _mul(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.MUL: floats round once (a float64 product of p <= 24 bit floats is exact); ints wrap (OP.MUL.wrap);
  bool is AND (OP.MUL.bool)."""
  if t.kind == "float": return _round(a * b, t)
  return (a and b) if t.kind == "bool" else _wrap(a * b, t)


def _fdiv(t: _Scalar, a: float, b: float) -> float:
  """OP.FDIV: IEEE division, rounded once (2p+2 <= 53 makes the float64 detour exact). x/±0 is ±inf by the xor of
  the signs, 0/0 and nan/0 are nan (OP.FDIV.zero)."""
  if b == 0:
    if a == 0 or a != a: return _NAN
    return math.copysign(_INF, a) * math.copysign(1.0, b)
  return _round(a / b, t)


def _trunc_div(a: int, b: int) -> int:
  """a / b truncated toward zero, on unbounded ints (b != 0)."""
  q = abs(a) // abs(b)
  return -q if (a < 0) != (b < 0) else q


def _cdiv(t: _Scalar, a: int, b: int) -> int:
  """OP.CDIV: quotient truncated toward zero (OP.CDIV.truncate); x/0 = -1, all bits set (OP.CDIV.zero);
  min/-1 wraps to min (OP.CDIV.overflow)."""
  return _wrap(-1 if b == 0 else _trunc_div(a, b), t)


def _cmod(t: _Scalar, a: int, b: int) -> int:
  """OP.CMOD: remainder with the dividend's sign, a - b*CDIV(a, b) (OP.CMOD.sign); x%0 = x (OP.CMOD.zero);
  min%-1 = 0 (OP.CMOD.overflow)."""
  return a if b == 0 else a - b * _trunc_div(a, b)


def _max(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.MAX: the larger operand; nan if either is nan (OP.MAX.nan); MAX(-0.0, +0.0) = +0.0 (OP.MAX.zero);
  bool is OR (OP.MAX.bool)."""
  if t.kind == "float":
    if a != a or b != b: return _NAN
    if a == b == 0: return a if math.copysign(1.0, a) > 0 else b
  return max(a, b)


def _cmplt(t: _Scalar, a: ConstType, b: ConstType) -> bool:
  """OP.CMPLT: a < b; false if either is nan (OP.CMPLT.nan); -0.0 < +0.0 is false (OP.CMPLT.zero);
  False < True (OP.CMPLT.bool)."""
  return a < b   # Python's float comparisons are IEEE's


def _cmpne(t: _Scalar, a: ConstType, b: ConstType) -> bool:
  """OP.CMPNE: a != b; true if either is nan (OP.CMPNE.nan); -0.0 != +0.0 is false (OP.CMPNE.zero)."""
  return a != b


def _cmpeq(t: _Scalar, a: ConstType, b: ConstType) -> bool:
  """OP.CMPEQ: a == b; false if either is nan, even nan == nan (OP.CMPEQ.nan); -0.0 == +0.0 (OP.CMPEQ.zero)."""
  return a == b


def _and(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.AND: bitwise on the two's complement bits (Python's & on ints is exactly that); logical on bool."""
  return a & b


def _or(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.OR: bitwise on the two's complement bits; logical on bool."""
  return a | b


def _xor(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.XOR: bitwise on the two's complement bits; logical on bool."""
  return a ^ b


def _shl(t: _Scalar, a: int, b: int) -> int:
  """OP.SHL: a * 2**count, wrapped (OP.SHL.wrap). OP.SHL.count: the count operand's bits read as unsigned,
  modulo the width; b & (bits-1) is that, negative b included, as the width is a power of two."""
  return _wrap(a << (b & (t.bits - 1)), t)


def _shr(t: _Scalar, a: int, b: int) -> int:
  """OP.SHR: arithmetic for signed (OP.SHR.signed), logical for unsigned (OP.SHR.unsigned): Python's >> on a value
  of the model is both. The count as for SHL (OP.SHR.count)."""
  return a >> (b & (t.bits - 1))


def _pow(t: _Scalar, a: ConstType, b: ConstType) -> ConstType:
  """OP.POW: floats follow C pow (OP.POW.special), rounded once from float64 (OP.LIBM); ints wrap."""
  return _round(_pow_float64(a, b), t) if t.kind == "float" else _pow_int(t, a, b)


def _is_odd_int(y: float) -> bool: return math.isfinite(y) and y.is_integer() and y % 2 == 1


def _pow_float64(x: float, y: float) -> float:
  """OP.POW.special: C99 pow. math.pow already returns pow(x, ±0) = 1 and pow(1, y) = 1 for nan and the infinite
  cases; it raises where C returns a value, and those are mapped here."""
  try: return math.pow(x, y)
  except OverflowError: return -_INF if x < 0 and _is_odd_int(y) else _INF   # OP.POW.overflow
  except ValueError:
    if x == 0: return math.copysign(_INF, x) if _is_odd_int(y) else _INF      # pow(±0, y<0)
    return _NAN                                                                # negative base, non-integer y


def _pow_int(t: _Scalar, a: int, b: int) -> int:
  """OP.POW.wrap: a**b modulo 2**bits for b >= 0 (0**0 = 1). OP.POW.negative-exponent, signed only: the
  truncation of 1/a**|b|: 1 for a = 1, ±1 for a = -1, 0 otherwise, and -1 for a = 0 (as CDIV(1, 0))."""
  if b >= 0: return _wrap(pow(a, b, 1 << t.bits), t)
  if a == 0: return -1
  if a == -1: return -1 if b & 1 else 1
  return 1 if a == 1 else 0


# ---- ternary

def _where(t: _Scalar, cond: bool, a: ConstType, b: ConstType) -> ConstType:
  """OP.WHERE: a if cond else b, the selected value unchanged (nan and -0.0 included)."""
  return a if cond else b


def _mulacc(t: _Scalar, a: ConstType, b: ConstType, c: ConstType) -> ConstType:
  """OP.MULACC: a*b+c. Ints wrap (OP.MULACC.wrap); floats round once, as C fma (OP.MULACC.fused)."""
  return _fma(t, a, b, c) if t.kind == "float" else _wrap(a * b + c, t)


def _fma(t: _Scalar, a: float, b: float, c: float) -> float:
  """OP.MULACC.fused: the exact a*b+c rounded once. OP.MULACC.inf: nan for inf*0 or inf-inf, as IEEE fma.
  OP.MULACC.zero: an exact zero is +0.0, unless a*b and c are both -0 (IEEE's sum of signed zeros)."""
  if a != a or b != b or c != c: return _NAN
  if math.isinf(a) or math.isinf(b):
    if a == 0 or b == 0: return _NAN
    prod = math.copysign(_INF, a) * math.copysign(1.0, b)
    return _NAN if math.isinf(c) and c != prod else prod
  if math.isinf(c): return c
  (na, da), (nb, db), (nc, dc) = a.as_integer_ratio(), b.as_integer_ratio(), c.as_integer_ratio()
  num, den = na * nb * dc + nc * da * db, da * db * dc   # a*b+c exactly, as a ratio of ints
  if num == 0:
    # c == 0 here means a*b is an exact zero too; a nonzero a*b cancelled by c gives +0.0
    prod_negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    return -0.0 if c == 0 and prod_negative and math.copysign(1.0, c) < 0 else 0.0
  return _round_ratio(num, den, t)


_IMPLS: dict[Ops, Callable[..., ConstType]] = {
  Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.SQRT: _sqrt, Ops.RECIPROCAL: _reciprocal,
  Ops.TRUNC: _trunc, Ops.NEG: _neg, Ops.CAST: _cast, Ops.BITCAST: _bitcast,
  Ops.ADD: _add, Ops.SUB: _sub, Ops.MUL: _mul, Ops.FDIV: _fdiv, Ops.CDIV: _cdiv, Ops.CMOD: _cmod, Ops.MAX: _max,
  Ops.CMPLT: _cmplt, Ops.CMPNE: _cmpne, Ops.CMPEQ: _cmpeq, Ops.AND: _and, Ops.OR: _or, Ops.XOR: _xor,
  Ops.SHL: _shl, Ops.SHR: _shr, Ops.POW: _pow, Ops.WHERE: _where, Ops.MULACC: _mulacc,
}
assert set(_IMPLS) == set(_ACCEPTS), "every ALU op needs an implementation and its accepted dtypes"


def _make_rule(op: Ops) -> _Rule:
  arity = 1 if op in GroupOp.Unary or op in (Ops.CAST, Ops.BITCAST) else 2 if op in GroupOp.Binary else 3
  result = "bool" if op in GroupOp.Comparison else "target" if op in (Ops.CAST, Ops.BITCAST) else "same"
  return _Rule(f"OP.{op.name}", _ACCEPTS[op], arity, _IMPLS[op], result, op is Ops.WHERE)


_RULES = {op: _make_rule(op) for op in _IMPLS}


# OP.LIBM: the float ops whose exec_alu result is one float64 value (the math library's, with each clause's special
# cases) rounded once to the result dtype by _round. Nothing else happens between that value and the result.
_ROUNDED_FROM_FLOAT64 = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)


def float64_reference(op: Ops) -> Callable[..., float]:
  """The float64 function behind a transcendental (OP.LIBM): for op in EXP2, LOG2, SIN, POW, every float dtype dt
  and float operands xs of dt, exec_alu(op, dt, xs) == round_float(float64_reference(op)(*xs), dt). A vectorized
  executor (the emulator's) calls it per element and rounds the results with its own exact rounding (OP.ROUND)."""
  if op not in _ROUNDED_FROM_FLOAT64: raise SpecError("OP.LIBM", f"{op!r} has no float64 reference function")
  return functools.partial(_IMPLS[op], _SCALARS[dtypes.float64])   # _round is the identity for float64
