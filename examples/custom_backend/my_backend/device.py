"""The MY device: the backend skeleton of tinygrad's Compiled/Allocator/Compiler/Runner, filled in, on refimpl.

Memory is ctypes byte arrays; the compiler runs `cc` on the rendered C and returns the shared object's bytes; the
runner loads them with ctypes and calls the kernel once per work-group, looping over the global size in Python.
docs/custom-backend.md walks through it; `Compiled` (refimpl/runtime/front.py) makes the device contract's checks."""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import tempfile

from refimpl.device import Allocator, Compiled, Compiler, Runner
from refimpl.renderer.cstyle import CStyleLanguage


class MyAllocator(Allocator):
  """A buffer is a ctypes array of bytes (malloc'd, so aligned for every scalar type)."""
  def _alloc(self, size: int, options):
    return (ctypes.c_uint8 * size)()

  def _free(self, buf, options):
    pass   # ctypes frees the array with its last reference

  def copyin(self, dst, src: memoryview):
    ctypes.memmove(dst, bytes(src), src.nbytes)

  def copyout(self, dst: memoryview, src):
    dst[:] = bytes(src)[:dst.nbytes]


class MyCompiler(Compiler):
  """C source to the bytes of a shared object, with the flags the spec asks of C (DEV.C.flags: no fast-math, no
  contraction of a*b+c into an fma, ISO C11)."""
  flags = ("-shared", "-fPIC", "-O2", "-std=c11", "-ffp-contract=off", "-fno-math-errno")

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
      c_file, so_file = os.path.join(tmp, "kernel.c"), os.path.join(tmp, "kernel.so")
      with open(c_file, "w") as f: f.write(src)
      r = subprocess.run([os.environ.get("CC", "cc"), *self.flags, "-o", so_file, c_file, "-lm"],
                         capture_output=True, text=True)
      if r.returncode != 0: raise RuntimeError(r.stderr)   # Compiled reports it as DEV.COMPILE with the source
      with open(so_file, "rb") as f: return f.read()


class MyRunner(Runner):
  """Loads the shared object and calls the kernel `void name(buffers..., vars..., int64 core_start, int64 core_end,
  int64 gsize0, int64 gsize1, int64 lsize0, int64 lsize1, int64 lsize2)` once per work-group."""
  def __init__(self, name: str, lib: bytes):
    super().__init__(name, lib)
    with tempfile.NamedTemporaryFile(suffix=".so") as f:   # ctypes loads from a file; the mapping outlives it
      f.write(lib)
      f.flush()
      self.fn = getattr(ctypes.CDLL(f.name), name)
    self.fn.restype = None

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
    ptrs = [ctypes.cast(b, ctypes.c_void_p) for b in bufs]
    args = [*ptrs, *(ctypes.c_int32(v) for v in vals)]   # refimpl's variables are int32 (UOP.DEFINE_VAR)
    sizes = [ctypes.c_int64(s) for s in (global_size[0], global_size[1], *local_size)]
    for wg in range(math.prod(global_size)):   # work-groups are independent (EXEC.BARRIER.scope): any order will do
      self.fn(*args, ctypes.c_int64(wg), ctypes.c_int64(wg + 1), *sizes)


class MyDevice(Compiled):
  def __init__(self, device: str):
    super().__init__(
      device,
      MyAllocator(),
      CStyleLanguage(),   # reuse the C code generator (refimpl renders it as HostCRenderer, DEV.FRONT.c)
      MyCompiler(),
      MyRunner,
    )
