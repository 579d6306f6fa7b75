"""CONF.SHARD: the N shards of a run are disjoint and together are the whole run (by collection: which tests run is
decided before any runs)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
