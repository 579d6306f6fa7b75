"""Vectorized ALU: every ALU op, CAST and BITCAST on numpy arrays, bit-exact with exec_alu (EXEC.THREAD.value).

Values are stored in numpy's dtype for each scalar type (`NP`), except bfloat16, which is held as its uint16 bits.
`alu(op, dtype, src_dtype)` gives a function of storage arrays (or numpy scalars) that returns a storage array.
The transcendentals (EXP2, LOG2, SIN, float POW) call exec_alu's own float64 reference function per element and round
the results once with numpy (OP.LIBM, OP.ROUND): tests/emu/test_emu_libm.py checks this against exec_alu for every
16-bit input and by property tests for float32/float64. Where numpy's arithmetic is not provably the spec's (float64
MULACC, huge int -> float, integer POW), the function maps exec_alu over the elements: slow, exact by construction."""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from refimpl.dtype import DType, dtypes
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu, float64_reference

NP: dict[DType, type] = {
  dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
  dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
  dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32,
  dtypes.float64: np.float64}
BF16 = dtypes.bfloat16


def kind(dt: DType) -> str:
  return "bool" if dt == dtypes.bool else "int" if dtypes.is_int(dt) else "float"


# ---- bfloat16 and rounding helpers (OP.ROUND, OP.BITCAST.bfloat16)

def bf16_to_f32(bits) -> np.ndarray:
  """The float32 value of bfloat16 bits (exact: bfloat16 is the upper half of binary32)."""
  return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x) -> np.ndarray:
  """float32 values rounded to bfloat16 bits, to nearest even; NaN stays NaN, overflow carries into inf."""
  u = np.asarray(x, np.float32).view(np.uint32)
  r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
  return np.where(np.isnan(np.asarray(x)), np.uint16(0x7FC0), r)


def f64_to_f32_odd(x) -> np.ndarray:
  """float64 -> float32 rounded to odd: a later rounding to <= 22 bits is then exact (no double rounding)."""
  x = np.asarray(x, np.float64)
  y = x.astype(np.float32)
  inexact = (y.astype(np.float64) != x) & np.isfinite(y) & ((y.view(np.uint32) & np.uint32(1)) == 0)
  toward = np.where(y.astype(np.float64) < x, np.float32(np.inf), np.float32(-np.inf))
  return np.where(inexact, np.nextafter(y, toward), y)


def from_f64(x, dt: DType) -> np.ndarray:
  """Exactly rounded float64 -> float dtype `dt` storage (numpy's f64->f32 and f64->f16 casts round once)."""
  if dt == BF16: return f32_to_bf16(f64_to_f32_odd(x))
  return np.asarray(x).astype(NP[dt])


def to_float(x, dt: DType):
  """Storage of a float dtype as a numpy float array (bfloat16 widened to float32, exactly)."""
  return bf16_to_f32(x) if dt == BF16 else x


def _via_f32(fn: Callable) -> Callable:
  """A bfloat16 op computed in float32 and rounded once (exact for + - * / sqrt: 24 >= 2*8+2, OP.ROUND)."""
  return lambda *xs: f32_to_bf16(fn(*(bf16_to_f32(x) for x in xs)))


# ---- the elementwise fallback: exec_alu itself

def _py(dt: DType) -> Callable:
  return {"bool": bool, "int": int, "float": float}[kind(dt)]


def to_storage(values, dt: DType) -> np.ndarray:
  """Python values of `dt` (any array-like, object arrays included) to storage."""
  if kind(dt) == "float": return from_f64(np.asarray(values, dtype=np.float64), dt)   # exact: values are of dt
  if kind(dt) == "int":   # through Python ints: uint64 values past int64 would not survive a float or int64 detour
    return np.asarray(np.asarray(values, dtype=object).tolist(), dtype=NP[dt]).reshape(np.shape(values))
  return np.asarray(values, dtype=np.bool_)


def exec_alu_map(op: Ops, dt: DType, src_dt: DType) -> Callable:
  """exec_alu mapped over the elements (OP.LIBM: the reference values of EXP2, LOG2, SIN and POW)."""
  srcs = [dtypes.bool, src_dt, src_dt] if op is Ops.WHERE else [src_dt] * 3
  def fn(*xs):
    conv = [_py(s) for s in srcs[:len(xs)]]
    ufn = np.frompyfunc(lambda *v: exec_alu(op, dt, [c(a) for c, a in zip(conv, v)], src_dt), len(xs), 1)
    args = [np.asarray(to_float(x, s)) for x, s in zip(xs, srcs)]
    return to_storage(ufn(*args), dt)
  return fn


_MATH = {Ops.EXP2: math.exp2, Ops.LOG2: math.log2, Ops.SIN: math.sin}


def libm_map(op: Ops, dt: DType) -> Callable:
  """OP.LIBM for float `dt`: exec_alu(op, dt, xs) is round_float(float64_reference(op)(*xs), dt), so the reference
  runs per element in float64 (no dtype checks, no per-element rounding) and from_f64 rounds the whole array once.
  from_f64 is the same single round-to-nearest-even as round_float, overflow to inf included (the tests prove it).

  For EXP2, LOG2 and SIN the reference is the math function itself wherever that returns a value, and its own cases
  (OP.EXP2.overflow, OP.LOG2.zero, OP.LOG2.negative, OP.SIN.inf) are inputs where the math function raises (the tests
  check both for every 16-bit float and by property tests): the math function is mapped over the array directly,
  5-10x faster than through the reference's wrapper, and where it raises, element by element with the reference
  for the elements that raise."""
  ref, fast = float64_reference(op), _MATH.get(op)
  def checked(*v):
    try: return fast(*v)
    except (ValueError, OverflowError): return ref(*v)
  def fn(*xs):
    args = np.broadcast_arrays(*(np.asarray(to_float(x, dt), np.float64) for x in xs))
    flat, n = [a.ravel().tolist() for a in args], args[0].size
    if fast is None: vals = np.fromiter(map(ref, *flat), np.float64, count=n)
    else:
      try: vals = np.fromiter(map(fast, *flat), np.float64, count=n)
      except (ValueError, OverflowError): vals = np.fromiter(map(checked, *flat), np.float64, count=n)
    with np.errstate(over="ignore"): return from_f64(vals.reshape(args[0].shape), dt)
  return fn


# ---- ops on one kind of dtype

def _max_float(a, b):
  """OP.MAX on floats: NaN propagates (np.maximum does); MAX(-0.0, +0.0) = +0.0: for equal operands the AND of the
  bits clears the sign unless both are negative (equal nonzero values have equal bits)."""
  a, b = np.asarray(a), np.asarray(b)
  ui = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
  both = (a.view(ui) & b.view(ui)).view(a.dtype)
  return np.where(a == b, both, np.maximum(a, b))


def _by_positive_scalar(a: np.ndarray, b, dt: DType) -> bool:
  """Whether a / b and a % b are numpy's floor_divide and remainder: a scalar divisor > 0 (numpy divides by a scalar
  through a multiply, libdivide, about 50x faster than by an array) and no negative dividend (where floor and
  truncation part). Index arithmetic, divisions of non-negative indices by constants, is nearly always this case."""
  return np.ndim(b) == 0 and b > 0 and (dtypes.is_unsigned(dt) or a.size == 0 or a.min() >= 0)


def _cdiv(dt: DType) -> Callable:
  """OP.CDIV: truncate toward zero; x/0 = -1 (all bits set); min/-1 = min (wraps)."""
  t = NP[dt]
  def cdiv(a, b):
    a = np.asarray(a, t)
    if _by_positive_scalar(a, b, dt): return np.floor_divide(a, t(b))
    b = np.asarray(b, t)
    if dtypes.is_unsigned(dt):
      return np.where(b == 0, t(-1 & ((1 << dt.bits) - 1)), np.floor_divide(a, np.where(b == 0, t(1), b)))
    safe = np.where((b == 0) | (b == -1), t(1), b)
    q = np.floor_divide(a, safe)
    q = q + ((q * safe != a) & ((a < 0) != (safe < 0))).astype(t)   # floor -> trunc where inexact and signs differ
    return np.where(b == 0, t(-1), np.where(b == -1, np.negative(a), q))
  return cdiv


def _cmod(dt: DType) -> Callable:
  """OP.CMOD: remainder with the dividend's sign (C fmod on ints); x%0 = x; min%-1 = 0."""
  t = NP[dt]
  def cmod(a, b):
    a = np.asarray(a, t)
    if _by_positive_scalar(a, b, dt):   # a - (a // b) * b, in place: the divide by a scalar is the fast one
      q = np.floor_divide(a, t(b))
      if q.ndim == 0: return a - q * t(b)   # numpy hands a 0-d result back as a scalar, which out= cannot take
      q *= t(b)
      return np.subtract(a, q, out=q)
    b = np.asarray(b, t)
    bad = (b == 0) | (b == -1) if not dtypes.is_unsigned(dt) else (b == 0)
    r = np.fmod(a, np.where(bad, t(1), b))
    return np.where(b == 0, a, r)   # b == -1 gives 0 from fmod(a, 1)
  return cmod


def _shift(dt: DType, left: bool) -> Callable:
  """OP.SHL / OP.SHR: the count's bits read as unsigned, modulo the width; SHL wraps (done in the unsigned type so
  no signed overflow happens), SHR is arithmetic for signed and logical for unsigned (numpy's >> is both)."""
  t, ut = NP[dt], {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[dt.bits]
  def shift(a, b):
    a, b = np.asarray(a, t), np.asarray(b, t)
    cnt = b.view(ut) & ut(dt.bits - 1)
    if left: return np.left_shift(a.view(ut), cnt).view(t)
    return np.right_shift(a, cnt.astype(t))
  return shift


def _mulacc_float(dt: DType) -> Callable:
  """OP.MULACC.fused for float16, bfloat16 and float32: the float64 product of two <= 24-bit floats is exact; the
  sum is taken rounded to odd (TwoSum gives the rounding error, a nonzero error with an even result moves it one
  step toward the exact value), and rounding that to <= 24 bits is then the single rounding of the exact a*b+c.
  float64 has no exact detour here: it maps exec_alu."""
  if dt == dtypes.float64: return exec_alu_map(Ops.MULACC, dt, dt)
  def mulacc(a, b, c):
    a, b, c = (to_float(x, dt).astype(np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    fix = np.isfinite(s) & (err != 0) & ~np.isnan(err) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    if dt == dtypes.float32: return s.astype(np.float32)
    if dt == dtypes.float16: return s.astype(np.float16)   # numpy rounds float64 -> float16 directly, once
    return f32_to_bf16(f64_to_f32_odd(s))
  return mulacc


def _native(op: Ops, dt: DType) -> Callable | None:
  """The numpy form of `op` on operands of `dt`, or None where there is none that is provably exact."""
  k, t = kind(dt), NP[dt]
  if op is Ops.WHERE: return lambda c, a, b: np.where(c, a, b)
  if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
    f = {Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal}[op]
    return (lambda a, b: f(bf16_to_f32(a), bf16_to_f32(b))) if dt == BF16 else f
  if k == "bool":
    return {Ops.ADD: np.logical_or, Ops.MUL: np.logical_and, Ops.MAX: np.logical_or, Ops.AND: np.logical_and,
            Ops.OR: np.logical_or, Ops.XOR: np.logical_xor}.get(op)
  if k == "int":
    simple = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.MAX: np.maximum,
              Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor}
    if op in simple: f = simple[op]; return lambda a, b: f(np.asarray(a, t), np.asarray(b, t))
    if op is Ops.NEG: return lambda a: np.negative(np.asarray(a, t))
    if op is Ops.MULACC: return lambda a, b, c: np.add(np.multiply(np.asarray(a, t), b), np.asarray(c, t))
    if op is Ops.CDIV: return _cdiv(dt)
    if op is Ops.CMOD: return _cmod(dt)
    if op in (Ops.SHL, Ops.SHR): return _shift(dt, op is Ops.SHL)
    return None   # POW: exec_alu
  # floats: IEEE ops that numpy rounds once (float16 goes through float32, exact by OP.ROUND's 2p+2 argument)
  if op is Ops.MULACC: return _mulacc_float(dt)
  if op is Ops.NEG and dt == BF16: return lambda a: np.asarray(a, np.uint16) ^ np.uint16(0x8000)
  if op is Ops.MAX and dt == BF16: return lambda a, b: f32_to_bf16(_max_float(bf16_to_f32(a), bf16_to_f32(b)))
  with np.errstate(all="ignore"):
    one = t(1) if dt != BF16 else np.float32(1)
  fl = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.divide, Ops.MAX: _max_float,
        Ops.SQRT: np.sqrt, Ops.TRUNC: np.trunc, Ops.NEG: np.negative,
        Ops.RECIPROCAL: lambda x: np.divide(one, x)}.get(op)
  if fl is None: return None   # EXP2, LOG2, SIN, POW: OP.LIBM reference values (libm_map)
  return _via_f32(fl) if dt == BF16 else fl


# ---- CAST and BITCAST

_TWO63, _TWO64 = 2.0 ** 63, 2.0 ** 64


def _cast(src: DType, dst: DType) -> Callable:
  """OP.CAST, as dtypes.as_const converts."""
  ks, kd, t = kind(src), kind(dst), NP[dst]
  if src == dst: return lambda x: np.asarray(x, t)
  if kd == "bool":   # OP.CAST.to-bool: x != 0, NaN -> True
    if src == BF16: return lambda x: (np.asarray(x, np.uint16) & np.uint16(0x7FFF)) != 0
    return lambda x: np.asarray(x) != 0
  if ks == "bool":   # OP.CAST.from-bool; bfloat16 1.0 is 0x3F80
    if dst == BF16: return lambda x: np.where(x, np.uint16(0x3F80), np.uint16(0))
    return lambda x: np.asarray(x).astype(t)
  if ks == "int" and kd == "int": return lambda x: np.asarray(x).astype(t)   # OP.CAST.wrap: numpy wraps int casts
  if ks == "int":   # OP.CAST.int-to-float, rounded once from the exact int
    if dst == dtypes.float64: return lambda x: np.asarray(x).astype(np.float64)
    if src.bits < 53: return lambda x: from_f64(np.asarray(x).astype(np.float64), dst)
    slow = exec_alu_map(Ops.CAST, dst, src)
    def big_int(x):   # 64-bit ints past 2**53 are not exact in float64: exec_alu for those elements
      x = np.asarray(x)
      out = from_f64(x.astype(np.float64), dst)
      big = (x > 2 ** 53) | (x < -2 ** 53) if src == dtypes.int64 else x > 2 ** 53
      if big.any(): out = np.array(out); out[big] = slow(x[big])
      return out
    return big_int
  xf = (lambda x: bf16_to_f32(x).astype(np.float64)) if src == BF16 else (lambda x: np.asarray(x).astype(np.float64))
  if kd == "float":   # OP.CAST.float-to-float
    if src == BF16: return lambda x: from_f64(xf(x), dst)
    if dst == BF16: return lambda x: f32_to_bf16(f64_to_f32_odd(np.asarray(x).astype(np.float64)))
    return lambda x: np.asarray(x).astype(t)   # numpy rounds once between IEEE formats
  lo, hi = float(dtypes.min(dst)), float(dtypes.max(dst))
  def f2i(x):   # OP.CAST.truncate, OP.CAST.saturate, OP.CAST.nan
    v = np.trunc(xf(x))
    nan = np.isnan(v)
    v = np.where(nan, 0.0, v)
    if dst.bits < 64: return np.clip(v, lo, hi).astype(t)
    top = _TWO63 if dst == dtypes.int64 else _TWO64   # 2**63 - 1 / 2**64 - 1 are not floats: compare with 2**k
    out = np.where(v >= top, 0, np.where(v < lo, 0, v)).astype(t)
    out = np.where(v >= top, t(dtypes.max(dst)), out)
    return np.where(v < lo, t(dtypes.min(dst)), out)
  return f2i


_CANON_NAN = {dtypes.float16: 0x7E00, dtypes.bfloat16: 0x7FC0, dtypes.float32: 0x7FC00000,
              dtypes.float64: 0x7FF8000000000000}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def to_bits(x, dt: DType) -> np.ndarray:
  """The unsigned bit patterns of values of `dt`; NaN gives the canonical NaN (OP.BITCAST.nan), bool gives 0/1."""
  x = np.asarray(x, NP[dt])
  ut = _UINT[dt.itemsize]
  if kind(dt) != "float": return x.astype(np.uint8) if dt == dtypes.bool else x.view(ut)
  nan = np.isnan(to_float(x, dt))
  return np.where(nan, ut(_CANON_NAN[dt]), x.view(ut))


def from_bits(bits, dt: DType) -> np.ndarray:
  if dt == dtypes.bool: return np.asarray(bits) != 0   # OP.BITCAST.bool
  bits = np.asarray(bits)   # a 0-d value stays 0-d: ascontiguousarray would make it 1-d
  return (bits if bits.ndim == 0 else np.ascontiguousarray(bits)).view(NP[dt])


def _bitcast(src: DType, dst: DType) -> Callable:
  """OP.BITCAST on scalars of equal itemsize (OP.BITCAST.size)."""
  return lambda x: from_bits(to_bits(x, src), dst)


@functools.cache
def alu(op: Ops, dt: DType, src_dt: DType | None = None) -> Callable:
  """The vectorized form of exec_alu(op, dt, ..., src_dt) on scalar dtypes: a function of storage arrays."""
  src_dt = dt if src_dt is None else src_dt
  if op is Ops.CAST: return _cast(src_dt, dt)
  if op is Ops.BITCAST: return _bitcast(src_dt, dt)
  fn = _native(op, src_dt)
  if fn is not None: return fn
  if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW) and kind(src_dt) == "float": return libm_map(op, src_dt)
  return exec_alu_map(op, dt, src_dt)


# ---- folds: a reduction's left-to-right order over an iteration axis (EXEC.THREAD.reduce)

def _accumulate_exact(op: Ops, dt: DType) -> bool:
  """Whether ufunc.accumulate along an axis gives exec_alu's left-to-right fold for `op` on `dt` (tests check it)."""
  return kind(dt) == "float" and dt != BF16 and op in (Ops.ADD, Ops.MUL)


def fold(op: Ops, dt: DType, init, vals: np.ndarray) -> np.ndarray:
  """((init op v[:,0]) op v[:,1]) op ... for `vals` of shape (threads, iterations), per thread.

  Integer ADD/MUL/MAX and bool ops are associative (wrapping arithmetic is arithmetic mod 2**n) and float MAX is a
  semilattice (NaN absorbs, -0.0 < +0.0), so numpy's reductions give the same answer in any order. Float ADD and MUL
  are the sequential fold itself: with many threads and few iterations one numpy op per iteration over all threads
  (ufunc.accumulate along the short axis loops a few elements at a time, 20x slower), otherwise ufunc.accumulate
  along the iterations, whose definition is the sequential fold; bfloat16 ADD/MUL loop over the iterations."""
  t = NP[dt]
  n_threads, n_iter = vals.shape
  init = np.broadcast_to(np.asarray(init, t), (n_threads,))
  by_iteration = n_iter * 8 <= n_threads   # rows = iterations, each a contiguous array over the threads
  if by_iteration and _accumulate_exact(op, dt):
    fn, rows, acc = np.add if op is Ops.ADD else np.multiply, vals.T.astype(t, copy=False), init.copy()
    for i in range(n_iter): acc = fn(acc, rows[i])
    return acc
  if by_iteration: full, ax = np.concatenate([init[None, :], vals.T.astype(t, copy=False)], axis=0), 0
  else: full, ax = np.concatenate([init[:, None], vals.astype(t, copy=False)], axis=1), 1
  k = kind(dt)
  if k == "bool": return (np.any if op in (Ops.ADD, Ops.MAX) else np.all)(full, axis=ax)
  if k == "int":
    uf = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}[op]
    return uf.reduce(full, axis=ax, dtype=t)
  if op is Ops.MAX:
    f = to_float(full, dt)
    r = np.maximum.reduce(f, axis=ax)
    pos_zero = ((f == 0) & ~np.signbit(f)).any(axis=ax)
    r = np.where((r == 0) & pos_zero, np.zeros_like(r), r)
    return f32_to_bf16(r) if dt == BF16 else r
  if _accumulate_exact(op, dt):
    uf = np.add if op is Ops.ADD else np.multiply
    return uf.accumulate(full, axis=1)[:, -1]
  fn = alu(op, dt)
  rows = full if by_iteration else full.T
  acc = rows[0]
  for i in range(1, rows.shape[0]): acc = fn(acc, rows[i])
  return acc
