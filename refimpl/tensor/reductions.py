"""Reductions: sum, prod, max, min, mean, var, std, argmax, argmin, any, all, softmax, logsumexp and the
cumulative ops (REDUCE_AXIS, spec/uop.md; accumulation dtypes DT.SUM)."""
from __future__ import annotations

import math


from refimpl.dtype import DTypeLike, dtypes, least_upper_float, sum_acc_dtype, to_dtype
from refimpl.helpers import SpecIndexError, SpecValueError
from refimpl.tensor import validate
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor.args import _axis
from refimpl.tensor.core import Tensor


class ReductionOps:
  def _axes(self, axis) -> tuple[int, ...]:
    """The reduced axes, sorted: all for None, else each an axis of self named once (API.ARGS.axes); a 0-d tensor
    takes axis 0 or -1 and reduces nothing."""
    if axis is None: return tuple(range(self.ndim))
    axes = validate.axes(axis, self.ndim)
    return tuple(sorted(axes)) if self.ndim else ()

  def _no_identity(self, axis, name: str) -> None:
    """max, min, argmax and argmin have no value over zero elements (API.ARGS.empty-reduce, torch's IndexError)."""
    if axis is None and self.numel() == 0:
      raise SpecIndexError("API.ARGS.empty-reduce", f"{name}() of an empty tensor of shape {self.shape}: the "
                           "reduction has no identity; give an axis")
    if axis is not None and any(self.shape[a] == 0 for a in self._axes(axis)):
      raise SpecIndexError("API.ARGS.empty-reduce",
                           f"{name}(axis={axis}) over an empty axis of shape {self.shape}: the "
                           "reduction has no identity")

  def _reduce(self, op: Ops, axis, keepdim: bool) -> Tensor:
    axes = self._axes(axis)
    if not axes: return self   # nothing to reduce (a 0-d tensor, or axis=())
    ret = Tensor(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes)))
    return ret if keepdim else ret.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

  def sum(self, axis=None, keepdim: bool = False, dtype: DTypeLike | None = None) -> Tensor:
    """Sum over `axis` (int, tuple or None for all). Accumulates in sum_acc_dtype (DT.SUM: int32 for small ints and
    bool where torch uses int64); float16/bfloat16 sums come back in the input type; `dtype` overrides both."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out

  def prod(self, axis=None, keepdim: bool = False, dtype: DTypeLike | None = None) -> Tensor:
    """Product over `axis`, accumulated like sum (DT.SUM; torch uses int64 for integer inputs)."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out

  def max(self, axis=None, keepdim: bool = False) -> Tensor:
    """Maximum over `axis`; NaN propagates (OP.MAX.nan). Over zero elements it is refused
    (API.ARGS.empty-reduce)."""
    self._no_identity(axis, "max")
    return self._max(axis, keepdim)

  def _max(self, axis=None, keepdim: bool = False) -> Tensor:
    """max without the emptiness check, for compositions: over zero elements the dtype's minimum (UOP.REDUCE_AXIS's
    identity), which they never let through."""
    return self._reduce(Ops.MAX, axis, keepdim)

  def _inverse(self) -> Tensor:
    """An order-reversing bijection: -x for floats, ~x for ints (no overflow, unlike -x), not for bool."""
    return -self if dtypes.is_float(self.dtype) else ~self

  def min(self, axis=None, keepdim: bool = False) -> Tensor:
    """Minimum over `axis`, as the inverse of the max of the inverse; refused over zero elements
    (API.ARGS.empty-reduce)."""
    self._no_identity(axis, "min")
    return self._min(axis, keepdim)

  def _min(self, axis=None, keepdim: bool = False) -> Tensor:
    """min without the emptiness check (see _max)."""
    return self._inverse()._max(axis, keepdim)._inverse()

  def mean(self, axis=None, keepdim: bool = False) -> Tensor:
    """Sum divided by the count, in the default float for int/bool inputs; NaN over zero elements."""
    x = self.cast(least_upper_float(self.dtype))
    n = math.prod(self.shape[a] for a in self._axes(axis))
    # divide in the accumulation type (float32 for float16/bfloat16, DT.SUM) before rounding back, so that a sum
    # beyond the dtype's range still gives a representable mean (torch)
    out = x.sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    return out.div(n).cast(x.dtype) if n else (out * math.nan).cast(x.dtype)

  def var(self, axis=None, keepdim: bool = False, correction=1) -> Tensor:
    """Variance: sum((x - mean)^2) / (n - correction) (torch's default correction=1)."""
    x = self.cast(least_upper_float(self.dtype))
    n = math.prod(self.shape[a] for a in self._axes(axis))
    d = x - x.mean(axis, keepdim=True)
    return (d * d).sum(axis, keepdim).div(max(0, n - correction))

  def std(self, axis=None, keepdim: bool = False, correction=1) -> Tensor:
    """sqrt(var). Where the variance is 0 it reaches SQRT through DETACH: SQRT's slope there is inf and the
    variance's is 0, so the chain would give NaN; torch gives 0 (GRAD.CHECK.tensor)."""
    v = self.var(axis, keepdim, correction)
    return (v == 0).where(v.detach(), v).sqrt()

  def var_mean(self, axis=None, keepdim: bool = False, correction=1) -> tuple[Tensor, Tensor]:
    """(var, mean) over `axis`, each as var and mean compute it (TENSOR.VAR_MEAN; torch.var_mean)."""
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

  def std_mean(self, axis=None, keepdim: bool = False, correction=1) -> tuple[Tensor, Tensor]:
    """(std, mean) over `axis`, each as std and mean compute it (TENSOR.VAR_MEAN; torch.std_mean)."""
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  def argmax(self, axis=None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (NaN counts as the maximum, as in torch), over the flattened tensor for
    axis=None. The result is int32 (tinygrad; torch returns int64). Refused over zero elements
    (API.ARGS.empty-reduce)."""
    self._no_identity(axis, "argmax")
    if axis is None:
      out = self.flatten().argmax(0)
      return out.reshape((1,) * self.ndim) if keepdim else out
    ax = _axis(axis, self.ndim)
    n = self.shape[ax] if self.ndim else 1
    x = self.reshape(1) if self.ndim == 0 else self
    m = x._max(ax, keepdim=True)
    hit = x == m
    if dtypes.is_float(x.dtype): hit = hit | x.isnan()
    # count down from n so that the max over the hits picks the first one
    down = Tensor.arange(n, 0, -1, device=self.device).reshape(tuple(n if i == ax else 1 for i in range(x.ndim)))
    out = n - hit.where(down, 0)._max(ax, keepdim=True)
    if self.ndim == 0: return out.reshape(())
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(x.shape) if i != ax))

  def argmin(self, axis=None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum (argmax of the inverse)."""
    self._no_identity(axis, "argmin")
    x = self.logical_not() if self.dtype == dtypes.bool else self._inverse()
    return x.argmax(axis, keepdim)

  def any(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether any element is nonzero (False over zero elements)."""
    return self.cast(dtypes.bool)._max(axis, keepdim)

  def all(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether every element is nonzero (True over zero elements)."""
    return self.logical_not().any(axis, keepdim).logical_not()

  def softmax(self, axis=-1, dtype: DTypeLike | None = None) -> Tensor:
    """e**(x - max) / sum(e**(x - max)) along `axis`."""
    x = self.cast(dtype) if dtype is not None else self.cast(least_upper_float(self.dtype))
    e = (x - x._max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)

  def log_softmax(self, axis=-1, dtype: DTypeLike | None = None) -> Tensor:
    """x - max - log(sum(e**(x - max))) along `axis`."""
    x = self.cast(dtype) if dtype is not None else self.cast(least_upper_float(self.dtype))
    d = x - x._max(axis, keepdim=True)
    return d - d.exp().sum(axis, keepdim=True).log()

  def logsumexp(self, axis=None, keepdim: bool = False) -> Tensor:
    """log(sum(e**x)) computed as m + log(sum(e**(x - m))) with m the max (0 where the max is infinite, so that an
    all -inf slice gives -inf as in torch)."""
    x = self.cast(least_upper_float(self.dtype))
    m = x._max(axis, keepdim=True)
    # a group holding +inf sums to +inf whatever its finite elements are: they get no gradient (torch), and pass
    # through DETACH so that their e**x, which may overflow, cannot make the chain inf/inf = NaN
    x = ((m == math.inf) & (x != math.inf)).where(x.detach(), x)
    m = m.isinf().where(0, m)
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(n for i, n in enumerate(self.shape) if i not in self._axes(axis)))

  def cumsum(self, axis: int = 0) -> Tensor:
    """Running sum along `axis` (accumulated like sum, DT.SUM): the axis is padded with n-1 zeros in front and each
    output reads a window of n, made by movement ops alone, then summed."""
    ax = _axis(axis, self.ndim)
    if self.ndim == 0: return self.sum()
    n = self.shape[ax]
    # an empty axis has nothing to sum; the result keeps the dtype sum would give it (float16 stays float16)
    if n == 0: return self if self.dtype in (dtypes.float16, dtypes.bfloat16) else self.cast(sum_acc_dtype(self.dtype))
    x = self.transpose(ax, -1) if ax != self.ndim - 1 else self
    x = x.pad(((0, 0),) * (x.ndim - 1) + ((n - 1, 0),))._windows(n, 1, 1).sum(-1)
    x = x.cast(self.dtype) if self.dtype in (dtypes.float16, dtypes.bfloat16) else x
    return x.transpose(ax, -1) if ax != self.ndim - 1 else x

  def _windows(self, k: int, s: int, d: int) -> Tensor:
    """Sliding windows over the last axis: (..., n) -> (..., o, k) with out[..., i, j] = x[..., i*s + j*d] and
    o = (n - d*(k-1) - 1) // s + 1. Made by movement ops alone: the axis is tiled k times and read back in rows of
    n + d, which shifts each row by d; then the row starts are strided by s."""
    *pre, n = self.shape
    o = (n - d * (k - 1) - 1) // s + 1
    if o <= 0: raise SpecValueError("UOP.SHRINK", f"window of {k} (dilation {d}) does not fit in {n}")
    if s % d == 0 and s >= k * d:
      # windows that do not overlap (pooling's default stride = kernel): window i is the start of block i of s
      # values, so a split of the axis into blocks reads the same elements without tiling it k times; the gradient
      # is then a pad and a reshape instead of a sum over the k tiled copies with every index divided by k
      x = self.pad(((0, 0),) * len(pre) + ((0, o * s - n),))   # a negative amount cuts (TENSOR.PAD.negative)
      return x.reshape(*pre, o, s).shrink(tuple([None] * (len(pre) + 1) + [(0, k * d)]))._stride(len(pre) + 1, d)
    x = self.reshape(*pre, 1, n).expand(*pre, k, n).reshape(*pre, k * n)
    x = x.pad(((0, 0),) * len(pre) + ((0, k * d),)).reshape(*pre, k, n + d)
    x = x.shrink(tuple([None] * (len(pre) + 1) + [(0, (o - 1) * s + 1)]))._stride(len(pre) + 1, s)
    return x.transpose(-1, -2)
