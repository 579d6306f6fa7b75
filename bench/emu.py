"""Emulator speed: tensor programs on the PYTHON device (emu) next to tinygrad 0.14.0's PYTHON device and numpy, all
measured in the same run (issue 3's targets: 64x64 matmul under 0.1 s, the 4096-element chain under 10 ms; issue 19:
softmax 256x256 at least 20x tinygrad's PYTHON device, no program below 10x).

  python bench/emu.py [--runs 3] [--only softmax,matmul]

Inputs are realized on the device first; each call builds the program's graph, schedules it and runs its kernels
(compiled kernels are cached by both); the first call is not timed. `speedup` is tinygrad's time over ours.
Prints; asserts nothing (timings are noisy on shared machines). Without tinygrad installed its column is blank."""
import argparse
import os
import sys
import time
from pathlib import Path

# `python bench/emu.py` puts bench/ first on sys.path, where this file would shadow the `emu` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from refimpl.device import Device  # noqa: E402
from refimpl.tensor import Tensor  # noqa: E402


def best(fn, runs: int) -> float:
  fn()   # first call compiles (translation is cached)
  times = []
  for _ in range(runs):
    t = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t)
  return min(times)


def programs(T, rng):
  """name -> (program on Tensor class T, the same in numpy or None). Both APIs are tinygrad's, so T is either."""
  a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 64), np.float32)
  x = rng.standard_normal(4096, np.float32)
  s = rng.standard_normal((256, 256), np.float32)
  img, w = rng.standard_normal((2, 4, 16, 16), np.float32), rng.standard_normal((8, 4, 3, 3), np.float32)
  xb, w1, w2 = (rng.standard_normal(sh, np.float32) for sh in ((16, 64), (64, 32), (32, 10)))
  labels = rng.integers(0, 10, 16).astype(np.int32)
  # inputs live on the device before timing: a call times graph building, scheduling and the kernels
  ta, tb, tx, ts, timg, tw, txb, tw1, tw2, tlab = (T(v).realize() for v in (a, b, x, s, img, w, xb, w1, w2, labels))

  def softmax_np():
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)

  def mlp_step():   # forward, cross-entropy, backward to both weights: a training step without the update
    loss = (txb @ tw1).relu().matmul(tw2).sparse_categorical_crossentropy(tlab)
    g1, g2 = loss.gradient(tw1, tw2)
    return g1.realize(g2)

  return {
    "matmul 64x64": (lambda: (ta @ tb).realize(), lambda: a @ b),
    "((x+1)*2).relu().sum() 4096": (lambda: ((tx + 1) * 2).relu().sum().realize(),
                                    lambda: np.maximum((x + 1) * 2, 0).sum()),
    "exp/log/sin chain 4096": (lambda: ((tx.exp() + 1).log() * tx.sin()).realize(),
                               lambda: np.log(np.exp(x) + 1) * np.sin(x)),
    "softmax 256x256": (lambda: ts.softmax(-1).realize(), softmax_np),
    "conv2d 2x4x16x16, 8x4x3x3": (lambda: timg.conv2d(tw, padding=1).realize(), None),
    "MLP 64-32-10 fwd+bwd, batch 16": (mlp_step, None),
  }


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--runs", type=int, default=3, help="timed calls per program (the best is reported)")
  ap.add_argument("--only", default="", help="comma-separated substrings of program names to run")
  args = ap.parse_args()
  Device.DEFAULT = "PYTHON"
  os.environ["DEV"] = "PYTHON"   # tinygrad 0.14.0 reads its device from DEV (setting Device.DEFAULT is refused)
  try: import tinygrad
  except ImportError: tinygrad = None
  ours = programs(Tensor, np.random.default_rng(0))
  theirs = programs(tinygrad.Tensor, np.random.default_rng(0)) if tinygrad else {}
  print(f"{'program':32s} {'PYTHON':>11s} {'tinygrad PY':>13s} {'speedup':>8s} {'numpy':>11s} {'/ numpy':>9s}")
  for name, (fn, ref) in ours.items():
    if args.only and not any(k in name for k in args.only.split(",")): continue
    t = best(fn, args.runs)
    row = f"{name:32s} {t * 1e3:9.2f}ms"
    if name in theirs:
      tt = best(theirs[name][0], args.runs)
      row += f" {tt * 1e3:11.1f}ms {tt / t:7.1f}x"
    else: row += f" {'':13s} {'':8s}"
    if ref is not None:
      tn = best(ref, args.runs)
      row += f" {tn * 1e3:9.3f}ms {t / tn:8.0f}x"
    print(row, flush=True)


if __name__ == "__main__":
  main()
