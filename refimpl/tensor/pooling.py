"""Pooling and resampling: max and average pooling (spec/nn.md via tests/test_nn.py and the catalogue), max_pool2d's
indices, max_unpool2d and interpolate (spec/tensor_shape.md). Windows are movement ops (`_pool`), selections are
one-hot masks reduced exactly (one nonzero term), so values pass through unchanged."""
from __future__ import annotations

import math
from fractions import Fraction

from refimpl.dtype import dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.uop import Ops
from refimpl.tensor.args import _BITS_INT, _conv_padding, _tuple
from refimpl.tensor.checked import check_index_range, checked_indices
from refimpl.tensor.core import Tensor


def _select(one: Tensor, w: Tensor) -> Tensor:
  """The element of w's last axis that the bool mask `one` marks (at most one per row; 0 where none). Floats: the
  sum of one term is exact; the bit pattern restores the sign of a selected zero (as Tensor._gather)."""
  red = (max(one.ndim, w.ndim) - 1,)
  if w.dtype == dtypes.bool: return one.where(w, False)._reduce(Ops.MAX, red, False)
  if not dtypes.is_float(w.dtype): return one.where(w, 0)._reduce(Ops.ADD, red, False)
  picked = one.where(w, 0)._reduce(Ops.ADD, red, False)
  bits = one.where(w.bitcast(_BITS_INT[w.dtype.itemsize]), 0)._reduce(Ops.ADD, red, False).bitcast(w.dtype)
  return (picked == 0).where(bits - (0 - picked), picked)


def _first(mask: Tensor, last: bool = False) -> Tensor:
  """`mask` keeping only its first (or last) True along the last axis."""
  k = mask.shape[-1]
  rank = Tensor.arange(1, k + 1, device=mask.device) if last else Tensor.arange(k, 0, -1, device=mask.device)
  return mask & (mask.where(rank, 0)._max(-1, keepdim=True) == rank)


class PoolingOps:
  def _pool_setup(self, kernel_size, stride, dilation, padding, ceil_mode):
    """Kernel sizes, strides and dilations >= 1 (API.ARGS.positive), one per pooled axis (API.ARGS.count), and paddings
    from 0 to half the kernel (API.ARGS.pool-padding, torch's bound)."""
    ks = _tuple(kernel_size, len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2, "kernel_size")
    m = len(ks)
    if m > self.ndim: raise SpecValueError("API.ARGS.count", f"kernel_size={kernel_size} pools {m} axes of a tensor of "
                                           f"shape {self.shape}")
    st = _tuple(stride if stride is not None else ks, m, "stride")
    dl = _tuple(dilation, m, "dilation")
    pads = _conv_padding(padding, m)
    for k, (pb, pa) in zip(ks, pads):
      if not (0 <= pb <= k // 2 and 0 <= pa <= k // 2):
        raise SpecValueError("API.ARGS.pool-padding", f"padding={padding} for kernel_size={kernel_size}: each amount "
                             "must be from 0 to half the kernel size")
    extra = []
    for n, k, s, d, (pb, pa) in zip(self.shape[-m:], ks, st, dl, pads):
      span = n + pb + pa - d * (k - 1) - 1
      o = (-(-span // s) if ceil_mode else span // s) + 1
      # torch (ceil_mode): the last window must start inside the input or the left padding
      if ceil_mode and (o - 1) * s >= n + pb: o -= 1
      extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + pb + pa)))
    return ks, st, dl, pads, extra

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 return_indices: bool = False):
    """Max over windows of the trailing len(kernel_size) axes; padding counts as -inf (torch.nn.functional). For
    floats the gradient goes, as torch's, wholly to the first maximum of a window (the last NaN if any), not split
    among ties (GRAD.REDUCE.MAX.tie): the value is read back through a one-hot mask of that position.
    return_indices also gives that position as a flat index into the window's input plane, in default_int
    (TENSOR.MAX_POOL2D.indices)."""
    ks, st, dl, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    m = len(ks)
    full = tuple((0, 0) for _ in range(self.ndim - m)) + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    inside = Tensor.full(self.shape, True, device=self.device).pad(full)
    x = inside.where(self.pad(full), dtypes.min(self.dtype))
    w = x._pool(ks, st, dl)
    if not dtypes.is_float(self.dtype) and not return_indices: return w._max(tuple(range(-m, 0)))
    w = w.reshape(w.shape[:-m] + (math.prod(ks),))
    # a padding position (-inf) never takes the gradient from an input -inf it ties with
    hit = (w == w._max(-1, keepdim=True)) & inside._pool(ks, st, dl).reshape(w.shape)
    if dtypes.is_float(self.dtype):
      # the last NaN if the window has one, else the first maximum, by one reduction: NaN positions rank above every
      # maximum (k+1 .. 2k, the later the higher), maxima by their order (k .. 1, the earlier the higher); the separate
      # any-NaN, last-NaN and first-maximum reductions this replaces were three kernels, each reading every window
      k = w.shape[-1]
      pos = Tensor.arange(k, device=self.device)
      rank = w.isnan().where(pos + (k + 1), hit.where(k - pos, 0))
      one = (rank == rank._max(-1, keepdim=True)) & (rank > 0)
    else: one = _first(hit)
    values = _select(one, w)
    if not return_indices: return values
    plane = self.shape[-m:]
    pos = Tensor.arange(math.prod(plane), device=self.device).reshape(plane).pad(full[-m:])._pool(ks, st, dl)
    return values, _select(one, pos.reshape(pos.shape[:-m] + (w.shape[-1],)))

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> Tensor:
    """Mean over windows of the trailing len(kernel_size) axes. The divisor is the window's count of input elements,
    plus its explicit padding when count_include_pad; the extra right padding of ceil_mode is never counted (torch)."""
    ks, st, dl, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    m = len(ks)
    lead = tuple((0, 0) for _ in range(self.ndim - m))
    full = lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    x = self.cast(least_upper_float(self.dtype))
    # sum and divide in the accumulation type (DT.SUM), rounding to the dtype once at the end (as mean does)
    sums = x.pad(full)._pool(ks, st, dl).sum(tuple(range(-m, 0)), dtype=sum_acc_dtype(x.dtype))
    if count_include_pad:   # the explicit padding counts, the ceil_mode extra does not
      ones = Tensor.full(tuple(n + pb + pa for n, (pb, pa) in zip(self.shape[-m:], pads)), 1.0, dtype=x.dtype,
                         device=self.device).pad(tuple((0, e) for e in extra))
    else: ones = Tensor.full(self.shape[-m:], 1.0, dtype=x.dtype, device=self.device).pad(full[-m:])
    count = ones._pool(ks, st, dl).sum(tuple(range(-m, 0)))
    return (sums / count).cast(x.dtype)

  def max_unpool2d(self, indices: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0,
                   output_size=None) -> Tensor:
    """The partial inverse of max_pool2d (torch's max_unpool2d, any number of spatial axes as tinygrad): input
    (N, C, *spatial) and integer indices of the same shape, each a flat position in an output plane; each value is
    put at its position, zeros elsewhere (TENSOR.MAX_UNPOOL2D). Where several elements name one position the last
    one (in row-major order) is kept; a position outside the plane is dropped."""
    if self.ndim < 3 or indices.shape != self.shape:
      raise SpecRuntimeError("TENSOR.MAX_UNPOOL2D",
                             f"input {self.shape} and indices {indices.shape} must be equal, >= 3-D")
    if not dtypes.is_int(indices.dtype):
      raise SpecTypeError("TENSOR.MAX_UNPOOL2D", f"indices must be integers, not {indices.dtype!r}")
    bs, c, *spatial = self.shape
    m = len(spatial)
    if output_size is None:
      ks, dl = _tuple(kernel_size, m), _tuple(dilation, m)
      st = _tuple(stride if stride is not None else ks, m)
      pads = _conv_padding(padding, m)
      output_size = tuple((n - 1) * s - pb - pa + d * (k - 1) + 1
                          for n, k, s, d, (pb, pa) in zip(spatial, ks, st, dl, pads))
    output_size = tuple(output_size)[-m:]
    if len(output_size) != m or min(output_size, default=1) < 0:
      raise SpecValueError("TENSOR.MAX_UNPOOL2D", f"output size {output_size} for {m} spatial axes")
    plane, n = math.prod(output_size), math.prod(spatial)
    if checked_indices(): check_index_range(indices, plane, "TENSOR.MAX_UNPOOL2D.range", "max_unpool2d index")
    hit = indices.reshape(bs, c, 1, n) == Tensor.arange(plane, device=self.device).reshape(plane, 1)
    return _select(_first(hit, last=True), self.reshape(bs, c, 1, n)).reshape(bs, c, *output_size)

  def interpolate(self, size, mode: str = "linear", align_corners: bool = False) -> Tensor:
    """Resample the last len(size) axes to `size` (torch.nn.functional.interpolate on (N, C, *spatial), any number of
    leading axes as tinygrad). 'linear' (bi-, trilinear for 2 or 3 axes) blends the two neighbours w0*x[i0] + w1*x[i1]
    axis by axis, last axis first, in float32 or wider; 'nearest' takes x[floor(i*in/out)], 'nearest-exact'
    x[floor((i+1/2)*in/out)] (TENSOR.INTERPOLATE). The result has the input's dtype."""
    size = tuple(size) if isinstance(size, (tuple, list)) else (size,)
    if not 0 < len(size) <= self.ndim or not all(isinstance(s, int) and s >= 1 for s in size):
      raise SpecValueError("TENSOR.INTERPOLATE", f"size={size} for shape {self.shape}: 1 to {self.ndim} sizes >= 1")
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise SpecValueError("TENSOR.INTERPOLATE.mode", f"mode={mode!r} is not linear, nearest or nearest-exact")
    if align_corners and mode != "linear":
      raise SpecValueError("TENSOR.INTERPOLATE.mode", "align_corners needs mode='linear'")
    if min(self.shape[-len(size):]) < 1:
      raise SpecValueError("TENSOR.INTERPOLATE", f"cannot resample the empty axes of {self.shape}")
    ct = least_upper_dtype(self.dtype, dtypes.float32) if dtypes.is_float(self.dtype) else dtypes.default_float
    x = self
    for ax in range(self.ndim - 1, self.ndim - len(size) - 1, -1):
      n, out = self.shape[ax], size[ax - self.ndim]
      along = tuple(out if i == ax else 1 for i in range(self.ndim))
      if mode != "linear":   # TENSOR.INTERPOLATE.nearest: the index quotient exactly
        half = Fraction(1, 2) if mode == "nearest-exact" else 0
        x = x._gather([ax], [Tensor([min(int((i + half) * n / out), n - 1) for i in range(out)], device=self.device)])
        continue
      lo, hi, w1 = _linear_taps(n, out, align_corners)
      w0t = Tensor([float(1 - w) for w in w1], dtype=ct, device=self.device).reshape(along)
      w1t = Tensor([float(w) for w in w1], dtype=ct, device=self.device).reshape(along)
      xl = x._gather([ax], [Tensor(lo, device=self.device)]).cast(ct)
      xh = x._gather([ax], [Tensor(hi, device=self.device)]).cast(ct)
      x = xl * w0t + xh * w1t
    return x.cast(self.dtype)


def _linear_taps(n: int, out: int, align_corners: bool) -> tuple[list[int], list[int], list[Fraction]]:
  """For each output position: the two input neighbours and the exact weight of the second (TENSOR.INTERPOLATE.linear).
  The source coordinate is i*(n-1)/(out-1) with align_corners (0 for out = 1), else (i+1/2)*n/out - 1/2 raised to 0;
  the second neighbour is the next element, or the first again at the last one (torch's rule); an axis of unchanged
  size takes each element as both neighbours."""
  # an axis that keeps its size reads each element twice, x[i] * 1 + x[i] * 0 (torch's: an infinity gives NaN)
  if n == out: return list(range(n)), list(range(n)), [Fraction(0)] * n
  lo, hi, w1 = [], [], []
  for i in range(out):
    if align_corners: src = Fraction(i * (n - 1), out - 1) if out > 1 else Fraction(0)
    else: src = max(Fraction(2 * i + 1, 2) * n / out - Fraction(1, 2), Fraction(0))
    i0 = min(math.floor(src), n - 1)
    lo.append(i0)
    hi.append(min(i0 + 1, n - 1))
    w1.append(src - i0)
  return lo, hi, w1
