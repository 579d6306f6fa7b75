"""The property of the optimizer catalogue (conformance/catalogue/optimizers.py): `optimizer_steps` runs several
training steps through the adapter (zero_grad, backward of a loss whose gradient is the drawn one, step, with the
learning rate changed between steps by a schedule) and compares the parameters after every step with torch.optim's or
the float64 reference's (ACC.OPTIM).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance import accuracy as A
from conformance import strategies as S
from conformance.adapters.base import Adapter, compiled
from conformance.catalogue.optimizers import LRS, SCHEDULE_FACTORS, OptimizerEntry
from conformance.properties import REPRO_CHECK, Outcome, _array_source, adapter_prelude, expect
from conformance.strategies import NP

__all__ = ["OptimCase", "optim_cases", "optimizer_steps"]

# the loss whose gradient with respect to each parameter is exactly its drawn gradient (1 * g, GRAD.MUL, GRAD.SUM)
LOSS = "sum([(p * g).sum() for p, g in zip(params, grads)])"


@dataclass
class OptimCase:
  """One example: initial parameters, the gradients of every step, the learning rate of every step, and the
  hyperparameters."""
  params: list[np.ndarray]
  grads: list[list[np.ndarray]]
  lrs: list[float]
  hyper: dict[str, Any]


@st.composite
def optim_cases(draw, entry: OptimizerEntry, dtype: str) -> OptimCase:
  shapes = [draw(st.tuples(st.integers(1, 3), st.integers(1, 3))), (draw(st.integers(1, 4)),)]
  if entry.shapes == "matrices":   # OPTIM.MUON: tall and wide (rows, rest) matrices, and a vector (one column)
    rows = draw(st.integers(2, 4))
    cols = draw(st.integers(2, 4))
    shapes = [(rows, draw(st.integers(1, rows - 1))), (draw(st.integers(1, cols - 1)), cols), shapes[1]]
  params = [draw(S.arrays(dtype, s, -2.0, 2.0, specials=False)) for s in shapes]
  steps = draw(st.integers(3, 5))
  grads = [[draw(S.arrays(dtype, s, -2.0, 2.0, specials=False)) for s in shapes] for _ in range(steps)]
  if entry.trust_ratio:   # ACC.RANGE: a norm over the tensor squares its elements, which must not underflow
    params, grads = _in_norm_domain(params, dtype), [_in_norm_domain(gs, dtype) for gs in grads]
  if entry.zeros:   # OPTIM.LARS.trust: ||p|| = 0 at step 1 and ||g|| = 0 at step 2 give a trust ratio of 1
    params[0] = np.zeros_like(params[0])
    grads[1][1] = np.zeros_like(grads[1][1])
  lr = draw(st.sampled_from(LRS))
  factors = [1.0] + ([draw(st.sampled_from(SCHEDULE_FACTORS)) for _ in range(steps - 1)] if draw(st.booleans())
                     else [1.0] * (steps - 1))
  return OptimCase(params, grads, [lr * f for f in factors], draw(entry.hyper()))


def _in_norm_domain(arrays: list[np.ndarray], dtype: str) -> list[np.ndarray]:
  """The arrays with every element below 16 sqrt(smallest normal) in magnitude set to zero (ACC.RANGE): the square of
  such an element underflows in `dtype`, so a norm of a tensor of them is 0 (a trust ratio of 1, OPTIM.LARS.trust, or
  Newton-Schulz's division by eps alone) where the exact norm is not."""
  tiny = 16 * np.sqrt(np.finfo(NP[dtype]).tiny)
  return [np.where(np.abs(a) < tiny, np.zeros_like(a), a) for a in arrays]


def _torch_steps(entry: OptimizerEntry, case: OptimCase) -> list[list[np.ndarray]]:
  """torch.optim's parameters after each step, in float64, with the learning rate set before each step."""
  ps = [torch.tensor(np.asarray(p, np.float64), requires_grad=True) for p in case.params]
  opt = eval(compiled(entry.torch), {"torch": torch}, {**case.hyper, "params": ps, "lr": case.lrs[0]})  # noqa: S307
  out = []
  for gs, lr in zip(case.grads, case.lrs):
    for group in opt.param_groups: group["lr"] = lr
    for p, g in zip(ps, gs): p.grad = torch.tensor(np.asarray(g, np.float64))
    opt.step()
    out.append([p.detach().numpy().copy() for p in ps])
  return out


def reproduction(adapter: Adapter, entry: OptimizerEntry, case: OptimCase, dtype: str, check: str = "") -> str:
  """Python lines that run the same steps and print the parameters after each (`after[t][i]`: parameter i after step
  t + 1), then `check`, lines that assert an expected value (CONF.REPRO.assert)."""
  def src(a): return adapter.repro_tensor(_array_source(a, dtype), dtype)
  lines = ["import numpy as np", *adapter_prelude(adapter), *adapter.repro_imports()]
  lines += [f"{k} = {v!r}" for k, v in case.hyper.items()] + [f"lr = {case.lrs[0]!r}"]
  lines += [f"params = [{', '.join(src(p) for p in case.params)}]", f"opt = {entry.make}", "after = []"]
  for t, (gs, lr) in enumerate(zip(case.grads, case.lrs)):
    if t and lr != case.lrs[t - 1]:   # an OptimizerGroup's learning rates are its members' (OPTIM.GROUP)
      lines.append(f"for o in getattr(opt, 'optimizers', [opt]): o.lr.assign(Tensor([{lr!r}], dtype=o.lr.dtype))"
                   ".realize()")
    lines += [f"grads = [{', '.join(src(g) for g in gs)}]", f"opt.zero_grad(); ({LOSS}).backward()",
              f"with {adapter.repro_train(True)}: opt.step()",
              f"after.append([{adapter.repro_numpy('p')} for p in params])", "print(after[-1])"]
  return "\n".join([*lines, REPRO_CHECK, check] if check else lines)


def _run(adapter: Adapter, make: str, case: OptimCase, dtype: str) -> list[list[tuple[np.ndarray, str]]]:
  """The optimizer `make` builds over fresh tensors of the case's parameters, stepped through the case (zero_grad,
  backward of LOSS, step, the learning rate set before each step where it changes): each parameter's values and dtype
  name after each step."""
  got = []
  ps = [adapter.tensor(p, dtype) for p in case.params]
  opt = adapter.evaluate(make, {"params": ps}, {**case.hyper, "lr": case.lrs[0]})
  for t, (gs, lr) in enumerate(zip(case.grads, case.lrs)):
    if t and lr != case.lrs[t - 1]: adapter.set_lr(opt, lr)
    adapter.evaluate("opt.zero_grad()", {"opt": opt}, {})
    loss = adapter.evaluate(LOSS, {"params": ps, "grads": [adapter.tensor(g, dtype) for g in gs]}, {})
    adapter.evaluate("loss.backward()", {"loss": loss}, {})
    adapter.step(opt)
    got.append([(adapter.numpy(p), adapter.dtype_name(p)) for p in ps])
  return got


def optimizer_steps(adapter: Adapter, entry: OptimizerEntry, case: OptimCase, dtype: str) -> Outcome:
  """The parameters after each step against the reference's after the same steps (ACC.OPTIM)."""
  clauses = entry.clauses

  def fail(why: str, used=float("inf"), extra=(), check="") -> Outcome:
    msg = f"{entry.name} [{', '.join((*clauses, *extra))}]: {why}\n--- reproduction ---\n" \
          f"{reproduction(adapter, entry, case, dtype, check)}"
    if entry.twin is not None and not check: msg += f"\n# and again with opt = {entry.twin}"
    return Outcome(False, (*clauses, *extra), float("inf"), msg, details={"used": used})
  try: got = _run(adapter, entry.make, case, dtype)
  except Exception as e: return fail(f"raised {type(e).__name__}: {e}")
  if entry.twin is not None:   # OPTIM.FUSED: the other form of the same optimizer gives the same bits
    try: twin = _run(adapter, entry.twin, case, dtype)
    except Exception as e: return fail(f"the twin {entry.twin} raised {type(e).__name__}: {e}")
    for t, (a, b) in enumerate(zip(got, twin)):
      for i, ((x, _), (y, _)) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.tobytes() != y.tobytes():
          worst = float(np.max(np.abs(x.astype(np.float64) - y))) if x.shape == y.shape else float("inf")
          return fail(f"parameter {i} after step {t + 1} differs from {entry.twin}'s (largest difference {worst:g}); "
                      f"they must be equal bit for bit", extra=("OPTIM.FUSED",))
  want = _torch_steps(entry, case) if entry.torch else entry.reference(case.params, case.grads, case.lrs, case.hyper)
  rule = A.bound("OPTIM", dtype)
  used = 0.0
  for i, p0 in enumerate(case.params):
    trajectory = [np.asarray(p0, np.float64)] + [w[i] for w in want]
    for t in range(len(case.grads)):
      g, dt = got[t][i]
      if dt != dtype: return fail(f"parameter {i} has dtype {dt} after step {t + 1}, want {dtype} (OPTIM.STEP)")
      if g.shape != p0.shape: return fail(f"parameter {i} has shape {g.shape} after step {t + 1}, want {p0.shape}")
      # ACC.OPTIM: n steps (times the tensor's size under a trust ratio), S the sum of |p| over the steps so far,
      # x the largest change of one step
      n = (t + 1) * (p0.size if entry.trust_ratio else 1)
      scale = sum(np.abs(p) for p in trajectory[1:t + 2])
      x = max(float(np.abs(b - a).max()) for a, b in zip(trajectory[:t + 1], trajectory[1:t + 2]))
      v = A.check(g, A.round_to(trajectory[t + 1], dtype), dtype, rule, n=n, S=scale, x=x)
      used = max(used, v.used)
      if not v.ok: return fail(f"parameter {i} after step {t + 1} of {len(case.grads)}: {v.why}", v.used,
                               (rule.clause,), expect(f"after[{t}][{i}]", A.round_to(trajectory[t + 1], dtype),
                                                      dtype, rule, v.limit))
  return Outcome(True, clauses, details={"used": used})
