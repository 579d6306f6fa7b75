"""The device contract and the device registry (spec/kernels.md, DEV.*). Foundation layer: imports only dtype/uop.

A backend is a `Backend` subclass. It is found by name in one registry: built-in and third-party backends alike
register either by calling `register_device(name, factory)` or through the entry-point group `refimpl.devices`
(pyproject: `[project.entry-points."refimpl.devices"] NAME = "package.module:Factory"`). This is how refimpl finds
the PYTHON device of `emu` without importing it (DESIGN.md: nothing in refimpl imports emu)."""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable

from refimpl.dtype import DType, PtrDType
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp


@dataclass(frozen=True)
class LinearProgram:
  """A kernel as a device receives it (EXEC.PROGRAM): kernel-level UOps in execution order, plus the launch shape.
  `global_size` counts work-groups per dimension and `local_size` threads per work-group (EXEC.GRID)."""
  name: str
  uops: tuple[UOp, ...]
  global_size: tuple[int, ...] = (1, 1, 1)
  local_size: tuple[int, ...] = (1, 1, 1)

  @property
  def globals(self) -> list[UOp]:
    """The DEFINE_GLOBAL parameters in slot order (EXEC.PROGRAM.params)."""
    return sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)

  @property
  def vars(self) -> list[UOp]:
    return sorted((u for u in self.uops if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0])


@dataclass
class Buffer:
  """`size` elements of `dtype` on `device` (DEV.ALLOC). `handle` is the backend's own object."""
  device: str
  size: int
  dtype: DType
  handle: Any = field(default=None, repr=False)

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize


class Backend:
  """What every device implements (DEV.*). Buffers hold raw bytes; element types are the caller's business except
  where the device must refuse a dtype it cannot compute in (DEV.DTYPE)."""
  name: str = "?"

  def supports(self, dtype: DType) -> bool:
    """DEV.DTYPE: whether kernels on this device can load, store and compute in `dtype`."""
    return True

  def alloc(self, size: int, dtype: DType) -> Buffer: raise NotImplementedError      # DEV.ALLOC
  def free(self, buf: Buffer) -> None: pass
  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None: raise NotImplementedError   # DEV.COPY
  def copyout(self, buf: Buffer) -> bytes: raise NotImplementedError                  # DEV.COPY
  def compile(self, program: LinearProgram) -> Any: raise NotImplementedError          # DEV.COMPILE
  def launch(self, compiled: Any, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: run a compiled program; sizes default to the program's own (EXEC.GRID)."""
    raise NotImplementedError
  def synchronize(self) -> None: pass                                                  # DEV.SYNC

  def check_buffers(self, program: LinearProgram, bufs: list[Buffer]) -> None:
    """EXEC.PROGRAM.params: one distinct buffer per slot, of the slot's dtype and (when known) size."""
    params = program.globals
    if len(bufs) != len(params):
      raise SpecError("EXEC.PROGRAM.params", f"{program.name} takes {len(params)} buffers, got {len(bufs)}")
    if len({id(b) for b in bufs}) != len(bufs):
      raise SpecError("EXEC.PROGRAM.params", f"{program.name}: one buffer passed to two slots")
    for p, b in zip(params, bufs):
      ptr: PtrDType = p.dtype
      if b.dtype != ptr.base or (ptr.size != -1 and b.size != ptr.size):
        raise SpecError("EXEC.PROGRAM.params", f"{program.name} slot {p.arg} wants {ptr!r}, got {b.size} x {b.dtype!r}")


_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_device(name: str, factory: Callable[[], Backend]) -> None:
  """DEV.REGISTRY: make `name` (upper case, e.g. 'PYTHON') available; `factory()` builds the backend on first use."""
  _FACTORIES[name.upper()] = factory


# DEV.REGISTRY: refimpl's own compiled backends, "module:Factory", imported on first use so that importing refimpl
# needs no compiler or GPU package. The CL and CUDA entries go here too.
_BUILTIN: dict[str, str] = {"CPU": "refimpl.runtime.ops_cpu:CPUBackend", "CL": "refimpl.runtime.ops_cl:CLBackend",
                             "CUDA": "refimpl.runtime.ops_cuda:CUDABackend"}


def _builtin(path: str) -> Callable[[], Backend]:
  def make() -> Backend:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)()
  return make


for _name, _path in _BUILTIN.items(): register_device(_name, _builtin(_path))


def _discover() -> None:
  for ep in entry_points(group="refimpl.devices"):
    # ep.load() gives the factory (a Backend class or function); it is imported and called only on first use
    _FACTORIES.setdefault(ep.name.upper(), lambda ep=ep: ep.load()())


class _DeviceRegistry:
  """`Device[name]` gives the backend for `name` ('CPU', 'CL:1' names device 1 of CL); `Device.DEFAULT` is the
  device new tensors go to: settable, initially `$DEV` or PYTHON (DEV.REGISTRY)."""
  def __init__(self):
    self._open: dict[str, Backend] = {}
    self._default: str | None = None

  @staticmethod
  def canonicalize(name: str) -> str:
    """'cpu' -> 'CPU', 'CL:0' -> 'CL' (device 0 is the plain name)."""
    base, _, idx = name.upper().partition(":")
    return base if idx in ("", "0") else f"{base}:{idx}"

  def __getitem__(self, name: str) -> Backend:
    key = self.canonicalize(name)
    if key not in self._open:
      base = key.partition(":")[0]
      if base not in _FACTORIES: _discover()
      if base not in _FACTORIES:
        raise SpecError("DEV.REGISTRY", f"no device named {base!r}; registered: {sorted(_FACTORIES)}")
      factory = _FACTORIES[base]
      backend = factory()
      if not isinstance(backend, Backend):   # an entry point may name a class or a module-level factory
        raise SpecError("DEV.REGISTRY", f"device {base!r} factory returned {type(backend).__name__}, not a Backend")
      self._open[key] = backend
    return self._open[key]

  def names(self) -> list[str]:
    _discover()
    return sorted(_FACTORIES)

  @property
  def DEFAULT(self) -> str:
    if self._default is None: self._default = self.canonicalize(os.environ.get("DEV", "PYTHON"))
    return self._default

  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)


Device = _DeviceRegistry()
