"""The layer catalogue: one entry (`Layer`) per public layer class of nn (spec/nn.md), each checked through the adapter
against torch in float64 with the same parameters copied in (conformance/tests/test_layers.py).

An entry says how to build the layer (`make`, a call over `nn` and the drawn hyperparameters), how to call it
(`call`, over `layer` and the inputs), and torch's output as an expression (`torch`) over the inputs, the layer's
tensors by their attribute names (weight, bias, weight_ih, ...; None where the layer has none) and the
hyperparameters, with `torch`, `F` and the helpers of `TORCH_HELPERS`. `draw` gives the hyperparameters and the shapes
of the inputs and parameters: the parameter shapes are the spec's layouts (NN.LINEAR, NN.CONV, ...), which the
implementation's own tensors must have before the drawn values replace them (NN.LAYER).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

__all__ = ["Layer", "LAYERS", "TORCH_HELPERS"]


@dataclass(frozen=True, repr=False)
class Layer:
  """One layer entry.

  name        the nn class ('Conv2d'), with a '.variant' suffix for a second entry of the same class
  make        the constructor call over `nn` and the hyperparameters
  torch       torch's output over the inputs, tensors and hyperparameters, in float64
  draw        () -> strategy of {"hyper": {...}, "inputs": {name: shape}, "params": {name: shape or None},
              "ranges": {name: (lo, hi)}}: every param is set and differentiated (None: the layer must have no
              such tensor); ranges are those of index inputs
  clauses     the spec clauses the entry checks
  tolerance   key of the forward bound (ACC.<key>.<dtype>), grad_tolerance that of the gradients
  n           (hyper, input shapes) -> the length of the layer's reductions, the `n` of its bounds
  call        the call over `layer` and the inputs
  mode        'eval' or 'train': the mode of the forward and gradient checks (Tensor.training, NN.LAYER)
  index_inputs  inputs that are int32 indices (not differentiated), drawn inside their `ranges`
  training    whether the running-statistics property runs (train steps, then eval: NN.BATCHNORM.running)
  inv_std     for a norm layer, (hyper, x) -> the largest 1 / sqrt(var + eps) over its groups: the `x` of ACC.NORM and
              ACC.GRAD.NORM is measured in units of the group's standard deviation
  """
  name: str
  make: str
  torch: str
  draw: Callable[[], st.SearchStrategy]
  clauses: tuple[str, ...]
  tolerance: str
  n: Callable[[dict, dict], int]
  grad_tolerance: str = "GRAD"
  call: str = "layer(x)"
  mode: str = "eval"
  index_inputs: tuple[str, ...] = ()
  training: bool = False
  inv_std: Callable[[dict, Any], float] | None = None
  dtypes: tuple[str, ...] = ("float32",)

  def __repr__(self) -> str: return f"Layer({self.name!r})"

  @property
  def cls(self) -> str:
    """The nn class the entry covers."""
    return self.name.split(".")[0]


# ---------------------------------------------------------------------------------------------------- torch helpers

def _pad_first(x, padding, m: int):
  """x padded as tinygrad's two-per-axis form says (last axis first: left, right, top, bottom), which is also
  torch.nn.functional.pad's order; any other padding form is left to the convolution."""
  import torch.nn.functional as F
  if isinstance(padding, (list, tuple)) and len(padding) == 2 * m: return F.pad(x, tuple(padding))
  return x


def _conv_padding(padding, m: int):
  """The padding torch's convolution takes once _pad_first has applied a two-per-axis form."""
  if isinstance(padding, (list, tuple)) and len(padding) == 2 * m: return 0
  return tuple(padding) if isinstance(padding, list) else padding


def _lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
  """torch.nn.LSTMCell in float64 with the given tensors: (h', c')."""
  import torch
  cell = torch.nn.LSTMCell(x.shape[1], h.shape[1], bias=bias_ih is not None, dtype=torch.float64)
  tensors = {"weight_ih": weight_ih, "weight_hh": weight_hh}
  if bias_ih is not None: tensors |= {"bias_ih": bias_ih, "bias_hh": bias_hh}
  return torch.func.functional_call(cell, tensors, (x, (h, c)))


def _bn_factor(momentum, count: int) -> float:
  """The weight of the batch's statistics in the running ones: momentum, or 1/count for torch's cumulative average
  (momentum=None, NN.BATCHNORM.running)."""
  return 1.0 / count if momentum is None else momentum


TORCH_HELPERS = {"pad_first": _pad_first, "conv_padding": _conv_padding, "lstm_cell": _lstm_cell,
                 "bn_factor": _bn_factor, "math": math}


# ---------------------------------------------------------------------------------------------------- draws

_EPS = st.sampled_from([1e-5, 1e-3, 0.1])


def _sizes(k: int, lo: int = 1, hi: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
  return st.tuples(*(st.integers(lo, hi) for _ in range(k)))


def _per_axis(m: int, lo: int, hi: int) -> st.SearchStrategy:
  """An int, or one int per spatial axis (a tuple when m > 1)."""
  return st.one_of(st.integers(lo, hi), _sizes(m, lo, hi)) if m > 1 else st.integers(lo, hi)


def _tuple(v, m: int) -> tuple[int, ...]:
  return (v,) * m if isinstance(v, int) else tuple(v)


@st.composite
def _linear(draw):
  fin, fout, bias = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.booleans())
  lead = draw(st.lists(st.integers(1, 3), max_size=2))
  return {"hyper": {"fin": fin, "fout": fout, "bias": bias}, "inputs": {"x": (*lead, fin)},
          "params": {"weight": (fout, fin), "bias": (fout,) if bias else None}}


@st.composite
def _conv(draw, m: int, paddings: str):
  """A convolution of m spatial axes. paddings: 'forms' draws an int, one int per axis, 'same' or 'valid';
  'pairs' always draws tinygrad's two-per-axis form (last axis first), with its pairs independent (asymmetric)."""
  groups = draw(st.integers(1, 2))
  cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
  k = draw(_per_axis(m, 1, 3))
  dilation = draw(_per_axis(m, 1, 2))
  if paddings == "pairs": padding = draw(st.lists(st.integers(0, 2), min_size=2 * m, max_size=2 * m))
  else: padding = draw(st.one_of(_per_axis(m, 0, 2), st.sampled_from(["same", "valid"])))
  stride = 1 if padding == "same" else draw(_per_axis(m, 1, 2))
  ks, dl = _tuple(k, m), _tuple(dilation, m)
  if isinstance(padding, list) and len(padding) == 2 * m: pads = [padding[2 * i] + padding[2 * i + 1]
                                                                   for i in reversed(range(m))]
  elif isinstance(padding, str): pads = [0] * m
  else: pads = [2 * p for p in _tuple(padding, m)]
  # the output is not empty: every spatial size covers the dilated kernel once padded
  spatial = tuple(max(draw(st.integers(1, 4)), d * (kk - 1) + 1 - p) for kk, d, p in zip(ks, dl, pads))
  bias = draw(st.booleans())
  return {"hyper": {"cin": cin, "cout": cout, "k": k, "stride": stride, "padding": padding, "dilation": dilation,
                    "groups": groups, "bias": bias},
          "inputs": {"x": (draw(st.integers(1, 2)), cin, *spatial)},
          "params": {"weight": (cout, cin // groups, *ks), "bias": (cout,) if bias else None}}


@st.composite
def _conv_transpose(draw, m: int):
  groups = draw(st.integers(1, 2))
  cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
  k, stride, dilation = draw(_per_axis(m, 1, 3)), draw(_per_axis(m, 1, 2)), draw(_per_axis(m, 1, 2))
  ks, st_, dl = _tuple(k, m), _tuple(stride, m), _tuple(dilation, m)
  output_padding = draw(st.integers(0, min(max(s, d) for s, d in zip(st_, dl)) - 1))
  spatial = tuple(draw(st.integers(1, 3)) for _ in range(m))
  # torch's output size (n-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1 must be at least 1
  room = min((n - 1) * s + d * (kk - 1) + output_padding for n, s, d, kk in zip(spatial, st_, dl, ks))
  padding = draw(_per_axis(m, 0, max(0, min(1, room // 2))))
  bias = draw(st.booleans())
  return {"hyper": {"cin": cin, "cout": cout, "k": k, "stride": stride, "padding": padding,
                    "output_padding": output_padding, "dilation": dilation, "groups": groups, "bias": bias},
          "inputs": {"x": (draw(st.integers(1, 2)), cin, *spatial)},
          "params": {"weight": (cin, cout // groups, *ks), "bias": (cout,) if bias else None}}


@st.composite
def _batchnorm(draw, spatial_axes: tuple[int, ...]):
  """BatchNorm over (N, C, *spatial) with len(spatial) drawn from spatial_axes; at least two values per channel
  (training with one is an error, NN.BATCHNORM)."""
  c, ndim = draw(st.integers(1, 3)), draw(st.sampled_from(spatial_axes))
  spatial = draw(_sizes(ndim, 1, 3))
  n = draw(st.integers(1 if math.prod(spatial) > 1 else 2, 3))
  affine, track = draw(st.booleans()), draw(st.booleans())
  hyper = {"c": c, "eps": draw(_EPS), "affine": affine, "track": track,
           "momentum": draw(st.sampled_from([0.1, 0.5, None]))}
  return {"hyper": hyper, "inputs": {"x": (n, c, *spatial)},
          "params": {"weight": (c,) if affine else None, "bias": (c,) if affine else None}}


@st.composite
def _layernorm(draw):
  norm = draw(_sizes(draw(st.integers(1, 2)), 1, 4))
  lead = draw(st.lists(st.integers(1, 3), max_size=2))
  affine = draw(st.booleans())
  shape = norm[0] if len(norm) == 1 and draw(st.booleans()) else norm   # an int or a tuple
  return {"hyper": {"shape": shape, "eps": draw(_EPS), "affine": affine}, "inputs": {"x": (*lead, *norm)},
          "params": {"weight": norm if affine else None, "bias": norm if affine else None}}


@st.composite
def _per_channel(draw, spatial_lo: int, spatial_hi: int, grouped: bool):
  """(N, C, *spatial) with affine (C,) tensors: InstanceNorm, GroupNorm (C = groups * channels per group) and
  LayerNorm2d."""
  groups = draw(st.integers(1, 3)) if grouped else 1
  c = groups * draw(st.integers(1, 2))
  spatial = draw(_sizes(draw(st.integers(spatial_lo, spatial_hi)), 1, 3))
  if (c // groups if grouped else 1) * math.prod(spatial) == 1:   # torch refuses to normalise a single value
    spatial = (2, *spatial[1:]) if spatial else (2,)
  affine = draw(st.booleans())
  return {"hyper": {"groups": groups, "c": c, "eps": draw(_EPS), "affine": affine},
          "inputs": {"x": (draw(st.integers(1, 2)), c, *spatial)},
          "params": {"weight": (c,) if affine else None, "bias": (c,) if affine else None}}


@st.composite
def _rmsnorm(draw):
  dim, affine = draw(st.integers(1, 5)), draw(st.booleans())
  lead = draw(st.lists(st.integers(1, 3), max_size=2))
  return {"hyper": {"dim": dim, "eps": draw(st.sampled_from([1e-6, 1e-3, 0.1])), "affine": affine},
          "inputs": {"x": (*lead, dim)}, "params": {"weight": (dim,) if affine else None}}


@st.composite
def _embedding(draw):
  """No empty index tensors: torch's embedding backward cannot reshape an empty gradient (torch 2.13)."""
  vocab, embed = draw(st.integers(1, 5)), draw(st.integers(1, 4))
  return {"hyper": {"vocab": vocab, "embed": embed}, "inputs": {"x": draw(st.lists(st.integers(1, 3), max_size=2))},
          "params": {"weight": (vocab, embed)}, "ranges": {"x": (0, vocab - 1)}}


@st.composite
def _lstm_cell(draw):
  n, fin, hidden, bias = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.booleans())
  b = (4 * hidden,) if bias else None
  return {"hyper": {"fin": fin, "hidden": hidden, "bias": bias},
          "inputs": {"x": (n, fin), "h": (n, hidden), "c": (n, hidden)},
          "params": {"weight_ih": (4 * hidden, fin), "weight_hh": (4 * hidden, hidden), "bias_ih": b, "bias_hh": b}}


# ---------------------------------------------------------------------------------------------------- entries

def _inv_std(x, axes: tuple[int, ...], eps: float, centred: bool = True) -> float:
  """The largest 1 / sqrt(var + eps) over the groups that reduce `axes` of x (float64; mean of squares for RMSNorm)."""
  x = np.asarray(x, np.float64)
  if x.size == 0: return 0.0
  spread = x.var(axis=axes) if centred else (x * x).mean(axis=axes)
  return float((1 / np.sqrt(spread + eps)).max())


def _norm(axes: Callable[[dict, Any], tuple[int, ...]], centred: bool = True) -> Callable[[dict, Any], float]:
  return lambda h, x: _inv_std(x, axes(h, x), h["eps"], centred)


def _trailing_axes(h: dict, x) -> tuple[int, ...]:
  k = 1 if isinstance(h["shape"], int) else len(h["shape"])
  return tuple(range(x.ndim - k, x.ndim))


def _grouped(h: dict, x) -> float:
  """GroupNorm's groups: (N, groups, rest)."""
  return _inv_std(np.asarray(x).reshape(x.shape[0], h["groups"], -1), (2,), h["eps"])


def _conv_n(h: dict, shapes: dict) -> int:
  """Products summed per output of a convolution, and the bias."""
  return shapes["x"][1] // h["groups"] * math.prod(_tuple(h["k"], len(shapes["x"]) - 2)) + 1


def _transpose_n(h: dict, shapes: dict) -> int:
  return shapes["x"][1] * math.prod(_tuple(h["k"], len(shapes["x"]) - 2)) + 1


def _conv_entry(name: str, m: int, paddings: str) -> Layer:
  f = "F.conv1d" if m == 1 else "F.conv2d"
  return Layer(name, f"nn.{name.split('.')[0]}(cin, cout, k, stride=stride, padding=padding, dilation=dilation, "
               "groups=groups, bias=bias)",
               f"{f}(pad_first(x, padding, {m}), weight, bias, stride, conv_padding(padding, {m}), dilation, groups)",
               lambda: _conv(m, paddings), ("NN.LAYER", "NN.CONV", "NN.CONV.padding"), "CONV", _conv_n)


def _transpose_entry(name: str, m: int) -> Layer:
  f = "F.conv_transpose1d" if m == 1 else "F.conv_transpose2d"
  return Layer(name, f"nn.{name}(cin, cout, k, stride=stride, padding=padding, output_padding=output_padding, "
               "dilation=dilation, groups=groups, bias=bias)",
               f"{f}(x, weight, bias, stride, padding, output_padding, groups, dilation)",
               lambda: _conv_transpose(m), ("NN.LAYER", "NN.CONV", "NN.CONV_TRANSPOSE"), "CONV", _transpose_n)


def _batchnorm_entry(name: str, spatial_axes: tuple[int, ...]) -> Layer:
  # in training (the mode checked) and when the statistics are not tracked, the batch's own are used
  return Layer(name, f"nn.{name}(c, eps=eps, affine=affine, track_running_stats=track, momentum=momentum)",
               "F.batch_norm(x, None, None, weight, bias, True, 0.0, eps)", lambda: _batchnorm(spatial_axes),
               ("NN.LAYER", "NN.BATCHNORM", "NN.BATCHNORM.train"), "NORM",
               lambda h, s: math.prod(s["x"]) // s["x"][1], "GRAD.NORM", mode="train", training=True,
               inv_std=_norm(lambda h, x: tuple(a for a in range(x.ndim) if a != 1)))


LAYERS: list[Layer] = [
  Layer("Linear", "nn.Linear(fin, fout, bias=bias)", "F.linear(x, weight, bias)", _linear, ("NN.LAYER", "NN.LINEAR"),
        "MATMUL", lambda h, s: h["fin"] + 1),
  _conv_entry("Conv1d", 1, "forms"),
  _conv_entry("Conv1d.pairs", 1, "pairs"),
  _conv_entry("Conv2d", 2, "forms"),
  _conv_entry("Conv2d.pairs", 2, "pairs"),
  _transpose_entry("ConvTranspose1d", 1),
  _transpose_entry("ConvTranspose2d", 2),
  _batchnorm_entry("BatchNorm", (0, 1)),
  _batchnorm_entry("BatchNorm2d", (2,)),
  _batchnorm_entry("BatchNorm3d", (3,)),
  Layer("LayerNorm", "nn.LayerNorm(shape, eps=eps, elementwise_affine=affine)",
        "F.layer_norm(x, (shape,) if isinstance(shape, int) else shape, weight, bias, eps)", _layernorm,
        ("NN.LAYER", "NN.LAYERNORM"), "NORM",
        lambda h, s: math.prod((h["shape"],) if isinstance(h["shape"], int) else h["shape"]), "GRAD.NORM",
        inv_std=_norm(_trailing_axes)),
  Layer("LayerNorm2d", "nn.LayerNorm2d(c, eps=eps, elementwise_affine=affine)",
        "F.layer_norm(x.permute(0, 2, 3, 1), (c,), weight, bias, eps).permute(0, 3, 1, 2)",
        lambda: _per_channel(2, 2, False), ("NN.LAYER", "NN.LAYERNORM2D"), "NORM", lambda h, s: h["c"], "GRAD.NORM",
        inv_std=_norm(lambda h, x: (1,))),
  Layer("InstanceNorm", "nn.InstanceNorm(c, eps=eps, affine=affine)",
        "F.instance_norm(x, weight=weight, bias=bias, eps=eps)", lambda: _per_channel(1, 3, False),
        ("NN.LAYER", "NN.INSTANCENORM"), "NORM", lambda h, s: math.prod(s["x"][2:]), "GRAD.NORM",
        inv_std=_norm(lambda h, x: tuple(range(2, x.ndim)))),
  Layer("GroupNorm", "nn.GroupNorm(groups, c, eps=eps, affine=affine)", "F.group_norm(x, groups, weight, bias, eps)",
        lambda: _per_channel(0, 2, True), ("NN.LAYER", "NN.GROUPNORM"), "NORM",
        lambda h, s: math.prod(s["x"][1:]) // h["groups"], "GRAD.NORM", inv_std=_grouped),
  Layer("RMSNorm", "nn.RMSNorm(dim, eps=eps, elementwise_affine=affine)", "F.rms_norm(x, (dim,), weight, eps)",
        _rmsnorm, ("NN.LAYER", "NN.RMSNORM"), "NORM", lambda h, s: h["dim"], "GRAD.NORM",
        inv_std=_norm(lambda h, x: (x.ndim - 1,), centred=False)),
  Layer("Embedding", "nn.Embedding(vocab, embed)", "F.embedding(x.long(), weight)", _embedding,
        ("NN.LAYER", "NN.EMBEDDING"), "EMBEDDING", lambda h, s: h["vocab"], index_inputs=("x",)),
  Layer("LSTMCell", "nn.LSTMCell(fin, hidden, bias=bias)", "lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)",
        _lstm_cell, ("NN.LAYER", "NN.LSTMCELL"), "LSTMCELL", lambda h, s: h["fin"] + h["hidden"] + 2,
        call="layer(x, (h, c))"),
]
