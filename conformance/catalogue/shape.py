"""The shape family of spec/tensor_shape.md: triangles, diagonals, roll, repeat_interleave, meshgrid, unfold,
pad_to/shrink_to, rearrange, the padding modes, the argument forms tinygrad accepts (reshape None, cat of a sequence,
sequences in indices, einsum '...', negative conv padding), max_pool2d's indices, max_unpool2d, interpolate,
normalize and grouped-query attention. Movement and selection are exact (ACC.EXACT); interpolate, normalize,
convolution and attention have bounds of their own."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import ANY, FLOATS, NUMERIC, Domain, Op, finite_inputs, fixed, sqrt_max

__all__ = ["OPS"]


def _one(min_dims=0, max_dims=3, min_side=0, max_side=4):
  return lambda: st.tuples(S.shapes(min_dims, max_dims, min_side, max_side))


def _mov(name, call, torch, params=None, shapes=None, inputs=("x",), clauses=(), dtypes=ANY, grad="GRAD", **kw) -> Op:
  """An exact entry: the values move or are selected, nothing is computed."""
  dom = Domain("movement", dtypes, inputs, params=params, shapes=shapes or _one())
  return Op(name, call, torch, dom, clauses, "EXACT", grad, kw.pop("api", None), **kw)


# ---------------------------------------------------------------------------------------------------- parameters

def _diagonal_arg(shapes, dtype):
  return st.fixed_dictionaries({"diagonal": st.integers(-4, 4)})


@st.composite
def _diagonal_params(draw, shapes, dtype):
  nd = len(shapes[0])
  dim1, dim2 = draw(st.permutations(range(nd)))[:2]
  return {"offset": draw(st.integers(-4, 4)), "dim1": dim1 - nd * draw(st.booleans()), "dim2": dim2}


@st.composite
def _roll_params(draw, shapes, dtype):
  nd = len(shapes[0])
  if nd == 0 or draw(st.integers(0, 3)) == 0: return {"shifts": draw(st.integers(-7, 7)), "dims": None}
  dims = draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd, unique_by=lambda d: d % nd))
  shifts = [draw(st.integers(-7, 7)) for _ in dims]
  if len(dims) == 1 and draw(st.booleans()): return {"shifts": shifts[0], "dims": dims[0]}
  return {"shifts": tuple(shifts), "dims": tuple(dims)}


def _repeat_interleave_params(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"repeats": st.integers(0, 3),
                                "dim": st.one_of(st.none(), *([st.integers(-nd, nd - 1)] if nd else []))})


@st.composite
def _meshgrid_shapes(draw):
  return {"shapes": tuple(draw(st.sampled_from([(), (0,), (1,), (2,), (3,)])) for _ in range(2)),
          "params": {"indexing": draw(st.sampled_from(["ij", "xy"]))}}


@st.composite
def _unfold_params(draw, shapes, dtype):
  nd = len(shapes[0])
  dim = draw(st.integers(-nd, nd - 1))
  return {"dim": dim, "size": draw(st.integers(0, shapes[0][dim])), "step": draw(st.integers(1, 3))}


@st.composite
def _pad_to_params(draw, shapes, dtype):
  grow = [draw(st.integers(0, 2)) for _ in shapes[0]]
  keep = [draw(st.booleans()) and g == 0 for g in grow]
  return {"shape": tuple(None if k else n + g for n, g, k in zip(shapes[0], grow, keep)),
          "amounts": tuple((0, g) for g in grow), "value": draw(st.sampled_from(_fill_values(dtype)))}


def _fill_values(dtype: str) -> list:
  """Pad values: converted to the dtype (DT.CONST); the float specials only for float tensors and negatives not for
  unsigned ones (torch refuses or wraps those conversions)."""
  signed = [] if dtype.startswith("uint") else [-1.5]
  return [0, 2, 0.7] + signed + ([-0.0, math.nan, -math.inf] if dtype in FLOATS else [])


@st.composite
def _shrink_to_params(draw, shapes, dtype):
  return {"shape": tuple(draw(st.one_of(st.none(), st.integers(0, n))) for n in shapes[0])}


@st.composite
def _rearrange(draw):
  """A rearrange formula and the reshape-permute-reshape it denotes (TENSOR.REARRANGE): named axes, split groups,
  merged groups, '1' axes and '...'."""
  names = ["a", "b", "c", "d", "e"][:draw(st.integers(1, 4))]
  sizes = {n: draw(st.integers(1, 3)) for n in names}
  # the left side: consecutive names grouped; maybe '...' in front standing for leading axes
  groups, i = [], 0
  while i < len(names):
    k = draw(st.integers(1, min(2, len(names) - i)))
    groups.append(names[i:i + k])
    i += k
  ell = draw(st.sampled_from([(), (2,), (1, 3)])) if draw(st.booleans()) else None
  shape = (ell or ()) + tuple(math.prod(sizes[n] for n in g) for g in groups)
  left = (["..."] if ell is not None else []) + [n[0] if len(n) == 1 else f"({' '.join(n)})" for n in groups]
  order = draw(st.permutations(names))
  out_groups, i = [], 0
  while i < len(order):
    k = draw(st.integers(1, min(2, len(order) - i)))
    out_groups.append(order[i:i + k])
    i += k
  right = [g[0] if len(g) == 1 else f"({' '.join(g)})" for g in out_groups]
  if draw(st.booleans()): right.insert(draw(st.integers(0, len(right))), "1")
  ell_at = draw(st.integers(0, len(right))) if ell is not None else None
  if ell is not None: right.insert(ell_at, "...")
  # the reference: split every left group, permute, merge every right group
  split = (ell or ()) + tuple(sizes[n] for n in names)
  ne = len(ell or ())
  seq = [f"...{j}" for j in range(ne)] + names
  right_tokens = [t for t in right if t != "1"]
  right_names = [m for t in right_tokens for m in ([f"...{j}" for j in range(ne)] if t == "..." else
                                                    t.strip("()").split())]
  perm = tuple(seq.index(n) for n in right_names)
  out = []
  for t in right:
    if t == "1": out.append(1)
    elif t == "...": out.extend(ell)
    else: out.append(math.prod(sizes[n] for n in t.strip("()").split()))
  given = {n: sizes[n] for g in groups if len(g) > 1 for n in g[1:]}   # all but one size of each split group
  return {"shapes": (shape,), "params": {"formula": f"{' '.join(left)} -> {' '.join(right)}", "sizes": given,
                                          "split": split, "perm": perm, "out": tuple(out)}}


@st.composite
def _mode_pad(draw, mode: str):
  """Shapes and flat paddings torch's non-constant modes accept: k = 1..3 padded axes of a (k+1)- or (k+2)-axis input;
  amounts below the (cut) size for reflect, at most it for circular, any for replicate; a few negative ones."""
  k = draw(st.integers(1, 3))
  lead = draw(st.sampled_from([(2,), (1, 2)]))
  sides = tuple(draw(st.integers(1, 4)) for _ in range(k))
  flat = []
  for n in reversed(sides):
    cut_b, cut_a = (draw(st.integers(-1, 0)), draw(st.integers(-1, 0))) if n > 2 else (0, 0)
    m = n + cut_b + cut_a
    top = {"reflect": m - 1, "replicate": 3, "circular": m}[mode]
    flat += [cut_b or draw(st.integers(0, top)), cut_a or draw(st.integers(0, top))]
  return {"shapes": (lead + sides,), "params": {"flat": tuple(flat), "mode": mode}}


@st.composite
def _constant_pad_params(draw, shapes, dtype):
  flat = []
  for n in reversed(shapes[0][-draw(st.integers(1, len(shapes[0]))):]):
    b = draw(st.integers(-min(n, 2), 2))
    flat += [b, draw(st.integers(-(n + min(b, 0)), 2) if n + min(b, 0) else st.integers(0, 2))]
  return {"flat": tuple(flat), "value": draw(st.sampled_from(_fill_values(dtype)))}


@st.composite
def _reshape_none(draw, shapes, dtype):
  """The first k axes kept by None, the rest merged into one axis (its size or -1) (TENSOR.RESHAPE.none)."""
  shape = shapes[0]
  k = draw(st.integers(0, len(shape)))
  rest = math.prod(shape[k:])
  # -1 only where the kept axes have elements (as torch, a -1 beside a 0-size axis is ambiguous)
  tail = () if k == len(shape) else (draw(st.sampled_from([rest, -1])) if math.prod(shape[:k]) else rest,)
  return {"shape": (None,) * k + tail, "resolved": shape[:k] + ((rest,) if tail else ())}


@st.composite
def _seq_index(draw, shapes, dtype):
  """An index with tuples and lists of ints (TENSOR.GETITEM.sequence) among ints, slices and None. The sequences
  broadcast together (one length, or 1): others are refused with torch's IndexError (TENSOR.GETITEM), which
  tests/bad_input_tensor.py checks, and have no value to compare or gradient to take."""
  items, length = [], draw(st.integers(1, 3), label="sequence length")
  for n in shapes[0]:
    kind = draw(st.sampled_from(["tuple", "list", "slice", "int"] if n else ["slice"]))
    if kind == "slice": items.append(slice(draw(st.integers(0, n)), None))
    elif kind == "int": items.append(draw(st.integers(-n, n - 1)))
    else:
      size = draw(st.sampled_from([length, 1]))
      seq = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
      items.append(tuple(seq) if kind == "tuple" else seq)
    if draw(st.integers(0, 4)) == 0: items.append(None)
  if not any(isinstance(i, (tuple, list)) for i in items) and shapes[0] and shapes[0][0]: items[0] = (0,)
  return {"index": tuple(items)}


_ELLIPSIS = [("...ij,...jk->...ik", "...ij", "...jk"), ("...ij,jk", "...ij", "jk"), ("i...->...", "i..."),
             ("...i,i->...", "...i", "i"), ("b...,b...->b...", "b...", "b..."), ("...", "..."),
             ("ij...,j", "ij...", "j"), ("...ii->...i", "...ii")]


@st.composite
def _einsum_ellipsis(draw):
  formula, *specs = draw(st.sampled_from(_ELLIPSIS))
  sizes = {c: draw(st.integers(1, 3)) for c in "bijk"}
  ell = draw(S.shapes(0, 2, 1, 3))
  shapes = []
  for spec in specs:
    own = draw(S.broadcast_to(ell))   # operands may have fewer ellipsis axes, or size 1 ones
    shapes.append(tuple(m for c in spec.replace("...", "*") for m in (own if c == "*" else (sizes[c],))))
  shapes += [(1,)] * (2 - len(shapes))
  return {"shapes": tuple(shapes), "params": {"formula": formula, "nargs": len(specs)}}


@st.composite
def _conv_negative(draw):
  """A convolution whose padding (tinygrad's left, right, top, bottom) cuts up to one element per side: each spatial
  axis is at least one longer than the kernel's reach, so the cut input still fits it."""
  g = draw(S.conv_geometry())
  d = g["dilation"]
  ks = g["w"][2:]
  hw = tuple(draw(st.integers((k - 1) * d + 2, 6)) for k in ks)
  pads = []
  for n, k in reversed(list(zip(hw, ks))):
    room = n - (k - 1) * d - 1
    b = draw(st.integers(-1, 1))
    pads += [b, draw(st.integers(-min(room + min(b, 0), 1), 1))]
  return {"shapes": ((g["x"][0], g["x"][1], *hw), g["w"], g["bias"]),
          "params": {"groups": g["groups"], "stride": g["stride"], "dilation": d, "padding": tuple(pads)}}


@st.composite
def _pool(draw):
  g = draw(S.pool_geometry())
  return {"shapes": (g["x"],), "params": {k: g[k] for k in ("kernel_size", "stride", "padding", "ceil_mode")}}


@st.composite
def _unpool(draw):
  """An (N, C, H, W) input and distinct flat positions per plane in the output plane of torch's default size."""
  g = draw(S.pool_geometry())
  k, s, p = g["kernel_size"], g["stride"] or g["kernel_size"], g["padding"]
  x = (g["x"][0], g["x"][1], draw(st.integers(1, 3)), draw(st.integers(1, 3)))
  out = tuple((n - 1) * ss - 2 * p + kk for n, ss, kk in zip(x[2:], (s, s) if isinstance(s, int) else s, k))
  plane, n = math.prod(out), x[2] * x[3]
  if plane < n: x, out, p = (x[0], x[1], 1, 1), (k[0], k[1]), 0
  plane, n = math.prod(out), x[2] * x[3]
  idx = [[draw(st.permutations(range(plane)))[:n] for _ in range(x[1])] for _ in range(x[0])]
  idx = np.array(idx).reshape(x).tolist()
  return {"shapes": (x,), "params": {"idx": idx, "kernel_size": k, "stride": g["stride"], "padding": p,
                                     "output_size": out}}


@st.composite
def _interpolate(draw, linear: bool):
  m = draw(st.integers(1, 3))
  spatial = tuple(draw(st.integers(1, 4)) for _ in range(m))
  shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), *spatial)
  size = tuple(draw(st.integers(1, 6)) for _ in range(m))
  if linear:
    ac = draw(st.booleans())
    return {"shapes": (shape,), "params": {"size": size, "mode": "linear", "align_corners": ac,
                                           "tmode": ("linear", "bilinear", "trilinear")[m - 1], "tac": ac}}
  mode = draw(st.sampled_from(["nearest", "nearest-exact"]))
  return {"shapes": (shape,), "params": {"size": size, "mode": mode, "align_corners": False, "tmode": mode,
                                         "tac": None}}


def _normalize_params(shapes, dtype):
  """p = inf only along a non-empty dim: there the result is empty and defined (TENSOR.NORMALIZE.empty), but torch's
  vector_norm refuses the inf norm of no elements (a RuntimeError), so it is no oracle for it."""
  nd = len(shapes[0])
  def with_p(dim):
    ps = [2.0, 1.0, math.inf, 0.0] if shapes[0][dim] else [2.0, 1.0, 0.0]
    return st.fixed_dictionaries({"p": st.sampled_from(ps), "dim": st.just(dim)})
  return st.integers(-nd, nd - 1).flatmap(with_p)


def _normalize_grad(case) -> bool:
  """Finite inputs; p = 1 and p = inf away from their kinks (a zero, tied largest magnitudes: GRAD.T.normalize)."""
  x, p = np.abs(np.asarray(case.inputs[0], np.float64)), case.params["p"]
  if not np.isfinite(x).all(): return False
  if p == 1.0: return not (x == 0).any()
  if p == math.inf: return len(np.unique(x)) == x.size
  return True


@st.composite
def _gqa(draw):
  batch = draw(S.shapes(0, 1, 1, 2))
  hk, group = draw(st.integers(1, 2)), draw(st.integers(1, 3))
  n, m, d, dv = (draw(st.integers(1, 3)) for _ in range(4))
  return {"shapes": ((*batch, hk * group, n, d), (*batch, hk, m, d), (*batch, hk, m, dv)), "params": {}}


# ---------------------------------------------------------------------------------------------------- entries

OPS: list[Op] = [
  _mov("tril", "x.tril(diagonal)", "torch.tril(x, diagonal)", _diagonal_arg, _one(2, 4, 0, 4),
       clauses=("TENSOR.TRIL", "OP.WHERE", "GRAD.WHERE")),
  _mov("triu", "x.triu(diagonal)", "torch.triu(x, diagonal)", _diagonal_arg, _one(2, 4, 0, 4),
       clauses=("TENSOR.TRIL", "OP.WHERE", "GRAD.WHERE")),
  _mov("diag", "x.diag()", "torch.diag(x)", shapes=_one(1, 1), clauses=("TENSOR.DIAG", "UOP.PAD", "GRAD.PAD")),
  _mov("diagonal", "x.diagonal(offset, dim1, dim2)", "torch.diagonal(x, offset, dim1, dim2)", _diagonal_params,
       _one(2, 4), clauses=("TENSOR.DIAGONAL", "UOP.SHRINK", "GRAD.SHRINK")),
  _mov("roll", "x.roll(shifts, dims)", "torch.roll(x, shifts, dims)", _roll_params,
       clauses=("TENSOR.ROLL", "UOP.SHRINK", "GRAD.EXPAND")),
  _mov("repeat_interleave", "x.repeat_interleave(repeats, dim)", "torch.repeat_interleave(x, repeats, dim)",
       _repeat_interleave_params, clauses=("TENSOR.REPEAT_INTERLEAVE", "UOP.EXPAND", "GRAD.EXPAND")),
  _mov("meshgrid", "x.meshgrid(y, indexing=indexing)", "torch.meshgrid(x, y, indexing=indexing)",
       shapes=_meshgrid_shapes, inputs=("x", "y"), clauses=("TENSOR.MESHGRID", "UOP.EXPAND", "GRAD.EXPAND"),
       note="0-d inputs count as one element, as torch's"),
  _mov("unfold", "x.unfold(dim, size, step)", "x.unfold(dim, size, step)", _unfold_params, _one(1, 3),
       clauses=("TENSOR.UNFOLD", "UOP.SHRINK", "GRAD.EXPAND")),
  _mov("pad_to", "x.pad_to(shape, value=value)", "F.pad(x, pad_arg(amounts), value=value)", _pad_to_params,
       clauses=("TENSOR.PAD_TO", "TENSOR.PAD.constant", "UOP.PAD", "GRAD.PAD"), dtypes=NUMERIC,
       note="the fill value is converted to the dtype (DT.CONST), as torch's"),
  _mov("shrink_to", "x.shrink_to(shape)", "x[tuple(slice(s) for s in shape)]", _shrink_to_params,
       clauses=("TENSOR.SHRINK_TO", "UOP.SHRINK", "GRAD.SHRINK")),
  _mov("rearrange", "x.rearrange(formula, **sizes)", "x.reshape(split).permute(perm).reshape(out)",
       shapes=_rearrange, clauses=("TENSOR.REARRANGE", "UOP.RESHAPE", "UOP.PERMUTE", "GRAD.PERMUTE"),
       note="torch has no rearrange: the reference is the reshape, permute and reshape the formula denotes"),
  _mov("pad.constant", "x.pad(flat, value=value)", "F.pad(x, flat, value=value)", _constant_pad_params,
       _one(1, 3), api=(), dtypes=NUMERIC,
       clauses=("TENSOR.PAD", "TENSOR.PAD.flat", "TENSOR.PAD.negative", "TENSOR.PAD.constant", "OP.WHERE")),
  *(_mov(f"pad.{mode}", "x.pad(flat, mode=mode)", "F.pad(x, flat, mode=mode)", shapes=lambda m=mode: _mode_pad(m),
         api=(), dtypes=FLOATS, clauses=("TENSOR.PAD", "TENSOR.PAD.flat", "TENSOR.PAD.negative", f"TENSOR.PAD.{mode}",
                                         "TENSOR.PAD.mode", "GRAD.PAD", "GRAD.SHRINK"),
         note="torch's rank limits for these modes (1 to 3 trailing axes of a 2- to 5-axis input) bound the drawn "
              "shapes; refimpl pads any axes")
    for mode in ("reflect", "replicate", "circular")),
  _mov("reshape.none", "x.reshape(shape)", "x.reshape(resolved)", _reshape_none, api=(),
       clauses=("TENSOR.RESHAPE", "TENSOR.RESHAPE.none", "UOP.RESHAPE")),
  _mov("cat.sequence", "Tensor.cat([x, y], dim=dim)", "torch.cat([x, y], dim)", api=(), inputs=("x", "y"),
       shapes=lambda: st.tuples(S.shapes(1, 3, 0, 3), st.integers(0, 2)).map(
         lambda t: {"shapes": (t[0], t[0][:-1] + (t[1],)), "params": {"dim": -1}}),
       clauses=("TENSOR.CAT", "TENSOR.CAT.sequence", "UOP.PAD")),
  _mov("stack.sequence", "Tensor.stack((x, y), dim=dim)", "torch.stack((x, y), dim)", api=(), inputs=("x", "y"),
       shapes=lambda: S.shapes(0, 3, 0, 3).flatmap(lambda s: st.integers(-len(s) - 1, len(s)).map(
         lambda d: {"shapes": (s, s), "params": {"dim": d}})),
       clauses=("TENSOR.CAT", "TENSOR.CAT.sequence", "UOP.PAD")),
  _mov("getitem.sequence", "x[index]",
       "x[tuple(torch.tensor(i) if isinstance(i, (list, tuple)) else i for i in index)]", _seq_index, _one(1, 3),
       api=(), clauses=("TENSOR.GETITEM", "TENSOR.GETITEM.sequence", "OP.CMPEQ", "GRAD.CHECK.tensor")),
  Op("einsum.ellipsis", "Tensor.einsum(formula, *[x, y][:nargs])", "torch.einsum(formula, *[x, y][:nargs])",
     Domain("matmul", FLOATS, ("x", "y"), shapes=_einsum_ellipsis, limit=sqrt_max),
     ("TENSOR.EINSUM", "TENSOR.EINSUM.ellipsis", "GRAD.CHECK.tensor"), "MATMUL", "GRAD", api=(),
     grad_domain=finite_inputs, n=lambda case: max(3, case.inputs[0].size)),
  Op("conv2d.negative-padding", "x.conv2d(w, b, groups=groups, stride=stride, dilation=dilation, padding=padding)",
     "F.conv2d(F.pad(x, padding), w, b, stride, 0, dilation, groups)",
     Domain("conv", FLOATS, ("x", "w", "b"), shapes=_conv_negative, limit=sqrt_max),
     ("TENSOR.CONV.negative-padding", "TENSOR.PAD.negative"), "CONV", "GRAD", api=(), grad_domain=finite_inputs,
     n=lambda case: case.inputs[1].shape[1] * case.inputs[1].shape[2] * case.inputs[1].shape[3] + 1,
     note="torch refuses negative padding: the reference convolves the input torch's pad has cut"),
  Op("max_pool2d.indices", "x.max_pool2d(kernel_size, stride, 1, padding, ceil_mode, return_indices=True)[1]",
     "F.max_pool2d(x, kernel_size, stride, padding, 1, ceil_mode, return_indices=True)[1]",
     Domain("pool", FLOATS, shapes=_pool), ("TENSOR.MAX_POOL2D", "TENSOR.MAX_POOL2D.indices"), "EXACT", api=(),
     out_dtype=fixed("int32"), note="default_int (int32) indices where torch's are int64 (DT.DEFAULT)"),
  Op("max_unpool2d", "x.max_unpool2d(Tensor(idx, dtype=dtypes.int32), kernel_size, stride, 1, padding, output_size)",
     "F.max_unpool2d(x, torch.tensor(idx), kernel_size, stride, padding, output_size)",
     Domain("pool", FLOATS, shapes=_unpool), ("TENSOR.MAX_UNPOOL2D", "GRAD.T.max_unpool2d", "GRAD.CHECK.tensor"),
     "EXACT", "GRAD", note="distinct positions per plane: torch's result for repeated ones is unspecified "
                           "(tests/test_tensor_shape.py checks refimpl's rule)"),
  Op("interpolate", "x.interpolate(size, mode, align_corners)", "F.interpolate(x, size=size, mode=tmode, "
     "align_corners=tac)", Domain("pool", FLOATS, shapes=lambda: _interpolate(True)),
     ("TENSOR.INTERPOLATE", "TENSOR.INTERPOLATE.linear", "TENSOR.INTERPOLATE.mode", "GRAD.CHECK.tensor"),
     "INTERPOLATE", "GRAD", second_order=False, grad_domain=finite_inputs,
     n=lambda case: len(case.params["size"]),
     note="gradients on finite inputs: an infinity times a zero weight is NaN in both, but the NaN's reach into the "
          "gradient depends on the order of the rule's sums"),
  Op("interpolate.nearest", "x.interpolate(size, mode, align_corners)", "F.interpolate(x, size=size, mode=tmode)",
     Domain("pool", FLOATS, shapes=lambda: _interpolate(False)),
     ("TENSOR.INTERPOLATE", "TENSOR.INTERPOLATE.nearest", "TENSOR.INTERPOLATE.mode", "GRAD.CHECK.tensor"),
     "EXACT", "GRAD", api=()),
  Op("normalize", "x.normalize(p, dim)", "F.normalize(x, p, dim)",
     Domain("reduce", FLOATS, params=_normalize_params, shapes=_one(1, 3, 0, 4), limit=sqrt_max),
     ("TENSOR.NORMALIZE", "TENSOR.NORMALIZE.empty", "GRAD.T.normalize", "GRAD.CHECK.tensor"), "NORMALIZE", "GRAD",
     grad_domain=_normalize_grad,
     n=lambda case: max(1, case.inputs[0].shape[case.params["dim"]]),
     note="gradients away from the kinks of p = 1 (a zero) and p = inf (tied magnitudes), GRAD.T.normalize; "
          "p = inf only along a non-empty dim, where torch refuses (TENSOR.NORMALIZE.empty)"),
  Op("scaled_dot_product_attention.gqa", "x.scaled_dot_product_attention(k, v, enable_gqa=True)",
     "sdpa_math(x, k, v, enable_gqa=True)",
     Domain("matmul", FLOATS, ("x", "k", "v"), shapes=_gqa, specials=False, lo=-3, hi=3),
     ("TENSOR.ATTENTION.gqa", "NN.ATTENTION", "GRAD.CHECK.tensor"), "ATTENTION", "GRAD", api=(),
     grad_domain=finite_inputs, n=lambda case: case.inputs[1].shape[-2] * case.inputs[0].shape[-1]),
]
