"""UOp (immutable, hash-consed graph node), UPat (pattern), PatternMatcher and graph_rewrite (spec/uop.md,
spec/rewrites.md)."""
from __future__ import annotations

import functools
import inspect
import math
import struct
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from refimpl.dtype import DType, dtypes, ConstType
from refimpl.helpers import SpecError
from refimpl.uop import capture
from refimpl.uop.bounds import min_max
from refimpl.uop.opcodes import Ops, GroupOp
from refimpl.uop.shapes import shape_of

__all__ = ["UOp", "UPat", "PatternMatcher", "Rule", "graph_rewrite", "RewriteLoopError", "install_simplifier"]


def _arg_key(arg: Any) -> Any:
  """A hashable key for a UOp's arg that keeps apart what Python's == merges: -0.0 and 0.0, 1 and 1.0 and True,
  and that makes NaN equal to itself (UOP.HASHCONS)."""
  if isinstance(arg, float): return (float, struct.pack("<d", arg) if arg == arg else b"nan")
  if isinstance(arg, tuple): return (tuple, tuple(_arg_key(a) for a in arg))
  return (type(arg), arg)


def _same_arg(a: Any, b: Any) -> bool:
  """Pattern arg equality: numeric equality that tells -0.0 from 0.0 and matches NaN with NaN."""
  if isinstance(a, float) or isinstance(b, float):
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)): return False
    if a != a or b != b: return a != a and b != b
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
  return a == b


class _UOpMeta(type):
  """Hash-consing: UOp(op, dtype, src, arg) returns the live object with the same four fields if there is one.

  The look-up and the insertion are one step under `_lock` (UOP.HASHCONS.threads): without it two threads building the
  same node could both miss, both make one, and the second insertion would orphan the first thread's object, so two
  equal live UOps would exist (measured: tens of such pairs in 4 threads x 3000 builds). An RLock, because a garbage
  collection inside the step may run finalizers that build UOps on the same thread."""
  _cache: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
  _lock = threading.RLock()

  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None) -> UOp:
    src = tuple(src)
    key = (op, dtype, src, _arg_key(arg))
    with cls._lock:
      try: hit = cls._cache.get(key)
      except TypeError: raise SpecError("UOP.ARG", f"arg of {op} must be hashable, got {type(arg).__name__}") from None
      if hit is not None: return hit
      if not isinstance(op, Ops): raise SpecError("UOP.OPS", f"op must be a member of Ops, got {op!r}")
      if not isinstance(dtype, DType): raise SpecError("UOP.DTYPE", f"dtype of {op} must be a DType, got {dtype!r}")
      for s in src:
        if not isinstance(s, UOp): raise SpecError("UOP.SRC", f"sources of {op} must be UOps, got {type(s).__name__}")
      uop = super().__call__(op, dtype, src, arg)
      cls._cache[key] = uop
      return uop


class UOp(metaclass=_UOpMeta):
  """One node of the IR: an operation, its result dtype, its source nodes and a static argument.

  UOps are immutable and hash-consed (UOP.HASHCONS): two UOps built from the same op, dtype, sources and arg are
  the same Python object, so `is` is structural equality and a graph never holds two copies of one expression.
  Python operators build ALU nodes; a Python number on either side becomes a CONST of the other side's dtype."""
  __slots__ = ("op", "dtype", "src", "arg", "__weakref__", "__dict__")
  op: Ops
  dtype: DType
  src: tuple[UOp, ...]
  arg: Any

  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None):
    for k, v in (("op", op), ("dtype", dtype), ("src", src), ("arg", arg)): object.__setattr__(self, k, v)

  def __setattr__(self, name, value): raise AttributeError(f"UOp is immutable (UOP.HASHCONS): cannot set {name}")
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg)

  def replace(self, **kwargs) -> UOp:
    """The UOp with some of op, dtype, src, arg replaced."""
    fields = {"op": self.op, "dtype": self.dtype, "src": self.src, "arg": self.arg, **kwargs}
    return UOp(fields["op"], fields["dtype"], fields["src"], fields["arg"])

  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    """This graph with every node that is a key of `mapping` replaced by its value, in one pass: a value is not
    looked up again, so a mapping may swap or shift nodes (renumbering slots 2 -> 1, 3 -> 2 keeps them apart, where
    a rewrite to a fixed point would chain 3 -> 2 -> 1)."""
    memo: dict[UOp, UOp] = {}
    for u in self.toposort():
      if u in mapping: memo[u] = mapping[u]
      else:
        src = tuple(memo[s] for s in u.src)
        memo[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
    return memo[self]

  # ---- graph walks ----
  def toposort(self) -> list[UOp]:
    """Every node reachable from this one, each source before its users (iterative: deep graphs are fine)."""
    order: list[UOp] = []
    seen: set[int] = set()
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      node, expanded = stack.pop()
      if expanded: order.append(node); continue
      if id(node) in seen: continue
      seen.add(id(node))
      stack.append((node, True))
      stack.extend((s, False) for s in reversed(node.src) if id(s) not in seen)
    return order

  # ---- construction helpers ----
  @staticmethod
  def const(dtype: DType, value: ConstType = None, device: str | None = None) -> UOp:
    """A CONST of `dtype` holding `value` converted exactly as CAST would (DT.CONST); with `device`, the
    tensor-level form whose source is that DEVICE (UOP.CONST). tinygrad's order `UOp.const(value, dtype=None)` is
    accepted too (API.UOP.const): a first argument that is not a DType is the value, of dtypes.from_py's dtype."""
    if not isinstance(dtype, DType):
      dtype, value = (value if value is not None else dtypes.from_py(dtype)), dtype
    src = (UOp(Ops.DEVICE, arg=device),) if device is not None else ()
    return UOp(Ops.CONST, dtype, src, dtypes.as_const(value, dtype))

  def const_like(self, value: ConstType) -> UOp:
    """A CONST with this node's dtype."""
    return UOp.const(self.dtype, value)

  @staticmethod
  def variable(name: str, vmin: int, vmax: int, dtype: DType = dtypes.int32) -> UOp:
    """A symbolic integer variable known to lie in [vmin, vmax] (UOP.DEFINE_VAR)."""
    return UOp(Ops.DEFINE_VAR, dtype, arg=(name, vmin, vmax))

  def bind(self, value: int) -> UOp:
    """This DEFINE_VAR with `value` for one run (UOP.BIND); the value must lie in [min, max] (API.VARIABLE.bind)."""
    if self.op is not Ops.DEFINE_VAR:
      raise SpecError("API.VARIABLE.bind", f"only a variable can be bound, not {self.op}")
    name, lo, hi = self.arg
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
      raise SpecError("API.VARIABLE.bind", f"{name}: {value!r} is not an int in [{lo}, {hi}]")
    return UOp(Ops.BIND, self.dtype, (self, self.const_like(value)))

  def unbind(self) -> tuple[UOp, int]:
    """(the variable, its value) of a BIND (API.VARIABLE.bind)."""
    if self.op is not Ops.BIND: raise SpecError("API.VARIABLE.bind", f"only a BIND can be unbound, not {self.op}")
    return self.src[0], self.src[1].arg

  def __int__(self) -> int:
    """The value of an integer expression of CONSTs and bound variables (API.VARIABLE.value), so that a bound
    variable can stand for a size or an int wherever Python takes one; TypeError for an unbound variable."""
    from refimpl.uop.semantics import exec_alu
    if not (dtypes.is_int(self.dtype) or dtypes.is_bool(self.dtype)) or self.dtype.count != 1:
      raise TypeError(f"API.VARIABLE.value: a {self.dtype!r} expression is not an int")
    def value(u: UOp):
      if u.op is Ops.CONST: return u.arg
      if u.op is Ops.BIND: return u.src[1].arg
      if u.op in GroupOp.ALU or u.op is Ops.CAST:
        return exec_alu(u.op, u.dtype, [value(s) for s in u.src], u.src[-1].dtype)
      raise TypeError(f"API.VARIABLE.value: {u.op} {u.arg!r} has no value (an unbound variable or not arithmetic)")
    try: return int(value(self))
    except SpecError as e: raise TypeError(f"API.VARIABLE.value: {e} (pass int(v) where the int is computed)") from None

  __index__ = __int__

  def sink(self, *srcs: UOp) -> UOp: return UOp(Ops.SINK, dtypes.void, (self, *srcs))

  def alu(self, op: Ops, *src: UOp) -> UOp:
    """The ALU node `op(self, *src)`; comparisons give bool (of the same vector width), other ops self's dtype."""
    dtype = dtypes.bool.vec(self.dtype.count) if op in GroupOp.Comparison else self.dtype
    return UOp(op, dtype, (self, *src))

  def _operand(self, x) -> UOp: return x if isinstance(x, UOp) else self.const_like(x)
  def _binary(self, op: Ops, x, reverse: bool = False) -> UOp:
    x = self._operand(x)
    return x.alu(op, self) if reverse else self.alu(op, x)

  def __add__(self, x): return self._binary(Ops.ADD, x)
  def __radd__(self, x): return self._binary(Ops.ADD, x, True)
  def __sub__(self, x): return self._binary(Ops.SUB, x)
  def __rsub__(self, x): return self._binary(Ops.SUB, x, True)
  def __mul__(self, x): return self._binary(Ops.MUL, x)
  def __rmul__(self, x): return self._binary(Ops.MUL, x, True)
  def __truediv__(self, x): return self._binary(Ops.FDIV, x)
  def __rtruediv__(self, x): return self._binary(Ops.FDIV, x, True)
  # `//` and `%` are C-style (truncating) at UOp level: OP.CDIV / OP.CMOD. Tensor's `//` floors.
  def __floordiv__(self, x): return self._binary(Ops.CDIV, x)
  def __rfloordiv__(self, x): return self._binary(Ops.CDIV, x, True)
  def __mod__(self, x): return self._binary(Ops.CMOD, x)
  def __rmod__(self, x): return self._binary(Ops.CMOD, x, True)
  def __and__(self, x): return self._binary(Ops.AND, x)
  def __rand__(self, x): return self._binary(Ops.AND, x, True)
  def __or__(self, x): return self._binary(Ops.OR, x)
  def __ror__(self, x): return self._binary(Ops.OR, x, True)
  def __xor__(self, x): return self._binary(Ops.XOR, x)
  def __rxor__(self, x): return self._binary(Ops.XOR, x, True)
  def __lshift__(self, x): return self._binary(Ops.SHL, x)
  def __rshift__(self, x): return self._binary(Ops.SHR, x)
  def __pow__(self, x): return self._binary(Ops.POW, x)
  def __neg__(self): return self.alu(Ops.NEG)
  def __lt__(self, x): return self._binary(Ops.CMPLT, x)
  def __gt__(self, x): return self._binary(Ops.CMPLT, x, True)
  # `>=` is not `not <` on floats (NaN): a >= b is (b < a) | (a == b), false when either side is NaN.
  def __ge__(self, x): return (self > x) | self.eq(x)
  def __le__(self, x): return (self < x) | self.eq(x)
  def ne(self, x) -> UOp: return self._binary(Ops.CMPNE, x)
  def eq(self, x) -> UOp: return self._binary(Ops.CMPEQ, x)
  def maximum(self, x) -> UOp: return self._binary(Ops.MAX, x)
  def minimum(self, x) -> UOp:
    """min(a, b): -max(-a, -b) on floats (NaN propagates, min(-0, +0) = -0); a select on integers, where NEG
    wraps at INT_MIN."""
    x = self._operand(x)
    return -((-self).maximum(-x)) if dtypes.is_float(self.dtype) else (self < x).where(self, x)
  def where(self, a, b) -> UOp:
    """`a` where this bool node is true, else `b` (OP.WHERE); a Python number takes the other branch's dtype."""
    if not isinstance(a, UOp) and not isinstance(b, UOp): raise SpecError("OP.WHERE", "one branch must be a UOp")
    a = a if isinstance(a, UOp) else b.const_like(a)
    b = b if isinstance(b, UOp) else a.const_like(b)
    return UOp(Ops.WHERE, a.dtype, (self, a, b))
  def mulacc(self, b, c) -> UOp: return UOp(Ops.MULACC, self.dtype, (self, self._operand(b), self._operand(c)))
  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return UOp(Ops.BITCAST, dtype, (self,))
  def exp2(self) -> UOp: return self.alu(Ops.EXP2)
  def log2(self) -> UOp: return self.alu(Ops.LOG2)
  def sin(self) -> UOp: return self.alu(Ops.SIN)
  def sqrt(self) -> UOp: return self.alu(Ops.SQRT)
  def reciprocal(self) -> UOp: return self.alu(Ops.RECIPROCAL)
  def trunc(self) -> UOp: return self.alu(Ops.TRUNC)
  def logical_not(self) -> UOp: return self.ne(True)

  # ---- symbolic bounds ----
  @property
  def vmin(self) -> ConstType: return self._min_max[0]
  @property
  def vmax(self) -> ConstType: return self._min_max[1]

  @functools.cached_property
  def _min_max(self) -> tuple[ConstType, ConstType]:
    """Bounds [vmin, vmax] on every value this node can take (RW.BOUNDS). Sound by construction: an interval
    that would leave the dtype's range (where arithmetic wraps) widens to the whole range."""
    return min_max(self)

  @functools.cached_property
  def shape(self) -> tuple[int, ...]:
    """The shape of a tensor-level node (refimpl/uop/shapes.py)."""
    return shape_of(self)

  def simplify(self) -> UOp:
    """This graph rewritten to a fixpoint by the symbolic rules of spec/rewrites.md."""
    if _simplifier is None: raise RuntimeError("no symbolic rules installed: import refimpl.uop, which installs them")
    return graph_rewrite(self, _simplifier)

  # ---- printing ----
  def __repr__(self) -> str: return _pretty(self)


# The rules UOp.simplify applies. They are made of UOps and UPats, so they live above this module (symbolic.py); the
# package refimpl.uop installs them once both are built, and importing any module of refimpl.uop runs that first.
_simplifier: PatternMatcher | None = None


def install_simplifier(pm: PatternMatcher) -> None:
  """Make `pm` the rules of UOp.simplify (called once, by refimpl/uop/__init__.py)."""
  global _simplifier
  _simplifier = pm


def _pretty(root: UOp) -> str:
  """The printed form: nested UOp(...) calls; a node used more than once is named `xN:=` where it first appears
  and referred to by name afterwards."""
  uses: dict[UOp, int] = {}
  for u in root.toposort():
    for s in u.src: uses[s] = uses.get(s, 0) + 1
  names: dict[UOp, str] = {}

  def fmt(u: UOp, depth: int) -> str:
    pad = "  " * depth
    if u in names: return f"{pad} {names[u]}"
    prefix = ""
    if uses.get(u, 0) > 1:
      names[u] = f"x{len(names)}"
      prefix = f"{names[u]}:="
    head = f"{pad}{prefix}UOp({u.op!r}, {u.dtype!r}, arg={u.arg!r}, src=("
    if not u.src: return head + "))"
    return head + "\n" + ",\n".join(fmt(s, depth + 1) for s in u.src) + ",))"
  return fmt(root, 0)


# ------------------------------------------------------------------------------------------------------------
# Patterns


class UPat:
  """A pattern over UOps (RW.MATCH). Every field left as None matches anything.
  - op: an Ops or a collection of Ops; dtype: a DType or a collection (a vector matches its scalar type too)
  - src: a tuple (sources in order), a list (sources in any order: commutative matching), or one UPat (every
    source matches it); allow_any_len=True lets a tuple match a prefix of the sources
  - arg: matched exactly (-0.0 differs from 0.0, NaN matches NaN); name: bind the matched UOp under this name.
    A name used twice must bind the same UOp both times."""
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "_src_kind")

  def __init__(self, op=None, dtype=None, src=None, arg=None, name: str | None = None, allow_any_len: bool = False):
    self.op = None if op is None else frozenset((op,) if isinstance(op, Ops) else op)
    self.dtype = None if dtype is None else frozenset((dtype,) if isinstance(dtype, DType) else dtype)
    self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
    if src is None: self._src_kind, self.src = "any", None
    elif isinstance(src, UPat): self._src_kind, self.src = "all", src
    elif isinstance(src, list): self._src_kind, self.src = "perm", tuple(src)
    elif isinstance(src, tuple): self._src_kind, self.src = "seq", src
    else: raise TypeError(f"RW.MATCH: UPat src must be None, a UPat, a tuple or a list, got {type(src).__name__}")

  @staticmethod
  def var(name: str | None = None, dtype=None) -> UPat:
    """Any UOp, bound to `name`."""
    return UPat(dtype=dtype, name=name)

  @staticmethod
  def cvar(name: str | None = None, dtype=None) -> UPat:
    """Any CONST, bound to `name`."""
    return UPat(Ops.CONST, dtype, name=name)

  @staticmethod
  def const(dtype, value: ConstType) -> UPat:
    """A CONST holding exactly `value` (of `dtype`, or of any dtype when None)."""
    return UPat(Ops.CONST, dtype, arg=value)

  @staticmethod
  def any(*pats: UPat) -> UPat:
    """Matches when any of `pats` matches."""
    return _AnyPat(pats)

  def named(self, name: str) -> UPat:
    p = UPat(self.op, self.dtype, None, self.arg, name, self.allow_any_len)
    p._src_kind, p.src = self._src_kind, self.src
    return p

  # ---- sugar: build ALU patterns with Python operators; commutative ops match their sources in any order ----
  def alu(self, op: Ops, *src) -> UPat:
    srcs = [self, *(s if isinstance(s, UPat) else UPat.const(None, s) for s in src)]
    return UPat(op, src=srcs if op in GroupOp.Commutative else tuple(srcs))

  def __add__(self, x): return self.alu(Ops.ADD, x)
  def __radd__(self, x): return self.alu(Ops.ADD, x)
  def __sub__(self, x): return self.alu(Ops.SUB, x)
  def __mul__(self, x): return self.alu(Ops.MUL, x)
  def __rmul__(self, x): return self.alu(Ops.MUL, x)
  def __truediv__(self, x): return self.alu(Ops.FDIV, x)
  def __floordiv__(self, x): return self.alu(Ops.CDIV, x)
  def __mod__(self, x): return self.alu(Ops.CMOD, x)
  def __and__(self, x): return self.alu(Ops.AND, x)
  def __or__(self, x): return self.alu(Ops.OR, x)
  def __xor__(self, x): return self.alu(Ops.XOR, x)
  def __lshift__(self, x): return self.alu(Ops.SHL, x)
  def __rshift__(self, x): return self.alu(Ops.SHR, x)
  def __lt__(self, x): return self.alu(Ops.CMPLT, x)
  def __neg__(self): return self.alu(Ops.NEG)
  def ne(self, x): return self.alu(Ops.CMPNE, x)
  def eq(self, x): return self.alu(Ops.CMPEQ, x)
  def maximum(self, x): return self.alu(Ops.MAX, x)
  def where(self, a, b): return self.alu(Ops.WHERE, a, b)
  def cast(self, dtype=None): return UPat(Ops.CAST, dtype, (self,))

  # ---- matching ----
  def match(self, uop: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    """Every binding of names that makes this pattern match `uop`, extending `store` (empty list: no match)."""
    if self.op is not None and uop.op not in self.op: return []
    if self.dtype is not None and uop.dtype not in self.dtype and uop.dtype.scalar() not in self.dtype: return []
    if self.arg is not None and not _same_arg(uop.arg, self.arg): return []
    if self.name is not None:
      bound = store.get(self.name)
      if bound is not None and bound is not uop: return []
      store = {**store, self.name: uop}
    if self._src_kind == "any": return [store]
    out: list[dict[str, UOp]] = []
    for option in self._src_options(len(uop.src)):
      stores = [store]
      for pat, s in zip(option, uop.src):
        stores = [st for before in stores for st in pat.match(s, before)]
        if not stores: break
      out.extend(stores)
    return out

  def _src_options(self, n: int) -> Iterator[tuple[UPat, ...]]:
    if self._src_kind == "all":
      yield (self.src,) * n
      return
    if len(self.src) != n and not (self.allow_any_len and n >= len(self.src)): return
    if self._src_kind == "seq": yield self.src
    else:
      seen: set[tuple[int, ...]] = set()
      for perm in _permutations(len(self.src)):
        key = tuple(id(self.src[i]) for i in perm)
        if key not in seen:
          seen.add(key)
          yield tuple(self.src[i] for i in perm)

  def __repr__(self) -> str:
    ops = "None" if self.op is None else "|".join(sorted(o.name for o in self.op))
    parts = [ops] + ([f"name={self.name!r}"] if self.name else []) + ([f"arg={self.arg!r}"] if self.arg is not None
                                                                          else [])
    if self.src is not None: parts.append(f"src={self.src!r}")
    return f"UPat({', '.join(parts)})"


class _AnyPat(UPat):
  """Alternatives: the union of the matches of each pattern."""
  __slots__ = ("alternatives",)

  def __init__(self, alternatives: tuple[UPat, ...]):
    super().__init__()
    self.alternatives = alternatives
    ops = [p.op for p in alternatives]
    self.op = None if any(o is None for o in ops) else frozenset().union(*ops)

  def match(self, uop: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    return [st for p in self.alternatives for st in p.match(uop, store)]

  def __repr__(self) -> str: return f"UPat.any{self.alternatives!r}"


@functools.cache
def _permutations(n: int) -> tuple[tuple[int, ...], ...]:
  import itertools
  return tuple(itertools.permutations(range(n)))


# ------------------------------------------------------------------------------------------------------------
# Rules and rewriting


@dataclass(frozen=True)
class Rule:
  """One rewrite rule: when `pattern` matches, `fn(**bindings)` (plus ctx= if it takes ctx) gives the
  replacement or None. `clause` is the spec clause the rule implements (None for user rules)."""
  pattern: UPat
  fn: Callable[..., UOp | None]
  clause: str | None = None

  @functools.cached_property
  def wants_ctx(self) -> bool: return "ctx" in inspect.signature(self.fn).parameters

  @property
  def label(self) -> str:
    if self.clause: return self.clause
    code = getattr(self.fn, "__code__", None)
    return f"rule at {code.co_filename}:{code.co_firstlineno}" if code else repr(self.fn)


class PatternMatcher:
  """An ordered list of rules. `rewrite(uop)` returns the result of the first rule that matches and gives a new
  UOp, else None. Rules are given as (UPat, fn) or (UPat, fn, clause_id) tuples, or as Rule objects."""

  def __init__(self, rules: list):
    self.rules: list[Rule] = [r if isinstance(r, Rule) else Rule(*r) for r in rules]
    for r in self.rules:
      if not isinstance(r.pattern, UPat): raise TypeError(f"RW.MATCH: a rule's pattern must be a UPat, got {r!r}")
    self._by_op: dict[Ops, list[Rule]] = {op: [r for r in self.rules if r.pattern.op is None or op in r.pattern.op]
                                          for op in Ops}

  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)

  def rewrite(self, uop: UOp, ctx: Any = None) -> UOp | None:
    hit = self.rewrite_with_rule(uop, ctx)
    return None if hit is None else hit[0]

  def results(self, uop: UOp, ctx: Any = None) -> Iterator[tuple[Any, Rule]]:
    """(result, rule) for every match of a rule on `uop` whose function gives something other than None, in rule
    order. Rewriting wants UOps; other users (the gradient rules) give other results through the same matching."""
    for rule in self._by_op[uop.op]:
      for bindings in rule.pattern.match(uop, {}):
        out = rule.fn(ctx=ctx, **bindings) if rule.wants_ctx else rule.fn(**bindings)
        if out is not None: yield out, rule

  def rewrite_with_rule(self, uop: UOp, ctx: Any = None) -> tuple[UOp, Rule] | None:
    """(replacement, rule that made it), or None when no rule changes `uop`."""
    for out, rule in self.results(uop, ctx):
      if out is uop: continue
      if not isinstance(out, UOp):
        raise TypeError(f"RW.ENGINE: {rule.label} returned {type(out).__name__}, not a UOp")
      return out, rule
    return None


class RewriteLoopError(SpecError):
  """graph_rewrite found rules that rewrite a node back into itself, or grow it without end (RW.ENGINE.loop)."""


def _short(u: UOp) -> str:
  return f"{u.op.name}({', '.join(s.op.name for s in u.src)})" + (f" arg={u.arg!r}" if u.arg is not None else "")


def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, top_down: bool = False, name: str | None = None,
                  max_rewrites: int | None = None) -> UOp:
  """Rewrite the graph under `sink` with `pm` until no rule matches anywhere (RW.ENGINE.fixpoint).

  By default each node is rewritten after its sources (leaves first, so rules see simplified operands);
  top_down=True tries the rules on a node before its sources, and again after them. A node that a rule rewrites
  is itself rewritten again until no rule applies. A rule chain that leads back to a node still being rewritten
  raises RewriteLoopError naming the rules on the cycle (RW.ENGINE.loop); so does a run of more than
  `max_rewrites` rule applications (default: 1000 + 100 per node of the input graph)."""
  if not isinstance(sink, UOp): raise TypeError(f"graph_rewrite takes a UOp, got {type(sink).__name__}")
  if capture.recorder is None: return _rewrite(sink, pm.rewrite_with_rule, ctx, top_down, name, max_rewrites)
  # DEV.VIZ.capture: only with a recorder installed is each rule application recorded (DEV.VIZ.off: one check)
  record = capture.recorder.begin(sink, name, top_down)
  if record is None: return _rewrite(sink, pm.rewrite_with_rule, ctx, top_down, name, max_rewrites)
  try: out = _rewrite(sink, record.wrap(pm.rewrite_with_rule), ctx, top_down, name, max_rewrites)
  except Exception as e:
    record.finish(None, e)
    raise
  record.finish(out)
  return out


def _rewrite(sink: UOp, rewrite: Callable[[UOp, Any], tuple[UOp, Rule] | None], ctx: Any, top_down: bool,
             name: str | None, max_rewrites: int | None) -> UOp:
  """graph_rewrite's engine; `rewrite(node, ctx)` is the PatternMatcher's rewrite_with_rule (or it, recorded)."""
  budget = max_rewrites if max_rewrites is not None else 1000 + 100 * len(sink.toposort())
  done: dict[UOp, UOp] = {}         # node -> its final rewritten form
  active: dict[UOp, Rule | None] = {}  # nodes whose rewrite is under way -> rule that rewrote them (if any)
  fired = 0

  def fire(node: UOp) -> tuple[UOp, Rule] | None:
    nonlocal fired
    hit = rewrite(node, ctx)
    if hit is None: return None
    new, rule = hit
    active[node] = rule
    fired += 1
    if new in active:
      cycle = list(active)[list(active).index(new):]
      steps = "; ".join(f"{active[c].label if active[c] else 'rebuild'} on {_short(c)}" for c in cycle)
      raise RewriteLoopError("RW.ENGINE.loop", f"rewrite loop{f' in {name}' if name else ''}: {steps} leads back "
                             f"to {_short(new)}, which is still being rewritten")
    if fired > budget:
      counts: dict[str, int] = {}
      for r in active.values():
        if r is not None: counts[r.label] = counts.get(r.label, 0) + 1
      raise RewriteLoopError("RW.ENGINE.loop", f"more than {budget} rewrites{f' in {name}' if name else ''}; rules "
                             f"on the current chain: {sorted(counts.items(), key=lambda kv: -kv[1])[:5]}")
    return hit

  stack: list[tuple[UOp, int, UOp | None]] = [(sink, 0, None)]
  while stack:
    node, stage, other = stack.pop()
    if stage == 0:                      # first visit
      if node in done: continue
      if node in active:
        raise RewriteLoopError("RW.ENGINE.loop", f"a rule result contains {_short(node)}, which is still being "
                               f"rewritten (rules: {[r.label for r in active.values() if r]})")
      active[node] = None
      if top_down and (hit := fire(node)) is not None:
        stack += [(node, 2, hit[0]), (hit[0], 0, None)]
        continue
      stack.append((node, 1, None))
      stack.extend((s, 0, None) for s in reversed(node.src) if s not in done)
    elif stage == 1:                    # sources are final: rebuild, then rewrite this node
      new_src = tuple(done[s] for s in node.src)
      if any(a is not b for a, b in zip(new_src, node.src)):
        rebuilt = node.replace(src=new_src)
        stack += [(node, 2, rebuilt), (rebuilt, 0, None)]
      elif (hit := fire(node)) is not None:
        stack += [(node, 2, hit[0]), (hit[0], 0, None)]
      else:
        done[node] = node
        del active[node]
    else:                               # stage 2: `node` became `other`, which is now final
      done[node] = done[other]
      del active[node]
  return done[sink]
