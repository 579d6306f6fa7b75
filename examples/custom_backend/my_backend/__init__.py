"""An example backend for refimpl (docs/custom-backend.md): the device MY."""
from my_backend.device import MyDevice

__all__ = ["MyDevice"]
