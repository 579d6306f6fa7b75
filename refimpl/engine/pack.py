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
stride of at least MIN_STRIDE elements along the sum (a row of `b` per step); not under NOOPT=1 or PACK=0.

A sum over several axes (a convolution's weight gradient sums over batch and image) is first rebuilt as such a
matmul (_pack_reduction): each operand's own kept axes merged into one, the summed axes flattened in their fold order,
both operands packed; see EXEC.SCHED.pack in spec/kernels.md for when it applies."""
from __future__ import annotations

import math

import numpy as np

from refimpl.helpers import knob
from refimpl.codegen.lowerer import INDEX_DTYPE, Lowerer
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp, graph_rewrite
from refimpl.uop.symbolic import symbolic

__all__ = ["pack_operands", "PANEL", "MIN_STRIDE", "MIN_REDUCE"]

PANEL = 8           # lanes per panel: the tile's lanes along the axis the operand varies along (EXEC.OPT.default)
MIN_STRIDE = 512    # elements (2 KiB of float32) between the rows of a lane-contiguous operand the tile reads: below
                    # this the rows stay cached
MIN_REDUCE = 256    # reduce steps: below this a panel is short and the extra kernel costs more than it saves
MIN_REDUCE_MULTI = 2048   # the same for a sum over several axes, whose panel copy of a sliding window is k*k times
                          # the input: a convolution's forward (288 steps) runs faster on its window tile
_MOVES = (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND)
_VIEWS = _MOVES + (Ops.PAD, Ops.SHRINK, Ops.FLIP)


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


def _realized(u: UOp) -> bool:
  """Whether `u` is a realized buffer: a BUFFER, or a buffer a kernel has written."""
  return u.op is Ops.BUFFER or (u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL)


def _mv(op: Ops, u: UOp, arg) -> UOp: return UOp(op, u.dtype, (u,), arg)


def _base(u: UOp) -> UOp | None:
  """The realized buffer under a chain of movement ops, else None."""
  while u.op in _MOVES:
    u = u.src[0]
    if _realized(u): return u
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


def _leaves(u: UOp) -> list[UOp] | None:
  """The realized buffers (BUFFERs, or buffers kernels have written) that `u` is computed from when it is made of
  movement ops, elementwise ops and constants only (a panel copy computes it in one elementwise kernel); else None."""
  leaves: dict[UOp, None] = {}
  seen: set[UOp] = set()
  stack = [u]
  while stack:
    v = stack.pop()
    if v in seen: continue
    seen.add(v)
    if _realized(v): leaves[v] = None
    elif v.op in _VIEWS or v.op in GroupOp.Elementwise: stack.extend(v.src)
    elif v.op is not Ops.CONST: return None
  return list(leaves) or None


def _depends(view: UOp, leaves: list[UOp]) -> tuple[bool, ...]:
  """For each axis of `view` (movement and elementwise ops over the realized `leaves`), whether its elements can
  differ along it: whether the axis's index variable is left in the simplified value a kernel would compute (in an
  index or a gate of a load). A view may keep a variable it does not really depend on (the answer is then True, and
  the panel copies a few duplicates); it never drops one it does."""
  subst = {}
  for i, leaf in enumerate(leaves):
    size = math.prod(leaf.shape)
    glob = UOp(Ops.DEFINE_GLOBAL, leaf.dtype.ptr(size), arg=i + 1)
    subst[leaf] = glob if leaf.shape == (size,) else UOp(Ops.RESHAPE, leaf.dtype, (glob,), leaf.shape)
  idx = tuple(UOp.variable(f"pack.axis{a}", 0, max(n - 1, 0), INDEX_DTYPE) for a, n in enumerate(view.shape))
  value = graph_rewrite(Lowerer().value(view.substitute(subst), idx, None), symbolic, name="pack: depends")
  names = {u.arg[0] for u in value.toposort() if u.op is Ops.DEFINE_VAR}
  return tuple(f"pack.axis{a}" in names for a in range(len(view.shape)))


def _panel(v: UOp, along: int) -> UOp:
  """`v` (*batch, M1, M2, N), one operand of a product that is constant along the other operand's axis, through a
  panel copy: for each batch position and each block of PANEL lanes of its own axis `along` (-3 for M1, -2 for M2), N
  rows of PANEL lanes one after another, read back as (*batch, M1, M2, N) by movement ops alone."""
  *batch, m1, m2, n = v.shape
  m = m1 if along == -3 else m2
  b = len(batch)
  core = _mv(Ops.SHRINK, v, tuple((0, s) for s in batch) + (((0, m1), (0, 1)) if along == -3 else ((0, 1), (0, m2))) +
            ((0, n),))
  rows = _mv(Ops.RESHAPE, core, tuple(batch) + (m // PANEL, PANEL, n))
  panels = UOp(Ops.CONTIGUOUS, v.dtype, (_mv(Ops.PERMUTE, rows, tuple(range(b)) + (b, b + 2, b + 1)),))
  back = _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, panels, tuple(range(b)) + (b, b + 2, b + 1)),
            tuple(batch) + ((m, 1) if along == -3 else (1, m)) + (n,))
  return _mv(Ops.EXPAND, back, v.shape)


def _pack_reduction(r: UOp) -> UOp | None:
  """A sum of products over several axes (a convolution's weight gradient: over batch and image) rebuilt as a
  (batched) matmul over panel copies of both operands, or None where it does not apply. The kept axes are grouped:
  those both operands vary along (batch), those only one of them varies along (M1 and M2, each merged into one axis
  with its lanes, the last of its axes whose size is a multiple of PANEL, moved last in it; the smaller group first,
  so that the strips of EXEC.OPT.strip walk the larger one's panels once). The reduced axes become one axis of N
  positions in row-major order of the reduced axes, the order in which the original sum folds them (EXEC.THREAD.reduce,
  EXEC.REDUCE.blocked), so the bits are the same. The operands must be movement and elementwise views of realized
  buffers (a convolution's sliding windows are pads, reshapes and shrinks), each broadcast to more than PANEL outputs
  per element, and the sum at least MIN_REDUCE_MULTI long. Where the groups are not in the kept axes' order the
  matmul's result is its own buffer (CONTIGUOUS) and read back through a permute."""
  axes, prod = tuple(sorted(r.arg[1])), r.src[0]
  shape = prod.shape
  n = math.prod(shape[a] for a in axes)
  mul = prod.src[0] if prod.op is Ops.CAST else prod
  if n < MIN_REDUCE_MULTI or len(mul.src) != 2: return None
  leaves = [_leaves(s) for s in mul.src]
  if any(lv is None for lv in leaves): return None
  deps = [_depends(s, lv) for s, lv in zip(mul.src, leaves)]
  kept = [a for a in range(len(shape)) if a not in axes and shape[a] > 1]
  if any(not (deps[0][a] or deps[1][a]) for a in kept): return None
  batch = [a for a in kept if deps[0][a] and deps[1][a]]
  groups = []
  for i in (0, 1):
    own = [a for a in kept if deps[i][a] and not deps[1 - i][a]]
    lanes = next((a for a in reversed(own) if shape[a] % PANEL == 0), None)
    if lanes is None: return None
    groups.append([a for a in own if a != lanes] + [lanes])
  sizes = [math.prod(shape[a] for a in g) for g in groups]
  if min(sizes) <= PANEL: return None   # each operand is read by more than PANEL outputs per element
  first = 0 if sizes[0] <= sizes[1] else 1
  g1, g2 = groups[first], groups[1 - first]
  order = batch + g1 + g2
  ones = [a for a in range(len(shape)) if a not in axes and a not in order]
  gemm = tuple(shape[a] for a in batch) + (math.prod(shape[a] for a in g1), math.prod(shape[a] for a in g2), n)
  src = []
  for i, s in enumerate(mul.src):
    v = _mv(Ops.RESHAPE, _mv(Ops.PERMUTE, s, tuple(ones + order + list(axes))), gemm)
    src.append(_panel(v, -3 if i == first else -2))
  new = mul.replace(src=tuple(src))
  if prod.op is Ops.CAST: new = prod.replace(src=(new,))
  red = UOp(Ops.REDUCE_AXIS, r.dtype, (new,), (Ops.ADD, (len(gemm) - 1,)))
  if order != sorted(order): red = UOp(Ops.CONTIGUOUS, r.dtype, (red,))
  out = _mv(Ops.RESHAPE, red, tuple(shape[a] for a in order))
  out = _mv(Ops.PERMUTE, out, tuple(order.index(a) for a in sorted(order)))
  return _mv(Ops.RESHAPE, out, r.shape)


def pack_operands(roots: list[UOp], device_of) -> dict[UOp, UOp]:
  """EXEC.SCHED.pack: for every node of the graphs under `roots` that this pass changes, its replacement (the
  products of CPU matmul-like reductions whose operands it packs, and every node above them). Empty when the pass
  is off or nothing applies. `device_of(u)` names the device a node's value lives on."""
  if not enabled(): return {}
  mapping: dict[UOp, UOp] = {}
  for r in dict.fromkeys(u for root in roots for u in root.toposort()):
    if r.op is not Ops.REDUCE_AXIS or r.arg[0] is not Ops.ADD or not r.arg[1]: continue
    prod = r.src[0]
    if prod.op is Ops.CAST: prod = prod.src[0]   # a float16 product summed in float32 (DT.SUM)
    if prod.op is not Ops.MUL or prod in mapping or device_of(r).partition(":")[0] != "CPU": continue
    if len(r.arg[1]) > 1:
      if (packed := _pack_reduction(r)) is not None: mapping[r] = packed
      continue
    src = tuple(_packed(s, r.arg[1][0]) or s for s in prod.src)
    if any(a is not b for a, b in zip(src, prod.src)): mapping[prod] = prod.replace(src=src)
  if not mapping: return {}
  memo = dict(mapping)
  for u in dict.fromkeys(u for root in roots for u in root.toposort()):
    if u in memo: continue
    new_src = tuple(memo.get(s, s) for s in u.src)
    if any(a is not b for a, b in zip(new_src, u.src)): memo[u] = u.replace(src=new_src)
  return memo
