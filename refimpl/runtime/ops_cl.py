"""The CL device (spec/backends.md, DEV.CL.*): OpenCL C from the C-style renderer, built and run through pyopencl.

The device's extensions decide how 16- and 64-bit floats work: without `cl_khr_fp16`, float16 is storage only
(`vload_half`/`vstore_half`, computed in float32 and rounded after every op, DEV.CL.half); without `cl_khr_fp64`,
float64 is unsupported and asking for it is an error that says so (DEV.DTYPE)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.runtime import compile_error
from refimpl.helpers import SpecError, getenv
from refimpl.renderer.cstyle import kernel_name
from refimpl.runtime.bounds import checking, info_words, raise_fault
from refimpl.runtime.launch import Limits, check_launch


def _pyopencl():
  try:
    import pyopencl
  except ImportError as e:
    raise SpecError("DEV.REGISTRY", f"the CL device needs pyopencl: pip install 'tinyspec[cl]' ({e})") from None
  return pyopencl


@dataclass
class CLProgram:
  """A built program: its source, the kernel object and the program it came from."""
  program: LinearProgram
  source: str
  kernel: object
  checked: bool = False   # EXEC.BOUNDS.checked: the kernel takes bounds_info after its buffers


class CLBackend(Backend):
  """OpenCL device `index` of the first platform that has one (CL_PLATFORM overrides); one in-order queue, so
  launches and copies happen in the order issued (EXEC.ORDER.device). `sanitize` (default: $SANITIZE at each
  compile) compiles kernels that check every access (EXEC.BOUNDS.checked)."""
  name = "CL"

  def __init__(self, index: int = 0, sanitize: bool | None = None):
    self.sanitize = sanitize
    cl = self.cl = _pyopencl()
    # DEV.CL.absent: no ICD registered (pyopencl's PLATFORM_NOT_FOUND_KHR) means "no CL here", like a missing device
    try: platforms = cl.get_platforms()
    except cl.Error as e:
      raise SpecError("DEV.REGISTRY", f"no OpenCL platform found (is an ICD such as pocl installed?): {e}") from None
    devices = [d for p in platforms[getenv("CL_PLATFORM", 0):] for d in p.get_devices()]
    if not devices: raise SpecError("DEV.REGISTRY", "no OpenCL device found (is an ICD such as pocl installed?)")
    self.device = devices[index]
    self.context = cl.Context([self.device])
    self.queue = cl.CommandQueue(self.context)
    ext = self.device.extensions.split()
    self.has_fp16, self.has_fp64 = "cl_khr_fp16" in ext, "cl_khr_fp64" in ext
    self.max_local = tuple(self.device.max_work_item_sizes)
    self.max_threads = self.device.max_work_group_size
    self.local_bytes = self.device.local_mem_size
    self.limits = Limits(self.max_local, self.max_threads, 2 ** 31 - 1, self.local_bytes)   # DEV.CL.launch
    self._cache: dict[tuple[LinearProgram, bool], CLProgram] = {}   # keyed by program and checking mode

  def supports(self, dtype: DType) -> bool:
    """DEV.DTYPE: float64 only with cl_khr_fp64; float16 always (storage-only without cl_khr_fp16)."""
    return dtype.count == 1 and (dtype != dtypes.float64 or self.has_fp64)

  def alloc(self, size: int, dtype: DType) -> Buffer:
    if not self.supports(dtype):
      raise SpecError("DEV.DTYPE", f"CL device {self.device.name!r} has no cl_khr_fp64: float64 is unsupported")
    if size < 0: raise SpecError("DEV.ALLOC", f"CL: negative size {size}")
    mem = self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(1, size * dtype.itemsize))
    return Buffer(self.name, size, dtype, mem)

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly nbytes, unchanged; blocking, so the host data may change afterwards."""
    src = np.frombuffer(data, np.uint8)
    if src.size != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {src.size} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and (src > 1).any(): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    if src.size: self.cl.enqueue_copy(self.queue, buf.handle, src, is_blocking=True)

  def copyout(self, buf: Buffer) -> bytes:
    out = np.empty(buf.nbytes, np.uint8)
    if out.size: self.cl.enqueue_copy(self.queue, out, buf.handle, is_blocking=True)
    return out.tobytes()

  def compile(self, program: LinearProgram) -> CLProgram:
    """DEV.COMPILE: render OpenCL C for this device's extensions and build it; a build failure carries the log."""
    key = (program, checking(self.sanitize))
    if key not in self._cache:
      from refimpl.renderer.opencl import OpenCLRenderer
      if not self.has_fp64 and any(dtypes.float64 in (u.dtype, getattr(u.dtype, "base", None)) for u in program.uops):
        raise SpecError("DEV.DTYPE", f"{program.name} computes in float64, but CL device {self.device.name!r} has no "
                        "cl_khr_fp64 (DEV.CL.fp64)")
      renderer = OpenCLRenderer(fp16=self.has_fp16, fp64=self.has_fp64)
      src = renderer.render(program, **({"checked": True} if key[1] else {}))   # the plain call as before
      if getenv("DEBUG", 0) >= 3: print(src)
      try:
        # DEV.CL.flags: no -cl-fast-relaxed-math, no -cl-mad-enable, denormals kept (EXEC.FLOAT.*)
        built = self.cl.Program(self.context, src).build(options=["-cl-fp32-correctly-rounded-divide-sqrt"])
      except self.cl.RuntimeError as e:
        raise compile_error("OpenCL", program.name, src, str(e), r"\.cl:(\d+):\d+:") from None
      self._cache[key] = CLProgram(program, src, getattr(built, kernel_name(program)), key[1])
    return self._cache[key]

  def launch(self, compiled: CLProgram, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: OpenCL's global size counts threads, so it is the program's global size (work-groups) times its
    local size (EXEC.GRID.backend); parameters are the buffers in slot order, then the variables as int32."""
    if isinstance(compiled, LinearProgram): compiled = self.compile(compiled)
    p, vals = compiled.program, dict(vals or {})
    # every check the other devices make, against this device's limits (runtime/launch.py, DEV.CL.launch)
    gsz, lsz = check_launch(self, p, bufs, vals, global_size, local_size, self.limits)
    if 0 in gsz or 0 in lsz: return   # EXEC.GRID.empty
    info = None
    if compiled.checked:   # EXEC.BOUNDS.checked: sizes in, the first fault out
      words = info_words(bufs)
      info = self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE | self.cl.mem_flags.COPY_HOST_PTR, hostbuf=words)
    args = [b.handle for b in bufs] + ([info] if info is not None else []) + [np.int32(vals[v.arg[0]]) for v in p.vars]
    compiled.kernel(self.queue, tuple(g * l for g, l in zip(gsz, lsz)), lsz, *args)
    if info is not None:
      self.cl.enqueue_copy(self.queue, words, info, is_blocking=True)
      raise_fault(p, words)

  def synchronize(self) -> None:
    self.queue.finish()
