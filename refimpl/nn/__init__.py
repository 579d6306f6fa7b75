"""refimpl.nn: layers with tinygrad's names, arguments and attribute names (spec/nn.md, NN.LAYER). Each layer holds its
parameters as Tensors in attributes named as torch and tinygrad name them (`weight`, `bias`, `running_mean`, ...),
which is how nn.state finds them, and is called on a Tensor. The arithmetic lives in Tensor methods (conv2d,
conv_transpose2d, layernorm, batchnorm, ...); a layer only adds its parameters and their initialisation."""
from __future__ import annotations

import importlib
import math

import numpy as np

from refimpl.dtype import dtypes
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.tensor import Tensor
from refimpl.tensor import validate
from refimpl.tensor.checked import check_index_range, checked_indices

__all__ = ["Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm2d",
           "BatchNorm3d", "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm", "RMSNorm", "Embedding", "LSTMCell"]


def _uniform(*shape: int, bound: float) -> Tensor:
  """Samples from U(-bound, bound): torch's and tinygrad's default for weights and biases (NN.INIT)."""
  return Tensor.uniform(*shape, low=-bound, high=bound)


def _filled(*shape: int, value: float, dtype=np.float32) -> Tensor:
  """A tensor of `value` in a buffer of its own. Tensor.ones/zeros are CONST graphs, and equal graphs share one
  buffer once realized: a layer's bias and running_mean, both zeros, would then alias, and updating one in place
  (assign) would overwrite the other (NN.LAYER)."""
  return Tensor(np.full(shape, value, dtype))


def _kernel(kernel_size, m: int) -> tuple[int, ...]:
  """One kernel size >= 1 per spatial axis (API.ARGS.positive, API.ARGS.count)."""
  return validate.per_axis(kernel_size, m, "kernel_size")


def _scale_channels(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
  """x * weight + bias with weight and bias of shape (C,) laid along axis 1 of (N, C, ...); x itself without them."""
  if weight is None: return x
  per_channel = (1, -1) + (1,) * (x.ndim - 2)
  return x * weight.reshape(per_channel) + bias.reshape(per_channel)


class Linear:
  """y = x @ weight.T + bias with weight (out_features, in_features) (NN.LINEAR)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    in_features, out_features = validate.size(in_features, "in_features"), validate.size(out_features, "out_features")
    # kaiming-uniform with a = sqrt(5) reduces to this bound (NN.INIT); no inputs: nothing to draw
    bound = 1 / math.sqrt(in_features) if in_features else 0.0
    self.weight = _uniform(out_features, in_features, bound=bound)
    self.bias = _uniform(out_features, bound=bound) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
  """Convolution over the trailing spatial axes of (N, in_channels, *spatial) with weight
  (out_channels, in_channels // groups, *kernel_size) (NN.CONV). padding is an int, one int per spatial axis,
  two per axis in tinygrad's last-axis-first order, or torch's 'valid' / 'same' (stride 1 only)."""
  _spatial = 2

  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
               groups: int = 1, bias: bool = True):
    groups = validate.positive(groups, "groups")
    validate.size(in_channels, "in_channels"), validate.size(out_channels, "out_channels")
    if not isinstance(stride, str): validate.per_axis(stride, self._spatial, "stride")
    validate.per_axis(dilation, self._spatial, "dilation")
    if in_channels % groups or out_channels % groups:
      raise SpecValueError("NN.CONV", f"in_channels={in_channels} and out_channels={out_channels} must be multiples of "
                      f"groups={groups}")
    self.kernel_size = _kernel(kernel_size, self._spatial)
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    if isinstance(padding, str) and padding not in ("valid", "same"):
      raise SpecValueError("NN.CONV", f"padding={padding!r} is not 'valid' or 'same'")
    if padding == "same" and any(s != 1 for s in ((stride,) if isinstance(stride, int) else stride)):
      raise SpecValueError("NN.CONV", "padding='same' needs stride 1 (as in torch)")
    self.weight = self._init_weight(in_channels, out_channels, groups)
    bound = 1 / math.sqrt(math.prod(self.weight.shape[1:]))
    self.bias = _uniform(out_channels, bound=bound) if bias else None

  def _init_weight(self, in_channels: int, out_channels: int, groups: int) -> Tensor:
    shape = (out_channels, in_channels // groups, *self.kernel_size)
    return _uniform(*shape, bound=1 / math.sqrt(math.prod(shape[1:])))

  def _padding(self):
    """The padding in a form Tensor.conv2d takes: 'same' becomes tinygrad's two-per-axis form, with the odd extra
    element after, as torch places it."""
    if self.padding == "valid": return 0
    if self.padding != "same": return self.padding
    m = len(self.kernel_size)
    dl = (self.dilation,) * m if isinstance(self.dilation, int) else tuple(self.dilation)
    total = [d * (k - 1) for d, k in zip(dl, self.kernel_size)]
    return [p for t in reversed(total) for p in (t // 2, t - t // 2)]

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                    padding=self._padding())


class Conv1d(Conv2d):
  """Conv2d over one spatial axis: input (N, in_channels, L), weight (out_channels, in_channels // groups, k)."""
  _spatial = 1


class ConvTranspose2d(Conv2d):
  """Transposed convolution (Tensor.conv_transpose2d) with weight (in_channels, out_channels // groups, *kernel_size)
  (NN.CONV). padding is an int or one int per spatial axis."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
               dilation=1, groups: int = 1, bias: bool = True):
    if isinstance(padding, str): raise SpecTypeError("NN.CONV", f"padding={padding!r}: ConvTranspose2d takes ints only")
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    self.output_padding = output_padding

  def _init_weight(self, in_channels: int, out_channels: int, groups: int) -> Tensor:
    # torch takes the fan-in from weight.shape[1:] here too, which is (out_channels // groups) * kernel
    shape = (in_channels, out_channels // groups, *self.kernel_size)
    return _uniform(*shape, bound=1 / math.sqrt(math.prod(shape[1:])))

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                              padding=self.padding, output_padding=self.output_padding)


class ConvTranspose1d(ConvTranspose2d):
  """ConvTranspose2d over one spatial axis: input (N, in_channels, L), weight (in_channels, out_channels // groups, k)
  (NN.CONV)."""
  _spatial = 1


class BatchNorm:
  """Batch normalisation over every axis but axis 1 (channels) of (N, C, ...) (NN.BATCHNORM). In training
  (Tensor.training) it normalises with the batch's mean and biased variance and, when track_running_stats, moves
  running_mean and running_var toward the batch's mean and unbiased variance by `momentum` and counts
  num_batches_tracked; in eval it normalises with the running statistics (with the batch's when they are not
  tracked), as torch's BatchNorm does. momentum=None makes the running statistics cumulative averages of all the
  batches seen (NN.BATCHNORM.running)."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
               momentum: float | None = 0.1):
    sz = validate.size(sz, "sz")
    self.num_features, self.eps, self.track_running_stats, self.momentum = sz, eps, track_running_stats, momentum
    self.weight: Tensor | None = _filled(sz, value=1) if affine else None
    self.bias: Tensor | None = _filled(sz, value=0) if affine else None
    self.running_mean: Tensor | None = None
    self.running_var: Tensor | None = None
    self.num_batches_tracked: Tensor | None = None
    if track_running_stats:
      # statistics, not parameters: requires_grad=False keeps optimizers from training them
      self.running_mean = _filled(sz, value=0).requires_grad_(False)
      self.running_var = _filled(sz, value=1).requires_grad_(False)
      self.num_batches_tracked = _filled(value=0, dtype=np.int64).requires_grad_(False)   # torch: an int64 scalar

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise SpecRuntimeError("NN.BATCHNORM", f"input of shape {x.shape} for {self.num_features} channels")
    if Tensor.training or not self.track_running_stats:
      axes = tuple(a for a in range(x.ndim) if a != 1)
      n = x.numel() // x.shape[1]
      if n < 2 and Tensor.training:
        raise SpecValueError("NN.BATCHNORM", f"training needs more than one value per channel, input {x.shape}")
      mean = x.mean(axes)
      # the biased variance normalises the batch; both statistics are differentiated, the mean inside the variance
      # excepted: d var / d mean is 0 in exact arithmetic, and differentiating it only adds rounding noise
      y = x - mean.detach().reshape(1, -1, *(1,) * (x.ndim - 2))
      var = (y * y).mean(axes)
      if Tensor.training and self.track_running_stats: self._track(mean, var * (n / (n - 1)))
    else: mean, var = self.running_mean, self.running_var
    return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

  def _track(self, mean: Tensor, unbiased_var: Tensor) -> None:
    """Move the running statistics toward the batch's (NN.BATCHNORM.running), in place with assign: the attributes
    keep their Tensor objects (and buffers), so an optimizer or a state dict that holds them sees the new values. As
    in tinygrad the update stays lazy until something realizes it (an optimizer's step realizes its buffers); with
    momentum=None only the new count is realized at once."""
    with Tensor.no_grad:
      m = self.momentum
      if m is None:
        # torch's cumulative average: the count goes first and this batch weighs 1/count. The factor reads a snapshot
        # of the new count in a buffer of its own, made now: a lazy graph on num_batches_tracked would read whatever
        # the counter holds when it is finally realized (EXEC.SCHED.versions), a later count when steps pile up
        count = (self.num_batches_tracked + 1).contiguous().realize()
        self.num_batches_tracked.assign(count)
        m = count.cast(mean.dtype).reciprocal()
      else: self.num_batches_tracked.assign(self.num_batches_tracked + 1)
      self.running_mean.assign((1 - m) * self.running_mean + m * mean.detach())
      self.running_var.assign((1 - m) * self.running_var + m * unbiased_var.detach())


BatchNorm2d = BatchNorm3d = BatchNorm


class LayerNorm:
  """Normalise over the trailing len(normalized_shape) axes, then scale by weight and shift by bias (ones and zeros of
  normalized_shape) when elementwise_affine (NN.LAYERNORM)."""
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape = validate.shape((normalized_shape,) if not isinstance(normalized_shape, (tuple, list))
                                           else tuple(normalized_shape), "normalized_shape")
    self.axis = tuple(range(-len(self.normalized_shape), 0))
    self.eps, self.elementwise_affine = eps, elementwise_affine
    self.weight = _filled(*self.normalized_shape, value=1) if elementwise_affine else None
    self.bias = _filled(*self.normalized_shape, value=0) if elementwise_affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[x.ndim - len(self.normalized_shape):] != self.normalized_shape:
      raise SpecRuntimeError("NN.LAYERNORM", f"input of shape {x.shape} does not end in {self.normalized_shape}")
    x = x.layernorm(self.axis, self.eps)
    return x if not self.elementwise_affine else x * self.weight + self.bias


class LayerNorm2d(LayerNorm):
  """LayerNorm over the channel axis of (N, C, H, W): each pixel's C values are normalised together, then scaled and
  shifted per channel (NN.LAYERNORM2D). Constructed as LayerNorm with one channel count (tinygrad's signature)."""
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    super().__init__(normalized_shape, eps, elementwise_affine)
    if len(self.normalized_shape) != 1:
      raise SpecValueError("NN.LAYERNORM2D", f"normalized_shape={normalized_shape!r} must be one channel count")

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 4 or x.shape[1] != self.normalized_shape[0]:
      raise SpecRuntimeError("NN.LAYERNORM2D", f"input of shape {x.shape} is not (N, {self.normalized_shape[0]}, H, W)")
    # channels last, the LayerNorm over the last axis, channels back in place
    return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class GroupNorm:
  """Split the channels of (N, C, ...) into num_groups groups, normalise each group of each sample over its channels
  and spatial positions, then scale and shift per channel (NN.GROUPNORM)."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    num_groups, num_channels = validate.positive(num_groups, "num_groups"), validate.size(num_channels, "num_channels")
    if num_channels % num_groups:
      raise SpecValueError("NN.GROUPNORM", f"num_channels={num_channels} is not a multiple of num_groups={num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight = _filled(num_channels, value=1) if affine else None
    self.bias = _filled(num_channels, value=0) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels:
      raise SpecRuntimeError("NN.GROUPNORM", f"input of shape {x.shape} for {self.num_channels} channels")
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(-1, self.eps).reshape(x.shape)
    return _scale_channels(x, self.weight, self.bias)


class InstanceNorm:
  """Normalise each channel of each sample of (N, num_features, *spatial) over its spatial positions, then scale
  and shift per channel (NN.INSTANCENORM): torch's InstanceNorm1d/2d/3d with track_running_stats=False, whose affine
  default (False) differs from this one's (True, as tinygrad's)."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = validate.size(num_features, "num_features"), eps
    self.weight = _filled(num_features, value=1) if affine else None
    self.bias = _filled(num_features, value=0) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 3 or x.shape[1] != self.num_features:
      raise SpecRuntimeError("NN.INSTANCENORM", f"input of shape {x.shape} is not (N, {self.num_features}, *spatial)")
    x = x.reshape(x.shape[0], self.num_features, -1).layernorm(-1, self.eps).reshape(x.shape)
    return _scale_channels(x, self.weight, self.bias)


class RMSNorm:
  """x / sqrt(mean(x^2) + eps) over the last axis, times weight (ones of dim) when elementwise_affine (NN.RMSNORM)."""
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight = _filled(validate.size(dim, "dim"), value=1) if elementwise_affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if self.weight is not None and x.shape[-1:] != self.weight.shape:
      raise SpecRuntimeError("NN.RMSNORM", f"input of shape {x.shape} for dim {self.weight.shape[0]}")
    x = x * ((x * x).mean(-1, keepdim=True) + self.eps).rsqrt()
    return x if self.weight is None else x * self.weight


class Embedding:
  """A lookup table: integer indices (...) -> rows of weight (vocab_size, embed_size), giving (..., embed_size)
  (NN.EMBEDDING). An index outside [0, vocab_size) gives a row of zeros (torch raises)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_size, self.embed_size = validate.size(vocab_size, "vocab_size"), validate.size(embed_size, "embed_size")
    # tinygrad's glorot-uniform (torch draws from N(0, 1))
    self.weight = _uniform(vocab_size, embed_size, bound=math.sqrt(6 / max(vocab_size + embed_size, 1)))

  def __call__(self, idx: Tensor) -> Tensor:
    if not isinstance(idx, Tensor) or not dtypes.is_int(idx.dtype):
      raise SpecTypeError("NN.EMBEDDING", f"indices must be an integer Tensor, not {getattr(idx, 'dtype', idx)!r}")
    if checked_indices(): check_index_range(idx, self.vocab_size, "NN.EMBEDDING.range", "Embedding index")
    # select with WHERE over a one-hot mask and sum over the vocabulary: exactly one term is nonzero, and the weight
    # gets its gradient through WHERE (tensor indexing reduces bit patterns, which has no gradient)
    hit = idx._class_mask(self.vocab_size, idx.ndim).unsqueeze(-1)            # (..., vocab, 1)
    return hit.where(self.weight, 0.0).sum(-2)


class LSTMCell:
  """One step of a long short-term memory (NN.LSTMCELL): x (N, input_size) and the state hc = (h, c), each
  (N, hidden_size) (zeros when None), give the new (h, c). weight_ih (4*hidden, input_size), weight_hh
  (4*hidden, hidden) and the biases bias_ih, bias_hh (4*hidden,) stack the gates in torch's order i, f, g, o."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    self.input_size = validate.size(input_size, "input_size")
    self.hidden_size = hidden_size = validate.size(hidden_size, "hidden_size")
    bound = 1 / math.sqrt(hidden_size) if hidden_size else 0.0   # torch's init for the cell's weights (NN.INIT)
    self.weight_ih = _uniform(4 * hidden_size, input_size, bound=bound)
    self.weight_hh = _uniform(4 * hidden_size, hidden_size, bound=bound)
    self.bias_ih = _uniform(4 * hidden_size, bound=bound) if bias else None
    self.bias_hh = _uniform(4 * hidden_size, bound=bound) if bias else None

  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if x.ndim != 2 or x.shape[1] != self.input_size:
      raise SpecRuntimeError("NN.LSTMCELL", f"input of shape {x.shape} is not (N, {self.input_size})")
    state = (x.shape[0], self.hidden_size)
    if hc is None: h = c = Tensor.zeros(*state, dtype=x.dtype, device=x.device)
    else:
      if len(hc) != 2 or any(t.shape != state for t in hc):
        raise SpecRuntimeError("NN.LSTMCELL", f"hc must be (h, c), each of shape {state}, not {[t.shape for t in hc]}")
      h, c = hc
    gates = x.linear(self.weight_ih.transpose(), self.bias_ih) + h.linear(self.weight_hh.transpose(), self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


# optim and state are written alongside this module; import them when they exist so that `nn.optim` and `nn.state`
# work as in tinygrad, without making `import refimpl.nn` fail while one of them is missing.
for _name in ("optim", "state"):
  try: globals()[_name] = importlib.import_module(f"refimpl.nn.{_name}")
  except ModuleNotFoundError as _e:
    if _e.name != f"refimpl.nn.{_name}": raise
