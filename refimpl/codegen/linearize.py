"""The linearizer: a kernel-level graph becomes a flat program (EXEC.PROGRAM): every UOp once, after its sources,
with RANGE ... END brackets around exactly the nodes that depend on the range.

First each REDUCE is made explicit as a register accumulator (EXEC.THREAD.reduce): the register is set to the
identity before the loop, updated as acc = acc OP v at the end of each iteration (left to right, so float results
are deterministic), and read after the loop's END. REDUCEs over the same RANGEs (the output tile of an upcast kernel,
EXEC.OPT.upcast) accumulate in one loop: each has its own register, and their updates are chained so that the loop's
single END comes after all of them (EXEC.PROGRAM.nest)."""
from __future__ import annotations

import bisect

from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite


def identity(op: Ops, dtype) -> UOp:
  """The start value of a reduction (EXEC.THREAD.reduce): +0 for ADD, 1 for MUL, the dtype's minimum for MAX."""
  value = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(dtype)}[op]
  return UOp.const(dtype, value)


class _Registers:
  """The state of turning REDUCEs into registers: the REDUCEs of the graph grouped by their RANGEs, and for each
  REDUCE already turned, the LOAD of its register after the loop."""
  def __init__(self, sink: UOp):
    self.groups: dict[tuple[UOp, ...], list[UOp]] = {}
    for u in sink.toposort():
      if u.op is Ops.REDUCE: self.groups.setdefault(u.src[1:], []).append(u)
    self.count = 0
    self.result: dict[UOp, UOp] = {}
    # each register's init STORE -> the RANGEs around its REDUCE (EXEC.THREAD.reduce: a reduction nested in another
    # reduction's loop starts again from the identity in every iteration of the outer loop). The init's own sources
    # are constants, so without this it would be placed before every loop, once.
    self.anchors: dict[UOp, frozenset] = {}
    self._free: dict[UOp, frozenset] = {}

  def free_ranges(self, u: UOp) -> frozenset:
    """The RANGEs whose index the value of `u` depends on: a REDUCE's (or END's) own ranges are closed by it."""
    if u not in self._free:
      rs = frozenset().union(*(self.free_ranges(s) for s in u.src)) if u.src else frozenset()
      if u.op is Ops.RANGE: rs = rs | {u}
      if u.op in (Ops.REDUCE, Ops.END): rs = rs - set(u.src[1:])
      self._free[u] = rs
    return self._free[u]


def _reduce_to_register(ctx: _Registers, r: UOp) -> UOp:
  if r not in ctx.result:
    rngs = r.src[1:]
    members = ctx.groups.get(rngs, [])
    if r not in members: members = [r]
    slots, update = [], None
    for m in members:
      acc = UOp(Ops.DEFINE_REG, m.dtype.ptr(1, "reg"), arg=ctx.count)
      ctx.count += 1
      slot = UOp(Ops.INDEX, acc.dtype, (acc, UOp.const(dtypes.int32, 0)))
      init = UOp(Ops.STORE, dtypes.void, (slot, identity(m.arg, m.dtype)))
      if (outer := ctx.free_ranges(m.src[0]) - set(rngs)): ctx.anchors[init] = outer
      # read inside the loop: after init, in every iteration, and after the previous member's update (one END). It
      # lists the ranges in the REDUCE's order and comes before the value in graph order, so linearize() opens them
      # outermost first whatever order the value's index mentions them in (EXEC.THREAD.reduce.order)
      current = UOp(Ops.LOAD, m.dtype, (slot, init, *((update,) if update is not None else ()), *rngs))
      update = UOp(Ops.STORE, dtypes.void, (slot, current.alu(m.arg, m.src[0])))
      slots.append(slot)
    end = UOp(Ops.END, dtypes.void, (update, *rngs))
    for m, slot in zip(members, slots): ctx.result[m] = UOp(Ops.LOAD, m.dtype, (slot, end))
  return ctx.result[r]


# top down, so that the rule sees each REDUCE as it is in the graph (its group is known before its sources change)
reduce_to_register = PatternMatcher([(UPat(Ops.REDUCE, name="r"), _reduce_to_register, "EXEC.THREAD.reduce")])


def _open_ranges(order: list[UOp], anchors: dict[UOp, frozenset]) -> dict[UOp, frozenset]:
  """For each node, the RANGEs it lies inside: those its sources depend on (and, for a register's init, those around
  its REDUCE) and no END among them closed."""
  inside: dict[UOp, frozenset] = {}
  for u in order:
    rs = frozenset().union(*(inside[s] for s in u.src)) if u.src else frozenset()
    rs = rs | anchors.get(u, frozenset())
    if u.op is Ops.RANGE: rs = rs | {u}
    if u.op is Ops.END: rs = rs - set(u.src[1:])
    inside[u] = rs
  return inside


def linearize(sink: UOp) -> list[UOp]:
  """The flat program for kernel-level `sink` (the SINK itself is not part of it)."""
  regs = _Registers(sink)
  sink = graph_rewrite(sink, reduce_to_register, ctx=regs, top_down=True, name="reduce_to_register")
  order = [u for u in sink.toposort() if u is not sink]
  inside = _open_ranges(order, regs.anchors)
  pos = {u: i for i, u in enumerate(order)}
  users: dict[UOp, list[UOp]] = {u: [] for u in order}
  waiting: dict[UOp, int] = {}   # sources not yet placed
  for u in order:
    waiting[u] = len(set(u.src))
    for s in set(u.src): users[s].append(u)
  ready = [u for u in order if waiting[u] == 0]   # every source placed, in graph order
  pending = set(order)
  out: list[UOp] = []
  open_stack: list[UOp] = []
  while pending:
    opened = set(open_stack)
    # prefer a node that needs no range beyond those open; an END only when it closes the innermost ranges
    def fits(u: UOp) -> bool:
      if u.op is Ops.RANGE: return False
      need = inside[u] | (frozenset(u.src[1:]) if u.op is Ops.END else frozenset())
      if not need <= opened: return False
      if u.op is Ops.END: return set(open_stack[len(open_stack) - len(u.src) + 1:]) == set(u.src[1:])
      return True
    pick = next((u for u in ready if fits(u)), None)
    if pick is None:   # open the range that the first waiting node needs
      want = next(u for u in ready if u.op is Ops.RANGE and any(u in inside[p] for p in pending if p is not u))
      pick = want
      open_stack.append(want)
    elif pick.op is Ops.END:
      del open_stack[len(open_stack) - (len(pick.src) - 1):]
    out.append(pick)
    pending.remove(pick)
    ready.remove(pick)
    for user in users[pick]:
      waiting[user] -= 1
      if waiting[user] == 0: bisect.insort(ready, user, key=pos.__getitem__)
  return out
