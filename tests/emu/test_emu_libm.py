"""The emulator's transcendentals (valu.libm_map: exec_alu's float64 reference per element, or the math function it
wraps where that returns, one numpy rounding) give exec_alu's bits (OP.LIBM, OP.ROUND, EXEC.THREAD.value).

- 16-bit floats, exhaustively: every float16 and bfloat16 bit pattern through every unary float op, vectorized
  against exec_alu element by element. POW has 2**32 operand pairs per dtype: every base against 7 exponents and every
  exponent against 7 bases (the other pairs: by the rounding tests below, as the reference is the same call).
- float32/float64: hypothesis property tests (derandomized), specials and subnormals included.
- The rounding itself: valu.from_f64 against round_float on every rounding midpoint of the 16-bit formats and its two
  float64 neighbours, and by property tests on midpoints, overflow thresholds and arbitrary float64 values.
Results are compared as bits with every NaN canonical (OP.BITCAST.nan: which NaN an op returns is not specified)."""
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emu import valu
from refimpl.dtype import dtypes, round_float
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu, float64_reference

F16, BF16, F32, F64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
UNARY = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG)
_FMT = {F16: "<e", BF16: "<f", F32: "<f", F64: "<d"}
_NAN_BITS = {F16: 0x7E00, BF16: 0x7FC0, F32: 0x7FC00000, F64: 0x7FF8000000000000}


def ref_bits(v: float, dt) -> int:
  """The bits of a value of `dt` (exactly representable), packed by struct, independent of numpy; NaN canonical."""
  if v != v: return _NAN_BITS[dt]
  bits = int.from_bytes(struct.pack(_FMT[dt], v), "little")
  return bits >> 16 if dt == BF16 else bits


def all_16bit(dt) -> np.ndarray:
  """Every bit pattern of a 16-bit float dtype, as emu storage."""
  bits = np.arange(1 << 16, dtype=np.uint16)
  return bits if dt == BF16 else bits.view(np.float16)


def values(storage: np.ndarray, dt) -> list[float]:
  return [float(v) for v in valu.to_float(storage, dt).astype(np.float64)]


def check(op, dt, *operands: np.ndarray) -> None:
  """alu(op, dt) on storage arrays against exec_alu on each element, as canonical bits."""
  got = valu.to_bits(valu.alu(op, dt)(*operands), dt).astype(np.uint64).ravel().tolist()
  cols = [values(np.broadcast_to(o, np.broadcast_shapes(*(x.shape for x in operands))).ravel(), dt) for o in operands]
  want = [ref_bits(exec_alu(op, dt, list(xs)), dt) for xs in zip(*cols)]
  bad = [(xs, g, w) for xs, g, w in zip(zip(*cols), got, want) if g != w]
  examples = [(x, hex(g), hex(w)) for x, g, w in bad[:5]]
  assert not bad, f"{op.name} {dt}: {len(bad)} of {len(want)} differ, e.g. {examples}"


def _math_returns(op, x: float) -> bool:
  try: valu._MATH[op](x)
  except (ValueError, OverflowError): return False
  return True


@pytest.mark.parametrize("dt", [F16, BF16], ids=str)
@pytest.mark.parametrize("op", UNARY, ids=lambda o: o.name)
def test_unary_exhaustive_16bit(op, dt):
  """All patterns at once (for EXP2/LOG2/SIN: some make the math function raise, so libm_map goes element by element)
  and, for those ops, all the patterns where it returns (libm_map maps the math function over the whole array)."""
  every = all_16bit(dt)
  check(op, dt, every)
  if op in valu._MATH:
    returns = np.array([_math_returns(op, x) for x in values(every, dt)])
    assert 0 < returns.sum() < len(every)
    check(op, dt, every[returns])


_SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324, 1e308, -1e308, 1024.0, 1023.99,
             -1075.0, -1e4, 1e22, 3.14159, -2.5]


@pytest.mark.parametrize("op", list(valu._MATH), ids=lambda o: o.name)
def test_math_function_is_the_reference_where_it_returns(op):
  """The premise of libm_map's fast path (OP.LIBM): float64_reference(op)(x) is math's function of x, same bits,
  wherever that returns, and a value (its own case) where it raises; every 16-bit float and float64 specials."""
  ref, fast = float64_reference(op), valu._MATH[op]
  xs = values(all_16bit(F16), F16) + values(all_16bit(BF16), BF16) + _SPECIALS
  raised = 0
  for x in xs:
    want = ref(x)
    try: got = fast(x)
    except (ValueError, OverflowError): raised += 1; continue
    assert ref_bits(got, F64) == ref_bits(want, F64), (op, x, got, want)
  assert raised   # the reference's own cases are met


# signed zero, the identity, even/odd/non-integer/negative exponents (and bases), infinity, NaN
_POW_PARTNERS = [-0.0, 1.0, 0.5, -3.0, 2.0, -math.inf, math.nan]


@pytest.mark.parametrize("dt", [F16, BF16], ids=str)
def test_pow_16bit_every_base_and_exponent(dt):
  """OP.POW through libm_map: all 2**16 bases against 7 exponents, all 2**16 exponents against 7 bases."""
  every = all_16bit(dt)
  partners = valu.from_f64(np.array(_POW_PARTNERS), dt)
  check(Ops.POW, dt, every[:, None], partners[None, :])
  check(Ops.POW, dt, partners[:, None], every[None, :])


# ---- float32 / float64: property tests

def floats_of(dt):
  return st.floats(width=32 if dt == F32 else 64)   # nan, ±inf, ±0 and subnormals included


def storage(xs, dt) -> np.ndarray:
  return np.array(xs, dtype=valu.NP[dt])


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
@pytest.mark.parametrize("op", UNARY, ids=lambda o: o.name)
@settings(max_examples=60, derandomize=True, deadline=None)
@given(data=st.data())
def test_unary_property(op, dt, data):
  check(op, dt, storage(data.draw(st.lists(floats_of(dt), min_size=1, max_size=40)), dt))


@pytest.mark.parametrize("dt", [F32, F64], ids=str)
@settings(max_examples=100, derandomize=True, deadline=None)
@given(data=st.data())
def test_pow_property(dt, data):
  pairs = data.draw(st.lists(st.tuples(floats_of(dt), floats_of(dt) | st.integers(-40, 40).map(float)), min_size=1,
                             max_size=40))
  check(Ops.POW, dt, storage([a for a, _ in pairs], dt), storage([b for _, b in pairs], dt))


# ---- the rounding: from_f64 is round_float (OP.ROUND)

def same_rounding(xs, dt) -> None:
  xs = np.asarray(xs, np.float64)
  with np.errstate(over="ignore"): got = valu.to_bits(valu.from_f64(xs, dt), dt).astype(np.uint64).tolist()
  want = [ref_bits(round_float(float(x), dt), dt) for x in xs]
  bad = [(float(x), hex(g), hex(w)) for x, g, w in zip(xs, got, want) if g != w]
  assert not bad, f"{dt}: from_f64 differs from round_float on {len(bad)} values, e.g. {bad[:5]}"


def midpoints(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
  """The exact float64 midpoints of adjacent values (<= 24-bit significands: exact in float64) and their float64
  neighbours on both sides: the inputs where a rounding to nearest even can go wrong."""
  mid = (lo + hi) / 2
  return np.concatenate([mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf)])


@pytest.mark.parametrize("dt", [F16, BF16], ids=str)
def test_rounding_midpoints_exhaustive_16bit(dt):
  """Every pair of adjacent finite 16-bit values (and the largest finite value and its would-be successor, where
  rounding turns to overflow) for both signs, plus the zero-subnormal boundary."""
  v = valu.to_float(all_16bit(dt), dt).astype(np.float64)
  pos = np.sort(v[np.isfinite(v) & (v >= 0)])
  top = pos[-1] + (pos[-1] - pos[-2])   # 2**(emax+1): the midpoint of max and it is the overflow threshold
  grid = np.concatenate([pos, [top]])
  ms = midpoints(grid[:-1], grid[1:])
  same_rounding(np.concatenate([ms, -ms, [top, -top, 1e300, -1e300]]), dt)


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=str)
@settings(max_examples=300, derandomize=True, deadline=None)
@given(data=st.data())
def test_rounding_property(dt, data):
  """Arbitrary float64 values, and midpoints of adjacent float32 values (drawn as bit patterns)."""
  xs = data.draw(st.lists(st.floats(width=64), min_size=1, max_size=20))
  bits = np.array(data.draw(st.lists(st.integers(0, 0x7F7FFFFE), min_size=1, max_size=20)), np.uint32)
  lo, hi = bits.view(np.float32).astype(np.float64), (bits + np.uint32(1)).view(np.float32).astype(np.float64)
  ms = midpoints(lo, hi)
  same_rounding(np.concatenate([xs, ms, -ms]), dt)


def test_reference_is_what_exec_alu_rounds():
  """The identity libm_map rests on, checked on a few values per dtype (the tests above check it everywhere)."""
  for op, xs in [(Ops.EXP2, (0.3,)), (Ops.LOG2, (3.0,)), (Ops.SIN, (1e4,)), (Ops.POW, (1.7, 2.5))]:
    for dt in (F16, BF16, F32, F64):
      xs_dt = tuple(round_float(x, dt) for x in xs)
      assert exec_alu(op, dt, list(xs_dt)) == round_float(float64_reference(op)(*xs_dt), dt)


def test_no_reference_for_exact_ops():
  """OP.LIBM: only the transcendentals have a float64 reference function; asking for another op is a SpecError."""
  with pytest.raises(SpecError, match="OP.LIBM"): float64_reference(Ops.ADD)
