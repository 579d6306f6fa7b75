"""Gradient rules of spec/gradients.md against torch autograd (GRAD.CHECK), the special points each rule pins, and the
Tensor autograd API (gradient, backward, .grad, requires_grad, detach, no_grad)."""
import math
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from refimpl.dtype import dtypes
from refimpl.gradient import compute_gradient, pm_gradient
from refimpl.helpers import SpecError
from refimpl.tensor import Tensor
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

RTOL, ATOL = 1e-5, 1e-6


def _rng(name: str) -> np.random.Generator:
  # one generator per test, seeded from its name, so a test's inputs do not depend on which others ran
  return np.random.default_rng(zlib.crc32(name.encode()))


def _close(got: np.ndarray, want: np.ndarray, rtol=RTOL, atol=ATOL):
  # GRAD.CHECK: NaN must match NaN and infinities must match in sign; assert_allclose checks both
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _vjp(ref_fn, torch_fn, inputs, rng, rtol=RTOL, atol=ATOL, g=None):
  """Compare y.gradient(*xs, gradient=g) with torch.autograd.grad(y, xs, g) for one random cotangent g."""
  xs = [Tensor(a) for a in inputs]
  txs = [torch.tensor(a, requires_grad=True) for a in inputs]
  y, ty = ref_fn(*xs), torch_fn(*txs)
  assert y.shape == tuple(ty.shape)
  if g is None: g = np.ones(tuple(ty.shape), np.float32) if rng is None else rng.standard_normal(tuple(ty.shape))
  g = np.asarray(g, np.float32)
  got = y.gradient(*xs, gradient=Tensor(g))
  # the forward value only after differentiating: realizing y replaces its graph by a buffer
  _close(y.numpy(), ty.detach().numpy(), rtol, atol)
  want = torch.autograd.grad(ty, txs, torch.tensor(g, dtype=ty.dtype), allow_unused=True)
  for x, a, b in zip(inputs, got, want):
    assert a.shape == x.shape and a.dtype == dtypes.float32
    _close(a.numpy(), np.zeros_like(x) if b is None else b.numpy(), rtol, atol)
  return got


def _normal(*shape): return lambda rng: rng.standard_normal(shape).astype(np.float32)
def _positive(*shape): return lambda rng: rng.uniform(0.5, 2.0, shape).astype(np.float32)


def _mulacc(a, b, c):
  if isinstance(a, Tensor): return Tensor(a.uop.mulacc(b.uop, c.uop))
  return a * b + c


_COND = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])

# (clause, refimpl function, torch function (None: the same), input generators)
CASES = [
  ("GRAD.ADD", lambda a, b: a + b, None, [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.BROADCAST", lambda a, b: a + b, None, [_normal(3, 4), _normal(4)]),
  ("GRAD.SUB", lambda a, b: a - b, None, [_normal(3, 4), _normal(3, 1)]),
  ("GRAD.MUL", lambda a, b: a * b, None, [_normal(3, 4), _normal(1, 4)]),
  ("GRAD.MODEL.sum", lambda a: a * a + a, None, [_normal(5)]),
  ("GRAD.FDIV", lambda a, b: a / b, None, [_normal(3, 4), _positive(3, 4)]),
  ("GRAD.NEG", lambda a: -a, None, [_normal(3, 4)]),
  ("GRAD.RECIPROCAL", lambda a: a.reciprocal(), None, [_positive(3, 4)]),
  ("GRAD.SQRT", lambda a: a.sqrt(), None, [_positive(3, 4)]),
  ("GRAD.EXP2", lambda a: a.exp2(), None, [_normal(3, 4)]),
  ("GRAD.LOG2", lambda a: a.log2(), None, [_positive(3, 4)]),
  ("GRAD.SIN", lambda a: a.sin(), None, [_normal(3, 4)]),
  ("GRAD.MAX", lambda a, b: a.maximum(b), None, [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.MAX minimum", lambda a, b: a.minimum(b), None, [_normal(3, 4), _normal(4)]),
  ("GRAD.POW", lambda a, b: a ** b, None, [_positive(3, 4), _normal(3, 4)]),
  ("GRAD.POW const-exponent", lambda a: a ** 3, None, [_normal(3, 4)]),
  ("GRAD.WHERE", lambda a, b: Tensor(_COND).where(a, b), lambda a, b: torch.where(torch.tensor(_COND), a, b),
   [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.MULACC", _mulacc, None, [_normal(3, 4), _normal(3, 4), _normal(3, 4)]),
  ("GRAD.CAST", lambda a: a.cast(dtypes.float64) * 3, lambda a: a.double() * 3, [_normal(3, 4)]),
  ("GRAD.CAST half", lambda a: a.cast(dtypes.float16).cast(dtypes.float32), lambda a: a.half().float(),
   [_normal(3, 4)]),
  ("GRAD.NONDIFF.none", lambda a: a.cast(dtypes.int32).cast(dtypes.float32) * a, lambda a: a.int().float() * a,
   [_normal(3, 4)]),
  ("GRAD.NONDIFF.zero", lambda a: a.trunc() + a.floor(), lambda a: a.trunc() + a.floor(), [_normal(3, 4)]),
  ("GRAD.RESHAPE", lambda a: a.reshape(2, 6), None, [_normal(3, 4)]),
  ("GRAD.EXPAND", lambda a: a.expand(3, 4), None, [_normal(3, 1)]),
  ("GRAD.PERMUTE", lambda a: a.permute(2, 0, 1), None, [_normal(2, 3, 4)]),
  ("GRAD.PAD", lambda a: a.pad(((1, 0), (0, 2))), lambda a: F.pad(a, (0, 2, 1, 0)), [_normal(3, 4)]),
  ("GRAD.SHRINK", lambda a: a.shrink(((1, 3), (0, 2))), lambda a: a[1:3, 0:2], [_normal(3, 4)]),
  ("GRAD.FLIP", lambda a: a.flip(1), None, [_normal(3, 4)]),
  ("GRAD.REDUCE.ADD", lambda a: a.sum(1), None, [_normal(3, 4)]),
  ("GRAD.REDUCE.MAX", lambda a: a.max(0), lambda a: a.amax(0), [_normal(3, 4)]),
  ("GRAD.REDUCE.MAX min", lambda a: a.min(1), lambda a: a.amin(1), [_normal(3, 4)]),
  ("GRAD.REDUCE.MUL", lambda a: a.prod(1), None, [_normal(3, 4)]),
  ("GRAD.CONTIGUOUS", lambda a: a.contiguous() * 2, None, [_normal(3, 4)]),
  ("GRAD.DETACH", lambda a: a.detach() * a, None, [_normal(3, 4)]),
  ("GRAD.CHECK.tensor relu", lambda a: a.relu(), None, [_normal(3, 4)]),
  ("GRAD.CHECK.tensor matmul", lambda a, b: a @ b, None, [_normal(2, 3), _normal(3, 4)]),
  ("GRAD.CHECK.tensor mean", lambda a: a.mean(0), None, [_normal(3, 4)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_vjp_matches_torch(case):
  name, ref_fn, torch_fn, gens = case
  rng = _rng(name)
  _vjp(ref_fn, torch_fn or ref_fn, [gen(rng) for gen in gens], rng)


# ---- special points (GRAD.CHECK.points: each pins the value the chapter states, which is torch's) ----

def _points(ref_fn, torch_fn, *inputs, g=None):
  inputs = [np.array(a, np.float32) for a in inputs]
  return _vjp(ref_fn, torch_fn or ref_fn, inputs, None, g=g)   # a cotangent of ones unless given


def test_relu_at_zero_and_nan():
  """GRAD.CHECK.tensor: relu of [-0, 0, nan, 2, -1] gives torch's gradient [0, 0, 1, 1, 0] and forward value."""
  x = np.array([-0.0, 0.0, np.nan, 2.0, -1.0], np.float32)
  dx, = _points(lambda a: a.relu(), None, x)
  np.testing.assert_array_equal(dx.numpy(), [0, 0, 1, 1, 0])
  fwd, want = Tensor(x).relu().numpy(), torch.relu(torch.tensor(x)).numpy()
  np.testing.assert_array_equal(np.signbit(fwd), np.signbit(want))
  np.testing.assert_array_equal(fwd, want)


def test_maximum_ties_and_nan():
  """GRAD.MAX.tie: g/2 to each side at a tie (-0 ties +0); GRAD.MAX.nan: both sides get g."""
  da, db = _points(lambda a, b: a.maximum(b), None, [1, 2, np.nan, 0.0, 1], [1, 1, 1, -0.0, 3])
  np.testing.assert_array_equal(da.numpy(), [0.5, 1, 1, 0.5, 0])
  np.testing.assert_array_equal(db.numpy(), [0.5, 0, 1, 0.5, 1])


def test_amax_ties_and_nan():
  """GRAD.REDUCE.MAX.tie: k tied positions get g/k each; GRAD.REDUCE.MAX.nan: NaN in the whole group."""
  dx, = _points(lambda a: a.max(1), lambda a: a.amax(1), [[1, 3, 3], [2, 2, 2], [0.0, -0.0, -1], [1, np.nan, 2]])
  np.testing.assert_allclose(dx.numpy()[:3], [[0, 0.5, 0.5], [1 / 3] * 3, [0.5, 0.5, 0]], rtol=1e-6)
  assert np.isnan(dx.numpy()[3]).all()


def test_sqrt_reciprocal_log2_fdiv_at_zero():
  """GRAD.SQRT.zero, GRAD.SQRT.negative, GRAD.RECIPROCAL.zero, GRAD.LOG2.zero, GRAD.LOG2.negative, GRAD.FDIV.zero."""
  dx, = _points(lambda a: a.sqrt(), None, [0.0, -0.0, -1.0])
  np.testing.assert_array_equal(dx.numpy(), [np.inf, -np.inf, np.nan])
  dx, = _points(lambda a: a.sqrt(), None, [0.0, -0.0], g=np.zeros(2, np.float32))
  assert np.isnan(dx.numpy()).all()
  dx, = _points(lambda a: a.reciprocal(), None, [0.0, -0.0])
  np.testing.assert_array_equal(dx.numpy(), [-np.inf, -np.inf])
  dx, = _points(lambda a: a.log2(), None, [0.0, -0.0, -1.0, np.inf])
  np.testing.assert_allclose(dx.numpy(), [np.inf, -np.inf, -1 / math.log(2), 0], rtol=1e-6)
  da, db = _points(lambda a, b: a / b, None, [1.0, 0.0], [0.0, 0.0])
  np.testing.assert_array_equal(da.numpy(), [np.inf, np.inf])
  np.testing.assert_array_equal(db.numpy(), [-np.inf, np.nan])


def test_prod_with_zeros():
  """GRAD.REDUCE.MUL.zero: one zero gets the product of the others, two zeros give all zeros."""
  dx, = _points(lambda a: a.prod(1), None, [[2, 0, 3], [2, 0, 0], [2, 4, 3]])
  np.testing.assert_array_equal(dx.numpy(), [[0, 6, 0], [0, 0, 0], [12, 6, 8]])


def test_pow_at_zero():
  """GRAD.POW.base-zero and GRAD.POW.exp-zero at b = 2, 1, 0.5, 0, -0.5, -1; GRAD.POW.base-negative at -2."""
  b = [2, 1, 0.5, 0, -0.5, -1]
  da, db = _points(lambda x, y: x ** y, None, [0.0] * 6, b)
  np.testing.assert_array_equal(da.numpy(), [0, 1, np.inf, 0, -np.inf, -np.inf])
  np.testing.assert_array_equal(db.numpy(), [0, 0, 0, 0, -np.inf, -np.inf])
  da, db = _points(lambda x, y: x ** y, None, [2.0, np.nan, -2, -2, -2], [0, 0, 2, 3, 0.5])
  np.testing.assert_allclose(da.numpy(), [0, 0, -4, 12, np.nan], rtol=1e-6)
  np.testing.assert_allclose(db.numpy(), [math.log(2), np.nan, np.nan, np.nan, np.nan], rtol=1e-6)


def test_where_does_not_leak_inf():
  """GRAD.WHERE: the branch not chosen gets an exact 0 even where the cotangent is infinite."""
  c = Tensor([False, True])
  a, b = Tensor([np.inf, 1.0]), Tensor([2.0, 3.0])
  da, db = c.where(a, b).gradient(a, b, gradient=Tensor([np.inf, np.inf]))
  np.testing.assert_array_equal(da.numpy(), [0, np.inf])
  np.testing.assert_array_equal(db.numpy(), [np.inf, 0])


# ---- the model ----

def test_const_exponent_gets_no_gradient_node():
  """GRAD.MODEL.leaf: x ** 2 builds only the base's cotangent; no LOG2 (the exponent's rule) is in the result."""
  x = Tensor([1.0, 2.0])
  dx, = (x ** 2).gradient(x, gradient=Tensor([1.0, 1.0]))
  assert all(u.op is not Ops.LOG2 for u in dx.uop.toposort())
  np.testing.assert_array_equal(dx.numpy(), [2, 4])


def test_expand_rule_sums_with_reduce_axis():
  """GRAD.EXPAND / GRAD.BROADCAST: the cotangent of a broadcast is a keep-dims REDUCE_AXIS ADD, then a RESHAPE."""
  a = Tensor(np.ones(4, np.float32))
  dx, = (a.reshape(1, 4).expand(3, 4)).gradient(a, gradient=Tensor(np.ones((3, 4), np.float32)))
  ops = [u.op for u in dx.uop.toposort()]
  assert Ops.REDUCE_AXIS in ops and dx.uop.op is Ops.RESHAPE
  np.testing.assert_array_equal(dx.numpy(), [3, 3, 3, 3])


def test_copy_and_assign_rules():
  """GRAD.COPY sends the cotangent back to the source's device; GRAD.ASSIGN gives it to the value only."""
  x = Tensor([1.0, 2.0])
  dev = UOp(Ops.DEVICE, arg="CPU")
  g = Tensor([1.0, 1.0]).uop
  out = compute_gradient(UOp(Ops.COPY, x.dtype, (x.uop, dev)), g, {x.uop})
  assert out[x.uop].op is Ops.COPY and out[x.uop].src[1].arg == x.device
  t, v = Tensor([0.0, 0.0]), Tensor([3.0, 4.0])
  out = compute_gradient(UOp(Ops.ASSIGN, v.dtype, (t.uop, v.uop)), g, {t.uop, v.uop})
  assert out == {v.uop: g}


def test_every_rule_cites_a_gradient_clause():
  assert all(r.clause and r.clause.startswith("GRAD.") for r in pm_gradient.rules)


def test_unreached_target_gets_zeros():
  """GRAD.MODEL.sum: a target with no cotangent gets zeros of its shape and dtype from gradient()."""
  x, z = Tensor([1.0, 2.0]), Tensor([[5.0], [6.0]])
  dx, dz = (x * 2).sum().gradient(x, z)
  np.testing.assert_array_equal(dx.numpy(), [2, 2])
  assert dz.shape == (2, 1) and dz.tolist() == [[0.0], [0.0]]


def test_gradient_through_int_comparison_is_cut():
  """GRAD.NONDIFF.none: (x < 1) is a cut; a float computed from it is differentiated only through float paths."""
  x = Tensor([0.5, 2.0])
  dx, = ((x < 1).cast(dtypes.float32) * x).sum().gradient(x)
  np.testing.assert_array_equal(dx.numpy(), [1, 0])


# ---- seeds ----

def test_seed_000_examples():
  x = Tensor([2.0], requires_grad=True)
  y = x ** 2 + 3 * x + 1
  loss = y.sum()
  assert x.item() == 2.0 and y.item() == 11.0
  grad, = loss.gradient(x)
  assert grad.item() == 7.0
  x = Tensor([2.0], requires_grad=True)
  grad, = (x ** 2 + 1).log().sum().gradient(x)
  assert grad.item() == pytest.approx(0.8, rel=1e-6)


def test_seed_002_003_backward():
  x = Tensor([2.0], requires_grad=True)
  y = x * x + x.sin()
  y.backward()
  assert x.grad.numpy().tolist() == pytest.approx([4 + math.cos(2.0)], rel=1e-6)


def test_seed_001_sum_of_squares():
  x = Tensor([2.0, 3.0], requires_grad=True)
  (x * x).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [4, 6])


# ---- the Tensor API ----

def test_backward_accumulates():
  """GRAD.ACCUM: two backward() calls of (2*x).sum() leave x.grad = 4; gradient() never touches .grad."""
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (2 * x).sum().backward()
  (2 * x).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [4, 4, 4])
  (x * x).sum().gradient(x)
  np.testing.assert_array_equal(x.grad.numpy(), [4, 4, 4])


def test_backward_only_fills_requires_grad_and_with_explicit_gradient():
  """GRAD.NOGRAD: only tensors with requires_grad=True get .grad; GRAD.SCALAR: an explicit seed for non-scalars."""
  x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0])
  (x * w).backward(gradient=Tensor([1.0, 10.0]))
  np.testing.assert_array_equal(x.grad.numpy(), [3, 40])
  assert w.grad is None
  x = Tensor([[2.0]], requires_grad=True)   # GRAD.SCALAR: any one-element shape
  (x * x).backward()
  assert x.grad.tolist() == [[4.0]]


def test_errors():
  with pytest.raises(SpecError, match="GRAD.DTYPE"): Tensor([1, 2], requires_grad=True)
  with pytest.raises(SpecError, match="GRAD.DTYPE"): Tensor([True]).requires_grad_()
  with pytest.raises(SpecError, match="GRAD.DTYPE"): Tensor([1, 2]).sum().gradient(Tensor([1.0]))
  with pytest.raises(SpecError, match="GRAD.DTYPE"): (Tensor([1.0]) * 2).sum().gradient(Tensor([1, 2]))
  x = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(SpecError, match="GRAD.SCALAR"): (x * 2).backward()
  with pytest.raises(SpecError, match="GRAD.SCALAR"): (x * 2).backward(gradient=Tensor([1.0, 2.0, 3.0]))
  with pytest.raises(SpecError, match="GRAD.NOGRAD"): Tensor([1.0]).sum().backward()


def test_detach_no_grad_and_train():
  """GRAD.DETACH: nothing flows through detach; GRAD.NOGRAD: tensors made under no_grad refuse gradients."""
  x = Tensor([3.0], requires_grad=True)
  (x.detach() * x).sum().backward()
  assert x.grad.tolist() == [3.0]
  assert not Tensor.no_grad
  with Tensor.no_grad:
    assert Tensor.no_grad and Tensor([1.0]).requires_grad is False
  assert not Tensor.no_grad and Tensor([1.0]).requires_grad is None
  Tensor.no_grad = True
  try: assert Tensor.no_grad and Tensor([1.0]).requires_grad is False
  finally: Tensor.no_grad = False
  with Tensor.train():
    assert Tensor.training
  assert not Tensor.training


def test_equal_constant_leaves_get_their_own_gradients():
  """GRAD.LEAF.identity: two Tensor.zeros(3) are one hash-consed node; as leaves they must still be told apart."""
  a, b = Tensor.zeros(3, requires_grad=True), Tensor.zeros(3, requires_grad=True)
  (a * 1.0 + b * 2.0).sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 1.0])
  np.testing.assert_array_equal(b.grad.numpy(), [2.0, 2.0, 2.0])
  # realized together before requires_grad is set: one shared buffer, split when they become leaves
  c, d = Tensor.ones(2), Tensor.ones(2)
  Tensor.realize(c, d)
  assert c.uop is d.uop
  c.requires_grad, d.requires_grad = True, True
  assert c.uop is not d.uop
  (c * 3.0 - d).sum().backward()
  np.testing.assert_array_equal(c.grad.numpy(), [3.0, 3.0])
  np.testing.assert_array_equal(d.grad.numpy(), [-1.0, -1.0])
  np.testing.assert_array_equal(c.numpy(), [1.0, 1.0])
