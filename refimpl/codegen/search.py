"""Choosing a kernel's options (EXEC.OPT.default, EXEC.OPT.beam) and building its program.

`NOOPT=1` skips the optimisation pass; `BEAM=N` times candidate option lists on the device, keeping the N fastest at
each step (a beam search over opt.actions), and stores the winner on disk so that the next run does not search. Both
knobs are read at each choice (not once), so a test can switch them. Whatever is chosen, results are the same bits
(EXEC.OPT.exact): the search changes speed only."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from refimpl.codegen.linearize import linearize
from refimpl.codegen.lowerer import lower
from refimpl.codegen.opt import Opt, actions, check_opts, heuristic, layout, lower_opt
from refimpl.device import Device, LinearProgram
from refimpl.helpers import SpecError
from refimpl.helpers import cache_root, knob
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.uop.verify import verify

__all__ = ["OPT_SPACE_VERSION", "choose_opts", "build_program", "beam_search", "time_program", "ast_key"]

OPT_SPACE_VERSION = 1   # bump when opt.actions or the meaning of an option changes: old cached winners are ignored
TIMING_RUNS = 3
_chosen: dict[tuple, tuple[Opt, ...] | None] = {}


def canonical(opts) -> tuple[Opt, ...]:
  """Options in a fixed order: lower_opt does not depend on the order, so neither do cache keys."""
  return tuple(sorted(opts, key=Opt.key))


def build_program(name: str, ast: UOp, opts: tuple[Opt, ...] | None) -> tuple[LinearProgram, tuple[int, ...]]:
  """The linear program of kernel `ast` with `opts` (None or (): plain lowering), verified (UOP.VERIFY) at the
  lowering boundary, and which AST slot each program slot takes."""
  if opts:
    sink, global_size, local_size, slots = lower_opt(ast, opts)
  else:
    sink, n, slots = lower(ast)
    global_size, local_size = (n, 1, 1), (1, 1, 1)
  verify(sink)   # a lowering or optimisation bug surfaces as the clause it breaks
  return LinearProgram(name, tuple(linearize(sink)), global_size, local_size), slots


def choose_opts(device: str, ast: UOp) -> tuple[Opt, ...] | None:
  """The options kernel `ast` is compiled with on `device`: None with NOOPT=1, the BEAM=N winner, else the
  heuristic's (EXEC.OPT.default)."""
  noopt, beam = knob("NOOPT"), knob("BEAM")
  key = (device, ast, noopt, beam)
  if key not in _chosen:
    if noopt: _chosen[key] = None
    elif beam > 0 and device.partition(":")[0] != "PYTHON": _chosen[key] = beam_search(device, ast, beam)
    else: _chosen[key] = canonical(heuristic(ast, device))
  return _chosen[key]


def ast_key(ast: UOp) -> str:
  """A stable text key of a kernel AST (the same in every process): each node's op, dtype, sources and arg."""
  order = ast.toposort()
  pos = {u: i for i, u in enumerate(order)}
  text = "\n".join(f"{u.op.name} {u.dtype!r} {[pos[s] for s in u.src]} {u.arg!r}" for u in order)
  return hashlib.sha256(text.encode()).hexdigest()


def _cache_file(device: str, ast: UOp) -> Path | None:
  if (root := cache_root()) is None: return None
  key = hashlib.sha256(f"{device}\0{ast_key(ast)}\0{OPT_SPACE_VERSION}".encode()).hexdigest()
  return Path(root) / "beam" / f"{key}.json"


def time_program(device: str, program: LinearProgram, runs: int = TIMING_RUNS, limit: float = float("inf")) -> float:
  """The best time in seconds of `runs` launches of `program` on `device` after one warm-up launch, on fresh
  zero-filled buffers (its own, so the caller's are never written). Compiling is not timed. Stops early when a launch
  takes longer than `limit`."""
  dev = Device[device]
  compiled = dev.compile(program)
  bufs = []
  for g in program.globals:
    b = dev.alloc(g.dtype.size, g.dtype.base)
    dev.copyin(b, bytes(b.nbytes))
    bufs.append(b)
  best = float("inf")
  for i in range(runs + 1):
    st = time.perf_counter()
    dev.launch(compiled, bufs)
    dev.synchronize()
    took = time.perf_counter() - st
    if i > 0: best = min(best, took)
    if took > limit: return max(best, took)
  return best


def beam_search(device: str, ast: UOp, width: int, name: str = "beam") -> tuple[Opt, ...]:
  """EXEC.OPT.beam: start from no options and the heuristic's; repeatedly extend each of the `width` fastest lists by
  one more action, time the new valid lists on `device`, and stop when the fastest no longer improves. The winner is
  cached on disk under (device, AST key, OPT_SPACE_VERSION)."""
  path = _cache_file(device, ast)
  if path is not None and path.exists():
    try: return canonical(Opt.from_json(o) for o in json.loads(path.read_text())["opts"])
    except (ValueError, KeyError, TypeError): pass   # a damaged entry: search again
  lay = layout(ast)
  if lay.numel == 0 or any(g.dtype.size < 0 for g in ast.toposort() if g.op is Ops.DEFINE_GLOBAL):
    return canonical(heuristic(ast, device))
  timed: dict[tuple[Opt, ...], float] = {}

  def measure(opts: tuple[Opt, ...]) -> None:
    if opts in timed: return
    limit = 10 * min(timed.values(), default=float("inf"))
    try:
      check_opts(lay, opts)
      timed[opts] = time_program(device, build_program(name, ast, opts)[0], limit=limit)
    except SpecError:   # an option list that does not apply (EXEC.OPT.valid) or does not compile: never chosen
      timed[opts] = float("inf")

  beam = [(), canonical(heuristic(ast, device))]
  for opts in beam: measure(opts)
  acts = actions(lay, device)
  best = min(timed.values())
  while True:
    beam = sorted(timed, key=lambda o: timed[o])[:width]
    for b in beam:
      for a in acts: measure(canonical(b + (a,)))
    new_best = min(timed.values())
    if new_best >= best * 0.99: break   # within noise: stop
    best = new_best
  winner = min(timed, key=lambda o: timed[o])
  if path is not None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"device": device, "version": OPT_SPACE_VERSION, "opts": [o.to_json() for o in winner],
                               "seconds": timed[winner]}))
    os.replace(tmp, path)   # atomic: a concurrent reader sees the whole entry or none
  return winner
