"""The clauses of spec/ops.md that the property tests only reach through their op's clause: every edge-case
sub-clause (`OP.<NAME>.<case>`) on the rows of its op's table that it decides, the sub-clauses that reject an
operand dtype, the bitwise ops against numpy, the value model (OP.VALUES), and single rounding (OP.ROUND, of Python
constants too: ACC.MEASURE.constants) against exact rational arithmetic.

Everything runs one ALU op at a time through `Adapter.alu`, so any implementation that can run a single ALU op is
checked; one that cannot (NotImplementedError) is skipped, naming the clause.
"""
from __future__ import annotations

import math
import zlib
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import pytest

from conformance import accuracy as A
from conformance.catalogue.alu import TRANSCENDENTAL
from conformance.catalogue.core import _NAME_OF
from conformance.spec_tables import clauses, edge_tables, parse_value
from conformance.strategies import FLOATS, NP, OPS_SPEC
from refimpl.dtype import dtypes, to_dtype

# ---------------------------------------------------------------------------------------------------- table rows


@dataclass(frozen=True)
class Row:
  """One row of an OP.TABLES table: op, operand dtype, result dtype, operand cells and result cell."""
  op: str
  src: str
  dst: str
  operands: tuple[str, ...]
  result: str

  def dtype_of(self, i: int) -> str:
    """The dtype of operand i (WHERE's condition is bool)."""
    return "bool" if self.op == "WHERE" and i == 0 else self.src

  def value(self, i: int):
    """Operand i as a Python value of its dtype."""
    return parse_value(self.operands[i], to_dtype(self.dtype_of(i)))


def _name(dtype: str) -> str:
  return _NAME_OF[to_dtype(dtype)]


def table_rows() -> list[Row]:
  """Every row of the edge-case tables of spec/ops.md."""
  out = []
  for clause, header, rows in edge_tables(OPS_SPEC):
    op = clause.split(".")[1]
    for r in rows:
      if header[0] == "from": out.append(Row(op, _name(r[0]), _name(r[1]), (r[2],), r[3]))
      else:
        dst = "bool" if op in ("CMPLT", "CMPNE", "CMPEQ") else _name(r[0])
        out.append(Row(op, _name(r[0]), dst, tuple(c.strip() for c in r[1].split(",")), r[2]))
  return out


ROWS = table_rows()
ZERO, INF = ("0.0", "-0.0"), ("inf", "-inf")


def _is_float(d: str) -> bool: return d in FLOATS
def _is_int(d: str) -> bool: return d not in FLOATS and d != "bool"
def _signed(d: str) -> bool: return d.startswith("int")
def _bits(d: str) -> int: return 8 * np.dtype(NP[d]).itemsize


def _negative(cell: str) -> bool:
  """A cell standing for a negative number (-0.0 and -nan are not)."""
  return cell.startswith("-") and cell not in ("-0.0", "-nan")


def _int_min_by_minus_one(r: Row) -> bool:
  return _signed(r.src) and r.value(0) == dtypes.min(to_dtype(r.src)) and r.value(1) == -1


def _trunc_fits(r: Row) -> bool | None:
  """For a float -> int CAST row: whether the truncated operand lies in the target's range (None: inf or NaN)."""
  v = r.value(0)
  if not math.isfinite(v): return None
  dt = to_dtype(r.dst)
  return dtypes.min(dt) <= math.trunc(v) <= dtypes.max(dt)


def _count_in_range(r: Row) -> bool:
  return 0 <= r.value(1) < _bits(r.src)


# Each sub-clause -> the rows of its op's table that the sub-clause decides (the predicate sees rows of that op only).
SELECT: dict[str, Callable[[Row], bool]] = {
  "OP.EXP2.special": lambda r: r.operands[0] in (*INF, "nan", *ZERO),
  "OP.EXP2.overflow": lambda r: r.result == "inf" and r.operands[0] != "inf",
  "OP.EXP2.underflow": lambda r: r.result in ("tiny", "0.0") and r.operands[0] != "-inf",
  "OP.LOG2.zero": lambda r: r.operands[0] in ZERO,
  "OP.LOG2.negative": lambda r: _negative(r.operands[0]),
  "OP.LOG2.special": lambda r: r.operands[0] in ("inf", "nan", "1.0"),
  "OP.SIN.inf": lambda r: r.operands[0] in (*INF, "nan"),
  "OP.SIN.zero": lambda r: r.operands[0] in (*ZERO, "tiny", "-tiny"),
  "OP.SQRT.negative": lambda r: _negative(r.operands[0]),
  "OP.SQRT.zero": lambda r: r.operands[0] in ZERO,
  "OP.SQRT.special": lambda r: r.operands[0] in ("inf", "nan"),
  "OP.RECIPROCAL.zero": lambda r: r.operands[0] in ZERO,
  "OP.RECIPROCAL.inf": lambda r: r.operands[0] in INF or (r.result in INF and r.operands[0] not in ZERO),
  "OP.TRUNC.special": lambda r: r.result == "-0.0" or r.operands[0] in (*INF, "nan"),
  "OP.NEG.float": lambda r: _is_float(r.src),
  "OP.NEG.wrap": lambda r: _is_int(r.src),
  "OP.CAST.to-bool": lambda r: r.dst == "bool",
  "OP.CAST.from-bool": lambda r: r.src == "bool",
  "OP.CAST.wrap": lambda r: _is_int(r.src) and _is_int(r.dst),
  "OP.CAST.int-to-float": lambda r: _is_int(r.src) and _is_float(r.dst),
  "OP.CAST.float-to-float": lambda r: _is_float(r.src) and _is_float(r.dst),
  "OP.CAST.truncate": lambda r: _is_float(r.src) and _is_int(r.dst) and _trunc_fits(r) is True
  and r.value(0) != math.trunc(r.value(0)),
  "OP.CAST.saturate": lambda r: _is_float(r.src) and _is_int(r.dst) and r.operands[0] != "nan"
  and not _trunc_fits(r),
  "OP.CAST.nan": lambda r: _is_float(r.src) and _is_int(r.dst) and r.operands[0] == "nan",
  "OP.BITCAST.bfloat16": lambda r: "bfloat16" in (r.src, r.dst),
  "OP.BITCAST.bool": lambda r: "bool" in (r.src, r.dst),
  "OP.BITCAST.nan": lambda r: "nan" in (r.operands[0], r.result),
  "OP.ADD.round": lambda r: _is_float(r.src) and not set(r.operands) & {*INF, "nan"} and r.result not in ZERO,
  "OP.ADD.zero": lambda r: _is_float(r.src) and r.result in ZERO,
  "OP.ADD.inf": lambda r: _is_float(r.src) and bool(set(r.operands) & set(INF)),
  "OP.ADD.wrap": lambda r: _is_int(r.src),
  "OP.ADD.bool": lambda r: r.src == "bool",
  "OP.SUB.zero": lambda r: _is_float(r.src) and r.result in ZERO,
  "OP.SUB.inf": lambda r: _is_float(r.src) and bool(set(r.operands) & set(INF)),
  "OP.SUB.wrap": lambda r: _is_int(r.src),
  "OP.MUL.round": lambda r: _is_float(r.src) and r.result != "nan",
  "OP.MUL.inf": lambda r: _is_float(r.src) and r.result == "nan",
  "OP.MUL.wrap": lambda r: _is_int(r.src),
  "OP.MUL.bool": lambda r: r.src == "bool",
  "OP.FDIV.zero": lambda r: r.operands[1] in ZERO,
  "OP.FDIV.inf": lambda r: bool(set(r.operands) & set(INF)),
  "OP.CDIV.truncate": lambda r: r.value(1) != 0 and not _int_min_by_minus_one(r),
  "OP.CDIV.zero": lambda r: r.value(1) == 0,
  "OP.CDIV.overflow": _int_min_by_minus_one,
  "OP.CMOD.sign": lambda r: r.value(1) != 0 and not _int_min_by_minus_one(r),
  "OP.CMOD.zero": lambda r: r.value(1) == 0,
  "OP.CMOD.overflow": _int_min_by_minus_one,
  "OP.MAX.nan": lambda r: "nan" in r.operands,
  "OP.MAX.zero": lambda r: set(r.operands) <= set(ZERO),
  "OP.MAX.bool": lambda r: r.src == "bool",
  "OP.CMPLT.nan": lambda r: "nan" in r.operands,
  "OP.CMPLT.zero": lambda r: set(r.operands) <= set(ZERO),
  "OP.CMPLT.bool": lambda r: r.src == "bool",
  "OP.CMPNE.nan": lambda r: "nan" in r.operands,
  "OP.CMPNE.zero": lambda r: set(r.operands) <= set(ZERO),
  "OP.CMPEQ.nan": lambda r: "nan" in r.operands,
  "OP.CMPEQ.zero": lambda r: set(r.operands) <= set(ZERO),
  "OP.SHL.count": lambda r: not _count_in_range(r),
  "OP.SHL.wrap": _count_in_range,
  "OP.SHR.count": lambda r: not _count_in_range(r),
  "OP.SHR.signed": lambda r: _signed(r.src) and _count_in_range(r),
  "OP.SHR.unsigned": lambda r: not _signed(r.src),
  "OP.POW.special": lambda r: _is_float(r.src) and (bool(set(r.operands) & {*INF, *ZERO, "nan"}) or r.result == "nan"
                                                   or r.operands[0] in ("1.0", "-1.0")),
  "OP.POW.overflow": lambda r: _is_float(r.src) and not set(r.operands) & {*INF, *ZERO, "nan"}
  and r.result in (*INF, "tiny", "0.0"),
  "OP.POW.wrap": lambda r: _is_int(r.src) and r.value(1) >= 0,
  "OP.POW.negative-exponent": lambda r: _signed(r.src) and r.value(1) < 0,
  "OP.MULACC.fused": lambda r: _is_float(r.src) and not set(r.operands) & {*INF, "nan"}
  and r.result not in (*INF, "nan", *ZERO),
  "OP.MULACC.inf": lambda r: _is_float(r.src) and bool(set(r.operands + (r.result,)) & {*INF, "nan"}),
  "OP.MULACC.zero": lambda r: _is_float(r.src) and r.result in ZERO,
  "OP.MULACC.wrap": lambda r: _is_int(r.src),
}

# Sub-clauses that reject an operand: clause -> (op, result dtype, operand dtypes)
REJECT = {
  "OP.NEG.bool": ("NEG", "bool", ("bool",)),
  "OP.BITCAST.size": ("BITCAST", "int16", ("float32",)),
}


def selected(clause: str) -> list[Row]:
  """The rows of `clause`'s op that the sub-clause decides."""
  op = clause.split(".")[1]
  return [r for r in ROWS if r.op == op and SELECT[clause](r)]


def _rule(op: str, dst: str) -> A.Bound:
  """As test_edge_table: transcendental float results within their ACC bound, everything else bit for bit."""
  return A.bound(op, dst) if op in TRANSCENDENTAL and _is_float(dst) else A.bound("EXACT", dst)


def _bound_clauses(op: str, rows: list[Row]) -> tuple[str, ...]:
  """The ACC clauses the rows are checked under: their bounds, and the op's own exact row (ACC.CDIV, ...)."""
  out = {_rule(op, r.dst).clause for r in rows}
  own = A.bound_table().get(f"ACC.{op}")
  if own is not None and own.exact and op not in TRANSCENDENTAL: out.add(own.clause)
  return tuple(sorted(out))


def _nan_pattern(bits: np.ndarray, float_dtype: str) -> np.ndarray:
  """Whether each integer bit pattern encodes a NaN of `float_dtype` (OP.BITCAST.nan)."""
  u = np.asarray(bits).astype(np.int64 if _bits(float_dtype) < 64 else np.uint64)
  if float_dtype == "bfloat16": return np.isnan(((u & 0xFFFF).astype(np.uint32) << 16).view(np.float32))
  width = {16: np.uint16, 32: np.uint32, 64: np.uint64}[_bits(float_dtype)]
  return np.isnan(u.astype(width).view(NP[float_dtype]))


def _alu(adapter, op: str, dst: str, operands: list[tuple[np.ndarray, str]], clause: str) -> np.ndarray:
  try: return adapter.alu(op, dst, operands)
  except NotImplementedError as e: pytest.skip(f"{adapter.name} cannot run a single ALU op ({clause} unchecked): {e}")


def check_rows(adapter, clause: str, rows: list[Row]) -> list[str]:
  """Run the rows, one kernel per (op, operand dtype, result dtype); the description of every row that differs from
  the table. Rows of dtypes the backend does not compute in are left out (DEV.DTYPE)."""
  groups: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
  for r in rows: groups[(r.op, r.src, r.dst)].append(r)
  bad, ran = [], 0
  for (op, src, dst), rs in sorted(groups.items()):
    arity = len(rs[0].operands)
    if any(adapter.unsupported_dtype(d) for d in {src, dst, *(rs[0].dtype_of(i) for i in range(arity))}): continue
    operands = [(np.array([r.value(i) for r in rs], dtype=NP[rs[0].dtype_of(i)]), rs[0].dtype_of(i))
                for i in range(arity)]
    got = _alu(adapter, op, dst, operands, clause)
    want = np.array([parse_value(r.result, to_dtype(dst)) for r in rs], dtype=NP[dst])
    rule = _rule(op, dst)
    ok = ~A.check(got, want, dst, rule).bad
    if op == "BITCAST" and _is_float(src) and not _is_float(dst):   # any NaN pattern will do (OP.BITCAST.nan)
      nan_in = np.array([r.operands[0] == "nan" for r in rs])
      ok = np.where(nan_in, _nan_pattern(got, src), ok)
    ran += 1
    bad += [f"{op}({', '.join(rs[i].operands)}) {src} -> {dst} = {got[i]!r}, the table says {rs[i].result} "
            f"[{rule.clause}]" for i in np.flatnonzero(~ok)]
  if not ran: pytest.skip(f"DEV.DTYPE: {adapter.backend} computes in none of the dtypes of {clause}'s rows")
  return bad


def _params(names) -> list:
  out = []
  for c in names:
    op = c.split(".")[1]
    marks = (c, f"OP.{op}", "OP.TABLES", *_bound_clauses(op, selected(c)))
    out.append(pytest.param(c, id=c, marks=[pytest.mark.clauses(*marks),
                                            pytest.mark.conformance(op=f"ALU.{op}", dtype="*", prop="subclause")]))
  return out


@pytest.mark.parametrize("clause", _params(SELECT))
def test_subclause_rows(adapter, clause):
  """Each sub-clause on its own: the rows of its op's edge-case table that it decides give the table's result."""
  rows = selected(clause)
  assert rows, f"{clause}: no row of the OP.{clause.split('.')[1]} table is selected"
  bad = check_rows(adapter, clause, rows)
  assert not bad, f"{clause}: " + "; ".join(bad)


@pytest.mark.parametrize("clause", [pytest.param(c, id=c, marks=[pytest.mark.clauses(c, f"OP.{c.split('.')[1]}",
                                                                                     "OP.ALU")]) for c in REJECT])
def test_subclause_rejects(adapter, clause):
  """OP.NEG.bool and OP.BITCAST.size: the op refuses the operand with an error (no value, no crash)."""
  op, dst, srcs = REJECT[clause]
  operands = [(np.array([1], dtype=NP[d]), d) for d in srcs]
  try: got = adapter.alu(op, dst, operands)
  except NotImplementedError as e: pytest.skip(f"{adapter.name} cannot run a single ALU op ({clause} unchecked): {e}")
  except Exception as e:   # noqa: BLE001 - any error is a refusal; its message should say why
    assert str(e), f"{clause}: {op} of {srcs} raised {type(e).__name__} with no message"
    return
  pytest.fail(f"{clause}: {op} {srcs} -> {dst} gave {got!r} instead of an error")


def test_every_subclause_of_an_op_has_rows_or_a_rejection():
  """The two lists above cover every sub-clause of the op clauses of spec/ops.md that have an edge-case table."""
  ops_with_tables = {r.op for r in ROWS}
  subs = {c for c in clauses(OPS_SPEC) if c.count(".") == 2 and c.split(".")[1] in ops_with_tables}
  assert subs == set(SELECT) | set(REJECT)


_BITWISE = {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}


@pytest.mark.parametrize("op,dtype", [pytest.param(op, dt, id=f"{op}-{dt}", marks=[
  pytest.mark.clauses(f"OP.{op}", f"ACC.{op}", "ACC.INT"), pytest.mark.conformance(op=f"ALU.{op}", dtype=dt,
                                                                                   prop="bitwise")])
  for op in _BITWISE for dt in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")])
def test_bitwise_exact(adapter, op, dtype):
  """OP.AND, OP.OR, OP.XOR (ACC.AND, ACC.OR, ACC.XOR: exact): the bitwise result of the two's complement patterns
  (logical on bool) of random operands, against numpy's bitwise ops."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  rng = np.random.default_rng(_seed("bitwise", op, dtype))
  raw = rng.integers(0, 2 ** 63, (2, 64), dtype=np.uint64) | rng.integers(0, 2, (2, 64), dtype=np.uint64) << 63
  a, b = (raw & 1).astype(bool) if dtype == "bool" else raw.astype(NP[dtype])
  got = np.asarray(_alu(adapter, op, dtype, [(a, dtype), (b, dtype)], f"OP.{op}"))
  want = _BITWISE[op](a, b)
  bad = np.flatnonzero(got != want)
  assert not bad.size, f"OP.{op} in {dtype}: " + "; ".join(f"{op}({a[i]!r}, {b[i]!r}) = {got[i]!r}, want {want[i]!r}"
                                                            for i in bad[:5])


# ---------------------------------------------------------------------------------------------------- OP.VALUES

def _values(dtype: str) -> list:
  """Values at the edges of the value model of `dtype` (OP.VALUES, DT.VALUES)."""
  if dtype == "bool": return [False, True]
  t = to_dtype(dtype)
  if _is_int(dtype): return sorted({dtypes.min(t), dtypes.max(t), 0, 1, dtypes.max(t) - 1, dtypes.min(t) + 1})
  return [parse_value(c, t) for c in ("0.0", "-0.0", "tiny", "-tiny", "max", "min", "inf", "-inf", "nan", "1.0")]


def _same(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
  """Elementwise: the same value of the value model (-0.0 differs from 0.0, NaN matches NaN)."""
  return ~A.check(got, want, dtype, A.bound("EXACT", dtype)).bad


ALL_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", *FLOATS)


@pytest.mark.clauses("OP.VALUES", "OP.WHERE", "OP.MAX", "ACC.EXACT")
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_value_model(adapter, dtype):
  """OP.VALUES: the edge values of every dtype (bool, int extremes, signed zeros, subnormals, the largest finite
  floats, infinities, NaN) survive the ops that return an operand unchanged: WHERE either way round, MAX(v, v)."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  vs = np.array(_values(dtype), dtype=NP[dtype])
  other = np.zeros_like(vs) if dtype != "bool" else ~vs
  n = len(vs)
  picked = _alu(adapter, "WHERE", dtype, [(np.ones(n, bool), "bool"), (vs, dtype), (other, dtype)], "OP.VALUES")
  kept = _alu(adapter, "WHERE", dtype, [(np.zeros(n, bool), "bool"), (other, dtype), (vs, dtype)], "OP.VALUES")
  same = _alu(adapter, "MAX", dtype, [(vs, dtype), (vs, dtype)], "OP.VALUES")
  for name, got in (("WHERE(True, v, _)", picked), ("WHERE(False, _, v)", kept), ("MAX(v, v)", same)):
    ok = _same(got, vs, dtype)
    assert ok.all(), f"OP.VALUES: {name} in {dtype} changed {vs[~ok]!r} into {np.asarray(got)[~ok]!r}"


_NAN_BITS = {   # quiet +, quiet -, signalling +, all payload bits set with the sign
  "float16": (np.uint16, (0x7E00, 0xFE00, 0x7C01, 0xFFFF)),
  "float32": (np.uint32, (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF)),
  "float64": (np.uint64, (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF)),
}


@pytest.mark.clauses("OP.VALUES.nan", "OP.CMPLT.nan", "OP.CMPNE.nan", "OP.CMPEQ.nan", "OP.MAX.nan", "OP.CAST.nan",
                     "OP.CAST.to-bool", "OP.NEG.float", "OP.ADD", "OP.WHERE")
@pytest.mark.parametrize("dtype", sorted(_NAN_BITS))
def test_one_nan(adapter, dtype):
  """OP.VALUES.nan: NaNs of either sign and any payload, quiet or signalling, are one value to every op: the
  comparisons, MAX, ADD, NEG, WHERE and the casts to int and bool give the same result for each."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  width, patterns = _NAN_BITS[dtype]
  nans = np.array(patterns, dtype=width).view(NP[dtype])
  ones = np.ones(len(nans), dtype=NP[dtype])

  def run(op, dst, *xs): return np.asarray(_alu(adapter, op, dst, [(x, "bool" if x.dtype == bool else dtype)
                                                                    for x in xs], "OP.VALUES.nan"))
  expect_bool = {"CMPLT(nan, 1)": (run("CMPLT", "bool", nans, ones), False),
                 "CMPLT(1, nan)": (run("CMPLT", "bool", ones, nans), False),
                 "CMPNE(nan, nan)": (run("CMPNE", "bool", nans, nans), True),
                 "CMPEQ(nan, nan)": (run("CMPEQ", "bool", nans, nans), False),
                 "CAST(nan, bool)": (run("CAST", "bool", nans), True)}
  for name, (got, want) in expect_bool.items():
    assert (got == want).all(), f"OP.VALUES.nan: {name} in {dtype} gave {got!r} for NaN bit patterns {patterns}"
  if not adapter.unsupported_dtype("int32"):
    got = np.asarray(_alu(adapter, "CAST", "int32", [(nans, dtype)], "OP.VALUES.nan"))
    assert (got == 0).all(), f"OP.VALUES.nan: CAST(nan, int32) in {dtype} gave {got!r} for {patterns}"
  for name, got in (("MAX(nan, 1)", run("MAX", dtype, nans, ones)), ("ADD(nan, 1)", run("ADD", dtype, nans, ones)),
                    ("NEG(nan)", run("NEG", dtype, nans)),
                    ("WHERE(True, nan, 1)", run("WHERE", dtype, np.ones(len(nans), bool), nans, ones))):
    assert np.isnan(got).all(), f"OP.VALUES.nan: {name} in {dtype} gave {got!r} for {patterns}"


_SIGN_BIT = {"float16": ("uint16", 0x8000), "bfloat16": ("uint16", 0x8000), "float32": ("uint32", 0x80000000),
             "float64": ("uint64", 0x8000000000000000)}


@pytest.mark.clauses("OP.VALUES.zero", "OP.FDIV.zero", "OP.RECIPROCAL.zero", "OP.MULACC.zero", "OP.NEG.float",
                     "OP.CMPEQ.zero", "OP.CMPNE.zero", "OP.BITCAST", "OP.WHERE")
@pytest.mark.parametrize("dtype", FLOATS)
def test_signed_zeros(adapter, dtype):
  """OP.VALUES.zero: -0.0 and +0.0 compare equal, and FDIV, RECIPROCAL, MULACC, NEG, BITCAST and WHERE tell them
  apart as the spec says."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  z = np.array([0.0, -0.0], dtype=NP[dtype])

  def run(op, dst, *xs): return np.asarray(_alu(adapter, op, dst, [(x, "bool" if x.dtype == bool else dtype)
                                                                    for x in xs], "OP.VALUES.zero"))
  one, minus_one = np.ones(2, NP[dtype]), -np.ones(2, NP[dtype])
  want = {"FDIV(1, z)": (run("FDIV", dtype, one, z), [math.inf, -math.inf]),
          "RECIPROCAL(z)": (run("RECIPROCAL", dtype, z), [math.inf, -math.inf]),
          "MULACC(0, -1, z)": (run("MULACC", dtype, np.zeros(2, NP[dtype]), minus_one, z), [0.0, -0.0]),
          "NEG(z)": (run("NEG", dtype, z), [-0.0, 0.0]),
          "WHERE(True, z, 1)": (run("WHERE", dtype, np.ones(2, bool), z, one), [0.0, -0.0])}
  for name, (got, w) in want.items():
    ok = _same(got, np.array(w, NP[dtype]), dtype)
    assert ok.all(), f"OP.VALUES.zero: {name} in {dtype} for z = [+0.0, -0.0] gave {got!r}, want {w}"
  assert run("CMPEQ", "bool", z, z[::-1]).all() and not run("CMPNE", "bool", z, z[::-1]).any(), \
    f"OP.VALUES.zero: +0.0 and -0.0 must compare equal in {dtype}"
  bits, sign = _SIGN_BIT[dtype]
  if not adapter.unsupported_dtype(bits):
    got = np.asarray(_alu(adapter, "BITCAST", bits, [(z, dtype)], "OP.VALUES.zero")).astype(np.uint64)
    assert got.tolist() == [0, sign], f"OP.VALUES.zero: BITCAST of [+0.0, -0.0] in {dtype} gave {got!r}"


# ---------------------------------------------------------------------------------------------------- OP.ROUND

_FORMAT = {"float16": (10, 15), "bfloat16": (7, 127), "float32": (23, 127), "float64": (52, 1023)}  # mantissa, emax


def round_exact(q: Fraction, dtype: str) -> float:
  """The exact rational `q` rounded once to `dtype` (DT.ROUND): nearest, ties to even, subnormals kept, beyond the
  largest finite value an infinity, a nonzero value that rounds to zero keeps its sign. Integer arithmetic only, so
  it shares nothing with the implementation nor with exec_alu."""
  if q == 0: return 0.0
  m, emax = _FORMAT[dtype]
  a = abs(q)
  e = a.numerator.bit_length() - a.denominator.bit_length()
  if Fraction(2) ** e > a: e -= 1
  quantum = Fraction(2) ** (max(e, 1 - emax) - m)
  k, rest = divmod(a, quantum)
  if rest > quantum / 2 or (rest == quantum / 2 and k % 2 == 1): k += 1
  v = k * quantum
  out = math.inf if v >= Fraction(2) ** (emax + 1) else float(v)
  return -out if q < 0 else out


def exact_sqrt(q: Fraction) -> Fraction:
  """A rational that every float format rounds as it rounds sqrt(q): sqrt(q) itself when it is a dyadic rational,
  else a point strictly inside the same interval between neighbours of the 2**-1100 grid (no rounding boundary of
  any float format lies strictly inside one)."""
  k = 1100
  n = q.numerator * 4 ** k // q.denominator   # exact: the denominators of float values are powers of two <= 2**1074
  s = math.isqrt(n)
  return Fraction(s, 2 ** k) if s * s == n else Fraction(2 * s + 1, 2 ** (k + 1))


def _seed(*parts: str) -> int:
  """A seed from the test's name (stable across runs, unlike hash())."""
  return zlib.crc32("/".join(parts).encode())


_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _random_floats(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
  """n finite nonzero values of `dtype` (as float64): half from random bit patterns (every exponent, subnormals,
  values whose products overflow or underflow), half of ordinary magnitudes (where sums cancel and round)."""
  width = 16 if dtype == "bfloat16" else _bits(dtype)
  raw = (rng.integers(0, 2 ** 63, 8 * n, dtype=np.uint64) | rng.integers(0, 2, 8 * n, dtype=np.uint64) << 63)
  raw = (raw & np.uint64(2 ** width - 1)).astype(_UINT[width])
  with np.errstate(invalid="ignore"):   # NaN patterns (dropped below), signalling ones included
    pat = ((raw.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else raw.view(NP[dtype]))
    pat = pat.astype(np.float64)
  pat = pat[np.isfinite(pat) & (pat != 0)][: n - n // 2]
  ordinary = _ordinary(rng, dtype, n)
  out = np.concatenate([pat, ordinary])[:n]
  rng.shuffle(out)
  return out


def _ordinary(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
  """n nonzero values of `dtype` (as float64) between about 2**-8 and 2**8 in magnitude."""
  out = A.round_to(rng.standard_normal(n) * 2.0 ** rng.integers(-6, 7, n), dtype)
  return np.where(out == 0, 1.0, out)


def _ties(a: np.ndarray, dtype: str, rng: np.random.Generator) -> np.ndarray:
  """Addends that put a + b exactly on a midpoint between neighbours of `dtype` (half or three halves of an ulp of
  a, either sign), where round-to-nearest-even decides."""
  half_ulps = A.ulp(a, dtype) / 2 * rng.choice([1.0, 3.0], a.shape) * rng.choice([1.0, -1.0], a.shape)
  return A.round_to(half_ulps, dtype)


def _fma_traps(rng: np.random.Generator, dtype: str, n: int) -> list[np.ndarray]:
  """(a, b, c) with a * b just below half an ulp of c above it: exactly, c + a * b lies just past a midpoint and
  rounds away from c; a product rounded on its own first (an unfused multiply-add) lands on the midpoint and rounds
  to even, which is c whenever c is even (OP.MULACC.fused)."""
  m = _FORMAT[dtype][0]
  c = _ordinary(rng, dtype, n)
  a = A.round_to(A.ulp(c, dtype) / 2 * (1 + 2.0 ** -m), dtype) * np.sign(c)
  return [a, np.full(n, 1 - 2.0 ** -(m + 1)), c]


N_ROUND = 96
ROUND_OPS = {   # op -> (arity, extra clauses, exact result of Fractions)
  "ADD": (2, ("OP.ADD.round",), lambda a, b: a + b),
  "SUB": (2, (), lambda a, b: a - b),
  "MUL": (2, ("OP.MUL.round",), lambda a, b: a * b),
  "FDIV": (2, (), lambda a, b: a / b),
  "MULACC": (3, ("OP.MULACC.fused",), lambda a, b, c: a * b + c),
  "SQRT": (1, (), None),
}


def _round_params() -> list:
  out = []
  for op, (_, extra, _) in ROUND_OPS.items():
    for dt in FLOATS:
      out.append(pytest.param(op, dt, id=f"{op}-{dt}", marks=[
        pytest.mark.clauses("OP.ROUND", f"OP.{op}", *extra, f"ACC.{op}"),
        pytest.mark.conformance(op=f"ALU.{op}", dtype=dt, prop="round")]))
  return out


def _operands(op: str, dtype: str, rng: np.random.Generator) -> list[np.ndarray]:
  """Random operands of `op` in `dtype` (as float64); a third of them on or near a rounding midpoint."""
  xs = [_random_floats(rng, dtype, N_ROUND) for _ in range(ROUND_OPS[op][0])]
  k = N_ROUND // 3
  if op == "SQRT": xs = [np.abs(xs[0])]
  if op in ("ADD", "SUB"): xs[1][:k] = _ties(xs[0][:k], dtype, rng)
  if op == "MULACC":
    for x, t in zip(xs, _fma_traps(rng, dtype, k)): x[:k] = t
  return xs


def _exact(op: str, values) -> Fraction:
  q = [Fraction(float(v)) for v in values]
  return exact_sqrt(q[0]) if op == "SQRT" else ROUND_OPS[op][2](*q)


def _assert_rounded_once(got: np.ndarray, want: np.ndarray, dtype: str, describe) -> None:
  bad = A.check(got, want, dtype, A.bound("EXACT", dtype)).bad
  rows = [f"{describe(i)} = {float(got[i])!r}, rounded once: {float(want[i])!r}" for i in np.flatnonzero(bad)[:5]]
  assert not bad.any(), f"OP.ROUND: {int(bad.sum())} of {bad.size} {dtype} results differ; " + "; ".join(rows)


@pytest.mark.parametrize("op,dtype", _round_params())
def test_rounded_once(adapter, op, dtype):
  """OP.ROUND: ADD, SUB, MUL, FDIV, MULACC and SQRT give the exact result rounded once (ties to even, subnormals
  kept, overflow to an infinity, underflow keeping the sign), compared bit for bit with exact rational arithmetic on
  random operands of every exponent, sums on a midpoint and fused multiply-adds just past one."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  xs = _operands(op, dtype, np.random.default_rng(_seed(op, dtype)))
  want = np.array([round_exact(_exact(op, vals), dtype) for vals in zip(*xs)], dtype=NP[dtype])
  got = _alu(adapter, op, dtype, [(x.astype(NP[dtype]), dtype) for x in xs], "OP.ROUND")
  _assert_rounded_once(got, want, dtype, lambda i: f"{op}({', '.join(repr(float(x[i])) for x in xs)})")


_CASTS = [("float64", "float32"), ("float64", "float16"), ("float64", "bfloat16"), ("float32", "float16"),
          ("float32", "bfloat16"), ("int64", "float64"), ("int64", "float32"), ("int64", "bfloat16"),
          ("int32", "float16"), ("uint64", "float32")]


def _cast_operands(rng: np.random.Generator, src: str, dst: str, n: int) -> np.ndarray:
  """Random values of `src`: half of every magnitude, half one step of `src` away from a midpoint between
  neighbours of `dst`, where a conversion through a wider float rounds twice and can land on the wrong side."""
  m, emax = _FORMAT[dst]
  if _is_int(src):
    info = np.iinfo(NP[src])
    raw = rng.integers(0, 2 ** 63, n, dtype=np.uint64) | rng.integers(0, 2, n, dtype=np.uint64) << 63
    anything = raw.astype(NP[src]) >> rng.integers(0, _bits(src), n).astype(NP[src])
    top = min(info.bits - 1 - (info.min < 0), emax)   # midpoints m + 2 .. top bits wide: ulp(dst) >= 4 there
    exps = rng.integers(m + 2, top, n)
    v = np.array([int(round_exact(Fraction(int(rng.integers(2 ** int(e), 2 ** int(e) * 2 - 1))), dst)) for e in exps],
                 dtype=object)
    mid = v + np.array([2 ** int(e - m - 1) for e in exps], dtype=object)
    near = [min(int(x + d), int(info.max)) * (int(s) if info.min < 0 else 1)
            for x, d, s in zip(mid, rng.choice([-1, 1], n), rng.choice([-1, 1], n))]
    return np.concatenate([anything[: n - n // 2], np.array(near[: n // 2], dtype=NP[src])])
  v = _ordinary(rng, dst, n // 2)
  mid = (v + np.sign(v) * A.ulp(v, dst) / 2).astype(NP[src])   # exact: src has more than one more bit than dst
  near = np.nextafter(mid, rng.choice([-np.inf, np.inf], n // 2).astype(NP[src]))
  return np.concatenate([_random_floats(rng, src, n - n // 2).astype(NP[src]), near])


@pytest.mark.parametrize("src,dst", [pytest.param(s, d, id=f"{s}-{d}", marks=[pytest.mark.clauses(
  "OP.ROUND", "OP.CAST", "OP.CAST.int-to-float" if _is_int(s) else "OP.CAST.float-to-float", "ACC.CAST")])
  for s, d in _CASTS])
def test_cast_rounded_once(adapter, src, dst):
  """OP.ROUND for CAST: a float or an integer converted to a narrower float is its exact value rounded once (no
  detour through a wider float that could round twice), on random values of every magnitude and next to the
  midpoints between neighbours of the target."""
  for d in (src, dst):
    if (why := adapter.unsupported_dtype(d)): pytest.skip(why)
  xs = _cast_operands(np.random.default_rng(_seed("cast", src, dst)), src, dst, N_ROUND)
  want = np.array([round_exact(Fraction(int(v) if _is_int(src) else float(v)), dst) for v in xs], dtype=NP[dst])
  got = _alu(adapter, "CAST", dst, [(xs, src)], "OP.ROUND")
  _assert_rounded_once(got, want, dst, lambda i: f"CAST({xs[i]!r}, {src} -> {dst})")


@pytest.mark.clauses("ACC.MEASURE.constants", "DT.SCALAR-PROMOTE", "OP.MUL", "OP.ROUND")
@pytest.mark.parametrize("dtype", FLOATS)
def test_python_constants_are_rounded_to_the_dtype(adapter, dtype):
  """ACC.MEASURE.constants: a Python float constant meets a tensor as a value of the tensor's dtype (DT.SCALAR-
  PROMOTE, DT.CONST): `x * c` is the exact product of x and c rounded to the dtype, rounded once more; torch instead
  multiplies by the unrounded constant, which is why bounds pay for this rounding."""
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  xs = _ordinary(np.random.default_rng(_seed("constants", dtype)), dtype, 32)
  x = adapter.tensor(xs.astype(NP[dtype]), dtype)
  for c in (0.1, 1 / 3, math.pi, 1e-3):
    got = np.asarray(adapter.numpy(adapter.evaluate("x * c", {"x": x}, {"c": c})))
    rounded = Fraction(round_exact(Fraction(c), dtype))
    want = np.array([round_exact(Fraction(float(v)) * rounded, dtype) for v in xs], dtype=NP[dtype])
    _assert_rounded_once(got, want, dtype, lambda i, c=c: f"{float(xs[i])!r} * {c!r}")
