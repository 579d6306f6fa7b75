"""The scheduler: cuts a tensor-level graph into kernels and orders them (DESIGN.md step 3, spec/kernels.md
"Schedules").

A node is *materialized* (gets a buffer, written by one kernel) when it is asked for, when it is CONTIGUOUS or a
pending ASSIGN, or when it is a reduction that cannot be fused into its consumer. Everything else is recomputed
inside the kernels that use it: elementwise chains and movement ops fuse into the store or reduction that consumes
them, and movement ops over buffers are index arithmetic, never copies. A reduction fuses into its consumer's kernel
when every path from the kernel's root down to it passes only through elementwise and non-expanding movement ops,
and no other kernel needs it; behind an EXPAND it would be recomputed once per broadcast element, so it is
materialized instead.

A pending ASSIGN(target, value) (Tensor.assign) writes `value` into the target's existing buffer instead of a new
one (EXEC.SCHED.assign). Its kernel reads the target through the output parameter itself, which is safe only where
each thread reads the very element it writes; otherwise the value goes to a temporary buffer first and a second
kernel copies it over (EXEC.SCHED.overlap). Kernels that read a buffer's old content run before the kernel that
overwrites it (EXEC.SCHED.war); where that ordering would be circular, a write goes through a temporary as well
(EXEC.SCHED.cycle).

A COPY (Tensor.to) is a step of its own (EXEC.SCHED.copy): its source is materialized into a buffer on the source
device, and a KERNEL node whose Kernel has a COPY for its ast moves those bytes into a fresh buffer on the destination,
where consumers read it like any kernel's result. It is ordered like a kernel: after the kernel that writes its source,
before the kernels that read its result (EXEC.ORDER.device), and before any assign that overwrites its source.

`kernelize` returns, for each root, ASSIGN(BUFFER, KERNEL) (reshaped to the root's shape): the KERNEL's arg is a
Kernel whose `ast` is SINK(STORE(DEFINE_GLOBAL 0, value)) over DEFINE_GLOBAL inputs (seed 000's `.arg.ast`). A
KERNEL's first source is what it overwrites: a fresh BUFFER, or for an in-place write the buffer's current version
(the BUFFER itself or the kernelized ASSIGN that wrote it last); its other sources are the versions it reads."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from refimpl.dtype import dtypes
from refimpl.engine.pack import pack_operands
from refimpl.engine.split import split_reductions
from refimpl.helpers import SpecError
from refimpl.uop import Ops, GroupOp
from refimpl.uop import capture as viz_capture
from refimpl.uop.ops import UOp

_unique = itertools.count(1)
# ASSIGN is here for a root ASSIGN only (any other pending ASSIGN is materialized): its value fuses like a root's
_FUSE_THROUGH = GroupOp.Elementwise | {Ops.RESHAPE, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.CONTIGUOUS,
                                       Ops.DETACH, Ops.NOOP, Ops.ASSIGN}
# ops that map output element i to input element i (a RESHAPE keeps the row-major position): EXEC.SCHED.overlap
_SAME_ELEMENT = GroupOp.Elementwise | {Ops.RESHAPE, Ops.DETACH, Ops.NOOP}


@dataclass(frozen=True, eq=False)
class Kernel:
  """What a KERNEL node runs: its AST and a name (E_ for elementwise, r_ for kernels with a reduction, copy_ for a
  copy between devices, whose ast is a COPY: EXEC.SCHED.copy). `in_place` marks a kernel that overwrites an existing
  buffer (an assign or its copy) rather than filling a fresh one."""
  ast: UOp
  name: str
  in_place: bool = False
  def __repr__(self) -> str: return f"<Kernel {self.name}>"
  @property
  def is_copy(self) -> bool:
    """Whether this step copies a buffer to another device (EXEC.SCHED.copy) rather than running a program."""
    return self.ast.op is Ops.COPY


def new_buffer(dtype, size: int, device: str) -> UOp:
  """A fresh BUFFER node: UNIQUE keeps two buffers of the same size and device apart (UOP.BUFFER)."""
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, dtypes.void, arg=next(_unique)), UOp(Ops.DEVICE, arg=device)), size)


def is_kernelized(u: UOp) -> bool:
  """ASSIGN(BUFFER, KERNEL): a buffer as some kernel of a schedule leaves it."""
  return u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL


def is_pending_assign(u: UOp) -> bool:
  """ASSIGN(target, value) made by Tensor.assign, not yet scheduled."""
  return u.op is Ops.ASSIGN and u.src[1].op is not Ops.KERNEL


def is_realized(u: UOp) -> bool:
  """A BUFFER or an already kernelized ASSIGN(BUFFER, KERNEL), or a RESHAPE of one: it needs no new kernel."""
  if u.op is Ops.RESHAPE: u = u.src[0]
  return u.op is Ops.BUFFER or is_kernelized(u)


def device_of(u: UOp) -> str:
  """The device `u`'s value lives on: the first DEVICE found below it, where a COPY stands for its destination and
  hides the devices under it (UOP.COPY)."""
  stack, seen = [u], {id(u)}
  while stack:
    n = stack.pop()
    dev = n if n.op is Ops.DEVICE else n.src[1] if n.op is Ops.COPY else None
    if dev is not None: return dev.arg if isinstance(dev.arg, str) else dev.arg[0]
    for s in reversed(n.src):
      if id(s) not in seen: seen.add(id(s)); stack.append(s)
  raise ValueError("graph has no DEVICE")


def assign_target(u: UOp) -> UOp:
  """The version an ASSIGN overwrites: its target without RESHAPEs, a BUFFER or an ASSIGN to one, pending or
  kernelized (EXEC.SCHED.target); anything else (a permuted, shrunk, ... view) is refused."""
  t = u.src[0]
  while t.op is Ops.RESHAPE: t = t.src[0]
  if t.op not in (Ops.BUFFER, Ops.ASSIGN):
    raise SpecError("EXEC.SCHED.target", f"an assign target must be a buffer or a reshape of one, not {t.op.name}")
  return t


def _materialize_set(roots: list[UOp]) -> list[UOp]:
  """The nodes that get their own kernel, sources before users."""
  chosen: set[UOp] = {r for r in roots if not is_realized(r)}
  while True:
    owner: dict[UOp, UOp] = {}     # fusable reduction -> the one root whose kernel may contain it
    extra: set[UOp] = set()
    for root in chosen:
      stack, seen = [(root, True)], set()
      while stack:
        u, ok = stack.pop()
        if (u, ok) in seen: continue
        seen.add((u, ok))
        if u is not root and (u in chosen or u.op is Ops.BUFFER or is_kernelized(u)): continue
        if u.op is Ops.REDUCE_AXIS and u is not root:
          if not ok or owner.setdefault(u, root) is not root: extra.add(u)
          ok = False                # a reduction inside a reduction is never fused
        # EXEC.SCHED.assign: every pending assign is a kernel of its own, whoever reads it
        elif u.op in (Ops.CONTIGUOUS, Ops.ASSIGN) and u is not root: extra.add(u)
        elif u.op is Ops.COPY:
          # EXEC.SCHED.copy: a copy is a step of its own, and what it copies is a buffer on the source device; nothing
          # fuses across it, so the walk stops here
          if u is not root: extra.add(u)
          elif not is_realized(u.src[0]): extra.add(u.src[0])
          continue
        stack.extend((s, ok and u.op in _FUSE_THROUGH) for s in u.src)   # past a reduction, ok is False (above)
    # a reduction reached both on a fusable path and a non-fusable one is in `extra` via the non-fusable visit
    if extra <= chosen: break
    chosen |= extra
  order = [u for r in roots for u in r.toposort()]
  return list(dict.fromkeys(u for u in order if u in chosen))


def _reads_only_own_element(a: UOp, materialized: set[UOp]) -> bool:
  """EXEC.SCHED.overlap: whether the kernel computing assign `a`'s value reads the target's buffer only as the
  target version itself, each element at its own position (through elementwise ops and reshapes), so that writing
  in place never overwrites an element another thread has still to read."""
  target = assign_target(a)
  buf = _buffer_of(target)
  stack, seen = [(a.src[1], True)], set()
  while stack:
    u, same = stack.pop()
    if (u, same) in seen: continue
    seen.add((u, same))
    if u is target:
      if not same: return False
      continue
    if u.op in (Ops.BUFFER, Ops.ASSIGN):   # a buffer as it stands: another version of the target's is a hazard
      if _buffer_of(u) is buf: return False
      continue
    if u in materialized: continue           # computed by a kernel of its own, into a fresh buffer
    stack.extend((s, same and u.op in _SAME_ELEMENT) for s in u.src)
  return True


def _make_kernel(value: UOp, out: UOp, reads: dict[UOp, UOp], overwrite: bool = False,
                 in_place: UOp | None = None) -> UOp:
  """ASSIGN(BUFFER, KERNEL) (reshaped to value's shape) for a kernel that stores `value` into the buffer of `out`
  (a fresh BUFFER, or with `overwrite` the version of an existing buffer that it replaces). `reads` maps
  materialized nodes to the kernelized graphs that hold them; `in_place`, if given, is the node of `value` that
  stands for the output buffer's current content: it is read through the output parameter."""
  buf = _buffer_of(out)
  if math.prod(value.shape) != buf.arg:
    raise SpecError("EXEC.SCHED.assign", f"a value of shape {value.shape} does not fill a buffer of {buf.arg}")
  device = buf.src[1].arg
  glob0 = UOp(Ops.DEFINE_GLOBAL, value.dtype.ptr(buf.arg), arg=0)
  inputs: dict[UOp, UOp] = {}     # input node (BUFFER, or ASSIGN of an earlier kernel) -> its DEFINE_GLOBAL
  memo: dict[UOp, UOp] = {}

  def view(g: UOp, shape) -> UOp: return g if shape == (g.dtype.size,) else UOp(Ops.RESHAPE, g.dtype.base, (g,), shape)

  def leaf(node: UOp, shape) -> UOp:
    if node not in inputs:
      if (where := _buffer_of(node).src[1].arg) != device:
        raise SpecError("EXEC.SCHED.device", f"a kernel on {device} reads a buffer on {where}: every tensor of one "
                        f"computation must be on one device; move one with .to({device!r}) (UOP.COPY.to)")
      inputs[node] = UOp(Ops.DEFINE_GLOBAL, node.dtype.ptr(_buffer_of(node).arg), arg=len(inputs) + 1)
    return view(inputs[node], shape)

  def build(u: UOp) -> UOp:
    if u in memo: return memo[u]
    if u is in_place: v = view(glob0, u.shape)
    elif u in reads: v = leaf(_assign_of(reads[u]), u.shape)
    elif u.op is Ops.BUFFER or is_kernelized(u): v = leaf(u, u.shape)
    elif u.op is Ops.CONST: v = UOp.const(u.dtype, u.arg)
    else: v = u.replace(src=tuple(build(s) for s in u.src))
    memo[u] = v
    return v
  body = build(value)
  ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (glob0, body)),))
  has_reduce = any(u.op is Ops.REDUCE_AXIS for u in body.toposort())
  name = ("r_" if has_reduce else "E_") + "_".join(str(n) for n in (value.shape or (1,)))
  kernel = UOp(Ops.KERNEL, dtypes.void, (out, *inputs), arg=Kernel(ast, name, overwrite))
  result = UOp(Ops.ASSIGN, value.dtype, (buf, kernel))
  return result if value.shape == (buf.arg,) else UOp(Ops.RESHAPE, value.dtype, (result,), value.shape)


def _make_copy(m: UOp, reads: dict[UOp, UOp]) -> UOp:
  """EXEC.SCHED.copy: ASSIGN(BUFFER, KERNEL) (reshaped to m's shape) for the step that moves the bytes of COPY m's
  source, a buffer on the source device (a kernel of this schedule wrote it, or it was there already), into a fresh
  buffer on the destination. The KERNEL's arg is a Kernel whose ast is COPY(DEFINE_GLOBAL 1, DEVICE): no program,
  realize copies out and in (DEV.COPY)."""
  src = m.src[0]
  source = _assign_of(reads[src] if src in reads else src)   # a RESHAPE of a buffer holds the same bytes
  size, dst = math.prod(m.shape), m.src[1]
  out = new_buffer(m.dtype, size, dst.arg)
  ast = UOp(Ops.COPY, m.dtype, (UOp(Ops.DEFINE_GLOBAL, m.dtype.ptr(size), arg=1), dst))
  kernel = UOp(Ops.KERNEL, dtypes.void, (out, source), arg=Kernel(ast, f"copy_{size}_{device_of(src)}_{dst.arg}"))
  result = UOp(Ops.ASSIGN, m.dtype, (out, kernel))
  return result if m.shape == (size,) else UOp(Ops.RESHAPE, m.dtype, (result,), m.shape)


def _build(order: list[UOp], via_temp: set[UOp]) -> tuple[dict[UOp, UOp], dict[UOp, UOp]]:
  """Kernelize the materialized nodes in `order`. Returns `done` (node -> its graph once its kernels have run: for an
  assign, the target's buffer after the write) and `reads` (node -> the graph later kernels of this schedule read:
  the same, except for an assign through a temporary, whose readers read the temporary)."""
  reads: dict[UOp, UOp] = {}
  done: dict[UOp, UOp] = {}
  for m in order:
    if m.op is Ops.COPY:
      reads[m] = done[m] = _make_copy(m, reads)
      continue
    if not is_pending_assign(m):
      out = new_buffer(m.dtype, math.prod(m.shape), device_of(m))
      reads[m] = done[m] = _make_kernel(m, out, reads)
      continue
    target = assign_target(m)
    buf = _buffer_of(target)
    current = _assign_of(done[target]) if is_pending_assign(target) else target   # the version this write replaces
    if m not in via_temp:   # EXEC.SCHED.assign: one kernel, straight into the target's buffer
      reads[m] = done[m] = _make_kernel(m.src[1], current, reads, overwrite=True, in_place=target)
    else:                   # EXEC.SCHED.overlap / EXEC.SCHED.cycle: value into a temporary, then a copy
      temp = _make_kernel(m.src[1], new_buffer(m.dtype, buf.arg, device_of(buf)), reads)
      copied = _make_kernel(_assign_of(temp), current, {}, overwrite=True)
      reads[m] = temp
      done[m] = copied if m.shape == (buf.arg,) else UOp(Ops.RESHAPE, m.dtype, (copied,), m.shape)
  return done, reads


def kernelize(roots: list[UOp]) -> dict[UOp, UOp]:
  """_kernelize, recorded as a schedule group when a VIZ recorder is installed (DEV.VIZ.capture): the tensor graph
  before, the graph of KERNELs after, and the kernels' names."""
  rec = viz_capture.recorder
  if rec is None: return _kernelize(roots)
  with rec.group("schedule", f"schedule {sum(g.kind == 'schedule' for g in rec.groups) + 1}") as g:
    g.snapshot("tensor graph", UOp(Ops.SINK, dtypes.void, tuple(roots)))
    result = _kernelize(roots)
    g.snapshot("kernels", UOp(Ops.SINK, dtypes.void, tuple(result.values())))
    g.info["kernels"] = [k.arg.name for k in schedule(list(result.values()))]
  return result


def _kernelize(roots: list[UOp]) -> dict[UOp, UOp]:
  """For each root, the graph that computes it as ASSIGN(BUFFER, KERNEL), reshaped to the root's shape; and for each
  pending assign the roots depend on, the graph of its target buffer after the write (so that realize can retire
  it: an assign that has run must never run again). Keys are the nodes as given, also where the packing pass
  (EXEC.SCHED.pack, pack.py) has rebuilt them with a panel copy of an operand or the split of long reductions
  (EXEC.REDUCE.blocked, split.py) with their blocked order."""
  packed = pack_operands(roots, device_of)
  roots1 = [packed.get(r, r) for r in roots]
  # EXEC.REDUCE.blocked: long reductions in their blocked order, on every device, before kernels are cut
  split = split_reductions(roots1)
  given, roots = roots, [split.get(r, r) for r in roots1]
  rebuilt = {old: split.get(new, new) for old, new in packed.items()}
  for old, new in split.items(): rebuilt.setdefault(old, new)
  order = _materialize_set(roots)
  assigns = [m for m in order if is_pending_assign(m)]
  writers: dict[UOp, UOp] = {}
  for a in assigns:   # EXEC.SCHED.conflict: each version of a buffer is overwritten by at most one assign
    if writers.setdefault(assign_target(a), a) is not a:
      raise SpecError("EXEC.SCHED.conflict", "two assigns in one schedule overwrite the same buffer and neither "
                      "builds on the other: their order is unknown; realize one before making the other")
  materialized = set(order)
  via_temp = {a for a in assigns if not _reads_only_own_element(a, materialized)}
  while True:
    done, _ = _build(order, via_temp)
    kernels = _kernels_of(list(done.values()))
    _, stuck = _order(kernels)
    if not stuck: break
    # EXEC.SCHED.cycle: send one in-place write of the cycle through a temporary and try again (at worst every
    # assign goes through one, and then no ordering is circular: see the clause)
    blocked = [a for a in assigns if a not in via_temp and _kernel_of(done[a]) in stuck]
    if not blocked: raise SpecError("EXEC.SCHED.cycle", "no order of the kernels honours every read-before-write")
    via_temp.add(blocked[0])
  result = {g: done.get(r, r) for g, r in zip(given, roots)}
  result.update({a: done[a] for a in assigns})
  result.update({old: done[new] for old, new in rebuilt.items() if new in done and is_pending_assign(old)})
  return result


def _assign_of(u: UOp) -> UOp:
  return u.src[0] if u.op is Ops.RESHAPE else u


def _kernel_of(u: UOp) -> UOp:
  return _assign_of(u).src[1]


def _buffer_of(u: UOp) -> UOp:
  """The BUFFER under a buffer-valued node: BUFFER, RESHAPEs of it, ASSIGNs to it (kernelized or pending)."""
  while u.op is not Ops.BUFFER: u = u.src[0]
  return u


def _kernels_of(graph: list[UOp]) -> list[UOp]:
  return list(dict.fromkeys(u for r in graph for u in r.toposort() if u.op is Ops.KERNEL))


def _order(kernels: list[UOp]) -> tuple[list[UOp], list[UOp]]:
  """The kernels in an order that honours every dependency, keeping the given order where free; and those that no
  order can place (they lie on or after a cycle). A kernel runs after the kernels whose results it reads or
  overwrites (EXEC.ORDER.device) and after every kernel that reads the version it overwrites (EXEC.SCHED.war)."""
  index = {k: i for i, k in enumerate(kernels)}
  before: dict[UOp, set[UOp]] = {k: {s.src[1] for s in k.src if is_kernelized(s)} & index.keys() for k in kernels}
  readers: dict[UOp, set[UOp]] = {}
  for k in kernels:
    for s in k.src[1:]: readers.setdefault(s, set()).add(k)
  for k in kernels: before[k] |= readers.get(k.src[0], set()) - {k}
  placed: list[UOp] = []
  left = list(kernels)
  while left:
    ready = next((k for k in left if before[k].issubset(placed)), None)
    if ready is None: break
    placed.append(ready)
    left.remove(ready)
  return placed, left


def schedule(graph: list[UOp]) -> list[UOp]:
  """The KERNEL nodes of kernelized graphs in an order that runs each after the kernels it reads from, and before
  any kernel that overwrites what it reads (EXEC.SCHED.war)."""
  placed, stuck = _order(_kernels_of(graph))
  if stuck: raise SpecError("EXEC.SCHED.cycle", f"kernels {[k.arg.name for k in stuck]} cannot be ordered: each "
                            "overwrites what another still has to read (were they kernelized separately?)")
  return placed


@dataclass(frozen=True)
class ScheduleItem:
  """One kernel of a schedule as `Tensor.schedule()` gives it (tinygrad's name): `ast` is the kernel's
  SINK(STORE(...)) AST (COPY(DEFINE_GLOBAL, DEVICE) for a copy between devices, EXEC.SCHED.copy), `bufs` the BUFFER
  nodes it writes (first) and reads, `kernel` the KERNEL node itself and `arg` its Kernel (name, ast, in_place)."""
  kernel: UOp

  @property
  def ast(self) -> UOp: return self.kernel.arg.ast
  @property
  def arg(self) -> Kernel: return self.kernel.arg
  @property
  def bufs(self) -> tuple[UOp, ...]: return tuple(_buffer_of(s) for s in self.kernel.src)
  def __repr__(self) -> str: return f"<ScheduleItem {self.kernel.arg.name}>"
