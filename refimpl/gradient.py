"""Reverse-mode differentiation as graph construction (spec/gradients.md, GRAD.MODEL).

Each rule of `pm_gradient` is one clause of the chapter: it matches a tensor-level node `ret` and, given the
cotangent `ctx` of that node, returns one entry per source of `ret`: a cotangent UOp with that source's shape and
dtype, or None where that use of the source contributes nothing (GRAD.MODEL.rule). Nothing is computed here: the
cotangents are new UOps built with the same ops the Tensor layer uses, so they schedule and run like any tensor.
`compute_gradient` walks the graph from the root and sums the contributions of every use (GRAD.MODEL.sum)."""
from __future__ import annotations

import math
import weakref

from refimpl.dtype import dtypes, sum_acc_dtype
from refimpl.helpers import SpecError
from refimpl.uop import Ops, GroupOp
from refimpl.uop.ops import UOp, UPat, PatternMatcher

# ------------------------------------------------------------------------------------------------------------
# Building tensor-level constants and reductions


_device_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _device(u: UOp) -> UOp:
  """The DEVICE node that `u` lives on. Constants made for a cotangent must carry it, because a CONST at tensor
  level is placed on a device through its DEVICE source (as Tensor's constants are)."""
  if (hit := _device_cache.get(u)) is not None: return hit
  stack, seen = [u], set()
  while stack:
    n = stack.pop()
    if n.op is Ops.DEVICE: found = n
    elif n.op is Ops.COPY: found = n.src[1]   # everything above a COPY lives on its destination
    else:
      for s in reversed(n.src):
        if id(s) not in seen: seen.add(id(s)); stack.append(s)
      continue
    _device_cache[u] = found
    return found
  raise SpecError("GRAD.MODEL.rule", f"{u.op.name} node has no DEVICE to build a cotangent constant on")


def _full(like: UOp, value, dtype=None) -> UOp:
  """`value` broadcast to the shape of `like`, on its device: CONST(DEVICE) reshaped to ones and expanded, the
  form Tensor gives Python scalars. A real constant, never `g * 0`: an infinite g would give NaN (spec notation)."""
  dt = dtype or like.dtype
  out = UOp.const(dt, value, _device(like).arg)
  shape = like.shape
  if shape: out = UOp(Ops.RESHAPE, dt, (out,), (1,) * len(shape))
  if shape and shape != (1,) * len(shape): out = UOp(Ops.EXPAND, dt, (out,), shape)
  return out


def _reduce(u: UOp, op: Ops, axes: tuple[int, ...]) -> UOp:
  """REDUCE_AXIS keeping the reduced axes with size 1. Sums of float16/bfloat16 accumulate in float32 and are cast
  back (DT.SUM), like Tensor.sum."""
  acc = sum_acc_dtype(u.dtype) if op is Ops.ADD and dtypes.is_float(u.dtype) else u.dtype
  return UOp(Ops.REDUCE_AXIS, acc, (u.cast(acc),), (op, tuple(axes))).cast(u.dtype)


def _expand(u: UOp, shape: tuple[int, ...]) -> UOp:
  """A keep-dims reduction broadcast back to the shape of the source it reduced."""
  return u if u.shape == tuple(shape) else UOp(Ops.EXPAND, u.dtype, (u,), tuple(shape))


# ------------------------------------------------------------------------------------------------------------
# The rules: (ctx = cotangent of ret, ret) -> one cotangent or None per source of ret


def _max_grad(g: UOp, a: UOp, b: UOp) -> tuple[UOp, UOp]:
  # GRAD.MAX.tie: half to each side at a tie; GRAD.MAX.nan: with a NaN no comparison holds and both get g
  zero, half = _full(g, 0), g * _full(g, 0.5)
  tie = a.eq(b)
  return (a < b).where(zero, tie.where(half, g)), (b < a).where(zero, tie.where(half, g))


def _pow_grad(g: UOp, y: UOp, a: UOp, b: UOp) -> tuple[UOp, UOp]:
  zero = _full(g, 0)
  # GRAD.POW.exp-zero: b = 0 gives the base nothing, even where a^(b-1) is inf or NaN
  da = b.eq(zero).where(zero, g * b * (a ** (b - _full(b, 1))))
  # GRAD.POW.base-zero: 0^b with b >= 0 does not depend on b; elsewhere ln(a) = log2(a)*ln2 (NaN for a < 0,
  # GRAD.POW.base-negative)
  db = (a.eq(zero) & (b >= zero)).where(zero, g * y * (a.log2() * _full(a, math.log(2))))
  return da, db


def _cast_grad(g: UOp, ret: UOp) -> tuple[UOp | None]:
  # GRAD.CAST: only float -> float carries a cotangent; to or from an int/bool type is a cut (GRAD.NONDIFF.none)
  x = ret.src[0]
  if not (dtypes.is_float(ret.dtype) and dtypes.is_float(x.dtype)): return (None,)
  return (g.cast(x.dtype),)


def _expand_grad(g: UOp, ret: UOp) -> tuple[UOp]:
  # GRAD.EXPAND (and so GRAD.BROADCAST): every copy of a broadcast element sends its cotangent back to it
  x = ret.src[0]
  axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, ret.shape)) if a != b)
  return (_reduce(g, Ops.ADD, axes) if axes else g,)


def _permute_grad(g: UOp, ret: UOp) -> tuple[UOp]:
  inverse = [0] * len(ret.arg)
  for i, p in enumerate(ret.arg): inverse[p] = i
  return (UOp(Ops.PERMUTE, g.dtype, (g,), tuple(inverse)),)


def _pad_grad(g: UOp, ret: UOp) -> tuple[UOp]:
  window = tuple((b, b + n) for (b, _), n in zip(ret.arg, ret.src[0].shape))
  return (UOp(Ops.SHRINK, g.dtype, (g,), window),)


def _shrink_grad(g: UOp, ret: UOp) -> tuple[UOp]:
  padding = tuple((st, n - en) for (st, en), n in zip(ret.arg, ret.src[0].shape))
  return (UOp(Ops.PAD, g.dtype, (g,), padding),)


def _reduce_grad(g: UOp, ret: UOp) -> tuple[UOp | None]:
  x = ret.src[0]
  op, axes = ret.arg
  ge = _expand(g, x.shape)
  if op is Ops.ADD: return (ge,)   # GRAD.REDUCE.ADD
  if op is Ops.MAX:
    # GRAD.REDUCE.MAX.tie: the k positions equal to the max share g equally; GRAD.REDUCE.MAX.nan: a NaN max equals
    # nothing, count = 0, and 0/0 gives NaN everywhere in its group (as torch's amax)
    mask = x.eq(_expand(ret, x.shape)).cast(g.dtype)
    count = _reduce(mask, Ops.ADD, axes)
    return ((mask / _expand(count, x.shape)) * ge,)
  if op is Ops.MUL:
    # GRAD.REDUCE.MUL.zero: y/x is the product of the others only where the group has no zero; with exactly one zero
    # that position gets the product of the nonzero rest and the others 0; with two or more every position gets 0
    zero, one = _full(x, 0), _full(x, 1)
    is_zero = x.eq(zero)
    zeros = _expand(_reduce(is_zero.cast(x.dtype), Ops.ADD, axes), x.shape)
    rest = _expand(UOp(Ops.REDUCE_AXIS, x.dtype, (is_zero.where(one, x),), (Ops.MUL, axes)), x.shape)
    lone = (zeros.eq(one) & is_zero).where(rest, zero)
    return (ge * zeros.eq(zero).where(_expand(ret, x.shape) / x, lone),)
  raise SpecError("GRAD.MODEL.rule", f"no gradient rule for REDUCE_AXIS {op}")


pm_gradient = PatternMatcher([
  # elementwise arithmetic
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx), "GRAD.ADD"),
  (UPat(Ops.SUB), lambda ctx: (ctx, -ctx), "GRAD.SUB"),
  (UPat(Ops.NEG), lambda ctx: (-ctx,), "GRAD.NEG"),
  (UPat(Ops.MUL, src=(UPat.var("a"), UPat.var("b"))), lambda ctx, a, b: (ctx * b, ctx * a), "GRAD.MUL"),
  # GRAD.FDIV.zero: the formulas are applied as written at b = 0, IEEE giving inf and NaN as torch does
  (UPat(Ops.FDIV, src=(UPat.var("a"), UPat.var("b"))), lambda ctx, a, b: (ctx / b, -(ctx * a) / (b * b)), "GRAD.FDIV"),
  # GRAD.RECIPROCAL.zero: y*y = inf at x = +-0, so dx = -inf for g > 0
  (UPat(Ops.RECIPROCAL, name="ret"), lambda ctx, ret: (-ctx * (ret * ret),), "GRAD.RECIPROCAL"),
  # GRAD.SQRT.zero / GRAD.SQRT.negative follow from dividing by 2y (y = -0, 0 or NaN)
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (ctx / (_full(ret, 2) * ret),), "GRAD.SQRT"),
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (ctx * ret * _full(ret, math.log(2)),), "GRAD.EXP2"),
  # GRAD.LOG2.negative: applied as is for x < 0, a finite value although log2(x) is NaN (torch does the same)
  (UPat(Ops.LOG2, src=(UPat.var("x"),)), lambda ctx, x: (ctx / (x * _full(x, math.log(2))),), "GRAD.LOG2"),
  # there is no COS op: cos(x) = sin(pi/2 - x), the same construction as Tensor.cos
  (UPat(Ops.SIN, src=(UPat.var("x"),)), lambda ctx, x: (ctx * (_full(x, math.pi / 2) - x).sin(),), "GRAD.SIN"),
  (UPat(Ops.MAX, src=(UPat.var("a"), UPat.var("b"))), lambda ctx, a, b: _max_grad(ctx, a, b), "GRAD.MAX"),
  (UPat(Ops.POW, name="ret", src=(UPat.var("a"), UPat.var("b"))), lambda ctx, ret, a, b: _pow_grad(ctx, ret, a, b),
   "GRAD.POW"),
  # the condition gets nothing (GRAD.NONDIFF.none); the branch not chosen gets an exact 0, so inf/NaN cannot leak
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat(), UPat())),
   lambda ctx, c: (None, c.where(ctx, _full(ctx, 0)), c.where(_full(ctx, 0), ctx)), "GRAD.WHERE"),
  (UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat())), lambda ctx, a, b: (ctx * b, ctx * a, ctx),
   "GRAD.MULACC"),
  (UPat(Ops.CAST, name="ret"), lambda ctx, ret: _cast_grad(ctx, ret), "GRAD.CAST"),
  # constant between integers: a zero gradient, not a cut (torch's trunc)
  (UPat(Ops.TRUNC), lambda ctx: (_full(ctx, 0),), "GRAD.NONDIFF.zero"),
  (UPat((GroupOp.Comparison | GroupOp.Integer | {Ops.BITCAST})), lambda: (), "GRAD.NONDIFF.none"),
  # movement
  (UPat(Ops.RESHAPE, name="ret"), lambda ctx, ret: (UOp(Ops.RESHAPE, ctx.dtype, (ctx,), ret.src[0].shape),),
   "GRAD.RESHAPE"),
  (UPat(Ops.EXPAND, name="ret"), lambda ctx, ret: _expand_grad(ctx, ret), "GRAD.EXPAND"),
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: _permute_grad(ctx, ret), "GRAD.PERMUTE"),
  (UPat(Ops.PAD, name="ret"), lambda ctx, ret: _pad_grad(ctx, ret), "GRAD.PAD"),
  (UPat(Ops.SHRINK, name="ret"), lambda ctx, ret: _shrink_grad(ctx, ret), "GRAD.SHRINK"),
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (UOp(Ops.FLIP, ctx.dtype, (ctx,), ret.arg),), "GRAD.FLIP"),
  # reductions: GRAD.REDUCE.ADD, GRAD.REDUCE.MAX, GRAD.REDUCE.MUL
  (UPat(Ops.REDUCE_AXIS, name="ret"), lambda ctx, ret: _reduce_grad(ctx, ret), "GRAD.REDUCE.ADD"),
  # other tensor-level ops
  (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx,), "GRAD.CONTIGUOUS"),
  # Tensor.contiguous_backward marks its node with a NOOP whose cotangent is made contiguous; any other NOOP passes
  # its cotangent on unchanged, as it passes its value
  (UPat(Ops.NOOP, name="ret"), lambda ctx, ret: (UOp(Ops.CONTIGUOUS, ctx.dtype, (ctx,)),)
   if ret.arg == "contiguous_backward" else (ctx,), "GRAD.CONTIGUOUS_BACKWARD"),
  (UPat(Ops.DETACH), lambda: (None,), "GRAD.DETACH"),
  (UPat(Ops.COPY, src=(UPat.var("x"), UPat())), lambda ctx, x: (UOp(Ops.COPY, ctx.dtype, (ctx, _device(x))), None),
   "GRAD.COPY"),
  # the old content of the target is overwritten: only the value (src 1) receives the cotangent
  (UPat(Ops.ASSIGN, name="ret"), lambda ctx, ret: (None, ctx) + (None,) * (len(ret.src) - 2), "GRAD.ASSIGN"),
  # GRAD.MODEL.leaf: leaves (and the DEVICE/UNIQUE nodes under them) pass nothing on
  (UPat((Ops.BUFFER, Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.DEVICE, Ops.UNIQUE)), lambda: (), "GRAD.MODEL.leaf"),
])


def _apply_rule(node: UOp, g: UOp) -> tuple[UOp | None, ...]:
  """The cotangents the first matching rule gives `node`'s sources (empty: a leaf or a cut)."""
  hit = next(pm_gradient.results(node, g), None)
  if hit is None: raise SpecError("GRAD.MODEL.rule", f"no gradient rule for {node.op.name}")
  return hit[0]


def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """The cotangent of each target that `root` depends on, given the cotangent `root_grad` of `root`.

  GRAD.MODEL.order: nodes are visited users-first (reverse topological order), so a node's cotangent is complete
  before its rule runs; only nodes on a path from a target to `root` are visited. Targets that get no cotangent
  are left out of the result. Cotangents exist only for float nodes (GRAD.DTYPE): a contribution to a non-float
  source is dropped, which is what makes comparisons and int casts cut points (GRAD.NONDIFF)."""
  order = root.toposort()
  on_path: set[UOp] = set()
  for u in order:   # sources come first, so "reaches a target" is known for every source of u
    if u in targets or any(s in on_path for s in u.src): on_path.add(u)
  grads: dict[UOp, UOp] = {root: root_grad} if root in on_path else {}
  for node in reversed(order):
    g = grads.get(node)
    if g is None or not node.src: continue
    outs = _apply_rule(node, g)
    if not outs: continue
    if len(outs) != len(node.src):
      raise SpecError("GRAD.MODEL.rule", f"the {node.op.name} rule gave {len(outs)} cotangents for {len(node.src)} "
                      "sources")
    for s, d in zip(node.src, outs):
      if d is None or s not in on_path or not dtypes.is_float(s.dtype): continue
      # GRAD.MODEL.sum: every use adds its contribution, in the order the uses are visited
      grads[s] = d if s not in grads else grads[s] + d
  return {t: grads[t] for t in targets if t in grads}
