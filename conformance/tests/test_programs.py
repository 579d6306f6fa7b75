"""Random programs (CONF.PROGRAM): the compiler between ops. Each program runs in the implementation under test and is
compared with its ACC.PROGRAM reference (torch in float64, with a bound per element) and with refimpl on PYTHON;
the same programs (without transcendental steps) and the ALU edge tables run on every device of the implementation
and must agree bit for bit (CONF.DEVICES).

Example counts scale with the hypothesis profile: PROGRAMS_PER_EXAMPLE times the profile's max_examples (ci: 6, so
240 programs), NESTED_PROGRAMS_PER_EXAMPLE for the reductions of reductions (60),
DEVICE_PROGRAMS_PER_EXAMPLE for the device comparison (which compiles every kernel on each device).
$PROGRAM_LOG (a path) collects every verdict as a JSON line, the shrunk failure last."""
from __future__ import annotations

import json
import os
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conformance import accuracy as A
from conformance.catalogue.alu import TRANSCENDENTAL
from conformance.program_check import Helper, _impl_spec, across_devices, against_reference, run_program
from conformance.programs import FLOAT_DTYPES, Program, nested_reductions, programs
from conformance.properties import Outcome
from conformance.report import note
from conformance.spec_tables import parse_value
from conformance.strategies import NP
from conformance.tests.test_alu import GROUPS
from refimpl.dtype import to_dtype

PROGRAMS_PER_EXAMPLE = 40
DEVICE_PROGRAMS_PER_EXAMPLE = 4
NESTED_PROGRAMS_PER_EXAMPLE = 10


def _log(verdict) -> None:
  """Append the verdict to $PROGRAM_LOG (JSON lines) when set: the last failing one is the program hypothesis shrank
  to, with its reproduction (tests/test_programs_planted.py reads it)."""
  note(Outcome(verdict.ok, ("CONF.PROGRAM",), 0.0 if verdict.ok else float("inf"), verdict.message))
  if path := os.environ.get("PROGRAM_LOG"):
    with open(path, "a") as f: f.write(json.dumps({"ok": verdict.ok, "message": verdict.message}) + "\n")


def _count(factor: int) -> int:
  """Examples for a test that draws `factor` per example of the profile: read when the module is collected, after
  the conformance plugin has loaded the profile (--hypothesis-profile, $HYPOTHESIS_PROFILE or ci)."""
  return max(1, factor * settings.default.max_examples)


def _dtypes(adapter) -> tuple[str, ...]:
  """The float dtypes programs may use: those the backend computes in, float16 included since casts go through it."""
  if adapter.unsupported_dtype("float16") or adapter.unsupported_dtype("int32"):
    pytest.skip(f"CONF.PROGRAM: {adapter.backend} lacks float16 or int32, which cast chains use (DEV.DTYPE)")
  return tuple(d for d in FLOAT_DTYPES if not adapter.unsupported_dtype(d))


def _spec_outputs(adapter, backend: str):
  """refimpl on PYTHON, the executable spec, as a function of a program (None when it is the implementation under
  test). It runs here; Device.DEFAULT is put back, so that an adapter of refimpl on another backend keeps its own."""
  if adapter.name == "refimpl" and backend == "PYTHON": return None
  from conformance.adapters.refimpl import RefimplAdapter
  from refimpl import Device

  def outputs(program: Program):
    saved = Device.DEFAULT
    try: return run_program(RefimplAdapter("PYTHON"), program)
    finally: Device.DEFAULT = saved
  return outputs


@pytest.mark.clauses("CONF.PROGRAM", "CONF.PROGRAM.steps", "CONF.PROGRAM.alias", "CONF.PROGRAM.casts",
                     "CONF.PROGRAM.assign", "CONF.PROGRAM.values", "CONF.PROGRAM.sizes", "CONF.PROGRAM.spec",
                     "CONF.PROGRAM.crash", "ACC.PROGRAM", "ACC.PROGRAM.exact", "ACC.PROGRAM.bound",
                     "ACC.PROGRAM.undetermined")
@pytest.mark.conformance(op="program", dtype="float32", prop="program")
@settings(max_examples=_count(PROGRAMS_PER_EXAMPLE))
@given(data=st.data())
def test_programs(adapter, backend, data):
  spec = _spec_outputs(adapter, backend)
  program = data.draw(programs(_dtypes(adapter)), label="program")   # the dtypes depend on the adapter (a fixture)
  verdict = against_reference(adapter, program, spec(program) if spec else None)
  _log(verdict)
  assert verdict.ok, verdict.message


@pytest.mark.clauses("CONF.PROGRAM", "CONF.PROGRAM.nested", "CONF.PROGRAM.values", "CONF.PROGRAM.sizes",
                     "CONF.PROGRAM.spec", "CONF.PROGRAM.crash", "EXEC.THREAD.reduce", "ACC.PROGRAM",
                     "ACC.PROGRAM.exact", "ACC.PROGRAM.bound", "ACC.PROGRAM.undetermined")
@pytest.mark.conformance(op="program", dtype="float32", prop="program")
@settings(max_examples=_count(NESTED_PROGRAMS_PER_EXAMPLE))
@given(data=st.data())
def test_nested_reductions(adapter, backend, data):
  """CONF.PROGRAM.nested: reductions of reductions, a family drawn apart from test_programs' (its own test, so its
  own derandomized sample: adding it moved none of test_programs' programs)."""
  spec = _spec_outputs(adapter, backend)
  program = data.draw(nested_reductions(_dtypes(adapter)), label="program")
  verdict = against_reference(adapter, program, spec(program) if spec else None)
  _log(verdict)
  assert verdict.ok, verdict.message


@pytest.mark.clauses("CONF.DEVICES", "CONF.PROGRAM", "CONF.PROGRAM.crash")
@pytest.mark.conformance(op="program", dtype="float32", prop="devices")
@settings(max_examples=_count(DEVICE_PROGRAMS_PER_EXAMPLE))
@given(data=st.data())
def test_programs_agree_across_devices(adapter, data):
  devices = adapter.devices()
  if len(devices) < 2: pytest.skip(f"CONF.DEVICES: the {adapter.name} adapter lists one device ({devices[0]})")
  program = data.draw(programs(_dtypes(adapter), transcendental=False), label="program")
  verdict = across_devices(adapter, program, devices)
  _log(verdict)
  assert verdict.ok, verdict.message


# ---- the edge tables on every device: one test per ALU op (each of its dtype groups is one kernel per device)

_BY_OP: dict[str, list] = defaultdict(list)
for _key in sorted(GROUPS):
  if _key[0] not in TRANSCENDENTAL: _BY_OP[_key[0]].append(_key)   # EXEC.FLOAT.transcendental: libraries may differ


def _operands(key) -> list[tuple[np.ndarray, str]]:
  op, src, _ = key
  rows = GROUPS[key]
  dts = ["bool" if op == "WHERE" and i == 0 else src for i in range(len(rows[0][0]))]
  return [(np.array([parse_value(r[0][i], to_dtype(d)) for r in rows], dtype=NP[d]), d) for i, d in enumerate(dts)]


_TABLE_PARAMS = [pytest.param(op, id=op, marks=pytest.mark.clauses("CONF.DEVICES", f"OP.{op}", "OP.TABLES"))
                 for op in sorted(_BY_OP)]


@pytest.mark.parametrize("op", _TABLE_PARAMS)
def test_edge_tables_agree_across_devices(adapter, op):
  """CONF.DEVICES: every row of OP.TABLES for `op` gives the same bits on each device (test_edge_table checks each
  device's values against the table; this checks that no device differs from another, also where the table's
  cell is a spec choice a device might round differently)."""
  devices = adapter.devices()
  if len(devices) < 2: pytest.skip(f"CONF.DEVICES: the {adapter.name} adapter lists one device ({devices[0]})")
  checked = 0
  for key in _BY_OP[op]:
    _, src, dst = key
    if any(adapter.unsupported_dtype(d) for d in (src, dst)): continue   # DEV.DTYPE: that group only
    operands = _operands(key)
    results = {}
    for d in devices:
      if d == adapter.backend: results[d] = adapter.alu(op, dst, operands)
      else: results[d] = Helper.of(_impl_spec(adapter), d, adapter.isolation(d) or "fork").alu(op, dst, operands)
    first = results[devices[0]]
    for d in devices[1:]:
      verdict = A.check(results[d], first, dst, A.bound("EXACT", dst))
      assert verdict.ok, f"CONF.DEVICES [OP.{op}, OP.TABLES]: {src}->{dst} on {d} against {devices[0]}: {verdict.why}"
    checked += 1
  if not checked: pytest.skip(f"DEV.DTYPE: {adapter.backend} computes in none of the dtypes of OP.{op}'s tables")
