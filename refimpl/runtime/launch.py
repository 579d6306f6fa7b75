"""Launch checks every compiled backend makes before a kernel runs (EXEC.PROGRAM.params, EXEC.GRID, DEV.LAUNCH.limits),
the same ones the PYTHON device makes, so that a bad launch is the same error on every device."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.helpers import SpecError
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import exec_alu

__all__ = ["Limits", "check_launch", "eval_size"]


@dataclass(frozen=True)
class Limits:
  """A device's launch limits (DEV.LAUNCH.limits)."""
  max_local: tuple[int, int, int] = (1024, 1024, 64)
  max_threads: int = 1024
  max_global: int = 2 ** 31 - 1
  local_bytes: int = 49152


def eval_size(u: UOp, vals: dict[str, int]):
  """The value of a SPECIAL's size: CONSTs, DEFINE_VARs and ALU ops only, computed with exec_alu (EXEC.GRID.special)."""
  if u.op is Ops.CONST: return u.arg
  if u.op is Ops.DEFINE_VAR: return vals[u.arg[0]]
  if u.op in GroupOp.ALU or u.op in (Ops.CAST, Ops.BITCAST):
    src_dt = u.src[1].dtype if u.op is Ops.WHERE else u.src[-1].dtype
    return exec_alu(u.op, u.dtype, [eval_size(s, vals) for s in u.src], src_dt)
  raise SpecError("EXEC.GRID.special", f"a SPECIAL size may use CONST, DEFINE_VAR and ALU ops only, not {u.op.name}")


@dataclass(frozen=True)
class LaunchFacts:
  """What the launch checks need from a program alone, found once per program (issue 19, DEV.LAUNCH.limits):
  its vars by name, the bytes of local memory it declares, its SPECIALs as (name, size UOp), and, per device
  limits, the sizes of a launch without vars or explicit sizes once such a launch has passed every check (the
  checks then depend on the program alone)."""
  want: dict
  local_bytes: int
  specials: tuple[tuple[str, UOp], ...]
  checked: dict = field(default_factory=dict)   # Limits -> (global, local) sizes of a launch with the program's own
  last: list = field(default_factory=lambda: [None, None])   # the Limits object looked up last and its sizes


def launch_facts(p: LinearProgram) -> LaunchFacts:
  """The program's LaunchFacts, kept in its own __dict__ (as its cached properties are): a dictionary keyed by the
  program would hash all of its UOps at every launch, several microseconds of a replayed step's 64 launches."""
  facts = p.__dict__.get("_launch_facts")
  if facts is None:
    facts = p.__dict__["_launch_facts"] = LaunchFacts(
      {u.arg[0]: u.arg for u in p.vars}, sum(u.dtype.size * u.dtype.base.itemsize for u in p.uops
                                             if u.op is Ops.DEFINE_LOCAL),
      tuple((u.arg, u.src[0]) for u in p.uops if u.op is Ops.SPECIAL))
  return facts


def _pad(name: str, sz) -> tuple[int, int, int]:
  sz = tuple(int(x) for x in sz)
  if len(sz) > 3 or any(x < 0 for x in sz): raise SpecError("EXEC.GRID", f"{name}: bad launch size {sz}")
  return sz + (1,) * (3 - len(sz))   # type: ignore[return-value]


def check_launch(backend: Backend, p: LinearProgram, bufs: list[Buffer], vals: dict[str, int], global_size,
                 local_size, limits: Limits) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
  """Every check of a launch, before anything runs; the padded (global, local) sizes. Sizes default to the
  program's own (EXEC.GRID)."""
  backend.check_buffers(p, bufs)   # EXEC.PROGRAM.params: one distinct buffer of the right dtype and size per slot
  for b in bufs:
    if b.device != backend.name and b.device.partition(":")[0] != backend.name:
      raise SpecError("EXEC.PROGRAM.params", f"{p.name}: a buffer on {b.device}, not on {backend.name}")
  facts = launch_facts(p)
  if not vals and global_size is None and local_size is None:
    if facts.last[0] is limits: return facts.last[1]   # the same limits as the launch before: no hashing
    if limits in facts.checked:   # the program's own sizes, vars-free: checked at an earlier launch
      facts.last[:] = [limits, facts.checked[limits]]
      return facts.checked[limits]
  want = facts.want
  if set(vals) != set(want):
    raise SpecError("EXEC.PROGRAM.params", f"{p.name} takes vars {sorted(want)}, got {sorted(vals)}")
  for name, (_, lo, hi) in want.items():
    if type(vals[name]) is not int or not lo <= vals[name] <= hi:
      raise SpecError("EXEC.PROGRAM.params", f"{p.name}: var {name}={vals[name]!r} outside [{lo}, {hi}]")
  gsz = _pad(p.name, p.global_size if global_size is None else global_size)
  lsz = _pad(p.name, p.local_size if local_size is None else local_size)
  for d in range(3):   # DEV.LAUNCH.limits: the limit, its value and the requested value
    if lsz[d] > limits.max_local[d]:
      raise SpecError("DEV.LAUNCH.limits", f"{p.name}: local size {d} is {lsz[d]}, max {limits.max_local[d]}")
    if gsz[d] > limits.max_global:
      raise SpecError("DEV.LAUNCH.limits", f"{p.name}: global size {d} is {gsz[d]}, max {limits.max_global}")
  if math.prod(lsz) > limits.max_threads:
    raise SpecError("DEV.LAUNCH.limits", f"{p.name}: {math.prod(lsz)} threads per work-group, max {limits.max_threads}")
  nbytes = facts.local_bytes
  if nbytes > limits.local_bytes:
    raise SpecError("DEV.LAUNCH.limits", f"{p.name}: {nbytes} bytes of local memory, max {limits.local_bytes}")
  used = set()
  for arg, size in facts.specials:   # EXEC.GRID.match
    used.add(arg)
    want_size = (gsz if arg[0] == "g" else lsz)[int(arg[-1])]
    got = size.arg if size.op is Ops.CONST else eval_size(size, vals)
    if got != want_size:
      raise SpecError("EXEC.GRID.match", f"{p.name}: SPECIAL {arg} has size {got}, launch gives {want_size}")
  for kind, sz in (("gidx", gsz), ("lidx", lsz)):
    for d in range(3):
      if f"{kind}{d}" not in used and sz[d] not in (0, 1):
        raise SpecError("EXEC.GRID.match", f"{p.name}: no SPECIAL {kind}{d}, but the launch gives size {sz[d]}")
  if not vals and global_size is None and local_size is None: facts.checked[limits] = (gsz, lsz)
  return gsz, lsz
