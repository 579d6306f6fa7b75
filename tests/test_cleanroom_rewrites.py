"""A second reading of spec/rewrites.md and of spec/kernels.md's reduction order gives the same bits (issue 16, item 8).

Rewrites: every rule of the RW.SYM / RW.IDX / RW.BOUNDS.const tables is read from its row's text (`lhs -> rhs`, guard)
by a small evaluator written here from the prose of spec/ops.md and spec/rewrites.md (wrapping integers, C-style
`//` and `%` with `x // 0 = -1`, `x % 0 = x`, masked shift counts, IEEE floats through numpy, guards on unbounded
integers). It does not import refimpl.uop.rules, symbolic's rule list or exec_alu. For random variables, bounds and
constants, the rule's left side is built as a UOp graph over DEFINE_VARs, refimpl's `symbolic` rewrites it, and the
clean-room evaluator must give the same bits for the left side, for the rewritten graph, and, where the guard holds,
for the row's right side.

Reductions: EXEC.THREAD.reduce and EXEC.OPT.exact say a sum folds left to right in increasing index, one float32
rounding per step, whatever the optimiser does; a numpy float32 fold in that order must equal refimpl's realized sums
and matmuls bit for bit, on inputs where the order changes the result. The sums here have at most 2**16 terms per
output, so EXEC.REDUCE.blocked makes them one chain; tests/test_reduce_order.py checks the blocked order above.
"""
from __future__ import annotations

import ast
import math
import random
from pathlib import Path

import numpy as np
import pytest

from conformance.spec_tables import tables
from refimpl import Tensor, dtypes
from refimpl.uop import Ops, UOp
from refimpl.uop.ops import graph_rewrite
from refimpl.uop.symbolic import symbolic

SPEC = Path(__file__).resolve().parent.parent / "spec"
NPF = {dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}
INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint32, dtypes.int64, dtypes.uint64]
FLOATS = [dtypes.float16, dtypes.float32, dtypes.float64]


# ------------------------------------------------------------------------------------ the clean-room ALU reading

def _range(dt):
  bits = dt.itemsize * 8
  return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if not dtypes.is_unsigned(dt) else (0, (1 << bits) - 1)


def _wrap(v: int, dt) -> int:
  """DT.WRAP: the value congruent to v modulo 2^bits inside the dtype's range."""
  lo, hi = _range(dt)
  return (v - lo) % (hi - lo + 1) + lo


def _lit(v, dt):
  """A literal of the rule's dtype, converted as a CAST would (DT.CONST)."""
  if dt == dtypes.bool: return bool(v)
  if dtypes.is_float(dt): return NPF[dt](v)
  return _wrap(int(v), dt)


def _alu(op: str, dt, *a):
  """One op of spec/ops.md on values of `dt` (the operands' dtype)."""
  if dtypes.is_float(dt):
    t = NPF[dt]
    with np.errstate(all="ignore"):
      if op == "add": return t(a[0] + a[1])
      if op == "sub": return t(a[0] - a[1])
      if op == "mul": return t(a[0] * a[1])
      if op == "fdiv": return t(a[0] / a[1])
      if op == "neg": return t(-a[0])
      if op == "max": return t(np.nan) if np.isnan(a[0]) or np.isnan(a[1]) else \
        (a[1] if a[0] == a[1] and not np.signbit(a[1]) else a[0] if a[0] > a[1] or a[0] == a[1] else a[1])
      if op == "lt": return bool(a[0] < a[1])
      if op == "ne": return bool(a[0] != a[1])
      if op == "eq": return bool(a[0] == a[1])
    raise KeyError(op)
  if dt == dtypes.bool:
    x, y = (a + (None,))[:2]
    return {"and": lambda: x and y, "or": lambda: x or y, "xor": lambda: x != y, "max": lambda: x or y,
            "lt": lambda: (not x) and y, "ne": lambda: x != y, "eq": lambda: x == y, "add": lambda: x or y,
            "mul": lambda: x and y}[op]()
  bits = dt.itemsize * 8
  x = a[0]
  y = a[1] if len(a) > 1 else None
  if op == "cdiv":
    if y == 0: return _wrap(-1, dt)
    q = abs(x) // abs(y)
    return _wrap(q if (x < 0) == (y < 0) else -q, dt)
  if op == "cmod":
    if y == 0: return x
    q = abs(x) // abs(y)
    return _wrap(x - y * (q if (x < 0) == (y < 0) else -q), dt)
  if op in ("shl", "shr"):
    count = (y % (1 << bits)) & (bits - 1)
    return _wrap(x << count, dt) if op == "shl" else x >> count   # Python's >> is arithmetic on signed values
  if op in ("and", "or", "xor"):
    u, v = x % (1 << bits), y % (1 << bits)
    return _wrap({"and": u & v, "or": u | v, "xor": u ^ v}[op], dt)
  return {"add": lambda: _wrap(x + y, dt), "sub": lambda: _wrap(x - y, dt), "mul": lambda: _wrap(x * y, dt),
          "neg": lambda: _wrap(-x, dt), "max": lambda: max(x, y), "lt": lambda: x < y, "ne": lambda: x != y,
          "eq": lambda: x == y}[op]()


_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "cdiv", ast.Mod: "cmod", ast.Div: "fdiv",
        ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_CMP = {ast.Lt: "lt", ast.NotEq: "ne", ast.Eq: "eq"}
_UOP = {"add": Ops.ADD, "sub": Ops.SUB, "mul": Ops.MUL, "cdiv": Ops.CDIV, "cmod": Ops.CMOD, "fdiv": Ops.FDIV,
        "and": Ops.AND, "or": Ops.OR, "xor": Ops.XOR, "shl": Ops.SHL, "shr": Ops.SHR, "lt": Ops.CMPLT,
        "ne": Ops.CMPNE, "eq": Ops.CMPEQ, "max": Ops.MAX, "neg": Ops.NEG}


def _is_literal(n: ast.AST) -> bool:
  return isinstance(n, ast.Constant) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
                                         and isinstance(n.operand, ast.Constant))


def _literal(n: ast.AST):
  return n.value if isinstance(n, ast.Constant) else -n.operand.value


def _eval(n: ast.AST, env: dict, dt):
  """The value of a rule side (Python syntax) with named values env, every literal of dtype `dt`; a comparison's
  operands and WHERE's branches are of `dt`, `b` and a comparison are bool."""
  if _is_literal(n):   # a bool literal is a bool (a comparison's result); any other literal is of the rule's dtype
    v = _literal(n)
    return v if isinstance(v, bool) else _lit(v, dt)
  if isinstance(n, ast.Name): return env[n.id]
  if isinstance(n, ast.UnaryOp): return _alu("neg", dt, _eval(n.operand, env, dt))
  if isinstance(n, ast.BinOp): return _alu(_BIN[type(n.op)], dt, _eval(n.left, env, dt), _eval(n.right, env, dt))
  if isinstance(n, ast.Compare):
    return _alu(_CMP[type(n.ops[0])], dt, _eval(n.left, env, dt), _eval(n.comparators[0], env, dt))
  if isinstance(n, ast.Call) and n.func.id == "lo": return env["lo:" + n.args[0].id]   # RW.BOUNDS.const
  if isinstance(n, ast.Call) and n.func.id == "max": return _alu("max", dt, *(_eval(a, env, dt) for a in n.args))
  if isinstance(n, ast.Call) and n.func.id == "where":
    cond = _eval(n.args[0], env, dt)   # a bool literal, `b`, or a comparison (the RW.IDX.*-split rows)
    return _eval(n.args[1], env, dt) if cond else _eval(n.args[2], env, dt)
  raise ValueError(ast.dump(n))


def _guard(text: str, bounds: dict, consts: dict, dt) -> bool:
  """A guard on unbounded integers: lo(x), hi(x) the declared bounds, val(c) a constant, DMIN/DMAX the range."""
  if not text: return True
  lo_, hi_ = _range(dt) if dt != dtypes.bool else (0, 1)
  names = {"lo": lambda v: bounds[v][0], "hi": lambda v: bounds[v][1], "val": lambda v: consts[v],
           "DMIN": lo_, "DMAX": hi_}
  class Names(dict):   # a variable's name stands for itself, so that lo(x) is lo("x")
    def __missing__(self, key): return key
  return bool(eval(compile(text, "<guard>", "eval"), {"__builtins__": {}}, Names(names)))


# --------------------------------------------------------------------------------- graphs from the rule's text

def _build(n: ast.AST, leaves: dict, dt) -> UOp:
  if _is_literal(n):
    v = _literal(n)
    return UOp.const(dtypes.bool if isinstance(v, bool) else dt, v)
  if isinstance(n, ast.Name): return leaves[n.id]
  if isinstance(n, ast.UnaryOp): return UOp(Ops.NEG, dt, (_build(n.operand, leaves, dt),))
  if isinstance(n, ast.BinOp):
    return _build(n.left, leaves, dt).alu(_UOP[_BIN[type(n.op)]], _build(n.right, leaves, dt))
  if isinstance(n, ast.Compare):
    return _build(n.left, leaves, dt).alu(_UOP[_CMP[type(n.ops[0])]], _build(n.comparators[0], leaves, dt))
  if n.func.id == "max": return _build(n.args[0], leaves, dt).alu(Ops.MAX, _build(n.args[1], leaves, dt))
  c = n.args[0]
  cond = UOp.const(dtypes.bool, _literal(c)) if _is_literal(c) else leaves[c.id]
  return cond.where(_build(n.args[1], leaves, dt), _build(n.args[2], leaves, dt))


def _eval_uop(u: UOp, env: dict):
  """The clean-room value of a graph over DEFINE_VARs and CONSTs."""
  vals: dict = {}
  names = {v: k for k, v in _UOP.items()}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = _lit(n.arg, n.dtype)
    elif n.op is Ops.DEFINE_VAR: vals[n] = env[n.arg[0]]
    elif n.op is Ops.WHERE: vals[n] = vals[n.src[1]] if vals[n.src[0]] else vals[n.src[2]]
    else: vals[n] = _alu(names[n.op], n.src[0].dtype, *(vals[s] for s in n.src))
  return vals[u]


def _rows():
  for _, header, body in tables(SPEC / "rewrites.md"):
    if header != ("clause", "rule", "applies to", "guard"): continue
    for clause, rule, applies, guard in body:
      lhs, rhs = rule.strip("`").replace("\\|", "|").split(" -> ")
      yield clause.strip("`"), lhs, rhs, applies, guard.strip("`")


ROWS = list(_rows())


def _dtypes_of(applies: str):
  out = []
  for part in applies.split("+"):
    if part == "ints": out += INTS
    if part == "sints": out += [d for d in INTS if not dtypes.is_unsigned(d)]
    if part == "floats": out += FLOATS
    if part == "bool": out += [dtypes.bool]
  return out


def _value(rng: random.Random, dt, lo=None, hi=None):
  if dt == dtypes.bool: return rng.random() < 0.5
  if dtypes.is_float(dt):
    t = NPF[dt]
    fi = np.finfo(t)
    return t(rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, float(fi.max), -float(fi.max),
                         float(fi.smallest_subnormal), -1.0, 1.0, 2.0, rng.uniform(-100, 100), rng.uniform(-1, 1)]))
  return rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(lo, min(hi, lo + 8)), rng.randint(max(lo, hi - 8), hi)])


def test_the_tables_were_read():
  assert len(ROWS) >= 60 and {c for c, *_ in ROWS} >= {"RW.SYM.add-zero", "RW.IDX.div-mul", "RW.BOUNDS.const"}


@pytest.mark.parametrize("clause,lhs,rhs,applies,guard", ROWS, ids=[r[0] for r in ROWS])
def test_rule_reads_the_same_twice(clause, lhs, rhs, applies, guard):
  """For random bounds, constants and values: clean-room(lhs) == clean-room(symbolic(lhs)), and where the row's guard
  holds, == clean-room(rhs). Bits: floats compared by their encoding (any NaN matches any NaN)."""
  lt, rt = ast.parse(lhs, mode="eval").body, ast.parse(rhs, mode="eval").body
  names = sorted({n.id for n in ast.walk(lt) if isinstance(n, ast.Name) and n.id not in ("max", "where", "lo")})
  rng = random.Random(clause)
  fired = 0
  for dt in _dtypes_of(applies):
    for _ in range(40):
      bounds, consts, leaves, env = {}, {}, {}, {}
      for name in names:
        if name == "b":
          leaves[name] = UOp(Ops.DEFINE_VAR, dtypes.bool, arg=("b", False, True)); env[name] = rng.random() < 0.5
        elif name.startswith("c"):
          v = _value(rng, dt, *(_range(dt) if dt != dtypes.bool else (0, 1)))
          if dtypes.is_int(dt) and rng.random() < 0.5: v = rng.randint(max(_range(dt)[0], -4), min(_range(dt)[1], 16))
          consts[name], env[name] = (int(v) if dtypes.is_int(dt) else v), _lit(v, dt)
          leaves[name] = UOp.const(dt, v.item() if isinstance(v, np.generic) else v)
        elif dt == dtypes.bool:
          a = rng.random() < 0.5
          b = a or rng.random() < 0.5
          bounds[name] = (int(a), int(b))
          leaves[name] = UOp(Ops.DEFINE_VAR, dtypes.bool, arg=(name, a, b))
          env[name], env["lo:" + name] = (a if a == b else rng.random() < 0.5), a
        elif dtypes.is_int(dt):
          lo_, hi_ = _range(dt)
          a = rng.choice([lo_, 0, rng.randint(lo_, hi_), rng.randint(0, min(hi_, 64))])
          b = rng.choice([a, min(hi_, a + rng.randint(0, 64)), rng.randint(a, hi_)])
          bounds[name] = (a, b)
          leaves[name] = UOp.variable(name, a, b, dt)
          env[name], env["lo:" + name] = _value(rng, dt, a, b), a
        else:
          bounds[name] = (-math.inf, math.inf)
          leaves[name] = UOp(Ops.DEFINE_VAR, dt, arg=(name, -math.inf, math.inf)); env[name] = _value(rng, dt)
      graph = _build(lt, leaves, dt)
      out = graph_rewrite(graph, symbolic)
      want = _eval(lt, env, dt)
      assert _same(_eval_uop(graph, env), want), (clause, dt, env)
      got = _eval_uop(out, env)
      assert _same(got, want), f"{clause} {dt}: symbolic gives {got!r}, the clause's left side {want!r} at {env}"
      if _guard(guard, bounds, consts, dt):
        fired += 1
        assert _same(_eval(rt, env, dt), want), f"{clause} {dt}: the right side reads {_eval(rt, env, dt)!r}, " \
                                                f"the left {want!r} at {env}"
  assert fired, f"{clause}: no draw met the guard"


def _same(a, b) -> bool:
  if isinstance(a, np.generic) and isinstance(b, np.generic):
    if np.isnan(a) and np.isnan(b): return True
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()
  return type(a) is type(b) and a == b


# --------------------------------------------------------------------------------------- the reduction order

def _fold(v: np.ndarray) -> np.float32:
  """EXEC.THREAD.reduce: ((+0.0 + v0) + v1) + ..., each step rounded to float32."""
  acc = np.float32(0.0)
  for x in v.astype(np.float32): acc = np.float32(acc + x)
  return acc


def _cancelling(rng: np.random.Generator, n: int) -> np.ndarray:
  """Terms of very different size whose float32 sum depends on the order of adding them."""
  v = rng.standard_normal(n).astype(np.float32) * np.float32(10)
  big = rng.integers(0, n, max(2, n // 8))
  v[big] = rng.choice([np.float32(3e7), np.float32(-3e7), np.float32(1e8)], size=big.size)
  return v


@pytest.mark.parametrize("n", [7, 64, 333])
@pytest.mark.parametrize("noopt", [False, True])
def test_sum_folds_left_to_right(n, noopt, monkeypatch):
  """EXEC.THREAD.reduce, EXEC.OPT.exact: a float32 sum (and per-row sums of a 2-D tensor) equals the left-to-right
  float32 fold bit for bit, with and without the optimisation pass; pairwise summation gives other bits here."""
  if noopt: monkeypatch.setenv("NOOPT", "1")
  rng = np.random.default_rng(n)
  rows = np.stack([_cancelling(rng, n) for _ in range(5)])
  got = Tensor(rows).sum(1).numpy()
  want = np.array([_fold(r) for r in rows], np.float32)
  assert got.tobytes() == want.tobytes(), (got, want)
  pairwise = np.array([np.float32(np.sum(r, dtype=np.float32)) for r in rows])   # numpy sums pairwise
  reverse = np.array([_fold(r[::-1]) for r in rows], np.float32)
  assert not (pairwise.tobytes() == want.tobytes() and reverse.tobytes() == want.tobytes())
  gotc = Tensor(rows.T.copy()).sum(0).numpy()   # a reduction over the outer axis of a view: the same order
  assert gotc.tobytes() == want.tobytes()


def test_float16_sum_accumulates_in_float32_then_rounds():
  """DT.SUM with EXEC.THREAD.reduce: float16 terms fold in float32, left to right, rounded to float16 at the end."""
  rng = np.random.default_rng(1)
  v = (rng.standard_normal(200) * 30).astype(np.float16)
  v[::17] = np.float16(2000)
  got = Tensor(v, dtype=dtypes.float16).sum().numpy()
  assert got.tobytes() == np.float16(_fold(v.astype(np.float32))).tobytes()
  acc16 = np.float16(0)
  for x in v: acc16 = np.float16(acc16 + x)
  assert acc16.tobytes() != got.tobytes(), "the inputs do not tell a float16 accumulator apart"


@pytest.mark.parametrize("noopt", [False, True])
def test_matmul_folds_each_dot_left_to_right(noopt, monkeypatch):
  """EXEC.OPT.exact: every entry of a matmul is the float32 fold of its rounded products in increasing k (no FMA
  contraction, no split accumulators), whatever upcast/unroll the optimiser picks."""
  if noopt: monkeypatch.setenv("NOOPT", "1")
  rng = np.random.default_rng(7)
  a = _cancelling(rng, 6 * 40).reshape(6, 40)
  b = rng.standard_normal((40, 5)).astype(np.float32)
  got = (Tensor(a) @ Tensor(b)).numpy()
  want = np.array([[_fold(a[i] * b[:, j]) for j in range(5)] for i in range(6)], np.float32)
  assert got.tobytes() == want.tobytes()
  fused = np.array([[_fold_fma(a[i], b[:, j]) for j in range(5)] for i in range(6)], np.float32)
  assert fused.tobytes() != want.tobytes(), "the inputs do not tell a contracted (FMA) fold apart"


def _fold_fma(x: np.ndarray, y: np.ndarray) -> np.float32:
  """The fold a contracting compiler would compute: acc = fma(x_k, y_k, acc), one rounding per step."""
  acc = np.float32(0.0)
  for p, q in zip(x, y): acc = np.float32(float(p) * float(q) + float(acc))   # exact product: float64 holds it
  return acc
