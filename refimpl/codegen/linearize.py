"""The linearizer: a kernel-level graph becomes a flat program (EXEC.PROGRAM): every UOp once, after its sources,
with RANGE ... END brackets around exactly the nodes that depend on the range.

First each REDUCE is made explicit as a register accumulator (EXEC.THREAD.reduce): the register is set to the
identity before the loop, updated as acc = acc OP v at the end of each iteration (left to right, so float results
are deterministic), and read after the loop's END."""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite


def identity(op: Ops, dtype) -> UOp:
  """The start value of a reduction (EXEC.THREAD.reduce): +0 for ADD, 1 for MUL, the dtype's minimum for MAX."""
  value = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(dtype)}[op]
  return UOp.const(dtype, value)


def _reduce_to_register(ctx: list, r: UOp) -> UOp:
  v, *rngs = r.src
  acc = UOp(Ops.DEFINE_REG, r.dtype.ptr(1, "reg"), arg=len(ctx))
  ctx.append(acc)
  slot = UOp(Ops.INDEX, acc.dtype, (acc, UOp.const(dtypes.int32, 0)))
  init = UOp(Ops.STORE, dtypes.void, (slot, identity(r.arg, r.dtype)))
  current = UOp(Ops.LOAD, r.dtype, (slot, init, *rngs))   # read inside the loop: after init, in every iteration
  update = UOp(Ops.STORE, dtypes.void, (slot, current.alu(r.arg, v)))
  end = UOp(Ops.END, dtypes.void, (update, *rngs))
  return UOp(Ops.LOAD, r.dtype, (slot, end))


reduce_to_register = PatternMatcher([(UPat(Ops.REDUCE, name="r"), _reduce_to_register, "EXEC.THREAD.reduce")])


def _open_ranges(order: list[UOp]) -> dict[UOp, frozenset]:
  """For each node, the RANGEs it lies inside: those its sources depend on and no END among them closed."""
  inside: dict[UOp, frozenset] = {}
  for u in order:
    rs = frozenset().union(*(inside[s] for s in u.src)) if u.src else frozenset()
    if u.op is Ops.RANGE: rs = rs | {u}
    if u.op is Ops.END: rs = rs - set(u.src[1:])
    inside[u] = rs
  return inside


def linearize(sink: UOp) -> list[UOp]:
  """The flat program for kernel-level `sink` (the SINK itself is not part of it)."""
  sink = graph_rewrite(sink, reduce_to_register, ctx=[], name="reduce_to_register")
  order = [u for u in sink.toposort() if u is not sink]
  inside = _open_ranges(order)
  out: list[UOp] = []
  done: set[UOp] = set()
  open_stack: list[UOp] = []
  pending = list(order)
  while pending:
    ready = [u for u in pending if all(s in done for s in u.src)]
    # prefer a node that needs no range beyond those open; an END only when it closes the innermost ranges
    def fits(u: UOp) -> bool:
      if u.op is Ops.RANGE: return False
      need = inside[u] | (frozenset(u.src[1:]) if u.op is Ops.END else frozenset())
      if not need <= set(open_stack): return False
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
    done.add(pick)
    pending.remove(pick)
  return out
