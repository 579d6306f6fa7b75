"""Train a small CNN on scikit-learn's 8x8 handwritten digits with refimpl, in the style of seed 004 (issue 5, part 5).

The data set ships inside scikit-learn (`sklearn.datasets.load_digits`: 1797 images, 10 classes), so nothing is
downloaded. A seeded split keeps 20% of the images aside; the script trains on the rest with Adam and prints the
accuracy on the held-out images: about 97-98% after the default 4 epochs, in well under a minute on two cores
(the first run also compiles some 70 kernels; later runs load them from the CPU device's disk cache).

Run it from the repository root:

    pip install -e '.[examples]'                     # scikit-learn
    python examples/train_digits.py                  # on CPU unless --device or $DEV names another device
    python examples/train_digits.py --epochs 3 --batch-size 64 --no-jit --save digits.safetensors
    DEBUG=2 python examples/train_digits.py --epochs 1   # the time of every kernel launch

`--save PATH` writes the trained weights with nn.state.safe_save, loads them into a fresh model and checks that it
predicts every test image the same. `--seed` fixes the weights, the split and the order of the batches.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

import numpy as np

from refimpl import Device, Tensor, TinyJit, nn
from refimpl.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


# ---- data ----
def load_data(seed: int = 0, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(x_train, y_train, x_test, y_test): images as float32 (N, 1, 8, 8) scaled to [0, 1], labels as int32 (N,).
  The split is a seeded permutation, so a seed always holds out the same images."""
  from sklearn.datasets import load_digits   # imported here: the rest of the module works without scikit-learn
  digits = load_digits()
  x = (digits.images.astype(np.float32) / 16.0)[:, None]   # pixel values are 0..16
  y = digits.target.astype(np.int32)
  order = np.random.default_rng(seed).permutation(len(y))
  n_test = int(round(len(y) * test_fraction))
  test, train = order[:n_test], order[n_test:]
  return x[train], y[train], x[test], y[test]


# ---- model ----
class Model:
  """Seed 004's CNN scaled to 8x8 images: two 3x3 convolutions with relu, BatchNorm, 2x2 max pooling and a linear
  classifier. Without padding the maps shrink 8 -> 6 -> 4 -> 2, which keeps the network, and its kernels, small."""
  def __init__(self):
    self.layers: list[Callable[[Tensor], Tensor]] = [
      nn.Conv2d(1, 8, 3), Tensor.relu,
      nn.Conv2d(8, 16, 3), Tensor.relu,
      nn.BatchNorm(16), Tensor.max_pool2d,
      lambda x: x.flatten(1), nn.Linear(16 * 2 * 2, 10),
    ]

  def __call__(self, x: Tensor) -> Tensor:
    return x.sequential(self.layers)


# ---- progress ----
class ProgressBar:
  """A one-line progress bar: `update()` after each step redraws `desc [####......] step/total loss L  N samples/s`
  (the rate since the bar began, so the first epoch's includes compiling); `close()` ends the line. On a stream that
  is not a terminal it writes a line every `every` steps instead (default: four lines in all), so logs stay
  readable; with `stream=None` it writes nothing."""
  def __init__(self, total: int, desc: str = "", stream=None, width: int = 24, every: int = 0):
    self.total, self.desc, self.stream, self.width = total, desc, stream, width
    self.tty = stream is not None and hasattr(stream, "isatty") and stream.isatty()
    self.every = every or max(1, total // 4)
    self.n, self.samples, self.start = 0, 0, time.perf_counter()

  def update(self, loss: float, samples: int) -> None:
    """Count one step that trained on `samples` samples and ended with `loss`."""
    self.n, self.samples = self.n + 1, self.samples + samples
    if self.stream is None or (not self.tty and self.n % self.every and self.n != self.total): return
    done = self.width * self.n // max(self.total, 1)
    bar = "#" * done + "." * (self.width - done)
    rate = self.samples / max(time.perf_counter() - self.start, 1e-9)
    line = f"{self.desc}[{bar}] {self.n}/{self.total} loss {loss:.4f} {rate:.0f} samples/s"
    self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
    self.stream.flush()

  def close(self) -> None:
    """End the bar's line."""
    if self.stream is None: return
    if self.tty: self.stream.write("\n")
    self.stream.flush()


# ---- training and evaluation ----
def make_train_step(model: Model, opt, jit: bool = True) -> Callable[[Tensor, Tensor], Tensor]:
  """One Adam step on a batch, returning the batch's loss. The loss and the update run as one schedule, so the
  forward pass is computed once. With `jit`, TinyJit replays the captured kernels from the third call on."""
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y)
      loss.backward()
      Tensor.realize(loss, *opt.schedule_step())
    return loss
  return TinyJit(step) if jit else step


def train(model: Model, x: np.ndarray, y: np.ndarray, epochs: int = 1, batch_size: int = 32, lr: float = 1e-2,
          seed: int = 0, jit: bool = True, decay: bool = True, progress: bool = True) -> list[float]:
  """Train `model` with Adam on (x, y) and return the loss of every step. Each epoch visits the samples in a seeded
  random order in batches of `batch_size`; the last, incomplete batch is dropped, so that every batch has one shape
  (TinyJit's kernels are specialised to it). With `decay` the learning rate falls linearly, epoch by epoch, from `lr`
  to `lr / epochs`. `progress` shows a progress bar on stderr."""
  if batch_size < 2 or batch_size > len(y):
    raise ValueError(f"batch size {batch_size} must be in [2, {len(y)}] (BatchNorm needs two samples per batch)")
  opt = nn.optim.Adam(get_parameters(model), lr=lr)
  step = make_train_step(model, opt, jit)
  rng = np.random.default_rng(seed)
  per_epoch = len(y) // batch_size
  losses: list[float] = []
  for epoch in range(epochs):
    if decay:   # written into the optimizer's lr buffer, which the captured kernels read: no new capture needed
      opt.lr.assign(Tensor([lr * (1 - epoch / epochs)], device=opt.lr.device, dtype=opt.lr.dtype)).realize()
    order = rng.permutation(len(y))
    bar = ProgressBar(per_epoch, f"epoch {epoch + 1}/{epochs} ", sys.stderr if progress else None)
    for i in range(per_epoch):
      idx = order[i * batch_size:(i + 1) * batch_size]
      losses.append(step(Tensor(x[idx]), Tensor(y[idx])).item())
      bar.update(losses[-1], batch_size)
    bar.close()
  return losses


def predict(model: Model, x: np.ndarray) -> np.ndarray:
  """The predicted class of each image, in eval mode (BatchNorm uses its running statistics)."""
  with Tensor.train(False):
    return model(Tensor(x)).argmax(axis=1).numpy()


# ---- command line ----
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  """The command line options."""
  p = argparse.ArgumentParser(description="Train a small CNN on scikit-learn's 8x8 digits with refimpl.")
  p.add_argument("--epochs", type=int, default=4, help="passes over the training images (default 4)")
  p.add_argument("--batch-size", type=int, default=32, help="images per step (default 32)")
  p.add_argument("--lr", type=float, default=1e-2, help="Adam's initial learning rate (default 0.01)")
  p.add_argument("--device", default=None, help="refimpl device (default: $DEV, else CPU)")
  p.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                 help="replay the train step with TinyJit (default on)")
  p.add_argument("--seed", type=int, default=0, help="seed of the weights, the split and the batch order")
  p.add_argument("--save", metavar="PATH", default=None,
                 help="save the weights as safetensors, then check that a reloaded model scores the same")
  return p.parse_args(argv)


def main(argv: list[str] | None = None) -> float:
  """Train, report the test accuracy and return it."""
  args = parse_args(argv)
  Device.DEFAULT = args.device or os.environ.get("DEV") or "CPU"
  x_train, y_train, x_test, y_test = load_data(args.seed)
  print(f"digits: {len(y_train)} training and {len(y_test)} test images on {Device.DEFAULT}")
  Tensor.manual_seed(args.seed)
  model = Model()
  start = time.perf_counter()
  train(model, x_train, y_train, args.epochs, args.batch_size, args.lr, args.seed, args.jit)
  trained = time.perf_counter()
  predicted = predict(model, x_test)
  acc = float((predicted == y_test).mean())
  print(f"test accuracy {acc * 100:.2f}% ({len(y_test)} images); training {trained - start:.1f} s, "
        f"evaluation {time.perf_counter() - trained:.1f} s")
  if args.save:
    safe_save(get_state_dict(model), args.save)
    fresh = Model()   # new random weights, all of them overwritten by the file's
    load_state_dict(fresh, safe_load(args.save))
    again = predict(fresh, x_test)
    if not np.array_equal(again, predicted):
      raise SystemExit(f"the model reloaded from {args.save} predicts {int((again != predicted).sum())} test images "
                       f"differently (accuracy {float((again == y_test).mean()) * 100:.2f}%, trained {acc * 100:.2f}%)")
    print(f"saved to {args.save}; the reloaded model makes the same predictions ({acc * 100:.2f}%)")
  return acc


if __name__ == "__main__":
  main()
