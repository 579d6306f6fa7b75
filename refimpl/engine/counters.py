"""What GlobalCounters counts for one launch (API.COUNTERS): the ALU operations a linear program executes and the
bytes of the buffers it takes."""
from __future__ import annotations

import functools
import math

from refimpl.device import Buffer, LinearProgram
from refimpl.helpers import GlobalCounters
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp


@functools.lru_cache(maxsize=4096)
def program_ops(prog: LinearProgram) -> int:
  """API.COUNTERS.ops: each ALU op of the program (a vector op counts once per lane) times the threads of the launch
  and the trip counts of the RANGEs around it. Address arithmetic (what only feeds INDEX offsets, RANGE and SPECIAL
  sizes) is not counted; an op under IF counts as if every thread ran it. A RANGE whose size is not a CONST (a
  DEFINE_VAR bound) counts with its maximum."""
  address: set[UOp] = set()
  for u in prog.uops:   # the sources that compute addresses and sizes, and everything feeding them
    roots = u.src[1:] if u.op is Ops.INDEX else u.src if u.op in (Ops.RANGE, Ops.SPECIAL) else ()
    stack = list(roots)
    while stack:
      s = stack.pop()
      if s in address or s.op not in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}: continue
      address.add(s)
      stack.extend(s.src)
  threads = math.prod(prog.global_size) * math.prod(prog.local_size)
  trips, total = [1], 0
  for u in prog.uops:
    if u.op is Ops.RANGE:
      size = u.src[0]
      trips.append(trips[-1] * (size.arg if size.op is Ops.CONST else int(size.vmax)))
    elif u.op is Ops.END: trips.pop()
    elif u.op in GroupOp.ALU and u not in address: total += trips[-1] * u.dtype.count
  return total * threads


def record(ops: int | None, bufs: tuple[Buffer, ...], seconds: float) -> None:
  """Add one launch of a program of `ops` operations (program_ops), or one copy between devices (ops None: no
  kernel), to GlobalCounters."""
  if ops is not None:
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += ops
  GlobalCounters.global_mem += sum(b.nbytes for b in {id(b): b for b in bufs}.values())
  GlobalCounters.time_sum_s += seconds
