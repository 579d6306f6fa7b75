"""OpenCL C for the CL device (spec/backends.md, DEV.CL.*).

OpenCL C is C99 with overloaded math built-ins, no libc and no `memcpy`; the preamble maps the base's spellings onto
it: stdint typedefs, the float32 libm names (`exp2f` -> `exp2`), and a byte-copying `memcpy` for the bit casts of the
16-bit float conversions. float16 and bfloat16 are stored as their bits and computed in float32 with a rounding
after every op (DEV.C.half), which needs no `cl_khr_fp16` (DEV.CL.half). float64 needs `cl_khr_fp64` (DEV.CL.fp64)."""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import HALF_TYPES, _Kernel
from refimpl.renderer.gpu import GPULanguage

_TYPEDEFS = """typedef char int8_t; typedef uchar uint8_t; typedef short int16_t; typedef ushort uint16_t;
typedef int int32_t; typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;
#define exp2f exp2
#define log2f log2
#define sinf sin
#define powf pow
#define sqrtf sqrt
#define truncf trunc
#define fmaf fma
#define memcpy(dst, src, n) { for (int _b = 0; _b < (int)(n); _b++) ((uchar*)(dst))[_b] = ((const uchar*)(src))[_b]; }
"""


class OpenCLRenderer(GPULanguage):
  """OpenCL C: `__kernel` functions, get_group_id/get_local_id, `__local` memory, `barrier(...)`. `fp64` says
  whether the device has cl_khr_fp64: without it, no `double` appears in the source (DEV.CL.fp64): float-to-int casts
  saturate with float comparisons, wide integers round to odd in float32 on their way to 16-bit floats, and float16
  MULACC rounds to odd in float32."""
  helper_prefix = "static inline "
  buffer_prefix = "__global "
  kernel_prefix = "__kernel "
  barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
  local_prefix = "__local "

  def __init__(self, fp16: bool = False, fp64: bool = True):
    self.fp16, self.fp64 = fp16, fp64
    if not fp64: self.f2i_arg = ("float", "f")   # OP.CAST.saturate without double (DEV.CL.fp64)
    self.preamble = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if fp64 else "") + _TYPEDEFS

  def storage_type(self, dt: DType) -> str:
    """DEV.CL.bool: kernel arguments cannot point to bool in OpenCL C, so bool buffers are uchar (bytes 0 or 1)."""
    return "uchar" if dt == dtypes.bool else super().storage_type(dt)

  def bounds_claim(self, f: str) -> str:
    """EXEC.BOUNDS.checked: a 32-bit atomic (core OpenCL C) on the low half of the flag word (little-endian)."""
    return f"atomic_xchg((volatile __global int*){f}, 1) == 0"

  def group_id(self, d: int) -> str: return f"(int)get_group_id({d})"
  def local_id(self, d: int) -> str: return f"(int)get_local_id({d})"

  def cast(self, k: _Kernel, src: DType, dst: DType, x: str) -> str:
    """DEV.CL.fp64: 32- and 64-bit integers to a 16-bit float without double: rounded to odd at float32's 24 bits,
    then once to the 16-bit format, which is the single correct rounding (at least 2 more bits than 11)."""
    if self.fp64 or dst not in HALF_TYPES or not dtypes.is_int(src) or src.itemsize < 4:
      return super().cast(k, src, dst, x)
    u64 = k.need("u64_to_f32_odd", f"{self.helper_prefix}float u64_to_f32_odd(uint64_t m) {{\n"
                 "  int shift = 0;\n  while ((m >> shift) >= ((uint64_t)1 << 24)) shift++;\n"
                 "  uint64_t kept = (m >> shift) | ((m & (((uint64_t)1 << shift) - 1)) != 0);\n"
                 "  return ldexp((float)kept, shift);   /* kept < 2^24: exact in float */\n}")
    if dtypes.is_unsigned(src): return self.round_half(k, dst, f"{u64}((uint64_t){x})")
    i64 = k.need("i64_to_f32_odd", f"{self.helper_prefix}float i64_to_f32_odd(int64_t v) {{ return v < 0 ? "
                 f"-{u64}(0 - (uint64_t)v) : {u64}((uint64_t)v); }}")
    return self.round_half(k, dst, f"{i64}((int64_t){x})")

  def _fma_half(self, k: _Kernel, dt: DType) -> str:
    """OP.MULACC.fused without double (DEV.CL.fp64): for float16, a*b is exact in float32 (22 bits, far from
    float32's range limits) and p + c is made exact with TwoSum and rounded to odd in float32, then once to float16.
    A bfloat16 product can leave float32's exponent range, so bfloat16 MULACC needs cl_khr_fp64."""
    if self.fp64: return super()._fma_half(k, dt)
    if dt != dtypes.float16:
      raise SpecError("DEV.CL.fp64", f"MULACC on {dt!r} needs double (cl_khr_fp64) to be rounded once")
    add = k.need("f32_add_odd", f"{self.helper_prefix}float f32_add_odd(float p, float c) {{\n"
                 "  float s = p + c, t = s - p, e = (p - (s - t)) + (c - t);   /* s + e == p + c exactly */\n"
                 "  uint32_t b; memcpy(&b, &s, 4);\n"
                 "  if (e != 0 && isfinite(s) && !(b & 1)) s = nextafter(s, e > 0 ? INFINITY : -INFINITY);\n"
                 "  return s;\n}")
    inner = f"{add}(a * b, c)"
    return k.need("fma_f16", f"{self.helper_prefix}float fma_f16(float a, float b, float c) {{ return "
                  f"{self.round_half(k, dt, inner)}; }}")
