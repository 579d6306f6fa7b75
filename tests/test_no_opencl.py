"""`tox -e test` on a machine without an OpenCL driver (DEV.CL.absent): the tests that use the CL device skip, naming
the reason, instead of erroring at collection with pyopencl's PLATFORM_NOT_FOUND_KHR (issue 18). CI installs PoCL, so
the driver is hidden here: OCL_ICD_VENDORS pointing at an empty folder leaves the ICD loader no platform at all."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every test file that opens the CL device; -k keeps the CL tests of the files that test other devices too
CL_FILES = ["tests/test_cl.py", "tests/test_bounds_mode.py", "tests/test_copy.py", "tests/test_opt.py",
            "tests/test_matmul_tile.py"]


def test_cl_tests_skip_with_the_reason_when_no_driver_exists(tmp_path):
  pytest.importorskip("pyopencl", reason="DEV.CL.absent: without pyopencl the CL tests skip for that reason instead")
  env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path)}   # an empty vendors folder: no ICD, no platform
  cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-n", "0", *CL_FILES,
         "-k", "cl or CL"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0, out[-3000:]
  assert not re.search(r"\d+ (failed|error)", out), out[-3000:]
  skips = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
  # the whole of test_cl.py is one module-level skip that says what is missing
  assert any("tests/test_cl.py" in ln and "PLATFORM_NOT_FOUND_KHR" in ln for ln in skips), out[-3000:]
  assert len(skips) >= 4 and all("DEV.REGISTRY" in ln for ln in skips), "\n".join(skips)
