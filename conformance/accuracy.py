"""The accuracy contract of spec/accuracy.md as code: read the bound table, round references, measure errors.

An op's result is compared with a *reference*: torch in float64 on the same inputs, rounded once to the output dtype
(ACC.MEASURE.reference). A bound is an expression such as `2*ulp + 4*n*eps*S` written in the table of
spec/accuracy.md (ACC.TABLE); `check` evaluates it elementwise and says which elements break it
(ACC.MEASURE.bound). Exact bounds compare bit for bit, NaN payloads aside (ACC.MEASURE.exact).
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conformance.spec_tables import tables

__all__ = ["ACCURACY_SPEC", "Bound", "Verdict", "bound", "bound_table", "check", "dtype_short", "eps", "round_to",
           "tolerance_keys", "ulp", "ulp_distance"]

ACCURACY_SPEC = Path(__file__).resolve().parent.parent / "spec" / "accuracy.md"
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
_MANT = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}   # stored mantissa bits (DT.FLOAT)
_EMAX = {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023}
_VARS = ("ulp", "eps", "n", "S", "x")   # ACC.MEASURE.bound: the names a bound may use


def dtype_short(dtype: str) -> str:
  """'float32' -> 'f32' (the suffix of per-dtype ACC clauses); integer and bool dtypes -> 'int'."""
  return _SHORT.get(dtype, "int")


def eps(dtype: str) -> float:
  """Machine epsilon of a float dtype: the gap between 1 and the next value (2**-mantissa_bits)."""
  return 2.0 ** -_MANT[dtype]


# ---------------------------------------------------------------------------------------------------- rounding

def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
  """float64 -> float32 rounded to odd: truncate toward zero, then set the last bit if anything was cut off. Rounding
  that once more to a format with at least two bits fewer is then the correct rounding of `x` (DT.ROUND)."""
  with np.errstate(over="ignore", invalid="ignore"):
    f = x.astype(np.float32)
    too_far = np.isfinite(x) & (np.abs(f.astype(np.float64)) > np.abs(x))
    f = np.where(too_far, np.nextafter(f, np.float32(0)), f)
    inexact = np.isfinite(x) & (f.astype(np.float64) != x)
  bits = f.view(np.uint32) | inexact.astype(np.uint32)
  return bits.view(np.float32)


def _f32_to_bf16(f: np.ndarray) -> np.ndarray:
  """float32 -> bfloat16 values (as float32), round to nearest even."""
  bits = f.view(np.uint32).astype(np.uint64)
  rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  return np.where(np.isnan(f), np.float32(np.nan), rounded)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
  """float64 values rounded once to `dtype` (DT.ROUND), returned as float64. bfloat16 goes through a round-to-odd
  float32, so there is no double rounding; numpy's float16 and float32 conversions round directly."""
  x = np.asarray(x, np.float64)
  with np.errstate(over="ignore", invalid="ignore"):
    if dtype == "float64": return x.copy()
    if dtype == "float32": return x.astype(np.float32).astype(np.float64)
    if dtype == "float16": return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16": return _f32_to_bf16(_round_to_odd_f32(x)).astype(np.float64)
  raise ValueError(f"round_to: {dtype} is not a float dtype")


def ulp(ref: np.ndarray, dtype: str) -> np.ndarray:
  """ACC.MEASURE.ulp: the gap between |ref| and the next larger magnitude of `dtype`; at and beyond the largest finite
  value the gap it would have if the exponent range went on; 2**(emin - mantissa) (the smallest subnormal) near 0."""
  a = np.abs(np.asarray(ref, np.float64))
  m, emax = _MANT[dtype], _EMAX[dtype]
  emin = 1 - emax
  with np.errstate(divide="ignore", invalid="ignore"):
    e = np.floor(np.log2(np.where((a > 0) & np.isfinite(a), a, 1.0)))
  e = np.clip(e, emin, emax)
  return np.where(np.isfinite(a), np.ldexp(1.0, (e - m).astype(np.int64)), np.ldexp(1.0, emax - m))


def ulp_distance(got: np.ndarray, ref: np.ndarray, dtype: str) -> np.ndarray:
  """|got - ref| in units of ulp(ref) (0 where both are the same special value, inf where one is NaN or infinite
  and the other is not)."""
  got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
  with np.errstate(invalid="ignore", over="ignore"):
    d = np.abs(got - ref) / ulp(ref, dtype)
  same_special = (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
  return np.where(same_special, 0.0, np.where(np.isnan(d), np.inf, d))


# ---------------------------------------------------------------------------------------------------- bounds

@dataclass(frozen=True)
class Bound:
  """One row of ACC.TABLE: the clause (e.g. ACC.EXP2.f32) and the bound: `exact` (bit for bit), `equal` (the same
  value, the sign of a zero aside) or an expression (ACC.MEASURE.bound)."""
  clause: str
  expr: str
  exact: bool
  signed_zero: bool = True   # whether -0.0 and +0.0 differ (exact: yes; equal: no)

  def uses(self, name: str) -> bool:
    """Whether the expression refers to `name` (S, n, ...): S costs a Jacobian, so callers compute it only then."""
    return not self.exact and name in {n.id for n in ast.walk(ast.parse(self.expr, mode="eval"))
                                       if isinstance(n, ast.Name)}

  def evaluate(self, **values) -> np.ndarray:
    """The bound's value for the given variables (numpy arrays or numbers; ACC.MEASURE.bound)."""
    if self.exact: return np.asarray(0.0)
    return _compiled(self.expr)(**{k: values.get(k, 0.0) for k in _VARS})


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub,
            ast.Constant, ast.Name, ast.Load)


@functools.cache
def _compiled(expr: str):
  """A bound expression as a function of ulp, eps, n, S and x. Only numbers, those names and + - * / ** are allowed, so
  the table stays arithmetic a reader can check by hand."""
  tree = ast.parse(expr, mode="eval")
  for node in ast.walk(tree):
    if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Name) and node.id not in _VARS):
      raise ValueError(f"ACC.TABLE: {expr!r} uses {ast.dump(node)[:40]}, only numbers, {_VARS} and + - * / **")
  code = compile(tree, f"<bound {expr}>", "eval")
  return lambda **v: eval(code, {"__builtins__": {}}, v)   # noqa: S307 (checked above: arithmetic only)


def _parse_bound(clause: str, cell: str) -> Bound:
  text = cell.strip().strip("`").strip()
  if text == "exact": return Bound(clause, text, True)
  if text == "equal": return Bound(clause, text, True, signed_zero=False)
  _compiled(text)   # reject anything that is not a bound expression now, not when a test first needs it
  return Bound(clause, text, False)


@functools.cache
def bound_table(path: str | Path = ACCURACY_SPEC) -> dict[str, Bound]:
  """Every row of the ACC.TABLE tables in spec/accuracy.md: clause ID -> Bound."""
  out: dict[str, Bound] = {}
  for _, header, rows in tables(path):
    if header[:2] != ("clause", "bound"): continue
    for row in rows:
      clause = row[0].strip("`")
      if clause in out: raise ValueError(f"ACC.TABLE: {clause} has two rows")
      out[clause] = _parse_bound(clause, row[1])
  return out


def bound(key: str, dtype: str) -> Bound:
  """The bound of tolerance key `key` for results of `dtype`: the row ACC.<key>.<f16|bf16|f32|f64|int>, else the
  dtype-independent row ACC.<key>. Integer and bool results are always exact (ACC.INT)."""
  table = bound_table()
  if dtype not in _FLOATS: return table["ACC.INT"]
  for clause in (f"ACC.{key}.{dtype_short(dtype)}", f"ACC.{key}"):
    if clause in table: return table[clause]
  raise KeyError(f"spec/accuracy.md has no row ACC.{key}.{dtype_short(dtype)} nor ACC.{key}")


def tolerance_keys(dtype: str) -> list[str]:
  """The tolerance keys `bound` accepts for results of `dtype`: KEY of every row ACC.KEY.<dtype suffix> or ACC.KEY
  (integer and bool results are always ACC.INT, so any key of the table does for them)."""
  short = {f".{s}" for s in _SHORT.values()}
  keys = set()
  for clause in bound_table():
    key = clause.removeprefix("ACC.")
    stem, dot, suffix = key.rpartition(".")
    if dot and f".{suffix}" in short:
      if dtype not in _FLOATS or suffix == dtype_short(dtype): keys.add(stem)
    else: keys.add(key)
  return sorted(keys)


# ---------------------------------------------------------------------------------------------------- checking

@dataclass
class Verdict:
  """The outcome of comparing one result with its reference: `bad` marks the elements that break the contract, `ulps`
  is each element's error in ULPs (ACC.MEASURE.ulp; in units of an absolute tolerance where that is larger:
  CONF.REPORT.ulps) and `why` a one-line account of the worst element."""
  ok: bool
  bad: np.ndarray
  ulps: np.ndarray
  why: str = ""
  used: float = 0.0   # CONF.REPORT.fraction: the largest |error| / bound among compared elements (0 exact, > 1 broken)
  limit: np.ndarray | float = 0.0   # the bound's value at each element (0 for exact comparisons), for reproductions

  @property
  def worst_ulps(self) -> float:
    """The largest error in ULPs among comparable elements (0 for an empty result)."""
    finite = self.ulps[np.isfinite(self.ulps)]
    return float(finite.max()) if finite.size else 0.0


def _same_bits(got: np.ndarray, ref: np.ndarray, signed_zero: bool = True) -> np.ndarray:
  """ACC.MEASURE.exact: equal values with equal signs of zero (unless not `signed_zero`), or both NaN."""
  with np.errstate(invalid="ignore"):
    same_sign = (np.signbit(got) == np.signbit(ref)) if signed_zero else True
    return (np.isnan(got) & np.isnan(ref)) | ((got == ref) & same_sign)


def check(got: np.ndarray, ref: np.ndarray, dtype: str, rule: Bound, n: float | np.ndarray = 1.0,
          S: np.ndarray | float = 0.0, x: np.ndarray | float = 0.0, where: np.ndarray | None = None) -> Verdict:
  """Compare a result with its reference (already rounded to `dtype`) under `rule`. Integer and bool results must be
  equal; float results follow ACC.MEASURE.special (NaN only matches NaN, an infinity only itself) and then the exact
  or bounded comparison. `where` limits the comparison to the elements where it is True."""
  got, ref = np.asarray(got), np.asarray(ref)
  if got.shape != ref.shape: raise ValueError(f"shapes differ: {got.shape} vs {ref.shape}")
  mask = np.ones(ref.shape, bool) if where is None else np.broadcast_to(where, ref.shape)
  if dtype not in _FLOATS:
    bad = (got != ref) & mask
    return Verdict(not bad.any(), bad, bad.astype(np.float64), _describe(got, ref, bad, None), _worst(~bad, 0.0, mask))
  with np.errstate(invalid="ignore"):
    got, ref = got.astype(np.float64), ref.astype(np.float64)
  ulps = ulp_distance(got, ref, dtype)
  if rule.exact:
    ok = _same_bits(got, ref, rule.signed_zero)
    frac = 0.0
  else:
    values = dict(eps=eps(dtype), n=n, S=np.nan_to_num(S, nan=0.0), x=np.nan_to_num(x, nan=0.0))
    limit = rule.evaluate(ulp=ulp(ref, dtype), **values)
    ulps = _reported_ulps(got, ref, dtype, ulps, rule.evaluate(ulp=0.0, **values))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
      err = np.abs(got - ref)
      close = err <= limit
      frac = np.where(err == 0, 0.0, err / limit)   # err > 0 under a zero bound: inf
    special = np.isnan(ref) | np.isinf(ref) | np.isnan(got) | np.isinf(got)
    ok = np.where(special, _same_bits(got, ref), close)
    frac = np.where(special, 0.0, frac)   # a special value is equal (0) or broken (inf, set by _worst)
  bad = ~ok & mask
  limit = 0.0 if rule.exact else np.broadcast_to(np.asarray(limit, np.float64), ref.shape)
  return Verdict(not bad.any(), bad, np.where(mask, ulps, 0.0), _describe(got, ref, bad, rule), _worst(ok, frac, mask),
                 limit)


def _reported_ulps(got: np.ndarray, ref: np.ndarray, dtype: str, ulps: np.ndarray, absolute) -> np.ndarray:
  """CONF.REPORT.ulps: an element's error in ULPs of its reference, or in units of the bound's absolute part (its
  value with ulp = 0: the eps*S, eps*x, eps terms) where that is larger than ulp(ref). A result that cancels to
  nearly zero under an absolute tolerance would otherwise count ~1e17 ULPs of its own tiny value while well inside
  its bound; this way a passing element of a bound `c*ulp + A` counts at most c + 1. Special values keep
  ulp_distance's 0 or inf."""
  unit = np.maximum(ulp(ref, dtype), np.broadcast_to(np.asarray(absolute, np.float64), np.shape(ref)))
  with np.errstate(invalid="ignore", over="ignore"):
    d = np.abs(np.asarray(got, np.float64) - np.asarray(ref, np.float64)) / unit
  return np.where(np.isfinite(ulps) & np.isfinite(d), d, ulps)


def _worst(ok: np.ndarray, frac: np.ndarray | float, mask: np.ndarray) -> float:
  """CONF.REPORT.fraction: the largest |error| / bound over the compared elements. An element that breaks the
  contract counts at least as inf where no finite fraction says by how much (an exact comparison, a special value
  that differs, a NaN bound), so a failing verdict never reports a fraction of 1 or less."""
  with np.errstate(invalid="ignore"):
    frac = np.where(ok, frac, np.where(np.asarray(frac) > 1, frac, np.inf))
  frac = np.broadcast_to(frac, mask.shape)[mask]
  return float(frac.max()) if frac.size else 0.0


def _describe(got: np.ndarray, ref: np.ndarray, bad: np.ndarray, rule: Bound | None) -> str:
  if not bad.any(): return ""
  i = tuple(int(k) for k in np.argwhere(bad)[0])
  where = f" at index {i}" if i else ""
  return f"{int(bad.sum())} of {bad.size} elements break {rule.clause if rule else 'ACC.INT'}" \
         f"{' (' + rule.expr + ')' if rule else ''}; first{where}: got {got[i]!r}, want {ref[i]!r}"


def finite_max(a: np.ndarray) -> float:
  """The largest finite |a| (0 when there is none): a scale for messages and finite-difference steps."""
  a = np.abs(np.asarray(a, np.float64))
  a = a[np.isfinite(a)]
  return float(a.max()) if a.size else 0.0


def is_float(dtype: str) -> bool:
  """Whether a dtype name is one of the four float dtypes."""
  return dtype in _FLOATS

