"""Unary math: sign and rounding, the transcendental functions composed of EXP2, LOG2, SIN, SQRT and
RECIPROCAL, activations, clipping and NaN/inf tests."""
from __future__ import annotations

import math


from refimpl.dtype import dtypes, least_upper_float
from refimpl.helpers import SpecValueError
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
  def gelu(self, approximate: str = "tanh") -> Tensor:
    """GELU (TENSOR.GELU). approximate='tanh' (tinygrad's default, which refimpl follows; torch's default is 'none'):
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). 'none': the exact 0.5 x (1 + erf(x / sqrt(2)))."""
    x = self.cast(least_upper_float(self.dtype))
    if approximate == "tanh": return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
    if approximate == "none": return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
    raise SpecValueError("TENSOR.GELU", f"approximate={approximate!r} is not 'tanh' or 'none'")
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
    if min_ is None and max_ is None: raise SpecValueError("API.ARGS.clip", "clip needs at least one of min_ and max_")
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
  def isfinite(self) -> Tensor:
    """Neither infinite nor NaN (TENSOR.ISFINITE); every integer and bool is finite."""
    if not dtypes.is_float(self.dtype): return Tensor.full(self.shape, True, device=self.device)
    return (self.isinf() | self.isnan()).logical_not()

  # logarithms, hyperbolic functions, their inverses and erf (spec/tensor_math.md); every one is a composition of
  # EXP2, LOG2, SQRT and the exact ops, with a branch per range where one formula would cancel or overflow. A branch
  # not taken is fed a harmless value, so that the gradient WHERE sends it (0) meets no inf or NaN (GRAD.WHERE).
  def log10(self) -> Tensor:
    """log10 x = log2(x) * log10(2) (TENSOR.LOG10)."""
    return self.log2() * math.log10(2)
  def _sinh_small(self) -> Tensor:
    """sinh x for |x| <= 1 by its Taylor series x (1 + x**2/3! + x**4/5! + ...), 10 terms (the tail is below
    2**-53): positive terms, no cancellation, and a gradient that is the series' own derivative."""
    return self * _horner(self * self, _SINH_SERIES)
  def _expm1(self) -> Tensor:
    """e**u - 1 without cancellation near 0: 2 sinh(u/2) e**(u/2) for |u| < 2 (an identity of exact factors),
    plainly e**u - 1 outside, where the subtraction loses nothing."""
    near = (self > -2) & (self < 2)
    h = near.where(self, 0.0) * 0.5
    return near.where(2 * h._sinh_small() * h.exp(), self.exp() - 1)
  def sinh(self) -> Tensor:
    """(e**x - e**-x) / 2 (TENSOR.SINH): for |x| < 1 its Taylor series, which does not cancel; e**x overflows
    first where |x| > ln(max) (ACC.RANGE)."""
    x = self.cast(least_upper_float(self.dtype))
    small = (x > -1) & (x < 1)
    return small.where(small.where(x, 0.0)._sinh_small(), 0.5 * (x.exp() - (-x).exp()))
  def cosh(self) -> Tensor:
    """(e**x + e**-x) / 2 (TENSOR.COSH): a sum of positives, no cancellation."""
    x = self.cast(least_upper_float(self.dtype))
    return 0.5 * (x.exp() + (-x).exp())
  def _odd(self, f) -> Tensor:
    """An odd function from its values on x >= 0: f(|x|) with x's sign. |x| is taken with WHERE, not abs (whose tie at
    0 would give a zero slope there); at x = +-0 the result is x itself, so the zero keeps its sign and the slope
    there is 1 (every caller has f'(0) = 1)."""
    neg = self < 0
    r = f(neg.where(-self, self))
    return (self == 0).where(self, neg.where(-r, r))
  def atan(self) -> Tensor:
    """arctan x (TENSOR.ATAN): odd; for a = |x| the argument is reduced to |t| <= tan(pi/8) (a > tan(3pi/8):
    pi/2 + atan(-1/a); a > tan(pi/8): pi/4 + atan((a - 1) / (a + 1))) and atan(t) is its Taylor series of 21 terms
    in t**2, whose tail is below 2**-53 there. atan(+-inf) = +-pi/2."""
    return self.cast(least_upper_float(self.dtype))._odd(_atan_nonneg)
  def asin(self) -> Tensor:
    """arcsin x = atan(x / sqrt((1 - x)(1 + x))) (TENSOR.ASIN): 1 - x is exact near 1, and atan of the large
    quotient is well conditioned. NaN outside [-1, 1]. At x = +-1 the value is +-pi/2 through pi/2 - sqrt(2 (1 - x)),
    exact there, whose slope is torch's +inf."""
    x = self.cast(least_upper_float(self.dtype))
    top, bottom = x == 1, x == -1
    inner = (top | bottom).where(0.5, x)
    core = (inner / ((1 - inner) * (1 + inner)).sqrt()).atan()
    return top.where(math.pi / 2 - (2 * (1 - x)).sqrt(), bottom.where((2 * (1 + x)).sqrt() - math.pi / 2, core))
  def acos(self) -> Tensor:
    """arccos x = 2 atan(sqrt((1 - x) / (1 + x))) (TENSOR.ACOS): accurate near both ends, where pi/2 - asin(x) would
    cancel. NaN outside [-1, 1]. At x = 1 and x = -1 the values 0 and pi come through sqrt(2 (1 - x)) and
    pi - sqrt(2 (1 + x)), exact there, whose slopes are torch's -inf."""
    x = self.cast(least_upper_float(self.dtype))
    top, bottom = x == 1, x == -1
    inner = (top | bottom).where(0.0, x)
    core = 2 * ((1 - inner) / (1 + inner)).sqrt().atan()
    return top.where((2 * (1 - x)).sqrt(), bottom.where(math.pi - (2 * (1 + x)).sqrt(), core))
  def asinh(self) -> Tensor:
    """arsinh x (TENSOR.ASINH): odd; for a = |x|, log1p(a + a**2 / (1 + sqrt(1 + a**2))), accurate near 0; above
    2**ceil(p/2) (p significand bits), where sqrt(1 + a**2) = a to working precision and a**2 may overflow,
    log(a) + ln 2."""
    x = self.cast(least_upper_float(self.dtype))
    big_at = 2.0 ** -(-(dtypes.finfo(x.dtype)[1] + 1) // 2)
    def f(a: Tensor) -> Tensor:
      big = a > big_at
      m = big.where(1.0, a)
      return big.where(big.where(a, big_at).log() + math.log(2), (m + m * m / (1 + (1 + m * m).sqrt()))._ln1p())
    return x._odd(f)
  def acosh(self) -> Tensor:
    """arcosh x (TENSOR.ACOSH): for x < 2, log1p(t + sqrt(t) sqrt(t + 2)) with t = x - 1 (exact), accurate near 1
    and NaN for x < 1 (sqrt of a negative); up to 2**ceil(p/2), log(x + sqrt(x - 1) sqrt(x + 1)); beyond, log(x) +
    ln 2. At x = 1 the slope is +inf (sqrt at 0), as torch's."""
    x = self.cast(least_upper_float(self.dtype))
    big_at = 2.0 ** -(-(dtypes.finfo(x.dtype)[1] + 1) // 2)
    near, far = x < 2, x > big_at
    t = near.where(x, 1.5) - 1
    m = (near | far).where(4.0, x)
    return near.where((t + t.sqrt() * (t + 2).sqrt())._ln1p(),
                      far.where(far.where(x, big_at).log() + math.log(2), (m + (m - 1).sqrt() * (m + 1).sqrt()).log()))
  def _atanh_small(self) -> Tensor:
    """atanh s for |s| < 1/2 by its Taylor series s (1 + s**2/3 + s**4/5 + ...), 24 terms of one sign (the tail is
    below 2**-53)."""
    return self * _horner(self * self, _ATANH_SERIES)
  def _ln1p(self) -> Tensor:
    """log(1 + u) for u >= 0 (or NaN), accurate near 0: 2 atanh(u / (u + 2)) for u < 2, where u / (u + 2) < 1/2;
    plainly log(1 + u) above, where 1 + u loses nothing that matters."""
    small = (self >= 2).logical_not()
    us = small.where(self, 0.0)
    return small.where(2 * (us / (us + 2))._atanh_small(), (1 + small.where(2.0, self)).log())
  def atanh(self) -> Tensor:
    """artanh x (TENSOR.ATANH): odd; for a = |x| < 1/2 its Taylor series; otherwise (log(1 + a) - log(1 - a)) / 2,
    a sum of two positive terms: +-inf at +-1 with slope +inf, NaN beyond."""
    def f(a: Tensor) -> Tensor:
      small = a < 0.5
      s, b = small.where(a, 0.0), small.where(0.75, a)
      return small.where(s._atanh_small(), 0.5 * ((1 + b).log() - (1 - b).log()))
    return self.cast(least_upper_float(self.dtype))._odd(f)
  def erf(self) -> Tensor:
    """The error function (TENSOR.ERF). |x| < 2: (2/sqrt(pi)) x e**-x**2 sum_n 2**n x**2n / (2n+1)!!, a series of
    positive terms (30 of them: the tail is below 2**-53); 2 <= |x| < 6: 1 - erfc(|x|) with erfc from its continued
    fraction e**-x**2 / sqrt(pi) / (x + (1/2) / (x + (2/2) / (x + ...))), 60 levels deep; |x| >= 6: +-1, which
    erf(x) rounds to in every float dtype (erfc(6) < 2**-54). erf(+-0) = +-0."""
    x = self.cast(least_upper_float(self.dtype))
    neg = x < 0
    a = neg.where(-x, x)
    small, huge = (a >= 2).logical_not(), a >= 6    # NaN goes to the series and stays NaN
    xs = small.where(x, 0.0)
    z = xs * xs
    # the series in w = x**2 / 4 <= 1 (exact scaling): its coefficients c_n 4**n stay below 5, and the gradient of
    # the Horner scheme carries powers w**k <= 1 (powers of x**2 up to 4**29 would overflow float16 on the way back)
    series = (xs * _horner(z * 0.25, _ERF_SERIES) * (-z).exp()) * (2 / math.sqrt(math.pi))
    ac = (small | huge).where(3.0, a)
    cf = ac
    for k in range(60, 0, -1): cf = ac + (k / 2) / cf
    tail = 1 - (-(ac * ac)).exp() / (cf * math.sqrt(math.pi))
    tail = huge.where(1.0, tail)
    return small.where(series, neg.where(-tail, tail))


def _horner(z: Tensor, coefficients: list[float]) -> Tensor:
  """c0 + c1 z + c2 z**2 + ... evaluated from the highest power down."""
  out = z * coefficients[-1]
  for c in reversed(coefficients[1:-1]): out = (out + c) * z
  return out + coefficients[0]


# atan(t) = t * sum_k (-1)**k t**2k / (2k + 1); 21 terms leave a tail below 2**-53 for |t| <= tan(pi/8)
_ATAN_SERIES = [(-1) ** k / (2 * k + 1) for k in range(21)]
# erf(x) = (2/sqrt(pi)) x e**-x**2 sum_n c_n x**2n with c_n = 2**n / (1 * 3 * ... * (2n+1)); 30 terms for |x| < 2,
# written as coefficients of w = x**2 / 4: c_n 4**n = 8**n / (1 * 3 * ... * (2n+1))
_ERF_SERIES = [1.0]
for _n in range(1, 30): _ERF_SERIES.append(_ERF_SERIES[-1] * 8 / (2 * _n + 1))
# atanh(a) = a * sum_k a**2k / (2k + 1); 24 terms leave a tail below 2**-53 for a < 1/2
_ATANH_SERIES = [1 / (2 * k + 1) for k in range(24)]
# sinh(x) = x * sum_k x**2k / (2k + 1)!; 10 terms leave a tail below 2**-53 for |x| <= 1
_SINH_SERIES = [1 / math.factorial(2 * k + 1) for k in range(10)]
_TAN_PI_8, _TAN_3PI_8 = math.tan(math.pi / 8), math.tan(3 * math.pi / 8)


def _atan_nonneg(a: Tensor) -> Tensor:
  """atan(a) for a >= 0 (or NaN), by argument reduction to |t| <= tan(pi/8) and the Taylor series there."""
  big = a > _TAN_3PI_8
  mid = (a > _TAN_PI_8) & big.logical_not()
  inv = -(big.where(a, 1.0).reciprocal())        # atan(a) = pi/2 + atan(-1/a)
  am = mid.where(a, 1.0)
  shifted = (am - 1) / (am + 1)                   # atan(a) = pi/4 + atan((a - 1) / (a + 1))
  t = big.where(inv, mid.where(shifted, a))
  r = t * _horner(t * t, _ATAN_SERIES)
  return big.where(math.pi / 2 + r, mid.where(math.pi / 4 + r, r))
