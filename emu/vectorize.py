"""Which loop nests run vectorized: all iterations at once on extra array axes (EXEC.ASIF).

A nest qualifies when nothing in it can observe the order of its iterations except register accumulators: no IF,
BARRIER or store other than `acc[c] = acc[c] OP v` (OP one of ADD, MUL, MAX; c a CONST) on a DEFINE_REG, the loops
a chain each inside the previous, with ends computed before the nest. Such an accumulator (and any REDUCE over the
whole nest) is then folded along the iteration axes in increasing iteration order, outer loop slowest, which is the
order of EXEC.THREAD.reduce. Whether the trip counts are the same for every thread is known only at run time; the
translator emits a Python loop for the other case."""
from __future__ import annotations

from refimpl.device import LinearProgram
from refimpl.uop import Ops
from emu.check import Structure

_NOT_IN_NEST = (Ops.IF, Ops.ENDIF, Ops.BARRIER)
_FOLDABLE = (Ops.ADD, Ops.MUL, Ops.MAX)


def find_regions(p: LinearProgram, st: Structure) -> dict[int, tuple[int, ...]]:
  """Outermost RANGE position -> the RANGE positions of its vectorizable nest, outer first. Records the accumulator
  pattern of each nest in st.acc_stores / st.acc_skip."""
  regions: dict[int, tuple[int, ...]] = {}
  i = 0
  while i < len(p.uops):
    if p.uops[i].op is Ops.RANGE and (found := _nest(p, st, i)) is not None:
      ranges, accs = found
      regions[i] = ranges
      for store, (ld, alu, v) in accs.items():
        st.acc_stores[store] = (ld, alu, v)
        st.acc_skip |= {ld, alu}
      i = st.close[i] + 1
    else: i += 1
  return regions


def _nest(p: LinearProgram, st: Structure, start: int):
  end = st.close[start]
  body = range(start, end)
  ranges = tuple(j for j in body if p.uops[j].op is Ops.RANGE)
  for k, r in enumerate(ranges):
    if st.pos[p.uops[r].src[0]] >= start or st.blocks[r] != st.blocks[start] + ranges[:k]: return None
  if any(p.uops[j].op in _NOT_IN_NEST for j in body): return None
  if any(p.uops[j].op is Ops.REDUCE for j in body): return None
  for r, rs in st.reduce_ranges.items():
    if rs[0] in ranges and rs != ranges: return None
  accs, seen, stored_regs = {}, set(), set()
  for j in body:
    u = p.uops[j]
    if u.op is not Ops.STORE: continue
    acc = _acc_pattern(p, st, j, ranges)
    if acc is None: return None
    key = (u.src[0].src[0], u.src[0].src[1].arg)
    if key in seen: return None
    seen.add(key); stored_regs.add(u.src[0].src[0])
    accs[j] = acc
  loads = {ld for ld, _, _ in accs.values()}
  for j in body:   # a register the nest accumulates into is read only by its accumulator loads
    u = p.uops[j]
    if u.op is Ops.LOAD and u.src[0].src[0] in stored_regs and j not in loads: return None
  return ranges, accs


def _acc_pattern(p: LinearProgram, st: Structure, j: int, ranges: tuple[int, ...]):
  """(LOAD, ALU, v) when STORE j is acc[c] = acc[c] OP v inside every loop of the nest, else None."""
  u = p.uops[j]
  idx, val = u.src[0], u.src[1]
  if idx.op is not Ops.INDEX or len(idx.src) != 2 or idx.src[0].op is not Ops.DEFINE_REG: return None
  if idx.src[1].op is not Ops.CONST or val.op not in _FOLDABLE or val.dtype.count != 1: return None
  if not set(ranges) <= set(st.blocks[j]): return None
  lds = [s for s in val.src if s.op is Ops.LOAD and s.src[0] is idx]
  if len(lds) != 1 or len(val.src) != 2: return None
  ld, alu = st.pos[lds[0]], st.pos[val]
  other = val.src[1] if val.src[0] is lds[0] else val.src[0]
  if ld < ranges[0] or st.users.get(ld) != [alu] or st.users.get(alu) != [j]: return None
  return ld, alu, other
