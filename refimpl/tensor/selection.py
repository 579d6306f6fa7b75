"""Selection: gather, scatter, scatter_reduce, masked_fill, masked_select and nonzero (spec/tensor_select.md).
Every op picks elements through a one-hot mask (a comparison of an index with an arange) and a reduction that has at
most one term per output (`_onehot_pick`), so values are exact and gradients reach the source positions. Results
whose length depends on the data (nonzero, masked_select without `size`) read one count back from the device."""
from __future__ import annotations

import math

from refimpl.dtype import dtypes
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.uop import Ops
from refimpl.tensor.args import _BITS_INT, _axis, _broadcast_shape
from refimpl.tensor.checked import check_index_range, checked_indices
from refimpl.tensor.core import Tensor

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _int_index(clause: str, index) -> None:
  if not isinstance(index, Tensor) or not dtypes.is_int(index.dtype):
    what = index.dtype if isinstance(index, Tensor) else type(index).__name__
    raise SpecTypeError(clause, f"index must be an integer tensor, not {what}")


class SelectionOps:
  def _onehot_pick(self, mask: Tensor, axis: int) -> Tensor:
    """The element of `self` that `mask` selects along `axis` (broadcasting the two), 0 (False) where it selects
    none; `mask` selects at most one. Floats are summed as values (differentiable: the selected element gets the
    cotangent) and, where that sum is 0, the sign of a selected -0.0 is restored from a sum of the bit patterns
    (BITCAST, no gradient) as bits - (0 - sum): the value of bits with the derivative of the sum (TENSOR.PICK)."""
    if self.dtype == dtypes.bool: return mask.where(self, False)._reduce(Ops.MAX, axis, False)
    if dtypes.is_int(self.dtype): return mask.where(self, 0)._reduce(Ops.ADD, axis, False)
    bits = mask.where(self.bitcast(_BITS_INT[self.dtype.itemsize]), 0)._reduce(Ops.ADD, axis, False)
    out = mask.where(self, 0)._reduce(Ops.ADD, axis, False)
    return (out == 0).where(bits.bitcast(self.dtype) - (0 - out), out)

  def gather(self, dim: int, index: Tensor) -> Tensor:
    """torch.gather: out[..., j, ...] = self[..., index[..., j, ...], ...] along `dim` (TENSOR.GATHER). An index
    outside [0, n) selects nothing and gives 0 (TENSOR.GATHER.range)."""
    _int_index("TENSOR.GATHER.args", index)
    if index.ndim != self.ndim:
      raise SpecRuntimeError("TENSOR.GATHER.args", f"index has {index.ndim} dims, self has {self.ndim}")
    if self.ndim == 0: return self.reshape(1).gather(0, index.reshape(1)).reshape(())
    d = _axis(dim, self.ndim)
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise SpecRuntimeError("TENSOR.GATHER.args", f"index shape {index.shape} exceeds self shape {self.shape} "
                                             f"outside dim {d}")
    n = self.shape[d]
    if checked_indices(): check_index_range(index, n, "TENSOR.GATHER.range", "gather index")
    x = self.shrink(tuple(None if k == d else (0, i) for k, i in enumerate(index.shape))).transpose(d, -1)
    onehot = index.transpose(d, -1).unsqueeze(-1) == Tensor.arange(n, device=self.device)
    return x.unsqueeze(-2)._onehot_pick(onehot, -1).transpose(d, -1)

  def _scatter_terms(self, clause: str, dim: int, index: Tensor, src: Tensor):
    """For each position of self (with `dim` moved last) and each position j of index along `dim`: whether index
    sends src there (hit) and that src value. Returns (self moved, hit, values, d), hit and values of shape
    self_moved.shape + (m,); positions of self outside index's extent get no hit."""
    _int_index(f"{clause}.args", index)
    if not isinstance(src, Tensor): raise SpecTypeError(f"{clause}.args",
                                                        f"src must be a tensor or a scalar, not {src!r}")
    if not index.ndim == self.ndim == src.ndim:
      raise SpecRuntimeError(f"{clause}.args",
                             f"self, index and src have {self.ndim}, {index.ndim} and {src.ndim} dims")
    if src.dtype != self.dtype: raise SpecTypeError(f"{clause}.args", f"src is {src.dtype}, self is {self.dtype}")
    if self.ndim == 0: return self.reshape(1)._scatter_terms(clause, 0, index.reshape(1), src.reshape(1))
    d = _axis(dim, self.ndim)
    for k, (s, i, r) in enumerate(zip(self.shape, index.shape, src.shape)):
      if i > r or (k != d and i > s):
        raise SpecRuntimeError(f"{clause}.args", f"index shape {index.shape} must fit in src {src.shape} and, outside "
                                           f"dim {d}, in self {self.shape}")
    n = self.shape[d]
    if checked_indices(): check_index_range(index, n, "TENSOR.SCATTER.range", "scatter index")
    src = src.shrink(tuple((0, i) for i in index.shape)).transpose(d, -1).unsqueeze(-2)   # (..., 1, m)
    hit = index.transpose(d, -1).unsqueeze(-2) == Tensor.arange(n, device=self.device).reshape(n, 1)   # (..., n, m)
    moved = self.transpose(d, -1)
    grow = tuple((0, s - i) for s, i in zip(moved.shape[:-1], hit.shape[:-2])) + ((0, 0), (0, 0))
    values = src.expand(hit.shape).pad(grow)
    return moved, hit.pad(grow), values, d

  def scatter(self, dim: int, index: Tensor, src, reduce: str | None = None) -> Tensor:
    """torch.scatter: self with self[..., index[..., j, ...], ...] = src[..., j, ...] along `dim` (TENSOR.SCATTER).
    `src` may be a Python scalar. Of repeated indices the last along `dim` wins (TENSOR.SCATTER.repeat); an index
    outside [0, n) writes nothing (TENSOR.SCATTER.range). reduce='add' / 'multiply' is scatter_reduce with 'sum' /
    'prod' and include_self=True (TENSOR.SCATTER.reduce)."""
    if reduce not in (None, "add", "multiply"):
      raise SpecValueError("TENSOR.SCATTER.args", f"reduce={reduce!r} must be None, 'add' or 'multiply'")
    if isinstance(src, (bool, int, float)) and isinstance(index, Tensor):
      src = Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
    if reduce is not None:
      return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod", include_self=True)
    moved, hit, values, d = self._scatter_terms("TENSOR.SCATTER", dim, index, src)
    m = hit.shape[-1]
    # the last hit along j: the largest j + 1 among the hits (0: none); its one-hot selects the written value
    last = hit.where(Tensor.arange(1, m + 1, device=self.device), 0)._max(-1)
    chosen = hit & (Tensor.arange(1, m + 1, device=self.device) == last.unsqueeze(-1))
    out = (last > 0).where(values._onehot_pick(chosen, -1), moved)
    return out.transpose(d, -1).reshape(self.shape)

  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """torch.scatter_reduce: each position of self that index names along `dim` becomes the reduction ('sum',
    'prod', 'mean', 'amax', 'amin') of every src value sent there, and of self's own value when include_self
    (TENSOR.SCATTER_REDUCE). Positions no index names keep self's value; repeated indices all contribute."""
    if reduce not in _REDUCES:
      raise SpecValueError("TENSOR.SCATTER_REDUCE.args", f"reduce={reduce!r} must be one of {', '.join(_REDUCES)}")
    if self.dtype == dtypes.bool: raise SpecTypeError("TENSOR.SCATTER_REDUCE.args", "bool tensors cannot be reduced")
    moved, hit, values, d = self._scatter_terms("TENSOR.SCATTER_REDUCE", dim, index, src)
    written = hit.any(-1)
    if reduce in ("amax", "amin"):
      # self joins the reduction as one more term, so that ties with it share the cotangent as torch's do
      if dtypes.is_float(self.dtype): fill = -math.inf if reduce == "amax" else math.inf
      else: fill = dtypes.min(self.dtype) if reduce == "amax" else dtypes.max(self.dtype)
      terms = hit.where(values, fill)
      if include_self: terms = terms.cat(moved.unsqueeze(-1), dim=-1)
      out = terms._max(-1) if reduce == "amax" else terms._min(-1)
    elif reduce == "prod":
      out = hit.where(values, 1).prod(-1).cast(self.dtype)
      if include_self: out = out * moved
    else:
      out = hit.where(values, 0).sum(-1).cast(self.dtype)
      if include_self: out = out + moved
      if reduce == "mean":   # TENSOR.SCATTER_REDUCE.mean: integers divide with floor, as torch
        count = (hit.sum(-1) + int(include_self)).maximum(1).cast(self.dtype)
        out = out / count if dtypes.is_float(self.dtype) else out // count
    return written.where(out, moved).transpose(d, -1).reshape(self.shape)

  def masked_fill(self, mask: Tensor, value) -> Tensor:
    """`value` where `mask` is True, self elsewhere, in self's dtype (value is cast to it, as torch does); mask and
    value broadcast with self (TENSOR.MASKED_FILL)."""
    if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool:
      raise SpecTypeError("TENSOR.MASKED_FILL.args",
                          f"mask must be a bool tensor, not {getattr(mask, 'dtype', mask)!r}")
    v = value.cast(self.dtype) if isinstance(value, Tensor) else Tensor.full((), value, dtype=self.dtype,
                                                                               device=self.device)
    return mask.where(v, self)

  def _select_rows(self, flat_mask: Tensor, size: int | None, clause: str) -> tuple[Tensor, Tensor]:
    """For a 1-d bool mask: a one-hot (rows, n) whose row r selects the position of the (r+1)-th True, and a (rows,)
    bool saying which rows select one. rows = `size`, or the number of Trues read back from the device."""
    if size is None: size = int(flat_mask.sum().item())   # TENSOR.MASKED_SELECT.realize: a data-dependent shape
    elif not isinstance(size, int) or size < 0: raise SpecValueError(f"{clause}.args",
                                                                     f"size={size!r} must be an int >= 0")
    rows = Tensor.arange(1, size + 1, device=self.device).reshape(size, 1)
    onehot = flat_mask & (flat_mask.cumsum(0) == rows)
    return onehot, Tensor.arange(size, device=self.device) < flat_mask.sum()

  def masked_select(self, mask: Tensor, size: int | None = None, fill_value=0) -> Tensor:
    """The elements of self where `mask` is True (the two broadcast together), in row-major order, as a 1-d tensor
    (TENSOR.MASKED_SELECT). Its length is the number of Trues, read back from the device (the one op here that
    realizes), or `size` (no read-back): truncated, or padded with `fill_value` (TENSOR.MASKED_SELECT.size)."""
    if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool:
      raise SpecTypeError("TENSOR.MASKED_SELECT.args",
                          f"mask must be a bool tensor, not {getattr(mask, 'dtype', mask)!r}")
    shape = _broadcast_shape(self.shape, mask.shape)
    x, m = self.expand(shape).flatten(), mask.expand(shape).flatten()
    onehot, valid = self._select_rows(m, size, "TENSOR.MASKED_SELECT")
    out = x.unsqueeze(0)._onehot_pick(onehot, -1)
    return out if size is None else valid.where(out, Tensor.full((), fill_value, dtype=self.dtype, device=self.device))

  def nonzero(self, size: int | None = None, fill_value=0) -> Tensor:
    """The int32 coordinates (rows of ndim) of the elements that are not zero (NaN is not zero, -0.0 is), in
    row-major order (TENSOR.NONZERO). The row count is read back from the device, or is `size` (truncated, or padded
    with rows of `fill_value`), as masked_select."""
    nz = self != 0 if self.dtype != dtypes.bool else self
    if self.ndim == 0:
      rows = int(nz.item()) if size is None else size
      return Tensor.zeros(rows, 0, dtype=dtypes.int32, device=self.device)
    onehot, valid = self._select_rows(nz.flatten(), size, "TENSOR.NONZERO")
    # coords[p, a]: coordinate a of flat position p
    coords = Tensor.stack(*[Tensor.arange(s, device=self.device).reshape(tuple(s if k == a else 1 for k in range(
      self.ndim))).expand(self.shape).flatten() for a, s in enumerate(self.shape)], dim=-1)
    out = coords.unsqueeze(0)._onehot_pick(onehot.unsqueeze(-1), 1).cast(dtypes.int32)
    return out if size is None else valid.unsqueeze(-1).where(out, Tensor.full((), fill_value, dtype=dtypes.int32,
                                                                              device=self.device))
