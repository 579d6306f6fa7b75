"""Run metadata of a conformance report (CONF.REPORT.meta): what was run, on what, by which versions, when and how,
so that a conformance.json read months later (or merged with other machines' shards) says where its numbers came
from. Collected on the controller only, once at the start of the run and once at its end.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import Any

import pytest

__all__ = ["FORMAT", "RunClock", "run_metadata", "git_commit", "package_version"]

# the `format` field of every conformance.json; conformance/schema/conformance.schema.json describes it (a change that
# breaks readers of the file bumps the number)
FORMAT = "tinyspec-conformance/1"
SUITE_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tinyspec", "numpy", "torch", "hypothesis", "pytest", "pytest-xdist")
# the environment variables that change what the suite or refimpl does (README, DEV.KNOBS): recorded when set
KNOBS = ("DEV", "DEBUG", "NOOPT", "BEAM", "SANITIZE", "CPU_THREADS", "PACK", "CACHE", "CACHE_DIR", "CC", "CL_PLATFORM",
         "CHECK_INDEX", "CUDA_BINDING", "HYPOTHESIS_PROFILE", "TINYSPEC_IMPL", "TINYSPEC_BACKEND", "PYTHONHASHSEED")


def package_version(name: str) -> str | None:
  """The installed version of a distribution, None when it is not installed."""
  try: return version(name)
  except PackageNotFoundError: return None


def git_commit(directory: Path) -> dict[str, Any] | None:
  """The commit checked out in `directory` and whether the work tree differs from it, or None where it is not a git
  checkout (an installed wheel) or git is missing."""
  def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=20,
                          check=True).stdout.strip()
  try:
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
  except (OSError, subprocess.SubprocessError): return None
  return {"commit": commit, "dirty": dirty}


def _adapter_facts(impl: str, backend: str) -> dict[str, Any]:
  """The adapter's own account of itself (Adapter.describe: name, version, device), or the error that kept it from
  loading. The distribution that ships the adapter's module gives the version where the adapter names none."""
  from conformance.adapters.base import load_adapter
  facts: dict[str, Any] = {"adapter": impl}
  try: facts.update(load_adapter(impl, backend).describe())
  except Exception as e:   # noqa: BLE001 - the run has its verdicts already; the report says why facts are missing
    facts["error"] = f"{type(e).__name__}: {e}"
  if not facts.get("version"):
    top = impl.split(":")[0].split(".")[0]
    dists = packages_distributions().get(top, [])
    facts["version"] = package_version(dists[0]) if dists else None
  return facts


class RunClock:
  """Wall-clock start of the run (taken when the plugin is configured) and its end."""

  def __init__(self):
    self.start, self._t0 = datetime.now(timezone.utc), time.monotonic()

  def finish(self) -> dict[str, Any]:
    return {"started": self.start.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - self._t0, 3)}


def _hypothesis(config: pytest.Config) -> dict[str, Any]:
  """The hypothesis profile in force and its seed: --hypothesis-seed where given; a derandomized profile (ci) draws
  the same examples from each test's name every time, so it needs no seed to be repeated."""
  from hypothesis import settings
  current = settings.default
  seed = config.getoption("hypothesis_seed", None)
  return {"profile": settings.get_current_profile_name(), "seed": None if seed is None else str(seed),
          "derandomize": bool(current.derandomize), "max_examples": current.max_examples}


def _program() -> list[str]:
  """How pytest was started: `pytest`, or `python -m pytest` (argv[0] is then pytest's __main__.py)."""
  name = Path(sys.argv[0]).name
  return ["python", "-m", "pytest"] if name == "__main__.py" else [name]


def run_metadata(config: pytest.Config, clock: RunClock, backend: str, impl: str) -> dict[str, Any]:
  """CONF.REPORT.meta: versions, implementation and device, git commits, hypothesis profile and seed, times,
  command line, shard and selection of this run."""
  opt = config.option
  return {
    "versions": {"python": platform.python_version(), **{p: package_version(p) for p in PACKAGES}},
    "platform": {"system": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()},
    "backend": backend,
    "impl": _adapter_facts(impl, backend),
    # the suite's checkout (None when installed from a wheel) and the directory pytest ran in (a backend author's
    # repository, where the implementation under test usually lives)
    "git": {"suite": git_commit(SUITE_ROOT), "cwd": git_commit(Path(config.invocation_params.dir))},
    "hypothesis": _hypothesis(config),
    **clock.finish(),
    "command": shlex.join([*_program(), *config.invocation_params.args]),
    "shard": config.getoption("--shard", None),
    "selection": {"keyword": getattr(opt, "keyword", "") or None, "markers": getattr(opt, "markexpr", "") or None},
    "workers": getattr(opt, "numprocesses", None),
    "knobs": {k: os.environ[k] for k in KNOBS if k in os.environ},
  }
