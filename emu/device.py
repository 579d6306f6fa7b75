"""The PYTHON device (spec/kernels.md, DEV.*): buffers are numpy arrays, programs are translated to numpy code once
(translate.py) and run with every launch check of EXEC.PROGRAM.params, EXEC.GRID and DEV.LAUNCH.limits.
Registered through the `refimpl.devices` entry point (DEV.REGISTRY); SANITIZE=1 turns the sanitizer on."""
from __future__ import annotations

import numpy as np

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.helpers import SpecError, getenv
from refimpl.uop import Ops
from emu import valu
from emu.runtime import GlobalMem, Launch
from emu.sanitizer import SanitizerError
from emu.translate import Compiled, eval_scalar, translate

__all__ = ["PythonBackend", "SanitizerError"]

MAX_LOCAL = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GLOBAL = 2 ** 31 - 1
LOCAL_BYTES = 49152


class PythonBackend(Backend):
  """The emulator. `sanitize` (default: $SANITIZE) poisons fresh buffers and checks EXEC.UNINIT and EXEC.RACE;
  EXEC.BOUNDS and EXEC.BARRIER.divergence are checked always (EXEC.SANITIZER)."""
  name = "PYTHON"

  def __init__(self, sanitize: bool | None = None):
    self.sanitize = bool(getenv("SANITIZE", 0)) if sanitize is None else sanitize
    self._cache: dict[LinearProgram, Compiled] = {}

  def alloc(self, size: int, dtype: DType) -> Buffer:
    """DEV.ALLOC: contents undefined; in sanitizer mode bytes 0xFF and every element unwritten (EXEC.UNINIT)."""
    if dtype.count != 1 or dtype not in valu.NP:
      raise SpecError("DEV.ALLOC", f"PYTHON allocates scalar dtypes, not {dtype!r}")
    if size < 0: raise SpecError("DEV.ALLOC", f"PYTHON: negative size {size}")
    try: data = np.full(size * dtype.itemsize, 0xFF if self.sanitize else 0, np.uint8)
    except MemoryError:
      raise SpecError("DEV.ALLOC", f"PYTHON: out of memory for {size * dtype.itemsize} bytes") from None
    data = data.view(valu.NP[dtype]) if dtype != dtypes.bool else data.view(np.bool_)
    return Buffer(self.name, size, dtype, GlobalMem(data, np.zeros(size, np.bool_) if self.sanitize else None))

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly n * itemsize bytes, unchanged; bool bytes must be 0 or 1. Writes every element."""
    raw = np.frombuffer(bytes(data), np.uint8)
    if raw.size != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {raw.size} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and (raw > 1).any(): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    buf.handle.data.view(np.uint8)[:] = raw
    if buf.handle.written is not None: buf.handle.written[:] = True

  def copyout(self, buf: Buffer) -> bytes:
    return buf.handle.data.tobytes()   # DEV.COPY

  def compile(self, program: LinearProgram) -> Compiled:
    """DEV.COMPILE: check (EXEC.PROGRAM, EXEC.GRID.special) and translate once per program."""
    if program not in self._cache: self._cache[program] = translate(program)
    return self._cache[program]

  def launch(self, compiled: Compiled, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: every argument checked before any thread runs; an empty grid runs nothing (EXEC.GRID.empty)."""
    if isinstance(compiled, LinearProgram): compiled = self.compile(compiled)
    p, vals = compiled.program, dict(vals or {})
    self.check_buffers(p, bufs)
    for b in bufs:
      if not isinstance(b.handle, GlobalMem): raise SpecError("EXEC.PROGRAM.params", f"{p.name}: buffer not on PYTHON")
    _check_vars(p, vals)
    gsz = _pad(p.name, p.global_size if global_size is None else global_size)
    lsz = _pad(p.name, p.local_size if local_size is None else local_size)
    _check_limits(p, gsz, lsz)
    for u in p.uops:   # EXEC.GRID.match
      if u.op is not Ops.SPECIAL: continue
      want = (gsz if u.arg[0] == "g" else lsz)[int(u.arg[-1])]
      got = eval_scalar(u.src[0], vals)
      if got != want:
        raise SpecError("EXEC.GRID.match", f"{p.name}: SPECIAL {u.arg} has size {got}, launch gives {want}")
    used = {u.arg for u in p.uops if u.op is Ops.SPECIAL}
    for kind, sz in (("gidx", gsz), ("lidx", lsz)):
      for d in range(3):
        if f"{kind}{d}" not in used and sz[d] not in (0, 1):
          raise SpecError("EXEC.GRID.match", f"{p.name}: no SPECIAL {kind}{d}, but the launch gives size {sz[d]}")
    if 0 in gsz or 0 in lsz: return
    k = Launch(compiled, bufs, vals, gsz, lsz, self.sanitize)
    with np.errstate(all="ignore"): compiled.fn(k)


def _pad(name: str, sz) -> tuple[int, int, int]:
  sz = tuple(int(x) for x in sz)
  if len(sz) > 3 or any(x < 0 for x in sz): raise SpecError("EXEC.GRID", f"{name}: bad launch size {sz}")
  return sz + (1,) * (3 - len(sz))


def _check_vars(p: LinearProgram, vals: dict[str, int]) -> None:
  """EXEC.PROGRAM.params: one value per DEFINE_VAR, inside its [min, max]; no extra names."""
  want = {u.arg[0]: u.arg for u in p.vars}
  if set(vals) != set(want):
    raise SpecError("EXEC.PROGRAM.params", f"{p.name} takes vars {sorted(want)}, got {sorted(vals)}")
  for name, (_, lo, hi) in want.items():
    if not isinstance(vals[name], int) or not lo <= vals[name] <= hi:
      raise SpecError("EXEC.PROGRAM.params", f"{p.name}: var {name}={vals[name]!r} outside [{lo}, {hi}]")


def _check_limits(p: LinearProgram, gsz, lsz) -> None:
  """DEV.LAUNCH.limits: the limit, its value and the requested value, before anything runs."""
  for d in range(3):
    if lsz[d] > MAX_LOCAL[d]:
      raise SpecError("DEV.LAUNCH.limits", f"{p.name}: local size {d} is {lsz[d]}, max {MAX_LOCAL[d]}")
    if gsz[d] > MAX_GLOBAL:
      raise SpecError("DEV.LAUNCH.limits", f"{p.name}: global size {d} is {gsz[d]}, max {MAX_GLOBAL}")
  if int(np.prod(lsz)) > MAX_THREADS:
    raise SpecError("DEV.LAUNCH.limits", f"{p.name}: {int(np.prod(lsz))} threads per work-group, max {MAX_THREADS}")
  nbytes = sum(u.dtype.size * u.dtype.base.itemsize for u in p.uops if u.op is Ops.DEFINE_LOCAL)
  if nbytes > LOCAL_BYTES:
    raise SpecError("DEV.LAUNCH.limits", f"{p.name}: {nbytes} bytes of local memory, max {LOCAL_BYTES}")
