"""Proofs of integer rewrite rules with z3 (spec/rewrites.md, RW.PROOF).

`z3_alu` encodes the integer and bool ALU ops of spec/ops.md over bit-vectors, totality included (x/0 = -1,
x%0 = x, INT_MIN/-1 = INT_MIN, shift counts modulo the width); tests check it against the executable semantics.
`prove(rule, dtype)` states, for every value of the rule's variables and every pair of bounds that contain them:
guard holds  ->  lhs == rhs, and asks z3 for a counterexample. Variables are z3 bit-vectors, so this is a proof of
the rule for that width, not of one instance."""
from __future__ import annotations

import z3

from refimpl.dtype import DType, dtypes
from refimpl.uop import Ops
from refimpl.uop.rules import SymRule, Var, CVar, Lit, App, LoOf, Term, leaves


def z3_alu(op: Ops, dtype: DType, args: list):
  """The value of `op` on z3 operands of `dtype` (bit-vectors for ints, z3 Bool for bool)."""
  if dtype == dtypes.bool: return _bool_alu(op, args)
  w, signed = dtype.bits, not dtypes.is_unsigned(dtype)
  ones = z3.BitVecVal(-1, w)
  a = args[0]
  if op is Ops.NEG: return -a
  if op is Ops.WHERE: return z3.If(args[0], args[1], args[2])
  b = args[1]
  if op is Ops.ADD: return a + b
  if op is Ops.SUB: return a - b
  if op is Ops.MUL: return a * b
  if op is Ops.MULACC: return a * b + args[2]
  if op is Ops.CDIV:
    q = a / b if signed else z3.UDiv(a, b)   # z3's `/` is bvsdiv: truncating; INT_MIN/-1 wraps to INT_MIN
    return z3.If(b == 0, ones, q)
  if op is Ops.CMOD: return z3.If(b == 0, a, z3.SRem(a, b) if signed else z3.URem(a, b))
  if op is Ops.MAX: return z3.If((a > b) if signed else z3.UGT(a, b), a, b)
  if op is Ops.CMPLT: return (a < b) if signed else z3.ULT(a, b)
  if op is Ops.CMPNE: return a != b
  if op is Ops.CMPEQ: return a == b
  if op is Ops.AND: return a & b
  if op is Ops.OR: return a | b
  if op is Ops.XOR: return a ^ b
  count = b & (w - 1)
  if op is Ops.SHL: return a << count
  if op is Ops.SHR: return (a >> count) if signed else z3.LShR(a, count)
  raise NotImplementedError(f"no z3 encoding of {op} on {dtype}")


def _bool_alu(op: Ops, args: list):
  a = args[0]
  if op is Ops.WHERE: return z3.If(a, args[1], args[2])
  b = args[1]
  table = {Ops.AND: z3.And, Ops.OR: z3.Or, Ops.MAX: z3.Or, Ops.XOR: z3.Xor, Ops.CMPNE: z3.Xor,
           Ops.CMPEQ: lambda p, q: p == q, Ops.CMPLT: lambda p, q: z3.And(z3.Not(p), q)}
  if op not in table: raise NotImplementedError(f"no z3 encoding of {op} on bool")
  return table[op](a, b)


def z3_const(value, dtype: DType):
  if dtype == dtypes.bool: return z3.BoolVal(bool(value))
  return z3.BitVecVal(int(dtypes.as_const(value, dtype)), dtype.bits)


# Guards are integer arithmetic. z3's mixed Int/bit-vector reasoning (BV2Int) is very slow, so a guard is computed
# on wide bit-vectors instead: values of a w-bit type are extended to 2w+4 bits, where the guards' sums and single
# products of in-range values cannot overflow, so wide bit-vector arithmetic equals integer arithmetic there.
def guard_width(dtype: DType) -> int: return 2 * max(dtype.bits, 1) + 4


def to_int(v, dtype: DType, W: int):
  """The integer a z3 value of `dtype` stands for, as a signed bit-vector of W bits."""
  if dtype == dtypes.bool: return z3.If(v, z3.BitVecVal(1, W), z3.BitVecVal(0, W))
  ext = z3.ZeroExt if dtypes.is_unsigned(dtype) else z3.SignExt
  return ext(W - dtype.bits, v)


_Z3_GUARD_OPS = {
  "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "%": z3.SRem,
  "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
  "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "and": z3.And, "or": z3.Or, "not": z3.Not,
}


def prove(rule: SymRule, T: DType, timeout_ms: int = 120_000) -> tuple[str, object]:
  """('proved', None), ('counterexample', model) or ('unknown', reason) for `rule` at dtype T."""
  W = guard_width(T)
  wide = lambda n: z3.BitVecVal(int(n), W)  # noqa: E731
  syms, env, facts = {}, {"dmin": wide(dtypes.min(T)), "dmax": wide(dtypes.max(T))}, []
  for leaf in leaves(rule.lhs):
    lt = dtypes.bool if leaf.is_bool else T
    v = z3.Bool(leaf.name) if lt == dtypes.bool else z3.BitVec(leaf.name, lt.bits)
    syms[leaf.name] = v
    if isinstance(leaf, CVar): env[f"val:{leaf.name}"] = to_int(v, lt, W)
    lo_, hi_ = z3.BitVec(f"lo_{leaf.name}", W), z3.BitVec(f"hi_{leaf.name}", W)
    env[f"lo:{leaf.name}"], env[f"hi:{leaf.name}"] = lo_, hi_
    # RW.BOUNDS: the bounds the engine computes always contain the value and lie inside the dtype
    facts += [wide(dtypes.min(lt)) <= lo_, lo_ <= to_int(v, lt, W), to_int(v, lt, W) <= hi_, hi_ <= wide(dtypes.max(lt))]

  def enc(t: Term):
    if isinstance(t, (Var, CVar)): return syms[t.name]
    if isinstance(t, Lit): return z3_const(t.value, dtypes.bool if t.is_bool else T)
    if isinstance(t, LoOf):
      lo_ = env[f"lo:{t.var.name}"]
      return lo_ == 1 if T == dtypes.bool else z3.Extract(T.bits - 1, 0, lo_)
    assert isinstance(t, App)
    return z3_alu(t.op, dtypes.bool if all(a.is_bool for a in t.args) else T, [enc(a) for a in t.args])

  guard = rule.where.evaluate(env, _Z3_GUARD_OPS) if rule.where is not None else z3.BoolVal(True)
  solver = z3.Solver()
  solver.set("timeout", timeout_ms)
  solver.add(*facts, guard, enc(rule.lhs) != enc(rule.rhs_term))
  result = solver.check()
  if result == z3.unsat: return "proved", None
  if result == z3.sat: return "counterexample", solver.model()
  return "unknown", solver.reason_unknown()
