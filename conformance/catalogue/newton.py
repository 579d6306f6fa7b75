"""Tensor.newton_schulz (TENSOR.NEWTON_SCHULZ): torch has no such op, so the reference is the clause written out in
torch ops (`newton_schulz_ref`), run in float64 like every torch reference; autograd through it gives the VJPs."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import TORCH_HELPERS, Domain, Op, all_of, finite_inputs, sqrt_max
from conformance.strategies import Case

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


def _squares_normal(case: Case) -> bool:
  """ACC.RANGE for TENSOR.NEWTON_SCHULZ.scale: every element 0 or at least 16 sqrt(smallest normal), so its square
  does not underflow. A matrix of smaller elements has a norm of 0 in the dtype, and the norm's gradient 1 / (2 N)
  times the zero squares is NaN where the exact gradient is g / eps (x = the smallest float32 subnormal: NaN against
  1257302, met by the thorough profile)."""
  a = np.abs(np.asarray(case.inputs[0], np.float64))
  return bool(((a == 0) | (a >= 16 * np.sqrt(np.finfo(np.dtype(case.dtypes[0])).tiny))).all())


def _step(g: np.ndarray, params) -> np.ndarray:
  """One step G <- sum_i params[i] (G G^T)^i G, in float64, terms in the clause's order."""
  gram = g @ g.swapaxes(-1, -2)
  term, out = g, params[0] * g
  for p in params[1:]:
    term = gram @ term
    out = out + p * term
  return out


def _step_vjp(g: np.ndarray, params, m: np.ndarray) -> np.ndarray:
  """The VJP of `_step` at g for the cotangent m, by the chain rule written out (T_i = A T_(i-1), A = G G^T)."""
  gram, terms = g @ g.swapaxes(-1, -2), [g]
  for _ in params[1:]: terms.append(gram @ terms[-1])
  d_term, d_gram = params[-1] * m, np.zeros_like(gram)
  for i in range(len(params) - 1, 0, -1):
    d_gram = d_gram + d_term @ terms[i - 1].swapaxes(-1, -2)
    d_term = params[i - 1] * m + gram.swapaxes(-1, -2) @ d_term
  return d_term + (d_gram + d_gram.swapaxes(-1, -2)) @ g


def _scale_vjp(x: np.ndarray, norm: float, eps: float, h: np.ndarray) -> np.ndarray:
  """The VJP of G = X / (N + eps), N the Frobenius norm of X (0 where N is 0: the zero matrix's gradient is NaN in
  the dtype and in torch alike, and nothing cancels there)."""
  d = norm + eps
  return h / d - (x * (h * x).sum() / (norm * d * d) if norm > 0 else 0.0)


def _matrix_majorant(x: np.ndarray, g: np.ndarray, steps: int, params, eps: float) -> np.ndarray:
  """vjp_majorant for one wide matrix x and its cotangent g."""
  norm = float(np.sqrt((x * x).sum()))
  d, absx = norm + eps, np.abs(x)
  iterates = [x / d]
  for _ in range(steps - 1): iterates.append(_step(iterates[-1], params))
  cot = [g]   # cot[j]: the exact cotangent of step steps - j's output
  for k in range(steps - 1, -1, -1): cot.append(_step_vjp(iterates[k], params, cot[-1]))
  h0 = np.abs(cot[-1])
  total = h0 / d + (absx * (h0 * absx).sum() / (norm * d * d) if norm > 0 else 0.0)   # the scale's own terms
  absp = [abs(p) for p in params]
  for k in range(1, steps + 1):   # step k's own terms, carried to X by the exact backward of steps k-1 .. 1 and scale
    local = _step_vjp(np.abs(iterates[k - 1]), absp, np.abs(cot[steps - k]))
    carried = np.zeros_like(x)
    for e in zip(*np.nonzero(local)):   # |J| |local|: the chain is linear, so column e of J is its image of a unit
      unit = np.zeros_like(x)
      unit[e] = 1.0
      for j in range(k - 1, 0, -1): unit = _step_vjp(iterates[j - 1], params, unit)
      carried += np.abs(_scale_vjp(x, norm, eps, unit)) * local[e]
    total = total + carried
  return total


def vjp_majorant(case: Case, cotangents: list[np.ndarray], eps: float = 1e-7) -> float:
  """`x` of ACC.GRAD.NEWTON_SCHULZ: for each rounding stage of the gradient (the scale's, and each step's chain rule)
  the stage computed with the absolute value of every operand (the exact iterates |G_k|, |c_i|, the exact cotangent
  reaching it), which bounds every product and partial sum the stage rounds however they cancel, carried to the
  input by the absolute Jacobian of the exact backward after it; summed over the stages, the largest element over
  the matrices (to first order in eps)."""
  x, g = np.asarray(case.inputs[0], np.float64), np.asarray(cotangents[0], np.float64)
  if x.shape[-2] > x.shape[-1]: x, g = x.swapaxes(-1, -2), g.swapaxes(-1, -2)   # TENSOR.NEWTON_SCHULZ.tall
  x, g = x.reshape(-1, *x.shape[-2:]), g.reshape(-1, *g.shape[-2:])
  out = [_matrix_majorant(a, b, case.params["steps"], case.params["params"], eps) for a, b in zip(x, g)]
  flat = np.concatenate([o.ravel() for o in out]) if out else np.zeros(0)
  flat = flat[np.isfinite(flat)]
  return float(flat.max()) if flat.size else 0.0


OPS: list[Op] = [
  Op("newton_schulz", "x.newton_schulz(steps, params)", "newton_schulz_ref(x, steps, params)",
     Domain("matmul", ("float32", "float64"), shapes=_shapes, limit=sqrt_max),
     ("TENSOR.NEWTON_SCHULZ", "TENSOR.NEWTON_SCHULZ.tall", "TENSOR.NEWTON_SCHULZ.scale", "GRAD.CHECK.tensor"),
     "NEWTON_SCHULZ", "GRAD.NEWTON_SCHULZ", n=_n, grad_domain=all_of(finite_inputs, _squares_normal),
     grad_magnitude=vjp_majorant,
     note="torch has none: the reference is the clause in torch ops (newton_schulz_ref), in float64; gradients on "
          "finite inputs whose squares do not underflow (ACC.RANGE)"),
]
