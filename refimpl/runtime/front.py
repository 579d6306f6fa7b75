"""tinygrad's names for the device level (spec/backends.md, DEV.FRONT.*): `Allocator`, `Compiler`, `Runner` and
`Compiled`, thin front doors to refimpl's one device interface, `Backend` (refimpl/device.py). A backend written on
tinygrad's skeleton (`class MyDevice(Compiled): super().__init__(device, MyAllocator(), CStyleLanguage(),
MyCompiler(), MyRunner)`) runs on refimpl with only its imports changed: `refimpl.device` re-exports these names where
`tinygrad.device` has them. docs/custom-backend.md walks through one.

`Compiled` is a `Backend`: it makes every check of the device contract itself (DEV.ALLOC, DEV.COPY, DEV.DTYPE, the
launch checks of runtime/launch.py, EXEC.GRID.empty) and hands the author's parts only what is left: bytes to move,
source to compile, a launch to run."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.helpers import SpecError
from refimpl.renderer import Renderer
from refimpl.renderer.cstyle import CRenderer, CStyleLanguage, kernel_name
from refimpl.runtime import compile_error
from refimpl.runtime.launch import Limits, check_launch
from refimpl.uop import Ops

__all__ = ["Allocator", "Compiler", "Runner", "Compiled", "HostCRenderer"]


class Allocator:
  """Device memory (DEV.FRONT.allocator). An author writes `_alloc(nbytes, options)`, which returns any handle,
  `_free(handle, options)`, `copyin(handle, src)` (src: a memoryview of exactly the buffer's bytes) and
  `copyout(dest, handle)` (dest: a writable memoryview of the buffer's size). `Compiled` checks sizes, dtypes and
  bool bytes first, so these only move bytes."""
  def alloc(self, size: int, options: Any = None) -> Any: return self._alloc(size, options)
  def free(self, opaque: Any, size: int = 0, options: Any = None) -> None: self._free(opaque, options)
  def _alloc(self, size: int, options: Any) -> Any: raise NotImplementedError
  def _free(self, opaque: Any, options: Any) -> None: pass
  def copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError
  def copyout(self, dest: memoryview, src: Any) -> None: raise NotImplementedError


class Compiler:
  """Source to a binary (DEV.FRONT.compiler): an author writes `compile(src) -> bytes`; `compile_cached` remembers
  each source's binary for the life of the compiler. An exception from `compile` becomes SpecError(DEV.COMPILE)
  with the source."""
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._done: dict[str, bytes] = {}

  def compile(self, src: str) -> bytes: raise NotImplementedError

  def compile_cached(self, src: str) -> bytes:
    if src not in self._done: self._done[src] = self.compile(src)
    return self._done[src]


class Runner:
  """A loaded program (DEV.FRONT.runner): `Compiled` builds it as `runtime(name, lib)` (the kernel's function name
  and the compiler's bytes) and calls it as `runner(*handles, global_size=(x, y, z), local_size=(x, y, z),
  wait=True, vals=(ints...))` with the allocator's handles in slot order and the variables' values in name order
  (`vals` is left out for a program without variables), after every launch check has passed. It returns when the
  kernel has finished."""
  def __init__(self, name: str, lib: bytes):
    self.name, self.lib = name, lib

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    raise NotImplementedError


class HostCRenderer(CRenderer):
  """The C of a backend whose runner calls the kernel once per work-group (DEV.FRONT.c): `CRenderer`'s kernel with
  every size parameter always present, so that its signature depends only on the buffers and variables:
  `void name(buffers..., vars..., int64_t core_start, int64_t core_end, int64_t gsize0, int64_t gsize1,
  int64_t lsize0, int64_t lsize1, int64_t lsize2)`. It runs work-groups core_start .. core_end - 1 (EXEC.GRID.linear
  numbering), each one's threads one after another."""
  def grid_params(self, program: LinearProgram) -> list[str]: return ["gsize0", "gsize1", "lsize0", "lsize1", "lsize2"]


@dataclass
class CompiledProgram:
  """What `Compiled.compile` gives: the program, its source, the compiler's bytes and the runner."""
  program: LinearProgram
  source: str
  lib: bytes
  runner: Runner


class Compiled(Backend):
  """A device assembled from an allocator, a renderer, a compiler and a runner class (DEV.FRONT.compiled), as
  `Compiled(device, allocator, renderer, compiler, runtime)`. `renderer` may be refimpl's `CStyleLanguage()` itself,
  the shared base that renders no language of its own: it is read as plain C and `HostCRenderer` renders it.
  `limits` are the launch limits (DEV.LAUNCH.limits; default the PYTHON device's)."""
  limits = Limits()

  def __init__(self, device: str, allocator: Allocator, renderer: Renderer | None, compiler: Compiler,
               runtime: Callable[[str, bytes], Runner], graph: Any = None):
    self.device = device.upper()
    self.name = self.device.partition(":")[0]
    self.allocator, self.compiler, self.runtime = allocator, compiler, runtime
    self.renderer = HostCRenderer() if renderer is None or type(renderer) is CStyleLanguage else renderer
    self._programs: dict[LinearProgram, CompiledProgram] = {}

  def supports(self, dtype: DType) -> bool:
    """DEV.DTYPE: scalar dtypes (the C renderers compute 16-bit floats in float32 and round each result)."""
    return dtype.count == 1

  def alloc(self, size: int, dtype: DType) -> Buffer:
    """DEV.ALLOC: at least one byte, so that every buffer has its own address."""
    if not self.supports(dtype): raise SpecError("DEV.DTYPE", f"{self.name} does not support {dtype!r}")
    if size < 0: raise SpecError("DEV.ALLOC", f"{self.name}: negative size {size}")
    try: handle = self.allocator.alloc(max(1, size * dtype.itemsize))
    except MemoryError: raise SpecError("DEV.ALLOC", f"{self.name}: out of memory for {size * dtype.itemsize} bytes") \
      from None
    return Buffer(self.name, size, dtype, handle)

  def free(self, buf: Buffer) -> None:
    if buf.handle is not None: self.allocator.free(buf.handle, max(1, buf.nbytes))
    buf.handle = None

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly the buffer's bytes; a bool buffer takes bytes 0 and 1 only."""
    src = memoryview(data).cast("B")
    if src.nbytes != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {src.nbytes} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and any(b > 1 for b in src): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    if src.nbytes: self.allocator.copyin(buf.handle, src)

  def copyout(self, buf: Buffer) -> bytes:
    out = bytearray(buf.nbytes)
    if out: self.allocator.copyout(memoryview(out), buf.handle)
    return bytes(out)

  def compile(self, program: LinearProgram) -> CompiledProgram:
    """DEV.COMPILE: render, compile (cached per source), load."""
    if program not in self._programs:
      src = self.renderer.render(program)
      try: lib = self.compiler.compile_cached(src)
      except SpecError: raise
      except Exception as e:   # noqa: BLE001 -- an author's compiler may raise anything; it is a compile error
        raise compile_error(type(self.compiler).__name__, program.name, src, str(e), r":(\d+):") from None
      self._programs[program] = CompiledProgram(program, src, lib, self.runtime(kernel_name(program), lib))
    return self._programs[program]

  def launch(self, compiled: CompiledProgram, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: every check before anything runs (runtime/launch.py); an empty grid runs nothing; then the
    runner, with the allocator's handles and the variables' values."""
    if isinstance(compiled, LinearProgram): compiled = self.compile(compiled)
    p, vals = compiled.program, dict(vals or {})
    gsz, lsz = check_launch(self, p, bufs, vals, global_size, local_size, self.limits)
    if 0 in gsz or 0 in lsz: return   # EXEC.GRID.empty
    if isinstance(self.renderer, CRenderer) and math.prod(lsz) > 1 and any(u.op is Ops.BARRIER for u in p.uops):
      raise SpecError("DEV.FRONT.c", f"{p.name}: C kernels run a work-group's threads one after another, so they "
                      f"cannot run a BARRIER in work-groups of {math.prod(lsz)} threads (local size {lsz})")
    # vals only when the program has variables: a runner written without the parameter runs every other kernel
    extra = {"vals": tuple(vals[v.arg[0]] for v in p.vars)} if p.vars else {}
    compiled.runner(*[b.handle for b in bufs], global_size=gsz, local_size=lsz, wait=True, **extra)
