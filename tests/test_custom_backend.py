"""A backend author's path (DEV.FRONT, docs/custom-backend.md): examples/custom_backend, the device MY on tinygrad's
names (Compiled, Allocator, Compiler, Runner), registered in-process with a `Device` call and, installed as a
package, through the `refimpl.devices` entry point; then the conformance suite runs on it."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.device import Buffer, Compiled, Device
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from tests.backend_checks import program_cases

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "custom_backend"
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="DEV.FRONT.c: the example backend compiles C with $CC (default cc), absent here")

# The conformance subset run on MY, and why: MY adds memory, compiling and launching to refimpl; the C it runs is
# the CPU device's renderer (HostCRenderer is CRenderer with every size parameter), which CI runs through the whole
# suite with --backend CPU. So the subset is what exercises MY's own parts on every path they have: every ALU op's
# edge rows and random operands on int32 and float32 (16-bit, 64-bit and bool storage go through the same byte
# copies), the fusion tests' kernel counts (multi-kernel schedules, intermediate buffers), and the forward values and
# gradients of sum and matmul (reductions, multi-kernel backward graphs). About 150 tests in about a minute on 2
# cores; the full suite on MY (about 3500 tests) compiles each kernel afresh, with no disk cache, for over 30 minutes.
SUBSET = "(test_alu and (int32 or float32)) or test_kernel_count or ((test_forward or test_vjp) and (matmul or sum) " \
         "and float32)"


def _load_my_device():
  """my_backend.device from the example folder, as a script would import it."""
  spec = importlib.util.spec_from_file_location("my_backend_device", EXAMPLE / "my_backend" / "device.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


my = _load_my_device()


@pytest.fixture
def MY():
  """MY registered with `Device.register` for one test, and forgotten afterwards."""
  Device.register("MY", my.MyDevice)
  yield Device["MY"]
  from refimpl import device as registry
  registry._FACTORIES.pop("MY", None)
  Device._open.pop("MY", None)


def test_tensor_on_my(MY):
  """DEV.FRONT.compiled: `Tensor([1,2,3], device="MY") + 1` runs; so do a reduction and a gradient."""
  assert isinstance(MY, Compiled) and MY.name == "MY"
  assert (Tensor([1, 2, 3], device="MY") + 1).tolist() == [2, 3, 4]
  assert (Tensor([1, 2, 3], device="MY") + Tensor([4, 5, 6], device="MY")).tolist() == [5, 7, 9]
  x = Tensor([[1.0, -2.0], [3.0, 0.5]], device="MY", requires_grad=True)
  loss = (x @ x).relu().sum()
  loss.backward()
  assert loss.item() == 4.5 and x.grad.tolist() == [[3.0, 0.0], [1.5, 3.0]]


def test_devices_mapping_registers_like_the_skeleton():
  """DEV.REGISTRY: `Device._devices["MY"] = MyDevice` (the skeleton's spelling) registers; the class gets the name."""
  Device._devices["MY"] = my.MyDevice
  try:
    assert "MY" in Device._devices and "MY" in Device.names()
    assert Device["MY:1"].device == "MY:1" and Device["my"].device == "MY"
    assert Tensor([7, 8], device="MY").sum().item() == 15
  finally:
    from refimpl import device as registry
    registry._FACTORIES.pop("MY", None)
    for k in [k for k in Device._open if k.startswith("MY")]: del Device._open[k]


def test_buffer_front_door(MY):
  """DEV.FRONT.buffer: tinygrad's `Buffer(device, size, dtype).allocate().copyin(mv)` and `as_buffer()`."""
  data = np.array([1.5, -0.0, np.inf], np.float32)
  b = Buffer("MY", 3, dtypes.float32)
  assert not b.is_allocated()
  b.allocate().copyin(memoryview(data.tobytes()))
  assert b.is_allocated() and bytes(b.as_buffer()) == data.tobytes()
  out = memoryview(bytearray(12))
  assert bytes(b.copyout(out)) == data.tobytes()


def test_compiled_makes_the_contracts_checks(MY):
  """DEV.COPY, DEV.ALLOC and DEV.COMPILE are Compiled's: the author's allocator and compiler never see a bad size,
  and a compiler's exception becomes SpecError(DEV.COMPILE) carrying the source."""
  b = MY.alloc(2, dtypes.bool)
  with pytest.raises(SpecError) as e: MY.copyin(b, b"\x01\x02")
  assert e.value.clause == "DEV.COPY"
  with pytest.raises(SpecError) as e: MY.copyin(b, b"\x01")
  assert e.value.clause == "DEV.COPY"
  with pytest.raises(SpecError) as e: MY.alloc(-1, dtypes.int32)
  assert e.value.clause == "DEV.ALLOC"
  assert MY.copyout(MY.alloc(0, dtypes.int32)) == b""

  class Broken(my.MyCompiler):
    def compile(self, src: str) -> bytes: return super().compile(src + "\nthis is not C;\n")
  dev = my.MyDevice("MY")
  dev.compiler = Broken()
  with pytest.raises(SpecError) as e: dev.compile(program_cases()[0].program)
  assert e.value.clause == "DEV.COMPILE" and "error" in str(e.value) and e.value.source


def test_barrier_in_a_multi_thread_work_group_is_refused(MY):
  """DEV.FRONT.c: the C kernel runs a work-group's threads one after another, so a BARRIER with more than one thread
  per work-group is refused before anything runs."""
  case = next(c for c in program_cases() if any(u.op.name == "BARRIER" for u in c.program.uops))
  p = case.program
  assert np.prod(p.local_size) > 1
  bufs = [MY.alloc(max(g.dtype.size, 1), g.dtype.base) for g in p.globals]
  with pytest.raises(SpecError) as e: MY.launch(MY.compile(p), bufs)
  assert e.value.clause == "DEV.FRONT.c" and "BARRIER" in str(e.value)


def test_seed_style_script_runs():
  """examples/custom_backend/run_my.py, the skeleton's Part D: register with a Device call, add, reduce, backward."""
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
  r = subprocess.run([sys.executable, str(EXAMPLE / "run_my.py")], capture_output=True, text=True, env=env,
                     timeout=300)
  assert r.returncode == 0, r.stderr
  assert r.stdout.splitlines() == ["[2, 3, 4]", "[5, 7, 9]", "4.5 [[3.0, 0.0], [1.5, 3.0]]"]


def test_installed_package_passes_the_conformance_subset(tmp_path):
  """DEV.REGISTRY by entry point: the example package, pip-installed (into a folder put on PYTHONPATH: its
  dist-info carries the entry point), makes MY a backend the conformance suite finds by name; SUBSET passes."""
  pkg = tmp_path / "pkg"
  shutil.copytree(EXAMPLE, pkg, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
  isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
  r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *isolation, "--target",
                      str(tmp_path / "site"), str(pkg)], capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout + r.stderr
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
  env.pop("DEV", None)
  r = subprocess.run([sys.executable, "-m", "pytest", "conformance", "--backend", "MY", "--hypothesis-profile", "ci",
                      "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k", SUBSET], cwd=ROOT, env=env,
                     capture_output=True, text=True, timeout=1800)
  tail = r.stdout[-3000:] + r.stderr[-2000:]
  assert r.returncode == 0, tail
  assert "on MY" in r.stdout, tail   # the report's header names the backend
  m = re.search(r"(\d+) passed", r.stdout)
  assert m and int(m.group(1)) >= 140 and " failed" not in r.stdout, tail
