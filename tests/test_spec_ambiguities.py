"""The places where a clean-room reading of spec/ops.md, dtypes.md and gradients.md did not decide a value (issue 16,
item 8), each pinned against an oracle that is not refimpl's exec_alu: torch autograd, numpy, or exact rationals.

- GRAD.POW.base-zero: `b >= 0` is IEEE's comparison, so a = 0, b = NaN gives NaN gradients (torch).
- OP.CAST.int-to-float / float-to-float: overflow is "rounds beyond the largest finite value" (exact rationals,
  numpy's float16, torch's bfloat16).
- OP.FDIV.zero: the sign of a zero quotient is the xor of the signs (numpy).
- GRAD.MODEL.eval and DT.CONST.round: the order each gradient formula and Tensor method is evaluated in, and the
  rounding of its constants, bit for bit against numpy float32/float16 in the stated order; each test also shows that
  another order gives other bits on the same inputs, so it can tell them apart.
- GRAD.ABS: Tensor.abs's gradient at 0, -0.0 and NaN (torch).
- DT.SCALAR-PROMOTE.python: numpy scalars, IntEnum members and int subclasses as scalar operands (torch).
"""
from __future__ import annotations

import enum
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from conformance.spec_tables import edge_tables, parse_value
from refimpl import Tensor, dtypes
from refimpl.dtype import to_dtype

from pathlib import Path

SPEC = Path(__file__).resolve().parent.parent / "spec"
NAN, INF = math.nan, math.inf


def _bits_equal(got: np.ndarray, want: np.ndarray) -> bool:
  """Same values bit for bit, any NaN matching any NaN (DT.NAN)."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
  nan = np.isnan(got) & np.isnan(want)
  same = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
  return bool((nan | same).all())


# ---------------------------------------------------------------------------------------------- GRAD.POW at a = 0, NaN

def test_pow_gradient_at_zero_base_nan_exponent_is_torchs():
  """GRAD.POW.base-zero: the guard `(a == 0) AND (b >= 0)` uses IEEE's `>=`, false for NaN, so db = g*y*ln(0) is
  NaN there (a `NOT(b < 0)` guard would give 0). torch autograd is the oracle."""
  a_v, b_v = [0.0, 0.0, 0.0, -0.0], [NAN, 2.0, -NAN, 0.5]
  a, b = Tensor(a_v, requires_grad=True), Tensor(b_v, requires_grad=True)
  da, db = (a ** b).sum().gradient(a, b)
  ta = torch.tensor(a_v, requires_grad=True)
  tb = torch.tensor(b_v, requires_grad=True)
  (ta ** tb).sum().backward()
  for got, want in ((da.numpy(), ta.grad.numpy()), (db.numpy(), tb.grad.numpy())):
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)]), (got, want)
  assert np.isnan(db.numpy()[0]) and np.isnan(da.numpy()[0])


# ------------------------------------------------------------------------------------- CAST overflow at the boundary

def _round_exact(q: Fraction, ebits: int, mbits: int) -> float:
  """`q` rounded to nearest, ties to even, into the binary format with `ebits`/`mbits`, computed on rationals (an
  oracle written from IEEE 754, independent of refimpl.dtype.round_float)."""
  if q == 0: return 0.0
  sign, q = (-1.0 if q < 0 else 1.0), abs(q)
  emax = (1 << (ebits - 1)) - 1
  emin = 1 - emax
  e = q.numerator.bit_length() - q.denominator.bit_length()
  if Fraction(2) ** e > q: e -= 1
  e = max(e, emin)
  quantum = Fraction(2) ** (e - mbits)
  n, rem = divmod(q, quantum)
  if rem * 2 > quantum or (rem * 2 == quantum and n % 2 == 1): n += 1
  v = n * quantum
  largest = (2 - Fraction(1, 1 << mbits)) * Fraction(2) ** emax
  return sign * (math.inf if v > largest else float(v))


_FMT = {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52)}


def _cast_rows_to_16bit():
  for clause, header, rows in edge_tables(SPEC / "ops.md"):
    if clause != "OP.CAST": continue
    for frm, to, operand, result in rows:
      src, dst = to_dtype(frm), to_dtype(to)
      if dst in (dtypes.float16, dtypes.bfloat16) and src != dtypes.bool:
        yield pytest.param(src, dst, parse_value(operand, src), parse_value(result, dst), id=f"{frm}-{to}-{operand}")


CAST_ROWS = list(_cast_rows_to_16bit())


def test_cast_table_has_the_overflow_boundary_rows():
  """The OP.CAST table pins both sides of float16's and bfloat16's rounding boundary (issue 16, item 8)."""
  have = {(s.name, d.name, v) for s, d, v, _ in (p.values for p in CAST_ROWS)}
  assert ("int", "half", 65519) in have and ("int", "half", 65520) in have and ("int", "half", -65520) in have
  assert ("float", "__bf16", 3.396177326406364e+38) in have and ("float", "__bf16", 3.39617752923046e+38) in have


@pytest.mark.parametrize("src,dst,x,want", CAST_ROWS)
def test_cast_rows_to_16bit_floats_against_exact_rounding(src, dst, x, want):
  """OP.CAST.int-to-float, OP.CAST.float-to-float: every row of the table into float16/bfloat16 is the exact value
  rounded once (rationals), overflow meaning "rounds beyond the largest finite value". Where a single hardware
  rounding exists (numpy's int/float -> float16, torch's float32 -> bfloat16 and small ints -> bfloat16) it agrees."""
  if isinstance(x, float) and math.isnan(x):
    assert math.isnan(want)
    return
  exact = _round_exact(Fraction(x), *_FMT[dst]) if math.isfinite(x) else x
  if isinstance(x, float): exact = math.copysign(exact, x)   # a rational has no -0.0: the sign is the operand's
  assert struct.pack("<d", exact) == struct.pack("<d", want), (x, exact, want)
  if dst == dtypes.float16 and (isinstance(x, float) or abs(x) < 2 ** 53):
    with np.errstate(over="ignore"):
      h = np.array([x], np.float64 if isinstance(x, float) else np.int64).astype(np.float16)
    assert struct.pack("<d", float(h[0])) == struct.pack("<d", want), (x, float(h[0]), want)
  if dst == dtypes.bfloat16 and (src == dtypes.float32 or (isinstance(x, int) and abs(x) < 2 ** 24)):
    t = torch.tensor([x], dtype=torch.float32 if src == dtypes.float32 else torch.int64).to(torch.bfloat16)
    assert struct.pack("<d", t.float().item()) == struct.pack("<d", want), (x, t.float().item(), want)


def test_int_to_float16_overflow_boundary_through_tensors():
  """OP.CAST.int-to-float through refimpl's Tensor: 65519 rounds down to 65504, 65520 up to inf (numpy agrees)."""
  vals = [65503, 65504, 65519, 65520, 65535, -65519, -65520]
  got = Tensor(vals, dtype=dtypes.int32).cast(dtypes.float16).numpy()
  with np.errstate(over="ignore"):
    want = np.array(vals, np.int32).astype(np.float16)
  assert _bits_equal(got, want), (got, want)
  assert got[2] == 65504 and got[3] == np.inf


# ----------------------------------------------------------------------------------------------- FDIV signs of zero

def _fdiv_rows():
  for clause, header, rows in edge_tables(SPEC / "ops.md"):
    if clause != "OP.FDIV": continue
    for dt, operands, result in rows:
      d = to_dtype(dt)
      if d == dtypes.bfloat16: continue
      a, b = (parse_value(c, d) for c in operands.split(","))
      yield pytest.param(d, a, b, parse_value(result, d), id=f"{dt}-{operands}")


@pytest.mark.parametrize("dt,a,b,want", list(_fdiv_rows()))
def test_fdiv_rows_against_numpy(dt, a, b, want):
  """OP.FDIV.zero, OP.FDIV.inf: every float16/32/64 row of the FDIV table is numpy's IEEE division, signs of zeros
  included (the sign of 0/x is the xor of the signs)."""
  npt = {dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}[dt]
  with np.errstate(all="ignore"):
    q = float(npt(a) / npt(b))
  if math.isnan(want): assert math.isnan(q)
  else: assert struct.pack("<d", q) == struct.pack("<d", want), (a, b, q, want)


def test_fdiv_table_has_every_sign_of_a_zero_quotient():
  rows = [p.values[1:3] for p in _fdiv_rows() if p.values[0] == dtypes.float32]   # a list: 0.0 and -0.0 hash alike
  for a in (0.0, -0.0):
    for b in (1.0, -1.0, INF, -INF):
      assert any(x == a and math.copysign(1, x) == math.copysign(1, a) and y == b for x, y in rows), (a, b)


def test_fdiv_zero_signs_through_tensors():
  a = np.array([0.0, -0.0, -0.0, 0.0, -0.0, 0.0], np.float32)
  b = np.array([-1.0, 1.0, -1.0, -INF, INF, 3.0], np.float32)
  got = (Tensor(a) / Tensor(b)).numpy()
  assert _bits_equal(got, a / b)
  assert list(np.signbit(got)) == [True, True, False, True, True, False]


# ------------------------------------------------------------------------- GRAD.MODEL.eval and DT.CONST.round

F32, F16 = np.float32, np.float16
LN2, PI2, INV_LN2 = math.log(2), math.pi / 2, 1 / math.log(2)


def _lib(fn, x: np.ndarray, npt=F32) -> np.ndarray:
  """A transcendental's reference value (OP.LIBM): the host's float64 libm on each element, rounded once."""
  return np.array([fn(float(v)) for v in x], np.float64).astype(npt)


def _exp2(v: float) -> float:
  try: return math.pow(2.0, v)
  except OverflowError: return INF


def _rand(seed, n=512, lo=0.5, hi=2.0, npt=F32):
  return np.random.default_rng(seed).uniform(lo, hi, n).astype(npt)


def _grad(f, xs, g, dt=dtypes.float32):
  ts = [Tensor(x, dtype=dt, requires_grad=True) for x in xs]
  y = f(*ts)
  return [d.numpy() for d in y.gradient(*ts, gradient=Tensor(g, dtype=dt))]


def _check(got, stated, other):
  """got equals the stated order bit for bit, and the other order differs on these inputs (the test can fail)."""
  assert _bits_equal(got, stated), f"{int((got != stated).sum())} of {got.size} elements differ from the stated order"
  assert not _bits_equal(stated, other), "the inputs do not tell the two orders apart"


def test_pow_da_order():
  """GRAD.MODEL.eval: GRAD.POW's da = g*b*a^(b-1) is (g*b) * POW(a, b-1), not g * (b * a^(b-1))."""
  a, b, g = _rand(1), _rand(2, lo=0.5, hi=3.0), _rand(3, lo=-2, hi=2)
  with np.errstate(all="ignore"):
    p = np.array([math.pow(float(x), float(y)) for x, y in zip(a, b - F32(1))]).astype(F32)
    da, _ = _grad(lambda x, y: x ** y, [a, b], g)
    _check(da, (g * b) * p, g * (b * p))


def test_pow_db_order_and_ln2():
  """GRAD.MODEL.eval, DT.CONST.round: db = g*y*ln(a) is (g*y) * (LOG2(a) * ln2), ln2 rounded once to float32."""
  a, b, g = _rand(4), _rand(5, lo=0.5, hi=3.0), _rand(6, lo=-2, hi=2)
  y = np.array([math.pow(float(x), float(e)) for x, e in zip(a, b)]).astype(F32)
  ln_a = _lib(math.log2, a) * F32(LN2)
  _, db = _grad(lambda x, e: x ** e, [a, b], g)
  _check(db, (g * y) * ln_a, g * (y * ln_a))


def test_exp2_order():
  """GRAD.EXP2: (g*y)*ln2, not g*(y*ln2)."""
  x, g = _rand(7, lo=-4, hi=4), _rand(8, lo=-2, hi=2)
  y = _lib(_exp2, x)
  (dx,) = _grad(lambda t: t.exp2(), [x], g)
  _check(dx, (g * y) * F32(LN2), g * (y * F32(LN2)))


def test_log2_order():
  """GRAD.LOG2: g/(x*ln2), not (g/x)/ln2."""
  x, g = _rand(9, lo=0.1, hi=8), _rand(10, lo=-2, hi=2)
  (dx,) = _grad(lambda t: t.log2(), [x], g)
  _check(dx, g / (x * F32(LN2)), (g / x) / F32(LN2))


def test_reciprocal_order():
  """GRAD.RECIPROCAL: -g*(y*y), the square first, not (-g*y)*y."""
  x, g = _rand(11, lo=0.1, hi=8), _rand(12, lo=-2, hi=2)
  y = F32(1) / x
  (dx,) = _grad(lambda t: t.reciprocal(), [x], g)
  _check(dx, (-g) * (y * y), ((-g) * y) * y)


def test_fdiv_db_order():
  """GRAD.FDIV: db = -(g*a)/(b*b), not -((g*a)/b)/b."""
  a, b, g = _rand(13, lo=-4, hi=4), _rand(14, lo=0.1, hi=4), _rand(15, lo=-2, hi=2)
  da, db = _grad(lambda p, q: p / q, [a, b], g)
  assert _bits_equal(da, g / b)
  _check(db, -(g * a) / (b * b), -((g * a) / b) / b)


def test_sin_gradient_uses_rounded_half_pi():
  """GRAD.SIN, DT.CONST.round: dx = g * SIN(pi/2 - x) with pi/2 rounded once to float32."""
  x, g = _rand(16, lo=-3, hi=3), _rand(17, lo=-2, hi=2)
  (dx,) = _grad(lambda t: t.sin(), [x], g)
  _check(dx, g * _lib(math.sin, F32(PI2) - x), g * _lib(math.cos, x))


def test_tensor_exp_log_cos_constants_float32():
  """DT.CONST.round through Tensor methods: exp = EXP2(x * f32(1/ln2)), log = LOG2(x) * f32(ln2), cos = SIN(f32(pi/2)
  - x). The other readings (the product or difference computed in float64, then rounded) give other bits."""
  x = _rand(18, lo=-10, hi=10)
  _check(Tensor(x).exp().numpy(), _lib(_exp2, x * F32(INV_LN2)), _lib(math.exp, x))
  xp = _rand(19, lo=0.01, hi=100)
  _check(Tensor(xp).log().numpy(), _lib(math.log2, xp) * F32(LN2), _lib(math.log, xp))
  _check(Tensor(x).cos().numpy(), _lib(math.sin, F32(PI2) - x),
         _lib(lambda v: math.sin(PI2 - v), x))


def test_float16_constants_round_once_into_float16():
  """DT.CONST.round: float16 log(x) multiplies by ln2 rounded to float16 (0.693359375), in float16; exp's 1/ln2 too.
  Multiplying by float32's ln2 and rounding the product to float16 gives other bits."""
  assert float(F16(LN2)) == 0.693359375
  x = _rand(20, lo=0.01, hi=100, npt=F16)
  l2 = _lib(math.log2, x, F16)
  _check(Tensor(x, dtype=dtypes.float16).log().numpy(), l2 * F16(LN2), (l2.astype(F32) * F32(LN2)).astype(F16))
  xe = _rand(21, lo=-8, hi=8, npt=F16)
  _check(Tensor(xe, dtype=dtypes.float16).exp().numpy(), _lib(_exp2, xe * F16(INV_LN2), F16),
         _lib(_exp2, (xe.astype(F32) * F32(INV_LN2)).astype(F16), F16))


def test_formula_constants_are_the_correctly_rounded_reals():
  """DT.CONST.round: the float64 values Python computes for ln2, pi/2, 1/ln2, sqrt(2/pi) are the reals correctly
  rounded to float64, and rounding them once more into float16/bfloat16/float32 gives the real correctly rounded into
  that format (exact rationals from 60-digit decimals)."""
  from decimal import Decimal, getcontext
  getcontext().prec = 70
  pi = Decimal("3.141592653589793238462643383279502884197169399375105820974944592307816406")
  ln2 = Decimal(2).ln()
  for f, d in ((LN2, ln2), (PI2, pi / 2), (INV_LN2, 1 / ln2), (math.sqrt(2 / math.pi), (2 / pi).sqrt())):
    q = Fraction(d)
    assert _round_exact(q, 11, 52) == f
    for dt in (dtypes.float16, dtypes.bfloat16, dtypes.float32):
      assert dtypes.as_const(f, dt) == _round_exact(q, *_FMT[dt]) == _round_exact(Fraction(f), *_FMT[dt])


# ------------------------------------------------------------------------------------------------------- GRAD.ABS

ABS_X = [0.0, -0.0, NAN, 2.0, -3.0, INF, -INF, 1e-45, -1e-45]


@pytest.mark.parametrize("g", [1.0, -1.0, 0.25])
def test_abs_gradient_against_torch(g):
  """GRAD.ABS.sign, GRAD.ABS.zero, GRAD.ABS.nan: the gradient of Tensor.abs (MAX(x, -x)) is torch's value at every
  point, 0 at +-0 and NaN included; the zeros are +0.0 (h + (-h)) where torch's g*sign(0) is -0.0 for g < 0."""
  x = Tensor(ABS_X, requires_grad=True)
  (dx,) = x.abs().gradient(x, gradient=Tensor([g] * len(ABS_X)))
  got = dx.numpy()
  tx = torch.tensor(ABS_X, requires_grad=True)
  tx.abs().backward(torch.full((len(ABS_X),), g))
  want = tx.grad.numpy()
  assert np.array_equal(got, want), (got.tolist(), want.tolist())   # == : NaN-free, -0.0 == 0.0
  zeros = got == 0
  assert zeros[[0, 1, 2]].all() and not np.signbit(got[zeros]).any()


def test_abs_gradient_nan_for_infinite_cotangent():
  """GRAD.ABS.zero: an infinite g at x = 0 gives NaN (inf*0.5 + -(inf*0.5)), as torch's inf*sign(0)."""
  x = Tensor([0.0, 2.0], requires_grad=True)
  (dx,) = x.abs().gradient(x, gradient=Tensor([INF, INF]))
  tx = torch.tensor([0.0, 2.0], requires_grad=True)
  tx.abs().backward(torch.tensor([INF, INF]))
  got, want = dx.numpy(), tx.grad.numpy()
  assert np.isnan(got[0]) and np.isnan(want[0]) and got[1] == want[1] == INF


# ------------------------------------------------------------------------------------ DT.SCALAR-PROMOTE.python

class _Color(enum.IntEnum):
  RED = 3


class _MyInt(int):
  pass


class _MyFloat(float):
  pass


SCALARS = [("np.float32", np.float32(1.5)), ("np.float64", np.float64(1.5)), ("np.float16", np.float16(1.5)),
           ("np.int64", np.int64(3)), ("np.int8", np.int8(3)), ("np.uint64", np.uint64(3)), ("bool", True),
           ("IntEnum", _Color.RED), ("int subclass", _MyInt(3)), ("float subclass", _MyFloat(1.5)),
           ("np.bool_", np.bool_(True))]
TENSORS = [(dtypes.int8, torch.int8), (dtypes.uint8, torch.uint8), (dtypes.float16, torch.float16),
           (dtypes.int64, torch.int64), (dtypes.bool, torch.bool)]
_TORCH = {torch.int8: dtypes.int8, torch.uint8: dtypes.uint8, torch.float16: dtypes.float16, torch.int64: dtypes.int64,
          torch.bool: dtypes.bool, torch.float32: dtypes.float32}


@pytest.mark.parametrize("name,s", SCALARS, ids=[n for n, _ in SCALARS])
@pytest.mark.parametrize("dt,tdt", TENSORS, ids=[d.name for d, _ in TENSORS])
def test_scalar_kinds_promote_as_torch(dt, tdt, name, s):
  """DT.SCALAR-PROMOTE.python: a numpy scalar, IntEnum member or int/float subclass is a scalar of its value's kind;
  the result dtype and values are torch's (with default_int set to int64, torch's, DT.SCALAR-PROMOTE.torch), except
  numpy's bool_, which torch treats as a float and the spec as a bool."""
  vals = [1, 0]
  old = dtypes.default_int
  dtypes.default_int = dtypes.int64
  try:
    r = Tensor(vals, dtype=dt) + s
    got_dt, got = r.dtype, r.numpy()
  finally:
    dtypes.default_int = old
  t = torch.tensor(vals, dtype=tdt) + s
  if name == "np.bool_" and dt != dtypes.float16:
    assert got_dt == dt and t.dtype == torch.float32   # the one stated difference
    assert got.tolist() == (torch.tensor(vals, dtype=tdt) + True).tolist()
    return
  assert got_dt == _TORCH[t.dtype], (got_dt, t.dtype)
  assert got.tolist() == t.tolist()


def test_numpy_int_scalar_rounds_once_into_a_float():
  """DT.SCALAR-PROMOTE.python, DT.CONST: np.int64(2**60 + 2**36 + 1) stands for its exact int, so float32 + it rounds
  the int once (2**60 + 2**37), not through float64 (2**60)."""
  v = 2 ** 60 + 2 ** 36 + 1
  got = (Tensor([0.0]) + np.int64(v)).numpy()
  assert float(got[0]) == float(2 ** 60 + 2 ** 37) == _round_exact(Fraction(v), 8, 23)


def test_non_real_scalars_are_refused():
  with pytest.raises(TypeError, match="DT.SCALAR-PROMOTE.python"):
    Tensor([1.0]) + complex(1, 2)
