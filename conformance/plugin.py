"""The conformance suite's pytest plugin, installed with the package (the `pytest11` entry point `tinyspec`), so that
the suite runs from any directory, against any implementation, with no conftest of the user's:

    pytest --pyargs conformance --impl mypkg.adapter:MyAdapter --backend CPU -n 2
    TINYSPEC_IMPL=mypkg.adapter:MyAdapter TINYSPEC_BACKEND=CPU pytest --pyargs conformance     # the same
    pytest conformance --backend CPU                                                         # in a checkout

It adds `--backend`, `--impl`, `--report-dir` and `--shard`, the hypothesis profiles (ci, ci-short, triage, dev,
thorough), the `clauses` and `conformance` markers, and the expected-failure registry (conformance/xfails.py).
In a checkout that is not installed, conformance/conftest.py registers this module instead of the entry point.

An installed plugin is loaded by every pytest run of the environment, so it changes nothing unless the run is the
suite's (`names_suite`, or conformance/conftest.py being collected): only then does it load the profile ci, check
`--impl` and `--backend` once (a usage error naming the problem), shard, mark expected failures and write reports.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, is_hypothesis_test, settings
from hypothesis.errors import InvalidArgument

__all__ = ["DEFAULT_IMPL", "start", "names_suite"]

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.function_scoped_fixture]
# ci: few examples, derandomized so that a run is reproducible; dev: more, with the example database; thorough: many
settings.register_profile("ci", max_examples=6, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_QUIET, print_blob=True)
# ci-short: ci with half the examples, for a backend whose compiler takes about a second a kernel (PoCL on 2 cores),
# so that CI can run every test there; the edge-case tables are not examples and run whole
settings.register_profile("ci-short", parent=settings.get_profile("ci"), max_examples=3)
# triage: ci without shrinking, for a first pass over an implementation that fails many tests: hypothesis spends up
# to 5 minutes shrinking each failing test (most of a tinygrad run's 2 hours); failures report the first failing
# example as found, not a minimal one
settings.register_profile("triage", parent=settings.get_profile("ci"), phases=(Phase.explicit, Phase.generate))
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=_QUIET, print_blob=True)
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=_QUIET,
                          print_blob=True)
DEFAULT_IMPL = "conformance.adapters.refimpl:RefimplAdapter"
SUITE_DIR = Path(__file__).resolve().parent
_STARTED = pytest.StashKey[bool]()
_EXPECTED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
  """The run's options; each defaults to an environment variable, so CI can set them once (options win)."""
  group = parser.getgroup("conformance", "tinyspec conformance suite (conformance/plugin.py)")
  group.addoption("--backend", default=os.environ.get("TINYSPEC_BACKEND") or os.environ.get("DEV") or "PYTHON",
                  help="device to check: PYTHON, CPU, CL, CUDA or a third-party one "
                       "(default: $TINYSPEC_BACKEND, else $DEV, else PYTHON)")
  group.addoption("--impl", default=os.environ.get("TINYSPEC_IMPL") or DEFAULT_IMPL,
                  help=f"adapter of the implementation under test as module:Class (default: $TINYSPEC_IMPL, else "
                       f"{DEFAULT_IMPL}; docs/adapter.md)")
  group.addoption("--report-dir", default=None, help="write conformance.json, junit.xml and coverage.md there")
  group.addoption("--viz-dir", default=None, metavar="DIR",
                  help="write a VIZ bundle of refimpl's rewrites for each failing test to DIR (CONF.VIZ)")
  from conformance import baselines
  baselines.add_options(parser)   # --xfails-file, --skips-file, --write-xfails (conformance/baselines.py)
  group.addoption("--shard", default=None, metavar="K/N",
                  help="run shard K of N (1 <= K <= N): each test id goes to one shard by its CRC-32, so the N shards "
                       "together run every test once, on any machine (CONF.SHARD)")
  # baselines of expected failures (--xfails-file, --skips-file, --write-xfails) register their own options in
  # their own module, into this same "conformance" group


def names_suite(config: pytest.Config) -> bool:
  """Whether the command line (or testpaths) names this package or something inside it: `--pyargs conformance[.x]`,
  or a path at or under the package's folder."""
  for arg in config.args:
    target = arg.split("::")[0]
    if config.option.pyargs and (target == "conformance" or target.startswith("conformance.")): return True
    path = Path(config.invocation_params.dir, target).resolve()
    if path == SUITE_DIR or SUITE_DIR in path.parents: return True
  return False


@pytest.hookimpl(tryfirst=True)   # before pytest's junitxml plugin reads config.option.xmlpath (start())
def pytest_configure(config: pytest.Config) -> None:
  config.addinivalue_line("markers", "clauses(*ids): the spec clauses a test checks (for the clause coverage report)")
  config.addinivalue_line("markers", "conformance(op, dtype, prop): the catalogue entry, dtype and property of a test")
  if names_suite(config): start(config)


def start(config: pytest.Config) -> None:
  """Switch the plugin on for this run, once: the default profile ci, the checks of --shard, --impl and --backend,
  and the reports. Called from pytest_configure when the command line names the suite, and by conformance/conftest.py
  when pytest collects the suite's folder by other means (`pytest .` in a checkout)."""
  if config.stash.get(_STARTED, False): return
  config.stash[_STARTED] = True
  _load_profile(config)
  if config.getoption("--shard") is not None: _shard(config.getoption("--shard"))
  _check_adapter(config)
  from conformance import baselines
  from conformance.reproduce import ReproductionSection
  baselines.configure(config)   # reads the baseline files: a malformed line is a usage error before collection
  config.pluginmanager.register(ReproductionSection(), "conformance-reproduction")   # CONF.REPRO: printed last
  from conformance.report import ReportPlugin   # here: it reads the spec, which a run of other tests need not
  report_dir = config.getoption("--report-dir")
  config.pluginmanager.register(ReportPlugin(config, report_dir), "conformance-report")
  if (viz_dir := config.getoption("--viz-dir")):
    from conformance.viz import VizPlugin
    config.pluginmanager.register(VizPlugin(viz_dir), "conformance-viz")
  # --report-dir also writes DIR/junit.xml through pytest's own --junitxml, unless --junitxml names another file; this
  # takes effect when start() runs from this plugin's tryfirst pytest_configure (the suite named on the command line)
  if report_dir and not config.option.xmlpath: config.option.xmlpath = os.path.join(report_dir, "junit.xml")


def _load_profile(config: pytest.Config) -> None:
  """CONF.HYPOTHESIS.profile: --hypothesis-profile (loaded by hypothesis's own plugin) wins, then
  $HYPOTHESIS_PROFILE, then ci. It must be loaded before the test modules are collected: `@given` takes the profile
  in force when it decorates a test (CONF.HYPOTHESIS.per-test)."""
  if config.getoption("hypothesis_profile", None): return
  name = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
  try: settings.load_profile(name)
  except InvalidArgument:
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE={name}: no such hypothesis profile (the suite registers ci, "
                            "ci-short, triage, dev and thorough)") from None


def _check_adapter(config: pytest.Config) -> None:
  """--impl and --backend are tried once, before collection: a typo or a backend without its driver is one usage
  error naming the problem, not the same error in every test counted as a failure of the implementation."""
  from conformance.adapters.base import load_adapter
  impl, backend = config.getoption("--impl"), config.getoption("--backend").upper()
  try: load_adapter(impl, backend)
  except Exception as e:   # noqa: BLE001 - whatever the adapter raises, the run cannot start
    raise pytest.UsageError(f"--impl {impl} --backend {backend}: {type(e).__name__}: {e}") from None


def _shard(spec: str) -> tuple[int, int]:
  """--shard K/N as (K, N), or a usage error naming the problem (CONF.SHARD)."""
  try: k, n = (int(v) for v in spec.split("/"))
  except ValueError: raise pytest.UsageError(f"CONF.SHARD: --shard takes K/N, got {spec!r}") from None
  if not 1 <= k <= n: raise pytest.UsageError(f"CONF.SHARD: --shard {spec}: need 1 <= K <= N")
  return k, n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
  """Keep this shard's tests (--shard K/N), mark the registered expected failures of this backend (strict: a pass is
  reported as a failure), and copy each test's clauses, entry, dtype and property into its user_properties, so that
  JUnit XML (--junitxml) carries them. Nothing outside a run of the suite."""
  if not config.stash.get(_STARTED, False): return
  from conformance.xfails import expected_failure
  if (spec := config.getoption("--shard")) is not None:
    k, n = _shard(spec)
    keep = [i for i in items if zlib.crc32(i.nodeid.encode()) % n == k - 1]
    config.hook.pytest_deselected(items=[i for i in items if zlib.crc32(i.nodeid.encode()) % n != k - 1])
    items[:] = keep
  from conformance import baselines
  for item in baselines.apply(config, items):   # the user's baselines (CONF.BASELINE), strict like XFAILS
    item.stash[_EXPECTED] = True
  backend = config.getoption("--backend").upper()
  for item in items:
    if (c := item.get_closest_marker("clauses")) is not None: item.user_properties.append(("clauses", " ".join(c.args)))
    m = item.get_closest_marker("conformance")
    if m is None: continue
    item.user_properties += [("op", m.kwargs["op"]), ("dtype", m.kwargs["dtype"]), ("property", m.kwargs["prop"]),
                             ("backend", backend)]
    reason = expected_failure(backend, m.kwargs["op"], m.kwargs["dtype"], m.kwargs["prop"])
    if reason:
      item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
      item.stash[_EXPECTED] = True


@pytest.hookimpl(hookwrapper=True, tryfirst=True)   # outside hypothesis's own pytest_runtest_call wrapper
def pytest_runtest_call(item: pytest.Item):
  """Each test starts from the settings `@given` gave its function, and they are put back after it. Hypothesis's pytest
  plugin derives a parametrized test's settings from the function's at each call and leaves the derived ones on the
  function, so over ~1000 parametrizations of one test in a process (test_forward has ~1900) the chain of parents
  grew past Python's recursion limit and every later test failed with RecursionError; restoring after each test keeps
  it one deep. An expected failure also runs without hypothesis's shrinking phase: its failing example is known, and
  shrinking it (minutes per test where a NaN shrinks slowly) would only cost time."""
  test = getattr(item, "obj", None)
  if not is_hypothesis_test(test):
    yield
    return
  fn = getattr(test, "__func__", test)
  previous = fn._hypothesis_internal_use_settings
  if item.stash.get(_EXPECTED, False):
    fn._hypothesis_internal_use_settings = settings(previous, phases=(Phase.explicit, Phase.generate))
  try: yield
  finally: fn._hypothesis_internal_use_settings = previous
