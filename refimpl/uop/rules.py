"""A small language for rewrite rules that can be matched, applied, evaluated and proven (spec/rewrites.md).

A rule is written as data: a left-hand term, a right-hand term, an optional guard and the dtypes it applies to:

    SymRule("RW.IDX.div-small", x // c, 0, where=(lo(x) >= 0) & (hi(x) < val(c)), dtypes=INTS)

The same object is used three ways, so what is proven is what runs:
- `to_rule()` compiles it into a PatternMatcher rule (the left term becomes a UPat, the right term is built with
  the match's bindings, constant subterms are folded through the executable semantics);
- `evaluate()` computes both sides on concrete values (the hypothesis soundness test);
- tests/z3_rules.py translates both sides and the guard into z3 and proves them equal (the integer proofs).

Terms: Var (any node), CVar (a CONST node), Lit (a literal of the rule's dtype), App (an ALU op). Every Var, CVar and
Lit has the rule's dtype T unless made with `bool_=True`; comparisons give bool. Guards are integer arithmetic on
unbounded integers over lo(x)/hi(x) (a node's bounds, RW.BOUNDS), val(c) (a constant's value) and DMIN/DMAX (T's
range)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from refimpl.dtype import DType, dtypes, ConstType
from refimpl.uop.opcodes import Ops, GroupOp
from refimpl.uop.ops import UOp, UPat, Rule
from refimpl.uop.semantics import exec_alu

# ---- dtype classes a rule may apply to ----
SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
INTS = SINTS + UINTS
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
BOOL = (dtypes.bool,)


# ------------------------------------------------------------------------------------------------------------
# Terms


class Term:
  """An expression over rule variables. Python operators build ALU terms (UOp-level meaning: `//` is CDIV)."""
  def _app(self, op: Ops, *args) -> App: return App(op, (self, *(_term(a) for a in args)))
  def __add__(self, x): return self._app(Ops.ADD, x)
  def __radd__(self, x): return _term(x)._app(Ops.ADD, self)
  def __sub__(self, x): return self._app(Ops.SUB, x)
  def __mul__(self, x): return self._app(Ops.MUL, x)
  def __rmul__(self, x): return _term(x)._app(Ops.MUL, self)
  def __truediv__(self, x): return self._app(Ops.FDIV, x)
  def __floordiv__(self, x): return self._app(Ops.CDIV, x)
  def __mod__(self, x): return self._app(Ops.CMOD, x)
  def __and__(self, x): return self._app(Ops.AND, x)
  def __or__(self, x): return self._app(Ops.OR, x)
  def __xor__(self, x): return self._app(Ops.XOR, x)
  def __lshift__(self, x): return self._app(Ops.SHL, x)
  def __rshift__(self, x): return self._app(Ops.SHR, x)
  def __neg__(self): return self._app(Ops.NEG)
  def __lt__(self, x): return self._app(Ops.CMPLT, x)
  def ne(self, x): return self._app(Ops.CMPNE, x)
  def eq(self, x): return self._app(Ops.CMPEQ, x)
  def maximum(self, x): return self._app(Ops.MAX, x)

  @property
  def is_bool(self) -> bool: return False


@dataclass(frozen=True, eq=False)
class Var(Term):
  """Any node of the rule's dtype (or bool). `ops`, when given, limits which ops it matches (pattern only)."""
  name: str
  bool_: bool = False
  ops: frozenset | None = None
  @property
  def is_bool(self) -> bool: return self.bool_


@dataclass(frozen=True, eq=False)
class CVar(Term):
  """A CONST node of the rule's dtype (or bool)."""
  name: str
  bool_: bool = False
  @property
  def is_bool(self) -> bool: return self.bool_


@dataclass(frozen=True, eq=False)
class Lit(Term):
  """A literal: value converted to the rule's dtype as CAST would (so -1 is all ones in an unsigned type)."""
  value: ConstType
  bool_: bool = False
  @property
  def is_bool(self) -> bool: return self.bool_ or isinstance(self.value, bool)


@dataclass(frozen=True, eq=False)
class App(Term):
  op: Ops
  args: tuple[Term, ...]
  @property
  def is_bool(self) -> bool:
    return self.op in GroupOp.Comparison or (self.op in (Ops.WHERE,) and self.args[1].is_bool) or \
      (self.op not in (Ops.WHERE,) and all(a.is_bool for a in self.args))


@dataclass(frozen=True, eq=False)
class LoOf(Term):
  """Right-hand side only: the constant lo(var), for rules that replace a node by its single possible value."""
  var: Var


def _term(x) -> Term: return x if isinstance(x, Term) else Lit(x)
def where(c: Term, a, b) -> App: return App(Ops.WHERE, (c, _term(a), _term(b)))


def leaves(t: Term) -> list[Term]:
  """Var and CVar leaves of a term, left to right, without repeats."""
  out: list[Term] = []
  def walk(u: Term):
    if isinstance(u, (Var, CVar)):
      if all(u is not o for o in out): out.append(u)
    elif isinstance(u, App):
      for a in u.args: walk(a)
  walk(t)
  return out


# ------------------------------------------------------------------------------------------------------------
# Guards: integer arithmetic over bounds and constant values


class G:
  """A guard expression on unbounded integers. `&`, `|`, `~` are logical and, or, not."""
  def _g(self, op: str, *args) -> GApp: return GApp(op, (self, *(a if isinstance(a, G) else GInt(a) for a in args)))
  def __add__(self, x): return self._g("+", x)
  def __radd__(self, x): return GInt(x)._g("+", self)
  def __sub__(self, x): return self._g("-", x)
  def __rsub__(self, x): return GInt(x)._g("-", self)
  def __mul__(self, x): return self._g("*", x)
  def __rmul__(self, x): return GInt(x)._g("*", self)
  def __mod__(self, x): return self._g("%", x)   # only with a divisor the guard has shown to be positive
  def __lt__(self, x): return self._g("<", x)
  def __le__(self, x): return self._g("<=", x)
  def __gt__(self, x): return self._g(">", x)
  def __ge__(self, x): return self._g(">=", x)
  def eq(self, x): return self._g("==", x)
  def ne(self, x): return self._g("!=", x)
  def __and__(self, x): return self._g("and", x)
  def __or__(self, x): return self._g("or", x)
  def __invert__(self): return self._g("not")

  def evaluate(self, env: dict[str, int], ops: dict[str, Callable] | None = None):
    """Value of the guard; `env` maps 'lo:x', 'hi:x', 'val:c', 'dmin', 'dmax' to numbers. `ops` replaces the
    Python meaning of the operators (the z3 prover passes its own)."""
    return _geval(self, env, ops or _PY_GUARD_OPS)


@dataclass(frozen=True, eq=False)
class GInt(G):
  value: int


@dataclass(frozen=True, eq=False)
class GRef(G):
  key: str   # 'lo:x', 'hi:x', 'val:c', 'dmin' or 'dmax'


@dataclass(frozen=True, eq=False)
class GApp(G):
  op: str
  args: tuple[G, ...]


def lo(x: Var) -> G: return GRef(f"lo:{x.name}")
def hi(x: Var) -> G: return GRef(f"hi:{x.name}")
def val(c: CVar) -> G: return GRef(f"val:{c.name}")
DMIN, DMAX = GRef("dmin"), GRef("dmax")

_PY_GUARD_OPS: dict[str, Callable] = {
  "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "%": lambda a, b: a % b,
  "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
  "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "and": lambda a, b: a and b, "or": lambda a, b: a or b,
  "not": lambda a: not a,
}


def _geval(g: G, env: dict, ops: dict):
  if isinstance(g, GInt): return g.value
  if isinstance(g, GRef): return env[g.key]
  if ops is _PY_GUARD_OPS and g.op in ("and", "or"):
    # short-circuit, so `val(c) > 0 and x % val(c) == 0` never divides by zero (z3 gets both sides: its % is total)
    first = _geval(g.args[0], env, ops)
    return first if (g.op == "and") != bool(first) else _geval(g.args[1], env, ops)
  return ops[g.op](*(_geval(a, env, ops) for a in g.args))


def guard_refs(g: G | None) -> set[str]:
  if g is None or isinstance(g, GInt): return set()
  if isinstance(g, GRef): return {g.key}
  return set().union(*(guard_refs(a) for a in g.args))


# ------------------------------------------------------------------------------------------------------------
# Rules


@dataclass(eq=False)
class SymRule:
  """lhs -> rhs for nodes of a dtype in `dtypes`, when `where` holds (RW.SYM, RW.IDX, RW.BOUNDS clauses)."""
  clause: str
  lhs: Term
  rhs: Any
  where: G | None = None
  dtypes: tuple[DType, ...] = INTS
  note: str = ""
  rhs_term: Term = field(init=False)

  def __post_init__(self):
    self.rhs_term = _term(self.rhs)
    names = {t.name for t in leaves(self.lhs)}
    for t in leaves(self.rhs_term) + ([self.rhs_term.var] if isinstance(self.rhs_term, LoOf) else []):
      if t.name not in names: raise ValueError(f"{self.clause}: right side uses {t.name!r}, which the left side lacks")
    for key in guard_refs(self.where):
      if key not in ("dmin", "dmax") and key.split(":")[1] not in names:
        raise ValueError(f"{self.clause}: guard uses {key!r}, which the left side lacks")

  # ---- the rule's dtype T from a match ----
  def typed_leaf(self) -> Term | None:
    """The first non-bool leaf of the left side: its dtype is the rule's dtype T."""
    return next((t for t in leaves(self.lhs) if not t.is_bool), None)

  def to_rule(self) -> Rule:
    pattern = _to_upat(self.lhs)
    key = self.typed_leaf()

    def apply(**b: UOp) -> UOp | None:
      T = b[key.name].dtype if key is not None else dtypes.bool
      if T.scalar() not in self.dtypes or T.count != 1: return None
      if self.where is not None and not self.where.evaluate(_guard_env(b, T)): return None
      return _build(self.rhs_term, b, T)
    return Rule(pattern, apply, self.clause)

  def evaluate(self, values: dict[str, ConstType], bounds: dict[str, tuple[int, int]], T: DType):
    """(guard holds, lhs value, rhs value) for concrete `values` of the leaves and `bounds` of the Vars."""
    env = {"dmin": dtypes.min(T), "dmax": dtypes.max(T)}
    for name, (a, b) in bounds.items(): env[f"lo:{name}"], env[f"hi:{name}"] = a, b
    for name, v in values.items(): env[f"val:{name}"] = v
    if self.where is not None and not self.where.evaluate(env): return False, None, None
    return True, _eval(self.lhs, values, env, T, exec_alu), _eval(self.rhs_term, values, env, T, exec_alu)


def _to_upat(t: Term) -> UPat:
  if isinstance(t, Var): return UPat(t.ops, name=t.name)
  if isinstance(t, CVar): return UPat.cvar(t.name)
  if isinstance(t, Lit): return UPat.const(None, t.value)
  if isinstance(t, App):
    srcs = [_to_upat(a) for a in t.args]
    return UPat(t.op, src=srcs if t.op in GroupOp.Commutative else tuple(srcs))
  raise ValueError(f"{type(t).__name__} cannot appear on a rule's left side")


def _guard_env(b: dict[str, UOp], T: DType) -> dict[str, int]:
  env: dict[str, Any] = {"dmin": dtypes.min(T), "dmax": dtypes.max(T)}
  for name, u in b.items():
    env[f"lo:{name}"], env[f"hi:{name}"] = u.vmin, u.vmax
    if u.op is Ops.CONST: env[f"val:{name}"] = u.arg
  return env


def _build(t: Term, b: dict[str, UOp], T: DType) -> UOp:
  """The right side as a UOp; an ALU op whose sources are all CONSTs is folded (RW.FOLD.const)."""
  if isinstance(t, (Var, CVar)): return b[t.name]
  if isinstance(t, Lit): return UOp.const(dtypes.bool if t.is_bool else T, t.value)
  if isinstance(t, LoOf): return UOp.const(T, b[t.var.name].vmin)
  srcs = tuple(_build(a, b, T) for a in t.args)
  node = srcs[0].alu(t.op, *srcs[1:]) if t.op is not Ops.WHERE else srcs[0].where(srcs[1], srcs[2])
  return fold_constants(node)


def fold_constants(node: UOp) -> UOp:
  """`node` itself, or the CONST it evaluates to when it is an ALU op on CONSTs (RW.FOLD.const)."""
  if node.op in GroupOp.Elementwise and node.src and all(s.op is Ops.CONST for s in node.src) and \
     node.dtype.count == 1:
    value = exec_alu(node.op, node.dtype, tuple(s.arg for s in node.src), node.src[-1].dtype)
    return UOp(Ops.CONST, node.dtype, arg=value)
  return node


def _eval(t: Term, values: dict, env: dict, T: DType, exec_alu) -> ConstType:
  if isinstance(t, (Var, CVar)): return values[t.name]
  if isinstance(t, Lit): return dtypes.as_const(t.value, dtypes.bool if t.is_bool else T)
  if isinstance(t, LoOf): return env[f"lo:{t.var.name}"]
  args = [_eval(a, values, env, T, exec_alu) for a in t.args]
  out = dtypes.bool if t.is_bool else T
  src = dtypes.bool if t.args[-1].is_bool else T
  return exec_alu(t.op, out, args, src)


_INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.CDIV: "//", Ops.CMOD: "%", Ops.AND: "&",
          Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}


def show(t: Term) -> str:
  """A term in infix notation, as spec/rewrites.md writes rules (`//` and `%` are C-style, OP.CDIV / OP.CMOD)."""
  if isinstance(t, (Var, CVar)): return t.name
  if isinstance(t, Lit): return repr(t.value)
  if isinstance(t, LoOf): return f"lo({t.var.name})"
  args = [show(a) for a in t.args]
  if t.op in _INFIX: return f"({args[0]} {_INFIX[t.op]} {args[1]})"
  if t.op is Ops.NEG: return f"-({args[0]})" if args[0].startswith("-") else f"-{args[0]}"
  if t.op is Ops.WHERE: return f"where({', '.join(args)})"
  return f"{t.op.name.lower()}({', '.join(args)})"


def show_guard(g: G) -> str:
  if isinstance(g, GInt): return str(g.value)
  if isinstance(g, GRef):
    if g.key in ("dmin", "dmax"): return g.key.upper()
    kind, name = g.key.split(":")
    return f"{kind}({name})"
  if g.op == "not": return f"not ({show_guard(g.args[0])})"
  if g.op in ("and", "or"):   # flatten chains: a and b and c
    parts = [show_guard(a) if not (isinstance(a, GApp) and a.op == g.op) else show_guard(a)[1:-1] for a in g.args]
    return "(" + f" {g.op} ".join(parts) + ")"
  return f"({show_guard(g.args[0])} {g.op} {show_guard(g.args[1])})"


def show_where(r: SymRule) -> str:
  """The guard as spec/rewrites.md writes it ('' when the rule has none)."""
  if r.where is None: return ""
  g = show_guard(r.where)
  return g[1:-1] if g.startswith("(") and g.endswith(")") and r.where.op in ("and", "or") else g


def show_rule(r: SymRule) -> str:
  """`lhs -> rhs`, outer parentheses dropped: the form the rule tables of spec/rewrites.md use."""
  def bare(s: str) -> str: return s[1:-1] if s.startswith("(") and s.endswith(")") else s
  return f"{bare(show(r.lhs))} -> {bare(show(r.rhs_term))}"


def dtype_class(dts: tuple) -> str:
  """A rule's dtypes in the words of spec/rewrites.md: ints, sints, uints, floats, bool, joined with '+'."""
  parts, rest = [], set(dts)
  for word, group in (("ints", INTS), ("sints", SINTS), ("uints", UINTS), ("floats", FLOATS), ("bool", BOOL)):
    if set(group) <= rest: parts.append(word); rest -= set(group)
  assert not rest, f"dtypes {rest} are not a union of the named classes"
  return "+".join(parts)
