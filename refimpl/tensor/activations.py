"""Activation functions beyond the basic ones of unary.py: logsigmoid, mish, selu, celu, hardsigmoid, hardswish,
quick_gelu, softsign and softmin (spec/tensor_math.md). Each is a composition of the Tensor ops of the other
families, so its gradient is what their rules compose to (GRAD.MODEL); where that would differ from torch's at a
kink, the composition says how it follows torch."""
from __future__ import annotations

import math

from refimpl.dtype import DTypeLike, dtypes, least_upper_float
from refimpl.tensor.core import Tensor


class ActivationOps:
  def logsigmoid(self) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x) (TENSOR.LOGSIGMOID), without overflow for large |x|; slope 1/2 at 0."""
    x = self.cast(least_upper_float(self.dtype))
    return -((-x)._softplus_stable())

  def mish(self) -> Tensor:
    """x tanh(softplus(x)) (TENSOR.MISH). With u = e**x, tanh(log(1 + u)) = n / (n + 2), n = u (u + 2); for x > 0
    the same with v = e**-x is (1 + 2v) / (1 + 2v + 2v**2). Neither cancels (tanh of a tiny softplus would lose
    every digit for negative x), no intermediate exceeds 5 (so the divisions' gradient rules, which square their
    divisors, stay finite), and above (p + 3) ln(2) / 2 (p significand bits) the factor rounds to 1 and mish is x."""
    x = self.cast(least_upper_float(self.dtype))
    above = x > (dtypes.finfo(x.dtype)[1] + 4) * math.log(2) / 2
    pos = x > 0
    u = pos.where(0.0, x).exp()
    n = u * (u + 2)
    v = (pos & above.logical_not()).where(-x, 0.0).exp()
    w = 1 + 2 * v
    factor = pos.where(w / (w + 2 * v * v), n / (n + 2))
    return above.where(x, x * factor)

  def selu(self, alpha=1.67326, gamma=1.0507) -> Tensor:
    """gamma * elu(x, alpha) (TENSOR.SELU). The defaults are tinygrad's, torch's constants rounded to 6 and 5
    digits (torch: 1.6732632423543772, 1.0507009873554805)."""
    return gamma * self.elu(alpha)

  def celu(self, alpha=1.0) -> Tensor:
    """x for x > 0 (and NaN), alpha * expm1(x / alpha) otherwise (TENSOR.CELU, expm1 as in sinh's clause); slope 1
    at 0, as torch's."""
    x = self.cast(least_upper_float(self.dtype))
    neg = x <= 0
    return neg.where(alpha * (neg.where(x, 0.0) / alpha)._expm1(), x)

  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
    """alpha * x + beta clamped to [0, 1] (TENSOR.HARDSIGMOID); slope alpha strictly inside, 0 at and beyond the
    bounds, as torch's."""
    x = self.cast(least_upper_float(self.dtype))
    return (alpha * x + beta)._clamp(0, 1, bounds_inside=False)

  def hardswish(self) -> Tensor:
    """x * relu6(x + 3) / 6 (TENSOR.HARDSWISH); at x = -3 and 3 the slopes are 0 and 1 (relu6's zero slope at its
    bounds), as torch's."""
    x = self.cast(least_upper_float(self.dtype))
    return x * ((x + 3).relu6() * (1 / 6))   # the factor is at most 1: x * 6 would overflow near the largest x

  def quick_gelu(self) -> Tensor:
    """x * sigmoid(1.702 x) (TENSOR.QUICK_GELU)."""
    x = self.cast(least_upper_float(self.dtype))
    return x * (x * 1.702).sigmoid()

  def softsign(self) -> Tensor:
    """x / (1 + |x|) (TENSOR.SOFTSIGN); NaN at +-inf (inf / inf), as torch's."""
    x = self.cast(least_upper_float(self.dtype))
    return x / (1 + x.abs())

  def softmin(self, axis=-1, dtype: DTypeLike | None = None) -> Tensor:
    """softmax(-x) along `axis` (TENSOR.SOFTMIN), in `dtype` if given, else the input's float dtype."""
    x = self.cast(dtype) if dtype is not None else self.cast(least_upper_float(self.dtype))
    return (-x).softmax(axis)
