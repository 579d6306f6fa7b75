"""Renderers: a linear program (EXEC.PROGRAM) becomes source text for a compiled backend (DEV.COMPILE).

`Renderer` is the interface; `refimpl.renderer.cstyle` holds the C-style base that the C, OpenCL and CUDA renderers
share (spec/backends.md, DEV.C.*). `check_program` is the well-formedness check every renderer runs first, so that a
malformed program is refused with the sub-clause it breaks instead of turning into source that does not compile."""
from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.device import LinearProgram
from refimpl.helpers import SpecError
from refimpl.uop import GroupOp, Ops
from refimpl.uop.ops import UOp

__all__ = ["Renderer", "check_program", "ProgramStructure", "KERNEL_OPS", "SPECIAL_NAMES"]

KERNEL_OPS = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.INDEX,
                        Ops.LOAD, Ops.STORE, Ops.SPECIAL, Ops.RANGE, Ops.END, Ops.BARRIER, Ops.IF, Ops.ENDIF,
                        Ops.REDUCE, Ops.VECTORIZE, Ops.GEP, Ops.CAST, Ops.BITCAST}) | GroupOp.ALU
SPECIAL_NAMES = ("gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2")


class Renderer:
  """Turns a linear program into the source text of one language."""
  def render(self, program: LinearProgram) -> str:
    """The source of one kernel whose function is named after `program.name`."""
    raise NotImplementedError


def _fail(clause: str, program: LinearProgram, i: int, why: str):
  raise SpecError(clause, f"kernel {program.name!r}, UOp #{i} {program.uops[i].op.name}: {why}")


@dataclass
class ProgramStructure:
  """What `check_program` learns about a well-formed program: each UOp's position, which END or ENDIF closes each
  RANGE or IF, the RANGE/IF positions open at each position, the users of each position, and each REDUCE's
  ranges (outer first). The emulator's translator extends it (emu/check.py)."""
  pos: dict[UOp, int] = field(default_factory=dict)
  close: dict[int, int] = field(default_factory=dict)
  blocks: list[tuple[int, ...]] = field(default_factory=list)
  users: dict[int, list[int]] = field(default_factory=dict)
  reduce_ranges: dict[int, tuple[int, ...]] = field(default_factory=dict)


def check_program(p: LinearProgram, st: ProgramStructure | None = None) -> ProgramStructure:
  """Raise a SpecError naming the broken sub-clause of EXEC.PROGRAM (or EXEC.GRID.special, EXEC.THREAD.reduce) if
  `p` is malformed; else fill and return its structure (`st`, or a new ProgramStructure)."""
  st = ProgramStructure() if st is None else st
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.order
    if u.op not in KERNEL_OPS: _fail("EXEC.PROGRAM.order", p, i, f"{u.op.name} does not appear in a linear program")
    if u in st.pos: _fail("EXEC.PROGRAM.order", p, i, f"the same UOp is already at position {st.pos[u]}")
    for s in u.src:
      if s not in st.pos: _fail("EXEC.PROGRAM.order", p, i, f"source {s.op.name} does not come earlier in the list")
      st.users.setdefault(st.pos[s], []).append(i)
    st.pos[u] = i
  stack: list[int] = []
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.nest
    st.blocks.append(tuple(stack))
    if u.op in (Ops.RANGE, Ops.IF): stack.append(i)
    elif u.op is Ops.END:
      rs = [st.pos[s] for s in u.src[1:]]
      if not rs or any(p.uops[r].op is not Ops.RANGE for r in rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END lists no RANGE")
      if sorted(rs) != stack[len(stack) - len(rs):] or len(set(rs)) != len(rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END does not close the innermost open ranges")
      for r in rs: st.close[r] = i
      del stack[len(stack) - len(rs):]
    elif u.op is Ops.ENDIF:
      if not stack or p.uops[stack[-1]] is not u.src[0]:
        _fail("EXEC.PROGRAM.nest", p, i, "ENDIF does not close the open IF")
      st.close[stack.pop()] = i
  if stack: _fail("EXEC.PROGRAM.nest", p, stack[-1], "block never closed")
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.scope: values leave a block only through memory or REDUCE
    if u.op is Ops.REDUCE: _check_reduce(p, st, i, u)
    if u.op in (Ops.END, Ops.BARRIER, Ops.REDUCE): continue
    # IF's, LOAD's and STORE's further sources only order them (spec/uop.md UOP.LOAD): no value crosses a block
    srcs = u.src[:1] if u.op in (Ops.IF, Ops.LOAD) else u.src[:2] if u.op is Ops.STORE else u.src
    for s in srcs:
      b = st.blocks[st.pos[s]]
      if st.blocks[i][:len(b)] != b: _fail("EXEC.PROGRAM.scope", p, i, f"uses UOp #{st.pos[s]} outside its block")
  slots = sorted(u.arg for u in p.uops if u.op is Ops.DEFINE_GLOBAL)   # EXEC.PROGRAM.params
  if slots != list(range(len(slots))): raise SpecError("EXEC.PROGRAM.params", f"kernel {p.name!r}: slots {slots}")
  names = [u.arg for u in p.uops if u.op is Ops.SPECIAL]   # EXEC.GRID.special
  for n in names:
    if n not in SPECIAL_NAMES: raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: unknown SPECIAL {n!r}")
  if len(set(names)) != len(names): raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: a SPECIAL twice")
  return st


def _check_reduce(p: LinearProgram, st: ProgramStructure, i: int, u: UOp) -> None:
  """EXEC.THREAD.reduce: ranges directly nested, the value inside the innermost, the REDUCE after the outermost."""
  rs = sorted(st.pos[s] for s in u.src[1:])
  if not rs or any(p.uops[r].op is not Ops.RANGE for r in rs):
    _fail("EXEC.THREAD.reduce", p, i, "sources are not RANGEs")
  for a, b in zip(rs, rs[1:]):
    if st.blocks[b] != st.blocks[a] + (a,): _fail("EXEC.THREAD.reduce", p, i, "ranges are not directly nested")
  if st.pos[u.src[0]] < rs[-1] or st.pos[u.src[0]] > st.close[rs[-1]]:
    _fail("EXEC.THREAD.reduce", p, i, "value is not inside the innermost range")
  if i < st.close[rs[0]] or st.blocks[i] != st.blocks[rs[0]]:
    _fail("EXEC.THREAD.reduce", p, i, "REDUCE is not right after its outermost range")
  st.reduce_ranges[i] = tuple(rs)
