"""The optimizer catalogue: one entry per optimizer of nn.optim (spec/optim.md), checked through the adapter over
several steps against torch.optim in float64 with the same hyperparameters, initial parameters and gradients
(conformance/tests/test_optimizers.py), or, where torch has no such optimizer (LAMB, SGD's classic momentum), against
the float64 reference below, written from the spec's formulas.

`make` builds the optimizer over `optim`, the parameter list `params`, the first learning rate `lr` and the drawn
hyperparameters; `torch` builds torch's over `torch` and the same names. Learning rates are drawn exactly
representable in float32: the spec keeps `lr` as a float32 tensor (OPTIM.LR), torch as a Python float.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st

__all__ = ["OptimizerEntry", "OPTIMIZERS", "LRS"]

# float32-exact learning rates, and the factors a schedule applies to the first one step by step (OPTIM.LR)
LRS = (0.5, 0.375, 0.125, 0.0625, 0.03125, 0.01171875)
SCHEDULE_FACTORS = (1.0, 0.5, 0.25, 2.0)
_COMMON = ("OPTIM.PARAMS", "OPTIM.STEP", "OPTIM.ZERO_GRAD", "OPTIM.LR")

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
  trust_ratio  whether the update is scaled by a ratio of norms over each whole tensor (the `n` of ACC.OPTIM)
  """
  name: str
  make: str
  torch: str | None
  hyper: Callable[[], st.SearchStrategy[dict]]
  clauses: tuple[str, ...]
  reference: Reference | None = None
  trust_ratio: bool = False
  dtypes: tuple[str, ...] = ("float32", "float64")

  def __repr__(self) -> str: return f"OptimizerEntry({self.name!r})"

  @property
  def cls(self) -> str:
    return self.name.split(".")[0]


# ---------------------------------------------------------------------------------------------------- references

def _classic_sgd(params, grads, lrs, h) -> list[list[np.ndarray]]:
  """OPTIM.SGD with `classic`: weight decay, then the learning rate, then the momentum buffer; p <- p - g."""
  ps = [np.asarray(p, np.float64).copy() for p in params]
  bufs = [np.zeros_like(p) for p in ps]
  out = []
  for gs, lr in zip(grads, lrs):
    for i, g in enumerate(gs):
      g = np.asarray(g, np.float64) + h["wd"] * ps[i]            # OPTIM.SGD.weight_decay
      g = lr * g                                                 # OPTIM.SGD.classic
      if h["momentum"]:
        bufs[i] = h["momentum"] * bufs[i] + g                    # OPTIM.SGD.momentum
        g = g + h["momentum"] * bufs[i] if h["nesterov"] else bufs[i]   # OPTIM.SGD.nesterov
      ps[i] = ps[i] - g
    out.append([p.copy() for p in ps])
  return out


def _lamb(params, grads, lrs, h) -> list[list[np.ndarray]]:
  """OPTIM.LAMB: Adam's moments with bias correction, decoupled weight decay, and the trust ratio ||p|| / ||u||."""
  ps = [np.asarray(p, np.float64).copy() for p in params]
  m, v = [np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]
  out = []
  for t, (gs, lr) in enumerate(zip(grads, lrs), 1):
    c1, c2 = 1 - h["b1"] ** t, 1 - h["b2"] ** t                  # OPTIM.ADAM.bias
    for i, g in enumerate(gs):
      g = np.asarray(g, np.float64)
      m[i] = h["b1"] * m[i] + (1 - h["b1"]) * g
      v[i] = h["b2"] * v[i] + (1 - h["b2"]) * g * g
      u = (m[i] / c1) / (np.sqrt(v[i] / c2) + h["eps"]) + h["wd"] * ps[i]
      r1, r2 = np.linalg.norm(ps[i]), np.linalg.norm(u)
      ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
      ps[i] = ps[i] - lr * ratio * u
    out.append([p.copy() for p in ps])
  return out


# ---------------------------------------------------------------------------------------------------- entries

_BETAS = {"b1": st.sampled_from([0.9, 0.8, 0.5]), "b2": st.sampled_from([0.999, 0.99, 0.9])}


def _sgd(classic: bool) -> st.SearchStrategy[dict]:
  return st.fixed_dictionaries({"momentum": st.sampled_from([0.0, 0.5, 0.9]), "nesterov": st.booleans(),
                                "wd": st.sampled_from([0.0, 0.1]), "classic": st.just(classic)})


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
                 "torch.optim.Adam(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)",
                 lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-8, 1e-6, 1e-3]),
                                                "wd": st.sampled_from([0.0, 0.0, 0.1])}),
                 (*_COMMON, "OPTIM.ADAM", "OPTIM.ADAM.bias", "OPTIM.ADAM.weight_decay")),
  OptimizerEntry("AdamW", "optim.AdamW(params, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)",
                 "torch.optim.AdamW(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)",
                 lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-8, 1e-6]),
                                                "wd": st.sampled_from([0.0, 0.01, 0.1])}),
                 (*_COMMON, "OPTIM.ADAMW", "OPTIM.ADAM", "OPTIM.ADAM.bias")),
  OptimizerEntry("LAMB", "optim.LAMB(params, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)", None,
                 lambda: st.fixed_dictionaries({**_BETAS, "eps": st.sampled_from([1e-6, 1e-3]),
                                                "wd": st.sampled_from([0.0, 0.1])}),
                 (*_COMMON, "OPTIM.LAMB", "OPTIM.ADAM.bias"), reference=_lamb, trust_ratio=True),
]
