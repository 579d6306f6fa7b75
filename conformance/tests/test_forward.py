"""Forward values and result dtypes of every Tensor op in the catalogue, against torch in float64 under the accuracy
contract (ACC.MEASURE) and against the executable spec where torch is undefined or differs on purpose.

`@given` is on the collected test itself: hypothesis's pytest plugin gives each parametrization (each test id) its
own example database key and derandomized seed, so `@reproduce_failure` and `--hypothesis-show-statistics` work."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from conformance.catalogue import tensor_entries
from conformance.properties import forward
from conformance.tests.params import cases, record, skip_unsupported


@pytest.mark.parametrize("op,dtype", cases(tensor_entries(), "forward"))
@given(data=st.data())
def test_forward(adapter, op, dtype, data):
  skip_unsupported(adapter, op, dtype)
  outcome = forward(adapter, op, data.draw(op.cases(dtype), label="case"), dtype)
  record(outcome, op, dtype, "forward")
  assert outcome.ok, outcome.message
