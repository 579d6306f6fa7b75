"""A reduction inside another reduction's loop (EXEC.THREAD.reduce): the inner register starts again from the
identity in every iteration of the outer loop. The random programs found `x.sum(0).sum(keepdim=True)` of ones
(8, 32, 16) giving 1050624 instead of 4096: the inner init was placed once, before every loop. Such Tensor programs
are now two kernels (CONF.FUSION.reduce-reduce), so the nesting is checked on a hand-built kernel graph as well."""
import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen.linearize import linearize
from refimpl.device import Device, LinearProgram
from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import I32, const, glob, launch, load, store


@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
@pytest.mark.parametrize("build, ref", [
  (lambda t: t.sum(0).sum(axis=(0, 1), keepdim=True), lambda a: a.sum(0).sum(axis=(0, 1), keepdims=True)),
  (lambda t: t.sum(0).sum(keepdim=True), lambda a: a.sum(0).sum(keepdims=True)),
  (lambda t: t.max(2).sum(keepdim=True), lambda a: a.max(2).sum(keepdims=True)),
  (lambda t: t.sum(1).max(axis=(0, 1), keepdim=True), lambda a: a.sum(1).max(axis=(0, 1), keepdims=True)),
])
def test_reduce_of_a_reduce_over_all_axes(device, build, ref):
  a = np.random.default_rng(0).choice(np.array([0.0, -1.5, -3.0, 2.0], np.float32), (8, 32, 16))
  got = build(Tensor(a, device=device)).numpy()
  want = ref(a.astype(np.float64))
  assert got.shape == want.shape
  np.testing.assert_array_equal(got, want.astype(np.float32))   # sums of multiples of 0.5 are exact in float32


def _nested_program() -> LinearProgram:
  """A kernel graph with a REDUCE inside another REDUCE's loop: out[0] = sum over i < 8 of (max over j < 4 of
  x[i*4 + j]). The Tensor front end no longer makes such kernels (a reduction read by a reduction is its own kernel,
  CONF.FUSION.reduce-reduce), but kernel graphs may hold them, and EXEC.THREAD.reduce says the inner register starts
  from its identity in every outer iteration."""
  out, inp = glob(0, dtypes.float32, 1), glob(1, dtypes.float32, 32)
  i, j = UOp(Ops.RANGE, I32, (const(8),), (0, "r")), UOp(Ops.RANGE, I32, (const(4),), (1, "r"))
  inner = UOp(Ops.REDUCE, dtypes.float32, (load(inp, UOp(Ops.ADD, I32, (UOp(Ops.MUL, I32, (i, const(4))), j))), j),
              Ops.MAX)
  outer = UOp(Ops.REDUCE, dtypes.float32, (inner, i), Ops.ADD)
  return LinearProgram("nested", tuple(linearize(UOp(Ops.SINK, dtypes.void, (store(out, const(0), outer),)))))


@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
def test_a_reduce_nested_in_a_reduce_loop_restarts_from_its_identity(device):
  """With the inner init placed once before every loop (the bug of 1026b68), the max would carry over from one row to
  the next: rows of negative values after a row of 2s would all give 2."""
  x = np.full((8, 4), -3.0, np.float32)
  x[0] = 2.0
  x[5, 2] = -1.5
  got, _ = launch(Device[device], _nested_program(), [np.zeros(1, np.float32), x.ravel()])
  assert got.tolist() == [float(x.max(1).sum())] == [2.0 - 3.0 * 6 - 1.5]


def test_tensor_reductions_of_reductions_are_separate_kernels():
  """CONF.FUSION.reduce-reduce, also with the outer reduction as the kernel's root (keepdim): before, such a root
  took its source reduction into its own loop, which for a blocked sum (EXEC.REDUCE.blocked) ran every block on one
  thread (a sum of 2**24 with keepdim=True: 14.1 ms against 3.3 ms, one run each)."""
  t = Tensor.empty(8, 32, 16, device="PYTHON")
  assert len(t.sum(0).sum(keepdim=True).schedule()) == 2
  assert len(t.max(2).sum(keepdim=True).schedule()) == 2
  assert len(Tensor.empty(1 << 17, device="PYTHON").sum(keepdim=True).schedule()) == 2
