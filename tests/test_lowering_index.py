"""Index arithmetic of lowered kernels (spec/kernels.md EXEC.LOWER, spec/rewrites.md RW.IDX.*-reduce) and launch
checks made once per program (issue 19): reshapes re-split runs of axes, pads over loads leave one gated load, a
padded convolution's loops do no division, and the values are those of plain numpy."""
from __future__ import annotations

import itertools
import math
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refimpl import Tensor, dtypes
from refimpl.codegen.lowerer import lower, reshape_groups
from refimpl.device import LinearProgram
from refimpl.uop import Ops
from refimpl.uop.ops import UOp


# ---- EXEC.LOWER.reshape: runs of axes with equal products

def _factorisations(n: int) -> st.SearchStrategy:
  """Shapes (with size-1 axes sprinkled in) whose product is n."""
  def split(n):
    out = []
    for d in range(2, n + 1):
      if n % d == 0: out.append(d)
    return out
  @st.composite
  def shape(draw):
    rest, dims = n, []
    while rest > 1:
      d = draw(st.sampled_from(split(rest)))
      dims.append(d)
      rest //= d
    for _ in range(draw(st.integers(0, 2))): dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)
  return shape()


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 6, 12, 24, 36, 60, 64]).flatmap(lambda n: st.tuples(_factorisations(n), _factorisations(n))))
def test_reshape_groups_cover_both_shapes_with_equal_products(shapes):
  """EXEC.LOWER.reshape: the runs partition both shapes' axes, in order, and each run's sizes multiply to the same
  number on both sides."""
  src, dst = shapes
  groups = reshape_groups(src, dst)
  assert [a for g, _ in groups for a in g] == list(range(len(src)))
  assert [a for _, g in groups for a in g] == list(range(len(dst)))
  for sa, da in groups:
    assert math.prod(src[a] for a in sa) == math.prod(dst[a] for a in da)


def test_reshape_groups_are_the_shortest_runs():
  """EXEC.LOWER.reshape: (N, k, n) -> (N, k*n) keeps N apart; a transposing reshape is one run; zero sizes give
  None (the caller flattens everything)."""
  assert reshape_groups((5, 3, 4), (5, 12)) == [(range(0, 1), range(0, 1)), (range(1, 3), range(1, 2))]
  assert reshape_groups((4, 6), (6, 4)) == [(range(0, 2), range(0, 2))]
  assert reshape_groups((2, 0), (0, 3)) is None


@pytest.mark.parametrize("src,dst", [((2, 3, 4), (6, 4)), ((2, 3, 4), (2, 12)), ((4, 6), (3, 8)), ((1, 5, 1), (5,)),
                                     ((2, 3, 4), (4, 3, 2)), ((6, 1, 2), (3, 4, 1))])
def test_reshape_after_permute_and_pad_gives_numpy_values(src, dst):
  """EXEC.LOWER.reshape and EXEC.LOWER.pad: reshapes of permuted and padded views read the elements numpy reads."""
  a = np.arange(math.prod(src), dtype=np.int32).reshape(src)
  perm = tuple(reversed(range(len(src))))
  t = Tensor(a, device="PYTHON")
  want = a.transpose(perm).reshape(dst)
  assert np.array_equal(t.permute(perm).reshape(dst).numpy(), want)
  pads = tuple((1, 2) for _ in src)
  padded = np.pad(a, pads)
  new = (padded.size // dst[-1], dst[-1]) if padded.size % dst[-1] == 0 else (padded.size,)
  assert np.array_equal(t.pad(pads).reshape(new).numpy(), padded.reshape(new))


# ---- a padded convolution: affine indices, one mask per load, no division in the loops

def _loop_ops(sink: UOp) -> list[UOp]:
  """The integer ALU nodes that depend on a reduce RANGE (the work done per multiply-add)."""
  inside: dict[UOp, bool] = {}
  for u in sink.toposort():
    inside[u] = u.op is Ops.RANGE or any(inside[s] for s in u.src)
  return [u for u, v in inside.items() if v and u.op not in (Ops.RANGE, Ops.CONST) and u.dtype.count == 1 and
          u.dtype.scalar().name.startswith("int")]


def _conv_sink(padding: int) -> UOp:
  x = Tensor.empty(2, 3, 10, 10, device="PYTHON")
  w = Tensor.empty(4, 3, 3, 3, device="PYTHON")
  (k,) = x.conv2d(w, padding=padding).schedule()
  return lower(k.arg.ast)[0]


@pytest.mark.parametrize("padding", [0, 1])
def test_conv2d_loops_do_no_division(padding):
  """EXEC.LOWER.reshape, RW.IDX.mod-add-mul-reduce: the sliding windows' index (j * (n + 1) + i) % n becomes
  i + j, so no `//` or `%` depends on a reduce loop."""
  ops = [u.op for u in _loop_ops(_conv_sink(padding))]
  assert ops and Ops.CDIV not in ops and Ops.CMOD not in ops


def _conv_kernels(padding: int) -> list:
  """The kernels of a convolution's forward and of both its gradients (the input gradient is a sum over output
  channels, then col2im: sums over the windows that cover each input element)."""
  x, w = Tensor.empty(2, 3, 10, 10, device="CPU"), Tensor.empty(4, 3, 3, 3, device="CPU")
  out = x.conv2d(w, padding=padding)
  gx, gw = (out * Tensor.empty(*out.shape, device="CPU")).sum().gradient(x, w)
  return out.schedule(gx, gw)


@pytest.mark.parametrize("padding", [0, 1])
def test_conv2d_gradient_loops_do_no_division(padding):
  """RW.IDX.*-split, RW.IDX.*-reduce: no `//` or `%` depends on a reduce loop in any kernel of a convolution's forward
  or gradients, lowered plainly or with the CPU's options. col2im reads (r * (n - 1) + i) // n, whose quotient is r
  or r - 1 (a compare and a select)."""
  from refimpl.codegen.opt import heuristic, lower_opt
  kernels = _conv_kernels(padding)
  assert len(kernels) == 5
  for k in kernels:
    for sink in (lower(k.arg.ast)[0], lower_opt(k.arg.ast, heuristic(k.arg.ast, "CPU"))[0]):
      ops = [u.op for u in _loop_ops(sink)]
      assert ops and Ops.CDIV not in ops and Ops.CMOD not in ops, k.arg.name


@pytest.mark.parametrize("kernel,stride", [(2, None), (3, 2), (3, 1)])
def test_max_pool2d_loops_do_no_division(kernel, stride):
  """EXEC.LOWER.split: max_pool2d's forward kernels reduce over the window flattened to one axis of k * k, whose
  index r is read as (r // k, r % k); the loop runs as two nested loops instead, and no `//` or `%` depends on it."""
  x = Tensor.empty(2, 3, 8, 8, device="CPU")
  kernels = x.max_pool2d(kernel, stride).schedule()
  assert kernels
  for k in kernels:
    sink = lower(k.arg.ast)[0]
    ops = [u.op for u in _loop_ops(sink)]
    assert ops and Ops.CDIV not in ops and Ops.CMOD not in ops, k.arg.name
    assert all(len(u.src) == 3 for u in sink.toposort() if u.op is Ops.REDUCE), k.arg.name   # the window's 2 loops


@pytest.mark.parametrize("kernel,stride,dilation", [(2, None, 1), (3, 3, 1), (2, 4, 2)])
def test_pool_gradient_without_overlap_has_no_window_sum(kernel, stride, dilation):
  """Windows that do not overlap (stride a multiple of the dilation and at least kernel * dilation) are blocks of the
  axis (Tensor._windows), so the input gradient of max_pool2d is a pad and a reshape of the window gradients: its
  kernel has no reduce loop, where tiled windows needed a sum over the kernel's copies with every index divided."""
  x = Tensor.empty(2, 3, 8, 8, device="CPU")
  out = x.max_pool2d(kernel, stride, dilation)
  (gx,) = (out * Tensor.empty(*out.shape, device="CPU")).sum().gradient(x)
  sink = lower(gx.schedule()[-1].arg.ast)[0]
  assert not any(u.op is Ops.REDUCE for u in sink.toposort())
  assert not _loop_ops(sink)


@pytest.mark.parametrize("kernel,stride", [(2, None), (3, 2), (3, 1), (3, 4)])
def test_max_pool2d_and_its_gradient_match_numpy(kernel, stride):
  """EXEC.LOWER.split keeps the values: max_pool2d of int32 and the gradient of its float32 sum (ties broken as
  tinygrad does, to the first maximum of a window) against numpy."""
  rng = np.random.default_rng(kernel * 10 + (stride or 0))
  a = rng.permutation(2 * 3 * 9 * 9).reshape(2, 3, 9, 9).astype(np.int32)
  s = stride or kernel
  o = (9 - kernel) // s + 1
  want = np.stack([np.stack([a[:, :, i * s:i * s + kernel, j * s:j * s + kernel].max((2, 3)) for j in range(o)], -1)
                   for i in range(o)], -2)
  assert np.array_equal(Tensor(a, device="PYTHON").max_pool2d(kernel, stride).numpy(), want)
  x = Tensor(a.astype(np.float32), device="PYTHON")
  (gx,) = x.max_pool2d(kernel, stride).sum().gradient(x)
  grad = np.zeros(a.shape, np.float32)
  for i in range(o):
    for j in range(o):
      win = a[:, :, i * s:i * s + kernel, j * s:j * s + kernel].reshape(2, 3, -1)
      for n in range(2):
        for c in range(3):
          at = int(np.argmax(win[n, c]))
          grad[n, c, i * s + at // kernel, j * s + at % kernel] += 1
  assert np.array_equal(gx.numpy(), grad)


@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
def test_a_loop_split_twice_has_distinct_loops(device):
  """EXEC.LOWER.split in two rounds: masked_select's cumulative count over 8 elements reads its loop as r // 4 and
  (r // 2) % 2, so the loop splits 8 -> 4 x 2, then the outer 4 -> 2 x 2. Both inner loops have 2 iterations and
  must stay two loops (a shared RANGE made the REDUCE list one loop twice and the linearizer raise StopIteration).
  Values against numpy."""
  x = np.arange(8, dtype=np.uint8).reshape(2, 2, 2)
  for mask in (np.zeros((2, 2), bool), np.array([[True, False], [False, True]])):
    got = Tensor(x, device=device).masked_select(Tensor(mask, device=device)).numpy()
    assert np.array_equal(got, x[np.broadcast_to(mask, x.shape)])


def test_conv2d_padded_load_has_one_mask():
  """EXEC.LOWER.pad: the input's load is gated once by the joined pad mask, and no WHERE wraps it."""
  sink = _conv_sink(1)
  loads = [u for u in sink.toposort() if u.op is Ops.LOAD and len(u.src[0].src) == 3]
  assert len(loads) == 1
  users = [u for u in sink.toposort() if loads[0] in u.src]
  assert all(u.op is not Ops.WHERE for u in users)


@pytest.mark.parametrize("stride,dilation,padding", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 2, 0), (3, 1, 2)])
def test_conv2d_values_match_numpy(stride, dilation, padding):
  """The simplified indices read the right elements: conv2d on PYTHON (exact int32 arithmetic) against numpy."""
  rng = np.random.default_rng(stride * 10 + dilation)
  x = rng.integers(-5, 5, (2, 3, 9, 11)).astype(np.int32)
  w = rng.integers(-3, 3, (4, 3, 3, 2)).astype(np.int32)
  got = Tensor(x, device="PYTHON").conv2d(Tensor(w, device="PYTHON"), stride=stride, dilation=dilation,
                                          padding=padding).numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
  oh = (xp.shape[2] - dilation * 2 - 1) // stride + 1
  ow = (xp.shape[3] - dilation * 1 - 1) // stride + 1
  want = np.zeros((2, 4, oh, ow), np.int64)
  for ky, kx in itertools.product(range(3), range(2)):
    win = xp[:, :, ky * dilation:ky * dilation + stride * (oh - 1) + 1:stride,
             kx * dilation:kx * dilation + stride * (ow - 1) + 1:stride]
    want += np.einsum("nchw,oc->nohw", win, w[:, :, ky, kx])
  assert np.array_equal(got, want.astype(np.int32))


# ---- launch checks that depend on the program alone are made once per program

def test_program_facts_are_found_once():
  """DEV.LAUNCH.limits, EXEC.GRID.match: a program's vars, local bytes and SPECIALs are computed at its first launch
  and reused; the per-launch checks still refuse a bad launch."""
  from refimpl.runtime.launch import launch_facts
  from refimpl.device import Device
  from refimpl.engine import realize as engine
  from refimpl.helpers import SpecError
  if shutil.which(os.environ.get("CC", "cc")) is None:
    pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile")
  a = Tensor(np.ones((8, 8), np.float32), device="CPU").realize()
  engine.capture = []
  try: (a * 2).sum(1).realize()
  finally: launches, engine.capture = engine.capture, None
  p: LinearProgram = launches[0].compiled.program
  assert launch_facts(p) is launch_facts(p)
  assert p.globals == sorted((u for u in p.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
  dev = Device["CPU"]
  with pytest.raises(SpecError) as e: dev.launch(launches[0].compiled, list(launches[0].bufs), global_size=(3, 1, 1))
  assert e.value.clause == "EXEC.GRID.match"
  dev.launch(launches[0].compiled, list(launches[0].bufs))   # the sizes' checks are remembered from here on ...
  assert launch_facts(p).checked
  with pytest.raises(SpecError) as e: dev.launch(launches[0].compiled, list(launches[0].bufs)[::-1])
  assert e.value.clause == "EXEC.PROGRAM.params"   # ... but the buffers are checked at every launch
  with pytest.raises(SpecError) as e: dev.launch(launches[0].compiled, list(launches[0].bufs), {"n": 3})
  assert e.value.clause == "EXEC.PROGRAM.params"


# ---- the default tile of a convolution shares both of its loads

def test_conv2d_tile_shares_input_and_weights(monkeypatch):
  """EXEC.OPT.default: the tile of a padded convolution is 16 output channels x 4 output columns (the gated input is
  shared along the first, the weights along the second); its weight gradient, unrolled, and a matmul stay 4 x 8
  (the weight gradient unpacked, PACK=0; packed, EXEC.SCHED.pack, it is a matmul over panels with the 8 x 8 tile
  and strips); the input gradient's sum over output channels gets a window tile."""
  from refimpl.codegen.opt import Opt, OptOps, heuristic
  x, w = Tensor.empty(16, 32, 32, 32, device="CPU"), Tensor.empty(64, 32, 3, 3, device="CPU")
  (k,) = x.conv2d(w, padding=1).schedule()
  # the gated input shared by 16 lanes; the window's loops (3 x 3) unrolled whole
  assert heuristic(k.arg.ast, "CPU") == (Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 3, 4), Opt(OptOps.UNROLL, 1, 3),
                                         Opt(OptOps.UNROLL, 2, 3))
  g = Tensor.empty(16, 64, 32, 32, device="CPU")
  gx, gw = (x.conv2d(w, padding=1) * g).sum().gradient(x, w)
  (k,) = [k for k in gx.schedule(gw) if k.arg.ast.src[0].src[1].shape == (64, 288, 1)]
  assert heuristic(k.arg.ast, "CPU") == (Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.STRIP, 1, 2))
  monkeypatch.setenv("PACK", "0")
  (k,) = [k for k in gx.schedule(gw) if k.arg.ast.src[0].src[1].shape == (64, 32, 3, 3)]
  assert heuristic(k.arg.ast, "CPU") == (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UNROLL, 2, 4))
  monkeypatch.delenv("PACK")
  # the input gradient's first kernel, col[n, c, y, x, ky, kx] = sum over o of g[n, o, y, x] * w[o, c, ky, kx]: a
  # window tile, 4 channels x 3 x 3, loads g once and 36 consecutive weights per step
  (k,) = [k for k in gx.schedule(gw) if k.arg.ast.src[0].src[1].shape == (16, 1, 1, 32, 32, 32, 3, 3)]
  assert heuristic(k.arg.ast, "CPU") == (Opt(OptOps.UPCAST, 3, 4), Opt(OptOps.UPCAST, 6, 3), Opt(OptOps.UPCAST, 7, 3),
                                         Opt(OptOps.UNROLL, 0, 4))
  (k,) = (Tensor.empty(64, 96, device="CPU") @ Tensor.empty(96, 128, device="CPU")).schedule()
  assert heuristic(k.arg.ast, "CPU")[:2] == (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 8))


def test_col2im_lanes_avoid_a_tail():
  """EXEC.OPT.default: the input gradient's col2im (n, c, y, 3, 1, 34) has no load shared along any axis; its last
  axis (34) would end in a tail of clamped lanes, whose `% 35` then stays in the loop, so its 8 accumulators go to the
  last axis that 8 divides (y, 32), and its loop has no division left."""
  from refimpl.codegen.opt import Opt, OptOps, heuristic
  from refimpl.codegen.search import build_program
  x, w = Tensor.empty(16, 32, 32, 32, device="CPU"), Tensor.empty(64, 32, 3, 3, device="CPU")
  g = Tensor.empty(16, 64, 32, 32, device="CPU")
  gx, _ = (x.conv2d(w, padding=1) * g).sum().gradient(x, w)
  (k,) = [k for k in gx.schedule() if k.arg.ast.src[0].src[1].shape == (16, 32, 32, 3, 1, 34)]
  opts = heuristic(k.arg.ast, "CPU")
  assert opts == (Opt(OptOps.UPCAST, 2, 8),)
  program, _ = build_program(k.arg.name, k.arg.ast, opts)
  depth, inside = 0, []
  for u in program.uops:
    if u.op is Ops.RANGE: depth += 1
    elif u.op is Ops.END: depth -= 1
    elif depth and u.op in (Ops.CDIV, Ops.CMOD): inside.append(u)
  assert depth == 0 and inside == []
  # every axis of the layout (63, 34) has a tail: the lanes stay on the last one, clamped
  (k,) = (Tensor.empty(63, 300, 34, device="CPU").sum(1)).schedule()
  assert heuristic(k.arg.ast, "CPU")[0] == Opt(OptOps.UPCAST, 1, 8)


@pytest.mark.parametrize("noopt", ["1", ""])
def test_conv2d_gradients_give_noopt_bits(noopt, monkeypatch):
  """EXEC.OPT.exact: a convolution's forward and both gradients (the kernels whose tiles changed) give the bits of
  the unoptimised kernels, on the CPU."""
  if shutil.which(os.environ.get("CC", "cc")) is None:
    pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile")
  rng = np.random.default_rng(3)
  arrays = [rng.standard_normal(s, dtype=np.float32) for s in ((4, 8, 12, 12), (16, 8, 3, 3), (4, 16, 12, 12))]

  def run(env):
    monkeypatch.setenv("NOOPT", env)
    x, w, g = (Tensor(a, device="CPU") for a in arrays)
    out = x.conv2d(w, padding=1)
    gx, gw = (out * g).sum().gradient(x, w)
    return [t.numpy().tobytes() for t in (out, gx, gw)]
  assert run(noopt) == run("1")


# ---- DEV.C.threads: few work-groups with long loops use the pool too

def test_loop_trips_counts_nested_iterations(monkeypatch):
  """DEV.C.threads: a work-group's loop iterations are each RANGE's size times those around it, summed; a buffer's
  address is noted at allocation (a view of it falls back to numpy's)."""
  if shutil.which(os.environ.get("CC", "cc")) is None:
    pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile")
  from refimpl.device import Device
  from refimpl.engine import realize as engine
  from refimpl.runtime.ops_cpu import _address
  monkeypatch.setenv("NOOPT", "1")
  a = Tensor(np.ones((3, 5, 7), np.float32), device="CPU").realize()
  engine.capture = []
  try: a.sum((1, 2)).realize()
  finally: launches, engine.capture = engine.capture, None
  assert launches[0].compiled.loop_trips == 5 + 5 * 7
  mem = Device["CPU"].alloc(4, dtypes.float32).handle
  assert _address(mem) == mem.ctypes.data and _address(mem[1:]) == mem.ctypes.data + 1
