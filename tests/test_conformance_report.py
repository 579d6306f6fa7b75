"""The conformance reports (conformance/report.py): the ULP histogram, the clause-coverage table, and a small run of
the suite under pytest-xdist with a planted bug, whose DIR/conformance.json, junit.xml, coverage.md and terminal
summary must show the passes, the failure and its reproduction."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.report import BIN_NAMES, coverage_markdown, histogram
from conformance.spec_tables import clauses

ROOT = Path(__file__).resolve().parent.parent

# a plugin that makes Tensor.abs return its input unchanged for signed dtypes: abs(-3) = -3
PLANT_ABS = '''
import refimpl.tensor
def pytest_configure(config):
  refimpl.tensor.Tensor.abs = lambda self: self
'''


def test_histogram_bins():
  got = histogram([0.0, 0.0, 0.25, 1.0, 3.0, 17.0, 1e9, float("inf")])
  assert got == {"0": 2, "<=0.5": 1, "<=1": 1, "<=4": 1, "<=16": 0, "<=256": 1, ">256": 2}
  assert list(got) == list(BIN_NAMES)


def test_coverage_lists_every_clause_and_the_untested_ones():
  defined = clauses(ROOT / "spec" / "ops.md")
  first, second, last = list(defined)[0], list(defined)[1], list(defined)[-1]
  md = coverage_markdown({first: {"PYTHON": {"tests": 3, "passed": 3}, "CPU": {"tests": 3, "passed": 2}}},
                         chapters=("ops.md",))
  rows = [line for line in md.splitlines() if line.startswith("| `")]
  assert len(rows) == len(defined)
  assert f"| `{first}` | 3 | PYTHON |" in md   # CPU failed one of its tests, so it is not listed as passing
  untested = md.split("## Clauses with no test")[1]
  assert f"- `{last}`" in untested and f"- `{first}`\n" not in untested
  assert f"| `{second}` | 0 (via `{first}`) |" in md   # a child clause of a tested clause


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("report")
  (tmp / "plant_abs.py").write_text(PLANT_ABS)
  env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
  cmd = [sys.executable, "-m", "pytest", "conformance", "-p", "plant_abs", "-n", "2", "-q", "-p", "no:cacheprovider",
         "--report-dir", str(tmp / "out"),
         "-k", "test_forward and (abs-int32 or abs-float32 or exp-float32) and not logsumexp"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  return proc, tmp / "out"


def test_small_run_writes_the_reports(small_run):
  proc, out = small_run
  assert proc.returncode == 1, proc.stdout + proc.stderr   # the planted abs fails
  report = json.loads((out / "conformance.json").read_text())
  rows = {(r["op"], r["dtype"], r["property"]): r for r in report["results"]}
  assert set(rows) == {("abs", "int32", "forward"), ("abs", "float32", "forward"), ("exp", "float32", "forward")}
  exp = rows[("exp", "float32", "forward")]
  assert (exp["pass"], exp["fail"], exp["examples"]) == (1, 0, sum(exp["histogram"].values()))
  assert exp["examples"] >= 1 and any(c.startswith("ACC.") for c in exp["clauses"])
  bad = rows[("abs", "int32", "forward")]
  assert bad["fail"] == 1 and len(bad["failures"]) == 1
  repro = bad["failures"][0]["reproduction"]
  assert "--- reproduction ---" in repro and "x.abs()" in repro
  # the reproduction, run with the bug planted, prints a negative |x|; without it, none
  code = repro.split("--- reproduction ---\n", 1)[1]
  planted = subprocess.run([sys.executable, "-c", "import refimpl.tensor\nrefimpl.tensor.Tensor.abs = lambda s: s\n"
                            + code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert "-" in planted.stdout, planted.stdout + planted.stderr
  clean = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert clean.returncode == 0 and "-" not in clean.stdout, clean.stdout + clean.stderr
  # clause bookkeeping: OP.MAX is cited by both abs tests (both fail: float32 abs is planted too), not by exp
  assert report["clauses"]["OP.MAX"]["PYTHON"] == {"tests": 2, "passed": 0}
  assert rows[("abs", "float32", "forward")]["fail"] == 1
  suites = ET.parse(out / "junit.xml").getroot()
  cases = suites.findall(".//testcase")
  assert len(cases) == 3 and len(suites.findall(".//failure")) == 2
  coverage = (out / "coverage.md").read_text()
  assert "| `OP.MAX` | 2 | - |" in coverage and "## spec/gradients.md" in coverage
  assert "conformance summary" in proc.stdout and "forward" in proc.stdout
