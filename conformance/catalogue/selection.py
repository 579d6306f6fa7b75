"""Cumulative, sorting and selection ops (spec/tensor_select.md): cumprod, cummax, cummin, logcumsumexp, sort, argsort,
topk, gather, scatter, scatter_reduce, masked_fill, masked_select, nonzero. Ops that return (values, indices) have
one entry per output, since indices are int32 whatever the input (torch: int64). Index inputs are drawn mostly in
range, with repeats (small axes), and sometimes out of range, where torch raises and a numpy oracle written from the
clause is the reference (TENSOR.GATHER.range, TENSOR.SCATTER.range)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import (ANY, FLOATS, NUMERIC, TORCH_INTS, Domain, Op, all_of, chain_in_range, fixed,
                                        floating, summed)
from conformance.catalogue.reductions import _no_zero_with_inf
from conformance.strategies import NP
from refimpl.dtype import float_max, to_dtype

__all__ = ["OPS"]


def _axis_length(case) -> int:
  shape = case.inputs[0].shape
  return shape[case.params.get("axis", case.params.get("dim", 0))] if shape else 1


def _one_axis(name: str):
  def params(shapes, dtype):
    nd = len(shapes[0])
    return st.fixed_dictionaries({name: st.integers(-nd, nd - 1) if nd else st.just(0)})
  return params


def _sort_params(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"dim": st.integers(-nd, nd - 1) if nd else st.just(0), "descending": st.booleans()})


@st.composite
def _topk_params(draw, shapes, dtype):
  nd = len(shapes[0])
  dim = draw(st.integers(-nd, nd - 1))
  return {"dim": dim, "k": draw(st.integers(0, shapes[0][dim])), "largest": draw(st.booleans()),
          "sorted_": draw(st.booleans())}


def _one(min_dims=0):
  return lambda: st.tuples(S.shapes(min_dims, 3, 0, 4))


def _cum(name, call, torch, clauses, *, dtypes=ANY, tol="EXACT", grad="GRAD", **kw) -> Op:
  dom = Domain("reduce", dtypes, params=_one_axis("axis"), shapes=_one(), lo=kw.pop("lo", -4.0), hi=kw.pop("hi", 4.0))
  return Op(name, call, torch, dom, clauses, tol, grad, n=_axis_length, **kw)


def _sort(name, call, torch, clauses, *, params=_sort_params, min_dims=0, grad="GRAD", **kw) -> Op:
  dom = Domain("reduce", ANY, params=params, shapes=_one(min_dims))
  return Op(name, call, torch, dom, clauses, "EXACT", grad, n=_axis_length, **kw)


_STABLE = "torch.sort(x, dim=dim, descending=descending, stable=True)"
_TOPK_REF = "torch.sort(x, dim=dim, descending=largest, stable=True)[{}].narrow(dim, 0, k)"

# ---------------------------------------------------------------------------------------------------- index inputs


def _ints_plain(v) -> bool:
  """Special values for float inputs only: an index draws its values from its own range (out-of-range ones
  included on purpose), and integer data is only moved, never computed on."""
  return not isinstance(v, int) or isinstance(v, bool)


@st.composite
def _index_range(draw, n: int, out_of_range: bool = True) -> tuple[int, int]:
  """Mostly [0, n): small axes give repeated indices; one time in four [-2, n+1], out of range (TENSOR.*.range),
  for entries with an oracle there."""
  return (-2, n + 1) if out_of_range and draw(st.integers(0, 3)) == 0 else (0, max(n - 1, 0))


@st.composite
def _gather_geometry(draw):
  xs = draw(S.shapes(1, 3, 1, 3))
  dim = draw(st.integers(0, len(xs) - 1))
  index = tuple(draw(st.integers(0, 3)) if k == dim else draw(st.integers(0, s)) for k, s in enumerate(xs))
  return {"shapes": (xs, index), "params": {"dim": draw(st.sampled_from([dim, dim - len(xs)]))},
          "ranges": {"index": draw(_index_range(xs[dim]))}}


@st.composite
def _scatter_geometry(draw, out_of_range: bool = True):
  xs = draw(S.shapes(1, 3, 1, 3))
  dim = draw(st.integers(0, len(xs) - 1))
  index = tuple(draw(st.integers(0, 3)) if k == dim else draw(st.integers(0, s)) for k, s in enumerate(xs))
  src = tuple(i + draw(st.integers(0, 1)) for i in index)
  return {"shapes": (xs, index, src), "params": {"dim": draw(st.sampled_from([dim, dim - len(xs)]))},
          "ranges": {"index": draw(_index_range(xs[dim], out_of_range))}}


def _index_dtype(dtype: str, i: int) -> str:
  return "int32" if i == 1 else dtype


def _in_range(case) -> bool:
  """Every index in [0, n): torch raises on the others, so gradients are compared there only."""
  x, index = case.inputs[0], np.asarray(case.inputs[1])
  n = x.shape[case.params["dim"]]
  return bool(((index >= 0) & (index < n)).all())


def _no_repeat(case) -> bool:
  """TENSOR.SCATTER.repeat: no two index positions along dim name the same target (torch's gradient differs)."""
  index, d = np.asarray(case.inputs[1]), case.params["dim"] % case.inputs[1].ndim
  if index.size == 0: return True
  moved = np.moveaxis(index, d, -1).reshape(-1, index.shape[d])
  return all(len(set(row)) == len(row) for row in moved.tolist())


def _targets(case) -> dict[tuple[int, ...], list[float]]:
  """The src values each in-range target position of x receives (TENSOR.SCATTER_REDUCE), in index order."""
  x, index, src = (np.asarray(a) for a in case.inputs)
  d, out = case.params["dim"] % max(index.ndim, 1), {}
  for pos in np.ndindex(*index.shape):
    target = pos[:d] + (int(index[pos]),) + pos[d + 1:]
    if all(0 <= i < n for i, n in zip(target, x.shape)): out.setdefault(target, []).append(float(src[pos]))
  return out


def _self_finite(case) -> bool:
  """A product mode's gradient is compared with torch only where x is finite: an untouched position is x itself and
  passes its cotangent on (TENSOR.SCATTER_REDUCE.untouched), a touched one is x times the src product and gets g
  times that product (TENSOR.SCATTER_REDUCE.prod), while torch's backward divides g * result by x at every
  position, inf / inf = NaN: a point of torch's formula, not of the op (GRAD.CHECK.points)."""
  if case.params.get("reduce", "prod") not in ("multiply", "prod"): return True
  return bool(np.isfinite(np.asarray(case.inputs[0], np.float64)).all())


def _excluded_self_untied(pick):
  """amax/amin (`pick` max/min) with include_self=False: x is no term of its targets' reduction and takes no share
  of a tie (TENSOR.SCATTER_REDUCE.exclude-self), but torch's backward still counts an x equal to the result among
  the tied ones (src gets g/(k+1), not g/k): such points are not compared with torch (GRAD.CHECK.points)."""
  def untied(case) -> bool:
    if case.params.get("include_self", True): return True
    x = np.asarray(case.inputs[0], np.float64)
    return all(x[t] != pick(vals) for t, vals in _targets(case).items())
  return untied


def _normal_range(dtype: str) -> tuple[float, float]:
  """The smallest normal and the largest finite value of float dtype `dtype`."""
  tiny = np.finfo({"float16": np.float16, "float64": np.float64}.get(dtype, np.float32)).tiny   # bfloat16: float32's
  return float(tiny), float_max(to_dtype(dtype))


def _src_product_in_range(case) -> np.ndarray:
  """Where torch's float64 result is the reference for a product mode's values (ACC.RANGE): the positions of x whose
  src terms, folded in index order in the accumulation dtype (DT.SUM), keep every partial product ordinary
  (`chain_in_range`), and whose src product, cast to the dtype before x joins it, is ordinary too: three src terms
  max, 2, 0.5 give inf in float32 where torch gives max. Untouched positions and integers are always compared."""
  x = np.asarray(case.inputs[0])
  mask = np.ones(x.shape, bool)
  if case.params.get("reduce", "prod") not in ("multiply", "prod") or case.dtypes[0] not in FLOATS: return mask
  joins = case.params.get("include_self", True)   # x multiplies the src product afterwards
  tiny, big = _normal_range(case.dtypes[0])
  for target, terms in _targets(case).items():
    ok = bool(chain_in_range(np.array(terms), case.dtypes[0], final=joins))
    product = abs(math.prod(terms)) if joins and np.isfinite(terms).all() else 0.0
    mask[target] = ok and (product == 0 or 2 * tiny <= product <= big / 2)
  return mask


def _product_defined(case) -> bool:
  """Where a product mode's gradient is compared (TENSOR.SCATTER_REDUCE.prod): no zero together with an infinity or
  a NaN among x and src (GRAD.REDUCE.MUL.inf: an undefined point of the rule, where the rule gives the zero g times
  the NaN product and the rest 0, torch NaN at every nonzero term), and at most one zero in src (torch's
  scatter_reduce has no double backward, which the bound's S needs, when two zeros meet in one target)."""
  if case.params.get("reduce", "prod") not in ("multiply", "prod"): return True
  vals = np.concatenate([np.ravel(np.asarray(case.inputs[0], np.float64)), np.ravel(np.asarray(case.inputs[2],
                                                                                               np.float64))])
  if ((vals == 0).any() and not np.isfinite(vals).all()) or int((np.asarray(case.inputs[2]) == 0).sum()) > 1:
    return False
  # ACC.RANGE: the rule divides each target's product by its factors, so every partial product of the src terms in
  # the accumulation dtype must be ordinary (the forward's condition, _src_product_in_range) and so must every
  # target's whole product
  if not _src_product_in_range(case).all(): return False
  x = np.asarray(case.inputs[0], np.float64)
  include_self = case.params.get("include_self", True)
  products = x.copy() if include_self else np.ones(x.shape)
  has_zero = (x == 0) if include_self else np.zeros(x.shape, bool)
  for target, terms in _targets(case).items():
    products[target] *= math.prod(terms)
    has_zero[target] |= 0.0 in terms
  if ((products == 0) & ~has_zero).any(): return False   # a product of nonzero factors underflowed to zero
  tiny, big = _normal_range(case.dtypes[0])
  nonzero = np.abs(products[(products != 0) & np.isfinite(products)])
  return bool(((nonzero >= tiny) & (nonzero <= big)).all())


def _np(case, i: int) -> np.ndarray:
  return np.asarray(case.inputs[i]).astype(np.float64 if case.dtypes[i] in FLOATS else NP[case.dtypes[i]])


def _gather_spec(case) -> np.ndarray:
  """TENSOR.GATHER from the clause: x[..., index, ...] along dim where 0 <= index < n, else 0."""
  x, index, d = _np(case, 0), np.asarray(case.inputs[1]), case.params["dim"] % case.inputs[0].ndim
  x = x[tuple(slice(0, i) if k != d else slice(None) for k, i in enumerate(index.shape))]
  ok = (index >= 0) & (index < x.shape[d])
  return np.where(ok, np.take_along_axis(x, np.clip(index, 0, max(x.shape[d] - 1, 0)), d), 0).astype(x.dtype)


def _scatter_spec(case) -> np.ndarray:
  """TENSOR.SCATTER from the clause: writes in index order (the last repeat wins), out-of-range ones dropped."""
  out, index, src = _np(case, 0).copy(), np.asarray(case.inputs[1]), _np(case, 2)
  d = case.params["dim"] % out.ndim
  for pos in np.ndindex(index.shape):
    t = int(index[pos])
    if 0 <= t < out.shape[d]: out[pos[:d] + (t,) + pos[d + 1:]] = src[pos]
  return out


# src cut to index's shape first (only those elements are read): torch's scatter and scatter_reduce backward (which
# the bound's S needs) fail on a larger src
_SRC = "src[tuple(slice(0, n) for n in index.shape)]"


def _scatter(name, call, torch, clauses, *, tol="EXACT", dtypes=ANY, grad_domain=None, n=None, params=None,
             **kw) -> Op:
  dom = Domain("index", dtypes, ("x", "index", "src"), input_dtype=_index_dtype, specials=_ints_plain, params=params,
               shapes=_scatter_geometry if kw.get("spec") else lambda: _scatter_geometry(False))
  return Op(name, call, torch, dom, clauses, tol, "GRAD", diff_inputs=("x", "src"),
            grad_domain=grad_domain or _in_range, n=n or (lambda case: case.inputs[1].shape[case.params["dim"]] + 1),
            **kw)


def _reduce_entry(reduce: str, tol: str, clauses: tuple[str, ...], grad_domain=None, dtypes=NUMERIC, **kw) -> Op:
  def params(shapes, dtype): return st.fixed_dictionaries({"include_self": st.booleans()})
  dom = Domain("index", dtypes, ("x", "index", "src"), lo=-2 if reduce == "prod" else -4,
               hi=2 if reduce == "prod" else 4, shapes=lambda: _scatter_geometry(False), input_dtype=_index_dtype,
               specials=_ints_plain, params=params)
  return Op(f"scatter_reduce.{reduce}", f"x.scatter_reduce(dim, index, src, {reduce!r}, include_self=include_self)",
            f"x.scatter_reduce(dim, index.long(), {_SRC}, {reduce!r}, include_self=include_self)", dom,
            ("TENSOR.SCATTER_REDUCE", "TENSOR.SCATTER_REDUCE.args", *clauses), tol, "GRAD",
            api=("scatter_reduce",), diff_inputs=("x", "src"),
            grad_domain=all_of(_in_range, grad_domain) if grad_domain else _in_range,
            n=lambda case: case.inputs[1].shape[case.params["dim"]] + 1, **kw)


def _finite(case) -> bool:
  return all(np.isfinite(np.asarray(a, np.float64)).all() for a, d in zip(case.inputs, case.dtypes) if d in FLOATS)


# ---------------------------------------------------------------------------------------------------- masks

def _mask_dtype(dtype: str, i: int) -> str:
  return "bool" if i == 1 else dtype


def _broadcasting_pair():
  from conformance.catalogue.core import broadcasting
  return broadcasting(2)


@st.composite
def _fill_value(draw, shapes, dtype):
  if dtype == "bool": value = draw(st.booleans())
  elif dtype in FLOATS: value = draw(st.sampled_from([0.0, -0.0, 1.5, -3.0, math.inf, -math.inf, math.nan]))
  else: value = draw(st.sampled_from([0, 1, 2, 2.5, 3.75]))   # truncated into ints (DT.CONST); torch refuses
                                                              # negative floats for uint8 (DT.CONST saturates)
  return {"value": value}


def _masked_select_spec(case) -> np.ndarray:
  """TENSOR.MASKED_SELECT.size from the clause: the selected elements, truncated to size or padded with fill."""
  x, m = np.broadcast_arrays(_np(case, 0), np.asarray(case.inputs[1], bool))
  picked = x[m][:case.params["size"]]
  fill = np.array(case.params["fill"]).astype(picked.dtype)
  return np.concatenate([picked, np.full(case.params["size"] - picked.size, fill, picked.dtype)])


def _nonzero_spec(case) -> np.ndarray:
  """TENSOR.NONZERO with size: the coordinates in row-major order, truncated or padded with rows of fill."""
  x = np.asarray(case.inputs[0]).astype(np.float64 if case.dtypes[0] in FLOATS else NP[case.dtypes[0]])
  rows = np.argwhere(x != 0).astype(np.int32)[:case.params["size"]]
  pad = np.full((case.params["size"] - len(rows), x.ndim), case.params["fill"], np.int32)
  return np.concatenate([rows.reshape(len(rows), x.ndim), pad])


def _size_fill(shapes, dtype):
  return st.fixed_dictionaries({"size": st.integers(0, 6), "fill": st.sampled_from([0, -1, 7])})


# ---------------------------------------------------------------------------------------------------- entries

_CUMMAX = ("TENSOR.CUMMAX", "TENSOR.CUMMAX.tie", "TENSOR.CUMMAX.nan", "TENSOR.PICK")
_SORT = ("TENSOR.SORT", "TENSOR.SORT.stable", "TENSOR.SORT.nan", "TENSOR.SORT.zero", "TENSOR.PICK")
_TOPK = ("TENSOR.TOPK", "TENSOR.TOPK.k", "TENSOR.TOPK.sorted", *_SORT)

OPS: list[Op] = [
  _cum("cumprod", "x.cumprod(axis)", "x.cumprod(axis) if x.ndim else x", ("TENSOR.CUMPROD", "TENSOR.CUMPROD.zero",
       "GRAD.REDUCE.MUL", "DT.SUM"), tol="PROD", lo=-2, hi=2, out_dtype=summed, grad_domain=_no_zero_with_inf,
       note="DT.SUM: int32 for small ints and bool (torch: int64); no gradient where a zero meets an infinity "
            "(GRAD.REDUCE.MUL.inf)"),
  _cum("cummax", "x.cummax(axis)[0]", "torch.cummax(x, axis)[0]", (*_CUMMAX, "TENSOR.CUMMAX.grad"),
       api=("cummax",)),
  _cum("cummax.indices", "x.cummax(axis)[1]", "torch.cummax(x, axis)[1]", _CUMMAX, grad=None,
       out_dtype=fixed("int32"), note="int32 indices (torch: int64)"),
  _cum("cummin", "x.cummin(axis)[0]", "torch.cummin(x, axis)[0]", (*_CUMMAX, "TENSOR.CUMMAX.grad"),
       api=("cummin",)),
  _cum("cummin.indices", "x.cummin(axis)[1]", "torch.cummin(x, axis)[1]", _CUMMAX, grad=None,
       out_dtype=fixed("int32"), note="int32 indices (torch: int64)"),
  _cum("logcumsumexp", "x.logcumsumexp(axis)", "torch.logcumsumexp(x, axis) if x.ndim else x",
       ("TENSOR.LOGCUMSUMEXP", "OP.EXP2", "OP.LOG2", "DT.PROMOTE.float"), dtypes=FLOATS + TORCH_INTS,
       tol="LOGSUMEXP", lo=-10, hi=10, out_dtype=floating, reference="float64-cast",
       note="integer inputs in the default float (torch refuses them)"),
  _sort("sort", "x.sort(dim, descending)[0]", _STABLE + "[0]", (*_SORT, "TENSOR.SORT.grad"), api=("sort",)),
  _sort("sort.indices", "x.sort(dim, descending)[1]", _STABLE + "[1]", _SORT, grad=None, out_dtype=fixed("int32"),
        note="int32 indices (torch: int64)"),
  _sort("argsort", "x.argsort(dim, descending)", _STABLE + "[1]", _SORT, grad=None, out_dtype=fixed("int32"),
        note="int32 indices (torch: int64)"),
  _sort("topk", "x.topk(k, dim, largest, sorted_)[0]", _TOPK_REF.format(0), (*_TOPK, "TENSOR.SORT.grad"),
        params=_topk_params, min_dims=1, api=("topk",),
        note="compared with the first k of torch's stable sort: torch.topk orders ties differently (TENSOR.TOPK)"),
  _sort("topk.indices", "x.topk(k, dim, largest, sorted_)[1]", _TOPK_REF.format(1), _TOPK, params=_topk_params,
        min_dims=1, grad=None, out_dtype=fixed("int32"), note="int32 indices of the stable order (TENSOR.TOPK)"),
  Op("gather", "x.gather(dim, index)", "torch.gather(x, dim, index.long())",
     Domain("index", ANY, ("x", "index"), shapes=_gather_geometry, input_dtype=_index_dtype, specials=_ints_plain),
     ("TENSOR.GATHER", "TENSOR.GATHER.args", "TENSOR.GATHER.range", "TENSOR.PICK"), "EXACT", "GRAD",
     diff_inputs=("x",), spec=_gather_spec, grad_domain=_in_range,
     note="out-of-range indices give 0 (torch raises: the numpy oracle of the clause is the reference there)"),
  _scatter("scatter", "x.scatter(dim, index, src)", f"x.scatter(dim, index.long(), {_SRC})",
           ("TENSOR.SCATTER", "TENSOR.SCATTER.args", "TENSOR.SCATTER.repeat", "TENSOR.SCATTER.range", "TENSOR.PICK"),
           spec=_scatter_spec, grad_domain=all_of(_in_range, _no_repeat),
           note="the last repeat wins (torch on CPU too); gradients compared where no index repeats "
                "(TENSOR.SCATTER.repeat: torch's differs)"),
  _scatter("scatter.reduce", "x.scatter(dim, index, src, reduce=reduce)",
           f"x.scatter_reduce(dim, index.long(), {_SRC}, 'sum' if reduce == 'add' else 'prod')",
           ("TENSOR.SCATTER", "TENSOR.SCATTER.reduce", "TENSOR.SCATTER_REDUCE.untouched", "TENSOR.SCATTER_REDUCE.prod"),
           tol="SUM", dtypes=FLOATS + TORCH_INTS, params=lambda shapes, dtype: st.fixed_dictionaries(
             {"reduce": st.sampled_from(["add", "multiply"])}),
           grad_domain=all_of(_in_range, _product_defined, _self_finite), torch_defined=_src_product_in_range,
           api=("scatter",)),
  _reduce_entry("sum", "SUM", ("DT.SUM",)),
  _reduce_entry("prod", "PROD", ("GRAD.REDUCE.MUL", "TENSOR.SCATTER_REDUCE.untouched",
                "TENSOR.SCATTER_REDUCE.prod"), grad_domain=all_of(_product_defined, _self_finite),
                torch_defined=_src_product_in_range,
                note="values are not compared with torch where a partial product of the src terms overflows or "
                     "underflows (ACC.RANGE)"),
  _reduce_entry("mean", "MEAN", ("TENSOR.SCATTER_REDUCE.mean",)),
  _reduce_entry("amax", "MAX", ("OP.MAX.nan", "GRAD.REDUCE.MAX.tie", "TENSOR.SCATTER_REDUCE.exclude-self"),
                grad_domain=all_of(_finite, _excluded_self_untied(max))),
  _reduce_entry("amin", "MAX", ("OP.MAX.nan", "GRAD.REDUCE.MAX.tie", "TENSOR.SCATTER_REDUCE.exclude-self"),
                grad_domain=all_of(_finite, _excluded_self_untied(min))),
  Op("masked_fill", "x.masked_fill(mask, value)", "x.masked_fill(mask, value)",
     Domain("elementwise", ANY, ("x", "mask"), shapes=_broadcasting_pair, input_dtype=_mask_dtype,
            params=_fill_value), ("TENSOR.MASKED_FILL", "TENSOR.MASKED_FILL.args", "OP.WHERE", "DT.CONST"),
     "EXACT", "GRAD", diff_inputs=("x",),
     note="the value is converted to x's dtype (torch); the three broadcast together"),
  Op("masked_fill.tensor", "x.masked_fill(mask, value)", "x.masked_fill(mask, value)",
     Domain("elementwise", ANY, ("x", "mask", "value"), input_dtype=_mask_dtype,
            shapes=lambda: _broadcasting_pair().map(lambda s: (*s, ()))),
     ("TENSOR.MASKED_FILL", "OP.WHERE", "GRAD.WHERE"), "EXACT", "GRAD", api=("masked_fill",)),
  Op("masked_select", "x.masked_select(mask)", "torch.masked_select(x, mask)",
     Domain("index", ANY, ("x", "mask"), shapes=_broadcasting_pair, input_dtype=_mask_dtype),
     ("TENSOR.MASKED_SELECT", "TENSOR.MASKED_SELECT.args", "TENSOR.MASKED_SELECT.realize", "TENSOR.PICK"),
     "EXACT", "GRAD", diff_inputs=("x",)),
  Op("masked_select.size", "x.masked_select(mask, size=size, fill_value=fill)", None,
     Domain("index", ANY, ("x", "mask"), shapes=_broadcasting_pair, input_dtype=_mask_dtype, params=_size_fill),
     ("TENSOR.MASKED_SELECT", "TENSOR.MASKED_SELECT.size"), "EXACT", spec=_masked_select_spec,
     api=("masked_select",), note="torch has no size: the numpy oracle of the clause is the reference"),
  Op("nonzero", "x.nonzero()", "torch.nonzero(x)", Domain("index", ANY, shapes=_one()),
     ("TENSOR.NONZERO", "TENSOR.MASKED_SELECT.realize"), "EXACT", out_dtype=fixed("int32"),
     note="int32 coordinates (torch: int64)"),
  Op("nonzero.size", "x.nonzero(size=size, fill_value=fill)", None,
     Domain("index", ANY, shapes=_one(), params=_size_fill), ("TENSOR.NONZERO", "TENSOR.NONZERO.args",
                                                              "TENSOR.MASKED_SELECT.size"), "EXACT",
     spec=_nonzero_spec, out_dtype=fixed("int32"), api=("nonzero",),
     note="int32 coordinates; torch has no size: the numpy oracle of the clause is the reference"),
]
