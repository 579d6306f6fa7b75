"""refimpl's compiled backends (CPU, CL, CUDA), opened by name through the device registry (DEV.REGISTRY)."""
