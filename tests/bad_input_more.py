"""The bad-input catalogue, continued: indexing and selection, convolution and pooling, nn layers, losses, state
files, JIT, devices and knobs (spec/api_errors.md); and valid edge input whose value is checked against torch."""
from __future__ import annotations

import json
import struct
from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

from refimpl import Context, Tensor, TinyJit, dtypes, nn
from refimpl.helpers import SpecError
from refimpl.nn.state import load_state_dict, safe_load, safe_save, tar_extract, torch_load
from tests.bad_input_tensor import R, TE, Bad, I, V, checked, o, t

S = SpecError


def u8(raw: bytes, d: str) -> Tensor: return Tensor(list(raw), dtype=dtypes.uint8, device=d)


def safetensors(header: dict, data: bytes = b"", pad: bool = True) -> bytes:
  h = json.dumps(header).encode()
  return struct.pack("<Q", len(h)) + h + data


_F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}

INDEXING = [
  Bad("getitem-int-out-of-range", lambda d: o(d, 2)[5], I, "TENSOR.GETITEM"),
  Bad("getitem-negative-out-of-range", lambda d: o(d, 2)[-3], I, "TENSOR.GETITEM"),
  Bad("getitem-too-many", lambda d: o(d, 2)[0, 0], I, "TENSOR.GETITEM"),
  Bad("getitem-two-ellipsis", lambda d: o(d, 2, 2)[..., ...], I, "TENSOR.GETITEM"),
  Bad("getitem-float", lambda d: o(d, 2)[0.5], TE, "TENSOR.GETITEM"),
  Bad("getitem-str", lambda d: o(d, 2)["a"], TE, "TENSOR.GETITEM"),
  Bad("getitem-float-tensor", lambda d: o(d, 2)[t(d, [0.0])], I, "TENSOR.GETITEM"),
  Bad("getitem-slice-step-0", lambda d: o(d, 4)[::0], V, "API.ARGS.step"),
  Bad("getitem-slice-float", lambda d: o(d, 4)[0.5:2], TE, "TENSOR.GETITEM"),
  Bad("getitem-tensor-checked", checked(lambda d: o(d, 3)[t(d, [7])]), I, "TENSOR.GETITEM.range"),
  Bad("getitem-negative-tensor-checked", checked(lambda d: o(d, 3)[t(d, [-4])]), I, "TENSOR.GETITEM.range"),
  Bad("getitem-list-checked", checked(lambda d: o(d, 2, 3)[:, [0, 3]]), I, "TENSOR.GETITEM.range"),
  Bad("gather-float-index", lambda d: o(d, 3).gather(0, t(d, [0.0])), TE, "TENSOR.GATHER.args"),
  Bad("gather-ndim", lambda d: o(d, 3, 3).gather(0, t(d, [0])), R, "TENSOR.GATHER.args"),
  Bad("gather-shape", lambda d: o(d, 2, 2).gather(0, t(d, [[0, 0, 0]])), R, "TENSOR.GATHER.args"),
  Bad("gather-axis", lambda d: o(d, 3).gather(1, t(d, [0])), I, "API.ARGS.axis"),
  Bad("gather-checked", checked(lambda d: o(d, 3).gather(0, t(d, [3]))), I, "TENSOR.GATHER.range"),
  Bad("gather-negative-checked", checked(lambda d: o(d, 3).gather(0, t(d, [-1]))), I, "TENSOR.GATHER.range"),
  Bad("scatter-checked", checked(lambda d: o(d, 3).scatter(0, t(d, [5]), 2.0)), I, "TENSOR.SCATTER.range"),
  Bad("scatter_reduce-checked", checked(lambda d: o(d, 3).scatter_reduce(0, t(d, [-1]), o(d, 1), "sum")), I,
      "TENSOR.SCATTER.range"),
  Bad("scatter-reduce-name", lambda d: o(d, 3).scatter(0, t(d, [0]), o(d, 1), reduce="max"), V, "TENSOR.SCATTER.args"),
  Bad("scatter-src-dtype", lambda d: o(d, 3).scatter(0, t(d, [0]), t(d, [1])), TE, "TENSOR.SCATTER.args"),
  Bad("scatter-ndim", lambda d: o(d, 3).scatter(0, t(d, [[0]]), o(d, 1, 1)), R, "TENSOR.SCATTER.args"),
  Bad("scatter_reduce-name", lambda d: o(d, 3).scatter_reduce(0, t(d, [0]), o(d, 1), "median"), V,
      "TENSOR.SCATTER_REDUCE.args"),
  Bad("scatter_reduce-bool", lambda d: t(d, [True]).scatter_reduce(0, t(d, [0]), t(d, [True]), "sum"), TE,
      "TENSOR.SCATTER_REDUCE.args"),
  Bad("one_hot-float", lambda d: o(d, 2).one_hot(3), TE, "NN.ONE_HOT"),
  Bad("one_hot-too-big-checked", checked(lambda d: t(d, [3]).one_hot(3)), I, "NN.ONE_HOT.range"),
  Bad("one_hot-float-classes", lambda d: t(d, [1]).one_hot(2.0), TE, "NN.ONE_HOT"),
  Bad("max_unpool2d-checked", checked(lambda d: o(d, 1, 1, 1, 1).max_unpool2d(t(d, [[[[9]]]]))), I,
      "TENSOR.MAX_UNPOOL2D.range"),
  Bad("max_unpool2d-shape", lambda d: o(d, 1, 1, 2, 2).max_unpool2d(t(d, [[[[0]]]])), R, "TENSOR.MAX_UNPOOL2D"),
  Bad("max_unpool2d-float-indices", lambda d: o(d, 1, 1, 1, 1).max_unpool2d(o(d, 1, 1, 1, 1)), TE,
      "TENSOR.MAX_UNPOOL2D"),
]

CONV = [
  Bad("conv2d-stride-negative", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 1, 1, 2, 2), stride=-1), V, "API.ARGS.positive"),
  Bad("conv2d-stride-tuple-0", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 1, 1, 2, 2), stride=(1, 0)), V,
      "API.ARGS.positive"),
  Bad("conv2d-stride-count", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 1, 1, 2, 2), stride=(1, 1, 1)), V,
      "API.ARGS.count"),
  Bad("conv2d-stride-float", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 1, 1, 2, 2), stride=1.5), TE, "API.ARGS.size"),
  Bad("conv2d-groups-0", lambda d: o(d, 1, 2, 4, 4).conv2d(o(d, 2, 2, 2, 2), groups=0), V, "API.ARGS.positive"),
  Bad("conv2d-channels", lambda d: o(d, 1, 3, 4, 4).conv2d(o(d, 1, 2, 2, 2)), R, "UOP.RESHAPE"),
  Bad("conv2d-groups-mismatch", lambda d: o(d, 1, 4, 4, 4).conv2d(o(d, 3, 2, 2, 2), groups=2), R, "UOP.RESHAPE"),
  Bad("conv2d-weight-ndim", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 2, 2)), R, "NN.CONV.args"),
  Bad("conv2d-input-ndim", lambda d: o(d, 4, 4).conv2d(o(d, 1, 1, 2, 2)), R, "NN.CONV.args"),
  Bad("conv2d-weight-not-tensor", lambda d: o(d, 1, 1, 4, 4).conv2d([[1]]), TE, "NN.CONV.args"),
  Bad("conv2d-kernel-too-big", lambda d: o(d, 1, 1, 2, 2).conv2d(o(d, 1, 1, 3, 3)), V, "UOP.SHRINK"),
  Bad("conv2d-padding-count", lambda d: o(d, 1, 1, 4, 4).conv2d(o(d, 1, 1, 2, 2), padding=(1, 1, 1)), V,
      "API.ARGS.count"),
  Bad("conv_transpose2d-stride-0", lambda d: o(d, 1, 1, 2, 2).conv_transpose2d(o(d, 1, 1, 2, 2), stride=0), V,
      "API.ARGS.positive"),
  Bad("conv_transpose2d-padding-negative", lambda d: o(d, 1, 1, 2, 2).conv_transpose2d(o(d, 1, 1, 2, 2), padding=-1),
      V, "API.ARGS.size"),
  Bad("conv_transpose2d-output-padding", lambda d: o(d, 1, 1, 2, 2).conv_transpose2d(o(d, 1, 1, 2, 2),
                                                                                     output_padding=1), V,
      "NN.CONV_TRANSPOSE"),
  Bad("conv_transpose2d-channels", lambda d: o(d, 1, 2, 2, 2).conv_transpose2d(o(d, 1, 1, 2, 2)), R,
      "NN.CONV_TRANSPOSE"),
  Bad("max_pool2d-padding-negative", lambda d: o(d, 1, 1, 4, 4).max_pool2d(padding=-1), V, "API.ARGS.pool-padding"),
  Bad("max_pool2d-dilation-0", lambda d: o(d, 1, 1, 4, 4).max_pool2d(dilation=0), V, "API.ARGS.positive"),
  Bad("max_pool2d-kernel-negative", lambda d: o(d, 1, 1, 4, 4).max_pool2d(kernel_size=(2, -2)), V,
      "API.ARGS.positive"),
  Bad("max_pool2d-kernel-too-big", lambda d: o(d, 1, 1, 2, 2).max_pool2d(kernel_size=3), V, "UOP.SHRINK"),
  Bad("max_pool2d-too-many-axes", lambda d: o(d, 2).max_pool2d(kernel_size=(1, 1)), V, "API.ARGS.count"),
  Bad("max_pool2d-kernel-float", lambda d: o(d, 1, 1, 4, 4).max_pool2d(kernel_size=2.0), TE, "API.ARGS.size"),
  Bad("avg_pool2d-padding-2-of-3", lambda d: o(d, 1, 1, 8, 8).avg_pool2d(3, padding=2), V, "API.ARGS.pool-padding"),
  Bad("avg_pool2d-stride-0", lambda d: o(d, 1, 1, 4, 4).avg_pool2d(stride=0), V, "API.ARGS.positive"),
  Bad("avg_pool2d-kernel-0", lambda d: o(d, 1, 1, 4, 4).avg_pool2d(kernel_size=(0, 2)), V, "API.ARGS.positive"),
  Bad("interpolate-size-0", lambda d: o(d, 1, 1, 4).interpolate((0,)), V, "TENSOR.INTERPOLATE"),
  Bad("interpolate-mode", lambda d: o(d, 1, 1, 4).interpolate((2,), mode="cubic"), V, "TENSOR.INTERPOLATE.mode"),
  Bad("interpolate-too-many", lambda d: o(d, 4).interpolate((2, 2)), V, "TENSOR.INTERPOLATE"),
  Bad("attention-shapes", lambda d: o(d, 2, 3).scaled_dot_product_attention(o(d, 2, 4), o(d, 2, 4)), R,
      "NN.ATTENTION"),
  Bad("attention-1d", lambda d: o(d, 3).scaled_dot_product_attention(o(d, 3), o(d, 3)), V, "NN.ATTENTION"),
  Bad("attention-mask-and-causal", lambda d: o(d, 2, 2).scaled_dot_product_attention(
    o(d, 2, 2), o(d, 2, 2), attn_mask=o(d, 2, 2), is_causal=True), V, "NN.ATTENTION"),
]

NN = [
  Bad("Linear-negative", lambda d: nn.Linear(-1, 2), V, "API.ARGS.size"),
  Bad("Linear-float", lambda d: nn.Linear(2.5, 2), TE, "API.ARGS.size"),
  Bad("Linear-input", lambda d: nn.Linear(3, 2)(o(d, 4, 4)), R, "UOP.EXPAND"),
  Bad("Conv2d-stride-0", lambda d: nn.Conv2d(1, 1, 3, stride=0), V, "API.ARGS.positive"),
  Bad("Conv2d-kernel-0", lambda d: nn.Conv2d(1, 1, 0), V, "API.ARGS.positive"),
  Bad("Conv2d-dilation-0", lambda d: nn.Conv2d(1, 1, 3, dilation=0), V, "API.ARGS.positive"),
  Bad("Conv2d-groups", lambda d: nn.Conv2d(3, 4, 3, groups=2), V, "NN.CONV"),
  Bad("Conv2d-groups-0", lambda d: nn.Conv2d(2, 2, 3, groups=0), V, "API.ARGS.positive"),
  Bad("Conv2d-padding-mode", lambda d: nn.Conv2d(1, 1, 3, padding="full"), V, "NN.CONV"),
  Bad("Conv2d-same-stride", lambda d: nn.Conv2d(1, 1, 3, stride=2, padding="same"), V, "NN.CONV"),
  Bad("Conv2d-negative-channels", lambda d: nn.Conv2d(-1, 1, 3), V, "API.ARGS.size"),
  Bad("Conv2d-input-channels", lambda d: nn.Conv2d(2, 1, 1)(o(d, 1, 3, 4, 4)), R, "UOP.RESHAPE"),
  Bad("Conv1d-kernel-count", lambda d: nn.Conv1d(1, 1, (2, 2)), V, "API.ARGS.count"),
  Bad("ConvTranspose2d-padding-str", lambda d: nn.ConvTranspose2d(1, 1, 2, padding="same"), TE, "NN.CONV"),
  Bad("BatchNorm-channels", lambda d: nn.BatchNorm(3)(o(d, 2, 4)), R, "NN.BATCHNORM"),
  Bad("BatchNorm-negative", lambda d: nn.BatchNorm(-2), V, "API.ARGS.size"),
  Bad("LayerNorm-negative", lambda d: nn.LayerNorm((2, -1)), V, "API.ARGS.size"),
  Bad("GroupNorm-groups-0", lambda d: nn.GroupNorm(0, 4), V, "API.ARGS.positive"),
  Bad("InstanceNorm-float", lambda d: nn.InstanceNorm(2.5), TE, "API.ARGS.size"),
  Bad("RMSNorm-negative", lambda d: nn.RMSNorm(-1), V, "API.ARGS.size"),
  Bad("LSTMCell-negative", lambda d: nn.LSTMCell(3, -2), V, "API.ARGS.size"),
  Bad("LayerNorm-shape", lambda d: nn.LayerNorm(5)(o(d, 2, 4)), R, "NN.LAYERNORM"),
  Bad("LayerNorm2d-shape", lambda d: nn.LayerNorm2d(3)(o(d, 1, 2, 2, 2)), R, "NN.LAYERNORM2D"),
  Bad("GroupNorm-groups", lambda d: nn.GroupNorm(3, 4), V, "NN.GROUPNORM"),
  Bad("GroupNorm-input", lambda d: nn.GroupNorm(2, 4)(o(d, 1, 6, 2)), R, "NN.GROUPNORM"),
  Bad("InstanceNorm-input", lambda d: nn.InstanceNorm(3)(o(d, 1, 2, 4)), R, "NN.INSTANCENORM"),
  Bad("RMSNorm-input", lambda d: nn.RMSNorm(4)(o(d, 2, 3)), R, "NN.RMSNORM"),
  Bad("Embedding-float", lambda d: nn.Embedding(4, 2)(o(d, 3)), TE, "NN.EMBEDDING"),
  Bad("Embedding-list", lambda d: nn.Embedding(4, 2)([1, 2]), TE, "NN.EMBEDDING"),
  Bad("Embedding-checked", checked(lambda d: nn.Embedding(4, 2)(t(d, [4]))), I, "NN.EMBEDDING.range"),
  Bad("Embedding-negative-checked", checked(lambda d: nn.Embedding(4, 2)(t(d, [[0, -1]]))), I, "NN.EMBEDDING.range"),
  Bad("Embedding-negative-size", lambda d: nn.Embedding(-4, 2), V, "API.ARGS.size"),
  Bad("LSTMCell-input", lambda d: nn.LSTMCell(3, 2)(o(d, 2, 4)), R, "NN.LSTMCELL"),
  Bad("LSTMCell-state", lambda d: nn.LSTMCell(3, 2)(o(d, 2, 3), (o(d, 2, 2), o(d, 2, 3))), R, "NN.LSTMCELL"),
]

LOSSES = [
  Bad("cross_entropy-reduction", lambda d: o(d, 2, 3).cross_entropy(t(d, [0, 1]), reduction="avg"), V,
      "NN.LOSS.reduction"),
  Bad("cross_entropy-smoothing", lambda d: o(d, 2, 3).cross_entropy(t(d, [0, 1]), label_smoothing=2.0), V,
      "NN.LOSS.smoothing"),
  Bad("cross_entropy-label-shape", lambda d: o(d, 2, 3).cross_entropy(t(d, [0, 1, 2])), R, "NN.LOSS.labels"),
  Bad("cross_entropy-prob-shape", lambda d: o(d, 2, 3).cross_entropy(o(d, 2, 2)), R, "NN.LOSS.shape"),
  Bad("cross_entropy-0d", lambda d: t(d, 1.0).cross_entropy(t(d, 0)), V, "NN.LOSS.labels"),
  Bad("cross_entropy-checked", checked(lambda d: o(d, 2, 3).cross_entropy(t(d, [0, 3]))), I, "NN.LOSS.labels.range"),
  Bad("sparse_cce-float-labels", lambda d: o(d, 2, 3).sparse_categorical_crossentropy(o(d, 2)), TE, "NN.LOSS.labels"),
  Bad("sparse_cce-checked", checked(lambda d: o(d, 2, 3).sparse_categorical_crossentropy(t(d, [5, 0]))), I,
      "NN.LOSS.labels.range"),
  Bad("sparse_cce-negative-checked", checked(lambda d: o(d, 2, 3).sparse_categorical_crossentropy(
    t(d, [-2, 0]))), I, "NN.LOSS.labels.range"),
  Bad("nll_loss-weight-shape", lambda d: o(d, 2, 3).nll_loss(t(d, [0, 1]), weight=o(d, 2)), R, "NN.LOSS.shape"),
  Bad("nll_loss-checked", checked(lambda d: o(d, 2, 3).nll_loss(t(d, [0, 9]))), I, "NN.LOSS.labels.range"),
  Bad("nll_loss-reduction", lambda d: o(d, 2, 3).nll_loss(t(d, [0, 1]), reduction=None), V, "NN.LOSS.reduction"),
  Bad("binary_crossentropy-shape", lambda d: o(d, 2).binary_crossentropy(o(d, 3)), R, "NN.LOSS.shape"),
  Bad("binary_crossentropy_logits-shape", lambda d: o(d, 2).binary_crossentropy_logits(o(d, 2, 1)), R,
      "NN.LOSS.shape"),
]

_OK = safetensors({"a": _F32}, b"\0" * 8)


def _lin(d: str) -> nn.Linear: return nn.Linear(2, 3)


STATE = [
  Bad("safe_load-short", lambda d: safe_load(u8(b"abc", d)), V, "STATE.SAFETENSORS.layout"),
  Bad("safe_load-header-past-end", lambda d: safe_load(u8(struct.pack("<Q", 100) + b"{}", d)), V,
      "STATE.SAFETENSORS.layout"),
  Bad("safe_load-not-json", lambda d: safe_load(u8(struct.pack("<Q", 3) + b"{x}", d)), V, "STATE.SAFETENSORS.header"),
  Bad("safe_load-not-object", lambda d: safe_load(u8(struct.pack("<Q", 2) + b"[]", d)), V,
      "STATE.SAFETENSORS.header"),
  Bad("safe_load-truncated-data", lambda d: safe_load(u8(safetensors({"a": _F32}, b"\0" * 4), d)), V,
      "STATE.SAFETENSORS.offsets"),
  Bad("safe_load-dtype", lambda d: safe_load(u8(safetensors({"a": {**_F32, "dtype": "Q9"}}, b"\0" * 8), d)), V,
      "STATE.SAFETENSORS.dtype"),
  Bad("safe_load-shape", lambda d: safe_load(u8(safetensors({"a": {**_F32, "shape": [3]}}, b"\0" * 8), d)), V,
      "STATE.SAFETENSORS.shape"),
  Bad("safe_load-negative-shape", lambda d: safe_load(u8(safetensors({"a": {**_F32, "shape": [-2]}}, b"\0" * 8), d)),
      V, "STATE.SAFETENSORS.header"),
  Bad("safe_load-fields", lambda d: safe_load(u8(safetensors({"a": {"dtype": "F32"}}, b""), d)), V,
      "STATE.SAFETENSORS.header"),
  Bad("safe_load-trailing", lambda d: safe_load(u8(_OK + b"\0" * 4, d)), V, "STATE.SAFETENSORS.offsets"),
  Bad("safe_load-2d-tensor", lambda d: safe_load(Tensor.zeros(2, 2, dtype=dtypes.uint8, device=d)), TE,
      "STATE.SAFETENSORS.load"),
  Bad("safe_save-non-tensor", lambda d: safe_save({"a": 1}, "/tmp/never.safetensors"), TE, "STATE.SAFETENSORS.save"),
  Bad("safe_save-metadata", lambda d: safe_save({"a": o(d, 2)}, "/tmp/never.safetensors", {"k": 1}), TE,
      "STATE.SAFETENSORS.metadata"),
  Bad("load_state_dict-missing", lambda d: load_state_dict(_lin(d), {"weight": o(d, 3, 2)}), R, "STATE.LOAD.strict"),
  Bad("load_state_dict-unexpected", lambda d: load_state_dict(_lin(d), {"weight": o(d, 3, 2), "bias": o(d, 3),
                                                                        "extra": o(d, 1)}), R, "STATE.LOAD.strict"),
  Bad("load_state_dict-shape", lambda d: load_state_dict(_lin(d), {"weight": o(d, 2, 2), "bias": o(d, 3)}), R,
      "STATE.LOAD.match"),
  Bad("load_state_dict-dtype", lambda d: load_state_dict(_lin(d), {"weight": o(d, 3, 2).half(), "bias": o(d, 3)}), R,
      "STATE.LOAD.match"),
  Bad("load_state_dict-not-tensor", lambda d: load_state_dict(_lin(d), {"weight": [[1.0]], "bias": o(d, 3)}), R,
      "STATE.LOAD.match"),
]

_jit_calls: dict[str, TinyJit] = {}


def _jit_shape_change(d: str):
  @TinyJit
  def f(x): return (x * 2).realize()
  for n in (2, 2, 3): f(Tensor.ones(n, device=d).contiguous().realize())


def _jit_static_change(d: str):
  @TinyJit
  def f(x, k): return (x * k).realize()
  for k in (2, 2, 3): f(Tensor.ones(2, device=d).contiguous().realize(), k)


def _torch_load_garbage(d: str):
  with open("/tmp/tinyspec_bad_input.pt", "wb") as fh: fh.write(b"garbage")
  return torch_load("/tmp/tinyspec_bad_input.pt")


def _tar_garbage(d: str):
  with open("/tmp/tinyspec_bad_input.tar", "wb") as fh: fh.write(b"garbage")
  return tar_extract("/tmp/tinyspec_bad_input.tar")


def _context_float(d: str):
  with Context(DEBUG=1.5): pass


OTHER = [
  Bad("jit-shape-change", _jit_shape_change, S, "JIT.INPUTS"),
  Bad("jit-static-change", _jit_static_change, S, "JIT.INPUTS"),
  Bad("torch_load-garbage", _torch_load_garbage, V, "STATE.TORCH.format"),
  Bad("tar_extract-garbage", _tar_garbage, V, "STATE.ARCHIVE.tar"),
  Bad("device-unknown", lambda d: Tensor.ones(2, device="NOPE"), V, "DEV.REGISTRY"),
  Bad("device-unknown-data", lambda d: Tensor([1, 2], device="NOPE:1"), V, "DEV.REGISTRY"),
  Bad("device-unknown-to", lambda d: o(d, 2).to("NOWHERE"), V, "DEV.REGISTRY"),
  Bad("device-unknown-arange", lambda d: Tensor.arange(3, device="GPU9"), V, "DEV.REGISTRY"),
  Bad("device-not-str", lambda d: Tensor.ones(2, device=3), TE, "DEV.REGISTRY"),
  Bad("context-float-knob", _context_float, S, "API.CONTEXT"),
  Bad("backward-non-scalar", lambda d: o(d, 2).requires_grad_().mul(2).backward(), R, "GRAD.SCALAR"),
  Bad("backward-gradient-shape", lambda d: o(d, 2).requires_grad_().mul(2).backward(o(d, 3)), R, "GRAD.SCALAR"),
  Bad("backward-no-leaf", lambda d: o(d, 1).mul(2).sum().backward(), R, "GRAD.NOGRAD"),
  Bad("requires_grad-int", lambda d: t(d, [1]).requires_grad_(), TE, "GRAD.DTYPE"),
  Bad("assign-shape", lambda d: o(d, 2).contiguous().realize().assign(o(d, 3)), R, "EXEC.SCHED.assign"),
  Bad("assign-dtype", lambda d: o(d, 2).contiguous().realize().assign(o(d, 2).half()), R, "EXEC.SCHED.assign"),
  Bad("tensor-complex-numpy", lambda d: Tensor(__import__("numpy").ones(2, dtype="complex64"), device=d), TE,
      "DT.SCALARS"),
]


class Edge(NamedTuple):
  """Valid edge input: refimpl's value (a Tensor, or a Python value) equals torch's (or the spec's, a plain value)."""
  id: str
  ours: Callable[[str], Any]
  ref: Callable[[], Any]


def T(*shape): return torch.ones(*shape)


def _raises(f: Callable[[], Any], cls: type) -> bool:
  try: f()
  except cls: return True
  return False


EDGES = [
  Edge("sum-0-size-axis", lambda d: o(d, 0, 3).sum(0), lambda: T(0, 3).sum(0)),
  Edge("sum-negative-axes", lambda d: o(d, 2, 3).sum((-1, -2)), lambda: T(2, 3).sum((-1, -2))),
  Edge("max-nonempty-axis-of-empty", lambda d: o(d, 0, 3).max(1), lambda: T(0, 3).amax(1)),
  Edge("argmax-nonempty-axis-of-empty", lambda d: o(d, 0, 3).argmax(1), lambda: T(0, 3).argmax(1).int()),
  Edge("max-0d-axis-0", lambda d: t(d, 2.0).max(0), lambda: torch.tensor(2.0).amax(0)),
  Edge("logsumexp-empty-axis", lambda d: o(d, 2, 0).logsumexp(1), lambda: T(2, 0).logsumexp(1)),
  Edge("softmax-empty", lambda d: o(d, 0, 3).softmax(-1), lambda: T(0, 3).softmax(-1)),
  Edge("any-empty", lambda d: o(d, 0).any(), lambda: T(0).any()),
  Edge("all-empty", lambda d: o(d, 0).all(), lambda: T(0).all()),
  Edge("mean-empty", lambda d: o(d, 0).mean(), lambda: T(0).mean()),
  Edge("reshape-infer-empty", lambda d: o(d, 0, 3).reshape(-1), lambda: T(0, 3).reshape(-1)),
  Edge("reshape-infer", lambda d: o(d, 2, 3).reshape(3, -1), lambda: T(2, 3).reshape(3, -1)),
  Edge("expand-keep", lambda d: o(d, 1, 3).expand(2, -1), lambda: T(1, 3).expand(2, -1)),
  Edge("expand-new-axis", lambda d: o(d, 3).expand(2, 3), lambda: T(3).expand(2, 3)),
  Edge("permute-negative", lambda d: o(d, 2, 3).permute(-1, -2), lambda: T(2, 3).permute(-1, -2)),
  Edge("flip-negative", lambda d: t(d, [[1.0, 2.0]]).flip(-1), lambda: torch.tensor([[1.0, 2.0]]).flip(-1)),
  Edge("squeeze-0d", lambda d: t(d, 3.0).squeeze(0), lambda: torch.tensor(3.0).squeeze(0)),
  Edge("unsqueeze-negative", lambda d: o(d, 2).unsqueeze(-1), lambda: T(2).unsqueeze(-1)),
  Edge("cumsum-empty", lambda d: o(d, 0).cumsum(0), lambda: T(0).cumsum(0)),
  Edge("cumsum-0d", lambda d: t(d, 2.0).cumsum(0), lambda: torch.tensor(2.0).cumsum(0)),
  Edge("zeros-0", lambda d: Tensor.zeros(0, device=d), lambda: torch.zeros(0)),
  Edge("ones-0-2", lambda d: Tensor.ones(0, 2, device=d), lambda: torch.ones(0, 2)),
  Edge("arange-negative-step", lambda d: Tensor.arange(5, 0, -2, device=d), lambda: torch.arange(5, 0, -2).int()),
  Edge("arange-empty", lambda d: Tensor.arange(3, 3, device=d), lambda: torch.arange(3, 3).int()),
  Edge("linspace-0", lambda d: Tensor.linspace(0, 1, 0, device=d), lambda: torch.linspace(0, 1, 0)),
  Edge("linspace-1", lambda d: Tensor.linspace(2, 5, 1, device=d), lambda: torch.linspace(2, 5, 1)),
  Edge("eye-0", lambda d: Tensor.eye(0, device=d), lambda: torch.eye(0)),
  Edge("split-with-zero", lambda d: o(d, 3).split([0, 3])[1], lambda: T(3).split([0, 3])[1]),
  Edge("chunk-uneven", lambda d: [c.shape for c in o(d, 5).chunk(2)], lambda: [tuple(c.shape) for c in T(5).chunk(2)]),
  Edge("max_pool2d-half-padding", lambda d: o(d, 1, 1, 2, 2).max_pool2d(2, padding=1),
       lambda: F.max_pool2d(T(1, 1, 2, 2), 2, padding=1)),
  Edge("avg_pool2d-half-padding", lambda d: o(d, 1, 1, 3, 3).avg_pool2d(3, stride=1, padding=1),
       lambda: F.avg_pool2d(T(1, 1, 3, 3), 3, stride=1, padding=1)),
  Edge("conv2d-stride-tuple", lambda d: o(d, 1, 1, 5, 5).conv2d(o(d, 1, 1, 2, 2), stride=(2, 1)),
       lambda: F.conv2d(T(1, 1, 5, 5), T(1, 1, 2, 2), stride=(2, 1))),
  Edge("bool-one-element", lambda d: bool(t(d, [0])), lambda: bool(torch.tensor([0]))),
  Edge("bool-0d", lambda d: bool(t(d, 3.0)), lambda: bool(torch.tensor(3.0))),
  Edge("int64-max", lambda d: t(d, [2**63 - 1]), lambda: torch.tensor([2**63 - 1])),
  Edge("int-scalar-wraps-in-int32", lambda d: (t(d, [1]) + 2**40).tolist(), lambda: [1]),
  Edge("uint8-data-wraps", lambda d: t(d, [300, -1], dtype=dtypes.uint8).tolist(), lambda: [44, 255]),
  Edge("uint64-max", lambda d: t(d, [2**64 - 1], dtype=dtypes.uint64).tolist(), lambda: [2**64 - 1]),
  Edge("float-huge-int-scalar", lambda d: (o(d, 1) + 2**70), lambda: T(1) + float(2**70)),   # torch refuses the int
  Edge("Linear-0-in", lambda d: nn.Linear(0, 2)(o(d, 3, 0)).shape, lambda: (3, 2)),
  Edge("GroupNorm-float-groups", lambda d: _raises(lambda: nn.GroupNorm(2.0, 4), TypeError), lambda: True),
  Edge("pow-int-tensor-negative-exponent", lambda d: (t(d, [2]) ** t(d, [-1])).tolist(), lambda: [0]),
  Edge("pow-int-positive", lambda d: t(d, [3]) ** 2, lambda: (torch.tensor([3]) ** 2).int()),
  Edge("one_hot-negative-label-unchecked", lambda d: t(d, [-1, 1]).one_hot(3).tolist(), lambda: [[0, 0, 0], [0, 1, 0]]),
  Edge("getitem-out-of-range-tensor-unchecked", lambda d: o(d, 3)[t(d, [7])].tolist(), lambda: [0.0]),
  Edge("getitem-negative-tensor", lambda d: t(d, [1.0, 2.0, 3.0])[t(d, [-1])], lambda: torch.tensor([3.0])),
  Edge("gather-out-of-range-unchecked", lambda d: o(d, 3).gather(0, t(d, [5])).tolist(), lambda: [0.0]),
  Edge("sparse_cce-ignored-label-checked", checked(lambda d: o(d, 2, 3).sparse_categorical_crossentropy(
    t(d, [0, -1])).item()), lambda: F.cross_entropy(T(2, 3), torch.tensor([0, -1]), ignore_index=-1).item()),
  Edge("index-in-range-checked", checked(lambda d: t(d, [1.0, 2.0])[t(d, [1, -2])]), lambda: torch.tensor([2.0, 1.0])),
  Edge("einsum-implicit", lambda d: Tensor.einsum("ij,jk", o(d, 2, 3), o(d, 3, 2)),
       lambda: torch.einsum("ij,jk", T(2, 3), T(3, 2))),
  Edge("transpose-0d", lambda d: t(d, 1.0).transpose(0, -1), lambda: torch.tensor(1.0).transpose(0, -1)),
]
