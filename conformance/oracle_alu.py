"""A second oracle for the ALU ops (DESIGN.md, "Four oracles"; issue 16, item 7) that shares no code with the one
under test: it does not import refimpl.uop.semantics (exec_alu, which constant folding uses), nor the emulator.

`expected(op, out, operands)` gives `(values, defined)`: the result of ALU op `op` (an `Ops` name) on equal-shape
operands `[(array, dtype name), ...]` with result dtype `out`, as numpy arrays in conformance storage
(`conformance.strategies.NP`: bfloat16 held as float32), and a bool mask of the elements this oracle defines. Where
it does not define a value, spec/ops.md's edge-case tables (OP.TABLES) are the oracle, and
tests/test_oracle_alu.py checks that each such region (`UNDEFINED`) has table rows.

Where the values come from:
- integers: numpy's fixed-width arithmetic, which wraps (OP.*.wrap), for + - * NEG MAX, bitwise ops, comparisons,
  int -> int casts, MULACC and POW with a non-negative exponent; C's truncating `/` and `%` (numpy `fmod`) where C
  defines them (no division by zero, no INT_MIN / -1); shifts by counts inside `[0, width)`;
- float16, float32, float64: numpy's IEEE arithmetic (+ - * / sqrt trunc neg, comparisons), which rounds once, with
  OP.MAX's NaN and signed-zero rules applied on top of np.maximum; bfloat16: float32 arithmetic on the exact float32
  values, rounded once to bfloat16 by torch (exact for + - * / sqrt by OP.ROUND's 2p+2 argument);
- MULACC on floats and conversions to bfloat16 or from integers to floats: the exact rational result
  (fractions.Fraction) rounded to nearest, ties to even, by comparing it with the neighbouring values of the format;
- EXP2, LOG2, SIN and POW on floats: only their exact points (special values, powers of two, tiny arguments of SIN,
  C99's pow special cases); other values are bounded by the accuracy contract against torch, not by this oracle.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np
import torch

from conformance.strategies import NP

__all__ = ["expected", "UNDEFINED", "FLOATS", "INTS"]

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
_NATIVE = {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32, "float64": np.float64}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_BITS = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16, "bfloat16": 16, "int32": 32,
         "uint32": 32, "float32": 32, "int64": 64, "uint64": 64, "float64": 64}
_MANT = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}   # stored mantissa bits


def _signed(dt: str) -> bool: return dt.startswith("int")


def _imin(dt: str) -> int: return -(1 << (_BITS[dt] - 1)) if _signed(dt) else 0


def _imax(dt: str) -> int: return (1 << (_BITS[dt] - 1)) - 1 if _signed(dt) else (1 << _BITS[dt]) - 1


# ---- bfloat16 through torch, and exact rounding of rationals

def _to_bf16(x) -> np.ndarray:
  """float32 (or narrower) values rounded once to bfloat16 by torch, returned as float32."""
  x = np.asarray(x, np.float32)
  t = torch.from_numpy(np.ascontiguousarray(x))
  return t.to(torch.bfloat16).to(torch.float32).numpy().reshape(x.shape)   # ascontiguousarray makes 0-d 1-d


def _round_native(x: np.ndarray, dt: str) -> np.ndarray:
  """A float32 result of float32 arithmetic on values of `dt` as a value of `dt` (bfloat16: rounded by torch)."""
  return _to_bf16(x) if dt == "bfloat16" else np.asarray(x).astype(NP[dt])


def _step(v: float, dt: str, up: bool) -> float:
  """The neighbour of value `v` of `dt` toward +inf (up) or -inf."""
  if dt == "bfloat16":
    t = torch.tensor([v], dtype=torch.bfloat16)
    return float(torch.nextafter(t, torch.tensor([math.inf if up else -math.inf], dtype=torch.bfloat16))[0])
  t = _NATIVE[dt]
  with np.errstate(over="ignore"):
    return float(np.nextafter(t(v), t(math.inf if up else -math.inf)))


def _largest(dt: str) -> float:
  return float(torch.finfo(torch.bfloat16).max) if dt == "bfloat16" else float(np.finfo(_NATIVE[dt]).max)


def _mantissa_odd(v: float, dt: str) -> bool:
  if dt == "bfloat16": return bool((np.array([v], np.float32).view(np.uint32)[0] >> 16) & 1)
  return bool(np.array([v], _NATIVE[dt]).view(_UINT[_BITS[dt] // 8])[0] & 1)


def nearest(fr: Fraction, dt: str) -> float:
  """The nonzero rational `fr` rounded to float dtype `dt`: nearest, ties to even, beyond the largest finite value
  plus half its ulp an infinity, a nonzero value that rounds to zero keeps its sign (OP.ROUND)."""
  big, sign = _largest(dt), (1.0 if fr > 0 else -1.0)
  half_ulp = (Fraction(big) - Fraction(_step(big, dt, False))) / 2
  if abs(fr) >= Fraction(big) + half_ulp: return sign * math.inf   # a tie goes to inf: max is odd
  try: guess = float(fr)                       # float64, rounded once; then at most one more step away in `dt`
  except OverflowError: guess = sign * big
  guess = float(_to_bf16([guess])[0]) if dt == "bfloat16" else float(np.asarray(guess).astype(_NATIVE[dt]))
  if math.isinf(guess): guess = sign * big
  cands = {c for c in (guess, _step(guess, dt, True), _step(guess, dt, False)) if math.isfinite(c)}
  best = min(cands, key=lambda c: (abs(Fraction(c) - fr), _mantissa_odd(c, dt)))
  return sign * 0.0 if best == 0 else best


# ---- the ops

def _elementwise(fn: Callable, arrays: list[np.ndarray], out: str) -> tuple[np.ndarray, np.ndarray]:
  """fn(*python scalars) -> value or None (undefined), per element."""
  shape = np.broadcast_shapes(*(a.shape for a in arrays))
  flat = [np.broadcast_to(a, shape).ravel() for a in arrays]
  vals, ok = [], []
  for i in range(int(np.prod(shape, dtype=np.int64))):
    v = fn(*(f[i].item() for f in flat))
    ok.append(v is not None)
    vals.append(0 if v is None else v)
  want = np.array(vals, dtype=np.float64 if out in FLOATS else object).astype(NP[out]) if vals else \
    np.zeros(0, NP[out])
  return want.reshape(shape), np.array(ok, bool).reshape(shape)


def _float_binary(op: str, dt: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  a, b = a.astype(_NATIVE[dt]), b.astype(_NATIVE[dt])
  if op == "MAX":
    r = np.maximum(a, b)                         # NaN propagates (OP.MAX.nan)
    both_zero = (a == 0) & (b == 0)              # OP.MAX.zero: -0.0 only when both are -0.0
    r = np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0).astype(r.dtype), r)
    return _round_native(r, dt)
  f = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FDIV": np.divide}[op]
  return _round_native(f(a, b), dt)


def _int_binary(op: str, dt: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  t = NP[dt]
  a, b = a.astype(t), b.astype(t)
  every = np.ones(a.shape, bool)
  simple = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MAX": np.maximum, "AND": np.bitwise_and,
            "OR": np.bitwise_or, "XOR": np.bitwise_xor}
  if op in simple: return simple[op](a, b), every
  if op in ("CDIV", "CMOD"):
    defined = (b != 0) & ~((a == t(_imin(dt))) & (b == t(-1))) if _signed(dt) else b != 0
    safe = np.where(defined, b, t(1))
    r = np.fmod(a, safe)                         # C's %: the dividend's sign
    if op == "CMOD": return r, defined
    return np.floor_divide(a - r, safe), defined   # a - r is an exact multiple of b: floor is trunc
  if op in ("SHL", "SHR"):
    w = _BITS[dt]
    defined = (b >= 0) & (b < w) if _signed(dt) else b < w
    cnt = np.where(defined, b, t(0))
    ut = _UINT[w // 8]
    if op == "SHL": return np.left_shift(a.view(ut), cnt.astype(ut)).view(t), defined   # unsigned: no overflow UB
    return np.right_shift(a, cnt), defined       # arithmetic for signed, logical for unsigned
  if op == "POW":
    defined = b >= 0
    return np.power(a, np.where(defined, b, t(0))), defined   # repeated wrapping products
  raise KeyError(op)


def _bool_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  a, b = a.astype(bool), b.astype(bool)
  return {"ADD": np.logical_or, "MUL": np.logical_and, "MAX": np.logical_or, "AND": np.logical_and,
          "OR": np.logical_or, "XOR": np.logical_xor}[op](a, b)


def _exp2(x: float, dt: str):
  if math.isnan(x): return math.nan
  if math.isinf(x): return math.inf if x > 0 else 0.0
  if x != int(x): return None                   # only exact powers of two
  n = int(x)
  return nearest(Fraction(2) ** n, dt) if abs(n) < 4000 else (math.inf if n > 0 else 0.0)


def _log2(x: float, dt: str):
  if math.isnan(x) or x < 0: return math.nan
  if x == 0: return -math.inf
  if math.isinf(x): return math.inf
  m, e = math.frexp(x)
  return float(e - 1) if m == 0.5 else None      # log2 of a power of two is an integer


def _sin(x: float, dt: str):
  if math.isnan(x) or math.isinf(x): return math.nan
  if abs(x) < 2.0 ** -(_MANT[dt] + 1): return x   # |x - sin x| < x**3/6, far below half an ulp of x
  return None


def _is_odd_int(y: float) -> bool: return math.isfinite(y) and y == int(y) and int(y) % 2 == 1


def _pow(x: float, y: float, dt: str):
  """C99 Annex F pow at its special points, and exact powers of two with integer exponents."""
  if y == 0 or x == 1: return 1.0
  if math.isnan(x) or math.isnan(y): return math.nan
  if x == -1 and math.isinf(y): return 1.0
  if math.isinf(y):
    return (math.inf if abs(x) > 1 else 0.0) if y > 0 else (0.0 if abs(x) > 1 else math.inf)
  if x == 0:
    if y < 0: return math.copysign(math.inf, x) if _is_odd_int(y) else math.inf
    return math.copysign(0.0, x) if _is_odd_int(y) else 0.0
  if math.isinf(x):
    if x > 0: return math.inf if y > 0 else 0.0
    return (-math.inf if y > 0 else -0.0) if _is_odd_int(y) else (math.inf if y > 0 else 0.0)
  if x < 0 and y != int(y): return math.nan
  m, e = math.frexp(abs(x))
  if m == 0.5 and y == int(y) and abs((e - 1) * y) < 4000:   # (±2**k)**n = ±2**(k n), rounded once
    v = nearest(Fraction(2) ** int((e - 1) * y), dt)
    return -v if x < 0 and _is_odd_int(y) else v
  return None


def _fma(a: float, b: float, c: float, dt: str):
  """IEEE fma: NaN operands, inf*0 and inf - inf give NaN; the exact a*b+c rounded once (OP.MULACC)."""
  if math.isnan(a) or math.isnan(b) or math.isnan(c): return math.nan
  if math.isinf(a) or math.isinf(b):
    if a == 0 or b == 0: return math.nan
    p = math.copysign(math.inf, a) * math.copysign(1.0, b)
    return math.nan if math.isinf(c) and c != p else p
  if math.isinf(c): return c
  exact = Fraction(a) * Fraction(b) + Fraction(c)
  if exact == 0:   # IEEE's sum of signed zeros: -0.0 only for (-0) + (-0)
    prod_neg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    return -0.0 if (a == 0 or b == 0) and prod_neg and math.copysign(1, c) < 0 else 0.0
  return nearest(exact, dt)


def _cast(x, src: str, dst: str):
  if dst == "bool": return x != 0               # NaN != 0
  if src == "bool": x = int(x)
  if dst in FLOATS:
    if src in FLOATS and (x != x or math.isinf(x) or x == 0): return x
    return nearest(Fraction(x), dst) if x != 0 else 0.0
  if src in FLOATS:                              # float -> int: only where truncation lands in range
    if x != x or math.isinf(x): return None
    t = int(x)
    return t if _imin(dst) <= t <= _imax(dst) else None
  return (x - _imin(dst)) % (1 << _BITS[dst]) + _imin(dst)   # int -> int: two's complement wrap


def _bits(x: np.ndarray, dt: str) -> np.ndarray:
  """Unsigned bit patterns; bool is one byte, bfloat16 the upper half of its float32."""
  if dt == "bool": return x.astype(np.uint8)
  if dt == "bfloat16": return (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
  return np.ascontiguousarray(x.astype(NP[dt])).view(_UINT[_BITS[dt] // 8]).reshape(x.shape)


def _from_bits(u: np.ndarray, dt: str) -> np.ndarray:
  if dt == "bool": return u != 0
  if dt == "bfloat16": return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)
  return np.ascontiguousarray(u).view(NP[dt]).reshape(np.shape(u))


def expected(op: str, out: str, operands: list[tuple[np.ndarray, str]]) -> tuple[np.ndarray, np.ndarray]:
  """(values, defined): this oracle's result of ALU op `op` with result dtype `out`, and where it defines one."""
  arrays = [np.asarray(a) for a, _ in operands]
  dts = [d for _, d in operands]
  src = dts[-1]
  shape = np.broadcast_shapes(*(a.shape for a in arrays))
  arrays = [np.broadcast_to(a, shape) for a in arrays]
  every = np.ones(shape, bool)
  with np.errstate(all="ignore"):
    if op == "WHERE": return np.where(arrays[0].astype(bool), arrays[1], arrays[2]).astype(NP[out]), every
    if op in ("CMPLT", "CMPNE", "CMPEQ"):
      a, b = (x.astype(np.float64 if src in FLOATS else NP[src]) for x in arrays)
      return {"CMPLT": np.less, "CMPNE": np.not_equal, "CMPEQ": np.equal}[op](a, b), every
    if op == "BITCAST":
      defined = ~np.isnan(arrays[0].astype(np.float64)) if src in FLOATS else every   # NaN bits: OP.BITCAST.nan
      return _from_bits(_bits(np.where(defined, arrays[0], 0), src), out).astype(NP[out]), defined
    if op == "CAST":
      return _elementwise(lambda x: _cast(x, src, out), arrays, out)
    if src == "bool": return _bool_binary(op, *arrays), every
    if src in INTS:
      t = NP[src]
      if op == "NEG": return np.negative(arrays[0].astype(t)), every
      if op == "MULACC":
        a, b, c = (v.astype(t) for v in arrays)
        return np.add(np.multiply(a, b), c), every
      return _int_binary(op, src, *arrays)
    # floats
    x = [a.astype(_NATIVE[src]) for a in arrays]
    unary = {"NEG": np.negative, "TRUNC": np.trunc, "SQRT": np.sqrt, "RECIPROCAL": lambda v: np.divide(1, v)}
    if op in unary: return _round_native(unary[op](x[0]), src), every
    if op in ("ADD", "SUB", "MUL", "FDIV", "MAX"): return _float_binary(op, src, *x), every
    special = {"EXP2": _exp2, "LOG2": _log2, "SIN": _sin, "POW": _pow, "MULACC": _fma}[op]
    return _elementwise(lambda *v: special(*v, src), arrays, out)


# Regions where numpy, torch and C leave the result undefined, so that OP.TABLES rows are the only oracle
# (issue 16, item 7); tests/test_oracle_alu.py checks that each has a row. op -> {region: predicate(operands, dtype)}
UNDEFINED: dict[str, dict[str, Callable[..., bool]]] = {
  "CDIV": {"zero": lambda a, b, dt: b == 0, "overflow": lambda a, b, dt: _signed(dt) and a == _imin(dt) and b == -1},
  "CMOD": {"zero": lambda a, b, dt: b == 0, "overflow": lambda a, b, dt: _signed(dt) and a == _imin(dt) and b == -1},
  "SHL": {"count >= width": lambda a, b, dt: b >= _BITS[dt], "negative count": lambda a, b, dt: b < 0},
  "SHR": {"count >= width": lambda a, b, dt: b >= _BITS[dt], "negative count": lambda a, b, dt: b < 0},
  "POW": {"negative exponent": lambda a, b, dt: dt in INTS and b < 0},
  "CAST": {"nan to int": lambda x, src, dst: src in FLOATS and dst in INTS and x != x,
           "inf to int": lambda x, src, dst: src in FLOATS and dst in INTS and math.isinf(x),
           "out of range to int": lambda x, src, dst: src in FLOATS and dst in INTS and math.isfinite(x) and
           not _imin(dst) <= int(x) <= _imax(dst)},
  "BITCAST": {"nan bits": lambda x, src, dst: src in FLOATS and x != x},
}
