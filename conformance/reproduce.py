"""CONF.REPRO: the reproduction is the last thing a failing test prints. A conformance failure's message ends with a
reproduction (conformance/properties.py), but pytest prints hypothesis' notes (the falsifying example, the
@reproduce_failure blob) and pytest's own assertion explanation after the exception's message; this plugin repeats the
reproduction of the minimal example as a last section of the failure, "reproduction", after all of them.

Registered by conformance/conftest.py (pytest_configure)."""
from __future__ import annotations

import json

import pytest

from conformance.report import _PROP_KEY

MARK = "--- reproduction ---\n"


class ReproductionSection:
  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.when == "call" and report.failed:
      props = dict(item.user_properties)
      failure = json.loads(props.get(_PROP_KEY, "{}")).get("failure") or ""
      if MARK in failure: report.sections.append(("reproduction (paste into Python; it fails while the bug is there)",
                                                  failure.split(MARK, 1)[1]))
    return report
