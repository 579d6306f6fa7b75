"""Gradient rules of spec/gradients.md against torch autograd (GRAD.CHECK), the special points each rule pins, and the
Tensor autograd API (gradient, backward, .grad, requires_grad, detach, no_grad)."""
import math
import re
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
  # a result computed under no_grad from a tensor that requires gradients is a constant to backward(): torch's 2x
  y = Tensor([1.0, 2.0], requires_grad=True)
  with Tensor.no_grad: z = y * 2
  (z * y).sum().backward()
  assert y.grad.tolist() == [2.0, 4.0]


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


# ---- float16 and bfloat16 (GRAD.CHECK with the bounds of ACC.GRAD.f16 / ACC.GRAD.bf16) ----
#
# Tolerance: refimpl computes a 16-bit rule chain in its own dtype, rounding after every op (EXEC.FLOAT.precision),
# except that sums accumulate in float32 (DT.SUM). A rule chain has a few ops, each off by at most half an ulp of its
# result, and those errors grow as they pass through the later ops of the chain; the forward values a rule reuses
# (y in GRAD.EXP2, GRAD.SQRT, ...) were rounded too. spec/accuracy.md bounds the sum of these as `8*ulp + 4*n*eps*S`
# (ACC.GRAD.f16, ACC.GRAD.bf16, measured as ACC.GRAD.measure says): `ulp` of the reference for the roundings of the
# last ops, and `eps*S` (S the condition scale of the VJP as a function of the inputs and of g) for the roundings of
# the inputs each op sees, `n` of them for a sum over n broadcast elements. The bound is read from the spec's table.

_LOW = {"float16": (dtypes.float16, 10, -14, 15), "bfloat16": (dtypes.bfloat16, 7, -126, 127)}


def _acc_bound(clause: str):
  """The bound of `clause` in spec/accuracy.md's ACC.TABLE, as a function of ulp, n, eps and S."""
  from pathlib import Path
  text = (Path(__file__).resolve().parents[1] / "spec" / "accuracy.md").read_text()
  expr = re.search(rf"^\| `{re.escape(clause)}` \| `([^`]+)` \|", text, re.M).group(1)
  assert re.fullmatch(r"[\d\s*+()ulpnesSx.\-]+", expr), expr   # numbers and the five names only
  return lambda **names: eval(expr, {"__builtins__": {}}, names)


def _round_to(x: np.ndarray, name: str) -> np.ndarray:
  """float64 values rounded once to a 16-bit float (ACC.MEASURE.reference), returned as float64. bfloat16 goes
  through a round-to-odd float32, which makes the second rounding exact."""
  if name == "float16": return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)
  x = np.asarray(x, np.float64)
  f = x.astype(np.float32)
  toward_zero = np.where(np.abs(f.astype(np.float64)) > np.abs(x), np.nextafter(f, np.float32(0)), f)
  bits = toward_zero.view(np.uint32) | (toward_zero.astype(np.float64) != x).astype(np.uint32)   # odd if inexact
  bits = np.where(np.isfinite(f), bits, f.view(np.uint32))
  rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
  return rounded.view(np.float32).astype(np.float64)


def _ulp(ref: np.ndarray, name: str) -> np.ndarray:
  """ACC.MEASURE.ulp: 2**(e - m) for 2**e <= |ref| < 2**(e+1), e clamped to the dtype's exponent range."""
  _, m, emin, emax = _LOW[name]
  with np.errstate(divide="ignore"): e = np.floor(np.log2(np.abs(ref)))
  return 2.0 ** (np.clip(np.nan_to_num(e, neginf=emin), emin, emax) - m)


def _vjp_scale(torch_fn, xs: list[np.ndarray], g: np.ndarray) -> list[np.ndarray]:
  """ACC.MEASURE.scale of the VJP as a function of the inputs and of g, in float64:
  S_k = sum_j |d VJP_k / d z_j| * |z_j| over every element of every input and of g."""
  zs = [torch.tensor(z, dtype=torch.float64) for z in (*xs, g)]

  def vjp(*z):
    ins = [t if t.requires_grad else t.requires_grad_() for t in z[:-1]]
    grads = torch.autograd.grad(torch_fn(*ins), ins, z[-1], create_graph=True, allow_unused=True)
    return tuple(torch.zeros_like(x) if d is None else d for x, d in zip(ins, grads))
  jac = torch.autograd.functional.jacobian(vjp, tuple(zs))
  scales = []
  for k, x in enumerate(xs):
    s = np.zeros(x.shape)
    for j, z in enumerate(zs):
      d = np.nan_to_num(np.abs(jac[k][j].detach().numpy()), nan=0.0, posinf=0.0)   # NaN and 0*inf count as 0
      s += (d * np.abs(z.numpy())).reshape(x.shape + (-1,)).sum(-1)
    scales.append(s)
  return scales


# (clause, refimpl function, torch function (None: the same), input generators, forward n): the rules of CASES whose
# dtypes do not depend on the input (the CAST cases fix theirs; GRAD.CAST widen below covers 16-bit sources)
LOW_CASES = [c + (4 if c[0] in ("GRAD.REDUCE.ADD", "GRAD.REDUCE.MAX min", "GRAD.REDUCE.MUL") else
                  3 if c[0] in ("GRAD.REDUCE.MAX", "GRAD.CHECK.tensor mean", "GRAD.CHECK.tensor matmul") else 1,)
             for c in CASES if not c[0].startswith(("GRAD.CAST", "GRAD.NONDIFF.none"))] + [
  ("GRAD.CAST widen", lambda a: a.float() * 3, None, [_normal(3, 4)], 1)]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", LOW_CASES, ids=[c[0] for c in LOW_CASES])
def test_vjp_16bit_within_accuracy_contract(case, name):
  """ACC.GRAD.f16 / ACC.GRAD.bf16: each 16-bit VJP against torch's float64 VJP on the same (rounded) inputs and
  cotangent, rounded once to the input's dtype."""
  clause, ref_fn, torch_fn, gens, n_fwd = case
  torch_fn = torch_fn or ref_fn
  dtype = _LOW[name][0]
  bound = _acc_bound(f"ACC.GRAD.{'f16' if name == 'float16' else 'bf16'}")
  rng = _rng(clause + name)
  xs = [_round_to(gen(rng), name) for gen in gens]
  ts = [Tensor(x.astype(np.float32), dtype=dtype) for x in xs]
  y = ref_fn(*ts)
  out_name = "float32" if y.dtype == dtypes.float32 else name
  g = rng.standard_normal(y.shape)
  g = g.astype(np.float32).astype(np.float64) if out_name == "float32" else _round_to(g, out_name)
  got = y.gradient(*ts, gradient=Tensor(g.astype(np.float32), dtype=y.dtype))
  txs = [torch.tensor(x, requires_grad=True) for x in xs]
  want = torch.autograd.grad(torch_fn(*txs), txs, torch.tensor(g), allow_unused=True)
  for x, t, d, w, s in zip(xs, ts, got, want, _vjp_scale(torch_fn, xs, g)):
    assert d.dtype == dtype and d.shape == x.shape
    ref = _round_to(np.zeros(x.shape) if w is None else w.numpy(), name)
    n = n_fwd * y.numel() / t.numel()   # ACC.GRAD.measure: the length of the sums the gradient adds
    err = np.abs(d.numpy().astype(np.float64) - ref)
    # ACC.GRAD.measure: x is |g| * max(1, |input|) per position for elementwise ops, else the largest of those
    xsize = np.abs(g) * np.maximum(1, np.abs(x)) if g.shape == x.shape else np.abs(g).max() * max(1, np.abs(x).max())
    allowed = bound(ulp=_ulp(ref, name), n=n, eps=2.0 ** -_LOW[name][1], S=s, x=xsize)
    assert (err <= allowed).all(), f"{clause} {name}: worst {(err / _ulp(ref, name)).max():.1f} ulp\n{d.numpy()}\n{ref}"


# ---- float64 central finite differences (GRAD.CHECK.fd, ACC.GRAD.fd), independent of torch ----

def _apart(*shape):
  """Values with gaps of at least 0.1 between any two (no ties for MAX, REDUCE.MAX; GRAD.CHECK.points)."""
  def gen(rng):
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.25 - n / 8 + rng.uniform(-0.05, 0.05, n)).reshape(shape)
  return gen


def _off_integers(*shape):
  # TRUNC jumps at integers: stay at least 0.1 away from them
  return lambda rng: (rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.9, shape))


def _nonzero(*shape):
  # REDUCE.MUL: no zero in a group
  return lambda rng: rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.5, shape)


def _max_pair(rng):
  a = rng.standard_normal((3, 4))
  return a, a + rng.choice([-1.0, 1.0], (3, 4)) * rng.uniform(0.1, 1.0, (3, 4))   # |a - b| >= 0.1


# every differentiable rule, with inputs away from its undefined points. Not here: GRAD.CAST (float64 has no wider
# float; a round trip through a narrower one is a step function at the step size h), GRAD.DETACH and the cuts of
# GRAD.NONDIFF.none (no derivative to compare: the function's change is deliberately not followed), GRAD.COPY
# (it needs a second device: tests/test_copy.py) and GRAD.ASSIGN (not a function of its target)
FD_CASES = [
  ("GRAD.ADD", lambda a, b: a + b, [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.BROADCAST", lambda a, b: a * b, [_normal(3, 4), _normal(4)]),
  ("GRAD.SUB", lambda a, b: a - b, [_normal(3, 4), _normal(3, 1)]),
  ("GRAD.NEG", lambda a: -a, [_normal(3, 4)]),
  ("GRAD.MUL", lambda a, b: a * b, [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.MODEL.sum", lambda a: a * a + a, [_normal(5)]),
  ("GRAD.FDIV", lambda a, b: a / b, [_normal(3, 4), _positive(3, 4)]),
  ("GRAD.RECIPROCAL", lambda a: a.reciprocal(), [_positive(3, 4)]),
  ("GRAD.SQRT", lambda a: a.sqrt(), [_positive(3, 4)]),
  ("GRAD.EXP2", lambda a: a.exp2(), [_normal(3, 4)]),
  ("GRAD.LOG2", lambda a: a.log2(), [_positive(3, 4)]),
  ("GRAD.SIN", lambda a: a.sin(), [_normal(3, 4)]),
  ("GRAD.MAX", lambda a, b: a.maximum(b), [_max_pair]),
  ("GRAD.POW", lambda a, b: a ** b, [_positive(3, 4), _normal(3, 4)]),
  ("GRAD.WHERE", lambda a, b: Tensor(_COND).where(a, b), [_normal(3, 4), _normal(3, 4)]),
  ("GRAD.MULACC", _mulacc, [_normal(3, 4), _normal(3, 4), _normal(3, 4)]),
  ("GRAD.NONDIFF.zero", lambda a: a.trunc() * 2 + a, [_off_integers(3, 4)]),
  ("GRAD.RESHAPE", lambda a: a.reshape(2, 6), [_normal(3, 4)]),
  ("GRAD.EXPAND", lambda a: a.expand(3, 4) * a.expand(3, 4), [_normal(3, 1)]),
  ("GRAD.PERMUTE", lambda a: a.permute(2, 0, 1), [_normal(2, 3, 4)]),
  ("GRAD.PAD", lambda a: a.pad(((1, 0), (0, 2))), [_normal(3, 4)]),
  ("GRAD.SHRINK", lambda a: a.shrink(((1, 3), (0, 2))), [_normal(3, 4)]),
  ("GRAD.FLIP", lambda a: a.flip(1), [_normal(3, 4)]),
  ("GRAD.REDUCE.ADD", lambda a: a.sum(1), [_normal(3, 4)]),
  ("GRAD.REDUCE.MAX", lambda a: a.max(0), [_apart(3, 4)]),
  ("GRAD.REDUCE.MUL", lambda a: a.prod(1), [_nonzero(3, 4)]),
  ("GRAD.CONTIGUOUS", lambda a: a.contiguous() * a, [_normal(3, 4)]),
]


def _generated(gen, rng) -> list[np.ndarray]:
  out = gen(rng)
  return [np.asarray(a, np.float64) for a in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_vjp_matches_finite_differences(case):
  """<g, (f(x+hv) - f(x-hv)) / 2h> against <VJP(g), v> in float64, within ACC.GRAD.fd: the truncation term
  2**-20 * (M + |<VJP, v>|) plus the rounding of the two evaluations amplified by 1/h."""
  clause, fn, gens = case
  rng = _rng("fd " + clause)
  xs = [a for gen in gens for a in _generated(gen, rng)]
  vs = [rng.standard_normal(x.shape) for x in xs]
  h = 2.0 ** -20 * max(1.0, max(np.abs(x).max() for x in xs))
  def f(inputs): return fn(*[Tensor(a, dtype=dtypes.float64) for a in inputs])
  ts = [Tensor(x, dtype=dtypes.float64) for x in xs]
  y = fn(*ts)
  assert y.dtype == dtypes.float64
  g = rng.standard_normal(y.shape)
  vjp = sum(float((d.numpy() * v).sum()) for d, v in zip(y.gradient(*ts, gradient=Tensor(g)), vs))
  yp = f([x + h * v for x, v in zip(xs, vs)]).numpy()
  ym = f([x - h * v for x, v in zip(xs, vs)]).numpy()
  fd = float((g * (yp - ym)).sum()) / (2 * h)
  m = float((np.abs(g) * np.abs(yp - ym)).sum()) / (2 * h)
  allowed = 2.0 ** -20 * (m + abs(vjp)) + 16 * 2.0 ** -52 / h * float((np.abs(g) * (np.abs(yp) + np.abs(ym))).sum())
  assert abs(fd - vjp) <= allowed, f"{clause}: finite differences {fd!r}, VJP {vjp!r}, allowed {allowed:.3g}"


# ---- differentiating through a realized tensor (GRAD.REALIZE) ----

def test_realize_before_building_keeps_the_graph():
  """GRAD.REALIZE.before: a graph built before its piece was realized still differentiates through it (seed 000)."""
  x = Tensor([2.0], requires_grad=True)
  y = x * x + 3 * x
  loss = y.sum()
  assert y.item() == 10.0   # realizes y
  dx, = loss.gradient(x)
  assert dx.item() == 7.0


def test_gradients_flow_through_a_tensor_realized_before_use():
  """GRAD.REALIZE.after: a graph built on a realized tensor still differentiates through what computed it."""
  x = Tensor([2.0, 3.0], requires_grad=True)
  y = (x * x).realize()
  assert y.uop.op in (Ops.BUFFER, Ops.RESHAPE) and y.tolist() == [4.0, 9.0]
  dx, dy = (y * 3).sum().gradient(x, y)
  assert dx.tolist() == [12.0, 18.0] and dy.tolist() == [3.0, 3.0]
  # chains of realized tensors, and backward() into the leaf
  z = (y.exp2() + x).realize()
  w = Tensor([5.0, 7.0], requires_grad=True)
  (z * w).sum().backward()
  want = 5.0 * (2 ** 4.0 * np.log(2) * 4.0 + 1), 7.0 * (2 ** 9.0 * np.log(2) * 6.0 + 1)
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
  np.testing.assert_allclose(w.grad.numpy(), [2 ** 4.0 + 2, 2 ** 9.0 + 3], rtol=1e-6)
  # the realized tensor itself is a target like any other
  dy, = (y * y).sum().gradient(y)
  assert dy.tolist() == [8.0, 18.0]
  # a detached one is a constant: nothing reaches x
  before = x.grad.numpy().copy()
  (y.detach() * 3 + w).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), before)


def test_assign_into_a_realized_tensor_forgets_its_lineage():
  """GRAD.REALIZE.after: once other values are assigned into the buffer, it is no longer the old graph's value."""
  x = Tensor([2.0, 3.0], requires_grad=True)
  y = (x * x).realize()
  with Tensor.no_grad: y.assign(Tensor([1.0, 1.0], requires_grad=False)).realize()
  dx, = (y * 3).sum().gradient(x)
  assert dx.tolist() == [0.0, 0.0]


def test_requires_grad_propagates():
  """GRAD.NOGRAD: a tensor computed from a source with requires_grad=True has requires_grad=True itself."""
  x = Tensor([2.0], requires_grad=True)
  assert (x * 3).requires_grad is True


# Issue 15: the gradient of `Tensor.stack(x, y).max(axis=0).sum()` crashed with EXEC.PROGRAM.params ("E_1 takes 2
# buffers, got 4"): simplification dropped some of a kernel's inputs, and renumbering the remaining slots with a
# rewrite to a fixed point chained 3 -> 2 -> 1, merging them. The family: reductions over tensors joined from several
# leaves, where each leaf's gradient kernel reads only part of the joined graph.
_JOIN_REDUCTIONS = {"max": (lambda t, a: t.max(a), lambda t, a: t.amax(a)),
                    "min": (lambda t, a: t.min(a), lambda t, a: t.amin(a)),
                    "sum": (lambda t, a: t.sum(a), lambda t, a: t.sum(a)),
                    "prod": (lambda t, a: t.prod(a), lambda t, a: t.prod(a)),
                    "mean": (lambda t, a: t.mean(a), lambda t, a: t.mean(a))}


@pytest.mark.parametrize("join", ["stack", "cat"])
@pytest.mark.parametrize("reduction", sorted(_JOIN_REDUCTIONS))
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("shape", [(1,), (3,), (2, 3)])
def test_gradient_of_reduction_over_joined_leaves(join, reduction, k, shape):
  rng = _rng(f"join-{join}-{reduction}-{k}-{shape}")
  inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(k)]
  ours, theirs = _JOIN_REDUCTIONS[reduction]
  xs = [Tensor(a, requires_grad=True) for a in inputs]
  txs = [torch.tensor(a, requires_grad=True) for a in inputs]
  joined = Tensor.stack(*xs) if join == "stack" else Tensor.cat(*xs)
  tjoined = torch.stack(txs) if join == "stack" else torch.cat(txs)
  grads = ours(joined, 0).sum().gradient(*xs)
  want = torch.autograd.grad(theirs(tjoined, 0).sum(), txs)
  for g, w in zip(grads, want): _close(g.numpy(), w.numpy())


def test_substitute_is_one_pass():
  """UOp.substitute replaces each key once: shifting slots 2 -> 1 and 3 -> 2 keeps them apart (the renumbering of
  kernel slots after simplification, lowerer.finish)."""
  g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(1), (), i) for i in range(4)]
  root = UOp(Ops.SINK, dtypes.void, (g[0], g[2], g[3]))
  out = root.substitute({g[2]: g[1], g[3]: g[2]})
  assert [s.arg for s in out.src] == [0, 1, 2]
