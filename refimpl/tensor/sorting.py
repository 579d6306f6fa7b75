"""Sorting: sort, argsort, topk (spec/tensor_select.md). A rank construction of tensor ops, no host sort: each
element's rank is the number of elements that come before it (a comparison of every pair along the axis), and output
position p picks the element of rank p through a one-hot mask. The order is torch's stable sort: NaN after every
number (before, descending), -0.0 tied with +0.0, ties in their input order."""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.helpers import SpecTypeError, SpecValueError
from refimpl.tensor.args import _axis
from refimpl.tensor.core import Tensor


class SortingOps:
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of self sorted along `dim`, stably: torch.sort(stable=True) (TENSOR.SORT). The values
    are read from the input at the indices, so each keeps its zero sign and its gradient goes back to its source
    position (TENSOR.SORT.grad)."""
    if self.ndim == 0: return self, Tensor.zeros((), dtype=dtypes.int32, device=self.device)
    d = _axis(dim, self.ndim)
    n = self.shape[d]
    if n == 0: return self, Tensor.zeros(self.shape, dtype=dtypes.int32, device=self.device)
    x = self.transpose(d, -1)
    key = x.cast(dtypes.uint8) if x.dtype == dtypes.bool else x.detach()
    mine, other = key.unsqueeze(-1), key.unsqueeze(-2)   # [..., i, j]: element i against element j
    # TENSOR.SORT.nan: NaN is larger than every number and ties with NaN; TENSOR.SORT.zero: -0.0 == +0.0 (CMPEQ)
    first = other > mine if descending else other < mine
    tie = other == mine
    if dtypes.is_float(key.dtype):
      first = first | ((other.isnan() & ~mine.isnan()) if descending else (mine.isnan() & ~other.isnan()))
      tie = tie | (other.isnan() & mine.isnan())
    ar = Tensor.arange(n, device=self.device)
    earlier = ar < ar.reshape(n, 1)   # [i, j]: j < i  (TENSOR.SORT.stable)
    rank = (first | (tie & earlier)).sum(-1)   # (..., n): the output position of element i
    onehot = rank.unsqueeze(-2) == ar.reshape(n, 1)   # [..., p, i]: element i goes to position p
    idx = onehot.where(ar, 0).sum(-1).cast(dtypes.int32)
    values = x.unsqueeze(-2)._onehot_pick(onehot, -1)
    return values.transpose(d, -1), idx.transpose(d, -1)

  def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
    """The int32 indices of sort (TENSOR.SORT)."""
    return self.sort(dim, descending)[1]

  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the k largest (smallest) elements along `dim`: the first k of the stable sort,
    descending (ascending) (TENSOR.TOPK). sorted_=False returns the same order, which torch allows
    (TENSOR.TOPK.sorted)."""
    d = _axis(dim, self.ndim)
    n = self.shape[d] if self.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int): raise SpecTypeError("TENSOR.TOPK.k", f"k={k!r} must be an int")
    if not 0 <= k <= n: raise SpecValueError("TENSOR.TOPK.k", f"k={k} is outside [0, {n}], the size of dim {d}")
    values, idx = self.sort(d, descending=largest)
    if self.ndim == 0: return values, idx
    bounds = tuple((0, k) if i == d else None for i in range(self.ndim))
    return values.shrink(bounds), idx.shrink(bounds)
