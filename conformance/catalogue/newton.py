"""Tensor.newton_schulz (TENSOR.NEWTON_SCHULZ): torch has no such op, so the reference is the clause written out in
torch ops (`newton_schulz_ref`), run in float64 like every torch reference; autograd through it gives the VJPs."""
from __future__ import annotations

from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import TORCH_HELPERS, Domain, Op, finite_inputs, sqrt_max

__all__ = ["OPS"]

MUON = (3.4445, -4.775, 2.0315)


def newton_schulz_ref(x, steps: int, params: tuple[float, ...], eps: float = 1e-7):
  """TENSOR.NEWTON_SCHULZ in torch: transpose a tall matrix (.tall), scale by the Frobenius norm plus eps and
  iterate g <- sum_i params[i] (g g^T)^i g (.scale)."""
  if x.shape[-2] > x.shape[-1]: return newton_schulz_ref(x.transpose(-2, -1), steps, params, eps).transpose(-2, -1)
  g = x / ((x * x).sum(dim=(-2, -1), keepdim=True).sqrt() + eps)
  for _ in range(steps):
    gram = g @ g.transpose(-2, -1)
    term, out = g, params[0] * g
    for p in params[1:]:
      term = gram @ term
      out = out + p * term
    g = out
  return g


TORCH_HELPERS["newton_schulz_ref"] = newton_schulz_ref   # the torch expression below calls it


@st.composite
def _shapes(draw):
  """A batch of 0 or 1 axes over small matrices, tall and wide, with the iteration's parameters."""
  shape = (*draw(S.shapes(0, 1, 1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
  steps = draw(st.integers(0, 3))
  params = draw(st.sampled_from([MUON, (2.0, -1.5, 0.5), (1.5, -0.5), (1.0,)]))
  return {"shapes": (shape,), "params": {"steps": steps, "params": params}}


def _n(case) -> int:
  """The reductions' length: the matrix's elements (the norm), times the products of each step."""
  rows, cols = case.inputs[0].shape[-2:]
  return rows * cols * (1 + case.params["steps"] * len(case.params["params"]))


OPS: list[Op] = [
  Op("newton_schulz", "x.newton_schulz(steps, params)", "newton_schulz_ref(x, steps, params)",
     Domain("matmul", ("float32", "float64"), shapes=_shapes, limit=sqrt_max),
     ("TENSOR.NEWTON_SCHULZ", "TENSOR.NEWTON_SCHULZ.tall", "TENSOR.NEWTON_SCHULZ.scale", "GRAD.CHECK.tensor"),
     "NEWTON_SCHULZ", "GRAD", n=_n, grad_domain=finite_inputs,
     note="torch has none: the reference is the clause in torch ops (newton_schulz_ref), in float64"),
]
