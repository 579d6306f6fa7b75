"""Planted float folds (issue 16, "must show"; RW.FOLD.tested): with `x / x -> 1` or `x - x -> 0` added to refimpl's
symbolic rules for floats (RW.FLOAT.none.div-self, .sub-self), a fresh process running
`pytest conformance/tests/test_folds.py` on PYTHON fails exactly the Tensor-level cases of that pattern, in every float
dtype the PYTHON device has, naming the clause; and the reproduction in the failure message, pasted into a fresh
process, prints a different value with the bug planted than without it.

Fresh processes, because realized results are memoized per hash-consed UOp (refimpl.engine.realize): a graph realized
with the bug would keep its value here after the bug is gone."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PLANT = '''
def plant(mp):
  """RW.FLOAT.none broken: a float fold {rule} added in front of the symbolic rules."""
  from refimpl.uop.symbolic import symbolic, x, FLOATS
  from refimpl.uop.rules import SymRule
  from refimpl.uop.ops import PatternMatcher
  bad = PatternMatcher([SymRule("PLANTED.{name}", {lhs}, {rhs}, dtypes=FLOATS).to_rule()] + symbolic.rules)
  mp.setattr(symbolic, "rules", bad.rules)
  mp.setattr(symbolic, "_by_op", bad._by_op)
'''
PLANTS = {   # bug: (plant source, the cases it must fail, the clause they cite)
  "fold-x-div-x": (PLANT.format(rule="x / x -> 1", name="fdiv-self", lhs="x / x", rhs="1"), "div-self",
                   "RW.FLOAT.none.div-self"),
  "fold-x-sub-x": (PLANT.format(rule="x - x -> 0", name="sub-self", lhs="x - x", rhs="0"), "sub-self",
                   "RW.FLOAT.none.sub-self"),
}
FLOAT_CASES = ("float16", "bfloat16", "float32", "float64")


def _python(code: str, plant: str | None, timeout: int, env: dict | None = None) -> subprocess.CompletedProcess:
  prelude = f"import pytest\n{plant}\nplant(pytest.MonkeyPatch())\n" if plant else ""
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f: f.write(prelude + code)
  try:
    return subprocess.run([sys.executable, f.name], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "DEV": "PYTHON", **(env or {})})
  finally: os.unlink(f.name)


@pytest.mark.parametrize("bug", list(PLANTS))
def test_planted_float_fold_is_caught(bug, tmp_path):
  plant, pattern, clause = PLANTS[bug]
  junit, log = tmp_path / "junit.xml", tmp_path / "folds.jsonl"
  # the pattern's own cases and, as a control, the other float folds of the same dtypes, which must still pass
  run = ("import sys\nsys.exit(pytest.main(['conformance/tests/test_folds.py', '-q', '-p', 'no:cacheprovider', "
         f"'-o', 'addopts=', '--junitxml', {str(junit)!r}, '-k', '(sub-self or div-self or mul-zero) and float']))")
  proc = _python(run, plant, timeout=900, env={"FOLD_LOG": str(log)})
  assert proc.returncode == 1, f"the planted {bug} was not caught:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
  failed = {f"test_fold[{r['case']}]": r["message"] for r in map(json.loads, log.read_text().splitlines())}
  ran = {tc.get("name") for tc in ET.parse(junit).getroot().iter("testcase") if tc.find("skipped") is None}
  want = {f"test_fold[{pattern}-{dt}]" for dt in FLOAT_CASES} & ran
  assert want and set(failed) == want, f"failed {sorted(failed)}, expected exactly {sorted(want)}"
  message = failed[f"test_fold[{pattern}-float32]"]
  assert message.startswith(clause), message[:500]
  repro = message.split("--- reproduction ---\n", 1)[1]
  with_bug, without_bug = _python(repro, plant, 300), _python(repro, None, 300)
  assert with_bug.returncode == 0 and without_bug.returncode == 0, with_bug.stderr[-2000:] + without_bug.stderr[-2000:]
  printed = [re.sub(r"\s+", "", p.stdout) for p in (with_bug, without_bug)]
  assert printed[0] != printed[1], f"the reproduction prints the same with and without {bug}:\n{repro}\n{printed[0]}"
  assert "nan" in printed[1] and "nan" not in printed[0], printed   # the fold loses the NaN of inf/inf, inf - inf
