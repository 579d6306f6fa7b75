"""Tests of refimpl/dtype.py against its spec chapter (spec/dtypes.md), against torch and against numpy.

The spec's tables are parsed and compared with the code, so prose and code cannot drift apart silently. Where the
spec documents a difference from torch, the difference is listed here with its clause ID and asserted to be real.
"""
from __future__ import annotations

import collections
import contextlib
import itertools
import math
import pathlib
import re

import numpy as np
import pytest
import torch

from refimpl.dtype import (_PARENTS, _UPPER, _WEAK_FLOAT, DType, can_lossless_cast, dtypes, float_max,
                           least_upper_dtype, least_upper_float, round_float, scalar_result_dtype, sum_acc_dtype,
                           to_dtype, wrap_int)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = (ROOT / "spec" / "dtypes.md").read_text()
ALL = dtypes.all()
SHORT = dict(zip("bool i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16 f32 f64".split(), ALL))
TORCH = dict(zip(ALL, (torch.bool, torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32,
                       torch.int64, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64)))
b, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64 = ALL

# a clause is a heading or bullet whose first token is a backticked ID (spec/dtypes.md, second paragraph)
CLAUSE_RE = re.compile(r"^(?:#{1,6}|[-*])\s+`([A-Z][A-Za-z0-9_.\-]*)`", re.M)
CLAUSE_LIST = CLAUSE_RE.findall(SPEC)
CLAUSES = set(CLAUSE_LIST)


@contextlib.contextmanager
def defaults(int_dt: DType | None = None, float_dt: DType | None = None):
  """Temporarily change dtypes.default_int / default_float (DT.DEFAULT), restoring them even on failure."""
  old = dtypes.default_int, dtypes.default_float
  if int_dt is not None: dtypes.default_int = int_dt
  if float_dt is not None: dtypes.default_float = float_dt
  try: yield
  finally: dtypes.default_int, dtypes.default_float = old


def md_tables(text: str) -> list[list[list[str]]]:
  """Every markdown table in `text` as rows of stripped cells, header row first, separator row dropped."""
  tables, cur = [], []
  for ln in text.splitlines() + [""]:
    if ln.startswith("|"): cur.append([c.strip() for c in ln.strip().strip("|").split("|")])
    elif cur: tables, cur = tables + [[cur[0]] + cur[2:]], []
  return tables


def spec_table(has_column: str) -> list[dict[str, str]]:
  """The one spec table with a column named `has_column`, as a list of {header: cell} rows."""
  found = [t for t in md_tables(SPEC) if has_column in t[0]]
  assert len(found) == 1, f"expected one table with column {has_column!r}, found {len(found)}"
  return [dict(zip(found[0][0], row)) for row in found[0][1:]]


def same(a, b) -> bool:
  """DT.VALUES sameness: NaN matches any NaN, -0.0 and +0.0 differ, bool/int/float are not interchangeable."""
  if isinstance(a, float) and isinstance(b, float):
    return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
  return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------------------------
# DT.SCALARS / DT.FLOAT: the type tables in the spec equal the code

def test_scalar_tables_match_code():
  ints, floats = spec_table("min"), spec_table("exponent bits")
  listed, names = [], set()
  for row in ints + floats:
    dt = to_dtype(row["name"].strip("`"))
    listed.append(dt)
    names.add(row["name"].strip("`"))
    assert SHORT[row["short"]] == dt
    if row["alias"] != "—":
      assert to_dtype(row["alias"].strip("`")) == dt
      names.add(row["alias"].strip("`"))
    assert (dt.name, dt.itemsize, dt.bits) == (row["C name"].strip("`"), int(row["itemsize"]), int(row["bits"]))
  for row in ints:
    dt, parse = to_dtype(row["name"].strip("`")), lambda s: {"False": False, "True": True}.get(s, None)
    for col, fn in (("min", dtypes.min), ("max", dtypes.max)):
      want = parse(row[col]) if parse(row[col]) is not None else int(row[col])
      assert same(fn(dt), want), (dt, col)
  for row in floats:
    dt = to_dtype(row["name"].strip("`"))
    e, m, bias = int(row["exponent bits"]), int(row["mantissa bits"]), int(row["bias"])
    assert dtypes.finfo(dt) == (e, m) and bias == (1 << (e - 1)) - 1
    assert float.fromhex(re.search(r"`(0x[^`]+)`", row["largest finite"]).group(1)) == float_max(dt)
    tiny_normal = math.ldexp(1.0, int(re.search(r"2\^(-?\d+)", row["smallest normal"]).group(1)))
    tiny_sub = math.ldexp(1.0, int(re.search(r"2\^(-?\d+)", row["smallest subnormal"]).group(1)))
    assert tiny_normal == math.ldexp(1.0, 1 - bias) and tiny_sub == math.ldexp(1.0, 1 - bias - m)
    assert round_float(tiny_sub, dt) == tiny_sub and round_float(tiny_sub / 2, dt) == 0.0   # the tie goes to even 0
    assert (dtypes.min(dt), dtypes.max(dt)) == (-math.inf, math.inf)
  assert listed == list(ALL), "the spec tables list every scalar type once, in dtypes.all() order"
  assert names == set(dtypes.fields()) - {"void"}, "every sized name and alias is in the tables, nothing else"


def test_void_has_no_values():
  assert dtypes.void.itemsize == 0 and dtypes.void not in ALL
  for fn in (dtypes.min, dtypes.max, lambda d: dtypes.as_const(1, d)):
    with pytest.raises(ValueError, match=r"^DT\."):
      fn(dtypes.void)


# ---------------------------------------------------------------------------------------------------------------
# DT.PROMOTE: the lattice table and picture in the spec equal the code; lattice laws

def test_lattice_table_matches_code():
  rows = spec_table("⊔")
  assert [r["⊔"] for r in rows] == [f"**{s}**" for s in SHORT]
  for row in rows:
    a = SHORT[row["⊔"].strip("*")]
    for col, bdt in SHORT.items():
      cell = row[col]
      assert least_upper_dtype(a, bdt) == SHORT[cell.rstrip("*")], (a, bdt, cell)
      # a star marks the weak-float node: exactly those cells follow the default float, no others do
      weak = _join(a, bdt) == _WEAK_FLOAT
      assert cell.endswith("*") == weak, (a, bdt, cell)
      with defaults(float_dt=f16):
        assert least_upper_dtype(a, bdt) == (f16 if weak else SHORT[cell.rstrip("*")])


def test_lattice_picture_matches_code():
  block = re.search(r"```mermaid\n(flowchart BT\n.*?)```", SPEC, re.S).group(1)
  node = {**SHORT, "weak": _WEAK_FLOAT}
  drawn = {(node[c], node[p]) for c, p in re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", block, re.M)}
  assert drawn == {(c, p) for c, ps in _PARENTS.items() for p in ps}


def _join(a, b):
  """The join of two nodes of the promotion graph (weak-float node included), found independently of the code."""
  common = _UPPER[a] & _UPPER[b]
  least = [c for c in common if common <= _UPPER[c]]
  assert len(least) == 1, f"no unique least upper bound of {a} and {b}: the graph is not a lattice"
  return least[0]


def test_lattice_laws_with_weak_node():
  nodes = list(_PARENTS)
  assert len(nodes) == 14
  for x, y in itertools.product(nodes, repeat=2):
    assert _join(x, y) == _join(y, x)
    assert _join(x, x) == x and _join(b, x) == x and _join(f64, x) == f64
  for x, y, z in itertools.product(nodes, repeat=3):
    assert _join(_join(x, y), z) == _join(x, _join(y, z))


def test_public_promotion_laws():
  report = lambda n: dtypes.default_float if n == _WEAK_FLOAT else n
  for x, y in itertools.product(ALL, repeat=2):
    assert least_upper_dtype(x, y) == least_upper_dtype(y, x) == report(_join(x, y))
    assert least_upper_dtype(x, x) == least_upper_dtype(x) == x
    assert least_upper_dtype(b, x) == x and least_upper_dtype(f64, x) == f64
  for x, y, z in itertools.product(ALL, repeat=3):
    nary = least_upper_dtype(x, y, z)
    assert nary == report(_join(_join(x, y), z))
    assert all(least_upper_dtype(*p) == nary for p in itertools.permutations((x, y, z)))
    # DT.PROMOTE.fold: folding pairwise only differs when an intermediate is the weak float and a 16-bit float follows
    folded = least_upper_dtype(least_upper_dtype(x, y), z)
    assert (folded != nary) == (_join(x, y) == _WEAK_FLOAT and z in (f16, bf16)), (x, y, z)
  assert least_upper_dtype(i64, u64, f16) == f16 and least_upper_dtype(least_upper_dtype(i64, u64), f16) == f32


def test_promotion_of_vectors_and_errors():
  assert least_upper_dtype(dtypes.float.vec(4), dtypes.half) == f32
  with pytest.raises(ValueError, match=r"^DT\.PROMOTE"):
    least_upper_dtype()
  with pytest.raises(ValueError, match=r"^DT\.PROMOTE"):
    least_upper_dtype(dtypes.void, i8)


# DT.PROMOTE.torch: torch refuses every mix of uint16/uint32/uint64 with bool or another integer type
TORCH_PROMOTE_DIFFERS = {"DT.PROMOTE.torch": {frozenset((a, u)) for u in (u16, u32, u64) for a in ALL
                                              if a != u and not dtypes.is_float(a)}}


def test_promotion_agrees_with_torch():
  documented = set().union(*TORCH_PROMOTE_DIFFERS.values())
  assert set(TORCH_PROMOTE_DIFFERS) <= CLAUSES and len(documented) == 21   # the spec says "these 21 pairs"
  for x, y in itertools.combinations_with_replacement(ALL, 2):
    if frozenset((x, y)) in documented:
      with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64"):
        torch.promote_types(TORCH[x], TORCH[y])
    else:
      assert TORCH[least_upper_dtype(x, y)] == torch.promote_types(TORCH[x], TORCH[y]), (x, y)
  assert (least_upper_dtype(u16, i8), least_upper_dtype(u32, i32), least_upper_dtype(i64, u64)) == (i32, i64, f32)


# ---------------------------------------------------------------------------------------------------------------
# DT.SCALAR-PROMOTE, DT.PROMOTE.float, DT.DEFAULT, DT.SUM

SCALARS = (False, True, 0, 3, -7, 1000, 2**40, 0.0, -0.0, 2.5, math.inf, math.nan)
# DT.SCALAR-PROMOTE.torch: a bool tensor with an int scalar is torch's int64 but default_int here
TORCH_SCALAR_DIFFERS = {"DT.SCALAR-PROMOTE.torch": {(b, int)}}


def test_scalar_promotion_agrees_with_torch():
  documented = set().union(*TORCH_SCALAR_DIFFERS.values())
  assert set(TORCH_SCALAR_DIFFERS) <= CLAUSES
  for dt, x in itertools.product(ALL, SCALARS):
    theirs = torch.result_type(torch.zeros(2, dtype=TORCH[dt]), x)
    if (dt, type(x)) in documented:
      assert scalar_result_dtype(dt, x) == i32 and theirs == torch.int64
    else:
      assert TORCH[scalar_result_dtype(dt, x)] == theirs, (dt, x)
    with defaults(int_dt=i64):   # with torch's default int the documented difference disappears
      assert TORCH[scalar_result_dtype(dt, x)] == theirs, (dt, x)
  # torch treats 0-d tensors as weak too; here a 0-d tensor promotes with the lattice
  assert torch.result_type(torch.zeros(2, dtype=torch.int8), torch.tensor(1, dtype=torch.int32)) == torch.int8
  assert least_upper_dtype(i8, i32) == i32


def test_scalar_promotion_examples_from_spec():
  # a list, not a dict: (b, 1) and (b, True) would be one key, since True == 1
  examples = [(i8, 3, i8), (u8, -1, u8), (i8, 1000, i8), (i8, 2.5, f32), (f16, 2.5, f16), (b, 1, i32), (b, True, b),
              (f64, True, f64)]
  for dt, x, want in examples: assert scalar_result_dtype(dt, x) == want, (dt, x)
  assert dtypes.as_const(-1, u8) == 255 and dtypes.as_const(1000, i8) == -24
  with defaults(int_dt=i64, float_dt=f16):
    assert scalar_result_dtype(b, 1) == i64 and scalar_result_dtype(i8, 2.5) == f16
    assert scalar_result_dtype(f64, 1.0) == f64


def test_defaults_and_from_py():
  assert (dtypes.default_int, dtypes.default_float) == (i32, f32)
  assert dtypes.from_py(True) == b and dtypes.from_py(1) == i32 and dtypes.from_py(1.0) == f32
  assert dtypes.from_py([True, 2]) == i32 and dtypes.from_py([[1], [2.0]]) == f32 and dtypes.from_py([]) == f32
  with defaults(int_dt=i64, float_dt=bf16):
    assert dtypes.from_py(1) == i64 and dtypes.from_py([1, 2.0]) == bf16
    assert least_upper_dtype(i64, u64) == bf16 and least_upper_float(i8) == bf16
  assert (dtypes.default_int, dtypes.default_float) == (i32, f32)
  with pytest.raises(TypeError, match=r"^DT\.DEFAULT"):
    dtypes.from_py("1")


def test_least_upper_float():
  for dt in ALL:
    assert least_upper_float(dt) == (dt if dtypes.is_float(dt) else f32)
    if not dtypes.is_float(dt):
      assert least_upper_float(dt) == least_upper_dtype(dt, dtypes.default_float)
      assert TORCH[least_upper_float(dt)] == (torch.zeros(2, dtype=TORCH[dt]) / 1).dtype   # torch true division


def test_sum_acc_dtype():
  want = {b: i32, i8: i32, i16: i32, i32: i32, i64: i64, u8: u32, u16: u32, u32: u32, u64: u64, f16: f32, bf16: f32,
          f32: f32, f64: f64}
  assert {dt: sum_acc_dtype(dt) for dt in ALL} == want
  with defaults(int_dt=i64):
    assert [sum_acc_dtype(dt) for dt in (b, i8, i16, i32, u8)] == [i64, i64, i64, i64, u32]
  # torch sums every integer type into int64, so the spec's DT.SUM differs for all but int64
  for dt in ALL:
    if dtypes.is_int(dt) or dt == b: assert torch.ones(2, dtype=TORCH[dt]).sum().dtype == torch.int64


# ---------------------------------------------------------------------------------------------------------------
# DT.ROUND: exact rounding, against numpy (float16, float32) and torch (bfloat16)

NP_FLOAT = {f16: np.float16, f32: np.float32}


def rounded(xs: np.ndarray, dt: DType) -> np.ndarray:
  return np.array([round_float(float(x), dt) for x in xs], dtype=np.float64)


def assert_same_arrays(xs: np.ndarray, ours: np.ndarray, ref: np.ndarray, what: str):
  ok = (np.isnan(ours) & np.isnan(ref)) | (ours.view(np.uint64) == ref.view(np.uint64))
  bad = np.flatnonzero(~ok)
  i = bad[0] if bad.size else 0
  assert bad.size == 0, f"{what}: {bad.size} mismatches, e.g. x={xs[i]!r} ours={ours[i]!r} ref={ref[i]!r}"


def overflow_threshold(dt: DType) -> float:
  e, m = dtypes.finfo(dt)
  return math.ldexp(2.0 - math.ldexp(1.0, -(m + 1)), (1 << (e - 1)) - 1)


def float64_samples(rng: np.random.Generator, n: int, dt: DType) -> np.ndarray:
  """Float64 values of every class for rounding into `dt`: uniform bit patterns (mostly far out of range: zero or
  inf), patterns with exponents around dt's range (subnormals, normals, overflow), and the same with short
  mantissas (exactly representable values and ties), plus specials."""
  e, m = dtypes.finfo(dt)
  emax = (1 << (e - 1)) - 1
  raw = np.frombuffer(rng.bytes(8 * n), dtype=np.uint64)
  exps = rng.integers(1023 + (1 - emax) - m - 3, 1023 + emax + 2, n).astype(np.uint64)
  near = (raw & np.uint64(0x800FFFFFFFFFFFFF)) | (exps << np.uint64(52))
  short = near & ~((np.uint64(1) << rng.integers(0, 53, n).astype(np.uint64)) - np.uint64(1))
  t, fmax = overflow_threshold(dt), float_max(dt)
  specials = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, fmax, -fmax, t, -t, math.nextafter(t, 0.0),
              5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308]
  return np.concatenate([raw[: n // 4].view(np.float64), near[: n // 2].view(np.float64),
                         short[: n // 4].view(np.float64), np.array(specials)])


@pytest.mark.parametrize("dt", [f16, f32], ids=["float16", "float32"])
def test_round_float_against_numpy(dt):
  xs = float64_samples(np.random.default_rng(1234), 200_000, dt)
  with np.errstate(over="ignore", invalid="ignore"):
    ref = xs.astype(NP_FLOAT[dt]).astype(np.float64)
  assert_same_arrays(xs, rounded(xs, dt), ref, f"round_float(x, {dt!r}) vs numpy")


def test_round_float_bfloat16_against_torch():
  # float64 -> bfloat16 in torch may round twice (through float32), so only float32 inputs are compared
  rng = np.random.default_rng(99)
  bits = np.frombuffer(rng.bytes(4 * 200_000), dtype=np.uint32)
  bits = np.concatenate([bits[:100_000], bits[100_000:] & ~((np.uint32(1) << rng.integers(0, 24, 100_000)
                                                               .astype(np.uint32)) - np.uint32(1))])
  x32 = bits.view(np.float32)
  ref = torch.from_numpy(x32.copy()).to(torch.bfloat16).to(torch.float64).numpy()
  with np.errstate(invalid="ignore"):   # signalling NaN patterns are quieted by the widening, which is fine
    xs = x32.astype(np.float64)
  assert_same_arrays(xs, rounded(xs, bf16), ref, "round_float(x, bfloat16) vs torch")


def _tie_check(lo: np.ndarray, hi: np.ndarray, lo_bits: np.ndarray, dt: DType, ref_fn=None):
  """Midpoints of neighbours lo < hi round to the one with an even last bit, both signs; ref_fn must agree."""
  mid = (lo + hi) / 2                      # exact: float64 has bits to spare for every narrower format
  want = np.where(lo_bits & 1 == 0, lo, hi)
  for sign in (1.0, -1.0):
    assert_same_arrays(sign * mid, rounded(sign * mid, dt), sign * want, f"ties into {dt!r}")
    if ref_fn is not None: assert_same_arrays(sign * mid, ref_fn(sign * mid), sign * want, f"reference ties {dt!r}")


def test_round_float_ties():
  # float16: every pair of neighbouring finite values (the pair max/inf is the overflow test's)
  p16 = np.arange(0, 0x7BFF, dtype=np.uint16)
  _tie_check(p16.view(np.float16).astype(np.float64), (p16 + 1).view(np.float16).astype(np.float64), p16, f16,
             lambda x: x.astype(np.float16).astype(np.float64))
  # bfloat16: every neighbouring pair too; the midpoints are float32 values, so torch can be asked directly
  pbf = np.arange(0, 0x7F7F, dtype=np.uint32)
  as_f64 = lambda p: (p << np.uint32(16)).view(np.float32).astype(np.float64)
  _tie_check(as_f64(pbf), as_f64(pbf + 1), pbf, bf16,
             lambda x: torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).to(torch.float64).numpy())
  # float32: a random sample of neighbouring pairs
  p32 = np.random.default_rng(7).integers(0, 0x7F7FFFFF, 50_000).astype(np.uint32)
  _tie_check(p32.view(np.float32).astype(np.float64), (p32 + 1).view(np.float32).astype(np.float64), p32, f32,
             lambda x: x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("dt", [f16, bf16, f32], ids=["float16", "bfloat16", "float32"])
def test_round_float_overflow_and_specials(dt):
  t, fmax = overflow_threshold(dt), float_max(dt)
  for s in (1.0, -1.0):
    assert round_float(s * t, dt) == s * math.inf            # the tie at the threshold goes to even: inf
    assert round_float(s * math.nextafter(t, 0.0), dt) == s * fmax
    assert round_float(s * 1.7976931348623157e308, dt) == s * math.inf   # rounds past float64's own range
    assert round_float(s * math.inf, dt) == s * math.inf and same(round_float(s * 0.0, dt), s * 0.0)
    assert same(round_float(s * 1e-50, dt), s * 0.0)        # underflow keeps the sign
  assert math.isnan(round_float(math.nan, dt))
  assert round_float(65519.99, f16) == 65504.0 and round_float(65520.0, f16) == math.inf
  for x in (0.1, -3.0e-310, 1e300, math.pi): assert same(round_float(x, f64), x)


# ---------------------------------------------------------------------------------------------------------------
# DT.WRAP, DT.CONST

def test_wrap_int():
  assert (wrap_int(128, i8), wrap_int(-1, u8), wrap_int(2**63, i64), wrap_int(2**64 + 5, u64)) == (-128, 255, -2**63, 5)
  assert wrap_int(-129, i8) == 127 and wrap_int(300, u8) == 44 and wrap_int(-(2**100) - 1, u32) == 2**32 - 1
  rng = np.random.default_rng(3)
  xs = [int(v) * (1 << int(s)) + int(w) for v, s, w in zip(rng.integers(-2**62, 2**62, 2000), rng.integers(0, 9, 2000),
                                                             rng.integers(-5, 5, 2000))]
  for dt, (u, s) in {i8: (np.uint8, np.int8), u8: (np.uint8, np.uint8), i16: (np.uint16, np.int16),
                     u16: (np.uint16, np.uint16), i32: (np.uint32, np.int32), u32: (np.uint32, np.uint32),
                     i64: (np.uint64, np.int64), u64: (np.uint64, np.uint64)}.items():
    # reference: the low bits as an unsigned pattern, reinterpreted by numpy as the signed type
    ref = np.array([x % (1 << dt.bits) for x in xs], dtype=u).view(s)
    got = [wrap_int(x, dt) for x in xs]
    assert got == ref.tolist(), dt
    assert all(dtypes.min(dt) <= g <= dtypes.max(dt) and type(g) is int for g in got)


def test_as_const_to_int_and_bool():
  cases = [(1e10, i32, 2**31 - 1), (-1e10, i32, -2**31), (math.inf, u8, 255), (-math.inf, u8, 0), (-1.5, u8, 0),
           (math.nan, i64, 0), (math.nan, u8, 0), (2.9, i8, 2), (-2.9, i8, -2), (-0.0, i16, 0), (1e300, u64, 2**64 - 1),
           (300, u8, 44), (-129, i8, 127), (-1, u32, 2**32 - 1), (True, i8, 1), (2**70 + 3, i64, 3),
           (math.nan, b, True), (-0.0, b, False), (0.5, b, True), (0, b, False), (-3, b, True), (1, f32, 1.0)]
  for x, dt, want in cases: assert same(dtypes.as_const(x, dt), want), (x, dt)


def test_as_const_float_rounding():
  assert dtypes.as_const(0.1, f32) == float(np.float32(0.1)) and dtypes.as_const(0.1, f16) == float(np.float16(0.1))
  assert dtypes.as_const(1e6, f16) == math.inf and same(dtypes.as_const(-0.0, bf16), -0.0)
  assert dtypes.as_const(True, f16) == 1.0 and dtypes.as_const(2**1100, f64) == math.inf
  assert dtypes.as_const(-(2**1100), bf16) == -math.inf and dtypes.as_const(2**1024 - 2**971, f64) == float_max(f64)
  assert dtypes.as_const(2**60 + 2**36 + 1, f32) == 2.0**60 + 2**37   # rounded once, not through float64 (spec)


def _int_round_ref(n: int, dt: DType) -> float:
  """Exact round-half-even of an integer to dt's precision, by integer arithmetic only."""
  p = dtypes.finfo(dt)[1] + 1
  shift = max(abs(n).bit_length() - p, 0)
  q, r = divmod(abs(n), 1 << shift)
  half = (1 << shift) >> 1
  if shift and (r > half or (r == half and q & 1)): q += 1
  v = q << shift
  return math.copysign(math.inf, n) if v > float_max(dt) else math.copysign(float(v), n) if v else 0.0


def test_as_const_int_to_float_is_rounded_once():
  rng = np.random.default_rng(5)
  ns = [0, 1, -1, 2**53 + 1, 2**64 - 1, -(2**63), 2**127 * 3 - 1, 2**200 + 1]
  for bits, tail in zip(rng.integers(1, 80, 1000), rng.integers(-2, 3, 1000)):
    top = int(rng.integers(0, 2**62)) >> (62 - min(int(bits), 62))
    n = (top << max(int(bits) - 62, 0)) + int(tail)
    for p in (11, 8, 24, 53):   # and integers near a tie of each precision
      s = max(n.bit_length() - p, 1)
      ns += [n, -n, ((n >> s) << s) + (1 << (s - 1)) + int(tail)]
  for dt in (f16, bf16, f32, f64):
    for n in ns: assert same(dtypes.as_const(n, dt), _int_round_ref(n, dt)), (n, dt)
  small = np.array([n for n in ns if -(2**63) <= n < 2**63], dtype=np.int64)
  assert [dtypes.as_const(int(n), f32) for n in small] == small.astype(np.float32).astype(np.float64).tolist()


# ---------------------------------------------------------------------------------------------------------------
# DT.CAST.lossless

def _all_values(dt: DType) -> list:
  if dt == b: return [False, True]
  if dtypes.is_int(dt): return list(range(dtypes.min(dt), dtypes.max(dt) + 1))
  assert dt == f16
  return np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64).tolist()


def _preserved(values, dst: DType) -> bool:
  """Every value converts to the same number in dst (floats: same() so NaN and -0.0 count; else ==, True == 1)."""
  def kept(v, w): return same(v, w) if isinstance(v, float) and isinstance(w, float) else v == w
  return all(kept(v, dtypes.as_const(v, dst)) for v in values)


@pytest.mark.parametrize("src", [b, i8, u8, i16, f16], ids=repr)
def test_can_lossless_cast_brute_force(src):
  values = _all_values(src)
  for dst in ALL: assert can_lossless_cast(src, dst) == _preserved(values, dst), (src, dst)


def test_can_lossless_cast_is_not_a_round_trip():
  # the spec's example: wrapping int8 -> uint8 -> int8 gives every value back, but -1 is 255 in between
  assert all(dtypes.as_const(dtypes.as_const(v, u8), i8) == v for v in _all_values(i8))
  assert dtypes.as_const(-1, u8) == 255 and not can_lossless_cast(i8, u8)


def test_can_lossless_cast_witnesses():
  # for the types too big to enumerate: the answer is right on a set of edge values (a witness exists for False)
  raw = [0, 1, -1, 2, 255, 256, 257, -129, 65535, 65536, -32769, 2**24 + 1, 2**31 - 1, 2**32 - 1, 2**32 + 1,
         2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 0.5, -2.5, 0.1, 1e-40, 1e-300, 1e38, 3.4e38, 1e300, 65504.0,
         math.inf, -math.inf, math.nan, -0.0, 1 + 2**-10, 1 + 2**-23, 1 + 2**-52]
  for src, dst in itertools.product(ALL, repeat=2):
    values = {dtypes.as_const(x, src) for x in raw if not (isinstance(x, float) and dtypes.is_int(src) and x != x)}
    values |= {dtypes.min(src), dtypes.max(src)} if not dtypes.is_float(src) else set()
    values = list(values) + ([math.nan, -0.0] if dtypes.is_float(src) else [])
    assert can_lossless_cast(src, dst) == _preserved(values, dst), (src, dst)


# ---------------------------------------------------------------------------------------------------------------
# DT.SCALARS, DT.VECTOR, DT.PTR: names, reprs and errors

def test_reprs():
  assert repr(dtypes.int) == "dtypes.int" and repr(dtypes.int32) == "dtypes.int"
  assert repr(dtypes.float.vec(4)) == "dtypes.float.vec(4)"
  assert repr(dtypes.int.ptr(4)) == "dtypes.int.ptr(4)"
  assert repr(dtypes.float.ptr(16, "local")) == "dtypes.float.ptr(16, addrspace='local')"
  assert [repr(d) for d in (u8, bf16, f16, u64)] == ["dtypes.uchar", "dtypes.bfloat16", "dtypes.half", "dtypes.ulong"]
  for dt in [*ALL, dtypes.void, dtypes.half.vec(8), dtypes.uint.ptr(), dtypes.float.vec(4).ptr(2, "reg")]:
    assert eval(repr(dt), {"dtypes": dtypes}) == dt, repr(dt)


def test_vectors():
  v = dtypes.float.vec(4)
  assert (v.count, v.scalar(), v.itemsize, v.bits, v.name) == (4, f32, 16, 32, "float4")
  assert dtypes.is_float(v) and not dtypes.is_int(v) and dtypes.int8.vec(3) != dtypes.uint8.vec(3)
  assert dtypes.float.vec(1) is f32 and dtypes.void.vec(4) == dtypes.void
  for bad in (lambda: v.vec(2), lambda: f32.vec(0), lambda: f32.ptr().vec(2)):
    with pytest.raises(ValueError, match=r"^DT\.(VECTOR|PTR)"):
      bad()


def test_pointers():
  p = dtypes.int.ptr(4)
  assert (p.base, p.size, p.addrspace, p.itemsize) == (i32, 4, "global", 4)
  assert p == dtypes.int.ptr(4) and p != dtypes.int.ptr(5) and p != dtypes.int.ptr(4, "local") and p != i32
  assert dtypes.float.vec(4).ptr().base == dtypes.float.vec(4) and dtypes.float.ptr().size == -1
  for bad in (lambda: p.ptr(), lambda: f32.ptr(1, "shared")):
    with pytest.raises(ValueError, match=r"^DT\.PTR"):
      bad()


def test_to_dtype():
  assert to_dtype("half") is f16 and to_dtype("float32") is f32 and to_dtype("ulong") is u64 and to_dtype(i8) is i8
  for bad in ("float128", "Float32", "weak float", ""):
    with pytest.raises(ValueError, match=r"^DT\.SCALARS"):
      to_dtype(bad)


# ---------------------------------------------------------------------------------------------------------------
# clause IDs: the code cites only clauses the spec defines

REQUIRED = {"DT.SCALARS", "DT.DEFAULT", "DT.VECTOR", "DT.PTR", "DT.FLOAT", "DT.CONST", "DT.WRAP", "DT.ROUND",
            "DT.PROMOTE", "DT.PROMOTE.float", "DT.SCALAR-PROMOTE", "DT.SUM", "DT.CAST.lossless", "DT.VALUES", "DT.NAN"}


def test_clauses_defined_once():
  assert REQUIRED <= CLAUSES
  assert [c for c, k in collections.Counter(CLAUSE_LIST).items() if k > 1] == []
  assert all(c.startswith("DT.") for c in CLAUSES)


def test_cited_clauses_are_defined():
  source = (ROOT / "refimpl" / "dtype.py").read_text()
  cited = {c.rstrip(".-") for c in re.findall(r"\bDT\.[A-Za-z0-9_.\-]+", source)}
  assert cited and cited <= CLAUSES, f"cited by refimpl/dtype.py but not defined in spec/dtypes.md: {cited - CLAUSES}"
  referenced = set(re.findall(r"`(DT\.[A-Za-z0-9_.\-]+)`", SPEC))
  assert referenced <= CLAUSES, f"referred to in spec/dtypes.md but not defined: {referenced - CLAUSES}"
