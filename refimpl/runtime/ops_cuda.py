"""The CUDA device (spec/backends.md, DEV.CUDA.*): CUDA C from the C-style renderer, compiled with NVRTC, run
through the CUDA driver API, both from cuda-python (`cuda.bindings`).

Compiling needs only NVRTC, so CI checks generated CUDA without a GPU (`nvrtc_compile`); everything else needs a GPU
and a driver. The module imports cuda-python lazily: importing it on a machine without the package is fine, opening
the device is where a missing package or driver is reported (DEV.REGISTRY)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.runtime import compile_error
from refimpl.helpers import SpecError, getenv
from refimpl.renderer.cstyle import kernel_name
from refimpl.runtime.bounds import checking, info_words, raise_fault
from refimpl.runtime.launch import Limits, check_launch

# DEV.LAUNCH.limits of every CUDA device of compute capability >= 3.0
MAX_LOCAL = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
LIMITS = Limits(MAX_LOCAL, MAX_THREADS, 2 ** 31 - 1, 48 * 1024)   # 48 KiB: static __shared__ memory per block


def _bindings():
  try:
    from cuda.bindings import driver, nvrtc
  except ImportError as e:
    raise SpecError("DEV.REGISTRY", "the CUDA device needs cuda-python: pip install 'tinyspec[cuda]' "
                    f"(cuda-python and nvidia-cuda-nvrtc) ({e})") from None
  return driver, nvrtc


def _check(result, what: str):
  """cuda-python returns (error, *values): raise with the error's name, else give the values."""
  err, *values = result if isinstance(result, tuple) else (result,)
  if int(err) != 0:
    name = getattr(err, "name", str(err))
    raise SpecError("DEV.CUDA.error", f"{what} failed: {name}")
  return values[0] if len(values) == 1 else tuple(values)


def nvrtc_compile(src: str, name: str, arch: str = "compute_75", cubin: bool = False) -> bytes:
  """Compile CUDA C `src` with NVRTC to PTX (arch `compute_XY`) or to a cubin (arch `sm_XY`). A compile error raises
  SpecError(DEV.COMPILE) with NVRTC's log and the numbered source lines around the first error."""
  _, nvrtc = _bindings()
  prog = _check(nvrtc.nvrtcCreateProgram(src.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
  # DEV.CUDA.compile: IEEE division and square root, no FMA contraction (EXEC.FLOAT.contract), subnormals kept
  opts = [f"--gpu-architecture={arch}".encode(), b"--fmad=false", b"--prec-div=true", b"--prec-sqrt=true",
          b"--ftz=false", b"-default-device"]
  err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
  # NVRTC writes into the buffers it is given: they must be mutable. (An immutable `b" " * n` is, for n == 1, CPython's
  # shared one-byte object b" ", which the log's terminating NUL would overwrite for the whole process.)
  log_buf = bytearray(_check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize"))
  nvrtc.nvrtcGetProgramLog(prog, log_buf)
  log = log_buf.rstrip(b"\0").decode(errors="replace")
  if int(err) != 0:
    nvrtc.nvrtcDestroyProgram(prog)
    raise compile_error("NVRTC", name, src, log, r"\((\d+)\):")
  get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin else
                   (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
  out = bytearray(_check(get_size(prog), "nvrtc size"))
  _check(get(prog, out), "nvrtc get")
  nvrtc.nvrtcDestroyProgram(prog)
  return bytes(out)


@dataclass
class CUDAProgram:
  """A compiled program: the source, the loaded function and the program it came from."""
  program: LinearProgram
  source: str
  function: object
  module: object
  checked: bool = False   # EXEC.BOUNDS.checked: the kernel takes bounds_info after its buffers


class CUDABackend(Backend):
  """CUDA through cuda-python's driver API (DEV.*): one context on device `index`, synchronous copies, launches on
  the default stream in schedule order (EXEC.ORDER.device). `sanitize` (default: $SANITIZE at each compile) compiles
  kernels that check every access (EXEC.BOUNDS.checked)."""
  name = "CUDA"

  def __init__(self, index: int = 0, sanitize: bool | None = None):
    self.sanitize = sanitize
    self.driver, _ = _bindings()
    d = self.driver
    _check(d.cuInit(0), "cuInit (is there a GPU and a driver?)")
    self.dev = _check(d.cuDeviceGet(index), "cuDeviceGet")
    self.ctx = _check(d.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
    _check(d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
    major = _check(d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev),
                   "cuDeviceGetAttribute")
    minor = _check(d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev),
                   "cuDeviceGetAttribute")
    self.arch = f"sm_{major}{minor}"
    self._cache: dict[tuple[LinearProgram, bool], CUDAProgram] = {}   # keyed by program and checking mode

  def supports(self, dtype: DType) -> bool:
    return dtype.count == 1   # every scalar dtype: float16/bfloat16 through cuda_fp16.h / cuda_bf16.h (DEV.DTYPE)

  def alloc(self, size: int, dtype: DType) -> Buffer:
    """DEV.ALLOC: device memory, at least one byte so that every buffer has a distinct address."""
    if size < 0: raise SpecError("DEV.ALLOC", f"CUDA: negative size {size}")
    ptr = _check(self.driver.cuMemAlloc(max(1, size * dtype.itemsize)), f"cuMemAlloc of {size * dtype.itemsize} bytes")
    return Buffer(self.name, size, dtype, ptr)

  def free(self, buf: Buffer) -> None:
    if buf.handle is not None: self.driver.cuMemFree(buf.handle)
    buf.handle = None

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly nbytes, unchanged."""
    src = np.frombuffer(data, np.uint8)
    if src.size != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {src.size} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and (src > 1).any(): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    if src.size: _check(self.driver.cuMemcpyHtoD(buf.handle, src.ctypes.data, src.size), "cuMemcpyHtoD")

  def copyout(self, buf: Buffer) -> bytes:
    out = np.empty(buf.nbytes, np.uint8)
    if out.size: _check(self.driver.cuMemcpyDtoH(out.ctypes.data, buf.handle, out.size), "cuMemcpyDtoH")
    return out.tobytes()

  def compile(self, program: LinearProgram) -> CUDAProgram:
    """DEV.COMPILE: render CUDA C, compile it to a cubin for this GPU, load it."""
    key = (program, checking(self.sanitize))
    if key not in self._cache:
      from refimpl.renderer.cuda import CUDARenderer
      src = CUDARenderer().render(program, **({"checked": True} if key[1] else {}))
      if getenv("DEBUG", 0) >= 3: print(src)
      image = nvrtc_compile(src, kernel_name(program), self.arch, cubin=True)
      module = _check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
      fn = _check(self.driver.cuModuleGetFunction(module, kernel_name(program).encode()), "cuModuleGetFunction")
      self._cache[key] = CUDAProgram(program, src, fn, module, key[1])
    return self._cache[key]

  def launch(self, compiled: CUDAProgram, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: the grid is the program's global size in blocks and its local size in threads (EXEC.GRID.backend);
    parameters are the buffers' device pointers in slot order, then the variables as int32."""
    if isinstance(compiled, LinearProgram): compiled = self.compile(compiled)
    p, vals = compiled.program, dict(vals or {})
    # every check the other devices make (runtime/launch.py), then the grid's own limits in y and z
    gsz, lsz = check_launch(self, p, bufs, vals, global_size, local_size, LIMITS)
    if 0 in gsz or 0 in lsz: return   # EXEC.GRID.empty
    if any(gsz[d] > MAX_GRID[d] for d in range(3)):
      raise SpecError("DEV.LAUNCH.limits", f"{p.name}: grid {gsz} exceeds CUDA's {MAX_GRID}")
    info = None
    if compiled.checked:   # EXEC.BOUNDS.checked: sizes in, the first fault out
      words = info_words(bufs)
      info = _check(self.driver.cuMemAlloc(words.nbytes), "cuMemAlloc of bounds_info")
      _check(self.driver.cuMemcpyHtoD(info, words.ctypes.data, words.nbytes), "cuMemcpyHtoD")
    ptrs = [b.handle for b in bufs] + ([info] if info is not None else [])
    args = [ctypes.c_uint64(int(h)) for h in ptrs] + [ctypes.c_int32(vals[v.arg[0]]) for v in p.vars]
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    _check(self.driver.cuLaunchKernel(compiled.function, *gsz, *lsz, 0, 0, ctypes.addressof(params), 0),
           f"cuLaunchKernel {p.name}")
    self.synchronize()   # DEV.SYNC per launch: a faulting kernel is reported at the launch that caused it
    if info is not None:
      _check(self.driver.cuMemcpyDtoH(words.ctypes.data, info, words.nbytes), "cuMemcpyDtoH")
      self.driver.cuMemFree(info)
      raise_fault(p, words)

  def synchronize(self) -> None:
    _check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")
