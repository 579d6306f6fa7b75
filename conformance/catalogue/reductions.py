"""Reductions and the ops built on them: sum, prod, max, min, mean, var, std, argmax, argmin, any, all, softmax,
log_softmax, logsumexp, cumsum. Their bounds grow with the reduction length `n` (ACC.REDUCE)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.accuracy import eps
from conformance.catalogue.core import (ANY, FLOATS, TORCH_INTS, Domain, Op, boolean, chain_in_range, finite_inputs,
                                        fixed, floating, reduced_count, sum_limit, summed)
from refimpl.dtype import float_max, to_dtype

__all__ = ["OPS"]


def _axis_keepdim(shapes, dtype):
  return st.fixed_dictionaries({"axis": S.axes(len(shapes[0])), "keepdim": st.booleans()})


def _one_axis(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"axis": st.integers(-nd, nd - 1) if nd else st.just(0)})


def _one_axis_keepdim(shapes, dtype):
  nd = len(shapes[0])
  return st.fixed_dictionaries({"axis": st.one_of(st.none(), st.integers(-nd, nd - 1)) if nd else st.none(),
                                "keepdim": st.booleans()})


def _var_params(shapes, dtype):
  return st.fixed_dictionaries({"axis": S.axes(len(shapes[0])), "keepdim": st.booleans(),
                                "correction": st.sampled_from([0, 1])})


def _no_zero_with_inf(case) -> bool:
  """GRAD.REDUCE.MUL.inf: a zero together with an infinity or a NaN is an undefined point of the rule (never drawn);
  and every nonzero product is a normal number (ACC.RANGE: the rule divides the product by each element, so a
  product that underflows or overflows loses the gradient)."""
  x = np.asarray(case.inputs[0], np.float64)
  if (x == 0).any() and not np.isfinite(x).all(): return False
  if x.ndim == 0 or not np.isfinite(x).all(): return True
  axis = case.params.get("axis")
  axes = None if axis is None else tuple(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))
  with np.errstate(all="ignore"):
    p = np.abs(np.prod(x, axis=axes))
  dt = to_dtype(case.dtypes[0])
  ebits = {"float16": 5, "bfloat16": 8, "float32": 8, "float64": 11}[case.dtypes[0]]
  return bool(((p == 0) | ((p >= 2.0 ** (3 - (1 << (ebits - 1)))) & (p <= float_max(dt) / 2))).all())


def _product_in_range(case) -> np.ndarray:
  """Where torch's float64 product is the reference (ACC.RANGE): the outputs whose fold, in the order the kernel
  forms it (the reduced axes last, row-major; EXEC.REDUCE.blocked), keeps every partial product ordinary
  (`chain_in_range`): max * 2 * 0.5 is inf in float32 where torch gives max. Integers wrap and are always compared."""
  x = np.asarray(case.inputs[0], np.float64)
  axis, keepdim = case.params.get("axis"), case.params.get("keepdim", False)
  axes = tuple(range(x.ndim)) if axis is None else tuple(sorted({a % x.ndim for a in ((axis,) if isinstance(axis, int)
                                                                                       else axis)}))
  kept = tuple(n for i, n in enumerate(x.shape) if i not in axes)
  out_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdim else kept
  if case.dtypes[0] not in FLOATS: return np.ones(out_shape, bool)
  n = math.prod(x.shape[a] for a in axes)
  chains = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim))).reshape(*kept, n)
  return chain_in_range(chains, case.dtypes[0]).reshape(out_shape)


def _spread(case) -> bool:
  """Finite inputs, and every reduced group has more elements than the correction and a spread of more than 16 ulps
  of its largest element and more than 16 sqrt(smallest normal): near a zero spread the gradient is ill-conditioned
  (the rounded mean leaves deviations of a few ulps where torch's float64 reference may have exact zeros)."""
  x, axis = np.asarray(case.inputs[0], np.float64), case.params.get("axis")
  if not finite_inputs(case) or x.ndim == 0 or x.size == 0: return False
  if reduced_count(x.shape, axis) <= case.params.get("correction", 1): return False
  axes = None if axis is None else tuple(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))
  top = np.abs(x).max(axis=axes)
  ebits = {"float16": 5, "bfloat16": 8, "float32": 8, "float64": 11}[case.dtypes[0]]
  floor = 16 * math.sqrt(2.0 ** (2 - (1 << (ebits - 1))))
  return bool((np.ptp(x, axis=axes) > np.maximum(16 * eps(case.dtypes[0]) * top, floor)).all())


def _var_limit(dtype: str) -> float:
  """ACC.RANGE for var and std: sqrt(largest finite / 64) / 4, so that 64 squared deviations sum without overflow."""
  return math.sqrt(float_max(to_dtype(dtype)) / 64) / 4


def _n(case) -> int:
  return reduced_count(case.inputs[0].shape, case.params.get("axis"))


def _n_axis(case) -> int:
  shape = case.inputs[0].shape
  return shape[case.params["axis"]] if shape else 1


def _reduce(name, call, torch, tol, clauses, *, dtypes=FLOATS, params=_axis_keepdim, nonempty=False, grad="GRAD",
            lo=-4.0, hi=4.0, n=_n, limit=sum_limit, **kw) -> Op:
  """A reduction of one tensor; `nonempty` keeps reduced axes nonzero where torch refuses empty reductions."""
  dom = Domain("reduce", dtypes, lo=lo, hi=hi, params=params, limit=limit,
               shapes=lambda: st.tuples(S.shapes(0, 3, 1 if nonempty else 0, 4)))
  return Op(name, call, torch, dom, clauses, tol, grad, kw.pop("api", (name,)), n=n, **kw)


OPS: list[Op] = [
  _reduce("sum", "x.sum(axis, keepdim)", "x.sum(dim=axis, keepdim=keepdim)", "SUM",
          ("GRAD.REDUCE.ADD", "DT.SUM", "UOP.REDUCE_AXIS"), dtypes=ANY, out_dtype=summed,
          note="DT.SUM: bool and small integers accumulate in int32 here, int64 in torch (compared modulo 2**bits)"),
  _reduce("prod", "x.prod(axis, keepdim)", "prod(x, axis, keepdim)", "PROD",
          ("GRAD.REDUCE.MUL", "GRAD.REDUCE.MUL.zero", "DT.SUM"), dtypes=FLOATS + TORCH_INTS, lo=-2, hi=2,
          grad_domain=_no_zero_with_inf, out_dtype=summed, torch_defined=_product_in_range,
          note="DT.SUM: integer products accumulate in int32 here, int64 in torch; gradients are not compared where "
               "a zero meets an infinity or a NaN (GRAD.REDUCE.MUL.inf), values not where a partial product of the "
               "fold overflows or underflows (ACC.RANGE)"),
  _reduce("max", "x.max(axis, keepdim)", "torch.amax(x, dim=dims(axis, x.ndim), keepdim=keepdim)", "MAX",
          ("OP.MAX", "OP.MAX.nan", "GRAD.REDUCE.MAX", "GRAD.REDUCE.MAX.tie"), dtypes=ANY, nonempty=True,
          note="compared with torch.amax (GRAD.REDUCE.MAX.tie)"),
  _reduce("min", "x.min(axis, keepdim)", "torch.amin(x, dim=dims(axis, x.ndim), keepdim=keepdim)", "MAX",
          ("OP.MAX", "OP.NEG", "GRAD.REDUCE.MAX"), dtypes=ANY, nonempty=True),
  _reduce("mean", "x.mean(axis, keepdim)", "x.mean(dim=axis, keepdim=keepdim)", "MEAN",
          ("GRAD.REDUCE.ADD", "OP.FDIV", "DT.PROMOTE.float"), dtypes=FLOATS + TORCH_INTS, out_dtype=floating,
          reference="float64-cast",
          note="integer inputs: the mean in the default float (torch refuses the mean of integers)"),
  _reduce("var", "x.var(axis, keepdim, correction)", "x.var(dim=axis, keepdim=keepdim, correction=correction)", "VAR",
          ("GRAD.REDUCE.ADD", "GRAD.MUL"), params=_var_params, limit=_var_limit, grad_domain=finite_inputs,
          note="gradients on finite inputs: with an infinity the order of the rule's sums decides inf - inf"),
  _reduce("std", "x.std(axis, keepdim, correction)", "x.std(dim=axis, keepdim=keepdim, correction=correction)", "STD",
          ("GRAD.REDUCE.ADD", "GRAD.SQRT"), params=_var_params, limit=_var_limit, grad_domain=_spread,
          note="gradients only where every group has a clear nonzero spread (ill-conditioned near 0)"),
  _reduce("argmax", "x.argmax(axis, keepdim)", "x.argmax(dim=axis, keepdim=keepdim)", "EXACT",
          ("OP.MAX", "OP.CMPEQ"), dtypes=FLOATS + TORCH_INTS, params=_one_axis_keepdim, nonempty=True, grad=None,
          out_dtype=fixed("int32"), note="int32 indices (DT.DEFAULT; torch: int64); NaN counts as the maximum"),
  _reduce("argmin", "x.argmin(axis, keepdim)", "(x.to(torch.int8) if x.dtype == torch.bool else x).argmin(dim=axis, "
          "keepdim=keepdim)", "EXACT",
          ("OP.MAX", "OP.CMPEQ"), dtypes=FLOATS + TORCH_INTS + ("bool",), params=_one_axis_keepdim, nonempty=True,
          grad=None, out_dtype=fixed("int32"), note="int32 indices (DT.DEFAULT; torch: int64)"),
  _reduce("any", "x.any(axis, keepdim)", "torch.any(x, dim=dims(axis, x.ndim), keepdim=keepdim) if x.ndim else "
          "x != 0", "EXACT", ("OP.CAST.to-bool", "OP.MAX.bool"), dtypes=ANY, grad=None, out_dtype=boolean,
          note="bool result for every input dtype (torch: uint8 for uint8)"),
  _reduce("all", "x.all(axis, keepdim)", "torch.all(x, dim=dims(axis, x.ndim), keepdim=keepdim) if x.ndim else "
          "x != 0", "EXACT", ("OP.CAST.to-bool", "OP.MAX.bool"), dtypes=ANY, grad=None, out_dtype=boolean),
  _reduce("softmax", "x.softmax(axis)", "torch.softmax(x, axis)", "SOFTMAX",
          ("OP.EXP2", "OP.FDIV", "GRAD.CHECK.tensor"), params=_one_axis, n=_n_axis, lo=-10, hi=10, second_order=True),
  _reduce("log_softmax", "x.log_softmax(axis)", "torch.log_softmax(x, axis)", "LOG_SOFTMAX",
          ("OP.EXP2", "OP.LOG2", "GRAD.CHECK.tensor"), params=_one_axis, n=_n_axis, lo=-10, hi=10),
  _reduce("logsumexp", "x.logsumexp(axis, keepdim)", "torch.logsumexp(x, dim=dims(axis, x.ndim), keepdim=keepdim)",
          "LOGSUMEXP", ("OP.EXP2", "OP.LOG2", "GRAD.CHECK.tensor"), lo=-10, hi=10),
  _reduce("cumsum", "x.cumsum(axis)", "x.cumsum(axis) if x.ndim else x", "SUM", ("GRAD.REDUCE.ADD", "DT.SUM"),
          dtypes=FLOATS + TORCH_INTS, params=_one_axis, n=_n_axis, out_dtype=summed,
          note="DT.SUM accumulation dtypes, as for sum"),
]
