"""Time the PYTHON device (emu) on two hand-written kernels against numpy doing the same work.

  python bench/emu_kernels.py [--sanitize]

Times exclude the first launch (translation). Targets: matmul 64^3 under 0.1 s, sum_relu 4096 under 10 ms."""
import sys
import time

import numpy as np

from emu import examples
from emu.device import PythonBackend
from refimpl.dtype import dtypes


def best_of(fn, n=7) -> float:
  times = []
  for _ in range(n):
    t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
  return min(times)


def setup(dev, prog, arrays, out_size):
  bufs = [dev.alloc(out_size, dtypes.float32)] + [dev.alloc(a.size, dtypes.float32) for a in arrays]
  for b, a in zip(bufs[1:], arrays): dev.copyin(b, a.tobytes())
  c = dev.compile(prog)
  dev.launch(c, bufs)   # first launch: translation and warm-up, not timed
  return lambda: dev.launch(c, bufs)


def main() -> None:
  sanitize = "--sanitize" in sys.argv
  dev = PythonBackend(sanitize=sanitize)
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((2, 64, 64)).astype(np.float32)
  x = rng.standard_normal(4096).astype(np.float32)
  cases = [("matmul 64x64x64", setup(dev, examples.matmul(64), [a.ravel(), b.ravel()], 64 * 64), lambda: a @ b, 0.1),
           ("sum(relu((x+1)*2)) 4096", setup(dev, examples.sum_relu(4096), [x], 1),
            lambda: np.maximum((x + 1) * 2, 0).sum(), 0.01)]
  print(f"PYTHON device{' (sanitizer on)' if sanitize else ''} vs numpy, best of 7")
  for name, emu_fn, np_fn, target in cases:
    te, tn = best_of(emu_fn), best_of(np_fn)
    print(f"{name:28s} emu {te * 1e3:8.3f} ms   numpy {tn * 1e3:8.3f} ms   ratio {te / tn:8.1f}x   "
          f"target {target * 1e3:.0f} ms {'ok' if te < target else 'MISSED'}")


if __name__ == "__main__":
  main()
