"""Kernel speed of the compiled devices against numpy, measured in the same run (issue 5, "Must show").

  python bench/kernels.py [--devices CPU,CL,CUDA] [--modes noopt,default,beam] [--sizes 512,1024] [--runs 5]

Rows: float32 matmul N x N x N in GFLOPS next to numpy's `a @ b`, and a 16M-element float32 add in GB/s (3 x 4 bytes
per element moved) next to `np.add(a, b, out=c)`, for NOOPT=1, the default heuristic (EXEC.OPT.default) and BEAM=2
(EXEC.OPT.beam). Only kernel launches are timed: each case is realized once (compiling, scheduling, copying in),
its launches are recorded the way TinyJit records them, and the best of `--runs` re-launches is reported. Every mode
must give the same bits (EXEC.OPT.exact); the table says so. CL and CUDA rows appear when the device opens."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from refimpl import Tensor
from refimpl.device import Device
from refimpl.engine import realize as engine

MODES = {"noopt": {"NOOPT": "1", "BEAM": ""}, "default": {"NOOPT": "", "BEAM": ""}, "beam": {"NOOPT": "", "BEAM": "2"}}


def best_of(fn, runs: int) -> float:
  """The shortest of `runs` timings of `fn()` after one warm-up call."""
  fn()
  best = float("inf")
  for _ in range(runs):
    st = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - st)
  return best


def kernel_time(make, device: str, runs: int) -> tuple[float, bytes, float]:
  """(best seconds of re-launching the kernels of `make(device)`, the result's bytes, seconds the first realize took
  with compiling and any search)."""
  t = make(device)
  st = time.perf_counter()
  engine.capture = []
  try: t.realize()
  finally: launches, engine.capture = engine.capture, None
  setup = time.perf_counter() - st
  dev = Device[device]

  def run():
    for k in launches: dev.launch(k.compiled, list(k.bufs))
    dev.synchronize()
  return best_of(run, runs), t.numpy().tobytes(), setup


def cases(sizes: list[int], rng) -> list[tuple]:
  """(name, unit, work, make(device), numpy function)."""
  out = []
  for n in sizes:
    a, b = rng.standard_normal((2, n, n), dtype=np.float32)

    def make(device, a=a, b=b):
      x, y = Tensor(a, device=device).realize(), Tensor(b, device=device).realize()
      return x @ y
    out.append((f"matmul {n}", "GFLOPS", 2 * n ** 3, make, lambda a=a, b=b: a @ b))
  n = 16 * 1024 * 1024
  x, y = rng.standard_normal((2, n), dtype=np.float32)
  z = np.empty_like(x)

  def make_add(device):
    return Tensor(x, device=device).realize() + Tensor(y, device=device).realize()
  out.append(("add 16M", "GB/s", 3 * 4 * n, make_add, lambda: np.add(x, y, out=z)))
  return out


def blas() -> str:
  """Which BLAS kernel numpy's `@` runs on how many threads (OPENBLAS_CORETYPE can pick a slower one than the CPU
  has), and the OPENBLAS_* settings in the environment."""
  env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS")) or "no OPENBLAS_* set"
  try: from threadpoolctl import threadpool_info
  except ImportError: return f"{env} (threadpoolctl not installed)"
  libs = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '')} on {i.get('num_threads')} threads"
          for i in threadpool_info() if i.get("user_api") == "blas"]
  return f"{', '.join(libs) or 'no BLAS found'}; {env}"


def opens(device: str) -> bool:
  try:
    Device[device]
    return True
  except Exception:   # a missing package, ICD or driver: no row for this device
    return False


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--devices", default="CPU,CL,CUDA")
  ap.add_argument("--modes", default="noopt,default,beam")
  ap.add_argument("--sizes", default="512,1024")
  ap.add_argument("--runs", type=int, default=5)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  print(f"cores: {os.cpu_count()}, CPU_THREADS={os.environ.get('CPU_THREADS', 'all')}, best of {args.runs}, "
        f"load average {os.getloadavg()[0]:.1f}")
  print(f"numpy: {blas()}")
  print(f"{'case':12s} {'device':6s} {'mode':8s} {'ours':>10s} {'numpy':>10s} {'ratio':>6s} {'setup s':>8s}  same bits")
  for name, unit, work, make, ref in cases([int(s) for s in args.sizes.split(",")], rng):
    np_rate = work / best_of(ref, args.runs) / 1e9
    for device in args.devices.split(","):
      if not opens(device):
        print(f"{name:12s} {device:6s} (device does not open here)")
        continue
      first = None
      for mode in args.modes.split(","):
        os.environ.update(MODES[mode])
        seconds, bits, setup = kernel_time(make, device, args.runs)
        first = bits if first is None else first
        rate = work / seconds / 1e9
        print(f"{name:12s} {device:6s} {mode:8s} {rate:10.2f} {np_rate:10.2f} {rate / np_rate:6.2f} {setup:8.2f}  "
              f"{'yes' if bits == first else 'NO'} ({unit})")
        sys.stdout.flush()


if __name__ == "__main__":
  main()
