"""Indexing: basic indexing by movement ops and advanced (integer tensor) indexing by one-hot masks."""
from __future__ import annotations

import functools

import numpy as np

from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.helpers import SpecIndexError, SpecRuntimeError, SpecTypeError
from refimpl.tensor import validate
from refimpl.tensor.args import _BITS_INT, _broadcast_shape
from refimpl.tensor.checked import check_index_range, checked_indices
from refimpl.tensor.core import Tensor


class IndexingOps:
  def __getitem__(self, index) -> Tensor:
    """Basic indexing (ints, slices with any step, None, Ellipsis) by movement ops, and integer tensor (or list)
    indices by a one-hot mask and a sum (torch's placement of the broadcast index dims). Lists and tuples of ints
    (or of int tensors) inside the index are tensor indices. Out-of-range tensor indices give 0 (TENSOR.GETITEM.range;
    torch raises, and so does CHECK_INDEX=1, API.INDEX.checked)."""
    idx = list(index) if isinstance(index, tuple) else [index]
    # a list, tuple or array inside the index is an integer tensor index (TENSOR.GETITEM.sequence, torch's rule)
    idx = [_as_index(i, self.device) if isinstance(i, (list, tuple, np.ndarray)) else i for i in idx]
    idx = [validate.integer(i, "index", "TENSOR.GETITEM") if _int_like(i) else i for i in idx]
    for i in idx:
      if not (i is None or i is Ellipsis or isinstance(i, (int, slice, Tensor))) or isinstance(i, bool):
        raise SpecTypeError("TENSOR.GETITEM", f"unsupported index {i!r} of type {type(i).__name__}")
      if isinstance(i, Tensor) and not dtypes.is_int(i.dtype):
        raise SpecIndexError("TENSOR.GETITEM", f"tensor indices must be integers, not {i.dtype!r}")
      if isinstance(i, slice):
        for part in (i.start, i.stop, i.step):
          if part is not None: validate.integer(part, "slice", "TENSOR.GETITEM")
        if i.step == 0: validate.nonzero_step(0, "slice step")
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if used > self.ndim: raise SpecIndexError("TENSOR.GETITEM",
                                              f"too many indices ({used}) for a tensor of {self.ndim} "
                                              "dims")
    if sum(i is Ellipsis for i in idx) > 1:
      raise SpecIndexError("TENSOR.GETITEM", "an index can only have a single ellipsis")
    tensors = [i.shape for i in idx if isinstance(i, Tensor)]
    try:   # tensor indices broadcast together (TENSOR.GETITEM.sequence), else torch's IndexError, before any graph
      functools.reduce(_broadcast_shape, tensors, ())
    except SpecRuntimeError:
      raise SpecIndexError("TENSOR.GETITEM", "tensor indices of shapes "
                           f"{', '.join(str(t) for t in tensors)} do not broadcast together") from None
    if Ellipsis in [i for i in idx if not isinstance(i, Tensor)]:
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx[e:e + 1] = [slice(None)] * (self.ndim - used)
    else: idx += [slice(None)] * (self.ndim - used)
    # basic indexing: each entry of `idx` that is not None consumes one axis of self
    x, ax, newshape, rest = self, 0, [], []   # rest: per axis of the result, None (sliced) or the index tensor
    for i in idx:
      if i is None:
        newshape.append(1)
        rest.append(None)
        continue
      n = x.shape[ax]
      if isinstance(i, int):
        if not -n <= i < n:
          raise SpecIndexError("TENSOR.GETITEM", f"index {i} is out of bounds for axis {ax} with size {n}")
        i %= n
        x = x.shrink(tuple((i, i + 1) if k == ax else None for k in range(x.ndim)))
      elif isinstance(i, slice):
        start, stop, step = i.indices(n)
        cnt = len(range(start, stop, step))
        if cnt == 0: bounds = (0, 0)
        elif step > 0: bounds = (start, start + (cnt - 1) * step + 1)
        else: bounds = (start + (cnt - 1) * step, start + 1)
        x = x.shrink(tuple(bounds if k == ax else None for k in range(x.ndim)))
        if step < 0: x = x.flip(ax)
        x = x._stride(ax, abs(step))
        newshape.append(x.shape[ax])
        rest.append(None)
      else:
        if checked_indices(): check_index_range(i, n, "TENSOR.GETITEM.range", f"index into axis {ax}", negative=True)
        newshape.append(n)
        rest.append(i)
      ax += 1
    x = x.reshape(newshape)
    tix = [k for k, r in enumerate(rest) if r is not None]
    return x if not tix else x._gather(tix, [rest[k] for k in tix])

  def _gather(self, axes: list[int], index: list[Tensor]) -> Tensor:
    """Advanced indexing of `axes` by broadcast integer tensors: compare each index with an arange (one-hot) and
    reduce the selected element. The reduction has at most one nonzero term, so it is exact; bools use MAX. Floats
    are summed as values, which is differentiable (each source element gets its selections' cotangents), and where
    that sum is 0 the sign of a selected -0.0 is restored from a second sum of the bit patterns (BITCAST to the
    same-size int, which carries no gradient) as bits - (0 - sum): the value of bits, the derivative of the sum."""
    for t in index:
      if not dtypes.is_int(t.dtype):
        raise SpecIndexError("TENSOR.GETITEM", f"tensor indices must be integers, not {t.dtype!r}")
    bshape = index[0].shape
    for t in index[1:]: bshape = _broadcast_shape(bshape, t.shape)
    others = [k for k in range(self.ndim) if k not in axes]
    k, nb = len(axes), len(bshape)
    sizes = [self.shape[a] for a in axes]
    x = self.permute(others + axes)
    x = x.reshape(tuple(self.shape[o] for o in others) + (1,) * nb + tuple(sizes))
    mask = None
    for j, (t, n) in enumerate(zip(index, sizes)):
      t = t._expand_to(bshape)
      t = (t < 0).where(t + n, t)
      ar = Tensor.arange(n, device=self.device).reshape((1,) * (nb + j) + (n,) + (1,) * (k - j - 1))
      one = t.reshape(bshape + (1,) * k) == ar
      mask = one if mask is None else mask & one
    red = tuple(range(x.ndim - k, x.ndim))
    if x.dtype == dtypes.bool: out = mask.where(x, False)._reduce(Ops.MAX, red, False)
    elif dtypes.is_int(x.dtype): out = mask.where(x, 0)._reduce(Ops.ADD, red, False)
    else:
      it = _BITS_INT[x.dtype.itemsize]
      bits = mask.where(x.bitcast(it), 0)._reduce(Ops.ADD, red, False).bitcast(x.dtype)
      out = mask.where(x, 0)._reduce(Ops.ADD, red, False)
      out = (out == 0).where(bits - (0 - out), out)
    # torch: adjacent index tensors put their dims where the first one was; separated ones put them in front
    no = len(others)
    pos = axes[0] if axes == list(range(axes[0], axes[0] + k)) else 0
    return out.permute(list(range(pos)) + list(range(no, no + nb)) + list(range(pos, no)))


def _int_like(i) -> bool:
  """An index entry that stands for an int: an int subclass or numpy integer, not a bool (TENSOR.GETITEM)."""
  return not isinstance(i, (bool, np.bool_, Tensor)) and isinstance(i, (int, np.integer))


def _as_index(seq, device: str) -> Tensor:
  """A (nested) list or tuple of ints, or of int tensors, or a numpy array, as one integer tensor index."""
  if isinstance(seq, (list, tuple)) and any(isinstance(v, (Tensor, list, tuple)) for v in seq):
    parts = [v if isinstance(v, Tensor) else _as_index(v, device) if isinstance(v, (list, tuple))
             else Tensor(v, device=device) for v in seq]
    return Tensor.stack(*parts)
  return Tensor(seq, device=device)
