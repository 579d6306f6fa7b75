"""The CL device and its OpenCL C renderer (spec/backends.md, DEV.GPU.*, DEV.CL.*) against the executable semantics,
with the checks tests/test_cpu.py runs on the CPU (tests/backend_checks.py): every edge-case row of spec/ops.md, random
operands for every ALU op and dtype, every float16 and bfloat16 pattern through the conversions, hand-built programs
(local memory and BARRIER in work-groups of many threads included), the launch contract, then what only CL has: build
errors, devices without cl_khr_fp64, bool buffers as uchar. In CI the OpenCL device is PoCL on the CPU."""
import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen import linearize
from refimpl.device import Device, LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.renderer.opencl import OpenCLRenderer
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import (ALU_OPS, EDGE_ROWS, FLOATS, HALVES, alu_program, bad_launches, convert_program,
                                  edge_row, elementwise, glob, half_patterns, half_rounding, launch, program_cases,
                                  random_alu, random_conversions, run_convert, store, to_buffer, from_buffer)


def _open_cl():
  try: return Device["CL"]
  except SpecError as e: pytest.skip(f"DEV.REGISTRY: no CL device here ({e})", allow_module_level=True)


CL = _open_cl()


@pytest.fixture(scope="module")
def cl():
  return CL


# ---- every edge-case row of spec/ops.md (OP.TABLES)

@pytest.mark.parametrize("clause,header,row", EDGE_ROWS, ids=[f"{c}:{'|'.join(r)}" for c, _, r in EDGE_ROWS])
def test_edge_table_row_on_cl(cl, clause, header, row):
  ok, what = edge_row(cl, clause, header, row)
  assert ok, what


# ---- random operands for every op and dtype, against exec_alu

@pytest.mark.parametrize("dt", dtypes.all(), ids=repr)
def test_random_alu_matches_exec_alu(cl, dt):
  """EXEC.THREAD.value: every ALU op bit for bit as exec_alu, except EXP2/LOG2/SIN/POW within the ULP bounds of
  ACC.EXP2/LOG2/SIN/POW (EXEC.FLOAT.transcendental)."""
  reports = random_alu(cl, dt)
  bad = [r.first for r in reports if r.failed]
  assert not bad, "\n".join(bad)
  worst = [f"{r.name} {r.worst_ulp}" for r in reports if r.worst_ulp is not None]
  if worst: print(f"{dt!r}: transcendentals within {', '.join(worst)} ULP of the reference")


@pytest.mark.parametrize("src", dtypes.all(), ids=repr)
def test_random_conversions_match_exec_alu(cl, src):
  """OP.CAST and OP.BITCAST from `src` to every dtype, bit for bit (NaN patterns free, OP.BITCAST.nan)."""
  bad = [r.first for r in random_conversions(cl, src) if r.failed]
  assert not bad, "\n".join(bad)


# ---- float16 and bfloat16: every bit pattern (DEV.CL.half)

@pytest.mark.parametrize("dt", HALVES, ids=repr)
def test_half_every_pattern_converts_exactly(cl, dt):
  """DEV.CL.half: every 16-bit pattern loads as its exact value and casts to each float dtype as DT.ROUND says."""
  bad = [f"{r.failed} wrong, e.g. {r.first}" for r in half_patterns(cl, dt, FLOATS) if r.failed]
  assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dt", HALVES, ids=repr)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=repr)
def test_rounding_to_half_at_every_boundary(cl, dt, src):
  """DEV.CL.half, DT.ROUND: float32/float64 -> 16 bits at every rounding boundary (backend_checks.half_rounding)."""
  rep = half_rounding(cl, dt, src)
  assert rep.failed == 0, f"{rep.failed} wrong, e.g. {rep.first}"


# ---- hand-built programs: loops, REDUCE, IF, gates, grids, local memory and BARRIER (DEV.GPU.*)

CASES = program_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_program_on_cl(cl, case):
  """Each hand-built program leaves the arrays it must, and the bytes the PYTHON device (emu) leaves: with a BARRIER
  in work-groups of 4 and 64 threads too (DEV.GPU.barrier, DEV.GPU.local, EXEC.BARRIER)."""
  got = launch(cl, case.program, case.arrays, **case.kw)
  emu = launch(Device["PYTHON"], case.program, case.arrays, **case.kw)
  for slot, (g, e, w) in enumerate(zip(got, emu, case.want)):
    assert g.tobytes() == e.tobytes(), (case.name, slot, "CL and PYTHON differ", g[:8], e[:8])
    if w is not None: assert g.tobytes() == w.tobytes(), (case.name, slot, g[:8], w[:8])


def test_launch_checks(cl):
  """EXEC.PROGRAM.params, EXEC.GRID, DEV.LAUNCH.limits: the bad launches every device refuses, with the same clause."""
  for what, go, clause in bad_launches(cl):
    with pytest.raises(SpecError) as e: go()
    assert e.value.clause == clause, (what, str(e.value))


def test_limits_are_the_devices(cl):
  """DEV.CL.launch: a work-group as large as the device's max_work_group_size runs; one thread more is refused."""
  most = min(cl.max_threads, cl.max_local[0])
  n = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 1, 1 << 20))
  out, lid = glob(0, dtypes.int32), UOp(Ops.SPECIAL, dtypes.int32, (n,), "lidx0")
  prog = LinearProgram("iota", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, lid, lid),)))))
  buf = cl.alloc(most + 1, dtypes.int32)
  cl.copyin(buf, np.full(most + 1, -1, np.int32).tobytes())
  with pytest.raises(SpecError) as e: cl.launch(cl.compile(prog), [buf], {"n": most + 1}, (1, 1, 1), (most + 1, 1, 1))
  assert e.value.clause == "DEV.LAUNCH.limits" and str(most + 1) in str(e.value)
  cl.launch(cl.compile(prog), [buf], {"n": most}, (1, 1, 1), (most, 1, 1))
  assert np.frombuffer(cl.copyout(buf), np.int32).tolist() == list(range(most)) + [-1]


# ---- what only CL has

def test_build_error_carries_the_log(cl, monkeypatch):
  """DEV.CL.flags: a program OpenCL cannot build raises SpecError(DEV.COMPILE) with the build log and the numbered
  source lines around the error (here the renderer is made to emit an undeclared name)."""
  real = OpenCLRenderer.render
  monkeypatch.setattr(OpenCLRenderer, "render", lambda self, p: real(self, p).replace("get_group_id(0)",
                                                                                       "undeclared_gidx"))
  prog = elementwise("add_i32", [dtypes.int32] * 2, [(dtypes.int32, lambda ld: UOp(Ops.ADD, dtypes.int32, tuple(ld)))])
  with pytest.raises(SpecError) as e: cl.compile(prog)
  msg = str(e.value)
  assert e.value.clause == "DEV.COMPILE" and prog.name in msg and "undeclared_gidx" in msg
  assert "error" in msg.lower() and "source lines" in msg   # the compiler's log, then the numbered source lines
  marked = [line for line in msg.splitlines() if line.startswith(">")]
  assert len(marked) == 1 and "undeclared_gidx" in marked[0]   # the line the log names, marked
  assert e.value.source.count("undeclared_gidx") >= 1        # the whole source is kept on the error


NO_F64 = tuple(d for d in dtypes.all() if d != dtypes.float64)


@pytest.fixture(scope="module")
def no_fp64():
  """A second CL backend on the same device that behaves as a device without cl_khr_fp64 (DEV.CL.fp64)."""
  from refimpl.runtime.ops_cl import CLBackend
  dev = CLBackend()
  dev.has_fp64 = False
  return dev


def test_without_fp64_float64_is_refused(no_fp64):
  """DEV.CL.fp64: float64 is unsupported; a float64 buffer and a program computing in float64 are refused with an
  error naming the missing extension, before OpenCL sees any source."""
  assert not no_fp64.supports(dtypes.float64) and all(no_fp64.supports(d) for d in NO_F64)
  with pytest.raises(SpecError) as e: no_fp64.alloc(4, dtypes.float64)
  assert e.value.clause == "DEV.DTYPE" and "cl_khr_fp64" in str(e.value)
  with pytest.raises(SpecError) as e: no_fp64.compile(convert_program(dtypes.float32)[0])   # stores float64
  assert e.value.clause == "DEV.DTYPE" and "cl_khr_fp64" in str(e.value)
  with pytest.raises(SpecError) as e: no_fp64.compile(alu_program(dtypes.bfloat16)[0])   # MULACC needs double
  assert e.value.clause == "DEV.CL.fp64" and "MULACC" in str(e.value)


def test_without_fp64_every_other_dtype_works(no_fp64):
  """DEV.CL.fp64: without double, every ALU op and every conversion between the other dtypes renders without
  `double`. The kernels whose source differs then run and give exec_alu's bits: float-to-int casts saturate with
  float32 bounds, wide integers reach 16-bit floats through a float32 rounded to odd, float16 MULACC goes through a
  float32 TwoSum rounded to odd (bfloat16 MULACC is refused, see above)."""
  for dt in NO_F64:
    for prog in (alu_program(dt, (Ops.MULACC,) if dt == dtypes.bfloat16 else ())[0], convert_program(dt, NO_F64)[0]):
      text = OpenCLRenderer(fp64=False).render(prog)
      assert "double" not in text and "cl_khr_fp64" not in text, prog.name
  ints = tuple(d for d in NO_F64 if dtypes.is_int(d))
  bad = [r.first for r in random_alu(no_fp64, dtypes.float16, 300, skip=tuple(set(ALU_OPS) - {Ops.MULACC}))
         if r.failed]
  for src in (*HALVES, dtypes.float32):
    bad += [r.first for r in random_conversions(no_fp64, src, dsts=ints) if r.failed]
  for src in (d for d in ints if d.itemsize >= 4):
    bad += [r.first for r in random_conversions(no_fp64, src, dsts=HALVES) if r.failed]
  assert not bad, "\n".join(bad)
  # the double roundings that rounding to odd avoids, which random operands almost never hit: a*b + c just below a
  # float16 midpoint, whose float32 rounding is the midpoint itself (a tie that would go to the even neighbour above),
  # and an int32 just above a bfloat16 midpoint, whose float32 rounding is the midpoint
  a, b, c = 1 + 2 ** -10, (1 - 2 ** -10) * 2 ** -11, 1 + 2 ** -10   # exact: 1 + 2**-10 + 2**-11 - 2**-31
  fma = elementwise("fma_tie", [dtypes.float16] * 3, [(dtypes.float16, lambda ld: UOp(Ops.MULACC, dtypes.float16,
                                                                                       tuple(ld)))])
  bufs = [to_buffer(no_fp64, [v], dtypes.float16) for v in (a, b, c)] + [no_fp64.alloc(1, dtypes.float16)]
  no_fp64.launch(no_fp64.compile(fma), bufs, {"n": 1}, (1, 1, 1))
  assert from_buffer(no_fp64, bufs[3]) == [1 + 2 ** -10]
  got = run_convert(no_fp64, dtypes.int32, [2 ** 24 + 2 ** 16 + 1], [(Ops.CAST, dtypes.bfloat16)], HALVES)
  assert got[Ops.CAST, dtypes.bfloat16] == [2.0 ** 24 + 2 ** 17]


def test_bool_buffers(cl):
  """DEV.CL.bool: bool buffers are bytes 0 or 1 in and out: comparisons and bool ops store 0/1, a bool loads as its
  truth value, a byte other than 0 or 1 is refused at copy in (DEV.COPY)."""
  a, b = [False, True, False, True], [False, False, True, True]
  ops = (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPLT, Ops.MAX)
  prog = elementwise("bools", [dtypes.bool, dtypes.bool], [(dtypes.bool, lambda ld, op=op: UOp(
    op, dtypes.bool, tuple(ld))) for op in ops])
  bufs = [to_buffer(cl, a, dtypes.bool), to_buffer(cl, b, dtypes.bool)] + [cl.alloc(4, dtypes.bool) for _ in ops]
  cl.launch(cl.compile(prog), bufs, {"n": 4}, (4, 1, 1))
  assert [cl.copyout(buf) for buf in bufs[2:]] == [b"\0\0\0\1", b"\0\1\1\1", b"\0\1\1\0", b"\0\1\1\0", b"\0\0\1\0",
                                                   b"\0\1\1\1"]
  out = run_convert(cl, dtypes.float32, [0.0, -0.0, float("nan"), 0.5, -3.0], [(Ops.CAST, dtypes.bool)])
  assert out[Ops.CAST, dtypes.bool] == [False, False, True, True, True]   # OP.CAST.to-bool
  with pytest.raises(SpecError) as e: cl.copyin(cl.alloc(2, dtypes.bool), b"\x00\x02")
  assert e.value.clause == "DEV.COPY"


def test_memory_contract(cl):
  """DEV.COPY: exact byte counts, bytes unchanged; DEV.ALLOC: an empty buffer; DEV.DTYPE: scalars only."""
  buf = cl.alloc(5, dtypes.float64 if cl.has_fp64 else dtypes.int64)
  raw = bytes(range(40))
  cl.copyin(buf, raw)
  assert cl.copyout(buf) == raw
  with pytest.raises(SpecError) as e: cl.copyin(buf, raw[:-1])
  assert e.value.clause == "DEV.COPY"
  assert cl.alloc(0, dtypes.int8).nbytes == 0 and cl.copyout(cl.alloc(0, dtypes.int8)) == b""
  assert not cl.supports(dtypes.float32.vec(2))


def test_tensor_programs_match_python():
  """EXEC.ASIF at the Tensor level: fused kernels (reductions, 16-bit floats, integer division) give PYTHON's bits."""
  rng = np.random.default_rng(3)
  a, b = rng.normal(size=(17, 33)).astype(np.float32), rng.normal(size=(33, 9)).astype(np.float32)
  for f in (lambda x, y: (x @ y).relu().sum(axis=0), lambda x, y: (x * 3 - x).max(axis=1),
            lambda x, y: x.half().sqrt().float().sum(), lambda x, y: (x * 1e4).int() // 7,
            lambda x, y: x.cast(dtypes.bfloat16) * 3 + 1, lambda x, y: (x > 0).where(x, y[:17, :1])):
    want = f(Tensor(a, device="PYTHON"), Tensor(b, device="PYTHON")).numpy()
    got = f(Tensor(a, device="CL"), Tensor(b, device="CL")).numpy()
    assert want.dtype == got.dtype and want.tobytes() == got.tobytes()
