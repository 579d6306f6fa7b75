"""Every optimizer of nn.optim (conformance/catalogue/optimizers.py) through the adapter: several steps from the same
initial parameters with the same gradients and learning-rate schedule as torch.optim (or the float64 reference of
spec/optim.md where torch has no such optimizer), the parameters compared after every step (ACC.OPTIM)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from conformance.catalogue.optimizers import OPTIMIZERS
from conformance.optim_properties import optim_cases, optimizer_steps
from conformance.tests.params import acc_clause, record

PARAMS = [pytest.param(e, dt, id=f"{e.name}-{dt}", marks=[
  pytest.mark.clauses(*e.clauses, acc_clause("OPTIM", dt)),
  pytest.mark.conformance(op=f"optim.{e.name}", dtype=dt, prop="steps")]) for e in OPTIMIZERS for dt in e.dtypes]


@pytest.mark.parametrize("entry,dtype", PARAMS)
@given(data=st.data())
def test_optimizer_steps(adapter, entry, dtype, data):
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  if "optim" not in adapter.namespace():
    pytest.skip(f"OPTIM.STEP: the adapter's namespace has no optim ({adapter.name})")
  if (why := adapter.unsupported(f"optim.{entry.cls}")): pytest.skip(why)
  outcome = optimizer_steps(adapter, entry, data.draw(optim_cases(entry, dtype), label="case"), dtype)
  record(outcome, entry, dtype, "steps")
  assert outcome.ok, outcome.message
