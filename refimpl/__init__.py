from refimpl.dtype import dtypes
