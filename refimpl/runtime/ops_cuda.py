"""The CUDA device (spec/backends.md, DEV.CUDA.*): CUDA C from the C-style renderer, compiled to a cubin and run
through the CUDA driver API of one of two Python bindings (runtime/cuda_bindings.py, DEV.CUDA.binding): cuda-python
(`cuda.bindings`, compiling with NVRTC) or pycuda (compiling with nvcc). The binding only makes the driver calls;
the checks, the grid and the parameters are this module's, the same for both.

Compiling needs no GPU, so CI checks generated CUDA without one (`nvrtc_compile`, `nvcc_compile`); everything else
needs a GPU and a driver. The bindings are imported lazily: importing this module on a machine without them is fine,
opening the device is where a missing package or driver is reported (DEV.REGISTRY)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.helpers import SpecError, getenv
from refimpl.renderer.cstyle import kernel_name
from refimpl.runtime.bounds import checking, info_words, raise_fault
from refimpl.runtime.cuda_bindings import CUDABinding, make_binding, nvcc_compile, nvrtc_compile
from refimpl.runtime.launch import Limits, check_launch

__all__ = ["CUDABackend", "CUDAProgram", "nvrtc_compile", "nvcc_compile", "LIMITS", "MAX_GRID"]

# DEV.LAUNCH.limits of every CUDA device of compute capability >= 3.0
MAX_LOCAL = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
LIMITS = Limits(MAX_LOCAL, MAX_THREADS, 2 ** 31 - 1, 48 * 1024)   # 48 KiB: static __shared__ memory per block


@dataclass
class CUDAProgram:
  """A compiled program: the source, the loaded function, the cubin and the program it came from."""
  program: LinearProgram
  source: str
  function: object
  image: bytes
  checked: bool = False   # EXEC.BOUNDS.checked: the kernel takes bounds_info after its buffers


class CUDABackend(Backend):
  """CUDA through a driver binding (DEV.*, DEV.CUDA.binding): one context on device `index`, synchronous copies,
  launches on the default stream in schedule order (EXEC.ORDER.device). `binding` names the binding ('cuda-python',
  'pycuda'); None: $CUDA_BINDING, else whichever is installed. `sanitize` (default: $SANITIZE at each compile)
  compiles kernels that check every access (EXEC.BOUNDS.checked)."""
  name = "CUDA"

  def __init__(self, index: int = 0, binding: str | CUDABinding | None = None, sanitize: bool | None = None):
    self.sanitize = sanitize
    self.binding = binding if isinstance(binding, CUDABinding) else make_binding(binding)
    self.arch = self.binding.open(index)
    self._cache: dict[tuple[LinearProgram, bool], CUDAProgram] = {}   # keyed by program and checking mode

  def supports(self, dtype: DType) -> bool:
    return dtype.count == 1   # every scalar dtype: float16/bfloat16 through cuda_fp16.h / cuda_bf16.h (DEV.DTYPE)

  def alloc(self, size: int, dtype: DType) -> Buffer:
    """DEV.ALLOC: device memory, at least one byte so that every buffer has a distinct address."""
    if size < 0: raise SpecError("DEV.ALLOC", f"CUDA: negative size {size}")
    return Buffer(self.name, size, dtype, self.binding.alloc(max(1, size * dtype.itemsize)))

  def free(self, buf: Buffer) -> None:
    if buf.handle is not None: self.binding.free(buf.handle)
    buf.handle = None

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly nbytes, unchanged."""
    src = np.frombuffer(data, np.uint8)
    if src.size != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {src.size} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and (src > 1).any(): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    if src.size: self.binding.copyin(buf.handle, np.ascontiguousarray(src))

  def copyout(self, buf: Buffer) -> bytes:
    out = np.empty(buf.nbytes, np.uint8)
    if out.size: self.binding.copyout(out, buf.handle)
    return out.tobytes()

  def compile(self, program: LinearProgram) -> CUDAProgram:
    """DEV.COMPILE: render CUDA C, compile it to a cubin for this GPU, load it."""
    key = (program, checking(self.sanitize))
    if key not in self._cache:
      from refimpl.renderer.cuda import CUDARenderer
      src = CUDARenderer().render(program, **({"checked": True} if key[1] else {}))
      if getenv("DEBUG", 0) >= 3: print(src)
      image = self.binding.compile(src, kernel_name(program), self.arch)
      fn = self.binding.load(image, kernel_name(program))
      self._cache[key] = CUDAProgram(program, src, fn, image, key[1])
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
    info = words = None
    if compiled.checked:   # EXEC.BOUNDS.checked: sizes in, the first fault out
      words = info_words(bufs)
      info = self.binding.alloc(words.nbytes)
      self.binding.copyin(info, words)
    ptrs = [int(b.handle) for b in bufs] + ([int(info)] if info is not None else [])
    self.binding.launch(compiled.function, gsz, lsz, ptrs, [vals[v.arg[0]] for v in p.vars], p.name)
    self.synchronize()   # DEV.SYNC per launch: a faulting kernel is reported at the launch that caused it
    if info is not None:
      self.binding.copyout(words, info)
      self.binding.free(info)
      raise_fault(p, words)

  def synchronize(self) -> None:
    self.binding.synchronize()
