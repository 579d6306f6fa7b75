"""The reference of a random program (ACC.PROGRAM): torch and numpy in float64, step by step, each step's value
rounded once to the step's dtype (DT.ROUND), with an error bound and a "determined" flag per element.

- A step with exact semantics (movement, selection, comparisons, casts, and + - * / sqrt, which are correctly
  rounded: OP.ROUND) computed in float64 and rounded once gives the very bits the spec gives. So a program made of
  exact steps has an exact reference, compared bit for bit (signs of zero included, ACC.MEASURE.exact).
- An inexact step (sum, matmul, conv2d: the accumulation order is the implementation's within the contract; exp: a
  library function) adds its own bound from the ACC.TABLE row of its tolerance key (ACC.SUM, ACC.MATMUL, ACC.CONV,
  ACC.EXP), evaluated at the reference.
- Every later step carries those errors on: the bound of its result is what its inputs' bounds can change (the
  absolute Jacobian times the input bounds: |y| e_x + |x| e_y + e_x e_y for a product, e / (2 sqrt(x)) for a square
  root, the largest bound of a group for max), plus one rounding (1 ulp of the larger magnitude) when any input is
  inexact. Selection steps (max, where, movement) add no rounding.
- A step that is discontinuous where its inexact input could lie (a comparison of values closer than their bounds,
  a cast to int or bool near a boundary, a division by a divisor whose bound reaches 0, a square root near 0, an
  overflow within reach) makes the element *undetermined*: it is not compared, nor is anything computed from it.

The bound stays conservative: it never assumes that two errors cancel. Non-finite references of determined elements
are exact (a NaN or an infinity that exact inputs produce is the same whatever the rounding of the finite ones).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from conformance import accuracy as A
from conformance.programs import Program, Step

__all__ = ["Ref", "reference"]

_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1
_FMAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
         "float64": 1.7976931348623157e308}


@dataclass
class Ref:
  """A reference value: `v` (float64 for float dtypes, int64 for integers, bool), its dtype name, the absolute
  error bound `e` (float64, 0 = exact) and `det` (False: undetermined, not compared)."""
  v: np.ndarray
  dt: str
  e: np.ndarray
  det: np.ndarray

  def __post_init__(self):   # numpy gives scalars for 0-d results: keep arrays
    self.v, self.e, self.det = np.asarray(self.v), np.asarray(self.e, np.float64), np.asarray(self.det, bool)

  @property
  def is_float(self) -> bool: return A.is_float(self.dt)


def _exact(v: np.ndarray, dt: str) -> Ref:
  return Ref(v, dt, np.zeros(v.shape), np.ones(v.shape, bool))


def _rnd(v: np.ndarray, dt: str) -> np.ndarray:
  """float64 values rounded once to float dtype `dt` (DT.ROUND); int64 values wrapped to int32 (DT.WRAP)."""
  if A.is_float(dt): return A.round_to(np.asarray(v, np.float64), dt)
  if dt == "bool": return np.asarray(v, bool)
  return ((np.asarray(v, np.int64) - _INT_MIN) % 2 ** 32) + _INT_MIN


def _smul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """a * b for bounds, where 0 times anything (inf included) is 0."""
  with np.errstate(invalid="ignore", over="ignore"):
    return np.where((a == 0) | (b == 0), 0.0, a * b)


def _finish(v: np.ndarray, e: np.ndarray, det: np.ndarray, dt: str, rounds: bool = True) -> Ref:
  """The step's Ref: one more rounding where an input was inexact (`rounds`), undetermined where an overflow is
  within reach of the bound, exact where the reference is NaN or infinite (if its bound is finite)."""
  v = _rnd(v, dt)
  if not A.is_float(dt): return Ref(v, dt, np.zeros(v.shape), det & True)
  e = np.asarray(e, np.float64) + np.zeros(v.shape)
  with np.errstate(invalid="ignore", over="ignore"):
    if rounds: e = np.where(e > 0, e + A.ulp(np.abs(v) + e, dt), e)
    finite = np.isfinite(v)
    near_overflow = finite & (e > 0) & ~(np.abs(v) + e < _FMAX[dt])
    det = det & ~near_overflow & (np.isfinite(e) | ~finite) & ~np.isnan(e)
    e = np.where(finite, e, 0.0)
  return Ref(v, dt, np.where(det, e, 0.0), det)


# ---------------------------------------------------------------------------------------------------- movement

def _pad(a: np.ndarray, pads, fill) -> np.ndarray:
  out = np.full(tuple(n + p + q for n, (p, q) in zip(a.shape, pads)), fill, a.dtype)
  out[tuple(slice(p, p + n) for n, (p, _) in zip(a.shape, pads))] = a
  return out


def _move(step: Step, xs: list[Ref]) -> Ref:
  p = dict(step.params)
  op = step.op

  def f(a: np.ndarray, fill) -> np.ndarray:
    if op == "reshape": return a.reshape(p["shape"])
    if op == "permute": return a.transpose(p["order"])
    if op == "transpose": return np.swapaxes(a, *p["dims"])
    if op == "expand": return np.broadcast_to(a, p["shape"]).copy()
    if op == "pad": return _pad(a, p["pads"], fill)
    if op == "shrink": return a[tuple(slice(s, e) for s, e in p["bounds"])]
    if op == "flip": return np.flip(a, p["axes"])
    if op == "getitem": return a[tuple(slice(*s) for s in p["slices"])]
    raise KeyError(op)
  x = xs[0]
  if op in ("cat", "stack"):
    join = np.concatenate if op == "cat" else np.stack
    return Ref(join([r.v for r in xs], p["dim"]), x.dt, join([r.e for r in xs], p["dim"]),
               join([r.det for r in xs], p["dim"]))
  zero = False if x.dt == "bool" else 0
  return Ref(np.array(f(x.v, zero), order="C"), x.dt, np.array(f(x.e, 0.0), order="C"),
             np.array(f(x.det, True), order="C"))


# ---------------------------------------------------------------------------------------------------- elementwise

def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """OP.MAX: NaN propagates; of two equal zeros +0.0 unless both are -0.0 (OP.MAX.zero)."""
  if a.dtype.kind != "f": return np.maximum(a, b)
  with np.errstate(invalid="ignore"):
    both_neg = np.signbit(a) & np.signbit(b)
    return np.where(np.isnan(a) | np.isnan(b), np.nan,
                    np.where(a == b, np.where(both_neg, a, np.abs(a)), np.maximum(a, b)))


def _cast_int(v: np.ndarray) -> np.ndarray:
  """OP.CAST float -> int32: truncation, saturating at the range, NaN -> 0."""
  with np.errstate(invalid="ignore"):
    return np.where(np.isnan(v), 0, np.clip(np.trunc(np.nan_to_num(v, nan=0.0)), _INT_MIN, _INT_MAX)).astype(np.int64)


def _binary(op: str, x: Ref, y: Ref, out_dt: str) -> Ref:
  a, b, ea, eb = x.v, y.v, x.e, y.e
  det = x.det & y.det
  with np.errstate(all="ignore"):
    if op in ("lt", "eq", "ne"):
      v = {"lt": a < b, "eq": a == b, "ne": a != b}[op]
      if x.is_float: det = det & ((ea + eb == 0) | (np.abs(a - b) > ea + eb))
      return Ref(v, "bool", np.zeros(v.shape), det)
    if not x.is_float:   # int32: wrapping arithmetic, exact
      v = {"add": a + b, "sub": a - b, "mul": a * b, "maximum": np.maximum(a, b), "minimum": np.minimum(a, b)}[op]
      return _finish(v, 0, det, out_dt)
    if op == "add": return _finish(a + b, ea + eb, det, out_dt)
    if op == "sub": return _finish(a - b, ea + eb, det, out_dt)
    if op == "mul": return _finish(a * b, _smul(np.abs(b), ea) + _smul(np.abs(a), eb) + _smul(ea, eb), det, out_dt)
    if op == "div":
      det = det & ~((eb > 0) & (np.abs(b) <= eb))
      gap = np.abs(b) * np.maximum(np.abs(b) - eb, 0)
      e = np.where(ea > 0, ea / np.abs(b), 0) + np.where(eb > 0, (np.abs(a) + ea) * eb / gap, 0)
      return _finish(a / b, e, det, out_dt)
    if op == "maximum": return _finish(_max(a, b), np.maximum(ea, eb), det, out_dt, rounds=False)
    if op == "minimum": return _finish(-_max(-a, -b), np.maximum(ea, eb), det, out_dt, rounds=False)
  raise KeyError(op)


def _const(step: Step, x: Ref) -> Ref:
  c = float(A.round_to(np.float64(step.param("value")), x.dt))   # DT.SCALAR-PROMOTE: the constant in x's dtype
  y = _exact(np.full(x.v.shape, c), x.dt)
  return _binary({"*": "mul", "/": "div", "+": "add", "-": "sub"}[step.param("op")], x, y, x.dt)


def _unary(op: str, x: Ref) -> Ref:
  a, e = x.v, x.e
  with np.errstate(all="ignore"):
    if op == "neg":
      return _finish(-a if x.is_float else -a, e, x.det, x.dt, rounds=False)
    if op == "relu": return _finish(np.where(a < 0, 0.0, a), e, x.det, x.dt, rounds=False)
    if op == "abs": return _finish(_max(a, -a), e, x.det, x.dt, rounds=False)
    if op == "sqrt":
      det = x.det & ~((e > 0) & (a - e <= 0))
      prop = np.where(e > 0, e / (np.sqrt(np.maximum(a - e, 0)) + np.sqrt(np.abs(a))), 0)
      return _finish(np.sqrt(a), prop, det, x.dt)
    if op == "exp":
      r = torch.exp(torch.from_numpy(np.array(a, np.float64))).numpy()
      rr = _rnd(r, x.dt)
      own = A.bound("EXP", x.dt).evaluate(ulp=A.ulp(rr, x.dt), eps=A.eps(x.dt), n=1.0, S=_smul(np.abs(a), np.abs(r)))
      prop = _smul(np.exp(a + e), e)
      det = x.det & (~np.isfinite(a) | (np.abs(a) <= 11) | (x.dt != "float16"))   # ACC.RANGE: float16 exp domain
      return _finish(r, np.where(np.isfinite(a), own + prop, 0.0), det, x.dt, rounds=False)
  raise KeyError(op)


def _cast(x: Ref, to: str) -> Ref:
  a, e = x.v, x.e
  if to == "bool":
    v = (a != 0) if x.dt != "bool" else a
    return Ref(np.asarray(v, bool), "bool", np.zeros(a.shape), x.det & ((e == 0) | (np.abs(a) > e)))
  if to == "int32":
    if x.dt == "bool" or not x.is_float: return Ref(np.asarray(a, np.int64), "int32", np.zeros(a.shape), x.det)
    with np.errstate(invalid="ignore"):
      same = (e == 0) | (_cast_int(a - e) == _cast_int(a + e))
    return Ref(_cast_int(a), "int32", np.zeros(a.shape), x.det & same)
  return _finish(np.asarray(a, np.float64), e, x.det, to)   # to a float dtype: rounded once (exact when widening)


# ---------------------------------------------------------------------------------------------------- reductions

def _axes(step: Step, nd: int) -> tuple[int, ...]:
  ax = step.param("axis")
  if ax is None: return tuple(range(nd))
  return tuple(sorted({a % nd for a in ((ax,) if isinstance(ax, int) else ax)}))


def _reduce(step: Step, x: Ref) -> Ref:
  axes, keep = _axes(step, x.v.ndim), step.param("keepdim")
  n = int(np.prod([x.v.shape[a] for a in axes])) if axes else 1
  det = ~np.any(~x.det, axis=axes, keepdims=keep) if axes else x.det.copy()
  if step.op in ("max", "min"):
    a = x.v if step.op == "max" else (-x.v if x.is_float else -x.v - 1)   # min: the inverse's max (~x for ints)
    if not axes: m = a.copy()
    elif x.is_float:
      with np.errstate(invalid="ignore"):
        m = np.max(a, axis=axes, keepdims=keep, initial=-np.inf) if a.size or n else np.full(det.shape, -np.inf)
        anynan = np.any(np.isnan(a), axis=axes, keepdims=keep)
        poszero = np.any((a == 0) & ~np.signbit(a), axis=axes, keepdims=keep)
        m = np.where(anynan, np.nan, np.where(m == 0, np.where(poszero, 0.0, -0.0), m))
    else: m = np.max(a, axis=axes, keepdims=keep, initial=_INT_MIN)
    v = m if step.op == "max" else (-m if x.is_float else -m - 1)
    e = np.max(x.e, axis=axes, keepdims=keep, initial=0.0) if axes else x.e.copy()
    return _finish(v, e, det, x.dt, rounds=False)
  # sum: float64 in torch, + 0.0 as the spec's fold starts from +0.0 (EXEC.THREAD.reduce; every block and the chain
  # over the blocks of EXEC.REDUCE.blocked as well, so no order gives -0.0); the ACC.SUM bound below is that of one
  # chain of n terms, which also covers the blocked order's fewer roundings per term
  t = torch.from_numpy(np.array(x.v, order="C"))
  with np.errstate(all="ignore"):
    # no axes (a 0-d value): nothing is reduced and the value passes unchanged, -0.0 included
    r = torch.sum(t, dim=axes, keepdim=keep).numpy() + 0.0 if axes else t.clone().numpy()
    fin = np.where(np.isfinite(x.v), np.abs(x.v), 0.0)
    S = fin.sum(axis=axes, keepdims=keep) if axes else fin
    prop = x.e.sum(axis=axes, keepdims=keep) if axes else x.e.copy()
    rr = _rnd(r, x.dt)
    own = A.bound("SUM", x.dt).evaluate(ulp=A.ulp(rr, x.dt), eps=A.eps(x.dt), n=float(n), S=S) if n > 2 else 0.0
    acc = "float32" if x.dt in ("float16", "bfloat16") else x.dt   # DT.SUM: 16-bit sums accumulate in float32
    det = det & ~(S + prop >= _FMAX[acc])   # a partial sum may overflow where float64's does not
  return _finish(r, own + prop, det, x.dt, rounds=False)


def _contract(prods: np.ndarray, axis: int) -> np.ndarray:
  return torch.sum(torch.from_numpy(np.array(prods, order="C")), dim=axis).numpy() + 0.0


def _matmul(x: Ref, y: Ref, key: str = "MATMUL") -> Ref:
  a, b = x.v, y.v
  k = a.shape[1]
  with np.errstate(all="ignore"):
    r = _contract(a[:, :, None] * b[None, :, :], 1)
    # S over the finite terms: an infinite term makes the sum infinite anyway, but finite products may overflow
    # the dtype where float64 does not, and then meet an infinity of the other sign
    fa, fb = np.where(np.isfinite(a), np.abs(a), 0.0), np.where(np.isfinite(b), np.abs(b), 0.0)
    S = 2 * _contract(fa[:, :, None] * fb[None, :, :], 1)
    prop = _contract(_smul(np.abs(a)[:, :, None], y.e[None]) + _smul(x.e[:, :, None], np.abs(b)[None]) +
                     _smul(x.e[:, :, None], y.e[None]), 1)
    rr = _rnd(r, x.dt)
    own = A.bound(key, x.dt).evaluate(ulp=A.ulp(rr, x.dt), eps=A.eps(x.dt), n=float(k), S=S) if k > 1 else 0.0
    bad = (~x.det).astype(np.float64) @ np.ones(b.shape) + np.ones(a.shape) @ (~y.det).astype(np.float64)
    det = (bad == 0) & ~(S / 2 + prop >= _FMAX[x.dt])   # a product or a partial sum may overflow
  return _finish(r, own + prop, det, x.dt, rounds=False)


def _conv(step: Step, x: Ref, w: Ref) -> Ref:
  """conv2d (stride 1, one padding for both axes) as a matmul of the weight with the unfolded, zero-padded input."""
  p = step.param("padding")
  o, c, kh, kw = w.v.shape
  def unfold(a: np.ndarray, fill) -> np.ndarray:
    a = _pad(a[0], ((0, 0), (p, p), (p, p)), fill)
    win = np.lib.stride_tricks.sliding_window_view(a, (kh, kw), axis=(1, 2))   # c, oh, ow, kh, kw
    oh, ow = win.shape[1:3]
    return np.array(win.transpose(0, 3, 4, 1, 2), order="C").reshape(c * kh * kw, oh * ow), (oh, ow)
  cols, (oh, ow) = unfold(x.v, 0.0)
  ecols, _ = unfold(x.e, 0.0)
  dcols, _ = unfold(x.det, True)
  wm = Ref(w.v.reshape(o, -1), w.dt, w.e.reshape(o, -1), w.det.reshape(o, -1))
  out = _matmul(wm, Ref(cols, x.dt, ecols, dcols), "CONV")
  return Ref(*(a.reshape(1, o, oh, ow) for a in (out.v, )), out.dt,
             out.e.reshape(1, o, oh, ow), out.det.reshape(1, o, oh, ow))


# ---------------------------------------------------------------------------------------------------- programs

def step_ref(step: Step, env: dict[str, Ref]) -> Ref:
  """The Ref of one step's value from the Refs of its arguments."""
  xs = [env[a] for a in step.args]
  op = step.op
  if op in ("reshape", "permute", "transpose", "expand", "pad", "shrink", "flip", "getitem", "cat", "stack"):
    return _move(step, xs)
  if op in ("contiguous", "realize"): return xs[0]
  if op == "assign": return xs[1]
  if op in ("add", "sub", "mul", "div", "maximum", "minimum", "lt", "eq", "ne"):
    return _binary(op, xs[0], xs[1], xs[0].dt)
  if op == "const": return _const(step, xs[0])
  if op in ("neg", "relu", "abs", "sqrt", "exp"): return _unary(op, xs[0])
  if op == "where":
    c, a, b = xs
    return Ref(np.where(c.v, a.v, b.v), a.dt, np.where(c.v, a.e, b.e), c.det & np.where(c.v, a.det, b.det))
  if op == "cast": return _cast(xs[0], step.param("dtype"))
  if op in ("sum", "max", "min"): return _reduce(step, xs[0])
  if op == "matmul": return _matmul(xs[0], xs[1])
  if op == "conv2d": return _conv(step, xs[0], xs[1])
  raise KeyError(f"no reference for step {op}")


def reference(program: Program) -> dict[str, Ref]:
  """The Ref of every value of `program` (inputs are exact)."""
  env: dict[str, Ref] = {}
  for i in program.inputs:
    v = i.values.astype(np.float64) if A.is_float(i.dtype) else i.values.astype(bool if i.dtype == "bool" else np.int64)
    env[i.name] = _exact(v, i.dtype)
  for s in program.steps: env[s.out] = step_ref(s, env)
  return env
