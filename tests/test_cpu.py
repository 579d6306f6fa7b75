"""The CPU device and its C renderer (spec/backends.md, DEV.C.*, DEV.CPU.*) against the executable semantics:
every edge-case row of spec/ops.md run as a CPU kernel, random operands for every ALU op and dtype, every float16 and
bfloat16 bit pattern through the conversions, plus the compiler, cache, threading and launch contract. The checks
that do not depend on the device are in tests/backend_checks.py, shared with tests/test_cl.py."""
import os
import shutil

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen import linearize
from refimpl.device import Device, LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import (EDGE_ROWS, FLOATS, HALVES, bad_launches, const, edge_row, glob, half_patterns,
                                  half_rounding, launch, program_cases, random_alu, random_conversions, run_alu,
                                  sample, special, store)

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile",
              allow_module_level=True)

from refimpl.runtime import ops_cpu  # noqa: E402
from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402

I32 = dtypes.int32


@pytest.fixture(scope="module")
def cpu():
  return CPUBackend()


# ---- every edge-case row of spec/ops.md (OP.TABLES)

@pytest.mark.parametrize("clause,header,row", EDGE_ROWS, ids=[f"{c}:{'|'.join(r)}" for c, _, r in EDGE_ROWS])
def test_edge_table_row_on_cpu(cpu, clause, header, row):
  ok, what = edge_row(cpu, clause, header, row)
  assert ok, what


# ---- random operands for every op and dtype, against exec_alu

@pytest.mark.parametrize("dt", dtypes.all(), ids=repr)
def test_random_alu_matches_exec_alu(cpu, dt):
  """EXEC.THREAD.value: every ALU op bit for bit as exec_alu, except EXP2/LOG2/SIN/POW within ULP_BOUND
  (EXEC.FLOAT.transcendental, DEV.C.libm; measured on glibc: 1 ulp for float16, bfloat16 and float32, 0 for
  float64)."""
  reports = random_alu(cpu, dt)
  bad = [r.first for r in reports if r.failed]
  assert not bad, "\n".join(bad)
  worst = [f"{r.name} {r.worst_ulp}" for r in reports if r.worst_ulp is not None]
  if worst: print(f"{dt!r}: transcendentals within {', '.join(worst)} ULP of the reference")


@pytest.mark.parametrize("src", dtypes.all(), ids=repr)
def test_random_conversions_match_exec_alu(cpu, src):
  """OP.CAST and OP.BITCAST from `src` to every dtype, bit for bit (NaN patterns free, OP.BITCAST.nan)."""
  bad = [r.first for r in random_conversions(cpu, src) if r.failed]
  assert not bad, "\n".join(bad)


# ---- float16 and bfloat16: every bit pattern (DEV.C.half)

@pytest.mark.parametrize("dt", HALVES, ids=repr)
def test_half_every_pattern_converts_exactly(cpu, dt):
  """Every 16-bit pattern is loaded as its exact value and cast to each float dtype as round_float (DT.ROUND) says;
  BITCAST to uint16 gives the pattern itself unless it is a NaN. (Casts to the integer dtypes are in the random and
  edge-table tests.)"""
  bad = [f"{r.failed} wrong, e.g. {r.first}" for r in half_patterns(cpu, dt, FLOATS) if r.failed]
  assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dt", HALVES, ids=repr)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=repr)
def test_rounding_to_half_at_every_boundary(cpu, dt, src):
  """DT.ROUND for float32/float64 -> 16 bits at every rounding boundary (backend_checks.half_rounding)."""
  rep = half_rounding(cpu, dt, src)
  assert rep.failed == 0, f"{rep.failed} wrong, e.g. {rep.first}"


# ---- programs beyond one-op kernels: loops, REDUCE, IF, local memory, several grid dimensions, gates

CASES = [c for c in program_cases() if not c.barrier]   # BARRIER in larger work-groups: DEV.CPU.workgroup


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_program_on_cpu(cpu, case):
  """Each hand-built program of backend_checks.program_cases leaves the arrays it must (EXEC.THREAD, EXEC.MEMORY,
  EXEC.GRID; DEV.CPU.workgroup: work-groups of several threads without a BARRIER run one thread after another)."""
  got = launch(cpu, case.program, case.arrays, **case.kw)
  for slot, (g, w) in enumerate(zip(got, case.want)):
    if w is not None: assert g.tobytes() == w.tobytes(), (case.name, slot, g[:8], w[:8])


def test_three_grid_dimensions_and_threads(cpu):
  """EXEC.GRID.linear, DEV.C.threads: the 8192 work-groups of the grid3 program give the same result whether they
  are split over a pool of 4 threads or run on one."""
  case = next(c for c in CASES if c.name == "grid3")
  saved = cpu.threads
  try:
    for threads in (1, 4):
      cpu.threads = threads
      got, = launch(cpu, case.program, case.arrays)
      assert got.tolist() == case.want[0].tolist(), threads
  finally: cpu.threads = saved


def test_threads_give_the_same_bits(cpu, monkeypatch):
  """DEV.C.threads: a launch split over 4 threads (the calling thread and a pool of 3) gives the bytes of the
  single-threaded one, and really is split."""
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
    assert used and set(used) == {3}
  finally: cpu.threads = saved
  for op in one:
    x, y = np.array(one[op], np.float64), np.array(four[op], np.float64)
    assert ((x == y) | (np.isnan(x) & np.isnan(y))).all() and (np.signbit(x) == np.signbit(y)).all(), op


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
  for what, go, clause in bad_launches(cpu):
    with pytest.raises(SpecError) as e: go()
    assert e.value.clause == clause, (what, str(e.value))


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
