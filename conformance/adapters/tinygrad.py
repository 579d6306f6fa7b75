"""The tinygrad adapter: the conformance suite as an oracle for tinygrad (tested with 0.14.0 from PyPI).

    pytest conformance --impl conformance.adapters.tinygrad:TinygradAdapter --backend CPU

tinygrad is imported when the adapter is made (so the suite does not need it otherwise); `--backend` names a tinygrad
device (CPU, PYTHON, CL, CUDA, ...). Single ALU ops run as tinygrad UOps of the same name where tinygrad has one.
docs/tinygrad-conformance.md has the results.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from conformance.adapters.base import Adapter

__all__ = ["TinygradAdapter"]

_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
           "float32", "float64")


class TinygradAdapter(Adapter):
  """tinygrad's Tensor on the tinygrad device named by `backend`."""
  name = "tinygrad"

  def __init__(self, backend: str):
    super().__init__(backend)
    from importlib.metadata import version

    import tinygrad
    from tinygrad import Device, Tensor, dtypes
    from tinygrad.uop.ops import Ops, UOp
    self.version = version("tinygrad")   # tinygrad 0.14 has no __version__
    self.tg, self.Tensor, self.dtypes, self.Ops, self.UOp = tinygrad, Tensor, dtypes, Ops, UOp
    from tinygrad.helpers import DEV
    DEV.value = backend   # tinygrad 0.14 deprecates assigning Device.DEFAULT
    self.device = Device[backend]   # fails early when tinygrad has no such device
    self._dtype = {n: getattr(dtypes, n) for n in _DTYPES}
    self._name = {dt: n for n, dt in self._dtype.items()}
    # tinygrad 0.14: the dtypes a device computes in are its renderer's
    renderer = getattr(self.device, "renderer", None)
    self._supported = set(renderer.supported_dtypes()) if renderer is not None else set(self._dtype.values())

  def unsupported_dtype(self, dtype: str) -> str | None:
    if self._dtype[dtype] in self._supported: return None
    return f"DEV.DTYPE: tinygrad's {self.backend} does not compute in {dtype}"

  def unsupported(self, op_name: str) -> str | None:
    if op_name.startswith("ALU."):
      return None if hasattr(self.Ops, op_name[4:]) else f"tinygrad {self.version} has no UOp {op_name[4:]}"
    from conformance.catalogue import OPS
    missing = [n for n in (OPS[op_name].covers if op_name in OPS else ()) if not hasattr(self.Tensor, n)]
    return f"tinygrad {self.version}'s Tensor has no {', '.join(missing)}" if missing else None

  def namespace(self) -> dict[str, Any]:
    return {"Tensor": self.Tensor, "dtypes": self.dtypes}

  def repro_prelude(self) -> list[str]:
    """The lines a reproduction starts with: tinygrad on this device."""
    return ["from tinygrad import Tensor, dtypes", "from tinygrad.helpers import DEV",
            f"DEV.value = {self.backend!r}"]

  def tensor(self, array: np.ndarray, dtype: str) -> Any:
    # from a Python list, not a numpy array: tinygrad 0.14 copies numpy arrays in through its CPU device, which
    # compiles helper programs with clang even when the target device is another one. The values are exactly
    # representable in `dtype` (bfloat16 ones arrive as float32), so the list conversion is exact.
    a = np.asarray(array)
    flat = self.Tensor(a.reshape(-1).tolist(), dtype=self._dtype[dtype], device=self.backend)   # 0-d: no CONST
    return flat.reshape(a.shape).realize()

  def numpy(self, t: Any) -> np.ndarray:
    if t.dtype == self.dtypes.bfloat16: t = t.cast(self.dtypes.float32)
    return np.asarray(t.numpy())

  def dtype_name(self, t: Any) -> str:
    return self._name.get(t.dtype, str(t.dtype))

  def is_tensor(self, v: Any) -> bool:
    return isinstance(v, self.Tensor)

  def gradient(self, y: Any, xs: list[Any], cotangent: Any) -> list[Any]:
    return list(y.gradient(*xs, gradient=cotangent))

  def alu(self, op: str, out_dtype: str, operands: list[tuple[np.ndarray, str]]) -> np.ndarray:
    if not hasattr(self.Ops, op): raise NotImplementedError(f"tinygrad has no UOp {op}")
    srcs = tuple(self.tensor(a, dt).uop for a, dt in operands)
    return self.numpy(self.Tensor(self.UOp(getattr(self.Ops, op), self._dtype[out_dtype], srcs)))

  def count_kernels(self, t: Any) -> int | None:
    return len(t.schedule()) if hasattr(t, "schedule") else None   # tinygrad 0.14's Tensor has no schedule()
