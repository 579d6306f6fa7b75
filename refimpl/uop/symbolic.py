"""The symbolic rewrite rules (spec/rewrites.md): constant folding, algebraic identities that hold for every input,
integer index algebra and bounds. Every rule cites its clause; every rule in SYM_RULES is checked on random inputs
of each dtype it applies to, and every one that applies to integers is proven with z3 (tests/test_rewrite_soundness.py),
every one that applies to floats with z3's IEEE theory (tests/test_float_rule_proofs.py).

What is deliberately absent, because it is false for some float input: x*0 -> 0 (inf, NaN, -0), x/x -> 1
(0, inf, NaN), x-x -> 0 (inf, NaN), x+0.0 -> x (-0.0 + 0.0 = +0.0), x!=x -> False (NaN), reassociation of float
+ and *, and float cast round trips (RW.FLOAT.none)."""
from __future__ import annotations

from refimpl.dtype import dtypes, can_lossless_cast
from refimpl.uop.opcodes import Ops, GroupOp
from refimpl.uop.ops import UOp, UPat, PatternMatcher, Rule
from refimpl.uop.rules import (SymRule, Var, CVar, Lit, LoOf, where, lo, hi, val, DMIN, DMAX, INTS, SINTS, FLOATS,
                               BOOL, fold_constants)

x, y = Var("x"), Var("y")
c, c1, c2, c3 = CVar("c"), CVar("c1"), CVar("c2"), CVar("c3")
b = Var("b", bool_=True)
nc = Var("y", ops=frozenset(set(Ops) - {Ops.CONST}))   # a non-constant y: keeps constant-moving rules from cycling
NUM = INTS + FLOATS

def _split_guard(c3: CVar | None = None):
  """The guard of the RW.IDX.*-split rules for x (+ c3) + y * c1 divided by c2: 0 < c1 < c2, non-negative terms (so
  // truncates and floors alike), a sum that stays inside the dtype, y * (c2 - c1) inside it too, and
  lo(x (+ c3)) - hi(y) * (c2 - c1) >= -c2 and hi(x (+ c3)) - lo(y) * (c2 - c1) < c2."""
  d = val(c2) - val(c1)
  lo_x, hi_x = (lo(x), hi(x)) if c3 is None else (lo(x) + val(c3), hi(x) + val(c3))
  return ((val(c2) > 0) & (val(c1) > 0) & (val(c1) < val(c2)) & (lo_x >= 0) & (lo(y) >= 0) &
          (hi_x + hi(y) * val(c1) <= DMAX) & (hi(y) * d <= DMAX) & (hi_x - lo(y) * d < val(c2)) &
          (lo_x - hi(y) * d >= 0 - val(c2)))


SYM_RULES: list[SymRule] = [
  # ---- identities (RW.SYM) ----
  SymRule("RW.SYM.add-zero", x + 0, x, dtypes=INTS),
  SymRule("RW.SYM.add-negzero", x + Lit(-0.0), x, dtypes=FLOATS, note="x + (-0.0) is x for every x, -0.0 included"),
  SymRule("RW.SYM.sub-zero", x - 0, x, dtypes=NUM, note="x - (+0) = x + (-0): exact for floats too"),
  SymRule("RW.SYM.mul-one", x * 1, x, dtypes=NUM),
  SymRule("RW.SYM.mul-zero", x * 0, 0, dtypes=INTS),
  SymRule("RW.SYM.mul-negone", x * -1, -x, dtypes=SINTS + FLOATS),
  SymRule("RW.SYM.div-one", x // 1, x, dtypes=INTS),
  SymRule("RW.SYM.fdiv-one", x / 1, x, dtypes=FLOATS),
  SymRule("RW.SYM.div-negone", x // -1, -x, dtypes=SINTS, note="INT_MIN // -1 = INT_MIN = -INT_MIN"),
  SymRule("RW.SYM.mod-one", x % 1, 0, dtypes=INTS),
  SymRule("RW.SYM.mod-negone", x % -1, 0, dtypes=SINTS),
  SymRule("RW.SYM.neg-neg", -(-x), x, dtypes=SINTS + FLOATS),
  SymRule("RW.SYM.add-neg", x + (-y), x - y, dtypes=SINTS + FLOATS, note="IEEE defines x - y as x + (-y)"),
  SymRule("RW.SYM.sub-neg", x - (-y), x + y, dtypes=SINTS + FLOATS),
  SymRule("RW.SYM.sub-self", x - x, 0, dtypes=INTS),
  SymRule("RW.SYM.max-self", x.maximum(x), x, dtypes=NUM + BOOL),
  SymRule("RW.SYM.lt-self", x < x, Lit(False), dtypes=NUM + BOOL, note="NaN < NaN is false too"),
  SymRule("RW.SYM.ne-self", x.ne(x), Lit(False), dtypes=INTS + BOOL),
  SymRule("RW.SYM.eq-self", x.eq(x), Lit(True), dtypes=INTS + BOOL),
  SymRule("RW.SYM.and-self", x & x, x, dtypes=INTS + BOOL),
  SymRule("RW.SYM.or-self", x | x, x, dtypes=INTS + BOOL),
  SymRule("RW.SYM.xor-self", x ^ x, 0, dtypes=INTS + BOOL),
  SymRule("RW.SYM.and-zero", x & 0, 0, dtypes=INTS + BOOL),
  SymRule("RW.SYM.and-true", x & Lit(True), x, dtypes=BOOL, note="a gate joined with an always-true one"),
  SymRule("RW.SYM.and-ones", x & -1, x, dtypes=INTS + BOOL, note="-1 is all ones in every width (True for bool)"),
  SymRule("RW.SYM.or-zero", x | 0, x, dtypes=INTS + BOOL),
  SymRule("RW.SYM.or-ones", x | -1, -1, dtypes=INTS + BOOL),
  SymRule("RW.SYM.xor-zero", x ^ 0, x, dtypes=INTS + BOOL),
  SymRule("RW.SYM.shift-zero", x << 0, x, dtypes=INTS),
  SymRule("RW.SYM.shr-zero", x >> 0, x, dtypes=INTS),
  SymRule("RW.SYM.where-same", where(b, x, x), x, dtypes=NUM + BOOL),
  SymRule("RW.SYM.where-true", where(Lit(True), x, y), x, dtypes=NUM + BOOL),
  SymRule("RW.SYM.where-false", where(Lit(False), x, y), y, dtypes=NUM + BOOL),
  # ---- constants gathered together; wrapping + and * on integers are associative and distribute (RW.SYM) ----
  SymRule("RW.SYM.sub-const", x - c, x + (-c), dtypes=INTS, note="canonical form: constants are added"),
  SymRule("RW.SYM.add-const-assoc", (x + c1) + c2, x + (c1 + c2), dtypes=INTS),
  SymRule("RW.SYM.mul-const-assoc", (x * c1) * c2, x * (c1 * c2), dtypes=INTS),
  SymRule("RW.SYM.add-const-out", (x + c) + nc, (x + nc) + c, dtypes=INTS, note="moves constants outward"),
  SymRule("RW.SYM.distribute-const", (x + c1) * c2, x * c2 + c1 * c2, dtypes=INTS),
  SymRule("RW.SYM.combine-terms", x * c1 + x * c2, x * (c1 + c2), dtypes=INTS),
  SymRule("RW.SYM.combine-term-one", x * c + x, x * (c + 1), dtypes=INTS),
  SymRule("RW.SYM.add-self", x + x, x * 2, dtypes=INTS),
  # ---- integer index algebra, guarded by bounds (RW.IDX) ----
  SymRule("RW.IDX.div-small", x // c, 0, where=(lo(x) >= 0) & (hi(x) < val(c))),
  SymRule("RW.IDX.mod-small", x % c, x, where=(lo(x) >= 0) & (hi(x) < val(c))),
  SymRule("RW.IDX.div-mul", (x * c) // c, x,
          where=(val(c) > 0) & (lo(x) * val(c) >= DMIN) & (hi(x) * val(c) <= DMAX)),
  SymRule("RW.IDX.mod-mul", (x * c) % c, 0,
          where=(val(c) > 0) & (lo(x) * val(c) >= DMIN) & (hi(x) * val(c) <= DMAX)),
  SymRule("RW.IDX.div-add-mul", (x + y * c) // c, x // c + y,
          where=(val(c) > 0) & (lo(x) >= 0) & (lo(y) >= 0) & (hi(x) + hi(y) * val(c) <= DMAX)),
  SymRule("RW.IDX.mod-add-mul", (x + y * c) % c, x % c,
          where=(val(c) > 0) & (lo(x) >= 0) & (lo(y) >= 0) & (hi(x) + hi(y) * val(c) <= DMAX)),
  # a term whose factor is a multiple of the divisor leaves the quotient whole and the remainder alone: lowering makes
  # sums like (k * 1024 + j * 8 + 3) // 8 (packed operands, sliding windows), which these divide term by term
  SymRule("RW.IDX.div-mul-multiple", (x * c1) // c2, x * (c1 // c2),
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) * val(c1) >= DMIN) &
                (hi(x) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-mul-multiple", (x * c1) % c2, 0,
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) * val(c1) >= DMIN) &
                (hi(x) * val(c1) <= DMAX)),
  SymRule("RW.IDX.div-add-mul-multiple", (x + y * c1) // c2, x // c2 + y * (c1 // c2),
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (hi(x) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-add-mul-multiple", (x + y * c1) % c2, x % c2,
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (hi(x) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.div-add-mul-const", ((x + y * c1) + c3) // c2, (x + c3) // c2 + y * (c1 // c2),
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (val(c3) >= 0) & (hi(x) + val(c3) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-add-mul-const", ((x + y * c1) + c3) % c2, (x + c3) % c2,
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (val(c3) >= 0) & (hi(x) + val(c3) + hi(y) * val(c1) <= DMAX)),
  # a divisor that is a multiple of the factor (c2 = c1 * k) with a constant below the factor: an elementwise kernel's
  # lane l of thread g reads flat position g * 8 + l, and each axis index is (g * 8 + l) // stride % size; these
  # leave the division to the thread (g // (stride // 8)), shared by its 8 lanes (RW.IDX.div-mul-factor & co.)
  SymRule("RW.IDX.div-mul-factor", (x * c1) // c2, x // (c2 // c1),
          where=(val(c1) > 0) & (val(c2) > 0) & ((val(c2) % val(c1)).eq(0)) & (lo(x) >= 0) &
                (hi(x) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-mul-factor", (x * c1) % c2, (x % (c2 // c1)) * c1,
          where=(val(c1) > 0) & (val(c2) > 0) & ((val(c2) % val(c1)).eq(0)) & (lo(x) >= 0) &
                (hi(x) * val(c1) <= DMAX)),
  SymRule("RW.IDX.div-mul-const-factor", (x * c1 + c3) // c2, x // (c2 // c1),
          where=(val(c1) > 0) & (val(c2) > 0) & ((val(c2) % val(c1)).eq(0)) & (lo(x) >= 0) & (val(c3) >= 0) &
                (val(c3) < val(c1)) & (hi(x) * val(c1) + val(c3) <= DMAX)),
  SymRule("RW.IDX.mod-mul-const-factor", (x * c1 + c3) % c2, (x % (c2 // c1)) * c1 + c3,
          where=(val(c1) > 0) & (val(c2) > 0) & ((val(c2) % val(c1)).eq(0)) & (lo(x) >= 0) & (val(c3) >= 0) &
                (val(c3) < val(c1)) & (hi(x) * val(c1) + val(c3) <= DMAX)),
  # a constant that is a multiple of the divisor, as a lane's offset in a packed panel: (k + 1024) % 1024 -> k % 1024
  SymRule("RW.IDX.div-add-const-multiple", (x + c1) // c2, x // c2 + c1 // c2,
          where=(val(c2) > 0) & (val(c1) >= 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) &
                (hi(x) + val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-add-const-multiple", (x + c1) % c2, x % c2,
          where=(val(c2) > 0) & (val(c1) >= 0) & ((val(c1) % val(c2)).eq(0)) & (lo(x) >= 0) &
                (hi(x) + val(c1) <= DMAX)),
  # a term whose factor is larger than the divisor keeps only its factor's remainder (the rest is a whole number of
  # divisors): sliding windows read x[(j * (n + d) + i) % n], which becomes (j * d + i) % n, then j * d + i by
  # RW.IDX.mod-small when that stays below n
  SymRule("RW.IDX.div-add-mul-reduce", (x + y * c1) // c2, (x + y * (c1 % c2)) // c2 + y * (c1 // c2),
          where=(val(c2) > 0) & (val(c1) > val(c2)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (hi(x) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-add-mul-reduce", (x + y * c1) % c2, (x + y * (c1 % c2)) % c2,
          where=(val(c2) > 0) & (val(c1) > val(c2)) & (lo(x) >= 0) & (lo(y) >= 0) &
                (hi(x) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.div-add-mul-const-reduce", ((x + y * c1) + c3) // c2,
          ((x + y * (c1 % c2)) + c3) // c2 + y * (c1 // c2),
          where=(val(c2) > 0) & (val(c1) > val(c2)) & (lo(x) >= 0) & (lo(y) >= 0) & (val(c3) >= 0) &
                (hi(x) + val(c3) + hi(y) * val(c1) <= DMAX)),
  SymRule("RW.IDX.mod-add-mul-const-reduce", ((x + y * c1) + c3) % c2, ((x + y * (c1 % c2)) + c3) % c2,
          where=(val(c2) > 0) & (val(c1) > val(c2)) & (lo(x) >= 0) & (lo(y) >= 0) & (val(c3) >= 0) &
                (hi(x) + val(c3) + hi(y) * val(c1) <= DMAX)),
  # a term whose factor is below the divisor (d = c2 - c1): x + y * c1 is y * c2 + (x - y * d), so where x - y * d stays
  # within one divisor either side of 0 the quotient is y or y - 1 and the remainder x - y * d or that plus c2. The
  # adjoint of a sliding window (a convolution's input gradient, col2im) reads (r * n + i) // (n + 1): a compare and
  # a select replace the division in its loop
  SymRule("RW.IDX.div-add-mul-split", (x + y * c1) // c2, where(x < y * (c2 - c1), y + -1, y),
          where=_split_guard()),
  SymRule("RW.IDX.mod-add-mul-split", (x + y * c1) % c2,
          where(x < y * (c2 - c1), (x - y * (c2 - c1)) + c2, x - y * (c2 - c1)), where=_split_guard()),
  SymRule("RW.IDX.div-add-mul-const-split", ((x + y * c1) + c3) // c2, where((x + c3) < y * (c2 - c1), y + -1, y),
          where=_split_guard(c3)),
  SymRule("RW.IDX.mod-add-mul-const-split", ((x + y * c1) + c3) % c2,
          where((x + c3) < y * (c2 - c1), ((x + c3) - y * (c2 - c1)) + c2, (x + c3) - y * (c2 - c1)),
          where=_split_guard(c3)),
  SymRule("RW.IDX.div-div", (x // c1) // c2, x // (c1 * c2),
          where=(val(c1) > 0) & (val(c2) > 0) & (val(c1) * val(c2) <= DMAX)),
  SymRule("RW.IDX.mod-mod", (x % c) % c, x % c, note="holds for every c, 0 included (x % 0 = x)"),
  SymRule("RW.IDX.mod-mod-divisor", (x % c1) % c2, x % c2,
          where=(val(c2) > 0) & (val(c1) > 0) & ((val(c1) % val(c2)).eq(0))),
  SymRule("RW.IDX.div-mod-recombine", (x // c) * c + x % c, x, note="holds for every c under OP.CDIV's totality"),
  SymRule("RW.IDX.lt-add-const", (x + c1) < c2, x < (c2 - c1),
          where=(lo(x) + val(c1) >= DMIN) & (hi(x) + val(c1) <= DMAX) & (val(c2) - val(c1) >= DMIN) &
                (val(c2) - val(c1) <= DMAX)),
  # ---- a node with one possible value is that value (RW.BOUNDS) ----
  # not RANGE: a one-iteration loop stays a loop, since its REDUCE still combines with the identity (+0.0 + -0.0)
  SymRule("RW.BOUNDS.const", Var("x", ops=frozenset(set(Ops) - {Ops.CONST, Ops.RANGE})), LoOf(x),
          where=lo(x).eq(hi(x)), dtypes=INTS + BOOL),
]


def _fold(node: UOp) -> UOp | None:
  """RW.FOLD.const: an ALU op, CAST or BITCAST whose sources are all CONSTs becomes the CONST that the executable
  semantics give (spec/ops.md)."""
  folded = fold_constants(node)
  return None if folded is node else folded


def _cast_noop(x: UOp, node: UOp) -> UOp | None:
  """RW.CAST.noop: a CAST to the type its source already has."""
  return x if x.dtype == node.dtype else None


def _cast_roundtrip(x: UOp, mid: UOp, node: UOp) -> UOp | None:
  """RW.CAST.roundtrip: cast(cast(x, U), T) -> x when T is x's type and the cast to U loses nothing; integers and
  bool only (RW.FLOAT.none: no float round trips are elided)."""
  T, U = x.dtype, mid.dtype
  if node.dtype != T or dtypes.is_float(T) or dtypes.is_float(U) or T.count != 1: return None
  return x if can_lossless_cast(T, U) else None


DIRECT_RULES: list[Rule] = [
  Rule(UPat(GroupOp.Elementwise, src=UPat(Ops.CONST), name="node"), _fold, "RW.FOLD.const"),
  Rule(UPat(Ops.CAST, src=(UPat.var("x"),), name="node"), _cast_noop, "RW.CAST.noop"),
  Rule(UPat(Ops.CAST, src=(UPat(Ops.CAST, src=(UPat.var("x"),), name="mid"),), name="node"), _cast_roundtrip,
       "RW.CAST.roundtrip"),
]

symbolic = PatternMatcher(DIRECT_RULES + [r.to_rule() for r in SYM_RULES])
