"""The conformance reports (conformance/report.py): the ULP histogram, the fraction of the bound an error uses
(CONF.REPORT.fraction), the clause-coverage table, merging the reports of several runs (CONF.REPORT.merge), and a
small run of the suite under pytest-xdist with a planted bug, whose DIR/conformance.json, junit.xml, coverage.md and
terminal summary must show the passes, the failure and its reproduction."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conformance import accuracy as A
from conformance.__main__ import main as conformance_main
from conformance.report import BIN_NAMES, coverage_markdown, histogram, merge_runs, summary_lines
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
  assert f"| `{first}` | 3 | PYTHON | CPU (1 of 3 failed) |" in md   # CPU failed one of its tests
  untested = md.split("## Clauses with no test")[1]
  assert f"- `{last}`" in untested and f"- `{first}`\n" not in untested
  assert f"| `{second}` | 0 (via `{first}`) | - | - |" in md   # a child clause of a tested clause


def test_fraction_of_the_bound():
  """CONF.REPORT.fraction: |got - ref| / bound, 0 when exact, 1 at the bound, > 1 beyond; inf for a broken exact
  comparison or a special value that differs."""
  rule = A.Bound("ACC.TEST", "2*ulp", exact=False)   # 2 ulps, whatever the table says
  ref = np.array([1.0, 2.0, 4.0])
  one_ulp = 2.0 ** -23   # float32's ulp at 1.0
  assert A.check(ref.copy(), ref, "float32", rule).used == 0.0
  assert A.check(ref + [one_ulp, 0.0, 0.0], ref, "float32", rule).used == 0.5
  assert A.check(ref + [0.0, 2 * 2 * one_ulp, 0.0], ref, "float32", rule).used == 1.0   # 2 ulps at 2.0, ok
  v = A.check(ref + [0.0, 0.0, 3 * 4 * one_ulp], ref, "float32", rule)   # 3 ulps at 4.0
  assert not v.ok and v.used == 1.5
  assert A.check(ref + [0.0, 0.0, 3 * 4 * one_ulp], ref, "float32", rule, where=np.array([1, 1, 0], bool)).used == 0
  assert A.check(np.array([1.0, np.nan]), np.array([1.0, 2.0]), "float32", rule).used == np.inf
  assert A.check(np.array([1.0, np.nan]), np.array([1.0, np.nan]), "float32", rule).used == 0.0
  exact = A.bound("EXACT", "float32")
  assert A.check(ref, ref, "float32", exact).used == 0.0
  assert A.check(np.array([-0.0]), np.array([0.0]), "float32", exact).used == np.inf
  assert A.check(np.array([1, 2]), np.array([1, 3]), "int32", exact).used == np.inf


def test_summary_shows_the_fraction_and_the_ulps():
  row = {"pass": 1, "fail": 0, "xfail": 0, "skip": 0}
  lines = summary_lines([{**row, "property": "forward", "worst_fraction": 0.25, "worst_ulps": 3e6},
                         {**row, "property": "forward", "worst_fraction": 0.5, "worst_ulps": 2.0},
                         {**row, "property": "vjp", "fail": 1, "worst_fraction": None, "worst_ulps": None}])
  assert lines[0].split() == ["property", "pass", "fail", "xfail", "skip", "worst/bound", "worst", "ULPs"]
  assert lines[1].split() == ["forward", "2", "0", "0", "0", "0.5", "3e+06"]
  assert lines[2].split() == ["vjp", "1", "1", "0", "0", "inf", "inf"]
  assert max(len(line) for line in lines) <= 120


def _run_report(backend: str, impl: str, by_clause: dict[str, tuple[int, int]]) -> dict:
  """A run's conformance.json as the plugin writes it, with clause -> (tests, passed)."""
  return {"backend": backend, "impl": impl, "histogram_bins": list(BIN_NAMES),
          "results": [{"op": "exp2", "dtype": "float32", "property": "forward", "pass": 1, "fail": 0}],
          "clauses": {c: {backend: {"tests": t, "passed": p}} for c, (t, p) in by_clause.items()}}


def test_merge_two_runs(tmp_path):
  """CONF.REPORT.merge: `python -m conformance merge` over two runs' JSON gives one row per clause with the
  backends where all its tests passed and those where some failed."""
  defined = clauses(ROOT / "spec" / "ops.md")
  assert {"OP.EXP2", "OP.EXP2.special", "OP.LOG2", "OP.SIN", "OP.SQRT"} <= set(defined)
  impl = "conformance.adapters.refimpl:RefimplAdapter"
  runs = {"py": _run_report("PYTHON", impl, {"OP.EXP2": (3, 3), "OP.LOG2": (2, 1)}),
          "cpu": _run_report("CPU", impl, {"OP.EXP2": (3, 3), "OP.LOG2": (2, 2), "OP.SIN": (1, 0)})}
  for name, report in runs.items():
    (tmp_path / name).mkdir()
    (tmp_path / name / "conformance.json").write_text(json.dumps(report))
  out = tmp_path / "merged"
  assert conformance_main(["merge", str(tmp_path / "py"), str(tmp_path / "cpu"), "-o", str(out)]) == 0
  md = (out / "coverage.md").read_text()
  assert "| `OP.EXP2` | 3 | CPU, PYTHON | - |" in md
  assert "| `OP.LOG2` | 2 | CPU | PYTHON (1 of 2 failed) |" in md
  assert "| `OP.SIN` | 1 | - | CPU (1 of 1 failed) |" in md
  assert "| `OP.EXP2.special` | 0 (via `OP.EXP2`) | - | - |" in md
  untested = md.split("## Clauses with no test")[1]
  assert "- `OP.SQRT`" in untested and "- `OP.EXP2`\n" not in untested
  merged = json.loads((out / "conformance.json").read_text())
  assert [(r["label"], r["backend"], r["impl"]) for r in merged["runs"]] == [("PYTHON", "PYTHON", impl),
                                                                               ("CPU", "CPU", impl)]
  assert merged["clauses"]["OP.LOG2"] == {"CPU": {"tests": 2, "passed": 2}, "PYTHON": {"tests": 2, "passed": 1}}
  assert [r["run"] for r in merged["results"]] == ["PYTHON", "CPU"]
  assert conformance_main(["merge", str(tmp_path / "nowhere"), "-o", str(out)]) == 2


def test_merge_labels_implementations_and_joins_shards():
  tg = "conformance.adapters.tinygrad:TinygradAdapter"
  shards = [{**_run_report("CPU", tg, {"OP.EXP2": counts}), "shard": {"k": k, "n": 2}, "tests": {f"t{k}": "pass"}}
            for k, counts in ((1, (2, 1)), (2, (4, 4)))]
  merged = merge_runs([_run_report("CPU", "conformance.adapters.refimpl:RefimplAdapter", {"OP.EXP2": (3, 3)}),
                       *shards])
  assert [r["label"] for r in merged["runs"]] == ["refimpl/CPU", "tinygrad/CPU"]   # the two shards are one run
  assert merged["clauses"]["OP.EXP2"] == {"refimpl/CPU": {"tests": 3, "passed": 3},
                                          "tinygrad/CPU": {"tests": 6, "passed": 5}}
  assert [r["pass"] for r in merged["results"]] == [1, 2]   # the shards' rows for exp2 forward add up
  with pytest.raises(ValueError, match="not a conformance report"):
    merge_runs([{"results": []}])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("report")
  (tmp / "plant_abs.py").write_text(PLANT_ABS)
  env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
  cmd = [sys.executable, "-m", "pytest", "conformance", "-p", "plant_abs", "-n", "2", "-q", "-p", "no:cacheprovider",
         "--report-dir", str(tmp / "out"),
         "-k", "test_forward and (abs-int32 or abs-float32 or exp-float32) and not log"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  return proc, tmp / "out"


def test_small_run_writes_the_reports(small_run):
  proc, out = small_run
  assert proc.returncode == 1, proc.stdout + proc.stderr   # the planted abs fails
  report = json.loads((out / "conformance.json").read_text())
  rows = {(r["op"], r["dtype"], r["property"]): r for r in report["results"]}
  assert set(rows) == {("abs", "int32", "forward"), ("abs", "float32", "forward"), ("exp", "float32", "forward")}
  assert (report["backend"], report["impl"]) == ("PYTHON", "conformance.adapters.refimpl:RefimplAdapter")
  exp = rows[("exp", "float32", "forward")]
  assert (exp["pass"], exp["fail"], exp["examples"]) == (1, 0, sum(exp["histogram"].values()))
  assert 0 <= exp["worst_fraction"] <= 1   # CONF.REPORT.fraction: a pass uses at most its whole bound
  assert exp["examples"] >= 1 and any(c.startswith("ACC.") for c in exp["clauses"])
  bad = rows[("abs", "int32", "forward")]
  assert bad["fail"] == 1 and len(bad["failures"]) == 1
  assert bad["worst_fraction"] is None   # an integer result that differs: exact comparison, infinite fraction
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
  assert "conformance summary" in proc.stdout and "worst/bound" in proc.stdout
  forward_line = next(line for line in proc.stdout.splitlines() if line.startswith("forward "))
  assert forward_line.split()[1:6] == ["1", "2", "0", "0", "inf"]
