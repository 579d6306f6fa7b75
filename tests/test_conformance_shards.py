"""CONF.SHARD: the N shards of a run are disjoint and together are the whole run (by collection: which tests run is
decided before any runs); CONF.SHARD.join: `merge` joins the shards' reports into the report of the whole run, and
refuses reports that are not the shards of one run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.__main__ import main as conformance_main
from conformance.shards import join_shards

ROOT = Path(__file__).resolve().parent.parent
SELECT = ["-k", "test_forward and (exp or add or sum) and float32"]


def _collected(*args: str) -> list[str]:
  cmd = [sys.executable, "-m", "pytest", "conformance", "--collect-only", "-q", "-p", "no:cacheprovider", *SELECT,
         *args]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  return [line for line in proc.stdout.splitlines() if "::" in line]


def test_shards_partition_the_run():
  whole = _collected()
  shards = [_collected("--shard", f"{k}/3") for k in (1, 2, 3)]
  assert len(whole) > 10 and all(shards)
  joined = [t for s in shards for t in s]
  assert sorted(joined) == sorted(whole)        # every test once: none lost, none twice


# ---- CONF.SHARD.join: the shards' reports joined equal the report of the whole run

def _report(k: int | None, n: int, tests: dict[str, str], keyword: str = "sel") -> dict:
  """A conformance.json as the plugin writes it for shard k of n (k None: unsharded), one row per test."""
  rows = [{"op": t, "dtype": "float32", "property": "forward", "pass": int(v == "pass"), "fail": int(v == "fail"),
           "xfail": 0, "skip": 0, "examples": 6, "worst_ulps": 1.0, "worst_fraction": 0.5,
           "histogram": {"0": 6}, "clauses": ["OP.ADD"], "failures": []} for t, v in tests.items()]
  return {"backend": "PYTHON", "impl": "conformance.adapters.refimpl:RefimplAdapter", "histogram_bins": ["0"],
          "results": rows, "clauses": {"OP.ADD": {"PYTHON": {"tests": len(tests),
                                                             "passed": sum(v == "pass" for v in tests.values())}}},
          "shard": {"k": k, "n": n} if k else None, "tests": tests,
          "selection": {"args": ["conformance"], "keyword": keyword, "markexpr": "", "profile": "ci"}}


@pytest.mark.parametrize("reports,error", [
  ([_report(1, 2, {"a": "pass"}), _report(1, 2, {"b": "pass"})], "shard 1/2 of .* twice"),
  ([_report(1, 2, {"a": "pass"}), _report(2, 2, {"a": "pass"})], "a ran in two shards .*overlapping"),
  ([_report(1, 2, {"a": "pass"}), _report(2, 3, {"b": "pass"})], "different runs: different shard counts"),
  ([_report(1, 2, {"a": "pass"}), _report(2, 2, {"b": "pass"}, keyword="other")], "different runs: different sel"),
  ([_report(None, 0, {"a": "pass"}), _report(None, 0, {"b": "pass"})], "is not a shard"),
  ([_report(1, 2, {"a": "pass"}), _report(None, 0, {"b": "pass"})], "is not a shard"),
  ([_report(1, 3, {"a": "pass"}), _report(3, 3, {"b": "pass"})], "lacks shard 2/3"),
], ids=["shard-twice", "overlap", "shard-counts", "selections", "two-whole-runs", "shard-and-whole", "missing"])
def test_join_refuses_what_is_not_the_shards_of_one_run(reports, error):
  with pytest.raises(ValueError, match=f"CONF.SHARD.join: .*{error}"):
    join_shards(reports, [f"dir{i}" for i in range(len(reports))])


def test_join_adds_up_the_shards():
  (joined,), names = join_shards([_report(2, 2, {"b": "fail"}), _report(1, 2, {"a": "pass", "c": "pass"})],
                                 ["s2", "s1"])
  assert names == ["s2+s1"] and joined["shard"] is None and joined["shards"] == {"n": 2, "joined": [1, 2]}
  assert joined["tests"] == {"a": "pass", "c": "pass", "b": "fail"}
  assert joined["clauses"] == {"OP.ADD": {"PYTHON": {"tests": 3, "passed": 2}}}
  assert [(r["op"], r["pass"], r["fail"]) for r in joined["results"]] == [("a", 1, 0), ("b", 0, 1), ("c", 1, 0)]


def test_partial_joins_the_shards_there_are():
  """merge --partial: a run of which only some shards ran (CI runs one CL shard in four) joins what there is and
  says so in its name."""
  reports = [_report(3, 4, {"c": "pass"}), _report(1, 4, {"a": "fail"})]
  (joined,), names = join_shards(reports, ["s3", "s1"], partial=True)
  assert joined["shards"] == {"n": 4, "joined": [1, 3]} and joined["tests"] == {"a": "fail", "c": "pass"}
  assert names == ["s3+s1 (shards 1, 3 of 4 only)"]
  with pytest.raises(ValueError, match="overlapping"):   # --partial allows missing shards, nothing else
    join_shards([_report(1, 4, {"a": "pass"}), _report(2, 4, {"a": "pass"})], ["s1", "s2"], partial=True)


def _run_report(tmp: Path, name: str, *args: str) -> subprocess.Popen:
  cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--hypothesis-profile", "ci",
         *SELECT, "--report-dir", str(tmp / name), *args]
  return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_shards_merged_equal_the_whole_run(tmp_path):
  """The ci profile on a small selection, unsharded and as shards 1/2 and 2/2 (three processes at once): the
  joined shards have the whole run's test ids and verdicts, each test once, and the same rows (counts, examples,
  worst errors, histograms) and clause counts; `merge` of the two shards writes those rows, and refuses a shard
  given twice."""
  procs = {name: _run_report(tmp_path, name, *args) for name, args in
           (("whole", ()), ("s1", ("--shard", "1/2")), ("s2", ("--shard", "2/2")))}
  for name, proc in procs.items():
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, f"{name}:\n{out[-3000:]}"
  whole, s1, s2 = (json.loads((tmp_path / n / "conformance.json").read_text()) for n in ("whole", "s1", "s2"))
  assert (s1["shard"], s2["shard"], whole["shard"]) == ({"k": 1, "n": 2}, {"k": 2, "n": 2}, None)
  assert len(whole["tests"]) > 10 and s1["tests"] and s2["tests"]
  assert not set(s1["tests"]) & set(s2["tests"])   # no test twice
  (joined,), _ = join_shards([s1, s2], ["s1", "s2"])
  assert joined["tests"] == whole["tests"]   # the union is the whole run: same ids, same verdicts
  assert joined["results"] == whole["results"] and joined["clauses"] == whole["clauses"]
  out = tmp_path / "merged"
  assert conformance_main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "-o", str(out)]) == 0
  merged = json.loads((out / "conformance.json").read_text())
  assert [r["label"] for r in merged["runs"]] == ["PYTHON"]
  assert [{k: v for k, v in r.items() if k != "run"} for r in merged["results"]] == whole["results"]
  assert conformance_main(["merge", str(tmp_path / "s1"), str(tmp_path / "s1"), "-o", str(out)]) == 2
