"""The optimisation pass (spec/kernels.md, EXEC.OPT.*): which thread computes which outputs, and how loops are shaped.

Plain lowering (NOOPT=1) makes one thread per output element and one loop per reduced axis. This pass lowers the same
kernel AST with a list of options (`Opt`) instead:

- `UPCAST(axis, k)` (EXEC.OPT.upcast): each thread computes k consecutive outputs along `axis` of the kernel's layout
  shape; UPCASTs of two axes make a tile (4x4 for a matmul). The thread's values are built once with a placeholder
  per upcast axis and copied per lane, so a load that does not depend on a lane (a row of A in a matmul) is one load
  for the whole tile, and the lanes' reductions share one loop (register tiling, EXEC.OPT.share).
- `UNROLL(axis, k)` (EXEC.OPT.unroll): reduce loop number `axis` becomes an outer loop and an inner loop of k
  iterations that the compiler is asked to unroll; the index is outer*k + inner, so values are folded in the same
  order.
- `LOCAL(0, k)` (EXEC.OPT.local): work-groups of k threads, thread id gidx0*k + lidx0 (GPUs).
- `STRIP(axis, w)` (EXEC.OPT.strip): threads walk the output in strips of w thread positions along `axis`, every
  other axis inside a strip before the next strip starts (a matmul's B panels of a strip are read again while cached).

Lanes and threads past the end of the output are clamped onto its last element and their stores gated off
(EXEC.OPT.tail). No option changes the order in which any output's reduction folds its values (EXEC.THREAD.reduce), so
results are bit for bit those of the unoptimised kernel (EXEC.OPT.exact). `heuristic` picks options per kernel;
search.py times candidates (BEAM)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import Enum

from refimpl.codegen.lowerer import INDEX_DTYPE, Lowerer, check_ast, finish, flatten, unflatten
from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import PatternMatcher, UOp, UPat, graph_rewrite
from refimpl.uop.symbolic import symbolic

__all__ = ["OptOps", "Opt", "Layout", "lower_opt", "layout", "check_opts", "heuristic", "actions", "GPU_DEVICES",
           "runs_on_cpu"]

GPU_DEVICES = ("CL", "CUDA")
MAX_LANES = 64         # EXEC.OPT.valid: at most this many outputs per thread (registers, source size)
MAX_UNROLL = 16
ACC_LANES = 8          # EXEC.OPT.default: accumulators per thread of a reduction whose loads no output axis shares,
ACC_LANES_MIN = 1024   # when the output has at least this many elements (else 4)
LONG_SUM = 256        # EXEC.OPT.default: a single reduce loop this long gets the 8 x 8 tile (the panels' length,
                      # refimpl/engine/pack.py MIN_REDUCE)
STRIP_BYTES = 1 << 20   # EXEC.OPT.strip: the bytes of shared loads (B's panels) a strip walks: the 1 MiB L2 of
                        # this machine's Zen 4 core. Narrower strips keep B in L2 but re-read all of A once per strip (A
                        # does not stay in L3 beside B and the other jobs); measured, matmul 2048 on one thread:
                        # strips of 4, 8, 16, 32 panels (256 KiB .. 2 MiB) ran 63, 71, 77, 78 GFLOPS (docs/cpu-speed.md)
SMALL_WORK = 2 ** 14   # EXEC.OPT.default: below this many loop iterations in all, a kernel runs as lowered (a bigger
                       # source would cost more to compile than the launch could gain)


class OptOps(Enum):
  """The kinds of option: UPCAST an output axis, UNROLL a reduce loop, LOCAL work-group size, STRIP the thread
  order."""
  UPCAST = "UPCAST"
  UNROLL = "UNROLL"
  LOCAL = "LOCAL"
  STRIP = "STRIP"


@dataclass(frozen=True)
class Opt:
  """One option: `op` on `axis` (an axis of the layout shape for UPCAST and STRIP, a reduce loop number for UNROLL, 0
  for LOCAL) with `amount`."""
  op: OptOps
  axis: int
  amount: int

  def __repr__(self) -> str: return f"Opt({self.op.name}, {self.axis}, {self.amount})"

  def key(self) -> tuple[str, int, int]:
    """A sortable key (canonical option order) that is also the JSON form of the BEAM cache."""
    return (self.op.value, self.axis, self.amount)

  def to_json(self) -> list:
    """`[op, axis, amount]`, as the BEAM cache stores it."""
    return list(self.key())

  @staticmethod
  def from_json(x: list) -> Opt:
    """The option of `to_json`'s list."""
    return Opt(OptOps(x[0]), int(x[1]), int(x[2]))


@dataclass(frozen=True)
class Layout:
  """What the options apply to: the layout shape (the output shape for kernels with a reduction, the flat size
  otherwise), the number of elements, and the sizes of the reduce loops in the order lowering makes them."""
  shape: tuple[int, ...]
  numel: int
  reduce_sizes: tuple[int, ...]


class _Lowerer(Lowerer):
  """Lowering that splits the reduce loops named in `unroll` (loop number -> k) into outer and unrolled inner."""
  def __init__(self, unroll: dict[int, int]):
    super().__init__()
    self.unroll = unroll
    self.sizes: list[int] = []

  def reduce_loop(self, size: int) -> tuple[UOp, list[UOp]]:
    number, k = self.ranges, self.unroll.get(self.ranges, 1)
    self.sizes.append(size)
    if k == 1: return super().reduce_loop(size)
    self.ranges += 1
    # EXEC.OPT.unroll: outer slowest, inner fastest, so outer*k + inner runs 0 .. size-1 in increasing order
    outer = UOp(Ops.RANGE, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, size // k),), arg=(number, "reduce"))
    inner = UOp(Ops.RANGE, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, k),), arg=(number, "unroll"))
    return outer * k + inner, [outer, inner]


def layout(ast: UOp) -> Layout:
  """The layout of kernel AST `ast` (see Layout). Elementwise kernels are laid out flat: consecutive threads and lanes
  take consecutive elements, the order in which contiguous buffers are stored."""
  n = check_ast(ast)
  shapes = {st.src[1].shape for st in ast.src}
  has_reduce = any(u.op is Ops.REDUCE_AXIS for u in ast.toposort())
  shape = shapes.pop() if has_reduce and len(shapes) == 1 else (n,)
  lw = _Lowerer({})
  for st in ast.src: lw.value(st.src[1], unflatten(UOp.variable("opt.pos", 0, max(n - 1, 0)), st.src[1].shape), None)
  return Layout(tuple(shape), n, tuple(lw.sizes))


def check_opts(lay: Layout, opts: tuple[Opt, ...]) -> None:
  """EXEC.OPT.valid: a SpecError unless every option applies to this layout: UPCAST of an axis of size > 1, at most
  once per axis, at most MAX_LANES lanes in all; UNROLL of an existing reduce loop by a k > 1 that divides its size,
  at most once per loop; at most one LOCAL, of 1 .. 1024 threads; at most one STRIP, of an axis with more than w
  thread positions (after UPCAST) that w >= 1 divides, in a layout with some other axis of size > 1."""
  seen: set[tuple[OptOps, int]] = set()
  for o in opts:
    if not isinstance(o, Opt) or o.amount < 1: raise SpecError("EXEC.OPT.valid", f"not an option: {o!r}")
    if (o.op, o.axis) in seen: raise SpecError("EXEC.OPT.valid", f"{o!r}: {o.op.name} of axis {o.axis} twice")
    seen.add((o.op, o.axis))
    if o.op is OptOps.UPCAST and not (0 <= o.axis < len(lay.shape) and lay.shape[o.axis] > 1 and o.amount > 1):
      raise SpecError("EXEC.OPT.valid", f"{o!r}: the layout shape {lay.shape} has no axis {o.axis} to upcast")
    if o.op is OptOps.UNROLL and not (0 <= o.axis < len(lay.reduce_sizes) and 1 < o.amount <= MAX_UNROLL and
                                      lay.reduce_sizes[o.axis] % o.amount == 0):
      raise SpecError("EXEC.OPT.valid", f"{o!r}: reduce loops {lay.reduce_sizes} (the amount must divide the size)")
    if o.op is OptOps.LOCAL and not (o.axis == 0 and 1 <= o.amount <= 1024):
      raise SpecError("EXEC.OPT.valid", f"{o!r}: LOCAL is axis 0 with 1 .. 1024 threads")
  lanes = math.prod(o.amount for o in opts if o.op is OptOps.UPCAST)
  if lanes > MAX_LANES: raise SpecError("EXEC.OPT.valid", f"{lanes} outputs per thread, at most {MAX_LANES}")
  strips = [o for o in opts if o.op is OptOps.STRIP]
  if len(strips) > 1: raise SpecError("EXEC.OPT.valid", f"{strips}: at most one STRIP")
  for o in strips:
    counts = thread_counts(lay.shape, opts)
    if not (0 <= o.axis < len(counts) and o.amount < counts[o.axis] and counts[o.axis] % o.amount == 0):
      raise SpecError("EXEC.OPT.valid", f"{o!r}: the threads along each axis of {lay.shape} are {counts}; a strip's "
                      "width must divide the axis's and be smaller")
    if not any(s > 1 for a, s in enumerate(lay.shape) if a != o.axis):
      raise SpecError("EXEC.OPT.valid", f"{o!r}: no other axis of {lay.shape} to walk inside a strip")


def thread_counts(shape: tuple[int, ...], opts: tuple[Opt, ...]) -> tuple[int, ...]:
  """The number of thread positions along each layout axis: ceil(size / k) for an axis upcast by k."""
  amount = {o.axis: o.amount for o in opts if o.op is OptOps.UPCAST}
  return tuple(-(-s // amount.get(a, 1)) for a, s in enumerate(shape))


def thread_positions(thread: UOp, counts: tuple[int, ...], strip: Opt | None) -> tuple[UOp, ...]:
  """The position along each layout axis of thread id `thread`: row-major over `counts` (the last axis fastest), or
  with STRIP(axis, w) (EXEC.OPT.strip) row-major over (counts[axis] // w strips, the counts with w at `axis`): the
  strip is the slowest part of the id, and inside a strip the axes run in their usual order."""
  if strip is None: return unflatten(thread, counts)
  a, w = strip.axis, strip.amount
  pos = unflatten(thread, (counts[a] // w,) + counts[:a] + (w,) + counts[a + 1:])
  return pos[1:a + 1] + (pos[0] * w + pos[a + 1],) + pos[a + 2:]


def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  """`root` with every node in `mapping` replaced (the rest rebuilt only where a source changed)."""
  memo = dict(mapping)
  for u in root.toposort():
    if u in memo: continue
    src = tuple(memo[s] for s in u.src)
    memo[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
  return memo[root]


def lower_opt(ast: UOp, opts: tuple[Opt, ...]) -> tuple[UOp, tuple[int, int, int], tuple[int, int, int],
                                                       tuple[int, ...]]:
  """The kernel-level SINK of kernel AST `ast` lowered with `opts`, the launch's global and local size, and for each
  buffer slot the AST slot it came from (as lowerer.lower)."""
  lay = layout(ast)
  check_opts(lay, opts)
  shape = lay.shape
  amount = [1] * len(shape)
  for o in opts:
    if o.op is OptOps.UPCAST: amount[o.axis] = o.amount
  local = next((o.amount for o in opts if o.op is OptOps.LOCAL), 1)
  counts = thread_counts(shape, opts)
  threads = math.prod(counts)
  groups = -(-threads // local)
  if local > 1:   # EXEC.OPT.local
    thread = (UOp(Ops.SPECIAL, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, groups),), arg="gidx0") * local +
              UOp(Ops.SPECIAL, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, local),), arg="lidx0"))
  else: thread = UOp(Ops.SPECIAL, INDEX_DTYPE, (UOp.const(INDEX_DTYPE, threads),), arg="gidx0")
  # EXEC.OPT.tail: the last work-group may have threads past the end, the last tile lanes past the end of an axis
  valid: UOp | None = thread < threads if groups * local != threads else None
  lanes: dict[int, UOp] = {}
  idx = []
  strip = next((o for o in opts if o.op is OptOps.STRIP), None)
  for a, (t, s, k) in enumerate(zip(thread_positions(thread, counts, strip), shape, amount)):
    if k == 1:
      idx.append(t)
      continue
    lanes[a] = UOp.variable(f"opt.lane{a}", 0, k - 1)
    pos = t * k + lanes[a]
    if s % k == 0: idx.append(pos)
    else:
      inside = pos < s
      valid = inside if valid is None else valid & inside
      # clamped: the lane computes the last element again and never stores it; min(pos, s-1) as -max(-pos, 1-s),
      # whose bounds (RW.BOUNDS) end at s-1, so the symbolic rules can still simplify the index arithmetic
      idx.append(-((-pos).maximum(1 - s)))
  lw = _Lowerer({o.axis: o.amount for o in opts if o.op is OptOps.UNROLL})
  tile = []
  for st in ast.src:
    out, value = st.src
    vidx = tuple(idx) if value.shape == shape else unflatten(flatten(tuple(idx), shape), value.shape)
    v = lw.value(value, vidx, None)
    gate = (valid,) if valid is not None else ()
    tile.append(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out.dtype, (out, flatten(tuple(idx), shape), *gate)), v)))
  stores = []
  for values in itertools.product(*(range(amount[a]) for a in lanes)):   # EXEC.OPT.upcast: one copy per lane
    consts = {lanes[a]: UOp.const(INDEX_DTYPE, c) for a, c in zip(lanes, values)}
    stores += [substitute(s, consts) for s in tile]
  sink, slots = finish(stores)
  sink = graph_rewrite(sink, drop_true_gates, name="drop true gates")
  return sink, (groups, 1, 1), (local, 1, 1), slots


# EXEC.MEMORY.gate: a gate the symbolic rules proved true (a lane that never passes the end) gates nothing
drop_true_gates = PatternMatcher([(UPat(Ops.INDEX, src=(UPat.var("p"), UPat.var("i"), UPat(Ops.CONST, arg=True))),
                                   lambda p, i: UOp(Ops.INDEX, p.dtype, (p, i)), "EXEC.OPT.tail")])


# ---- the default choice

def _tile_axes(lay: Layout, shared: list[frozenset[int]], gated: frozenset[int], unrolled: bool,
               long_sum: bool) -> list[tuple[int, int]]:
  """The (at most two) layout axes to tile and the lanes wanted on each: a pair along which different loads are
  shared (`shared`, `gated`: see _shared_loads), so that the tile shares each of them (a matmul's rows of A along N
  and columns of B along M; a convolution's input along the output channels and its weights along the output width),
  4 x 8 lanes; 8 x 8 for a `long_sum` (one reduce loop of at least LONG_SUM steps: 16 loads feed 64 multiply-adds per
  step instead of 12 feeding 32, and the loop is long enough to pay for the bigger tile's edges); 16 x 4 when
  only the loads shared along the first axis are gated (a pad's mask: each costs a select, so 16 lanes share it)
  and no reduce loop is `unrolled` (a convolution's forward: 1.5x faster than 4 x 8 here; its weight gradient,
  unrolled, was 2.3x slower with 16 x 4). The pair with the most lanes, the later on a tie. Without such a pair, the
  last two axes along which some load is shared, 4 x 8."""
  pairs = [(a, b) for a in range(len(shared)) for b in range(a + 1, len(shared))
           if shared[a] - shared[b] and shared[b] - shared[a]]
  if not pairs: return list(zip([a for a, loads in enumerate(shared) if loads][-2:], (4, 8)))

  def wants(a: int, b: int) -> tuple[int, int]:
    only_first = (shared[a] - shared[b]) & gated and not (shared[b] - shared[a]) & gated
    return (16, 4) if only_first and not unrolled else (8, 8) if long_sum else (4, 8)

  def lanes(p):
    wa, wb = wants(*p)
    return _amount(lay.shape[p[0]], wa) * _amount(lay.shape[p[1]], wb), p
  a, b = max(pairs, key=lanes)
  return list(zip((a, b), wants(a, b)))


def _loop_loads(ast: UOp, lay: Layout) -> tuple[list[UOp], list[UOp]]:
  """The loads inside a reduce loop of kernel `ast` lowered with a variable per layout axis, and those variables."""
  pos = [UOp.variable(f"opt.pos{a}", 0, s - 1) for a, s in enumerate(lay.shape)]
  lw = Lowerer()
  loads = []
  for st in ast.src:
    v = lw.value(st.src[1], tuple(pos) if st.src[1].shape == lay.shape else
                 unflatten(flatten(tuple(pos), lay.shape), st.src[1].shape), None)
    v = graph_rewrite(v, symbolic, name="shared axes")
    in_loop: dict[UOp, bool] = {}
    for u in v.toposort():
      in_loop[u] = u.op is Ops.RANGE or any(in_loop[s] for s in u.src)
      if u.op is Ops.LOAD and in_loop[u]: loads.append(u)
  return loads, pos


def _shared_loads(ast: UOp, lay: Layout) -> tuple[list[frozenset[int]], frozenset[int], tuple[int, ...]]:
  """For each axis of the layout (of size above 1), the loads inside a reduce loop (by number) that do not change
  along it; the numbers of the loads that are gated; and each load's element size in bytes."""
  loads, pos = _loop_loads(ast, lay)
  deps = [{p for p in pos if p in set(ld.toposort())} for ld in loads]
  gated = frozenset(i for i, ld in enumerate(loads) if len(ld.src[0].src) > 2)
  return [frozenset(i for i, d in enumerate(deps) if p not in d) if lay.shape[a] > 1 else frozenset()
          for a, p in enumerate(pos)], gated, tuple(ld.dtype.itemsize for ld in loads)


def _strip(lay: Layout, opts: list[Opt], shared: list[frozenset[int]], itemsize: tuple[int, ...]) -> list[Opt]:
  """EXEC.OPT.default's STRIP for a tile over axes (a, b) (`opts`' two UPCASTs): strips along b as wide as keeps the
  loads shared along a (a matmul's B panels) of a whole strip within STRIP_BYTES, so that they stay cached while the
  threads of the strip walk a; none where all of them fit at once."""
  (a, _), (b, lanes_b) = ((o.axis, o.amount) for o in opts if o.op is OptOps.UPCAST)
  counts = thread_counts(lay.shape, tuple(opts))
  per_thread = math.prod(lay.reduce_sizes) * lanes_b * sum(itemsize[i] for i in shared[a])
  fits = STRIP_BYTES // max(per_thread, 1)
  if not shared[a] or counts[a] < 2 or fits >= counts[b]: return []
  return [Opt(OptOps.STRIP, b, next(w for w in range(max(fits, 1), 0, -1) if counts[b] % w == 0))]


def _window_tile(ast: UOp, lay: Layout) -> list[tuple[int, int]] | None:
  """EXEC.OPT.default, a window tile: the (axis, lanes) of a tile over the last two layout axes when both are small
  (2 .. 4, a kernel window) and one more axis before them, the latest that qualifies, such that some load does not
  vary along the three and every other load in the loop is ungated and reads, at each step of the loop, one
  contiguous block across the tile (strides window-width, 1 along the window, the window's size along the third
  axis). A convolution's input gradient before col2im, col[n, c, y, x, ky, kx] = sum over o of g[n, o, y, x] *
  w[o, c, ky, kx], is such a kernel: 4 x 3 x 3 lanes over (c, ky, kx) load g once and 36 consecutive weights per
  step (3x faster than the 4 x 8 channels x columns tile, whose lanes write 4 rows 36 KiB apart). None otherwise."""
  shape = lay.shape
  if len(shape) < 3 or not all(2 <= n <= 4 for n in shape[-2:]): return None
  loads, pos = _loop_loads(ast, lay)
  a, b = len(shape) - 2, len(shape) - 1
  deps = [set(ld.toposort()) for ld in loads]
  for c in range(len(shape) - 3, -1, -1):
    if shape[c] == 1: continue
    axes = (c, a, b)
    shared = [i for i, d in enumerate(deps) if not any(pos[x] in d for x in axes)]
    varying = [ld for i, ld in enumerate(loads) if i not in shared]
    want = {c: shape[a] * shape[b], a: shape[b], b: 1}
    if shared and varying and all(len(ld.src[0].src) == 2 and all(_stride(ld.src[0].src[1], pos, x) == st
                                                                    for x, st in want.items()) for ld in varying):
      return [(c, _amount(shape[c], 4)), (a, shape[a]), (b, shape[b])]
  return None


def _stride(idx: UOp, pos: list[UOp], axis: int) -> int | None:
  """How far index `idx` moves when layout position `axis` goes from 0 to 1, every other variable and loop at 0
  (None when the index does not fold to constants)."""
  zero = {u: u.const_like(0) for u in idx.toposort() if u.op in (Ops.DEFINE_VAR, Ops.RANGE)}
  at = [graph_rewrite(substitute(idx, {**zero, **({pos[axis]: pos[axis].const_like(1)} if k else {})}), symbolic,
                      name="stride") for k in (0, 1)]
  return at[1].arg - at[0].arg if all(u.op is Ops.CONST for u in at) else None


def _amount(size: int, want: int) -> int:
  """The upcast amount for an axis of `size`: `want` or a smaller power of two that divides the size (no tail), else
  `want` itself (with a clamped tail) when the axis is long enough."""
  for k in (want, want // 2):
    if k > 1 and size % k == 0: return k
  return want if size >= 2 * want else min(size, 2)


def runs_on_cpu(device: str) -> bool:
  """Whether a CL device is a CPU (PoCL in CI): its kernels then gain from the CPU's tiles, not from work-groups."""
  if device.partition(":")[0] != "CL": return False
  try: backend = Device[device]
  except SpecError: return False
  cl = getattr(backend, "cl", None)   # CLBackend keeps the pyopencl module and its device
  return cl is not None and bool(backend.device.type & cl.device_type.CPU)


def heuristic(ast: UOp, device: str) -> tuple[Opt, ...]:
  """The default options for kernel `ast` on `device` (EXEC.OPT.default). PYTHON: none (the emulator's speed does not
  depend on the layout, and its programs stay the lowering's). GPUs: work-groups of up to 128 threads. The CPU (and a
  CL device that is a CPU), for kernels of at least SMALL_WORK loop iterations: elementwise kernels compute 8
  consecutive outputs per thread (a loop body the C compiler vectorises); kernels with a reduction get a 4x8 tile over
  the last two axes along which loads are shared (8 outputs when one axis shares; when none does, independent
  accumulators: 8 outputs of the last axis when the output has at least ACC_LANES_MIN elements, else 4), and their
  last reduce loop is unrolled by 4 when 4 divides it; a single reduce loop of at least LONG_SUM steps (a matmul)
  gets an 8x8 tile instead, not unrolled, walked in strips (_strip)."""
  kind = device.partition(":")[0]
  if kind == "PYTHON": return ()
  lay = layout(ast)
  if lay.numel == 0: return ()
  if kind in GPU_DEVICES and not runs_on_cpu(device):
    k = next((k for k in (128, 64, 32) if lay.numel % k == 0), min(128, lay.numel))
    return (Opt(OptOps.LOCAL, 0, k),) if k > 1 else ()
  if lay.numel * math.prod(lay.reduce_sizes) < SMALL_WORK: return ()
  if not lay.reduce_sizes:   # elementwise (a flat layout), or a reduction over no values (its output's layout)
    axes = [a for a, s in enumerate(lay.shape) if s > 1]
    return (Opt(OptOps.UPCAST, axes[-1], _amount(lay.shape[axes[-1]], 8)),) if axes else ()
  last = len(lay.reduce_sizes) - 1
  unroll = lay.reduce_sizes[last] % 4 == 0 and lay.reduce_sizes[last] >= 8
  loads, gated, itemsize = _shared_loads(ast, lay)
  long_sum = len(lay.reduce_sizes) == 1 and lay.reduce_sizes[0] >= LONG_SUM
  shared = _window_tile(ast, lay) or _tile_axes(lay, loads, gated, unroll and not long_sum, long_sum)
  if len(shared) == 3: out = [Opt(OptOps.UPCAST, a, k) for a, k in shared]
  elif len(shared) == 2:
    out = [Opt(OptOps.UPCAST, a, _amount(lay.shape[a], want)) for a, want in shared]
    if long_sum:   # the 8 x 8 tile's loop is not unrolled: 64 chains keep the core busy (unrolled 62, not 73 GFLOPS)
      return tuple(out + _strip(lay, out, loads, itemsize))
    # a 16 x 4 tile (a padded convolution's forward) unrolls a window's loops whole, the last two reduce loops when
    # both are 2 or 3 long: 21.6 -> 18.0 ms of one thread's time for the N=16, 32 -> 64, 32x32 forward (a weight
    # gradient over 4 x 4 images, 16 x 4 too, was slower unrolled: 0.20 -> 0.23 ms)
    wins = lay.reduce_sizes[-2:]
    if [w for _, w in shared] == [16, 4] and len(wins) == 2 and all(2 <= n <= 3 for n in wins):
      out += [Opt(OptOps.UNROLL, len(lay.reduce_sizes) - 2 + i, n) for i, n in enumerate(wins)]
  elif shared: out = [Opt(OptOps.UPCAST, shared[0][0], _amount(lay.shape[shared[0][0]], 8))]
  else:
    # EXEC.OPT.default: independent accumulators, one serial chain per lane; 8 of them hide more of the add's latency
    # than 4 (sum of 16M, EXEC.REDUCE.blocked: 3.8 ms, not 9.1; max over the rows of 4096x4096: 13.5 ms, not 23.4,
    # same run, load 9), but only where the output is big enough that 8 lanes per thread leave threads for every core
    want = ACC_LANES if lay.numel >= ACC_LANES_MIN else 4
    axes = [a for a, s in enumerate(lay.shape) if s > 1]
    # a last axis that neither want nor want // 2 divides would end in a tail of clamped lanes (EXEC.OPT.tail), and
    # the clamp hides the lane's range from the index rules: col2im's (n, c, y, 3, 34) kept a % 35 per lane in its
    # loop (9.6 ms; 1.9-2.5 ms with 8 lanes of an earlier axis of 16 or 32), so an axis without a tail goes first
    whole = [a for a in axes if lay.shape[a] % (want // 2) == 0]   # _amount's want or want // 2, no tail
    if axes and axes[-1] not in whole and whole: axes = whole
    out = [Opt(OptOps.UPCAST, a, _amount(lay.shape[a], want)) for a in axes[-1:]]
  if unroll: out.append(Opt(OptOps.UNROLL, last, 4))
  return tuple(out)


def actions(lay: Layout, device: str) -> list[Opt]:
  """Every single option the search may add (the option space, EXEC.OPT.beam)."""
  out = [Opt(OptOps.UPCAST, a, k) for a, s in enumerate(lay.shape) if s > 1 for k in (2, 4, 8, 16) if k <= s]
  out += [Opt(OptOps.UNROLL, r, k) for r, s in enumerate(lay.reduce_sizes) for k in (2, 4, 8) if s % k == 0 and k < s]
  if device.partition(":")[0] in GPU_DEVICES: out += [Opt(OptOps.LOCAL, 0, k) for k in (32, 64, 128, 256)]
  return out
