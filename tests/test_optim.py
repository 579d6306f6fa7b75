"""refimpl.nn.optim against torch.optim and against the formulas of spec/optim.md (OPTIM.*).

Tolerances. In float32, torch and refimpl compute the same formulas with different roundings: torch may fuse
`p + (-lr)*g` into one rounding, computes Adam's first moment with lerp and its bias corrections in double, refimpl
rounds lr*g first and keeps the bias corrections as float32 state (OPTIM.TORCH). Each step can therefore leave a
parameter element up to about one float32 ulp away from torch's; an element near zero has a tiny ulp of its own but
receives the rounding error of an update computed at the scale of the others. So the comparison allows rtol 1e-6
plus an atol of one ulp of the tensor's largest magnitude per step. In float64, with a learning rate that float32
holds exactly, the formulas agree to rtol 1e-12."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.nn import optim
from refimpl.uop import Ops

STEPS = 3
SHAPES = [(3, 4), (4,), ()]


def _problem(dtype, seed=0):
  """Initial parameters and STEPS gradients for each parameter, as numpy arrays."""
  rng = np.random.default_rng(seed)
  params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
  grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
  return params, grads


def _run_ours(make, params, grads) -> list[np.ndarray]:
  ts = [Tensor(p.copy()) for p in params]
  opt = make(ts)
  for gs in grads:
    for t, g in zip(ts, gs): t.grad = Tensor(g)
    opt.step()
  return [t.numpy() for t in ts]


def _run_torch(make, params, grads) -> list[np.ndarray]:
  ts = [torch.tensor(p.copy(), requires_grad=True) for p in params]
  opt = make(ts)
  for gs in grads:
    for t, g in zip(ts, gs): t.grad = torch.tensor(g)
    opt.step()
  return [t.detach().numpy() for t in ts]


CASES = {   # name -> (refimpl optimizer, torch optimizer), same hyperparameters
  "sgd": (lambda p, lr: optim.SGD(p, lr=lr), lambda p, lr: torch.optim.SGD(p, lr=lr)),
  "sgd_wd": (lambda p, lr: optim.SGD(p, lr=lr, weight_decay=0.1),
             lambda p, lr: torch.optim.SGD(p, lr=lr, weight_decay=0.1)),
  "sgd_momentum": (lambda p, lr: optim.SGD(p, lr=lr, momentum=0.9),
                   lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9)),
  "sgd_nesterov_wd": (lambda p, lr: optim.SGD(p, lr=lr, momentum=0.8, nesterov=True, weight_decay=0.05),
                      lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.8, nesterov=True, weight_decay=0.05)),
  "adam": (lambda p, lr: optim.Adam(p, lr=lr), lambda p, lr: torch.optim.Adam(p, lr=lr, foreach=False)),
  "adam_wd": (lambda p, lr: optim.Adam(p, lr=lr, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1),
              lambda p, lr: torch.optim.Adam(p, lr=lr, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, foreach=False)),
  "adamw": (lambda p, lr: optim.AdamW(p, lr=lr), lambda p, lr: torch.optim.AdamW(p, lr=lr, foreach=False)),
  "adamw_wd": (lambda p, lr: optim.AdamW(p, lr=lr, weight_decay=0.3),
               lambda p, lr: torch.optim.AdamW(p, lr=lr, weight_decay=0.3, foreach=False)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_steps_match_torch_float32(case):
  ours, theirs = CASES[case]
  params, grads = _problem(np.float32)
  got = _run_ours(lambda p: ours(p, 0.05), params, grads)
  want = _run_torch(lambda p: theirs(p, 0.05), params, grads)
  for g, w, p0 in zip(got, want, params):
    assert g.dtype == np.float32 and g.shape == p0.shape
    ulp = np.spacing(np.float32(np.abs(w).max()))
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=STEPS * ulp)
    assert np.abs(w - p0).min() > 100 * STEPS * ulp    # every element moved far more than the tolerance


@pytest.mark.parametrize("case", list(CASES))
def test_steps_match_torch_float64(case):
  ours, theirs = CASES[case]
  params, grads = _problem(np.float64, seed=1)
  got = _run_ours(lambda p: ours(p, 0.0625), params, grads)    # 0.0625: the float32 learning rate is exact
  want = _run_torch(lambda p: theirs(p, 0.0625), params, grads)
  for g, w in zip(got, want):
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_classic_sgd_applies_lr_before_momentum():
  """OPTIM.SGD.classic (torch has none): b <- m*b + lr*g; p <- p - b, checked against the formula in numpy."""
  params, grads = _problem(np.float64, seed=2)
  got = _run_ours(lambda p: optim.SGD(p, lr=0.25, momentum=0.5, weight_decay=0.125, classic=True), params, grads)
  for i, p0 in enumerate(params):
    p, b = p0.copy(), np.zeros_like(p0)
    for gs in grads:
      g = gs[i] + 0.125 * p
      b = 0.5 * b + 0.25 * g
      p = p - b
    np.testing.assert_allclose(got[i], p, rtol=1e-13, atol=1e-15)


def test_lamb_scales_each_update_by_the_trust_ratio():
  """OPTIM.LAMB, checked against the formula in numpy (float64)."""
  params, grads = _problem(np.float64, seed=3)
  params[2] = np.zeros((), np.float64)    # ||p|| = 0: the ratio is 1
  lr, b1, b2, eps, wd = 0.0625, 0.9, 0.999, 1e-6, 0.01
  got = _run_ours(lambda p: optim.LAMB(p, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd), params, grads)
  for i, p0 in enumerate(params):
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, gs in enumerate(grads, 1):
      m = b1 * m + (1 - b1) * gs[i]
      v = b2 * v + (1 - b2) * gs[i] ** 2
      u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * p
      r1, r2 = np.linalg.norm(p), np.linalg.norm(u)
      p = p - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * u
    np.testing.assert_allclose(got[i], p, rtol=1e-12, atol=1e-14)


def test_lr_as_a_tensor_and_changed_between_steps():
  """OPTIM.LR: a tensor lr is used as is; assigning opt.lr changes the next step."""
  p = Tensor([1.0, 2.0])
  opt = optim.SGD([p], lr=Tensor([0.5]))
  p.grad = Tensor([1.0, 1.0])
  opt.step()
  np.testing.assert_array_equal(p.numpy(), [0.5, 1.5])
  opt.lr.assign(Tensor([0.25])).realize()
  opt.step()
  np.testing.assert_array_equal(p.numpy(), [0.25, 1.25])
  with pytest.raises(SpecError) as e: optim.SGD([Tensor([1.0])], lr=Tensor([0.1, 0.2]))
  assert e.value.clause == "OPTIM.LR"


def test_construction_sets_requires_grad_and_realizes_parameters():
  """OPTIM.PARAMS."""
  lazy = Tensor([[1.0, 2.0], [3.0, 4.0]]) * 0.5         # a lazy parameter: realized into a buffer of its own
  frozen = Tensor([1.0, 2.0]).requires_grad_(False)     # not trained: a buffer
  explicit = Tensor([3.0], requires_grad=True)
  opt = optim.Adam([lazy, frozen, explicit, lazy])
  assert lazy.requires_grad is True and frozen.requires_grad is False
  assert opt.params == [lazy, explicit] and opt.buffers == [frozen]
  base = lazy.uop.src[0] if lazy.uop.op is Ops.RESHAPE else lazy.uop
  assert base.op is Ops.BUFFER
  with pytest.raises(SpecError) as e: optim.SGD([frozen])
  assert e.value.clause == "OPTIM.PARAMS"


def test_step_without_grad_names_the_parameter():
  a, b = Tensor([1.0]), Tensor([[2.0, 3.0]])
  opt = optim.SGD([a, b], lr=0.1)
  a.grad = Tensor([1.0])
  with pytest.raises(SpecError, match=r"parameter 1 \(shape \(1, 2\)\) has no .grad") as e: opt.step()
  assert e.value.clause == "OPTIM.STEP"
  np.testing.assert_array_equal(a.numpy(), [1.0])      # nothing was assigned


def test_zero_grad_clears_and_step_leaves_buffers_and_grads_alone():
  """OPTIM.ZERO_GRAD; OPTIM.STEP: one schedule, every parameter updated in place, no graph kept."""
  w = Tensor([[1.0, 2.0]])
  stat = Tensor([5.0]).requires_grad_(False)
  opt = optim.SGD([w, stat], lr=0.5)
  w_buf = w.uop.src[0]
  (w * w).sum().backward()
  assert w.grad is not None
  kernels = Tensor.schedule(*opt.schedule_step())
  assert len(kernels) == 1 and kernels[0].arg.in_place    # the gradient 2w fuses into the update kernel
  Tensor.realize(*opt.params)
  assert w.uop.src[0] is w_buf and w.requires_grad is True
  np.testing.assert_array_equal(w.numpy(), [[0.0, 0.0]])  # w - 0.5 * 2w
  np.testing.assert_array_equal(stat.numpy(), [5.0])
  opt.zero_grad()
  assert w.grad is None and stat.grad is None


def test_loss_realized_with_the_step_is_the_loss_before_it():
  """EXEC.SCHED.war inside an optimizer step: the loss's kernels read the old parameters before they are written."""
  w0, x0 = np.array([[1.0], [-2.0]], np.float32), np.array([[3.0, 1.0]], np.float32)
  for loss_first in (True, False):
    w, x = Tensor(w0.copy()), Tensor(x0)
    opt = optim.SGD([w], lr=0.125)
    loss = ((x @ w) ** 2).sum() + (w * w).sum()           # the second term's kernel reads w itself
    loss.backward()
    Tensor.realize(loss, *opt.schedule_step()) if loss_first else Tensor.realize(*opt.schedule_step(), loss)
    assert loss.item() == 6.0                             # (3*1 + 1*-2)^2 + 1 + 4 with the old w
    np.testing.assert_array_equal(w.numpy(), w0 - 0.125 * (2 * (x0 @ w0) * x0.T + 2 * w0))
    w1 = w.numpy()
    later = ((x @ w) ** 2).sum() + (w * w).sum()
    assert later.item() == pytest.approx(float(((x0 @ w1) ** 2).sum() + (w1 * w1).sum()), rel=1e-6)


@pytest.mark.parametrize("kind", [dtypes.float16, dtypes.float32], ids=lambda d: d.name)
def test_half_parameters_keep_their_dtype_with_float32_state(kind):
  p = Tensor([1.0, -1.0], dtype=kind)
  opt = optim.Adam([p], lr=0.125)
  p.grad = Tensor([1.0, -1.0], dtype=kind)
  opt.step()
  assert p.dtype == kind and opt.m[0].dtype == dtypes.float32
  np.testing.assert_allclose(p.numpy(), [0.875, -0.875], rtol=1e-3)   # Adam's first step moves by lr*sign(g)


# ---- training runs ----

def _data():
  rng = np.random.default_rng(4)
  x = rng.standard_normal((24, 8)).astype(np.float32)
  y = np.eye(3, dtype=np.float32)[np.argmax(x @ rng.standard_normal((8, 3)).astype(np.float32), 1)]
  return x, y


@pytest.mark.parametrize("make", [
  lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
  lambda p: optim.SGD(p, lr=0.1, nesterov=True, momentum=0.5, weight_decay=1e-3),
  lambda p: optim.Adam(p, lr=0.02),
  lambda p: optim.AdamW(p, lr=0.02),
  lambda p: optim.LAMB(p, lr=0.05),
], ids=["sgd_momentum", "sgd_nesterov", "adam", "adamw", "lamb"])
def test_mlp_training_lowers_the_loss(make):
  x_np, y_np = _data()
  rng = np.random.default_rng(5)
  w1 = Tensor(rng.standard_normal((8, 16)).astype(np.float32) * 0.5)
  b1 = Tensor(np.zeros(16, np.float32))
  w2 = Tensor(rng.standard_normal((16, 3)).astype(np.float32) * 0.5)
  b2 = Tensor(np.zeros(3, np.float32))
  opt = make([w1, b1, w2, b2])
  x, y = Tensor(x_np), Tensor(y_np)

  def loss_fn() -> Tensor:
    d = x.linear(w1, b1).relu().linear(w2, b2) - y
    return (d * d).mean()   # d * d, not d ** 2: the emulator runs POW element by element in Python
  first = loss_fn().item()
  for _ in range(20):
    opt.zero_grad()
    loss_fn().backward()
    opt.step()
  last = loss_fn().item()
  # the same loss in numpy from the final parameters: the reported loss is the model's
  h = np.maximum(x_np @ w1.numpy() + b1.numpy(), 0) @ w2.numpy() + b2.numpy()
  np.testing.assert_allclose(last, ((h - y_np) ** 2).mean(), rtol=1e-5)
  assert last < 0.7 * first


def test_seed_001_training_loop_pattern():
  """Seed 001's "Training Loop Pattern" (a two-matrix MLP, Adam, MSE to zeros), with the sizes shrunk."""
  class MLP:
    def __init__(self):
      self.l1 = Tensor.randn(12, 8) * 0.01
      self.l2 = Tensor.randn(8, 3) * 0.01

    def __call__(self, x):
      return x.linear(self.l1).relu().linear(self.l2)

  Tensor.manual_seed(0)
  model = MLP()
  opt = optim.Adam([model.l1, model.l2], lr=0.001)
  losses = []
  for _ in range(4):
    x = Tensor.randn(4, 12)
    y_target = Tensor.zeros(4, 3)
    opt.zero_grad()
    loss = (model(x) - y_target).pow(2).mean()
    loss.backward()
    opt.step()
    losses.append(loss.item())
  assert all(np.isfinite(losses))
  x = Tensor.randn(4, 12)
  before = model(x).pow(2).mean().item()
  opt.zero_grad()
  model(x).pow(2).mean().backward()
  opt.step()
  assert model(x).pow(2).mean().item() < before      # a step on a batch lowers that batch's loss


def test_seed_003_sgd_snippet():
  """Seed 003's hand-written optimizer: `param.assign(param - self.lr * param.grad)` for every parameter."""
  class SGD:
    def __init__(self, params, lr=0.001):
      self.params = params
      self.lr = lr

    def zero_grad(self):
      for param in self.params:
        param.grad = None

    def step(self):
      for param in self.params:
        param.assign(param - self.lr * param.grad)

  w0, x0 = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32), np.array([[1.0, 2.0]], np.float32)
  w = Tensor(w0, requires_grad=True).realize()
  opt = SGD([w], lr=0.125)
  opt.zero_grad()
  (Tensor(x0) @ w).sum().backward()
  opt.step()
  w.realize()
  np.testing.assert_allclose(w.numpy(), w0 - 0.125 * np.repeat(x0.T, 2, axis=1), rtol=1e-7)
