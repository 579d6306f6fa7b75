"""The clauses of spec/gradients.md that the property tests do not check on their own: the value each rule gives at
the special points its sub-clauses pin (GRAD.CHECK.points), the cuts of GRAD.NONDIFF, the autograd model
(GRAD.MODEL.*: visiting order, sums, leaves, shapes and dtypes of cotangents, gradients that are graphs again) and
the Tensor autograd API (GRAD.DTYPE, GRAD.SCALAR, GRAD.ACCUM, GRAD.LEAF.identity, GRAD.NOGRAD, GRAD.REALIZE,
GRAD.ASSIGN), and the nn methods whose gradient clause states a value (GRAD.T.*).

Everything goes through the adapter (tensors, call expressions, `gradient`, `numpy`), so any implementation with
tinygrad's autograd API is checked; expected values are the spec's (which it states match torch), or torch's.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conformance.catalogue.core import Domain, Op
from conformance.properties import finite_differences, second_order, vjp
from conformance.strategies import FLOATS, NP
from conformance.tests.params import acc_clause, record

INF, NAN, LN2 = math.inf, math.nan, math.log(2)


def _t(adapter, values, dtype: str = "float32"):
  """A tensor of `dtype` holding `values`."""
  return adapter.tensor(np.array(values, dtype=NP[dtype]), dtype)


def _ev(adapter, expr: str, **names):
  """Evaluate a call expression with tensors (or other values) bound to names."""
  return adapter.evaluate(expr, names, {})


def _np(adapter, t) -> np.ndarray:
  return np.asarray(adapter.numpy(t), np.float64)


def _close(got: np.ndarray, want, rtol: float, what: str) -> None:
  """NaN where the spec says NaN, the same infinities, finite values within rtol (0: exactly)."""
  want = np.asarray(want, np.float64)
  assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
  same_special = (np.isnan(got) == np.isnan(want)) & (np.isinf(want) <= (got == want))
  with np.errstate(invalid="ignore"):
    near = np.isnan(want) | np.isinf(want) | (np.abs(got - want) <= rtol * np.abs(want))
  assert (same_special & near).all(), f"{what}: got {got.tolist()}, the spec says {want.tolist()}"


# ---------------------------------------------------------------------------------------------------- special points

def _pt(clauses, expr, inputs, wrt, want, g=None, rtol=0.0):
  """One special-point case: the gradients of `expr` with respect to `wrt` for cotangent g (ones by default)."""
  return pytest.param(expr, inputs, wrt, want, g, rtol, id=f"{clauses[0]}:{expr}", marks=[
    pytest.mark.clauses(*clauses, "GRAD.CHECK.points"),
    pytest.mark.conformance(op=clauses[0], dtype="float32", prop="special_point")])


_TIES = [[1, 3, 3], [2, 2, 2], [0.0, -0.0, -1]]


def _order_point(n: int = 4, seed: int = 0):
  """GRAD.MODEL.eval: float32 inputs x and cotangents g where RECIPROCAL's -g*(y*y) (the square first) and
  (-g*y)*y differ, with the stated order's bits (numpy float32) as the expected gradient."""
  rng = np.random.default_rng(seed)
  x, g = rng.uniform(0.1, 8, 256).astype(np.float32), rng.uniform(-2, 2, 256).astype(np.float32)
  y = np.float32(1) / x
  stated, other = (-g) * (y * y), ((-g) * y) * y
  i = np.flatnonzero(stated != other)[:n]
  return x[i].tolist(), g[i].tolist(), stated[i].astype(np.float64).tolist()


_ORDER_X, _ORDER_G, _ORDER_WANT = _order_point()
_TINY = float(np.float32(1e-45))                                      # the smallest float32 subnormal
_B1 = (float(np.nextafter(np.float32(1), np.float32(0))), float(np.nextafter(np.float32(1), np.float32(2))))
_B6 = (float(np.nextafter(np.float32(6), np.float32(0))), float(np.nextafter(np.float32(6), np.float32(7))))
SPECIAL = [
  _pt(("GRAD.FDIV.zero", "GRAD.FDIV"), "a / b", {"a": [1.0, 0.0], "b": [0.0, 0.0]}, ("a", "b"),
      [[INF, INF], [-INF, NAN]]),
  _pt(("GRAD.RECIPROCAL.zero", "GRAD.RECIPROCAL"), "x.reciprocal()", {"x": [0.0, -0.0]}, ("x",), [[-INF, -INF]]),
  _pt(("GRAD.SQRT.zero", "GRAD.SQRT"), "x.sqrt()", {"x": [0.0, -0.0]}, ("x",), [[INF, -INF]]),
  _pt(("GRAD.SQRT.zero",), "x.sqrt()", {"x": [0.0, -0.0]}, ("x",), [[NAN, NAN]], g=[0.0, 0.0]),
  _pt(("GRAD.SQRT.negative",), "x.sqrt()", {"x": [-1.0, -4.0, -INF]}, ("x",), [[NAN, NAN, NAN]]),
  _pt(("GRAD.EXP2",), "x.exp2()", {"x": [-INF, INF, 0.0]}, ("x",), [[0.0, INF, LN2]], rtol=1e-6),
  _pt(("GRAD.LOG2.zero", "GRAD.LOG2"), "x.log2()", {"x": [0.0, -0.0]}, ("x",), [[INF, -INF]]),
  _pt(("GRAD.LOG2.negative", "GRAD.LOG2"), "x.log2()", {"x": [-1.0, INF]}, ("x",), [[-1 / LN2, 0.0]], rtol=1e-6),
  _pt(("GRAD.MAX.tie", "GRAD.MAX"), "a.maximum(b)", {"a": [1.0, 0.0, 2.0], "b": [1.0, -0.0, 3.0]}, ("a", "b"),
      [[0.5, 0.5, 0.0], [0.5, 0.5, 1.0]]),
  _pt(("GRAD.MAX.tie",), "a.minimum(b)", {"a": [1.0, 2.0], "b": [1.0, 3.0]}, ("a", "b"), [[0.5, 1.0], [0.5, 0.0]]),
  _pt(("GRAD.MAX.nan",), "a.maximum(b)", {"a": [NAN, 1.0], "b": [1.0, NAN]}, ("a", "b"), [[1.0, 1.0], [1.0, 1.0]]),
  _pt(("GRAD.POW.exp-zero", "GRAD.POW"), "a ** b", {"a": [2.0, NAN, 0.0], "b": [0.0, 0.0, 0.0]}, ("a", "b"),
      [[0.0, 0.0, 0.0], [LN2, NAN, 0.0]], rtol=1e-6),
  _pt(("GRAD.POW.base-zero",), "a ** b", {"a": [0.0] * 6, "b": [2.0, 1.0, 0.5, 0.0, -0.5, -1.0]}, ("a", "b"),
      [[0.0, 1.0, INF, 0.0, -INF, -INF], [0.0, 0.0, 0.0, 0.0, -INF, -INF]]),
  _pt(("GRAD.POW.base-zero",), "a ** b", {"a": [0.0, -0.0], "b": [NAN, NAN]}, ("a", "b"),
      [[NAN, NAN], [NAN, NAN]]),
  _pt(("GRAD.ABS", "GRAD.ABS.sign", "GRAD.ABS.zero", "GRAD.ABS.nan", "GRAD.MAX.tie", "GRAD.MAX.nan"), "x.abs()",
      {"x": [0.0, -0.0, NAN, 2.0, -3.0, INF, -INF]}, ("x",), [[0.0, 0.0, 0.0, 1.0, -1.0, 1.0, -1.0]]),
  _pt(("GRAD.ABS.zero",), "x.abs()", {"x": [0.0, -0.0, 1.0]}, ("x",), [[NAN, NAN, INF]], g=[INF, INF, INF]),
  _pt(("GRAD.MODEL.eval", "GRAD.RECIPROCAL"), "x.reciprocal()", {"x": _ORDER_X}, ("x",), [_ORDER_WANT], g=_ORDER_G),
  _pt(("GRAD.POW.base-negative",), "a ** b", {"a": [-2.0, -2.0, -2.0], "b": [2.0, 3.0, 0.5]}, ("a", "b"),
      [[-4.0, 12.0, NAN], [NAN, NAN, NAN]], rtol=1e-6),
  _pt(("GRAD.WHERE", "GRAD.NONDIFF.none"), "c.where(a, b)", {"c": ([False, True], "bool"), "a": [INF, 1.0],
                                                             "b": [2.0, 3.0]}, ("a", "b"),
      [[0.0, INF], [INF, 0.0]], g=[INF, INF]),
  _pt(("GRAD.REDUCE.MAX.tie", "GRAD.REDUCE.MAX"), "x.max(1)", {"x": _TIES}, ("x",),
      [[[0, 0.5, 0.5], [1 / 3] * 3, [0.5, 0.5, 0]]], rtol=1e-6),
  _pt(("GRAD.REDUCE.MAX.tie",), "x.min(1)", {"x": [[1, 1, 3], [-INF, -INF, 0]]}, ("x",),
      [[[0.5, 0.5, 0], [0.5, 0.5, 0]]]),
  _pt(("GRAD.REDUCE.MAX.nan",), "x.max(1)", {"x": [[1.0, NAN, 2.0]]}, ("x",), [[[NAN, NAN, NAN]]]),
  _pt(("GRAD.REDUCE.MUL.zero", "GRAD.REDUCE.MUL"), "x.prod(1)", {"x": [[2, 0, 3], [2, 0, 0], [2, 4, 3]]}, ("x",),
      [[[0, 6, 0], [0, 0, 0], [12, 6, 8]]]),
  _pt(("GRAD.REDUCE.MUL.inf",), "x.prod(1)", {"x": [[2.0, INF]]}, ("x",), [[[INF, NAN]]]),
  _pt(("GRAD.CAST",), "x.cast(dtypes.float32)", {"x": ([1.0, 2.0], "float16")}, ("x",), [[INF, 3.0]],
      g=[1e5, 3.0]),
  _pt(("GRAD.NONDIFF.none", "GRAD.NONDIFF"), "x.cast(dtypes.int32).cast(dtypes.float32) * x", {"x": [1.5, -2.5]},
      ("x",), [[1.0, -2.0]]),
  _pt(("GRAD.NONDIFF.none",), "(x < 1).cast(dtypes.float32) * x + x.isnan().cast(dtypes.float32) + "
      "(x == 2).cast(dtypes.float32) + x.argmax().cast(dtypes.float32)", {"x": [0.5, 2.0]}, ("x",), [[1.0, 0.0]]),
  _pt(("GRAD.NONDIFF.none",), "x.bitcast(dtypes.int32).cast(dtypes.float32) + x", {"x": [1.0, -2.0]}, ("x",),
      [[1.0, 1.0]]),
  _pt(("GRAD.NONDIFF.zero", "GRAD.NONDIFF"), "x.trunc() * 3 + x.floor() + x.ceil() + x.round()",
      {"x": [1.0, 1.5, -2.5, 0.0, -0.0, 7.25]}, ("x",), [[0.0] * 6]),
  _pt(("GRAD.MULACC", "GRAD.NONDIFF.zero"), "x % y", {"x": [5.5, -5.5, 7.25], "y": [2.0, 2.0, -3.0]}, ("x", "y"),
      [[1.0, 1.0, 1.0], [-2.0, 3.0, 3.0]]),
  _pt(("GRAD.MODEL.leaf", "GRAD.POW"), "x ** 2 + x * 3 + 1", {"x": [-3.0, 0.0]}, ("x",), [[-3.0, 3.0]]),
  _pt(("GRAD.MODEL.sum", "GRAD.MUL"), "x * x + x", {"x": [1.5, -2.0]}, ("x",), [[4.0, -3.0]]),
  # GRAD.CHECK.tensor: the compositions whose special points the spec pins, at exactly the kink or bound, just
  # inside and just outside it (one float32 ulp), at -0.0, NaN and the infinities (values as torch's, checked there)
  _pt(("GRAD.CHECK.tensor", "GRAD.WHERE"), "x.relu()", {"x": [-0.0, 0.0, NAN, 2.0, -2.0, INF, -INF, _TINY, -_TINY]},
      ("x",), [[0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]]),
  _pt(("GRAD.CHECK.tensor",), "x.relu6()", {"x": [0.0, -0.0, 6.0, _B6[0], _B6[1], NAN, INF, -INF, -1.0]}, ("x",),
      [[0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]]),
  _pt(("GRAD.CHECK.tensor",), "x.hardtanh()",
      {"x": [-1.0, 1.0, -_B1[0], _B1[0], -_B1[1], _B1[1], -0.0, NAN, INF, -INF]}, ("x",),
      [[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]]),
  _pt(("GRAD.CHECK.tensor",), "x.leaky_relu(0.25)", {"x": [0.0, -0.0, NAN, 2.0, -2.0, INF, -INF]}, ("x",),
      [[0.25, 0.25, 0.25, 1.0, 0.25, 1.0, 0.25]]),
  _pt(("GRAD.CHECK.tensor",), "x.clip(-1.0, 6.0)", {"x": [-1.0, 6.0, -_B1[0], _B6[0], -_B1[1], _B6[1], -0.0, 0.0,
                                                          NAN, INF, -INF]}, ("x",),
      [[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]]),
  _pt(("GRAD.CHECK.tensor",), "x.clip(0.0, 1.0)", {"x": [0.0, -0.0, 1.0, NAN, -INF, INF]}, ("x",),
      [[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]]),
  _pt(("GRAD.NONDIFF.zero",), "x.sign() + x.floor() + x.ceil() + x.round() + x.trunc()",
      {"x": [2.0, -2.0, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 0.0, -0.0, NAN, INF, -INF]}, ("x",), [[0.0] * 13]),
  _pt(("GRAD.MAX.tie",), "a.maximum(b)", {"a": [0.0, -0.0, INF, -INF], "b": [-0.0, 0.0, INF, -INF]}, ("a", "b"),
      [[0.5] * 4, [0.5] * 4]),
  _pt(("GRAD.MAX.tie",), "a.minimum(b)", {"a": [0.0, -0.0, INF, -INF], "b": [-0.0, 0.0, INF, -INF]}, ("a", "b"),
      [[0.5] * 4, [0.5] * 4]),
]


@pytest.mark.parametrize("expr,inputs,wrt,want,g,rtol", SPECIAL)
def test_special_point(adapter, expr, inputs, wrt, want, g, rtol):
  """Each sub-clause's stated gradient at its special points (zeros, ties, NaN, infinities, negative arguments), and
  the cuts and zeros of GRAD.NONDIFF, for a cotangent of ones (or the one given)."""
  spec = {n: v if isinstance(v, tuple) else (v, "float32") for n, v in inputs.items()}
  for _, dt in spec.values():
    if (why := adapter.unsupported_dtype(dt)): pytest.skip(why)
  ts = {n: _t(adapter, v, dt) for n, (v, dt) in spec.items()}
  y = _ev(adapter, expr, **ts)
  seed = np.ones(adapter.shape(y)) if g is None else np.array(g)
  grads = adapter.gradient(y, [ts[n] for n in wrt], adapter.tensor(seed.astype(NP[adapter.dtype_name(y)]),
                                                                    adapter.dtype_name(y)))
  for n, d, w in zip(wrt, grads, want):
    assert adapter.dtype_name(d) == spec[n][1], f"{expr}: d{n} has dtype {adapter.dtype_name(d)}, want {spec[n][1]}"
    _close(_np(adapter, d), w, rtol, f"{expr}: d{n} at {spec[n][0]}")


# ---------------------------------------------------------------------------------------------------- forward values

def _fw(clauses, expr, torch_expr, inputs, spec=None):
  """One forward special point: `expr` through the adapter against `torch_expr` in float32, bit for bit with the
  sign of a zero (ACC.EXACT: the ops are made of exact steps); `spec` = {position: value} where the spec differs from
  torch on purpose, its clause first in `clauses`."""
  return pytest.param(expr, torch_expr, inputs, spec or {}, id=f"{clauses[0]}:{expr}", marks=[
    pytest.mark.clauses(*clauses, "ACC.EXACT"), pytest.mark.conformance(op=clauses[0], dtype="float32",
                                                                       prop="special_point_forward")])


_KINK = [-0.0, 0.0, NAN, INF, -INF, 2.0, -2.0, _TINY, -_TINY]
_ROUNDING = [2.0, -2.0, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 0.0, -0.0, NAN, INF, -INF, 8388607.5, -8388607.5]
FORWARD = [
  _fw(("GRAD.CHECK.tensor",), "x.relu()", "torch.relu(x)", {"x": _KINK}),
  _fw(("GRAD.CHECK.tensor",), "x.relu6()", "torch.nn.functional.relu6(x)",
      {"x": _KINK + [6.0, _B6[0], _B6[1]]}),
  _fw(("GRAD.CHECK.tensor",), "x.hardtanh()", "torch.nn.functional.hardtanh(x)",
      {"x": _KINK + [1.0, -1.0, _B1[0], -_B1[0], _B1[1], -_B1[1]]}),
  _fw(("GRAD.CHECK.tensor",), "x.leaky_relu(0.25)", "torch.nn.functional.leaky_relu(x, 0.25)", {"x": _KINK}),
  _fw(("GRAD.ABS",), "x.abs()", "torch.abs(x)", {"x": _KINK}),
  _fw(("GRAD.CHECK.tensor",), "x.clip(-1.0, 6.0)", "torch.clamp(x, -1.0, 6.0)",
      {"x": _KINK + [-1.0, 6.0, -_B1[0], _B6[0], -_B1[1], _B6[1]]}),
  _fw(("GRAD.CHECK.tensor",), "x.clip(0.0, 1.0)", "torch.clamp(x, 0.0, 1.0)", {"x": _KINK + [1.0, _B1[0], _B1[1]]}),
  _fw(("GRAD.NONDIFF.zero",), "x.sign()", "torch.sign(x)", {"x": _KINK}),
  _fw(("GRAD.NONDIFF.zero", "OP.TRUNC.special"), "x.trunc()", "torch.trunc(x)", {"x": _ROUNDING}),
  _fw(("GRAD.NONDIFF.zero",), "x.floor()", "torch.floor(x)", {"x": _ROUNDING}),
  _fw(("GRAD.NONDIFF.zero",), "x.ceil()", "torch.ceil(x)", {"x": _ROUNDING}),
  _fw(("GRAD.NONDIFF.zero",), "x.round()", "torch.round(x)", {"x": _ROUNDING}),
  # OP.MAX.zero: MAX(-0.0, +0.0) is +0.0 in either order, where torch returns one operand (ACC.MAX); minimum is its
  # mirror image, -0.0 in either order
  _fw(("OP.MAX.zero", "GRAD.MAX.tie", "ACC.MAX"), "a.maximum(b)", "torch.maximum(a, b)",
      {"a": [0.0, -0.0, -0.0, NAN, 1.0, INF, 1.0], "b": [-0.0, 0.0, -0.0, 1.0, NAN, INF, 1.0]}, {0: 0.0, 1: 0.0}),
  _fw(("OP.MAX.zero", "GRAD.MAX.tie", "ACC.MAX"), "a.minimum(b)", "torch.minimum(a, b)",
      {"a": [0.0, -0.0, 0.0, NAN, 1.0, -INF, 1.0], "b": [-0.0, 0.0, 0.0, 1.0, NAN, -INF, 1.0]}, {0: -0.0, 1: -0.0}),
]


@pytest.mark.parametrize("expr,torch_expr,inputs,spec", FORWARD)
def test_special_point_forward(adapter, expr, torch_expr, inputs, spec):
  """The value at each special point of the table above, sign of zero included, against torch (and the spec where it
  says it differs)."""
  import torch
  arrays = {n: np.array(v, np.float32) for n, v in inputs.items()}
  got = np.asarray(adapter.numpy(_ev(adapter, expr, **{n: adapter.tensor(a, "float32") for n, a in arrays.items()})))
  want = eval(torch_expr, {"torch": torch}, {n: torch.from_numpy(a) for n, a in arrays.items()}).numpy()  # noqa: S307
  want = want.astype(np.float32).copy()
  for i, v in spec.items(): want[i] = v
  with np.errstate(invalid="ignore"):
    same = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
  bad = [f"at {[inputs[n][i] for n in inputs]}: got {got[i]!r}, want {want[i]!r}" for i in np.flatnonzero(~same)]
  assert not bad, f"{expr}: " + "; ".join(bad)


# ---------------------------------------------------------------------------------------------------- the model

# A graph whose nodes are used several times and at different depths: its cotangents are only right when each node
# is visited after all its users (GRAD.MODEL.order) and their contributions are added (GRAD.MODEL.sum); y broadcasts.
SHARED = Op("graph.shared", "((x * y).exp2() * (x * y) + (x * y).sin() * y).sum(-1)",
            "((x * y).exp2() * (x * y) + (x * y).sin() * y).sum(-1)",
            Domain("reduce", ("float32", "float64"), ("x", "y"), lo=-2.0, hi=2.0, specials=False,
                   shapes=lambda: st.sampled_from([((3, 4), (4,)), ((2, 3), (2, 3)), ((4,), (1,))])),
            ("GRAD.MODEL.order", "GRAD.MODEL.sum", "GRAD.BROADCAST"), "GRAD", "GRAD",
            n=lambda case: case.inputs[0].shape[-1], second_order=True,
            note="a composite of shared nodes: checks the autograd model, not one rule")
SEEDS = st.integers(0, 2 ** 32 - 1)


@pytest.mark.parametrize("dtype", [pytest.param(d, marks=pytest.mark.clauses(
  *SHARED.clauses, "GRAD.CHECK", "ACC.GRAD.measure", acc_clause("GRAD", d))) for d in SHARED.domain.dtypes])
@given(data=st.data())
def test_shared_nodes_vjp(adapter, dtype, data):
  """GRAD.MODEL.order and GRAD.MODEL.sum through GRAD.CHECK: the VJP of a graph of shared nodes against torch
  autograd with a random cotangent, within ACC.GRAD (ACC.GRAD.measure)."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  outcome = vjp(adapter, SHARED, data.draw(SHARED.cases(dtype), label="case"), dtype, data.draw(SEEDS, label="seed"))
  record(outcome, SHARED, dtype, "vjp")
  assert outcome.ok, outcome.message


@pytest.mark.clauses(*SHARED.clauses, "GRAD.CHECK.fd", "ACC.GRAD.fd")
@given(data=st.data())
def test_shared_nodes_finite_differences(adapter, data):
  """GRAD.CHECK.fd: the float64 VJP of the shared-node graph against the implementation's own central differences,
  within ACC.GRAD.fd."""
  if (why := adapter.unsupported_dtype("float64")): pytest.skip(why)
  outcome = finite_differences(adapter, SHARED, data.draw(SHARED.cases("float64", smooth=True), label="case"),
                               data.draw(SEEDS, label="seed"))
  record(outcome, SHARED, "float64", "fd")
  assert outcome.ok, outcome.message


@pytest.mark.clauses("GRAD.MODEL", "GRAD.MODEL.order", "ACC.GRAD2", "ACC.GRAD2.f64")
@given(data=st.data())
def test_gradients_are_differentiable_graphs(adapter, data):
  """GRAD.MODEL: a gradient is a graph like any other, so it can be differentiated again: the second-order VJP of
  the shared-node graph against torch's double backward, within ACC.GRAD2."""
  if (why := adapter.unsupported_dtype("float64")): pytest.skip(why)
  outcome = second_order(adapter, SHARED, data.draw(SHARED.cases("float64", smooth=True), label="case"), "float64",
                         data.draw(SEEDS, label="seed"))
  record(outcome, SHARED, "float64", "second_order")
  assert outcome.ok, outcome.message


@pytest.mark.clauses("GRAD.MODEL")
def test_differentiation_runs_nothing(adapter):
  """GRAD.MODEL: gradient() and backward() only build graph; their results still have kernels to run."""
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0, 3.0]))
  adapter.numpy(x)
  dx, = adapter.gradient(_ev(adapter, "(x * x).sum()", x=x), [x], _t(adapter, 1.0))
  _ev(adapter, "(x * x * x).sum().backward()", x=x)
  grad = _ev(adapter, "x.grad", x=x)
  counts = [adapter.count_kernels(dx), adapter.count_kernels(grad)]
  if None in counts: pytest.skip(f"{adapter.name} cannot count kernels (GRAD.MODEL's 'nothing is realised' unchecked)")
  assert min(counts) >= 1, f"GRAD.MODEL: gradient() / backward() results have {counts} kernels left: already run"
  _close(_np(adapter, dx), [2, 4, 6], 0.0, "d(x*x)/dx")
  _close(_np(adapter, grad), [3, 12, 27], 0.0, "x.grad of (x*x*x).sum()")


@pytest.mark.clauses("GRAD.MODEL.rule", "GRAD.BROADCAST", "GRAD.CAST", "GRAD.EXPAND")
def test_cotangents_have_the_shape_and_dtype_of_their_node(adapter):
  """GRAD.MODEL.rule: each source gets a cotangent of its own shape and dtype: a float16 (2, 1) input broadcast
  and cast into a float32 (2, 3) product gets a float16 (2, 1) gradient, the float32 (3,) one a float32 (3,)."""
  if (why := adapter.unsupported_dtype("float16")): pytest.skip(why)
  x, w = _t(adapter, [[1.0], [2.0]], "float16"), _t(adapter, [1.0, 2.0, 4.0])
  y = _ev(adapter, "x.cast(dtypes.float32) * w", x=x, w=w)
  dx, dw = adapter.gradient(y, [x, w], adapter.tensor(np.ones((2, 3), np.float32), "float32"))
  got = [(adapter.dtype_name(d), adapter.shape(d)) for d in (dx, dw)]
  assert got == [("float16", (2, 1)), ("float32", (3,))], f"GRAD.MODEL.rule: cotangent dtypes and shapes {got}"
  _close(_np(adapter, dx), [[7.0], [7.0]], 0.0, "dx")
  _close(_np(adapter, dw), [3.0, 3.0, 3.0], 0.0, "dw")


@pytest.mark.clauses("GRAD.MODEL.sum", "GRAD.DETACH", "GRAD.ACCUM")
def test_targets_without_a_cotangent(adapter):
  """GRAD.MODEL.sum: a target the loss does not reach gets zeros of its shape and dtype from gradient(), and a leaf
  reached only through DETACH keeps its .grad unchanged (None) under backward()."""
  x, z = _t(adapter, [1.0, 2.0]), _t(adapter, [[5.0], [6.0]], "float64")
  dx, dz = adapter.gradient(_ev(adapter, "(x * 2).sum()", x=x), [x, z], _t(adapter, 1.0))
  assert (adapter.dtype_name(dz), adapter.shape(dz)) == ("float64", (2, 1))
  _close(_np(adapter, dz), [[0.0], [0.0]], 0.0, "gradient() of an unreached target")
  _close(_np(adapter, dx), [2.0, 2.0], 0.0, "dx")
  a, b = _ev(adapter, "a.requires_grad_()", a=_t(adapter, [1.0, 2.0])), _ev(adapter, "b.requires_grad_()",
                                                                           b=_t(adapter, [5.0]))
  _ev(adapter, "((a * 2).sum() + b.detach().sum()).backward()", a=a, b=b)
  assert _ev(adapter, "b.grad", b=b) is None, "GRAD.MODEL.sum: backward() gave .grad to a leaf it reaches only " \
                                               "through detach()"
  _close(_np(adapter, _ev(adapter, "a.grad", a=a)), [2.0, 2.0], 0.0, "a.grad")


# ---------------------------------------------------------------------------------------------------- the Tensor API

@pytest.mark.clauses("GRAD.DTYPE")
def test_only_floats_have_gradients(adapter):
  """GRAD.DTYPE: requires_grad on an int tensor, a gradient of an int loss and a gradient for an int target are
  errors naming GRAD.DTYPE; a float tensor computed from an int one is differentiated as usual."""
  x, i = _t(adapter, [1.0, 2.0]), _t(adapter, [3, 4], "int32")
  for expr in ("i.requires_grad_()", "(i * 2).sum().gradient(x)", "(x * 2).sum().gradient(i)"):
    with pytest.raises(Exception, match="GRAD.DTYPE"): _ev(adapter, expr, x=x, i=i)
  dx, = _ev(adapter, "(i.cast(dtypes.float32) * x).sum().gradient(x)", x=x, i=i)
  _close(_np(adapter, dx), [3.0, 4.0], 0.0, "d(float(i) * x)/dx")


@pytest.mark.clauses("GRAD.SCALAR")
def test_seed_cotangent(adapter):
  """GRAD.SCALAR: without a seed the loss must have one element (any shape); otherwise, or with a seed of another
  shape, an error names GRAD.SCALAR. An explicit float64 seed is cast to the float32 loss's dtype."""
  for expr in ("(x * 2).backward()", "(x * 2).gradient(x)", "(x * 2).sum().backward(gradient=g3)"):
    x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0]))
    with pytest.raises(Exception, match="GRAD.SCALAR"): _ev(adapter, expr, x=x, g3=_t(adapter, [1.0, 1.0, 1.0]))
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [[2.0]]))
  _ev(adapter, "(x * x).backward()", x=x)
  _close(_np(adapter, _ev(adapter, "x.grad", x=x)), [[4.0]], 0.0, "x.grad of a (1, 1) loss")
  if adapter.unsupported_dtype("float64"): return
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0]))
  _ev(adapter, "(x * 3).backward(gradient=g)", x=x, g=_t(adapter, [1.0, 0.1], "float64"))
  grad = _ev(adapter, "x.grad", x=x)
  assert adapter.dtype_name(grad) == "float32", f"GRAD.SCALAR: the seed is cast to float32, .grad is " \
                                                f"{adapter.dtype_name(grad)}"
  _close(_np(adapter, grad), [3.0, float(np.float32(0.1)) * 3], 1e-7, "x.grad for a float64 seed")


@pytest.mark.clauses("GRAD.ACCUM")
def test_grad_accumulates(adapter):
  """GRAD.ACCUM: two backward() calls of (2*x).sum() leave x.grad = 4; gradient() leaves .grad alone; clearing it
  with None starts again."""
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0, 3.0]))
  for _ in range(2): _ev(adapter, "(2 * x).sum().backward()", x=x)
  _close(_np(adapter, _ev(adapter, "x.grad", x=x)), [4.0] * 3, 0.0, "x.grad after two backward()")
  _ev(adapter, "(x * x).sum().gradient(x)", x=x)
  _close(_np(adapter, _ev(adapter, "x.grad", x=x)), [4.0] * 3, 0.0, "x.grad after gradient()")
  x.grad = None
  _ev(adapter, "(2 * x).sum().backward()", x=x)
  _close(_np(adapter, _ev(adapter, "x.grad", x=x)), [2.0] * 3, 0.0, "x.grad after clearing it")


@pytest.mark.clauses("GRAD.LEAF.identity")
def test_equal_leaves_are_distinct(adapter):
  """GRAD.LEAF.identity: two equal constants, or two tensors realized together with equal values, become leaves of
  their own when they require gradients: each gets its own .grad, and their values are unchanged."""
  a = _ev(adapter, "Tensor.zeros(3, requires_grad=True)")
  b = _ev(adapter, "Tensor.zeros(3, requires_grad=True)")
  _ev(adapter, "(a * 1.0 + b * 2.0).sum().backward()", a=a, b=b)
  _close(_np(adapter, _ev(adapter, "a.grad", a=a)), [1.0] * 3, 0.0, "a.grad")
  _close(_np(adapter, _ev(adapter, "b.grad", b=b)), [2.0] * 3, 0.0, "b.grad")
  c, d = _ev(adapter, "Tensor.ones(2)"), _ev(adapter, "Tensor.ones(2)")
  _ev(adapter, "Tensor.realize(c, d)", c=c, d=d)
  c.requires_grad, d.requires_grad = True, True
  _ev(adapter, "(c * 3.0 - d).sum().backward()", c=c, d=d)
  _close(_np(adapter, _ev(adapter, "c.grad", c=c)), [3.0, 3.0], 0.0, "c.grad")
  _close(_np(adapter, _ev(adapter, "d.grad", d=d)), [-1.0, -1.0], 0.0, "d.grad")
  _close(_np(adapter, c), [1.0, 1.0], 0.0, "c after it became a leaf")


@pytest.mark.clauses("GRAD.NOGRAD")
def test_requires_grad_and_no_grad(adapter):
  """GRAD.NOGRAD: requires_grad is None by default and True downstream of a tensor that requires gradients;
  backward() fills only leaves that require gradients and refuses a loss that depends on none; gradient() ignores
  the flag; tensors made under no_grad refuse gradients."""
  T = adapter.namespace()["Tensor"]
  assert _ev(adapter, "Tensor([1.0]).requires_grad") is None
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0]))
  w = _t(adapter, [3.0, 4.0])
  assert _ev(adapter, "(x * 3).requires_grad", x=x) is True
  _ev(adapter, "(x * w).backward(gradient=g)", x=x, w=w, g=_t(adapter, [1.0, 10.0]))
  _close(_np(adapter, _ev(adapter, "x.grad", x=x)), [3.0, 40.0], 0.0, "x.grad")
  assert _ev(adapter, "w.grad", w=w) is None, "GRAD.NOGRAD: backward() filled .grad of a tensor not requiring it"
  with pytest.raises(Exception, match="GRAD.NOGRAD"): _ev(adapter, "(w * 2).sum().backward()", w=w)
  dw, = _ev(adapter, "(w * w).sum().gradient(w)", w=w)
  _close(_np(adapter, dw), [6.0, 8.0], 0.0, "gradient() of a tensor without requires_grad")
  with T.no_grad:
    made = _ev(adapter, "Tensor([1.0])")
    assert made.requires_grad is False and _ev(adapter, "(x * 2).requires_grad", x=x) is False
  assert _ev(adapter, "Tensor([1.0]).requires_grad") is None, "GRAD.NOGRAD: no_grad outlived its block"


@pytest.mark.clauses("GRAD.NOGRAD")
def test_no_grad_results_are_constants(adapter):
  """GRAD.NOGRAD: backward() never reaches through a result made under no_grad: for y = 2x made there,
  (y * x).sum() gives x.grad = y = 2x, as torch does, not the 4x of differentiating through y."""
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, 2.0]))
  with adapter.namespace()["Tensor"].no_grad: y = _ev(adapter, "x * 2", x=x)
  _ev(adapter, "(y * x).sum().backward()", x=x, y=y)
  got = _np(adapter, _ev(adapter, "x.grad", x=x))
  _close(got, [2.0, 4.0], 0.0, "x.grad through a no_grad result")


@pytest.mark.clauses("GRAD.REALIZE", "GRAD.REALIZE.before", "GRAD.REALIZE.after")
def test_realized_tensors(adapter):
  """GRAD.REALIZE.before: a graph built before one of its tensors was realized differentiates through it;
  GRAD.REALIZE.after: one built on a realized tensor differentiates through what computed it (6x for 3 * x*x)."""
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [2.0, 3.0]))
  y = _ev(adapter, "x * x + 3 * x", x=x)
  loss = _ev(adapter, "y.sum()", y=y)
  _close(_np(adapter, y), [10.0, 18.0], 0.0, "y")
  dx, = adapter.gradient(loss, [x], _t(adapter, 1.0))
  _close(_np(adapter, dx), [7.0, 9.0], 0.0, "GRAD.REALIZE.before: dx")
  y = _ev(adapter, "(x * x).realize()", x=x)
  dx, = adapter.gradient(_ev(adapter, "(y * 3).sum()", y=y), [x], _t(adapter, 1.0))
  _close(_np(adapter, dx), [12.0, 18.0], 0.0, "GRAD.REALIZE.after: dx")


@pytest.mark.clauses("GRAD.ASSIGN")
def test_assign_passes_the_cotangent_to_the_value(adapter):
  """GRAD.ASSIGN: differentiating through an assign is allowed, and the value assigned gets the cotangent."""
  t = _ev(adapter, "Tensor.zeros(2).contiguous().realize()")
  v = _t(adapter, [1.0, 2.0])
  _ev(adapter, "t.assign(v * 3)", t=t, v=v)
  dv, = adapter.gradient(_ev(adapter, "(t * 2).sum()", t=t), [v], _t(adapter, 1.0))
  _close(_np(adapter, dv), [6.0, 6.0], 0.0, "dv")
  _close(_np(adapter, t), [3.0, 6.0], 0.0, "t after the assign")


# ---------------------------------------------------------------------------------------------------- nn methods

@pytest.mark.clauses("GRAD.T", "GRAD.T.dropout")
def test_dropout_gradient_is_the_mask(adapter):
  """GRAD.T.dropout: in training dx = g * mask / (1 - p): 1/(1-p) where an element was kept, 0 where it was dropped;
  p = 0 gives g itself and p = 1 gives 0."""
  T = adapter.namespace()["Tensor"]
  x = _t(adapter, np.arange(1, 65))
  with T.train():
    for p in (0.0, 0.25, 1.0):
      y = _ev(adapter, "x.dropout(p)", x=x, p=p)
      dx, = adapter.gradient(y, [x], _t(adapter, np.ones(64)))
      d, kept = _np(adapter, dx), _np(adapter, y) != 0
      want = np.where(kept, 1.0 / (1.0 - p) if p < 1 else 0.0, 0.0)
      _close(d, want, 1e-7, f"GRAD.T.dropout: dx for p = {p}")
      if p == 0.0: assert kept.all()
      if p == 1.0: assert not kept.any()


@pytest.mark.clauses("GRAD.T", "GRAD.T.one_hot", "GRAD.NONDIFF.none", "GRAD.DTYPE")
def test_one_hot_has_no_gradient(adapter):
  """GRAD.T.one_hot: the result is an integer tensor, so it has no gradient (requires_grad on it is a GRAD.DTYPE
  error); a float tensor multiplied by its float cast gets the one-hot values."""
  labels = _t(adapter, [0, 2], "int32")
  oh = _ev(adapter, "y.one_hot(4)", y=labels)
  assert adapter.dtype_name(oh) not in FLOATS, f"GRAD.T.one_hot: one_hot gave {adapter.dtype_name(oh)}"
  with pytest.raises(Exception, match="GRAD.DTYPE"): _ev(adapter, "oh.requires_grad_()", oh=oh)
  w = _t(adapter, np.arange(8.0).reshape(2, 4))
  dw, = _ev(adapter, "(oh.cast(dtypes.float32) * w).sum().gradient(w)", oh=oh, w=w)
  _close(_np(adapter, dw), [[1, 0, 0, 0], [0, 0, 1, 0]], 0.0, "dw")


@pytest.mark.clauses("GRAD.T", "GRAD.T.binary_crossentropy", "GRAD.T.binary_crossentropy_logits",
                     "GRAD.CHECK.points")
def test_binary_crossentropy_special_points(adapter):
  """GRAD.T.binary_crossentropy: a clamped log contributes nothing, so at x = 0, Y = 0 the gradient is 1 (and -Y/x
  = -2 at x = 0.5, Y = 1); GRAD.T.binary_crossentropy_logits: sigmoid(x) - Y, finite, within rounding of the terms
  (one float32 eps) at x = 0 and x = 100."""
  x, y = _t(adapter, [0.0, 0.5]), _t(adapter, [0.0, 1.0])
  dx, = _ev(adapter, "x.binary_crossentropy(y, 'sum').gradient(x)", x=x, y=y)
  _close(_np(adapter, dx), [1.0, -2.0], 1e-6, "GRAD.T.binary_crossentropy: dx")
  x, y = _t(adapter, [0.0, 100.0]), _t(adapter, [0.25, 1.0])
  dx, = _ev(adapter, "x.binary_crossentropy_logits(y, 'sum').gradient(x)", x=x, y=y)
  got, want = _np(adapter, dx), np.array([0.25, -math.exp(-100)])
  assert np.isfinite(got).all() and (np.abs(got - want) <= 2.0 ** -23).all(), \
    f"GRAD.T.binary_crossentropy_logits: dx at [0, 100] is {got.tolist()}, sigmoid(x) - Y is {want.tolist()}"


# ---------------------------------------------------------------------------------------------------- devices

@pytest.mark.clauses("GRAD.COPY")
def test_copy_sends_the_cotangent_back(adapter):
  """GRAD.COPY: through copies to another device and back, each cotangent is copied to its node's device: for
  ((x.to(d) * x.to(d)).to(b) * 3 + x).sum() the gradient is 6x + 1, on x's own device, from gradient() and from
  backward(); a target that lives on the other device gets its gradient there."""
  other = adapter.other_device()
  if other is None: pytest.skip(f"{adapter.name} names no second device to copy to (UOP.COPY.to)")
  here = adapter.backend
  expr = "((x.to(d) * x.to(d)).to(b) * 3 + x).sum()"
  x = _ev(adapter, "x.requires_grad_()", x=_t(adapter, [1.0, -2.0, 0.5]))
  dx, = adapter.gradient(_ev(adapter, expr, x=x, d=other, b=here), [x], _t(adapter, 1.0))
  assert str(_ev(adapter, "dx.device", dx=dx)).upper() == here, "GRAD.COPY: gradient() left dx on another device"
  _close(_np(adapter, dx), [7.0, -11.0, 4.0], 0.0, "gradient() through copies")
  _ev(adapter, expr + ".backward()", x=x, d=other, b=here)
  grad = _ev(adapter, "x.grad", x=x)
  assert str(_ev(adapter, "g.device", g=grad)).upper() == here, "GRAD.COPY: backward() put x.grad on another device"
  _close(_np(adapter, grad), [7.0, -11.0, 4.0], 0.0, "x.grad through copies")
  w = _ev(adapter, "w.to(d)", w=_t(adapter, [2.0, 3.0, 4.0]), d=other)   # a target on the other device
  dw, = adapter.gradient(_ev(adapter, "(w.to(b) * x).sum()", w=w, x=x, b=here), [w], _t(adapter, 1.0))
  assert str(_ev(adapter, "dw.device", dw=dw)).upper() == other.upper(), "GRAD.COPY: dw is not on w's device"
  _close(_np(adapter, dw), [1.0, -2.0, 0.5], 0.0, "dw of a target on the other device")
