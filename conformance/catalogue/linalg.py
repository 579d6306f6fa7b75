"""Matrix products, convolution and pooling: sums of products over a contraction of length n (ACC.REDUCE)."""
from __future__ import annotations

import math

from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import FLOATS, Domain, Op, finite_inputs, sqrt_max, sum_limit

__all__ = ["OPS"]


@st.composite
def _matmul_shapes(draw):
  """(..., n, k) @ (..., k, m) with broadcast batch axes; either side may be 1-d."""
  n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
  batch = draw(S.shapes(0, 2, 1, 3))
  a = (*draw(S.broadcast_to(batch)), n, k) if draw(st.integers(0, 3)) else (k,)
  b = (*draw(S.broadcast_to(batch)), k, m) if draw(st.integers(0, 3)) else (k,)
  return (a, b)


@st.composite
def _linear_shapes(draw):
  lead = draw(S.shapes(0, 2, 1, 3))
  fin, fout = draw(st.integers(1, 4)), draw(st.integers(1, 4))
  return ((*lead, fin), (fin, fout), (fout,))


_EINSUM = [("ij,jk->ik", "ij", "jk"), ("ij->ji", "ij"), ("ii->i", "ii"), ("ij->", "ij"), ("i,j->ij", "i", "j"),
           ("bij,bjk->bik", "bij", "bjk"), ("ij,ij->i", "ij", "ij"), ("ij,jk", "ij", "jk"), ("i,i", "i", "i"),
           ("ijk->kji", "ijk")]


@st.composite
def _einsum_shapes(draw):
  formula, *specs = draw(st.sampled_from(_EINSUM))
  sizes = {c: draw(st.integers(1, 3)) for c in "bijk"}
  shapes = tuple(tuple(sizes[c] for c in spec) for spec in specs)
  shapes = shapes + ((1,),) * (2 - len(shapes))   # unused inputs keep the domain's two names
  return {"shapes": shapes, "params": {"formula": formula, "nargs": len(specs)}}


def _contraction(case) -> int:
  """k of a matmul: the last axis of the first operand."""
  return case.inputs[0].shape[-1]


@st.composite
def _conv(draw):
  g = draw(S.conv_geometry())
  return {"shapes": (g["x"], g["w"], g["bias"]), "params": {k: g[k] for k in ("groups", "stride", "dilation",
                                                                               "padding")}}


@st.composite
def _pool(draw):
  g = draw(S.pool_geometry())
  return {"shapes": (g["x"],), "params": {k: g[k] for k in ("kernel_size", "stride", "padding", "ceil_mode")}}


OPS: list[Op] = [
  Op("matmul", "x @ y", "x @ y", Domain("matmul", FLOATS, ("x", "y"), shapes=_matmul_shapes, limit=sqrt_max),
     ("GRAD.CHECK.tensor", "GRAD.REDUCE.ADD", "GRAD.MUL"), "MATMUL", "GRAD", ("matmul", "__matmul__"),
     n=_contraction, second_order=True, grad_domain=finite_inputs),
  Op("dot", "x.dot(y)", "x @ y", Domain("matmul", FLOATS, ("x", "y"), shapes=_matmul_shapes, limit=sqrt_max),
     ("GRAD.CHECK.tensor",), "MATMUL", "GRAD", n=_contraction, grad_domain=finite_inputs),
  Op("rmatmul", "x.tolist() @ y", "x @ y", Domain("matmul", ("float32",), ("x", "y"), shapes=_matmul_shapes,
                                                  specials=False, limit=sqrt_max),
     ("GRAD.CHECK.tensor",), "MATMUL", None, ("__rmatmul__",), n=_contraction,
     note="a nested list on the left becomes a default-float tensor"),
  Op("linear", "x.linear(w, b)", "F.linear(x, w.T, b)", Domain("matmul", FLOATS, ("x", "w", "b"),
                                                              shapes=_linear_shapes, limit=sqrt_max),
     ("GRAD.CHECK.tensor",), "MATMUL", "GRAD", n=lambda case: case.inputs[1].shape[0] + 1,
     note="weight layout (in, out) as tinygrad; torch's F.linear takes the transpose", grad_domain=finite_inputs),
  Op("einsum", "Tensor.einsum(formula, *[x, y][:nargs])", "torch.einsum(formula, *[x, y][:nargs])",
     Domain("matmul", FLOATS, ("x", "y"), shapes=_einsum_shapes, limit=sqrt_max),
     ("GRAD.CHECK.tensor", "GRAD.REDUCE.ADD"),
     "MATMUL", "GRAD", n=lambda case: max(math.prod(a.shape) for a in case.inputs), grad_domain=finite_inputs),
  Op("conv2d", "x.conv2d(w, b, groups=groups, stride=stride, dilation=dilation, padding=padding)",
     "F.conv2d(x, w, b, stride, padding, dilation, groups)",
     Domain("conv", FLOATS, ("x", "w", "b"), shapes=_conv, limit=sqrt_max),
     ("GRAD.CHECK.tensor", "UOP.PAD", "GRAD.REDUCE.ADD"), "CONV", "GRAD",
     n=lambda case: math.prod(case.inputs[1].shape[1:]) + 1, grad_domain=finite_inputs),
  Op("max_pool2d", "x.max_pool2d(kernel_size, stride, 1, padding, ceil_mode)",
     "F.max_pool2d(x, kernel_size, stride, padding, 1, ceil_mode)", Domain("pool", FLOATS, shapes=_pool),
     ("OP.MAX", "GRAD.REDUCE.MAX", "GRAD.CHECK.tensor"), "MAX", "GRAD"),
  Op("avg_pool2d", "x.avg_pool2d(kernel_size, stride, 1, padding, ceil_mode, count_include_pad)",
     "F.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad)",
     Domain("pool", FLOATS, shapes=_pool, limit=sum_limit, params=lambda shapes, dt: st.fixed_dictionaries(
       {"count_include_pad": st.booleans()})),
     ("OP.FDIV", "GRAD.REDUCE.ADD", "GRAD.CHECK.tensor"), "AVG_POOL", "GRAD",
     n=lambda case: math.prod(case.params["kernel_size"]), grad_domain=finite_inputs),
]
