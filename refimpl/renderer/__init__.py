"""Renderers: a linear program (EXEC.PROGRAM) becomes source text for a compiled backend (DEV.COMPILE).

`Renderer` is the interface; `refimpl.renderer.cstyle` holds the C-style base that the C, OpenCL and CUDA renderers
share (spec/backends.md, DEV.C.*). `check_program` is the well-formedness check every renderer runs first, so that a
malformed program is refused with the sub-clause it breaks instead of turning into source that does not compile."""
from __future__ import annotations

from refimpl.device import LinearProgram
from refimpl.helpers import SpecError
from refimpl.uop import GroupOp, Ops

__all__ = ["Renderer", "check_program", "KERNEL_OPS", "SPECIAL_NAMES"]

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


def check_program(p: LinearProgram) -> None:
  """Raise a SpecError naming the broken sub-clause of EXEC.PROGRAM (or EXEC.GRID.special) if `p` is malformed."""
  pos: dict = {}
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.order
    if u.op not in KERNEL_OPS: _fail("EXEC.PROGRAM.order", p, i, f"{u.op.name} does not appear in a linear program")
    if u in pos: _fail("EXEC.PROGRAM.order", p, i, f"the same UOp is already at position {pos[u]}")
    if any(s not in pos for s in u.src): _fail("EXEC.PROGRAM.order", p, i, "a source does not come earlier")
    pos[u] = i
  stack: list[int] = []
  blocks: list[tuple[int, ...]] = []   # per position: the RANGE/IF positions open there
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.nest
    blocks.append(tuple(stack))
    if u.op in (Ops.RANGE, Ops.IF): stack.append(i)
    elif u.op is Ops.END:
      rs = sorted(pos[s] for s in u.src[1:])
      if not rs or any(p.uops[r].op is not Ops.RANGE for r in rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END lists no RANGE")
      if rs != stack[len(stack) - len(rs):] or len(set(rs)) != len(rs):
        _fail("EXEC.PROGRAM.nest", p, i, "END does not close the innermost open ranges")
      del stack[len(stack) - len(rs):]
    elif u.op is Ops.ENDIF:
      if not stack or p.uops[stack[-1]] is not u.src[0]: _fail("EXEC.PROGRAM.nest", p, i, "ENDIF does not close the IF")
      stack.pop()
  if stack: _fail("EXEC.PROGRAM.nest", p, stack[-1], "block never closed")
  for i, u in enumerate(p.uops):   # EXEC.PROGRAM.scope: values leave a block only through memory or REDUCE
    if u.op in (Ops.END, Ops.BARRIER, Ops.REDUCE): continue
    srcs = u.src[:1] if u.op in (Ops.IF, Ops.LOAD) else u.src[:2] if u.op is Ops.STORE else u.src
    for s in srcs:
      b = blocks[pos[s]]
      if blocks[i][:len(b)] != b: _fail("EXEC.PROGRAM.scope", p, i, f"uses UOp #{pos[s]} outside its block")
  slots = sorted(u.arg for u in p.uops if u.op is Ops.DEFINE_GLOBAL)   # EXEC.PROGRAM.params
  if slots != list(range(len(slots))): raise SpecError("EXEC.PROGRAM.params", f"kernel {p.name!r}: slots {slots}")
  names = [u.arg for u in p.uops if u.op is Ops.SPECIAL]   # EXEC.GRID.special
  for n in names:
    if n not in SPECIAL_NAMES: raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: unknown SPECIAL {n!r}")
  if len(set(names)) != len(names): raise SpecError("EXEC.GRID.special", f"kernel {p.name!r}: a SPECIAL twice")
