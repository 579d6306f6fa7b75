"""`from refimpl.jit import TinyJit`, the module path of older tinygrad (`tinygrad.jit`, seed 003)."""
from refimpl.engine.jit import TinyJit  # noqa: F401
