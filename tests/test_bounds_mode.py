"""EXEC.BOUNDS.checked: with SANITIZE=1 the compiled devices (CPU, CL, CUDA) check every LOAD and STORE against its
array's size and stop with EXEC.BOUNDS naming the kernel, the UOp, the thread, the buffer and the index, as the PYTHON
device does; the faulting access is skipped, so it never touches memory. Off by default, and then the source is byte
for byte what it was (tests/data/render_digests.json)."""
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from emu.build import Builder
from refimpl import Context, Tensor
from refimpl.device import Device, LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import CRenderer
from refimpl.renderer.cuda import CUDARenderer
from refimpl.renderer.opencl import OpenCLRenderer
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import launch, program_cases
from tests.emu.conftest import run_program
from tests.emu.test_emu_sanitizer import CATALOGUE
from tests.render_digests import digests

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc), so the CPU device cannot compile", allow_module_level=True)

from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402

f32 = dtypes.float32
OOB = [c for c in CATALOGUE if c[3] == "EXEC.BOUNDS"]   # (name, factory, inputs, clause, thread, index)
DIGESTS = Path(__file__).parent / "data" / "render_digests.json"


def arrays(inputs) -> list[np.ndarray]:
  """The catalogue's inputs as arrays: (dtype, n) pairs become n zeros."""
  return [np.zeros(a[1], np.float32) if isinstance(a, tuple) else a.copy() for a in inputs]


def cpu_refuses(prog) -> bool:
  """DEV.CPU.workgroup: a BARRIER in work-groups of several threads does not run on CPU."""
  return any(u.op is Ops.BARRIER for u in prog.uops) and math.prod(prog.local_size) > 1


def emu_report(prog, inputs) -> str:
  with pytest.raises(SpecError) as e: run_program(prog, *inputs)
  return str(e.value)


@pytest.fixture(scope="module")
def cpu():
  return CPUBackend(sanitize=True)


# ---- the default mode is untouched

def test_default_source_is_byte_identical():
  """C, OpenCL C and CUDA C of the one-op kernels of every dtype and the hand-built programs hash as they did before
  the mode existed (regenerate the file with `python -m tests.render_digests` only after a deliberate change)."""
  want, got = json.loads(DIGESTS.read_text()), digests()
  assert got.keys() == want.keys()
  changed = sorted(k for k in want if want[k] != got[k])
  assert not changed, f"default-mode source changed for {changed[:5]} ({len(changed)} in all)"


@pytest.mark.parametrize("renderer", [CRenderer, OpenCLRenderer, CUDARenderer], ids=lambda r: r.__name__)
def test_checked_source_checks_every_access(renderer):
  """One check per LOAD and STORE (here 2 loads and 2 stores of the worked example, global and local), none in the
  default mode."""
  prog = next(c for c in program_cases() if c.name == "worked-example").program
  plain, checked = renderer().render(prog), renderer().render(prog, checked=True)
  assert "bounds_info" not in plain and "i64_bounds_fault" not in plain
  n_access = sum(u.op.name in ("LOAD", "STORE") for u in prog.uops)
  assert checked.count("i64_bounds_fault(bounds_info,") == n_access == 4


# ---- the emulator's catalogue of faulty kernels, on CPU

@pytest.mark.parametrize("name,factory,inputs,clause,thread,index", OOB, ids=[c[0] for c in OOB])
def test_catalogue_fault_caught_on_cpu(cpu, name, factory, inputs, clause, thread, index):
  """Each out-of-bounds kernel of the catalogue stops with the PYTHON device's report (plus a note that the device
  checked it). The one whose BARRIER runs in work-groups of 4 threads is refused before anything runs
  (DEV.CPU.workgroup), so it cannot fault on CPU; the CL test below catches it."""
  prog = factory(False)
  with pytest.raises(SpecError) as e: launch(cpu, prog, arrays(inputs))
  if cpu_refuses(prog):
    assert e.value.clause == "DEV.CPU.workgroup"
    return
  msg = str(e.value)
  assert e.value.clause == "EXEC.BOUNDS" and prog.name in msg and thread in msg and index in msg, msg
  assert msg.startswith(emu_report(prog, inputs)), (msg, emu_report(prog, inputs))


@pytest.mark.parametrize("name,factory,inputs,clause,thread,index", OOB, ids=[c[0] for c in OOB])
def test_catalogue_fixed_kernel_matches_python(cpu, name, factory, inputs, clause, thread, index):
  prog = factory(True)
  if cpu_refuses(prog): return   # DEV.CPU.workgroup, as above; the CL test runs it
  got = launch(cpu, prog, arrays(inputs))
  want = run_program(prog, *inputs, sanitize=False)
  assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


def _store_past_end() -> LinearProgram:
  """out[g + 1] = g for g < 4 on 4 elements: the last thread's store is out of bounds."""
  b = Builder("store_past_end")
  out = b.glob(0, dtypes.int32, 4)
  g = b.special("gidx0", 4)
  b.store(out, b.add(g + 1), g)
  return b.program((4, 1, 1))


def _local_oob() -> LinearProgram:
  """Work-groups of 4 threads, no BARRIER (so the CPU runs it): each thread writes tmp[l], then reads tmp[l + 1] of a
  4-element array: lidx 3 reads tmp[4]. (The other reads are races; the PYTHON device, without SANITIZE, and the CPU
  meet the out-of-bounds read first.)"""
  b = Builder("local_oob")
  out = b.glob(0, f32, 8)
  tmp = b.local("tmp", f32, 4)
  g, l = b.special("gidx0", 2), b.special("lidx0", 4)
  st = b.store(tmp, l, b.add(l.cast(f32)))
  v = b.add(UOp(Ops.LOAD, f32, (b.index(tmp, b.add(l + 1)), st)))
  b.store(out, b.add(g * 4 + l), v)
  return b.program((2, 1, 1), (4, 1, 1))


def test_store_fault_skips_the_write(cpu):
  """EXEC.BOUNDS on a STORE: reported with its thread, and the memory past the buffer (the rest of the aligned
  allocation, filled with a pattern here) is left alone; the in-bounds stores happened."""
  buf = cpu.alloc(4, dtypes.int32)
  cpu.copyin(buf, np.full(4, -1, np.int32).tobytes())
  raw = buf.handle.base
  start = buf.handle.ctypes.data - raw.ctypes.data
  raw[start + 16:] = 0xAB
  with pytest.raises(SpecError) as e: cpu.launch(cpu.compile(_store_past_end()), [buf])
  msg = str(e.value)
  assert e.value.clause == "EXEC.BOUNDS" and "store to global slot 0: index 4 outside size 4" in msg
  assert "gidx=(3, 0, 0)" in msg
  assert np.frombuffer(cpu.copyout(buf), np.int32).tolist() == [-1, 0, 1, 2]
  assert (raw[start + 16:] == 0xAB).all()


def test_local_fault_names_the_thread(cpu):
  """A local array read past its end by lidx 3 of work-group 0 (the first in the canonical order)."""
  with pytest.raises(SpecError) as e: launch(cpu, _local_oob(), [np.zeros(8, np.float32)])
  msg = str(e.value)
  assert e.value.clause == "EXEC.BOUNDS" and "load from local 'tmp': index 4 outside size 4" in msg
  assert "gidx=(0, 0, 0) lidx=(3, 0, 0)" in msg, msg
  with pytest.raises(SpecError) as e: run_program(_local_oob(), (f32, 8), sanitize=False)
  assert msg.startswith(str(e.value)), (msg, str(e.value))


def test_gated_off_access_is_no_fault(cpu):
  """EXEC.MEMORY.gate: the gate case reads a billion elements away where its gate is false: no fault."""
  case = next(c for c in program_cases() if c.name == "gate")
  got = launch(cpu, case.program, case.arrays)
  assert got[0].tolist() == case.want[0].tolist()


def test_threaded_launch_records_one_fault(cpu):
  """DEV.C.threads: 8192 work-groups over 4 threads, the upper half of them faulting: exactly one fault, from one of
  the faulting threads, is reported, and every in-bounds store happened."""
  n = 8192
  b = Builder("half_out")
  out = b.glob(0, dtypes.int32, n // 2)
  g = b.special("gidx0", n)
  b.store(out, g, g)
  saved = cpu.threads
  try:
    cpu.threads = 4
    with pytest.raises(SpecError) as e: launch(cpu, b.program((n, 1, 1)), [np.full(n // 2, -1, np.int32)])
  finally: cpu.threads = saved
  msg = str(e.value)
  idx = int(msg.split("index ")[1].split()[0])
  assert e.value.clause == "EXEC.BOUNDS" and n // 2 <= idx < n and f"gidx=({idx}, 0, 0)" in msg


def test_mode_is_part_of_the_cache_keys(tmp_path, monkeypatch):
  """A program compiled in both modes is two objects (the in-memory cache is keyed by the mode, the disk cache by the
  source, which differs); SANITIZE read at compile time switches between them."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  dev = CPUBackend()
  prog = _store_past_end()
  with Context(SANITIZE=0): plain = dev.compile(prog)
  with Context(SANITIZE=1): checked = dev.compile(prog)
  assert not plain.checked and checked.checked and plain.fn is not checked.fn
  assert dev.compiler_runs == 2 and len(list((tmp_path / "cpu").glob("*.so"))) == 2
  out = np.full(4, -1, np.int32)
  with Context(SANITIZE=1), pytest.raises(SpecError): launch(dev, prog, [out])


def test_tensors_under_sanitize_give_the_same_bits():
  """Tensor programs realized on CPU with SANITIZE=1 run checked kernels and give the default mode's bits."""
  rng = np.random.default_rng(1)
  a, b = rng.normal(size=(33, 17)).astype(np.float32), rng.normal(size=(17, 9)).astype(np.float32)
  f = lambda: ((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).relu().sum(axis=0) +
               Tensor(a, device="CPU")[::2, 1:10].max(axis=0)).numpy()
  plain = f()
  cpu = Device["CPU"]
  before = sum(k[1] for k in cpu._programs)
  with Context(SANITIZE=1): checked = f()
  assert sum(k[1] for k in cpu._programs) > before
  assert plain.tobytes() == checked.tobytes()


# ---- CL (PoCL in CI) and CUDA (compile only)

def _cl():
  try: return type(Device["CL"])(sanitize=True)
  except SpecError as e: pytest.skip(f"DEV.REGISTRY: no OpenCL device ({e})")


@pytest.mark.parametrize("name,factory,inputs,clause,thread,index", OOB, ids=[c[0] for c in OOB])
def test_catalogue_fault_caught_on_cl(name, factory, inputs, clause, thread, index):
  """Every out-of-bounds kernel of the catalogue, the BARRIER one included, stops with the PYTHON device's report;
  the fixed kernels give PYTHON's bits."""
  cl = _cl()
  prog = factory(False)
  with pytest.raises(SpecError) as e: launch(cl, prog, arrays(inputs))
  msg = str(e.value)
  assert e.value.clause == "EXEC.BOUNDS" and msg.startswith(emu_report(prog, inputs)), msg
  got = launch(cl, factory(True), arrays(inputs))
  want = run_program(factory(True), *inputs, sanitize=False)
  assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


def test_cl_store_and_local_faults():
  cl = _cl()
  with pytest.raises(SpecError) as e: launch(cl, _store_past_end(), [np.full(4, -1, np.int32)])
  assert "gidx=(3, 0, 0)" in str(e.value) and "index 4 outside size 4" in str(e.value)
  with pytest.raises(SpecError) as e: launch(cl, _local_oob(), [np.zeros(8, np.float32)])
  assert e.value.clause == "EXEC.BOUNDS" and "local 'tmp': index 4" in str(e.value) and "lidx=(3, 0, 0)" in str(e.value)


def _cuda_compile(src: str, name: str, tmp: Path) -> str:
  """PTX of CUDA source `src`: NVRTC when cuda-python has it, else nvcc, given the stdint names by `-include stdint.h`
  as the CUDA device's nvcc path does (the preamble declares them only under NVRTC, DEV.CUDA.binding)."""
  try:
    from refimpl.runtime.ops_cuda import nvrtc_compile
    return nvrtc_compile(src, name, "compute_75").decode(errors="replace")
  except SpecError as e:
    if e.clause != "DEV.REGISTRY": raise
  if shutil.which("nvcc") is None: pytest.skip("DEV.CUDA.compile: neither NVRTC (cuda-python) nor nvcc is here")
  (tmp / "k.cu").write_text(src)
  r = subprocess.run(["nvcc", "-arch=compute_75", "--ptx", "--fmad=false", "-include", "stdint.h", "-o",
                      str(tmp / "k.ptx"), str(tmp / "k.cu")], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  return (tmp / "k.ptx").read_text()


@pytest.mark.parametrize("case", [c for c in program_cases() if c.name in ("worked-example", "gate", "grid3", "local")],
                         ids=lambda c: c.name)
def test_checked_cuda_compiles(case, tmp_path):
  """The CUDA source with checks compiles, the kernel is there under its name and the fault flag is claimed with an
  atomic exchange."""
  from refimpl.renderer.cstyle import kernel_name
  ptx = _cuda_compile(CUDARenderer().render(case.program, checked=True), kernel_name(case.program), tmp_path)
  assert f".entry {kernel_name(case.program)}(" in ptx and "atom" in ptx
