"""The symbolic rule set end to end: simplification preserves values on random graphs, and simplifies what it
should (seed 000's `t + 3 + 4`, lowering's index arithmetic)."""
import math

from hypothesis import given, settings, strategies as st

from refimpl.dtype import dtypes
from refimpl.uop import UOp, Ops
from refimpl.uop.ops import graph_rewrite
from refimpl.uop.symbolic import symbolic
from tests.evalgraph import evaluate
from tests.graphgen import graph_and_env


@settings(max_examples=400, deadline=None, derandomize=True)
@given(graph_and_env())
def test_simplify_preserves_value_on_random_integer_graphs(case):
  g, env = case
  assert evaluate(g.simplify(), env) == evaluate(g, env), f"simplify changed the value of\n{g}\ninto\n{g.simplify()}"


FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-45, 3.4e38, 0.5]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from([dtypes.float16, dtypes.float32, dtypes.float64]), st.data())
def test_simplify_preserves_float_values_including_specials(dt, data):
  x, y = (UOp(Ops.DEFINE_VAR, dt, arg=(n, 0, 0)) for n in "xy")
  c = UOp.const(dt, data.draw(st.sampled_from(FLOAT_SPECIALS)))
  exprs = [x * 0, x * 1, x + 0.0, x + -0.0, x - 0.0, x - x, x / x, x / 1.0, x * -1.0, -(-x), x + (-y), x - (-y),
           (x < x).where(x, y), x.maximum(x), (x * c + c) * 1, x.ne(x), x.eq(x)]
  env = {n: dtypes.as_const(data.draw(st.sampled_from(FLOAT_SPECIALS)), dt) for n in "xy"}
  for e in exprs:
    want, got = evaluate(e, env), evaluate(e.simplify(), env)
    same = (isinstance(want, float) and math.isnan(want) and math.isnan(got)) or \
      (want == got and (not isinstance(want, float) or math.copysign(1, want) == math.copysign(1, got)))
    assert same, f"{e} at {env}: {want} became {got}"


def test_seed_constant_chain_folds():
  t = UOp.variable("t", -100, 100)
  assert graph_rewrite(t + 3 + 4, symbolic) is t + 7


def test_index_arithmetic_of_a_reshape_simplifies():
  g, r = UOp.variable("g", 0, 15), UOp.variable("r", 0, 3)
  flat = g * 4 + r
  assert (flat // 4).simplify() is g
  assert (flat % 4).simplify() is r
  assert ((flat // 4) * 4 + flat % 4).simplify() is flat
  assert (flat < 64).simplify() is UOp.const(dtypes.bool, True)
  assert ((g + 1) * 2 - 2).simplify() is g * 2


def test_float_rules_that_would_be_wrong_are_not_applied():
  x = UOp(Ops.DEFINE_VAR, dtypes.float, arg=("x", 0, 0))
  for e in (x * 0, x - x, x / x, x + 0.0, x.ne(x)):
    assert e.simplify() is e


def test_constant_folding_wraps_and_is_total():
  assert (UOp.const(dtypes.int8, 127) + 1).simplify() is UOp.const(dtypes.int8, -128)
  assert (UOp.const(dtypes.int32, 7) // 0).simplify() is UOp.const(dtypes.int32, -1)
  assert (UOp.const(dtypes.float32, 1e38) * 10).simplify() is UOp.const(dtypes.float32, math.inf)
  assert UOp.const(dtypes.int32, 300).cast(dtypes.uint8).simplify() is UOp.const(dtypes.uint8, 44)


def test_lossless_int_cast_roundtrip_is_removed_and_lossy_one_kept():
  a = UOp.variable("a", -5, 5, dtypes.int8)
  assert a.cast(dtypes.int32).cast(dtypes.int8).simplify() is a
  b = UOp.variable("b", -5, 5, dtypes.int32)
  assert b.cast(dtypes.int8).cast(dtypes.int32).simplify() is b.cast(dtypes.int8).cast(dtypes.int32)


def test_guard_with_a_modulo_short_circuits_on_a_zero_divisor():
  # RW.IDX.mod-mod-divisor's guard is `c2 > 0 and c1 % c2 == 0`: with c2 = 0 it must decline, not divide by zero
  x = UOp.variable("x", 0, 100)
  e = (x % 6) % 0
  assert e.simplify() is e          # no rule applies (and none crashes)
  assert evaluate(e, {"x": 7}) == 1   # x % 0 = x (OP.CMOD.zero)


def test_index_of_a_packed_operand_divides_term_by_term():
  """A matmul operand stored in panels of 8 columns, (k, j // 8, j % 8) -> (j // 8, k, j % 8), as lowering indexes it
  for a tile lane: every div and mod goes (RW.IDX.div-add-mul-const, RW.IDX.mod-add-mul-multiple, ...)."""
  k, t = UOp.variable("k", 0, 1023), UOp.variable("t", 0, 127)
  for lane in range(8):
    flat = k * 1024 + (t * 8 + lane)            # the element (k, t * 8 + lane) of a (1024, 1024) operand
    packed = ((flat // 8) % 128) * 8192 + (flat // 1024) * 8 + flat % 8
    want = t * 8192 + k * 8 + lane
    for kv, tv in ((0, 0), (1023, 127), (517, 33)):
      env = {"k": kv, "t": tv}
      assert evaluate(packed, env) == evaluate(want, env)
    simple = packed.simplify()
    assert not any(u.op in (Ops.CDIV, Ops.CMOD) for u in simple.toposort()), f"lane {lane}: {simple}"
    for kv, tv in ((0, 0), (1023, 127), (517, 33), (1, 126)):
      assert evaluate(simple, {"k": kv, "t": tv}) == kv * 8 + tv * 8192 + lane


def test_divisor_multiple_rules_keep_the_division_when_a_term_can_be_negative():
  x, y = UOp.variable("x", -5, 5), UOp.variable("y", 0, 9)
  e = (x + y * 16) // 8   # x // 8 truncates toward zero: the split form would be wrong for x = -1, y = 1
  assert any(u.op is Ops.CDIV for u in e.simplify().toposort())
  for xv in range(-5, 6):
    for yv in range(10): assert evaluate(e.simplify(), {"x": xv, "y": yv}) == int((xv + yv * 16) / 8)
