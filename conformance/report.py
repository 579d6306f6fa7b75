"""Reports of a conformance run (`--report-dir DIR`, CONF.REPORT): DIR/conformance.json (the backend, the
implementation and the run's metadata, CONF.REPORT.meta, conformance/metadata.py; per op, dtype and property:
counts, worst error in ULPs and as a fraction of its bound, a histogram of ULP errors, clause IDs and each failure's
reproduction; valid under conformance/schema/conformance.schema.json, CONF.REPORT.schema), DIR/junit.xml (pytest's
own --junitxml, which conftest.py points there) and DIR/coverage.md (clause -> tests -> backends passing and failing,
deselected clauses named as such: CONF.REPORT.deselected); and a summary table by op at the end of the terminal
output, with or without --report-dir (CONF.REPORT.summary). `python -m conformance merge DIR1 DIR2 ... -o OUT` merges
the conformance.json of several runs (one per backend or implementation) into OUT/conformance.json and one coverage
table OUT/coverage.md (`merge_runs`, CONF.REPORT.merge), and writes the scoreboard (conformance/scoreboard.py).

Two measures of error (CONF.REPORT.fraction): `worst_ulps` is the largest |got - ref| in ULPs of the reference (in
units of the bound's absolute part where that is larger: CONF.REPORT.ulps, conformance/accuracy.py), and
`worst_fraction` the largest |got - ref| / bound over the bounded comparisons (conformance/accuracy.py `check`):
0 is exact, 1 is at the bound, above 1 breaks it. The fraction is the one to read. Exact comparisons count 0 when
equal and inf when not; in JSON an infinite value (a crash, a broken exact comparison, a NaN for a number) is null.

How the numbers travel: a property test calls `note(outcome)` for each example (conformance/tests/params.py,
`record`); the plugin collects those notes while the test runs and stores their summary in the test's
user_properties, which pytest-xdist sends back to the controller with the report, so the controller alone
aggregates and writes the files. The clauses of deselected tests travel in each worker's `workeroutput`.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from conformance.descriptive import DESCRIPTIVE
from conformance.metadata import FORMAT, RunClock, run_metadata
from conformance.shards import join_shards, run_identity
from conformance.spec_tables import clauses as spec_clauses

__all__ = ["note", "ReportPlugin", "BINS", "histogram", "coverage_markdown", "COVERAGE_CHAPTERS", "summary_lines",
           "merge_runs", "write_merged", "SUMMARY_WIDTH"]

SPEC = Path(__file__).resolve().parent.parent / "spec"
# the Tensor-level chapters (spec/tensor.md and its family chapters tensor_*.md) count too: every TENSOR clause
# needs a test
COVERAGE_CHAPTERS = ("ops.md", "gradients.md", "accuracy.md", *sorted(p.name for p in SPEC.glob("tensor*.md")))
# upper edges of the ULP histogram's bins; errors above the last edge (or infinite) go in the last bin ">256"
BINS = (0.0, 0.5, 1.0, 4.0, 16.0, 256.0)
BIN_NAMES = ("0", "<=0.5", "<=1", "<=4", "<=16", "<=256", ">256")
_PROP_KEY = "conformance_outcomes"
_DESELECTED_KEY = "conformance_deselected_clauses"
# the outcomes of the running test as (ULPs, fraction of the bound, failure message, clauses), or None
_notes: list[tuple[float, float, str, tuple[str, ...]]] | None = None


def note(outcome) -> None:
  """Record one example's outcome of the running test (a no-op outside a test run by the plugin). The fraction of
  the bound is `outcome.details["used"]` (conformance.properties); an outcome without one compared nothing bounded
  (0) or, failing, crashed (inf)."""
  if _notes is None: return
  fraction = outcome.details.get("used", 0.0 if outcome.ok else math.inf)
  _notes.append((outcome.worst_ulps, fraction if not math.isnan(fraction) else math.inf,
                 "" if outcome.ok else outcome.message, outcome.clauses))


def histogram(ulps: list[float]) -> dict[str, int]:
  """Counts of ULP errors per bin of BINS (an infinite error, e.g. a crash, counts in the last bin)."""
  out = dict.fromkeys(BIN_NAMES, 0)
  for u in ulps:
    i = next((k for k, edge in enumerate(BINS) if u <= edge), len(BINS))
    out[BIN_NAMES[i]] += 1
  return out


def _finite(u: float) -> float | None:
  return u if math.isfinite(u) else None


def _worse(a: float | None, b: float | None) -> float | None:
  """The larger of two worst errors, None (infinite) winning."""
  return None if a is None or b is None else max(a, b)


def _fmt(u: float | None) -> str:
  return "inf" if u is None else f"{u:.3g}"


def _status(report: pytest.TestReport) -> str | None:
  """pass, fail, xfail or skip for the report that decides a test's status, None for the others."""
  if report.when == "call" or (report.when == "setup" and not report.passed):
    if hasattr(report, "wasxfail"): return "xfail" if report.skipped else "fail"   # a strict XPASS fails
    return {"passed": "pass", "failed": "fail", "skipped": "skip"}[report.outcome]
  if report.when == "teardown" and report.failed: return "fail"
  return None


class ReportPlugin:
  """Collects per-test outcomes and writes the report files (on the controller only under pytest-xdist)."""

  def __init__(self, config: pytest.Config, report_dir: str | None):
    self.config, self.dir = config, Path(report_dir) if report_dir else None
    self.backend = config.getoption("--backend").upper()
    self.impl = config.getoption("--impl")
    self.rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    self.clause_tests: dict[str, dict[str, int]] = defaultdict(lambda: {"tests": 0, "passed": 0})
    self.deselected: set[str] = set()   # cited by tests that -k, -m or --shard left out (CONF.REPORT.deselected)
    self.clock = RunClock()
    self.tests: dict[str, str] = {}   # test id -> its verdict, for joining shards (CONF.SHARD.join)

  # -- clauses of deselected tests: seen where collection happens (each xdist worker collects the whole suite, and
  # sends them to the controller in its workeroutput)
  def pytest_deselected(self, items: list[pytest.Item]) -> None:
    for item in items:
      if (m := item.get_closest_marker("clauses")) is not None: self.deselected.update(m.args)
    if hasattr(self.config, "workerinput"): self.config.workeroutput[_DESELECTED_KEY] = sorted(self.deselected)

  @pytest.hookimpl(optionalhook=True)
  def pytest_testnodedown(self, node, error) -> None:
    self.deselected.update(getattr(node, "workeroutput", {}).get(_DESELECTED_KEY, []))

  # -- on the worker (or the only process): summarize the notes of each test into its user_properties
  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_call(self, item: pytest.Item):
    global _notes
    _notes = []
    try: return (yield)
    finally:
      notes, _notes = _notes, None
      ulps = [u for u, _, _, _ in notes]
      fails = [m for _, _, m, _ in notes if m]
      item.user_properties.append((_PROP_KEY, json.dumps({
        "examples": len(notes), "worst_ulps": _finite(max(ulps, default=0.0)),
        "worst_fraction": _finite(max((f for _, f, _, _ in notes), default=0.0)), "histogram": histogram(ulps),
        "failure": fails[-1] if fails else None,   # hypothesis replays the shrunk example last
        "clauses": sorted({c for _, _, _, cs in notes for c in cs})})))

  # -- on the controller: aggregate
  def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
    status = _status(report)
    if status is None: return
    props = dict(report.user_properties)
    name = report.nodeid.split("::")[-1]
    key = (props.get("op", name), props.get("dtype", ""), props.get("property", name.split("[")[0]))
    row = self.rows.setdefault(key, {"op": key[0], "dtype": key[1], "property": key[2], "pass": 0, "fail": 0,
                                     "xfail": 0, "skip": 0, "examples": 0, "worst_ulps": 0.0, "worst_fraction": 0.0,
                                     "histogram": dict.fromkeys(BIN_NAMES, 0), "clauses": [], "failures": []})
    row[status] += 1
    if status != "pass" or report.nodeid not in self.tests: self.tests[report.nodeid] = status   # a failing teardown
    summary = json.loads(props[_PROP_KEY]) if _PROP_KEY in props else {}
    row["examples"] += summary.get("examples", 0)
    fraction = summary.get("worst_fraction", 0.0)
    if status in ("fail", "xfail") and fraction is not None and fraction <= 1: fraction = None   # failed unmeasured
    row["worst_ulps"] = _worse(row["worst_ulps"], summary.get("worst_ulps", 0.0))
    row["worst_fraction"] = _worse(row["worst_fraction"], fraction)
    for b, n in summary.get("histogram", {}).items(): row["histogram"][b] += n
    clauses = sorted(set(row["clauses"]) | set(props.get("clauses", "").split()) | set(summary.get("clauses", [])))
    row["clauses"] = clauses
    if status == "fail":
      text = summary.get("failure") or _crash_text(report)
      row["failures"].append({"test": report.nodeid, "reproduction": text})
    if status in ("pass", "fail"):
      for c in set(props.get("clauses", "").split()):
        self.clause_tests[c]["tests"] += 1
        self.clause_tests[c]["passed"] += status == "pass"

  def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not self.rows: return
    tr = terminalreporter
    tr.write_sep("=", f"conformance summary ({self.impl} on {self.backend})")
    for line in summary_lines(self.rows.values()): tr.write_line(line)
    if self.dir: tr.write_line(f"reports: {self.dir}/conformance.json, coverage.md; junit: {config.option.xmlpath}")

  def pytest_sessionfinish(self, session: pytest.Session) -> None:
    if self.dir is None or hasattr(session.config, "workerinput"): return
    self.dir.mkdir(parents=True, exist_ok=True)
    results = sorted(self.rows.values(), key=lambda r: (r["property"], r["op"], r["dtype"]))
    # clauses that some run test cites are not deselected, whatever else was left out
    deselected = sorted(self.deselected - {c for c, v in self.clause_tests.items() if v["tests"]})
    (self.dir / "conformance.json").write_text(json.dumps({
      "format": FORMAT, "kind": "run", "backend": self.backend, "impl": self.impl,
      "meta": run_metadata(session.config, self.clock, self.backend, self.impl),
      "histogram_bins": list(BIN_NAMES), "results": results,
      "clauses": {c: {self.backend: v} for c, v in sorted(self.clause_tests.items())},
      "deselected_clauses": deselected,
      **run_identity(self.config), "tests": dict(sorted(self.tests.items()))}, indent=1))   # CONF.SHARD.join
    (self.dir / "coverage.md").write_text(coverage_markdown({c: {self.backend: v}
                                                             for c, v in self.clause_tests.items()},
                                                            runs=[f"{self.backend}: {self.impl}"],
                                                            deselected=set(deselected)))


SUMMARY_WIDTH = 120   # the terminal summary fits 120 columns (CONF.REPORT.summary)


def _summary_group(row: dict[str, Any]) -> str:
  """The op a row belongs to in the terminal summary: its catalogue entry, or for a test without one (an unmarked
  test, whose row is keyed by its id) the test function without its parameters."""
  return row["op"].split("[")[0]


def summary_lines(rows, width: int = SUMMARY_WIDTH) -> list[str]:
  """The terminal summary (CONF.REPORT.summary): one line per op with its test counts, the worst error as a fraction
  of its bound (CONF.REPORT.fraction) and in ULPs (CONF.REPORT.ulps) over its records, and which property/dtype
  failed; then the totals. Every line fits `width` columns: a long list of failures ends in "+N more"."""
  keys = ("pass", "fail", "xfail", "skip")
  per_op: dict[str, dict[str, Any]] = defaultdict(lambda: {**dict.fromkeys(keys, 0), "worst_fraction": 0.0,
                                                           "worst_ulps": 0.0, "failing": []})
  for row in rows:
    p = per_op[_summary_group(row)]
    for k in keys: p[k] += row[k]
    for k in ("worst_fraction", "worst_ulps"): p[k] = _worse(p[k], row.get(k, 0.0))
    if row["fail"]: p["failing"].append("/".join(x for x in (row["property"], row["dtype"]) if x))
  total = {k: sum(p[k] for p in per_op.values()) for k in keys}
  head = f"{'op':<34}{'pass':>6}{'fail':>6}{'xfail':>6}{'skip':>6}{'worst/bound':>13}{'worst ULPs':>11}"
  lines = [head + "  failing"]
  room = width - len(head) - 2
  for name in sorted(per_op):
    p = per_op[name]
    op = name if len(name) <= 33 else name[:32] + "~"
    line = f"{op:<34}" + "".join(f"{p[k]:>6}" for k in keys) + f"{_fmt(p['worst_fraction']):>13}" \
           f"{_fmt(p['worst_ulps']):>11}"
    lines.append(line + ("  " + _fit(p["failing"], room) if p["failing"] else ""))
  lines.append(f"{f'{len(per_op)} ops':<34}" + "".join(f"{total[k]:>6}" for k in keys))
  return lines


def _fit(items: list[str], room: int) -> str:
  """A comma-separated list cut to `room` characters, ending in "+N more" where items were left out."""
  for shown in range(len(items), 0, -1):
    rest = len(items) - shown
    text = ", ".join(items[:shown]) + (f" +{rest} more" if rest else "")
    if len(text) <= room: return text
  return f"{len(items)} failing"[:room]


def _crash_text(report: pytest.TestReport) -> str:
  """The failure text of a test that recorded no outcome (the assertion message of an edge-table row, a crash)."""
  crash = getattr(report.longrepr, "reprcrash", None)
  return crash.message if crash is not None else str(report.longrepr)[-2000:]


def coverage_markdown(by_clause: dict[str, dict[str, dict[str, int]]], chapters=COVERAGE_CHAPTERS,
                      runs: list[str] = (), deselected: set[str] | frozenset[str] = frozenset()) -> str:
  """The clause-coverage table: each clause of the chapters -> number of tests citing it -> backends where they all
  passed, and backends where some failed (with how many); then the clauses no test cites. `by_clause` maps clause ->
  backend -> {"tests", "passed"}; `runs` lists the runs the table covers, one line each. A test cites a clause
  through its `clauses` marker; a clause with no test of its own but a cited parent (OP.CDIV for OP.CDIV.zero) is
  listed as covered through that parent, and an untested clause of conformance/descriptive.py as descriptive, with
  its reason. A clause whose tests all were deselected (`deselected`: -k, -m or --shard left them out) is listed as
  deselected, not as untested (CONF.REPORT.deselected)."""
  lines = ["# Clause coverage of the conformance suite", "",
           "Tests citing each clause (`clauses` marker), the backends on which all of them passed, and those on "
           "which some failed.", ""]
  if runs: lines += ["Runs:", ""] + [f"- {r}" for r in runs] + [""]
  missing, descriptive, left_out = [], [], []
  for chapter in chapters:
    defined = spec_clauses(SPEC / chapter)
    lines += [f"## spec/{chapter}", "", "| clause | tests | backends passing | backends failing |", "|---|---|---|---|"]
    for c in defined:
      runs = by_clause.get(c, {})
      tests = max((v["tests"] for v in runs.values()), default=0)   # mostly the same tests on each backend
      passing = ", ".join(b + (f" ({v['tests']})" if v["tests"] != tests else "") for b, v in sorted(runs.items())
                          if v["tests"] and v["passed"] == v["tests"])   # a count where a backend ran fewer tests
      why = "" if tests else DESCRIPTIVE.get(c, "")
      skipped = not tests and not why and c in deselected
      via = "" if tests or why or skipped else _cited_parent(c, by_clause)
      if why: descriptive.append(f"- `{c}`: {why}")
      elif skipped: left_out.append(c)
      elif not tests and not via: missing.append(c)
      failing = ", ".join(f"{b} ({v['tests'] - v['passed']} of {v['tests']} failed)" for b, v in sorted(runs.items())
                          if v["passed"] < v["tests"])
      untested = f"0 (via `{via}`)" if via else "descriptive" if why else "deselected" if skipped else "**0**"
      lines.append(f"| `{c}` | {tests or untested} | {passing or '-'} "
                   f"| {failing or '-'} |")
    lines.append("")
  lines += [f"## Clauses with no test ({len(missing)})", ""] + [f"- `{c}`" for c in missing] + [""]
  if left_out:
    lines += [f"## Clauses whose tests were deselected ({len(left_out)})", "", "The run left their tests out (-k, -m "
              "or --shard); a run of the whole suite checks them.", ""] + [f"- `{c}`" for c in left_out] + [""]
  lines += [f"## Descriptive clauses ({len(descriptive)})", "", "No conformance test can check these "
            "(conformance/descriptive.py says why).", ""] + descriptive + [""]
  return "\n".join(lines)


def _cited_parent(clause: str, by_clause: dict[str, Any]) -> str:
  parts = clause.split(".")
  for k in range(len(parts) - 1, 1, -1):
    parent = ".".join(parts[:k])
    if any(v["tests"] for v in by_clause.get(parent, {}).values()): return parent
  return ""


# ---------------------------------------------------------------------------------------------------- merging runs

def _impl_name(impl: str) -> str:
  """'conformance.adapters.tinygrad:TinygradAdapter' -> 'tinygrad': the adapter class without its suffix."""
  return (impl.rsplit(":", 1)[-1].removesuffix("Adapter") or impl).lower()


def merge_runs(reports: list[dict[str, Any]], names: list[str] | None = None, partial: bool = False) -> dict[str, Any]:
  """CONF.REPORT.merge: the conformance.json of several runs as one report. The shards of a run are joined first
  (CONF.SHARD.join: a ValueError for reports of one implementation and backend that are not the shards of one run,
  or not all of them unless `partial`).
  Each run is labelled by its backend, or by `impl/backend` when the runs check more than one implementation. The
  result has `runs` (label, backend, impl and `names[i]`, e.g. the run's directory), `results` (every run's rows,
  each with its run's label), `clauses` (clause -> label -> tests and passed) and `deselected_clauses` (cited only by
  tests that every run left out). Each run keeps its metadata (`meta`, CONF.REPORT.meta)."""
  for i, r in enumerate(reports):
    if not {"backend", "impl", "results", "clauses"} <= set(r):
      raise ValueError(f"{names[i] if names else f'run {i}'}: not a conformance report (it needs backend, impl, "
                       "results and clauses)")
  reports, names = join_shards(reports, names or [f"run {i}" for i in range(len(reports))], partial)   # CONF.SHARD.join
  several = len({r["impl"] for r in reports}) > 1
  runs, results, clauses = [], [], defaultdict(lambda: defaultdict(lambda: {"tests": 0, "passed": 0}))
  for i, r in enumerate(reports):
    label = f"{_impl_name(r['impl'])}/{r['backend']}" if several else r["backend"]
    runs.append({"label": label, "backend": r["backend"], "impl": r["impl"], "source": names[i] if names else None,
                 "meta": r.get("meta")})
    results += [{**row, "run": label} for row in r["results"]]
    for c, per_backend in r["clauses"].items():
      for counts in per_backend.values():   # one entry, the run's own backend
        clauses[c][label]["tests"] += counts["tests"]
        clauses[c][label]["passed"] += counts["passed"]
  tested = {c for c, per_run in clauses.items() if any(v["tests"] for v in per_run.values())}
  deselected = {c for r in reports for c in r.get("deselected_clauses", [])} - tested
  return {"format": FORMAT, "kind": "merged", "runs": runs,
          "histogram_bins": reports[0].get("histogram_bins", list(BIN_NAMES)) if reports else [],
          "results": results, "clauses": {c: dict(sorted(v.items())) for c, v in sorted(clauses.items())},
          "deselected_clauses": sorted(deselected)}


def _read_report(path: Path) -> Any:
  """One run's conformance.json; a file that is not JSON is a ValueError naming it (CONF.REPORT.merge)."""
  try: return json.loads(path.read_text())
  except json.JSONDecodeError as e: raise ValueError(f"{path}: not valid JSON ({e})") from None


def write_merged(dirs: list[str | Path], out: str | Path, partial: bool = False) -> dict[str, Any]:
  """Read DIR/conformance.json of each run directory, write the merged OUT/conformance.json and OUT/coverage.md, and
  return the merged report."""
  merged = merge_runs([_read_report(Path(d) / "conformance.json") for d in dirs], [str(d) for d in dirs], partial)
  out = Path(out)
  out.mkdir(parents=True, exist_ok=True)
  (out / "conformance.json").write_text(json.dumps(merged, indent=1))
  runs = [f"{r['label']}: {r['impl']} ({r['source']})" for r in merged["runs"]]
  (out / "coverage.md").write_text(coverage_markdown(merged["clauses"], runs=runs,
                                                    deselected=set(merged["deselected_clauses"])))
  return merged
