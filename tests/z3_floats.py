"""Proofs of float rewrite rules with z3's IEEE-754 theory (spec/rewrites.md, RW.PROOF).

A float value of dtype T is a z3 floating-point term of T's format: float16 is FPSort(5, 11), bfloat16
FPSort(8, 8), float32 FPSort(8, 24), float64 FPSort(11, 53) (exponent bits, significand bits with the hidden one).
Such a term ranges over every value of the format: signed zeros, subnormals, both infinities and NaN. z3's theory
has exactly one NaN, which is the spec's value model (OP.VALUES.nan: the payload is not observable), and keeps
-0.0 apart from +0.0 (OP.VALUES.zero). Every arithmetic op rounds once to nearest, ties to even (OP.ROUND).

`fp_alu` gives each float ALU op its meaning from spec/ops.md, where IEEE leaves a choice or the spec departs from
IEEE's minNum/maxNum: MAX propagates NaN and MAX(-0.0, +0.0) = +0.0 (z3's fp.max returns the other operand for one
NaN and leaves the sign of a zero maximum unspecified, so it is not used). tests/test_float_rule_proofs.py checks
this encoding against exec_alu on the edge tables of spec/ops.md and on random values before trusting a proof.

Equality is the spec's (RW.SOUND): any NaN equals any NaN, and otherwise two values are equal when they are the
same number with the same sign, so -0.0 differs from +0.0 (fp.eq would call them equal and NaN unequal to
itself).

`prove_float(rule, T)` asks z3 for a value of every leaf of a SymRule where the two sides differ; no such value
means the rule holds for every input of T. `assume` narrows the inputs, which is how a test shows for which
inputs an identity of RW.FLOAT.none fails and for which it holds."""
from __future__ import annotations

import math
import struct
import time
from dataclasses import dataclass
from typing import Callable

import z3

from refimpl.dtype import DType, dtypes
from refimpl.uop import Ops
from refimpl.uop.rules import App, CVar, Lit, SymRule, Term, Var, leaves

# (exponent bits, significand bits including the hidden bit), as z3.FPSort takes them
FP_FORMATS = {dtypes.float16: (5, 11), dtypes.bfloat16: (8, 8), dtypes.float32: (8, 24), dtypes.float64: (11, 53)}
RNE = z3.RNE()   # OP.ROUND: round to nearest, ties to even


def fp_sort(T: DType) -> z3.FPSortRef: return z3.FPSort(*FP_FORMATS[T])


# ------------------------------------------------------------------------------------------------------------
# Python floats <-> z3 terms, through the IEEE bit pattern (exact: no decimal detour)


def float_bits(v: float, T: DType) -> int:
  """The IEEE bit pattern of value `v` of float type T (bfloat16: the upper half of float32's). Not for NaN."""
  if T == dtypes.bfloat16: return float_bits(v, dtypes.float32) >> 16
  fmt = {16: "<e", 32: "<f", 64: "<d"}[T.bits]
  return int.from_bytes(struct.pack(fmt, v), "little")


def bits_float(bits: int, T: DType) -> float:
  if T == dtypes.bfloat16: return bits_float(bits << 16, dtypes.float32)
  fmt = {16: "<e", 32: "<f", 64: "<d"}[T.bits]
  return struct.unpack(fmt, bits.to_bytes(T.bits // 8, "little"))[0]


def fp_const(v: float, T: DType) -> z3.FPRef:
  """The z3 value of `v`, which must be a value of T."""
  if v != v: return z3.fpNaN(fp_sort(T))
  bits = float_bits(v, T)
  assert bits_float(bits, T) == v, f"{v!r} is not a value of {T}"
  return z3.fpBVToFP(z3.BitVecVal(bits, T.bits), fp_sort(T))


def fp_value(e, T: DType) -> float:
  """The Python float that a constant z3 term of T's format stands for (NaN as math.nan)."""
  if z3.is_true(z3.simplify(z3.fpIsNaN(e))): return math.nan
  return bits_float(z3.simplify(z3.fpToIEEEBV(e)).as_long(), T)


def fp_same(a, b):
  """RW.SOUND's equality of float values: NaN is NaN whatever its payload, -0.0 is not +0.0."""
  nan_a, nan_b = z3.fpIsNaN(a), z3.fpIsNaN(b)
  return z3.Or(z3.And(nan_a, nan_b),
               z3.And(z3.Not(nan_a), z3.Not(nan_b), z3.fpEQ(a, b), z3.fpIsNegative(a) == z3.fpIsNegative(b)))


def same(a, b):
  """Equality of two z3 values of one rule side: fp_same for floats, plain equality for bool."""
  return fp_same(a, b) if z3.is_fp(a) else a == b


# ------------------------------------------------------------------------------------------------------------
# The float ALU ops of spec/ops.md


def fp_max(a, b):
  """OP.MAX on floats: NaN if either is NaN (OP.MAX.nan); of two zeros the positive one unless both are -0.0
  (OP.MAX.zero); else the larger."""
  both_zero = z3.And(z3.fpIsZero(a), z3.fpIsZero(b))
  larger = z3.If(both_zero, z3.If(z3.fpIsNegative(a), b, a), z3.If(z3.fpGT(a, b), a, b))
  return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(a.sort()), larger)


def fp_alu(op: Ops, args: list):
  """The value of float ALU op `op` on z3 operands (WHERE: a z3 Bool, then two floats); comparisons give z3 Bools.
  The IEEE operations are what spec/ops.md prescribes: one rounding (OP.ROUND), the sign rules of zero sums and
  products (OP.ADD.zero, OP.SUB.zero, OP.MUL.round), NaN for inf - inf, 0 * inf, 0 / 0 and inf / inf, signed
  infinities for x / 0 (OP.FDIV.zero), NEG flipping the sign bit (OP.NEG.float), MULACC as fma (OP.MULACC),
  comparisons false on NaN except CMPNE (OP.CMPLT.nan, OP.CMPNE.nan, OP.CMPEQ.nan) and -0.0 == +0.0."""
  a = args[0]
  if op is Ops.WHERE: return z3.If(args[0], args[1], args[2])
  if op is Ops.NEG: return z3.fpNeg(a)
  if op is Ops.SQRT: return z3.fpSqrt(RNE, a)
  if op is Ops.TRUNC: return z3.fpRoundToIntegral(z3.RTZ(), a)
  if op is Ops.RECIPROCAL: return z3.fpDiv(RNE, z3.FPVal(1.0, a.sort()), a)
  b = args[1]
  binary: dict[Ops, Callable] = {
    Ops.ADD: lambda: z3.fpAdd(RNE, a, b), Ops.SUB: lambda: z3.fpSub(RNE, a, b), Ops.MUL: lambda: z3.fpMul(RNE, a, b),
    Ops.FDIV: lambda: z3.fpDiv(RNE, a, b), Ops.MAX: lambda: fp_max(a, b), Ops.CMPLT: lambda: z3.fpLT(a, b),
    Ops.CMPNE: lambda: z3.Not(z3.fpEQ(a, b)), Ops.CMPEQ: lambda: z3.fpEQ(a, b),
    Ops.MULACC: lambda: z3.fpFMA(RNE, a, b, args[2])}
  if op not in binary: raise NotImplementedError(f"no z3 float encoding of {op}")
  return binary[op]()


FP_OPS = (Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE,
          Ops.MULACC, Ops.SQRT, Ops.TRUNC, Ops.RECIPROCAL)


def fp_cast(v, U: DType):
  """OP.CAST.float-to-float to U: rounded once, NaN stays NaN, infinities and signed zeros are kept."""
  return z3.fpToFP(RNE, v, fp_sort(U))


def _bool_alu(op: Ops, a, b):
  table = {Ops.AND: z3.And, Ops.OR: z3.Or, Ops.XOR: z3.Xor, Ops.CMPNE: z3.Xor, Ops.CMPEQ: lambda p, q: p == q}
  if op not in table: raise NotImplementedError(f"no z3 encoding of {op} on bool in a float rule")
  return table[op](a, b)


# ------------------------------------------------------------------------------------------------------------
# Rules


def fp_term(t: Term, T: DType, syms: dict):
  """The z3 value of rule term `t` at float dtype T, its leaves being `syms` (name -> z3 constant)."""
  if isinstance(t, (Var, CVar)): return syms[t.name]
  if isinstance(t, Lit): return z3.BoolVal(bool(t.value)) if t.is_bool else fp_const(dtypes.as_const(t.value, T), T)
  assert isinstance(t, App), f"no float meaning for {t!r}"
  args = [fp_term(a, T, syms) for a in t.args]
  if t.op is not Ops.WHERE and all(a.is_bool for a in t.args): return _bool_alu(t.op, *args)
  return fp_alu(t.op, args)


def leaf_syms(rule: SymRule, T: DType) -> dict:
  """A z3 constant per leaf: a float of T's format, or a Bool for bool leaves (WHERE's condition)."""
  return {leaf.name: z3.Bool(leaf.name) if leaf.is_bool else z3.FP(leaf.name, fp_sort(T)) for leaf in leaves(rule.lhs)}


@dataclass
class FloatCounterexample:
  """Values of the rule's leaves (Python floats and bools) where z3 finds the two sides different, and the two
  sides' values there as z3 computes them."""
  values: dict
  lhs: object
  rhs: object

  def __str__(self) -> str:
    vals = ", ".join(f"{k} = {v!r}" for k, v in self.values.items())
    return f"{vals}: lhs = {self.lhs!r}, rhs = {self.rhs!r}"


def _read(m: z3.ModelRef, e, T: DType):
  v = m.eval(e, model_completion=True)
  return z3.is_true(v) if z3.is_bool(v) else fp_value(v, T)


def find_difference(lhs, rhs, syms: dict, T: DType, hyps: list, timeout_ms: int):
  """(status, info, seconds): 'proved' when no value of the leaves makes `lhs` and `rhs` differ under `hyps`,
  'counterexample' with a FloatCounterexample when one does, 'unknown' with z3's reason."""
  solver = z3.Solver()
  solver.set("timeout", timeout_ms)
  solver.add(*hyps, z3.Not(same(lhs, rhs)))
  start = time.perf_counter()
  res = solver.check()
  seconds = time.perf_counter() - start
  if res == z3.unsat: return "proved", None, seconds
  if res == z3.unknown: return "unknown", solver.reason_unknown(), seconds
  m = solver.model()
  cex = FloatCounterexample({k: _read(m, v, T) for k, v in syms.items()}, _read(m, lhs, T), _read(m, rhs, T))
  return "counterexample", cex, seconds


def prove_float(rule: SymRule, T: DType, assume: Callable[[dict], object] | None = None, timeout_ms: int = 60_000):
  """(status, info, seconds) for `rule` at float dtype T, as find_difference. `assume(syms)`, when given, is a z3
  condition on the leaves that limits the inputs considered (a proof under it covers only those inputs)."""
  syms = leaf_syms(rule, T)
  assert rule.where is None, f"{rule.clause}: float rules have no guard (floats have no bounds, RW.BOUNDS)"
  hyps = [] if assume is None else [assume(syms)]
  return find_difference(fp_term(rule.lhs, T, syms), fp_term(rule.rhs_term, T, syms), syms, T, hyps, timeout_ms)


def prove_cast_roundtrip(T: DType, U: DType, timeout_ms: int = 60_000):
  """cast(cast(x, U), T) == x for every x of float type T (a float cast round trip, RW.FLOAT.none)."""
  x = z3.FP("x", fp_sort(T))
  return find_difference(fp_cast(fp_cast(x, U), T), x, {"x": x}, T, [], timeout_ms)
