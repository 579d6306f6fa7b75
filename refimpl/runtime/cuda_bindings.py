"""The two Python bindings of the CUDA driver the CUDA device runs through (spec/backends.md, DEV.CUDA.binding):
cuda-python (`cuda.bindings`, with NVRTC) and pycuda (with nvcc). A binding is the handful of calls that differ:
open a context, compile to a cubin, load it, allocate, copy, launch, synchronize. Everything else (rendering, the
launch checks, the grid, the parameters, errors) is the device's, in ops_cuda.py, and the same for both.

`CUDA_BINDING=cuda-python` or `CUDA_BINDING=pycuda` picks one; unset, cuda-python is used when it is installed,
else pycuda (DEV.CUDA.binding). Both packages are imported on first use only."""
from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from refimpl.helpers import SpecError
from refimpl.runtime import compile_error

# DEV.CUDA.compile: IEEE division and square root, no FMA contraction (EXEC.FLOAT.contract), subnormals kept. NVRTC
# and nvcc take the same spelling.
COMPILE_FLAGS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false")
NAMES = ("cuda-python", "pycuda")


class CUDABinding:
  """The driver calls of the CUDA device (DEV.CUDA.binding). A device pointer is whatever `alloc` returns; `int()`
  of it is the address passed to kernels."""
  name = "?"

  def open(self, index: int) -> str:
    """Make a context on device `index` current; the device's architecture, e.g. 'sm_90'."""
    raise NotImplementedError
  def compile(self, src: str, name: str, arch: str) -> bytes:
    """CUDA C source to a cubin for `arch` (DEV.CUDA.compile); SpecError(DEV.COMPILE) with the log on failure."""
    raise NotImplementedError
  def load(self, image: bytes, name: str) -> Any:
    """Load a cubin and give its kernel `name` (the module stays alive as long as the kernel)."""
    raise NotImplementedError
  def alloc(self, nbytes: int) -> Any: raise NotImplementedError
  def free(self, ptr: Any) -> None: raise NotImplementedError
  def copyin(self, ptr: Any, host: np.ndarray) -> None: raise NotImplementedError
  def copyout(self, host: np.ndarray, ptr: Any) -> None: raise NotImplementedError
  def launch(self, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int], ptrs: list[int],
             ints: list[int], name: str = "") -> None:
    """Launch kernel `fn` (`name`, for errors) with the 64-bit pointers `ptrs`, then the int32 values `ints`, as its
    parameters."""
    raise NotImplementedError
  def synchronize(self) -> None: raise NotImplementedError


def _missing(what: str, e: Exception) -> SpecError:
  return SpecError("DEV.REGISTRY", f"the CUDA device needs {what} ({e})")


# ---- cuda-python: the driver API and NVRTC from `cuda.bindings`

def cuda_python_modules():
  try:
    from cuda.bindings import driver, nvrtc
  except ImportError as e:
    raise _missing("cuda-python: pip install 'tinyspec[cuda]' (cuda-python and nvidia-cuda-nvrtc)", e) from None
  return driver, nvrtc


def check(result, what: str):
  """cuda-python returns (error, *values): raise with the error's name, else give the values (DEV.CUDA.error)."""
  err, *values = result if isinstance(result, tuple) else (result,)
  if int(err) != 0:
    name = getattr(err, "name", str(err))
    raise SpecError("DEV.CUDA.error", f"{what} failed: {name}")
  return values[0] if len(values) == 1 else tuple(values)


def nvrtc_compile(src: str, name: str, arch: str = "compute_75", cubin: bool = False) -> bytes:
  """Compile CUDA C `src` with NVRTC to PTX (arch `compute_XY`) or to a cubin (arch `sm_XY`). A compile error raises
  SpecError(DEV.COMPILE) with NVRTC's log and the numbered source lines around the first error."""
  _, nvrtc = cuda_python_modules()
  prog = check(nvrtc.nvrtcCreateProgram(src.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
  opts = [f"--gpu-architecture={arch}".encode(), *(f.encode() for f in COMPILE_FLAGS), b"-default-device"]
  err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
  # NVRTC writes into the buffers it is given: they must be mutable. (An immutable `b" " * n` is, for n == 1, CPython's
  # shared one-byte object b" ", which the log's terminating NUL would overwrite for the whole process.)
  log_buf = bytearray(check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize"))
  nvrtc.nvrtcGetProgramLog(prog, log_buf)
  log = log_buf.rstrip(b"\0").decode(errors="replace")
  if int(err) != 0:
    nvrtc.nvrtcDestroyProgram(prog)
    raise compile_error("NVRTC", name, src, log, r"\((\d+)\):")
  get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin else
                   (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
  out = bytearray(check(get_size(prog), "nvrtc size"))
  check(get(prog, out), "nvrtc get")
  nvrtc.nvrtcDestroyProgram(prog)
  return bytes(out)


class CudaPythonBinding(CUDABinding):
  """cuda-python's driver API: the primary context of the device, cubins from NVRTC."""
  name = "cuda-python"

  def __init__(self):
    self.driver, _ = cuda_python_modules()
    self._modules: list[Any] = []

  def open(self, index: int) -> str:
    d = self.driver
    check(d.cuInit(0), "cuInit (is there a GPU and a driver?)")
    self.dev = check(d.cuDeviceGet(index), "cuDeviceGet")
    self.ctx = check(d.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
    check(d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
    attr = d.CUdevice_attribute
    cc = [check(d.cuDeviceGetAttribute(a, self.dev), "cuDeviceGetAttribute") for a in
          (attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)]
    return f"sm_{cc[0]}{cc[1]}"

  def compile(self, src: str, name: str, arch: str) -> bytes: return nvrtc_compile(src, name, arch, cubin=True)

  def load(self, image: bytes, name: str) -> Any:
    module = check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
    self._modules.append(module)
    return check(self.driver.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")

  def alloc(self, nbytes: int) -> Any: return check(self.driver.cuMemAlloc(nbytes), f"cuMemAlloc of {nbytes} bytes")
  def free(self, ptr: Any) -> None: self.driver.cuMemFree(ptr)
  def copyin(self, ptr: Any, host: np.ndarray) -> None:
    check(self.driver.cuMemcpyHtoD(ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
  def copyout(self, host: np.ndarray, ptr: Any) -> None:
    check(self.driver.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "cuMemcpyDtoH")

  def launch(self, fn, grid, block, ptrs, ints, name="") -> None:
    args = [ctypes.c_uint64(p) for p in ptrs] + [ctypes.c_int32(v) for v in ints]
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    check(self.driver.cuLaunchKernel(fn, *grid, *block, 0, 0, ctypes.addressof(params), 0),
          f"cuLaunchKernel {name}")

  def synchronize(self) -> None: check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")


# ---- pycuda: its driver module, cubins from nvcc through pycuda.compiler

def pycuda_driver():
  try:
    import pycuda.driver as drv
  except ImportError as e:
    raise _missing("pycuda: pip install 'tinyspec[pycuda]' (tools/build_pycuda.py builds it without a driver)", e) \
      from None
  return drv


def nvcc_compile(src: str, name: str, arch: str, target: str = "cubin") -> bytes:
  """Compile CUDA C `src` with nvcc through pycuda.compiler (DEV.CUDA.compile): NVRTC's flags, and `-include
  stdint.h` for the stdint names NVRTC gets from the renderer's preamble. A compile error raises
  SpecError(DEV.COMPILE) with nvcc's log and the source lines."""
  drv = pycuda_driver()
  from pycuda.compiler import compile as pycuda_compile
  try:
    # the stdint names by option, not by an #include in the source (refimpl/renderer/cuda.py says why)
    return pycuda_compile(src, options=[*COMPILE_FLAGS, "-include", "stdint.h"], arch=arch, no_extern_c=True,
                          target=target)
  except drv.CompileError as e:
    log = f"{getattr(e, 'stderr', '')}\n{getattr(e, 'stdout', '')}".strip() or str(e)
    raise compile_error("nvcc", name, src, log, r"\((\d+)\):") from None


class PycudaBinding(CUDABinding):
  """pycuda's driver module: the primary context of the device, cubins from nvcc. pycuda raises its own exceptions;
  each becomes SpecError(DEV.CUDA.error) naming the call, as cuda-python's error codes do."""
  name = "pycuda"

  def __init__(self):
    self.drv = pycuda_driver()
    self._modules: list[Any] = []

  def _call(self, what: str, f, *args, **kw):
    try: return f(*args, **kw)
    except self.drv.Error as e: raise SpecError("DEV.CUDA.error", f"{what} failed: {type(e).__name__}: {e}") from None

  def open(self, index: int) -> str:
    self._call("cuInit (is there a GPU and a driver?)", self.drv.init)
    self.dev = self._call("cuDeviceGet", self.drv.Device, index)
    self.ctx = self._call("cuDevicePrimaryCtxRetain", self.dev.retain_primary_context)
    self._call("cuCtxPushCurrent", self.ctx.push)
    major, minor = self._call("cuDeviceGetAttribute", self.dev.compute_capability)
    return f"sm_{major}{minor}"

  def compile(self, src: str, name: str, arch: str) -> bytes: return nvcc_compile(src, name, arch)

  def load(self, image: bytes, name: str) -> Any:
    module = self._call("cuModuleLoadData", self.drv.module_from_buffer, image)
    self._modules.append(module)
    return self._call("cuModuleGetFunction", module.get_function, name)

  def alloc(self, nbytes: int) -> Any: return self._call(f"cuMemAlloc of {nbytes} bytes", self.drv.mem_alloc, nbytes)
  def free(self, ptr: Any) -> None: self._call("cuMemFree", ptr.free)
  def copyin(self, ptr: Any, host: np.ndarray) -> None: self._call("cuMemcpyHtoD", self.drv.memcpy_htod, ptr, host)
  def copyout(self, host: np.ndarray, ptr: Any) -> None: self._call("cuMemcpyDtoH", self.drv.memcpy_dtoh, host, ptr)

  def launch(self, fn, grid, block, ptrs, ints, name="") -> None:
    # the same parameter block as cuda-python's: 8-byte pointers, then 4-byte ints (pycuda packs it with struct)
    fn.prepare("P" * len(ptrs) + "i" * len(ints))
    self._call(f"cuLaunchKernel {name}", fn.prepared_call, grid, block, *ptrs, *ints)

  def synchronize(self) -> None: self._call("cuCtxSynchronize", self.drv.Context.synchronize)


def _installed(name: str) -> bool:
  import importlib.util
  try: return importlib.util.find_spec("cuda.bindings" if name == "cuda-python" else "pycuda") is not None
  except ModuleNotFoundError: return False


def binding_name() -> str:
  """DEV.CUDA.binding: $CUDA_BINDING, else cuda-python when it is installed, else pycuda when it is, else
  cuda-python (whose absence the device then reports)."""
  name = os.environ.get("CUDA_BINDING", "").strip().lower()
  if name:
    if name not in NAMES: raise SpecError("DEV.CUDA.binding", f"CUDA_BINDING={name!r}: use one of {', '.join(NAMES)}")
    return name
  return next((n for n in NAMES if _installed(n)), NAMES[0])


def make_binding(name: str | None = None) -> CUDABinding:
  name = binding_name() if name is None else name
  if name not in NAMES: raise SpecError("DEV.CUDA.binding", f"no CUDA binding {name!r}: use one of {', '.join(NAMES)}")
  return CudaPythonBinding() if name == "cuda-python" else PycudaBinding()
