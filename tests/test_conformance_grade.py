"""The grader of contributed ops (`python -m conformance grade`, conformance/grade.py) on its two examples: the
correct softsign passes every property (exit 0); the one with a detached denominator (right values, wrong gradient)
fails its gradient properties (exit 1) with the op, the property and a reproduction in the output that fails while
the bug is there."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import strategies as st

from conformance import contrib, grade
from conformance.properties import Outcome

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "conformance" / "examples"


def _grade(name: str, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
  proc = subprocess.run([sys.executable, "-m", "conformance", "grade", str(EXAMPLES / name), "--out", str(out)],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
  return proc, json.loads((out / "scorecard.json").read_text())


def test_correct_contribution_passes(tmp_path):
  proc, card = _grade("softsign_ok.py", tmp_path)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert card["ok"] and "**PASS**" in proc.stdout
  props = {(r["property"], r["dtype"]) for r in card["results"]}
  assert {("forward", "float32"), ("vjp", "float32"), ("fd", "float64"), ("second_order", "float64")} <= props
  assert all(r["status"] == "pass" and r["examples"] > 0 for r in card["results"]), card["results"]
  assert (tmp_path / "scorecard.md").read_text() == proc.stdout.removesuffix("\n")


def test_planted_gradient_bug_fails_with_a_reproduction(tmp_path):
  proc, card = _grade("softsign_bad.py", tmp_path)
  assert proc.returncode == 1, proc.stdout + proc.stderr
  status = {(r["property"], r["dtype"]): r["status"] for r in card["results"]}
  assert all(s == "pass" for (p, _), s in status.items() if p == "forward")   # the values are right
  assert status[("vjp", "float64")] == "fail" and status[("fd", "float64")] == "fail"
  assert "## FAIL: softsign_detached vjp float64 on PYTHON" in proc.stdout
  failure = next(r["failure"] for r in card["results"] if (r["property"], r["dtype"]) == ("vjp", "float64"))
  assert failure.startswith("softsign_detached [GRAD.CHECK") and "--- reproduction ---" in failure
  code = failure.split("--- reproduction ---\n", 1)[1]
  assert "from softsign_bad import softsign_detached" in code
  # CONF.REPRO: the reproduction asserts torch's gradient; pasted, it fails with the bug and passes with the fix
  bad = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  fixed = code.replace("from softsign_bad import softsign_detached",
                       "from softsign_ok import softsign as softsign_detached")
  good = subprocess.run([sys.executable, "-c", fixed], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert bad.returncode == 1 and "AssertionError: " in bad.stderr and "elements differ" in bad.stderr, bad.stderr
  assert good.returncode == 0, good.stderr

HANGS = '''
import time
from conformance import contrib

@contrib.op("hangs", torch="x + 1", tolerance="ADD", dtypes=("float32",), differentiable=False)
def hangs(x):
  while True: time.sleep(0.05)   # never returns

@contrib.op("softsign", torch="x / (1 + x.abs())", tolerance="SIGMOID", dtypes=("float32",))
def softsign(x):
  return x / (1 + x.abs())
'''


def test_a_hung_op_times_out_and_the_run_goes_on(tmp_path):
  """CONF.GRADE.timeout: the op that never returns fails with 'timed out after N s'; the next op is still graded.
  The limit covers all of an op's properties: 45 s leaves softsign's three (4 s alone) room on a loaded machine."""
  (tmp_path / "hangs.py").write_text(HANGS)
  t0 = time.monotonic()
  proc = subprocess.run([sys.executable, "-m", "conformance", "grade", str(tmp_path / "hangs.py"), "--timeout", "45",
                         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300)
  took = time.monotonic() - t0
  card = json.loads((tmp_path / "out" / "scorecard.json").read_text())
  assert proc.returncode == 1, proc.stdout + proc.stderr
  rows = {(r["op"], r["property"], r["dtype"]): r for r in card["results"]}
  hung = rows[("hangs", "forward", "float32")]
  assert hung["status"] == "fail" and hung["failure"].startswith("timed out after 45 s"), hung
  assert {k: r["status"] for k, r in rows.items() if k[0] == "softsign"} == {
    ("softsign", "forward", "float32"): "pass", ("softsign", "vjp", "float32"): "pass",
    ("softsign", "fd", "float64"): "pass"}, card["results"]
  assert card["timeout"] == 45 and "time limit 45 s per op" in proc.stdout
  assert took < 45 + 200, took   # the hung op cost its limit, not the test's timeout


def test_unknown_tolerance_keys_are_refused_at_declaration(tmp_path):
  """CONF.GRADE.tolerance: a key with no row in spec/accuracy.md is a ValueError naming the op, the key and the valid
  keys, raised by the decorator, and the grader's command line reports it as a usage error (exit status 2)."""
  def f(x): return x
  with pytest.raises(ValueError, match=r"contributed op mine: tolerance='SIGMOIDD' .* valid keys: .*\bSIGMOID\b"):
    contrib.op("mine", torch="x", tolerance="SIGMOIDD")(f)
  with pytest.raises(ValueError, match=r"contributed op mine: grad_tolerance='GRADD' .*\bGRAD\b"):
    contrib.op("mine", torch="x", tolerance="SIGMOID", grad_tolerance="GRADD")(f)
  # a gradient key is not looked at for an op without gradients, and every key is valid for integer-only ops
  contrib.op("mine", torch="x", tolerance="SIGMOID", grad_tolerance="GRADD", differentiable=False)(f)
  contrib.op("mine", torch="x", tolerance="SIGMOID", dtypes=("int32",), differentiable=False)(f)
  (tmp_path / "bad_key.py").write_text(HANGS.replace('tolerance="SIGMOID"', 'tolerance="SIGMOIDD"'))
  proc = subprocess.run([sys.executable, "-m", "conformance", "grade", str(tmp_path / "bad_key.py")], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
  assert "contributed op softsign: tolerance='SIGMOIDD'" in proc.stderr and "SIGMOID," in proc.stderr


def test_a_failure_is_the_outcome_message_not_hypothesis_text():
  """The scorecard's failure is the failing Outcome's message as the property wrote it (nothing cut at hypothesis'
  'Falsifying example'), and a property that raises is a failure naming the exception."""
  message = "op [GRAD.CHECK]: wrong\nFalsifying example: not hypothesis' own text\n--- reproduction ---\nx = 1"
  row = grade._run(None, lambda ad, data: Outcome(data.draw(st.booleans()), message=message), "ci")
  assert row["status"] == "fail" and row["failure"] == message and row["examples"] >= 1, row

  def raises(ad, data): raise KeyError("no such thing")
  row = grade._run(None, raises, "ci")
  assert row == {"status": "fail", "examples": 0, "worst_ulps": None, "failure": "KeyError: 'no such thing'"}
