"""Neural-network functional ops: sliding windows, convolutions, attention, one_hot, dropout and
the normalisations (spec/nn.md)."""
from __future__ import annotations

import math
from typing import Sequence


from refimpl.dtype import DTypeLike, dtypes, least_upper_dtype, least_upper_float
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.tensor import validate
from refimpl.tensor.args import _axis, _conv_padding, _tuple
from refimpl.tensor.checked import check_index_range, checked_indices
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
    broadcast multiply with the weight and a sum over (Cin // groups, *kernel). A negative padding amount cuts that
    side instead (TENSOR.CONV.negative-padding, through pad's TENSOR.PAD.negative)."""
    validate.kind(isinstance(weight, Tensor), "NN.CONV.args", f"weight must be a Tensor, not {type(weight).__name__}")
    if weight.ndim < 3 or self.ndim != weight.ndim:   # NN.CONV.args: (N, Cin, *spatial) and (Cout, Cin/g, *kernel)
      raise SpecRuntimeError("NN.CONV.args", f"conv2d: input {self.shape} and weight {weight.shape} need the same "
                             "number of dims, at least 3")
    groups = validate.positive(groups, "groups")
    ks = weight.shape[2:]
    m = len(ks)
    bs, cin = self.shape[:2]
    cout, cpg = weight.shape[:2]
    if cin != cpg * groups or cout % groups: raise SpecRuntimeError("UOP.RESHAPE", f"conv2d: input {self.shape} with "
                                                             f"weight {weight.shape} and groups={groups}")
    st, dl = _tuple(stride, m, "stride"), _tuple(dilation, m, "dilation")
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

  # ---- nn functional (refimpl.nn) ----
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                   dropout_p: float = 0.0, is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value over the last two axes, as torch's function (NN.ATTENTION): a
    bool mask keeps the positions where it is True, a float mask is added; `is_causal` keeps j <= i. enable_gqa
    shares each key/value head among query heads (axis -3) by repeat_interleave (TENSOR.ATTENTION.gqa)."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise SpecValueError("NN.ATTENTION", f"query, key and value need at least 2 axes, got {self.shape}, {key.shape}, "
                      f"{value.shape}")
    if enable_gqa:
      if min(self.ndim, key.ndim, value.ndim) < 3 or key.shape[-3] != value.shape[-3] or key.shape[-3] == 0 \
         or self.shape[-3] % key.shape[-3]:
        raise SpecRuntimeError("TENSOR.ATTENTION.gqa",
                               f"query heads {self.shape[-3:-2]} must be a multiple of the key and "
                        f"value heads {key.shape[-3:-2]}, {value.shape[-3:-2]} (axis -3)")
      group = self.shape[-3] // key.shape[-3]
      key, value = key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
    if self.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
      raise SpecRuntimeError("NN.ATTENTION", f"query {self.shape}, key {key.shape} and value {value.shape} do not fit")
    if is_causal:
      if attn_mask is not None: raise SpecValueError("NN.ATTENTION", "give either attn_mask or is_causal, not both")
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
    if not dtypes.is_int(self.dtype): raise SpecTypeError("NN.ONE_HOT", f"labels must be integers, not {self.dtype!r}")
    num_classes = validate.integer(num_classes, "num_classes", "NN.ONE_HOT")
    if num_classes == -1: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    if num_classes != -1 and num_classes < 0: raise SpecValueError("NN.ONE_HOT", f"num_classes={num_classes} is "
                                                                   "negative (-1: infer it from the labels)")
    if checked_indices(): check_index_range(self, num_classes, "NN.ONE_HOT.range", "one_hot label")
    if num_classes < 0: raise SpecValueError("NN.ONE_HOT", f"num_classes={num_classes} is negative")
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
      raise SpecRuntimeError("NN.CONV_TRANSPOSE", f"input {self.shape} does not match weight {weight.shape}")
    cin, cpg = weight.shape[:2]
    groups = validate.positive(groups, "groups")
    if self.shape[1] != cin or cin % groups:
      raise SpecRuntimeError("NN.CONV_TRANSPOSE", f"input {self.shape} with weight {weight.shape} and groups={groups}")
    st, dl = _tuple(stride, m, "stride"), _tuple(dilation, m, "dilation")
    pd, op = _tuple(padding, m, "padding", least=0), _tuple(output_padding, m, "output_padding", least=0)
    if any(len(t) != m for t in (st, dl, pd, op)) or min(st + dl) < 1 or min(pd + op) < 0:
      raise SpecValueError("NN.CONV_TRANSPOSE", f"stride {stride}, dilation {dilation}, padding {padding} and "
                      f"output_padding {output_padding} for {m} spatial axes")
    # torch: the extra output rows must lie within one stride (or one dilation) of the last computed one
    if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
      raise SpecValueError("NN.CONV_TRANSPOSE",
                           f"output_padding {op} must be smaller than stride {st} or dilation {dl}")
    out = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in zip(self.shape[2:], st, pd, dl, ks, op)]
    if min(out) < 1 or min(self.shape[2:]) < 1:
      raise SpecValueError("NN.CONV_TRANSPOSE", f"input {self.shape} gives the empty output size {out}")
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
    if not 0 <= p <= 1: raise SpecValueError("NN.DROPOUT", f"p={p} is outside [0, 1]")
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

  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along `dim` (torch.nn.functional.normalize; TENSOR.NORMALIZE): the norm is
    sum(|x|^p)^(1/p) (p = 1 and 2 without pow), p = inf the largest |x|, p = 0 the count of nonzeros. Computed in
    float32 or wider and rounded once to the input's float dtype (ints: the default float). Along an empty dim the
    result is empty for every p (TENSOR.NORMALIZE.empty): the internal _max needs no identity there."""
    out_dt = least_upper_float(self.dtype)
    x = self.cast(least_upper_dtype(out_dt, dtypes.float32))
    d = _axis(dim, self.ndim) if self.ndim else None
    a = x.abs()
    if p == 0: norm = (x != 0).sum(d, keepdim=True).cast(x.dtype)
    elif p == math.inf: norm = a._max(d, keepdim=True)
    elif p == 1: norm = a.sum(d, keepdim=True)
    elif p == 2: norm = _safe_root((a * a).sum(d, keepdim=True), Tensor.sqrt)
    elif p > 0: norm = _safe_root(a.pow(p).sum(d, keepdim=True), lambda s: s.pow(1 / p))
    else: raise SpecValueError("TENSOR.NORMALIZE", f"p={p} must be >= 0")
    return (x / norm.maximum(eps)).cast(out_dt)

  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis=1) -> Tensor:
    """(x - mean) * invstd * weight + bias, each of mean, invstd, weight and bias laid along `axis` (an int or
    tuple; invstd may instead have the input's full shape) (NN.BATCHNORM.F). weight and bias may be None."""
    axes = tuple(_axis(a, self.ndim) for a in ((axis,) if isinstance(axis, int) else axis))
    shape = tuple(n if i in axes else 1 for i, n in enumerate(self.shape))
    def along(t: Tensor, name: str) -> Tensor:
      if t.numel() != math.prod(shape):
        raise SpecRuntimeError("NN.BATCHNORM.F", f"{name} of shape {t.shape} for axes {axes} of {self.shape}")
      return t.reshape(shape)
    x = self - along(mean, "mean")
    x = x * (invstd if invstd.shape == self.shape else along(invstd, "invstd"))
    if weight is not None: x = x * along(weight, "weight")
    return x if bias is None else x + along(bias, "bias")


def _safe_root(s: Tensor, root) -> Tensor:
  """root(s), with the root fed 1 where s = 0 (and s returned there): its derivative at 0 is infinite, and a zero
  row's norm is below eps anyway, where normalize takes no gradient through the norm (GRAD.T.normalize, torch's).
  A NaN sum is not > 0 either and comes back as NaN: NaN in a row makes the row NaN (TENSOR.NORMALIZE)."""
  positive = s > 0
  return positive.where(root(positive.where(s, 1)), s)
