"""The CUDA device through pycuda (DEV.CUDA.pycuda, DEV.CUDA.binding): pycuda builds here without a driver
(tools/build_pycuda.py: a generated link stub of libcuda), imports, and compiles the representative kernel set of
tests/cuda_kernels.py to cubins with nvcc through pycuda.compiler, with the NVRTC path's flags. Without a GPU nothing
runs; on one, run the conformance suite through both bindings (docs/gpu-results.md).

Without a driver, pycuda's extension cannot load libcuda.so.1; this module then loads the link stub (generated into a
temporary folder) into its own process only, under the driver's soname, so that pycuda imports and its driver calls
fail cleanly with CUDA_ERROR_STUB_LIBRARY. With a driver present, the driver is used. `tox -e pycuda` builds and
installs pycuda and runs this module."""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import struct
import subprocess
from pathlib import Path

import pytest

from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import kernel_name
from refimpl.renderer.cuda import CUDARenderer

if importlib.util.find_spec("pycuda") is None:
  pytest.skip("DEV.CUDA.pycuda: pycuda not installed (python tools/build_pycuda.py --install)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
ARCH = "sm_75"   # the oldest architecture with every instruction the renderer may need (DEV.CUDA.compile)


def _build_script():
  spec = importlib.util.spec_from_file_location("build_pycuda", ROOT / "tools" / "build_pycuda.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


bp = _build_script()


def _driver_present() -> bool:
  try: ctypes.CDLL("libcuda.so.1")
  except OSError: return False
  return True


DRIVER = _driver_present()   # read before the stub may be loaded: after that, libcuda.so.1 names the stub


@pytest.fixture(scope="module")
def stub(tmp_path_factory) -> Path:
  """The link stub, generated afresh from this toolkit's headers."""
  return bp.build_stub(bp.cuda_root(), tmp_path_factory.mktemp("stub"))


@pytest.fixture(scope="module")
def drv(stub):
  """pycuda.driver, on the real driver when there is one, else on the stub loaded into this process only."""
  if not DRIVER: ctypes.CDLL(str(stub), mode=ctypes.RTLD_GLOBAL)   # satisfies NEEDED libcuda.so.1
  import pycuda.driver
  return pycuda.driver


def test_stub_defines_every_driver_function_and_fails_cleanly(stub):
  """DEV.CUDA.pycuda: the stub defines each cu* function of cuda.h (the `_v2` names the header maps to) and
  cudaProfiler.h; each returns CUDA_ERROR_STUB_LIBRARY; its soname is the driver's, its file name is not."""
  names = bp.driver_functions(bp.cuda_root())
  assert {"cuInit", "cuMemAlloc_v2", "cuLaunchKernel", "cuModuleLoadData", "cuProfilerStart"} <= set(names)
  assert "cuMemAlloc" not in names   # cuda.h maps it to cuMemAlloc_v2: a program links the _v2 symbol
  lib = ctypes.CDLL(str(stub))
  assert lib.cuInit(0) == bp.STUB_ERROR == 34 and lib.cuMemAlloc_v2(None, 4) == 34
  msg = ctypes.c_char_p()
  assert lib.cuGetErrorName(34, ctypes.byref(msg)) == 0 and msg.value == b"CUDA_ERROR_STUB_LIBRARY"
  soname = subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True).stdout
  assert "Library soname: [libcuda.so.1]" in soname and stub.name == "libcuda.so"


def test_built_extension_needs_the_driver_not_the_stub(drv, stub):
  """DEV.CUDA.pycuda: the built extension asks for libcuda.so.1 by soname, with no run path to the stub's folder,
  and no symbol it needs is missing from the stub (so none will be from the driver)."""
  ext = Path(drv.__file__).parent
  so = next(ext.glob("_driver*.so"))
  dyn = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
  assert "Shared library: [libcuda.so.1]" in dyn
  assert "RPATH" not in dyn and "RUNPATH" not in dyn
  assert bp.undefined_driver_symbols(so, stub) == []


def test_device_reports_the_missing_driver(drv):
  """DEV.CUDA.error: opening the CUDA device through pycuda on a machine without a GPU names the failed call."""
  if DRIVER: pytest.skip("DEV.CUDA.error: a driver is present; this checks the driverless report")
  from refimpl.runtime.ops_cuda import CUDABackend
  with pytest.raises(SpecError) as e: CUDABackend(binding="pycuda")
  assert e.value.clause == "DEV.CUDA.error" and "cuInit" in str(e.value) and "stub" in str(e.value).lower()


def _sections(image: bytes) -> dict[str, bytes]:
  """The sections of a 64-bit little-endian ELF (a cubin) by name; NOBITS sections are empty."""
  shoff, = struct.unpack_from("<Q", image, 0x28)
  entsize, num, strndx = struct.unpack_from("<HHH", image, 0x3A)
  hdrs = [struct.unpack_from("<IIQQQQ", image, shoff + i * entsize) for i in range(num)]
  names = image[hdrs[strndx][4]:hdrs[strndx][4] + hdrs[strndx][5]]
  return {names[n:names.index(b"\0", n)].decode(): (b"" if typ == 8 else image[off:off + size])
          for n, typ, _, _, off, size in hdrs}


def _compiled(drv, prog) -> tuple[str, bytes]:
  from refimpl.runtime.cuda_bindings import nvcc_compile
  src = CUDARenderer().render(prog)
  return src, nvcc_compile(src, kernel_name(prog), ARCH)


def _kernel_set() -> dict:
  from tests.cuda_kernels import representative_set
  return representative_set()


KERNELS = _kernel_set()


@pytest.mark.parametrize("kid", KERNELS)
def test_kernel_compiles_through_pycuda(drv, kid):
  """DEV.CUDA.compile through pycuda: the kernel's CUDA C compiles with nvcc (pycuda.compiler, NVRTC's flags) to a
  cubin for sm_75 that defines the kernel under the name the device looks it up by."""
  prog = KERNELS[kid]
  _, cubin = _compiled(drv, prog)
  assert cubin[:4] == b"\x7fELF"
  assert f".text.{kernel_name(prog)}" in _sections(cubin), f"{kid}: no kernel {kernel_name(prog)} in the cubin"


def _no_local_memory(prog) -> bool: return not any(u.op.name == "DEFINE_LOCAL" for u in prog.uops)


@pytest.mark.parametrize("kid", [k for k in KERNELS if k.startswith(("alu-", "convert-", "case-"))
                                 and _no_local_memory(KERNELS[k])])
def test_same_machine_code_as_nvrtc(drv, kid):
  """DEV.CUDA.binding: for a kernel without local memory, nvcc (pycuda) and NVRTC (cuda-python) give the same cubin
  for the same source, section for section, except the note that names the compiler: the two bindings run the same
  machine code for every ALU op and conversion of every dtype. (With __shared__ arrays they differ: nvcc's NVVM
  optimises shared memory further, e.g. it drops a shared store that only its own thread reads back, which NVRTC
  keeps; both are legal executions, EXEC.ASIF, and only a GPU run compares them, docs/gpu-results.md.)"""
  from refimpl.runtime.cuda_bindings import nvrtc_compile
  try: nvrtc_compile("", "probe", "compute_75")
  except Exception as e:   # noqa: BLE001 -- a missing package or a library that does not load
    pytest.skip(f"DEV.CUDA.binding: cuda-python's NVRTC is not usable here ({e})")
  src, by_nvcc = _compiled(drv, KERNELS[kid])
  by_nvrtc = nvrtc_compile(src, kernel_name(KERNELS[kid]), ARCH, cubin=True)
  a, b = _sections(by_nvcc), _sections(by_nvrtc)
  assert sorted(a) == sorted(b)
  assert [n for n in a if a[n] != b[n]] == [".note.nv.tkinfo"]


def test_compile_error_carries_nvccs_log(drv):
  """DEV.CUDA.compile: an nvcc failure is SpecError(DEV.COMPILE) with nvcc's log and the numbered source lines."""
  from refimpl.runtime.cuda_bindings import nvcc_compile
  src = "\n".join(["// line 1", "// line 2", 'extern "C" __global__ void broken(int* p) {', "  p[0] = undeclared_x;",
                   "}"])
  with pytest.raises(SpecError) as e: nvcc_compile(src, "broken", ARCH)
  msg = str(e.value)
  assert e.value.clause == "DEV.COMPILE" and "undeclared_x" in msg and "error" in msg
  assert ">    4 |   p[0] = undeclared_x;" in msg
