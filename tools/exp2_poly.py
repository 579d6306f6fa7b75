"""The polynomial of the CPU's float32 EXP2 helper (DEV.C.exp2, refimpl/renderer/exp2.py), from the math.

2**f = 1 + f * q(f) with q(f) = (2**f - 1) / f, analytic on [-1/2, 1/2] (q(0) = ln 2). q is fitted by a Chebyshev
interpolant of 10 coefficients (mpmath's chebyfit, 200-bit arithmetic, near-minimax), the coefficients are rounded
to double, and the relative error of 1 + f*q(f) against 2**f is measured at 4001 points in exact arithmetic (the
rounded polynomial, before Horner's roundings in double).

  python tools/exp2_poly.py   # prints COEFFS as refimpl/renderer/exp2.py has them and the measured error
"""
from __future__ import annotations

import mpmath as mp


def fit(n: int = 10) -> tuple[list[float], float]:
  """The n coefficients of q (highest degree first, as doubles) and log2 of the worst relative error of 1 + f*q."""
  mp.mp.prec = 200
  def q(f): return (mp.mpf(2) ** f - 1) / f if f != 0 else mp.log(2)
  coeffs = [float(c) for c in mp.chebyfit(q, [-0.5, 0.5], n)]
  worst = mp.mpf(0)
  for i in range(4001):
    f = mp.mpf(i - 2000) / 4000
    acc = mp.mpf(0)
    for c in coeffs: acc = acc * f + mp.mpf(c)
    worst = max(worst, abs((1 + f * acc) / mp.mpf(2) ** f - 1))
  return coeffs, float(mp.log(worst, 2))


if __name__ == "__main__":
  coeffs, err = fit()
  print("COEFFS = (" + ", ".join(f'"{c.hex()}"' for c in coeffs) + ")")
  print(f"max relative error of 1 + f*q(f) on [-1/2, 1/2]: 2**{err:.2f}")
