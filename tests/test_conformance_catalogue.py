"""The conformance catalogue is complete and consistent: every public op of refimpl's Tensor API has an entry or an
exemption with a reason, every ALU op has an entry, every clause an entry cites exists in spec/, and every tolerance
key has its bounds in spec/accuracy.md (ACC.TABLE)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance import accuracy as A
from conformance.catalogue import EXEMPT, OPS, alu_entries
from conformance.catalogue.layers import LAYERS, Layer
from conformance.catalogue.optimizers import OPTIMIZERS
from conformance.spec_tables import clauses
from refimpl import Tensor, nn
from refimpl.nn import optim
from refimpl.uop import GroupOp, Ops

SPEC = Path(__file__).resolve().parent.parent / "spec"
# Python's object protocol and class bookkeeping: not ops of the API
PROTOCOL = {"__init__", "__repr__", "__hash__", "__module__", "__doc__", "__dict__", "__weakref__", "__annotations__",
            "__qualname__", "__firstlineno__", "__static_attributes__", "__getstate__", "__class__"}


def public_api() -> set[str]:
  """Public names of refimpl.Tensor (methods, properties, staticmethods, class attributes) and its operators."""
  names = set()
  for cls in Tensor.__mro__[:-1]:   # not object's
    for name in vars(cls):
      if name in PROTOCOL: continue
      if not name.startswith("_") or (name.startswith("__") and name.endswith("__")): names.add(name)
  return names


def covered() -> set[str]:
  return {name for op in OPS.values() for name in op.covers}


def test_every_public_op_has_an_entry_or_an_exemption():
  missing = sorted(public_api() - covered() - set(EXEMPT))
  assert not missing, f"public Tensor names with no catalogue entry and no exemption: {missing}"


def test_exemptions_and_entries_name_real_api():
  api = public_api()
  assert not sorted(set(EXEMPT) - api), "exemptions of names Tensor does not have"
  assert not sorted(covered() - api), "catalogue entries cover names Tensor does not have"
  assert not sorted(set(EXEMPT) & covered()), "names both exempt and covered"
  assert all(len(reason) > 10 for reason in EXEMPT.values())


def test_every_alu_op_has_an_entry():
  want = {op.name for op in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}}
  assert {op.call for op in alu_entries()} == want


def test_cited_clauses_exist():
  defined = clauses(SPEC)
  bad = {op.name: [c for c in op.clauses if c not in defined] for op in OPS.values()}
  assert not {k: v for k, v in bad.items() if v}


@pytest.mark.parametrize("op", list(OPS.values()), ids=lambda op: op.name)
def test_tolerance_keys_have_bounds(op):
  """Each float dtype an entry is checked in has a bound for its tolerance key (and gradient key)."""
  for dt in op.domain.dtypes:
    if not A.is_float(dt): continue
    assert A.bound(op.tolerance, dt).clause.startswith("ACC.")
    if op.differentiable: assert A.bound(op.grad_tolerance, dt).clause.startswith("ACC.GRAD")


def test_accuracy_table_rows_are_clauses_and_parse():
  table = A.bound_table()
  defined = clauses(SPEC / "accuracy.md")
  assert len(table) > 100 and set(table) <= set(defined)
  assert A.bound("ADD", "float32").exact and A.bound("ANYTHING", "int8").clause == "ACC.INT"


def test_entries_are_well_formed():
  for op in OPS.values():
    assert op.torch is not None or op.spec is not None, f"{op.name} has no oracle"
    assert op.domain.dtypes and len(op.clauses) >= 1, op.name
    assert op.reference in ("float64", "float64-cast", "native"), op.name
    if op.note == "" and op.out_dtype is not None and not op.is_alu:
      assert op.name in ("sum", "mean", "argmax", "any", "all", "cumsum", "prod"), f"{op.name}: say why it differs"


def test_every_layer_and_optimizer_has_an_entry():
  """Each public layer class of refimpl.nn (aliases such as BatchNorm2d by their own name) and each optimizer of
  refimpl.nn.optim has a conformance entry (conformance/catalogue/layers.py, optimizers.py), and every entry names
  one of them."""
  layers = {name for name in nn.__all__ if isinstance(getattr(nn, name), type)}
  assert {e.cls for e in LAYERS} == layers
  optimizers = set(optim.__all__) - {"Optimizer"}
  assert {e.cls for e in OPTIMIZERS} == optimizers
  assert len({e.name for e in LAYERS}) == len(LAYERS) and len({e.name for e in OPTIMIZERS}) == len(OPTIMIZERS)


def test_layer_and_optimizer_entries_cite_clauses_and_bounds_that_exist():
  defined = clauses(SPEC)
  for e in [*LAYERS, *OPTIMIZERS]:
    assert e.clauses and not [c for c in e.clauses if c not in defined], e.name
    for dt in e.dtypes:
      keys = (e.tolerance, e.grad_tolerance, *(("RUNNING", "BATCHNORM") if e.training else ())) \
          if isinstance(e, Layer) else ("OPTIM",)
      for key in keys: assert A.bound(key, dt).clause.startswith("ACC."), (e.name, key, dt)
