"""Tensor facts and plumbing (spec/tensor_misc.md): sizes and byte counts, the raw data as a memoryview, the dtype
shorthands core's family lacks, clone/replace/from_blob, and contiguous_backward (a marker for autograd)."""
from __future__ import annotations

import ctypes
import math

import numpy as np

from refimpl.dtype import dtypes, to_dtype
from refimpl.helpers import SpecIndexError, SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor.args import _shape_arg
from refimpl.tensor.core import _NP, Tensor

# the arg of the NOOP that marks a contiguous_backward (GRAD.CONTIGUOUS_BACKWARD reads it)
CONTIGUOUS_BACKWARD = "contiguous_backward"


class FactOps:
  def __bool__(self) -> bool:
    """The truth value of a one-element tensor (realizes it); any other is ambiguous (API.ARGS.bool, torch's rule:
    `if t:` on a tensor of several elements is a RuntimeError, not the truth of its length)."""
    if self.numel() != 1:
      raise SpecRuntimeError("API.ARGS.bool", f"the truth value of a tensor of shape {self.shape} is ambiguous: use "
                             ".any() or .all()")
    return bool(self.item())

  # ---- sizes (TENSOR.SIZE, TENSOR.NBYTES, TENSOR.MAX_SHAPE) ----
  def size(self, dim: int | None = None):
    """The shape, or the size of axis `dim` (negative counts from the end) (TENSOR.SIZE)."""
    if dim is None: return self.shape
    if not isinstance(dim, int) or not -max(self.ndim, 1) <= dim < max(self.ndim, 1) or not self.ndim:
      raise SpecIndexError("TENSOR.SIZE.dim", f"dim={dim!r} is out of range for a tensor of {self.ndim} dims")
    return self.shape[dim]

  def nbytes(self) -> int:
    """The number of bytes of all elements: numel() * element_size() (TENSOR.NBYTES)."""
    return self.numel() * self.element_size()

  def element_size(self) -> int:
    """The number of bytes of one element (TENSOR.NBYTES)."""
    return self.dtype.itemsize

  def is_floating_point(self) -> bool:
    """Whether the dtype is a float type (DT.FLOAT) (TENSOR.IS_FLOATING_POINT)."""
    return dtypes.is_float(self.dtype)

  @property
  def max_shape(self) -> tuple[int, ...]:
    """The shape with every symbolic axis at its maximum; refimpl has no symbolic shapes, so the shape itself
    (TENSOR.MAX_SHAPE)."""
    return self.shape

  def max_numel(self) -> int:
    """The number of elements of max_shape: numel() (TENSOR.MAX_SHAPE)."""
    return math.prod(self.max_shape)

  # ---- dtype shorthands (TENSOR.SHORTHANDS; the others live with cast in elementwise.py) ----
  def short(self) -> Tensor:
    """Cast to int16."""
    return self.cast(dtypes.int16)

  def bfloat16(self) -> Tensor:
    """Cast to bfloat16."""
    return self.cast(dtypes.bfloat16)

  # ---- data (TENSOR.DATA) ----
  def data(self) -> memoryview:
    """The values as a memoryview of the dtype's struct format and the tensor's shape (realizes the tensor)."""
    if self.dtype.fmt is None:
      raise SpecTypeError("TENSOR.DATA.format", f"{self.dtype!r} has no struct format, so no memoryview of it exists")
    if self.dtype.fmt == "e":   # memoryview.cast learned half floats in Python 3.12
      try: memoryview(b"\0\0").cast("e")
      except ValueError as e: raise SpecTypeError("TENSOR.DATA.format", f"this Python's memoryview has no float16: {e}")
    if 0 in self.shape: return memoryview(bytearray(0)).cast(self.dtype.fmt)
    raw = bytearray(np.ascontiguousarray(self.numpy(), dtype=_NP[self.dtype]).tobytes())
    return memoryview(raw).cast(self.dtype.fmt, self.shape)

  # ---- copies and replacement (TENSOR.CLONE, TENSOR.REPLACE, TENSOR.FROM_BLOB) ----
  def clone(self, device: str | None = None) -> Tensor:
    """The same values in a buffer of their own (on `device` if given); `.grad` is cloned too. Differentiable: the
    cotangent passes back unchanged (GRAD.CONTIGUOUS, GRAD.COPY) (TENSOR.CLONE)."""
    src = self if device is None else self.to(device)
    out = Tensor(UOp(Ops.CONTIGUOUS, src.dtype, (src.uop,)))
    if self.grad is not None: out.grad = self.grad.clone(device)
    return out

  def replace(self, x: Tensor) -> Tensor:
    """Make this tensor stand for `x` (its graph, dtype and device); the shapes must match (TENSOR.REPLACE)."""
    if not isinstance(x, Tensor): raise SpecTypeError("TENSOR.REPLACE",
                                                      f"replace needs a Tensor, got {type(x).__name__}")
    if x.shape != self.shape:
      raise SpecRuntimeError("TENSOR.REPLACE.shape",
                             f"replace of a tensor of shape {self.shape} by one of shape {x.shape}")
    self.uop = x.uop
    return self

  @staticmethod
  def from_blob(ptr: int, shape: tuple[int, ...], **kwargs) -> Tensor:
    """A tensor of `shape` (dtype and device from kwargs, default float and Device.DEFAULT) holding the bytes at
    address `ptr`, which are copied now (TENSOR.FROM_BLOB: tinygrad aliases the memory instead)."""
    shape = _shape_arg((shape,) if isinstance(shape, int) else shape)
    dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    device = kwargs.pop("device", None)
    if kwargs: raise SpecTypeError("TENSOR.FROM_BLOB", f"from_blob takes dtype and device, not {sorted(kwargs)}")
    if not isinstance(ptr, int) or (ptr == 0 and math.prod(shape)):
      raise SpecValueError("TENSOR.FROM_BLOB.ptr", f"ptr={ptr!r} is not an address")
    raw = ctypes.string_at(ptr, math.prod(shape) * dtype.itemsize) if math.prod(shape) else b""
    arr = np.frombuffer(raw, dtype=_NP[dtype]).reshape(shape)
    if dtype == dtypes.bfloat16: arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return Tensor(arr.copy(), device=device, dtype=dtype)

  # ---- autograd marker (TENSOR.CONTIGUOUS_BACKWARD) ----
  def contiguous_backward(self) -> Tensor:
    """The same values (no kernel of its own); in the backward pass the cotangent arriving here is made contiguous
    (a NOOP marker whose rule is GRAD.CONTIGUOUS_BACKWARD)."""
    return Tensor(UOp(Ops.NOOP, self.dtype, (self.uop,), CONTIGUOUS_BACKWARD))
