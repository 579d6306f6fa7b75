"""Every clause of spec/ops.md, spec/gradients.md and spec/accuracy.md has a conformance test of its own, or an entry
in conformance/descriptive.py saying why no conformance test can check it (issue 6).

How: one `pytest conformance --collect-only` in a subprocess, with a small plugin that writes down the clause IDs of
every collected test's `clauses` marker, the marker the coverage table (conformance/report.py, DIR/coverage.md)
counts. Collecting takes seconds where running the suite takes minutes, and it sees exactly the tests a run would
execute; whether they pass is the suite's own business. A clause covered only through its parent (OP.CDIV for
OP.CDIV.zero) does not count here: each clause needs a test that cites it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.descriptive import DESCRIPTIVE
from conformance.report import COVERAGE_CHAPTERS, coverage_markdown
from conformance.spec_tables import clauses

ROOT = Path(__file__).resolve().parent.parent

CITED_PLUGIN = '''
import json, os

def pytest_collection_finish(session):
  cited = set()
  for item in session.items:
    marker = item.get_closest_marker("clauses")   # as conformance/conftest.py reads it for the reports
    if marker is not None: cited.update(marker.args)
  with open(os.environ["CITED_CLAUSES_OUT"], "w") as f: json.dump(sorted(cited), f)
'''


@pytest.fixture(scope="module")
def cited(tmp_path_factory) -> set[str]:
  """The clause IDs the conformance tests cite, from collecting the suite."""
  tmp = tmp_path_factory.mktemp("cited")
  (tmp / "cited_clauses.py").write_text(CITED_PLUGIN)
  out = tmp / "cited.json"
  env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
         "CITED_CLAUSES_OUT": str(out)}
  cmd = [sys.executable, "-m", "pytest", "conformance", "--collect-only", "-q", "-p", "cited_clauses",
         "-p", "no:cacheprovider"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
  return set(json.loads(out.read_text()))


@pytest.mark.parametrize("chapter", COVERAGE_CHAPTERS)
def test_every_clause_has_a_conformance_test_or_a_reason(cited, chapter):
  defined = clauses(ROOT / "spec" / chapter)
  missing = [c for c in defined if c not in cited and c not in DESCRIPTIVE]
  assert not missing, f"spec/{chapter}: no conformance test cites {missing} (add one, or a reason to " \
                      f"conformance/descriptive.py if no implementation can show the clause)"


def test_descriptive_entries_are_defined_untested_clauses(cited):
  """The list stays honest: each entry is a clause of a covered chapter, has a reason, and no test cites it (a
  clause that gets a test leaves the list)."""
  defined = {c for ch in COVERAGE_CHAPTERS for c in clauses(ROOT / "spec" / ch)}
  assert set(DESCRIPTIVE) <= defined, set(DESCRIPTIVE) - defined
  assert all(len(why) > 20 for why in DESCRIPTIVE.values())
  assert not set(DESCRIPTIVE) & cited, f"cited by a test, so not descriptive: {set(DESCRIPTIVE) & cited}"


def test_coverage_table_marks_descriptive_clauses():
  md = coverage_markdown({}, chapters=("ops.md",))
  assert "| `OP.VALUES.check` | descriptive |" in md
  untested, descriptive = md.split("## Clauses with no test")[1].split("## Descriptive clauses")
  assert "- `OP.VALUES.check`" not in untested and "- `OP.ADD`" in untested
  assert f"- `OP.VALUES.check`: {DESCRIPTIVE['OP.VALUES.check']}" in descriptive
