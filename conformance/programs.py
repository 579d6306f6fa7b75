"""Random tensor programs (DESIGN.md "Four oracles": programs; CONF.PROGRAM): the compiler between ops.

A `Program` is data: input tensors (shape, dtype, values) and a list of `Step`s, each one call of the Tensor API on
earlier values (`v3 = v1.permute(1, 0)`, `v4 = (v3 * v3)`, `v5 = x0.assign(v4)`), and the names of its outputs. Being
data, it prints (`Program.source`), hypothesis shrinks it to a minimal one, and it renders as source code in the
implementation's own API: the same lines are evaluated in `Adapter.namespace()` to run it, and are pasted into a
reproduction. `programs()` draws them: movement chains, elementwise ops on aliased operands (a value with itself or
with a view of the same buffer), cast round trips, reductions over moved views, matmul and conv over views, several
outputs sharing subgraphs, realize and contiguous in the middle, and in-place assigns whose value reads the target
through a transposed, flipped or shifted view. A share of programs (`LARGE_SHARE`) runs at sizes that cross the
kernel-choice thresholds of refimpl/codegen/opt.py (SMALL_WORK loop iterations, upcast widths 4 and 8, unroll by 4).
`nested_reductions()` draws a family of its own: reductions of reductions (CONF.PROGRAM.nested).

The reference of a program (torch in float64, with an error bound per element: ACC.PROGRAM) is program_ref.py; how
programs run and are compared is program_check.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from conformance.strategies import NP, special_values

__all__ = ["Input", "Step", "Program", "programs", "nested_reductions", "LARGE_SHARE", "input_values", "EXACT_OPS",
           "TRANSCENDENTAL_OPS"]

LARGE_SHARE = 0.2          # CONF.PROGRAM.sizes: the share of programs drawn at kernel-choice sizes
FLOAT_DTYPES = ("float32", "float32", "float32", "float16", "float64")   # float32 most often
TRANSCENDENTAL_OPS = ("exp",)   # steps whose value devices may compute differently (EXEC.FLOAT.transcendental)
# steps that add no rounding error of their own (ACC.PROGRAM.exact); sum, matmul, conv2d and exp do
EXACT_OPS = ("reshape", "permute", "transpose", "expand", "pad", "shrink", "flip", "getitem", "cat", "stack",
             "contiguous", "realize", "assign", "add", "sub", "mul", "div", "maximum", "minimum", "neg", "relu", "abs",
             "sqrt", "lt", "eq", "ne", "where", "cast", "const", "max", "min")


@dataclass(frozen=True)
class Input:
  """An input tensor: its name (x0, x1, ...), dtype name and values (shape = values.shape)."""
  name: str
  dtype: str
  values: np.ndarray = field(compare=False)

  @property
  def shape(self) -> tuple[int, ...]: return tuple(self.values.shape)


@dataclass(frozen=True)
class Step:
  """`out = <op>(args, **params)`: one call of the Tensor API on earlier values (inputs or steps)."""
  out: str
  op: str
  args: tuple[str, ...]
  params: tuple[tuple[str, Any], ...] = ()

  def param(self, name: str, default: Any = None) -> Any:
    return dict(self.params).get(name, default)

  def expr(self) -> str:
    """The step's right-hand side in the tinygrad-style Tensor API (RENDER has one entry per op)."""
    return RENDER[self.op](self.args, dict(self.params))


@dataclass(frozen=True)
class Program:
  inputs: tuple[Input, ...]
  steps: tuple[Step, ...]
  outputs: tuple[str, ...]
  large: bool = False

  def lines(self) -> list[str]:
    """The steps as source lines, and a last line realizing every output in one schedule (several outputs sharing
    subgraphs are scheduled together, as a user's `Tensor.realize(a, b)` would)."""
    out = [f"{s.out} = {s.expr()}" for s in self.steps]
    outs = ", ".join(self.outputs)
    out.append(f"outs = [{outs}]")
    return out

  def source(self) -> str:
    """The program as text: inputs by shape and dtype, then the steps (what a failure names)."""
    head = [f"# {i.name}: {i.dtype}{list(i.shape)}" for i in self.inputs]
    return "\n".join(head + self.lines())

  def step_of(self, name: str) -> Step | None:
    return next((s for s in self.steps if s.out == name), None)


# ---------------------------------------------------------------------------------------------------- rendering

def _tuple(xs) -> str:
  xs = tuple(xs)
  return f"({xs[0]!r},)" if len(xs) == 1 else repr(xs)


def _slice(s: tuple) -> str:
  a, b, c = s
  return f"{'' if a is None else a}:{'' if b is None else b}" + ("" if c is None else f":{c}")


def _const(v: float) -> str:
  return f"float({str(v)!r})" if not math.isfinite(v) else repr(v)


RENDER = {
  "reshape": lambda a, p: f"{a[0]}.reshape({_tuple(p['shape'])})",
  "permute": lambda a, p: f"{a[0]}.permute({_tuple(p['order'])})",
  "transpose": lambda a, p: f"{a[0]}.transpose({p['dims'][0]}, {p['dims'][1]})",
  "expand": lambda a, p: f"{a[0]}.expand({_tuple(p['shape'])})",
  "pad": lambda a, p: f"{a[0]}.pad({_tuple(tuple(x) for x in p['pads'])})",
  "shrink": lambda a, p: f"{a[0]}.shrink({_tuple(tuple(x) for x in p['bounds'])})",
  "flip": lambda a, p: f"{a[0]}.flip({_tuple(p['axes'])})",
  "getitem": lambda a, p: f"{a[0]}[{', '.join(_slice(s) for s in p['slices'])}]" if p["slices"] else f"{a[0]}[...]",
  "cat": lambda a, p: f"{a[0]}.cat({', '.join(a[1:])}, dim={p['dim']})",
  "stack": lambda a, p: f"{a[0]}.stack({', '.join(a[1:])}, dim={p['dim']})",
  "contiguous": lambda a, p: f"{a[0]}.contiguous()",
  "realize": lambda a, p: f"{a[0]}.realize()",
  "assign": lambda a, p: f"{a[0]}.assign({a[1]})",
  "add": lambda a, p: f"({a[0]} + {a[1]})",
  "sub": lambda a, p: f"({a[0]} - {a[1]})",
  "mul": lambda a, p: f"({a[0]} * {a[1]})",
  "div": lambda a, p: f"({a[0]} / {a[1]})",
  "const": lambda a, p: f"({a[0]} {p['op']} {_const(p['value'])})",
  "maximum": lambda a, p: f"{a[0]}.maximum({a[1]})",
  "minimum": lambda a, p: f"{a[0]}.minimum({a[1]})",
  "lt": lambda a, p: f"({a[0]} < {a[1]})",
  "eq": lambda a, p: f"({a[0]} == {a[1]})",
  "ne": lambda a, p: f"({a[0]} != {a[1]})",
  "where": lambda a, p: f"{a[0]}.where({a[1]}, {a[2]})",
  "neg": lambda a, p: f"(-{a[0]})",
  "relu": lambda a, p: f"{a[0]}.relu()",
  "abs": lambda a, p: f"{a[0]}.abs()",
  "sqrt": lambda a, p: f"{a[0]}.sqrt()",
  "exp": lambda a, p: f"{a[0]}.exp()",
  "cast": lambda a, p: f"{a[0]}.cast(dtypes.{p['dtype']})",
  "sum": lambda a, p: f"{a[0]}.sum({_axis(p)}keepdim={p['keepdim']})",
  "max": lambda a, p: f"{a[0]}.max({_axis(p)}keepdim={p['keepdim']})",
  "min": lambda a, p: f"{a[0]}.min({_axis(p)}keepdim={p['keepdim']})",
  "matmul": lambda a, p: f"({a[0]} @ {a[1]})",
  "conv2d": lambda a, p: f"{a[0]}.conv2d({a[1]}, padding={p['padding']})",
}


def _axis(p: dict) -> str:
  ax = p["axis"]
  return "" if ax is None else f"{ax!r}, "


# ---------------------------------------------------------------------------------------------------- values

# CONF.PROGRAM.values: the palettes an input's values are drawn from. Each input picks one, so that zeros of both
# signs, ties and NaN fill whole reductions often enough to matter (a max over {+0.0, -0.0}, a sum of all -inf).
PALETTES = ("mixed", "zeros", "specials", "ties")
_STARS = (np.nan, np.inf, -np.inf, 0.0, -0.0)   # the values rewrite rules most often get wrong


def input_values(dtype: str, shape: tuple[int, ...], palette: str, seed: int) -> np.ndarray:
  """Values of `dtype` filling `shape`, from a numpy generator seeded with `seed` (fast at the large sizes, where a
  hypothesis draw per element would not be): 'mixed' small numbers with a few digits and the spec's special values
  (one in three, NaN, the infinities and the zeros as often as all others together, and at least one of those five
  in every float input of two or more elements); 'specials' mostly special values; 'zeros' +-0.0 and a few
  negatives (a max over a group of zeros); 'ties' -2..2 and +-0.0 (equal elements everywhere); 'finite' the small
  numbers alone (nested_reductions: a NaN or an infinity absorbs a wrongly accumulated sum)."""
  rng = np.random.default_rng(seed)
  n = math.prod(shape)
  t = NP[dtype]
  if dtype == "bool": return rng.integers(0, 2, shape).astype(np.bool_)
  is_float = np.issubdtype(np.dtype(t), np.floating)
  ordinary = np.round(rng.uniform(-4, 4, n), 2) if is_float else rng.integers(-4, 5, n)
  if palette == "finite": vals = ordinary
  elif palette == "ties": vals = rng.choice(np.array([-2, -1, -0.0, 0.0, 1, 2] if is_float else [-2, -1, 0, 1, 2]), n)
  elif palette == "zeros":
    vals = rng.choice(np.array([-0.0, 0.0, -0.0, 0.0, -1.5, -3.0] if is_float else [0, 0, -1, -3]), n)
  else:
    pool = np.array(special_values(dtype), dtype=np.float64 if is_float else np.int64)
    if is_float: pool = np.concatenate([pool, np.array(_STARS * max(1, len(pool) // 5))])
    share = 1 / 3 if palette == "mixed" else 0.8
    vals = np.where(rng.random(n) < share, rng.choice(pool, n), ordinary)
    if is_float and n >= 2: vals[rng.integers(0, n)] = rng.choice(np.array(_STARS))
  with np.errstate(over="ignore", invalid="ignore"):
    return np.asarray(vals).astype(t).reshape(shape) if n else np.zeros(shape, t)


# ---------------------------------------------------------------------------------------------------- generation

@dataclass
class _Val:
  """A value while a program is drawn: shape, dtype, the inputs it reads (to retire it when one is overwritten)."""
  name: str
  shape: tuple[int, ...]
  dtype: str
  reads: frozenset[str]


class _Builder:
  """The state of drawing one program."""
  def __init__(self, draw, dtype: str, large: bool):
    self.draw, self.dtype, self.large = draw, dtype, large
    self.inputs: list[Input] = []
    self.steps: list[Step] = []
    self.vals: dict[str, _Val] = {}     # usable values
    self.k = 0

  # ---- values ----
  def new_input(self, shape: tuple[int, ...], dtype: str | None = None, palettes: tuple[str, ...] = PALETTES) -> _Val:
    dtype = dtype or self.dtype
    palette = self.draw(st.sampled_from(palettes), label="palette")
    name = f"x{len(self.inputs)}"
    earlier = [i for i in self.inputs if i.shape == shape and i.dtype == dtype]
    # CONF.VALUES.equal: an input equal to an earlier one, or its negation, one time in four when one fits
    if earlier and self.draw(st.integers(0, 3), label="equal input") == 0:
      src = self.draw(st.sampled_from(earlier), label="equal to")
      values = src.values.copy() if self.draw(st.booleans(), label="negated") else -src.values
    else: values = input_values(dtype, shape, palette, self.draw(st.integers(0, 2 ** 16), label="seed"))
    self.inputs.append(Input(name, dtype, values))
    v = _Val(name, shape, dtype, frozenset({name}))
    self.vals[name] = v
    return v

  def add(self, kind: str, args: tuple[_Val, ...], out_shape: tuple[int, ...], out_dtype: str, **params) -> _Val:
    name = f"v{len(self.steps) + 1}"
    self.steps.append(Step(name, kind, tuple(a.name for a in args), tuple(params.items())))
    v = _Val(name, tuple(out_shape), out_dtype, frozenset().union(*(a.reads for a in args)))
    self.vals[name] = v
    return v

  def pick(self, pred=lambda v: True, label: str = "value") -> _Val | None:
    ok = [v for v in self.vals.values() if pred(v)]
    if not ok: return None
    # the latest value half the time, so that chains grow; any earlier one otherwise (shared subgraphs)
    if self.draw(st.booleans(), label="latest"): return ok[-1]
    return self.draw(st.sampled_from(ok), label=label)

  def shape(self) -> tuple[int, ...]:
    if self.large:
      return self.draw(st.sampled_from([(64, 64), (4096,), (16, 256), (32, 33), (256, 16), (8, 32, 16), (3, 1024)]),
                       label="large shape")
    nd = self.draw(st.sampled_from([2, 1, 3, 2, 0]), label="ndim")
    return tuple(self.draw(st.sampled_from([3, 2, 1, 4, 0, 5]), label="side") for _ in range(nd))


def _is_float(dtype: str) -> bool:
  return dtype in ("float16", "float32", "float64", "bfloat16")


# ---- step kinds: each draws one or a few steps from the builder's values, or returns None when none fits

def _movement(b: _Builder) -> _Val | None:
  """A chain of one to three movement ops (view merging and index simplification see them together)."""
  if b.draw(st.booleans(), label="known chain"):   # chains whose lowering composes offsets, gates and strides
    x = b.pick(lambda v: len(v.shape) >= 2 and all(v.shape)) or b.pick()
    if x is None: return None
    for kind in b.draw(st.sampled_from(CHAINS), label="chain"): x = _move(b, x, kind) or x
    return x
  x = b.pick()
  if x is None: return None
  for _ in range(b.draw(st.integers(1, 3), label="chain length")): x = _move(b, x) or x
  return x


MOVES = ("reshape", "permute", "expand", "pad", "shrink", "flip", "getitem", "cat", "stack", "transpose")
CHAINS = (("permute", "pad", "shrink"), ("pad", "permute", "shrink"), ("shrink", "flip", "pad"),
          ("expand", "permute", "pad"), ("pad", "reshape", "permute"), ("getitem", "permute", "pad"),
          ("flip", "reshape", "shrink"), ("permute", "reshape", "pad"))


def _move(b: _Builder, x: _Val, kind: str | None = None) -> _Val | None:
  s, nd = x.shape, len(x.shape)
  kind = kind or b.draw(st.sampled_from(MOVES), label="movement")
  if kind == "reshape":
    n = math.prod(s)
    options = [(n,), (1, n), (n, 1)] + [(d, n // d) for d in range(2, 6) if n and n % d == 0 and d < n]
    if n == 0: options += [(0, 3), (2, 0, 1)]
    return _reshape(b, x, options)
  if kind == "permute" and nd >= 2:
    order = tuple(b.draw(st.permutations(range(nd)).filter(lambda o: list(o) != sorted(o)), label="order"))
    return b.add("permute", (x,), tuple(s[i] for i in order), x.dtype, order=order)
  if kind == "transpose" and nd >= 2:
    d0, d1 = b.draw(st.sampled_from([(0, 1), (-1, 0), (nd - 2, nd - 1)]), label="dims")
    t = list(s)
    t[d0], t[d1] = t[d1], t[d0]
    return b.add("transpose", (x,), tuple(t), x.dtype, dims=(d0, d1))
  if kind == "expand" and 1 in s:
    shape = tuple(b.draw(st.sampled_from([1, 2, 3, 0]), label="expand to") if n == 1 else n for n in s)
    return b.add("expand", (x,), shape, x.dtype, shape=shape)
  if kind == "expand" and nd < 3:   # a new leading axis, then broadcast along it
    r = b.add("reshape", (x,), (1, *s), x.dtype, shape=(1, *s))
    k = b.draw(st.sampled_from([2, 3]), label="expand to")
    return b.add("expand", (r,), (k, *s), x.dtype, shape=(k, *s))
  if kind == "pad" and nd:
    pads = tuple((b.draw(st.integers(0, 2), label="pad"), b.draw(st.integers(0, 2), label="pad")) for _ in s)
    return b.add("pad", (x,), tuple(n + p + q for n, (p, q) in zip(s, pads)), x.dtype, pads=pads)
  if kind == "shrink" and nd:
    bounds = []
    for n in s:
      lo = b.draw(st.integers(0, n), label="start")
      bounds.append((lo, b.draw(st.integers(lo, n), label="end")))
    return b.add("shrink", (x,), tuple(e - a for a, e in bounds), x.dtype, bounds=tuple(bounds))
  if kind == "flip" and nd:
    axes = tuple(sorted(b.draw(st.sets(st.integers(0, nd - 1), min_size=1), label="axes")))
    return b.add("flip", (x,), s, x.dtype, axes=axes)
  if kind == "getitem" and nd:
    slices = []
    for n in s:
      bound = st.one_of(st.none(), st.integers(-n - 1, n + 1))
      step = b.draw(st.sampled_from([None, 1, 2, -1, -2, 3]), label="step")
      slices.append((b.draw(bound, label="start"), b.draw(bound, label="stop"), step))
    shape = tuple(len(range(*slice(*sl).indices(n))) for sl, n in zip(slices, s))
    return b.add("getitem", (x,), shape, x.dtype, slices=tuple(slices))
  if kind in ("cat", "stack"):
    others = [v for v in b.vals.values() if v.shape == s and v.dtype == x.dtype]
    y = b.draw(st.sampled_from(others), label="other") if len(others) > 1 and b.draw(st.booleans()) else x
    if kind == "stack":
      dim = b.draw(st.integers(0, nd), label="dim")
      return b.add("stack", (x, y), s[:dim] + (2,) + s[dim:], x.dtype, dim=dim)
    if nd:
      dim = b.draw(st.integers(0, nd - 1), label="dim")
      return b.add("cat", (x, y), s[:dim] + (2 * s[dim],) + s[dim + 1:], x.dtype, dim=dim)
  return None


def _reshape(b: _Builder, x: _Val, options: list) -> _Val:
  shape = b.draw(st.sampled_from(options), label="new shape")
  return b.add("reshape", (x,), shape, x.dtype, shape=shape)


def _view_of(b: _Builder, x: _Val, moved: bool = False) -> _Val:
  """A view of x with x's shape: x itself (unless `moved`), flipped, transposed (square), or shifted by one with a
  zero (pad then shrink): the second operand of an aliased binary op, or the value an assign reads its target
  through."""
  s, nd = x.shape, len(x.shape)
  kinds = ([] if moved and nd else ["same"]) + (["flip", "shift"] if nd else []) + \
      (["T", "T"] if nd == 2 and s[0] == s[1] else [])
  kind = b.draw(st.sampled_from(kinds), label="view")
  if kind == "flip": return b.add("flip", (x,), s, x.dtype, axes=(b.draw(st.integers(0, nd - 1), label="axis"),))
  if kind == "T": return b.add("permute", (x,), s[::-1], x.dtype, order=(1, 0))
  if kind == "shift":
    a = b.draw(st.integers(0, nd - 1), label="axis")
    before = b.draw(st.booleans(), label="direction")
    pads = tuple(((1, 0) if before else (0, 1)) if i == a else (0, 0) for i in range(nd))
    padded = b.add("pad", (x,), tuple(n + (i == a) for i, n in enumerate(s)), x.dtype, pads=pads)
    bounds = tuple(((0, n) if before else (1, n + 1)) if i == a else (0, n) for i, n in enumerate(s))
    return b.add("shrink", (padded,), s, x.dtype, bounds=bounds)
  return x


def _elementwise(b: _Builder) -> _Val | None:
  x = b.pick(lambda v: v.dtype != "bool")
  if x is None: return None
  flt = _is_float(x.dtype)
  ops = ["add", "sub", "mul", "maximum", "minimum", "lt", "eq", "ne", "neg"]
  if flt: ops += ["div", "div", "relu", "abs", "sqrt", "exp", "const", "const", "where", "where"]
  op = b.draw(st.sampled_from(ops), label="elementwise")
  if op in ("neg", "relu", "abs", "sqrt", "exp"): return b.add(op, (x,), x.shape, x.dtype)
  if op == "const":
    sym = b.draw(st.sampled_from(["*", "/", "+", "-"]), label="const op")
    value = b.draw(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, math.inf]), label="const")
    return b.add("const", (x,), x.shape, x.dtype, op=sym, value=value)
  # CONF.PROGRAM.alias: the second operand is the same value, a view of it, or another value of the same shape
  others = [v for v in b.vals.values() if v.shape == x.shape and v.dtype == x.dtype and v is not x]
  how = b.draw(st.sampled_from(["same", "view", "same", "other"]), label="operand")
  y = x if how == "same" else _view_of(b, x) if how == "view" or not others else \
      b.draw(st.sampled_from(others), label="other operand")
  if op == "where":
    c = b.add(b.draw(st.sampled_from(["lt", "eq", "ne"]), label="condition"), (x, y), x.shape, "bool")
    return b.add("where", (c, x, y), x.shape, x.dtype)
  out = "bool" if op in ("lt", "eq", "ne") else x.dtype
  return b.add(op, (x, y), x.shape, out)


def _alias(b: _Builder) -> _Val | None:
  """x op x, or x op (a view of x), on a value that often holds NaN, infinities and zeros: what a float rewrite that
  is wrong for them (x/x -> 1, x-x -> 0, x==x -> True, x*0 -> 0) changes."""
  x = b.pick(lambda v: _is_float(v.dtype), label="aliased")
  if x is None: return None
  y = x if b.draw(st.booleans(), label="itself") else _view_of(b, x)
  op = b.draw(st.sampled_from(["div", "sub", "eq", "ne", "lt", "maximum", "minimum", "mul", "add"]), label="op")
  return b.add(op, (x, y), x.shape, "bool" if op in ("eq", "ne", "lt") else x.dtype)


def _cast(b: _Builder) -> _Val | None:
  x = b.pick(label="cast source")
  if x is None: return None
  if x.dtype == "bool": return b.add("cast", (x,), x.shape, b.dtype, dtype=b.dtype)
  if x.dtype == "int32": return b.add("cast", (x,), x.shape, b.dtype, dtype=b.dtype)
  # CONF.PROGRAM.casts: float -> half -> float, float -> int -> float, float -> bool (and back later)
  chain = b.draw(st.sampled_from(["half", "int", "bool", "bool-float"]), label="cast chain")
  if chain == "half":
    mid = "float16" if x.dtype != "float16" else "float32"
    h = b.add("cast", (x,), x.shape, mid, dtype=mid)
    return b.add("cast", (h,), x.shape, x.dtype, dtype=x.dtype)
  if chain == "int":
    i = b.add("cast", (x,), x.shape, "int32", dtype="int32")
    return i if b.draw(st.booleans(), label="stay int") else b.add("cast", (i,), x.shape, x.dtype, dtype=x.dtype)
  c = b.add("cast", (x,), x.shape, "bool", dtype="bool")
  return c if chain == "bool" else b.add("cast", (c,), x.shape, x.dtype, dtype=x.dtype)


def _reduce(b: _Builder) -> _Val | None:
  x = b.pick(lambda v: _is_float(v.dtype) or (v.dtype == "int32"), label="reduced")
  if x is None: return None
  return _reduce_of(b, x)


def _reduce_of(b: _Builder, x: _Val) -> _Val | None:
  """sum, max or min of x over an axis, a tuple of axes or all of them, keepdim or not."""
  nd = len(x.shape)
  axis = b.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)) if nd else st.none(), label="axis")
  if nd >= 2 and b.draw(st.booleans(), label="tuple axis"):
    axis = tuple(sorted(b.draw(st.sets(st.integers(0, nd - 1), min_size=1, max_size=nd), label="axes")))
  return _reduce_over(b, x, axis)


def _reduce_over(b: _Builder, x: _Val, axis, float_ops: tuple[str, ...] = ("sum", "max", "min", "max"),
                 keepdims: tuple[bool, ...] = (False, True)) -> _Val | None:
  nd = len(x.shape)
  axes = set(range(nd)) if axis is None else {a % nd for a in ((axis,) if isinstance(axis, int) else axis)}
  # empty groups only for sum: max and min of nothing are refused (API.ARGS.empty-reduce), not a value to compare
  empty = any(x.shape[a] == 0 for a in axes)
  if _is_float(x.dtype): ops = ["sum"] if empty else list(float_ops)
  else: ops = [] if empty else ["max", "min"]
  if not ops: return None
  op = b.draw(st.sampled_from(ops), label="reduce")
  keepdim = b.draw(st.booleans() if keepdims == (False, True) else st.sampled_from(keepdims), label="keepdim")
  shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdim or i not in axes)
  return b.add(op, (x,), shape, x.dtype, axis=axis, keepdim=keepdim)


def _matmul(b: _Builder) -> _Val | None:
  x = b.pick(lambda v: _is_float(v.dtype) and len(v.shape) == 2, label="matmul lhs")
  if x is None: return None
  m, k = x.shape
  rhs = [v for v in b.vals.values() if v.dtype == x.dtype and len(v.shape) == 2 and v.shape[0] == k]
  if rhs and b.draw(st.booleans(), label="other rhs"): y = b.draw(st.sampled_from(rhs), label="rhs")
  else: y = b.add("permute", (x,), (k, m), x.dtype, order=(1, 0))   # x @ x.T: both operands one buffer
  return b.add("matmul", (x, y), (m, y.shape[1]), x.dtype)


def _conv(b: _Builder) -> _Val | None:
  x = b.pick(lambda v: _is_float(v.dtype) and len(v.shape) in (2, 3) and all(v.shape), label="conv input")
  if x is None: return None
  if len(x.shape) == 2: x4 = b.add("reshape", (x,), (1, 1, *x.shape), x.dtype, shape=(1, 1, *x.shape))
  else: x4 = b.add("reshape", (x,), (1, *x.shape), x.dtype, shape=(1, *x.shape))
  c, h, w = x4.shape[1:]
  pad = b.draw(st.integers(0, 1), label="padding")
  kh = b.draw(st.integers(1, min(3, h + 2 * pad)), label="kh")
  kw = b.draw(st.integers(1, min(3, w + 2 * pad)), label="kw")
  wt = b.new_input((b.draw(st.integers(1, 2), label="out channels"), c, kh, kw), x.dtype)
  wv = _view_of(b, wt) if b.draw(st.booleans(), label="moved weight") else wt
  return b.add("conv2d", (x4, wv), (1, wv.shape[0], h + 2 * pad - kh + 1, w + 2 * pad - kw + 1), x.dtype, padding=pad)


def _assign(b: _Builder) -> _Val | None:
  """x.assign(f(view of x)), x a fresh realized input of two or more elements, the view transposed, flipped or
  shifted (EXEC.SCHED.overlap: written in place, it would read elements already overwritten), sometimes combined
  with an earlier value of the same shape."""
  x = b.pick(lambda v: _is_float(v.dtype) and math.prod(v.shape) >= 2, label="assign like")
  shape = x.shape if x is not None else b.draw(st.sampled_from([(3, 3), (5,), (2, 4), (4, 4)]), label="target")
  t = b.new_input(shape, b.dtype)
  value = view = _view_of(b, t, moved=True)
  if x is not None and b.draw(st.booleans(), label="combine"):
    value = b.add(b.draw(st.sampled_from(["add", "mul", "maximum"]), label="with"), (view, x), shape, t.dtype)
  out = b.add("assign", (t, value), shape, t.dtype)
  # EXEC.SCHED.versions: values built on the old content are retired, so that no step's meaning depends on when an
  # implementation runs the write
  for name in [n for n, v in b.vals.items() if t.name in v.reads and n != out.name]: del b.vals[name]
  out.reads = frozenset(out.reads - {t.name})
  return out


def _barrier(b: _Builder) -> _Val | None:
  x = b.pick(label="realized")
  if x is None: return None
  return b.add(b.draw(st.sampled_from(["contiguous", "realize"]), label="barrier"), (x,), x.shape, x.dtype)


KINDS = {"movement": _movement, "elementwise": _elementwise, "alias": _alias, "cast": _cast, "reduce": _reduce,
         "matmul": _matmul, "conv2d": _conv, "assign": _assign, "barrier": _barrier}
WEIGHTS = (["movement"] * 4 + ["elementwise"] * 3 + ["alias"] * 2 +
           ["cast", "reduce", "reduce", "matmul", "conv2d", "assign", "barrier"])


NESTED_SHAPES = ((2, 3), (4, 5), (3, 1, 4), (2, 3, 4), (5, 0), (1, 4), (3, 4, 2))
NESTED_LARGE_SHAPES = ((8, 32, 16), (64, 64), (16, 256), (32, 33), (3, 1024))
NESTED_PALETTES = ("finite", "finite", "ties", "zeros", "mixed", "specials")   # finite sums most often
NESTED_OPS = ("sum", "sum", "max", "min")   # a max of maxes cannot tell a kept accumulator from a fresh one


@st.composite
def nested_reductions(draw, dtypes: tuple[str, ...] = FLOAT_DTYPES) -> Program:
  """CONF.PROGRAM.nested: a reduction of a reduction (`x.sum(0).max(keepdim=True)`). Fused into one kernel, the first
  runs inside the second's loop, and its accumulator must start again from the identity in every outer iteration
  (EXEC.THREAD.reduce). The input may be moved first and the first result moved or passed through an elementwise op
  before the second; sometimes a third reduction follows, and the first result is sometimes an output too (one
  schedule for both). A family of its own, drawn by its own test: changing what `programs` draws would move the
  derandomized samples that catch the planted bugs of tests/test_programs_planted.py."""
  large = draw(st.sampled_from([False] * 4 + [True]), label="large")   # LARGE_SHARE
  b = _Builder(draw, draw(st.sampled_from(dtypes), label="dtype"), large)
  shape = draw(st.sampled_from(NESTED_LARGE_SHAPES if large else NESTED_SHAPES), label="shape")
  x = b.new_input(shape, palettes=NESTED_PALETTES)
  if draw(st.integers(0, 2), label="move first") == 0:   # a view that keeps the axes
    x = _move(b, x, draw(st.sampled_from(["permute", "flip", "pad", "shrink", "getitem"]), label="movement")) or x
  nd = len(x.shape)   # the first reduction leaves an axis for the second (all of them where there is one)
  kept = draw(st.sets(st.integers(0, nd - 1), min_size=1, max_size=nd - 1), label="axes") if nd >= 2 else set()
  axis = None if nd < 2 else tuple(sorted(kept)) if len(kept) > 1 or draw(st.booleans(), label="tuple") else \
      next(iter(kept)) - draw(st.sampled_from([0, nd]), label="negative")
  first = _reduce_over(b, x, axis, NESTED_OPS)
  if first is None: return Program(tuple(b.inputs), tuple(b.steps), (x.name,), large)
  between = draw(st.sampled_from(["none", "none", "move", "elementwise"]), label="between")
  y = first
  if between == "move": y = _move(b, first) or first
  elif between == "elementwise":
    op = draw(st.sampled_from(["neg", "abs", "relu", "add", "mul"]), label="elementwise")
    y = b.add(op, (first,) * (1 if op in ("neg", "abs", "relu") else 2), first.shape, first.dtype)
  last = _reduce_across(b, y)
  if draw(st.integers(0, 3), label="third") == 0: last = _reduce_across(b, last)
  outs = (last.name,) + ((first.name,) if last is not first and draw(st.integers(0, 3), label="first out") == 0
                         else ())
  return Program(tuple(b.inputs), tuple(b.steps), outs, large)


def _reduce_across(b: _Builder, y: _Val) -> _Val:
  """The outer reduction of nested_reductions: over every axis, or over some of the axes with more than one element
  (a reduction over axes of one element runs no loop for the inner one to be nested in)."""
  wide = [i for i, n in enumerate(y.shape) if n > 1]
  if not wide or b.draw(st.integers(0, 2), label="over all") == 0: axis = None
  else: axis = tuple(sorted(b.draw(st.sets(st.sampled_from(wide), min_size=1), label="outer axes")))
  # keepdim=True twice in three: refimpl fuses x.sum(0).sum(keepdim=True) into one kernel (the nested loops), but
  # schedules x.sum(0).sum() as two
  return _reduce_over(b, y, axis, NESTED_OPS, (True, True, False)) or y


@st.composite
def programs(draw, dtypes: tuple[str, ...] = FLOAT_DTYPES, transcendental: bool = True, max_steps: int = 8) -> Program:
  """A random program (see the module docstring). `dtypes`: the float dtypes its float inputs may have (one per
  program); `transcendental`: whether exp may appear (devices compare bit for bit only without it)."""
  large = draw(st.sampled_from([False] * 4 + [True]), label="large")   # LARGE_SHARE: one in five
  b = _Builder(draw, draw(st.sampled_from(dtypes), label="dtype"), large)
  for _ in range(draw(st.integers(1, 2), label="inputs")): b.new_input(b.shape())
  n = draw(st.integers(2, max_steps if not large else 4), label="steps")
  for _ in range(n):
    kind = draw(st.sampled_from(WEIGHTS), label="kind")
    if kind == "elementwise" and not transcendental:
      steps = len(b.steps)
      _elementwise(b)
      if any(s.op in TRANSCENDENTAL_OPS for s in b.steps[steps:]):
        b.steps[steps:] = [s if s.op not in TRANSCENDENTAL_OPS else Step(s.out, "neg", s.args) for s in b.steps[steps:]]
      continue
    KINDS[kind](b)
  # outputs: the last value and up to two more, distinct, often sharing a subgraph with it
  usable = [v for v in b.vals.values() if not v.name.startswith("x")] or list(b.vals.values())
  outs = [usable[-1].name]
  for v in draw(st.lists(st.sampled_from(usable), max_size=2), label="more outputs"):
    if v.name not in outs: outs.append(v.name)
  used = {a for s in b.steps for a in s.args} | set(outs)
  inputs = tuple(i for i in b.inputs if i.name in used)
  return Program(inputs, tuple(b.steps), tuple(outs), large)
