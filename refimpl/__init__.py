"""refimpl: the reference implementation, with tinygrad's public API (`from refimpl import Tensor, Device, dtypes`)."""
from refimpl.dtype import dtypes, DType
from refimpl.device import Device
from refimpl.tensor import Tensor

__all__ = ["dtypes", "DType", "Device", "Tensor"]
