"""TENSOR.MAX_POOL2D.indices and GRAD.REDUCE.MAX.tie for max_pool2d: each window's value, index and gradient come from
one position, the last NaN if the window holds one, else the first maximum (a -0.0 before a +0.0 is that maximum,
so the value is -0.0). Checked bit for bit against torch's float32 max_pool2d, which makes the same choice, on
windows full of ties, signed zeros, NaNs and infinities, with padding, strides and dilation, on PYTHON and CPU."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch

from refimpl import Tensor

DEVICES = ["PYTHON", pytest.param("CPU", marks=pytest.mark.skipif(
  shutil.which(os.environ.get("CC", "cc")) is None, reason="DEV.COMPILE: no C compiler ($CC or cc), so the CPU "
  "device cannot compile"))]
POOLS = [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=(2, 3), stride=(1, 2)),
         dict(kernel_size=2, dilation=2, ceil_mode=True)]


def _windows_of_ties(seed: int) -> np.ndarray:
  """A (2, 3, 6, 7) float32 input drawn from few values, so that most windows hold ties and many a NaN."""
  vals = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 2.0], np.float32)
  return np.random.default_rng(seed).choice(vals, size=(2, 3, 6, 7), p=[.06, .1, .04, .25, .25, .15, .05, .1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", POOLS, ids=[str(p) for p in POOLS])
@pytest.mark.parametrize("seed", range(3))
def test_value_index_and_gradient_are_torchs_choice(device, kw, seed):
  x = _windows_of_ties(seed)
  t = Tensor(x, device=device)
  values, idx = t.max_pool2d(**kw, return_indices=True)
  rt = torch.tensor(x, requires_grad=True)
  rv, ri = torch.nn.functional.max_pool2d(rt, **kw, return_indices=True)
  got = values.numpy()
  want = rv.detach().numpy()
  assert np.array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))   # the sign of a zero too
  assert np.array_equal(idx.numpy(), ri.numpy())
  # small integer cotangents: where windows overlap, a position's gradient is a sum whose order the spec does not
  # share with torch, and integer sums are exact in any order, so the comparison is of who receives what
  g = np.random.default_rng(seed + 10).integers(-8, 9, want.shape).astype(np.float32)
  (rv * torch.tensor(g)).sum().backward()
  tg = Tensor(x, device=device, requires_grad=True)
  (tg.max_pool2d(**kw) * Tensor(g, device=device)).sum().backward()
  assert np.array_equal(tg.grad.numpy(), rt.grad.numpy())
