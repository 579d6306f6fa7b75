"""The conformance reports (conformance/report.py): the ULP histogram, the fraction of the bound an error uses
(CONF.REPORT.fraction) and the ULPs reported under an absolute bound (CONF.REPORT.ulps), the clause-coverage table
with deselected clauses (CONF.REPORT.deselected), the terminal summary by op (CONF.REPORT.summary), merging the
reports of several runs (CONF.REPORT.merge), and a small run of the suite under pytest-xdist with a planted bug, whose
DIR/conformance.json (with its run metadata, CONF.REPORT.meta, valid under the shipped JSON Schema,
CONF.REPORT.schema), junit.xml, coverage.md, terminal summary and merged scoreboard (CONF.REPORT.scoreboard) must
show the passes, the failure and its reproduction."""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from datetime import datetime
from importlib.metadata import version
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conformance import accuracy as A
from conformance.__main__ import main as conformance_main
from conformance.metadata import FORMAT
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


def test_ulps_under_an_absolute_bound():
  """CONF.REPORT.ulps: a result that cancels to nearly zero under an absolute tolerance counts in units of that
  tolerance, not ~1e15 ULPs of its own tiny value (tanh near 0 in float64 did, at 0.37 of its bound); a passing
  element of `c*ulp + A` counts at most c + 1. A pure ULP bound counts plain ULPs, and ulp_distance
  (ACC.MEASURE.ulp) is unchanged."""
  rule = A.Bound("ACC.TEST", "4*ulp + eps*S + 2*eps", exact=False)   # ACC.TANH.f64's bound
  eps = 2.0 ** -52
  ref, got = np.array([1e-300, 4.0]), np.array([1e-300 + 2e-16, 4.0 + 2 * 4 * eps])
  v = A.check(got, ref, "float64", rule)
  assert v.ok and A.ulp_distance(got, ref, "float64")[0] > 1e15   # the raw measure is absurd here
  assert v.ulps[0] == pytest.approx(2e-16 / (2 * eps)) and v.ulps[0] <= 4 + 1   # in units of A = 2 eps
  assert v.ulps[1] == 2.0   # ulp(4) = 4 eps is larger than A: plain ULPs
  plain = A.check(got, ref, "float64", A.Bound("ACC.TEST", "4*ulp", exact=False))
  assert not plain.ok and plain.worst_ulps > 1e15   # a pure ULP bound: the same error is 1e15 ULPs, and fails


def test_summary_groups_by_op_and_fits_120_columns():
  """CONF.REPORT.summary: one line per op (tests without a catalogue entry under their test function), the worst
  fraction and ULPs over its records, the failing property/dtype pairs cut to fit, and the totals."""
  row = {"pass": 1, "fail": 0, "xfail": 0, "skip": 0, "worst_fraction": 0.0, "worst_ulps": 0.0}
  rows = [{**row, "op": "exp", "dtype": "float32", "property": "forward", "worst_fraction": 0.25, "worst_ulps": 3.0},
          {**row, "op": "exp", "dtype": "float16", "property": "vjp", "worst_fraction": 0.5, "worst_ulps": 2.0},
          {**row, "op": "test_seed_cotangent[x-3]", "dtype": "", "property": "test_seed_cotangent"},
          {**row, "op": "test_seed_cotangent[x-4]", "dtype": "", "property": "test_seed_cotangent"},
          {**row, "op": "scaled_dot_product_attention.gqa.with_a_longer_name", "dtype": "float64", "property": "fd"}]
  rows += [{**row, "op": "abs", "dtype": f"dt{i:02d}", "property": "forward", "pass": 0, "fail": 1,
            "worst_fraction": None, "worst_ulps": None} for i in range(20)]
  lines = summary_lines(rows)
  assert lines[0].split()[:7] == ["op", "pass", "fail", "xfail", "skip", "worst/bound", "worst"]
  by_op = {line.split()[0]: line for line in lines[1:]}
  assert by_op["exp"].split() == ["exp", "2", "0", "0", "0", "0.5", "3"]
  assert by_op["test_seed_cotangent"].split()[1:3] == ["2", "0"]   # two parametrized tests, one line
  assert by_op["abs"].split()[1:7] == ["0", "20", "0", "0", "inf", "inf"]
  assert "forward/dt00, forward/dt01" in by_op["abs"] and by_op["abs"].endswith(" more")
  assert any(k.endswith("~") for k in by_op)   # an op name too long for its column is cut, visibly
  assert lines[-1].split() == ["4", "ops", "5", "20", "0", "0"]
  assert max(len(line) for line in lines) <= 120


def test_coverage_says_deselected():
  """CONF.REPORT.deselected: a clause cited only by tests that -k, -m or --shard left out is "deselected", listed in
  its own section, not among the clauses with no test; a clause some run test cites is tested whatever else was
  deselected."""
  defined = list(clauses(ROOT / "spec" / "ops.md"))
  a, b, c = defined[0], defined[5], defined[6]
  md = coverage_markdown({a: {"PYTHON": {"tests": 2, "passed": 2}}}, chapters=("ops.md",), deselected={a, b})
  assert f"| `{a}` | 2 | PYTHON | - |" in md and f"| `{b}` | deselected | - | - |" in md
  untested, rest = md.split("## Clauses with no test")[1].split("## Clauses whose tests were deselected (1)")
  assert f"- `{c}`" in untested and f"- `{b}`" not in untested and f"- `{b}`" in rest.split("## Descriptive")[0]


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
  # CONF.REPORT.deselected: -k left out every test citing OP.ADD (the ALU and add tests), so it is not "untested"
  assert "OP.ADD" in report["deselected_clauses"] and "OP.MAX" not in report["deselected_clauses"]
  assert "| `OP.ADD` | deselected | - | - |" in coverage
  assert "- `OP.ADD`" in coverage.split("## Clauses whose tests were deselected")[1]
  # CONF.REPORT.summary: one line per op, within 120 columns, naming what failed
  assert "conformance summary" in proc.stdout and "worst/bound" in proc.stdout
  summary = proc.stdout.split("conformance summary")[1].split("\n")[1:]
  abs_line = next(line for line in summary if line.startswith("abs "))
  assert abs_line.split()[1:6] == ["0", "2", "0", "0", "inf"] and "forward/float32, forward/int32" in abs_line
  exp_line = next(line for line in summary if line.startswith("exp "))
  assert exp_line.split()[1:3] == ["1", "0"] and float(exp_line.split()[6]) <= 1e3
  assert next(line for line in summary if line.startswith("2 ops")).split()[2:4] == ["1", "2"]
  table = summary[:next(i for i, line in enumerate(summary) if line.startswith("2 ops")) + 1]
  assert max(len(line) for line in table) <= 120


def _schema_validator():
  """The JSON Schema shipped with the suite (conformance/schema/conformance.schema.json, CONF.REPORT.schema), checked
  by the jsonschema library (the test extra)."""
  import jsonschema
  schema = json.loads((ROOT / "conformance" / "schema" / "conformance.schema.json").read_text())
  jsonschema.Draft202012Validator.check_schema(schema)
  return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def _git_head() -> str | None:
  if shutil.which("git") is None: return None
  proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
  return proc.stdout.strip() if proc.returncode == 0 else None


def test_small_run_metadata_and_schema(small_run):
  """CONF.REPORT.meta: the run's versions, implementation and device, commit, hypothesis profile and seed, times,
  command line and selection; CONF.REPORT.schema: the report is valid under the shipped schema, and a report missing
  its metadata or with a wrong count is not."""
  proc, out = small_run
  report = json.loads((out / "conformance.json").read_text())
  validator = _schema_validator()
  errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(report)]
  assert not errors, errors
  assert (report["format"], report["kind"]) == (FORMAT, "run")
  meta = report["meta"]
  assert meta["versions"]["python"] == platform.python_version()
  for package in ("numpy", "torch", "hypothesis", "pytest"): assert meta["versions"][package] == version(package)
  assert meta["impl"]["adapter"] == "conformance.adapters.refimpl:RefimplAdapter" and meta["impl"]["name"] == "refimpl"
  assert meta["impl"]["device"] == {"backend": "PYTHON", "class": "PythonBackend"}
  assert meta["backend"] == "PYTHON"
  assert meta["hypothesis"] == {"profile": "ci", "seed": None, "derandomize": True, "max_examples": 6}
  started, finished = (datetime.fromisoformat(meta[k]) for k in ("started", "finished"))
  assert started <= finished and 0 < meta["duration_s"] < 300
  assert "--report-dir" in meta["command"] and meta["workers"] == 2 and meta["shard"] is None
  assert meta["selection"]["keyword"].startswith("test_forward and (abs-int32")
  if (head := _git_head()) is not None: assert meta["git"]["suite"]["commit"] == head
  for broken in ({k: v for k, v in report.items() if k != "meta"},
                 {**report, "results": [{**report["results"][0], "fail": -1}]},
                 {**report, "meta": {**meta, "hypothesis": {**meta["hypothesis"], "derandomize": "yes"}}}):
    assert not validator.is_valid(broken)


def test_small_run_merged_with_its_scoreboard(small_run, tmp_path):
  """CONF.REPORT.merge and CONF.REPORT.scoreboard: merging the run writes a merged report valid under the schema,
  with the run's metadata, and the scoreboard, whose failing cells link to the failures' reproductions."""
  _, out = small_run
  assert conformance_main(["merge", str(out), "-o", str(tmp_path)]) == 0
  merged = json.loads((tmp_path / "conformance.json").read_text())
  assert _schema_validator().is_valid(merged) and merged["kind"] == "merged"
  assert merged["runs"][0]["meta"]["impl"]["name"] == "refimpl" and "OP.ADD" in merged["deselected_clauses"]
  md = (tmp_path / "scoreboard.md").read_text()
  row = next(line for line in md.splitlines() if line.startswith("| `abs` | int32 |"))
  assert "[FAIL](#fail-" in row
  page = (tmp_path / "scoreboard.html").read_text()
  links = set(re.findall(r'href="#(fail-\d+)"', page))
  assert len(links) == 2 and all(f'id="{a}"' in page for a in links)
  assert "x.abs()" in page.split("<h2>Failures")[1]   # the reproductions, after the table


def test_junit_through_pytest_option(tmp_path):
  """--report-dir sets pytest's own --junitxml to DIR/junit.xml (no private pytest API); an explicit --junitxml wins."""
  for path in (ROOT / "conformance").rglob("*.py"): assert "_pytest" not in path.read_text(), path
  mine = tmp_path / "mine.xml"
  cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--report-dir",
         str(tmp_path / "out"), "--junitxml", str(mine), "-k", "test_forward and abs-int32"]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert ET.parse(mine).getroot().find(".//testcase") is not None and not (tmp_path / "out" / "junit.xml").exists()
  assert (tmp_path / "out" / "conformance.json").exists()
