"""Emulator speed on the PYTHON device, next to numpy measured in the same run (issue 3's targets: 64x64 matmul
under 0.1 s, the 4096-element chain under 10 ms). Prints; asserts nothing (timings are noisy on shared machines)."""
import sys
import time
from pathlib import Path

# `python bench/emu.py` puts bench/ first on sys.path, where this file would shadow the `emu` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from refimpl.device import Device  # noqa: E402
from refimpl.tensor import Tensor  # noqa: E402


def best(fn, reps: int = 7) -> float:
  fn()   # first call compiles (translation is cached)
  times = []
  for _ in range(reps):
    t = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t)
  return min(times)


def main() -> None:
  Device.DEFAULT = "PYTHON"
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 64), np.float32)
  x = rng.standard_normal(4096, np.float32)
  ta, tb, tx = Tensor(a), Tensor(b), Tensor(x)
  rows = [
    ("matmul 64x64 float32", lambda: (ta @ tb).realize(), lambda: a @ b),
    ("((x+1)*2).relu().sum() 4096", lambda: ((tx + 1) * 2).relu().sum().realize(),
     lambda: np.maximum((x + 1) * 2, 0).sum()),
  ]
  print(f"{'benchmark':32s} {'PYTHON':>12s} {'numpy':>12s} {'ratio':>10s}")
  for name, ours, ref in rows:
    t_ours, t_ref = best(ours), best(ref)
    print(f"{name:32s} {t_ours * 1e3:10.3f}ms {t_ref * 1e3:10.3f}ms {t_ours / t_ref:9.1f}x")


if __name__ == "__main__":
  main()
