"""EXEC.OPT.exact over the suite's own kernels: the default options give NOOPT=1's bits for every forward op of the
conformance catalogue on the CPU (tests/opt_suite.py, in child processes: see its docstring for why)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import opt_suite

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="DEV.COMPILE: no C compiler: the CPU cannot compile")
SHARDS = 4
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(1, SHARDS + 1))
def test_default_options_give_noopt_bits(shard):
  done = subprocess.run([sys.executable, "-m", "tests.opt_suite", "--shard", f"{shard}/{SHARDS}"], cwd=ROOT,
                        capture_output=True, text=True, timeout=1500)
  lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
  assert lines and "ran" in lines[-1], done.stdout[-2000:] + done.stderr[-4000:]
  mismatches = lines[:-1]
  assert not mismatches, "\n".join(f"{m['case']}: {m['problem']}" for m in mismatches)
  assert done.returncode == 0 and lines[-1]["ran"] > 0, done.stderr[-4000:]


def test_shards_cover_every_case_once():
  names = [opt_suite.case_id(op, dt) for op, dt in opt_suite.cases()]
  assert len(names) > 300 and len(set(names)) == len(names)
  owners = [[k for k in range(1, SHARDS + 1) if opt_suite.in_shard(n, k, SHARDS)] for n in names]
  assert all(len(o) == 1 for o in owners)
  assert {o[0] for o in owners} == set(range(1, SHARDS + 1))


def test_a_changed_bit_is_reported(monkeypatch):
  """The comparison sees one flipped bit of one output, and a refusal on one side only."""
  op, dtype = next((op, dt) for op, dt in opt_suite.cases() if op.name == "add")
  from refimpl.helpers import getenv
  def flipped(adapter, op, case):
    out = np.ones(3, np.float32)
    if not getenv("NOOPT"): out.view(np.uint32)[1] ^= 1
    return [out]
  monkeypatch.setattr(opt_suite, "_results", flipped)
  assert "output 0" in opt_suite.check(op, dtype)
  monkeypatch.setattr(opt_suite, "_results", lambda *a: "ValueError: x" if getenv("NOOPT") else [np.ones(1)])
  assert "NOOPT=1 gave 'ValueError: x'" in opt_suite.check(op, dtype)
  monkeypatch.setattr(opt_suite, "_results", lambda *a: [np.array([np.nan, 1.0])])
  assert opt_suite.check(op, dtype) is None
