"""Well-formedness of a linear program (EXEC.PROGRAM.*, EXEC.GRID.special, EXEC.THREAD.reduce), checked once at
compile by refimpl.device's `check_program` (the one the renderers run), and the block structure the translator
needs on top of it: where each REDUCE opens and closes, and which accumulator LOADs, ALUs and STOREs it folds."""
from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.device import LinearProgram
from refimpl.device import ProgramStructure, check_program as check_structure
from refimpl.uop.ops import UOp

__all__ = ["Structure", "check_program"]


@dataclass
class Structure(ProgramStructure):
  """refimpl's ProgramStructure plus the translator's accumulator bookkeeping."""
  acc_stores: dict[int, tuple[int, int, UOp]] = field(default_factory=dict)  # STORE -> (LOAD, ALU, value)
  acc_skip: set[int] = field(default_factory=set)              # acc LOADs and ALUs, folded at their STORE

  @property
  def reduces_opened_at(self) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r, rs in self.reduce_ranges.items(): out.setdefault(rs[0], []).append(r)
    return out

  @property
  def reduces_closed_at(self) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r, rs in self.reduce_ranges.items(): out.setdefault(rs[-1], []).append(r)
    return out

  def reduces_of_region(self, ranges: tuple[int, ...]) -> list[int]:
    return [r for r, rs in self.reduce_ranges.items() if rs == tuple(ranges)]


def check_program(p: LinearProgram) -> Structure:
  """Raise a SpecError naming the broken sub-clause (refimpl.renderer.check_program); else the structure."""
  st = Structure()
  check_structure(p, st)
  return st
