"""EXEC.THREAD.reduce.order: a REDUCE's ranges open in the order it lists them, outermost first, whatever order its
value's index mentions them in; so a reduction over several axes folds in row-major order of those axes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen.linearize import linearize
from refimpl.codegen.lowerer import lower
from refimpl.codegen.opt import heuristic, lower_opt
from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import I32, const, glob, load, store


def _opened(prog: list[UOp], ranges: tuple[UOp, ...]) -> list[UOp]:
  return [u for u in prog if u.op is Ops.RANGE and u in ranges]


def test_listed_order_wins_over_the_index():
  """A hand-built REDUCE over (r0, r1) whose load index names r1 first (r1 * 2 + r0) still runs r0 outside."""
  out, inp = glob(0, dtypes.float32, 1), glob(1, dtypes.float32, 6)
  r0, r1 = UOp(Ops.RANGE, I32, (const(2),), (0, "r")), UOp(Ops.RANGE, I32, (const(3),), (1, "r"))
  value = load(inp, UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (r1, const(2))), r0)))
  for order in ((r0, r1), (r1, r0)):
    red = UOp(Ops.REDUCE, dtypes.float32, (value, *order), Ops.ADD)
    prog = linearize(UOp(Ops.SINK, dtypes.void, (store(out, const(0), red),)))
    assert _opened(prog, order) == list(order)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))), ids=str)
def test_lowered_reductions_open_their_loops_in_order(perm):
  """Reductions over 2 and 3 axes of every permutation of a (3, 4, 5, 6) tensor, lowered plainly and with the CPU's
  options (UNROLL adds ranges): every REDUCE's loops open in its listed order."""
  x = Tensor.empty(3, 4, 5, 6, device="CPU")
  for axes in [(0, 1), (1, 2), (0, 2), (2, 3), (0, 3), (0, 1, 2), (1, 2, 3)]:
    (k,) = (x.permute(perm).sum(axes) * 2).schedule()
    for sink in (lower(k.arg.ast)[0], lower_opt(k.arg.ast, heuristic(k.arg.ast, "CPU"))[0]):
      prog = linearize(sink)
      reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
      assert reduces
      for r in reduces: assert _opened(prog, r.src[1:]) == list(r.src[1:]), (perm, axes)


@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
def test_a_sum_over_permuted_axes_folds_row_major(device):
  """The values: a float32 sum over axes (2, 0) of a permuted tensor, whose terms cancel only in one order, equals
  numpy's explicit left-to-right fold in row-major order of the reduced axes (axis 0 slowest)."""
  rng = np.random.default_rng(3)
  a = (rng.standard_normal((4, 3, 5)) * 10.0 ** rng.integers(-4, 9, (4, 3, 5))).astype(np.float32)
  got = Tensor(a, device=device).permute(2, 1, 0).sum((2, 0)).numpy()
  p = a.transpose(2, 1, 0)
  want = np.zeros(3, np.float32)
  for j in range(3):
    acc = np.float32(0.0)
    for i0 in range(p.shape[0]):
      for i2 in range(p.shape[2]): acc = np.float32(acc + p[i0, j, i2])
    want[j] = acc
  assert got.tobytes() == want.tobytes()
