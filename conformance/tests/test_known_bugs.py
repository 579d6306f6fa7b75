"""The pinned reproductions of known implementation bugs (conformance/xfails.py, BUGS), each a strict expected
failure: when a bug is fixed its test passes, the run fails, and the entry (with the detour in the op's domain that
kept the property tests clear of it) is removed."""
from __future__ import annotations

import dataclasses

import pytest

from conformance.catalogue import OPS
from conformance.properties import forward, vjp
from conformance.xfails import BUGS

PROPERTIES = {"forward": lambda adapter, op, case, dtype: forward(adapter, op, case, dtype),
              "vjp": lambda adapter, op, case, dtype: vjp(adapter, op, case, dtype, seed=0)}


@pytest.mark.skipif(not BUGS, reason="conformance/xfails.py BUGS is empty: no known refimpl bug is pinned now")
@pytest.mark.parametrize("bug", [pytest.param(b, id=b.id, marks=[
  pytest.mark.clauses(*OPS[b.op].clauses), pytest.mark.xfail(reason=b.reason, strict=True)]) for b in BUGS] or [None])
def test_known_bug(adapter, backend, bug):
  if adapter.name != bug.impl: pytest.skip(f"{bug.id} is a bug of {bug.impl}, not of {adapter.name}")
  if bug.backends != "*" and backend not in bug.backends.split(","): pytest.skip(f"{bug.id} shows on {bug.backends}")
  op = dataclasses.replace(OPS[bug.op], torch_defined=None)   # a reproduction is compared at every element
  outcome = PROPERTIES[bug.prop](adapter, op, bug.case, bug.dtype)
  assert outcome.ok, outcome.message


def test_every_pinned_bug_names_a_catalogue_op_and_property():
  """The registry is well-formed whether or not it holds bugs now (every refimpl bug it held is fixed): each entry
  names a catalogue op, a property this module can run, and a reason."""
  for b in BUGS:
    assert b.op in OPS and b.prop in PROPERTIES and b.reason, b
