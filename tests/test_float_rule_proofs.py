"""Proofs of the float rewrite rules with z3's IEEE-754 theory (spec/rewrites.md, RW.PROOF, RW.FLOAT.none).

- every rule of refimpl/uop/symbolic.py that applies to a float dtype (the RW.SYM rows whose "applies to" has
  floats) and RW.CAST.noop are proven for float16, bfloat16, float32 and float64: no value of the rule's leaves,
  NaN, infinities, -0.0 and subnormals included, makes the two sides differ under RW.SOUND's equality;
- the encoding is first checked against exec_alu: every float edge-table row of spec/ops.md for an encoded op, every
  pair of special values and random bit patterns, op by op and rule by rule;
- rules that are deliberately wrong get a counterexample, and it breaks the rule under exec_alu too;
- each identity of RW.FLOAT.none is shown false exactly where the spec says: z3 finds a counterexample in each
  class of inputs the spec names (NaN, inf, -0.0, rounding) and proves the identity everywhere else.

Every test here carries the `z3_float` marker (`-m "not z3_float"` leaves them out) and has `z3` in its name."""
from __future__ import annotations

import math
import os
import random
import re
from pathlib import Path

import pytest
import z3

from conformance.spec_tables import edge_tables, parse_value, same_value
from refimpl.dtype import DType, dtypes, float_max, to_dtype
from refimpl.uop import Ops
from refimpl.uop.rules import FLOATS, App, SymRule, Var, leaves, where
from refimpl.uop.semantics import exec_alu
from refimpl.uop.symbolic import DIRECT_RULES, SYM_RULES
from tests.z3_floats import (FP_OPS, bits_float, fp_alu, fp_cast, fp_const, fp_same, fp_sort, fp_term, fp_value,
                             prove_cast_roundtrip, prove_float)

pytestmark = pytest.mark.z3_float

ROOT = Path(__file__).resolve().parent.parent
DT_NAME = {dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32",
           dtypes.float64: "float64"}
# a proof that z3 has not finished after this long is reported, not waited for (RW.PROOF); the slowest float64
# proof takes about a second
TIMEOUT_MS = 30_000


def float_specials(T: DType) -> list[float]:
  """±0, ±1, ±2, ±0.5, 1 plus and minus an ulp, the smallest subnormal, the largest subnormal, the smallest
  normal, the largest finite value, ±inf and NaN, all values of T."""
  ebits, mbits = dtypes.finfo(T)
  emax = (1 << (ebits - 1)) - 1
  tiny, sub = 2.0 ** (1 - emax), 2.0 ** (1 - emax - mbits)
  pos = [0.0, 1.0, 2.0, 0.5, 1 + 2.0 ** -mbits, 1 - 2.0 ** -(mbits + 1), sub, tiny - sub, tiny, float_max(T),
         math.inf, math.nan]
  return pos + [-v for v in pos]


def random_float(T: DType, rng: random.Random) -> float:
  """Uniform bit patterns: every exponent, subnormals, infinities and NaN, half the time a special value."""
  if rng.random() < 0.5: return rng.choice(float_specials(T))
  return bits_float(rng.getrandbits(T.bits), T)


# ------------------------------------------------------------------------------------------------------------
# The encoding is the executable semantics


COMPARISONS = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
ARITY = {Ops.NEG: 1, Ops.SQRT: 1, Ops.TRUNC: 1, Ops.RECIPROCAL: 1, Ops.WHERE: 3, Ops.MULACC: 3}


def _z3_result(op: Ops, T: DType, args: tuple):
  """fp_alu on constant operands, read back as a Python value."""
  zargs = [z3.BoolVal(v) if isinstance(v, bool) else fp_const(v, T) for v in args]
  out = z3.simplify(fp_alu(op, zargs))
  return z3.is_true(out) if op in COMPARISONS else fp_value(out, T)


def spec_rows(op: Ops, T: DType) -> list[tuple]:
  """The operand tuples of spec/ops.md's edge-table rows for `op` on T (OP.TABLES)."""
  out = []
  for clause, header, rows in edge_tables(ROOT / "spec" / "ops.md"):
    if clause != f"OP.{op.name}" or header != ("dtype", "operands", "result"): continue
    for row in rows:
      if to_dtype(row[0]) != T: continue
      cells = row[1].split(",")
      out.append(tuple(parse_value(c, dtypes.bool if op is Ops.WHERE and i == 0 else T) for i, c in enumerate(cells)))
  return out


def operand_tuples(op: Ops, T: DType, rng: random.Random) -> list[tuple]:
  n, sp = ARITY.get(op, 2), float_specials(T)
  if n == 1: tuples = [(a,) for a in sp] + [(random_float(T, rng),) for _ in range(60)]
  elif n == 2: tuples = [(a, b) for a in sp for b in sp] + [(random_float(T, rng), random_float(T, rng))
                                                            for _ in range(120)]
  else: tuples = [tuple(random_float(T, rng) for _ in range(3)) for _ in range(300)]
  if op is Ops.WHERE: tuples = [(rng.random() < 0.5, b, c) for _, b, c in tuples]
  return tuples


ENCODING_CASES = [(op, T) for op in FP_OPS for T in FLOATS]


@pytest.mark.parametrize("op,T", ENCODING_CASES, ids=[f"{op.name}-{DT_NAME[T]}" for op, T in ENCODING_CASES])
def test_z3_float_encoding_matches_exec_alu(op: Ops, T: DType):
  """fp_alu gives what exec_alu gives on the spec's edge rows, every pair of special values and random bits."""
  rng = random.Random(f"{op.name}-{DT_NAME[T]}")
  rows = spec_rows(op, T)
  out_t = dtypes.bool if op in COMPARISONS else T
  for args in rows + operand_tuples(op, T, rng):
    want, got = exec_alu(op, out_t, list(args), T), _z3_result(op, T, args)
    assert same_value(got, want), f"{op.name} on {DT_NAME[T]} at {args}: z3 {got!r}, exec_alu {want!r}"


def test_z3_float_encoding_sees_the_spec_rows():
  """The edge tables of spec/ops.md have float rows for the ops whose special cases the rules touch, so the test
  above checks the encoding against the spec's own examples, not only against exec_alu on generated values."""
  for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.NEG, Ops.MULACC):
    assert any(spec_rows(op, T) for T in FLOATS), op


CAST_PAIRS = [(T, U) for T in FLOATS for U in FLOATS]


@pytest.mark.parametrize("T", FLOATS, ids=[DT_NAME[T] for T in FLOATS])
def test_z3_float_cast_matches_exec_alu(T: DType):
  """fp_cast is OP.CAST.float-to-float from T to every float type, on specials and random bits."""
  rng = random.Random(DT_NAME[T])
  for U in FLOATS:
    for v in float_specials(T) + [random_float(T, rng) for _ in range(150)]:
      want, got = exec_alu(Ops.CAST, U, [v], T), fp_value(z3.simplify(fp_cast(fp_const(v, T), U)), U)
      assert same_value(got, want), f"cast {v!r} from {DT_NAME[T]} to {DT_NAME[U]}: z3 {got!r}, exec_alu {want!r}"


@pytest.mark.parametrize("T", FLOATS, ids=[DT_NAME[T] for T in FLOATS])
def test_z3_float_equality_is_the_specs(T: DType):
  """fp_same is RW.SOUND's equality: it equals SMT-LIB's identity of floating-point values (one NaN, two zeros)
  for every pair of values, and on constants it is same_value: NaN equals NaN, -0.0 is not +0.0."""
  a, b = z3.FP("a", fp_sort(T)), z3.FP("b", fp_sort(T))
  solver = z3.Solver()
  solver.set("timeout", TIMEOUT_MS)
  solver.add(fp_same(a, b) != (a == b))
  assert solver.check() == z3.unsat
  sp = float_specials(T)
  for u in sp:
    for v in sp:
      assert z3.is_true(z3.simplify(fp_same(fp_const(u, T), fp_const(v, T)))) == same_value(u, v), (u, v)


FLOAT_RULE_CASES = [(r, T) for r in SYM_RULES for T in r.dtypes if T in FLOATS]


def case_id(rule: SymRule, T: DType) -> str: return f"{rule.clause}-{DT_NAME[T]}"


@pytest.mark.parametrize("rule,T", FLOAT_RULE_CASES, ids=[case_id(r, T) for r, T in FLOAT_RULE_CASES])
def test_z3_float_rule_encoding_matches_evaluate(rule: SymRule, T: DType):
  """Both sides of each rule, as the prover builds them, agree with SymRule.evaluate (exec_alu) on special and
  random leaves: the proof is about the rule as it runs."""
  rng = random.Random(case_id(rule, T))
  names = [(leaf.name, leaf.is_bool) for leaf in leaves(rule.lhs)]
  for _ in range(80):
    values = {n: (rng.random() < 0.5) if is_bool else random_float(T, rng) for n, is_bool in names}
    syms = {n: z3.BoolVal(v) if isinstance(v, bool) else fp_const(v, T) for n, v in values.items()}
    _, want_l, want_r = rule.evaluate(values, {}, T)
    for term, want in ((rule.lhs, want_l), (rule.rhs_term, want_r)):
      out = z3.simplify(fp_term(term, T, syms))
      got = z3.is_true(out) if z3.is_bool(out) else fp_value(out, T)
      assert same_value(got, want), f"{rule.clause} on {DT_NAME[T]} at {values}: z3 {got!r}, evaluate {want!r}"


def test_z3_every_float_rule_op_is_encoded():
  """The ops of the float rules are among those whose encoding is checked above."""
  def ops_of(t):
    return {t.op} | set().union(*(ops_of(a) for a in t.args)) if isinstance(t, App) else set()
  used = set().union(*(ops_of(r.lhs) | ops_of(r.rhs_term) for r, _ in FLOAT_RULE_CASES))
  assert used and used <= set(FP_OPS), used - set(FP_OPS)


# ------------------------------------------------------------------------------------------------------------
# Every float rule proven for every float dtype


@pytest.mark.parametrize("rule,T", FLOAT_RULE_CASES, ids=[case_id(r, T) for r, T in FLOAT_RULE_CASES])
def test_z3_float_rule_proven(rule: SymRule, T: DType):
  status, info, seconds = prove_float(rule, T, timeout_ms=TIMEOUT_MS)
  if status == "counterexample":
    pytest.fail(f"{rule.clause} is unsound on {DT_NAME[T]}: {info}; exec_alu: {rule.evaluate(info.values, {}, T)}")
  if status == "unknown" and T == dtypes.float64:
    pytest.skip(f"RW.PROOF: z3 did not finish {rule.clause} on float64 in {seconds:.1f} s ({info})")
  assert status == "proved", f"{rule.clause} on {DT_NAME[T]}: no proof after {seconds:.1f} s ({info})"


def test_z3_every_float_rule_is_proven():
  """Every SYM_RULES rule that applies to a float applies to all four float dtypes and is a proof case for each;
  the other rules the symbolic matcher runs on floats are RW.FOLD.const (exec_alu itself) and RW.CAST.noop (below);
  RW.CAST.roundtrip refuses floats."""
  float_rules = {r.clause for r in SYM_RULES if set(r.dtypes) & set(FLOATS)}
  assert len(float_rules) == 13
  for r in SYM_RULES:
    if r.clause in float_rules: assert set(FLOATS) <= set(r.dtypes), r.clause
  assert {r.clause for r, _ in FLOAT_RULE_CASES} == float_rules and len(FLOAT_RULE_CASES) == 4 * len(float_rules)
  assert {r.clause for r in DIRECT_RULES} == {"RW.FOLD.const", "RW.CAST.noop", "RW.CAST.roundtrip"}


@pytest.mark.parametrize("T", FLOATS, ids=[f"RW.CAST.noop-{DT_NAME[T]}" for T in FLOATS])
def test_z3_float_cast_noop_proven(T: DType):
  """RW.CAST.noop on floats: a CAST to the type its operand has is the operand, NaN and -0.0 included."""
  x = z3.FP("x", fp_sort(T))
  solver = z3.Solver()
  solver.set("timeout", TIMEOUT_MS)
  solver.add(z3.Not(fp_same(fp_cast(x, T), x)))
  assert solver.check() == z3.unsat


# ------------------------------------------------------------------------------------------------------------
# Deliberately wrong float rules are caught, with the special value that breaks them


_x, _y = Var("x"), Var("y")
WRONG_RULES = [
  # (rule, which values of x may break it)
  (SymRule("RW.TEST.mul-zero", _x * 0, 0, dtypes=FLOATS), "nan, inf or a negative x (-0.0)"),
  (SymRule("RW.TEST.sub-self", _x - _x, 0, dtypes=FLOATS), "nan or inf"),
  (SymRule("RW.TEST.eq-self", _x.eq(_x), True, dtypes=FLOATS), "nan"),
  (SymRule("RW.TEST.max-negzero", _x.maximum(-0.0), _x.maximum(0.0), dtypes=FLOATS),
   "a negative x or -0.0 (the sign of a zero maximum)"),
  (SymRule("RW.TEST.relu-where", where(_x < 0.0, 0.0, _x), _x.maximum(0.0), dtypes=FLOATS), "-0.0 (kept by WHERE)"),
]
BREAKS = {"RW.TEST.mul-zero": lambda v: v != v or math.isinf(v) or math.copysign(1.0, v) < 0,
          "RW.TEST.sub-self": lambda v: v != v or math.isinf(v),
          "RW.TEST.eq-self": lambda v: v != v,
          "RW.TEST.max-negzero": lambda v: v == v and math.copysign(1.0, v) < 0,
          "RW.TEST.relu-where": lambda v: v == 0 and math.copysign(1.0, v) < 0}
WRONG_CASES = [(r, why, T) for r, why in WRONG_RULES for T in FLOATS]


@pytest.mark.parametrize("rule,why,T", WRONG_CASES, ids=[case_id(r, T) for r, _, T in WRONG_CASES])
def test_z3_float_prover_catches_wrong_rule(rule: SymRule, why: str, T: DType):
  """The prover returns a counterexample, it is one of the values that break the rule, and exec_alu agrees that
  the two sides differ there."""
  status, cex, _ = prove_float(rule, T, timeout_ms=TIMEOUT_MS)
  assert status == "counterexample", (status, cex)
  print(f"{rule.clause} on {DT_NAME[T]} ({why}): {cex}")
  assert BREAKS[rule.clause](cex.values["x"]), f"{rule.clause}: {cex} is not among {why}"
  guard, lhs, rhs = rule.evaluate(cex.values, {}, T)
  assert guard and not same_value(lhs, rhs) and same_value(lhs, cex.lhs) and same_value(rhs, cex.rhs), cex


# ------------------------------------------------------------------------------------------------------------
# RW.FLOAT.none: each identity is false, for exactly the inputs the spec says


def _nan(v): return z3.fpIsNaN(v)
def _inf(v): return z3.fpIsInf(v)
def _zero(v): return z3.fpIsZero(v)
def _negzero(v): return z3.And(z3.fpIsZero(v), z3.fpIsNegative(v))
def _neg_finite(v): return z3.And(z3.fpIsNegative(v), z3.Not(z3.fpIsInf(v)))   # fp.isNegative is false on NaN


# class name -> (z3 condition on x, the same on a Python float)
CLASSES = {"nan": (_nan, lambda v: v != v), "inf": (_inf, math.isinf), "zero": (_zero, lambda v: v == 0),
           "-0.0": (_negzero, lambda v: v == 0 and math.copysign(1.0, v) < 0),
           "negative finite": (_neg_finite, lambda v: math.isfinite(v) and math.copysign(1.0, v) < 0)}
_z = Var("z")
# (spec text, identity, the classes of x the spec names as breaking it): the identity holds for every other x
UNARY_NONE = [
  ("`x * 0 -> 0`", SymRule("RW.FLOAT.none", _x * 0, 0, dtypes=FLOATS), ("nan", "inf", "negative finite")),
  ("`x / x -> 1`", SymRule("RW.FLOAT.none", _x / _x, 1, dtypes=FLOATS), ("zero", "inf", "nan")),
  ("`x - x -> 0`", SymRule("RW.FLOAT.none", _x - _x, 0, dtypes=FLOATS), ("inf", "nan")),
  ("`x + 0.0 -> x`", SymRule("RW.FLOAT.none", _x + 0.0, _x, dtypes=FLOATS), ("-0.0",)),
  ("`x != x -> False`", SymRule("RW.FLOAT.none", _x.ne(_x), False, dtypes=FLOATS), ("nan",)),
  ("`x == x -> True`", SymRule("RW.FLOAT.none", _x.eq(_x), True, dtypes=FLOATS), ("nan",)),
]
# rounding alone breaks these: operands in [1, 2), no special value
ROUNDING_NONE = [
  ("add-assoc", SymRule("RW.FLOAT.none", (_x + _y) + _z, _x + (_y + _z), dtypes=FLOATS)),
  ("mul-assoc", SymRule("RW.FLOAT.none", (_x * _y) * _z, _x * (_y * _z), dtypes=FLOATS)),
  ("distribute", SymRule("RW.FLOAT.none", _x * (_y + _z), _x * _y + _x * _z, dtypes=FLOATS)),
]
# float64 searches over three unknown 53-bit significands are slow: without a hint z3 gave no answer in 60 s for
# (x*y)*z, and took 1.5 to 10 s for (x+y)+z (measured). There the search starts from x (and for products y)
# = 1 + 2**-52, the next float after 1, and z3 finds the rest.
F64_HINT = {0: ("x",), 1: ("x", "y"), 2: ("x",)}


def _rw_float_none_text() -> str:
  text = (ROOT / "spec" / "rewrites.md").read_text()
  return text.split("## `RW.FLOAT.none`")[1].split("\n## ")[0]


def test_z3_rw_float_none_lists_these_identities():
  """The identities checked below are the ones spec/rewrites.md lists under RW.FLOAT.none."""
  prose = " ".join(_rw_float_none_text().split())
  for text, _, _ in UNARY_NONE: assert text in prose, text
  for word in ("reassociation", "distribution", "cast round trips"): assert word in prose, word


UNARY_CASES = [(text, r, classes, T) for text, r, classes in UNARY_NONE for T in FLOATS]
UNARY_IDS = [f"{t.strip('`')}-{DT_NAME[T]}" for t, _, _, T in UNARY_CASES]


@pytest.mark.parametrize("text,rule,classes,T", UNARY_CASES, ids=UNARY_IDS)
def test_z3_rw_float_none_identity_false_where_the_spec_says(text: str, rule: SymRule, classes: tuple, T: DType):
  """For each class of x the spec names, z3 finds an x of that class where the identity is false, and exec_alu
  agrees."""
  for name in classes:
    in_class, is_class = CLASSES[name]
    status, cex, _ = prove_float(rule, T, assume=lambda s: in_class(s["x"]), timeout_ms=TIMEOUT_MS)
    assert status == "counterexample", f"{text} on {DT_NAME[T]}: no counterexample with x {name} ({status})"
    print(f"{text} on {DT_NAME[T]}, x {name}: {cex}")
    assert is_class(cex.values["x"]), cex
    guard, lhs, rhs = rule.evaluate(cex.values, {}, T)
    assert not same_value(lhs, rhs), f"{text}: {cex} is no counterexample under exec_alu"


# float64 x / x == 1 for finite nonzero x needs z3 to reason about a 53-bit divider: it is proven in 23 to 40 s on
# two shared cores (measured), more than this file's budget, and a shorter timeout overran to 14 s without an
# answer. It is skipped, with that reason, unless Z3_FLOAT_SLOW=1 asks for it (then with a 120 s timeout).
SLOW = {("`x / x -> 1`", dtypes.float64)}


@pytest.mark.parametrize("text,rule,classes,T", UNARY_CASES, ids=UNARY_IDS)
def test_z3_rw_float_none_identity_holds_elsewhere(text: str, rule: SymRule, classes: tuple, T: DType):
  """For every x outside the classes the spec names, z3 proves the identity true: the spec's reasons are the
  whole story (x * 0 is +0.0 for finite non-negative x, x / x is 1 for finite nonzero x, x - x is +0.0 for finite
  x, x + 0.0 is x unless x is -0.0, x == x unless x is NaN)."""
  slow = (text, T) in SLOW
  if slow and os.environ.get("Z3_FLOAT_SLOW") != "1":
    pytest.skip(f"RW.PROOF: {text} on {DT_NAME[T]} outside {classes} takes z3 23-40 s (measured on two shared "
                f"cores, under load); Z3_FLOAT_SLOW=1 runs it")
  elsewhere = lambda s: z3.Not(z3.Or(*[CLASSES[n][0](s["x"]) for n in classes]))
  status, info, seconds = prove_float(rule, T, assume=elsewhere, timeout_ms=120_000 if slow else TIMEOUT_MS)
  assert status == "proved", f"{text} on {DT_NAME[T]} outside {classes}: {status} after {seconds:.1f} s: {info}"


ROUNDING_CASES = [(i, T) for i in range(len(ROUNDING_NONE)) for T in FLOATS]


@pytest.mark.parametrize("i,T", ROUNDING_CASES, ids=[f"{ROUNDING_NONE[i][0]}-{DT_NAME[T]}" for i, T in ROUNDING_CASES])
def test_z3_rw_float_none_reassociation_false_by_rounding(i: int, T: DType):
  """Reassociating or distributing float + and * changes results through rounding alone: z3 finds operands in
  [1, 2), nothing special, where the two orders give different floats, and exec_alu agrees."""
  _, rule = ROUNDING_NONE[i]
  one, two = fp_const(1.0, T), fp_const(2.0, T)
  hint = F64_HINT.get(i, ()) if T == dtypes.float64 else ()
  def assume(s):
    unit = [z3.And(z3.fpLEQ(one, v), z3.fpLT(v, two)) for v in s.values()]
    return z3.And(*unit, *[s[n] == fp_const(1 + 2.0 ** -52, T) for n in hint])
  status, cex, seconds = prove_float(rule, T, assume=assume, timeout_ms=TIMEOUT_MS)
  assert status == "counterexample", f"{status} after {seconds:.1f} s: {cex}"
  print(f"{DT_NAME[T]}: {cex} ({seconds:.2f} s)")
  assert all(1.0 <= v < 2.0 for v in cex.values.values()), cex
  _, lhs, rhs = rule.evaluate(cex.values, {}, T)
  assert math.isfinite(lhs) and math.isfinite(rhs) and lhs != rhs, (cex, lhs, rhs)


def lossless(T: DType, U: DType) -> bool:
  """Every value of float type T is a value of U: at least as many exponent and significand bits."""
  (te, tm), (ue, um) = dtypes.finfo(T), dtypes.finfo(U)
  return ue >= te and um >= tm


ROUNDTRIPS = [(T, U) for T in FLOATS for U in FLOATS if T != U]


@pytest.mark.parametrize("T,U", ROUNDTRIPS, ids=[f"{DT_NAME[T]}-{DT_NAME[U]}-{DT_NAME[T]}" for T, U in ROUNDTRIPS])
def test_z3_rw_float_none_cast_roundtrip(T: DType, U: DType):
  """cast(cast(x, U), T) -> x, for x of float type T: z3 finds an x that the round trip changes whenever U lacks
  some value of T (exec_alu agrees), and proves the round trip exact when U holds every value of T; the spec
  elides neither kind (RW.FLOAT.none, RW.CAST.roundtrip)."""
  status, cex, _ = prove_cast_roundtrip(T, U, timeout_ms=TIMEOUT_MS)
  if lossless(T, U):
    assert status == "proved", (status, cex)
    return
  assert status == "counterexample", status
  v = cex.values["x"]
  back = exec_alu(Ops.CAST, T, [exec_alu(Ops.CAST, U, [v], T)], U)
  assert math.isfinite(v) and not same_value(back, v), (cex, back)


def test_z3_lossless_float_pairs():
  """The widening pairs are exactly these five; the other seven pairs of distinct float types lose values."""
  pairs = {(DT_NAME[T], DT_NAME[U]) for T, U in ROUNDTRIPS if lossless(T, U)}
  assert pairs == {("float16", "float32"), ("float16", "float64"), ("bfloat16", "float32"), ("bfloat16", "float64"),
                   ("float32", "float64")}


def test_z3_float_spec_names_the_proof():
  """RW.PROOF in spec/rewrites.md says which float dtypes the IEEE proofs cover and what equality they use."""
  prose = " ".join((ROOT / "spec" / "rewrites.md").read_text().split())
  for words in ("IEEE", "float16, bfloat16, float32 and float64", "tests/test_float_rule_proofs.py"):
    assert words in prose, words
  assert re.search(r"NaN equals any NaN", prose)
