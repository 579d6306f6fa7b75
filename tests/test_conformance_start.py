"""What the conformance suite checks once, before it collects anything: a bad --impl, --backend or --shard is one
usage error (pytest's exit status 4) naming the problem, not the same error in every test counted as a failure of the
implementation (issue 18)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args, says", [
  (["--impl", "no_such_module:Adapter"], "No module named 'no_such_module'"),
  (["--impl", "conformance.adapters.base:load_adapter"], "is not a conformance.adapters.Adapter subclass"),
  (["--impl", "conformance.adapters.refimpl"], "--impl wants module:Class"),
  (["--backend", "NOPE"], "DEV.REGISTRY: no device named 'NOPE'"),
  (["--shard", "4/3"], "CONF.SHARD"),
  (["--shard", "half"], "CONF.SHARD"),
])
def test_bad_run_options_are_one_usage_error(args, says):
  cmd = [sys.executable, "-m", "pytest", "conformance", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 4, proc.stdout[-1500:] + proc.stderr[-1500:]
  assert says in proc.stderr and proc.stderr.count("ERROR") == 1, proc.stderr[-1500:]
