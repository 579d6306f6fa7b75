"""Hand-written kernels used by tests and bench/emu_kernels.py, in the form lowering emits reductions: a DEFINE_REG
accumulator set to the identity before the loop, acc = acc + v inside it, read after its END."""
from __future__ import annotations

from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.uop import Ops
from emu.build import Builder

f32 = dtypes.float32


def matmul(n: int = 64) -> LinearProgram:
  """C = A @ B for n x n float32 matrices, one thread per output (gidx0 = column, gidx1 = row), an n-step loop."""
  b = Builder(f"matmul_{n}")
  c, a, bm = b.glob(0, f32, n * n), b.glob(1, f32, n * n), b.glob(2, f32, n * n)
  col, row = b.special("gidx0", n), b.special("gidx1", n)
  acc = b.reg(0, f32)
  row_start = b.add(row * n)   # before the loop: it is used after the loop too (EXEC.PROGRAM.scope)
  b.store(acc, 0, b.const(f32, 0.0))
  k = b.range(n)
  prod = b.load(a, row_start + k) * b.load(bm, k * n + col)
  upd = b.store(acc, 0, b.load(acc, 0) + prod, None, k)
  b.end(upd, k)
  b.store(c, row_start + col, b.load(acc, 0, arg="after"))
  return b.program(global_size=(n, n, 1))


def sum_relu(n: int = 4096) -> LinearProgram:
  """out[0] = sum(relu((x + 1) * 2)) over n float32 elements: one thread, an n-step accumulator loop."""
  b = Builder(f"sum_relu_{n}")
  out, x = b.glob(0, f32, 1), b.glob(1, f32, n)
  acc = b.reg(0, f32)
  zero = b.const(f32, 0.0)
  b.store(acc, 0, zero)
  r = b.range(n)
  v = ((b.load(x, r) + 1.0) * 2.0).maximum(zero)
  upd = b.store(acc, 0, b.load(acc, 0) + v, None, r)
  b.end(upd, r)
  b.store(out, 0, b.load(acc, 0, arg="after"))
  return b.program()


def worked_example(bug: str | None = None, tmp_size: int = 4):
  """kernels.md's worked example: a 2x2 work-group sums 4 floats through local memory. `bug` makes one of its
  broken variants: 'oob' (loop to 5), 'divergence' (BARRIER inside the IF), 'race' (tmp[l0] instead of tmp[t])."""
  b = Builder(f"local_sum_{bug or 'ok'}")
  out, inp = b.glob(0, f32, 1), b.glob(1, f32, 4)
  tmp = b.local("tmp", f32, tmp_size)
  l0, l1 = b.special("lidx0", 2), b.special("lidx1", 2)
  t = b.add(l1 * 2 + l0)
  st = b.store(tmp, l0 if bug == "race" else t, b.load(inp, t))
  if bug != "divergence": b.barrier(st)
  iff = b.if_(b.add(t.eq(0)))
  if bug == "divergence": b.barrier(st)
  r = b.range(5 if bug == "oob" else 4)
  v = b.load(tmp, r)
  b.end(v, r)
  b.store(out, 0, b.reduce(Ops.ADD, v, r))
  b.endif(iff)
  return b.program(local_size=(2, 2, 1))
