"""LARS, Muon, OptimizerGroup and the `device` and `fused` parameters (spec/optim.md OPTIM.LARS, OPTIM.MUON,
OPTIM.GROUP, OPTIM.DEVICE, OPTIM.FUSED), against float64 numpy transcriptions of the clauses (torch has no LARS, and
its Muon is another rule: OPTIM.MUON), and SGD, now LARS without trust ratio, against torch.optim.SGD."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.catalogue.optimizers import MUON_DEFAULTS, lars_reference
from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.nn import optim

SHAPES = [(3, 4), (5, 2), (4,)]
STEPS = 3
LR = 0.125   # exactly representable in float32: the float32 lr tensor (OPTIM.LR) holds it exactly


def _problem(seed=0, dtype=np.float64):
  rng = np.random.default_rng(seed)
  params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
  grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
  return params, grads


def _run(make, params, grads):
  ts = [Tensor(p.copy()) for p in params]
  opt = make(ts)
  for gs in grads:
    for t, g in zip(ts, gs): t.grad = Tensor(g)
    opt.step()
  return [t.numpy() for t in ts]


def _lars_ref(params, grads, lr, **kw):
  """OPTIM.LARS in float64 (the conformance catalogue's reference, written from the clause): the parameters after the
  last step, with the learning rate `lr` at every step."""
  return lars_reference(params, grads, [lr] * len(grads), **kw)[-1]


LARS_CASES = {
  "defaults": {},
  "popular": {"classic": False, "momentum": 0.8, "weight_decay": 0.01, "tcoef": 0.02},
  "nesterov": {"nesterov": True, "momentum": 0.5, "weight_decay": 0.1},
  "no_momentum": {"momentum": 0.0, "weight_decay": 0.0},
  "post_wd": {"pre_wd": False, "classic": False, "weight_decay": 0.05},
}


@pytest.mark.parametrize("name", LARS_CASES)
def test_lars_matches_its_clause(name):
  """OPTIM.LARS and OPTIM.LARS.trust in float64, several steps, against the clause in numpy."""
  kw = LARS_CASES[name]
  params, grads = _problem()
  got = _run(lambda ts: optim.LARS(ts, lr=LR, **kw), params, grads)
  for g, w in zip(got, _lars_ref(params, grads, LR, **kw)): np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


MUON_CASES = {
  "defaults": {},
  "plain_momentum": {"nesterov": False, "momentum": 0.9, "weight_decay": 0.0},
  "short": {"ns_steps": 2, "ns_coefficients": (2.0, -1.5, 0.5), "weight_decay": 0.2},
}


@pytest.mark.parametrize("name", MUON_CASES)
def test_muon_matches_its_clause(name):
  """OPTIM.MUON (and OPTIM.MUON.weight_decay): Muon is LARS with Newton-Schulz, popular momentum, post weight decay.
  Tall (5, 2), wide (3, 4) and 1-d parameters; float64, several steps."""
  kw = MUON_CASES[name]
  params, grads = _problem(1)
  got = _run(lambda ts: optim.Muon(ts, lr=LR, **kw), params, grads)
  full = {**MUON_DEFAULTS, **kw}
  want = _lars_ref(params, grads, LR, classic=False, pre_wd=False, tcoef=0.0, **full)
  for g, w in zip(got, want): np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_muon_float32_close_to_float64():
  """OPTIM.MUON in float32 parameters: within float32 rounding of the float64 clause."""
  params, grads = _problem(2)
  got = _run(lambda ts: optim.Muon(ts, lr=LR), [p.astype(np.float32) for p in params],
             [[g.astype(np.float32) for g in gs] for gs in grads])
  want = _lars_ref([p.astype(np.float32).astype(np.float64) for p in params],
                   [[g.astype(np.float32).astype(np.float64) for g in gs] for gs in grads], LR, momentum=0.95,
                   weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315), nesterov=True,
                   classic=False, pre_wd=False, tcoef=0.0)
  for g, w in zip(got, want): np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_sgd_is_lars_without_trust_and_matches_torch():
  """OPTIM.SGD: SGD returns a LARS with tcoef 0; with momentum, nesterov and weight decay it still is torch's SGD."""
  params, grads = _problem(3)
  opt = optim.SGD([Tensor(p) for p in params], lr=LR)
  assert isinstance(opt, optim.LARS) and opt.tcoef == 0.0 and opt.pre_wd
  got = _run(lambda ts: optim.SGD(ts, lr=LR, momentum=0.8, nesterov=True, weight_decay=0.05), params, grads)
  tp = [torch.tensor(p.copy(), requires_grad=True) for p in params]
  topt = torch.optim.SGD(tp, lr=LR, momentum=0.8, nesterov=True, weight_decay=0.05)
  for gs in grads:
    for t, g in zip(tp, gs): t.grad = torch.tensor(g)
    topt.step()
  for g, t in zip(got, tp): np.testing.assert_allclose(g, t.detach().numpy(), rtol=1e-12, atol=1e-14)


FUSED_MAKERS = {
  "sgd": lambda ts, f: optim.SGD(ts, lr=LR, momentum=0.9, fused=f),
  "lars": lambda ts, f: optim.LARS(ts, lr=LR, fused=f),
  "adam": lambda ts, f: optim.Adam(ts, lr=LR, fused=f),
  "adamw": lambda ts, f: optim.AdamW(ts, lr=LR, fused=f),
  "lamb": lambda ts, f: optim.LAMB(ts, lr=LR, weight_decay=0.1, fused=f),
}


@pytest.mark.parametrize("name", FUSED_MAKERS)
def test_fused_changes_no_bit(name):
  """OPTIM.FUSED: fused=True is recorded and gives the same bits as fused=False (float32, several steps)."""
  params, grads = _problem(4, np.float32)
  opt = FUSED_MAKERS[name]([Tensor(p) for p in params], True)
  assert opt.fused is True
  a = _run(lambda ts: FUSED_MAKERS[name](ts, True), params, grads)
  b = _run(lambda ts: FUSED_MAKERS[name](ts, False), params, grads)
  for x, y in zip(a, b): assert x.tobytes() == y.tobytes()


def test_muon_refuses_fused_and_0d():
  """OPTIM.MUON: fused=True and a 0-d parameter are refused, naming the clause."""
  with pytest.raises(SpecError, match="OPTIM.MUON"): optim.Muon([Tensor.ones(2, 2)], fused=True)
  with pytest.raises(SpecError, match="OPTIM.MUON"): optim.Muon([Tensor(1.0)])


def test_bad_hyperparameters():
  """OPTIM.LR (negative lr), OPTIM.LARS (negative momentum), OPTIM.LAMB (negative weight decay)."""
  with pytest.raises(SpecError, match="OPTIM.LR"): optim.SGD([Tensor.ones(2)], lr=-1.0)
  with pytest.raises(SpecError, match="OPTIM.LARS"): optim.LARS([Tensor.ones(2)], momentum=-0.1)
  with pytest.raises(SpecError, match="OPTIM.LAMB"): optim.AdamW([Tensor.ones(2)], weight_decay=-0.1)


def test_optimizer_group_steps_each_member_with_its_rule():
  """OPTIM.GROUP: params/buffers in order, indexing, zero_grad of all, one step that equals the members' own."""
  params, grads = _problem(5)
  ts = [Tensor(p.copy()) for p in params]
  muon, adam = optim.Muon(ts[:2], lr=LR), optim.Adam(ts[2:], lr=LR)
  group = optim.OptimizerGroup(muon, adam)
  assert group.params == ts and group[0] is muon and group[1] is adam
  for gs in grads:
    for t, g in zip(ts, gs): t.grad = Tensor(g)
    group.step()
  solo = _run(lambda x: optim.Muon(x, lr=LR), params[:2], [gs[:2] for gs in grads]) + \
    _run(lambda x: optim.Adam(x, lr=LR), params[2:], [gs[2:] for gs in grads])
  for t, w in zip(ts, solo): assert t.numpy().tobytes() == w.tobytes()
  group.zero_grad()
  assert all(t.grad is None for t in ts)


def test_device_holds_state_and_computes_there():
  """OPTIM.DEVICE: with device='PYTHON:1' the state and lr live there, the parameters stay on their device, and the
  values equal those of an optimizer on the parameters' own device."""
  params, grads = _problem(6, np.float32)
  ts = [Tensor(p.copy()) for p in params]
  opt = optim.SGD(ts, lr=LR, momentum=0.9, device="PYTHON:1")
  assert opt.device == "PYTHON:1" and opt.lr.device == "PYTHON:1" and all(b.device == "PYTHON:1" for b in opt.b)
  for gs in grads:
    for t, g in zip(ts, gs): t.grad = Tensor(g)
    opt.step()
  assert all(t.device == ts[0].device != "PYTHON:1" for t in ts)
  want = _run(lambda x: optim.SGD(x, lr=LR, momentum=0.9), params, grads)
  for t, w in zip(ts, want): assert t.numpy().tobytes() == w.tobytes()
  assert opt.b[0].dtype == dtypes.float32


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_references_agree_with_torch(name, wd):
  """The float64 references the conformance entries of Adam and AdamW use (OPTIM.ADAM, OPTIM.ADAMW) agree with
  torch.optim to 1e-12 relative: the only difference is torch's cancelling 1 - b2**t."""
  from conformance.catalogue.optimizers import _adam, _adamw
  rng = np.random.default_rng(3)
  params = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
  grads = [[rng.standard_normal(p.shape) for p in params] for _ in range(4)]
  lrs, h = [0.125, 0.0625, 0.125, 0.03125], {"b1": 0.9, "b2": 0.999, "eps": 1e-8, "wd": wd}
  want = (_adam if name == "Adam" else _adamw)(params, grads, lrs, h)
  tp = [torch.tensor(p, requires_grad=True) for p in params]
  opt = getattr(torch.optim, name)(tp, lr=lrs[0], betas=(0.9, 0.999), eps=1e-8, weight_decay=wd, foreach=False)
  for step, (gs, lr) in enumerate(zip(grads, lrs)):
    for group in opt.param_groups: group["lr"] = lr
    for p, g in zip(tp, gs): p.grad = torch.tensor(g)
    opt.step()
    for p, w in zip(tp, want[step]): np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-12, atol=1e-15)
