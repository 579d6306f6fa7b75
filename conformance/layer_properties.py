"""The properties of the layer catalogue (conformance/catalogue/layers.py), as functions of (adapter, entry, example)
that return an `Outcome`, as conformance/properties.py does for Tensor ops:

- `layer_forward`: the layer built by the implementation, its tensors checked for the spec's shapes and replaced by
  the drawn values, called in the entry's mode; its outputs against torch in float64 with the same tensors (ACC.*);
- `layer_vjp`: the VJP with respect to the input and every parameter against torch autograd (GRAD.CHECK, ACC.GRAD);
- `layer_training`: several training calls of a batch norm, each output and the running statistics against torch,
  then one call in eval mode, which must use the running statistics (NN.BATCHNORM.running).
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
from conformance.catalogue.core import TORCH_HELPERS as CORE_HELPERS
from conformance.catalogue.layers import TORCH_HELPERS, Layer
from conformance.properties import REPRO_CHECK, Outcome, _abs_jacobian_scale, _array_source, adapter_prelude, expect
from conformance.strategies import NP

__all__ = ["LayerCase", "layer_cases", "layer_forward", "layer_vjp", "layer_training"]

_TORCH_NS = {"torch": torch, "F": torch.nn.functional, **CORE_HELPERS, **TORCH_HELPERS}


@dataclass
class LayerCase:
  """One example: the hyperparameters, and the arrays of the inputs and parameters by name (None: the layer has no
  such tensor), each with its dtype."""
  hyper: dict[str, Any]
  inputs: dict[str, np.ndarray]
  params: dict[str, np.ndarray | None]
  dtypes: dict[str, str]


@st.composite
def layer_cases(draw, entry: Layer, dtype: str) -> LayerCase:
  """Hyperparameters, shapes and values for `entry` in `dtype`: ordinary values (the spec's special values are the
  functional ops' business, conformance/catalogue/nn.py), index inputs inside their ranges."""
  drawn = draw(entry.draw())
  ranges = drawn.get("ranges", {})
  inputs, dts = {}, {}
  for name, shape in drawn["inputs"].items():
    dts[name] = "int32" if name in entry.index_inputs else dtype
    inputs[name] = draw(S.arrays(dts[name], shape, *ranges.get(name, (-3.0, 3.0)), specials=False))
  params = {}
  for name, shape in drawn["params"].items():
    dts[name] = dtype
    params[name] = None if shape is None else draw(S.arrays(dtype, shape, -2.0, 2.0, specials=False))
  return LayerCase(drawn["hyper"], inputs, params, dts)


class _Layout(Exception):
  """The implementation's layer does not have a tensor the spec gives it, or has it in another shape (NN.LAYER)."""


def _outputs(r: Any) -> list[Any]:
  return list(r) if isinstance(r, (tuple, list)) else [r]


def _build(adapter: Adapter, entry: Layer, case: LayerCase, dtype: str):
  """The layer built by the implementation with the drawn tensors in place of its own, and the input tensors."""
  layer = adapter.evaluate(entry.make, {}, case.hyper)
  tensors = {}
  for name, want in case.params.items():
    have = getattr(layer, name, None)
    if want is None:
      if have is not None: raise _Layout(f"layer.{name} should be None (NN.LAYER), it is a tensor")
      continue
    if have is None or tuple(adapter.shape(have)) != want.shape:
      raise _Layout(f"layer.{name} has shape {None if have is None else tuple(adapter.shape(have))}, the spec "
                    f"gives {want.shape}")
    tensors[name] = adapter.tensor(want, dtype)
    adapter.set_parameter(layer, name, tensors[name])
  inputs = {n: adapter.tensor(a, case.dtypes[n]) for n, a in case.inputs.items()}
  return layer, inputs, tensors


def _torch_args(case: LayerCase) -> dict[str, Any]:
  """The inputs and parameters as torch tensors, floats in float64 (None stays None)."""
  out = {}
  for name, a in {**case.inputs, **case.params}.items():
    if a is None: out[name] = None
    elif case.dtypes[name] in A._FLOATS: out[name] = torch.tensor(np.asarray(a, np.float64))
    else: out[name] = torch.from_numpy(np.array(a, dtype=NP[case.dtypes[name]]))
  return out


def _float_names(entry: Layer, case: LayerCase) -> list[str]:
  """The tensors that are differentiated: float inputs, then every present parameter."""
  return [n for n in case.inputs if n not in entry.index_inputs] + [n for n, a in case.params.items() if a is not None]


def _torch_fn(entry: Layer, case: LayerCase, names: list[str]):
  """torch's outputs as a function of the tensors `names` (the others fixed)."""
  fixed = _torch_args(case)

  def fn(*args):
    return tuple(_outputs(eval(compiled(entry.torch), _TORCH_NS, {**case.hyper, **fixed, **dict(zip(names, args))})))  # noqa: S307
  return fn, [fixed[n] for n in names]


def reproduction(adapter: Adapter, entry: Layer, case: LayerCase, tail: str = "") -> str:
  """Python lines that rebuild the layer with the drawn tensors and print its outputs."""
  lines = ["import numpy as np", *adapter_prelude(adapter), *adapter.repro_imports()]
  lines += [f"{k} = {v!r}" for k, v in case.hyper.items()]
  lines.append(f"layer = {entry.make}")
  source = {n: adapter.repro_tensor(_array_source(a, case.dtypes[n]), case.dtypes[n])
            for n, a in {**case.params, **case.inputs}.items() if a is not None}
  lines += [f"layer.{n} = {source[n]}" for n in case.params if n in source]
  lines += [f"{n} = {source[n]}" for n in case.inputs]
  lines.append(f"with {adapter.repro_train(entry.mode == 'train')}:\n  out = {entry.call}")
  lines.append(tail or "print([o.numpy() for o in (out if isinstance(out, tuple) else (out,))])")
  return "\n".join(lines)


def _fail(adapter: Adapter, entry: Layer, case: LayerCase, clauses: tuple[str, ...], why: str, used=float("inf"),
          tail: str = "") -> Outcome:
  msg = f"{entry.name} [{', '.join(clauses)}]: {why}\n--- reproduction ---\n{reproduction(adapter, entry, case, tail)}"
  return Outcome(False, clauses, float("inf"), msg, details={"used": used})


def _forward_x(entry: Layer, case: LayerCase) -> float:
  """The `x` of a forward bound: the largest |input|, for a norm layer in units of its groups' standard deviation
  (ACC.NORM: the rounding of a mean shifts every output by that much)."""
  x = max([A.finite_max(a) for n, a in case.inputs.items() if n not in entry.index_inputs] + [0.0])
  return x * entry.inv_std(case.hyper, case.inputs["x"]) if entry.inv_std else x


def layer_forward(adapter: Adapter, entry: Layer, case: LayerCase, dtype: str) -> Outcome:
  """Outputs of the layer with the drawn tensors against torch's in float64, rounded once (ACC.MEASURE.reference)."""
  clauses = entry.clauses
  try:
    layer, inputs, _ = _build(adapter, entry, case, dtype)
    with adapter.train(entry.mode == "train"):
      outs = _outputs(adapter.evaluate(entry.call, {"layer": layer, **inputs}, {}))
      got = [(adapter.numpy(o), adapter.dtype_name(o)) for o in outs]
  except _Layout as e: return _fail(adapter, entry, case, (*clauses, "NN.LAYER"), str(e))
  except Exception as e: return _fail(adapter, entry, case, clauses, f"raised {type(e).__name__}: {e}")
  names = _float_names(entry, case)
  fn, args = _torch_fn(entry, case, names)
  refs = [r.detach().numpy() for r in fn(*args)]
  if len(refs) != len(got): return _fail(adapter, entry, case, clauses, f"{len(got)} outputs, torch gives {len(refs)}")
  worst, used = 0.0, 0.0
  for i, ((g, dt), ref) in enumerate(zip(got, refs)):
    if dt != dtype: return _fail(adapter, entry, case, clauses, f"output {i} has dtype {dt}, want {dtype}")
    if g.shape != ref.shape:
      return _fail(adapter, entry, case, clauses, f"output {i} has shape {g.shape}, want {ref.shape}")
    rule = A.bound(entry.tolerance, dt)
    scale = _abs_jacobian_scale(lambda *a, i=i: fn(*a)[i], args, ref.shape) if rule.uses("S") else 0.0
    n = entry.n(case.hyper, {k: v.shape for k, v in case.inputs.items()})
    v = A.check(g, A.round_to(ref, dt), dt, rule, n=n, S=scale, x=_forward_x(entry, case))
    worst, used = max(worst, v.worst_ulps), max(used, v.used)
    if not v.ok:   # CONF.REPRO.assert: the reproduction asserts torch's output under the bound the test used
      tail = "\n".join([f"got = [{adapter.repro_numpy('o')} for o in (out if isinstance(out, tuple) else (out,))]",
                        "print(got)", REPRO_CHECK, expect(f"got[{i}]", A.round_to(ref, dt), dt, rule, v.limit)])
      return _fail(adapter, entry, case, (*clauses, rule.clause), f"output {i}: {v.why}", v.used, tail)
  return Outcome(True, clauses, worst, details={"used": used})


def layer_vjp(adapter: Adapter, entry: Layer, case: LayerCase, dtype: str, seed: int) -> Outcome:
  """GRAD.CHECK for a layer: the VJP of its outputs for random cotangents with respect to the input and every
  parameter, against torch autograd in float64 with the same tensors (ACC.GRAD)."""
  clauses = (*entry.clauses, "GRAD.CHECK")
  names = _float_names(entry, case)
  rng = np.random.default_rng(seed)
  try:
    layer, inputs, tensors = _build(adapter, entry, case, dtype)
    wrt = [{**inputs, **tensors}[n] for n in names]
    with adapter.train(entry.mode == "train"):
      outs = _outputs(adapter.evaluate(entry.call, {"layer": layer, **inputs}, {}))
      gs = [A.round_to(rng.standard_normal(adapter.shape(o)), dtype).astype(NP[dtype]) for o in outs]
      got = None
      for y, g in zip(outs, gs):
        d = [adapter.numpy(t).astype(np.float64) for t in adapter.gradient(y, wrt, adapter.tensor(g, dtype))]
        got = d if got is None else [a + b for a, b in zip(got, d)]
  except _Layout as e: return _fail(adapter, entry, case, (*clauses, "NN.LAYER"), str(e))
  except Exception as e: return _fail(adapter, entry, case, clauses, f"gradient raised {type(e).__name__}: {e}")
  fn, args = _torch_fn(entry, case, names)

  def vjp_fn(*a):
    _, pullback = torch.func.vjp(fn, *a[:len(names)])
    return pullback(tuple(a[len(names):]))
  cot = [torch.tensor(np.asarray(g, np.float64)) for g in gs]
  with torch.no_grad(): want = [w.detach().numpy(force=True) for w in vjp_fn(*args, *cot)]
  tail = "\n".join([f"g{i} = {adapter.repro_tensor(_array_source(g, dtype), dtype)}" for i, g in enumerate(gs)] + [
    "outs = out if isinstance(out, tuple) else (out,)", "grads = None",
    f"for o, g in zip(outs, [{', '.join(f'g{i}' for i in range(len(gs)))}]):",
    f"  ds = [np.asarray({adapter.repro_numpy('d')}, np.float64) for d in o.gradient("
    f"{', '.join(('layer.' + n) if n in tensors else n for n in names)}, gradient=g)]",
    "  grads = ds if grads is None else [a + b for a, b in zip(grads, ds)]", "print(grads)"])
  out_size = max(g.size for g in gs)
  used = 0.0
  for k, (name, g, w) in enumerate(zip(names, got, want)):
    rule = A.bound(entry.grad_tolerance, dtype)
    ref = A.round_to(w, dtype)
    if g.shape != ref.shape:
      return _fail(adapter, entry, case, clauses, f"gradient of {name} has shape {g.shape}, want {ref.shape}",
                   tail=tail)
    scale = _abs_jacobian_scale(lambda *a, k=k: vjp_fn(*a)[k], [*args, *cot], ref.shape) if rule.uses("S") else 0.0
    n = entry.n(case.hyper, {k: v.shape for k, v in case.inputs.items()}) * max(1.0, out_size / max(g.size, 1))
    x = max(A.finite_max(c) for c in gs) * max([1.0] + [A.finite_max(a) for a in args])
    if entry.inv_std: x *= max(1.0, entry.inv_std(case.hyper, case.inputs["x"]))   # ACC.GRAD.NORM
    v = A.check(g, ref, dtype, rule, n=n, S=scale, x=x)
    used = max(used, v.used)
    if not v.ok:   # CONF.REPRO.assert
      check = "\n".join([REPRO_CHECK, expect(f"grads[{k}]", ref, dtype, rule, v.limit)])
      return _fail(adapter, entry, case, (*clauses, rule.clause), f"gradient of {name}: {v.why}", v.used,
                   f"{tail}\n{check}")
  return Outcome(True, clauses, details={"used": used})


# ---------------------------------------------------------------------------------------------------- training

def _running_stats(momentum, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
  """NN.BATCHNORM.running written out with torch ops, as a differentiable function of the batches: only for the
  condition scale S of the running statistics (torch's own batch_norm updates them in place, out of autograd)."""
  axes = [a for a in range(xs[0].ndim) if a != 1]
  mean, var = torch.zeros(xs[0].shape[1], dtype=torch.float64), torch.ones(xs[0].shape[1], dtype=torch.float64)
  for t, x in enumerate(xs, 1):
    m = TORCH_HELPERS["bn_factor"](momentum, t)
    mean = (1 - m) * mean + m * x.mean(axes)
    var = (1 - m) * var + m * x.var(axes, correction=1)
  return mean, var


def layer_training(adapter: Adapter, entry: Layer, case: LayerCase, dtype: str, batches: list[np.ndarray],
                   x_eval: np.ndarray) -> Outcome:
  """NN.BATCHNORM.running: the layer's running statistics start as zeros, ones and a count of 0; each training call
  on `batches` normalises with the batch's statistics and moves the running ones as torch's batch_norm does
  (momentum=None: the cumulative average); then a call in eval mode on `x_eval` normalises with the running
  statistics the layer holds (ACC.NORM, ACC.RUNNING, ACC.BATCHNORM)."""
  clauses = (*entry.clauses, "NN.BATCHNORM.running", "NN.BATCHNORM.eval")
  h = case.hyper
  train = adapter.repro_train(True)
  tail = "\n".join(f"with {train}: print(layer({adapter.repro_tensor(_array_source(b, dtype), dtype)}).numpy())"
                   for b in batches)
  tail += "\nprint(layer.running_mean.numpy(), layer.running_var.numpy())" if h["track"] else ""

  def fail(why: str, used=float("inf"), extra=()) -> Outcome:
    return _fail(adapter, entry, case, (*clauses, *extra), why, used, tail)
  tparams = {n: (None if a is None else torch.tensor(np.asarray(a, np.float64))) for n, a in case.params.items()}
  affine = [tparams["weight"], tparams["bias"]] if tparams["weight"] is not None else []   # S sees them too
  running = (torch.zeros(h["c"], dtype=torch.float64), torch.ones(h["c"], dtype=torch.float64)) if h["track"] else \
      (None, None)
  try:
    layer, _, _ = _build(adapter, entry, case, dtype)
    if h["track"]:
      for name, want in (("running_mean", 0.0), ("running_var", 1.0), ("num_batches_tracked", 0)):
        got = adapter.numpy(getattr(layer, name))
        if got.shape != (() if name == "num_batches_tracked" else (h["c"],)) or (got != want).any():
          return fail(f"layer.{name} starts as {got!r}, NN.BATCHNORM gives {want} of shape {got.shape}")
    for t, b in enumerate(batches, 1):
      with adapter.train(True): y = adapter.numpy(adapter.evaluate("layer(x)", {"layer": layer,
                                                                                   "x": adapter.tensor(b, dtype)}, {}))
      xb = torch.tensor(np.asarray(b, np.float64))
      ref = torch.nn.functional.batch_norm(xb, *running, tparams["weight"], tparams["bias"], True,
                                           TORCH_HELPERS["bn_factor"](h["momentum"], t), h["eps"]).numpy()
      v = A.check(y, A.round_to(ref, dtype), dtype, A.bound("NORM", dtype), n=b.size // b.shape[1],
                  x=A.finite_max(b) * entry.inv_std(h, b),
                  S=_abs_jacobian_scale(lambda x, *wb: torch.nn.functional.batch_norm(
                    x, None, None, *(wb or (None, None)), True, 0.0, h["eps"]), [xb, *affine], ref.shape))
      if not v.ok: return fail(f"training call {t}: {v.why}", v.used, ("NN.BATCHNORM.train",))
    stats = {}
    if h["track"]:
      xs = [torch.tensor(np.asarray(b, np.float64)) for b in batches]
      for k, name in enumerate(("running_mean", "running_var")):
        got = adapter.numpy(getattr(layer, name))
        rule = A.bound("RUNNING", dtype)
        scale = _abs_jacobian_scale(lambda *a, k=k: _running_stats(h["momentum"], list(a))[k], xs, got.shape)
        v = A.check(got, A.round_to(running[k].numpy(), dtype), dtype, rule, n=batches[0].size // h["c"], S=scale)
        if not v.ok: return fail(f"{name} after {len(batches)} training calls: {v.why}", v.used, (rule.clause,))
        stats[name] = got
      count = adapter.numpy(getattr(layer, "num_batches_tracked"))
      if count != len(batches): return fail(f"num_batches_tracked is {count} after {len(batches)} training calls")
    with adapter.train(False):
      y = adapter.numpy(adapter.evaluate("layer(x)", {"layer": layer, "x": adapter.tensor(x_eval, dtype)}, {}))
  except _Layout as e: return fail(str(e), extra=("NN.LAYER",))
  except Exception as e: return fail(f"raised {type(e).__name__}: {e}")
  # eval: the running statistics the layer holds (already checked above), or the batch's when they are not tracked
  rm, rv = (torch.tensor(np.asarray(stats[n], np.float64)) for n in ("running_mean", "running_var")) if h["track"] \
      else (None, None)
  xe = torch.tensor(np.asarray(x_eval, np.float64))

  stat_args = [rm, rv] if h["track"] else []

  def evaluated(x, *rest):
    """NN.BATCHNORM.eval written out, differentiable in every tensor (torch's batch_norm is not in the statistics):
    for S only."""
    stat, wb = rest[:len(stat_args)], rest[len(stat_args):]
    if not stat: return torch.nn.functional.batch_norm(x, None, None, *(wb or (None, None)), True, 0.0, h["eps"])
    along = (1, -1, *(1,) * (x.ndim - 2))
    y = (x - stat[0].reshape(along)) / (stat[1].reshape(along) + h["eps"]).sqrt()
    return y * wb[0].reshape(along) + wb[1].reshape(along) if wb else y
  ref = torch.nn.functional.batch_norm(xe, rm, rv, tparams["weight"], tparams["bias"], not h["track"], 0.0,
                                       h["eps"]).numpy()
  key = "BATCHNORM" if h["track"] else "NORM"
  v = A.check(y, A.round_to(ref, dtype), dtype, A.bound(key, dtype), n=x_eval.size // h["c"],
              x=A.finite_max(x_eval) * entry.inv_std(h, x_eval),
              S=_abs_jacobian_scale(evaluated, [xe, *stat_args, *affine], ref.shape))
  if not v.ok: return fail(f"eval call: {v.why}", v.used, (A.bound(key, dtype).clause,))
  return Outcome(True, clauses, details={"used": v.used})
