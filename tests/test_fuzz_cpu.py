"""Differential fuzzing of the CPU device against the PYTHON device (issue 5 part 4, EXEC.ASIF): hypothesis draws random
tensor programs (elementwise chains, reductions, movement ops, casts between dtypes) and both devices must give the same
bits, NaNs equal to NaNs; a transcendental as the last op may differ by a few ULP (EXEC.FLOAT.transcendental)."""
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl import Tensor
from refimpl.dtype import DType, dtypes, sum_acc_dtype

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile",
              allow_module_level=True)

DTS = [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float16,
       dtypes.bfloat16, dtypes.float32, dtypes.float64]
# ACC.EXP2.*, ACC.LOG2.*, ACC.SIN.* of spec/accuracy.md, the bounds test_cpu.py checks op by op (DEV.C.libm)
FINAL_ULP = {dtypes.float16: 1, dtypes.bfloat16: 1, dtypes.float32: 1, dtypes.float64: 2}


def data(seed: int, shape: tuple[int, ...], dt: DType) -> np.ndarray:
  """Values for a tensor of `dt`: small and full-range integers, floats of mixed scale with NaN, ±inf and -0.0."""
  rng = np.random.default_rng(seed)
  if dt == dtypes.bool: return rng.integers(0, 2, shape).astype(bool)
  if dtypes.is_int(dt):
    full = rng.integers(dtypes.min(dt), dtypes.max(dt), shape, dtype=np.int64 if dt != dtypes.uint64 else np.uint64,
                        endpoint=True)
    return np.where(rng.random(shape) < 0.5, rng.integers(-9, 10, shape).clip(dtypes.min(dt)), full)
  x = rng.normal(0, 3, shape) * np.where(rng.random(shape) < 0.1, 1e4, 1.0)
  special = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0]), shape)
  return np.where(rng.random(shape) < 0.08, special, x)


@st.composite
def programs(draw):
  """A recipe: start dtype and shape, input seed, and steps drawn with the shape and dtype they apply to."""
  dt = draw(st.sampled_from(DTS))
  shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
  start = (dt, shape, draw(st.integers(0, 2 ** 31)))
  steps = []
  for _ in range(draw(st.integers(1, 6))):
    kind = draw(st.sampled_from(["binary", "binary", "unary", "cast", "reduce", "movement", "movement"]))
    if kind == "binary":
      ops = (["maximum", "mul", "where"] if dt == dtypes.bool else
             ["add", "sub", "mul", "maximum", "where", "floordiv", "mod", "and", "xor", "shl"] if dtypes.is_int(dt) else
             ["add", "sub", "mul", "div", "maximum", "where"])
      bshape = tuple(n if draw(st.booleans()) else 1 for n in shape)   # broadcasting operand
      steps.append(("binary", draw(st.sampled_from(ops)), bshape, draw(st.integers(0, 2 ** 31))))
    elif kind == "unary" and dt != dtypes.bool:
      ops = ["neg", "relu"] + (["sqrt", "reciprocal", "trunc", "abs"] if dtypes.is_float(dt) else [])
      steps.append(("unary", draw(st.sampled_from(ops))))
    elif kind == "cast":
      dt = draw(st.sampled_from(DTS))
      steps.append(("cast", dt))
    elif kind == "reduce":
      axis = draw(st.integers(0, len(shape) - 1))
      op = draw(st.sampled_from(["sum", "max"]))
      steps.append(("reduce", op, axis))
      shape = shape[:axis] + (1,) + shape[axis + 1:]
      if op == "sum" and dt not in (dtypes.float16, dtypes.bfloat16): dt = sum_acc_dtype(dt)   # DT.SUM
    elif kind == "movement":
      mv = draw(st.sampled_from(["permute", "flip", "pad", "shrink", "reshape"]))
      if mv == "permute": arg = tuple(draw(st.permutations(range(len(shape)))))
      elif mv == "flip": arg = draw(st.integers(0, len(shape) - 1))
      elif mv == "pad": arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
      elif mv == "shrink": arg = tuple((lo, draw(st.integers(lo + 1, n))) for n in shape
                                       for lo in [draw(st.integers(0, n - 1))])
      else: arg = (int(np.prod(shape)),)
      steps.append(("movement", mv, arg))
      if mv == "permute": shape = tuple(shape[i] for i in arg)
      elif mv == "pad": shape = tuple(n + a + b for n, (a, b) in zip(shape, arg))
      elif mv == "shrink": shape = tuple(b - a for a, b in arg)
      elif mv == "reshape": shape = arg
  final = draw(st.sampled_from([None, "exp2", "log2", "sin"])) if dtypes.is_float(dt) else None
  return start, steps, final


def tensor(seed: int, shape: tuple[int, ...], dt: DType, device: str) -> Tensor:
  with np.errstate(over="ignore"):   # large floats become inf in float16: fine, both devices get the same input
    return Tensor(data(seed, shape, dt), dtype=dt, device=device)


def build(recipe, device: str) -> Tensor:
  (dt, shape, seed), steps, final = recipe
  x = tensor(seed, shape, dt, device)
  for step in steps:
    if step[0] == "binary":
      _, op, bshape, s = step
      y = tensor(s, bshape, x.dtype, device)
      if op == "where": x = (x < y).where(x, y)
      elif op == "shl": x = x << y
      else: x = {"add": x.__add__, "sub": x.__sub__, "mul": x.__mul__, "div": x.div, "maximum": x.maximum,
                 "floordiv": x.__floordiv__, "mod": x.__mod__, "and": x.__and__, "xor": x.__xor__}[op](y)
    elif step[0] == "unary": x = getattr(x, step[1])() if step[1] != "neg" else -x
    elif step[0] == "cast": x = x.cast(step[1])
    elif step[0] == "reduce": x = getattr(x, step[1])(axis=step[2], keepdim=True)
    else:
      _, mv, arg = step
      x = x.permute(*arg) if mv == "permute" else x.flip(arg) if mv == "flip" else x.pad(arg) if mv == "pad" else \
          x.shrink(arg) if mv == "shrink" else x.reshape(arg)
  return getattr(x, final)() if final else x


def ordered(a: np.ndarray, dt: DType) -> list[int]:
  """Each float's position on the number line in steps of its format (bfloat16 comes back from numpy() as float32)."""
  if dt == dtypes.bfloat16: bits, width = (a.astype(np.float32).view(np.uint32) >> 16).tolist(), 16
  else: bits, width = a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]).tolist(), 8 * dt.itemsize
  sign = 1 << (width - 1)
  return [-(b & (sign - 1)) if b & sign else b for b in bits]


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_cpu_agrees_with_python(recipe):
  ref, got = build(recipe, "PYTHON"), build(recipe, "CPU")
  assert ref.dtype == got.dtype and ref.shape == got.shape
  a, b = ref.numpy(), got.numpy()
  if not dtypes.is_float(ref.dtype):
    assert np.array_equal(a, b), f"{recipe}: PYTHON {a.ravel()[:8]} CPU {b.ravel()[:8]}"
    return
  nan = np.isnan(a) & np.isnan(b)
  if recipe[2] is None:   # + - * / sqrt, casts, reductions: bit for bit (EXEC.FLOAT)
    same = nan | ((a == b) & (np.signbit(a) == np.signbit(b)))
    assert same.all(), f"{recipe}: PYTHON {a[~same][:4]} CPU {b[~same][:4]}"
  else:
    pa, pb = ordered(a.ravel(), ref.dtype), ordered(b.ravel(), ref.dtype)
    ulps = [0 if n else abs(p - q) for n, p, q in zip(nan.ravel(), pa, pb)]
    assert (np.isnan(a) == np.isnan(b)).all(), f"{recipe}: NaN in one result only"
    assert max(ulps, default=0) <= FINAL_ULP[ref.dtype], f"{recipe}: {max(ulps)} ULP apart"
