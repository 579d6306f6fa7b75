"""The cost of the checking mode (EXEC.BOUNDS.checked, SANITIZE=1) on the compiled devices, measured in the same run
against the default path.

  python bench/sanitize.py [--devices CPU,CL] [--runs 5] [--size 1024]

Rows: float32 matmul N x N x N, a 16M-element float32 add, a sum over the rows of an N x N matrix, a softmax over the
rows. Each is realized once per mode (compiling, scheduling), its launches recorded as TinyJit records them, and the
best of `--runs` re-launches is reported; the ratio is checked / default. Both modes must give the same bits. Only
kernel launches are timed, so the ratio is the checks' cost (each LOAD and STORE compares its index with the size)
plus the copy of the bounds_info words in and out."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import kernel_time  # noqa: E402

from refimpl import Context, Tensor  # noqa: E402
from refimpl.helpers import SpecError  # noqa: E402


def cases(n: int, rng) -> list[tuple]:
  """(name, make(device))."""
  a, b = rng.standard_normal((2, n, n), dtype=np.float32)
  x, y = rng.standard_normal((2, 1 << 24), dtype=np.float32)
  return [(f"matmul {n}", lambda d: Tensor(a, device=d) @ Tensor(b, device=d)),
          ("add 16M", lambda d: Tensor(x, device=d) + Tensor(y, device=d)),
          (f"row sum {n}x{n}", lambda d: Tensor(a, device=d).sum(axis=1)),
          (f"softmax {n}x{n}", lambda d: Tensor(a, device=d).softmax(axis=1))]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--devices", default="CPU,CL")
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--size", type=int, default=1024)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  print(f"{'device':6s} {'kernel':18s} {'default ms':>11s} {'checked ms':>11s} {'ratio':>6s}  bits")
  for device in args.devices.split(","):
    for name, make in cases(args.size, rng):
      try:
        with Context(SANITIZE=0): plain, plain_bits, _ = kernel_time(make, device, args.runs)
        with Context(SANITIZE=1): checked, checked_bits, _ = kernel_time(make, device, args.runs)
      except SpecError as e:
        print(f"{device:6s} {name:18s} skipped: {e}")
        break
      same = "same" if plain_bits == checked_bits else "DIFFER"
      print(f"{device:6s} {name:18s} {plain * 1e3:11.3f} {checked * 1e3:11.3f} {checked / plain:6.2f}  {same}")


if __name__ == "__main__": main()
