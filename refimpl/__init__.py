"""refimpl: the reference implementation (tinygrad's public API; spec/)."""
from refimpl.dtype import dtypes, DType

__all__ = ["dtypes", "DType"]
