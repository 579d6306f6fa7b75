"""Cumulative, sorting and selection ops (spec/tensor_select.md): refusals of bad arguments (SpecError naming the
clause), and what the conformance catalogue cannot express: fixed examples of each edge case, the gradients where
torch differs on purpose, that the data-dependent ops read one count back and the others stay lazy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError

nan, inf = math.nan, math.inf


def _same(got: Tensor, want) -> None:
  """Equal values, NaN where NaN, the same signs of zeros."""
  g, w = got.numpy(), np.asarray(want, dtype=got.numpy().dtype)
  assert g.shape == w.shape, (g.shape, w.shape)
  assert ((g == w) | (np.isnan(g) & np.isnan(w)) if g.dtype.kind == "f" else g == w).all(), (g, w)
  if g.dtype.kind == "f": assert ((np.signbit(g) == np.signbit(w)) | np.isnan(w)).all(), (g, w)


# ---------------------------------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("call,clause", [
  (lambda x, i: x.gather(0, Tensor([0.5])), "TENSOR.GATHER.args"),
  (lambda x, i: x.gather(0, Tensor([[0]])), "TENSOR.GATHER.args"),
  (lambda x, i: x.reshape(2, 2).gather(0, Tensor([[0, 0, 0]])), "TENSOR.GATHER.args"),
  (lambda x, i: x.scatter(0, i, Tensor([1, 2], dtype=dtypes.int32)), "TENSOR.SCATTER.args"),
  (lambda x, i: x.scatter(0, i, Tensor([1.0])), "TENSOR.SCATTER.args"),
  (lambda x, i: x.scatter(0, i, Tensor([1.0, 2.0]), reduce="max"), "TENSOR.SCATTER.args"),
  (lambda x, i: x.scatter(0, [0, 1], Tensor([1.0, 2.0])), "TENSOR.SCATTER.args"),
  (lambda x, i: x.scatter(0, i, "a"), "TENSOR.SCATTER.args"),
  (lambda x, i: x.scatter_reduce(0, i, Tensor([1.0, 2.0]), "max"), "TENSOR.SCATTER_REDUCE.args"),
  (lambda x, i: (x > 0).scatter_reduce(0, i, Tensor([True, False]), "sum"), "TENSOR.SCATTER_REDUCE.args"),
  (lambda x, i: x.masked_fill(Tensor([1, 0, 1, 0]), 2.0), "TENSOR.MASKED_FILL.args"),
  (lambda x, i: x.masked_select(Tensor([1, 0, 1, 0])), "TENSOR.MASKED_SELECT.args"),
  (lambda x, i: x.masked_select(x > 0, size=-1), "TENSOR.MASKED_SELECT.args"),
  (lambda x, i: x.nonzero(size=-2), "TENSOR.NONZERO.args"),
  (lambda x, i: x.topk(5), "TENSOR.TOPK.k"),
  (lambda x, i: x.topk(-1), "TENSOR.TOPK.k"),
  (lambda x, i: x.topk(1.0), "TENSOR.TOPK.k"),
])
def test_bad_arguments_raise_spec_error(call, clause):
  x, i = Tensor([1.0, 2.0, 3.0, 4.0]), Tensor([0, 1])
  with pytest.raises(SpecError) as e: call(x, i)
  assert clause in str(e.value)


# ---------------------------------------------------------------------------------------------------- cumulative

def test_cummax_ties_nan_and_zero_signs():
  """TENSOR.CUMMAX.tie / .nan: the last equal position, NaN equal to NaN; the value read at the index."""
  v, i = Tensor([1.0, 1.0, nan, 3.0, nan, 0.0]).cummax(0)
  _same(v, [1, 1, nan, nan, nan, nan])
  _same(i, [0, 1, 2, 2, 4, 4])
  v, i = Tensor([0.0, -0.0, 0.0]).cummax(0)
  _same(v, [0.0, -0.0, 0.0])
  _same(i, [0, 1, 2])
  v, i = Tensor([3, 1, 1, 5], dtype=dtypes.int8).cummin(0)
  _same(v, [3, 1, 1, 1])
  _same(i, [0, 1, 2, 2])
  assert i.dtype == dtypes.int32 and v.dtype == dtypes.int8


def test_cummax_gradient_goes_to_the_index():
  """TENSOR.CUMMAX.grad: torch's rule, the whole cotangent to x[indices[i]]."""
  x = Tensor([2.0, 2.0, 1.0, 3.0], requires_grad=True)
  g, = (x.cummax(0)[0] * Tensor([1.0, 2.0, 4.0, 8.0])).sum().gradient(x)
  _same(g, [1.0, 6.0, 0.0, 8.0])


def test_cumprod_gradient_with_zeros_is_torchs():
  """TENSOR.CUMPROD.zero."""
  for values in ([0.0, 2.0, 0.0, 3.0], [2.0, 0.0, 5.0, 3.0], [0.0, 0.0, 1.0, 2.0]):
    x = Tensor(values, requires_grad=True)
    g, = x.cumprod(0).sum().gradient(x)
    xt = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    torch.cumprod(xt, 0).sum().backward()
    np.testing.assert_allclose(g.numpy(), xt.grad.numpy())


def test_cumprod_dtypes():
  """TENSOR.CUMPROD: prod's accumulation dtype (DT.SUM)."""
  assert Tensor([1, 2], dtype=dtypes.int8).cumprod(0).dtype == dtypes.int32
  assert Tensor([True, False]).cumprod(0).dtype == dtypes.int32
  assert Tensor([1.0, 2.0], dtype=dtypes.float16).cumprod(0).dtype == dtypes.float16


def test_logcumsumexp_special_values():
  """TENSOR.LOGCUMSUMEXP: -inf prefixes give -inf with a NaN gradient, +inf and NaN propagate."""
  _same(Tensor([1.0, inf, nan, 2.0]).logcumsumexp(), [1.0, inf, nan, nan])
  x = Tensor([-inf, -inf, 1.0], requires_grad=True)
  y = x.logcumsumexp(0)
  g, = y.sum().gradient(x)
  _same(y, [-inf, -inf, 1.0])
  _same(g, [nan, nan, 1.0])
  assert Tensor([1, 2]).logcumsumexp().dtype == dtypes.float32


# ---------------------------------------------------------------------------------------------------- sorting

def test_sort_order_is_torchs_stable_order():
  """TENSOR.SORT.stable / .nan / .zero."""
  x = Tensor([nan, 1.0, -0.0, 0.0, nan, 1.0])
  v, i = x.sort()
  _same(v, [-0.0, 0.0, 1.0, 1.0, nan, nan])
  _same(i, [2, 3, 1, 5, 0, 4])
  v, i = x.sort(descending=True)
  _same(v, [nan, nan, 1.0, 1.0, -0.0, 0.0])
  _same(i, [0, 4, 1, 5, 2, 3])
  assert i.dtype == dtypes.int32
  _same(Tensor([[3, 1, 2], [0, 5, 5]]).argsort(1, descending=True), [[0, 2, 1], [1, 2, 0]])
  v, i = Tensor([True, False, True]).sort()
  _same(v, [False, True, True])
  _same(i, [1, 0, 2])


def test_sort_of_0d_and_empty():
  v, i = Tensor(2.5).sort()
  assert v.shape == () and i.shape == () and i.item() == 0
  v, i = Tensor.zeros(2, 0).sort(1)
  assert v.shape == (2, 0) and i.shape == (2, 0) and i.dtype == dtypes.int32


def test_sort_and_topk_gradients_scatter_back():
  """TENSOR.SORT.grad: each source position gets its sorted position's cotangent."""
  x = Tensor([3.0, 1.0, 2.0, 1.0], requires_grad=True)
  g, = (x.sort()[0] * Tensor([1.0, 2.0, 3.0, 4.0])).sum().gradient(x)
  _same(g, [4.0, 1.0, 3.0, 2.0])
  x = Tensor([3.0, 1.0, 2.0, 1.0], requires_grad=True)
  g, = (x.topk(2)[0] * Tensor([10.0, 20.0])).sum().gradient(x)
  _same(g, [10.0, 0.0, 20.0, 0.0])


def test_topk_ties_follow_the_stable_sort_and_sorted_false():
  """TENSOR.TOPK: the first index of a tie (torch.topk may give another); sorted_=False gives the same."""
  v, i = Tensor([1.0, 3.0, 3.0, nan]).topk(2)
  _same(v, [nan, 3.0])
  _same(i, [3, 1])
  v2, i2 = Tensor([1.0, 3.0, 3.0, nan]).topk(2, sorted_=False)
  _same(v2, [nan, 3.0])
  _same(i2, [3, 1])
  v, i = Tensor([[4, 1], [2, 3]]).topk(1, dim=0, largest=False)
  _same(v, [[2, 1]])
  _same(i, [[1, 0]])


# ---------------------------------------------------------------------------------------------------- selection

def test_gather_out_of_range_gives_zero():
  """TENSOR.GATHER.range: negative and too large indices select nothing."""
  _same(Tensor([1.0, -0.0, 3.0]).gather(0, Tensor([5, -1, 1, 2])), [0.0, 0.0, -0.0, 3.0])
  _same(Tensor([True, True]).gather(0, Tensor([0, 9])), [True, False])


def test_scatter_last_repeat_wins_and_out_of_range_writes_nothing():
  """TENSOR.SCATTER.repeat / .range."""
  _same(Tensor.zeros(3).scatter(0, Tensor([1, 1, 1]), Tensor([5.0, 6.0, 7.0])), [0.0, 7.0, 0.0])
  _same(Tensor([1.0, 2.0]).scatter(0, Tensor([-1, 2]), Tensor([5.0, 6.0])), [1.0, 2.0])
  _same(Tensor.zeros(2, 3).scatter(1, Tensor([[2], [0]]), 1.5), [[0, 0, 1.5], [1.5, 0, 0]])
  _same(Tensor.full((2, 4), 2.0).scatter(1, Tensor([[2], [3]]), 1.5, reduce="multiply"), [[2, 2, 3, 2], [2, 2, 2, 3]])


def test_scatter_gradient_with_repeats_goes_to_the_winner():
  """TENSOR.SCATTER.repeat: the losing src element gets 0 (torch gives it the cotangent too)."""
  x, s = Tensor([2.0, 2.0, 1.0], requires_grad=True), Tensor([2.0, 3.0], requires_grad=True)
  gx, gs = x.scatter(0, Tensor([0, 0]), s).mul(Tensor([1.0, 2.0, 3.0])).sum().gradient(x, s)
  _same(gx, [0.0, 2.0, 3.0])
  _same(gs, [0.0, 1.0])


def test_scatter_reduce_mean_and_include_self():
  """TENSOR.SCATTER_REDUCE.mean: floor division for integers; untouched positions keep self exactly."""
  out = Tensor([0, 0, 0], dtype=dtypes.int32).scatter_reduce(0, Tensor([0, 0, 1]), Tensor([3, 4, -3],
                                                                                        dtype=dtypes.int32), "mean")
  _same(out, [2, -2, 0])
  assert out.dtype == dtypes.int32
  out = Tensor([-0.0, 1.0, 2.0]).scatter_reduce(0, Tensor([1, 1]), Tensor([4.0, 8.0]), "mean", include_self=False)
  _same(out, [-0.0, 6.0, 2.0])
  _same(Tensor([nan, 1.0, 2.0]).scatter_reduce(0, Tensor([1, 2, 2]), Tensor([nan, 5.0, 1.0]), "amax"), [nan, nan, 5.0])


def test_scatter_reduce_amax_ties_share_with_self():
  """TENSOR.SCATTER_REDUCE: self is one more term, so ties split the cotangent in three as in torch."""
  x, s = Tensor([2.0, 2.0, 1.0], requires_grad=True), Tensor([2.0, 2.0], requires_grad=True)
  gx, gs = x.scatter_reduce(0, Tensor([0, 0]), s, "amax").sum().gradient(x, s)
  np.testing.assert_allclose(gx.numpy(), [1 / 3, 1, 1], rtol=1e-6)
  np.testing.assert_allclose(gs.numpy(), [1 / 3, 1 / 3], rtol=1e-6)


def test_scatter_reduce_gradients_where_torch_differs():
  """TENSOR.SCATTER_REDUCE.untouched: an untouched -inf passes g (torch's prod backward: inf / inf = NaN).
  TENSOR.SCATTER_REDUCE.prod: a touched -inf gets g times the src product (torch: NaN again).
  TENSOR.SCATTER_REDUCE.exclude-self: with include_self=False an x equal to the result takes no share of the tie
  (torch still counts it: src would get 1/3 each)."""
  x, s = Tensor([-inf, 2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  for include_self, want_x, want_s in ((True, [1.0, 3.0], [2.0]), (False, [1.0, 0.0], [1.0])):
    gx, gs = x.scatter_reduce(0, Tensor([1]), s, "prod", include_self=include_self).sum().gradient(x, s)
    _same(gx, want_x)
    _same(gs, want_s)
  _same(x.scatter(0, Tensor([1]), s, reduce="multiply").sum().gradient(x)[0], [1.0, 3.0])
  _same(x.scatter(0, Tensor([0]), s, reduce="multiply").sum().gradient(x)[0], [3.0, 1.0])
  x, s = Tensor([-0.0, 5.0], requires_grad=True), Tensor([-0.0, 0.0, 1.0], requires_grad=True)
  gx, gs = x.scatter_reduce(0, Tensor([0, 0, 1]), s, "amin", include_self=False).sum().gradient(x, s)
  _same(gx, [0.0, 0.0])
  _same(gs, [0.5, 0.5, 1.0])



@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16])
def test_scatter_reduce_prod_gradient_outside_the_compared_points(dtype):
  """TENSOR.SCATTER_REDUCE.prod: a zero with a NaN among a target's terms is GRAD.REDUCE.MUL.inf's undefined point:
  the zero gets g times the NaN product, the NaN term 0 (torch: NaN at both); a partial product past the
  accumulation dtype's range is inf with gradients inf (torch in float64: 3e38). The conformance domain keeps both
  out of the comparison with torch (catalogue/selection.py _product_defined)."""
  x, s = Tensor([1.0, 2.0], dtype=dtype), Tensor([0.0, nan], dtype=dtype)
  for include_self, want_x in ((True, [nan, 1.0]), (False, [0.0, 1.0])):
    y = x.scatter_reduce(0, Tensor([0, 0]), s, "prod", include_self=include_self)
    gx, gs = y.sum().gradient(x, s)
    _same(y, [nan, 2.0])
    _same(gx, want_x)
    _same(gs, [nan, 0.0])
  x, s = Tensor([1.0], dtype=dtype), Tensor([3e38, 2.0, 0.5], dtype=dtype)
  y = x.scatter_reduce(0, Tensor([0, 0, 0]), s, "prod")
  gx, gs = y.sum().gradient(x, s)
  _same(y, [inf])
  _same(gx, [inf])
  _same(gs, [inf, inf, inf])

def test_masked_fill_keeps_the_dtype():
  """TENSOR.MASKED_FILL: the value is converted to self's dtype (torch), not promoted (tinygrad)."""
  out = Tensor([1, 2, 3]).masked_fill(Tensor([True, False, True]), 1.7)
  assert out.dtype == dtypes.int32
  _same(out, [1, 2, 1])


def test_masked_select_and_nonzero_read_back_one_count(monkeypatch):
  """TENSOR.MASKED_SELECT.realize: without size, one item() read; with size, none."""
  reads = []
  real_item = Tensor.item
  monkeypatch.setattr(Tensor, "item", lambda self: reads.append(1) or real_item(self))
  x = Tensor([[1.0, 0.0], [nan, -0.0]])
  _same(x.masked_select(x != 0), [1.0, nan])
  _same(x.nonzero(), [[0, 0], [1, 0]])
  assert len(reads) == 2
  _same(x.masked_select(x != 0, size=3, fill_value=9), [1.0, nan, 9.0])
  _same(x.nonzero(size=1), [[0, 0]])
  assert len(reads) == 2
  _same(Tensor([1, 2]).masked_select(Tensor([[True, False], [True, True]])), [1, 1, 2])
  assert Tensor(3.0).nonzero().shape == (1, 0) and Tensor(0.0).nonzero().shape == (0, 0)
  assert Tensor.zeros(2, 2).nonzero().shape == (0, 2)
