"""Float semantics (spec/ops.md) against outside oracles: numpy on every float16 bit pattern, an exact Fraction oracle
for ADD/MUL/FDIV/MULACC and wide int->float casts (OP.ROUND, OP.MULACC.fused), numpy and torch for round_float."""
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.dtype import DType, dtypes, round_float
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu

SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
NP_FLOAT = {dtypes.float16: (np.uint16, np.float16), dtypes.float32: (np.uint32, np.float32),
            dtypes.float64: (np.uint64, np.float64)}


def matches(got, want) -> np.ndarray:
  """Elementwise equality of the value model: NaN matches NaN, -0.0 differs from 0.0."""
  with np.errstate(invalid="ignore"):   # widening a signalling NaN raises the invalid flag; the value stays NaN
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
  return (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))


def assert_all_match(got, want, inputs, what: str):
  bad = np.flatnonzero(~matches(got, want))
  assert bad.size == 0, f"{what}: {bad.size} mismatches, e.g. input {inputs[bad[0]]!r}: got {got[bad[0]]!r}, " \
                        f"want {float(want[bad[0]])!r}"


# ---- every float16 bit pattern through the unary ops and casts, against numpy

F16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
F16_VALUES = F16.astype(np.float64).tolist()


@pytest.mark.parametrize("op,numpy_op", [
  (Ops.NEG, np.negative), (Ops.SQRT, np.sqrt), (Ops.TRUNC, np.trunc),
  (Ops.RECIPROCAL, lambda x: np.float16(1) / x),   # numpy divides float16 in float32: exact by the 2p+2 rule
], ids=lambda v: v.name if isinstance(v, Ops) else "")
def test_float16_unary_all_bit_patterns(op, numpy_op):
  with np.errstate(all="ignore"): want = numpy_op(F16)
  got = [exec_alu(op, dtypes.float16, (v,)) for v in F16_VALUES]
  assert_all_match(got, want, F16_VALUES, f"{op.name} float16")


def test_float16_to_float32_all_bit_patterns():
  got = [exec_alu(Ops.CAST, dtypes.float32, (v,), dtypes.float16) for v in F16_VALUES]
  assert_all_match(got, F16.astype(np.float32), F16_VALUES, "CAST float16->float32")


@pytest.mark.parametrize("target,np_int", [(dtypes.int8, np.int8), (dtypes.uint8, np.uint8), (dtypes.int32, np.int32)],
                         ids=lambda v: repr(v) if isinstance(v, DType) else "")
def test_float16_to_int_all_bit_patterns(target, np_int):
  """numpy defines the in-range casts (truncation); the rest is the spec's: OP.CAST.saturate, OP.CAST.nan."""
  lo, hi = dtypes.min(target), dtypes.max(target)
  got = np.array([exec_alu(Ops.CAST, target, (v,), dtypes.float16) for v in F16_VALUES], dtype=np.int64)
  x = F16.astype(np.float64)
  with np.errstate(invalid="ignore"): t = np.trunc(x)
  in_range = np.isfinite(x) & (t >= lo) & (t <= hi)
  assert np.array_equal(got[in_range], F16[in_range].astype(np_int).astype(np.int64))
  spec = np.where(np.isnan(x), 0, np.where(x > 0, hi, lo))[~in_range]
  assert np.array_equal(got[~in_range], spec)
  assert (~in_range & ~np.isnan(x)).any()   # the saturating branch is exercised, not only NaN -> 0


# ---- ADD MUL FDIV MULACC against exact arithmetic

def from_bits(bits: int, dt: DType) -> float:
  if dt == dtypes.bfloat16: return float(np.array([bits << 16], np.uint32).view(np.float32)[0])
  uint, flt = NP_FLOAT[dt]
  return float(np.array([bits], uint).view(flt)[0])


def special_values(dt: DType) -> list[float]:
  """±: zero, one, 1.5, inf, nan, the smallest subnormal and normal, the largest subnormal and finite, 1 + ulp."""
  ebits, mbits = dtypes.finfo(dt)
  top = ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1)   # bit pattern of the largest finite value
  values = [0.0, 1.0, 1.5, math.inf, math.nan, from_bits(1, dt), from_bits(1 << mbits, dt),
            from_bits((1 << mbits) - 1, dt), from_bits(top, dt), 1.0 + 2.0 ** -mbits]
  return [s * v for v in values for s in (1.0, -1.0)]


def floats_of(dt: DType) -> st.SearchStrategy[float]:
  """Any value of `dt`: special values, every bit pattern, small integers."""
  any_bits = st.integers(0, (1 << dt.bits) - 1).map(lambda b: from_bits(b, dt))
  return st.one_of(st.sampled_from(special_values(dt)), any_bits, st.integers(-40, 40).map(float))


def f64_bits(x: float) -> int: return struct.unpack("<Q", struct.pack("<d", x))[0]


def round_to_odd(q: Fraction) -> float:
  """q rounded to float64 by round-to-odd: exact if representable, else the neighbour with an odd last bit. Rounding
  that again to p <= 51 bits with round_float gives the correctly rounded result (no double-rounding error)."""
  f = float(q)
  if Fraction(f) == q: return f
  g = math.nextafter(f, math.inf if q > f else -math.inf)
  return f if f64_bits(f) & 1 else g


def round_exact(q: Fraction, dt: DType) -> float:
  """The rational q rounded once to dt (OP.ROUND). float(Fraction) is correctly rounded for float64."""
  if dt != dtypes.float64: return round_float(round_to_odd(q), dt)
  try: return float(q)
  except OverflowError: return math.inf if q > 0 else -math.inf


def oracle_binary(op: Ops, dt: DType, a: float, b: float) -> float:
  exact = {Ops.ADD: lambda: Fraction(a) + Fraction(b), Ops.MUL: lambda: Fraction(a) * Fraction(b),
           Ops.FDIV: lambda: Fraction(a) / Fraction(b) if b != 0 else None}
  if math.isfinite(a) and math.isfinite(b) and (q := exact[op]()) is not None and q != 0: return round_exact(q, dt)
  # zeros, infinities, nan and x/0: float64 IEEE arithmetic is exact on narrower operands, so it decides these
  with np.errstate(all="ignore"):
    r = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.FDIV: np.divide}[op](np.float64(a), np.float64(b))
  return round_float(float(r), dt)


def oracle_fma(dt: DType, a: float, b: float, c: float) -> float:
  if math.isnan(a) or math.isnan(b) or math.isnan(c): return math.nan
  if math.isfinite(a) and math.isfinite(b):
    if math.isinf(c): return c
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q != 0: return round_exact(q, dt)
    return a * b + c if c == 0 else 0.0   # c == 0: a*b is an exact zero and float64 signs it; else x + -x = +0.0
  return round_float(a * b + c, dt)       # an infinite factor: float64 IEEE arithmetic gives inf or nan exactly


NARROW = [dtypes.float16, dtypes.bfloat16, dtypes.float32]


@pytest.mark.parametrize("dt", NARROW, ids=repr)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.FDIV], ids=lambda op: op.name)
def test_binary_against_exact_oracle(op, dt):
  @SETTINGS
  @given(floats_of(dt), floats_of(dt))
  def check(a, b):
    got, want = exec_alu(op, dt, (a, b)), oracle_binary(op, dt, a, b)
    assert matches(got, want), f"{op.name}({a!r}, {b!r}) on {dt!r}: got {got!r}, want {want!r}"
  check()


@pytest.mark.parametrize("dt", [*NARROW, dtypes.float64], ids=repr)
def test_mulacc_against_exact_oracle(dt):
  """OP.MULACC.fused: c is often minus the rounded product, so the result is the product's rounding error, which a
  separately rounded a*b would lose."""
  @SETTINGS
  @given(floats_of(dt), floats_of(dt), st.data())
  def check(a, b, data):
    product = a * b if math.isfinite(a * b) else 0.0
    c = data.draw(st.one_of(floats_of(dt), st.just(-round_float(product, dt))))
    got, want = exec_alu(Ops.MULACC, dt, (a, b, c)), oracle_fma(dt, a, b, c)
    assert matches(got, want), f"MULACC({a!r}, {b!r}, {c!r}) on {dt!r}: got {got!r}, want {want!r}"
  check()


def test_mulacc_is_fused():
  """The near-cancelling cases really differ from MUL then ADD, so the test above can tell fused from unfused."""
  a, b = 1.0 + 2.0 ** -13, 1.0 - 2.0 ** -13
  assert exec_alu(Ops.MULACC, dtypes.float32, (a, b, -1.0)) == -(2.0 ** -26)
  unfused = exec_alu(Ops.ADD, dtypes.float32, (exec_alu(Ops.MUL, dtypes.float32, (a, b)), -1.0))
  assert unfused == 0.0


@pytest.mark.parametrize("src", [dtypes.int64, dtypes.uint64], ids=repr)
def test_wide_int_to_float_rounds_once(src):
  """OP.CAST.int-to-float: 64-bit ints do not fit float64 exactly, so a detour through float would round twice.
  Random ints of every magnitude, and ints within 4096 of a power of two where ties and carries happen."""
  rng = np.random.default_rng(7)
  lo, hi = dtypes.min(src), dtypes.max(src)
  anywhere = [int(x) for x in rng.integers(0, 1 << 64, 1500, dtype=np.uint64)]
  near_powers = [(1 << int(k)) + int(d) for k, d in zip(rng.integers(0, 64, 1500), rng.integers(-4096, 4097, 1500))]
  xs = [x + lo if lo else x for x in anywhere] + [x for x in near_powers if lo <= x <= hi] + [lo, hi]
  for dst in [*NARROW, dtypes.float64]:
    for x in xs:
      got, want = exec_alu(Ops.CAST, dst, (x,), src), round_exact(Fraction(x), dst)
      assert matches(got, want), f"CAST {x} {src!r}->{dst!r}: got {got!r}, want {want!r}"


@pytest.mark.parametrize("dt", NARROW, ids=repr)
def test_operand_must_be_representable(dt):
  """OP.VALUES.check: exec_alu accepts exactly the floats that round_float leaves unchanged."""
  xs = random_float64(np.random.default_rng(4), 3000).tolist()
  for x in xs + [round_float(x, dt) for x in xs]:
    if x != x or round_float(x, dt) == x: assert matches(exec_alu(Ops.NEG, dt, (x,)), -x)
    else:
      with pytest.raises(SpecError, match="OP.NEG"): exec_alu(Ops.NEG, dt, (x,))


# ---- round_float against numpy and torch

def random_float64(rng: np.random.Generator, n: int) -> np.ndarray:
  """Random float64 bit patterns, plus full-precision values spread over the float16 and float32 ranges."""
  raw = rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False).view(np.float64)
  scaled = rng.standard_normal(n) * np.exp2(rng.integers(-160, 140, size=n).astype(np.float64))
  return np.concatenate([raw, scaled])


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32], ids=repr)
def test_round_float_against_numpy(dt):
  xs = random_float64(np.random.default_rng(1), 15000)
  with np.errstate(over="ignore", invalid="ignore"): want = xs.astype(NP_FLOAT[dt][1])
  got = [round_float(x, dt) for x in xs.tolist()]
  assert_all_match(got, want, xs.tolist(), f"round_float to {dt!r}")


def midpoints(dt: DType, bits: np.ndarray) -> np.ndarray:
  """The exact midpoints between the values with bit patterns `bits` and `bits + 1` (both signs)."""
  uint, flt = NP_FLOAT[dt]
  lower, upper = bits.astype(uint).view(flt).astype(np.float64), (bits + 1).astype(uint).view(flt).astype(np.float64)
  mids = (lower + upper) / 2   # exact: one bit more than the format has
  return np.concatenate([mids, -mids])


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32], ids=repr)
def test_round_float_ties_to_even(dt):
  """DT.ROUND on exact midpoints, up to the one between max and the next power of two (which rounds to inf)."""
  last = {dtypes.float16: 0x7BFF, dtypes.float32: 0x7F7FFFFF}[dt]
  rng = np.random.default_rng(2)
  bits = np.arange(last + 1) if dt == dtypes.float16 else np.concatenate([rng.integers(0, last + 1, 20000), [0, last]])
  xs = midpoints(dt, bits.astype(np.int64))
  with np.errstate(over="ignore"): want = xs.astype(NP_FLOAT[dt][1])
  got = [round_float(x, dt) for x in xs.tolist()]
  assert_all_match(got, want, xs.tolist(), f"round_float ties to {dt!r}")
  finite = want[np.isfinite(want)]
  assert np.all(finite.view(NP_FLOAT[dt][0]) % 2 == 0), "a tie rounded to an odd significand"
  assert math.isinf(round_float(float(xs[len(xs) // 2 - 1]), dt))   # the midpoint above max


def test_round_float_bfloat16_against_torch():
  """bfloat16 rounding (round_float) against torch's float32 -> bfloat16 conversion, ties and NaNs included."""
  n, rng = 40000, np.random.default_rng(3)
  bits = np.concatenate([rng.integers(0, 1 << 32, n, dtype=np.uint64),
                         (rng.integers(0, 1 << 16, n, dtype=np.uint64) << 16) | 0x8000,   # exact ties
                         [0x7F7F8000, 0x7F7FFFFF, 0x00008000, 0x80018000]]).astype(np.uint32)
  xs = bits.view(np.float32)
  want = torch.from_numpy(xs).to(torch.bfloat16).to(torch.float32).numpy()
  with np.errstate(invalid="ignore"): values = xs.astype(np.float64).tolist()   # signalling NaNs warn on widening
  got = [round_float(x, dtypes.bfloat16) for x in values]
  assert_all_match(got, want, values, "round_float to bfloat16")
