"""Proofs of integer rewrite rules with z3 (spec/rewrites.md, RW.PROOF).

A rule is proven for one dtype T by asking z3 for a counterexample to

    bounds facts  and  guard  and  lhs != rhs

where every leaf of the rule is a symbolic value of T (so this is a proof of the rule at that width, not of one
instance) and every Var has symbolic bounds lo <= value <= hi inside T, as the engine's bounds always are
(RW.BOUNDS). No counterexample means the rule is sound for every input of T.

Two faithful encodings of the integer ALU ops of spec/ops.md, totality included (x/0 = -1, x%0 = x,
INT_MIN/-1 = INT_MIN, shift counts modulo the width); tests check both against the executable semantics:
- bit-vectors (`z3_alu`): the natural model of a w-bit type. z3 decides it by bit-blasting, which is instant for
  linear and bitwise rules but hopeless for products and quotients of two symbolic 32- or 64-bit values.
- integers (`int_alu`): a value is the mathematical integer it stands for, in [min(T), max(T)]; wrapping is an
  explicit `mod 2**w`, truncating division is floor division on magnitudes chosen by sign cases. z3's nonlinear
  integer reasoning handles the index rules (products and quotients guarded against overflow) where bit-blasting
  times out.

`prove` tries them as a portfolio (see `strategies`), and if the integer encoding alone fails on a signed type,
proves it once per combination of signs of the leaves (the cases cover every value, so all of them together are
the proof). The integer encoding simplifies as it builds: a wrap whose argument is proven to lie in range, a
division whose divisor is proven nonzero, a sign case proven impossible, is left out. Each such step is a z3 proof
of its own under the same hypotheses, so the final query is equivalent to the full one under those hypotheses, and
unsat of it is unsat of the full one (see `_Query.knows`). The guards' integer arithmetic is exact in both: on
bit-vectors wide enough for every intermediate value (`guard_width`), or on z3 Ints."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import z3

from refimpl.dtype import DType, dtypes
from refimpl.uop import Ops
from refimpl.uop.rules import SymRule, Var, CVar, Lit, App, LoOf, Term, G, GInt, GRef, GApp, leaves

INT_TYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
             dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


# z3 resource units (deterministic, unlike time) for one side proof of `_Query.knows`; the largest one the rules
# need takes about 80 thousand
KNOWS_RLIMIT = 1_000_000


def signed(dtype: DType) -> bool: return not dtypes.is_unsigned(dtype)


# ------------------------------------------------------------------------------------------------------------
# Bit-vector encoding


def z3_alu(op: Ops, dtype: DType, args: list):
  """The value of `op` on z3 operands of `dtype` (bit-vectors for ints, z3 Bool for bool); `dtype` is the
  operands' dtype (comparisons give a z3 Bool)."""
  if dtype == dtypes.bool: return _bool_alu(op, args)
  w = dtype.bits
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
    q = a / b if signed(dtype) else z3.UDiv(a, b)   # z3's `/` is bvsdiv: truncating; INT_MIN/-1 wraps to INT_MIN
    return z3.If(b == 0, ones, q)                    # (z3 defines x/0 too, but not as the spec does for signed x)
  if op is Ops.CMOD: return z3.If(b == 0, a, z3.SRem(a, b) if signed(dtype) else z3.URem(a, b))
  if op is Ops.MAX: return z3.If((a > b) if signed(dtype) else z3.UGT(a, b), a, b)
  if op is Ops.CMPLT: return (a < b) if signed(dtype) else z3.ULT(a, b)
  if op is Ops.CMPNE: return a != b
  if op is Ops.CMPEQ: return a == b
  if op is Ops.AND: return a & b
  if op is Ops.OR: return a | b
  if op is Ops.XOR: return a ^ b
  count = b & (w - 1)   # OP.SHL.count: the count's bits as unsigned, modulo the (power of two) width
  if op is Ops.SHL: return a << count
  if op is Ops.SHR: return (a >> count) if signed(dtype) else z3.LShR(a, count)
  raise NotImplementedError(f"no z3 encoding of {op} on {dtype}")


def _bool_alu(op: Ops, args: list):
  a = args[0]
  if op is Ops.WHERE: return z3.If(a, args[1], args[2])
  b = args[1]
  # bool ADD is OR and MUL is AND (OP.ADD.bool, OP.MUL.bool); False < True (OP.CMPLT.bool)
  table = {Ops.AND: z3.And, Ops.OR: z3.Or, Ops.ADD: z3.Or, Ops.MUL: z3.And, Ops.MAX: z3.Or, Ops.XOR: z3.Xor,
           Ops.CMPNE: z3.Xor, Ops.CMPEQ: lambda p, q: p == q, Ops.CMPLT: lambda p, q: z3.And(z3.Not(p), q)}
  if op not in table: raise NotImplementedError(f"no z3 encoding of {op} on bool")
  return table[op](a, b)


def z3_const(value, dtype: DType):
  """A constant of `dtype` as CAST would make it (-1 is all ones in an unsigned type)."""
  if dtype == dtypes.bool: return z3.BoolVal(bool(value))
  return z3.BitVecVal(int(dtypes.as_const(value, dtype)), dtype.bits)


def z3_cast(v, src: DType, dst: DType):
  """OP.CAST between integer and bool types on bit-vectors: truncation keeps the low bits (OP.CAST.wrap), widening
  extends by the source's signedness, bool is 0/1 (OP.CAST.from-bool) and x != 0 (OP.CAST.to-bool)."""
  if src == dst: return v
  if src == dtypes.bool: return z3.If(v, z3.BitVecVal(1, dst.bits), z3.BitVecVal(0, dst.bits))
  if dst == dtypes.bool: return v != 0
  if dst.bits < src.bits: return z3.Extract(dst.bits - 1, 0, v)
  if dst.bits > src.bits: return (z3.SignExt if signed(src) else z3.ZeroExt)(dst.bits - src.bits, v)
  return v


def bv_value(v, dtype: DType):
  """The Python value of the spec's value model that a constant z3 bit-vector (or Bool) of `dtype` stands for."""
  v = z3.simplify(v)
  if dtype == dtypes.bool: return z3.is_true(v)
  return v.as_signed_long() if signed(dtype) else v.as_long()


# ------------------------------------------------------------------------------------------------------------
# Integer encoding


def wrap(v, dtype: DType, in_range: bool = False):
  """DT.WRAP of the integer `v` into `dtype`. The unwrapped branch is kept explicit (not just `v mod 2**w`)
  because the index rules never wrap, and z3 then needs no reasoning about mod; `in_range` drops the test where
  it has been proven to hold."""
  M = 1 << dtype.bits
  base = -(M >> 1) if signed(dtype) else 0
  if in_range: return v
  return z3.If(z3.And(base <= v, v < base + M), v, (v - base) % M + base)


def int_alu(op: Ops, dtype: DType, args: list, knows=None):
  """The value of `op` on z3 Int operands of integer `dtype` (or z3 Bool for bool), each an integer in the range of
  its type; comparisons give a z3 Bool. `knows(cond)`, when given, says whether `cond` is proven to hold at this
  point, which lets the encoding leave out wraps and sign cases that cannot happen."""
  if dtype == dtypes.bool: return _bool_alu(op, args)
  known = knows or (lambda cond: False)
  def wrapped(v): return wrap(v, dtype, known(z3.And(dtypes.min(dtype) <= v, v <= dtypes.max(dtype))))
  a = args[0]
  if op is Ops.NEG: return wrapped(-a)
  if op is Ops.WHERE: return z3.If(args[0], args[1], args[2])
  b = args[1]
  if op is Ops.ADD: return wrapped(a + b)
  if op is Ops.SUB: return wrapped(a - b)
  if op is Ops.MUL: return wrapped(a * b)
  if op is Ops.MULACC: return wrapped(a * b + args[2])
  if op is Ops.CDIV: return _unless_zero(b, int(dtypes.as_const(-1, dtype)), lambda: wrapped(tdiv(a, b, known)), known)
  if op is Ops.CMOD: return _unless_zero(b, a, lambda: a - b * tdiv(a, b, known), known)   # OP.CMOD.sign: a - b*(a/b)
  if op is Ops.MAX: return z3.If(a > b, a, b)
  if op is Ops.CMPLT: return a < b
  if op is Ops.CMPNE: return a != b
  if op is Ops.CMPEQ: return a == b
  # bitwise ops and shifts have no integer counterpart: they go through bit-vectors of the type's width
  if op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR):
    return z3.BV2Int(z3_alu(op, dtype, [z3.Int2BV(a, dtype.bits), z3.Int2BV(b, dtype.bits)]), is_signed=signed(dtype))
  raise NotImplementedError(f"no z3 integer encoding of {op} on {dtype}")


def _unless_zero(b, at_zero, otherwise, known):
  """OP.CDIV.zero / OP.CMOD.zero: `at_zero` where the divisor is 0, else `otherwise()`."""
  if known(b != 0): return otherwise()
  return z3.If(b == 0, at_zero, otherwise())


def tdiv(a, b, known=lambda cond: False):
  """a / b truncated toward zero on unbounded integers (b != 0): z3's div floors for a positive divisor, which is
  truncation for a non-negative dividend, so each sign case divides magnitudes. Cases proven impossible are left
  out."""
  def case(a_pos: bool):
    if known(b > 0): return a / b if a_pos else -((-a) / b)
    if known(b < 0): return -(a / -b) if a_pos else (-a) / (-b)
    return z3.If(b > 0, a / b, -(a / -b)) if a_pos else z3.If(b > 0, -((-a) / b), (-a) / (-b))
  if known(a >= 0): return case(True)
  if known(a < 0): return case(False)
  return z3.If(a >= 0, case(True), case(False))


def int_value(v, dtype: DType):
  v = z3.simplify(v)
  if dtype == dtypes.bool: return z3.is_true(v)
  return v.as_long()


# ------------------------------------------------------------------------------------------------------------
# Guards: integer arithmetic on unbounded integers (rules.py), with Python's meaning of `%` (the divisor's sign)


class _PyModInt:
  """Python's a % b on z3 Ints, as a fresh remainder r with its defining constraints (collected in `defs`):
  a = b*q + r with 0 <= r < b for b > 0 and b < r <= 0 for b < 0, which determine q and r uniquely, so adding
  them changes no model of the rest. For b = 0 (which Python never evaluates: guards ask for a positive divisor
  first, and rules.py short-circuits `and`), r = a, as bvsmod; the conjunction is false there either way.
  Spelt this way rather than with z3's div, `c1 % c2 == 0` hands z3 the witness c1 = c2*q, which its nonlinear
  reasoning needs (RW.IDX.mod-mod-divisor times out otherwise)."""
  def __init__(self): self.defs: list = []
  def __call__(self, a, b):
    n = len(self.defs)
    q, r = z3.Int(f"guard_q{n}"), z3.Int(f"guard_r{n}")
    self.defs.append(z3.If(b == 0, r == a, z3.And(a == b * q + r, z3.If(b > 0, z3.And(0 <= r, r < b),
                                                                          z3.And(b < r, r <= 0)))))
    return r


_BOOL_GUARD_OPS = {"and": z3.And, "or": z3.Or, "not": z3.Not, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
                   ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
                   "!=": lambda a, b: a != b}
_INT_GUARD_OPS = {**_BOOL_GUARD_OPS, "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
# On bit-vectors wide enough that nothing overflows, signed arithmetic is integer arithmetic; z3py's `%` on
# bit-vectors is bvsmod, whose result takes the divisor's sign: Python's %
_BV_GUARD_OPS = {**_INT_GUARD_OPS, "%": lambda a, b: a % b}


def _guard_range(g: G, ranges: dict[str, tuple[int, int]], seen: list[int]) -> tuple[int, int]:
  """An interval holding every value that guard subterm `g` can take (comparisons: 0/1); the magnitudes of all
  intermediate intervals are appended to `seen`."""
  if isinstance(g, GInt): r = (g.value, g.value)
  elif isinstance(g, GRef): r = ranges.get(g.key, ranges["any"])
  else:
    assert isinstance(g, GApp)
    rs = [_guard_range(a, ranges, seen) for a in g.args]
    if g.op in ("+", "-", "*"):
      (a0, a1), (b0, b1) = rs
      ps = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
      r = {"+": (a0 + b0, a1 + b1), "-": (a0 - b1, a1 - b0), "*": (min(ps), max(ps))}[g.op]
    elif g.op == "%":   # |a % b| < |b|, and bvsmod(a, 0) = a
      m = max(abs(x) for x in rs[0] + rs[1])
      r = (-m, m)
    else: r = (0, 1)
  seen.append(max(abs(r[0]), abs(r[1])))
  return r


def guard_width(g: G | None, dtype: DType) -> int:
  """Bits of a signed bit-vector that holds every intermediate value of guard `g` for `dtype`, and every value of
  the dtype, with a bit to spare, so that bit-vector arithmetic on it is integer arithmetic (computed from the
  guard's shape, not assumed)."""
  lo_, hi_ = (0, 1) if dtype == dtypes.bool else (dtypes.min(dtype), dtypes.max(dtype))
  seen = [abs(lo_), abs(hi_)]
  if g is not None: _guard_range(g, {"any": (lo_, hi_), "dmin": (lo_, lo_), "dmax": (hi_, hi_)}, seen)
  return max(seen).bit_length() + 2


# ------------------------------------------------------------------------------------------------------------
# The prover


@dataclass
class Counterexample:
  """Values of the rule's leaves and bounds of its Vars in the spec's value model, ready for SymRule.evaluate."""
  values: dict
  bounds: dict


@dataclass
class _Leaf:
  name: str
  dtype: DType
  value: object
  lo: object
  hi: object


class _Query:
  """The hypotheses (bounds facts, guard, case constraints) and the claim lhs != rhs for one encoding."""
  def __init__(self, rule: SymRule, T: DType, encoding: str, case: tuple = (), timeout_ms: int = 10_000):
    self.rule, self.T, self.encoding, self.timeout_ms = rule, T, encoding, timeout_ms
    self.leaves: list[_Leaf] = []
    facts = []
    bv = encoding == "bv"
    W = guard_width(rule.where, T)
    env: dict = {}
    def gint(n): return z3.BitVecVal(int(n), W) if bv else z3.IntVal(int(n))
    def as_guard(v, t: DType):
      """The guard integer that value v of type t stands for."""
      if t == dtypes.bool: return z3.If(v, gint(1), gint(0))
      if not bv: return v
      return (z3.SignExt if signed(t) else z3.ZeroExt)(W - t.bits, v)
    env["dmin"], env["dmax"] = gint(dtypes.min(T)), gint(dtypes.max(T))
    for leaf in leaves(rule.lhs):
      t = dtypes.bool if leaf.is_bool else T
      if t == dtypes.bool: v = z3.Bool(leaf.name)
      else: v = z3.BitVec(leaf.name, t.bits) if bv else z3.Int(leaf.name)
      lo_, hi_ = (z3.BitVec(f"lo_{leaf.name}", W), z3.BitVec(f"hi_{leaf.name}", W)) if bv else \
          (z3.Int(f"lo_{leaf.name}"), z3.Int(f"hi_{leaf.name}"))
      gv = as_guard(v, t)
      if t != dtypes.bool and not bv: facts += [dtypes.min(t) <= v, v <= dtypes.max(t)]
      # RW.BOUNDS: the bounds the engine computes always contain the value and lie inside the dtype; a CONST's
      # bounds are its value
      if isinstance(leaf, CVar): facts += [lo_ == gv, hi_ == gv]
      else: facts += [gint(dtypes.min(t)) <= lo_, lo_ <= gv, gv <= hi_, hi_ <= gint(dtypes.max(t))]
      if isinstance(leaf, CVar): env[f"val:{leaf.name}"] = gv
      env[f"lo:{leaf.name}"], env[f"hi:{leaf.name}"] = lo_, hi_
      self.leaves.append(_Leaf(leaf.name, t, v, lo_, hi_))
    py_mod = _PyModInt()
    guard = None if rule.where is None else rule.where.evaluate(env, _BV_GUARD_OPS if bv else
                                                                {**_INT_GUARD_OPS, "%": py_mod})
    self.hyps = facts + py_mod.defs + ([guard] if guard is not None else []) + list(case)
    self.env, self.W = env, W
    self.syms = {lf.name: lf.value for lf in self.leaves}
    self._ctx: z3.Solver | None = None
    self.lhs, self.rhs = self.enc(rule.lhs), self.enc(rule.rhs_term)

  # ---- the side proofs that let the integer encoding leave out cases ----
  def knows(self, cond) -> bool:
    """Whether the hypotheses imply `cond` (a short z3 proof; no answer in time counts as 'not known'). Leaving out
    a branch that `knows` has excluded changes no value where the hypotheses hold, so the final query has a
    model exactly when the full one has."""
    if self._ctx is None:
      self._ctx = z3.Solver()
      # a resource limit, not a timeout: what gets simplified must not depend on the machine's load
      self._ctx.set("rlimit", KNOWS_RLIMIT)
      self._ctx.add(*self.hyps)
    cond = z3.simplify(cond)
    if z3.is_true(cond): return True
    if z3.is_false(cond): return False
    self._ctx.push()
    self._ctx.add(z3.Not(cond))
    res = self._ctx.check()
    self._ctx.pop()
    return res == z3.unsat

  def enc(self, t: Term):
    T, bv = self.T, self.encoding == "bv"
    if isinstance(t, (Var, CVar)): return self.syms[t.name]
    if isinstance(t, Lit):
      lt = dtypes.bool if t.is_bool else T
      return z3_const(t.value, lt) if bv or lt == dtypes.bool else z3.IntVal(int(dtypes.as_const(t.value, lt)))
    if isinstance(t, LoOf):
      lo_ = self.env[f"lo:{t.var.name}"]
      if T == dtypes.bool: return lo_ == 1
      return z3.Extract(T.bits - 1, 0, lo_) if bv else lo_
    assert isinstance(t, App)
    src = dtypes.bool if t.args[-1].is_bool else T   # WHERE's condition is bool whatever its branches are
    args = [self.enc(a) for a in t.args]
    return z3_alu(t.op, src, args) if bv else int_alu(t.op, src, args, self.knows)

  def check(self):
    solver = z3.Solver()
    solver.set("timeout", self.timeout_ms)
    solver.add(*self.hyps, self.lhs != self.rhs)
    res = solver.check()
    if res == z3.unsat: return "proved", None
    if res == z3.sat: return "counterexample", self.counterexample(solver.model())
    return "unknown", solver.reason_unknown()

  def evaluate(self, values: dict, bounds: dict):
    """(guard holds, lhs, rhs) as this query's encoding gives them at one concrete point (values of every leaf,
    bounds of every Var), for checking the encoding against SymRule.evaluate. The bounds must be valid ones."""
    bv = self.encoding == "bv"
    fix = []
    for lf in self.leaves:
      v = values[lf.name]
      if lf.dtype == dtypes.bool: fix.append(lf.value == z3.BoolVal(bool(v)))
      else: fix.append(lf.value == (z3.BitVecVal(v, lf.dtype.bits) if bv else z3.IntVal(v)))
      lo_, hi_ = bounds.get(lf.name, (v, v))
      fix += [lf.lo == int(lo_), lf.hi == int(hi_)]
    solver = z3.Solver()
    solver.set("timeout", 10_000)
    solver.add(*self.hyps, *fix)
    res = solver.check()
    if res == z3.unsat: return False, None, None
    assert res == z3.sat, f"{self.rule.clause}: no answer at a concrete point ({solver.reason_unknown()})"
    m = solver.model()
    read = bv_value if bv else int_value
    def value(e, t: DType): return read(m.eval(e, model_completion=True), t)
    def typ(t: Term): return dtypes.bool if t.is_bool else self.T
    return True, value(self.lhs, typ(self.rule.lhs)), value(self.rhs, typ(self.rule.rhs_term))

  def counterexample(self, m: z3.ModelRef) -> Counterexample:
    values, bounds = {}, {}
    read = bv_value if self.encoding == "bv" else int_value
    for lf in self.leaves:
      values[lf.name] = read(m.eval(lf.value, model_completion=True), lf.dtype)
      lo_, hi_ = (m.eval(x, model_completion=True) for x in (lf.lo, lf.hi))
      lo_, hi_ = (x.as_signed_long() if self.encoding == "bv" else x.as_long() for x in (lo_, hi_))
      bounds[lf.name] = (bool(lo_), bool(hi_)) if lf.dtype == dtypes.bool else (lo_, hi_)
    return Counterexample(values, bounds)


def _divides(t: Term) -> bool:
  """Whether a term divides by a non-literal."""
  if not isinstance(t, App): return False
  if t.op in (Ops.CDIV, Ops.CMOD) and not isinstance(t.args[1], Lit): return True
  return any(_divides(a) for a in t.args)


def _bitwise(t: Term) -> bool:
  if not isinstance(t, App): return False
  return t.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR) or any(_bitwise(a) for a in t.args)


def _sign_cases(rule: SymRule, T: DType) -> list[tuple]:
  """Every combination of signs of the rule's integer leaves, as constraints on the integer encoding's variables
  (z3 names them, so these are the same constants). The cases cover every value, so the rule is proven when every
  case is."""
  vs = [z3.Int(leaf.name) for leaf in leaves(rule.lhs) if not leaf.is_bool]
  return [tuple((v >= 0) if s else (v < 0) for v, s in zip(vs, signs))
          for signs in itertools.product((True, False), repeat=len(vs))]


def _run(rule: SymRule, T: DType, encoding: str, timeout_ms: int, split: bool):
  """One strategy: the query in `encoding`, whole or (integers only) split by the signs of the leaves."""
  if not split: return _Query(rule, T, encoding, (), timeout_ms).check()
  assert encoding == "int", "sign cases are constraints on the integer encoding"
  cases = _sign_cases(rule, T)
  for case in cases:
    res = _Query(rule, T, encoding, case, max(1000, timeout_ms // len(cases))).check()
    if res[0] != "proved": return res   # a counterexample in one case is a counterexample of the rule
  return "proved", None


def strategies(rule: SymRule, T: DType) -> list[tuple[str, bool, float]]:
  """(encoding, split on signs, share of the time budget) to try in order.

  Measured on the rules: bit-blasting a 32- or 64-bit divider, or the wide multiplications of a bounds guard, runs
  out of time, while the integer encoding, with the guard's no-overflow facts removing the wraps, proves those
  rules in milliseconds. Unguarded ring identities (x*c1)*c2 = x*(c1*c2) are the opposite: z3 normalises
  polynomials modulo 2**w on bit-vectors at once, and the integer encoding's explicit wraps defeat it. Bitwise ops
  and bool have no integer encoding worth trying."""
  if T == dtypes.bool or T not in INT_TYPES: return [("bv", False, 1.0)]
  terms = [rule.lhs, rule.rhs_term]
  if any(_bitwise(t) for t in terms): return [("bv", False, 1.0)]
  splits = [("int", True, 0.4)] if signed(T) else []
  if rule.where is not None or any(_divides(t) for t in terms):
    return [("int", False, 0.3), *splits, ("bv", False, 0.3)]
  return [("bv", False, 0.3), ("int", False, 0.3), *splits]


def prove(rule: SymRule, T: DType, timeout_ms: int = 60_000) -> tuple[str, object]:
  """('proved', strategy), ('counterexample', Counterexample) or ('unknown', reasons) for `rule` at dtype T.
  A counterexample from any encoding is final: each encoding is exact, so it is a counterexample of the rule."""
  reasons = []
  for encoding, split, share in strategies(rule, T):
    res, info = _run(rule, T, encoding, max(1000, int(timeout_ms * share)), split)
    if res == "proved": return "proved", f"{encoding}{'+signs' if split else ''}"
    if res == "counterexample": return res, info
    reasons.append(f"{encoding}{'+signs' if split else ''}: {info}")
  return "unknown", "; ".join(reasons)


def prove_cast_roundtrip(T: DType, U: DType, timeout_ms: int = 10_000) -> tuple[str, object]:
  """RW.CAST.roundtrip at (T, U): cast(cast(x, U), T) == x for every x of T. ('counterexample', x) otherwise."""
  x = z3.Bool("x") if T == dtypes.bool else z3.BitVec("x", T.bits)
  solver = z3.Solver()
  solver.set("timeout", timeout_ms)
  solver.add(z3_cast(z3_cast(x, T, U), U, T) != x)
  res = solver.check()
  if res == z3.unsat: return "proved", None
  if res == z3.sat: return "counterexample", bv_value(solver.model().eval(x, model_completion=True), T)
  return "unknown", solver.reason_unknown()
