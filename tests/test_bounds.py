"""RW.BOUNDS: vmin <= value <= vmax for every node of random integer graphs, at random points of the vars' ranges."""
from hypothesis import given, settings

from refimpl.dtype import dtypes
from refimpl.uop import UOp, Ops
from tests.evalgraph import evaluate
from tests.graphgen import graph_and_env


@settings(max_examples=400, deadline=None, derandomize=True)
@given(graph_and_env())
def test_bounds_contain_every_value(case):
  g, env = case
  for node in g.toposort():
    v = evaluate(node, env)
    assert node.vmin <= v <= node.vmax, f"{v} outside [{node.vmin}, {node.vmax}] for\n{node}"


def test_bounds_examples():
  g = UOp.variable("g", 0, 15)
  r = UOp.variable("r", 0, 3)
  assert ((g * 4 + r).vmin, (g * 4 + r).vmax) == (0, 63)
  assert ((g * 4 + r) // 4).vmax == 15
  assert ((g - 20) % 8).vmin == -7 and ((g - 20) % 8).vmax == 0
  assert (g < 16).vmin is True and (g < 15).vmax is True and (g < 15).vmin is False
  # an interval that would leave int8 widens to the whole range: 100 + 100 wraps
  a = UOp.variable("a", 0, 100, dtypes.int8)
  assert ((a + a).vmin, (a + a).vmax) == (-128, 127)
  rng = UOp(Ops.RANGE, dtypes.int, (UOp.const(dtypes.int, 8),), arg=(0, "loop"))
  assert (rng.vmin, rng.vmax) == (0, 7)
  f = UOp(Ops.DEFINE_VAR, dtypes.float, arg=("f", 0, 0))
  assert (f.vmin, f.vmax) == (float("-inf"), float("inf"))
