"""Movement and indexing: reshape, expand, permute, pad, shrink, flip and everything built from them (squeeze,
flatten, cat, split, repeat, indexing, ...). Values move, nothing is computed, so results are exact (ACC.EXACT);
gradients that sum over copies (expand, repeat, tensor indices) are bounded like sums."""
from __future__ import annotations

import math

from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import ANY, Domain, Op

__all__ = ["OPS"]


def _one(min_dims=0, max_dims=3, min_side=0, max_side=4):
  return lambda: st.tuples(S.shapes(min_dims, max_dims, min_side, max_side))


@st.composite
def _factorization(draw, n: int, allow_minus_one: bool = True) -> tuple[int, ...]:
  """A shape with `n` elements: n's prime factors grouped into axes, size-1 axes sprinkled in, maybe one -1."""
  if n == 0:
    dims = draw(st.lists(st.integers(1, 3), max_size=2))
    dims.insert(draw(st.integers(0, len(dims))), 0)
    return tuple(dims)
  factors, m, p = [], n, 2
  while m > 1:
    while m % p == 0: factors.append(p); m //= p
    p += 1
  dims = [1] * draw(st.integers(1, 3))
  for f in factors: dims[draw(st.integers(0, len(dims) - 1))] *= f
  if draw(st.booleans()): dims.insert(draw(st.integers(0, len(dims))), 1)
  if allow_minus_one and draw(st.booleans()): dims[draw(st.integers(0, len(dims) - 1))] = -1
  return tuple(dims)


def _reshape(shapes, dtype):
  return st.fixed_dictionaries({"shape": _factorization(math.prod(shapes[0]))})


@st.composite
def _expand_shapes(draw):
  full = draw(S.shapes(0, 3, 0, 4))
  small = draw(S.broadcast_to(full))
  return {"shapes": (small,), "params": {"shape": full}}


@st.composite
def _same_but_one_axis(draw, k: int):
  """k shapes equal except along one axis `dim` (cat)."""
  base = list(draw(S.shapes(1, 3, 0, 3)))
  dim = draw(st.integers(0, len(base) - 1))
  shapes = []
  for _ in range(k):
    base[dim] = draw(st.integers(0, 3))
    shapes.append(tuple(base))
  return {"shapes": tuple(shapes), "params": {"dim": draw(st.sampled_from([dim, dim - len(base)]))}}


@st.composite
def _equal_shapes(draw, k: int):
  shape = draw(S.shapes(0, 3, 0, 3))
  return {"shapes": (shape,) * k, "params": {"dim": draw(st.integers(-len(shape) - 1, len(shape)))}}


def _permutation(shapes, dtype):
  return st.fixed_dictionaries({"order": st.permutations(range(len(shapes[0]))).map(tuple)})


def _two_axes(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"a": st.integers(-nd, nd - 1), "b": st.integers(-nd, nd - 1)})


def _flip_axes(shapes, dtype):
  nd = len(shapes[0])
  axes = st.lists(st.integers(0, nd - 1), min_size=1, unique=True).map(tuple)
  return st.fixed_dictionaries({"axis": st.one_of(st.integers(-nd, nd - 1), axes)})


def _squeeze_dim(shapes, dtype):
  nd = len(shapes[0])
  dims = [st.none()] + ([st.integers(-nd, nd - 1), st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                                             unique=True).map(tuple)] if nd else [])
  return st.fixed_dictionaries({"dim": st.one_of(*dims)})


@st.composite
def _flatten_range(draw, shapes, dtype):
  nd = max(len(shapes[0]), 1)
  start, end = sorted((draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))))
  return {"start": start - nd * draw(st.booleans()), "end": end - nd * draw(st.booleans())}


@st.composite
def _unflatten(draw, shapes, dtype):
  dim = draw(st.integers(0, len(shapes[0]) - 1))
  return {"dim": dim, "sizes": draw(_factorization(shapes[0][dim]))}


def _repeats(shapes, dtype):
  nd = len(shapes[0])
  return st.lists(st.integers(0, 2), min_size=nd, max_size=nd + 1).map(lambda r: {"reps": tuple(r)})


@st.composite
def _split_sizes(draw, shapes, dtype):
  nd = len(shapes[0])
  dim = draw(st.integers(-nd, nd - 1))
  n = shapes[0][dim]
  if draw(st.booleans()): return {"sizes": draw(st.integers(1, max(n, 1) + 1)), "dim": dim}
  cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
  return {"sizes": [b - a for a, b in zip([0, *cuts], [*cuts, n])], "dim": dim}


def _chunks(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"chunks": st.integers(1, 5), "dim": st.integers(-nd, nd - 1)})


@st.composite
def _index(draw, shapes, dtype):
  """A Python index of a tensor of shapes[0]: ints, slices with any step, None, at most one Ellipsis, and integer
  lists (tensor indices, in range: refimpl gives 0 out of range where torch raises)."""
  shape = shapes[0]
  items, axis = [], 0
  ellipsis_at = draw(st.one_of(st.none(), st.integers(0, len(shape))))
  while axis < len(shape):
    if ellipsis_at == axis and Ellipsis not in items:
      items.append(Ellipsis)
      axis += draw(st.integers(0, len(shape) - axis))
      continue
    n = shape[axis]
    kinds = ["slice", "none"] + (["int", "list"] if n else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "none": items.append(None); continue
    if kind == "int": items.append(draw(st.integers(-n, n - 1)))
    elif kind == "slice": items.append(draw(S.slices(n)))
    else:
      k = draw(st.integers(1, 3))
      items.append(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)))
    axis += 1
    if draw(st.integers(0, 3)) == 0: break   # leave the remaining axes implicit
  return {"index": items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)}


def _mov(name, call, torch, params=None, shapes=None, inputs=("x",), clauses=(), grad="GRAD", **kw) -> Op:
  dom = Domain("movement", ANY, inputs, params=params, shapes=shapes or _one())
  return Op(name, call, torch, dom, clauses, "EXACT", grad, kw.pop("api", (name,)), **kw)


OPS: list[Op] = [
  _mov("reshape", "x.reshape(shape)", "x.reshape(shape)", _reshape, clauses=("UOP.RESHAPE", "GRAD.RESHAPE")),
  _mov("view", "x.view(shape)", "x.reshape(shape)", _reshape, clauses=("UOP.RESHAPE", "GRAD.RESHAPE")),
  _mov("expand", "x.expand(shape)", "x.expand(shape)", shapes=_expand_shapes, clauses=("UOP.EXPAND", "GRAD.EXPAND")),
  _mov("expand_as", "x.expand_as(y)", "x.expand_as(y)", inputs=("x", "y"),
       shapes=lambda: _expand_shapes().map(lambda d: {"shapes": (d["shapes"][0], d["params"]["shape"]),
                                                      "params": {}}), clauses=("UOP.EXPAND", "GRAD.EXPAND")),
  _mov("permute", "x.permute(order)", "x.permute(order)", _permutation, clauses=("UOP.PERMUTE", "GRAD.PERMUTE")),
  _mov("transpose", "x.transpose(a, b)", "x.transpose(a, b)", _two_axes, shapes=_one(min_dims=1),
       clauses=("UOP.PERMUTE", "GRAD.PERMUTE")),
  _mov("T", "x.T", "x.T", shapes=lambda: st.tuples(S.shapes(2, 2, 0, 4)), clauses=("UOP.PERMUTE", "GRAD.PERMUTE")),
  _mov("pad", "x.pad(padding)", "F.pad(x, pad_arg(padding))", lambda shapes, dt: S.paddings(shapes[0]).map(
    lambda p: {"padding": p}), shapes=_one(min_dims=1), clauses=("UOP.PAD", "GRAD.PAD")),
  _mov("shrink", "x.shrink(bounds)", "x[tuple(slice(a, b) for a, b in bounds)]", lambda shapes, dt: S.windows(
    shapes[0]).map(lambda w: {"bounds": w}), clauses=("UOP.SHRINK", "GRAD.SHRINK")),
  _mov("flip", "x.flip(axis)", "torch.flip(x, (axis,) if isinstance(axis, int) else axis)", _flip_axes,
       shapes=_one(min_dims=1), clauses=("UOP.FLIP", "GRAD.FLIP")),
  _mov("squeeze", "x.squeeze(dim)", "x.squeeze() if dim is None else x.squeeze(dim)", _squeeze_dim,
       shapes=_one(max_side=2), clauses=("UOP.RESHAPE",)),
  _mov("unsqueeze", "x.unsqueeze(dim)", "x.unsqueeze(dim)", lambda shapes, dt: st.fixed_dictionaries(
    {"dim": st.integers(-len(shapes[0]) - 1, len(shapes[0]))}), clauses=("UOP.RESHAPE",)),
  _mov("flatten", "x.flatten(start, end)", "x.flatten(start, end)", _flatten_range, clauses=("UOP.RESHAPE",)),
  _mov("unflatten", "x.unflatten(dim, sizes)", "x.unflatten(dim, sizes)", _unflatten, shapes=_one(min_dims=1),
       clauses=("UOP.RESHAPE",)),
  _mov("contiguous", "x.contiguous()", "x.contiguous()", clauses=("UOP.CONTIGUOUS", "GRAD.CONTIGUOUS")),
  _mov("detach", "x.detach()", "x.detach()", clauses=("UOP.DETACH", "GRAD.DETACH"), grad=None),
  _mov("repeat", "x.repeat(reps)", "x.repeat(reps)", _repeats, clauses=("UOP.EXPAND", "GRAD.EXPAND")),
  _mov("cat", "x.cat(y, z, dim=dim)", "torch.cat([x, y, z], dim)", shapes=lambda: _same_but_one_axis(3),
       inputs=("x", "y", "z"), clauses=("UOP.PAD", "OP.WHERE", "GRAD.PAD", "GRAD.WHERE")),
  _mov("stack", "x.stack(y, dim=dim)", "torch.stack([x, y], dim)", shapes=lambda: _equal_shapes(2), inputs=("x", "y"),
       clauses=("UOP.PAD", "OP.WHERE", "GRAD.PAD")),
  _mov("split", "x.split(sizes, dim)", "x.split(sizes, dim)", _split_sizes, shapes=_one(min_dims=1),
       clauses=("UOP.SHRINK", "GRAD.SHRINK")),
  _mov("chunk", "x.chunk(chunks, dim)", "x.chunk(chunks, dim)", _chunks, shapes=_one(min_dims=1, min_side=1),
       clauses=("UOP.SHRINK", "GRAD.SHRINK")),
  _mov("getitem", "x[index]", "take(x, index)", _index, shapes=_one(min_dims=1), api=("__getitem__",),
       clauses=("UOP.SHRINK", "UOP.FLIP", "OP.CMPEQ", "OP.WHERE", "GRAD.SHRINK", "GRAD.CHECK.tensor"),
       note="basic indexing with negative steps and tensor indices; the reference gathers numpy's positions in torch"),
]
