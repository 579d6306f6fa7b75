"""Patterns, PatternMatcher and graph_rewrite (spec/rewrites.md: RW.MATCH, RW.ENGINE)."""
import pytest

from refimpl.dtype import dtypes
from refimpl.uop import UOp, Ops
from refimpl.uop.ops import UPat, PatternMatcher, graph_rewrite, RewriteLoopError

x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)
one, two = UOp.const(dtypes.int, 1), UOp.const(dtypes.int, 2)


def names(bindings): return [{k: v.arg for k, v in b.items()} for b in bindings]


def test_commutative_match_tries_both_orders():
  pat = UPat.var("a") + UPat.cvar("c")
  assert names(pat.match(x + 1, {})) == [{"a": ("x", 0, 10), "c": 1}]
  assert names(pat.match(1 + x, {})) == [{"a": ("x", 0, 10), "c": 1}]
  assert pat.match(x * 1, {}) == []


def test_ordered_match_does_not_commute():
  pat = UPat(Ops.SUB, src=(UPat.var("a"), UPat.cvar("c")))
  assert pat.match(x - 1, {}) and not pat.match(1 - x, {})


def test_a_name_used_twice_must_bind_one_node():
  pat = UPat.var("a") - UPat.var("a")
  assert pat.match(x - x, {}) and not pat.match(x - y, {})


def test_const_arg_matching_is_exact_for_signed_zero_and_nan():
  f = UOp(Ops.DEFINE_VAR, dtypes.float, arg=("f", 0, 0))
  assert UPat.const(None, -0.0).match(UOp.const(dtypes.float, -0.0), {})
  assert not UPat.const(None, -0.0).match(UOp.const(dtypes.float, 0.0), {})
  assert UPat.const(None, float("nan")).match(UOp.const(dtypes.float, float("nan")), {})
  assert not UPat.const(None, 0).match((f + 0.5).src[1], {})


def test_src_forms_allow_any_len_single_pattern_and_any():
  s = UOp(Ops.SINK, dtypes.void, (x, y, one))
  assert UPat(Ops.SINK, src=(UPat.var("a"),), allow_any_len=True).match(s, {})
  assert not UPat(Ops.SINK, src=(UPat.var("a"),)).match(s, {})
  assert not UPat(Ops.SINK, src=UPat(Ops.DEFINE_VAR)).match(s, {})
  assert UPat(Ops.SINK, src=UPat(Ops.DEFINE_VAR)).match(UOp(Ops.SINK, dtypes.void, (x, y)), {})
  either = UPat.any(UPat(Ops.ADD, name="n"), UPat(Ops.MUL, name="n"))
  assert either.match(x * 2, {}) and either.match(x + 2, {}) and not either.match(x - 2, {})


def test_dtype_filter_matches_vector_by_scalar_type():
  pat = UPat(Ops.DEFINE_VAR, dtype=dtypes.int)
  assert pat.match(x, {}) and not pat.match(UOp.variable("u", 0, 1, dtypes.uint), {})


def test_first_matching_rule_wins_and_ctx_is_passed():
  seen = []
  pm = PatternMatcher([
    (UPat.var("a") + UPat.cvar("c"), lambda ctx, a, c: (ctx.append("first"), a)[1]),
    (UPat.var("a") + UPat.cvar("c"), lambda a, c: None),
  ])
  assert graph_rewrite(x + 1, pm, ctx=seen) is x and seen == ["first"]


def test_rewrite_reaches_a_fixpoint_leaves_first():
  fold = PatternMatcher([(UPat.cvar("a") + UPat.cvar("b"), lambda a, b: a.const_like(a.arg + b.arg))])
  expr = ((one + two) + (two + two)) + one
  assert graph_rewrite(expr, fold) is UOp.const(dtypes.int, 8)


def test_result_of_a_rule_is_rewritten_again():
  # x*2 -> x+x, then x+x -> nothing; (x*2)*2 -> (x+x)*2 -> (x+x)+(x+x): results are revisited
  pm = PatternMatcher([(UPat.var("a") * 2, lambda a: a + a)])
  out = graph_rewrite((x * 2) * 2, pm)
  assert out is (x + x) + (x + x)


def test_shared_subgraph_rewritten_once():
  calls = []
  pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: (calls.append(v), None)[1])])
  graph_rewrite((x + 1) * (x + 1) + (x + 1), pm)
  assert calls == [x]


def test_top_down_sees_the_node_before_its_sources():
  order = []
  pm = PatternMatcher([(UPat(name="n"), lambda n: (order.append(n.op), None)[1])])
  graph_rewrite(x + 1, pm, top_down=True)
  assert order[0] is Ops.ADD
  order.clear()
  graph_rewrite(x + 1, pm)
  assert order[-1] is Ops.ADD and order[0] in (Ops.DEFINE_VAR, Ops.CONST)


def test_loop_between_two_rules_is_reported_with_both_rules():
  swap = PatternMatcher([
    (UPat(Ops.ADD, src=(UPat(Ops.DEFINE_VAR, name="a"), UPat.cvar("c"))), lambda a, c: UOp(Ops.ADD, a.dtype, (c, a)),
     "RW.TEST.one"),
    (UPat(Ops.ADD, src=(UPat.cvar("c"), UPat(Ops.DEFINE_VAR, name="a"))), lambda a, c: UOp(Ops.ADD, a.dtype, (a, c)),
     "RW.TEST.two"),
  ])
  with pytest.raises(RewriteLoopError) as e: graph_rewrite(x + 1, swap)
  assert e.value.clause == "RW.ENGINE.loop"
  assert "RW.TEST.one" in str(e.value) and "RW.TEST.two" in str(e.value)


def test_rule_that_wraps_its_own_match_is_reported():
  grow = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: v * 1, "RW.TEST.grow")])
  with pytest.raises(RewriteLoopError, match="RW.TEST.grow"): graph_rewrite(x, grow)


def test_unbounded_chain_of_new_nodes_hits_the_budget():
  count_up = PatternMatcher([(UPat.cvar("c", dtypes.int), lambda c: c.const_like(c.arg + 1), "RW.TEST.count")])
  with pytest.raises(RewriteLoopError, match="RW.TEST.count"): graph_rewrite(one, count_up, max_rewrites=500)


def test_rule_returning_a_non_uop_is_an_error():
  bad = PatternMatcher([(UPat(Ops.DEFINE_VAR), lambda: 3)])
  with pytest.raises(TypeError, match="returned int"): graph_rewrite(x, bad)
