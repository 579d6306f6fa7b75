"""The optimizer catalogue: one entry per optimizer of nn.optim (spec/optim.md), checked through the adapter over
several steps against torch.optim in float64 with the same hyperparameters, initial parameters and gradients
(conformance/tests/test_optimizers.py), or against the float64 reference below, written from the spec's formulas
(tests/test_optim_more.py uses the same references): where torch has no such optimizer (LAMB, LARS, SGD's classic
momentum), has another rule under the same name (Muon: OPTIM.MUON), or is not exact enough (Adam, AdamW: torch's
float64 `1 - b2**t` cancels, 1.4e-14 relative at b2 = 0.999, beyond ACC.OPTIM.f64; tests/test_optim_more.py checks
these references against torch.optim to 1e-12).

`make` builds the optimizer over `optim`, the parameter list `params`, the first learning rate `lr` and the drawn
hyperparameters; `torch` builds torch's over `torch` and the same names. Learning rates are drawn exactly
representable in float32: the spec keeps `lr` as a float32 tensor (OPTIM.LR), torch as a Python float.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st

__all__ = ["OptimizerEntry", "OPTIMIZERS", "LRS", "MUON_DEFAULTS", "newton_schulz_reference", "lars_reference",
           "lamb_reference"]

# float32-exact learning rates, and the factors a schedule applies to the first one step by step (OPTIM.LR)
LRS = (0.5, 0.375, 0.125, 0.0625, 0.03125, 0.01171875)
SCHEDULE_FACTORS = (1.0, 0.5, 0.25, 2.0)
_COMMON = ("OPTIM.PARAMS", "OPTIM.STEP", "OPTIM.ZERO_GRAD", "OPTIM.LR")

# Muon's defaults (OPTIM.MUON), which its entries do not draw
MUON_DEFAULTS = {"momentum": 0.95, "weight_decay": 0.1, "ns_steps": 5, "ns_coefficients": (3.4445, -4.775, 2.0315),
                 "nesterov": True}

Reference = Callable[[list[np.ndarray], list[list[np.ndarray]], list[float], dict], list[list[np.ndarray]]]


@dataclass(frozen=True, repr=False)
class OptimizerEntry:
  """One optimizer entry.

  name         the optim name ('Adam'), with a '.variant' suffix for a second entry
  make         the constructor call over `optim`, `params`, `lr` and the hyperparameters
  torch        torch.optim's constructor over `torch`, `params`, `lr` and the hyperparameters (None: `reference`)
  reference    (params, grads per step, lr per step, hyperparameters) -> the parameters after each step, float64
  hyper        () -> strategy of the hyperparameters
  clauses      the spec clauses the entry checks
  trust_ratio  whether the update depends on norms over each whole tensor (a trust ratio, or Newton-Schulz's scaling:
               the `n` of ACC.OPTIM)
  shapes       the parameter shapes drawn: "any" (a matrix of 1-3 by 1-3 and a vector), or "matrices" (a tall matrix, a
               wide one and a vector: Muon's (rows, rest) matrices of each kind, OPTIM.MUON)
  zeros        whether parameter 0 starts at zero and parameter 1 has a zero gradient at step 2 (the trust ratio is 1
               there: OPTIM.LARS.trust; Newton-Schulz of a zero matrix is zero: TENSOR.NEWTON_SCHULZ.scale)
  twin         a second constructor that must give the same parameters as `make` bit for bit after every step (`fused`
               changes no value: OPTIM.FUSED), or None
  """
  name: str
  make: str
  torch: str | None
  hyper: Callable[[], st.SearchStrategy[dict]]
  clauses: tuple[str, ...]
  reference: Reference | None = None
  trust_ratio: bool = False
  dtypes: tuple[str, ...] = ("float32", "float64")
  shapes: str = "any"
  zeros: bool = False
  twin: str | None = None

  def __repr__(self) -> str: return f"OptimizerEntry({self.name!r})"

  @property
  def cls(self) -> str:
    return self.name.split(".")[0]


# ---------------------------------------------------------------------------------------------------- references

def newton_schulz_reference(x: np.ndarray, steps: int, coefficients, eps: float = 1e-7) -> np.ndarray:
  """TENSOR.NEWTON_SCHULZ in float64: a tall matrix is transposed, iterated and transposed back
  (TENSOR.NEWTON_SCHULZ.tall); the matrix is scaled by its Frobenius norm plus eps (TENSOR.NEWTON_SCHULZ.scale); each
  step is G <- sum_i c_i (G G^T)^i G."""
  if x.shape[-2] > x.shape[-1]:
    return newton_schulz_reference(x.swapaxes(-1, -2), steps, coefficients, eps).swapaxes(-1, -2)
  g = x / (np.sqrt((x * x).sum(axis=(-2, -1), keepdims=True)) + eps)
  for _ in range(steps):
    gram, term, out = g @ g.swapaxes(-1, -2), g, coefficients[0] * g
    for c in coefficients[1:]:
      term = gram @ term
      out = out + c * term
    g = out
  return g


def lars_reference(params, grads, lrs, momentum=0.9, weight_decay=1e-4, ns_steps=0, ns_coefficients=None,
                   nesterov=False, classic=True, pre_wd=True, tcoef=0.001, **_ignored) -> list[list[np.ndarray]]:
  """OPTIM.LARS step by step in float64 (with tcoef=0 it is OPTIM.SGD, with ns_coefficients OPTIM.MUON): the
  parameters after each step. Arguments as LARS's; `lrs` is the learning rate of each step; other keywords (`fused`,
  which changes no value: OPTIM.FUSED) are ignored."""
  ps = [np.asarray(p, np.float64).copy() for p in params]
  bs = [np.zeros_like(p) for p in ps]
  out = []
  for gs, lr in zip(grads, lrs):
    for i, g in enumerate(gs):
      t, g = ps[i], np.asarray(g, np.float64)
      r = 1.0
      if tcoef:                                                   # OPTIM.LARS.trust, from g before the decay
        r1, r2 = np.linalg.norm(t), np.linalg.norm(g)
        r = tcoef * r1 / (r2 + weight_decay * r1) if r1 > 0 and r2 > 0 else 1.0
      if pre_wd and weight_decay: g = g + weight_decay * t        # OPTIM.SGD.weight_decay
      if classic: g = g * r * lr                                  # OPTIM.SGD.classic
      if momentum:
        bs[i] = momentum * bs[i] + g                              # OPTIM.SGD.momentum
        g = g + momentum * bs[i] if nesterov else bs[i]           # OPTIM.SGD.nesterov
      if ns_coefficients:                                         # OPTIM.MUON: a (rows, rest) matrix
        g = newton_schulz_reference(g.reshape(g.shape[0], -1), ns_steps, ns_coefficients).reshape(g.shape)
      if not classic: g = g * r * lr
      if not pre_wd and weight_decay: g = g + weight_decay * lr * t   # OPTIM.MUON.weight_decay
      ps[i] = t - g
    out.append([p.copy() for p in ps])
  return out


def lamb_reference(params, grads, lrs, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, l2=0.0,
                   **_ignored) -> list[list[np.ndarray]]:
  """OPTIM.LAMB in float64: Adam's moments with bias correction, decoupled weight decay, and unless `adam` the trust
  ratio ||p|| / ||u|| (with `adam`, OPTIM.ADAMW; with `l2` too, OPTIM.ADAM's weight decay added to the gradient,
  OPTIM.ADAM.weight_decay): the parameters after each step."""
  ps = [np.asarray(p, np.float64).copy() for p in params]
  m, v = [np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]
  out = []
  for t, (gs, lr) in enumerate(zip(grads, lrs), 1):
    # OPTIM.ADAM.bias: 1 - b**t as -expm1(t log b), which does not cancel (1 - 0.999**2 in float64 is off by 1.4e-14
    # relative, more than ACC.OPTIM.f64 allows the update)
    c1, c2 = -np.expm1(t * np.log(b1)), -np.expm1(t * np.log(b2))
    for i, g in enumerate(gs):
      g = np.asarray(g, np.float64) + l2 * ps[i]
      m[i] = b1 * m[i] + (1 - b1) * g
      v[i] = b2 * v[i] + (1 - b2) * g * g
      u = (m[i] / c1) / (np.sqrt(v[i] / c2) + eps) + weight_decay * ps[i]
      r1, r2 = np.linalg.norm(ps[i]), np.linalg.norm(u)
      ratio = r1 / r2 if r1 > 0 and r2 > 0 and not adam else 1.0
      ps[i] = ps[i] - lr * ratio * u
    out.append([p.copy() for p in ps])
  return out


def _classic_sgd(params, grads, lrs, h) -> list[list[np.ndarray]]:
  """OPTIM.SGD with `classic`: LARS without the trust ratio, weight decay before the momentum."""
  return lars_reference(params, grads, lrs, h["momentum"], h["wd"], nesterov=h["nesterov"], classic=True, pre_wd=True,
                        tcoef=0.0)


def _adam(params, grads, lrs, h) -> list[list[np.ndarray]]:
  return lamb_reference(params, grads, lrs, h["b1"], h["b2"], h["eps"], adam=True, l2=h["wd"])


def _adamw(params, grads, lrs, h) -> list[list[np.ndarray]]:
  return lamb_reference(params, grads, lrs, h["b1"], h["b2"], h["eps"], h["wd"], adam=True)


def _lamb(params, grads, lrs, h) -> list[list[np.ndarray]]:
  return lamb_reference(params, grads, lrs, h["b1"], h["b2"], h["eps"], h["wd"])


def _lars(params, grads, lrs, h) -> list[list[np.ndarray]]:
  return lars_reference(params, grads, lrs, **h)


def _muon(params, grads, lrs, h) -> list[list[np.ndarray]]:
  """OPTIM.MUON: LARS with Newton-Schulz, popular momentum, the decay after it and no trust ratio."""
  return lars_reference(params, grads, lrs, **{**MUON_DEFAULTS, **h}, classic=False, pre_wd=False, tcoef=0.0)


def _group(params, grads, lrs, h) -> list[list[np.ndarray]]:
  """OPTIM.GROUP: Muon over the matrices (all parameters but the last), AdamW over the last, each with its own rule."""
  mu = _muon(params[:-1], [gs[:-1] for gs in grads], lrs, {"momentum": h["momentum"], "weight_decay": h["wd"]})
  aw = lamb_reference(params[-1:], [gs[-1:] for gs in grads], lrs, h["b1"], h["b2"], 1e-8, h["wd"], adam=True)
  return [a + b for a, b in zip(mu, aw)]


# ---------------------------------------------------------------------------------------------------- entries

_BETAS = {"b1": st.sampled_from([0.9, 0.8, 0.5]), "b2": st.sampled_from([0.999, 0.99, 0.9])}


def _sgd(classic: bool) -> st.SearchStrategy[dict]:
  return st.fixed_dictionaries({"momentum": st.sampled_from([0.0, 0.5, 0.9]), "nesterov": st.booleans(),
                                "wd": st.sampled_from([0.0, 0.1]), "classic": st.just(classic)})


def _lars_hyper(**fixed) -> st.SearchStrategy[dict]:
  """LARS's hyperparameters, those in `fixed` held (so that each entry is sure to check its variant) and the others
  drawn; tcoef > 0 unless fixed."""
  drawn = {"momentum": st.sampled_from([0.0, 0.5, 0.9]), "weight_decay": st.sampled_from([0.0, 1e-4, 0.1]),
           "nesterov": st.booleans(), "classic": st.booleans(), "pre_wd": st.booleans(),
           "tcoef": st.sampled_from([0.001, 0.02, 0.5])}
  return st.fixed_dictionaries({**drawn, **{k: st.just(v) for k, v in fixed.items()}})


def _muon_hyper(nesterov: bool) -> st.SearchStrategy[dict]:
  return st.fixed_dictionaries({"momentum": st.sampled_from([0.95, 0.5] if nesterov else [0.9, 0.0]),
                                "weight_decay": st.sampled_from([0.1, 0.0]), "ns_steps": st.sampled_from([5, 2]),
                                "nesterov": st.just(nesterov)})


_LARS = ("optim.LARS(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, classic=classic, "
         "pre_wd=pre_wd, tcoef=tcoef{})")
_LARS_CLAUSES = (*_COMMON, "OPTIM.LARS", "OPTIM.LARS.trust", "OPTIM.SGD.weight_decay", "OPTIM.SGD.momentum")
_MUON = "optim.Muon(params, lr=lr, momentum=momentum, weight_decay=weight_decay, ns_steps=ns_steps, nesterov=nesterov)"
_MUON_CLAUSES = (*_COMMON, "OPTIM.MUON", "OPTIM.MUON.weight_decay", "OPTIM.SGD.momentum", "TENSOR.NEWTON_SCHULZ",
                 "TENSOR.NEWTON_SCHULZ.tall", "TENSOR.NEWTON_SCHULZ.scale")

OPTIMIZERS: list[OptimizerEntry] = [
  OptimizerEntry("SGD", "optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd, nesterov=nesterov)",
                 "torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd, nesterov=nesterov and "
                 "momentum > 0, foreach=False)", lambda: _sgd(False),
                 (*_COMMON, "OPTIM.SGD", "OPTIM.SGD.weight_decay", "OPTIM.SGD.momentum", "OPTIM.SGD.nesterov")),
  OptimizerEntry("SGD.classic", "optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd, nesterov=nesterov, "
                 "classic=classic)", None, lambda: _sgd(True),
                 (*_COMMON, "OPTIM.SGD", "OPTIM.SGD.classic", "OPTIM.SGD.momentum", "OPTIM.SGD.nesterov"),
                 reference=_classic_sgd),
  # tinygrad's Adam has no weight_decay argument (OPTIM.ADAM.weight_decay): it is passed only when drawn nonzero
  OptimizerEntry("Adam", "optim.Adam(params, lr=lr, b1=b1, b2=b2, eps=eps, **({'weight_decay': wd} if wd else {}))",
                 None, lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-8, 1e-6, 1e-3]),
                                                      "wd": st.sampled_from([0.0, 0.0, 0.1])}),
                 (*_COMMON, "OPTIM.ADAM", "OPTIM.ADAM.bias", "OPTIM.ADAM.weight_decay"), _adam),
  OptimizerEntry("AdamW", "optim.AdamW(params, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)",
                 None, lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-8, 1e-6]),
                                                      "wd": st.sampled_from([0.0, 0.01, 0.1])}),
                 (*_COMMON, "OPTIM.ADAMW", "OPTIM.ADAM", "OPTIM.ADAM.bias"), _adamw),
  OptimizerEntry("LAMB", "optim.LAMB(params, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)", None,
                 lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-6, 1e-3]),
                                                "wd": st.sampled_from([0.0, 0.1])}),
                 (*_COMMON, "OPTIM.LAMB", "OPTIM.ADAM.bias"), reference=_lamb, trust_ratio=True),
  # LARS as tinygrad defaults it: classic momentum, decay before it, a trust ratio; a zero parameter and a zero gradient
  OptimizerEntry("LARS", _LARS.format(""), None, lambda: _lars_hyper(classic=True, pre_wd=True, nesterov=False),
                 (*_LARS_CLAUSES, "OPTIM.SGD.classic"), reference=_lars, trust_ratio=True, shapes="matrices",
                 zeros=True),
  # popular momentum (the learning rate and trust ratio after it), Nesterov, the decay after the momentum (pre_wd=False)
  OptimizerEntry("LARS.popular", _LARS.format(""), None,
                 lambda: _lars_hyper(classic=False, pre_wd=False, nesterov=True, momentum=0.9),
                 (*_LARS_CLAUSES, "OPTIM.SGD.nesterov", "OPTIM.MUON.weight_decay"), reference=_lars, trust_ratio=True,
                 shapes="matrices", zeros=True),
  # tcoef = 0: no trust ratio (SGD's form, OPTIM.SGD), with either momentum and either place of the decay
  OptimizerEntry("LARS.notrust", _LARS.format(""), None, lambda: _lars_hyper(tcoef=0.0),
                 (*_LARS_CLAUSES, "OPTIM.SGD", "OPTIM.SGD.classic", "OPTIM.SGD.nesterov"), reference=_lars,
                 shapes="matrices", zeros=True),
  # fused=True: the same values as fused=False, bit for bit, though the trust ratio is a norm per parameter
  OptimizerEntry("LARS.fused", _LARS.format(", fused=True"), None, lambda: _lars_hyper(),
                 (*_LARS_CLAUSES, "OPTIM.FUSED", "OPTIM.SGD.classic", "OPTIM.SGD.nesterov"), reference=_lars,
                 trust_ratio=True, shapes="matrices", zeros=True, twin=_LARS.format(", fused=False")),
  # torch.optim.Muon is another rule (OPTIM.MUON): the float64 reference of the clause instead
  OptimizerEntry("Muon", _MUON, None, lambda: _muon_hyper(True), (*_MUON_CLAUSES, "OPTIM.SGD.nesterov"),
                 reference=_muon, trust_ratio=True, shapes="matrices", zeros=True),
  OptimizerEntry("Muon.plain", _MUON, None, lambda: _muon_hyper(False), _MUON_CLAUSES, reference=_muon,
                 trust_ratio=True, shapes="matrices", zeros=True),
  # Muon for the matrices and AdamW for the vector, as the clause's example; the schedule sets both learning rates
  OptimizerEntry("OptimizerGroup", "optim.OptimizerGroup(optim.Muon(params[:-1], lr=lr, momentum=momentum, "
                 "weight_decay=wd), optim.AdamW(params[-1:], lr=lr, b1=b1, b2=b2, weight_decay=wd))", None,
                 lambda: st.fixed_dictionaries({**_BETAS, "momentum": st.sampled_from([0.95, 0.5]),
                                                "wd": st.sampled_from([0.1, 0.0])}),
                 (*_COMMON, "OPTIM.GROUP", "OPTIM.MUON", "OPTIM.ADAMW", "OPTIM.ADAM.bias"), reference=_group,
                 trust_ratio=True, shapes="matrices"),
]
