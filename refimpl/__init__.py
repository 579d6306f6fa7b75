"""refimpl: the reference implementation, with tinygrad's public API
(`from refimpl import Tensor, Device, dtypes, TinyJit`)."""
from refimpl.dtype import dtypes, DType
from refimpl.device import Device
from refimpl.tensor import Tensor
from refimpl.jit import TinyJit

__all__ = ["dtypes", "DType", "Device", "Tensor", "TinyJit"]
