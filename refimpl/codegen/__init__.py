"""Code generation: lowering a kernel AST to kernel-level UOps, and linearizing them (DESIGN.md steps 4-5)."""
from refimpl.codegen.lowerer import lower
from refimpl.codegen.linearize import linearize
from refimpl.uop.ops import UOp


def full_rewrite_to_sink(ast: UOp) -> UOp:
  """The kernel-level SINK for a kernel AST: movement ops as index arithmetic, loads and stores through INDEX,
  simplified by the symbolic rules (seed 000, "Graph Optimization and Kernel Generation")."""
  return lower(ast)[0]


__all__ = ["lower", "linearize", "full_rewrite_to_sink"]
