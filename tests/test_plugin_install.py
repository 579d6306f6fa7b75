"""The suite as a backend author runs it (issue 18): tinyspec pip-installed (not editable, from a copy of the checkout)
into a fresh venv, then, from a folder outside the checkout holding only the example adapter
(examples/minimal_adapter, docs/adapter.md),
`pytest --pyargs conformance --impl my_adapter:MyAdapter --backend CPU -k add`. It passes only if the installed
package finds its pytest plugin through the `pytest11` entry point (without it `--impl` is an unrecognized argument)
and carries everything the suite reads at run time (the spec's tables).

The venv reuses the running interpreter's installed packages (torch, hypothesis, pytest, numpy, pip, setuptools), as
`python -m venv --system-site-packages` would reuse a system's: a .pth file names a folder of links to them, leaving out
tinyspec itself, so that the checkout reaches the venv only through `pip install`. pip runs with --no-index and
--no-build-isolation, so nothing is downloaded."""
from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what an install of this checkout puts in site-packages (editable or not): left out of the reused packages
OURS = ("refimpl", "emu", "conformance", "spec", "tinyspec", "__editable__", "__editable___tinyspec")


def _reused_packages(folder: Path) -> Path:
  """A folder of links to every installed package of this interpreter except tinyspec's own."""
  folder.mkdir()
  for sp in dict.fromkeys(site.getsitepackages()):
    for entry in Path(sp).iterdir():
      if entry.name.startswith(OURS) or entry.suffix == ".pth" or (folder / entry.name).exists(): continue
      (folder / entry.name).symlink_to(entry)
  return folder


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
  proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
  assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
  return proc


@pytest.mark.slow
def test_installed_suite_runs_the_example_adapter_from_outside_the_checkout(tmp_path):
  env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TINYSPEC_", "VIRTUAL_ENV")) and k != "DEV"}
  venv = tmp_path / "venv"
  # --without-pip: pip and setuptools come with the reused packages (a venv's own setuptools may be too old to build)
  _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env, 300)
  python = venv / "bin" / "python"
  purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                      tmp_path, env, 60).stdout.strip())
  (purelib / "_reuse_installed.pth").write_text(f"{_reused_packages(tmp_path / 'reused')}\n")
  # from a copy: setuptools builds in the source folder, and its tinyspec.egg-info left in the checkout would register
  # the entry point for every later run there
  checkout = tmp_path / "checkout"
  shutil.copytree(ROOT, checkout, symlinks=True, ignore=shutil.ignore_patterns(
    ".git", ".tox", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", ".ci"))
  _run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(checkout)], tmp_path, env,
       600)

  repo = tmp_path / "my_repo"   # the backend author's repository: their adapter, nothing of the checkout
  repo.mkdir()
  shutil.copy(ROOT / "examples" / "minimal_adapter" / "my_adapter.py", repo)
  env = {**env, "PYTHONPATH": str(repo)}
  # -P: the working folder is not put on sys.path, as with the `pytest` script
  where = _run([str(python), "-P", "-c", "import conformance, refimpl; print(conformance.__file__, refimpl.__file__)"],
               repo, env, 60).stdout
  assert all(Path(p).is_relative_to(purelib) for p in where.split()), where
  proc = _run([str(python), "-P", "-m", "pytest", "--pyargs", "conformance", "--impl", "my_adapter:MyAdapter",
               "--backend", "CPU", "-k", "add", "-q"], repo, env, 1800)
  last = proc.stdout.splitlines()[-1]   # "12 passed, 3 skipped in 80.1s"
  counts = {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped)", last)}
  assert counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("error"), proc.stdout[-3000:]
  assert "conformance summary (my_adapter:MyAdapter on CPU)" in proc.stdout, proc.stdout[-3000:]
  print(last)   # the counts, for -s
