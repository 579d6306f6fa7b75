"""Tensor math of spec/tensor_math.md that the conformance catalogue cannot express: the refusals (SpecError naming
the clause), Tensor.alu (whose Ops argument the adapter interface does not carry), the helpers' dtypes, and the edge
cases of each clause pinned one value at a time (the catalogue draws them among others)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu


def values(t: Tensor) -> list:
  return t.numpy().tolist()


def signs(t: Tensor) -> list[bool]:
  """Whether each element has its sign bit set (tells -0.0 from 0.0)."""
  return [math.copysign(1.0, v) < 0 for v in t.numpy().astype(np.float64).ravel()]


def grad_of(fn, xs: list[float]) -> list[float]:
  x = Tensor(np.array(xs, np.float64), requires_grad=True)
  fn(x).sum().backward()
  return x.grad.numpy().tolist()


# ---- refusals

@pytest.mark.parametrize("call, clause", [
  (lambda: Tensor([1.0]).div(2, rounding_mode="round"), "TENSOR.DIV.rounding"),
  (lambda: Tensor([True]).div(Tensor([True]), rounding_mode="trunc"), "TENSOR.DIV.rounding"),
  (lambda: Tensor([1.0]).gelu("erf"), "TENSOR.GELU"),
  (lambda: Tensor([True]).fmod(Tensor([True])), "TENSOR.FMOD"),
  (lambda: Tensor([True]).copysign(Tensor([False])), "TENSOR.COPYSIGN"),
  (lambda: Tensor([1.0]).bitwise_and(Tensor([1.0])), "OP.AND"),
  (lambda: Tensor([1.0]).lshift(1), "OP.SHL"),
  (lambda: Tensor([1.0]).bitwise_not(), "OP.XOR"),
  (lambda: Tensor([1.0]).alu(Ops.RESHAPE), "TENSOR.ALU"),
  (lambda: Tensor([1.0]).alu(Ops.ADD), "TENSOR.ALU"),
  (lambda: Tensor([1.0]).alu(Ops.ADD, Tensor([1.0, 2.0])), "TENSOR.ALU"),
  (lambda: Tensor([1.0]).alu(Ops.ADD, Tensor([1])), "TENSOR.ALU"),
  (lambda: Tensor([1.0]).alu(Ops.ADD, 1.0), "TENSOR.ALU"),
  (lambda: Tensor([1.0]).alu(Ops.WHERE, Tensor([1.0]), Tensor([2.0])), "TENSOR.ALU"),
  (lambda: Tensor([1]).alu(Ops.SQRT), "OP.SQRT"),
])
def test_refusals_name_their_clause(call, clause):
  with pytest.raises(SpecError) as e: call()
  assert e.value.clause == clause and str(e.value).startswith(clause)


# ---- TENSOR.ALU

@pytest.mark.parametrize("op, dt, srcs", [
  (Ops.ADD, dtypes.int8, ([100, -128], [100, -1])), (Ops.CDIV, dtypes.int32, ([7, -7, 5], [2, 2, 0])),
  (Ops.SHL, dtypes.int32, ([1, 1], [31, 33])), (Ops.FDIV, dtypes.float32, ([1.0, -1.0], [0.0, 3.0])),
  (Ops.CMPLT, dtypes.float32, ([1.0, float("nan")], [2.0, 2.0])), (Ops.SQRT, dtypes.float64, ([2.0, -1.0],)),
  (Ops.MULACC, dtypes.float32, ([0.1, 3.0], [0.3, 4.0], [-0.03, 1.0])),
])
def test_alu_is_the_executable_spec(op, dt, srcs):
  ts = [Tensor(s, dtype=dt) for s in srcs]
  out = ts[0].alu(op, *ts[1:])
  want_dt = dtypes.bool if op is Ops.CMPLT else dt
  assert out.dtype == want_dt
  for i, got in enumerate(values(out)):
    want = exec_alu(op, want_dt, [values(t)[i] for t in ts], dt)
    assert got == want or (math.isnan(got) and math.isnan(want))


def test_alu_where_and_gradient():
  c = Tensor([True, False])
  assert values(c.alu(Ops.WHERE, Tensor([1, 2]), Tensor([3, 4]))) == [1, 4]
  assert grad_of(lambda x: x.alu(Ops.MUL, x), [3.0, -2.0]) == [6.0, -4.0]


# ---- TENSOR.CONST, TENSOR.UFIX, TENSOR.USUM

def test_const_and_const_like():
  assert Tensor.const(2).dtype == dtypes.int32 and Tensor.const(2.5).dtype == dtypes.float32
  assert Tensor.const(True).dtype == dtypes.bool and Tensor.const(3, dtypes.int8).dtype == dtypes.int8
  assert Tensor.const(2).shape == () and Tensor.const(2).item() == 2
  t = Tensor([[1, 2, 3]], dtype=dtypes.int16)
  assert t.const_like(7).dtype == dtypes.int16 and values(t.const_like(7)) == [[7, 7, 7]]
  assert t.const_like(0.5, dtypes.float16).dtype == dtypes.float16


def test_ufix_takes_the_dtype_of_the_scalar_next_to_self():
  t = Tensor([1, 2], dtype=dtypes.int32)
  assert t.ufix(t) is t
  assert t.ufix(2).dtype == dtypes.int32 and t.ufix(2).shape == ()
  assert t.ufix(2.5).dtype == dtypes.float32 and t.ufix(2.5).item() == 2.5
  assert Tensor([1.0], dtype=dtypes.float16).ufix(3).dtype == dtypes.float16


def test_usum_uprod():
  a, b, c = Tensor([1, 2]), Tensor([10, 20]), Tensor([100, 200])
  assert values(a.usum(b, c)) == [111, 222] and values(a.usum([b, c])) == [111, 222] and a.usum() is a
  assert values(a.uprod(b, c)) == [1000, 8000] and values(a.uprod((b,))) == [10, 40]
  t, f = Tensor([True, False]), Tensor([False, False])
  assert values(t.usum(f)) == [True, False] and values(t.uprod(f)) == [False, False]


# ---- TENSOR.OPERAND

def test_operand_is_named_x_and_positional_calls_work():
  a, b = Tensor([6.0, -3.0]), Tensor([2.0, 4.0])
  assert values(a.add(x=b)) == values(a.add(b)) == [8.0, 1.0]
  assert values(a.sub(x=b, reverse=True)) == [-4.0, 7.0]
  assert values(a.div(x=b)) == [3.0, -0.75] and values(a.pow(x=2)) == [36.0, 9.0]
  assert values(a.maximum(x=b)) == [6.0, 4.0] and values(a.minimum(x=b)) == [2.0, -3.0]
  c = Tensor([True, False])
  assert values(c.where(x=a, y=b)) == values(c.where(a, b)) == [6.0, 4.0]


# ---- TENSOR.DIV.rounding, TENSOR.FMOD, TENSOR.MOD

def test_div_rounding_modes():
  x, y = Tensor([7, -7, 7, -7, 5]), Tensor([2, 2, -2, -2, 0])
  assert values(x.div(y, rounding_mode="trunc")) == [3, -3, -3, 3, -1]   # x / 0 = -1 (OP.CDIV.zero)
  assert values(x.div(y, rounding_mode="floor"))[:4] == [3, -4, -4, 3]
  assert x.div(y, rounding_mode="trunc").dtype == dtypes.int32 and x.div(y).dtype == dtypes.float32
  i32 = Tensor([-2 ** 31], dtype=dtypes.int32)
  assert values(i32.div(-1, rounding_mode="trunc")) == [-2 ** 31]   # wraps
  f = Tensor(np.array([2.1, 0.7, -0.5, 1.0, -1.0], np.float32))
  g = Tensor(np.array([0.7, 0.0, 3.0, 0.0, 0.0], np.float32))
  got = f.div(g, rounding_mode="trunc")
  assert values(got)[0] == 2.0   # the exact quotient of the float32 values is just below 3
  assert values(got)[1:] == [math.inf, -0.0, math.inf, -math.inf] and signs(got)[2]
  t = Tensor([1.0, 3.0])
  assert values(t.div(Tensor([0.0, 2.0]), rounding_mode="trunc").gradient(t, gradient=Tensor([1.0, 1.0]))[0]) == [0, 0]


def test_fmod_signs_zero_divisor_and_infinities():
  x = Tensor(np.array([5.5, -5.5, 5.5, -4.0, -0.0, 3.0, 3.0, math.inf, math.nan], np.float32))
  y = Tensor(np.array([2.0, 2.0, -2.0, 2.0, 2.0, 0.0, -math.inf, 2.0, 2.0], np.float32))
  got = values(x.fmod(y))
  assert got[:3] == [1.5, -1.5, 1.5] and got[3] == 0.0 and got[6] == 3.0
  assert signs(x.fmod(y))[3] and signs(x.fmod(y))[4]   # fmod(-4, 2) = -0.0, fmod(-0.0, 2) = -0.0
  assert all(math.isnan(v) for v in (got[5], got[7], got[8]))
  assert values(Tensor([7, -7, 7]).fmod(Tensor([3, 3, 0]))) == [1, -1, 7]   # x fmod 0 = x (OP.CMOD.zero)
  assert values(Tensor([-7]).mod(3)) == [2] and values(Tensor([-3]).mod(7, reverse=True)) == [-2]


# ---- TENSOR.COPYSIGN

def test_copysign_reads_the_sign_bit():
  neg_nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0]
  y = Tensor(np.array([-0.0, 0.0, math.nan, neg_nan, -math.inf, 2.0], np.float32))
  got = Tensor(np.full(6, 3.0, np.float32)).copysign(y)
  assert values(got) == [-3.0, 3.0, 3.0, 3.0, -3.0, 3.0]   # a NaN counts as positive, whatever its sign bit
  z = Tensor(np.array([0.0, -0.0], np.float32)).copysign(Tensor(np.array([-1.0, 1.0], np.float32)))
  assert signs(z) == [True, False]
  assert values(Tensor([5, -5], dtype=dtypes.int8).copysign(Tensor([-1, 0], dtype=dtypes.int8))) == [-5, 5]
  assert Tensor([5]).copysign(Tensor([-1])).dtype == dtypes.int32   # tinygrad's dtype, not torch's float
  assert grad_of(lambda t: t.copysign(-1.0), [2.0, 0.0, -3.0]) == [-1.0, 0.0, 1.0]


# ---- TENSOR.SHIFT.count

def test_shift_counts_are_taken_modulo_the_width():
  one = Tensor([1, 1, 1], dtype=dtypes.int32)
  assert values(one.lshift(Tensor([-1, 32, 33], dtype=dtypes.int32))) == [-2 ** 31, 1, 2]
  assert values(Tensor([-8, 8], dtype=dtypes.int32).rshift(Tensor([-31, 1], dtype=dtypes.int32))) == [-4, 4]
  assert values(Tensor([2], dtype=dtypes.int8).lshift(3, reverse=True)) == [12]


# ---- TENSOR.ISCLOSE, TENSOR.ISFINITE

def test_isclose_nan_inf_and_equal_nan():
  inf, nan = math.inf, math.nan
  a = Tensor([inf, inf, -inf, nan, nan, 1.0, 1.0, 1e-9])
  b = Tensor([inf, -inf, 1e38, nan, 1.0, 1.0 + 1e-6, 1.1, 0.0])
  assert values(a.isclose(b)) == [True, False, False, False, False, True, False, True]
  assert values(a.isclose(b, equal_nan=True))[3:5] == [True, False]
  assert values(a.isclose(b, rtol=0.2)) [6] is True and values(a.isclose(b, atol=0.0))[7] is False
  assert a.allclose(a, equal_nan=True).item() is True and a.allclose(a).item() is False
  assert values(Tensor([1, 2]).isclose(Tensor([1, 3]))) == [True, False]
  assert values(Tensor([1.0, inf, -inf, nan]).isfinite()) == [True, False, False, False]
  assert values(Tensor([1, 2]).isfinite()) == [True, True]


# ---- inverse functions: domains, edges, signed zeros, gradients at the ends (torch's)

def test_inverse_function_domains_and_edges():
  x = Tensor(np.array([1.0000001, -1.0000001, 1.0, -1.0, -0.0], np.float32))
  asin, acos = values(x.asin()), values(x.acos())
  assert math.isnan(asin[0]) and math.isnan(asin[1]) and math.isnan(acos[0]) and math.isnan(acos[1])
  assert asin[2:4] == [np.float32(math.pi / 2), -np.float32(math.pi / 2)] and signs(x.asin())[4]
  assert acos[2:4] == [0.0, np.float32(math.pi)]
  assert values(Tensor([1.0, -1.0, 2.0, -0.0]).atanh())[:2] == [math.inf, -math.inf]
  assert math.isnan(values(Tensor([2.0]).atanh())[0]) and signs(Tensor([-0.0]).atanh()) == [True]
  ac = values(Tensor([0.5, 1.0, -1.0, math.inf, -math.inf]).acosh())
  assert math.isnan(ac[0]) and ac[1] == 0.0 and math.isnan(ac[2]) and ac[3] == math.inf and math.isnan(ac[4])
  assert values(Tensor([math.inf, -math.inf]).atan()) == [np.float32(math.pi / 2), -np.float32(math.pi / 2)]
  assert values(Tensor([math.inf, -math.inf, -0.0]).asinh())[:2] == [math.inf, -math.inf]
  assert values(Tensor([-0.0, 7.0, -math.inf]).erf()) == [-0.0, 1.0, -1.0] and signs(Tensor([-0.0]).erf()) == [True]


def test_gradients_at_the_domain_ends_follow_torch():
  assert grad_of(Tensor.asin, [1.0, -1.0, 0.0]) == [math.inf, math.inf, 1.0]
  assert grad_of(Tensor.acos, [1.0, -1.0, 0.0]) == [-math.inf, -math.inf, -1.0]
  assert grad_of(Tensor.atanh, [1.0, -1.0, 0.0]) == [math.inf, math.inf, 1.0]
  assert grad_of(Tensor.acosh, [1.0])[0] == math.inf
  assert grad_of(Tensor.atan, [0.0, math.inf]) == [1.0, 0.0]
  assert grad_of(Tensor.erf, [0.0, 7.0]) == [pytest.approx(2 / math.sqrt(math.pi)), 0.0]
  assert grad_of(Tensor.hardswish, [-3.0, 3.0]) == [0.0, 1.0]
  assert grad_of(lambda t: t.logaddexp(t * 1), [2.0]) == [1.0]


def test_activation_values_at_special_points():
  assert math.isnan(values(Tensor([-math.inf]).mish())[0]) and values(Tensor([math.inf]).mish()) == [math.inf]
  assert all(math.isnan(v) for v in values(Tensor([math.inf, -math.inf]).softsign()))
  assert values(Tensor([math.inf, -math.inf]).logaddexp(Tensor([math.inf, -math.inf]))) == [math.inf, -math.inf]
  assert Tensor([1, 2]).gelu().dtype == dtypes.float32
  # approximate='tanh' is the default (tinygrad's): it differs from the exact form in the 4th digit
  x = Tensor([1.0])
  assert values(x.gelu()) == values(x.gelu("tanh")) != values(x.gelu("none"))
  assert values(Tensor([1.0]).selu()) == [np.float32(1.0507)]
  assert values(Tensor([[1.0, 2.0]]).softmin()) == values(Tensor([[-1.0, -2.0]]).softmax())
