"""The properties the suite checks, as functions of (adapter, catalogue entry, example) that return an `Outcome`.

- `forward`: values and dtypes against torch in float64 under the accuracy contract (ACC.MEASURE), and against the
  executable spec where the entry has one (integer edge cases torch leaves undefined, casts, ALU ops);
- `vjp`: vector-Jacobian products with a random cotangent against torch autograd in float64 (GRAD.CHECK, ACC.GRAD);
- `finite_differences`: the implementation's own float64 VJP against its central differences (GRAD.CHECK.fd);
- `second_order`: the gradient of a gradient against torch's double backward (ACC.GRAD2).

Test modules under conformance/tests/ draw the examples with hypothesis and assert `outcome.ok`; a failing outcome's
message names the clauses and ends with a reproduction to paste into Python.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance import accuracy as A
from conformance.adapters.base import Adapter, compiled
from conformance.catalogue import Op
from conformance.catalogue.core import TORCH_HELPERS
from conformance.catalogue.oracles import py_value
from conformance.strategies import NP, Case

__all__ = ["Outcome", "forward", "vjp", "finite_differences", "second_order", "torch_eval", "reproduction"]

_TORCH_NS = {"torch": torch, "F": torch.nn.functional, **TORCH_HELPERS}
FD_STEP = 2.0 ** -20      # ACC.GRAD.fd: relative step of the central differences
FD_RTOL = 2.0 ** -20      # ACC.GRAD.fd: relative tolerance on <g, J v>


@dataclass
class Outcome:
  """The result of one property on one example: ok, the clauses it checked, the worst error in ULPs, for a failure a
  message that ends with a reproduction, and in `details["used"]` the largest |error| / bound of its bounded
  comparisons (CONF.REPORT.fraction)."""
  ok: bool
  clauses: tuple[str, ...] = ()
  worst_ulps: float = 0.0
  message: str = ""
  details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------- inputs

def _is_scalar(op: Op, name: str) -> bool:
  return name in op.domain.scalars


def _impl_inputs(adapter: Adapter, op: Op, case: Case) -> dict[str, Any]:
  """The inputs as the implementation's tensors (Python values for scalar inputs)."""
  out = {}
  for name, arr, dt in zip(op.domain.inputs, case.inputs, case.dtypes):
    out[name] = py_value(arr.reshape(()), dt) if _is_scalar(op, name) else adapter.tensor(arr, dt)
  return out


def _torch_dtype(dtype: str):
  return getattr(torch, dtype)


def _torch_inputs(op: Op, case: Case, mode: str = "float64") -> dict[str, Any]:
  """The inputs as torch tensors (Op.reference): 'float64' gives floats in float64 (exact: ACC.MEASURE.reference)
  and integers and bool in their own dtype; 'float64-cast' gives integers and bool as float64 too, after their
  conversion to the default float (DT.PROMOTE.float); 'native' gives every input in its own dtype. Scalar inputs
  are Python values."""
  out = {}
  for name, arr, dt in zip(op.domain.inputs, case.inputs, case.dtypes):
    if _is_scalar(op, name):
      out[name] = py_value(arr.reshape(()), dt)
      continue
    if dt in A._FLOATS:
      t = torch.tensor(np.asarray(arr, np.float64), dtype=torch.float64)
      if mode == "native": t = t.to(_torch_dtype(dt))
    elif mode == "float64-cast":
      t = torch.tensor(A.round_to(np.asarray(arr).astype(np.float64), "float32"), dtype=torch.float64)
    else: t = torch.from_numpy(np.array(arr, dtype=NP[dt], copy=True))
    out[name] = t
  return out


def _as_numpy(r: Any) -> np.ndarray:
  """A torch result as numpy; float dtypes numpy lacks (bfloat16) via float64."""
  if not isinstance(r, torch.Tensor): return np.asarray(r)
  r = r.detach()
  return (r.double() if r.is_floating_point() and r.dtype != torch.float64 else r).numpy()


def torch_eval(op: Op, inputs: dict[str, Any], params: dict[str, Any]) -> Any:
  """Evaluate the entry's torch expression with the given inputs and parameters."""
  return eval(compiled(op.torch), _TORCH_NS, {**params, **inputs})   # noqa: S307 (catalogue expressions)


def _outputs(result: Any) -> list[Any]:
  return list(result) if isinstance(result, (tuple, list)) else [result]


def _torch_dtype_name(t) -> str:
  return str(t.dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------------------------- reproduction

def _literal(arr: np.ndarray) -> str:
  text = repr(np.asarray(arr).tolist())
  return re.sub(r"\b(nan|inf)\b", r"float('\1')", text)


def _array_source(arr: np.ndarray, dt: str) -> str:
  """Python source of numpy array `arr` stored as `dt`'s numpy type. An empty array gets its shape back with a
  reshape, since its nested list loses every dimension after the first zero ((0, 3) lists as [])."""
  arr = np.asarray(arr)
  src = f"np.array({_literal(arr)}, dtype=np.{np.dtype(NP[dt]).name})"
  return f"{src}.reshape({arr.shape!r})" if arr.size == 0 and arr.ndim > 1 else src


# CONF.REPRO.assert: the comparison of spec/accuracy.md as the reproductions carry it (a copy of accuracy.check's rules)
REPRO_CHECK = '''def check(got, want, bound, exact, where=None):   # ACC.MEASURE: exact, special, bound
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, f"shape {got.shape}, want {want.shape}"
  if want.dtype.kind in "biu": ok = got == want
  else:
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (np.isnan(g) & np.isnan(w)) | ((g == w) & ((np.signbit(g) == np.signbit(w)) | (exact == "equal")))
    special = np.isnan(g) | np.isnan(w) | np.isinf(g) | np.isinf(w)
    ok = np.where(special | bool(exact), same, np.abs(g - w) <= bound)
  if where is not None: ok = ok | ~np.asarray(where)
  bad = [tuple(int(k) for k in i) for i in np.argwhere(~ok)]
  how = "" if exact else f" (bound {np.broadcast_to(bound, want.shape)[bad[0]]:.3g})" if bad else ""
  assert not bad, f"{len(bad)} of {ok.size} elements differ; first at {bad[0]}: got {got[bad[0]]!r}, want " \\
                  f"{want[bad[0]]!r}{how}"'''


def _float_array(a: np.ndarray) -> str:
  a = np.asarray(a, np.float64)
  src = f"np.array({_literal(a)}, dtype=np.float64)"
  return f"{src}.reshape({a.shape!r})" if a.size == 0 and a.ndim > 1 else src


def expect(got: str, want: np.ndarray, dtype: str, rule: A.Bound, limit: np.ndarray | float,
           where: np.ndarray | None = None) -> str:
  """Lines asserting that `got` (source of a numpy array) is `want` (of `dtype`) under `rule`, whose value at each
  element is `limit` (CONF.REPRO.assert); `where` limits the comparison as in accuracy.check."""
  want_src = _float_array(want) if A.is_float(dtype) else _array_source(want, dtype)
  exact = ("exact" if rule.signed_zero else "equal") if rule.exact or not A.is_float(dtype) else ""
  bound = "0.0" if exact else _float_array(np.broadcast_to(limit, np.shape(want)))
  mask = "None" if where is None else _array_source(np.broadcast_to(where, np.shape(want)), "bool")
  return "\n".join([f"want = {want_src}   # {rule.clause} ({rule.expr})", f"bound = {bound}", f"where = {mask}",
                    f"check({got}, want, bound, {exact!r}, where)"])


def _guarded(run: list[str], what: str) -> list[str]:
  """`run` inside a try: the implementation raising is an AssertionError too, so a pasted reproduction of a crash
  fails the way that of a wrong value does."""
  return ["try:", *(f"  {line}" for text in run for line in text.split("\n")),
          "except Exception as e:   # a crash is a failure of the implementation",
          f"  raise AssertionError(f'{what} raised {{type(e).__name__}}: {{e}}') from e"]


def reproduction(adapter: Adapter, op: Op, case: Case, extra: str = "", check: str = "") -> str:
  """Python lines in the implementation's own API (Adapter.repro_prelude, repro_tensor, repro_alu) that rebuild the
  example, run it and, with `check` (lines from `expect`), assert the expected value (CONF.REPRO). `extra` replaces
  the default run (`out = <call>`, then `got`, the outputs as numpy arrays)."""
  lines = ["import numpy as np", *adapter_prelude(adapter)]
  for name, arr, dt in zip(op.domain.inputs, case.inputs, case.dtypes):
    if _is_scalar(op, name): lines.append(f"{name} = {py_value(arr.reshape(()), dt)!r}")
    else:
      lines.append(f"{name} = {adapter.repro_tensor(_array_source(arr, dt), dt)}")   # as the adapter makes its inputs
  lines += [f"{k} = {v!r}" for k, v in case.params.items()]
  if extra: run = [extra]
  elif op.is_alu:   # the single ALU op as a UOp over the input tensors' UOps (refimpl's Adapter.alu)
    out_dt = op.out_dtype(case.dtypes, case.params) if op.out_dtype else _alu_out(op, case)
    srcs = "".join(f"{n}.uop, " for n in op.domain.inputs)
    run = [*adapter.repro_alu(op.call, out_dt, f"({srcs})"), f"got = [{adapter.repro_numpy('out')}]"]
  else:
    run = [f"out = {op.call}", "outs = out if isinstance(out, (tuple, list)) else [out]",
           f"got = [{adapter.repro_numpy('o')} for o in outs]", "print(got)"]
  if not check: return "\n".join(lines + run)
  return "\n".join([*lines, *_guarded(run, op.name), REPRO_CHECK, check])


def adapter_prelude(adapter: Adapter) -> list[str]:
  """The adapter's reproduction prelude (Adapter.repro_prelude, CONF.REPRO.hook)."""
  return adapter.repro_prelude()


def _fail(op: Op, clauses: tuple[str, ...], why: str, adapter: Adapter, case: Case, extra: str = "",
          used: float = float("inf"), check: str = "") -> Outcome:
  """A failing outcome; `used` is the broken comparison's |error| / bound (CONF.REPORT.fraction), inf for a crash. The
  reproduction is the message's last part (CONF.REPRO)."""
  msg = f"{op.name} [{', '.join(clauses)}]: {why}\n--- reproduction ---\n" \
        f"{reproduction(adapter, op, case, extra, check)}"
  return Outcome(False, clauses, float("inf"), msg, details={"used": used})


# ---------------------------------------------------------------------------------------------------- scales

def _abs_jacobian_scale(fn, args: list[torch.Tensor], out_shape: tuple[int, ...]) -> np.ndarray:
  """S of ACC.MEASURE.scale: sum over inputs j of |d out_i / d arg_j| * |arg_j|, in float64; 0 * inf counts as 0 and
  NaN (a derivative at a special value) as 0."""
  if not args or 0 in out_shape or all(a.numel() == 0 for a in args): return np.zeros(out_shape)
  try: jac = torch.func.jacrev(fn, argnums=tuple(range(len(args))))(*args)
  except Exception:   # ops functorch cannot transform: one backward pass per output element
    jac = torch.autograd.functional.jacobian(fn, tuple(args))
  if isinstance(jac, torch.Tensor): jac = (jac,)
  total = np.zeros(int(np.prod(out_shape)))
  for j, a in zip(jac, args):
    jm = np.abs(j.detach().reshape(total.size, a.numel()).numpy(force=True))   # force: torch's ZeroTensor
    am = np.abs(a.detach().reshape(1, -1).numpy())
    with np.errstate(invalid="ignore", over="ignore"):
      prod = np.where(am == 0, 0.0, jm * am)
      total += np.nan_to_num(prod, nan=0.0).sum(axis=1) if prod.size else 0.0
  return total.reshape(out_shape)


def _forward_scale(op: Op, case: Case, out_index: int, out_shape: tuple[int, ...]) -> np.ndarray:
  """S for a forward result: the componentwise condition of the op at its float inputs."""
  inputs = _torch_inputs(op, case, op.reference if op.reference != "native" else "float64")
  names = [n for n in op.domain.inputs if isinstance(inputs[n], torch.Tensor) and inputs[n].dtype == torch.float64]

  def fn(*args):
    return _outputs(torch_eval(op, {**inputs, **dict(zip(names, args))}, case.params))[out_index]
  return _abs_jacobian_scale(fn, [inputs[n] for n in names], out_shape)


def _magnitude(op: Op, case: Case, out_shape: tuple[int, ...]) -> np.ndarray | float:
  """x of ACC.MEASURE.bound: the largest |input| at each position for elementwise ops, else over all inputs (and
  numeric parameters)."""
  floats = [np.abs(np.asarray(a, np.float64)) for a, d in zip(case.inputs, case.dtypes) if d in A._FLOATS]
  if op.domain.kind in ("elementwise", "alu") and floats:
    try: return np.maximum.reduce([np.broadcast_to(f, out_shape) for f in floats])
    except ValueError: pass
  values = [A.finite_max(f) for f in floats]
  values += [abs(v) for v in case.params.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
  return max(values, default=0.0)


# ---------------------------------------------------------------------------------------------------- forward

def forward(adapter: Adapter, op: Op, case: Case, dtype: str,
            second: tuple[np.ndarray, np.ndarray] | None = None) -> Outcome:
  """Values and dtypes of the implementation against torch (float64, rounded once; ACC.MEASURE.reference) and the
  executable spec; and, bit for bit where its mask is True, against `second` = (values, mask), an oracle that shares
  no code with the executable spec (conformance.oracle_alu for the ALU ops)."""
  clauses = op.clauses
  try:
    read = [_read(adapter, t) for t in _outputs(_run(adapter, op, case))]
    got, got_dts = [r[0] for r in read], [r[1] for r in read]
  except Exception as e:   # a crash is a failure of the op, not of the suite
    return _fail(op, clauses, f"raised {type(e).__name__}: {e}", adapter, case, check=CRASH_GONE)
  want_dts = _expected_dtypes(op, case, len(got))
  for i, (g, w) in enumerate(zip(got_dts, want_dts)):
    if w is not None and g != w:
      return _fail(op, clauses, f"output {i} has dtype {g}, want {w}", adapter, case, check=_dtype_check(i, g, w))
  refs: list[np.ndarray] | None = None
  if op.torch is not None:
    try: refs = [_as_numpy(r) for r in _outputs(torch_eval(op, _torch_inputs(op, case, op.reference), case.params))]
    except Exception as e:
      if op.spec is None: return _fail(op, clauses, f"torch reference raised {type(e).__name__}: {e}", adapter, case)
  spec = op.spec(case) if op.spec else None
  if refs is not None and len(refs) != len(got):
    return _fail(op, clauses, f"{len(got)} outputs, torch gives {len(refs)}", adapter, case,
                 check=f"assert len(got) == {len(refs)}, len(got)")
  worst, used = 0.0, 0.0
  exact = A.bound("EXACT", "float64")
  for i, (g, dt) in enumerate(zip(got, got_dts)):
    if refs is not None:
      ref = _round_reference(refs[i], dt)
      if g.shape != ref.shape: return _fail(op, clauses, f"output {i} has shape {g.shape}, want {ref.shape}", adapter,
                                            case, check=f"assert got[{i}].shape == {ref.shape!r}, got[{i}].shape")
      rule = A.bound(op.tolerance, dt)
      mask = op.torch_defined(case) if op.torch_defined else None
      S = _forward_scale(op, case, i, ref.shape) if rule.uses("S") else 0.0
      v = A.check(g, ref, dt, rule, n=op.length(case), S=S, x=_magnitude(op, case, ref.shape), where=mask)
      worst, used = max(worst, v.worst_ulps), max(used, v.used)
      if not v.ok: return _fail(op, (*clauses, rule.clause), f"output {i}: {v.why}", adapter, case, used=v.used,
                                check=expect(f"got[{i}]", ref, dt, rule, v.limit, mask))
    if spec is not None and i == 0:
      want = np.asarray(spec)
      if g.shape != want.shape: return _fail(op, clauses, f"shape {g.shape}, the spec gives {want.shape}", adapter,
                                             case, check=f"assert got[0].shape == {want.shape!r}, got[0].shape")
      v = A.check(g, want, dt, A.bound("EXACT", dt))
      if not v.ok: return _fail(op, clauses, f"against the executable spec: {v.why}", adapter, case,
                                check=expect("got[0]", want, dt, exact, 0.0))
    if second is not None and i == 0:
      v = A.check(g, np.asarray(second[0]), dt, A.bound("EXACT", dt), where=second[1])
      if not v.ok: return _fail(op, clauses, f"against the independent oracle: {v.why}", adapter, case,
                                check=expect("got[0]", np.asarray(second[0]), dt, exact, 0.0, second[1]))
  return Outcome(True, clauses, worst, details={"used": used})


CRASH_GONE = "print('no exception: the crash the suite saw is gone')"


def _dtype_check(i: int, got: str, want: str) -> str:
  """Lines asserting output i's dtype through numpy's name for it (bfloat16, which numpy lacks, is only printed)."""
  if "bfloat16" in (got, want): return f"print(outs[{i}].dtype)   # want {want}"
  return f"assert got[{i}].dtype == np.dtype({np.dtype(NP[want]).name!r}), (got[{i}].dtype, {want!r})"


def _run(adapter: Adapter, op: Op, case: Case) -> Any:
  if op.is_alu:
    out = op.out_dtype(case.dtypes, case.params) if op.out_dtype else _alu_out(op, case)
    return _AluResult(adapter.alu(op.call, out, list(zip(case.inputs, case.dtypes))), out)
  return adapter.evaluate(op.call, _impl_inputs(adapter, op, case), case.params)


class _AluResult:
  """An ALU result already read back as numpy (the adapter's alu returns arrays, not tensors)."""
  def __init__(self, values: np.ndarray, dtype: str): self.values, self.dtype = values, dtype


def _read(adapter: Adapter, t: Any) -> tuple[np.ndarray, str]:
  """A result's values and dtype name."""
  if isinstance(t, _AluResult): return np.asarray(t.values), t.dtype
  return adapter.numpy(t), adapter.dtype_name(t)


def _alu_out(op: Op, case: Case) -> str:
  from refimpl.dtype import to_dtype
  from refimpl.uop import Ops
  from refimpl.uop.semantics import alu_result_dtype
  from conformance.catalogue.core import _NAME_OF
  return _NAME_OF[alu_result_dtype(Ops[op.call], to_dtype(case.dtypes[-1]))]


def _expected_dtypes(op: Op, case: Case, k: int) -> list[str | None]:
  """The spec's result dtype where the entry declares one (a documented difference from torch), else torch's own
  result dtype on the inputs in their own dtypes (None where torch cannot compute in them)."""
  if op.out_dtype is not None: return [op.out_dtype(case.dtypes, case.params)] * k
  if op.is_alu: return [_alu_out(op, case)] * k
  if op.torch is None: return [None] * k
  try: outs = _outputs(torch_eval(op, _torch_inputs(op, case, "native"), case.params))
  except Exception: return [None] * k
  return [_torch_dtype_name(o) if isinstance(o, torch.Tensor) else None for o in outs]


def _round_reference(ref: np.ndarray, dtype: str) -> np.ndarray:
  """The torch result as a value of `dtype`: floats rounded once (DT.ROUND), integers wrapped (DT.WRAP)."""
  if dtype in A._FLOATS: return A.round_to(np.asarray(ref, np.float64), dtype)
  if dtype == "bool": return np.asarray(ref).astype(bool)
  return np.asarray(ref).astype(np.int64 if np.asarray(ref).dtype.kind != "u" else np.uint64).astype(NP[dtype])


# ---------------------------------------------------------------------------------------------------- gradients

def _float_tensor_inputs(op: Op, case: Case) -> list[int]:
  """The inputs whose gradients are checked: float tensors (of `diff_inputs`, when the entry names them)."""
  return [i for i, (n, dt) in enumerate(zip(op.domain.inputs, case.dtypes)) if dt in A._FLOATS
          and not _is_scalar(op, n) and (op.diff_inputs is None or n in op.diff_inputs)]


def _impl_vjp(adapter: Adapter, op: Op, case: Case, cotangent_of, idx: list[int]):
  """The implementation's VJP: builds the op once, asks `cotangent_of(shapes, dtypes)` for the cotangents (numpy),
  and returns (cotangents, output dtypes, gradients as float64 numpy arrays)."""
  inputs = _impl_inputs(adapter, op, case)
  outs = _outputs(adapter.evaluate(op.call, inputs, case.params))
  out_dts = [adapter.dtype_name(o) for o in outs]
  cotangents = cotangent_of([adapter.shape(o) for o in outs], out_dts)
  xs = [inputs[op.domain.inputs[i]] for i in idx]
  total = None
  for y, g, dt in zip(outs, cotangents, out_dts):
    grads = [adapter.numpy(d).astype(np.float64) for d in adapter.gradient(y, xs, adapter.tensor(g, dt))]
    total = grads if total is None else [a + b for a, b in zip(total, grads)]
  return cotangents, out_dts, total


def _torch_vjp(op: Op, case: Case, cotangents: list[np.ndarray], idx: list[int]):
  """torch's float64 VJP, and the function (inputs, cotangents) -> VJP it comes from (for S)."""
  inputs = _torch_inputs(op, case)
  names = [op.domain.inputs[i] for i in idx]

  def vjp_fn(*args):
    xs, gs = args[:len(names)], args[len(names):]
    _, pullback = torch.func.vjp(lambda *a: tuple(_outputs(torch_eval(op, {**inputs, **dict(zip(names, a))},
                                                                       case.params))), *xs)
    return pullback(tuple(gs))
  xs = [inputs[n].detach() for n in names]
  gs = [torch.tensor(np.asarray(g, np.float64)) for g in cotangents]
  with torch.no_grad():
    want = [w.detach().numpy(force=True) for w in vjp_fn(*xs, *gs)]   # force: torch may give a ZeroTensor
  return want, vjp_fn, xs + gs


def vjp(adapter: Adapter, op: Op, case: Case, dtype: str, seed: int) -> Outcome:
  """GRAD.CHECK: the VJP for a random cotangent against torch autograd in float64 (ACC.GRAD)."""
  clauses = (*op.clauses, "GRAD.CHECK")
  idx = _float_tensor_inputs(op, case)
  if not idx: return Outcome(True, clauses)
  rng = np.random.default_rng(seed)
  drawn, drawn_dts = [], []

  def cotangent_of(shapes, dts):
    drawn.extend(A.round_to(rng.standard_normal(s), dt).astype(NP[dt]) for s, dt in zip(shapes, dts))
    drawn_dts.extend(dts)
    return drawn
  try: cotangents, out_dts, got = _impl_vjp(adapter, op, case, cotangent_of, idx)
  except Exception as e:
    extra = _vjp_snippet(adapter, op, idx, drawn, drawn_dts) if drawn else ""
    return _fail(op, clauses, f"gradient raised {type(e).__name__}: {e}", adapter, case, extra, check=CRASH_GONE)
  extra = _vjp_snippet(adapter, op, idx, cotangents, out_dts)
  want, vjp_fn, args = _torch_vjp(op, case, cotangents, idx)
  worst, used = 0.0, 0.0
  for k, (i, g, w) in enumerate(zip(idx, got, want)):
    dt = case.dtypes[i]
    rule = A.bound(op.grad_tolerance, dt)
    ref = A.round_to(w, dt)
    if g.shape != ref.shape: return _fail(op, clauses, f"gradient of {op.domain.inputs[i]} has shape {g.shape}, "
                                          f"want {ref.shape}", adapter, case, extra,
                                          check=f"assert grads[{k}].shape == {ref.shape!r}, grads[{k}].shape")
    S = _abs_jacobian_scale(lambda *a, k=k: vjp_fn(*a)[k], args, ref.shape) if rule.uses("S") else 0.0
    n = op.length(case) * max(1.0, max(c.size for c in cotangents) / max(case.inputs[i].size, 1))
    v = A.check(g, ref, dt, rule, n=n, S=S, x=_vjp_magnitude(op, case, i, cotangents))
    worst, used = max(worst, v.worst_ulps), max(used, v.used)
    if not v.ok:
      return _fail(op, (*clauses, rule.clause), f"gradient of {op.domain.inputs[i]}: {v.why}", adapter, case, extra,
                   used=v.used, check=expect(f"grads[{k}]", ref, dt, rule, v.limit))
  return Outcome(True, clauses, worst, details={"used": used})


def _vjp_magnitude(op: Op, case: Case, i: int, cotangents: list[np.ndarray]) -> np.ndarray | float:
  """x of ACC.GRAD.measure: |g| * max(1, |input|), at each position for an elementwise op whose input has the
  output's shape, else the largest over all of them; where the entry defines its own (Op.grad_magnitude), the larger
  of that and the largest |g| * max(1, |input|)."""
  a = np.abs(np.asarray(case.inputs[i], np.float64))
  if op.grad_magnitude is None and op.domain.kind == "elementwise" and len(cotangents) == 1 \
     and cotangents[0].shape == a.shape:
    with np.errstate(invalid="ignore", over="ignore"):
      return np.abs(cotangents[0].astype(np.float64)) * np.maximum(1.0, np.where(np.isfinite(a), a, 0.0))
  general = max(A.finite_max(c) for c in cotangents) * max([1.0] + [A.finite_max(x) for x in case.inputs])
  return general if op.grad_magnitude is None else max(general, op.grad_magnitude(case, cotangents))


def _vjp_snippet(adapter: Adapter, op: Op, idx: list[int], cotangents: list[np.ndarray], out_dts: list[str]) -> str:
  """The lines after the inputs of a VJP reproduction: `grads`, the VJP of each differentiated input (float64 numpy,
  summed over the outputs). The cotangents are made as the test made them (`Adapter.repro_tensor`): an
  implementation may compute a different gradient for a constant cotangent."""
  names = [op.domain.inputs[i] for i in idx]
  gs = ", ".join(adapter.repro_tensor(_array_source(g, dt), dt) for g, dt in zip(cotangents, out_dts))
  return "\n".join([f"out = {op.call}", "outs = out if isinstance(out, (tuple, list)) else [out]", "grads = None",
                    f"for out_, g_ in zip(outs, [{gs}]):   # the cotangents",
                    f"  ds = [np.asarray({adapter.repro_numpy('d')}, np.float64) "
                    f"for d in out_.gradient({', '.join(names)}, gradient=g_)]",
                    "  grads = ds if grads is None else [a + b for a, b in zip(grads, ds)]", "print(grads)"])


def _fd_snippet(adapter: Adapter, op: Op, case: Case, idx: list[int], h: float, dirs: dict[int, np.ndarray],
                gs: list[np.ndarray], out_dts: list[str], fd: float, an: float, tol: float) -> tuple[str, str]:
  """The lines after the inputs of a finite-differences reproduction (CONF.REPRO.fd): the step, the direction and
  the cotangent, f at x + h v and x - h v, the VJP at x; then the assertion on the two values GRAD.CHECK.fd compares
  (returned apart, as the `check` of `reproduction`)."""
  names = [op.domain.inputs[i] for i in idx]
  lines = [f"h = {h!r}   # ACC.GRAD.fd: the step", f"g = [{', '.join(_float_array(g) for g in gs)}]   # the cotangent"]
  for i, n in zip(idx, names):
    lines += [f"x0_{n} = {_array_source(case.inputs[i], case.dtypes[i])}",
              f"v_{n} = {_float_array(dirs[i])}   # the direction for {n}"]
  read = f"[np.asarray({adapter.repro_numpy('o')}, np.float64) for o in (out if isinstance(out, (tuple, list)) " \
         f"else [out])]"
  for sign, var in (("+", "plus"), ("-", "minus")):
    lines += [f"{n} = {adapter.repro_tensor(f'x0_{n} {sign} h * v_{n}', case.dtypes[i])}" for i, n in zip(idx, names)]
    lines += [f"out = {op.call}", f"{var} = {read}   # f(x {sign} h v)"]
  lines += [f"{n} = {adapter.repro_tensor(f'x0_{n}', case.dtypes[i])}" for i, n in zip(idx, names)]
  cots = ", ".join(adapter.repro_tensor(f"g[{k}]", dt) for k, dt in enumerate(out_dts))
  lines += [f"out = {op.call}", "outs = out if isinstance(out, (tuple, list)) else [out]",
            "grads = [0.0] * " + str(len(idx)),
            f"for out_, g_ in zip(outs, [{cots}]):",
            f"  ds = out_.gradient({', '.join(names)}, gradient=g_)",
            f"  grads = [a + np.asarray({adapter.repro_numpy('d')}, np.float64) for a, d in zip(grads, ds)]",
            "fd = sum(float((gk * (p - m)).sum()) for gk, p, m in zip(g, plus, minus)) / (2 * h)   # <g, J v>",
            f"an = sum(float((d * v).sum()) for d, v in zip(grads, [{', '.join(f'v_{n}' for n in names)}]))"
            "   # <VJP(g), v>",
            f"print('finite differences', fd, 'gradient', an)   # the suite saw {fd!r} and {an!r}"]
  check = [f"tol = {tol!r}   # ACC.GRAD.fd", "assert np.isfinite(fd) and np.isfinite(an) and abs(fd - an) <= tol, "
           "f'finite differences give {fd!r}, the gradient gives {an!r} (tolerance {tol:.3g})'"]
  return "\n".join(lines), "\n".join(check)


def _second_order_snippet(adapter: Adapter, op: Op, names: list[str], g1: np.ndarray, g2: list[np.ndarray]) -> str:
  """The lines after the inputs of a second-order reproduction (CONF.REPRO.second-order): `second`, the gradient of
  <g2, VJP(x, g1)> with respect to each input, built as the test built it."""
  t = adapter.repro_tensor
  return "\n".join([f"out = {op.call}", "y = out[0] if isinstance(out, (tuple, list)) else out",
                    f"g1 = {t(_float_array(g1), 'float64')}",
                    f"g2 = [{', '.join(t(_float_array(g), 'float64') for g in g2)}]",
                    f"d1 = y.gradient({', '.join(names)}, gradient=g1)",
                    "s = None",
                    "for d, g in zip(d1, g2):",
                    "  term = (d * g).sum()", "  s = term if s is None else s + term",
                    f"second = [{adapter.repro_numpy('d')} for d in s.gradient({', '.join(names)}, "
                    f"gradient={t('np.array(1.0)', 'float64')})]",
                    "print(second)"])


def finite_differences(adapter: Adapter, op: Op, case: Case, seed: int) -> Outcome:
  """GRAD.CHECK.fd: <g, (f(x + h v) - f(x - h v)) / 2h> against <VJP(g), v>, all computed by the implementation in
  float64, for one random cotangent g and direction v (ACC.GRAD.fd gives h and the tolerance)."""
  clauses = (*op.clauses, "GRAD.CHECK.fd")
  idx = _float_tensor_inputs(op, case)
  if not idx: return Outcome(True, clauses)
  rng = np.random.default_rng(seed)
  try:
    y0 = [_read(adapter, o)[0] for o in _outputs(_run(adapter, op, case))]
    if not all(np.isfinite(y).all() for y in y0):   # differences of NaN or inf say nothing
      return Outcome(True, clauses, details={"skipped": "non-finite output"})
    gs = [rng.standard_normal(y.shape) for y in y0]
    dirs = {i: rng.standard_normal(case.inputs[i].shape) for i in idx}
    scale = max([1.0] + [A.finite_max(case.inputs[i]) for i in idx])
    h = FD_STEP * scale
    def at(sign: float) -> list[np.ndarray]:
      moved = Case([a + sign * h * dirs[i] if i in dirs else a for i, a in enumerate(case.inputs)], case.dtypes,
                   case.params)
      return [_read(adapter, o)[0].astype(np.float64) for o in _outputs(_run(adapter, op, moved))]
    plus, minus = at(1.0), at(-1.0)
    _, out_dts, grads = _impl_vjp(adapter, op, case, lambda shapes, dts: [np.asarray(g) for g in gs], idx)
  except Exception as e:
    return _fail(op, clauses, f"raised {type(e).__name__}: {e}", adapter, case, check=CRASH_GONE)
  fd = sum(float((g * (p - m)).sum()) for g, p, m in zip(gs, plus, minus)) / (2 * h)
  an = sum(float((d * dirs[i]).sum()) for d, i in zip(grads, idx))
  magnitude = sum(float((np.abs(g) * np.abs(p - m)).sum()) for g, p, m in zip(gs, plus, minus)) / (2 * h)
  noise = sum(float((np.abs(g) * (np.abs(p) + np.abs(m))).sum()) for g, p, m in zip(gs, plus, minus)) * \
      A.eps("float64") / h
  tol = FD_RTOL * (magnitude + abs(an)) + 16 * noise
  if not np.isfinite(fd) or not np.isfinite(an) or abs(fd - an) > tol:
    run, check = _fd_snippet(adapter, op, case, idx, h, dirs, gs, out_dts, fd, an, tol)
    return _fail(op, clauses, f"finite differences give {fd!r}, the gradient gives {an!r} (tolerance {tol:.3g}, "
                 f"h = {h:.3g})", adapter, case, run, check=check)
  return Outcome(True, clauses, details={"used": abs(fd - an) / tol if fd != an else 0.0})


def second_order(adapter: Adapter, op: Op, case: Case, dtype: str, seed: int) -> Outcome:
  """ACC.GRAD2: d/dx <g2, VJP(x, g1)> against torch's double backward, in float64."""
  clauses = (*op.clauses, "GRAD.MODEL", "ACC.GRAD2")
  idx = _float_tensor_inputs(op, case)
  rng = np.random.default_rng(seed)
  names = [op.domain.inputs[i] for i in idx]
  try:
    inputs = _impl_inputs(adapter, op, case)
    xs = [inputs[n] for n in names]
    y = _outputs(adapter.evaluate(op.call, inputs, case.params))[0]
    g1 = rng.standard_normal(adapter.shape(y))   # the shape, not the values: realizing y would cut it off from xs
    g2 = [rng.standard_normal(case.inputs[i].shape) for i in idx]
    d1 = adapter.gradient(y, xs, adapter.tensor(g1, "float64"))
    s = None
    for d, g in zip(d1, g2):
      term = (d * adapter.tensor(g, "float64")).sum()
      s = term if s is None else s + term
    got = [adapter.numpy(t) for t in adapter.gradient(s, xs, adapter.tensor(np.array(1.0), "float64"))]
  except Exception as e:
    return _fail(op, clauses, f"raised {type(e).__name__}: {e}", adapter, case, check=CRASH_GONE)
  want, w = _torch_second_order(op, case, names, g1, g2)
  rule = A.bound("GRAD2", "float64")
  args = [torch.tensor(g1), *(torch.tensor(g) for g in g2)]
  used = 0.0
  for k, (n, g) in enumerate(zip(names, got)):
    S = _abs_jacobian_scale(lambda *a, k=k: w(*a)[k], args, g.shape) if rule.uses("S") else 0.0
    v = A.check(g, want[k], "float64", rule, n=max(a.size for a in case.inputs), S=S)
    used = max(used, v.used)
    if not v.ok:
      return _fail(op, (*clauses, rule.clause), f"second derivative of {n}: {v.why}", adapter, case,
                   _second_order_snippet(adapter, op, names, g1, g2), used=v.used,
                   check=expect(f"second[{k}]", want[k], "float64", rule, v.limit))
  return Outcome(True, clauses, details={"used": used})


def _torch_second_order(op: Op, case: Case, names: list[str], g1: np.ndarray, g2: list[np.ndarray]):
  """torch's d/dx <g2, VJP(x, g1)> in float64, and the map (g1, g2) -> that value (for S)."""
  tin = _torch_inputs(op, case)
  xs0 = [tin[n] for n in names]

  def f(*xs):
    return _outputs(torch_eval(op, {**tin, **dict(zip(names, xs))}, case.params))[0]

  def w(g1t, *g2t):
    def s(*xs):
      _, pullback = torch.func.vjp(f, *xs)
      return sum((d * g).sum() for d, g in zip(pullback(g1t), g2t))
    return torch.func.grad(s, argnums=tuple(range(len(xs0))))(*xs0)
  want = [t.detach().numpy() for t in w(torch.tensor(g1), *(torch.tensor(g) for g in g2))]
  return want, w
