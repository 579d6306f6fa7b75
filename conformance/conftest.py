"""The suite's pytest plugin is conformance/plugin.py, which the `pytest11` entry point loads wherever tinyspec is
installed. This file registers it where it is not (a checkout run as `pytest conformance` before any install; never
twice), switches it on whenever pytest collects this folder, and holds the two fixtures of the suite's tests."""
from __future__ import annotations

import pytest

from conformance import plugin
from conformance.adapters.base import Adapter, load_adapter


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
  if not pluginmanager.is_registered(plugin): pluginmanager.register(plugin, "tinyspec")


def pytest_configure(config: pytest.Config) -> None:
  plugin.start(config)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
  """The backend under test, upper case."""
  return request.config.getoption("--backend").upper()


@pytest.fixture(scope="session")
def adapter(request: pytest.FixtureRequest, backend: str) -> Adapter:
  """The adapter of the implementation under test, on the chosen backend."""
  return load_adapter(request.config.getoption("--impl"), backend)
