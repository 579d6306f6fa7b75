"""Reductions on the CPU against numpy, torch and tinygrad 0.14.0, in the same run (issue 19, item 2).

  python -m bench.reduce [--runs 7] [--no-tinygrad] [--no-torch]

Rows:
- `sum 16M`: the sum of 16M float32 (64 MiB read once), in GB/s; refimpl folds it in the blocked order of
  EXEC.REDUCE.blocked (8192 blocks of 2048 values on both cores, then one chain over the block results);
- `softmax 4096x4096`: softmax over the last axis of a 4096x4096 float32 matrix, in milliseconds.

Each implementation computes the row from data already on its device, warm (refimpl's and tinygrad's kernels are
compiled and cached by the warm-up calls; each timed call still builds, schedules and realizes its graph), the
implementations taking turns run by run, best of `--runs`. Ratios are refimpl's speed over the other's (above 1:
refimpl faster); they only mean something within one run on one machine. The first line says whether refimpl's sum
has the bits of the blocked order (an oracle written from the clause, as in tests/test_reduce_order.py), so that a
run of an older refimpl (PYTHONPATH=<old tree> python bench/reduce.py) shows it folds otherwise."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# torch's OpenMP threads spin-wait after each parallel region (libgomp's default wait policy). With the implementations
# taking turns in one process, the spinning threads kept a core from whichever ran next: refimpl's conv forward took
# 14.7 ms beside torch and 9.3 ms with a passive wait policy, torch's own 6.4-6.8 ms either way (2026-11-28). It is
# read when torch loads its OpenMP runtime, so it is set before any import that may load it; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

N_SUM = 16 * 1024 * 1024
SOFTMAX = (4096, 4096)


def best_s(fns: dict, runs: int, warmup: int = 2) -> dict:
  """The shortest of `runs` timings of each of `fns` in seconds, after `warmup` calls each, taking turns."""
  for fn in fns.values():
    for _ in range(warmup): fn()
  best = {name: float("inf") for name in fns}
  for _ in range(runs):
    for name, fn in fns.items():
      st = time.perf_counter()
      fn()
      best[name] = min(best[name], time.perf_counter() - st)
  return best


def blocked_sum(x: np.ndarray, block: int = 2048, chain_max: int = 2 ** 16) -> np.float32:
  """EXEC.REDUCE.blocked for a float32 sum, one float32 addition at a time (vectorised across blocks only)."""
  if x.size <= chain_max:
    acc = np.float32(0)
    for v in x: acc = np.float32(acc + v)
    return acc
  full = x.size // block
  acc = np.zeros(full + (x.size % block > 0), np.float32)
  for j in range(block):
    acc[:full] += x[j:full * block:block]
    if full * block + j < x.size: acc[full] += x[full * block + j]
  return blocked_sum(acc, block, chain_max)


def cases(rng, with_torch: bool, with_tinygrad: bool) -> dict:
  """row -> implementation -> a function computing the row once."""
  x = rng.standard_normal(N_SUM, dtype=np.float32)
  m = rng.standard_normal(SOFTMAX, dtype=np.float32)
  from refimpl import Tensor
  rx, rm = Tensor(x, device="CPU").realize(), Tensor(m, device="CPU").realize()
  got, want = rx.sum().numpy(), blocked_sum(x)
  same = got.tobytes() == want.tobytes()
  print(f"refimpl's sum 16M: {got!r}, blocked order (EXEC.REDUCE.blocked): {want!r}: "
        f"{'same' if same else 'OTHER'} bits")
  out = {"sum 16M": {"refimpl": lambda: rx.sum().realize(), "numpy": lambda: x.sum()},
         "softmax 4096x4096": {"refimpl": lambda: rm.softmax(-1).realize()}}
  if with_torch:
    try:
      import torch
      tx, tm = torch.from_numpy(x), torch.from_numpy(m)
      out["sum 16M"]["torch"] = lambda: tx.sum()
      out["softmax 4096x4096"]["torch"] = lambda: torch.softmax(tm, -1)
    except ImportError as e: print(f"(torch does not import: {e})")
  if with_tinygrad:
    try:
      import tinygrad
      gx, gm = tinygrad.Tensor(x, device="CPU").realize(), tinygrad.Tensor(m, device="CPU").realize()
      out["sum 16M"]["tinygrad"] = lambda: gx.sum().realize()
      out["softmax 4096x4096"]["tinygrad"] = lambda: gm.softmax(-1).realize()
    except ImportError as e: print(f"(tinygrad does not import: {e})")
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=7)
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--no-torch", action="store_true")
  args = ap.parse_args()
  os.environ.setdefault("DEV", "CPU")   # tinygrad 0.14 picks its device from DEV
  rows = cases(np.random.default_rng(0), not args.no_torch, not args.no_tinygrad)
  print(f"cores: {os.cpu_count()}, OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
        f"load: {' '.join(f'{v:.2f}' for v in os.getloadavg())}, best of {args.runs}; "
        "ratio = refimpl's speed / theirs (> 1: refimpl faster)")
  for row, fns in rows.items():
    best = best_s(fns, args.runs)
    ref = best["refimpl"]
    cells = []
    for name, t in best.items():
      speed = f"{4 * N_SUM / t / 1e9:6.2f} GB/s" if row.startswith("sum") else f"{t * 1e3:7.1f} ms"
      ratio = "" if name == "refimpl" else f" (ratio {t / ref:.2f})"
      cells.append(f"{name} {speed}{ratio}")
    print(f"{row:18s} " + "; ".join(cells))
    sys.stdout.flush()


if __name__ == "__main__":
  main()
