"""examples/train_digits.py (issue 5, part 5): its training function lowers the loss within a few steps on a small
subset of the digits, TinyJit's replayed steps give the plain steps' losses exactly (JIT.REPLAY), and its command line
parses. The full run (at least 95% test accuracy) takes too long for the suite: run the script itself for that."""
from __future__ import annotations

import importlib.util
import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from refimpl import Device, Tensor

try: import sklearn  # noqa: F401
except ImportError:
  pytest.skip("scikit-learn is not installed (the optional 'examples' extra, issue 5 part 5): train_digits.py loads "
              "its bundled digits data set", allow_module_level=True)

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "train_digits.py"
# DEV.COMPILE: the CPU device needs a C compiler; without one the emulator runs the same kernels, slowly, so the
# subset shrinks there
DEVICE = "CPU" if shutil.which(os.environ.get("CC", "cc")) else "PYTHON"
SUBSET, BATCH, EPOCHS = (64, 16, 3) if DEVICE == "CPU" else (48, 16, 3)


def _load_script():
  spec = importlib.util.spec_from_file_location("train_digits", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


td = _load_script()


@pytest.fixture
def device():
  """Run on DEVICE and put the default device back afterwards (the script's functions use Device.DEFAULT)."""
  saved = Device.DEFAULT
  Device.DEFAULT = DEVICE
  yield DEVICE
  Device.DEFAULT = saved


def _train(x, y, epochs: int, jit: bool) -> list[float]:
  Tensor.manual_seed(0)
  return td.train(td.Model(), x, y, epochs=epochs, batch_size=BATCH, seed=0, jit=jit, progress=False)


def test_training_lowers_the_loss(device):
  """A few epochs over the same small subset: the last epoch's mean loss is well below the first's, which starts
  near ln(10), the loss of a uniform guess over 10 classes. The first steps without TinyJit give the very same losses
  as the jitted run, replays included (JIT.REPLAY)."""
  x_train, y_train, x_test, y_test = td.load_data(seed=0)
  assert x_train.shape[1:] == (1, 8, 8) and len(x_train) + len(x_test) == 1797 and x_train.max() <= 1.0
  x, y = x_train[:SUBSET], y_train[:SUBSET]
  losses = _train(x, y, EPOCHS, jit=True)
  per_epoch = SUBSET // BATCH
  assert len(losses) == EPOCHS * per_epoch and all(np.isfinite(losses))
  first, last = np.mean(losses[:per_epoch]), np.mean(losses[-per_epoch:])
  assert 1.5 < first < 3.5, losses
  assert last < 0.75 * first, losses
  plain = _train(x, y, 1, jit=False)   # epoch 1 has the same learning rate and batches whatever EPOCHS is
  assert plain == losses[:per_epoch]


def test_split_is_seeded_and_a_partition():
  """The held-out images are a seeded 20% of the data set; with the training images they are the whole data set,
  each image once, with its own label."""
  from sklearn.datasets import load_digits
  digits = load_digits()
  a, b = td.load_data(seed=3), td.load_data(seed=3)
  for u, v in zip(a, b): assert np.array_equal(u, v)
  x_train, y_train, x_test, y_test = a
  assert len(x_test) == round(1797 * 0.2) and x_test.dtype == np.float32 and y_test.dtype == np.int32
  # every image of the data set is distinct, so sorting the rows of (image * 16, label) compares the two as multisets
  want = np.concatenate([digits.images.reshape(-1, 64), digits.target[:, None]], axis=1)
  got = np.concatenate([np.concatenate([x_train, x_test]).reshape(-1, 64) * 16,
                        np.concatenate([y_train, y_test])[:, None]], axis=1)
  assert np.array_equal(np.unique(got, axis=0), np.unique(want, axis=0)) and len(np.unique(got, axis=0)) == 1797
  assert not np.array_equal(td.load_data(seed=4)[2], x_test)


def test_cli_parses():
  """The options of the brief, with their defaults, and `--no-jit`."""
  d = td.parse_args([])
  assert (d.epochs, d.batch_size, d.device, d.jit, d.save, d.seed) == (4, 32, None, True, None, 0)
  a = td.parse_args(["--epochs", "2", "--batch-size", "8", "--device", "PYTHON", "--no-jit", "--save", "m.safetensors",
                     "--seed", "5", "--lr", "0.5"])
  assert (a.epochs, a.batch_size, a.device, a.jit, a.save, a.seed, a.lr) == (2, 8, "PYTHON", False, "m.safetensors",
                                                                            5, 0.5)
  assert td.parse_args(["--jit"]).jit is True
  with pytest.raises(SystemExit): td.parse_args(["--epochs", "two"])


def test_progress_bar_lines():
  """Off a terminal the bar writes four lines for eight steps, the last one complete."""
  out = io.StringIO()
  bar = td.ProgressBar(8, "epoch 1/1 ", out)
  for i in range(8): bar.update(1.0 / (i + 1), 32)
  bar.close()
  lines = out.getvalue().splitlines()
  assert len(lines) == 4 and lines[0].startswith("epoch 1/1 [######") and " 2/8 loss 0.5000 " in lines[0]
  assert lines[-1].startswith("epoch 1/1 [" + "#" * 24 + "] 8/8 loss 0.1250 ") and lines[-1].endswith(" samples/s")
  silent = td.ProgressBar(8, stream=None)
  silent.update(0.5, 32)
  silent.close()   # writes nowhere, and does not fail
