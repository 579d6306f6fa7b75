"""Every layer of nn (conformance/catalogue/layers.py) through the adapter: built by the implementation, its tensors
replaced by drawn values, its outputs and the gradients with respect to its input and every parameter against torch
in float64 with the same tensors; batch norms also over several training calls and an eval call (running statistics).
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from conformance import strategies as S
from conformance.catalogue.layers import LAYERS, Layer
from conformance.layer_properties import layer_cases, layer_forward, layer_training, layer_vjp
from conformance.strategies import NP
from conformance.tests.params import acc_clause, record

SEEDS = st.integers(0, 2 ** 32 - 1)


def _params(entries: list[Layer], prop: str, tolerance, extra: tuple[str, ...] = ()) -> list:
  """pytest params (entry, dtype), marked with the clauses they check and their identity (as params.cases does)."""
  return [pytest.param(e, dt, id=f"{e.name}-{dt}", marks=[
    pytest.mark.clauses(*e.clauses, *extra, acc_clause(tolerance(e), dt)),
    pytest.mark.conformance(op=f"nn.{e.name}", dtype=dt, prop=prop)]) for e in entries for dt in e.dtypes]


def _skip_unsupported(adapter, entry: Layer, dtype: str) -> None:
  if (why := adapter.unsupported_dtype(dtype)): pytest.skip(why)
  if "nn" not in adapter.namespace(): pytest.skip(f"NN.LAYER: the adapter's namespace has no nn ({adapter.name})")
  if (why := adapter.unsupported(f"nn.{entry.cls}")): pytest.skip(why)


@pytest.mark.parametrize("entry,dtype", _params(LAYERS, "forward", lambda e: e.tolerance))
@given(data=st.data())
def test_layer_forward(adapter, entry, dtype, data):
  _skip_unsupported(adapter, entry, dtype)
  outcome = layer_forward(adapter, entry, data.draw(layer_cases(entry, dtype), label="case"), dtype)
  record(outcome, entry, dtype, "forward")
  assert outcome.ok, outcome.message


@pytest.mark.parametrize("entry,dtype", _params(LAYERS, "vjp", lambda e: e.grad_tolerance, ("GRAD.CHECK",)))
@given(data=st.data())
def test_layer_vjp(adapter, entry, dtype, data):
  _skip_unsupported(adapter, entry, dtype)
  case = data.draw(layer_cases(entry, dtype), label="case")
  outcome = layer_vjp(adapter, entry, case, dtype, data.draw(SEEDS, label="seed"))
  record(outcome, entry, dtype, "vjp")
  assert outcome.ok, outcome.message


TRAINING = [e for e in LAYERS if e.training]


@pytest.mark.parametrize("entry,dtype", _params(TRAINING, "training", lambda e: "RUNNING",
                                                ("NN.BATCHNORM.running", "NN.BATCHNORM.eval")))
@given(data=st.data())
def test_batchnorm_training_then_eval(adapter, entry, dtype, data):
  _skip_unsupported(adapter, entry, dtype)
  case = data.draw(layer_cases(entry, dtype), label="case")
  shape = case.inputs["x"].shape
  batches = [data.draw(S.arrays(dtype, shape, -3.0, 3.0, specials=False), label=f"batch {i}")
             for i in range(data.draw(st.integers(2, 3), label="steps"))]
  x_eval = data.draw(S.arrays(dtype, shape, -3.0, 3.0, specials=False), label="eval input").astype(NP[dtype])
  outcome = layer_training(adapter, entry, case, dtype, batches, x_eval)
  record(outcome, entry, dtype, "training")
  assert outcome.ok, outcome.message
