"""The adapter for refimpl itself, on any of its devices (PYTHON, CPU, CL, CUDA)."""
from __future__ import annotations

from typing import Any

import numpy as np

from conformance.adapters.base import Adapter
from conformance.metadata import package_version
from refimpl import Device, Tensor, dtypes, nn
from refimpl.nn import optim
from refimpl.dtype import to_dtype
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

_NAMES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64")
_NAME_OF = {to_dtype(n): n for n in _NAMES}


class RefimplAdapter(Adapter):
  """refimpl's Tensor on `backend`, which becomes Device.DEFAULT so that creation ops land there too."""
  name = "refimpl"

  def __init__(self, backend: str):
    super().__init__(backend)
    Device.DEFAULT = backend
    self.device = Device[backend]   # fails early, naming DEV.REGISTRY, when the backend does not exist

  def describe(self) -> dict[str, Any]:
    """refimpl's version is the tinyspec checkout's; the device facts are what picks its code: the C compiler and
    threads of CPU, the OpenCL device and platform of CL, the architecture and binding of CUDA (CONF.REPORT.meta)."""
    d, facts = self.device, {"backend": self.backend, "class": type(self.device).__name__}
    try:
      if self.backend == "CPU": facts.update(compiler=d.compiler_id().replace("\n", " "), threads=d.threads)
      elif self.backend == "CL":
        facts.update(device=d.device.name, platform=d.device.platform.name, driver=d.device.driver_version)
      elif self.backend == "CUDA": facts.update(arch=d.arch, binding=type(d.binding).__name__)
    except Exception as e:   # noqa: BLE001 - a fact that cannot be read is reported, not fatal
      facts["error"] = f"{type(e).__name__}: {e}"
    return {"name": self.name, "version": package_version("tinyspec"), "device": facts}

  def unsupported_dtype(self, dtype: str) -> str | None:
    if self.device.supports(to_dtype(dtype)): return None
    return f"DEV.DTYPE: {self.backend} does not compute in {dtype}"

  def namespace(self) -> dict[str, Any]:
    return {"Tensor": Tensor, "dtypes": dtypes, "nn": nn, "optim": optim}

  def repro_prelude(self) -> list[str]:
    return ["from refimpl import Tensor, Device, dtypes", f"Device.DEFAULT = {self.backend!r}"]

  def tensor(self, array: np.ndarray, dtype: str) -> Tensor:
    return Tensor(np.asarray(array), dtype=dtype, device=self.backend)

  def numpy(self, t: Tensor) -> np.ndarray:
    return t.numpy()

  def dtype_name(self, t: Tensor) -> str:
    return _NAME_OF[t.dtype]

  def is_tensor(self, v: Any) -> bool:
    return isinstance(v, Tensor)

  def other_device(self) -> str:
    """PYTHON is always there; from PYTHON itself, the CPU (it needs only a C compiler)."""
    return "CPU" if self.backend == "PYTHON" else "PYTHON"

  def gradient(self, y: Tensor, xs: list[Tensor], cotangent: Tensor) -> list[Tensor]:
    return y.gradient(*xs, gradient=cotangent)

  def alu(self, op: str, out_dtype: str, operands: list[tuple[np.ndarray, str]]) -> np.ndarray:
    srcs = [self.tensor(a, dt).uop for a, dt in operands]
    return Tensor(UOp(Ops[op], to_dtype(out_dtype), tuple(srcs))).numpy()

  def count_kernels(self, t: Tensor) -> int:
    return len(t.schedule())

  def devices(self) -> list[str]:
    """PYTHON and CPU always (the CPU needs only a C compiler), and CL where a driver opens; the backend first."""
    out = [self.backend] + [d for d in ("PYTHON", "CPU") if d != self.backend]
    if self.backend != "CL":
      try: Device["CL"]
      except Exception: return out   # noqa: BLE001 (no pyopencl, no platform, no device: CL is not there)
      out.append("CL")
    return out

  def isolation(self, device: str) -> str | None:
    """The emulator (PYTHON) cannot kill its process: it runs here. Compiled CPU kernels run in a forked helper, which
    keeps whatever this process has patched (a bug planted by a test); CL and CUDA drivers do not survive a fork, so
    they start clean in a spawned one when they are not the backend under test."""
    if device == "PYTHON": return None
    if device == "CPU": return "fork"
    return None if device == self.backend else "spawn"
