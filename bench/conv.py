"""conv2d and a replayed training step on the CPU against tinygrad 0.14.0 and torch, in the same run (issue 19).

  python -m bench.conv [--runs 5] [--seconds 1] [--cases "conv fwd,conv fwd+bwd,digits step,pool fwd,pool fwd+bwd"]
                       [--no-tinygrad] [--no-torch]

Rows:
- `conv fwd`: conv2d of N=16, 32 -> 64 channels, 32x32, 3x3, padding 1, float32;
- `conv fwd+bwd`: the same, then the gradients of `(out * g).sum()` for the input and the weight;
- `digits step`: one Adam step of examples/train_digits.py's model on a batch of 32 (random images, same shapes);
- `pool fwd`, `pool fwd+bwd`: max_pool2d 2x2 (stride 2) of the conv's output shape (16, 64, 32, 32), and the input's
  gradient of `(out * g).sum()`. refimpl picks each window's first maximum (the last NaN if any) through a one-hot
  mask (GRAD.REDUCE.MAX.tie, torch's choice), which is 5 kernels forward where a bare max is 1.

Each is a TinyJit'd function (refimpl's and tinygrad's) replayed after its capture, or torch's eager call, timed as
the best of `--runs` after warm-up (more runs for a short case, so that each implementation is timed for about
`--seconds`), the implementations taking turns run by run; the table gives milliseconds and
each implementation's time divided by refimpl's (above 1: refimpl is faster). tinygrad and torch rows appear when
they import. The numbers only mean something side by side: ratios are taken in one run, on one machine."""
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

SHAPE_X, SHAPE_W, SHAPE_G = (16, 32, 32, 32), (64, 32, 3, 3), (16, 64, 32, 32)
SHAPE_P = (16, 64, 16, 16)   # max_pool2d's output of a SHAPE_G input
CASES = "conv fwd,conv fwd+bwd,digits step,pool fwd,pool fwd+bwd"


def best_ms(fns: dict, runs: int, warmup: int = 3, seconds: float = 1.0) -> dict:
  """The shortest of `runs` timings of each of `fns` in milliseconds, after `warmup` calls each (JIT capture happens
  there); more runs where `runs` calls of the slowest take less than `seconds` (a 3 ms step timed 7 times samples 21 ms
  of a busy machine, and its best of 7 swung by 2x from run to run). The functions take turns, run by run, so that a
  busy spell of a shared machine slows them alike."""
  slowest = 0.0
  for fn in fns.values():
    for _ in range(warmup):
      st = time.perf_counter()
      fn()
    slowest = max(slowest, time.perf_counter() - st)
  best = {name: float("inf") for name in fns}
  for _ in range(max(runs, int(seconds / max(slowest, 1e-6)))):
    for name, fn in fns.items():
      st = time.perf_counter()
      fn()
      best[name] = min(best[name], time.perf_counter() - st)
  return {name: t * 1e3 for name, t in best.items()}


def data(rng) -> dict[str, np.ndarray]:
  return {"x": rng.standard_normal(SHAPE_X, dtype=np.float32), "w": rng.standard_normal(SHAPE_W, dtype=np.float32),
          "g": rng.standard_normal(SHAPE_G, dtype=np.float32), "gp": rng.standard_normal(SHAPE_P, dtype=np.float32),
          "img": rng.random((32, 1, 8, 8), dtype=np.float32), "lab": rng.integers(0, 10, 32).astype(np.int32)}


def tensor_cases(lib, d: dict) -> dict:
  """The three cases for refimpl or tinygrad (the same Tensor API): name -> a function to time."""
  Tensor, TinyJit = lib.Tensor, lib.TinyJit
  x, w, g, gp = (Tensor(d[k], device="CPU").realize() for k in ("x", "w", "g", "gp"))

  @TinyJit
  def fwd(x, w): return x.conv2d(w, padding=1).realize()

  @TinyJit
  def fwdbwd(x, w, g):
    loss = (x.conv2d(w, padding=1) * g).sum()
    gx, gw = loss.gradient(x, w)
    return Tensor.realize(gx, gw)

  @TinyJit
  def pool(g): return g.max_pool2d().realize()

  @TinyJit
  def poolbwd(g, gp): return (g.max_pool2d() * gp).sum().gradient(g)[0].realize()

  step = digits_step(lib)
  img, lab = Tensor(d["img"], device="CPU").realize(), Tensor(d["lab"], device="CPU").realize()
  return {"conv fwd": lambda: fwd(x, w), "conv fwd+bwd": lambda: fwdbwd(x, w, g),
          "digits step": lambda: step(img, lab).item(), "pool fwd": lambda: pool(g),
          "pool fwd+bwd": lambda: poolbwd(g, gp)}


def digits_step(lib):
  """examples/train_digits.py's model and Adam step, written for the Tensor API both libraries share (the script's
  `Model` imports refimpl, so its layers are repeated here)."""
  Tensor, nn = lib.Tensor, lib.nn
  lib.Tensor.manual_seed(0)
  layers = [nn.Conv2d(1, 8, 3), Tensor.relu, nn.Conv2d(8, 16, 3), Tensor.relu, nn.BatchNorm(16), Tensor.max_pool2d,
            lambda x: x.flatten(1), nn.Linear(16 * 2 * 2, 10)]
  params = lib.get_parameters(layers)
  opt = nn.optim.Adam(params, lr=1e-2)

  @lib.TinyJit
  def step(x, y):
    with lib.train():
      opt.zero_grad()
      loss = x.sequential(layers).sparse_categorical_crossentropy(y)
      loss.backward()
      Tensor.realize(loss, *opt.schedule_step())
    return loss
  return step


def torch_cases(d: dict) -> dict:
  import torch
  x, w, g, gp = (torch.from_numpy(d[k]) for k in ("x", "w", "g", "gp"))

  def fwd():
    with torch.no_grad(): return torch.nn.functional.conv2d(x, w, padding=1)

  def fwdbwd():
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    (torch.nn.functional.conv2d(xr, wr, padding=1) * g).sum().backward()
    return xr.grad, wr.grad
  def pool():
    with torch.no_grad(): return torch.nn.functional.max_pool2d(g, 2)

  def poolbwd():
    gr = g.clone().requires_grad_()
    (torch.nn.functional.max_pool2d(gr, 2) * gp).sum().backward()
    return gr.grad
  return {"conv fwd": fwd, "conv fwd+bwd": fwdbwd, "pool fwd": pool, "pool fwd+bwd": poolbwd}


class _Lib:
  """The names tensor_cases needs, from refimpl or tinygrad."""
  def __init__(self, name: str):
    if name == "refimpl":
      import refimpl as m
      from refimpl import nn
      from refimpl.nn.state import get_parameters
      self.train = m.Tensor.train
    else:
      import tinygrad as m
      from tinygrad import nn
      from tinygrad.nn.state import get_parameters
      from tinygrad.helpers import Context
      self.train = lambda: Context(TRAINING=1)   # tinygrad 0.14's spelling of Tensor.train()
    self.Tensor, self.TinyJit, self.nn, self.get_parameters = m.Tensor, m.TinyJit, nn, get_parameters


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--seconds", type=float, default=1.0, help="at least this long per case and implementation")
  ap.add_argument("--cases", default=CASES)
  ap.add_argument("--no-tinygrad", action="store_true")
  ap.add_argument("--no-torch", action="store_true")
  args = ap.parse_args()
  os.environ["DEV"] = "CPU"   # both libraries' default device: the model's weights and the optimizer's state
  d = data(np.random.default_rng(0))
  cases = {"refimpl": tensor_cases(_Lib("refimpl"), d)}
  impls = {}
  if not args.no_tinygrad: impls["tinygrad"] = lambda: tensor_cases(_Lib("tinygrad"), d)
  if not args.no_torch: impls["torch"] = lambda: torch_cases(d)
  for name, make in impls.items():
    try: cases[name] = make()
    except ImportError as e: print(f"({name} does not import: {e})")
  print(f"cores: {os.cpu_count()}, OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, best of {args.runs} or more "
        f"(about {args.seconds:g} s per case and implementation) "
        "(ms); ratio = their time / refimpl's (> 1: refimpl faster)")
  print(f"{'case':14s}" + "".join(f"{n:>12s}" for n in cases) + "".join(f"{n + '/ref':>14s}" for n in cases
                                                                          if n != "refimpl"))
  for case in args.cases.split(","):
    ms = best_ms({n: c[case] for n, c in cases.items() if case in c}, args.runs, seconds=args.seconds)
    ratios = "".join(f"{ms[n] / ms['refimpl']:14.2f}" if n in ms else f"{'':14s}" for n in cases if n != "refimpl")
    print(f"{case:14s}" + "".join(f"{ms[n]:12.1f}" if n in ms else f"{'-':>12s}" for n in cases) + ratios)
    sys.stdout.flush()


if __name__ == "__main__":
  main()
