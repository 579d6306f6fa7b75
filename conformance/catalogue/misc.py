"""Tensor facts with values, decompositions, statistics, the counter-based generator and matmul parameters
(spec/tensor_misc.md). QR and SVD are checked by what defines them, whatever sign convention an implementation
picks: the factors rebuild the input, the orthogonal factors are orthogonal, and the singular values are
torch.linalg.svdvals'; tests/test_tensor_misc.py checks refimpl's conventions against torch.linalg itself."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue import oracles
from conformance.catalogue.core import ANY, FLOATS, TORCH_INTS, Domain, Op, fixed, finite_inputs, same, sqrt_max
from conformance.catalogue.linalg import _contraction, _linear_shapes, _matmul_shapes
from conformance.catalogue.reductions import _reduce, _spread, _var_limit, _var_params

__all__ = ["OPS", "threefry_reference"]

_ROUNDS = ((13, 15, 26, 6), (17, 29, 16, 24))   # Threefry-2x32 rotation constants (Salmon et al. 2011, table 4)


def threefry_reference(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  """Threefry-2x32-20 of uint64 counters under uint64 keys (broadcast), in numpy uint32 arithmetic, written from the
  published algorithm (Random123): key words k0, k1 and the parity word k0 ^ k1 ^ 0x1BD11BDA; a key injection
  before the first round and after every 4 rounds, the s-th adding k[s % 3] and k[(s + 1) % 3] + s."""
  x, key = np.broadcast_arrays(np.asarray(x, np.uint64), np.asarray(key, np.uint64))
  m32 = np.uint64(0xFFFFFFFF)
  x0, x1 = (x & m32).astype(np.uint32), (x >> np.uint64(32)).astype(np.uint32)
  k = [(key & m32).astype(np.uint32), (key >> np.uint64(32)).astype(np.uint32)]
  k.append(k[0] ^ k[1] ^ np.uint32(0x1BD11BDA))
  with np.errstate(over="ignore"):
    x0, x1 = x0 + k[0], x1 + k[1]
    for s in range(1, 6):
      for r in _ROUNDS[(s - 1) % 2]:
        x0 = x0 + x1
        x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
      x0, x1 = x0 + k[s % 3], x1 + k[(s + 1) % 3] + np.uint32(s)
  return (x1.astype(np.uint64) << np.uint64(32)) | x0.astype(np.uint64)


@st.composite
def _matrices(draw, max_side: int = 4):
  """A batch of small matrices (..., m, n), m and n from 1."""
  batch = draw(S.shapes(0, 1, 1, 2))
  return (tuple(batch) + (draw(st.integers(1, max_side)), draw(st.integers(1, max_side))),)


@st.composite
def _matrices2d(draw):
  n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
  return ((n, k), (k, m))


def _entries(case) -> int:
  """The n of ACC.QR and ACC.SVD: the number of entries of one matrix."""
  return int(np.prod(case.inputs[0].shape[-2:]))


def _eye(side: str) -> str:
  """torch source of identity matrices of x's row (`-2`) or column (`-1`) count, in x's dtype and batch."""
  return f"torch.eye(x.shape[{side}], dtype=x.dtype).expand(*x.shape[:-2], x.shape[{side}], x.shape[{side}])"


# U S Vh (= x), S, and the Gram matrix of the factor Jacobi keeps orthonormal (Vh's rows for m >= n, U's columns
# for m < n: TENSOR.SVD.zero), k x k either way
# U S Vh (= x), S, and the Gram matrix of the factor Jacobi keeps orthonormal (U's columns for m < n, else Vh's
# rows: TENSOR.SVD.zero), k x k either way
_SVD_CALL = "(lambda u, s, vh, wide: ((u[..., :s.shape[-1]] * s.unsqueeze(-2)) @ vh[..., :s.shape[-1], :], s, " \
            "u[..., :s.shape[-1]].transpose(-1, -2) @ u[..., :s.shape[-1]] if wide else " \
            "vh[..., :s.shape[-1], :] @ vh[..., :s.shape[-1], :].transpose(-1, -2)))" \
            "(*x.svd(full_matrices), x.shape[-2] < x.shape[-1])"

OPS: list[Op] = [
  # ---- facts with values
  Op("clone", "x.clone()", "x.clone()", Domain("elementwise", ANY), ("TENSOR.CLONE", "GRAD.CONTIGUOUS"), "EXACT",
     "GRAD"),
  Op("contiguous_backward", "x.contiguous_backward()", "x.clone()", Domain("elementwise", ANY),
     ("TENSOR.CONTIGUOUS_BACKWARD", "GRAD.CONTIGUOUS_BACKWARD"), "EXACT", "GRAD"),
  # the shorthands are casts: the executable spec is their oracle, as for float()/half() (torch's float64 ->
  # bfloat16 rounds twice, through float32, and its float -> int16 is C's, undefined out of range)
  *[Op(m, f"x.{m}()", None, Domain("elementwise", ANY, lo=-300, hi=300), ("TENSOR.SHORTHANDS", "OP.CAST"),
       spec=oracles.alu("CAST", lambda case, t=t: t), out_dtype=fixed(t), note="oracle: exec_alu CAST (DT.CONST)")
    for m, t in (("short", "int16"), ("bfloat16", "bfloat16"))],
  # ---- statistics: each result of the pair under its own method's bound
  _reduce("var_mean", "x.var_mean(axis, keepdim, correction)[0]",
          "torch.var_mean(x, dim=axis, keepdim=keepdim, correction=correction)[0]", "VAR",
          ("TENSOR.VAR_MEAN", "GRAD.REDUCE.ADD"), params=_var_params, limit=_var_limit, grad_domain=finite_inputs),
  _reduce("var_mean.mean", "x.var_mean(axis, keepdim, correction)[1]",
          "x.mean(dim=axis, keepdim=keepdim)", "MEAN",
          ("TENSOR.VAR_MEAN",), params=_var_params, limit=_var_limit, api=(),
          note="oracle torch.mean: torch.var_mean's running (Welford) mean gives NaN for [-inf, 0], torch.mean -inf"),
  _reduce("std_mean", "x.std_mean(axis, keepdim, correction)[0]",
          "torch.std_mean(x, dim=axis, keepdim=keepdim, correction=correction)[0]", "STD",
          ("TENSOR.VAR_MEAN", "GRAD.SQRT"), params=_var_params, limit=_var_limit, grad_domain=_spread),
  _reduce("std_mean.mean", "x.std_mean(axis, keepdim, correction)[1]",
          "x.mean(dim=axis, keepdim=keepdim)", "MEAN",
          ("TENSOR.VAR_MEAN",), params=_var_params, limit=_var_limit, api=(),
          note="oracle torch.mean: torch.std_mean's running (Welford) mean gives NaN for [-inf, 0], torch.mean -inf"),
  # ---- decompositions: convention-free properties (ACC.QR, ACC.SVD)
  Op("qr", "(lambda q, r: (q @ r, q.transpose(-1, -2) @ q))(*x.qr())", f"(x, {_eye('-2')})",
     Domain("matmul", FLOATS, shapes=_matrices, specials=False, limit=sqrt_max),
     ("TENSOR.QR", "TENSOR.QR.householder", "TENSOR.QR.zero-column"), "QR",
     out_dtype=same, n=_entries,
     note="outputs: Q @ R (= x) and Q^T Q (= I); not differentiable (TENSOR.QR); finite inputs only"),
  Op("svd", _SVD_CALL, "(x, torch.linalg.svdvals(x), torch.eye(k := min(x.shape[-2:]), dtype=x.dtype).expand("
                       "*x.shape[:-2], k, k))",
     Domain("matmul", FLOATS, shapes=lambda: _matrices(3), specials=False, limit=sqrt_max,
            params=lambda shapes, dt: st.fixed_dictionaries({"full_matrices": st.booleans()})),
     ("TENSOR.SVD", "TENSOR.SVD.jacobi", "TENSOR.SVD.sweeps", "TENSOR.SVD.order", "TENSOR.SVD.wide",
      "TENSOR.SVD.zero"), "SVD", out_dtype=same, n=_entries,
     note="outputs: U S Vh (= x), S (= torch.linalg.svdvals), the Gram matrix of the smaller factor (= I); not "
          "differentiable (TENSOR.SVD)"),
  # ---- the counter-based generator: a numpy oracle from the published algorithm
  Op("threefry", "x.threefry(y)", None, Domain("elementwise", ("uint64",), ("x", "y"), specials=False),
     ("TENSOR.THREEFRY", "DT.WRAP"), "EXACT", out_dtype=fixed("uint64"),
     spec=lambda case: threefry_reference(case.inputs[0], case.inputs[1]),
     note="torch has no threefry: the oracle is threefry_reference, written from the published algorithm"),
  # ---- matmul parameters (TENSOR.MATMUL)
  Op("matmul.int", "x @ y", "x @ y", Domain("matmul", TORCH_INTS, ("x", "y"), shapes=_matmul_shapes, lo=-100,
                                             hi=100),
     ("TENSOR.MATMUL", "TENSOR.MATMUL.dtype", "DT.WRAP"), "EXACT", api=(), reference="native",
     note="integer products and sums wrap in the operands' dtype, as torch's integer matmul"),
  Op("matmul.dtype", "x.matmul(y, dtype=dtypes.int64)", "(x.unsqueeze(-1) * y.unsqueeze(-3)).to(torch.int64).sum(-2)",
     Domain("matmul", TORCH_INTS, ("x", "y"), shapes=_matrices2d, lo=-100, hi=100), ("TENSOR.MATMUL.dtype",),
     "EXACT", api=(), reference="native", out_dtype=fixed("int64"),
     note="products in the operands' dtype (wrapping), summed in int64 (tinygrad)"),
  Op("matmul.reverse", "y.matmul(x, reverse=True)", "x @ y",
     Domain("matmul", FLOATS, ("x", "y"), shapes=_matmul_shapes, limit=sqrt_max),
     ("TENSOR.MATMUL",), "MATMUL", "GRAD", api=(), n=_contraction, grad_domain=finite_inputs),
  Op("linear.dtype", "x.linear(w, b, dtype=dtypes.float64)", "F.linear(x, w.T, b)",
     Domain("matmul", FLOATS, ("x", "w", "b"), shapes=_linear_shapes, limit=sqrt_max),
     ("TENSOR.MATMUL.dtype",), "MATMUL", "GRAD", api=(), out_dtype=fixed("float64"),
     n=lambda case: case.inputs[1].shape[0] + 1, grad_domain=finite_inputs,
     note="every operand cast to float64 first, so the reference's float64 is the computation's"),
]
