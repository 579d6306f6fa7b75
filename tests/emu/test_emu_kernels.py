"""Hand-built linear programs on the PYTHON device, compared with numpy (spec/kernels.md EXEC.*)."""
import math

import numpy as np
import pytest

from emu import examples, valu
from emu.examples import worked_example
from emu.build import Builder
from emu.device import PythonBackend
from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu

f32, i32 = dtypes.float32, dtypes.int32


def test_worked_example_left_to_right(run):
  """EXEC.THREAD.reduce: 1e8 + 1 + -1e8 + 1 folds left to right to 1.0 (not 2.0)."""
  out, _ = run(worked_example(), (f32, 1), np.array([1e8, 1.0, -1e8, 1.0], np.float32))
  assert out[0] == 1.0


def test_elementwise_add(run):
  b = Builder("add")
  c, a, bb = b.glob(0, f32, 64), b.glob(1, f32, 64), b.glob(2, f32, 64)
  g, l = b.special("gidx0", 4), b.special("lidx0", 16)
  i = b.add(g * 16 + l)
  b.store(c, i, b.load(a, i) + b.load(bb, i))
  x, y = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
  out, _, _ = run(b.program((4, 1, 1), (16, 1, 1)), (f32, 64), x, y)
  np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("sanitize", [False, True])
def test_matmul_example(run, sanitize):
  rng = np.random.default_rng(1)
  a, bm = rng.standard_normal((2, 16, 16)).astype(np.float32)
  out, _, _ = run(examples.matmul(16), (f32, 256), a.ravel(), bm.ravel(), sanitize=sanitize)
  want = np.zeros((16, 16), np.float32)
  for k in range(16): want = want + a[:, k:k + 1] * bm[k:k + 1, :]   # the same left-to-right order, per element
  np.testing.assert_array_equal(out.reshape(16, 16), want)


def test_sum_relu_example_matches_exec_alu_loop(run):
  x = np.random.default_rng(2).standard_normal(512).astype(np.float32) * 100
  out, _ = run(examples.sum_relu(512), (f32, 1), x)
  acc = 0.0
  for v in x:
    y = exec_alu(Ops.MAX, f32, [exec_alu(Ops.MUL, f32, [exec_alu(Ops.ADD, f32, [float(v), 1.0]), 2.0]), 0.0])
    acc = exec_alu(Ops.ADD, f32, [acc, y])
  assert out[0] == np.float32(acc)


def _tri_sum(reduce_op: bool):
  """out[g] = sum of inp[0..g]: the trip count differs per thread, so the loop cannot run vectorized."""
  b = Builder("tri_reduce" if reduce_op else "tri_reg")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 8)
  g = b.special("gidx0", 8)
  n = b.add(g + 1)
  if reduce_op:
    r = b.range(n)
    v = b.load(inp, r)
    b.end(v, r)
    b.store(out, g, b.reduce(Ops.ADD, v, r))
  else:
    acc = b.reg(0, f32)
    b.store(acc, 0, 0.0)
    r = b.range(n)
    b.end(b.store(acc, 0, b.load(acc, 0) + b.load(inp, r), None, r), r)
    b.store(out, g, b.load(acc, 0, arg="after"))
  return b.program((8, 1, 1))



def test_serial_loop_counter_remainder(run):
  """EXEC.THREAD.range, OP.CMOD: out[g] = sum of inp[r % 3] for r < g + 1. The trip count differs per thread, so the
  loop runs serially and its counter is a numpy scalar; `r % 3` of it alone took CMOD's in-place fast path and raised
  TypeError (numpy gives a 0-d result back as a scalar), as the gradient of max_unpool2d did on PYTHON."""
  b = Builder("tri_mod")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 3)
  g = b.special("gidx0", 8)
  r = b.range(b.add(g + 1))
  v = b.load(inp, b.add(r % 3))
  b.end(v, r)
  b.store(out, g, b.reduce(Ops.ADD, v, r))
  x = np.array([1.0, 10.0, 100.0], np.float32)
  got, _ = run(b.program((8, 1, 1)), (f32, 8), x)
  np.testing.assert_array_equal(got, [1, 11, 111, 112, 122, 222, 223, 233])

@pytest.mark.parametrize("reduce_op", [False, True])
def test_nonuniform_loop(run, reduce_op):
  x = np.arange(1, 9, dtype=np.float32)
  out, _ = run(_tri_sum(reduce_op), (f32, 8), x)
  np.testing.assert_array_equal(out, np.cumsum(x))


def _reduce_kernel(op: Ops, dt, n: int, use_reg: bool, outer: int = 1):
  b = Builder(f"reduce_{op.name}")
  out, inp = b.glob(0, dt, outer), b.glob(1, dt, outer * n)
  g = b.special("gidx0", outer)
  base = b.add(g * n)
  if use_reg:
    acc = b.reg(0, dt)
    from emu.translate import identity
    b.store(acc, 0, b.const(dt, identity(op, dt)))
    r = b.range(n)
    v = b.load(inp, base + r)
    b.end(b.store(acc, 0, UOpAlu(op, b.load(acc, 0), v), None, r), r)
    b.store(out, g, b.load(acc, 0, arg="after"))
  else:
    r = b.range(n)
    v = b.load(inp, base + r)
    b.end(v, r)
    b.store(out, g, b.reduce(op, v, r))
  return b.program((outer, 1, 1))


def UOpAlu(op, a, v): return a.alu(op, v)


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.int8, dtypes.uint32,
                                dtypes.bool])
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX])
@pytest.mark.parametrize("use_reg", [False, True])
def test_reductions_left_to_right(run, dt, op, use_reg):
  """EXEC.THREAD.reduce for REDUCE and for DEFINE_REG accumulators: the same as a loop of exec_alu."""
  rng = np.random.default_rng(3)
  n, outer = 37, 3
  if dt == dtypes.bool: vals = [bool(v) for v in rng.integers(0, 2, n * outer)]
  elif dtypes.is_int(dt):
    vals = [int(v) for v in rng.integers(dtypes.min(dt), dtypes.max(dt), n * outer, dtype=np.int64)]
  else: vals = [dtypes.as_const(float(v), dt) for v in rng.standard_normal(n * outer) * (1.5 if op is Ops.MUL else 1e3)]
  if dt == dtypes.float32: vals[5] = -0.0; vals[40] = math.nan
  out, _ = run(_reduce_kernel(op, dt, n, use_reg, outer), (dt, outer), (dt, valu.to_storage(vals, dt)))
  from emu.translate import identity
  for o in range(outer):
    acc = identity(op, dt)
    for v in vals[o * n:(o + 1) * n]: acc = exec_alu(op, dt, [acc, v])
    got = out[o:o + 1]
    g = bool(got[0]) if dt == dtypes.bool else int(got[0]) if dtypes.is_int(dt) else float(valu.to_float(got, dt)[0])
    assert (g != g and acc != acc) or g == acc, (o, g, acc)


def test_gated_load_and_store(run):
  """EXEC.MEMORY.gate: a gated-off LOAD gives 0, a gated-off STORE writes nothing, whatever the index."""
  b = Builder("gated")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 4)
  g = b.special("gidx0", 8)
  v = b.load(inp, g, b.add(g < 4))            # index 4..7 out of bounds, but gated off
  b.store(out, g, v + 1.0)
  b.store(out, g + 100, v, b.add(g < 0))      # never stores
  out, _ = run(b.program((8, 1, 1)), (f32, 8), np.arange(4, dtype=np.float32))
  np.testing.assert_array_equal(out, [1, 2, 3, 4, 1, 1, 1, 1])


def test_2d_grid_and_local_ids(run):
  """EXEC.GRID.special / EXEC.GRID.linear: each thread writes its ids."""
  b = Builder("grid2d")
  out = b.glob(0, i32, 3 * 2 * 2 * 4)
  g0, g1, l0, l1 = b.special("gidx0", 3), b.special("gidx1", 2), b.special("lidx0", 2), b.special("lidx1", 4)
  i = b.add(((g1 * 3 + g0) * 4 + l1) * 2 + l0)
  b.store(out, i, g0 * 1000 + g1 * 100 + l0 * 10 + l1)
  out, = run(b.program((3, 2, 1), (2, 4, 1)), (i32, 48))
  g1, g0, l1, l0 = np.meshgrid(range(2), range(3), range(4), range(2), indexing="ij")
  np.testing.assert_array_equal(out, (g0 * 1000 + g1 * 100 + l0 * 10 + l1).ravel())


def test_vars(run):
  """DEFINE_VAR: the launch's value; sizes computed from it (EXEC.GRID.match)."""
  b = Builder("scale")
  n = b.var("n", 1, 100)
  out, inp = b.glob(0, f32), b.glob(1, f32)
  g = b.special("gidx0", n)
  b.store(out, g, b.load(inp, g) * 3.0)
  x = np.arange(10, dtype=np.float32)
  out, _ = run(b.program((10, 1, 1)), (f32, 10), x, vals={"n": 10})
  np.testing.assert_array_equal(out, x * 3)


def test_vectors(run):
  """VECTORIZE / GEP / lane-wise ALU / BITCAST between lane counts (UOP.VECTORIZE, UOP.GEP)."""
  from refimpl.uop.ops import UOp
  b = Builder("vec")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 8)
  bits = b.glob(2, dtypes.uint32, 1)
  g = b.special("gidx0", 2)
  base = b.add(g * 4)
  lanes = [b.load(inp, base + k) for k in range(4)]
  vec = b.add(UOp(Ops.VECTORIZE, f32.vec(4), tuple(lanes)))
  dbl = b.add(vec * b.add(UOp(Ops.VECTORIZE, f32.vec(4), (b.const(f32, 2.0),) * 4)))
  rev = b.add(UOp(Ops.GEP, f32.vec(4), (dbl,), (3, 2, 1, 0)))
  for k in range(4): b.store(out, base + k, b.add(UOp(Ops.GEP, f32, (rev,), (k,))))
  h = b.add(UOp(Ops.VECTORIZE, dtypes.half.vec(2), (b.const(dtypes.half, 1.0), b.const(dtypes.half, -2.0))))
  b.store(bits, 0, b.add(UOp(Ops.BITCAST, dtypes.uint32, (h,))), b.add(g.eq(0)))
  x = np.arange(8, dtype=np.float32)
  out, _, bits = run(b.program((2, 1, 1)), (f32, 8), x, (dtypes.uint32, 1))
  np.testing.assert_array_equal(out, (x * 2).reshape(2, 4)[:, ::-1].ravel())
  assert bits[0] == np.array([1.0, -2.0], np.float16).view(np.uint32)[0]


def test_empty_grid_runs_nothing(run):
  """EXEC.GRID.empty: a size of 0 runs no thread and changes no memory."""
  b = Builder("empty")
  n = b.var("n", 0, 10)
  out = b.glob(0, f32, 4)
  b.store(out, b.special("gidx0", n), 1.0)
  x = np.zeros(4, np.float32)
  out, = run(b.program(), x, vals={"n": 0}, global_size=(0, 1, 1))
  np.testing.assert_array_equal(out, x)


def test_nested_loops_vectorized_and_source_cached():
  """Two directly nested loops with one accumulator (a 2-D window sum) run as one vectorized nest; the program is
  translated once (DEV.COMPILE)."""
  b = Builder("window")
  out, inp = b.glob(0, f32, 4), b.glob(1, f32, 64)
  g = b.special("gidx0", 4)
  acc = b.reg(0, f32)
  b.store(acc, 0, 0.0)
  r0 = b.range(4, 0)
  r1 = b.range(8, 1)
  b.end(b.store(acc, 0, b.load(acc, 0) + b.load(inp, g * 16 + r0 * 4 + r1 % 4), None, r0, r1), r1, r0)
  b.store(out, g, b.load(acc, 0, arg="after"))
  dev = PythonBackend(sanitize=True)
  c = dev.compile(b.program((4, 1, 1)))
  assert dev.compile(b.program((4, 1, 1))) is c and "acc_fold" in c.source
  bufs = [dev.alloc(4, f32), dev.alloc(64, f32)]
  x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
  dev.copyin(bufs[1], x.tobytes())
  dev.launch(c, bufs)
  got = np.frombuffer(dev.copyout(bufs[0]), np.float32)
  for t in range(4):
    acc_ = np.float32(0)
    for i in range(4):
      for j in range(8): acc_ = np.float32(acc_ + x[t * 16 + i * 4 + j % 4])
    assert got[t] == acc_


def test_registry_finds_python_device():
  """DEV.REGISTRY: the entry point names emu.device:PythonBackend."""
  from importlib.metadata import entry_points
  eps = {ep.name: ep.value for ep in entry_points(group="refimpl.devices")}
  assert eps.get("PYTHON") == "emu.device:PythonBackend"


def test_tree_reduction_barriers_in_loop(run):
  """A barrier inside a loop every thread runs the same number of times, after an IF that differs between
  threads (EXEC.BARRIER.divergence allows it); epochs order the reads and writes, so no race is reported."""
  b = Builder("tree_sum")
  out, inp = b.glob(0, f32, 1), b.glob(1, f32, 8)
  tmp = b.local("tmp", f32, 8)
  l = b.special("lidx0", 8)
  b.barrier(b.store(tmp, l, b.load(inp, l)))
  four = b.const(i32, 4)
  r = b.range(3)
  stride = b.add(four >> r)
  iff = b.if_(b.add(l < stride))
  st = b.store(tmp, l, b.load(tmp, l, arg="mine") + b.load(tmp, l + stride))
  b.endif(iff)
  bar = b.barrier(st)
  b.end(bar, r)
  iff0 = b.if_(b.add(l.eq(0)))
  b.store(out, 0, b.load(tmp, 0))
  b.endif(iff0)
  x = np.arange(1, 9, dtype=np.float32) * 0.5
  for sanitize in (True, False):
    got, _ = run(b.program(local_size=(8, 1, 1)), (f32, 1), x, sanitize=sanitize)
    assert got[0] == ((x[0] + x[4]) + (x[2] + x[6])) + ((x[1] + x[5]) + (x[3] + x[7]))


def test_loop_fallback_matches_vectorized(run, monkeypatch):
  """The Python-loop form of a vectorizable nest (taken when it would be too large) gives the same bits."""
  from emu.runtime import Launch
  rng = np.random.default_rng(5)
  a, bm = rng.standard_normal((2, 8, 8)).astype(np.float32)
  fast, _, _ = run(examples.matmul(8), (f32, 64), a.ravel(), bm.ravel())
  monkeypatch.setattr(Launch, "VEC_LIMIT", 0)
  slow, _, _ = run(examples.matmul(8), (f32, 64), a.ravel(), bm.ravel())
  np.testing.assert_array_equal(fast, slow)
