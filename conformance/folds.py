"""The folds spec/rewrites.md forbids or guards, built at the Tensor level (RW.FOLD.tested; issue 16, item 2).

A compiler that folds `x / x -> 1` on floats, or `(x * c) // c -> x` without its bounds guard, is wrong only for the
inputs the guard is there for: NaN, infinities, signed zeros, INT_MIN, values that overflow, negative operands of `//`
and `%`, zero divisors. Each case below builds one such pattern through the adapter's Tensor API, with those inputs,
and names the clauses it checks; conformance/tests/test_folds.py runs them on any implementation and backend.

An expression is written once and evaluated twice: in the implementation's namespace (`IMPL_HELPERS` over the
adapter's `Tensor` and `dtypes`) and in `TORCH`, whose helpers compute with torch where torch defines the value and
read spec/ops.md's edge tables (OP.TABLES) where it does not (integer division by zero, INT_MIN // -1, a float->int
cast of NaN or out of range: torch's CPU kernels trap or leave those to C). The helpers are the four integer
divisions (`floordiv`/`mod`: torch's `//` and `%`; `tdiv`/`tmod`: the truncating `div(rounding_mode='trunc')` and
`fmod`, which are OP.CDIV and OP.CMOD), `cast`, `where` and `arange`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from conformance.spec_tables import edge_tables, parse_value
from refimpl.dtype import to_dtype

__all__ = ["FoldCase", "CASES", "TORCH", "IMPL_HELPERS", "float_values", "torch_tensor"]

FLOATS = ("float16", "bfloat16", "float32", "float64")
OPS_SPEC = Path(__file__).resolve().parent.parent / "spec" / "ops.md"
_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": float(np.finfo(np.float32).max),
        "float64": float(np.finfo(np.float64).max)}
_TINY = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149, "float64": 5e-324}
_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def float_values(dt: str) -> list[float]:
  """The special values of a float dtype that break float folds: NaN, both infinities, both zeros, the extremes and
  the smallest subnormal, and a few ordinary numbers."""
  m, t = _MAX[dt], _TINY[dt]
  return [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.5, 3.0, m, -m, t, -t]


@dataclass(frozen=True)
class FoldCase:
  """One pattern: `expr` over the named `inputs` ({name: (values, dtype)}) and Python scalars `params`."""
  name: str
  clauses: tuple[str, ...]
  expr: str
  inputs: dict[str, tuple[list, str]]
  params: dict[str, float | int] = field(default_factory=dict)


# ---- the implementation's side: the helpers over its Tensor ----
IMPL_HELPERS = {
  "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
  "tdiv": lambda a, b: a.div(b, rounding_mode="trunc"), "tmod": lambda a, b: a.fmod(b),
}
IMPL_HELPER_SOURCE = [   # the same, as source for reproductions (with `cast`, `where`, `arange`)
  "floordiv, mod = (lambda a, b: a // b), (lambda a, b: a % b)",
  "tdiv, tmod = (lambda a, b: a.div(b, rounding_mode='trunc')), (lambda a, b: a.fmod(b))",
  "cast = lambda a, d: a.cast(getattr(dtypes, d))",
  "where = lambda c, a, b: c.where(a, b)",
  "arange = lambda n, d: Tensor.arange(n, dtype=getattr(dtypes, d))",
]


def impl_namespace(ns: dict) -> dict:
  """The adapter's namespace with the helpers, `cast`, `where` and `arange` made from its `Tensor` and `dtypes`."""
  T, dts = ns["Tensor"], ns["dtypes"]
  return {**ns, **IMPL_HELPERS, "cast": lambda a, d: a.cast(getattr(dts, d)), "where": lambda c, a, b: c.where(a, b),
          "arange": lambda n, d: T.arange(n, dtype=getattr(dts, d))}


# ---- torch's side, with the edge tables where torch defines nothing ----
def _key(v) -> object: return "nan" if isinstance(v, float) and math.isnan(v) else v


def _edge_rows() -> dict[tuple, object]:
  """(op, dtypes..., operands...) -> result, from the CDIV, CMOD and CAST tables of spec/ops.md."""
  rows: dict[tuple, object] = {}
  for clause, header, body in edge_tables(OPS_SPEC):
    if clause == "OP.CAST" and header == ("from", "to", "operand", "result"):
      for src, dst, operand, result in body:
        rows[("CAST", src, dst, _key(parse_value(operand, to_dtype(src))))] = parse_value(result, to_dtype(dst))
    if clause in ("OP.CDIV", "OP.CMOD") and header == ("dtype", "operands", "result"):
      for dt, operands, result in body:
        a, b = (parse_value(v, to_dtype(dt)) for v in operands.split(","))
        rows[(clause[3:], dt, a, b)] = parse_value(result, to_dtype(dt))
  return rows


_EDGES = _edge_rows()


def _edge(*key):
  if key not in _EDGES: raise LookupError(f"OP.TABLES: spec/ops.md has no edge-table row {key}: pick inputs it has")
  return _EDGES[key]


_TORCH_DT = {"bool": torch.bool, "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
             "int64": torch.int64, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
             "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def dtype_name(t: torch.Tensor) -> str: return str(t.dtype).removeprefix("torch.")


def torch_tensor(values: list, dt: str) -> torch.Tensor:
  if dt == "bfloat16": return torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
  return torch.tensor(values, dtype=_TORCH_DT[dt])


def _int_division(op: str, torch_fn):
  """An integer division that torch computes where it defines the value, and the OP.CDIV / OP.CMOD edge rows where it
  does not: a zero divisor (torch raises) and INT_MIN by -1 (its CPU kernel traps). Floor division by zero keeps CDIV's
  answer, the floor remainder CMOD's (conformance.catalogue.oracles.floordiv, .mod)."""
  def fn(a, b):
    if not isinstance(a, torch.Tensor) or a.dtype.is_floating_point: return torch_fn(a, b)
    b = torch.as_tensor(b, dtype=a.dtype).expand(a.shape) if not isinstance(b, torch.Tensor) else b
    dt = dtype_name(a)
    low = torch.iinfo(a.dtype).min
    undefined = (b == 0) | ((a == low) & (b == -1) & (low < 0))
    out = torch_fn(torch.where(undefined, torch.zeros_like(a), a), torch.where(undefined, torch.ones_like(b), b))
    for i in torch.nonzero(undefined).tolist():
      out[tuple(i)] = _edge(op, dt, int(a[tuple(i)]), int(b[tuple(i)]))
    return out
  return fn


def _cast(a: torch.Tensor, d: str) -> torch.Tensor:
  """torch's cast, with OP.CAST's edge rows for a float -> integer cast of NaN or of a value outside the target range
  (undefined in C and in torch)."""
  target = _TORCH_DT[d]
  if not a.dtype.is_floating_point or d in FLOATS or d == "bool": return a.to(target)
  info = torch.iinfo(target)
  t = a.double().trunc()   # in range: info.min <= t < info.max + 1, both exact doubles (a power of two, or 0)
  undefined = t.isnan() | (t < float(info.min)) | (t >= float(info.max) + 1)
  out = torch.where(undefined, torch.zeros_like(a), a).to(target)
  for i in torch.nonzero(undefined).tolist():
    out[tuple(i)] = _edge("CAST", dtype_name(a), d, _key(float(a[tuple(i)])))
  return out


TORCH = {
  "torch": torch,
  "floordiv": _int_division("CDIV", lambda a, b: a // b), "mod": _int_division("CMOD", lambda a, b: a % b),
  "tdiv": _int_division("CDIV", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
  "tmod": _int_division("CMOD", torch.fmod),
  "cast": _cast, "where": torch.where, "arange": lambda n, d: torch.arange(n, dtype=_TORCH_DT[d]),
}


# ---------------------------------------------------------------------------------------------------- the cases
def _float_cases() -> list[FoldCase]:
  """RW.FLOAT.none's items and the float side of the integer-only RW.SYM rows, in every float dtype."""
  out = []
  for dt in FLOATS:
    v, m, e = float_values(dt), _MAX[dt], _EPS[dt]
    x = {"x": (v, dt)}
    def case(name, clauses, expr, inputs=x, **params):
      out.append(FoldCase(f"{name}-{dt}", clauses, expr, inputs, params))
    case("mul-zero", ("RW.FLOAT.none.mul-zero", "RW.SYM.mul-zero"), "x * 0")
    case("zero-mul", ("RW.FLOAT.none.mul-zero", "RW.SYM.mul-zero"), "0.0 * x")
    case("div-self", ("RW.FLOAT.none.div-self",), "x / x")
    case("sub-self", ("RW.FLOAT.none.sub-self", "RW.SYM.sub-self"), "x - x")
    case("add-zero", ("RW.FLOAT.none.add-zero", "RW.SYM.add-zero"), "x + 0.0")
    case("zero-add", ("RW.FLOAT.none.add-zero", "RW.SYM.add-zero"), "0.0 + x")
    case("eq-self", ("RW.FLOAT.none.self-compare", "RW.SYM.eq-self"), "x == x")
    case("ne-self", ("RW.FLOAT.none.self-compare", "RW.SYM.ne-self"), "x != x")
    case("le-self", ("RW.FLOAT.none.self-compare",), "(x <= x).logical_not()")
    # reassociation: (1 + eps/2) + eps/2 rounds to 1 twice, 1 + eps once; x * 4 * 0.25 overflows at the maximum
    case("add-const-assoc", ("RW.FLOAT.none.reassociate", "RW.SYM.add-const-assoc"), "(x + c1) + c2",
         {"x": ([1.0, -1.0, m, -0.0, math.nan], dt)}, c1=e / 2, c2=e / 2)
    case("mul-const-assoc", ("RW.FLOAT.none.reassociate", "RW.SYM.mul-const-assoc"), "(x * c1) * c2",
         {"x": ([m, -m, 1.0, _TINY[dt], math.inf], dt)}, c1=4.0, c2=0.25)
    case("add-const-out", ("RW.FLOAT.none.reassociate", "RW.SYM.add-const-out"), "(x + c) + y",
         {"x": ([1.0, m, -0.0], dt), "y": ([-1.0, -m, -0.0], dt)}, c=e / 2)
    case("distribute-const", ("RW.FLOAT.none.reassociate", "RW.SYM.distribute-const"), "(x + c1) * c2",
         {"x": ([m, 1.0, -0.0], dt)}, c1=-m, c2=2.0)
    case("combine-terms", ("RW.FLOAT.none.reassociate", "RW.SYM.combine-terms"), "x * c1 + x * c2",
         {"x": ([m, math.inf, 1.0, -0.0], dt)}, c1=2.0, c2=-1.0)
    case("combine-term-one", ("RW.FLOAT.none.reassociate", "RW.SYM.combine-term-one"), "x * c + x",
         {"x": ([m, math.inf, 3.0, -0.0], dt)}, c=-2.0)
    case("add-self", ("RW.SYM.add-self",), "x + x")   # x * 2 is exact on floats too: the values must still agree
    case("sub-const", ("RW.SYM.sub-const",), "x - c", c=0.0)
  return out


def _cast_cases() -> list[FoldCase]:
  """RW.CAST.roundtrip (integers and bool, lossless inner casts only) and RW.FLOAT.none.cast-roundtrip: a round trip
  through every narrower type, with values the narrower type lacks, and the lossless ones that may be folded."""
  out = []
  clauses = ("RW.FLOAT.none.cast-roundtrip", "RW.CAST.roundtrip")
  def trip(src, mid, values):
    out.append(FoldCase(f"{src}-{mid}-{src}", clauses, f"cast(cast(x, '{mid}'), '{src}')", {"x": (values, src)}))
  f32 = [1.5, -2.5, 0.1, 65519.0, 1e-8, 3e38, -0.0, math.inf, math.nan]
  trip("float32", "float16", f32)
  trip("float32", "bfloat16", f32)
  trip("float64", "float32", [0.1, 1e-46, 1e300, -0.0, math.nan, math.inf, 1 + 2.0 ** -30])
  trip("float64", "float16", [0.1, 1e-8, 7e4, -0.0, math.nan])
  trip("float16", "float32", [0.0999755859375, 6e-08, 65504.0, -0.0, math.nan, -math.inf])   # widening: exact
  trip("bfloat16", "float32", [0.10009765625, -0.0, math.inf, math.nan])
  trip("float32", "int8", [2.75, -2.75, -0.0, 127.5, 1000.0, math.inf, -math.inf, math.nan, 128.0, -129.0])
  trip("float32", "uint8", [-1.0, -0.5, 255.5, 256.0, math.nan])
  trip("float32", "int32", [2147483648.0, -2147483648.0, 2147483520.0, math.nan, 1.5, -0.0])
  trip("float64", "int64", [9223372036854775808.0, -1e300, 9223372036854774784.0, -2.5])
  trip("float16", "int32", [math.inf, 65504.0, -3.5])
  trip("float32", "bool", [0.0, -0.0, math.nan, 0.5, -math.inf])
  trip("int32", "int8", [300, -1, 128, -129, 127, -2 ** 31, 2 ** 31 - 1])
  trip("int32", "uint8", [-1, 256, 255, 1000])
  trip("int32", "int16", [70000, -32769, 32767])
  trip("int64", "int32", [2 ** 40 + 5, -2 ** 63, 2 ** 31])
  trip("uint8", "int8", [200, 128, 127, 255])
  trip("int16", "bool", [2, -1, 0, 256])
  trip("int8", "int32", [-128, 127, -1, 0])   # lossless: the fold is allowed, the values the same
  trip("uint8", "int16", [255, 0, 128])
  trip("bool", "int8", [True, False])
  trip("bool", "float32", [True, False])
  return out


def _int_cases() -> list[FoldCase]:
  """The guarded rows (RW.IDX, RW.BOUNDS.const) and the integer-only RW.SYM rows, with the inputs their guards exclude:
  negative operands, values whose products or sums wrap, divisors that are zero, negative or not multiples."""
  out = []
  def case(name, clauses, expr, inputs, **params): out.append(FoldCase(name, (clauses,), expr, inputs, params))
  def forms(name, clause, inputs, **exprs):
    """One case per form, so that a failure has one cause: trunc (OP.CDIV/CMOD), floor (torch's // and %), zero
    (a zero divisor), neg (a negative divisor), multiple (a divisor that does not divide the factor)."""
    for form, expr in exprs.items(): case(f"{name}-{form}", clause, expr, inputs)
  small = {"x": ([-7, -5, -4, -1, 0, 3, 4, 5, 7, 127, -128], "int8")}
  forms("div-small", "RW.IDX.div-small", small, trunc="tdiv(x, 4)", floor="floordiv(x, 4)",
        bounded="tdiv(x.clip(-3, 5), 4)", arange="floordiv(arange(11, 'int32') - 5, 4)")
  forms("mod-small", "RW.IDX.mod-small", small, trunc="tmod(x, 4)", floor="mod(x, 4)", bounded="tmod(x.clip(0, 6), 4)",
        arange="mod(arange(11, 'int32') - 5, 4)")
  wrap = {"x": ([100, -100, 64, -64, 20, 1, 0, -1, 127, -128], "int8")}
  forms("div-mul", "RW.IDX.div-mul", wrap, trunc="tdiv(x * 2, 2)", neg="floordiv(x * -3, -3)", zero="tdiv(x * 0, 0)")
  forms("mod-mul", "RW.IDX.mod-mul", wrap, trunc="tmod(x * 3, 3)", floor="mod(x * 3, 3)", neg="tmod(x * -3, -3)")
  xy = {"x": ([-1, -5, 100, 3, -128, 127, 0], "int8"), "y": ([1, 2, 10, -3, 1, 1, -1], "int8")}
  forms("div-add-mul", "RW.IDX.div-add-mul", xy, trunc="tdiv(x + y * 4, 4)", floor="floordiv(x + y * 4, 4)")
  forms("mod-add-mul", "RW.IDX.mod-add-mul", xy, trunc="tmod(x + y * 4, 4)", floor="mod(x + y * 4, 4)")
  forms("div-mul-multiple", "RW.IDX.div-mul-multiple", wrap, trunc="tdiv(x * 8, 4)", multiple="floordiv(x * 6, 4)")
  forms("mod-mul-multiple", "RW.IDX.mod-mul-multiple", wrap, trunc="tmod(x * 8, 4)", multiple="tmod(x * 6, 4)",
        neg="mod(x * 6, -4)")
  forms("div-add-mul-multiple", "RW.IDX.div-add-mul-multiple", xy, trunc="tdiv(x + y * 8, 4)",
        multiple="floordiv(x + y * 6, 4)")
  forms("mod-add-mul-multiple", "RW.IDX.mod-add-mul-multiple", xy, trunc="tmod(x + y * 8, 4)",
        multiple="mod(x + y * 6, 4)")
  forms("div-add-mul-const", "RW.IDX.div-add-mul-const", xy, trunc="tdiv((x + y * 8) + 3, 4)",
        floor="floordiv((x + y * 8) + 3, 4)")
  forms("mod-add-mul-const", "RW.IDX.mod-add-mul-const", xy, trunc="tmod((x + y * 8) + 3, 4)",
        floor="mod((x + y * 8) + 3, 4)")
  # the -reduce rows (EXEC.LOWER's index arithmetic): a factor larger than the divisor, not a multiple of it; their
  # guards exclude negative x or y and sums that wrap, which `xy` has; `bounded` meets the guard, so the rule fires
  fit = "x.clip(0, 10) + y.clip(0, 10) * 7"
  forms("div-add-mul-reduce", "RW.IDX.div-add-mul-reduce", xy, trunc="tdiv(x + y * 7, 4)",
        floor="floordiv(x + y * 7, 4)", bounded=f"tdiv({fit}, 4)")
  forms("mod-add-mul-reduce", "RW.IDX.mod-add-mul-reduce", xy, trunc="tmod(x + y * 7, 4)",
        floor="mod(x + y * 7, 4)", bounded=f"tmod({fit}, 4)")
  forms("div-add-mul-const-reduce", "RW.IDX.div-add-mul-const-reduce", xy, trunc="tdiv((x + y * 7) + 3, 4)",
        floor="floordiv((x + y * 7) + 3, 4)", bounded=f"tdiv(({fit}) + 3, 4)")
  forms("mod-add-mul-const-reduce", "RW.IDX.mod-add-mul-const-reduce", xy, trunc="tmod((x + y * 7) + 3, 4)",
        floor="mod((x + y * 7) + 3, 4)", bounded=f"tmod(({fit}) + 3, 4)")
  # the -split rows (a convolution's input gradient): a factor below the divisor; their guards also keep x - y * d
  # within one divisor of 0, which `xy` breaks (x = 100, y = -3); `bounded` stays inside every guard's bounds
  near = "x.clip(0, 3) + y.clip(0, 3) * 3"
  forms("div-add-mul-split", "RW.IDX.div-add-mul-split", xy, trunc="tdiv(x + y * 3, 4)",
        floor="floordiv(x + y * 3, 4)", bounded=f"tdiv({near}, 4)")
  forms("mod-add-mul-split", "RW.IDX.mod-add-mul-split", xy, trunc="tmod(x + y * 3, 4)",
        floor="mod(x + y * 3, 4)", bounded=f"tmod({near}, 4)")
  forms("div-add-mul-const-split", "RW.IDX.div-add-mul-const-split", xy, trunc="tdiv((x + y * 3) + 1, 4)",
        floor="floordiv((x + y * 3) + 1, 4)", bounded=f"tdiv(({near}) + 1, 4)")
  forms("mod-add-mul-const-split", "RW.IDX.mod-add-mul-const-split", xy, trunc="tmod((x + y * 3) + 1, 4)",
        floor="mod((x + y * 3) + 1, 4)", bounded=f"tmod(({near}) + 1, 4)")
  # the -factor rows (a lane of an elementwise kernel): a divisor that is a multiple of the factor; the guards exclude a
  # negative x (// truncates), a product that wraps and a constant of a whole factor or more (`big`)
  forms("div-mul-factor", "RW.IDX.div-mul-factor", wrap, trunc="tdiv(x * 4, 8)", floor="floordiv(x * 4, 8)",
        bounded="tdiv(x.clip(0, 31) * 4, 8)")
  forms("mod-mul-factor", "RW.IDX.mod-mul-factor", wrap, trunc="tmod(x * 4, 8)", floor="mod(x * 4, 8)",
        bounded="tmod(x.clip(0, 31) * 4, 8)")
  forms("div-mul-const-factor", "RW.IDX.div-mul-const-factor", wrap, trunc="tdiv(x * 4 + 3, 8)",
        floor="floordiv(x * 4 + 3, 8)", big="tdiv(x.clip(0, 20) * 4 + 5, 8)", bounded="tdiv(x.clip(0, 30) * 4 + 3, 8)")
  forms("mod-mul-const-factor", "RW.IDX.mod-mul-const-factor", wrap, trunc="tmod(x * 4 + 3, 8)",
        floor="mod(x * 4 + 3, 8)", big="tmod(x.clip(0, 20) * 4 + 5, 8)", bounded="tmod(x.clip(0, 30) * 4 + 3, 8)")
  neg = {"x": ([-5, -1, 125, -128, 127, 0, 3, 7], "int8")}
  forms("div-add-const-multiple", "RW.IDX.div-add-const-multiple", neg, trunc="tdiv(x + 8, 4)",
        neg="floordiv(x + 8, -4)")
  forms("mod-add-const-multiple", "RW.IDX.mod-add-const-multiple", neg, trunc="tmod(x + 8, 4)", neg="mod(x + 8, -4)")
  forms("div-div", "RW.IDX.div-div", {"x": ([5, -5, 0], "int8")}, trunc="tdiv(tdiv(x, 16), 16)",
        zero="tdiv(tdiv(x, 0), 2)", neg="floordiv(floordiv(x, -2), 3)")
  forms("mod-mod-divisor", "RW.IDX.mod-mod-divisor", {"x": ([5, 7, 13, -13, -7, 127, -128], "int8")},
        multiple="tmod(tmod(x, 6), 4)", neg="mod(mod(x, -8), 4)")
  forms("lt-add-const", "RW.IDX.lt-add-const", {"x": ([120, 117, 118, -120, -111, 0], "int8")},
        up="(x + 10) < 0", down="(x + -10) < -120")
  case("lt-add-const-int32", "RW.IDX.lt-add-const", "(x + 1) < -2147483647",
       {"x": ([2 ** 31 - 1, -2 ** 31, -2, 0], "int32")})
  # a node is replaced by its one possible value only where its bounds meet (and a one-element sum keeps its loop)
  case("bounds-const", "RW.BOUNDS.const", "x.clip(3, 4) * 10 + x.clip(4, 4)", {"x": ([0, 10, 3, 4, -128], "int8")})
  case("bounds-const-reduce", "RW.BOUNDS.const", "x.sum()", {"x": ([-0.0], "float32")})
  # the integer-only RW.SYM rows on their own dtypes: wrapping and INT_MIN are where a wrong fold shows
  ints = {"x": ([-2 ** 31, 2 ** 31 - 1, -1, 0, 7], "int32")}
  case("sub-const-int", "RW.SYM.sub-const", "(x - 1) + (x - -2147483648)", ints)
  case("add-const-assoc-int", "RW.SYM.add-const-assoc", "(x + 2147483647) + 2", ints)
  case("mul-const-assoc-int", "RW.SYM.mul-const-assoc", "(x * 65536) * 65536 + (x * 3) * -1", ints)
  case("add-const-out-int", "RW.SYM.add-const-out", "(x + 1) + y",
       {**ints, "y": ([-1, 1, 2 ** 31 - 1, 5, -7], "int32")})
  case("distribute-const-int", "RW.SYM.distribute-const", "(x + 1) * -1 + (x + 3) * 65536", ints)
  case("combine-terms-int", "RW.SYM.combine-terms", "x * 3 + x * -1", ints)
  case("combine-term-one-int", "RW.SYM.combine-term-one", "x * 2147483647 + x", ints)
  case("add-self-int", "RW.SYM.add-self", "x + x", ints)
  case("sub-self-int", "RW.SYM.sub-self", "x - x", ints)
  case("mul-zero-int", "RW.SYM.mul-zero", "x * 0", ints)
  case("add-zero-int", "RW.SYM.add-zero", "x + 0", ints)
  case("eq-ne-self-int", "RW.SYM.eq-self", "(x == x) & (x != x).logical_not()", ints)
  case("ne-self-int", "RW.SYM.ne-self", "x != x", ints)
  return out


CASES: list[FoldCase] = _float_cases() + _cast_cases() + _int_cases()
