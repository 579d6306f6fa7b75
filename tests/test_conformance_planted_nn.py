"""Planted bugs in layers and optimizers (issue 15): with a bug planted in refimpl, the conformance tests of layers
and optimizers (conformance/tests/test_layers.py, test_optimizers.py) fail, and their message names the spec clause
the bug breaks. refimpl's own unit tests see these bugs; the point here is that an implementation checked only
through an adapter would be caught too.

Each run is a fresh pytest process on the conformance suite (the triage profile: ci's examples without the minutes
of shrinking a failure; the tests of one entry), with the bug
planted by a small plugin before any test runs: the suite is run as users run it, and no realized buffer of this
process (refimpl memoizes realized graphs) can hide the bug.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each plant is source text defining `plant(mp)` (mp: a pytest.MonkeyPatch).
PLANT_CONV_PADDING_ORDER = '''
def plant(mp):
  """NN.CONV.padding planted wrong: tinygrad's two-per-axis padding read first axis first, (top, bottom, left, right),
  instead of last axis first."""
  import refimpl.tensor.nnops   # conv2d's module reads the padding through its own name for args._conv_padding
  right = refimpl.tensor.nnops._conv_padding
  def wrong(padding, m):
    if not isinstance(padding, int) and len(padding) == 2 * m:
      return tuple((padding[2 * i], padding[2 * i + 1]) for i in range(m))
    return right(padding, m)
  mp.setattr(refimpl.tensor.nnops, "_conv_padding", wrong)
'''
PLANT_ADAM_BIAS_BETA = '''
def plant(mp):
  """OPTIM.ADAM.bias planted wrong: the first moment's bias correction moves with b2, so it is 1 - b2^t. The rest
  of the update is refimpl's (LAMB._step with one line changed)."""
  from refimpl.nn.optim import LAMB
  def wrong(self, lr, grads):
    c1 = self.bias_correction1.assign(self.b2 * self.bias_correction1 + (1.0 - self.b2))   # the planted line
    c2 = self.bias_correction2.assign(self.b2 * self.bias_correction2 + (1.0 - self.b2))
    new = []
    for t, g, m, v in zip(self.params, grads, self.m, self.v):
      if self.l2: g = g + self.l2 * t
      m.assign((self.b1 * m + (1.0 - self.b1) * g).cast(m.dtype))
      v.assign((self.b2 * v + (1.0 - self.b2) * (g * g)).cast(v.dtype))
      up = (m / c1) / ((v / c2).sqrt() + self.eps)
      if self.wd: up = up + self.wd * t
      if not self.adam:
        r1, r2 = (t * t).sum().sqrt(), (up * up).sum().sqrt()
        up = up * (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0)
      new.append(t - lr * up)
    return new
  mp.setattr(LAMB, "_step", wrong)
'''
PLANT_BATCHNORM_EPS = '''
def plant(mp):
  """NN.BATCHNORM planted wrong: eps added to the standard deviation, 1 / (sqrt(var) + eps), not to the variance
  (BatchNorm.__call__ with one line changed)."""
  from refimpl.nn import BatchNorm
  from refimpl.tensor import Tensor
  def wrong(self, x):
    if Tensor.training or not self.track_running_stats:
      axes = tuple(a for a in range(x.ndim) if a != 1)
      n = x.numel() // x.shape[1]
      mean = x.mean(axes)
      y = x - mean.detach().reshape(1, -1, *(1,) * (x.ndim - 2))
      var = (y * y).mean(axes)
      if Tensor.training and self.track_running_stats: self._track(mean, var * (n / (n - 1)))
    else: mean, var = self.running_mean, self.running_var
    return x.batchnorm(self.weight, self.bias, mean, (var.sqrt() + self.eps).reciprocal())   # the planted line
  mp.setattr(BatchNorm, "__call__", wrong)
'''

PLANTS = {
  # bug: (plant, conformance test file, -k selection, the clause the failure must name)
  "conv-padding-order": (PLANT_CONV_PADDING_ORDER, "test_layers.py", "test_layer_forward and pairs",
                         "NN.CONV.padding"),
  "adam-bias-beta": (PLANT_ADAM_BIAS_BETA, "test_optimizers.py", "Adam-", "OPTIM.ADAM.bias"),
  "batchnorm-eps": (PLANT_BATCHNORM_EPS, "test_layers.py", "BatchNorm2d", "NN.BATCHNORM"),
}
PLUGIN = "import pytest\n{plant}\n\ndef pytest_configure(config):\n  plant(pytest.MonkeyPatch())\n"


@pytest.mark.parametrize("bug", list(PLANTS))
def test_planted_nn_bug_fails_the_conformance_tests(bug, tmp_path):
  plant, module, selection, clause = PLANTS[bug]
  (tmp_path / "planted_bug.py").write_text(PLUGIN.format(plant=plant))
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
  cmd = [sys.executable, "-m", "pytest", f"conformance/tests/{module}", "-k", selection, "-p", "planted_bug",
         "-p", "no:cacheprovider", "--hypothesis-profile", "triage", "-q", "-x"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 1, f"the conformance tests did not fail with {bug} planted:\n{out[-3000:]}"
  failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
  assert failed and all(module in line for line in failed), out[-3000:]
  assert f"{clause}" in out and "--- reproduction ---" in out, f"the failure does not name {clause}:\n{out[-3000:]}"
