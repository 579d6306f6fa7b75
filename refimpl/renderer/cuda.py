"""CUDA C for the CUDA device (spec/backends.md, DEV.CUDA.*), compiled by NVRTC without any header: the stdint
names, NAN and INFINITY come from a short preamble, the math functions and memcpy are CUDA's device built-ins. The
same source compiles with nvcc (the pycuda binding, DEV.CUDA.binding), which includes cuda_runtime.h (with math.h and
some stdint names) itself and is given `-include stdint.h`: there the preamble declares no stdint name and replaces
math.h's NAN and INFINITY. (The source has no #include: pycuda's compiler cache keys a source with one by running the
preprocessor, a second nvcc per kernel.)"""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.renderer.cstyle import _Kernel
from refimpl.renderer.gpu import GPULanguage
from refimpl.uop import Ops

_PREAMBLE = """#ifdef __CUDACC_RTC__
typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t;
typedef unsigned short uint16_t; typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
#endif
#undef INFINITY
#undef NAN
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)
"""


class CUDARenderer(GPULanguage):
  """CUDA C: `extern "C" __global__` kernels, blockIdx/threadIdx, `__shared__` local memory, `__syncthreads()`."""
  helper_prefix = "__device__ static inline "
  restrict = "__restrict__"
  kernel_prefix = 'extern "C" __global__ '
  barrier = "__syncthreads();"
  local_prefix = "__shared__ "
  preamble = _PREAMBLE

  def float_alu(self, k: _Kernel, op: Ops, dt: DType, a: list[str]) -> str:
    """DEV.CUDA.math: EXP2, LOG2, SIN and POW on float32 and 16-bit floats call CUDA's double functions and round
    once, because exp2f, sinf and powf may be 2 to 4 ULP off (CUDA's programming guide), against the 1 ULP of
    ACC.EXP2.f32 and its rows (exp2f was measured 2 ULP off on an H100)."""
    if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW) and dt != dtypes.float64:
      return f"(float){self.libm(op, dtypes.float64)}({', '.join(f'(double){x}' for x in a)})"
    return super().float_alu(k, op, dt, a)

  def bounds_claim(self, f: str) -> str:
    return f"atomicExch((unsigned long long*){f}, 1ull) == 0ull"   # EXEC.BOUNDS.checked

  def group_id(self, d: int) -> str: return f"(int)blockIdx.{'xyz'[d]}"
  def local_id(self, d: int) -> str: return f"(int)threadIdx.{'xyz'[d]}"
