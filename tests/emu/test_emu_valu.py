"""emu.valu against exec_alu: every ALU op, CAST and BITCAST, on every dtype it accepts, bit for bit
(EXEC.THREAD.value). Operands are special values plus hypothesis-drawn bit patterns (derandomized)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emu import valu
from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.semantics import ALU_DTYPES, exec_alu

ALU_OPS = sorted((op for op in ALU_DTYPES if op not in (Ops.CAST, Ops.BITCAST)), key=lambda o: o.name)
ARITY = {Ops.WHERE: 3, Ops.MULACC: 3}
UNARY = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG}
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]


def specials(dt):
  if dt == dtypes.bool: return [False, True]
  if dtypes.is_int(dt):
    lo, hi = dtypes.min(dt), dtypes.max(dt)
    cands = {lo, lo + 1, -1 if lo < 0 else 2, 0, 1, 2, 3, 7, dt.bits, dt.bits + 1, hi - 1, hi}
    return sorted(v for v in cands if lo <= v <= hi)
  tiny = math.ldexp(1.0, {16: -24, 32: -149, 64: -1074}[dt.bits] if dt != dtypes.bfloat16 else -133)
  return [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, math.inf, -math.inf, math.nan, tiny, -tiny, 1e4, -7e-3]


def values_from_bits(bits, dt):
  """Python values of dt for unsigned bit patterns (floats rounded back through storage so they are exact)."""
  arr = valu.from_bits(np.asarray(bits, dtype=valu._UINT[dt.itemsize]), dt)
  if dt == dtypes.bool: return [bool(b & 1) for b in bits]
  if dtypes.is_int(dt): return [int(v) for v in arr]
  return [float(v) for v in valu.to_float(arr, dt)]


def exact(dt, values):
  return [dtypes.as_const(v, dt) if not (isinstance(v, float) and v != v) else v for v in values]


def same(a, b):
  if isinstance(a, float) and isinstance(b, float):
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
  return a == b and type(a) is type(b)


def check(op, dt, src_dt, columns):
  fn = valu.alu(op, dt, src_dt)
  srcs = [dtypes.bool, src_dt, src_dt] if op is Ops.WHERE else [src_dt] * len(columns)
  arrays = [valu.to_storage(col, s) for col, s in zip(columns, srcs)]
  with np.errstate(all="ignore"): got = fn(*arrays)
  got = np.broadcast_to(got, (len(columns[0]),))
  got_py = [bool(x) for x in got] if dt == dtypes.bool else [int(x) for x in got] if dtypes.is_int(dt) else \
    [float(x) for x in valu.to_float(got, dt)]
  for i, g in enumerate(got_py):
    ops = [c[i] for c in columns]
    want = exec_alu(op, dt, ops, src_dt)
    assert same(g, want), f"{op.name} {dt!r} <- {src_dt!r} {ops}: emu {g!r}, exec_alu {want!r}"


def operand_columns(op, dt, extra_bits):
  n = 1 if op in UNARY else ARITY.get(op, 2)
  sp = exact(dt, specials(dt))
  rows = list(itertools.product(sp, repeat=n)) if n < 3 else list(itertools.product(sp[:8], repeat=3))
  rnd = values_from_bits(extra_bits, dt)
  rows += [tuple(rnd[(i + k * 7) % len(rnd)] for k in range(n)) for i in range(len(rnd))] if rnd else []
  cols = [list(c) for c in zip(*rows)]
  if op is Ops.WHERE: cols[0] = [bool(i % 3) for i in range(len(rows))]
  return cols


CASES = [(op, dt) for op in ALU_OPS for dt in sorted(ALU_DTYPES[op], key=lambda d: d.priority)]


@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o.name}-{d.name.replace(' ', '_')}" for o, d in CASES])
@settings(max_examples=3, derandomize=True, deadline=None)
@given(data=st.data())
def test_alu_matches_exec_alu(op, dt, data):
  bits = data.draw(st.lists(st.integers(0, (1 << (8 * dt.itemsize)) - 1), min_size=1, max_size=40))
  check(op, dt, dt if op not in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt, operand_columns(op, dt, bits)) \
    if op not in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else _check_cmp(op, dt, bits)


def _check_cmp(op, dt, bits):
  check(op, dtypes.bool, dt, operand_columns(op, dt, bits))


PAIRS = [(s, d) for s in dtypes.all() for d in dtypes.all()]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s.name}->{d.name}".replace(" ", "_") for s, d in PAIRS])
@settings(max_examples=2, derandomize=True, deadline=None)
@given(data=st.data())
def test_cast_and_bitcast(src, dst, data):
  bits = data.draw(st.lists(st.integers(0, (1 << (8 * src.itemsize)) - 1), min_size=1, max_size=40))
  col = exact(src, specials(src)) + values_from_bits(bits, src)
  if src == dtypes.int64: col += [2 ** 53 + 1, 2 ** 60 + 3, -(2 ** 62) - 5]   # past float64's exact ints
  check(Ops.CAST, dst, src, [col])
  if src.itemsize == dst.itemsize: check(Ops.BITCAST, dst, src, [col])


@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX])
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int8,
                                dtypes.uint32, dtypes.int64, dtypes.bool])
@pytest.mark.parametrize("n_threads, n_iter", [(5, 300), (300, 5)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_fold_is_left_to_right(op, dt, n_threads, n_iter, order):
  """EXEC.THREAD.reduce: valu.fold (ufunc.accumulate / reduce along the iterations for few threads, one op per
  iteration over all threads for few iterations) equals a Python loop of exec_alu; the emulator passes (threads,
  iterations) as a transposed view (order F) of its (iterations, threads) values."""
  rng = np.random.default_rng(0)
  bits = rng.integers(0, 1 << (8 * dt.itemsize), size=n_threads * n_iter, dtype=np.uint64)
  if dtypes.is_float(dt):   # mostly ordinary magnitudes so that rounding order matters, plus some specials
    vals = list(rng.standard_normal(n_threads * n_iter) * 1e3)
    vals = [dtypes.as_const(v, dt) for v in vals]
    for i, s in enumerate([0.0, -0.0, math.nan, math.inf, 1e-30]): vals[i * 97 + 3] = dtypes.as_const(s, dt)
  else: vals = values_from_bits([int(b) & ((1 << (8 * dt.itemsize)) - 1) for b in bits], dt)
  if dt == dtypes.bool: vals = [bool(b & 1) for b in bits]
  ident = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(dt)}[op]
  ident = dtypes.as_const(ident, dt) if dt != dtypes.bool else op is Ops.MUL
  arr = valu.to_storage(vals, dt).reshape(n_threads, n_iter)
  if order == "F": arr = np.asfortranarray(arr)
  with np.errstate(all="ignore"): got = valu.fold(op, dt, valu.to_storage([ident], dt)[0], arr)
  for t in range(n_threads):
    acc = ident
    for v in vals[t * n_iter:(t + 1) * n_iter]: acc = exec_alu(op, dt, [acc, v])
    g = got[t]
    g = bool(g) if dt == dtypes.bool else int(g) if dtypes.is_int(dt) else float(valu.to_float(np.asarray(g), dt))
    assert same(g, acc), f"{op.name} {dt!r} thread {t}: {g!r} != {acc!r}"


INT_DTYPES = sorted(ALU_DTYPES[Ops.CDIV], key=lambda d: d.priority)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", [Ops.CDIV, Ops.CMOD], ids=lambda o: o.name)
@settings(max_examples=20, derandomize=True, deadline=None)
@given(data=st.data())
def test_divide_by_scalar(op, dt, data):
  """OP.CDIV, OP.CMOD with a scalar divisor (the fast path for non-negative dividends, valu._by_positive_scalar) and
  dividends all >= 0 or with negatives (the general path), against exec_alu."""
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  nonneg = data.draw(st.booleans())
  xs = data.draw(st.lists(st.integers(0 if nonneg else lo, hi) | st.sampled_from([0, hi] + ([] if nonneg else [lo])),
                          min_size=1, max_size=30))
  d = data.draw(st.integers(lo, hi) | st.sampled_from([v for v in (1, 2, 3, 306, hi, -1, lo) if lo <= v <= hi]))
  got = valu.alu(op, dt)(valu.to_storage(xs, dt), valu.NP[dt](d))
  assert [int(g) for g in got] == [exec_alu(op, dt, [x, d]) for x in xs], (xs, d)


@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o.name}-{d.name.replace(' ', '_')}" for o, d in CASES])
def test_alu_on_numpy_scalars(op, dt):
  """EXEC.THREAD.value on numpy scalars, not arrays: a translated kernel holds a serial loop's counter as `t(r)` and a
  constant as a storage scalar, so an index computed from them alone (`r % 2` inside a loop that is not vectorized)
  reaches valu with 0-d operands. CMOD's fast path wrote its result with `out=` into what numpy hands back as a scalar
  there, and raised TypeError 'return arrays must be of ArrayType' (the gradient of max_unpool2d on PYTHON)."""
  out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
  fn = valu.alu(op, out_dt, dt)
  cols = operand_columns(op, dt, [])
  srcs = [dtypes.bool, dt, dt] if op is Ops.WHERE else [dt] * len(cols)
  for row in zip(*cols):
    args = [valu.to_storage([v], s)[0] for v, s in zip(row, srcs)]   # numpy scalars, as the kernel's `c`/`t(r)`
    with np.errstate(all="ignore"): got = np.asarray(fn(*args))
    assert got.shape == (), (op, dt, row, got.shape)
    g = bool(got) if out_dt == dtypes.bool else int(got) if dtypes.is_int(out_dt) else \
      float(valu.to_float(got, out_dt))
    want = exec_alu(op, out_dt, list(row), dt)
    assert same(g, want), f"{op.name} {dt!r} {row}: emu {g!r}, exec_alu {want!r}"


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s.name}->{d.name}".replace(" ", "_") for s, d in PAIRS])
def test_cast_and_bitcast_on_numpy_scalars(src, dst):
  """As test_alu_on_numpy_scalars, for CAST and BITCAST: a scalar in gives a scalar out (BITCAST went through
  ascontiguousarray, which makes a 0-d operand 1-d) with exec_alu's value."""
  for op in (Ops.CAST, Ops.BITCAST) if src.itemsize == dst.itemsize else (Ops.CAST,):
    fn = valu.alu(op, dst, src)
    for v in exact(src, specials(src)):
      with np.errstate(all="ignore"): got = np.asarray(fn(valu.to_storage([v], src)[0]))
      assert got.shape == (), (op, src, dst, v, got.shape)
      g = bool(got) if dst == dtypes.bool else int(got) if dtypes.is_int(dst) else float(valu.to_float(got, dst))
      want = exec_alu(op, dst, [v], src)
      assert same(g, want), f"{op.name} {src!r}->{dst!r} {v!r}: emu {g!r}, exec_alu {want!r}"
