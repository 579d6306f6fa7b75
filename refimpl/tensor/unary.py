"""Unary math: sign and rounding, the transcendental functions composed of EXP2, LOG2, SIN, SQRT and
RECIPROCAL, activations, clipping and NaN/inf tests."""
from __future__ import annotations

import math


from refimpl.dtype import dtypes, least_upper_float
from refimpl.uop import Ops
from refimpl.tensor.core import Tensor


class UnaryOps:
  # sign, rounding
  def abs(self) -> Tensor:
    """|x|: max(x, -x), so abs(-0.0) = 0.0 and NaN stays NaN; unsigned and bool are unchanged."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    return self.maximum(-self)
  def sign(self) -> Tensor:
    """-1, 0 or 1 in the input dtype; like torch, sign(-0.0) = 0 and sign(NaN) = 0."""
    if self.dtype == dtypes.bool: return self
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
  def trunc(self) -> Tensor:
    """Round toward zero (TRUNC); integers are unchanged."""
    return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self) -> Tensor:
    """Round down: trunc, minus one where trunc went up (negative non-integers); keeps -0.0."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    """Round up: trunc, plus one where trunc went down; ceil(-0.5) = -0.0 as in torch."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round to nearest, ties to even (torch.round). Built from trunc and the exact fraction x - trunc(x)."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    frac = (self - t).abs()
    away = t + self.sign()           # the neighbour away from zero
    t_even = (t - (t / 2).trunc() * 2) == 0
    return (frac > 0.5).where(away, ((frac == 0.5) & t_even.logical_not()).where(away, t))

  # transcendental: compositions of EXP2, LOG2, SIN, SQRT, RECIPROCAL
  def exp(self) -> Tensor:
    """e**x = exp2(x * log2(e))."""
    x = self.cast(least_upper_float(self.dtype))
    return (x * (1 / math.log(2))).exp2()
  def log(self) -> Tensor:
    """ln x = log2(x) * ln(2)."""
    return self.log2() * math.log(2)
  def rsqrt(self) -> Tensor:
    """1 / sqrt(x)."""
    return self.sqrt().reciprocal()
  def cos(self) -> Tensor:
    """cos x = sin(pi/2 - x)."""
    x = self.cast(least_upper_float(self.dtype))
    return (math.pi / 2 - x).sin()
  def tan(self) -> Tensor:
    """sin x / cos x."""
    return self.sin() / self.cos()
  def sigmoid(self) -> Tensor:
    """1 / (1 + e**-x), as 1 / (1 + z) for x > 0 and z / (1 + z) otherwise with z = e**-|x| <= 1: no intermediate
    overflows, so the gradient is finite (0) where e**-x would be inf (x < -88 in float32), as torch's. The sign is
    split with WHERE, not abs, whose tie at 0 would give the wrong slope there (GRAD.CHECK.tensor)."""
    x = self.cast(least_upper_float(self.dtype))
    pos = x > 0
    z = pos.where(-x, x).exp()
    r = (1 + z).reciprocal()
    return pos.where(r, z * r)
  def tanh(self) -> Tensor:
    """2 * sigmoid(2x) - 1 (tinygrad's composition; loses relative accuracy near 0)."""
    return 2 * (2 * self.cast(least_upper_float(self.dtype))).sigmoid() - 1
  def gelu(self) -> Tensor:
    """The tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (torch's approximate='tanh')."""
    x = self.cast(least_upper_float(self.dtype))
    return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
  def silu(self) -> Tensor:
    """x * sigmoid(x)."""
    return self * self.sigmoid()
  def swish(self) -> Tensor:
    """Same as silu."""
    return self.silu()
  def softplus(self, beta=1) -> Tensor:
    """log(1 + e**(beta x)) / beta, as (max(beta x, 0) + log1p(e**-|beta x|)) / beta so that large x do not overflow,
    built so that the gradient at x = 0 is torch's 1/2 (_softplus_stable; relu and abs would each give 0 there)."""
    x = self.cast(least_upper_float(self.dtype))
    return (x * beta)._softplus_stable() * (1 / beta)
  def elu(self, alpha=1.0) -> Tensor:
    """x for x > 0 (and NaN), alpha (e**x - 1) otherwise. The exponential branch is fed 0 where it is not taken, so
    its e**x cannot overflow and turn the gradient WHERE sends it (0) into NaN (GRAD.CHECK.tensor: torch gives g)."""
    x = self.cast(least_upper_float(self.dtype))
    neg = x <= 0
    return neg.where(alpha * (neg.where(x, 0).exp() - 1), x)
  def leaky_relu(self, neg_slope=0.01) -> Tensor:
    """x for x > 0, neg_slope * x otherwise: at x = 0 (and NaN) the gradient is neg_slope * g, as torch's."""
    return (self > 0).where(self, self * neg_slope)
  def relu6(self) -> Tensor:
    """min(max(x, 0), 6), with hardtanh's gradient (0 at x = 0 and x = 6, as torch's)."""
    return self.hardtanh(0, 6)
  def hardtanh(self, min_val=-1, max_val=1) -> Tensor:
    """x clipped to [min_val, max_val]. torch's gradient is g strictly inside (and at NaN), 0 at the bounds."""
    return self._clamp(min_val, max_val, bounds_inside=False)
  def clip(self, min_=None, max_=None) -> Tensor:
    """Clamp to [min_, max_] (either may be None); NaN stays NaN. torch's clamp gradient: g on the closed interval,
    bounds included, and 0 at NaN."""
    if min_ is None and max_ is None: raise ValueError("clip needs at least one of min_ and max_")
    x = self._clamp(min_, max_, bounds_inside=True)
    return x.isnan().where(x.detach(), x) if dtypes.is_float(x.dtype) else x

  def _clamp(self, lo, hi, bounds_inside: bool) -> Tensor:
    """Clamp with WHERE on comparisons, the lower bound first (so lo > hi gives hi, as torch). Not built on
    maximum/minimum, whose tie rule (GRAD.MAX.tie) would give g/2 at a bound: there x passes through unchanged (so
    -0.0 stays -0.0), with gradient g if `bounds_inside`, else through DETACH with none (GRAD.CHECK.tensor)."""
    x = self
    for b, below in ((lo, True), (hi, False)):
      if b is None: continue
      x, bt = x._broadcasted(b)
      at = x if bounds_inside else (x == bt).where(x.detach(), x)
      x = ((x < bt) if below else (x > bt)).where(bt, at)
    return x
  clamp = clip
  def isnan(self) -> Tensor:
    """x != x."""
    return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    """x == +inf (if detect_positive) or x == -inf (if detect_negative)."""
    if not dtypes.is_float(self.dtype): return Tensor.full(self.shape, False, device=self.device)
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
