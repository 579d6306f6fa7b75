"""Planted bugs in the executable spec (issue 16, item 7): a slip in exec_alu that the code under test shares must fail
test_alu. Before conformance/oracle_alu.py it passed: test_alu's oracle was exec_alu itself, and the PYTHON device
computes with it too (through the emulator, whose numpy ALU DESIGN.md wants bit-exact with exec_alu, so the shared
slip is planted in both: the emulator's CMOD and CDIV map exec_alu; neither op has a torch reference). Each plant
runs in a fresh process (the engine memoizes realized buffers), once as is (test_alu must fail, naming the oracle
bug) and once with the independent oracle switched off (test_alu passes: the independent oracle is what catches the
slip)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNNER = '''
import sys
import numpy as np
import pytest
import emu.valu
import refimpl.uop.semantics as sem
from refimpl import Device
from refimpl.uop import Ops

plant, control = sys.argv[1], sys.argv[2] == "control"

def replace(op, wrong):
  sem._RULES[op] = sem._RULES[op]._replace(impl=wrong)

if plant == "cmod-negative":   # OP.CMOD.sign planted wrong: the remainder takes the divisor's sign (Python's %)
  right = sem._RULES[Ops.CMOD].impl
  replace(Ops.CMOD, lambda t, a, b: a % b if b != 0 and (a < 0) != (b < 0) else right(t, a, b))
  # the emulator shares the slip: its CMOD maps exec_alu (one module for folding and execution, DESIGN.md)
  emu.valu._cmod = lambda dt: emu.valu.exec_alu_map(Ops.CMOD, dt, dt)
elif plant == "cdiv-floor":    # OP.CDIV.truncate planted wrong: the quotient is floored (Python's //)
  right = sem._RULES[Ops.CDIV].impl
  replace(Ops.CDIV, lambda t, a, b: sem._wrap(a // b, t) if b != 0 else right(t, a, b))
  emu.valu._cdiv = lambda dt: emu.valu.exec_alu_map(Ops.CDIV, dt, dt)
emu.valu.alu.cache_clear()
Device["PYTHON"]._cache.clear()

if control:   # the independent oracle defines nothing: exec_alu is the only oracle, as before issue 16 item 7
  import conformance.oracle_alu as O
  right_expected = O.expected
  def nothing(op, out, operands):
    want, defined = right_expected(op, out, operands)
    return want, np.zeros_like(defined)
  O.expected = nothing
sys.exit(pytest.main([sys.argv[3], "-q", "-p", "no:cacheprovider", "--hypothesis-profile", "ci", "-x"]))
'''

PLANTS = {
  "cmod-negative": "conformance/tests/test_alu.py::test_alu[ALU.CMOD-int8]",
  "cdiv-floor": "conformance/tests/test_alu.py::test_alu[ALU.CDIV-int32]",
}


def _run(plant: str, mode: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", RUNNER, plant, mode, PLANTS[plant]], cwd=ROOT, capture_output=True,
                        text=True, timeout=300)


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_exec_alu_bug_fails_test_alu(plant):
  proc = _run(plant, "planted")
  assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
  assert "oracle bug" in proc.stdout and "exec_alu gives" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_without_the_independent_oracle_the_bug_passes(plant):
  """The control: the same plant with oracle_alu defining nothing passes test_alu, so it is the independent oracle,
  not some other check, that catches the slip."""
  proc = _run(plant, "control")
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
