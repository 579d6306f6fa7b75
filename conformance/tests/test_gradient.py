"""Gradients of every differentiable catalogue entry: VJPs with a random cotangent against torch autograd in float64
(GRAD.CHECK, ACC.GRAD), the implementation's float64 VJP against its own central finite differences
(GRAD.CHECK.fd, ACC.GRAD.fd), and for a small subset the gradient of the gradient (ACC.GRAD2)."""
from __future__ import annotations

import pytest
from hypothesis import assume, given, strategies as st

from conformance.catalogue import OPS
from conformance.properties import finite_differences, second_order, vjp
from conformance.tests.params import cases, record, skip_unsupported

DIFFERENTIABLE = [op for op in OPS.values() if op.differentiable]
SECOND_ORDER = [op for op in DIFFERENTIABLE if op.second_order]
SEEDS = st.integers(0, 2 ** 32 - 1)


@pytest.mark.parametrize("op,dtype", cases(DIFFERENTIABLE, "vjp", grad=True))
@given(data=st.data())
def test_vjp(adapter, op, dtype, data):
  skip_unsupported(adapter, op, dtype)
  case = data.draw(op.cases(dtype), label="case")
  assume(op.grad_domain is None or op.grad_domain(case))
  outcome = vjp(adapter, op, case, dtype, data.draw(SEEDS, label="seed"))
  record(outcome, op, dtype, "vjp")
  assert outcome.ok, outcome.message


@pytest.mark.parametrize("op,dtype", cases(DIFFERENTIABLE, "fd", grad=True, dtypes=("float64",)))
@given(data=st.data())
def test_finite_differences(adapter, op, dtype, data):
  skip_unsupported(adapter, op, dtype)
  case = data.draw(op.cases(dtype, smooth=True), label="case")
  assume(op.grad_domain is None or op.grad_domain(case))
  outcome = finite_differences(adapter, op, case, data.draw(SEEDS, label="seed"))
  record(outcome, op, dtype, "fd")
  assert outcome.ok, outcome.message


@pytest.mark.parametrize("op,dtype", cases(SECOND_ORDER, "second_order", grad=True, dtypes=("float64",)))
@given(data=st.data())
def test_second_order(adapter, op, dtype, data):
  skip_unsupported(adapter, op, dtype)
  case = data.draw(op.cases(dtype, smooth=True), label="case")
  outcome = second_order(adapter, op, case, dtype, data.draw(SEEDS, label="seed"))
  record(outcome, op, dtype, "second_order")
  assert outcome.ok, outcome.message
