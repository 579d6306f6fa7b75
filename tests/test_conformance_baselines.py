"""Baselines of expected failures in the user's repository (CONF.BASELINE, conformance/baselines.py), on a tiny
selection of the suite against an implementation with one planted bug (tests/planted_adapter.py: exp is 1% too
large): a listed failing test is xfailed, a listed passing one fails the run (strict), --write-xfails writes a run's
failures as a baseline that makes the same run pass, and a malformed file is refused with its file and line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance import baselines

ROOT = Path(__file__).resolve().parent.parent
EXP = "conformance/tests/test_forward.py::test_forward[exp-float32]"
COS = "conformance/tests/test_forward.py::test_forward[cos-float32]"   # passes: cos is not planted


def _suite(*args: str) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-m", "pytest", EXP, COS, "-q", "-p", "no:cacheprovider", "-rA",
         "--impl", "tests.planted_adapter:PlantedAdapter", *args]
  return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_write_xfails_round_trips_and_listed_tests_are_strict(tmp_path):
  """CONF.BASELINE.write, CONF.BASELINE.strict."""
  first = _suite("--write-xfails", str(tmp_path / "base.txt"))
  assert first.returncode == 1 and f"FAILED {EXP}" in first.stdout, first.stdout[-2000:]
  written = baselines.parse(tmp_path / "base.txt")
  assert [e.pattern for e in written] == [EXP], written   # only the failure; the passing sin is not listed
  assert written[0].reason.startswith("exp [") and "ACC.EXP.f32" in written[0].reason, written[0].reason
  again = _suite("--xfails-file", str(tmp_path / "base.txt"), "--write-xfails", str(tmp_path / "again.txt"))
  assert again.returncode == 0 and f"XFAIL {EXP}" in again.stdout, again.stdout[-2000:]
  assert [(e.pattern, e.reason) for e in baselines.parse(tmp_path / "again.txt")] == [(EXP, written[0].reason)]
  # a listed test that passes fails the run: the bug it stood for is gone
  (tmp_path / "stale.txt").write_text(f"# comment\n\n{COS}  # 12 an old bug of cos\n"
                                      "conformance/tests/test_forward.py::test_forward[ex?-float*]  # 1% too large\n")
  stale = _suite("--xfails-file", str(tmp_path / "stale.txt"))
  assert stale.returncode == 1 and "XPASS(strict)" in stale.stdout, stale.stdout[-2000:]
  assert f"FAILED {COS}" in stale.stdout and f"XFAIL {EXP}" in stale.stdout, stale.stdout[-2000:]


def test_skips_file_skips_with_its_reason(tmp_path):
  (tmp_path / "skips.txt").write_text("conformance/tests/test_forward.py::test_forward[*-float32]  # not today\n")
  proc = _suite("--skips-file", str(tmp_path / "skips.txt"), "--xfails-file", str(tmp_path / "skips.txt"))
  assert proc.returncode == 0 and "2 skipped in" in proc.stdout, proc.stdout[-2000:]
  assert "skips.txt:1: not today" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize("line", [EXP, f"{EXP}  #", f"{EXP}  #   ", "  # an indented comment\nno-reason-here"])
def test_a_malformed_baseline_is_a_usage_error(tmp_path, line):
  """CONF.BASELINE.format: a line without '# reason' stops the run (exit status 4) naming the file and the line."""
  path = tmp_path / "bad.txt"
  path.write_text(f"# header\n\n{line}\n")
  proc = _suite("--xfails-file", str(path), "--collect-only")
  assert proc.returncode == 4, proc.stdout[-1500:] + proc.stderr[-1500:]
  n = 3 + line.count("\n")
  assert f"CONF.BASELINE: {path}, line {n}:" in proc.stderr, proc.stderr[-1500:]


def test_ids_and_globs_match_from_the_conformance_directory():
  assert baselines.canonical_id("../venv/lib/site-packages/conformance/tests/test_x.py::t[a-b]") == \
    "conformance/tests/test_x.py::t[a-b]"
  assert baselines.canonical_id("tests/test_x.py::t") == "tests/test_x.py::t"   # not the suite's: unchanged
  entry = baselines.Entry("conformance/tests/test_x.py::t[a-*]", "why", "f:1")
  assert entry.matches("conformance/tests/test_x.py::t[a-float32]")
  assert not entry.matches("conformance/tests/test_x.py::t[b-float32]")
  assert not baselines.Entry("conformance/tests/test_x.py::t[ab]", "why", "f:1").matches(
    "conformance/tests/test_x.py::ta")   # brackets are literal, not a character class
