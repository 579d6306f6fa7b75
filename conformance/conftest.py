"""pytest plugin of the conformance suite: `--backend`, `--impl`, the hypothesis profiles, the `clauses` and
`conformance` markers, and the expected-failure registry (conformance/xfails.py).

    pytest conformance                                    # refimpl on $DEV (default PYTHON), profile ci
    pytest conformance --backend CPU -n 2                 # another backend, in parallel
    pytest conformance --impl mypkg.adapter:MyAdapter     # another implementation
    pytest conformance --hypothesis-profile thorough      # more examples (or HYPOTHESIS_PROFILE=thorough)
"""
from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import HealthCheck, Phase, is_hypothesis_test, settings
from hypothesis.errors import InvalidArgument

from conformance.adapters.base import Adapter, load_adapter
from conformance.report import ReportPlugin
from conformance.xfails import expected_failure

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


def pytest_addoption(parser: pytest.Parser) -> None:
  group = parser.getgroup("conformance")
  group.addoption("--backend", default=os.environ.get("DEV", "PYTHON"),
                  help="device to check: PYTHON, CPU, CL or CUDA (default: $DEV or PYTHON)")
  group.addoption("--impl", default=DEFAULT_IMPL, help=f"adapter as module:Class (default: {DEFAULT_IMPL})")
  group.addoption("--report-dir", default=None, help="write conformance.json, junit.xml and coverage.md there")
  group.addoption("--shard", default=None, metavar="K/N",
                  help="run shard K of N (1 <= K <= N): each test id goes to one shard by its CRC-32, so the N shards "
                       "together run every test once, on any machine (CONF.SHARD)")


def pytest_configure(config: pytest.Config) -> None:
  config.addinivalue_line("markers", "clauses(*ids): the spec clauses a test checks (for the clause coverage report)")
  config.addinivalue_line("markers", "conformance(op, dtype, prop): the catalogue entry, dtype and property of a test")
  _load_profile(config)
  if config.getoption("--shard") is not None: _shard(config.getoption("--shard"))
  _check_adapter(config)
  report_dir = config.getoption("--report-dir")
  config.pluginmanager.register(ReportPlugin(config, report_dir), "conformance-report")
  if report_dir and not hasattr(config, "workerinput"): _junit(config, os.path.join(report_dir, "junit.xml"))


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
  impl, backend = config.getoption("--impl"), config.getoption("--backend").upper()
  try: load_adapter(impl, backend)
  except Exception as e:   # noqa: BLE001 - whatever the adapter raises, the run cannot start
    raise pytest.UsageError(f"--impl {impl} --backend {backend}: {type(e).__name__}: {e}") from None


def _junit(config: pytest.Config, path: str) -> None:
  """pytest's own JUnit XML writer at `path`, unless --junitxml already chose a file."""
  from _pytest.junitxml import LogXML, xml_key
  if xml_key in config.stash: return
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  config.stash[xml_key] = LogXML(path, config.option.junitprefix, config.getini("junit_suite_name"),
                                 config.getini("junit_logging"), config.getini("junit_duration_report"),
                                 config.getini("junit_family"), config.getini("junit_log_passing_tests"))
  config.pluginmanager.register(config.stash[xml_key])


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
  """The backend under test, upper case."""
  return request.config.getoption("--backend").upper()


@pytest.fixture(scope="session")
def adapter(request: pytest.FixtureRequest, backend: str) -> Adapter:
  """The adapter of the implementation under test, on the chosen backend."""
  return load_adapter(request.config.getoption("--impl"), backend)


def _shard(spec: str) -> tuple[int, int]:
  """--shard K/N as (K, N), or a usage error naming the problem (CONF.SHARD)."""
  try: k, n = (int(v) for v in spec.split("/"))
  except ValueError: raise pytest.UsageError(f"CONF.SHARD: --shard takes K/N, got {spec!r}") from None
  if not 1 <= k <= n: raise pytest.UsageError(f"CONF.SHARD: --shard {spec}: need 1 <= K <= N")
  return k, n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
  """Keep this shard's tests (--shard K/N), mark the registered expected failures of this backend (strict: a pass is
  reported as a failure), and copy each test's clauses, entry, dtype and property into its user_properties, so that
  JUnit XML (--junitxml) carries them."""
  if (spec := config.getoption("--shard")) is not None:
    k, n = _shard(spec)
    keep = [i for i in items if zlib.crc32(i.nodeid.encode()) % n == k - 1]
    config.hook.pytest_deselected(items=[i for i in items if zlib.crc32(i.nodeid.encode()) % n != k - 1])
    items[:] = keep
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


_EXPECTED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
  """An expected failure runs without hypothesis's shrinking phase: its failing example is known, and shrinking it
  (minutes per test where a NaN shrinks slowly) would only cost time. `@given` fixed the test's settings when it
  decorated the test, so they are swapped on the test function itself (the attribute hypothesis's pytest plugin
  reads and derives a parametrized test's settings from) and put back after."""
  test = getattr(item, "obj", None)
  if not item.stash.get(_EXPECTED, False) or not is_hypothesis_test(test):
    yield
    return
  previous = test._hypothesis_internal_use_settings
  test._hypothesis_internal_use_settings = settings(previous, phases=(Phase.explicit, Phase.generate))
  try: yield
  finally: test._hypothesis_internal_use_settings = previous
