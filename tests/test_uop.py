"""The UOp IR: hash-consing, immutability, the printed form, operator overloads (spec/uop.md)."""
import math
import pickle

import pytest

from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import UOp, Ops
from tests.evalgraph import evaluate


def test_hashcons_same_fields_same_object():
  a, b = UOp(Ops.CONST, dtypes.int, arg=2), UOp(Ops.CONST, dtypes.int, arg=2)
  assert a is b
  assert (a + b) is (a + b)
  assert UOp(Ops.CONST, dtypes.int, arg=3) is not a
  assert UOp(Ops.CONST, dtypes.uint, arg=2) is not a


def test_hashcons_keeps_apart_what_python_equality_merges():
  # UOP.HASHCONS: -0.0 == 0.0 and 1 == 1.0 == True in Python, but they are different constants
  assert UOp.const(dtypes.float, -0.0) is not UOp.const(dtypes.float, 0.0)
  assert math.copysign(1, UOp.const(dtypes.float, -0.0).arg) == -1
  assert UOp(Ops.CONST, dtypes.float, arg=1) is not UOp(Ops.CONST, dtypes.float, arg=1.0)
  nan1, nan2 = UOp.const(dtypes.float, math.nan), UOp.const(dtypes.float, float("nan"))
  assert nan1 is nan2


def test_uop_is_immutable_and_pickles_to_the_same_object():
  a = UOp.variable("a", 0, 9)
  with pytest.raises(AttributeError, match="immutable"): a.arg = 3
  assert pickle.loads(pickle.dumps(a + 1)) is a + 1


def test_constructor_rejects_non_uops_and_unhashable_args():
  with pytest.raises(SpecError) as e: UOp(Ops.ADD, dtypes.int, (1, 2))
  assert e.value.clause == "UOP.SRC"
  with pytest.raises(SpecError) as e: UOp(Ops.CONST, dtypes.int, arg=[1])
  assert e.value.clause == "UOP.ARG"
  with pytest.raises(SpecError) as e: UOp("ADD", dtypes.int)
  assert e.value.clause == "UOP.OPS"
  with pytest.raises(SpecError) as e: UOp(Ops.CONST, "int", arg=1)
  assert e.value.clause == "UOP.DTYPE"


def test_printed_form_names_shared_nodes():
  a = UOp(Ops.CONST, dtypes.int, arg=2)
  assert repr(a + a) == ("UOp(Ops.ADD, dtypes.int, arg=None, src=(\n"
                         "  x0:=UOp(Ops.CONST, dtypes.int, arg=2, src=()),\n"
                         "   x0,))")
  assert repr(a) == "UOp(Ops.CONST, dtypes.int, arg=2, src=())"


def test_operators_build_alu_nodes_with_constant_promotion():
  x = UOp.variable("x", 0, 10)
  assert (x + 1).op is Ops.ADD and (x + 1).src == (x, UOp.const(dtypes.int, 1))
  assert (1 + x).src == (UOp.const(dtypes.int, 1), x)
  assert (x // 3).op is Ops.CDIV and (x % 3).op is Ops.CMOD
  assert (x < 3).dtype == dtypes.bool and (x < 3).op is Ops.CMPLT
  assert (3 - x).src[0] is UOp.const(dtypes.int, 3)
  f = UOp(Ops.DEFINE_VAR, dtypes.half, arg=("f", 0, 0))
  assert (f * 2).src[1] is UOp.const(dtypes.half, 2.0)
  assert (f.ne(f)).dtype == dtypes.bool
  assert x.cast(dtypes.int) is x and x.cast(dtypes.long).op is Ops.CAST


@pytest.mark.parametrize("a,b", [(1.0, math.nan), (math.nan, math.nan), (2.0, 1.0), (1.0, 1.0), (-0.0, 0.0)])
def test_ge_and_le_are_not_negated_lt_on_floats(a, b):
  # DESIGN: `>=` is not `not <`: both are false when either side is NaN
  x, y = (UOp(Ops.DEFINE_VAR, dtypes.float, arg=(n, 0, 0)) for n in "xy")
  env = {"x": a, "y": b}
  assert evaluate(x >= y, env) == (a >= b)
  assert evaluate(x <= y, env) == (a <= b)


def test_minimum_propagates_nan_and_orders_signed_zero_on_floats_and_handles_int_min():
  x, y = (UOp(Ops.DEFINE_VAR, dtypes.float, arg=(n, 0, 0)) for n in "xy")
  assert math.isnan(evaluate(x.minimum(y), {"x": math.nan, "y": 1.0}))
  assert math.copysign(1, evaluate(x.minimum(y), {"x": 0.0, "y": -0.0})) == -1
  i, j = UOp.variable("i", -128, 127, dtypes.int8), UOp.variable("j", -128, 127, dtypes.int8)
  assert evaluate(i.minimum(j), {"i": -128, "j": 0}) == -128


def test_toposort_is_sources_first_and_handles_deep_graphs():
  x = UOp.variable("x", 0, 10)
  y = x
  for _ in range(20000): y = y + 1     # deeper than Python's recursion limit
  order = y.toposort()
  assert order[0] is x and order[-1] is y and len(order) == 20002   # x, the shared CONST 1, 20000 ADDs
  pos = {u: i for i, u in enumerate(order)}
  assert all(pos[s] < pos[u] for u in order for s in u.src)
