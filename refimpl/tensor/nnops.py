"""Neural-network functional ops: sliding windows, convolutions, pooling, attention, one_hot, dropout and
the normalisations (spec/nn.md)."""
from __future__ import annotations

import math
from typing import Sequence


from refimpl.dtype import DTypeLike, dtypes, least_upper_float, sum_acc_dtype
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.tensor.args import _BITS_INT, _axis, _conv_padding, _tuple
from refimpl.tensor.core import Tensor


class NNOps:
  def _pool(self, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> Tensor:
    """Sliding windows over the last len(k) axes: (..., n1, .., nm) -> (..., o1, .., om, k1, .., km)."""
    m = len(k)
    x, p = self, self.ndim - m
    for i in range(m):
      # x is (pre, o1..o_i, n_{i+1}..n_m, k1..k_i): window axis p+i moved last gives (..., o_{i+1}, k_{i+1}) at the end
      ax = p + i
      x = x.permute([a for a in range(x.ndim) if a != ax] + [ax])._windows(k[i], s[i], d[i])
      L = x.ndim
      x = x.permute(list(range(p + i)) + [L - 2] + list(range(p + i, L - 2)) + [L - 1])
    return x

  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
             dtype: DTypeLike | None = None) -> Tensor:
    """Convolution (torch's cross-correlation) over the trailing spatial axes of (N, Cin, *spatial) with weight
    (Cout, Cin // groups, *kernel). padding is an int, one per spatial axis, or two per axis in tinygrad's order
    (last axis first: (left, right, top, bottom)). Built as im2col: pad, sliding windows by movement ops,
    broadcast multiply with the weight and a sum over (Cin // groups, *kernel)."""
    ks = weight.shape[2:]
    m = len(ks)
    bs, cin = self.shape[:2]
    cout, cpg = weight.shape[:2]
    if cin != cpg * groups or cout % groups: raise SpecError("UOP.RESHAPE", f"conv2d: input {self.shape} with "
                                                             f"weight {weight.shape} and groups={groups}")
    st, dl = _tuple(stride, m), _tuple(dilation, m)
    pads = _conv_padding(padding, m)
    return self.pad(((0, 0), (0, 0), *pads))._conv(weight, bias, groups, st, dl, dtype)

  def _conv(self, weight: Tensor, bias: Tensor | None, groups: int, st, dl, dtype=None,
            valid: Tensor | None = None) -> Tensor:
    """conv2d of an already padded input. `valid` (a bool tensor of the input's shape) marks the elements that take
    part: the products of the others are WHERE'd to 0 instead of computed as 0 * w, which is NaN for an infinite w."""
    ks = weight.shape[2:]
    m = len(ks)
    bs, cout, cpg = self.shape[0], weight.shape[0], weight.shape[1]
    x = self._pool(ks, st, dl)                                      # (N, Cin, *o, *k)
    os = x.shape[2:2 + m]
    x = x.reshape(bs, groups, 1, cpg, *os, *ks)
    w = weight.reshape(1, groups, cout // groups, cpg, *((1,) * m), *ks)
    prod = x * w
    if valid is not None: prod = valid._pool(ks, st, dl).reshape(x.shape).where(prod, 0)
    out = prod.sum((3, *range(4 + m, 4 + 2 * m)), dtype=dtype)
    out = out.reshape(bs, cout, *os)
    return out if bias is None else out + bias.reshape(1, -1, *((1,) * m))

  def _pool_setup(self, kernel_size, stride, dilation, padding, ceil_mode):
    ks = _tuple(kernel_size, 2)
    m = len(ks)
    st = _tuple(stride if stride is not None else ks, m)
    dl = _tuple(dilation, m)
    pads = _conv_padding(padding, m)
    extra = []
    for n, k, s, d, (pb, pa) in zip(self.shape[-m:], ks, st, dl, pads):
      span = n + pb + pa - d * (k - 1) - 1
      o = (-(-span // s) if ceil_mode else span // s) + 1
      # torch (ceil_mode): the last window must start inside the input or the left padding
      if ceil_mode and (o - 1) * s >= n + pb: o -= 1
      extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + pb + pa)))
    return ks, st, dl, pads, extra

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False) -> Tensor:
    """Max over windows of the trailing len(kernel_size) axes; padding counts as -inf (torch.nn.functional). For
    floats the gradient goes, as torch's, wholly to the first maximum of a window (the last NaN if any), not split
    among ties (GRAD.REDUCE.MAX.tie): the value is read back through a one-hot mask of that position."""
    ks, st, dl, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    m = len(ks)
    full = tuple((0, 0) for _ in range(self.ndim - m)) + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    inside = Tensor.full(self.shape, True, device=self.device).pad(full)
    x = inside.where(self.pad(full), dtypes.min(self.dtype))
    w = x._pool(ks, st, dl)
    if not dtypes.is_float(self.dtype): return w.max(tuple(range(-m, 0)))
    w = w.reshape(w.shape[:-m] + (math.prod(ks),))
    k = w.shape[-1]
    # a padding position (-inf) never takes the gradient from an input -inf it ties with
    hit = (w == w.max(-1, keepdim=True)) & inside._pool(ks, st, dl).reshape(w.shape)
    nan = w.isnan()
    down = Tensor.arange(k, 0, -1, device=self.device)   # counts down: the max over the hits marks the first
    first = hit & (hit.where(down, 0).max(-1, keepdim=True) == down)
    up = Tensor.arange(1, k + 1, device=self.device)
    last_nan = nan & (nan.where(up, 0).max(-1, keepdim=True) == up)
    one = nan.max(-1, keepdim=True).where(last_nan, first)
    # one term, so the sums are exact; the bit pattern keeps the sign of a zero (as in _gather)
    red = (w.ndim - 1,)
    picked = one.where(w, 0)._reduce(Ops.ADD, red, False)
    bits = one.where(w.bitcast(_BITS_INT[w.dtype.itemsize]), 0)._reduce(Ops.ADD, red, False).bitcast(w.dtype)
    return (picked == 0).where(bits - (0 - picked), picked)

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

  # ---- nn functional (refimpl.nn) ----
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                   dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value over the last two axes, as torch's function (NN.ATTENTION): a
    bool mask keeps the positions where it is True, a float mask is added; `is_causal` keeps j <= i."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise SpecError("NN.ATTENTION", f"query, key and value need at least 2 axes, got {self.shape}, {key.shape}, "
                      f"{value.shape}")
    if self.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
      raise SpecError("NN.ATTENTION", f"query {self.shape}, key {key.shape} and value {value.shape} do not fit")
    if is_causal:
      if attn_mask is not None: raise SpecError("NN.ATTENTION", "give either attn_mask or is_causal, not both")
      n, m = self.shape[-2], key.shape[-2]
      attn_mask = Tensor.arange(n, device=self.device).reshape(n, 1) >= Tensor.arange(m, device=self.device)
    scores = self.matmul(key.transpose(-1, -2)) * (1.0 / math.sqrt(self.shape[-1]))
    if attn_mask is not None:
      scores = attn_mask.where(scores, -math.inf) if attn_mask.dtype == dtypes.bool else scores + attn_mask
    return scores.softmax(-1).dropout(dropout_p).matmul(value)

  # Layers, normalisations and losses composed from the Tensor ops above, so that autograd needs no rule of its own
  # (GRAD.T, spec/gradients.md). Their meaning, and where it departs from torch or tinygrad, is spec/nn.md.

  def sequential(self, ll) -> Tensor:
    """Apply each callable of `ll` in turn: f_n(...f_2(f_1(self))) (NN.SEQUENTIAL)."""
    x = self
    for f in ll: x = f(x)
    return x

  def one_hot(self, num_classes: int = -1) -> Tensor:
    """A new last axis of size num_classes holding 1 at each label and 0 elsewhere, in the default int dtype
    (NN.ONE_HOT). num_classes=-1 takes max + 1, which realizes the labels. A label outside [0, num_classes) gives a
    row of zeros (torch raises)."""
    if not dtypes.is_int(self.dtype): raise SpecError("NN.ONE_HOT", f"labels must be integers, not {self.dtype!r}")
    if num_classes == -1: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    if num_classes < 0: raise SpecError("NN.ONE_HOT", f"num_classes={num_classes} is negative")
    return self._class_mask(num_classes, self.ndim).where(1, 0)

  def _class_mask(self, n: int, axis: int) -> Tensor:
    """Labels -> a bool mask with a class axis of size n inserted at `axis`: True where the class equals the label."""
    classes = Tensor.arange(n, device=self.device).reshape(tuple(n if i == axis else 1 for i in range(self.ndim + 1)))
    return self.unsqueeze(axis) == classes

  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1,
                       padding=0, output_padding=0) -> Tensor:
    """Transposed convolution (torch's conv_transpose2d, the input-gradient of conv2d) of (N, Cin, *spatial) with
    weight (Cin, Cout // groups, *kernel) (NN.CONV_TRANSPOSE). Built from conv2d: the input is spread out with
    stride-1 zeros between neighbours, padded by dilation*(k-1) - padding on each side (output_padding more at the
    end; a negative amount cuts), and convolved at stride 1 with the kernel flipped and its in/out axes swapped per
    group. Output size per axis: (n-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1."""
    ks = weight.shape[2:]
    m = len(ks)
    if m == 0 or self.ndim != m + 2:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} does not match weight {weight.shape}")
    cin, cpg = weight.shape[:2]
    if groups < 1 or self.shape[1] != cin or cin % groups:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} with weight {weight.shape} and groups={groups}")
    st, dl, pd, op = (_tuple(v, m) for v in (stride, dilation, padding, output_padding))
    if any(len(t) != m for t in (st, dl, pd, op)) or min(st + dl) < 1 or min(pd + op) < 0:
      raise SpecError("NN.CONV_TRANSPOSE", f"stride {stride}, dilation {dilation}, padding {padding} and "
                      f"output_padding {output_padding} for {m} spatial axes")
    # torch: the extra output rows must lie within one stride (or one dilation) of the last computed one
    if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
      raise SpecError("NN.CONV_TRANSPOSE", f"output_padding {op} must be smaller than stride {st} or dilation {dl}")
    out = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in zip(self.shape[2:], st, pd, dl, ks, op)]
    if min(out) < 1 or min(self.shape[2:]) < 1:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} gives the empty output size {out}")
    # the spread and padded zeros are marked invalid, so that they add nothing even against an infinite weight
    # (torch scatters only the input's own products)
    x, valid = self, Tensor.full(self.shape, True, device=self.device)
    amounts = [(d * (k - 1) - p, d * (k - 1) - p + o) for k, d, p, o in zip(ks, dl, pd, op)]
    for i, s in enumerate(st): x, valid = x._spread(2 + i, s), valid._spread(2 + i, s)
    x, valid = x._pad_or_cut(amounts), valid._pad_or_cut(amounts)
    w = weight.reshape(groups, cin // groups, cpg, *ks).transpose(1, 2).flip(tuple(range(3, 3 + m)))
    w = w.reshape(groups * cpg, cin // groups, *ks)
    return x._conv(w, bias, groups, (1,) * m, dl, valid=valid)

  def _spread(self, ax: int, s: int) -> Tensor:
    """s-1 zeros between neighbours along axis `ax`: n -> (n-1)*s + 1 (pad each element to s, drop the tail)."""
    if s == 1: return self
    n = self.shape[ax]
    x = self.unsqueeze(ax + 1).pad(tuple((0, s - 1) if i == ax + 1 else (0, 0) for i in range(self.ndim + 1)))
    x = x.reshape(self.shape[:ax] + (n * s,) + self.shape[ax + 1:])
    return x.shrink(tuple((0, (n - 1) * s + 1) if i == ax else None for i in range(self.ndim)))

  def _pad_or_cut(self, amounts: Sequence[tuple[int, int]]) -> Tensor:
    """Per trailing axis (before, after): a positive amount pads with zeros, a negative one shrinks."""
    lead = [(0, 0)] * (self.ndim - len(amounts))
    x = self.pad(lead + [(max(b, 0), max(a, 0)) for b, a in amounts])
    cut = [None] * len(lead) + [(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(amounts, x.shape[len(lead):])]
    return x.shrink(cut)

  def dropout(self, p: float = 0.5) -> Tensor:
    """In training (Tensor.training), zero each element with probability p and scale the others by 1/(1-p)
    (NN.DROPOUT); otherwise, or for p = 0, the tensor itself. The mask is drawn with Tensor.rand, so manual_seed makes
    it reproducible, and it is a constant to differentiation. As in torch the input is multiplied by the mask, so a
    dropped NaN or infinity still gives NaN."""
    if not 0 <= p <= 1: raise SpecError("NN.DROPOUT", f"p={p} is outside [0, 1]")
    if not Tensor.training or p == 0: return self
    if p == 1: return self * 0
    keep = Tensor.rand(*self.shape, device=self.device) >= p
    return self * (keep.cast(self.dtype) * (1 / (1 - p)))

  def layernorm(self, axis=-1, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over `axis` (an int or tuple), with the biased variance as torch's layer_norm
    (NN.LAYERNORM); no affine part (nn.LayerNorm adds it). The variance sees the mean through DETACH: its derivative
    with respect to the mean is 0 in exact arithmetic, and differentiating it would only add rounding noise
    (GRAD.T.layernorm)."""
    mean = self.mean(axis, keepdim=True)
    centred = self - mean.detach()
    return (self - mean) * ((centred * centred).mean(axis, keepdim=True) + eps).rsqrt()

  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis=1) -> Tensor:
    """(x - mean) * invstd * weight + bias, each of mean, invstd, weight and bias laid along `axis` (an int or
    tuple; invstd may instead have the input's full shape) (NN.BATCHNORM.F). weight and bias may be None."""
    axes = tuple(_axis(a, self.ndim) for a in ((axis,) if isinstance(axis, int) else axis))
    shape = tuple(n if i in axes else 1 for i, n in enumerate(self.shape))
    def along(t: Tensor, name: str) -> Tensor:
      if t.numel() != math.prod(shape):
        raise SpecError("NN.BATCHNORM.F", f"{name} of shape {t.shape} for axes {axes} of {self.shape}")
      return t.reshape(shape)
    x = self - along(mean, "mean")
    x = x * (invstd if invstd.shape == self.shape else along(invstd, "invstd"))
    if weight is not None: x = x * along(weight, "weight")
    return x if bias is None else x + along(bias, "bias")
