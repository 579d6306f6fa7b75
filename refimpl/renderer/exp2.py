"""The CPU's float32 EXP2 (spec/backends.md, DEV.C.exp2): a C helper, `exp2_f32`, that GCC can vectorise.

glibc's `exp2f` is a call per element, which GCC cannot vectorise; softmax spends most of its time there. This
helper computes 2**x in double and rounds once to float:

- |x| is clamped to 151 on the float's bits (an unsigned MIN, no branch): 2**151 rounds to +inf and 2**-151 to +0.0
  in float32, as every |x| >= 151 does (OP.EXP2.overflow, OP.EXP2.underflow; +-inf included);
- `t = c + 1.5 * 2**52` rounds c (|c| <= 151) to the nearest integer k, which sits in t's low bits; `f = c - k` is
  exact, |f| <= 1/2;
- 2**f = 1 + f * q(f), q a degree-9 polynomial in Horner form (`COEFFS`, tools/exp2_poly.py): within 2**-50.6 of
  2**f on [-1/2, 1/2] before rounding, 2**-50.3 after Horner's roundings in double (measured against exp2l at 2e7
  points), far below float32's 2**-24; f = 0 gives exactly 1, so an integer x gives an exact power of two (OP.EXP2);
- 2**k is built from t's bits ((k + 1023) << 52, k in [-151, 151]: a normal double), and (1 + f*q) * 2**k is exact;
- the one rounding to float gives subnormals, +0.0 and +inf as IEEE 754 rounds them (ties to even), so the exact
  values of OP.EXP2's table come out, and every other result is one of the two floats around 2**x (ACC.EXP2.f32:
  the double is too close to 2**x for a float to lie between them), checked for all 2**32 inputs by
  tests/test_cpu_exp2.py;
- a NaN gives the operand quieted (`x | 0x400000`), as `x + x` would, selected with a mask.

No branch, so GCC if-converts nothing and vectorises the loops around it (with -march=native, DEV.C.flags.exp2);
no fma (-ffp-contract=off), so the scalar and vector code give the same bits (EXEC.OPT.exact)."""
from __future__ import annotations

__all__ = ["COEFFS", "exp2_f32_source"]

# q(f) = (2**f - 1) / f on [-1/2, 1/2], highest degree first: a Chebyshev fit at 200 bits rounded to double
# (tools/exp2_poly.py prints them and the error of 1 + f*q(f) against 2**f)
COEFFS = ("0x1.e5e9f548e5725p-28", "0x1.b6571de2f2351p-24", "0x1.62bfe46117445p-20", "0x1.ffcb76789860fp-17",
          "0x1.4309130378460p-13", "0x1.5d87fe908f88ap-10", "0x1.3b2ab6fba385fp-7", "0x1.c6b08d7044119p-5",
          "0x1.ebfbdff82c590p-3", "0x1.62e42fefa39f7p-1")


def exp2_f32_source(prefix: str = "static inline ") -> str:
  """The C definition of `float exp2_f32(float x)` (needs stdint.h and string.h), `prefix` before its type."""
  horner = "".join(f"  q = q * f + {c};\n" for c in COEFFS[1:])
  return (f"{prefix}float exp2_f32(float x) {{   /* DEV.C.exp2 */\n"
          "  uint32_t xb; memcpy(&xb, &x, 4);\n"
          "  uint32_t a = xb & 0x7fffffffu, nan = 0u - (uint32_t)(a > 0x7f800000u);\n"
          "  a = a < 0x43170000u ? a : 0x43170000u;   /* |x| <= 151 */\n"
          "  uint32_t cb = (xb & 0x80000000u) | a; float cf; memcpy(&cf, &cb, 4);\n"
          "  double c = (double)cf, t = c + 0x1.8p52, f = c - (t - 0x1.8p52);   /* c = k + f, k in t's low bits */\n"
          f"  double q = {COEFFS[0]};\n{horner}"
          "  uint64_t sb; memcpy(&sb, &t, 8); sb = (sb + 1023u) << 52;   /* 2**k */\n"
          "  double s; memcpy(&s, &sb, 8);\n"
          "  float r = (float)((1.0 + f * q) * s);   /* the one rounding */\n"
          "  uint32_t rb; memcpy(&rb, &r, 4); rb = (rb & ~nan) | ((xb | 0x400000u) & nan);\n"
          "  memcpy(&r, &rb, 4); return r;\n}")
