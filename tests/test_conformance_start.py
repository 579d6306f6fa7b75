"""What the conformance suite checks once, before it collects anything: a bad --impl, --backend or --shard is one
usage error (pytest's exit status 4) naming the problem, not the same error in every test counted as a failure of the
implementation (issue 18)."""
from __future__ import annotations

import os
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


def _collect(args: list[str], env: dict[str, str], path: str = "conformance") -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-m", "pytest", path, "--collect-only", "-q", "-p", "no:cacheprovider", *args]
  clean = {k: v for k, v in os.environ.items() if not k.startswith("TINYSPEC_") and k != "DEV"}
  return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**clean, **env})


@pytest.mark.parametrize("args, env, says", [
  ([], {"TINYSPEC_BACKEND": "NOPE"}, "DEV.REGISTRY: no device named 'NOPE'"),
  ([], {"TINYSPEC_IMPL": "no_such_module:Adapter"}, "No module named 'no_such_module'"),
  ([], {"TINYSPEC_BACKEND": "NOPE", "DEV": "PYTHON"}, "no device named 'NOPE'"),   # TINYSPEC_BACKEND before DEV
])
def test_the_environment_chooses_impl_and_backend(args, env, says):
  proc = _collect(args, env)
  assert proc.returncode == 4 and says in proc.stderr, proc.stderr[-1500:]


def test_options_win_over_the_environment():
  proc = _collect(["--backend", "PYTHON", "--impl", "conformance.adapters.refimpl:RefimplAdapter", "-k", "test_alu"],
                  {"TINYSPEC_BACKEND": "NOPE", "TINYSPEC_IMPL": "no_such_module:Adapter"})
  assert proc.returncode == 0 and "tests collected" in proc.stdout, proc.stdout[-1500:] + proc.stderr[-1500:]


def test_plugin_loaded_twice_registers_once_and_stays_out_of_other_runs(tmp_path):
  """An installed tinyspec's pytest11 entry point (here a bare dist-info on PYTHONPATH, as pip writes it) loads the
  plugin; conftest.py, loaded too, does not add the options twice; and a run of other tests is left alone (no
  adapter check, so a bad --backend is not even tried)."""
  dist = tmp_path / "tinyspec_entry_point-0.dist-info"
  dist.mkdir()
  (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyspec-entry-point\nVersion: 0\n")
  (dist / "entry_points.txt").write_text("[pytest11]\ntinyspec = conformance.plugin\n")
  env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
  suite = _collect(["-k", "test_alu"], env)
  assert suite.returncode == 0 and "tests collected" in suite.stdout, suite.stdout[-1500:] + suite.stderr[-1500:]
  other = _collect(["--backend", "NOPE", "-p", "no:tinyspec"], env, path="tests/test_conformance_profiles.py")
  assert other.returncode == 4, "-p no:tinyspec should leave --backend unknown: the entry point was not used"
  other = _collect(["--backend", "NOPE"], env, path="tests/test_conformance_profiles.py")
  assert other.returncode == 0 and "4 tests collected" in other.stdout, other.stdout[-1500:] + other.stderr[-1500:]
