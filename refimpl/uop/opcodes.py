"""The operation codes of the UOp IR: the `Ops` enum and its groups (spec/uop.md). A leaf module: every other module
of refimpl.uop imports it, it imports nothing."""
from __future__ import annotations

from enum import Enum, auto


class Ops(Enum):
  """Every operation of the IR. Each member has a typing clause `UOP.<NAME>` in spec/uop.md; each ALU member
  also has a semantics clause `OP.<NAME>` in spec/ops.md."""
  # structure
  SINK = auto(); NOOP = auto(); GROUP = auto()
  # tensor-level buffers and devices
  UNIQUE = auto(); DEVICE = auto(); BUFFER = auto(); COPY = auto(); ASSIGN = auto(); CONTIGUOUS = auto()
  DETACH = auto(); KERNEL = auto()
  # constants and symbolic variables
  CONST = auto(); DEFINE_VAR = auto(); BIND = auto()
  # movement (tensor level)
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()
  # reduction: REDUCE_AXIS at tensor level (axes), REDUCE at kernel level (over RANGEs)
  REDUCE_AXIS = auto(); REDUCE = auto()
  # kernel-level memory
  DEFINE_GLOBAL = auto(); DEFINE_LOCAL = auto(); DEFINE_REG = auto(); INDEX = auto(); LOAD = auto()
  STORE = auto()
  # kernel-level control
  SPECIAL = auto(); RANGE = auto(); END = auto(); BARRIER = auto(); IF = auto(); ENDIF = auto()
  # kernel-level vectors
  VECTORIZE = auto(); GEP = auto()
  # ALU: unary
  EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIPROCAL = auto(); TRUNC = auto(); NEG = auto()
  CAST = auto(); BITCAST = auto()
  # ALU: binary
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); CDIV = auto(); CMOD = auto(); MAX = auto()
  CMPLT = auto(); CMPNE = auto(); CMPEQ = auto(); AND = auto(); OR = auto(); XOR = auto(); SHL = auto()
  SHR = auto(); POW = auto()
  # ALU: ternary
  WHERE = auto(); MULACC = auto()

  def __repr__(self) -> str: return f"Ops.{self.name}"


class GroupOp:
  """Named sets of Ops used by patterns, the verifier and the scheduler."""
  Unary = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.CDIV, Ops.CMOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE,
                      Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.POW})
  Ternary = frozenset({Ops.WHERE, Ops.MULACC})
  # ALU: elementwise ops whose meaning spec/ops.md gives; CAST and BITCAST are elementwise too
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
  Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
  Buffer = frozenset({Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG})
  Integer = frozenset({Ops.CDIV, Ops.CMOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})   # no float operands
  FloatOnly = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.FDIV})

