"""Soundness of the symbolic rewrite rules (spec/rewrites.md, RW.PROOF).

- every integer and bool rule is proven with z3 at every width it applies to (tests/z3_rules.py), and so is the
  integer/bool cast round trip for every lossless pair of types;
- the z3 encodings themselves are checked against the executable semantics, op by op and rule by rule, so a proof
  is a proof about what runs;
- every rule, floats included, is evaluated on random inputs heavy in special values through the executable
  semantics, and constant folding is checked against it;
- rules that are deliberately wrong are caught by both the prover and the random test.

Every test that runs z3 has `z3` in its name: `-k "not z3"` leaves the random tests alone."""
from __future__ import annotations

import functools
import math
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import z3
from hypothesis import find, given, settings, strategies as st

from refimpl.dtype import DType, can_lossless_cast, dtypes, round_float
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp, graph_rewrite
from refimpl.uop.rules import BOOL, FLOATS, INTS, CVar, SymRule, Var, hi, leaves, lo, val
from refimpl.uop.semantics import ALU_DTYPES, exec_alu
from refimpl.uop.symbolic import SYM_RULES, symbolic
from tests.z3_rules import (_PyModInt, _Query, _run, bv_value, int_alu, int_value, prove, prove_cast_roundtrip,
                            strategies, z3_alu, z3_cast)

DT_NAME = {dt: name for name, dt in reversed(dtypes.fields().items())}   # the sized name: int32, not int
INT_BOOL = INTS + BOOL


def case_id(rule: SymRule, T: DType) -> str: return f"{rule.clause}-{DT_NAME[T]}"


PROOF_CASES = [(r, T) for r in SYM_RULES for T in r.dtypes if T in INT_BOOL]
ALL_CASES = [(r, T) for r in SYM_RULES for T in r.dtypes]


# ------------------------------------------------------------------------------------------------------------
# Values: every value of a dtype is possible, the ones where rules break are likely


def int_specials(T: DType) -> list[int]:
  """Values of integer type T where arithmetic is most often wrong: 0, ±1, the ends of the range and their
  neighbours, powers of two and their neighbours, shift counts around the width."""
  lo_, hi_, w = dtypes.min(T), dtypes.max(T), T.bits
  cands = {0, 1, -1, 2, -2, 3, -3, lo_, lo_ + 1, hi_, hi_ - 1, w - 1, w, w + 1}
  for k in range(w): cands |= {1 << k, (1 << k) - 1, (1 << k) + 1, -(1 << k)}
  return sorted(v for v in cands if lo_ <= v <= hi_)


def float_specials(T: DType) -> list[float]:
  """±0.0, ±inf, nan, the smallest subnormal, the largest subnormal, the smallest normal (tiny), the largest
  finite value, and values around 1, all values of T."""
  ebits, mbits = dtypes.finfo(T)
  emax = (1 << (ebits - 1)) - 1
  tiny, sub = 2.0 ** (1 - emax), 2.0 ** (1 - emax - mbits)
  pos = [0.0, 1.0, 2.0, 0.5, 3.0, 1 + 2.0 ** -mbits, 1 - 2.0 ** -(mbits + 1), tiny, sub, tiny - sub,
         (2 - 2.0 ** -mbits) * 2.0 ** emax, math.inf, math.nan]
  out = pos + [-v for v in pos]
  assert all(v != v or round_float(v, T) == v for v in out), f"a special value of {T} is not a value of it"
  return out


def float_from_bits(bits: int, T: DType) -> float:
  """The value of float type T with bit pattern `bits`: uniform bits reach every exponent, subnormals and NaNs."""
  if T == dtypes.bfloat16: return struct.unpack("<f", (bits << 16).to_bytes(4, "little"))[0]
  fmt = {16: "<e", 32: "<f", 64: "<d"}[T.bits]
  return struct.unpack(fmt, bits.to_bytes(T.bits // 8, "little"))[0]


@functools.cache
def values_of(T: DType) -> st.SearchStrategy:
  if T == dtypes.bool: return st.booleans()
  if T in FLOATS:
    return st.one_of(st.sampled_from(float_specials(T)),
                     st.integers(0, (1 << T.bits) - 1).map(lambda b: float_from_bits(b, T)))
  lo_, hi_ = dtypes.min(T), dtypes.max(T)
  return st.one_of(st.sampled_from(int_specials(T)), st.integers(max(lo_, -16), min(hi_, 16)), st.integers(lo_, hi_))


# bounds are drawn with fixed strategies and arithmetic on the value: strategies built per draw cost more than
# the whole property
_KIND, _NEAR, _FRACTION, _BOOLS = st.integers(0, 3), st.integers(0, 8), st.integers(0, (1 << 64) - 1), st.booleans()


def draw_bounds(draw, v, T: DType) -> tuple:
  """(lo, hi) with lo <= v <= hi inside T, as RW.BOUNDS guarantees: often tight (so that guards hold), sometimes
  the whole type."""
  if T == dtypes.bool: return (draw(_BOOLS) and v, draw(_BOOLS) or v)
  if T in FLOATS: return dtypes.min(T), dtypes.max(T)   # no float rule has a guard on bounds
  def one(end: int) -> int:
    kind = draw(_KIND)
    if kind == 0: return v
    if kind == 1: return v + max(-draw(_NEAR), end - v) if end < v else v + min(draw(_NEAR), end - v)
    if kind == 2: return v + (((end - v) * draw(_FRACTION)) >> 64)
    return end
  return one(dtypes.min(T)), one(dtypes.max(T))


@functools.cache   # building a composite strategy reads its source: once per rule, not once per example
def rule_inputs(rule: SymRule, T: DType) -> st.SearchStrategy:
  """(values, bounds) for SymRule.evaluate: a value for every leaf, bounds for every Var; a CONST's bounds are its
  value."""
  shape = [(leaf.name, dtypes.bool if leaf.is_bool else T, isinstance(leaf, CVar)) for leaf in leaves(rule.lhs)]
  @st.composite
  def draw(data):
    values, bounds = {}, {}
    for name, t, is_const in shape:
      v = values[name] = data(values_of(t))
      bounds[name] = (v, v) if is_const else draw_bounds(data, v, t)
    return values, bounds
  return draw()


def same_value(a, b) -> bool:
  """Equality of values of the spec's model: NaN equals NaN, -0.0 differs from +0.0, bool differs from int."""
  if isinstance(a, float) or isinstance(b, float):
    if not (isinstance(a, float) and isinstance(b, float)): return False
    if a != a or b != b: return a != a and b != b
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
  return type(a) is type(b) and a == b


def rule_holds(rule: SymRule, T: DType, inputs) -> bool:
  """The soundness property at one input: where the guard holds, both sides have the same value."""
  values, bounds = inputs
  guard, lhs, rhs = rule.evaluate(values, bounds, T)
  return not guard or same_value(lhs, rhs)


# ------------------------------------------------------------------------------------------------------------
# z3 proofs of every integer and bool rule at every width


_FRESH = ("import sys\nfrom tests.test_rewrite_soundness import PROOF_CASES, case_id\n"
          "from tests.z3_rules import prove\n"
          "rule, T = next((r, T) for r, T in PROOF_CASES if case_id(r, T) == sys.argv[1])\n"
          "print(*prove(rule, T, timeout_ms=120_000), sep='\\n')")


@pytest.mark.parametrize("rule,T", PROOF_CASES, ids=[case_id(r, T) for r, T in PROOF_CASES])
def test_z3_rule_proven(rule: SymRule, T: DType):
  status, info = prove(rule, T, timeout_ms=60_000)
  if status == "unknown":
    # z3's state in a long-lived process matters: after the float proofs (tests/test_float_rule_proofs.py) ran in the
    # same process, RW.IDX.{div,mod}-add-const-multiple ran past every budget in every encoding, while a fresh
    # process proves them in seconds. An unproven rule is therefore tried once more in a fresh interpreter; only an
    # unknown there too fails (a counterexample is final either way: each encoding is exact).
    fresh = subprocess.run([sys.executable, "-c", _FRESH, case_id(rule, T)], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent.parent, timeout=600)
    status, info = (fresh.stdout.strip().split("\n", 1) + [fresh.stderr[-2000:]])[:2] if fresh.stdout else \
      ("unknown", f"{info}; fresh process: {fresh.stderr[-2000:]}")
  if status == "counterexample":
    evaluated = rule.evaluate(info.values, info.bounds, T) if not isinstance(info, str) else info
    pytest.fail(f"{rule.clause} is unsound on {DT_NAME[T]}: {info}, evaluated: {evaluated}")
  assert status == "proved", f"{rule.clause} on {DT_NAME[T]}: no proof ({info})"


def test_z3_every_integer_rule_is_proven():
  """Every rule that applies to an integer type is among the proof cases, at each integer width it applies to."""
  proven = {(r.clause, T) for r, T in PROOF_CASES}
  for r in SYM_RULES:
    for T in r.dtypes:
      if T in INT_BOOL: assert (r.clause, T) in proven


CAST_PAIRS = [(T, U) for T in INT_BOOL for U in INT_BOOL if T != U and can_lossless_cast(T, U)]


@pytest.mark.parametrize("T,U", CAST_PAIRS, ids=[f"RW.CAST.roundtrip-{DT_NAME[T]}-{DT_NAME[U]}" for T, U in CAST_PAIRS])
def test_z3_cast_roundtrip_proven(T: DType, U: DType):
  """RW.CAST.roundtrip: cast(cast(x, U), T) -> x for every x of T when the cast to U is lossless."""
  assert prove_cast_roundtrip(T, U) == ("proved", None)


def test_cast_roundtrip_rule_fires_exactly_on_lossless_pairs():
  """The rule in symbolic.py fires on the proven pairs and on no int/bool pair that loses values."""
  for T in INT_BOOL:
    for U in INT_BOOL:
      if T == U: continue
      v = UOp.variable("v", 0, 1, dtypes.int32).eq(0) if T == dtypes.bool else UOp.variable("v", 0, 1, T)
      out = graph_rewrite(v.cast(U).cast(T), symbolic)
      assert (out is v) == ((T, U) in CAST_PAIRS), (T, U, out)


# ------------------------------------------------------------------------------------------------------------
# The encodings agree with the executable semantics


INT_OPS = [Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC, Ops.CDIV, Ops.CMOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
           Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE]
BOOL_OPS = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE]
ARITY = {Ops.NEG: 1, Ops.MULACC: 3, Ops.WHERE: 3}


def operand_tuples(op: Ops, T: DType, rng: random.Random) -> list[tuple]:
  """Operands for `op` on T: all pairs of the edge values, plus random tuples mixing edges and uniform values."""
  n = ARITY.get(op, 2)
  if T == dtypes.bool: pool = [False, True]
  else:
    lo_, hi_, w = dtypes.min(T), dtypes.max(T), T.bits
    pool = sorted({v for v in (0, 1, -1, 2, -2, 3, -7, lo_, lo_ + 1, hi_, hi_ - 1, w - 1, w, w + 1, 1 << (w - 2))
                   if lo_ <= v <= hi_})
  def pick():
    if T == dtypes.bool: return rng.choice(pool)
    return rng.choice(pool) if rng.random() < 0.5 else rng.randint(dtypes.min(T), dtypes.max(T))
  if n == 1: tuples = [(a,) for a in pool] + [(pick(),) for _ in range(40)]
  elif n == 2: tuples = [(a, b) for a in pool for b in pool] + [(pick(), pick()) for _ in range(80)]
  else: tuples = [(pick(), pick(), pick()) for _ in range(120)]
  if op is Ops.WHERE: tuples = [(rng.random() < 0.5, b, c) for _, b, c in tuples]
  return tuples


def _z3_operands(op: Ops, T: DType, args: tuple, bv: bool) -> list:
  def one(v, t):
    if t == dtypes.bool: return z3.BoolVal(v)
    return z3.BitVecVal(v, t.bits) if bv else z3.IntVal(v)
  return [one(v, dtypes.bool if (op is Ops.WHERE and i == 0) else T) for i, v in enumerate(args)]


def _concrete_knows(cond) -> bool:
  """At constant operands, every condition simplifies to true or false: this oracle makes int_alu take the branches
  it leaves out of a proof when the prover has shown a condition to hold."""
  return z3.is_true(z3.simplify(cond))


ENCODING_CASES = [(op, T) for T in INTS for op in INT_OPS] + [(op, dtypes.bool) for op in BOOL_OPS]


@pytest.mark.parametrize("op,T", ENCODING_CASES, ids=[f"{op.name}-{DT_NAME[T]}" for op, T in ENCODING_CASES])
def test_z3_encodings_match_exec_alu(op: Ops, T: DType):
  """z3_alu (bit-vectors) and int_alu (integers, with and without its proven-case shortcuts) give exactly what
  exec_alu gives, on every edge pair of operands and random ones."""
  rng = random.Random(f"{op.name}-{T}")
  out_t = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else T
  for args in operand_tuples(op, T, rng):
    want = exec_alu(op, out_t, list(args), T)
    got = {"bv": bv_value(z3_alu(op, T, _z3_operands(op, T, args, True)), out_t)}
    if T != dtypes.bool:
      got["int"] = int_value(int_alu(op, T, _z3_operands(op, T, args, False)), out_t)
      got["int-known"] = int_value(int_alu(op, T, _z3_operands(op, T, args, False), _concrete_knows), out_t)
    for name, g in got.items():
      assert same_value(g, want), f"{name} encoding of {op.name} on {DT_NAME[T]} at {args}: {g!r}, exec_alu: {want!r}"


def test_z3_every_rule_op_is_encoded():
  """The ops checked above are all the ops the rules use, so no rule is proven with an unchecked encoding."""
  def ops_of(t):
    return {t.op} | set().union(*(ops_of(a) for a in t.args)) if hasattr(t, "op") else set()
  used = set().union(*(ops_of(r.lhs) | ops_of(r.rhs_term) for r, _ in PROOF_CASES))
  assert used <= set(INT_OPS), used - set(INT_OPS)
  assert {op for r, T in PROOF_CASES if T == dtypes.bool for op in ops_of(r.lhs) | ops_of(r.rhs_term)} <= set(BOOL_OPS)


@pytest.mark.parametrize("T", INT_BOOL, ids=[DT_NAME[T] for T in INT_BOOL])
def test_z3_cast_matches_exec_alu(T: DType):
  """z3_cast (Extract / SignExt / ZeroExt, 0/1 and != 0 for bool) is OP.CAST between every pair of int/bool types."""
  vals = [False, True] if T == dtypes.bool else int_specials(T)
  for U in INT_BOOL:
    for v in vals:
      x = z3.BoolVal(v) if T == dtypes.bool else z3.BitVecVal(v, T.bits)
      want, got = exec_alu(Ops.CAST, U, [v], T), bv_value(z3_cast(x, T, U), U)
      assert same_value(got, want), f"cast {v} from {DT_NAME[T]} to {DT_NAME[U]}: {got!r}, exec_alu: {want!r}"


def test_z3_guard_mod_is_python_mod():
  """A guard's `%` is Python's (the divisor's sign) in both encodings: bvsmod on wide bit-vectors, and the fresh
  remainder with its defining constraints on integers."""
  edges = [0, 1, -1, 2, -2, 3, -3, 7, -7, 127, -128, 255, 2**63 - 1, -2**63, 2**64 - 1]
  for a in edges:
    for b in edges:
      if b == 0: continue
      wide = z3.BitVecVal(a, 70) % z3.BitVecVal(b, 70)
      assert z3.simplify(wide).as_signed_long() == a % b, (a, b)
      mod = _PyModInt()
      r = mod(z3.IntVal(a), z3.IntVal(b))
      solver = z3.Solver()
      solver.add(*mod.defs, r != a % b)
      assert solver.check() == z3.unsat, (a, b)


SPLIT_CASES = [(r, T) for r in SYM_RULES if r.clause in ("RW.IDX.div-mul", "RW.IDX.mod-mod-divisor")
               for T in (dtypes.int8, dtypes.int32)]


@pytest.mark.parametrize("rule,T", SPLIT_CASES, ids=[case_id(r, T) for r, T in SPLIT_CASES])
def test_z3_sign_split_fallback_proves(rule: SymRule, T: DType):
  """The fallback that proves a rule case by case over the signs of its leaves works (no rule needs it today, so
  it is exercised here), and so does bit-vector fallback at a width where bit-blasting is quick."""
  assert _run(rule, T, "int", 60_000, split=True) == ("proved", None)
  if T.bits == 8: assert _run(rule, T, "bv", 60_000, split=False) == ("proved", None)


@pytest.mark.parametrize("rule,T", PROOF_CASES, ids=[case_id(r, T) for r, T in PROOF_CASES])
def test_z3_rule_encoding_matches_evaluate(rule: SymRule, T: DType):
  """The whole query the prover solves (bounds facts, guard, both sides), in each encoding the prover may use for
  this rule, agrees with SymRule.evaluate at concrete points: the proof is about the rule as it runs."""
  queries = [_Query(rule, T, enc) for enc in sorted({s[0] for s in strategies(rule, T)})]
  @settings(max_examples=6, deadline=None, derandomize=True, database=None)
  @given(rule_inputs(rule, T))
  def agree(inputs):
    want = rule.evaluate(*inputs, T)
    for q in queries:
      got = q.evaluate(*inputs)
      assert got[0] == want[0] and (not want[0] or all(same_value(g, w) for g, w in zip(got[1:], want[1:]))), \
        f"{q.encoding} encoding at {inputs}: {got}, evaluate: {want}"
  agree()


# ------------------------------------------------------------------------------------------------------------
# Every rule on random inputs, floats included


# Integer and bool rules are proven above, so random inputs are a cross-check there; for floats they are the only
# check, and get more examples.
EXAMPLES = {"int": 50, "float": 200}


def check_on_random_inputs(rule: SymRule, T: DType, max_examples: int) -> None:
  """The soundness property on `max_examples` inputs (deterministic); raises AssertionError at a broken input."""
  @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None)
  @given(rule_inputs(rule, T))
  def sound(inputs):
    assert rule_holds(rule, T, inputs), f"{rule.clause} on {DT_NAME[T]} at {inputs}: {rule.evaluate(*inputs, T)}"
  sound()


@pytest.mark.parametrize("rule,T", ALL_CASES, ids=[case_id(r, T) for r, T in ALL_CASES])
def test_rule_sound_on_random_inputs(rule: SymRule, T: DType):
  check_on_random_inputs(rule, T, EXAMPLES["float" if T in FLOATS else "int"])


# ------------------------------------------------------------------------------------------------------------
# RW.FOLD.const


FOLD_OPS = sorted(ALU_DTYPES, key=lambda op: op.name)


@functools.cache
def fold_case(op: Ops) -> st.SearchStrategy:
  """(node, expected CONST value, its dtype) for `op` on CONSTs of a dtype it accepts."""
  @st.composite
  def draw(data):
    T = data(st.sampled_from(sorted(ALU_DTYPES[op], key=lambda d: d.name)))
    if op in (Ops.CAST, Ops.BITCAST):
      targets = [d for d in dtypes.all() if d != T and (op is Ops.CAST or d.itemsize == T.itemsize)]
      if not targets: targets = [T]
      U = data(st.sampled_from(targets))
      v = data(values_of(T))
      node = UOp(op, U, (UOp.const(T, v),))
      return node, exec_alu(op, U, [v], T), U
    n = 1 if op in GroupOp.Unary else ARITY.get(op, 2)
    args = [data(values_of(dtypes.bool if op is Ops.WHERE and i == 0 else T)) for i in range(n)]
    consts = [UOp.const(dtypes.bool if op is Ops.WHERE and i == 0 else T, v) for i, v in enumerate(args)]
    if op is Ops.WHERE: node = consts[0].where(consts[1], consts[2])
    else: node = consts[0].alu(op, *consts[1:])
    return node, exec_alu(op, node.dtype, args, T), node.dtype
  return draw()


@pytest.mark.parametrize("op", FOLD_OPS, ids=[f"RW.FOLD.const-{op.name}" for op in FOLD_OPS])
@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_constant_folding_is_exec_alu(op: Ops, data):
  node, want, dt = data.draw(fold_case(op))
  out = graph_rewrite(node, symbolic)
  assert out.op is Ops.CONST and out.dtype == dt and same_value(out.arg, want), f"{node} folded to {out}, not {want!r}"


# ------------------------------------------------------------------------------------------------------------
# Deliberately unsound rules are caught


_x, _c = Var("x"), CVar("c")
UNSOUND_DIV_MUL = SymRule("RW.TEST.unsound", (_x * _c) // _c, _x, dtypes=INTS, note="no overflow guard")
OFF_BY_ONE = SymRule("RW.TEST.off-by-one", _x // _c, 0, where=(lo(_x) >= 0) & (hi(_x) <= val(_c)),
                     note="RW.IDX.div-small with <= where < is needed: wrong at x == c")
FLOAT_MUL_ZERO = SymRule("RW.TEST.float-mul-zero", _x * 0, 0, dtypes=FLOATS, note="false for inf, nan and -0")
FIND = settings(max_examples=2000, deadline=None, derandomize=True, database=None)


@pytest.mark.parametrize("T", [dtypes.int8, dtypes.int32], ids=["int8", "int32"])
def test_z3_prover_catches_unsound_rule(T: DType):
  status, cex = prove(UNSOUND_DIV_MUL, T)
  assert status == "counterexample"
  v, k = cex.values["x"], cex.values["c"]
  assert exec_alu(Ops.CDIV, T, [exec_alu(Ops.MUL, T, [v, k]), k]) != v, f"{cex} is no counterexample"
  guard, lhs, rhs = UNSOUND_DIV_MUL.evaluate(cex.values, cex.bounds, T)
  assert guard and not same_value(lhs, rhs)


@pytest.mark.parametrize("T", [dtypes.uint8, dtypes.int64], ids=["uint8", "int64"])
def test_z3_prover_catches_wrong_guard(T: DType):
  status, cex = prove(OFF_BY_ONE, T)
  assert status == "counterexample"
  guard, lhs, rhs = OFF_BY_ONE.evaluate(cex.values, cex.bounds, T)
  assert guard and not same_value(lhs, rhs)


BAD_RULES = [(UNSOUND_DIV_MUL, dtypes.int8), (UNSOUND_DIV_MUL, dtypes.int32), (OFF_BY_ONE, dtypes.int16),
             (FLOAT_MUL_ZERO, dtypes.float32)]


@pytest.mark.parametrize("rule,T", BAD_RULES, ids=[case_id(r, T) for r, T in BAD_RULES])
def test_random_inputs_catch_unsound_rule(rule: SymRule, T: DType):
  """The random test that every rule passes fails on these, and the input it finds really breaks the rule."""
  with pytest.raises(AssertionError):
    check_on_random_inputs(rule, T, EXAMPLES["float" if T in FLOATS else "int"])
  values, bounds = find(rule_inputs(rule, T), lambda inputs: not rule_holds(rule, T, inputs), settings=FIND)
  guard, lhs, rhs = rule.evaluate(values, bounds, T)
  assert guard and not same_value(lhs, rhs)


# ------------------------------------------------------------------------------------------------------------


def test_every_rule_cites_a_clause():
  for rule in symbolic.rules:
    assert rule.clause is not None, f"a symbolic rule without a clause: {rule}"
