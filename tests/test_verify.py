"""Tests of the spec verifier (refimpl/uop/verify.py) against the typing clauses of spec/uop.md.

Every op has well-typed examples that must pass and ill-typed ones that must fail with the clause the spec names.
Ill-typed graphs are built directly with UOp(op, dtype, src, arg): the constructor does not type-check (UOP.VERIFY).
"""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import GroupOp, Ops, UOp
from refimpl.uop.semantics import ALU_DTYPES
from refimpl.uop.verify import CHECKS, verify, verify_ok

void, b, u8, i8, i32, i64, f16, f32 = (dtypes.void, dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int32,
                                       dtypes.int64, dtypes.float16, dtypes.float32)


def c(v, dt=i32) -> UOp: return UOp.const(dt, v)


# ---- building blocks, each well typed ----
DEV = UOp(Ops.DEVICE, arg="CPU")
UNQ = UOp(Ops.UNIQUE, arg=0)
BUF = UOp(Ops.BUFFER, f32, (UNQ, DEV), 16)
TC = UOp(Ops.CONST, f32, (DEV,), 1.0)                       # a tensor-level constant
X = UOp.variable("x", 0, 10)                               # int32
G = UOp(Ops.DEFINE_GLOBAL, f32.ptr(16), (), 0)
R = UOp(Ops.RANGE, i32, (c(16),), (0, "loop"))
R2 = UOp(Ops.RANGE, i32, (c(4),), (1, "reduce"))
IDX = UOp(Ops.INDEX, f32.ptr(16), (G, R))
F = UOp(Ops.LOAD, f32, (IDX,))                             # a float32 value
ST = UOp(Ops.STORE, void, (IDX, F + 1.0))
IF = UOp(Ops.IF, void, (X < 5,))
V4 = UOp(Ops.VECTORIZE, f32.vec(4), (F, F, F, F))

GOOD: dict[Ops, list[UOp]] = {
  Ops.SINK: [UOp(Ops.SINK, void, (ST,)), UOp(Ops.SINK, void, (), ("kernel", "r_16")), UOp(Ops.SINK, void, (X, F))],
  Ops.NOOP: [UOp(Ops.NOOP, f32, (F,))],
  Ops.GROUP: [UOp(Ops.GROUP, void, (ST, ST))],
  Ops.UNIQUE: [UNQ],
  Ops.DEVICE: [DEV, UOp(Ops.DEVICE, arg=("CPU", "CUDA:1"))],
  Ops.BUFFER: [BUF, UOp(Ops.BUFFER, b, (UOp(Ops.UNIQUE, arg=1), DEV), 0)],
  Ops.COPY: [UOp(Ops.COPY, f32, (BUF, UOp(Ops.DEVICE, arg="CUDA")))],
  Ops.ASSIGN: [UOp(Ops.ASSIGN, f32, (BUF, TC)), UOp(Ops.ASSIGN, f32, (BUF, TC, UOp(Ops.SINK)))],
  Ops.CONTIGUOUS: [UOp(Ops.CONTIGUOUS, f32, (BUF,))],
  Ops.DETACH: [UOp(Ops.DETACH, f32, (BUF,))],
  Ops.KERNEL: [UOp(Ops.KERNEL, void, (BUF,), ("ast", 1))],
  Ops.CONST: [TC, c(7), c(True, b), c(255, u8), c(-128, i8), c(math.nan, f32), c(-0.0, f32), c(math.inf, f16),
              c(65504.0, f16), c(-(2 ** 63), i64)],
  Ops.DEFINE_VAR: [X, UOp.variable("n", 3, 3, i64), UOp.variable("m", 0, 255, u8)],
  Ops.BIND: [UOp(Ops.BIND, i32, (X, c(10)))],
  Ops.RESHAPE: [UOp(Ops.RESHAPE, f32, (BUF,), (4, 4)), UOp(Ops.RESHAPE, f32, (TC,), ())],
  Ops.PERMUTE: [UOp(Ops.PERMUTE, f32, (BUF,), (1, 0)), UOp(Ops.PERMUTE, f32, (BUF,), ())],
  Ops.EXPAND: [UOp(Ops.EXPAND, f32, (BUF,), (4, 16))],
  Ops.PAD: [UOp(Ops.PAD, f32, (BUF,), ((1, 0), (0, 2)))],
  Ops.SHRINK: [UOp(Ops.SHRINK, f32, (BUF,), ((0, 4), (2, 2)))],
  Ops.FLIP: [UOp(Ops.FLIP, f32, (BUF,), (True, False))],
  Ops.REDUCE_AXIS: [UOp(Ops.REDUCE_AXIS, f32, (BUF,), (Ops.ADD, (0,))),
                    UOp(Ops.REDUCE_AXIS, f32, (BUF,), (Ops.MAX, (1, 0)))],
  Ops.REDUCE: [UOp(Ops.REDUCE, f32, (F, R2), Ops.ADD), UOp(Ops.REDUCE, f32, (F,), Ops.MUL)],
  Ops.DEFINE_GLOBAL: [G],
  Ops.DEFINE_LOCAL: [UOp(Ops.DEFINE_LOCAL, f32.ptr(32, "local"), (), "smem"),
                     UOp(Ops.DEFINE_LOCAL, f32.ptr(32, "local"), (), 0)],
  Ops.DEFINE_REG: [UOp(Ops.DEFINE_REG, f32.ptr(1, "reg"), (), 0)],
  Ops.INDEX: [IDX, UOp(Ops.INDEX, f32.ptr(16), (G, R, R < 8))],
  Ops.LOAD: [F, UOp(Ops.LOAD, f32, (UOp(Ops.INDEX, f32.ptr(16), (G, R, R < 8)),))],
  Ops.STORE: [ST, UOp(Ops.STORE, void, (IDX, F, R))],
  Ops.SPECIAL: [UOp(Ops.SPECIAL, i32, (c(64),), "gidx0")],
  Ops.RANGE: [R, UOp(Ops.RANGE, i32, (X,), 0)],
  Ops.END: [UOp(Ops.END, void, (ST, R)), UOp(Ops.END, void, (ST, R, R2))],
  Ops.BARRIER: [UOp(Ops.BARRIER, void, (ST,)), UOp(Ops.BARRIER)],
  Ops.IF: [IF, UOp(Ops.IF, void, (X < 5, ST))],
  Ops.ENDIF: [UOp(Ops.ENDIF, void, (IF,))],
  Ops.VECTORIZE: [V4, UOp(Ops.VECTORIZE, f32, (F,))],
  Ops.GEP: [UOp(Ops.GEP, f32, (V4,), (3,)), UOp(Ops.GEP, f32.vec(2), (V4,), (2, 0))],
  Ops.CAST: [F.cast(i32), X.cast(b), UOp(Ops.CAST, i32.vec(4), (V4,))],
  Ops.BITCAST: [F.bitcast(i32), UOp(Ops.BITCAST, dtypes.uint32, (UOp(Ops.VECTORIZE, f16.vec(2), (c(1.0, f16),) * 2),))],
  # ALU: one example per op from the operators and helpers of UOp
  Ops.EXP2: [F.exp2()], Ops.LOG2: [F.log2()], Ops.SIN: [F.sin()], Ops.SQRT: [F.sqrt()],
  Ops.RECIPROCAL: [F.reciprocal()], Ops.TRUNC: [F.trunc()], Ops.NEG: [-F, -X],
  Ops.ADD: [F + 1.0, X + 1, (X < 1) + (X < 2)], Ops.SUB: [X - 1], Ops.MUL: [F * F], Ops.FDIV: [F / 2.0],
  Ops.CDIV: [X // 3], Ops.CMOD: [X % 3], Ops.MAX: [F.maximum(0.0)], Ops.CMPLT: [X < 5, F < F],
  Ops.CMPNE: [X.ne(5)], Ops.CMPEQ: [F.eq(0.0)], Ops.AND: [X & 1], Ops.OR: [X | 1], Ops.XOR: [(X < 1) ^ True],
  Ops.SHL: [X << 2], Ops.SHR: [X >> 2], Ops.POW: [F ** 2.0, X ** 2],
  Ops.WHERE: [(X < 5).where(F, 0.0), UOp(Ops.WHERE, f32.vec(4), (UOp(Ops.VECTORIZE, b.vec(4), (X < 5,) * 4), V4, V4))],
  Ops.MULACC: [F.mulacc(2.0, 1.0), X.mulacc(X, X)],
}


def _bad(op: Ops, dtype, src=(), arg=None, clause: str | None = None, why: str = ""):
  """An ill-typed node and the clause it breaks (UOP.<op> unless given)."""
  return pytest.param(UOp(op, dtype, src, arg), clause or f"UOP.{op.name}", id=f"{op.name}-{why}")


BAD = [
  _bad(Ops.SINK, i32, (ST,), why="not-void"),
  _bad(Ops.NOOP, f32, (F, F), why="two-sources"),
  _bad(Ops.NOOP, i32, (F,), why="dtype-changed"),
  _bad(Ops.GROUP, f32, (ST,), why="not-void"),
  _bad(Ops.UNIQUE, void, (), "a", why="arg-str"),
  _bad(Ops.UNIQUE, void, (), True, why="arg-bool"),
  _bad(Ops.UNIQUE, void, (DEV,), 0, why="source"),
  _bad(Ops.DEVICE, void, (), 0, why="arg-int"),
  _bad(Ops.DEVICE, void, (), (), why="arg-empty-tuple"),
  _bad(Ops.DEVICE, i32, (), "CPU", why="not-void"),
  _bad(Ops.BUFFER, f32, (UNQ, DEV), -1, why="negative-size"),
  _bad(Ops.BUFFER, f32.vec(4), (UNQ, DEV), 4, why="vector"),
  _bad(Ops.BUFFER, f32, (DEV, UNQ), 4, why="sources-swapped"),
  _bad(Ops.BUFFER, f32.ptr(4), (UNQ, DEV), 4, why="pointer"),
  _bad(Ops.COPY, f32, (BUF, c(1)), why="no-device"),
  _bad(Ops.COPY, i32, (BUF, DEV), why="dtype-changed"),
  _bad(Ops.ASSIGN, f32, (BUF,), why="one-source"),
  _bad(Ops.ASSIGN, f32, (BUF, c(1)), why="value-dtype"),
  _bad(Ops.ASSIGN, i32, (BUF, TC), why="result-dtype"),
  _bad(Ops.CONTIGUOUS, i32, (BUF,), why="dtype-changed"),
  _bad(Ops.DETACH, f32, (), why="no-source"),
  _bad(Ops.KERNEL, void, (BUF,), None, why="arg-none"),
  _bad(Ops.KERNEL, f32, (BUF,), "ast", why="not-void"),
  _bad(Ops.CONST, f32, (), 1, "UOP.CONST.value", why="int-for-float"),
  _bad(Ops.CONST, i32, (), 1.0, "UOP.CONST.value", why="float-for-int"),
  _bad(Ops.CONST, i32, (), True, "UOP.CONST.value", why="bool-for-int"),
  _bad(Ops.CONST, b, (), 1, "UOP.CONST.value", why="int-for-bool"),
  _bad(Ops.CONST, u8, (), 300, "UOP.CONST.value", why="out-of-range"),
  _bad(Ops.CONST, u8, (), -1, "UOP.CONST.value", why="negative-unsigned"),
  _bad(Ops.CONST, f32, (), 0.1, "UOP.CONST.value", why="not-representable"),
  _bad(Ops.CONST, f16, (), 1e6, "UOP.CONST.value", why="beyond-float16"),
  _bad(Ops.CONST, f32, (), "1", "UOP.CONST.value", why="str"),
  _bad(Ops.CONST, f32, (), None, "UOP.CONST.value", why="none"),
  _bad(Ops.CONST, f32.vec(2), (), 1.0, why="vector"),
  _bad(Ops.CONST, void, (), 0, why="void"),
  _bad(Ops.CONST, f32, (BUF,), 1.0, why="non-device-source"),
  _bad(Ops.DEFINE_VAR, i32, (), ("x", 5, 4), why="min-above-max"),
  _bad(Ops.DEFINE_VAR, f32, (), ("x", 0, 4), why="float"),
  _bad(Ops.DEFINE_VAR, i32, (), ("x", 0), why="no-max"),
  _bad(Ops.DEFINE_VAR, i32, (), (0, 0, 4), why="name-int"),
  _bad(Ops.DEFINE_VAR, u8, (), ("x", 0, 300), why="beyond-dtype"),
  _bad(Ops.DEFINE_VAR, i32, (), ("x", 0.0, 4), why="float-bound"),
  _bad(Ops.BIND, i32, (X, c(11)), why="value-outside-bounds"),
  _bad(Ops.BIND, i32, (X, c(3, i64)), why="value-dtype"),
  _bad(Ops.BIND, i32, (X, X), why="value-not-const"),
  _bad(Ops.RESHAPE, f32, (BUF,), (2, -1), why="negative"),
  _bad(Ops.RESHAPE, f32, (BUF,), (2.0, 8), why="float-size"),
  _bad(Ops.RESHAPE, f32, (BUF,), 16, why="not-tuple"),
  _bad(Ops.RESHAPE, i32, (BUF,), (16,), why="dtype-changed"),
  _bad(Ops.PERMUTE, f32, (BUF,), (0, 0), why="repeat"),
  _bad(Ops.PERMUTE, f32, (BUF,), (1, 2), why="gap"),
  _bad(Ops.EXPAND, f32, (BUF,), (-1,), why="negative"),
  _bad(Ops.EXPAND, f32, (BUF, BUF), (16,), why="two-sources"),
  _bad(Ops.PAD, f32, (BUF,), ((0, -1),), why="negative"),
  _bad(Ops.PAD, f32, (BUF,), ((1,),), why="not-pair"),
  _bad(Ops.PAD, f32, (BUF,), (1, 1), why="flat"),
  _bad(Ops.SHRINK, f32, (BUF,), ((3, 2),), why="start-after-end"),
  _bad(Ops.SHRINK, f32, (BUF,), ((-1, 2),), why="negative-start"),
  _bad(Ops.FLIP, f32, (BUF,), (0, 1), why="ints"),
  _bad(Ops.REDUCE_AXIS, f32, (BUF,), (Ops.SUB, (0,)), why="op"),
  _bad(Ops.REDUCE_AXIS, f32, (BUF,), (Ops.ADD, (0, 0)), why="repeated-axis"),
  _bad(Ops.REDUCE_AXIS, f32, (BUF,), (Ops.ADD, 0), why="axes-not-tuple"),
  _bad(Ops.REDUCE_AXIS, i32, (BUF,), (Ops.ADD, (0,)), why="dtype-changed"),
  _bad(Ops.REDUCE, f32, (F, R2), Ops.SUB, why="op"),
  _bad(Ops.REDUCE, f32, (F, X), Ops.ADD, why="not-range"),
  _bad(Ops.REDUCE, i32, (F, R2), Ops.ADD, why="dtype-changed"),
  _bad(Ops.DEFINE_GLOBAL, f32.ptr(16, "local"), (), 0, why="local-pointer"),
  _bad(Ops.DEFINE_GLOBAL, f32, (), 0, why="not-pointer"),
  _bad(Ops.DEFINE_GLOBAL, f32.ptr(16), (), -1, why="negative-slot"),
  _bad(Ops.DEFINE_GLOBAL, f32.ptr(16), (), "a", why="name-slot"),
  _bad(Ops.DEFINE_LOCAL, f32.ptr(16), (), 0, why="global-pointer"),
  _bad(Ops.DEFINE_LOCAL, f32.ptr(16, "local"), (), 1.5, why="float-arg"),
  _bad(Ops.DEFINE_REG, f32.ptr(1, "local"), (), 0, why="local-pointer"),
  _bad(Ops.DEFINE_REG, f32.ptr(1, "reg"), (), "acc", why="str-arg"),
  _bad(Ops.INDEX, f32, (F, R), why="not-pointer"),
  _bad(Ops.INDEX, f32.ptr(16), (G, F), why="float-index"),
  _bad(Ops.INDEX, f32.ptr(16), (G, R, R), why="int-gate"),
  _bad(Ops.INDEX, f32.ptr(8), (G, R), why="result-dtype"),
  _bad(Ops.INDEX, f32.ptr(16), (G,), why="one-source"),
  _bad(Ops.LOAD, i32, (IDX,), why="dtype-mismatch"),
  _bad(Ops.LOAD, f32.ptr(16), (IDX,), why="pointer-result"),
  _bad(Ops.LOAD, f32, (G,), why="not-index"),
  _bad(Ops.STORE, void, (IDX, X), why="value-dtype"),
  _bad(Ops.STORE, f32, (IDX, F), why="not-void"),
  _bad(Ops.STORE, void, (IDX, F, X), why="not-range"),
  _bad(Ops.STORE, void, (G, F), why="not-index"),
  _bad(Ops.SPECIAL, i32, (c(64),), 0, why="arg-int"),
  _bad(Ops.SPECIAL, f32, (c(64.0, f32),), "gidx0", why="float"),
  _bad(Ops.SPECIAL, i32, (c(64, i64),), "gidx0", why="size-dtype"),
  _bad(Ops.RANGE, i32, (c(16),), None, why="arg-none"),
  _bad(Ops.RANGE, i32, (F,), 0, why="float-end"),
  _bad(Ops.RANGE, i32, (), 0, why="no-end"),
  _bad(Ops.RANGE, i32.vec(2), (c(4),), 0, why="vector"),
  _bad(Ops.END, void, (ST,), why="no-range"),
  _bad(Ops.END, void, (ST, X), why="not-range"),
  _bad(Ops.END, i32, (ST, R), why="not-void"),
  _bad(Ops.BARRIER, i32, (ST,), why="not-void"),
  _bad(Ops.IF, void, (X,), why="int-cond"),
  _bad(Ops.IF, void, (), why="no-cond"),
  _bad(Ops.ENDIF, void, (X < 5,), why="not-if"),
  _bad(Ops.VECTORIZE, f32.vec(2), (F, X), why="mixed-lanes"),
  _bad(Ops.VECTORIZE, f32.vec(4), (F, F), why="wrong-count"),
  _bad(Ops.VECTORIZE, f32.vec(8), (V4, V4), why="vector-lanes"),
  _bad(Ops.GEP, f32, (V4,), (4,), why="out-of-range"),
  _bad(Ops.GEP, f32, (V4,), (-1,), why="negative"),
  _bad(Ops.GEP, f32, (V4,), (), why="empty"),
  _bad(Ops.GEP, f32, (V4,), (0, 1), why="dtype-for-two-lanes"),
  _bad(Ops.CAST, i32, (F, F), why="two-sources"),
  _bad(Ops.CAST, i32.ptr(4), (F,), why="to-pointer"),
  _bad(Ops.CAST, i32.vec(2), (V4,), why="lane-count"),
  _bad(Ops.CAST, i32, (G,), why="from-pointer"),
  _bad(Ops.CAST, void, (F,), why="to-void"),
  _bad(Ops.BITCAST, i64, (F,), clause="UOP.BITCAST.size", why="size-mismatch"),
  _bad(Ops.BITCAST, i32, (G,), why="from-pointer"),
  _bad(Ops.BITCAST, dtypes.uint64, (V4,), clause="UOP.BITCAST.size", why="vector-size-mismatch"),
  # the shared ALU rule
  _bad(Ops.ADD, f32, (F, X), clause="UOP.ALU.operands", why="mixed-dtypes"),
  _bad(Ops.ADD, f32, (F, F, F), clause="UOP.ALU.arity", why="three-sources"),
  _bad(Ops.NEG, f32, (), clause="UOP.ALU.arity", why="no-source"),
  _bad(Ops.ADD, f32, (F, F), "add", "UOP.ALU.arg", why="arg"),
  _bad(Ops.ADD, b, (F, F), clause="UOP.ALU.result", why="result-dtype"),
  _bad(Ops.CMPLT, f32, (F, F), clause="UOP.ALU.result", why="comparison-not-bool"),
  _bad(Ops.CMPEQ, b, (V4, V4), clause="UOP.ALU.result", why="comparison-lanes"),
  _bad(Ops.ADD, f32.vec(4), (V4, F), clause="UOP.ALU.operands", why="lane-counts"),
  _bad(Ops.ADD, f32.ptr(16), (G, G), clause="UOP.ALU.operands", why="pointers"),
  _bad(Ops.SHL, i32, (X, c(2, u8)), clause="UOP.ALU.operands", why="count-dtype"),
  _bad(Ops.CDIV, f32, (F, F), clause="UOP.ALU.operands", why="float"),
  _bad(Ops.SQRT, i32, (X,), clause="UOP.ALU.operands", why="int"),
  _bad(Ops.NEG, b, (X < 1,), clause="UOP.ALU.operands", why="bool"),
  _bad(Ops.AND, f32, (F, F), clause="UOP.ALU.operands", why="float"),
  _bad(Ops.WHERE, f32, (X, F, F), clause="UOP.WHERE.cond", why="int-cond"),
  _bad(Ops.WHERE, f32.vec(4), (X < 5, V4, V4), clause="UOP.WHERE.cond", why="scalar-cond-vector-branches"),
  _bad(Ops.WHERE, f32, (X < 5, F, X), clause="UOP.ALU.operands", why="branches-differ"),
  _bad(Ops.WHERE, i32, (X < 5, F, F), clause="UOP.ALU.result", why="result-dtype"),
  _bad(Ops.MULACC, f32, (F, F, X), clause="UOP.ALU.operands", why="mixed-dtypes"),
]


# ---- coverage of the tables above and of the checker table ----

def test_every_op_has_a_checker():
  assert set(CHECKS) == set(Ops)


def test_every_op_has_good_and_bad_examples():
  assert set(GOOD) == set(Ops)
  bad_ops = {p.values[0].op for p in BAD} | GroupOp.ALU   # test_alu_mixed_dtypes covers each ALU op
  assert bad_ops == set(Ops)


@pytest.mark.parametrize("op", list(Ops), ids=lambda o: o.name)
def test_good(op):
  for u in GOOD[op]:
    assert u.op is op
    verify(u)
    assert verify_ok(u) == []


def _rejects(u: UOp, clause: str) -> SpecError:
  """verify(u) fails at `u` itself with `clause`; the message names the op and quotes the node."""
  with pytest.raises(SpecError) as info: verify(u)
  err = info.value
  assert err.clause == clause, str(err)
  assert u.op.name in str(err) and f"UOp(Ops.{u.op.name}, " in str(err)
  assert [e.clause for e in verify_ok(u)] == [clause]
  return err


@pytest.mark.parametrize("u, clause", BAD)
def test_bad(u, clause):
  _rejects(u, clause)


@pytest.mark.parametrize("op", sorted(GroupOp.ALU, key=lambda o: o.name), ids=lambda o: o.name)
def test_alu_mixed_dtypes(op):
  """UOP.ALU.operands: every ALU op refuses operands of two dtypes, even dtypes it accepts one at a time."""
  n = 3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1
  for dt, other in [(i32, i64), (f32, f16), (b, i8)]:
    if dt not in ALU_DTYPES[op]: continue
    if n == 1: srcs = (c(1, dt), c(1, dt), c(1, dt))       # too many sources instead
    else: srcs = ((c(True, b),) if op is Ops.WHERE else (c(1, dt),)) + (c(1, dt),) * (n - 2) + (c(1, other),)
    _rejects(UOp(op, b if op in GroupOp.Comparison else dt, srcs), "UOP.ALU.arity" if n == 1 else "UOP.ALU.operands")
    break
  else: pytest.fail(f"no dtype for {op}")


# ---- ALU typing over every dtype: the verifier agrees with ALU_DTYPES (the OP.ALU table) ----

def _alu_node(op: Ops, dt, lanes: int = 1) -> UOp:
  """`op` on operands of `dt` (a vector of `lanes`), with the result dtype UOP.ALU.result gives."""
  def operand(d):
    v = c(1, d)
    return v if lanes == 1 else UOp(Ops.VECTORIZE, d.vec(lanes), (v,) * lanes)
  n = 3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1
  srcs = [operand(dt) for _ in range(n)]
  if op is Ops.WHERE: srcs[0] = operand(b)
  res = b if op in GroupOp.Comparison else dt
  return UOp(op, res.vec(lanes), tuple(srcs))


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("op", sorted(GroupOp.ALU, key=lambda o: o.name), ids=lambda o: o.name)
def test_alu_operand_dtypes(op, lanes):
  """UOP.ALU.operands, UOP.ALU.result: an ALU op on operands of a dtype verifies exactly when OP.ALU accepts it."""
  for dt in dtypes.all():
    u = _alu_node(op, dt, lanes)
    if dt in ALU_DTYPES[op]: verify(u)
    else: _rejects(u, "UOP.ALU.operands")


@pytest.mark.parametrize("op", sorted(GroupOp.Comparison, key=lambda o: o.name), ids=lambda o: o.name)
def test_comparison_result_is_bool(op):
  """UOP.ALU.result: comparisons give bool of the operands' width, never the operands' dtype."""
  for dt in (i32, f32, u8):
    verify(UOp(op, b, (c(1, dt), c(2, dt))))
    _rejects(UOp(op, dt, (c(1, dt), c(2, dt))), "UOP.ALU.result")
    _rejects(UOp(op, b.vec(2), (c(1, dt), c(2, dt))), "UOP.ALU.result")


@pytest.mark.parametrize("src", [b, u8, i32, i64, f16, dtypes.bfloat16, f32, dtypes.float64], ids=repr)
def test_cast_and_bitcast_pairs(src):
  """UOP.CAST takes any pair of value dtypes; UOP.BITCAST.size only pairs of the same itemsize."""
  x = c(1, src)
  for dst in dtypes.all():
    verify(UOp(Ops.CAST, dst, (x,)))
    u = UOp(Ops.BITCAST, dst, (x,))
    if dst.itemsize == src.itemsize: verify(u)
    else: _rejects(u, "UOP.BITCAST.size")


def test_const_values_at_the_edges():
  """UOP.CONST.value: the ends of each range are values, one step past them is not; NaN and -0.0 are floats."""
  for dt in dtypes.all():
    if dtypes.is_int(dt):
      verify(c(dtypes.min(dt), dt)); verify(c(dtypes.max(dt), dt))
      _rejects(UOp(Ops.CONST, dt, (), dtypes.max(dt) + 1), "UOP.CONST.value")
      _rejects(UOp(Ops.CONST, dt, (), dtypes.min(dt) - 1), "UOP.CONST.value")
    elif dtypes.is_float(dt):
      for v in (math.nan, -0.0, math.inf, -math.inf): verify(UOp(Ops.CONST, dt, (), v))
  _rejects(UOp(Ops.CONST, dtypes.bfloat16, (), 1.0 + 2 ** -10), "UOP.CONST.value")   # 8 significant bits only


# ---- the walk and the report (UOP.VERIFY) ----

def test_verify_names_the_deepest_bad_node():
  bad_src = UOp(Ops.ADD, f32, (F, X))                 # UOP.ALU.operands
  bad_user = UOp(Ops.SQRT, i32, (bad_src,))           # also wrong, but checked after its source
  with pytest.raises(SpecError) as info: verify(bad_user.sink())
  assert info.value.clause == "UOP.ALU.operands" and "ADD" in str(info.value)


def test_verify_ok_collects_every_bad_node():
  bad = [UOp(Ops.ADD, f32, (F, X)), UOp(Ops.CONST, u8, (), 256), UOp(Ops.GEP, f32, (V4,), (9,))]
  errors = verify_ok(UOp(Ops.SINK, void, (*bad, ST)))
  assert [e.clause for e in errors] == ["UOP.ALU.operands", "UOP.CONST.value", "UOP.GEP"]


def test_verify_ok_survives_a_malformed_source():
  """A user of a malformed node is not a crash: the node's own error is what verify_ok reports."""
  var = UOp(Ops.DEFINE_VAR, i32, (), "x")
  assert [e.clause for e in verify_ok(UOp(Ops.BIND, i32, (var, c(1))).sink())] == ["UOP.DEFINE_VAR"]


def test_verify_rejects_a_non_uop():
  with pytest.raises(TypeError): verify(3)


def test_message_says_got_and_expected():
  with pytest.raises(SpecError) as info: verify(UOp(Ops.LOAD, i32, (IDX,)))
  msg = str(info.value)
  assert msg.startswith("UOP.LOAD: LOAD has dtype dtypes.int; expected dtypes.float")
  assert "UOp(Ops.LOAD, dtypes.int, arg=None, src=(" in msg


def test_message_is_cut_for_big_graphs():
  x = F
  for i in range(300): x = x + float(i)
  with pytest.raises(SpecError) as info: verify(UOp(Ops.SQRT, i32, (x,)))
  assert "SQRT" in str(info.value) and len(str(info.value)) < 1200


def test_deep_graph():
  """The walk is iterative: a chain deeper than Python's recursion limit verifies, and an error at its top still
  reports (the printer falls back to the node alone)."""
  x = X
  for _ in range(5000): x = x + 1
  verify(x)
  with pytest.raises(SpecError) as info: verify(UOp(Ops.SQRT, i32, (x,)))
  assert info.value.clause == "UOP.ALU.operands" and "SQRT" in str(info.value)


# ---- graphs built with UOp's own helpers are well typed ----

_BIN = [lambda a, b_: a + b_, lambda a, b_: a - b_, lambda a, b_: a * b_, lambda a, b_: a.maximum(b_),
        lambda a, b_: a.minimum(b_), lambda a, b_: (a < b_).where(a, b_), lambda a, b_: a.mulacc(b_, a)]
_INT_ONLY = [lambda a, b_: a // b_, lambda a, b_: a % b_, lambda a, b_: a & b_, lambda a, b_: a ^ b_,
             lambda a, b_: a << b_, lambda a, b_: a >> b_, lambda a, b_: (a >= b_).where(a, 0)]
_FLOAT_ONLY = [lambda a, b_: a / b_, lambda a, b_: (a * a).sqrt() + b_, lambda a, b_: a.exp2().log2() - b_.sin(),
               lambda a, b_: a.reciprocal().trunc(), lambda a, b_: (a <= b_).where(a, b_.cast(i32).cast(a.dtype))]


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([i32, u8, f32, f16]))
def test_helper_built_expressions_verify(data, dt):
  """Every graph built from UOp's operators and helpers passes the verifier: the helpers follow UOP.ALU."""
  ops = _BIN + (_INT_ONLY if dtypes.is_int(dt) else _FLOAT_ONLY)
  leaves = [UOp.variable("a", 0, 9, dt) if dtypes.is_int(dt) else UOp(Ops.LOAD, dt, (UOp(
    Ops.INDEX, dt.ptr(4), (UOp(Ops.DEFINE_GLOBAL, dt.ptr(4), (), 0), R)),)), c(3, dt)]
  for _ in range(data.draw(st.integers(1, 8))):
    fn = data.draw(st.sampled_from(ops))
    leaves.append(fn(data.draw(st.sampled_from(leaves)), data.draw(st.sampled_from(leaves))))
  verify(UOp(Ops.SINK, void, tuple(leaves)))
