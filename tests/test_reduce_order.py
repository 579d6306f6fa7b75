"""EXEC.REDUCE.blocked: the order in which a Tensor reduction folds its values, bit for bit on every device.

The oracle here is written from the clause, not from refimpl: a reduction of at most 2**16 values per output is one
left-to-right chain from the identity; a longer one folds consecutive blocks of 2048 values (the last one shorter)
left to right, then the block results by the same rule. Each fold step is one numpy operation in the accumulator dtype
(np.float32 + np.float32 rounds once to float32), vectorised across blocks only. For the lengths here the single chain
of 70001 values and the blocked order give different float32 bits, which each test shows, so a device that folds in
the old order (or any other) fails."""
from __future__ import annotations

import math
import os
import shutil

import numpy as np
import pytest
import torch

from refimpl import Tensor, dtypes
from refimpl.device import Device
from refimpl.engine import split
from refimpl.helpers import SpecError

BLOCK, CHAIN_MAX = 2048, 2 ** 16   # the clause's numbers, written out (not imported) so that a change shows


def _cl_skip() -> str | None:
  try: Device["CL"]
  except SpecError as e: return f"DEV.CL.absent: no CL device here ({e})"
  return None


HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
CL_SKIP = _cl_skip()   # opened once, at collection
DEVICES = [pytest.param("PYTHON"),
           pytest.param("CPU", marks=pytest.mark.skipif(not HAVE_CC, reason="DEV.COMPILE: no C compiler for CPU")),
           pytest.param("CL", marks=pytest.mark.skipif(CL_SKIP is not None, reason=str(CL_SKIP)))]
_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum}
_ID = {"sum": 0, "prod": 1}


# ---- the oracle (EXEC.REDUCE.blocked, EXEC.THREAD.reduce)

def chain(v: np.ndarray, op: str = "sum"):
  """((id OP v0) OP v1) ..., one step at a time in v's dtype."""
  acc = v.dtype.type(_ID[op])
  for x in v: acc = v.dtype.type(_OPS[op](acc, x))
  return acc


def blocked(v: np.ndarray, op: str = "sum", block: int = BLOCK, chain_max: int = CHAIN_MAX):
  """EXEC.REDUCE.blocked's fold of the 1-D `v` in v's dtype."""
  if v.size <= chain_max: return chain(v, op)
  full, rest = divmod(v.size, block)
  acc = np.full(full + (rest > 0), _ID[op], v.dtype)
  for j in range(block):   # step j of every block at once: acc[b] = acc[b] OP v[b*block + j]
    acc[:full] = _OPS[op](acc[:full], v[j:full * block:block])
    if j < rest: acc[full] = _OPS[op](acc[full], v[full * block + j])
  return blocked(acc, op, block, chain_max)


def cancelling(rng, n: int) -> np.ndarray:
  """float32 terms of very different size, whose float32 sum depends on the order of adding them."""
  v = (rng.standard_normal(n) * 10).astype(np.float32)
  big = rng.integers(0, n, max(2, n // 50))
  v[big] = rng.choice(np.array([3e7, -3e7, 1e8, -1e8], np.float32), size=big.size)
  return v


def bits(x) -> bytes:
  return np.asarray(x).tobytes()


# ---- float sums and products: the order shows

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [CHAIN_MAX, CHAIN_MAX + 1, 70001, 33 * BLOCK, 2 ** 17 + 5])
def test_float32_sum_folds_in_blocks(device, n):
  """A sum of more than 2**16 float32 values is the blocked fold, bit for bit; at 2**16 it is still one chain."""
  v = cancelling(np.random.default_rng(n), n)
  got = Tensor(v, device=device).sum().numpy()
  want = blocked(v)
  assert bits(got) == bits(want), (got, want)
  if n <= CHAIN_MAX: assert bits(want) == bits(chain(v))
  else: assert bits(want) != bits(chain(v)), "the data do not tell the blocked order from one chain"


@pytest.mark.parametrize("device", DEVICES)
def test_float32_prod_folds_in_blocks(device):
  """MUL is folded in the same blocked order: a product of 70001 factors near 1."""
  rng = np.random.default_rng(3)
  v = (1 + rng.standard_normal(70001) * 1e-3).astype(np.float32)
  got = Tensor(v, device=device).prod().numpy()
  want = blocked(v, "prod")
  assert bits(got) == bits(want) and bits(want) != bits(chain(v, "prod")), (got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_multi_axis_and_keepdim(device):
  """The values of an output are those of the reduced axes in row-major order over them, whatever axis is kept
  between them: sum(axis=(0, 2)) of (37, 3, 2000) folds, per b, x[a, b, c] in (a, c) order (74000 values)."""
  x = cancelling(np.random.default_rng(5), 37 * 3 * 2000).reshape(37, 3, 2000)
  want = np.array([blocked(x[:, b, :].reshape(-1)) for b in range(3)], np.float32)
  t = Tensor(x, device=device)
  got = t.sum(axis=(0, 2)).numpy()
  assert bits(got) == bits(want)
  kept = t.sum(axis=(0, 2), keepdim=True).numpy()
  assert kept.shape == (1, 3, 1) and bits(kept) == bits(want)
  assert bits(want) != bits(np.array([chain(x[:, b, :].reshape(-1)) for b in range(3)], np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_outer_axis_reduction(device):
  """A reduced axis before the kept one (sum(axis=0) of (70001, 3)) folds each column down the rows."""
  x = cancelling(np.random.default_rng(6), 70001 * 3).reshape(70001, 3)
  want = np.array([blocked(np.ascontiguousarray(x[:, c])) for c in range(3)], np.float32)
  assert bits(Tensor(x, device=device).sum(0).numpy()) == bits(want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_sums_accumulate_blocked_in_float32(device, dt):
  """DT.SUM: float16 and bfloat16 terms are folded in float32 in the blocked order and rounded once at the end."""
  rng = np.random.default_rng(7)
  tdt = getattr(torch, dt)
  v = torch.from_numpy(rng.standard_normal(70001).astype(np.float32) * 4).to(tdt)   # values exact in the dtype
  v32 = v.float().numpy()
  got = Tensor(v32, device=device).cast(getattr(dtypes, dt)).sum()
  assert got.dtype == getattr(dtypes, dt)
  want = torch.tensor(float(blocked(v32)), dtype=torch.float32).to(tdt)
  assert got.cast(dtypes.float32).numpy().item() == want.float().item()
  acc16 = torch.zeros((), dtype=tdt)
  for x in v[:4096]: acc16 = acc16 + x   # a 16-bit accumulator strays (checked on a prefix: it is a slow loop)
  assert acc16.float().item() != torch.tensor(float(blocked(v32[:4096]))).to(tdt).float().item()


# ---- integer and MAX reductions: every order gives the same bits

@pytest.mark.parametrize("device", DEVICES)
def test_int32_sum_wraps_in_any_order(device):
  """OP.ADD.wrap: int32 addition modulo 2**32 is associative, so the blocked sum is the wrapped sum."""
  v = np.random.default_rng(8).integers(-2 ** 31, 2 ** 31, 70001).astype(np.int32)
  want = np.add.reduce(v, dtype=np.int32)
  assert bits(Tensor(v, device=device).sum().numpy()) == bits(want) == bits(blocked(v))
  assert abs(int(v.astype(np.int64).sum())) > 2 ** 31   # the sum does wrap
  small = np.full(70001, 100, np.int8)   # int8 sums accumulate in int32 (DT.SUM)
  assert Tensor(small, device=device).sum().numpy().item() == 7000100


@pytest.mark.parametrize("device", DEVICES)
def test_max_min_argmax_with_nan_and_signed_zeros(device):
  """OP.MAX.nan / OP.MAX.zero: a NaN in any block gives NaN; a +0.0 anywhere among -0.0s gives +0.0, none gives
  -0.0; min mirrors it; argmax is the first index of the maximum."""
  n = 70001
  z = np.full(n, -0.0, np.float32)
  for pos in (0, 2047, 69631, n - 1):
    w = z.copy()
    w[pos] = 0.0
    got = Tensor(w, device=device).max().numpy()
    assert got == 0 and not np.signbit(got), pos
    w[pos] = np.nan
    assert np.isnan(Tensor(w, device=device).max().numpy()), pos
  got = Tensor(z, device=device).max().numpy()
  assert got == 0 and np.signbit(got)
  pz = np.zeros(n, np.float32)
  pz[69700] = -0.0
  got = Tensor(pz, device=device).min().numpy()
  assert got == 0 and np.signbit(got)
  v = np.random.default_rng(9).standard_normal(n).astype(np.float32)
  v[[500, 69800]] = 9.0
  assert Tensor(v, device=device).max().numpy() == 9.0
  assert Tensor(v, device=device).argmax().numpy() == 500 and Tensor(-v, device=device).argmin().numpy() == 500
  assert Tensor(v > 8.5, device=device).any().numpy() and not Tensor(v < 8.5, device=device).all().numpy()


# ---- compositions built on sum and max

@pytest.mark.parametrize("device", DEVICES)
def test_mean_var_softmax_logsumexp(device):
  """mean is the blocked sum divided by n (bit for bit); var, softmax and logsumexp over 70001 values match torch
  in float64 closely (they hold transcendental or longer chains: EXEC.FLOAT.transcendental)."""
  n = 70001
  x = np.random.default_rng(10).standard_normal((2, n)).astype(np.float32)
  t = Tensor(x, device=device)
  mean = t.mean(1).numpy()
  assert bits(mean) == bits(np.array([blocked(r) / np.float32(n) for r in x], np.float32))
  x64 = torch.from_numpy(x).double()
  np.testing.assert_allclose(t.var(1).numpy(), x64.var(1).numpy(), rtol=1e-5)
  sm = t.softmax(1).numpy()
  np.testing.assert_allclose(sm, torch.softmax(x64, 1).numpy(), rtol=1e-4, atol=0)
  np.testing.assert_allclose(t.logsumexp(1).numpy(), torch.logsumexp(x64, 1).numpy(), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_reduction_is_blocked_too(device):
  """Autograd builds the unsplit graph; the scheduler splits the gradient's own long reductions: the gradient of a
  scalar weight broadcast over 70001 values is the blocked sum of their upstream gradients."""
  x = cancelling(np.random.default_rng(11), 70001)
  w = Tensor(np.ones(1, np.float32), device=device, requires_grad=True)
  (Tensor(x, device=device) * w).sum().backward()
  assert bits(w.grad.numpy()) == bits(np.array([blocked(x)], np.float32))


# ---- the construction at small sizes: several levels, short blocks at each

@pytest.mark.parametrize("device", DEVICES)
def test_recursion_with_small_blocks(device, monkeypatch):
  """With blocks of 4 and chains of at most 8, lengths up to 300 reach three levels, with a short block (or a
  block holding only the short block of the level below) at each: the same fold as the oracle's with those numbers.
  Sums of -0.0 stay +0.0 at every level (the split pads nothing)."""
  monkeypatch.setattr(split, "BLOCK", 4)
  monkeypatch.setattr(split, "CHAIN_MAX", 8)
  rng = np.random.default_rng(12)
  for n in (8, 9, 31, 32, 33, 36, 37, 129, 132, 133, 300):
    v = cancelling(rng, n)
    got = Tensor(v, device=device).sum().numpy()
    assert bits(got) == bits(blocked(v, block=4, chain_max=8)), n
    negz = Tensor(np.full(n, -0.0, np.float32), device=device).sum().numpy()
    assert negz == 0 and not np.signbit(negz)
  x = cancelling(rng, 5 * 3 * 7).reshape(5, 3, 7)
  want = np.array([blocked(x[:, b, :].reshape(-1), block=4, chain_max=8) for b in range(3)], np.float32)
  assert bits(Tensor(x, device=device).sum(axis=(0, 2)).numpy()) == bits(want)
  assert any(bits(blocked(cancelling(np.random.default_rng(s), 300), block=4, chain_max=8)) !=
             bits(chain(cancelling(np.random.default_rng(s), 300))) for s in range(3))


def test_order_does_not_depend_on_options(monkeypatch):
  """EXEC.OPT.exact with EXEC.REDUCE.blocked: NOOPT=1 on CPU gives the bits of the default options, and the schedule
  is the same on every device (two kernels for a sum of 70001: the blocks, then their chain)."""
  if not HAVE_CC: pytest.skip("DEV.COMPILE: no C compiler for CPU")
  v = cancelling(np.random.default_rng(13), 70001)
  default = Tensor(v, device="CPU").sum().numpy()
  monkeypatch.setenv("NOOPT", "1")
  assert bits(Tensor(v, device="CPU").sum().numpy()) == bits(default) == bits(blocked(v))
  names = {d: [si.arg.name for si in Tensor(v, device=d).sum().schedule()] for d in ("PYTHON", "CPU")}
  assert names["PYTHON"] == names["CPU"] and len(names["CPU"]) == 2, names
  assert math.ceil(70001 / BLOCK) == 35
