"""`--viz-dir DIR` (CONF.VIZ): a VIZ bundle of refimpl's rewrites for each failing test, named in the failure.

Each test runs with a fresh recorder (refimpl/uop/capture.py), and so does each hypothesis example: the test's inner
function is wrapped to start one before every example, so that when the test fails, the recorder holds the example
hypothesis ran last, which is the falsifying example it reports. The bundle is written to
DIR/<test id>.viz.json and a note on the failure names it and the command that serves it:
`python -m refimpl.viz DIR`. Only what refimpl compiled is recorded: the graphs, rewrites, linear programs and source
of the failing example's kernels, on the backend under test."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from refimpl.uop import capture
from refimpl.viz.bundle import write


class VizPlugin:
  """Registered by conformance/conftest.py when --viz-dir is given."""
  def __init__(self, directory: str):
    self.directory = Path(directory)

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_call(self, item: pytest.Item):
    if item.get_closest_marker("xfail") is not None:   # a registered expected failure: its reproduction is known
      yield
      return
    previous = capture.recorder   # a VIZ=1 run's own recorder comes back after the test
    hyp = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(hyp, "inner_test", None)
    if inner is not None:
      @functools.wraps(inner)
      def each_example(*args, **kwargs):
        capture.start()   # this example's capture only (CONF.VIZ)
        return inner(*args, **kwargs)
      hyp.inner_test = each_example
    capture.start()
    try:
      outcome = yield
    finally:
      rec = capture.stop()
      capture.recorder = previous
      if inner is not None: hyp.inner_test = inner
    error = outcome.excinfo[1] if outcome.excinfo else None
    if error is None or rec is None or isinstance(error, (pytest.skip.Exception, pytest.xfail.Exception)): return
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
    path = write(rec.to_json(), self.directory, name, item.nodeid)
    kernels = sum(g.kind == "kernel" for g in rec.groups)
    error.add_note(f"CONF.VIZ: refimpl's rewrites of this example ({kernels} kernel(s)) are in {path}; "
                   f"see them with: python -m refimpl.viz {self.directory}")
