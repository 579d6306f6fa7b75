"""Renderers: a linear program (EXEC.PROGRAM) becomes source text for a compiled backend (DEV.COMPILE).

`Renderer` is the interface; `refimpl.renderer.cstyle` holds the C-style base that the C, OpenCL and CUDA renderers
share (spec/backends.md, DEV.C.*). Every renderer first runs `check_program` (defined with LinearProgram in
refimpl.device, the foundation, so that the emulator runs the same check): a malformed program is refused with the
sub-clause it breaks instead of turning into source that does not compile."""
from __future__ import annotations

from refimpl.device import KERNEL_OPS, SPECIAL_NAMES, LinearProgram, ProgramStructure, check_program

__all__ = ["Renderer", "check_program", "ProgramStructure", "KERNEL_OPS", "SPECIAL_NAMES"]

class Renderer:
  """Turns a linear program into the source text of one language."""
  def render(self, program: LinearProgram) -> str:
    """The source of one kernel whose function is named after `program.name`."""
    raise NotImplementedError
