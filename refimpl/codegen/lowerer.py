"""Lowering: a kernel AST (tensor-level ops over DEFINE_GLOBAL buffers) becomes a kernel-level graph in which
movement ops are index arithmetic, loads and stores go through INDEX, and reductions are REDUCE over RANGEs.

The kernel AST is `SINK(STORE(DEFINE_GLOBAL out, value))`: `value` is a tensor-level expression whose leaves are
DEFINE_GLOBALs (flat buffers, shape (size,)) and CONSTs. Each output element is computed by one thread: thread
`gidx0` computes element `gidx0` of the flat output. The value at an index is built by walking `value` with the
index expressions of each axis; a movement op only rewrites the index expressions (no data moves):
RESHAPE re-splits the flat position, EXPAND reads index 0 on broadcast axes, PERMUTE reorders, SHRINK offsets,
FLIP mirrors, PAD offsets and gates (outside the source, the value is 0 and no memory is read: EXEC.MEMORY.gate)."""
from __future__ import annotations

import math

from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops, GroupOp
from refimpl.uop.ops import UOp, graph_rewrite
from refimpl.uop.symbolic import symbolic

INDEX_DTYPE = dtypes.int32


def _strides(shape: tuple[int, ...]) -> list[int]:
  out, acc = [], 1
  for n in reversed(shape):
    out.append(acc)
    acc *= n
  return out[::-1]


def unflatten(flat: UOp, shape: tuple[int, ...], wrap: bool = True) -> tuple[UOp, ...]:
  """Per-axis indices of flat position `flat` in a row-major array of `shape`. With `wrap=False` the first axis is
  `flat // stride` without `% size`: the same for every `flat` inside the array (the caller's guarantee)."""
  out = [(flat // st) % n if n != 1 else flat.const_like(0) for st, n in zip(_strides(shape), shape)]
  if not wrap and shape and shape[0] != 1: out[0] = flat // _strides(shape)[0]
  return tuple(out)


def reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[range, range]] | None:
  """The shortest runs of axes, (src axes, dst axes), whose sizes multiply to the same number, in order: a reshape
  re-splits each run on its own, so (N, k, n) -> (N, k*n) is the runs (N -> N) and (k, n -> k*n). None when a size
  is 0 (nothing to index). Size-1 axes join the run before them (the first run when they lead)."""
  if 0 in src or 0 in dst: return None
  groups, i, j = [], 0, 0
  while i < len(src) or j < len(dst):
    i0, j0, a, b = i, j, 1, 1
    while True:
      if a <= b and i < len(src): a, i = a * src[i], i + 1
      elif j < len(dst): b, j = b * dst[j], j + 1
      else: a, i = a * src[i], i + 1
      if a == b and not (i < len(src) and src[i] == 1) and not (j < len(dst) and dst[j] == 1): break
    groups.append((range(i0, i), range(j0, j)))
  return groups


def flatten(idx: tuple[UOp, ...], shape: tuple[int, ...]) -> UOp:
  """The flat row-major position of per-axis indices `idx` in `shape`."""
  flat = UOp.const(INDEX_DTYPE, 0)
  for i, st, n in zip(idx, _strides(shape), shape):
    if n != 1: flat = flat + i * st
  return flat


class Lowerer:
  """Builds the kernel-level value of tensor-level nodes at given per-axis index expressions (memoised), making a
  RANGE loop for every reduced axis. The optimisation pass (opt.py) subclasses it to split reduce loops."""
  def __init__(self):
    self.cache: dict[tuple, UOp] = {}
    self.ranges = 0

  def reduce_loop(self, size: int) -> tuple[UOp, list[UOp]]:
    """The index of a reduced axis of `size` and the RANGEs that run it, outermost first: one loop here."""
    r = UOp(Ops.RANGE, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, size),), arg=(self.ranges, "reduce"))
    self.ranges += 1
    return r, [r]

  def value(self, node: UOp, idx: tuple[UOp, ...], gate: UOp | None) -> UOp:
    key = (node, idx, gate)
    if key not in self.cache: self.cache[key] = self._value(node, idx, gate)
    return self.cache[key]

  def _value(self, node: UOp, idx: tuple[UOp, ...], gate: UOp | None) -> UOp:
    op, src, arg = node.op, node.src, node.arg
    if op is Ops.DEFINE_GLOBAL:
      return UOp(Ops.LOAD, node.dtype.base, (UOp(Ops.INDEX, node.dtype, (node, idx[0]) + ((gate,) if gate else ())),))
    if op is Ops.CONST: return UOp.const(node.dtype, arg)
    if op in GroupOp.Elementwise: return UOp(op, node.dtype, tuple(self.value(s, idx, gate) for s in src), arg)
    if op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.NOOP): return self.value(src[0], idx, gate)
    s = src[0].shape
    if op is Ops.RESHAPE:
      if tuple(n for n in s if n != 1) == tuple(n for n in node.shape if n != 1):   # only size-1 axes differ:
        kept = iter(i for i, n in zip(idx, node.shape) if n != 1)                   # index the same axes directly
        return self.value(src[0], tuple(next(kept) if n != 1 else UOp.const(INDEX_DTYPE, 0) for n in s), gate)
      groups = reshape_groups(s, node.shape)
      if groups is None: return self.value(src[0], unflatten(flatten(idx, node.shape), s), gate)
      # EXEC.LOWER.reshape: each run of axes is re-split on its own; the flat position is the same, and no division
      # mixes axes that the reshape leaves apart
      new_idx: list[UOp] = []
      for sa, da in groups:
        shp = tuple(node.shape[d] for d in da)
        # EXEC.LOWER.reshape: an index is inside its axis wherever an access is not gated off (a pad's outside is),
        # so the run's first axis needs no `% size`
        new_idx += unflatten(flatten(tuple(idx[d] for d in da), shp), tuple(s[a] for a in sa), wrap=False)
      return self.value(src[0], tuple(new_idx), gate)
    if op is Ops.EXPAND:
      return self.value(src[0], tuple(i.const_like(0) if a == 1 else i for i, a in zip(idx, s)), gate)
    if op is Ops.PERMUTE:
      inv = [0] * len(arg)
      for out_axis, in_axis in enumerate(arg): inv[in_axis] = out_axis
      return self.value(src[0], tuple(idx[inv[k]] for k in range(len(s))), gate)
    if op is Ops.FLIP:
      return self.value(src[0], tuple((n - 1) - i if f else i for i, n, f in zip(idx, s, arg)), gate)
    if op is Ops.SHRINK: return self.value(src[0], tuple(i + b if b else i for i, (b, _) in zip(idx, arg)), gate)
    if op is Ops.PAD:
      valid = None
      for i, n, (b, _) in zip(idx, s, arg):
        if (b, _) == (0, 0): continue
        inside = (i < b + n) if b == 0 else ((i < b).logical_not() & (i < b + n))
        valid = inside if valid is None else valid & inside
      inner_idx = tuple(i - b if b else i for i, (b, _) in zip(idx, arg))
      if valid is None: return self.value(src[0], inner_idx, gate)
      inner = self.value(src[0], inner_idx, valid if gate is None else gate & valid)
      # EXEC.MEMORY.gate: a load gated by this pad's mask already gives 0 outside, so one mask does for both
      if inner.op is Ops.LOAD: return inner
      return valid.where(inner, inner.const_like(0))
    if op is Ops.REDUCE_AXIS:
      rop, axes = arg
      if any(s[a] == 0 for a in axes):   # an empty reduction is its identity: no loop, no loads
        from refimpl.codegen.linearize import identity
        return identity(rop, node.dtype)
      new_idx = list(idx)
      rngs = []
      for a in axes:
        new_idx[a], loops = self.reduce_loop(s[a])
        rngs += loops
      inner = self.value(src[0], tuple(new_idx), gate)
      return UOp(Ops.REDUCE, node.dtype, (inner, *rngs), arg=rop)
    raise SpecError(f"UOP.{op.name}", f"{op.name} cannot appear in a kernel AST")


def lower(ast: UOp) -> tuple[UOp, int, tuple[int, ...]]:
  """The kernel-level SINK for kernel AST `ast`, simplified by the symbolic rules; the number of threads (the
  launch's global size: one work-group of one thread per output element); and for each buffer slot of the result,
  the AST slot it came from. Simplification can drop an input (an empty reduction reads nothing), and slots must
  stay numbered 0..n-1 (EXEC.PROGRAM.params), so the remaining ones are renumbered."""
  n = check_ast(ast)
  gidx = UOp(Ops.SPECIAL, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, n),), arg="gidx0")
  lw = Lowerer()
  stores = []
  for st in ast.src:
    out, value = st.src
    v = lw.value(value, unflatten(gidx, value.shape), None)
    stores.append(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out.dtype, (out, gidx)), v)))
  sink, slots = finish(stores)
  return sink, n, slots


def check_ast(ast: UOp) -> int:
  """The number of elements every store of kernel AST `ast` writes; a SpecError if it is not a kernel AST."""
  if ast.op is not Ops.SINK or any(s.op is not Ops.STORE for s in ast.src):
    raise SpecError("UOP.SINK", "a kernel AST is SINK(STORE(DEFINE_GLOBAL, value), ...)")
  numel = {math.prod(st.src[1].shape) for st in ast.src}
  if len(numel) != 1: raise SpecError("UOP.STORE", f"stores of one kernel write different sizes {sorted(numel)}")
  return numel.pop()


def finish(stores: list[UOp]) -> tuple[UOp, tuple[int, ...]]:
  """The SINK of kernel-level `stores` simplified by the symbolic rules, with its buffer slots renumbered 0..n-1, and
  for each slot the AST slot it came from."""
  sink = graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(stores)), symbolic, name="lower")
  for _ in range(4):   # a loop divided by 6 and by 2 splits twice
    split = split_divided_loops(sink)
    if split is sink: break
    sink = graph_rewrite(split, symbolic, name="lower: split loops")
  used = sorted((u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
  # one pass: a rewrite to a fixed point would map slot 3 to 2, then that 2 (the same hash-consed node as the old
  # slot 2) to 1, merging slots
  renumber = {g: g.replace(arg=i) for i, g in enumerate(used) if g.arg != i}
  if renumber: sink = sink.substitute(renumber)
  return sink, tuple(g.arg for g in used)


def split_divided_loops(sink: UOp) -> UOp:
  """EXEC.LOWER.split: a reduce loop `r` of `n` iterations whose index is divided by a constant `c` (`r // c` or
  `r % c`, `1 < c < n`, `c` dividing `n`) becomes two nested loops, `ro` of `n // c` outside `ri` of `c`, with
  `r = ro * c + ri`: the same iterations in the same order (a REDUCE lists `ro` before `ri`, and the linearizer opens
  its loops in that order, EXEC.THREAD.reduce), and RW.IDX.div-add-mul / mod-add-mul turn `r // c`, `r % c` into `ro`,
  `ri`. A pooling window flattened to one axis (max_pool2d's `k * k`) reads `r // k` and `r % k` in its loop.
  `sink` itself when no loop qualifies."""
  split: dict[UOp, int] = {}
  for u in sink.toposort():
    if u.op in (Ops.CDIV, Ops.CMOD) and u.src[0].op is Ops.RANGE and u.src[1].op is Ops.CONST and \
       u.src[0].src[0].op is Ops.CONST and u.src[0] not in split:
      n, c = u.src[0].src[0].arg, u.src[1].arg
      if 1 < c < n and n % c == 0: split[u.src[0]] = c
  if not split: return sink
  loops: dict[UOp, tuple[UOp, UOp]] = {}
  memo: dict[UOp, UOp] = {}
  for r, c in split.items():
    n = r.src[0].arg
    outer = r.replace(src=(r.src[0].const_like(n // c),))
    # a new, distinct loop: its arg names the size split, since a second round splits the outer loop again (8 -> 4 x 2
    # -> 2 x 2 x 2) and an inner loop of the same size and arg would be the same hash-consed RANGE twice in the REDUCE
    inner = UOp(Ops.RANGE, r.dtype, (r.src[0].const_like(c),), arg=(*r.arg, "split", n))
    loops[r], memo[r] = (outer, inner), outer * c + inner
  for u in sink.toposort():
    if u in memo: continue
    if u.op is Ops.REDUCE:   # its loops, outer before inner
      src = (memo[u.src[0]], *(x for rng in u.src[1:] for x in loops.get(rng, (memo[rng],))))
    else: src = tuple(memo[s] for s in u.src)
    memo[u] = u if all(a is b for a, b in zip(src, u.src)) and len(src) == len(u.src) else u.replace(src=src)
  return memo[sink]
