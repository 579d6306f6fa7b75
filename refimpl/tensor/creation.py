"""Creation: constant, range and identity tensors (full, zeros, ones, arange, eye, linspace, empty, *_like)."""
from __future__ import annotations

import math

import numpy as np

from refimpl.device import Device
from refimpl.dtype import DTypeLike, dtypes, to_dtype
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.engine.realize import buffers
from refimpl.engine.schedule import new_buffer
from refimpl.tensor import validate
from refimpl.tensor.args import _shape_arg
from refimpl.tensor.core import _NP, Tensor


class CreationOps:
  @staticmethod
  def full(shape, fill_value, dtype: DTypeLike | None = None, device: str | None = None, buffer=True,
           requires_grad: bool | None = None) -> Tensor:
    """A tensor of `shape` filled with `fill_value` (dtype from the value unless given): a broadcast CONST, whatever
    `buffer` says (TENSOR.FULL.buffer: it gets a buffer of its own when it is realized, assigned to or made a
    leaf, so tinygrad's two forms cannot be told apart by value). With requires_grad=True it becomes a leaf of its
    own (GRAD.LEAF.identity)."""
    shape = _shape_arg((shape,) if not isinstance(shape, (tuple, list)) else shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
    if isinstance(fill_value, int) and not dtypes.is_float(dtype): validate.python_int(fill_value, "fill_value")
    device = validate.device(device) if device else Device.DEFAULT
    out = Tensor(UOp.const(dtype, fill_value, device)).reshape((1,) * len(shape)).expand(shape)
    if requires_grad is not None: out.requires_grad = requires_grad
    return out

  @staticmethod
  def zeros(*shape, **kw) -> Tensor:
    """Zeros of `shape` (default float unless dtype is given)."""
    return Tensor.full(_shape_arg(shape), 0.0 if "dtype" not in kw else 0, **kw)
  @staticmethod
  def ones(*shape, **kw) -> Tensor:
    """Ones of `shape` (default float unless dtype is given)."""
    return Tensor.full(_shape_arg(shape), 1.0 if "dtype" not in kw else 1, **kw)

  @staticmethod
  def arange(start, stop=None, step=1, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """start, start+step, ... below stop (dtype from the arguments, as torch.arange)."""
    if stop is None: start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
      validate.kind(isinstance(v, (int, float)) or hasattr(type(v), "__index__"), "API.ARGS.size",
                    f"{name}={v!r} must be a number, not {type(v).__name__}")
      if isinstance(v, int): validate.python_int(v, name)
    validate.nonzero_step(step)
    validate.value(all(math.isfinite(v) for v in (start, stop, step)), "API.ARGS.step",
                   f"arange({start}, {stop}, {step}): the bounds and the step must be finite")
    values = np.arange(start, stop, step)
    dt = to_dtype(dtype) if dtype else dtypes.from_py([start, stop, step])
    # TENSOR.ARANGE.wide: integer values beyond the default int's range make the result int64, not wrap
    lo, hi = (min(values[0], values[-1]), max(values[0], values[-1])) if values.size else (0, 0)
    if dtype is None and dtypes.is_int(dt) and not (dt.min <= lo and hi <= dt.max): dt = dtypes.int64
    return Tensor(values.astype(_NP[dt]) if dt != dtypes.bfloat16 else values, device=device, dtype=dt)

  @staticmethod
  def empty(*shape, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """A fresh buffer whose contents are unspecified (DEV.ALLOC); reading it before writing is an EXEC.UNINIT error
    under the sanitizer."""
    shape = _shape_arg(shape)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    device = validate.device(device) if device else Device.DEFAULT
    node = new_buffer(dt, math.prod(shape), device)
    buffers[node] = Device[device].alloc(math.prod(shape), dt)
    return Tensor(node if shape == (math.prod(shape),) else UOp(Ops.RESHAPE, dt, (node,), shape))

  def _like_kw(self, kw: dict) -> dict:
    out = {"dtype": kw.pop("dtype", None) or self.dtype, "device": kw.pop("device", None) or self.device}
    return {**kw, **out}
  def zeros_like(self, **kw) -> Tensor:
    """Zeros of this tensor's shape (and dtype and device unless given)."""
    return Tensor.full(self.shape, 0, **self._like_kw(kw))
  def ones_like(self, **kw) -> Tensor:
    """Ones of this tensor's shape (and dtype and device unless given)."""
    return Tensor.full(self.shape, 1, **self._like_kw(kw))
  def full_like(self, fill_value, dtype: DTypeLike | None = None, device: str | None = None, buffer=True) -> Tensor:
    """`fill_value` in this tensor's shape, and its dtype and device unless given (TENSOR.FULL)."""
    return Tensor.full(self.shape, fill_value, **self._like_kw({"dtype": dtype, "device": device}), buffer=buffer)
  def empty_like(self, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """An uninitialised tensor of this tensor's shape, and its dtype and device unless given (TENSOR.FULL)."""
    return Tensor.empty(self.shape, **self._like_kw({"dtype": dtype, "device": device}))

  @staticmethod
  def eye(n: int, m: int | None = None, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """The n x m identity matrix (default float), built from movement ops only: a square one-hot pattern from a
    padded column of ones read with row length k, then padded to n x m."""
    n = validate.size(n, "n")
    m = n if m is None else validate.size(m, "m")
    k = min(n, m)
    # ones(k, 1) padded to rows of k+1 puts a one every k+1 elements; read back as rows of k, row i has it at column i
    sq = Tensor.ones(k, 1, dtype=dtype or dtypes.default_float, device=device).pad(((0, 0), (0, k))).reshape(-1)
    sq = sq.shrink(((0, k * k),)).reshape(k, k)
    return sq.pad(((0, n - k), (0, m - k)))

  @staticmethod
  def linspace(start, stop, steps: int, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """`steps` evenly spaced values from start to stop; like torch, the first half counts up from start and the second
    half down from stop, so both ends are exact."""
    steps = validate.size(steps, "steps")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if steps == 1: return Tensor.full((1,), start, dtype=dtypes.default_float, device=device).cast(dt)
    f = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
    step = (stop - start) / (steps - 1)
    i = Tensor.arange(steps, device=device).cast(f)
    out = (i < steps // 2).where(i * step + start, stop - (steps - 1 - i) * step)
    return out.cast(dt)
