"""The device contract and the device registry (spec/kernels.md, DEV.*). Foundation layer: imports only dtype/uop.

A backend is a `Backend` subclass. It is found by name in one registry: built-in and third-party backends alike
register either by calling `register_device(name, factory)` or through the entry-point group `refimpl.devices`
(pyproject: `[project.entry-points."refimpl.devices"] NAME = "package.module:Factory"`). This is how refimpl finds
the PYTHON device of `emu` without importing it (DESIGN.md: nothing in refimpl imports emu).

tinygrad's names for the device level are front doors here too (DEV.FRONT): `Buffer`, `Device[...]`, and
`Compiled`, `Allocator`, `Compiler`, `Runner` (defined in refimpl/runtime/front.py and handed out from this module on
first use, so that the foundation imports nothing of the runtime): `from tinygrad.device import Compiled, Allocator,
Compiler, Buffer, Device` becomes `from refimpl.device import ...`. docs/custom-backend.md shows a backend on them."""
from __future__ import annotations

import importlib
import threading
import inspect
import functools
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable

from refimpl.dtype import DType, PtrDType
from refimpl.helpers import SpecError
from refimpl.helpers import knob
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp


@dataclass(frozen=True)
class LinearProgram:
  """A kernel as a device receives it (EXEC.PROGRAM): kernel-level UOps in execution order, plus the launch shape.
  `global_size` counts work-groups per dimension and `local_size` threads per work-group (EXEC.GRID)."""
  name: str
  uops: tuple[UOp, ...]
  global_size: tuple[int, ...] = (1, 1, 1)
  local_size: tuple[int, ...] = (1, 1, 1)

  # what depends on the program alone is found once per program, not once per launch (a frozen dataclass's
  # cached_property is stored in the instance's __dict__, which freezing does not guard)
  @functools.cached_property
  def _globals(self) -> tuple[UOp, ...]:
    return tuple(sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg))

  @functools.cached_property
  def _vars(self) -> tuple[UOp, ...]:
    return tuple(sorted((u for u in self.uops if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0]))

  @functools.cached_property
  def _slots(self) -> tuple[tuple[int, DType, int], ...]:
    """(slot, dtype, size or -1) of each buffer parameter in slot order: what check_buffers compares."""
    return tuple((u.arg, u.dtype.base, u.dtype.size) for u in self._globals)

  @property
  def globals(self) -> list[UOp]:
    """The DEFINE_GLOBAL parameters in slot order (EXEC.PROGRAM.params)."""
    return list(self._globals)

  @property
  def vars(self) -> list[UOp]:
    return list(self._vars)


# ---- well-formedness of a linear program (EXEC.PROGRAM.*): the renderers and the emulator run this one check

KERNEL_OPS = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.INDEX,
                        Ops.LOAD, Ops.STORE, Ops.SPECIAL, Ops.RANGE, Ops.END, Ops.BARRIER, Ops.IF, Ops.ENDIF,
                        Ops.REDUCE, Ops.VECTORIZE, Ops.GEP, Ops.CAST, Ops.BITCAST}) | GroupOp.ALU
SPECIAL_NAMES = ("gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2")


def _fail(clause: str, program: LinearProgram, i: int, why: str):
  raise SpecError(clause, f"kernel {program.name!r}, UOp #{i} {program.uops[i].op.name}: {why}")


@dataclass
class ProgramStructure:
  """What `check_program` learns about a well-formed program: each UOp's position, which END or ENDIF closes each
  RANGE or IF, the RANGE/IF positions open at each position, the users of each position, and each REDUCE's
  ranges (outer first). The emulator's translator extends it (emu/check.py)."""
  pos: dict[UOp, int] = field(default_factory=dict)
  close: dict[int, int] = field(default_factory=dict)
  blocks: list[tuple[int, ...]] = field(default_factory=list)
  users: dict[int, list[int]] = field(default_factory=dict)
  reduce_ranges: dict[int, tuple[int, ...]] = field(default_factory=dict)


def check_program(p: LinearProgram, st: ProgramStructure | None = None) -> ProgramStructure:
  """Raise a SpecError naming the broken sub-clause of EXEC.PROGRAM (or EXEC.GRID.special, EXEC.THREAD.reduce) if
  `p` is malformed; else fill and return its structure (`st`, or a new ProgramStructure)."""
  st = ProgramStructure() if st is None else st
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.order
    if u.op not in KERNEL_OPS: _fail("EXEC.PROGRAM.order", p, i, f"{u.op.name} does not appear in a linear program")
    if u in st.pos: _fail("EXEC.PROGRAM.order", p, i, f"the same UOp is already at position {st.pos[u]}")
    for s in u.src:
      if s not in st.pos: _fail("EXEC.PROGRAM.order", p, i, f"source {s.op.name} does not come earlier in the list")
      st.users.setdefault(st.pos[s], []).append(i)
    st.pos[u] = i
  stack: list[int] = []
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.nest
    st.blocks.append(tuple(stack))
    if u.op in (Ops.RANGE, Ops.IF): stack.append(i)
    elif u.op is Ops.END:
      rs = [st.pos[s] for s in u.src[1:]]
      if not rs or any(p.uops[r].op is not Ops.RANGE for r in rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END lists no RANGE")
      if sorted(rs) != stack[len(stack) - len(rs):] or len(set(rs)) != len(rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END does not close the innermost open ranges")
      for r in rs: st.close[r] = i
      del stack[len(stack) - len(rs):]
    elif u.op is Ops.ENDIF:
      if not stack or p.uops[stack[-1]] is not u.src[0]:
        _fail("EXEC.PROGRAM.nest", p, i, "ENDIF does not close the open IF")
      st.close[stack.pop()] = i
  if stack: _fail("EXEC.PROGRAM.nest", p, stack[-1], "block never closed")
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.scope: values leave a block only through memory or REDUCE
    if u.op is Ops.REDUCE: _check_reduce(p, st, i, u)
    if u.op in (Ops.END, Ops.BARRIER, Ops.REDUCE): continue
    # IF's, LOAD's and STORE's further sources only order them (spec/uop.md UOP.LOAD): no value crosses a block
    srcs = u.src[:1] if u.op in (Ops.IF, Ops.LOAD) else u.src[:2] if u.op is Ops.STORE else u.src
    for s in srcs:
      b = st.blocks[st.pos[s]]
      if st.blocks[i][:len(b)] != b: _fail("EXEC.PROGRAM.scope", p, i, f"uses UOp #{st.pos[s]} outside its block")
  slots = sorted(u.arg for u in p.uops if u.op is Ops.DEFINE_GLOBAL)   # EXEC.PROGRAM.params
  if slots != list(range(len(slots))): raise SpecError("EXEC.PROGRAM.params", f"kernel {p.name!r}: slots {slots}")
  names = [u.arg for u in p.uops if u.op is Ops.SPECIAL]   # EXEC.GRID.special
  for n in names:
    if n not in SPECIAL_NAMES: raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: unknown SPECIAL {n!r}")
  if len(set(names)) != len(names): raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: a SPECIAL twice")
  return st


def _check_reduce(p: LinearProgram, st: ProgramStructure, i: int, u: UOp) -> None:
  """EXEC.THREAD.reduce: ranges directly nested, the value inside the innermost, the REDUCE after the outermost."""
  rs = sorted(st.pos[s] for s in u.src[1:])
  if not rs or any(p.uops[r].op is not Ops.RANGE for r in rs):
    _fail("EXEC.THREAD.reduce", p, i, "sources are not RANGEs")
  for a, b in zip(rs, rs[1:]):
    if st.blocks[b] != st.blocks[a] + (a,): _fail("EXEC.THREAD.reduce", p, i, "ranges are not directly nested")
  if st.pos[u.src[0]] < rs[-1] or st.pos[u.src[0]] > st.close[rs[-1]]:
    _fail("EXEC.THREAD.reduce", p, i, "value is not inside the innermost range")
  if i < st.close[rs[0]] or st.blocks[i] != st.blocks[rs[0]]:
    _fail("EXEC.THREAD.reduce", p, i, "REDUCE is not right after its outermost range")
  st.reduce_ranges[i] = tuple(rs)


@dataclass
class Buffer:
  """`size` elements of `dtype` on `device` (DEV.ALLOC). `handle` is the backend's own object."""
  device: str
  size: int
  dtype: DType
  handle: Any = field(default=None, repr=False)

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize

  # tinygrad's Buffer methods (DEV.FRONT.buffer): `Buffer("MY", 3, dtypes.int32).allocate().copyin(mv)`
  def allocate(self) -> Buffer:
    """Give the buffer device memory (DEV.ALLOC) unless it has some; returns the buffer."""
    if self.handle is None: self.handle = Device[self.device].alloc(self.size, self.dtype).handle
    return self

  def is_allocated(self) -> bool: return self.handle is not None

  def copyin(self, mv: bytes | memoryview) -> Buffer:
    """Copy host bytes in (DEV.COPY), allocating first if needed; returns the buffer."""
    Device[self.allocate().device].copyin(self, mv)
    return self

  def as_buffer(self) -> memoryview:
    """The buffer's bytes, copied out (DEV.COPY)."""
    return memoryview(Device[self.device].copyout(self))

  def copyout(self, mv: memoryview) -> memoryview:
    """Copy the buffer's bytes into the writable `mv` of exactly nbytes; returns `mv`."""
    data = Device[self.device].copyout(self)
    if mv.nbytes != len(data): raise SpecError("DEV.COPY", f"copy out of {len(data)} bytes into {mv.nbytes} bytes")
    mv.cast("B")[:] = data
    return mv


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
    slots = program._slots
    if len(bufs) != len(slots):
      raise SpecError("EXEC.PROGRAM.params", f"{program.name} takes {len(slots)} buffers, got {len(bufs)}")
    if len({id(b) for b in bufs}) != len(bufs):
      raise SpecError("EXEC.PROGRAM.params", f"{program.name}: one buffer passed to two slots")
    for (slot, base, size), b in zip(slots, bufs):
      if (b.dtype is not base and b.dtype != base) or (size != -1 and b.size != size):
        ptr: PtrDType = program._globals[slot].dtype
        raise SpecError("EXEC.PROGRAM.params", f"{program.name} slot {slot} wants {ptr!r}, got {b.size} x {b.dtype!r}")


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


def _make(factory: Callable[..., Backend], key: str) -> Backend:
  """Call a device factory: with the device's name ('MY', 'MY:1') when it takes one positional argument without a
  default, as tinygrad's `Compiled` subclasses do (`MyDevice(device)`), else with none (DEV.REGISTRY)."""
  try: params = inspect.signature(factory).parameters.values()
  except (TypeError, ValueError): return factory()
  kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
  return factory(key) if any(p.kind in kinds and p.default is p.empty for p in params) else factory()


class _Registered:
  """`Device._devices`: the registered names as a mapping; `Device._devices["MY"] = MyDevice` registers (the
  spelling of tinygrad-era backend skeletons; refimpl's own is `Device.register`)."""
  def __init__(self, registry: _DeviceRegistry): self._registry = registry
  def __setitem__(self, name: str, factory: Callable[..., Backend]) -> None: self._registry.register(name, factory)
  def __getitem__(self, name: str) -> Callable[..., Backend]: return _FACTORIES[name.upper()]
  def __contains__(self, name: object) -> bool: return isinstance(name, str) and name.upper() in _FACTORIES
  def __iter__(self): return iter(self._registry.names())
  def __len__(self) -> int: return len(self._registry.names())


def _discover() -> None:
  for ep in entry_points(group="refimpl.devices"):
    # ep.load() gives the factory (a Backend class or function); it is imported and called only on first use
    _FACTORIES.setdefault(ep.name.upper(), lambda key, ep=ep: _make(ep.load(), key))


class _DeviceRegistry:
  """`Device[name]` gives the backend for `name` ('CPU', 'CL:1' names device 1 of CL); `Device.DEFAULT` is the
  device new tensors go to: settable, initially `$DEV` or PYTHON (DEV.REGISTRY)."""
  def __init__(self):
    self._open: dict[str, Backend] = {}
    self._default: str | None = None
    self._lock = threading.RLock()   # UOP.HASHCONS.threads: each device is made once, whichever threads ask

  @staticmethod
  def canonicalize(name: str) -> str:
    """'cpu' -> 'CPU', 'CL:0' -> 'CL' (device 0 is the plain name)."""
    base, _, idx = name.upper().partition(":")
    return base if idx in ("", "0") else f"{base}:{idx}"

  def __getitem__(self, name: str) -> Backend:
    key = self.canonicalize(name)
    if key in self._open: return self._open[key]
    with self._lock: return self._open_locked(key)

  def _open_locked(self, key: str) -> Backend:
    if key not in self._open:
      base = key.partition(":")[0]
      if base not in _FACTORIES: _discover()
      if base not in _FACTORIES:
        raise SpecError("DEV.REGISTRY", f"no device named {base!r}; registered: {sorted(_FACTORIES)}")
      backend = _make(_FACTORIES[base], key)
      if not isinstance(backend, Backend):   # an entry point may name a class or a module-level factory
        raise SpecError("DEV.REGISTRY", f"device {base!r} factory returned {type(backend).__name__}, not a Backend")
      self._open[key] = backend
    return self._open[key]

  def register(self, name: str, factory: Callable[..., Backend]) -> None:
    """DEV.REGISTRY: register_device, also closing an open device of that name so the next `Device[name]` uses the
    new factory. `factory` is a Backend class (a `Compiled` subclass gets the device name) or a function."""
    register_device(name, factory)
    base = self.canonicalize(name).partition(":")[0]
    for key in [k for k in self._open if k.partition(":")[0] == base]: del self._open[key]

  @property
  def _devices(self) -> _Registered: return _Registered(self)

  def names(self) -> list[str]:
    _discover()
    return sorted(_FACTORIES)

  @property
  def DEFAULT(self) -> str:
    if self._default is None: self._default = self.canonicalize(knob("DEV"))   # DEV.KNOBS: validated
    return self._default

  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)


Device = _DeviceRegistry()


_FRONT = {"Compiled", "Allocator", "Compiler", "Runner"}


def __getattr__(name: str):
  """DEV.FRONT: `from refimpl.device import Compiled` (and Allocator, Compiler, Runner) loads refimpl/runtime/front.py
  on first use, by name, as the registry loads the built-in backends."""
  if name in _FRONT: return getattr(importlib.import_module("refimpl.runtime.front"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
