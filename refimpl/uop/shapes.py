"""Shapes of tensor-level UOps (spec/uop.md, UOP.LEVEL): derived from the graph, never stored.

A BUFFER is flat: its shape is (size,). Every tensor-level op's result shape follows from its sources' shapes and
its arg; an op whose sources disagree is an error naming the clause, raised when the shape is first asked for."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from refimpl.helpers import SpecError
from refimpl.uop.opcodes import Ops, GroupOp

if TYPE_CHECKING: from refimpl.uop.ops import UOp

_SAME_AS_SRC = {Ops.COPY, Ops.CONTIGUOUS, Ops.DETACH, Ops.ASSIGN, Ops.CAST, Ops.BITCAST, Ops.NOOP}


def shape_of(u: UOp) -> tuple[int, ...]:
  op, src, arg = u.op, u.src, u.arg
  if op is Ops.BUFFER: return (arg,)
  if op is Ops.DEFINE_GLOBAL: return (u.dtype.size,)   # a kernel AST's buffer parameter is flat, like BUFFER
  if op is Ops.CONST or op is Ops.DEFINE_VAR or op is Ops.BIND: return ()
  if op in _SAME_AS_SRC: return src[0].shape
  if op in GroupOp.ALU:
    shapes = {s.shape for s in (src[1:] if op is Ops.WHERE else src)} | ({src[0].shape} if op is Ops.WHERE else set())
    if len(shapes) != 1: raise SpecError(f"UOP.{op.name}", f"{op.name} sources have shapes {sorted(shapes)}; "
                                         "broadcasting must be explicit (RESHAPE/EXPAND)")
    return shapes.pop()
  s = src[0].shape if src else ()
  if op is Ops.RESHAPE:
    if math.prod(arg) != math.prod(s): raise SpecError("UOP.RESHAPE", f"cannot reshape {s} to {arg}")
    return tuple(arg)
  if op is Ops.EXPAND:
    if len(arg) != len(s) or any(a != b and a != 1 for a, b in zip(s, arg)):
      raise SpecError("UOP.EXPAND", f"cannot expand {s} to {arg}: only size-1 axes expand")
    return tuple(arg)
  if op is Ops.PERMUTE:
    if sorted(arg) != list(range(len(s))):
      raise SpecError("UOP.PERMUTE", f"{arg} is not a permutation of {len(s)} axes")
    return tuple(s[i] for i in arg)
  if op is Ops.PAD:
    if len(arg) != len(s): raise SpecError("UOP.PAD", f"pad {arg} does not match shape {s}")
    return tuple(b + n + a for n, (b, a) in zip(s, arg))
  if op is Ops.SHRINK:
    if len(arg) != len(s) or any(not 0 <= b <= e <= n for n, (b, e) in zip(s, arg)):
      raise SpecError("UOP.SHRINK", f"shrink {arg} does not fit shape {s}")
    return tuple(e - b for b, e in arg)
  if op is Ops.FLIP: return s
  if op is Ops.REDUCE_AXIS:
    axes = arg[1]
    if any(not 0 <= a < len(s) for a in axes): raise SpecError("UOP.REDUCE_AXIS", f"axes {axes} outside shape {s}")
    return tuple(1 if i in axes else n for i, n in enumerate(s))
  raise SpecError(f"UOP.{op.name}", f"{op.name} has no tensor-level shape")
