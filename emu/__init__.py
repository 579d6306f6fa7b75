"""emu: the PYTHON device, a pure-Python emulator of the kernel execution model (spec/kernels.md)."""
