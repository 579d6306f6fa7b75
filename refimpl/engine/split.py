"""Blocked reductions: the order of a long reduction spelled out in the tensor graph (EXEC.REDUCE.blocked).

A kernel folds each REDUCE left to right, one value after another (EXEC.THREAD.reduce), so a sum of 16M values in one
REDUCE is one serial chain on one thread. The spec instead defines the result of a Tensor reduction of more than
CHAIN_MAX values per output as a blocked fold: consecutive blocks of BLOCK values, each folded left to right, then the
block results reduced by the same rule (one chain when there are at most CHAIN_MAX of them). This pass, run by the
scheduler before kernels are cut, writes that order into the graph:

    REDUCE_AXIS(x, axes)   (N > CHAIN_MAX values per output, F = N // BLOCK full blocks, T = N % BLOCK left over)
      -> x moved so that the reduced axes come last, flattened to (*kept, N)
      -> full = REDUCE_AXIS over (*kept, F, BLOCK) of its first F*BLOCK values     one result per full block
      -> last = REDUCE_AXIS over its last T values (when T > 0)                    the short block
      -> fold(full) OP last                                                         the block results, left to right

The last line is exact, not an approximation: a left-to-right fold of r0 .. rF is the fold of r0 .. rF-1 combined
with rF, so no padding (whose identity would not be neutral for -0.0 in a sum) is needed. The blocks' fold becomes its
own kernel (a reduction inside a reduction is never fused), with F * (kept elements) independent outputs that the
optimiser tiles and the CPU spreads over its threads. Every device receives the same graph, so every device gives the
same bits, and the order depends on the number of values alone (not on the device, NOOPT or the threads)."""
from __future__ import annotations

import math

from refimpl.uop import Ops
from refimpl.uop.ops import UOp

__all__ = ["split_reductions", "blocked", "BLOCK", "CHAIN_MAX"]

BLOCK = 2048          # EXEC.REDUCE.blocked: values per block
CHAIN_MAX = 2 ** 16   # EXEC.REDUCE.blocked: up to this many values per output, a reduction is one chain


def _reduce_last(x: UOp, op: Ops) -> UOp:
  """REDUCE_AXIS of `op` over the last axis of `x` (kept with size 1): one left-to-right chain."""
  return UOp(Ops.REDUCE_AXIS, x.dtype, (x,), (op, (len(x.shape) - 1,)))


def _shrink_last(x: UOp, lo: int, hi: int) -> UOp:
  """Values lo .. hi-1 of the last axis of `x`."""
  if (lo, hi) == (0, x.shape[-1]): return x
  return UOp(Ops.SHRINK, x.dtype, (x,), tuple((0, n) for n in x.shape[:-1]) + ((lo, hi),))


def _reshape(x: UOp, shape: tuple[int, ...]) -> UOp:
  return x if x.shape == shape else UOp(Ops.RESHAPE, x.dtype, (x,), shape)


def _fold(seq: UOp, op: Ops, tail: UOp | None, block: int, chain_max: int) -> UOp:
  """The fold of EXEC.REDUCE.blocked of the values along the last axis of `seq` (shape (*kept, L)) followed, when
  `tail` is given (shape (*kept, 1)), by one more value per output: the result of a short block of the level below,
  which is last in order. Returns shape (*kept, 1)."""
  *kept, n = seq.shape
  kept = tuple(kept)
  if n + (tail is not None) <= chain_max:   # one chain: fold(v0 .. vn-1, t) == fold(v0 .. vn-1) OP t
    out = _reduce_last(seq, op)
    return out if tail is None else UOp(op, out.dtype, (out, tail))
  full, rest = divmod(n, block)
  # full blocks: (*kept, full, block) folded along the last axis, one result per block, in block order
  blocks = _reshape(_shrink_last(seq, 0, full * block), kept + (full, block))
  results = _reshape(_reduce_last(blocks, op), kept + (full,))
  # the last block: the `rest` values left in seq, then the tail (the short block of the level below) when there is one
  if rest: last = _reduce_last(_shrink_last(seq, full * block, n), op)
  elif tail is not None: last = None
  else: return _fold(results, op, None, block, chain_max)
  if tail is not None:
    # a block of the tail alone is folded from the identity like any block: a REDUCE over its one value
    last = _reduce_last(tail, op) if last is None else UOp(op, last.dtype, (last, tail))
  return _fold(results, op, last, block, chain_max)


def blocked(r: UOp, block: int | None = None, chain_max: int | None = None) -> UOp:
  """REDUCE_AXIS `r` rewritten to the blocked order of EXEC.REDUCE.blocked, or `r` itself when it reduces at most
  `chain_max` values per output (or has a symbolic shape). The values of an output are those of the reduced axes in
  row-major order, the axes in the order `r` names them (the Tensor names them in increasing order), which is the
  nesting of the loops that lowering makes for them: for up to `chain_max` values the split changes nothing. `block`
  and `chain_max` default to the clause's BLOCK and CHAIN_MAX (read when called, so tests can shrink them)."""
  block, chain_max = block or BLOCK, chain_max or CHAIN_MAX
  op, axes = r.arg
  x = r.src[0]
  shape = x.shape
  if not all(isinstance(s, int) for s in shape): return r
  n = math.prod(shape[a] for a in axes)
  if n <= chain_max: return r
  kept = [a for a in range(len(shape)) if a not in axes]
  order = tuple(kept) + tuple(axes)
  if order != tuple(range(len(shape))): x = UOp(Ops.PERMUTE, x.dtype, (x,), order)
  flat = _reshape(x, tuple(shape[a] for a in kept) + (n,))
  return _reshape(_fold(flat, op, None, block, chain_max), r.shape)


def split_reductions(roots: list[UOp], block: int | None = None, chain_max: int | None = None) -> dict[UOp, UOp]:
  """EXEC.REDUCE.blocked: for every node of the graphs under `roots` that the split changes, its replacement (the long
  reductions, and every node above one). Empty when no reduction is longer than `chain_max` values per output."""
  memo: dict[UOp, UOp] = {}
  for u in dict.fromkeys(u for root in roots for u in root.toposort()):
    src = tuple(memo.get(s, s) for s in u.src)
    new = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
    if new.op is Ops.REDUCE_AXIS: new = blocked(new, block, chain_max)
    if new is not u: memo[u] = new
  return memo
