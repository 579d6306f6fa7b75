"""The grader of contributed ops (`python -m conformance grade`, conformance/grade.py) on its two examples: the
correct softsign passes every property (exit 0); the one with a detached denominator (right values, wrong gradient)
fails its gradient properties (exit 1) with the op, the property and a reproduction in the output."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
  # the reproduction runs and prints the wrong gradient, which differs from that of the correct softsign
  bad = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  fixed = code.replace("from softsign_bad import softsign_detached",
                       "from softsign_ok import softsign as softsign_detached")
  good = subprocess.run([sys.executable, "-c", fixed], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert bad.returncode == 0 and good.returncode == 0, bad.stderr + good.stderr
  assert bad.stdout.strip() and bad.stdout != good.stdout
