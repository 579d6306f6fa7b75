"""The scheduler: cuts a tensor-level graph into kernels (DESIGN.md step 3).

A node is *materialized* (gets a buffer, written by one kernel) when it is asked for, when it is CONTIGUOUS, or
when it is a reduction that cannot be fused into its consumer. Everything else is recomputed inside the kernels
that use it: elementwise chains and movement ops fuse into the store or reduction that consumes them, and movement
ops over buffers are index arithmetic, never copies. A reduction fuses into its consumer's kernel when every path
from the kernel's root down to it passes only through elementwise and non-expanding movement ops, and no other
kernel needs it; behind an EXPAND it would be recomputed once per broadcast element, so it is materialized instead.

`kernelize` returns, for each root, ASSIGN(BUFFER, KERNEL) (reshaped to the root's shape): the KERNEL's arg is a
Kernel whose `ast` is SINK(STORE(DEFINE_GLOBAL 0, value)) over DEFINE_GLOBAL inputs (seed 000's `.arg.ast`)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from refimpl.dtype import dtypes
from refimpl.uop import Ops, GroupOp
from refimpl.uop.ops import UOp

_unique = itertools.count(1)
_FUSE_THROUGH = GroupOp.Elementwise | {Ops.RESHAPE, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.CONTIGUOUS,
                                       Ops.DETACH, Ops.NOOP}


@dataclass(frozen=True, eq=False)
class Kernel:
  """What a KERNEL node runs: its AST and a name (E_ for elementwise, r_ for kernels with a reduction)."""
  ast: UOp
  name: str
  def __repr__(self) -> str: return f"<Kernel {self.name}>"


def new_buffer(dtype, size: int, device: str) -> UOp:
  """A fresh BUFFER node: UNIQUE keeps two buffers of the same size and device apart (UOP.BUFFER)."""
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, dtypes.void, arg=next(_unique)), UOp(Ops.DEVICE, arg=device)), size)


def is_realized(u: UOp) -> bool:
  """A BUFFER or an already kernelized ASSIGN(BUFFER, KERNEL), or a RESHAPE of one: it needs no new kernel."""
  if u.op is Ops.RESHAPE: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.ASSIGN)


def device_of(u: UOp) -> str:
  for n in u.toposort():
    if n.op is Ops.DEVICE: return n.arg if isinstance(n.arg, str) else n.arg[0]
  raise ValueError("graph has no DEVICE")


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
        if u is not root and (u in chosen or u.op in (Ops.BUFFER, Ops.ASSIGN)): continue
        if u.op is Ops.REDUCE_AXIS and u is not root:
          if not ok or owner.setdefault(u, root) is not root: extra.add(u)
          ok = False                # a reduction inside a reduction is never fused
        elif u.op is Ops.CONTIGUOUS and u is not root: extra.add(u)
        stack.extend((s, ok and u.op in _FUSE_THROUGH | {Ops.REDUCE_AXIS}) for s in u.src)
    # a reduction reached both on a fusable path and a non-fusable one is in `extra` via the non-fusable visit
    if extra <= chosen: break
    chosen |= extra
  order = [u for r in roots for u in r.toposort()]
  return list(dict.fromkeys(u for u in order if u in chosen))


def kernelize(roots: list[UOp]) -> dict[UOp, UOp]:
  """For each root, the graph that computes it as ASSIGN(BUFFER, KERNEL), reshaped to the root's shape."""
  result: dict[UOp, UOp] = {}
  for m in _materialize_set(roots):
    inputs: dict[UOp, UOp] = {}     # input node (BUFFER, or ASSIGN of an earlier kernel) -> its DEFINE_GLOBAL
    out = new_buffer(m.dtype, math.prod(m.shape), device_of(m))
    glob0 = UOp(Ops.DEFINE_GLOBAL, m.dtype.ptr(out.arg), arg=0)

    def leaf(node: UOp, shape) -> UOp:
      size = _buffer_of(node).arg
      if node not in inputs: inputs[node] = UOp(Ops.DEFINE_GLOBAL, node.dtype.ptr(size), arg=len(inputs) + 1)
      g = inputs[node]
      return g if shape == (size,) else UOp(Ops.RESHAPE, node.dtype, (g,), shape)

    memo: dict[UOp, UOp] = {}

    def build(u: UOp) -> UOp:
      if u in memo: return memo[u]
      if u is not m and u in result: v = leaf(_assign_of(result[u]), u.shape)
      elif u.op in (Ops.BUFFER, Ops.ASSIGN): v = leaf(u, u.shape)
      elif u.op is Ops.CONST: v = UOp.const(u.dtype, u.arg)
      else: v = u.replace(src=tuple(build(s) for s in u.src))
      memo[u] = v
      return v
    value = build(m)
    ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (glob0, value)),))
    has_reduce = any(u.op is Ops.REDUCE_AXIS for u in value.toposort())
    name = ("r_" if has_reduce else "E_") + "_".join(str(n) for n in (m.shape or (1,)))
    kernel = UOp(Ops.KERNEL, dtypes.void, (out, *inputs), arg=Kernel(ast, name))
    assign = UOp(Ops.ASSIGN, m.dtype, (out, kernel))
    result[m] = assign if m.shape == (out.arg,) else UOp(Ops.RESHAPE, m.dtype, (assign,), m.shape)
  return {r: result.get(r, r) for r in roots}


def _assign_of(u: UOp) -> UOp:
  return u.src[0] if u.op is Ops.RESHAPE else u


def _buffer_of(u: UOp) -> UOp:
  """The BUFFER under a kernelized result: RESHAPE(ASSIGN(BUFFER, KERNEL)) or ASSIGN(BUFFER, KERNEL)."""
  while u.op is not Ops.BUFFER: u = u.src[0]
  return u


def schedule(graph: list[UOp]) -> list[UOp]:
  """The KERNEL nodes of kernelized graphs in an order that runs each after the kernels it reads from."""
  return list(dict.fromkeys(u for r in graph for u in r.toposort() if u.op is Ops.KERNEL))
