"""Hypothesis done the standard way in the conformance suite (issue 18; CONF.HYPOTHESIS.per-test and
CONF.HYPOTHESIS.profile): `@given` sits on each collected test, so every test id has its own example database key,
a failing example saved for one op survives a passing run of another, `@reproduce_failure` applies to a test,
`--hypothesis-show-statistics` reports each test, the profile comes from --hypothesis-profile, then
$HYPOTHESIS_PROFILE, then ci, and an expected failure skips the shrinking phase.

Each run is a fresh pytest process on the conformance suite, as users run it, with a small plugin (PLUGIN below)
that adds a profile with a directory database in tmp, a database that logs the keys it is asked for, and on request
a planted bug (Tensor.abs returns its input, so abs(-1) = -1) or an expected failure for it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ABS, EXP = "test_forward[abs-float32]", "test_forward[exp-float32]"
ABS_K, EXP_K = "test_forward and abs-float32", "test_forward and exp-float32 and not log"   # -k selections

PLUGIN = '''
import os
from hypothesis import HealthCheck, Phase, reproduce_failure, settings
from hypothesis.database import DirectoryBasedExampleDatabase


class LoggingDatabase(DirectoryBasedExampleDatabase):
  """Writes 'test id<TAB>key' for every key the running test fetches."""
  def fetch(self, key):
    with open(os.environ["KEY_LOG"], "a") as f:
      f.write(os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0] + "\\t" + key.hex() + "\\n")
    yield from super().fetch(key)


QUIET = list(HealthCheck)
if os.environ.get("EXAMPLE_DB"):
  settings.register_profile("tmpdb", max_examples=6, deadline=None, suppress_health_check=QUIET,
                            database=LoggingDatabase(os.environ["EXAMPLE_DB"]))
  # only what the database holds: fails only where a saved failing example is replayed
  settings.register_profile("tmpdb-replay", parent=settings.get_profile("tmpdb"), phases=(Phase.reuse,))
# no generated examples at all: a test fails here only through its @reproduce_failure
settings.register_profile("explicit-only", deadline=None, database=None, suppress_health_check=QUIET,
                          phases=(Phase.explicit,))


def pytest_configure(config):
  if os.environ.get("PLANT_ABS"):
    import refimpl.tensor
    refimpl.tensor.Tensor.abs = lambda self: self
  if os.environ.get("XFAIL_ABS"):
    from conformance.xfails import XFAILS
    XFAILS[("PYTHON", "abs", "float32", "forward")] = "planted: Tensor.abs returns its input"


def pytest_collection_modifyitems(items):
  if os.environ.get("REPRODUCE_BLOB"):   # as a user pastes @reproduce_failure(...) above the test
    for item in items: reproduce_failure(os.environ["REPRODUCE_VERSION"], eval(os.environ["REPRODUCE_BLOB"]))(item.obj)
'''


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
  tmp = tmp_path_factory.mktemp("hypothesis_plugin")
  (tmp / "given_plugin.py").write_text(PLUGIN)
  return tmp


def _run(plugin_dir: Path, select: str, *args: str, **env: str) -> subprocess.CompletedProcess:
  """pytest conformance -k `select` in a fresh process, with the plugin and the extra environment variables."""
  environ = {k: v for k, v in os.environ.items() if k not in ("HYPOTHESIS_PROFILE", "PLANT_ABS", "XFAIL_ABS")}
  environ.update(env, PYTHONPATH=os.pathsep.join([str(plugin_dir), str(ROOT), os.environ.get("PYTHONPATH", "")]))
  cmd = [sys.executable, "-m", "pytest", "conformance", "-p", "given_plugin", "-p", "no:cacheprovider", "-q",
         "-k", select, *args]
  return subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600)


def _keys(log: Path) -> dict[str, set[str]]:
  """test id -> the primary database keys it fetched (sub-keys such as '<key>.secondary' left out)."""
  out: dict[str, set[str]] = {}
  for line in log.read_text().splitlines():
    test, key = line.split("\t")
    if b"." not in bytes.fromhex(key): out.setdefault(test.split("::")[-1], set()).add(key)
  return out


def _statistics(out: str, test: str) -> str:
  """The --hypothesis-show-statistics block of `test` ('' when there is none)."""
  m = re.search(rf"{re.escape(test)}:\n\n(.*?)(?:\n\n\S|\Z)", out, re.S)
  return m.group(1) if m else ""


def test_each_test_id_has_its_own_database_key_and_keeps_its_failures(plugin_dir, tmp_path):
  """abs (with the bug planted) fails and saves its example; a passing run of exp replays nothing of abs's and
  prunes nothing; abs then fails again from the database alone. With one key for all forward tests (the inner
  `@given` of old), exp's run would have replayed abs's example, seen it pass and deleted it."""
  db, log = tmp_path / "db", tmp_path / "keys.log"
  env = {"EXAMPLE_DB": str(db), "KEY_LOG": str(log)}
  failing = _run(plugin_dir, ABS_K, "--hypothesis-profile", "tmpdb", PLANT_ABS="1", **env)
  assert failing.returncode == 1 and "abs [" in failing.stdout, failing.stdout[-3000:] + failing.stderr[-2000:]
  saved = {p.relative_to(db) for p in db.rglob("*") if p.is_file()}
  assert saved, "the failing example was not saved"
  passing = _run(plugin_dir, EXP_K, "--hypothesis-profile", "tmpdb", **env)
  assert passing.returncode == 0, passing.stdout[-3000:] + passing.stderr[-2000:]
  keys = _keys(log)
  assert set(keys) == {ABS, EXP} and all(len(k) == 1 for k in keys.values()), keys
  assert keys[ABS] != keys[EXP]   # one database key per test id
  assert saved <= {p.relative_to(db) for p in db.rglob("*") if p.is_file()}   # nothing of abs's pruned
  replay = _run(plugin_dir, ABS_K, "--hypothesis-profile", "tmpdb-replay", PLANT_ABS="1",
                **env)
  assert replay.returncode == 1 and "abs [" in replay.stdout, replay.stdout[-3000:] + replay.stderr[-2000:]


def test_reproduce_failure_applies_to_the_test(plugin_dir):
  """The blob a failure prints (print_blob in every profile), put on the test as `@reproduce_failure`, replays the
  failing example in a profile that generates none: the failure again; without the bug, hypothesis's DidNotReproduce
  (a run that ignored the decorator would pass, having no example to run)."""
  failing = _run(plugin_dir, ABS_K, PLANT_ABS="1")
  m = re.search(r"@reproduce_failure\('([^']+)', (b'[^']+')\)", failing.stdout)
  assert failing.returncode == 1 and m, failing.stdout[-3000:] + failing.stderr[-2000:]
  env = {"REPRODUCE_VERSION": m.group(1), "REPRODUCE_BLOB": m.group(2)}
  again = _run(plugin_dir, ABS_K, "--hypothesis-profile", "explicit-only", PLANT_ABS="1",
               **env)
  assert again.returncode == 1 and "abs [" in again.stdout, again.stdout[-3000:] + again.stderr[-2000:]
  fixed = _run(plugin_dir, ABS_K, "--hypothesis-profile", "explicit-only", **env)   # no bug: hypothesis says so
  assert fixed.returncode == 1 and "DidNotReproduce" in fixed.stdout, fixed.stdout[-3000:] + fixed.stderr[-2000:]


def test_statistics_and_the_profile_from_the_environment(plugin_dir):
  """--hypothesis-show-statistics has a block per test; HYPOTHESIS_PROFILE=ci-short draws 3 examples, and
  --hypothesis-profile ci wins over it with 6."""
  short = _run(plugin_dir, EXP_K, "--hypothesis-show-statistics",
               HYPOTHESIS_PROFILE="ci-short")
  stats = _statistics(short.stdout, EXP)
  assert short.returncode == 0 and "3 passing" in stats, short.stdout[-3000:] + short.stderr[-2000:]
  ci = _run(plugin_dir, EXP_K, "--hypothesis-show-statistics", "--hypothesis-profile", "ci",
            HYPOTHESIS_PROFILE="ci-short")
  assert ci.returncode == 0 and "6 passing" in _statistics(ci.stdout, EXP), ci.stdout[-3000:] + ci.stderr[-2000:]
  bad = _run(plugin_dir, EXP_K, HYPOTHESIS_PROFILE="no-such-profile")
  assert bad.returncode == 4 and "HYPOTHESIS_PROFILE=no-such-profile" in bad.stderr, bad.stdout + bad.stderr


def test_expected_failure_runs_without_shrinking(plugin_dir):
  """A failure registered as expected (conformance/xfails.py) runs hypothesis's explicit and generate phases only:
  the same failing test not registered shrinks its example."""
  plain = _run(plugin_dir, ABS_K, "--hypothesis-show-statistics", PLANT_ABS="1")
  assert plain.returncode == 1 and "shrink phase" in _statistics(plain.stdout, ABS), plain.stdout[-3000:]
  expected = _run(plugin_dir, ABS_K, "--hypothesis-show-statistics", PLANT_ABS="1",
                  XFAIL_ABS="1")
  stats = _statistics(expected.stdout, ABS)
  assert expected.returncode == 0 and "1 xfailed" in expected.stdout, expected.stdout[-3000:]
  assert "generate phase" in stats and "shrink phase" not in stats, stats
