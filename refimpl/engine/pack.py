"""Operand packing, an optional performance pass of the scheduler (EXEC.SCHED.pack, CPU only).

A matmul-like kernel (a sum over one axis of a product) gives each thread a tile of outputs: 8 lanes along the axis
the right operand `b` varies along, 8 along the axis the left operand `a` varies along (EXEC.OPT.default). For each
step k of the sum the tile reads 8 elements of each operand. Read in place they are 8 elements of one row of `b`, one
row further on per step (rows of 2 KiB or more land in few cache sets and evict each other), and 8 elements of `a`
one row apart each (8 streams). This pass copies such an operand, once, into panels: panel p holds lanes 8p .. 8p+7
for every k, one after another, so each tile streams through one contiguous panel of each operand. The product then
reads the panel buffer through movement ops that give back the operand's elements:

    b (K, N), read as b[k, j]  ->  P = b.reshape(K, N // 8, 8).permute(1, 0, 2).contiguous()
                                   b' = P.permute(1, 0, 2).reshape(K, N)      # b'[k, j] == b[k, j]
    a (M, K), read as a[i, k]  ->  P = a.reshape(M // 8, 8, K).permute(0, 2, 1).contiguous()   # (M/8, K, 8)

A copy is exact and the sum folds the same values in the same order (EXEC.THREAD.reduce), so results are bit for bit
those without the pass; the only difference is one more kernel per packed operand. It runs on the CPU device for an
operand whose sum has at least MIN_REDUCE steps, whose lane axis (the last axis other than the sum's along which it
varies) is a multiple of PANEL, that is read by more than PANEL outputs per element (else a tile reads it once and the
copy costs more than it saves), and that is read in place with its lanes apart (a row of `a` per lane) or with a
stride of at least MIN_STRIDE elements along the sum (a row of `b` per step); not under NOOPT=1 or PACK=0."""
from __future__ import annotations

import math

import numpy as np

from refimpl.helpers import knob
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

__all__ = ["pack_operands", "PANEL", "MIN_STRIDE", "MIN_REDUCE"]

PANEL = 8           # lanes per panel: the tile's lanes along the axis the operand varies along (EXEC.OPT.default)
MIN_STRIDE = 512    # elements (2 KiB of float32) between the rows of a lane-contiguous operand the tile reads: below
                    # this the rows stay cached
MIN_REDUCE = 256    # reduce steps: below this a panel is short and the extra kernel costs more than it saves
_MOVES = (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND)


def enabled() -> bool:
  """Whether the pass runs: not under NOOPT=1 (no optimisation at all) or PACK=0."""
  return not knob("NOOPT") and bool(knob("PACK"))


def _strides(view: UOp, base: UOp) -> tuple[int, ...] | None:
  """The element strides of `view`, a chain of RESHAPE/PERMUTE/EXPAND over `base`, or None where a reshape would
  have to copy. numpy does the bookkeeping on an untouched int8 array of the base's size (its pages are never
  written, so this allocates nothing real)."""
  chain = []
  u = view
  while u is not base:
    chain.append(u)
    u = u.src[0]
  arr = np.empty(int(np.prod(base.shape)), np.int8).reshape(base.shape)
  for m in reversed(chain):
    if m.op is Ops.PERMUTE: arr = arr.transpose(m.arg)
    elif m.op is Ops.EXPAND: arr = np.broadcast_to(arr, m.arg)
    else:
      arr = arr.view()
      try: arr.shape = m.arg   # raises where the reshape is not a view of the same memory
      except AttributeError: return None
  return arr.strides


def _base(u: UOp) -> UOp | None:
  """The realized buffer under a chain of movement ops (a BUFFER, or a buffer a kernel has written), else None."""
  while u.op in _MOVES:
    u = u.src[0]
    if u.op is Ops.BUFFER or (u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL): return u
  return None


def _packed(view: UOp, axis: int) -> UOp | None:
  """`view` (an operand of a product summed over `axis`) read through a panel copy, or None where the pass does not
  apply (see the module's docstring): the operand must be a movement view of a realized buffer, summed over at least
  MIN_REDUCE steps, with a lane axis (the last other axis along which it varies) whose size is a multiple of PANEL,
  broadcast to more than PANEL outputs per element, and read with its lanes apart or a stride of at least MIN_STRIDE
  along `axis`."""
  base = _base(view)
  if base is None: return None
  strides = _strides(view, base)
  shape = view.shape
  if strides is None or shape[axis] < MIN_REDUCE: return None
  lanes = max((a for a in range(len(shape)) if a != axis and shape[a] > 1 and strides[a] != 0), default=None)
  if lanes is None or shape[lanes] % PANEL: return None
  if math.prod(s for a, (s, st) in enumerate(zip(shape, strides)) if st == 0 and a != axis) <= PANEL: return None
  if strides[lanes] == 1 and strides[axis] < MIN_STRIDE: return None
  # the panel copy stores the operand's distinct elements only: broadcast axes (stride 0) are kept at size 1
  core_shape = tuple(1 if st == 0 else s for s, st in zip(shape, strides))
  core = view
  if core_shape != shape:
    core = UOp(Ops.SHRINK, view.dtype, (view,), tuple((0, c) for c in core_shape))
  # split the lane axis into (panels, PANEL), then order the axes: the rest as they were, the reduce axis, the lanes
  split = core_shape[:lanes] + (core_shape[lanes] // PANEL, PANEL) + core_shape[lanes + 1:]
  reduce_ax, lane_ax = axis + (axis > lanes), lanes + 1
  order = tuple(a for a in range(len(split)) if a not in (reduce_ax, lane_ax)) + (reduce_ax, lane_ax)
  panels = UOp(Ops.CONTIGUOUS, view.dtype, (UOp(Ops.PERMUTE, view.dtype, (UOp(Ops.RESHAPE, view.dtype, (core,),
                                                                                        split),), order),))
  back = UOp(Ops.PERMUTE, view.dtype, (panels,), tuple(order.index(a) for a in range(len(split))))
  out = UOp(Ops.RESHAPE, view.dtype, (back,), core_shape)
  return out if core_shape == shape else UOp(Ops.EXPAND, view.dtype, (out,), shape)


def pack_operands(roots: list[UOp], device_of) -> dict[UOp, UOp]:
  """EXEC.SCHED.pack: for every node of the graphs under `roots` that this pass changes, its replacement (the
  products of CPU matmul-like reductions whose operands it packs, and every node above them). Empty when the pass
  is off or nothing applies. `device_of(u)` names the device a node's value lives on."""
  if not enabled(): return {}
  mapping: dict[UOp, UOp] = {}
  for r in dict.fromkeys(u for root in roots for u in root.toposort()):
    if r.op is not Ops.REDUCE_AXIS or r.arg[0] is not Ops.ADD or len(r.arg[1]) != 1: continue
    prod = r.src[0]
    if prod.op is Ops.CAST: prod = prod.src[0]   # a float16 product summed in float32 (DT.SUM)
    if prod.op is not Ops.MUL or prod in mapping or device_of(r).partition(":")[0] != "CPU": continue
    src = tuple(_packed(s, r.arg[1][0]) or s for s in prod.src)
    if any(a is not b for a, b in zip(src, prod.src)): mapping[prod] = prod.replace(src=src)
  if not mapping: return {}
  memo = dict(mapping)
  for u in dict.fromkeys(u for root in roots for u in root.toposort()):
    if u in memo: continue
    new_src = tuple(memo.get(s, s) for s in u.src)
    if any(a is not b for a, b in zip(new_src, u.src)): memo[u] = u.replace(src=new_src)
  return memo
