"""The UOp IR (spec/uop.md): `Ops` and its groups (refimpl.uop.opcodes), `UOp`, `UPat`, `PatternMatcher` and
`graph_rewrite` (refimpl.uop.ops).

The modules of this package import each other without a cycle (tests/test_layering.py): opcodes is a leaf; ops
builds on it and on bounds and shapes, which need only a UOp's attributes; rules and symbolic build patterns out of
UOps, so they sit above ops. The one edge that would run back down, `UOp.simplify` needing the symbolic rules, is
wired here, once both exist (docs/layering.md)."""
from refimpl.uop.opcodes import Ops, GroupOp
from refimpl.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, install_simplifier
from refimpl.uop.symbolic import symbolic

install_simplifier(symbolic)

__all__ = ["Ops", "GroupOp", "UOp", "UPat", "PatternMatcher", "graph_rewrite"]
