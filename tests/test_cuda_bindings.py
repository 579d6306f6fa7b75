"""The CUDA device's two bindings (DEV.CUDA.binding), without a GPU: which one `CUDA_BINDING` and the installed
packages pick, and that everything but the driver calls is the device's own, the same for both: a recording binding
stands in for the driver, and the device's checks, sizes, grid and parameters are read off what it was asked."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.runtime import cuda_bindings as cb
from refimpl.runtime.ops_cuda import CUDABackend
from tests.backend_checks import alu_program


@pytest.mark.parametrize("value, want", [("pycuda", "pycuda"), ("cuda-python", "cuda-python"), ("PyCUDA", "pycuda")])
def test_knob_picks_the_binding(monkeypatch, value, want):
  monkeypatch.setenv("CUDA_BINDING", value)
  assert cb.binding_name() == want


def test_unknown_binding_is_refused(monkeypatch):
  monkeypatch.setenv("CUDA_BINDING", "pyopencl")
  with pytest.raises(SpecError) as e: cb.binding_name()
  assert e.value.clause == "DEV.CUDA.binding" and "pycuda" in str(e.value) and "cuda-python" in str(e.value)
  with pytest.raises(SpecError): cb.make_binding("numba")


@pytest.mark.parametrize("installed, want", [({"cuda-python", "pycuda"}, "cuda-python"), ({"pycuda"}, "pycuda"),
                                             ({"cuda-python"}, "cuda-python"), (set(), "cuda-python")])
def test_default_prefers_cuda_python_then_pycuda(monkeypatch, installed, want):
  """Unset: cuda-python when installed, else pycuda when installed, else cuda-python, whose absence is reported."""
  monkeypatch.delenv("CUDA_BINDING", raising=False)
  monkeypatch.setattr(cb, "_installed", lambda name: name in installed)
  assert cb.binding_name() == want


def test_missing_package_names_the_extra(monkeypatch):
  """DEV.REGISTRY: a binding whose package is absent says which extra installs it."""
  import builtins
  real = builtins.__import__

  def no_gpu_packages(name, *a, **kw):
    if name.startswith(("pycuda", "cuda")): raise ImportError(f"No module named {name!r}")
    return real(name, *a, **kw)
  monkeypatch.setattr(builtins, "__import__", no_gpu_packages)
  for name, extra in (("pycuda", "tinyspec[pycuda]"), ("cuda-python", "tinyspec[cuda]")):
    with pytest.raises(SpecError) as e: cb.make_binding(name)
    assert e.value.clause == "DEV.REGISTRY" and extra in str(e.value)


class Recording(cb.CUDABinding):
  """A binding that keeps device memory in numpy arrays and records every call."""
  name = "recording"

  def __init__(self):
    self.calls: list[tuple] = []
    self.mem: dict[int, np.ndarray] = {}

  def open(self, index): self.calls.append(("open", index)); return "sm_90"
  def compile(self, src, name, arch): self.calls.append(("compile", name, arch)); return b"\x7fELF" + src.encode()
  def load(self, image, name): self.calls.append(("load", name)); return f"fn:{name}"
  def alloc(self, nbytes):
    ptr = 0x1000 * (len(self.mem) + 1)
    self.mem[ptr] = np.zeros(nbytes, np.uint8)
    self.calls.append(("alloc", nbytes))
    return ptr
  def free(self, ptr): self.calls.append(("free", ptr)); del self.mem[ptr]
  def copyin(self, ptr, host): self.mem[ptr][:host.size] = host
  def copyout(self, host, ptr): host[:] = self.mem[ptr][:host.size]
  def launch(self, fn, grid, block, ptrs, ints, name=""): self.calls.append(("launch", fn, grid, block, ptrs, ints))
  def synchronize(self): self.calls.append(("sync",))


@pytest.fixture
def dev() -> CUDABackend:
  return CUDABackend(index=2, binding=Recording())


def test_memory_goes_through_the_binding(dev):
  """DEV.ALLOC (at least one byte), DEV.COPY (bytes unchanged; sizes and bool bytes checked by the device)."""
  b = dev.alloc(3, dtypes.int32)
  z = dev.alloc(0, dtypes.float32)
  assert dev.binding.calls == [("open", 2), ("alloc", 12), ("alloc", 1)] and dev.arch == "sm_90"
  data = np.array([7, -1, 2 ** 31 - 1], np.int32).tobytes()
  dev.copyin(b, data)
  assert dev.copyout(b) == data and dev.copyout(z) == b""
  with pytest.raises(SpecError) as e: dev.copyin(b, data[:8])
  assert e.value.clause == "DEV.COPY"
  with pytest.raises(SpecError) as e: dev.copyin(dev.alloc(2, dtypes.bool), b"\x01\x02")
  assert e.value.clause == "DEV.COPY"
  dev.free(b)
  assert b.handle is None and ("free", 0x1000) in dev.binding.calls


def test_compile_and_launch_hand_the_binding_the_same_parameters(dev):
  """DEV.CUDA.compile, DEV.CUDA.launch: CUDA C for the device's arch, looked up by its kernel name; the grid in
  blocks and threads; buffer pointers in slot order, then the variables as ints; a synchronize after each launch."""
  prog, _, _ = alu_program(dtypes.int32)
  compiled = dev.compile(prog)
  assert dev.compile(prog) is compiled   # cached
  assert ("compile", "alu_int", "sm_90") in dev.binding.calls and ("load", "alu_int") in dev.binding.calls
  assert compiled.function == "fn:alu_int" and compiled.image == b"\x7fELF" + compiled.source.encode()
  bufs = [dev.alloc(5, g.dtype.base) for g in prog.globals]
  dev.launch(compiled, bufs, {"n": 5}, (5, 1, 1))
  launch = next(c for c in dev.binding.calls if c[0] == "launch")
  assert launch[1:] == ("fn:alu_int", (5, 1, 1), (1, 1, 1), [0x1000 * (i + 1) for i in range(len(bufs))], [5])
  assert dev.binding.calls[-1] == ("sync",)


def test_checks_run_before_the_binding_is_asked(dev):
  """EXEC.PROGRAM.params and EXEC.GRID.match are the device's checks: a bad launch never reaches the binding."""
  prog, _, _ = alu_program(dtypes.int32)
  bufs = [dev.alloc(5, g.dtype.base) for g in prog.globals]
  with pytest.raises(SpecError) as e: dev.launch(prog, bufs[:1], {"n": 5}, (5, 1, 1))
  assert e.value.clause == "EXEC.PROGRAM.params"
  with pytest.raises(SpecError) as e: dev.launch(prog, bufs, {"n": 5}, (6, 1, 1))
  assert e.value.clause == "EXEC.GRID.match"
  assert not any(c[0] == "launch" for c in dev.binding.calls)
