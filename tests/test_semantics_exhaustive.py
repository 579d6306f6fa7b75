"""Every binary integer ALU op on every int8 and uint8 operand pair (65,536 each) against an independent oracle:
numpy arithmetic on int64 plus explicit np.where for the spec's total definitions (spec/ops.md). The oracle is a second
implementation of the clauses it names, not a call of exec_alu."""
import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.uop import Ops
from refimpl.uop.semantics import exec_alu

BITS = 8
DTYPES = {"int8": (dtypes.int8, -128, 127), "uint8": (dtypes.uint8, 0, 255)}


def wrap(x: np.ndarray, lo: int) -> np.ndarray:
  """Reduce int64 results modulo 2**8 into [lo, lo + 256) (DT.WRAP) with plain modular arithmetic."""
  return (x - lo) % (1 << BITS) + lo


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Quotient truncated toward zero; b must be nonzero. Floor division on magnitudes, then the sign."""
  return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


def oracle_pow(a: np.ndarray, b: np.ndarray, lo: int) -> np.ndarray:
  """OP.POW.wrap by repeated multiplication (b <= 255 steps), OP.POW.negative-exponent by cases."""
  result = np.ones_like(a)
  for step in range(1 << BITS):
    result = np.where(step < b, wrap(result * a, lo), result)
  negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), np.where(a == 0, -1, 0)))
  return np.where(b < 0, negative, result)


def oracle(op: Ops, a: np.ndarray, b: np.ndarray, lo: int) -> np.ndarray:
  nonzero_b = np.where(b == 0, 1, b)
  count = b & (BITS - 1)                                  # OP.SHL.count: b's bits as unsigned, modulo the width
  return {
    Ops.ADD: lambda: wrap(a + b, lo),
    Ops.SUB: lambda: wrap(a - b, lo),
    Ops.MUL: lambda: wrap(a * b, lo),
    Ops.CDIV: lambda: np.where(b == 0, wrap(np.full_like(a, -1), lo), wrap(trunc_div(a, nonzero_b), lo)),
    Ops.CMOD: lambda: np.where(b == 0, a, np.fmod(a, nonzero_b)),   # C fmod on ints: the dividend's sign
    Ops.MAX: lambda: np.maximum(a, b),
    Ops.CMPLT: lambda: a < b,
    Ops.CMPNE: lambda: a != b,
    Ops.CMPEQ: lambda: a == b,
    Ops.AND: lambda: wrap(a & b, lo),
    Ops.OR: lambda: wrap(a | b, lo),
    Ops.XOR: lambda: wrap(a ^ b, lo),
    Ops.SHL: lambda: wrap(a << count, lo),
    Ops.SHR: lambda: a >> count,                           # int64 >> is arithmetic; uint8 values are nonnegative
    Ops.POW: lambda: oracle_pow(a, b, lo),
  }[op]()


OPS = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.CDIV, Ops.CMOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR,
       Ops.XOR, Ops.SHL, Ops.SHR, Ops.POW]


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_all_pairs(op, name):
  dt, lo, hi = DTYPES[name]
  values = np.arange(lo, hi + 1, dtype=np.int64)
  a, b = (g.ravel() for g in np.meshgrid(values, values, indexing="ij"))
  want = oracle(op, a, b, lo)
  result_dtype = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
  got = [exec_alu(op, result_dtype, (x, y), dt) for x, y in zip(a.tolist(), b.tolist())]
  assert all(type(g) is (bool if result_dtype == dtypes.bool else int) for g in got)
  bad = np.flatnonzero(np.array(got, dtype=np.int64) != want.astype(np.int64))
  assert bad.size == 0, f"{op.name} {name}: {bad.size} mismatches, e.g. {op.name}({a[bad[0]]}, {b[bad[0]]}) = " \
                        f"{got[bad[0]]}, oracle says {want[bad[0]]}"


def test_oracle_knows_the_total_definitions():
  """The oracle itself encodes the decided cases (OP.CDIV.zero, OP.CDIV.overflow, OP.CMOD.zero, OP.SHL.count)."""
  a, b = np.array([-128, 5, -128, 7], dtype=np.int64), np.array([-1, 0, -1, 0], dtype=np.int64)
  assert oracle(Ops.CDIV, a, b, -128).tolist() == [-128, -1, -128, -1]
  assert oracle(Ops.CMOD, a, b, -128).tolist() == [0, 5, 0, 7]
  assert oracle(Ops.SHL, np.array([1, 1]), np.array([8, -1]), -128).tolist() == [1, -128]
  assert oracle(Ops.CDIV, np.array([9]), np.array([0]), 0).tolist() == [255]
