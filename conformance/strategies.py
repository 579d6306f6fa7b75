"""Hypothesis strategies for the conformance suite, built from small pieces that compose.

- values: `special_values(dtype)` are every number the edge-case tables of spec/ops.md (OP.TABLES) mention that is
  a value of `dtype` (NaN, infinities, signed zeros, the smallest subnormal, the extremes, INT_MIN, wrap-around
  points, ...); `elements` mixes them with ordinary numbers of a range; `arrays` fills a shape with elements.
- shapes: `shapes` (with 0- and 1-size axes), `broadcast_to` (a shape that broadcasts to a given one), `axes`,
  `paddings`, `windows` (shrink bounds), `slices` and `conv_geometry`.
- cases: a `Case` is what one test example feeds an op: input arrays with their dtypes, and keyword parameters.

bfloat16 values travel as float32 arrays holding bfloat16 values (numpy has no bfloat16).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conformance.accuracy import round_to
from conformance.spec_tables import edge_tables, parse_value
from refimpl.dtype import dtypes, to_dtype

__all__ = ["FLOATS", "INTS", "TORCH_INTS", "NP", "Case", "special_values", "numbers", "elements", "arrays", "shapes",
           "broadcast_to", "axes", "paddings", "windows", "slices", "conv_geometry", "pool_geometry"]

OPS_SPEC = Path(__file__).resolve().parent.parent / "spec" / "ops.md"
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
TORCH_INTS = ("int8", "uint8", "int16", "int32", "int64")   # the integer dtypes torch computes with on CPU
NP = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
      "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "float16": np.float16,
      "bfloat16": np.float32, "float32": np.float32, "float64": np.float64}


@dataclass
class Case:
  """One example for an op: input arrays, the dtype name of each, and keyword parameters of the call."""
  inputs: list[np.ndarray]
  dtypes: list[str]
  params: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------- values

def _is_value_of(v, dtype: str) -> bool:
  """Whether Python number `v` is exactly a value of `dtype` (DT.VALUES)."""
  if dtype == "bool": return type(v) is bool
  if dtype in FLOATS:
    if type(v) is not float: return False
    return math.isnan(v) or bool(round_to(np.float64(v), dtype) == v)
  dt = to_dtype(dtype)
  return type(v) is int and dtypes.min(dt) <= v <= dtypes.max(dt)


@functools.cache
def special_values(dtype: str) -> tuple:
  """Every value of `dtype` that some edge-case table of spec/ops.md writes in a cell (operands and results alike),
  sorted with NaN last. Tokens (nan, inf, max, min, tiny) are read in `dtype`, so each dtype gets its own extremes."""
  found = {}   # keyed by repr, so that -0.0 and 0.0 are both kept
  dt = to_dtype(dtype)
  for _, _, rows in edge_tables(OPS_SPEC):
    for row in rows:
      for cell in row:
        for text in cell.split(","):
          try: v = parse_value(text, dt)
          except (ValueError, SyntaxError): continue
          if _is_value_of(v, dtype): found[repr(v)] = v
  nan = [v for v in found.values() if isinstance(v, float) and math.isnan(v)]
  rest = sorted((v for v in found.values() if not (isinstance(v, float) and math.isnan(v))), key=lambda v: (v, repr(v)))
  return tuple(rest + nan[:1])


def numbers(dtype: str, lo: float = -4.0, hi: float = 4.0) -> st.SearchStrategy:
  """Ordinary values of `dtype` in [lo, hi]: floats rounded into the format (so they are exact inputs), integers
  clipped to the dtype's range, bools."""
  if dtype == "bool": return st.booleans()
  if dtype in FLOATS:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(lambda v: float(round_to(np.float64(v), dtype)))
  dt = to_dtype(dtype)
  return st.integers(max(int(lo), dtypes.min(dt)), min(int(hi), dtypes.max(dt)))


# CONF.VALUES.specials: an element is a special value one time in four; half of those are the values comparisons,
# max/min, selection and rewrite rules most often get wrong (NaN, the infinities, both zeros), half any special value
# of the dtype (extremes, subnormals, wrap-around points, ...)
SPECIAL_SHARE = 0.25
_STARS = ("nan", "inf", "-inf", "0.0", "-0.0")
# CONF.VALUES.equal: an input whose shape and dtype match an earlier input of the same example is that input one time
# in ten and its negation one time in ten (ties, x-op-x cases)
EQUAL_SHARE, NEGATED_SHARE = 0.1, 0.1


def elements(dtype: str, lo: float = -4.0, hi: float = 4.0, specials: bool | Callable[[Any], bool] = True):
  """Values of `dtype`: ordinary numbers in [lo, hi] and, unless `specials` is False, the spec's special values of the
  dtype (all of them, or those a predicate keeps), drawn one time in four (CONF.VALUES.specials)."""
  ordinary = numbers(dtype, lo, hi)
  if specials is False: return ordinary
  pool = [v for v in special_values(dtype) if specials is True or specials(v)]
  if not pool: return ordinary
  stars = [st.just(v) for v in pool if repr(v) in _STARS]   # each its own branch: as likely as the others
  special = st.one_of(st.one_of(*stars), st.sampled_from(pool)) if stars else st.sampled_from(pool)
  return st.one_of(ordinary, ordinary, ordinary, special)


_DRAWN = st.shared(st.builds(list), key="conformance.strategies.drawn")   # the arrays drawn so far in this example


def _fits(a: np.ndarray, dtype: str, lo: float, hi: float, specials) -> bool:
  """Whether every element of `a` is one that `elements(dtype, lo, hi, specials)` could draw."""
  allowed = {repr(v) for v in special_values(dtype) if specials is True or (specials is not False and specials(v))}
  for v in np.asarray(a).reshape(-1).tolist():
    if isinstance(v, float) and math.isnan(v): v = math.nan
    if repr(v) in allowed or (not (isinstance(v, float) and math.isnan(v)) and lo <= v <= hi): continue
    return False
  return True


@st.composite
def arrays(draw, dtype: str, shape: tuple[int, ...], lo: float = -4.0, hi: float = 4.0,
           specials: bool | Callable[[Any], bool] = True) -> np.ndarray:
  """An array of `shape` whose elements are `elements(dtype, lo, hi, specials)`; or, where an earlier array of the
  same example has this shape and dtype and its values (or their negations) fit, that array or its negation, at the
  shares of CONF.VALUES.equal."""
  drawn = draw(_DRAWN)
  earlier = [a for a, d in drawn if d == dtype and a.shape == tuple(shape)]
  fresh = draw(hnp.arrays(NP[dtype], shape, elements=elements(dtype, lo, hi, specials)))
  if earlier:
    how = draw(st.sampled_from(["fresh"] * 8 + ["equal", "negated"]), label="equal to an earlier input")
    if how != "fresh":
      src = earlier[-1]
      cand = src.copy() if how == "equal" or dtype == "bool" or dtype.startswith("uint") else _negate(src, dtype)
      if _fits(cand, dtype, lo, hi, specials): fresh = cand
  drawn.append((fresh, dtype))
  return fresh


def _negate(a: np.ndarray, dtype: str) -> np.ndarray:
  """-a in `dtype` (integers wrap: -INT_MIN is INT_MIN, DT.WRAP)."""
  with np.errstate(over="ignore"):
    return (-a).astype(NP[dtype]) if dtype in FLOATS else (np.zeros_like(a) - a).astype(NP[dtype])


# ---------------------------------------------------------------------------------------------------- shapes

def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4) -> st.SearchStrategy:
  """Shapes with 0-size and 1-size axes among the others."""
  return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def broadcast_to(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
  """A shape that broadcasts to `shape`: some leading axes dropped, some axes set to 1."""
  drop = draw(st.integers(0, len(shape)))
  return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else n for n in shape[drop:])


def axes(ndim: int, allow_none: bool = True, allow_tuple: bool = True) -> st.SearchStrategy:
  """A reduction axis argument for `ndim` axes: None (all), an int (negative too) or a tuple of distinct axes."""
  choices = []
  if allow_none: choices.append(st.none())
  if ndim: choices.append(st.integers(-ndim, ndim - 1))
  if ndim and allow_tuple: choices.append(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                                   unique=True).map(tuple))
  return st.one_of(*choices) if choices else st.none()


@st.composite
def paddings(draw, shape: tuple[int, ...], max_pad: int = 2) -> tuple[tuple[int, int], ...]:
  """(before, after) padding for each axis."""
  return tuple((draw(st.integers(0, max_pad)), draw(st.integers(0, max_pad))) for _ in shape)


@st.composite
def windows(draw, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
  """Shrink bounds: a [start, end) window of each axis, empty windows included."""
  out = []
  for n in shape:
    start = draw(st.integers(0, n))
    out.append((start, draw(st.integers(start, n))))
  return tuple(out)


@st.composite
def slices(draw, n: int) -> slice:
  """A Python slice of an axis of size n: any start/stop (negative and out of range too) and a nonzero step."""
  bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
  return slice(draw(bound), draw(bound), draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool))))


@st.composite
def conv_geometry(draw, max_spatial: int = 6) -> dict:
  """Shapes and arguments of a 2-d convolution whose output is not empty: batch, groups, channels, kernel, stride,
  dilation and symmetric padding."""
  groups = draw(st.integers(1, 2))
  cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
  k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
  stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
  padding = draw(st.integers(0, 1))
  hw = tuple(draw(st.integers(max(1, dilation * (kk - 1) + 1 - 2 * padding), max_spatial)) for kk in k)
  return dict(x=(draw(st.integers(1, 2)), cin, *hw), w=(cout, cin // groups, *k), bias=(cout,), groups=groups,
              stride=stride, dilation=dilation, padding=padding)


@st.composite
def pool_geometry(draw, max_spatial: int = 6) -> dict:
  """Input shape and arguments of a 2-d pooling that torch accepts: padding at most half the kernel, windows that
  fit, ceil_mode either way."""
  k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
  stride = draw(st.one_of(st.none(), st.integers(1, 3)))
  padding = draw(st.integers(0, min(k) // 2))
  hw = tuple(draw(st.integers(max(1, kk - 2 * padding), max_spatial)) for kk in k)
  return dict(x=(draw(st.integers(1, 2)), draw(st.integers(1, 2)), *hw), kernel_size=k, stride=stride,
              padding=padding, ceil_mode=draw(st.booleans()))
