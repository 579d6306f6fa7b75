"""The CPU device and its C renderer (spec/backends.md, DEV.C.*, DEV.CPU.*) against the executable semantics:
every edge-case row of spec/ops.md run as a CPU kernel, random operands for every ALU op and dtype, every float16 and
bfloat16 bit pattern through the conversions, plus the compiler, cache, threading and launch contract."""
import math
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from conformance.spec_tables import edge_tables, parse_value, same_value
from refimpl.codegen import linearize
from refimpl import Tensor
from refimpl.device import Device, LinearProgram
from refimpl.dtype import DType, dtypes, round_float, to_dtype
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import ALU_DTYPES, alu_result_dtype, exec_alu

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile",
              allow_module_level=True)

from refimpl.runtime import ops_cpu  # noqa: E402
from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
I32 = dtypes.int32
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
TRANSCENDENTAL = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)   # EXEC.FLOAT.transcendental: within ULPs, not bit for bit
ALU_OPS = sorted((op for op in ALU_DTYPES if op not in (Ops.CAST, Ops.BITCAST)), key=lambda o: o.name)
_NP = ops_cpu._NP


@pytest.fixture(scope="module")
def cpu():
  return CPUBackend()


# ---- values <-> buffers

def to_buffer(cpu, values: list, dt: DType):
  """A CPU buffer holding `values` (values of `dt`, OP.VALUES) in the encoding of EXEC.MEMORY.bytes."""
  if dt == dtypes.bfloat16: arr = (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
  else: arr = np.array(values, _NP[dt])
  buf = cpu.alloc(len(values), dt)
  cpu.copyin(buf, memoryview(arr).cast("B"))
  return buf


def from_buffer(cpu, buf) -> list:
  """The values a buffer holds, as Python values of the value model."""
  arr = np.frombuffer(cpu.copyout(buf), _NP[buf.dtype])
  if buf.dtype == dtypes.bfloat16: arr = (arr.astype(np.uint32) << 16).view(np.float32)
  return [float(v) for v in arr] if dtypes.is_float(buf.dtype) else arr.tolist()


def bits_of(v: float, dt: DType) -> int:
  """The bit pattern of float value `v` of `dt` (bfloat16: the upper half of float32)."""
  if dt == dtypes.bfloat16: return struct.unpack("<I", struct.pack("<f", v))[0] >> 16
  fmt = {2: ("<e", "<H"), 4: ("<f", "<I"), 8: ("<d", "<Q")}[dt.itemsize]
  return struct.unpack(fmt[1], struct.pack(fmt[0], v))[0]


# ---- kernels: one per operand dtype, computing every op on element gidx0 of its inputs

def elementwise(name: str, in_dtypes: list[DType], outs: list[tuple[DType, object]]) -> LinearProgram:
  """A program over `n` (a DEFINE_VAR) threads: thread gidx0 loads element gidx0 of each input (slots 0..) and stores
  make(loads) to element gidx0 of output k (slots after the inputs). Buffers have unknown size (ptr(-1))."""
  n = UOp(Ops.DEFINE_VAR, I32, (), ("n", 1, 2 ** 31 - 1))
  g = UOp(Ops.SPECIAL, I32, (n,), "gidx0")
  ins = [UOp(Ops.DEFINE_GLOBAL, dt.ptr(-1), (), i) for i, dt in enumerate(in_dtypes)]
  loads = [UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, p.dtype, (p, g)),)) for p, dt in zip(ins, in_dtypes)]
  stores = []
  for k, (rdt, make) in enumerate(outs):
    o = UOp(Ops.DEFINE_GLOBAL, rdt.ptr(-1), (), len(ins) + k)
    stores.append(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, o.dtype, (o, g)), make(loads))))
  return LinearProgram(name, tuple(linearize(UOp(Ops.SINK, dtypes.void, tuple(stores)))), (1, 1, 1), (1, 1, 1))


_KERNELS: dict = {}


def alu_kernel(cpu, dt: DType):
  """Every ALU op that accepts `dt`, on inputs (a, b, c of `dt`, cond of bool); one output per op."""
  if dt not in _KERNELS:
    ops = [op for op in ALU_OPS if dt in ALU_DTYPES[op]]
    ins = [dt, dt, dtypes.bool] + ([dt] if Ops.MULACC in ops else [])
    def make(op):
      if op is Ops.WHERE: return lambda ld: UOp(op, dt, (ld[2], ld[0], ld[1]))
      if op is Ops.MULACC: return lambda ld: UOp(op, dt, (ld[0], ld[1], ld[3]))
      n = 1 if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG) else 2
      return lambda ld: UOp(op, alu_result_dtype(op, dt), tuple(ld[:n]))
    prog = elementwise(f"alu_{dt.name.replace(' ', '_')}", ins, [(alu_result_dtype(op, dt) if op is not Ops.WHERE
                                                                   else dt, make(op)) for op in ops])
    _KERNELS[dt] = (cpu.compile(prog), ops, ins)
  return _KERNELS[dt]


def convert_kernel(cpu, src: DType):
  """CAST from `src` to every dtype and BITCAST to every dtype of the same size; outputs in that order."""
  if ("cvt", src) not in _KERNELS:
    targets = [(Ops.CAST, d) for d in dtypes.all()] + [(Ops.BITCAST, d) for d in dtypes.all()
                                                         if d.itemsize == src.itemsize]
    prog = elementwise(f"cvt_{src.name.replace(' ', '_')}", [src],
                       [(d, lambda ld, op=op, d=d: UOp(op, d, (ld[0],))) for op, d in targets])
    _KERNELS["cvt", src] = (cpu.compile(prog), targets)
  return _KERNELS["cvt", src]


def run(cpu, compiled, inputs: list[tuple[list, DType]], out_dtypes: list[DType]) -> list:
  """Launch over len(inputs[0]) threads; the output buffers."""
  n = len(inputs[0][0])
  bufs = [to_buffer(cpu, vals, dt) for vals, dt in inputs] + [cpu.alloc(n, d) for d in out_dtypes]
  cpu.launch(compiled, bufs, {"n": n}, (n, 1, 1))
  return bufs[len(inputs):]


def run_alu(cpu, dt: DType, a: list, b: list, cond: list, c: list) -> dict:
  """{op: results} of every ALU op accepting `dt` on the operand lists."""
  compiled, ops, ins = alu_kernel(cpu, dt)
  inputs = [(a, dt), (b, dt), (cond, dtypes.bool)] + ([(c, dt)] if len(ins) == 4 else [])
  outs = run(cpu, compiled, inputs, [dt if op is Ops.WHERE else alu_result_dtype(op, dt) for op in ops])
  return {op: from_buffer(cpu, b) for op, b in zip(ops, outs)}


def run_convert(cpu, src: DType, x: list, only: list | None = None) -> dict:
  """{(op, target): results} of every CAST and BITCAST from `src` on the values `x` (of the targets in `only`)."""
  compiled, targets = convert_kernel(cpu, src)
  outs = run(cpu, compiled, [(x, src)], [d for _, d in targets])
  return {t: from_buffer(cpu, b) for t, b in zip(targets, outs) if only is None or t in only}


def matches(op: Ops, src: DType, dst: DType, got, want) -> bool:
  """The value model's sameness; a BITCAST of a NaN may give any pattern that is a NaN again (OP.BITCAST.nan)."""
  if same_value(got, want): return True
  if op is Ops.BITCAST and dtypes.is_float(src) and isinstance(want, (int, float)) and not isinstance(want, bool):
    back = exec_alu(Ops.BITCAST, src, (got,), dst)
    return math.isnan(back) and math.isnan(exec_alu(Ops.BITCAST, src, (want,), dst))
  return False


# ---- every edge-case row of spec/ops.md (OP.TABLES)

ROWS = [(clause, header, row) for clause, header, rows in edge_tables(ROOT / "spec" / "ops.md") for row in rows]


@pytest.mark.parametrize("clause,header,row", ROWS, ids=[f"{c}:{'|'.join(r)}" for c, _, r in ROWS])
def test_edge_table_row_on_cpu(cpu, clause, header, row):
  op = Ops[clause.split(".")[1]]
  if header == ("dtype", "operands", "result"):
    src = to_dtype(row[0])
    cells = row[1].split(",")
    kinds = [dtypes.bool if op is Ops.WHERE and i == 0 else src for i in range(len(cells))]
    operands = [parse_value(cell, d) for cell, d in zip(cells, kinds)]
    dst = src if op is Ops.WHERE else alu_result_dtype(op, src)
    want = parse_value(row[2], dst)
    zero = dtypes.as_const(0, src)
    if op is Ops.WHERE: cond, (a, b), c = operands[0], operands[1:], zero
    else: cond, (a, b, c) = False, (operands + [zero, zero])[:3]
    got = run_alu(cpu, src, [a], [b], [cond], [c])[op][0]
  else:
    src, dst = to_dtype(row[0]), to_dtype(row[1])
    operands, want = [parse_value(row[2], src)], parse_value(row[3], dst)
    got = run_convert(cpu, src, operands, [(op, dst)])[op, dst][0]
  assert matches(op, src, dst, got, want), f"{clause} on {src!r} {operands}: spec says {want!r}, CPU gives {got!r}"


# ---- random operands for every op and dtype, against exec_alu

def sample(dt: DType, rng: np.random.Generator, n: int) -> list:
  """`n` values of `dt`: the edges (0, ±1, min, max, NaN, ±inf, ±0, subnormals) then random bit patterns and small
  numbers, so that every branch of the guarded ops is taken."""
  if dt == dtypes.bool: return [bool(v) for v in rng.integers(0, 2, n)]
  if dtypes.is_int(dt):
    lo, hi = dtypes.min(dt), dtypes.max(dt)
    edges = [v for v in (0, 1, -1, 2, -2, lo, hi, lo + 1, hi - 1, dt.bits, dt.bits - 1, dt.bits + 1) if lo <= v <= hi]
    raw = np.frombuffer(rng.bytes(n * dt.itemsize), _NP[dt]).tolist()   # random bit patterns
    small = rng.integers(max(lo, -20), min(hi, 20) + 1, n).tolist()
    return (edges + [int(v) for v in raw[: n // 2]] + small[: n // 2])[:n] if n > len(edges) else edges[:n]
  ebits, mbits = dtypes.finfo(dt)
  tiny = math.ldexp(1.0, 2 - (1 << (ebits - 1)) - mbits)
  edges = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, math.inf, -math.inf, math.nan, tiny, -tiny, 3.0, -8.0, 10.0, 0.25]
  width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
  bits = rng.integers(0, 2 ** (8 * dt.itemsize), n, dtype=width)
  with np.errstate(invalid="ignore"):   # widening a signalling NaN raises the invalid flag; it stays a NaN
    if dt == dtypes.bfloat16: patterns = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
    else: patterns = bits.view(_NP[dt]).astype(np.float64).tolist()
  nice = [round_float(float(v), dt) for v in rng.normal(0, 4, n)]
  return (edges + patterns[: n // 2] + nice)[:n]


def ulp_distance(got: float, want: float, dt: DType) -> float:
  """Units in the last place between two values of `dt` (0 when both are NaN; inf when only one is)."""
  if math.isnan(got) or math.isnan(want): return 0 if math.isnan(got) and math.isnan(want) else math.inf
  def order(v):   # the float's position on the number line, counted in steps of the format
    b = bits_of(v, dt)
    sign = 1 << (8 * dt.itemsize - 1) if dt != dtypes.bfloat16 else 1 << 15
    return -(b & (sign - 1)) if b & sign else b
  return abs(order(got) - order(want))


# ACC.EXP2.*, ACC.LOG2.*, ACC.SIN.*, ACC.POW.* (spec/accuracy.md); measured on glibc: 1 ulp for float16, bfloat16 and
# float32 (the float32 functions are not correctly rounded), 0 for float64 (the library exec_alu calls too)
ULP_BOUND = {dtypes.float16: 1, dtypes.bfloat16: 1, dtypes.float32: 1, dtypes.float64: 2}


@pytest.mark.parametrize("dt", dtypes.all(), ids=repr)
def test_random_alu_matches_exec_alu(cpu, dt):
  """EXEC.THREAD.value: every ALU op bit for bit as exec_alu, except EXP2/LOG2/SIN/POW within ULP_BOUND
  (EXEC.FLOAT.transcendental, DEV.C.libm)."""
  rng = np.random.default_rng(sorted(dtypes.all()).index(dt))
  n = 400
  a, b, c = sample(dt, rng, n), sample(dt, rng, n)[::-1], sample(dt, rng, n)
  rng.shuffle(c)
  cond = [bool(v) for v in rng.integers(0, 2, n)]
  results = run_alu(cpu, dt, a, b, cond, c)
  worst = 0.0
  for op, got in results.items():
    for i in range(n):
      operands = (cond[i], a[i], b[i]) if op is Ops.WHERE else (a[i], b[i], c[i]) if op is Ops.MULACC else \
          (a[i], b[i])[:1 if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG) else 2]
      want = exec_alu(op, dt if op is Ops.WHERE else alu_result_dtype(op, dt), operands, dt)
      if op in TRANSCENDENTAL and dtypes.is_float(dt):
        d = ulp_distance(got[i], want, dt)
        worst = max(worst, d)
        assert d <= ULP_BOUND[dt], f"{op.name} {dt!r} {operands}: CPU {got[i]!r}, reference {want!r}, {d} ULP"
      else:
        assert same_value(got[i], want), f"{op.name} {dt!r} {operands}: CPU gives {got[i]!r}, spec says {want!r}"
  if dtypes.is_float(dt): print(f"{dt!r}: transcendentals within {worst} ULP of the reference")


@pytest.mark.parametrize("src", dtypes.all(), ids=repr)
def test_random_conversions_match_exec_alu(cpu, src):
  """OP.CAST and OP.BITCAST from `src` to every dtype, bit for bit (NaN patterns free, OP.BITCAST.nan)."""
  rng = np.random.default_rng(100 + sorted(dtypes.all()).index(src))
  x = sample(src, rng, 300)
  if dtypes.is_int(src):   # integers next to the rounding boundaries of the float formats
    x += [v for k in (11, 24, 53, 60) for v in (2 ** k + 1, 2 ** k + 3, -(2 ** k) - 1, 2 ** k + 2 ** max(k - 12, 0))
          if dtypes.min(src) <= v <= dtypes.max(src)]
  for (op, dst), got in run_convert(cpu, src, x).items():
    for v, g in zip(x, got):
      want = exec_alu(op, dst, (v,), src)
      assert matches(op, src, dst, g, want), f"{op.name} {src!r}->{dst!r} of {v!r}: CPU gives {g!r}, spec {want!r}"


# ---- float16 and bfloat16: every bit pattern (DEV.C.half)

def _all_patterns(dt: DType) -> list[float]:
  bits = np.arange(1 << 16, dtype=np.uint16)
  with np.errstate(invalid="ignore"):
    if dt == dtypes.bfloat16: return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
    return bits.view(np.float16).astype(np.float64).tolist()


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=repr)
def test_half_every_pattern_converts_exactly(cpu, dt):
  """Every 16-bit pattern is loaded as its exact value and cast to each float dtype as round_float (DT.ROUND) says;
  BITCAST to uint16 gives the pattern itself unless it is a NaN. (Casts to the integer dtypes are in the random and
  edge-table tests.)"""
  x = _all_patterns(dt)
  res = run_convert(cpu, dt, x, [(Ops.CAST, d) for d in FLOATS] + [(Ops.BITCAST, dtypes.uint16)])
  for dst in FLOATS:
    got = res[Ops.CAST, dst]
    bad = [i for i in range(len(x)) if not same_value(got[i], round_float(x[i], dst))]
    assert not bad, f"CAST {dt!r}->{dst!r}: {len(bad)} patterns differ, e.g. {x[bad[0]]!r}: {got[bad[0]]!r}"
  assert [b for b, v in zip(res[Ops.BITCAST, dtypes.uint16], x) if v == v] == \
      [i for i, v in zip(range(1 << 16), x) if v == v]


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=repr)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=repr)
def test_rounding_to_half_at_every_boundary(cpu, dt, src):
  """DT.ROUND for float32/float64 -> 16 bits at every rounding boundary: for each pair lo < hi of neighbouring finite
  16-bit values, the midpoint goes to the one with the even pattern (a zero keeps the midpoint's sign), the value just
  above it to hi and the one just below to lo; the overflow threshold is a tie that goes to inf. From float64 the
  neighbours are one float64 ulp off the midpoint, which a conversion through float32 would round onto the tie."""
  vals = np.array(sorted({v for v in _all_patterns(dt) if math.isfinite(v)}))
  ebits, mbits = dtypes.finfo(dt)
  big = math.ldexp(2.0 - math.ldexp(1.0, -mbits), (1 << (ebits - 1)) - 1)
  lo, hi = np.concatenate([vals[:-1], [big, -np.inf]]), np.concatenate([vals[1:], [np.inf, -big]])
  mid = np.concatenate([(vals[:-1] + vals[1:]) / 2, [math.ldexp(2.0 - math.ldexp(1.0, -mbits - 1),
                                                                (1 << (ebits - 1)) - 1) * s for s in (1, -1)]])
  lo_even = np.array([v == -np.inf or bits_of(float(v), dt) & 1 == 0 for v in lo])
  tie = np.where(lo_even, lo, hi)
  width = np.float32 if src == dtypes.float32 else np.float64
  m = mid.astype(width)
  assert (m == mid).all()   # midpoints of 16-bit values are exact in float32
  x = np.concatenate([m, np.nextafter(m, width(np.inf)), np.nextafter(m, width(-np.inf))]).astype(np.float64)
  signed = lambda v: np.where(v == 0, np.copysign(0.0, mid), v)   # a zero result has the sign of x
  want = np.concatenate([signed(tie), signed(hi), signed(lo)])
  got = np.array(run_convert(cpu, src, x.tolist(), [(Ops.CAST, dt)])[Ops.CAST, dt])
  bad = np.flatnonzero((got != want) | (np.signbit(got) != np.signbit(want)))
  assert bad.size == 0, f"{src!r}->{dt!r}: {bad.size} wrong, e.g. {x[bad[0]]!r} gives {got[bad[0]]!r}, " \
                        f"not {want[bad[0]]!r}"


# ---- programs beyond one-op kernels: loops, REDUCE, IF, local memory, several grid dimensions, gates

def const(v, dt=I32): return UOp.const(dt, v)
def special(name: str, n: int): return UOp(Ops.SPECIAL, I32, (const(n),), name)
def glob(slot: int, dt: DType, n: int = -1): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), (), slot)
def index(p, i, gate=None): return UOp(Ops.INDEX, p.dtype, (p, i) + ((gate,) if gate is not None else ()))
def load(p, i, gate=None): return UOp(Ops.LOAD, p.dtype.base, (index(p, i, gate),))
def store(p, i, v, gate=None): return UOp(Ops.STORE, dtypes.void, (index(p, i, gate), v))


def launch(cpu, program, arrays: list[np.ndarray], **kw) -> list[np.ndarray]:
  """Run `program` on CPU buffers holding `arrays` (slot order); the arrays it leaves."""
  bufs = []
  for a in arrays:
    dt = next(d for d, t in _NP.items() if t == a.dtype.type and d != dtypes.bfloat16)
    bufs.append(cpu.alloc(a.size, dt))
    cpu.copyin(bufs[-1], a.tobytes())
  cpu.launch(cpu.compile(program), bufs, **kw)
  return [np.frombuffer(cpu.copyout(b), a.dtype) for a, b in zip(arrays, bufs)]


def test_reduce_folds_left_to_right(cpu):
  """EXEC.THREAD.reduce: a REDUCE in the program folds in iteration order: 1e8 + 1 + -1e8 + 1 is 1.0 in float32
  (the worked example of spec/kernels.md, one thread)."""
  out, inp = glob(0, dtypes.float32, 1), glob(1, dtypes.float32, 4)
  r = UOp(Ops.RANGE, I32, (const(4),), (0, "r"))
  v = load(inp, r)
  end = UOp(Ops.END, dtypes.void, (v, r))
  red = UOp(Ops.REDUCE, dtypes.float32, (v, r), Ops.ADD)
  st = store(out, const(0), red)
  prog = LinearProgram("fold", (out, inp, const(4), r, v.src[0], v, end, red, const(0), st.src[0], st))
  got, _ = launch(cpu, prog, [np.zeros(1, np.float32), np.array([1e8, 1.0, -1e8, 1.0], np.float32)])
  assert got[0] == 1.0


def test_if_skips_the_body(cpu):
  """EXEC.THREAD.if: threads whose condition is false store nothing."""
  out, g = glob(0, dtypes.int32, 8), special("gidx0", 8)
  mod = UOp(Ops.CMOD, I32, (g, const(2)))
  cond = UOp(Ops.CMPEQ, dtypes.bool, (mod, const(0)))
  iff = UOp(Ops.IF, dtypes.void, (cond,))
  times = UOp(Ops.MUL, I32, (g, const(10)))
  st = store(out, g, times)
  prog = LinearProgram("if_even", (out, const(8), g, const(2), mod, const(0), cond, iff, const(10), times, st.src[0],
                                   st, UOp(Ops.ENDIF, dtypes.void, (iff,))), (8, 1, 1))
  got, = launch(cpu, prog, [np.full(8, -1, np.int32)])
  assert got.tolist() == [0, -1, 20, -1, 40, -1, 60, -1]


def test_gate_forms_no_address(cpu):
  """EXEC.MEMORY.gate: a gated-off load reads nothing and gives 0, even at an index a billion elements away."""
  out, inp, g = glob(0, dtypes.float32, 4), glob(1, dtypes.float32, 2), special("gidx0", 4)
  far = UOp(Ops.MUL, I32, (g, const(1_000_000_000)))
  gate = UOp(Ops.CMPLT, dtypes.bool, (g, const(1)))
  v = load(inp, far, gate)
  st = store(out, g, v)
  prog = LinearProgram("gated", tuple(linearize(UOp(Ops.SINK, dtypes.void, (st,)))), (4, 1, 1))
  got, _ = launch(cpu, prog, [np.zeros(4, np.float32), np.array([7.0, 8.0], np.float32)])
  assert got.tolist() == [7.0, 0.0, 0.0, 0.0]


def test_three_grid_dimensions_and_threads(cpu):
  """EXEC.GRID.linear: gidx0, gidx1, gidx2 from the split work-group id, the same with and without threads
  (DEV.C.threads: 8192 work-groups are split over the pool)."""
  G = (64, 32, 4)
  out = glob(0, dtypes.int32, math.prod(G))
  g = [special(f"gidx{d}", G[d]) for d in range(3)]
  flat = UOp(Ops.ADD, I32, (g[0], UOp(Ops.MUL, I32, (const(G[0]), UOp(Ops.ADD, I32, (g[1], UOp(Ops.MUL, I32, (
    const(G[1]), g[2]))))))))
  code = UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (g[0], const(10000))), UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (
    g[1], const(10))), g[2]))))
  prog = LinearProgram("grid3", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, flat, code),)))), G)
  w = np.arange(math.prod(G))
  want = (w % 64) * 10000 + (w // 64 % 32) * 10 + w // (64 * 32)
  saved = cpu.threads
  try:
    for threads in (1, 4):
      cpu.threads = threads
      got, = launch(cpu, prog, [np.zeros(math.prod(G), np.int32)])
      assert got.tolist() == want.tolist(), threads
  finally: cpu.threads = saved


def test_threads_give_the_same_bits(cpu, monkeypatch):
  """DEV.C.threads: a launch split over 4 threads gives the bytes of the single-threaded one, and really is split."""
  n = 12_007
  rng = np.random.default_rng(7)
  a, b = sample(dtypes.float32, rng, n), sample(dtypes.float32, rng, n)
  cond, c = [bool(v) for v in rng.integers(0, 2, n)], sample(dtypes.float32, rng, n)
  used = []
  real_pool = ops_cpu._pool
  monkeypatch.setattr(ops_cpu, "_pool", lambda k: used.append(k) or real_pool(k))
  saved = cpu.threads
  try:
    cpu.threads = 1
    one = run_alu(cpu, dtypes.float32, a, b, cond, c)
    assert used == []
    cpu.threads = 4
    four = run_alu(cpu, dtypes.float32, a, b, cond, c)
    assert used and set(used) == {4}
  finally: cpu.threads = saved
  for op in one:
    x, y = np.array(one[op], np.float64), np.array(four[op], np.float64)
    assert ((x == y) | (np.isnan(x) & np.isnan(y))).all() and (np.signbit(x) == np.signbit(y)).all(), op


def test_local_memory_and_work_groups_without_barrier(cpu):
  """DEV.CPU.workgroup: work-groups of several threads run one thread after another, with DEFINE_LOCAL memory per
  work-group; correct because without a BARRIER no thread waits for another."""
  out, inp = glob(0, dtypes.float32, 8), glob(1, dtypes.float32, 8)
  g, l = special("gidx0", 2), special("lidx0", 4)
  tmp = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, "local"), (), "tmp")
  t = UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (g, const(4))), l))
  st1 = store(tmp, l, UOp(Ops.MUL, dtypes.float32, (load(inp, t), const(2.0, dtypes.float32))))
  v = UOp(Ops.LOAD, dtypes.float32, (index(tmp, l), st1))
  prog = LinearProgram("local", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, t, v),)))), (2, 1, 1),
                       (4, 1, 1))
  assert sum(u.op is Ops.DEFINE_LOCAL for u in prog.uops) == 1
  x = np.arange(8, dtype=np.float32)
  got, _ = launch(cpu, prog, [np.zeros(8, np.float32), x])
  assert got.tolist() == (2 * x).tolist()


def _barrier_program(local: int) -> LinearProgram:
  out, l = glob(0, dtypes.int32, local), special("lidx0", local)
  st = store(out, l, l)
  bar = UOp(Ops.BARRIER, dtypes.void, (st,))
  return LinearProgram(f"barrier{local}", (out, const(local), l, st.src[0], st, bar), (1, 1, 1), (local, 1, 1))


def test_barrier_needs_one_thread_per_work_group(cpu):
  """DEV.CPU.workgroup: a BARRIER in work-groups of more than one thread is refused before anything runs; with one
  thread per work-group it has nothing to wait for and the program runs."""
  with pytest.raises(SpecError) as e: launch(cpu, _barrier_program(4), [np.full(4, -1, np.int32)])
  assert e.value.clause == "DEV.CPU.workgroup" and "4 threads" in str(e.value)
  got, = launch(cpu, _barrier_program(1), [np.full(1, -1, np.int32)])
  assert got.tolist() == [0]


# ---- the launch contract (EXEC.PROGRAM.params, EXEC.GRID, DEV.LAUNCH.limits), the same as PYTHON's

def test_launch_checks(cpu):
  compiled, ops, ins = alu_kernel(cpu, dtypes.int8)
  n = 3
  bufs = [to_buffer(cpu, [1] * n, d) for d in ins] + [cpu.alloc(n, dtypes.int8 if op is Ops.WHERE else
                                                                  alu_result_dtype(op, dtypes.int8)) for op in ops]
  cases = [({"n": 0}, (0, 1, 1), None, "EXEC.PROGRAM.params"),        # n below the variable's minimum
           ({}, (n, 1, 1), None, "EXEC.PROGRAM.params"),              # a missing variable
           ({"n": n}, (n + 1, 1, 1), None, "EXEC.GRID.match"),        # sizes disagree with the program
           ({"n": n}, (n, 1, 1), (2, 1, 1), "EXEC.GRID.match"),       # no lidx0, yet a local size
           ({"n": n}, (n, 1, 1, 1), None, "EXEC.GRID"),               # four dimensions
           ({"n": n}, (n, 1, 1), (2048, 1, 1), "DEV.LAUNCH.limits")]
  for vals, gsz, lsz, clause in cases:
    with pytest.raises(SpecError) as e: cpu.launch(compiled, bufs, vals, gsz, lsz)
    assert e.value.clause == clause, (vals, gsz, lsz, str(e.value))
  with pytest.raises(SpecError) as e: cpu.launch(compiled, bufs[:-1], {"n": n}, (n, 1, 1))
  assert e.value.clause == "EXEC.PROGRAM.params"
  py = Device["PYTHON"].alloc(n, dtypes.int8)
  with pytest.raises(SpecError) as e: cpu.launch(compiled, [py] + bufs[1:], {"n": n}, (n, 1, 1))
  assert e.value.clause == "EXEC.PROGRAM.params" and "PYTHON" in str(e.value)


def test_empty_grid_runs_nothing(cpu):
  """EXEC.GRID.empty: a size of 0 launches nothing and changes no memory."""
  out = glob(0, dtypes.int32)
  n = UOp(Ops.DEFINE_VAR, I32, (), ("n", 0, 100))
  g = UOp(Ops.SPECIAL, I32, (n,), "gidx0")
  prog = LinearProgram("empty", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, g, g),)))))
  got, = launch(cpu, prog, [np.full(2, -5, np.int32)], vals={"n": 0}, global_size=(0, 1, 1))
  assert got.tolist() == [-5, -5]


def test_malformed_and_vector_programs_are_refused(cpu):
  """DEV.COMPILE refuses before rendering: a RANGE without END breaks EXEC.PROGRAM.nest; vector dtypes are not
  rendered by the C-style renderers yet (DEV.C.scalar)."""
  out = glob(0, dtypes.int32, 1)
  r = UOp(Ops.RANGE, I32, (const(2),), (0, "r"))
  with pytest.raises(SpecError) as e: cpu.compile(LinearProgram("open", (out, const(2), r)))
  assert e.value.clause == "EXEC.PROGRAM.nest"
  vec = glob(0, dtypes.float32.vec(4), 1)
  with pytest.raises(SpecError) as e: cpu.compile(LinearProgram("vec", (vec,)))
  assert e.value.clause == "DEV.C.scalar"


def test_memory_contract(cpu):
  """DEV.ALLOC: 64-byte aligned; DEV.COPY: exact byte counts, bool bytes 0/1, bytes unchanged; DEV.DTYPE: scalars."""
  buf = cpu.alloc(5, dtypes.float64)
  assert buf.handle.ctypes.data % 64 == 0 and cpu.alloc(0, dtypes.int8).nbytes == 0
  raw = bytes(range(40))
  cpu.copyin(buf, raw)
  assert cpu.copyout(buf) == raw
  with pytest.raises(SpecError) as e: cpu.copyin(buf, raw[:-1])
  assert e.value.clause == "DEV.COPY"
  with pytest.raises(SpecError) as e: cpu.copyin(cpu.alloc(2, dtypes.bool), b"\x00\x02")
  assert e.value.clause == "DEV.COPY"
  assert all(cpu.supports(d) for d in dtypes.all()) and not cpu.supports(dtypes.float32.vec(2))
  assert isinstance(Device["CPU"], CPUBackend) and "CPU" in Device.names()


# ---- the compiler: errors and the disk cache (DEV.CPU.compile-error, DEV.CPU.cache)

def test_compile_error_shows_the_log_and_the_lines(cpu):
  src = "\n".join(["int a0 = 0;", "int a1 = 1;", "int a2 = 2;", "int a3 = 3;", "int a4 = 4;",
                   "int broken(void) { return undeclared_name; }", "int a6 = 6;", "int a7 = 7;", "int a8 = 8;",
                   "int a9 = 9;", "int a10 = 10;"])
  with pytest.raises(SpecError) as e: cpu.compile_c(src, "broken")
  msg = str(e.value)
  assert e.value.clause == "DEV.COMPILE" and "broken" in msg and "undeclared_name" in msg and "error" in msg
  assert ">    6 | int broken(void)" in msg                      # the first error's line, marked
  assert "    3 | int a2" in msg and "    9 | int a8" in msg   # three lines either side
  assert "int a0" not in msg and "int a10" not in msg
  assert e.value.source == src


def _probe(tag: int) -> LinearProgram:
  out = glob(0, dtypes.int32, 1)
  return LinearProgram(f"probe_{tag}", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, const(0),
                                                                                              const(tag)),)))))


def test_disk_cache_skips_the_compiler(tmp_path, monkeypatch):
  """DEV.CPU.cache: a second backend finds the object the first compiled (keyed by source, compiler and flags) and
  does not run the compiler; CACHE=0 writes nothing."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  tag = int.from_bytes(os.urandom(3), "little")   # a source no earlier run has cached
  first = CPUBackend()
  assert launch(first, _probe(tag), [np.zeros(1, np.int32)])[0].tolist() == [tag]
  assert first.compiler_runs == 1 and len(list((tmp_path / "cpu").glob("*.so"))) == 1
  second = CPUBackend()
  assert launch(second, _probe(tag), [np.zeros(1, np.int32)])[0].tolist() == [tag]
  assert second.compiler_runs == 0
  monkeypatch.setenv("CACHE", "0")
  monkeypatch.setenv("CACHE_DIR", str(tmp_path / "off"))
  off = CPUBackend()
  assert launch(off, _probe(tag), [np.zeros(1, np.int32)])[0].tolist() == [tag]
  assert off.compiler_runs == 1 and not (tmp_path / "off").exists()


# ---- tensors: CPU gives PYTHON's bits

def test_tensor_programs_match_python():
  """EXEC.ASIF at the Tensor level: a few fused kernels (reductions included) give PYTHON's bits on CPU."""
  rng = np.random.default_rng(3)
  a, b = rng.normal(size=(17, 33)).astype(np.float32), rng.normal(size=(33, 9)).astype(np.float32)
  for f in (lambda x, y: (x @ y).relu().sum(axis=0), lambda x, y: (x.exp2() * 3 - x).max(axis=1),
            lambda x, y: x.half().sqrt().float().sum(), lambda x, y: (x * 1e4).int() // 7):
    want = f(Tensor(a, device="PYTHON"), Tensor(b, device="PYTHON")).numpy()
    got = f(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy()
    assert want.dtype == got.dtype and want.tobytes() == got.tobytes()
