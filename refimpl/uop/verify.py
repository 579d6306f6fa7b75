"""The spec verifier: checks that every node of a UOp graph is well typed (spec/uop.md).

The UOp constructor checks only what every node needs (UOP.OPS, UOP.DTYPE, UOP.SRC, UOP.ARG); whether an ADD of an int
and a float, or a LOAD through a non-pointer, makes sense is this module's job. `verify(root)` raises a SpecError
naming the clause the first ill-typed node breaks; `verify_ok(root)` collects one error per ill-typed node.

Each op family has one small check function that raises through `_fail`; `CHECKS` maps every Ops member to its
checker, so the typing rules read as a table next to the spec's `UOP.<NAME>` clauses.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, NoReturn

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.helpers import SpecError
from refimpl.uop.opcodes import GroupOp, Ops
from refimpl.uop.ops import UOp
from refimpl.uop.semantics import ALU_DTYPES, alu_result_dtype

__all__ = ["verify", "verify_ok", "CHECKS"]

Checker = Callable[[UOp], None]
_PRINT_LIMIT = 800   # characters of the printed offending UOp kept in a message: enough to see its sources
_VALUE_SCALARS = frozenset(dtypes.all())
_REDUCE_OPS = (Ops.ADD, Ops.MUL, Ops.MAX)


def verify(root: UOp) -> None:
  """Check every node reachable from `root` against its typing clause (UOP.VERIFY). Sources are checked before
  their users, so the error names the deepest ill-typed node rather than a user that only inherits its problem."""
  for u in _nodes(root): CHECKS[u.op](u)


def verify_ok(root: UOp) -> list[SpecError]:
  """Every violation in the graph under `root`, one per ill-typed node, in the order verify meets them
  (UOP.VERIFY). An empty list means the graph is well typed."""
  errors: list[SpecError] = []
  bad: set[int] = set()
  for u in _nodes(root):
    try: CHECKS[u.op](u)
    except SpecError as e:
      errors.append(e); bad.add(id(u))
    except (TypeError, ValueError, IndexError, AttributeError):
      # a checker may trip over a malformed source (a BIND of a DEFINE_VAR whose arg is not a triple); that
      # source's own error already explains it, so only a crash with well-typed sources is a bug to surface
      if not any(id(s) in bad for s in u.src): raise
      bad.add(id(u))
  return errors


def _nodes(root: UOp) -> list[UOp]:
  if not isinstance(root, UOp): raise TypeError(f"verify takes a UOp, got {type(root).__name__}")
  return root.toposort()


# ------------------------------------------------------------------------------------------------------------
# Reporting and small predicates


def _printed(u: UOp) -> str:
  """The printed form of `u` (UOP.PRINT), cut to _PRINT_LIMIT characters; a graph too deep for the recursive
  printer falls back to the node alone."""
  try: text = repr(u)
  except RecursionError: text = f"UOp({u.op!r}, {u.dtype!r}, arg={u.arg!r}, src=<{len(u.src)} sources>)"
  return text if len(text) <= _PRINT_LIMIT else text[:_PRINT_LIMIT] + " ..."


def _fail(u: UOp, clause: str | None, got: str, want: str) -> NoReturn:
  """Raise the SpecError for node `u`: what it has, what its clause wants, and the node itself."""
  raise SpecError(clause or f"UOP.{u.op.name}", f"{u.op.name} {got}; expected {want}\n{_printed(u)}")


def _is_value(dt: DType) -> bool:
  """A dtype that holds values: a scalar of dtypes.all() or a vector of one (not void, not a pointer)."""
  return not isinstance(dt, PtrDType) and dt.scalar() in _VALUE_SCALARS


def _is_scalar(dt: DType) -> bool: return _is_value(dt) and dt.count == 1
def _is_int_scalar(dt: DType) -> bool: return _is_scalar(dt) and dtypes.is_int(dt)
def _is_int(x: Any) -> bool: return type(x) is int   # bool is not an int here: True is not a size or an axis
def _ints(x: Any) -> bool: return isinstance(x, tuple) and all(_is_int(v) and v >= 0 for v in x)
def _pairs(x: Any) -> bool: return isinstance(x, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in x)


def _plural(n: int, word: str) -> str: return f"{n} {word}{'s' * (n != 1)}"
def _sources(u: UOp) -> str: return _plural(len(u.src), "source") + " (" + ", ".join(s.op.name for s in u.src) + ")"


# ------------------------------------------------------------------------------------------------------------
# Shared shape of a node: source count, result dtype, source ops


def _n_src(u: UOp, n: int, clause: str | None = None, at_least: bool = False) -> None:
  if len(u.src) == n or (at_least and len(u.src) > n): return
  _fail(u, clause, f"has {_sources(u)}", ("at least " if at_least else "") + _plural(n, "source"))


def _dtype(u: UOp, want: DType, why: str, clause: str | None = None) -> None:
  if u.dtype != want: _fail(u, clause, f"has dtype {u.dtype!r}", f"{want!r} ({why})")


def _void(u: UOp) -> None: _dtype(u, dtypes.void, "it produces no value")


def _src_op(u: UOp, i: int, ops: tuple[Ops, ...], role: str) -> None:
  if u.src[i].op not in ops:
    _fail(u, None, f"source {i} ({role}) is {u.src[i].op.name}", " or ".join(o.name for o in ops))


def _src_dtype(u: UOp, i: int, ok: Callable[[DType], bool], role: str, want: str, clause: str | None = None) -> None:
  if not ok(u.src[i].dtype): _fail(u, clause, f"source {i} ({role}) has dtype {u.src[i].dtype!r}", want)


def _arg(u: UOp, ok: bool, want: str, clause: str | None = None) -> None:
  if not ok: _fail(u, clause, f"has arg {u.arg!r}", f"arg {want}")


# ------------------------------------------------------------------------------------------------------------
# Structure: SINK, GROUP, BARRIER (void, any sources); NOOP, CONTIGUOUS, DETACH (one source passed through)


def _check_void_any(u: UOp) -> None:
  """UOP.SINK, UOP.GROUP, UOP.BARRIER: void, any number of sources, any arg."""
  _void(u)


def _check_passthrough(u: UOp) -> None:
  """UOP.NOOP, UOP.CONTIGUOUS, UOP.DETACH: one source whose dtype the node keeps."""
  _n_src(u, 1)
  _dtype(u, u.src[0].dtype, "the dtype of its source")


# ------------------------------------------------------------------------------------------------------------
# Tensor-level buffers and devices


def _check_unique(u: UOp) -> None:
  """UOP.UNIQUE: void, no sources, an int that tells apart buffers that are otherwise equal."""
  _void(u); _n_src(u, 0)
  _arg(u, _is_int(u.arg), "an int")


def _check_device(u: UOp) -> None:
  """UOP.DEVICE: void, no sources, arg a device name or a non-empty tuple of them (a multi-device placement)."""
  _void(u); _n_src(u, 0)
  names = u.arg if isinstance(u.arg, tuple) and u.arg else (u.arg,)
  _arg(u, all(isinstance(n, str) for n in names), "a device name (str) or a non-empty tuple of them")


def _check_buffer(u: UOp) -> None:
  """UOP.BUFFER: src (UNIQUE, DEVICE), dtype the element dtype (a scalar), arg the element count."""
  _n_src(u, 2)
  _src_op(u, 0, (Ops.UNIQUE,), "identity"); _src_op(u, 1, (Ops.DEVICE,), "device")
  if not _is_scalar(u.dtype): _fail(u, None, f"has dtype {u.dtype!r}", "a scalar element dtype")
  _arg(u, _is_int(u.arg) and u.arg >= 0, "an int size >= 0")


def _check_copy(u: UOp) -> None:
  """UOP.COPY: src (x, DEVICE), the dtype of x."""
  _n_src(u, 2)
  _src_op(u, 1, (Ops.DEVICE,), "destination")
  _dtype(u, u.src[0].dtype, "the dtype of the copied source")


def _check_assign(u: UOp) -> None:
  """UOP.ASSIGN: src (target, value, *deps); target, value and result share one dtype."""
  _n_src(u, 2, at_least=True)
  _dtype(u, u.src[0].dtype, "the dtype of the target")
  _src_dtype(u, 1, lambda d: d == u.src[0].dtype, "value", f"the target's dtype {u.src[0].dtype!r}")


def _check_kernel(u: UOp) -> None:
  """UOP.KERNEL: void, sources the buffers it reads and writes, arg the kernel's description (not None)."""
  _void(u)
  _arg(u, u.arg is not None, "the kernel's description, not None")


# ------------------------------------------------------------------------------------------------------------
# Constants and symbolic variables


def _same_value(a: Any, b: Any) -> bool:
  """Equality of values (DT.VALUES): same Python type, NaN equal to NaN, -0.0 apart from 0.0."""
  if type(a) is not type(b): return False
  if isinstance(a, float):
    if math.isnan(a) or math.isnan(b): return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
  return a == b


def _is_value_of(x: Any, dt: DType) -> bool:
  """Whether Python value `x` is a value of scalar `dt`: the right kind, and unchanged by DT.CONST's conversion
  (which would wrap an out-of-range int, round an unrepresentable float or turn 1 into True)."""
  return type(x) in (bool, int, float) and _same_value(dtypes.as_const(x, dt), x)


def _check_const(u: UOp) -> None:
  """UOP.CONST: no sources (kernel level) or one DEVICE (tensor level); a scalar dtype; UOP.CONST.value."""
  if u.src: _n_src(u, 1); _src_op(u, 0, (Ops.DEVICE,), "device")
  if not _is_scalar(u.dtype): _fail(u, None, f"has dtype {u.dtype!r}", "a scalar dtype with values")
  if not _is_value_of(u.arg, u.dtype):
    _fail(u, "UOP.CONST.value", f"has arg {u.arg!r} ({type(u.arg).__name__})",
          f"a value of {u.dtype!r}: a Python {_kind(u.dtype)} that dtypes.as_const leaves unchanged")


def _kind(dt: DType) -> str: return "bool" if dt == dtypes.bool else "int" if dtypes.is_int(dt) else "float"


def _check_define_var(u: UOp) -> None:
  """UOP.DEFINE_VAR: an int scalar, no sources, arg (name, min, max) with min <= max inside the dtype's range."""
  _n_src(u, 0)
  if not _is_int_scalar(u.dtype): _fail(u, None, f"has dtype {u.dtype!r}", "a scalar int dtype")
  a = u.arg
  ok = isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], str) and _is_int(a[1]) and _is_int(a[2])
  _arg(u, ok, "(name: str, min: int, max: int)")
  _arg(u, dtypes.min(u.dtype) <= a[1] <= a[2] <= dtypes.max(u.dtype), f"bounds with min <= max inside {u.dtype!r}")


def _check_bind(u: UOp) -> None:
  """UOP.BIND: src (DEFINE_VAR, CONST), the variable's dtype; the constant has that dtype and lies in its bounds."""
  _n_src(u, 2)
  _src_op(u, 0, (Ops.DEFINE_VAR,), "variable"); _src_op(u, 1, (Ops.CONST,), "value")
  var, val = u.src
  _dtype(u, var.dtype, "the dtype of the variable")
  _src_dtype(u, 1, lambda d: d == var.dtype, "value", f"the variable's dtype {var.dtype!r}")
  if not var.arg[1] <= val.arg <= var.arg[2]:
    _fail(u, None, f"binds {val.arg!r}", f"a value inside the variable's bounds [{var.arg[1]}, {var.arg[2]}]")


# ------------------------------------------------------------------------------------------------------------
# Movement (tensor level): one source, same dtype; the arg's structure is all that can be checked without shapes


def _is_permutation(x: Any) -> bool: return _ints(x) and sorted(x) == list(range(len(x)))
def _is_padding(x: Any) -> bool: return _pairs(x) and all(_ints(p) for p in x)
def _is_window(x: Any) -> bool: return _pairs(x) and all(_ints(p) and p[0] <= p[1] for p in x)
def _is_flags(x: Any) -> bool: return isinstance(x, tuple) and all(type(v) is bool for v in x)


_MOVEMENT_ARG: dict[Ops, tuple[Callable[[Any], bool], str]] = {
  Ops.RESHAPE: (_ints, "a tuple of sizes (ints >= 0)"),
  Ops.PERMUTE: (_is_permutation, "a permutation of (0, ..., n-1)"),
  Ops.EXPAND: (_ints, "a tuple of sizes (ints >= 0)"),
  Ops.PAD: (_is_padding, "a tuple of (before, after) int pairs, each >= 0"),
  Ops.SHRINK: (_is_window, "a tuple of (start, end) int pairs with 0 <= start <= end"),
  Ops.FLIP: (_is_flags, "a tuple of bools, one per axis"),
}


def _check_movement(u: UOp) -> None:
  """UOP.RESHAPE, UOP.PERMUTE, UOP.EXPAND, UOP.PAD, UOP.SHRINK, UOP.FLIP."""
  _n_src(u, 1)
  _dtype(u, u.src[0].dtype, "movement keeps the dtype")
  ok, want = _MOVEMENT_ARG[u.op]
  _arg(u, ok(u.arg), want)


# ------------------------------------------------------------------------------------------------------------
# Reductions


def _check_reduce_axis(u: UOp) -> None:
  """UOP.REDUCE_AXIS: one source, same dtype, arg (op, axes) with op ADD, MUL or MAX and distinct axes >= 0."""
  _n_src(u, 1)
  _dtype(u, u.src[0].dtype, "a reduction keeps the dtype")
  a = u.arg
  ok = isinstance(a, tuple) and len(a) == 2 and a[0] in _REDUCE_OPS and _ints(a[1]) and len(set(a[1])) == len(a[1])
  _arg(u, ok, "(op, axes) with op ADD, MUL or MAX and axes a tuple of distinct ints >= 0")


def _check_reduce(u: UOp) -> None:
  """UOP.REDUCE: src (value, *RANGEs), the value's dtype, arg ADD, MUL or MAX."""
  _n_src(u, 1, at_least=True)
  for i in range(1, len(u.src)): _src_op(u, i, (Ops.RANGE,), "a range reduced over")
  _dtype(u, u.src[0].dtype, "the dtype of the reduced value")
  _arg(u, u.arg in _REDUCE_OPS, "Ops.ADD, Ops.MUL or Ops.MAX")


# ------------------------------------------------------------------------------------------------------------
# Kernel-level memory


def _check_define_ptr(addrspace: str, arg_ok: Callable[[Any], bool], arg_want: str, u: UOp) -> None:
  """UOP.DEFINE_GLOBAL, UOP.DEFINE_LOCAL, UOP.DEFINE_REG: a pointer into `addrspace`, no sources."""
  _n_src(u, 0)
  if not (isinstance(u.dtype, PtrDType) and u.dtype.addrspace == addrspace):
    _fail(u, None, f"has dtype {u.dtype!r}", f"a pointer dtype in the {addrspace!r} address space")
  _arg(u, arg_ok(u.arg), arg_want)


def _check_index(u: UOp) -> None:
  """UOP.INDEX: src (pointer, index: int[, gate: bool]), the pointer's dtype."""
  if len(u.src) not in (2, 3): _fail(u, None, f"has {_sources(u)}", "(pointer, index[, gate])")
  _src_dtype(u, 0, lambda d: isinstance(d, PtrDType), "pointer", "a pointer dtype")
  _src_dtype(u, 1, _is_int_scalar, "index", "a scalar int dtype")
  if len(u.src) == 3: _src_dtype(u, 2, lambda d: d == dtypes.bool, "gate", "dtypes.bool")
  _dtype(u, u.src[0].dtype, "the dtype of the pointer")


def _check_load(u: UOp) -> None:
  """UOP.LOAD: src (INDEX, *deps), the element dtype of the pointer (its base); deps (STORE, END, BARRIER, RANGE)
  only order the load: after those effects, inside those loops."""
  _n_src(u, 1, at_least=True)
  _src_op(u, 0, (Ops.INDEX,), "address")
  for i in range(1, len(u.src)):
    _src_op(u, i, (Ops.STORE, Ops.END, Ops.BARRIER, Ops.RANGE), "an ordering dependency")
  ptr = u.src[0].dtype
  if isinstance(ptr, PtrDType): _dtype(u, ptr.base, "the base of the INDEX's pointer dtype")


def _check_store(u: UOp) -> None:
  """UOP.STORE: void, src (INDEX, value, *RANGEs), the value of the pointer's base dtype."""
  _void(u)
  _n_src(u, 2, at_least=True)
  _src_op(u, 0, (Ops.INDEX,), "address")
  for i in range(2, len(u.src)): _src_op(u, i, (Ops.RANGE,), "a range the store closes")
  ptr = u.src[0].dtype
  if isinstance(ptr, PtrDType):
    _src_dtype(u, 1, lambda d: d == ptr.base, "value", f"{ptr.base!r}, the base of the INDEX's pointer dtype")


# ------------------------------------------------------------------------------------------------------------
# Kernel-level control


def _check_counter(u: UOp) -> None:
  """UOP.SPECIAL, UOP.RANGE: an int scalar counting from 0 up to its one source (the end, of the same dtype)."""
  _n_src(u, 1)
  if not _is_int_scalar(u.dtype): _fail(u, None, f"has dtype {u.dtype!r}", "a scalar int dtype")
  _src_dtype(u, 0, lambda d: d == u.dtype, "end", f"the node's own dtype {u.dtype!r}")
  if u.op is Ops.SPECIAL: _arg(u, isinstance(u.arg, str) and u.arg != "", "a name (str) such as 'gidx0'")
  else: _arg(u, u.arg is not None, "an id that tells this loop from others with the same end, not None")


def _check_end(u: UOp) -> None:
  """UOP.END: void, src (value or store, *RANGEs) with at least one RANGE."""
  _void(u)
  _n_src(u, 2, at_least=True)
  for i in range(1, len(u.src)): _src_op(u, i, (Ops.RANGE,), "a range it closes")


def _check_if(u: UOp) -> None:
  """UOP.IF: void, src (cond: bool, *deps)."""
  _void(u)
  _n_src(u, 1, at_least=True)
  _src_dtype(u, 0, lambda d: d == dtypes.bool, "condition", "dtypes.bool")


def _check_endif(u: UOp) -> None:
  """UOP.ENDIF: void, src (IF,)."""
  _void(u); _n_src(u, 1)
  _src_op(u, 0, (Ops.IF,), "the IF it closes")


# ------------------------------------------------------------------------------------------------------------
# Kernel-level vectors


def _check_vectorize(u: UOp) -> None:
  """UOP.VECTORIZE: n scalar sources of one dtype give the vector of n of them."""
  _n_src(u, 1, at_least=True)
  for i in range(len(u.src)): _src_dtype(u, i, _is_scalar, "lane", "a scalar dtype with values")
  first = u.src[0].dtype
  for i in range(1, len(u.src)): _src_dtype(u, i, lambda d: d == first, "lane", f"{first!r}, the dtype of lane 0")
  _dtype(u, first.vec(len(u.src)), f"the vector of {_plural(len(u.src), 'lane')} of {first!r}")


def _check_gep(u: UOp) -> None:
  """UOP.GEP: src (vector,), arg a non-empty tuple of lane indices; one index gives the scalar, k give a vec(k)."""
  _n_src(u, 1)
  vec = u.src[0].dtype
  _src_dtype(u, 0, _is_value, "vector", "a dtype with values")
  _arg(u, _ints(u.arg) and len(u.arg) > 0 and all(i < vec.count for i in u.arg),
       f"a non-empty tuple of lane indices in [0, {vec.count})")
  _dtype(u, vec.scalar().vec(len(u.arg)), f"{_plural(len(u.arg), 'lane')} of {vec!r}")


# ------------------------------------------------------------------------------------------------------------
# ALU (UOP.ALU and its sub-clauses), CAST, BITCAST

_ARITY = {**{op: 1 for op in GroupOp.Unary}, **{op: 2 for op in GroupOp.Binary}, **{op: 3 for op in GroupOp.Ternary}}


def _accepts(op: Ops) -> str:
  """The dtypes `op` accepts, said by kind where it takes a whole kind (for messages)."""
  kinds = [(k, frozenset(d for d in dtypes.all() if _kind(d) == k)) for k in ("bool", "int", "float")]
  return ", ".join(f"{k} dtypes" if ds <= ALU_DTYPES[op] else repr(sorted(ds & ALU_DTYPES[op])) for k, ds in kinds
                   if ds & ALU_DTYPES[op])


def _check_alu(u: UOp) -> None:
  """UOP.ALU.arity, UOP.ALU.arg, UOP.WHERE.cond, UOP.ALU.operands, UOP.ALU.result."""
  _n_src(u, _ARITY[u.op], "UOP.ALU.arity")
  _arg(u, u.arg is None, "None", "UOP.ALU.arg")
  operands = u.src[1:] if u.op is Ops.WHERE else u.src
  dt = operands[0].dtype
  if u.op is Ops.WHERE and u.src[0].dtype != dtypes.bool.vec(dt.count):
    _fail(u, "UOP.WHERE.cond", f"condition has dtype {u.src[0].dtype!r}", f"{dtypes.bool.vec(dt.count)!r}")
  if any(s.dtype != dt for s in operands):
    _fail(u, "UOP.ALU.operands", f"operands have dtypes ({', '.join(repr(s.dtype) for s in operands)})",
          "one dtype for all operands")
  if not _is_value(dt) or dt.scalar() not in ALU_DTYPES[u.op]:
    _fail(u, "UOP.ALU.operands", f"operands have dtype {dt!r}", f"{_accepts(u.op)} (or vectors of them)")
  want = alu_result_dtype(u.op, dt.scalar()).vec(dt.count)
  _dtype(u, want, "comparisons give bool, other ops their operands' dtype", "UOP.ALU.result")


def _check_cast(u: UOp) -> None:
  """UOP.CAST: one source; source and result dtypes hold values and have the same vector count."""
  _n_src(u, 1)
  src = u.src[0].dtype
  _src_dtype(u, 0, _is_value, "operand", "a dtype with values")
  if not _is_value(u.dtype) or u.dtype.count != src.count:
    _fail(u, None, f"has dtype {u.dtype!r}", f"a dtype with values and {_plural(src.count, 'lane')}, as its source")


def _check_bitcast(u: UOp) -> None:
  """UOP.BITCAST: one source; both dtypes hold values; UOP.BITCAST.size."""
  _n_src(u, 1)
  src = u.src[0].dtype
  _src_dtype(u, 0, _is_value, "operand", "a dtype with values")
  if not _is_value(u.dtype): _fail(u, None, f"has dtype {u.dtype!r}", "a dtype with values")
  if u.dtype.itemsize != src.itemsize:
    _fail(u, "UOP.BITCAST.size", f"makes {u.dtype.itemsize} bytes of {u.dtype!r} from {src.itemsize} of {src!r}",
          "the same itemsize on both sides")


# ------------------------------------------------------------------------------------------------------------
# The table: every Ops member -> its checker (tests/test_verify.py checks it is complete)

CHECKS: dict[Ops, Checker] = {
  Ops.SINK: _check_void_any, Ops.GROUP: _check_void_any, Ops.BARRIER: _check_void_any,
  Ops.NOOP: _check_passthrough, Ops.CONTIGUOUS: _check_passthrough, Ops.DETACH: _check_passthrough,
  Ops.UNIQUE: _check_unique, Ops.DEVICE: _check_device, Ops.BUFFER: _check_buffer, Ops.COPY: _check_copy,
  Ops.ASSIGN: _check_assign, Ops.KERNEL: _check_kernel,
  Ops.CONST: _check_const, Ops.DEFINE_VAR: _check_define_var, Ops.BIND: _check_bind,
  **{op: _check_movement for op in GroupOp.Movement},
  Ops.REDUCE_AXIS: _check_reduce_axis, Ops.REDUCE: _check_reduce,
  Ops.DEFINE_GLOBAL: functools.partial(_check_define_ptr, "global", lambda a: _is_int(a) and a >= 0,
                                       "an int parameter slot >= 0"),
  Ops.DEFINE_LOCAL: functools.partial(_check_define_ptr, "local", lambda a: type(a) in (str, int), "a str or int id"),
  Ops.DEFINE_REG: functools.partial(_check_define_ptr, "reg", _is_int, "an int id"),
  Ops.INDEX: _check_index, Ops.LOAD: _check_load, Ops.STORE: _check_store,
  Ops.SPECIAL: _check_counter, Ops.RANGE: _check_counter, Ops.END: _check_end, Ops.IF: _check_if,
  Ops.ENDIF: _check_endif,
  Ops.VECTORIZE: _check_vectorize, Ops.GEP: _check_gep,
  **{op: _check_alu for op in GroupOp.ALU},
  Ops.CAST: _check_cast, Ops.BITCAST: _check_bitcast,
}
