"""A complete minimal adapter (docs/adapter.md): what a backend author writes so that the conformance suite can drive
their tinygrad-style implementation. The implementation here is refimpl; for yours, change the two imports from
refimpl, the backends and dtypes it declares, and nothing else if it keeps tinygrad's Tensor API.

    pip install 'tinyspec[test]'        # the suite, its pytest plugin, torch and hypothesis
    cd examples/minimal_adapter         # your repository; the adapter importable from here
    PYTHONPATH=. pytest --pyargs conformance --impl my_adapter:MyAdapter --backend CPU -n 2

Methods the suite needs and the base class cannot guess: namespace, tensor, numpy, dtype_name, is_tensor, gradient.
Declarations: which backends and dtypes the implementation computes in (unsupported_dtype), which catalogue ops it
lacks (unsupported). Everything else (reproductions, layers, optimizers, kernel counts, other devices) keeps the
base class's defaults, which fit any implementation with tinygrad's API.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from conformance.adapters import Adapter
from refimpl import Device, Tensor, dtypes, nn   # the implementation under test: `from mytinygrad import ...`
from refimpl.nn import optim

ALL_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
              "float32", "float64")
# the backends this adapter runs on, and the dtypes each computes in (DEV.DTYPE): a test in another dtype is skipped
BACKENDS = {"PYTHON": ALL_DTYPES, "CPU": ALL_DTYPES}


class MyAdapter(Adapter):
  """refimpl's Tensor, driven only through tinygrad's public API, on the PYTHON or CPU device."""
  name = "my"

  def __init__(self, backend: str):
    super().__init__(backend)
    # a backend this adapter does not know fails here, once: the suite turns it into one usage error naming it
    if backend not in BACKENDS: raise ValueError(f"MyAdapter runs on {', '.join(BACKENDS)}, not {backend!r}")
    Device.DEFAULT = backend   # so that creation ops in the catalogue's calls (Tensor.ones, ...) land there too
    self._dtype = {name: getattr(dtypes, name) for name in ALL_DTYPES}
    self._name = {dt: name for name, dt in self._dtype.items()}

  # ---- declarations: what the implementation computes in, and what it lacks
  def unsupported_dtype(self, dtype: str) -> str | None:
    if dtype in BACKENDS[self.backend]: return None
    return f"DEV.DTYPE: MyAdapter's {self.backend} does not compute in {dtype}"

  def unsupported(self, op_name: str) -> str | None:
    # single ALU ops ("ALU.ADD", ...) need the implementation's UOp level (Adapter.alu); this adapter drives only the
    # Tensor API, so those tests are skipped with this reason, and the ALU ops are checked through the Tensor ops
    if op_name.startswith("ALU."): return f"MyAdapter drives the Tensor API only: {op_name} is not run on its own"
    return None

  # ---- data in and out
  def namespace(self) -> dict[str, Any]:
    return {"Tensor": Tensor, "dtypes": dtypes, "nn": nn, "optim": optim}

  def tensor(self, array: np.ndarray, dtype: str) -> Any:
    return Tensor(np.asarray(array), dtype=self._dtype[dtype], device=self.backend)

  def numpy(self, t: Any) -> np.ndarray:
    return t.numpy()   # bfloat16 comes back as float32, as the suite expects

  def dtype_name(self, t: Any) -> str:
    return self._name[t.dtype]

  def is_tensor(self, v: Any) -> bool:
    return isinstance(v, Tensor)

  # ---- autograd: a vector-Jacobian product that can itself be differentiated (second order)
  def gradient(self, y: Any, xs: list[Any], cotangent: Any) -> list[Any]:
    return y.gradient(*xs, gradient=cotangent)
