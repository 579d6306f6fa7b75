"""Cumulative ops: cumprod, cummax, cummin, logcumsumexp (spec/tensor_select.md; cumsum is with the reductions).
Each output i along the axis is a reduction over the prefix 0..i: the axis is moved last and spread into a lower
triangle (..., n, n) whose row i holds x[0..i] and the reduction's identity after, then reduced over the last axis."""
from __future__ import annotations

import math

from refimpl.dtype import dtypes, least_upper_float, sum_acc_dtype
from refimpl.tensor.args import _axis
from refimpl.tensor.core import Tensor


class CumulativeOps:
  def _prefix_rows(self, fill) -> Tensor:
    """(..., n) -> (..., n, n) with row i = x[0..i] followed by `fill` (the last axis of self is the scanned one)."""
    n = self.shape[-1]
    ar = Tensor.arange(n, device=self.device)
    return (ar <= ar.reshape(n, 1)).where(self.unsqueeze(-2), fill)

  def cumprod(self, axis: int) -> Tensor:
    """Running product along `axis`, accumulated like prod (DT.SUM: int32 for small ints and bool, float16 and
    bfloat16 in float32 and rounded back); its gradient is GRAD.REDUCE.MUL's, zeros included (TENSOR.CUMPROD)."""
    if self.ndim == 0: return self.prod()
    ax = _axis(axis, self.ndim)
    if self.shape[ax] == 0:
      return self if self.dtype in (dtypes.float16, dtypes.bfloat16) else self.cast(sum_acc_dtype(self.dtype))
    x = self.transpose(ax, -1)
    return x._prefix_rows(True if self.dtype == dtypes.bool else 1).prod(-1).transpose(ax, -1)

  def _cum_extreme(self, axis: int, largest: bool) -> tuple[Tensor, Tensor]:
    """cummax / cummin: the running extreme's index is the LAST j <= i whose element equals it, NaN equal to NaN,
    as torch (TENSOR.CUMMAX.tie, TENSOR.CUMMAX.nan); the value is read at that index, so its zero sign and its
    gradient belong to that element (TENSOR.CUMMAX.grad)."""
    if self.ndim == 0: return self, Tensor.zeros((), dtype=dtypes.int32, device=self.device)
    ax = _axis(axis, self.ndim)
    n = self.shape[ax]
    if n == 0: return self, Tensor.zeros(self.shape, dtype=dtypes.int32, device=self.device)
    x = self.transpose(ax, -1)
    key = x.cast(dtypes.uint8) if x.dtype == dtypes.bool else x.detach()
    if dtypes.is_float(key.dtype): fill = -math.inf if largest else math.inf
    else: fill = dtypes.min(key.dtype) if largest else dtypes.max(key.dtype)
    rows = key._prefix_rows(fill)
    best = (rows._max(-1) if largest else rows._min(-1)).unsqueeze(-1)   # NaN propagates (OP.MAX.nan)
    ar = Tensor.arange(n, device=self.device)
    hit = (rows == best)
    if dtypes.is_float(key.dtype): hit = hit | (rows.isnan() & best.isnan())
    hit = hit & (ar <= ar.reshape(n, 1))
    idx = hit.where(ar, 0)._max(-1)
    values = x.unsqueeze(-2)._onehot_pick(ar == idx.unsqueeze(-1), -1)
    return values.transpose(ax, -1), idx.cast(dtypes.int32).transpose(ax, -1)

  def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the running maximum along `axis`: torch.cummax (TENSOR.CUMMAX)."""
    return self._cum_extreme(axis, True)

  def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the running minimum along `axis`: torch.cummin (TENSOR.CUMMAX)."""
    return self._cum_extreme(axis, False)

  def logcumsumexp(self, axis=0) -> Tensor:
    """log(sum_{j <= i} e**x_j) along `axis`, in the default float for int and bool inputs: logsumexp over each
    prefix (TENSOR.LOGCUMSUMEXP), so its special values and gradients are logsumexp's."""
    x = self.cast(least_upper_float(self.dtype))
    if self.ndim == 0: return x
    ax = _axis(axis, self.ndim)
    if self.shape[ax] == 0: return x
    return x.transpose(ax, -1)._prefix_rows(-math.inf).logsumexp(-1).transpose(ax, -1)
