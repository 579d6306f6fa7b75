"""Planted bugs (issue 6, "must show"): with a bug planted in refimpl or the PYTHON emulator, the conformance property
that covers it fails, and the reproduction in its message, run in a fresh Python process with the same bug planted,
prints something other than what it prints without the bug. Three bugs: a wrong gradient rule (GRAD.SIN giving +sin
for cos), a wrong integer edge case (OP.CDIV.zero: x/0 = 0 instead of -1 in the emulator) and an off-by-one in pad.

The reproductions run in fresh processes because realized results are memoized per (hash-consed) UOp in
refimpl.engine.realize: in this process a graph realized with the bug keeps its buggy buffer after the bug is gone."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, settings, strategies as st

from conformance import properties
from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import OPS

ROOT = Path(__file__).resolve().parent.parent
SEARCH = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                  phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck))

# Each plant is source text defining `plant(mp)` (mp: a pytest.MonkeyPatch), so that the same bug can be planted here
# and in the fresh process that runs a reproduction. `clear_caches` drops the emulator's ALU functions and translated
# programs, so that a planted emulator function is the one that runs.
_CLEAR = '''
def clear_caches():
  import emu.valu
  from refimpl import Device
  emu.valu.alu.cache_clear()
  Device["PYTHON"]._cache.clear()
'''
PLANT_SIN_GRADIENT = _CLEAR + '''
def plant(mp):
  """GRAD.SIN planted wrong: d sin(x) = +sin(x) instead of cos(x)."""
  import refimpl.gradient
  from refimpl.uop.ops import PatternMatcher, Rule
  rules = [Rule(r.pattern, lambda ctx, x: (ctx * x.sin(),), r.clause) if r.clause == "GRAD.SIN" else r
           for r in refimpl.gradient.pm_gradient.rules]
  mp.setattr(refimpl.gradient, "pm_gradient", PatternMatcher(rules))
'''
PLANT_CDIV_BY_ZERO = _CLEAR + '''
def plant(mp):
  """OP.CDIV.zero planted wrong in the emulator's vectorized ALU: x/0 = 0 instead of -1 (all bits set)."""
  import numpy as np
  import emu.valu
  right = emu.valu._cdiv
  def wrong(dt):
    f = right(dt)
    return lambda a, b: np.where(np.asarray(b) == 0, np.zeros((), emu.valu.NP[dt]), f(a, b))
  mp.setattr(emu.valu, "_cdiv", wrong)
  clear_caches()
'''
PLANT_PAD_OFF_BY_ONE = _CLEAR + '''
def plant(mp):
  """Tensor.pad planted wrong: one more zero before and one fewer after, on each axis padded after (same shape)."""
  from refimpl.tensor import Tensor
  right = Tensor.pad
  def shifted(p):
    return p if p is None or p[1] == 0 else (p[0] + 1, p[1] - 1)
  mp.setattr(Tensor, "pad", lambda self, padding: right(self, [shifted(p) for p in padding]))
'''

PLANTS = {
  # bug: (plant, catalogue entry, dtype, property)
  "grad-sin": (PLANT_SIN_GRADIENT, "sin", "float64", "vjp"),
  "cdiv-zero": (PLANT_CDIV_BY_ZERO, "floordiv", "int32", "forward"),
  "pad-off-by-one": (PLANT_PAD_OFF_BY_ONE, "pad", "float32", "forward"),
}


def _exec_plant(source: str, mp: pytest.MonkeyPatch) -> None:
  namespace: dict = {}
  exec(source, namespace)   # noqa: S102 (the plants above)
  namespace["plant"](mp)
  namespace["clear_caches"]()


def _printed(code: str, plant: str | None) -> str:
  """What `code` prints in a fresh Python process, with the bug `plant` planted first (None: no bug)."""
  prelude = f"import pytest\n{plant}\nplant(pytest.MonkeyPatch())\n" if plant else ""
  proc = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  return proc.stdout + (f"exit {proc.returncode}: {proc.stderr[-500:]}" if proc.returncode else "")


@pytest.fixture
def adapter():
  yield RefimplAdapter("PYTHON")
  exec(_CLEAR + "clear_caches()", {})   # noqa: S102 (drop what the planted emulator translated)


@pytest.mark.parametrize("bug", list(PLANTS))
def test_planted_bug_fails_with_a_reproduction(adapter, bug):
  plant, name, dtype, prop = PLANTS[bug]
  op = OPS[name]

  def outcome(example):
    case, seed = example
    if prop == "vjp": return properties.vjp(adapter, op, case, dtype, seed)
    return properties.forward(adapter, op, case, dtype)
  examples = st.tuples(op.cases(dtype), st.integers(0, 2 ** 32 - 1))
  with pytest.MonkeyPatch.context() as mp:
    _exec_plant(plant, mp)
    failing = find(examples, lambda ex: not outcome(ex).ok, settings=SEARCH)
    result = outcome(failing)
  assert not result.ok and "--- reproduction ---" in result.message and op.call in result.message, result.message
  assert result.message.startswith(f"{name} [")   # names the op and the clauses
  code = result.message.split("--- reproduction ---\n", 1)[1]
  with_bug, without_bug = _printed(code, plant), _printed(code, None)
  assert with_bug and without_bug and "exit" not in without_bug, (with_bug, without_bug)
  assert with_bug != without_bug, f"the reproduction does not show the planted bug:\n{code}\nprints {with_bug}"
  assert "AssertionError" in with_bug, with_bug   # CONF.REPRO.assert: it fails the way the test did
