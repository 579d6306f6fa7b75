"""Baselines of expected failures kept in the user's repository (CONF.BASELINE): `--xfails-file FILE` and
`--skips-file FILE` read them, `--write-xfails FILE` writes a run's failures as one.

A baseline file has one test id or glob per line, then whitespace, `#` and the reason (required):

    # tinygrad 0.14.0 on CPU
    conformance/tests/test_forward.py::test_forward[sort-float32]    # 32 sort of a 0-d tensor (bug)
    conformance/tests/test_gradient.py::test_vjp[asin-*]             # 66 gradient 0 at 0 (bug)

Blank lines and lines starting with `#` are comments. `*` and `?` are wildcards; brackets are literal (test ids are
full of them). Ids are matched from the `conformance/` directory on (`conformance/tests/test_forward.py::...`),
wherever the package is installed. A listed xfail is strict: a test that passes fails the run (XPASS(strict)), so a
fixed bug is noticed and its line removed. A test listed in both files is skipped.

conformance/conftest.py calls `add_options` from pytest_addoption, `configure` from pytest_configure and `apply` from
pytest_collection_modifyitems; everything else happens in the `Baselines` plugin that `configure` registers.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Entry", "add_options", "apply", "canonical_id", "configure", "parse", "write"]

_LINE = re.compile(r"^(?P<pattern>\S(?:.*?\S)?)\s+#\s*(?P<reason>.*?)\s*$")


@dataclass(frozen=True)
class Entry:
  """One line of a baseline: the test id or glob, the reason, and where it was written (for messages)."""
  pattern: str
  reason: str
  where: str

  def matches(self, test_id: str) -> bool:
    return self.pattern == test_id or _glob(self.pattern).fullmatch(test_id) is not None


def _glob(pattern: str) -> re.Pattern:
  """fnmatch's `*` and `?` without its character classes: `[` and `]` in a test id are literal."""
  return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def parse(path: str | Path) -> list[Entry]:
  """The entries of a baseline file; a malformed line is a pytest.UsageError naming the file and the line."""
  entries = []
  try: text = Path(path).read_text()
  except OSError as e: raise pytest.UsageError(f"CONF.BASELINE: cannot read {path}: {e.strerror or e}") from None
  for n, line in enumerate(text.splitlines(), 1):
    if not line.strip() or line.lstrip().startswith("#"): continue
    m = _LINE.match(line.strip())
    if m is None or not m["reason"]:
      raise pytest.UsageError(f"CONF.BASELINE: {path}, line {n}: want '<test id or glob>  # <reason>', got {line!r}")
    entries.append(Entry(m["pattern"], m["reason"], f"{path}:{n}"))
  return entries


def canonical_id(nodeid: str) -> str:
  """A test id from the suite's own `conformance/` directory on, the same from any rootdir or install location:
  'site-packages/conformance/tests/test_forward.py::test_forward[add-float32]' ->
  'conformance/tests/test_forward.py::test_forward[add-float32]'."""
  path, sep, rest = nodeid.partition("::")
  parts = path.split("/")
  starts = [i for i, p in enumerate(parts[:-1]) if p == "conformance"]
  return "/".join(parts[starts[-1]:]) + sep + rest if starts else nodeid


def write(path: str | Path, failures: dict[str, str], header: str) -> None:
  """A baseline file of `failures` (test id -> reason), sorted, under a comment header."""
  lines = [f"# {h}" for h in header.splitlines()]
  width = max((len(t) for t in failures), default=0)
  lines += [f"{t.ljust(width)}  # {' '.join(r.split()) or 'failed'}" for t, r in sorted(failures.items())]
  Path(path).parent.mkdir(parents=True, exist_ok=True)
  Path(path).write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------- pytest side

def add_options(parser: pytest.Parser) -> None:
  """The baseline options, in the conformance group."""
  group = parser.getgroup("conformance")
  group.addoption("--xfails-file", action="append", default=[], metavar="FILE",
                  help="expected failures: one test id or glob per line, then '# reason'; strict, so a listed test "
                       "that passes fails the run (CONF.BASELINE; repeatable)")
  group.addoption("--skips-file", action="append", default=[], metavar="FILE",
                  help="tests not to run, same format as --xfails-file (CONF.BASELINE; repeatable)")
  group.addoption("--write-xfails", default=None, metavar="FILE",
                  help="write this run's failures to FILE as an --xfails-file baseline, each with the first line of "
                       "its failure as the reason (CONF.BASELINE.write)")


def configure(config: pytest.Config) -> None:
  """Read the baseline files now (a malformed one stops the run before collection) and register the plugin."""
  xfails = [e for f in config.getoption("--xfails-file") for e in parse(f)]
  skips = [e for f in config.getoption("--skips-file") for e in parse(f)]
  config.pluginmanager.register(Baselines(config, xfails, skips), "conformance-baselines")


def apply(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
  """Mark the collected tests the baselines list; returns those marked as expected failures."""
  plugin = config.pluginmanager.get_plugin("conformance-baselines")
  return plugin.mark(items) if plugin else []


class Baselines:
  """Marks listed tests (skip wins over xfail) and, with --write-xfails, records failures and writes them at the end."""

  def __init__(self, config: pytest.Config, xfails: list[Entry], skips: list[Entry]):
    self.config, self.xfails, self.skips = config, xfails, skips
    self.out = config.getoption("--write-xfails")
    self.failures: dict[str, str] = {}

  def mark(self, items: list[pytest.Item]) -> list[pytest.Item]:
    expected = []
    for item in items:
      tid = canonical_id(item.nodeid)
      if (e := next((e for e in self.skips if e.matches(tid)), None)) is not None:
        item.add_marker(pytest.mark.skip(reason=f"CONF.BASELINE {e.where}: {e.reason}"))
      elif (e := next((e for e in self.xfails if e.matches(tid)), None)) is not None:
        item.add_marker(pytest.mark.xfail(reason=f"CONF.BASELINE {e.where}: {e.reason}", strict=True))
        expected.append(item)
    return expected

  def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
    """A failure (in any phase), or an expected failure that still fails, goes into --write-xfails's file; an
    XPASS(strict) does not: that test passes."""
    if self.out is None or hasattr(self.config, "workerinput"): return
    tid = canonical_id(report.nodeid)
    if report.failed and not str(report.longrepr).startswith("[XPASS(strict)]"):
      self.failures.setdefault(tid, _first_line(report))
    elif report.skipped and hasattr(report, "wasxfail"):   # failing still: keep the baseline's reason
      self.failures.setdefault(tid, re.sub(r"^CONF\.BASELINE \S+: ", "", report.wasxfail) or "xfail")

  @pytest.hookimpl(trylast=True)
  def pytest_sessionfinish(self, session: pytest.Session) -> None:
    if self.out is None or hasattr(self.config, "workerinput"): return
    backend = self.config.getoption("--backend", "?")
    impl = self.config.getoption("--impl", "?")
    write(self.out, self.failures, f"CONF.BASELINE: the failures of a conformance run, --impl {impl} --backend "
                                   f"{backend}, written {time.strftime('%Y-%m-%d %H:%M:%S')} by --write-xfails")


def _first_line(report: pytest.TestReport) -> str:
  """The first line of a failure's message: the exception's, without its type when it is an AssertionError."""
  crash = getattr(report.longrepr, "reprcrash", None)
  text = crash.message if crash is not None else str(report.longrepr)
  first = next((line for line in text.splitlines() if line.strip()), "failed")
  return first.removeprefix("AssertionError: ").strip()
