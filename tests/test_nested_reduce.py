"""A reduction fused inside another reduction's loop (EXEC.THREAD.reduce): the inner register starts again from the
identity in every iteration of the outer loop. The random programs found `x.sum(0).sum(keepdim=True)` of ones
(8, 32, 16) giving 1050624 instead of 4096: the inner init was placed once, before every loop."""
import numpy as np
import pytest

from refimpl import Tensor


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
