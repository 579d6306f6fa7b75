"""Conformance at the points its comparisons once got wrong: the gradient domain of the product scatters
(TENSOR.SCATTER_REDUCE.prod) and the gradient bound of Newton-Schulz (ACC.GRAD.NEWTON_SCHULZ), each with the example
the derandomized ci profile drew."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conformance import accuracy as A
from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import OPS
from conformance.catalogue.newton import MUON, newton_schulz_ref, vjp_majorant
from conformance.properties import vjp
from conformance.strategies import Case

nan, inf = math.nan, math.inf


def _scatter(x, index, src, include_self, dtype="bfloat16"):
  return Case(inputs=[np.array(x, np.float32), np.array(index, np.int32), np.array(src, np.float32)],
              dtypes=[dtype, "int32", dtype], params={"dim": 0, "include_self": include_self})


@pytest.mark.parametrize("case,compared", [
  (_scatter([0.0, -0.0], [1, 0, 0], [-1.734375, 0.0, nan], False), False),   # the ci draw: a zero with a NaN
  (_scatter([1.0], [0, 0], [0.0, nan], True, "float32"), False),
  (_scatter([1.0], [0, 0, 0], [3e38, 2.0, 0.5], True, "float32"), False),   # a partial product past float32
  (_scatter([1.0], [0, 0, 0], [3.3895313892515355e+38, 2.0, 0.5], True), False),   # bfloat16's max, same
  (_scatter([1.5, 2.0], [0, 0], [inf, 1.0], True), True),   # no zero: the rule is torch's (inf, NaN)
  (_scatter([1.5, 2.0], [0, 1], [-2.0, 0.0], True), True),
])
def test_scatter_prod_gradient_domain(case, compared):
  """TENSOR.SCATTER_REDUCE.prod: a zero with a NaN or an infinity among the terms (GRAD.REDUCE.MUL.inf) and a partial
  product out of the accumulation dtype's range (ACC.RANGE) are not compared with torch; other points are."""
  assert OPS["scatter_reduce.prod"].grad_domain(case) is compared


def _newton(x, steps=0, params=MUON):
  return Case(inputs=[np.array(x, np.float32)], dtypes=["float32"], params={"steps": steps, "params": params})


def test_newton_schulz_majorant_of_one_element():
  """ACC.GRAD.NEWTON_SCHULZ: for a 1x1 matrix and no steps the majorant is |g| / (N + eps) + |g| x**2 / (N (N +
  eps)**2), the two terms of the scale's gradient that cancel to g eps / (|x| + eps)**2."""
  x, g, eps = 2.0 ** -16, 0.1257302165031433, 1e-7
  want = g / (x + eps) + g * x * x / (x * (x + eps) ** 2)
  assert vjp_majorant(_newton([[x]]), [np.array([[g]], np.float32)]) == pytest.approx(want, rel=1e-6)


def test_newton_schulz_gradient_of_the_drawn_example():
  """The ci draw: refimpl's float32 gradient 53.300049 (torch's float32 autograd of the clause gives the same bits)
  against the exact 53.299816 is 2.2x ACC.GRAD.f32's bound, inside ACC.GRAD.NEWTON_SCHULZ.f32's."""
  case, g = _newton([[2.0 ** -16]]), np.array([[0.1257302165031433]], np.float32)
  xt = torch.tensor(case.inputs[0], requires_grad=True)
  newton_schulz_ref(xt, 0, MUON).backward(torch.tensor(g))
  assert xt.grad.item() == np.float32(53.300048828125)
  out = vjp(RefimplAdapter("PYTHON"), OPS["newton_schulz"], case, "float32", 0)
  assert out.ok, out.message


def test_newton_schulz_bound_stays_small_on_ordinary_matrices():
  """The majorant term is not a blanket: on 3x4 matrices of ordinary values after three Muon steps (the most the
  catalogue draws) it is under 2% of the gradient's largest element (1.6%), so a wrong rule still fails. The
  majorant of every operand's absolute value through all the steps at once was 4x the gradient here."""
  rng = np.random.default_rng(0)
  x, g = rng.standard_normal((2, 3, 4)).astype(np.float32)
  case = _newton(x, 3)
  xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
  newton_schulz_ref(xt, 3, MUON).backward(torch.tensor(g, dtype=torch.float64))
  n = 12 * (1 + 3 * len(MUON))
  term = A.bound("GRAD.NEWTON_SCHULZ", "float32").evaluate(ulp=0.0, eps=2.0 ** -23, n=n, S=0.0,
                                                            x=vjp_majorant(case, [g]))
  assert float(np.max(term)) < 0.02 * float(xt.grad.abs().max())


def test_newton_schulz_gradient_domain_keeps_squares_normal():
  """ACC.RANGE for TENSOR.NEWTON_SCHULZ.scale: the smallest subnormal squares to 0, the norm's gradient is NaN there
  (the exact one g / eps): not compared. 16 sqrt(smallest normal) and 0 are."""
  dom = OPS["newton_schulz"].grad_domain
  assert not dom(_newton([[1.401298464324817e-45]]))
  assert dom(_newton([[16 * math.sqrt(np.finfo(np.float32).tiny), 0.0]]))
