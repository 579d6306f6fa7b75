"""Evaluate an ALU graph over DEFINE_VARs on concrete values through the executable semantics (tests only)."""
from refimpl.uop import Ops, GroupOp
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import exec_alu


def evaluate(root: UOp, env: dict[str, object]):
  """The value of `root` when each DEFINE_VAR named n has the value env[n]."""
  vals: dict[UOp, object] = {}
  for u in root.toposort():
    if u.op is Ops.CONST: vals[u] = u.arg
    elif u.op is Ops.DEFINE_VAR: vals[u] = env[u.arg[0]]
    elif u.op in GroupOp.Elementwise: vals[u] = exec_alu(u.op, u.dtype, [vals[s] for s in u.src], u.src[-1].dtype)
    else: raise ValueError(f"cannot evaluate {u.op}")
  return vals[root]
