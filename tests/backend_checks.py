"""Device-level checks shared by the tests of every compiled backend (tests/test_cpu.py, tests/test_cl.py), the NVRTC
compile test (tests/test_cuda_compile.py) and bench/gpu_check.py: one-op kernels built by hand, run on any `Backend`
and compared with the executable semantics (exec_alu) bit for bit, or within the ULP bounds of spec/accuracy.md for
the transcendentals (EXEC.FLOAT.transcendental).

Nothing here is device specific: a backend is anything with alloc/copyin/copyout/compile/launch (DEV.*). The checks
return reports instead of asserting, so that a test can assert on them and the GPU script can count them."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from conformance.spec_tables import edge_tables, parse_value, same_value
from refimpl.codegen import linearize
from refimpl.device import Backend, Device, LinearProgram
from refimpl.dtype import DType, dtypes, round_float, to_dtype
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import ALU_DTYPES, alu_result_dtype, exec_alu

ROOT = Path(__file__).resolve().parent.parent
I32 = dtypes.int32
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
HALVES = (dtypes.float16, dtypes.bfloat16)
TRANSCENDENTAL = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)   # EXEC.FLOAT.transcendental: within ULPs, not bit for bit
UNARY = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG)
ALU_OPS = sorted((op for op in ALU_DTYPES if op not in (Ops.CAST, Ops.BITCAST)), key=lambda o: o.name)
# the numpy element type of each dtype's buffer bytes (EXEC.MEMORY.bytes); bfloat16 as its 16 bits
NP_TYPES = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
            dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
            dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: np.uint16,
            dtypes.float32: np.float32, dtypes.float64: np.float64}
# ACC.EXP2.*, ACC.LOG2.*, ACC.SIN.*, ACC.POW.* (spec/accuracy.md): the largest distance in ULPs (steps of the format)
# a transcendental may be from exec_alu's correctly rounded float64-library value
ULP_BOUND = {dtypes.float16: 1, dtypes.bfloat16: 1, dtypes.float32: 1, dtypes.float64: 2}


def short(dt: DType) -> str:
  """A dtype's name as an identifier (`unsigned char` -> `unsigned_char`)."""
  return dt.name.replace(" ", "_")


# ---- values <-> buffers

def to_buffer(dev: Backend, values: list, dt: DType):
  """A buffer of `dev` holding `values` (values of `dt`, OP.VALUES) in the encoding of EXEC.MEMORY.bytes."""
  if dt == dtypes.bfloat16: arr = (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
  else:
    with np.errstate(over="ignore"):   # values of dt: a float64 inf stays inf in float16
      arr = np.array(values, NP_TYPES[dt])
  buf = dev.alloc(len(values), dt)
  dev.copyin(buf, memoryview(arr).cast("B"))
  return buf


def from_buffer(dev: Backend, buf) -> list:
  """The values a buffer holds, as Python values of the value model."""
  arr = np.frombuffer(dev.copyout(buf), NP_TYPES[buf.dtype])
  if buf.dtype == dtypes.bfloat16: arr = (arr.astype(np.uint32) << 16).view(np.float32)
  return [float(v) for v in arr] if dtypes.is_float(buf.dtype) else arr.tolist()


def bits_of(v: float, dt: DType) -> int:
  """The bit pattern of float value `v` of `dt` (bfloat16: the upper half of float32)."""
  if dt == dtypes.bfloat16: return struct.unpack("<I", struct.pack("<f", v))[0] >> 16
  fmt = {2: ("<e", "<H"), 4: ("<f", "<I"), 8: ("<d", "<Q")}[dt.itemsize]
  return struct.unpack(fmt[1], struct.pack(fmt[0], v))[0]


# ---- one-op kernels: one per operand dtype, computing every op on element gidx0 of its inputs

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


def out_dtype(op: Ops, dt: DType) -> DType:
  """The dtype of `op` on operands of `dt` (WHERE: of its value operands, not of its bool condition)."""
  return dt if op is Ops.WHERE else alu_result_dtype(op, dt)


def alu_program(dt: DType, skip: tuple[Ops, ...] = ()) -> tuple[LinearProgram, list[Ops], list[tuple[str, DType]]]:
  """Every ALU op that accepts `dt` (but those in `skip`), on the inputs it needs of a and b (of `dt`), cond (bool,
  for WHERE) and c (of `dt`, for MULACC); one output per op. Also the ops in output order and the inputs in slot
  order, as (name, dtype)."""
  ops = [op for op in ALU_OPS if dt in ALU_DTYPES[op] and op not in skip]
  ins = [("a", dt)] + [("b", dt)] * any(op not in UNARY for op in ops) + [("cond", dtypes.bool)] * (Ops.WHERE in ops) \
      + [("c", dt)] * (Ops.MULACC in ops)
  slot = {name: i for i, (name, _) in enumerate(ins)}
  def make(op):
    if op is Ops.WHERE: return lambda ld: UOp(op, dt, (ld[slot["cond"]], ld[0], ld[1]))
    if op is Ops.MULACC: return lambda ld: UOp(op, dt, (ld[0], ld[1], ld[slot["c"]]))
    return lambda ld: UOp(op, alu_result_dtype(op, dt), tuple(ld[:1 if op in UNARY else 2]))
  prog = elementwise(f"alu_{short(dt)}", [d for _, d in ins], [(out_dtype(op, dt), make(op)) for op in ops])
  return prog, ops, ins


def convert_program(src: DType, dsts: tuple[DType, ...] | None = None) -> tuple[LinearProgram, list[tuple[Ops, DType]]]:
  """CAST from `src` to every dtype (of `dsts`) and BITCAST to every one of the same size; outputs in that order."""
  dsts = dtypes.all() if dsts is None else dsts
  targets = [(Ops.CAST, d) for d in dsts] + [(Ops.BITCAST, d) for d in dsts if d.itemsize == src.itemsize]
  make = [(d, lambda ld, op=op, d=d: UOp(op, d, (ld[0],))) for op, d in targets]
  prog = elementwise(f"cvt_{short(src)}", [src], make)
  return prog, targets


_KERNELS: dict = {}   # (backend, kind, dtype) -> compiled program and what it computes


def alu_kernel(dev: Backend, dt: DType, skip: tuple[Ops, ...] = ()):
  """alu_program(dt, skip) compiled on `dev` (once per backend): (compiled, ops, input dtypes)."""
  if (dev, "alu", dt, skip) not in _KERNELS:
    prog, ops, ins = alu_program(dt, skip)
    _KERNELS[dev, "alu", dt, skip] = (dev.compile(prog), ops, ins)
  return _KERNELS[dev, "alu", dt, skip]


def convert_kernel(dev: Backend, src: DType, dsts: tuple[DType, ...] | None = None):
  """convert_program(src, dsts) compiled on `dev` (once per backend): (compiled, targets)."""
  if (dev, "cvt", src, dsts) not in _KERNELS:
    prog, targets = convert_program(src, dsts)
    _KERNELS[dev, "cvt", src, dsts] = (dev.compile(prog), targets)
  return _KERNELS[dev, "cvt", src, dsts]


def run(dev: Backend, compiled, inputs: list[tuple[list, DType]], out_dtypes: list[DType]) -> list[list]:
  """Launch over len(inputs[0]) threads; the values of the outputs. Every buffer is freed afterwards."""
  n = len(inputs[0][0])
  bufs = [to_buffer(dev, vals, dt) for vals, dt in inputs] + [dev.alloc(n, d) for d in out_dtypes]
  dev.launch(compiled, bufs, {"n": n}, (n, 1, 1))
  outs = [from_buffer(dev, b) for b in bufs[len(inputs):]]
  for b in bufs: dev.free(b)
  return outs


def run_alu(dev: Backend, dt: DType, a: list, b: list, cond: list, c: list, skip: tuple[Ops, ...] = ()) -> dict:
  """{op: results} of every ALU op accepting `dt` (but those in `skip`) on the operand lists."""
  compiled, ops, ins = alu_kernel(dev, dt, skip)
  values = {"a": a, "b": b, "cond": cond, "c": c}
  inputs = [(values[name], d) for name, d in ins]
  return dict(zip(ops, run(dev, compiled, inputs, [out_dtype(op, dt) for op in ops])))


def run_convert(dev: Backend, src: DType, x: list, only: list | None = None, dsts: tuple | None = None) -> dict:
  """{(op, target): results} of every CAST and BITCAST from `src` (to `dsts`) on the values `x` (of the targets in
  `only`)."""
  compiled, targets = convert_kernel(dev, src, dsts)
  outs = run(dev, compiled, [(x, src)], [d for _, d in targets])
  return {t: o for t, o in zip(targets, outs) if only is None or t in only}


def matches(op: Ops, src: DType, dst: DType, got, want) -> bool:
  """The value model's sameness; a BITCAST of a NaN may give any pattern that is a NaN again (OP.BITCAST.nan)."""
  if same_value(got, want): return True
  if op is Ops.BITCAST and dtypes.is_float(src) and isinstance(want, (int, float)) and not isinstance(want, bool):
    back = exec_alu(Ops.BITCAST, src, (got,), dst)
    return math.isnan(back) and math.isnan(exec_alu(Ops.BITCAST, src, (want,), dst))
  return False


def ulp_distance(got: float, want: float, dt: DType) -> float:
  """Units in the last place between two values of `dt`, counted as steps of the format (0 when both are NaN; inf
  when only one is)."""
  if math.isnan(got) or math.isnan(want): return 0 if math.isnan(got) and math.isnan(want) else math.inf
  def order(v):   # the float's position on the number line, counted in steps of the format
    b = bits_of(v, dt)
    sign = 1 << (8 * dt.itemsize - 1) if dt != dtypes.bfloat16 else 1 << 15
    return -(b & (sign - 1)) if b & sign else b
  return abs(order(got) - order(want))


@dataclass
class Report:
  """How one op (or conversion) on one dtype fared: values checked, values wrong, the worst ULP distance of a
  transcendental, and the first wrong value described."""
  name: str
  dtype: str
  checked: int = 0
  failed: int = 0
  worst_ulp: float | None = None
  first: str | None = field(default=None)

  def fail(self, why: str) -> None:
    self.failed += 1
    if self.first is None: self.first = why


# ---- every edge-case row of spec/ops.md (OP.TABLES)

EDGE_ROWS = [(clause, header, row) for clause, header, rows in edge_tables(ROOT / "spec" / "ops.md") for row in rows]


def edge_row(dev: Backend, clause: str, header: tuple, row: tuple) -> tuple[bool, str]:
  """Run one edge-table row as a kernel on `dev`: (same as the table, a description of what came out)."""
  op = Ops[clause.split(".")[1]]
  if header == ("dtype", "operands", "result"):
    src = to_dtype(row[0])
    cells = row[1].split(",")
    kinds = [dtypes.bool if op is Ops.WHERE and i == 0 else src for i in range(len(cells))]
    operands = [parse_value(cell, d) for cell, d in zip(cells, kinds)]
    dst = out_dtype(op, src)
    want = parse_value(row[2], dst)
    zero = dtypes.as_const(0, src)
    if op is Ops.WHERE: cond, (a, b), c = operands[0], operands[1:], zero
    else: cond, (a, b, c) = False, (operands + [zero, zero])[:3]
    got = run_alu(dev, src, [a], [b], [cond], [c])[op][0]
  else:
    src, dst = to_dtype(row[0]), to_dtype(row[1])
    operands, want = [parse_value(row[2], src)], parse_value(row[3], dst)
    got = run_convert(dev, src, operands, [(op, dst)])[op, dst][0]
  return matches(op, src, dst, got, want), f"{clause} on {src!r} {operands}: spec says {want!r}, {dev.name} gives " \
                                           f"{got!r}"


# ---- random operands for every op and dtype, against exec_alu

def sample(dt: DType, rng: np.random.Generator, n: int) -> list:
  """`n` values of `dt`: the edges (0, ±1, min, max, NaN, ±inf, ±0, subnormals) then random bit patterns and small
  numbers, so that every branch of the guarded ops is taken."""
  if dt == dtypes.bool: return [bool(v) for v in rng.integers(0, 2, n)]
  if dtypes.is_int(dt):
    lo, hi = dtypes.min(dt), dtypes.max(dt)
    edges = [v for v in (0, 1, -1, 2, -2, lo, hi, lo + 1, hi - 1, dt.bits, dt.bits - 1, dt.bits + 1) if lo <= v <= hi]
    raw = np.frombuffer(rng.bytes(n * dt.itemsize), NP_TYPES[dt]).tolist()   # random bit patterns
    small = rng.integers(max(lo, -20), min(hi, 20) + 1, n).tolist()
    return (edges + [int(v) for v in raw[: n // 2]] + small[: n // 2])[:n] if n > len(edges) else edges[:n]
  ebits, mbits = dtypes.finfo(dt)
  tiny = math.ldexp(1.0, 2 - (1 << (ebits - 1)) - mbits)
  edges = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, math.inf, -math.inf, math.nan, tiny, -tiny, 3.0, -8.0, 10.0, 0.25]
  width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
  bits = rng.integers(0, 2 ** (8 * dt.itemsize), n, dtype=width)
  with np.errstate(invalid="ignore"):   # widening a signalling NaN raises the invalid flag; it stays a NaN
    if dt == dtypes.bfloat16: patterns = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
    else: patterns = bits.view(NP_TYPES[dt]).astype(np.float64).tolist()
  nice = [round_float(float(v), dt) for v in rng.normal(0, 4, n)]
  return (edges + patterns[: n // 2] + nice)[:n]


def seed_of(dt: DType) -> int:
  """A fixed seed per dtype, so every backend sees the same operands."""
  return sorted(dtypes.all()).index(dt)


def random_alu(dev: Backend, dt: DType, n: int = 400, seed: int | None = None, skip: tuple = ()) -> list[Report]:
  """EXEC.THREAD.value: every ALU op accepting `dt` (but those in `skip`) on `n` sampled operands, against exec_alu:
  bit for bit, except EXP2/LOG2/SIN/POW within ULP_BOUND (EXEC.FLOAT.transcendental). One report per op."""
  rng = np.random.default_rng(seed_of(dt) if seed is None else seed)
  a, b, c = sample(dt, rng, n), sample(dt, rng, n)[::-1], sample(dt, rng, n)
  rng.shuffle(c)
  cond = [bool(v) for v in rng.integers(0, 2, n)]
  reports = []
  for op, got in run_alu(dev, dt, a, b, cond, c, skip).items():
    rep = Report(op.name, repr(dt), checked=n)
    ulps = op in TRANSCENDENTAL and dtypes.is_float(dt)
    if ulps: rep.worst_ulp = 0
    for i in range(n):
      operands = (cond[i], a[i], b[i]) if op is Ops.WHERE else (a[i], b[i], c[i]) if op is Ops.MULACC else \
          (a[i], b[i])[:1 if op in UNARY else 2]
      want = exec_alu(op, out_dtype(op, dt), operands, dt)
      if ulps:
        d = ulp_distance(got[i], want, dt)
        rep.worst_ulp = max(rep.worst_ulp, d)
        if d > ULP_BOUND[dt]: rep.fail(f"{op.name} {dt!r} {operands}: {dev.name} {got[i]!r}, reference {want!r}, "
                                       f"{d} ULP (bound {ULP_BOUND[dt]})")
      elif not same_value(got[i], want):
        rep.fail(f"{op.name} {dt!r} {operands}: {dev.name} gives {got[i]!r}, spec says {want!r}")
    reports.append(rep)
  return reports


def random_conversions(dev: Backend, src: DType, n: int = 300, seed: int | None = None,
                       dsts: tuple[DType, ...] | None = None) -> list[Report]:
  """OP.CAST and OP.BITCAST from `src` to every dtype (of `dsts`) on sampled values, bit for bit (NaN patterns free,
  OP.BITCAST.nan). One report per (op, target)."""
  rng = np.random.default_rng(100 + seed_of(src) if seed is None else seed)
  x = sample(src, rng, n)
  if dtypes.is_int(src):   # integers next to the rounding boundaries of the float formats
    x += [v for k in (11, 24, 53, 60) for v in (2 ** k + 1, 2 ** k + 3, -(2 ** k) - 1, 2 ** k + 2 ** max(k - 12, 0))
          if dtypes.min(src) <= v <= dtypes.max(src)]
  reports = []
  for (op, dst), got in run_convert(dev, src, x, None, dsts).items():
    rep = Report(f"{op.name}->{dst!r}", repr(src), checked=len(x))
    for v, g in zip(x, got):
      want = exec_alu(op, dst, (v,), src)
      if not matches(op, src, dst, g, want):
        rep.fail(f"{op.name} {src!r}->{dst!r} of {v!r}: {dev.name} gives {g!r}, spec says {want!r}")
    reports.append(rep)
  return reports


# ---- float16 and bfloat16: every bit pattern (DEV.C.half)

def all_patterns(dt: DType) -> list[float]:
  """The values of all 65,536 bit patterns of a 16-bit float, in pattern order."""
  bits = np.arange(1 << 16, dtype=np.uint16)
  with np.errstate(invalid="ignore"):
    if dt == dtypes.bfloat16: return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
    return bits.view(np.float16).astype(np.float64).tolist()


def half_patterns(dev: Backend, dt: DType, targets=FLOATS) -> list[Report]:
  """Every 16-bit pattern of `dt` is loaded as its exact value and cast to each float dtype in `targets` as
  round_float (DT.ROUND) says; BITCAST to uint16 gives the pattern itself unless it is a NaN."""
  x = all_patterns(dt)
  res = run_convert(dev, dt, x, [(Ops.CAST, d) for d in targets] + [(Ops.BITCAST, dtypes.uint16)])
  reports = []
  for dst in targets:
    rep = Report(f"CAST->{dst!r}", repr(dt), checked=len(x))
    for v, g in zip(x, res[Ops.CAST, dst]):
      if not same_value(g, round_float(v, dst)): rep.fail(f"CAST {dt!r}->{dst!r} of {v!r}: {dev.name} gives {g!r}")
    reports.append(rep)
  rep = Report("BITCAST->ushort", repr(dt), checked=len(x))
  for i, (b, v) in enumerate(zip(res[Ops.BITCAST, dtypes.uint16], x)):
    if v == v and b != i: rep.fail(f"BITCAST {dt!r} pattern {i:#06x}: {dev.name} gives {b:#06x}")
  return reports + [rep]


def half_rounding(dev: Backend, dt: DType, src: DType) -> Report:
  """DT.ROUND for float32/float64 -> 16 bits at every rounding boundary: for each pair lo < hi of neighbouring finite
  16-bit values, the midpoint goes to the one with the even pattern (a zero keeps the midpoint's sign), the value just
  above it to hi and the one just below to lo; the overflow threshold is a tie that goes to inf. From float64 the
  neighbours are one float64 ulp off the midpoint, which a conversion through float32 would round onto the tie."""
  vals = np.array(sorted({v for v in all_patterns(dt) if math.isfinite(v)}))
  ebits, mbits = dtypes.finfo(dt)
  big = math.ldexp(2.0 - math.ldexp(1.0, -mbits), (1 << (ebits - 1)) - 1)
  lo, hi = np.concatenate([vals[:-1], [big, -np.inf]]), np.concatenate([vals[1:], [np.inf, -big]])
  mid = np.concatenate([(vals[:-1] + vals[1:]) / 2, [math.ldexp(2.0 - math.ldexp(1.0, -mbits - 1),
                                                                (1 << (ebits - 1)) - 1) * s for s in (1, -1)]])
  lo_even = np.array([v == -np.inf or bits_of(float(v), dt) & 1 == 0 for v in lo])
  tie = np.where(lo_even, lo, hi)
  width = np.float32 if src == dtypes.float32 else np.float64
  m = mid.astype(width)
  assert (m == mid).all()   # midpoints of 16-bit values are exact in float32: a broken check, not a broken device
  x = np.concatenate([m, np.nextafter(m, width(np.inf)), np.nextafter(m, width(-np.inf))]).astype(np.float64)
  signed = lambda v: np.where(v == 0, np.copysign(0.0, mid), v)   # a zero result has the sign of x
  want = np.concatenate([signed(tie), signed(hi), signed(lo)])
  got = np.array(run_convert(dev, src, x.tolist(), [(Ops.CAST, dt)])[Ops.CAST, dt])
  bad = np.flatnonzero((got != want) | (np.signbit(got) != np.signbit(want)))
  rep = Report(f"CAST->{dt!r} at rounding boundaries", repr(src), checked=len(x), failed=int(bad.size))
  if bad.size: rep.first = f"{src!r}->{dt!r}: {x[bad[0]]!r} gives {got[bad[0]]!r}, not {want[bad[0]]!r}"
  return rep


# ---- programs beyond one-op kernels

def const(v, dt=I32): return UOp.const(dt, v)
def special(name: str, n: int): return UOp(Ops.SPECIAL, I32, (const(n),), name)
def glob(slot: int, dt: DType, n: int = -1): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), (), slot)
def index(p, i, gate=None): return UOp(Ops.INDEX, p.dtype, (p, i) + ((gate,) if gate is not None else ()))
def load(p, i, gate=None): return UOp(Ops.LOAD, p.dtype.base, (index(p, i, gate),))
def store(p, i, v, gate=None): return UOp(Ops.STORE, dtypes.void, (index(p, i, gate), v))


def launch(dev: Backend, program: LinearProgram, arrays: list[np.ndarray], **kw) -> list[np.ndarray]:
  """Run `program` on buffers of `dev` holding `arrays` (slot order); the arrays it leaves."""
  bufs = []
  for a in arrays:
    dt = next(d for d, t in NP_TYPES.items() if t == a.dtype.type and d != dtypes.bfloat16)
    bufs.append(dev.alloc(a.size, dt))
    dev.copyin(bufs[-1], a.tobytes())
  dev.launch(dev.compile(program), bufs, **kw)
  return [np.frombuffer(dev.copyout(b), a.dtype) for a, b in zip(arrays, bufs)]


@dataclass
class Case:
  """A hand-built program with its input arrays (slot order), launch keywords and the arrays it must leave (None:
  not checked). `barrier`: it has a BARRIER in work-groups of more than one thread."""
  name: str
  program: LinearProgram
  arrays: list[np.ndarray]
  want: list[np.ndarray | None]
  kw: dict = field(default_factory=dict)
  barrier: bool = False


def _fold() -> Case:
  """EXEC.THREAD.reduce: a REDUCE folds in iteration order: 1e8 + 1 + -1e8 + 1 is 1.0 in float32 (the worked
  example of spec/kernels.md, one thread)."""
  out, inp = glob(0, dtypes.float32, 1), glob(1, dtypes.float32, 4)
  r = UOp(Ops.RANGE, I32, (const(4),), (0, "r"))
  v = load(inp, r)
  end = UOp(Ops.END, dtypes.void, (v, r))
  red = UOp(Ops.REDUCE, dtypes.float32, (v, r), Ops.ADD)
  st = store(out, const(0), red)
  prog = LinearProgram("fold", (out, inp, const(4), r, v.src[0], v, end, red, const(0), st.src[0], st))
  x = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
  return Case("reduce-order", prog, [np.zeros(1, np.float32), x], [np.array([1.0], np.float32), x])


def _if_even() -> Case:
  """EXEC.THREAD.if: threads whose condition is false store nothing."""
  out, g = glob(0, dtypes.int32, 8), special("gidx0", 8)
  mod = UOp(Ops.CMOD, I32, (g, const(2)))
  cond = UOp(Ops.CMPEQ, dtypes.bool, (mod, const(0)))
  iff = UOp(Ops.IF, dtypes.void, (cond,))
  times = UOp(Ops.MUL, I32, (g, const(10)))
  st = store(out, g, times)
  prog = LinearProgram("if_even", (out, const(8), g, const(2), mod, const(0), cond, iff, const(10), times, st.src[0],
                                   st, UOp(Ops.ENDIF, dtypes.void, (iff,))), (8, 1, 1))
  return Case("if", prog, [np.full(8, -1, np.int32)], [np.array([0, -1, 20, -1, 40, -1, 60, -1], np.int32)])


def _gate() -> Case:
  """EXEC.MEMORY.gate: a gated-off load reads nothing and gives 0, even at an index a billion elements away."""
  out, inp, g = glob(0, dtypes.float32, 4), glob(1, dtypes.float32, 2), special("gidx0", 4)
  far = UOp(Ops.MUL, I32, (g, const(1_000_000_000)))
  v = load(inp, far, UOp(Ops.CMPLT, dtypes.bool, (g, const(1))))
  prog = LinearProgram("gated", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, g, v),)))), (4, 1, 1))
  return Case("gate", prog, [np.zeros(4, np.float32), np.array([7.0, 8.0], np.float32)],
              [np.array([7.0, 0.0, 0.0, 0.0], np.float32), None])


GRID3 = (64, 32, 4)


def _grid3() -> Case:
  """EXEC.GRID.linear: gidx0, gidx1, gidx2 of a three-dimensional grid of work-groups."""
  out = glob(0, dtypes.int32, math.prod(GRID3))
  g = [special(f"gidx{d}", GRID3[d]) for d in range(3)]
  flat = UOp(Ops.ADD, I32, (g[0], UOp(Ops.MUL, I32, (const(GRID3[0]), UOp(Ops.ADD, I32, (g[1], UOp(Ops.MUL, I32, (
    const(GRID3[1]), g[2]))))))))
  code = UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (g[0], const(10000))), UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (
    g[1], const(10))), g[2]))))
  prog = LinearProgram("grid3", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, flat, code),)))), GRID3)
  w = np.arange(math.prod(GRID3))
  want = ((w % 64) * 10000 + (w // 64 % 32) * 10 + w // (64 * 32)).astype(np.int32)
  return Case("grid3", prog, [np.zeros(math.prod(GRID3), np.int32)], [want])


def _local_no_barrier() -> Case:
  """Work-groups of 4 threads with a DEFINE_LOCAL array, each thread reading back only what it wrote (no BARRIER
  needed): out = 2 * in."""
  out, inp = glob(0, dtypes.float32, 8), glob(1, dtypes.float32, 8)
  g, l = special("gidx0", 2), special("lidx0", 4)
  tmp = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, "local"), (), "tmp")
  t = UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (g, const(4))), l))
  st1 = store(tmp, l, UOp(Ops.MUL, dtypes.float32, (load(inp, t), const(2.0, dtypes.float32))))
  v = UOp(Ops.LOAD, dtypes.float32, (index(tmp, l), st1))
  prog = LinearProgram("local", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, t, v),)))), (2, 1, 1),
                       (4, 1, 1))
  x = np.arange(8, dtype=np.float32)
  return Case("local", prog, [np.zeros(8, np.float32), x], [2 * x, None])


def _empty() -> Case:
  """EXEC.GRID.empty: a size of 0 launches nothing and changes no memory."""
  out = glob(0, dtypes.int32)
  g = UOp(Ops.SPECIAL, I32, (UOp(Ops.DEFINE_VAR, I32, (), ("n", 0, 100)),), "gidx0")
  prog = LinearProgram("empty", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, g, g),)))))
  return Case("empty-grid", prog, [np.full(2, -5, np.int32)], [np.full(2, -5, np.int32)],
              dict(vals={"n": 0}, global_size=(0, 1, 1)))


def _worked_example() -> Case:
  """spec/kernels.md's worked example (emu/examples.py): a 2x2 work-group stores 4 floats to local memory, a
  BARRIER, then thread 0 sums them (EXEC.BARRIER, EXEC.THREAD.reduce)."""
  from emu import examples
  x = np.array([0.5, 1.25, -3.0, 1e-3], np.float32)
  total = np.float32(0)
  for v in x: total = np.float32(total + v)   # left to right, in float32
  return Case("worked-example", examples.worked_example(), [np.zeros(1, np.float32), x],
              [np.array([total], np.float32), x], barrier=True)


def _reverse_and_sum(groups: int = 4, size: int = 64) -> Case:
  """EXEC.BARRIER across a work-group of `size` threads: thread l stores x[l] to local tmp[l]; after the BARRIER it
  reads tmp[size-1-l], written by another thread, so without a working barrier some threads read stale values; thread
  0 then sums tmp in order. rev = x reversed per work-group, out[g] = the work-group's float32 sum."""
  from emu.build import Builder
  f32 = dtypes.float32
  b = Builder(f"reverse_sum_{size}")
  rev, out, inp = b.glob(0, f32, groups * size), b.glob(1, f32, groups), b.glob(2, f32, groups * size)
  tmp = b.local("tmp", f32, size)
  g, l = b.special("gidx0", groups), b.special("lidx0", size)
  t = b.add(g * size + l)
  st = b.store(tmp, l, b.load(inp, t))
  b.barrier(st)
  b.store(rev, t, b.load(tmp, b.add(l * -1 + (size - 1))))
  iff = b.if_(b.add(l.eq(0)))
  r = b.range(size)
  v = b.load(tmp, r)
  b.end(v, r)
  b.store(out, g, b.reduce(Ops.ADD, v, r))
  b.endif(iff)
  prog = b.program(global_size=(groups, 1, 1), local_size=(size, 1, 1))
  x = np.random.default_rng(11).normal(0, 10, groups * size).astype(np.float32)
  sums = np.zeros(groups, np.float32)
  for i, v in enumerate(x): sums[i // size] = np.float32(sums[i // size] + v)
  return Case("barrier-reverse-sum", prog, [np.zeros(groups * size, np.float32), np.zeros(groups, np.float32), x],
              [x.reshape(groups, size)[:, ::-1].ravel(), sums, x], barrier=True)


def program_cases() -> list[Case]:
  """The hand-built programs every backend runs: loops and REDUCE, IF, gates, grids, local memory, barriers."""
  return [_fold(), _if_even(), _gate(), _grid3(), _local_no_barrier(), _empty(), _worked_example(), _reverse_and_sum()]


def bad_launches(dev: Backend) -> list[tuple[str, object, str]]:
  """Launches every device refuses before anything runs (EXEC.PROGRAM.params, EXEC.GRID, DEV.LAUNCH.limits), each as
  (what is wrong, a function making the launch, the clause of the SpecError it must raise)."""
  compiled, ops, ins = alu_kernel(dev, dtypes.int8)
  n = 3
  bufs = [to_buffer(dev, [1] * n, d) for _, d in ins] + [dev.alloc(n, out_dtype(op, dtypes.int8)) for op in ops]
  def go(vals, gsz, lsz=None, bs=bufs): return lambda: dev.launch(compiled, bs, vals, gsz, lsz)
  return [("n below the variable's minimum", go({"n": 0}, (0, 1, 1)), "EXEC.PROGRAM.params"),
          ("a missing variable", go({}, (n, 1, 1)), "EXEC.PROGRAM.params"),
          ("sizes disagree with the program", go({"n": n}, (n + 1, 1, 1)), "EXEC.GRID.match"),
          ("a local size but no lidx0", go({"n": n}, (n, 1, 1), (2, 1, 1)), "EXEC.GRID.match"),
          ("four dimensions", go({"n": n}, (n, 1, 1, 1)), "EXEC.GRID"),
          ("a local size over the limit", go({"n": n}, (n, 1, 1), (1 << 20, 1, 1)), "DEV.LAUNCH.limits"),
          ("a buffer too few", go({"n": n}, (n, 1, 1), None, bufs[:-1]), "EXEC.PROGRAM.params"),
          ("a buffer of the PYTHON device", go({"n": n}, (n, 1, 1), None, [Device["PYTHON"].alloc(n, dtypes.int8)] +
                                               bufs[1:]), "EXEC.PROGRAM.params")]


def cl_opens() -> bool:
  """Whether the CL device opens here (pyopencl, an ICD such as PoCL, a device)."""
  try:
    Device["CL"]
    return True
  except Exception:   # no pyopencl, no ICD, no device
    return False


# tests that run on CL skip without a driver, saying so (DEV.CL.absent; tests/test_no_opencl.py checks the reason)
needs_cl = pytest.mark.skipif(not cl_opens(), reason="DEV.CL.absent (DEV.REGISTRY): no OpenCL device (pyopencl, an "
                              "ICD such as PoCL)")
