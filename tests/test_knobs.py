"""DEV.KNOBS: every environment knob refimpl reads is validated by name, at import, when Context sets it and when it
is read, with an error naming the knob, its range and the value; refimpl/helpers.py (KNOBS, knob) is the one reader."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl import Context, getenv
from refimpl.helpers import SpecError
from refimpl.helpers import KNOBS, KnobError, check_environment, knob

ROOT = Path(__file__).resolve().parent.parent

BAD = {   # knob -> values outside its type or range, and the phrase the error uses
  "DEBUG": (["abc", "-1", "1.5", "2x"], "a non-negative integer"),
  "NOOPT": (["2", "yes", "true", "-1"], "0 or 1"),
  "BEAM": (["abc", "-2", "0.5"], "a non-negative integer"),
  "SANITIZE": (["yes", "2", "on"], "0 or 1"),
  "CPU_THREADS": (["-1", "four", "1e3"], "a non-negative integer"),
  "PACK": (["off", "3"], "0 or 1"),
  "CACHE": (["no", "-1"], "0 or 1"),
  "CACHE_DIR": ([__file__], "a directory"),
  "CC": (["ccache gcc", "gcc -O2"], "one command name or path without spaces (no arguments)"),
  "DEV": (["c p u", "CPU:x", "1CPU"], "a device name such as CPU or CUDA:1"),
  "CL_PLATFORM": (["first", "-1"], "a non-negative integer"),
  "VIZ": (["2", "-1", __file__], "0, 1 or a directory"),
}
GOOD = {"DEBUG": ["0", "4", "7"], "NOOPT": ["0", "1"], "BEAM": ["0", "2", "16"], "SANITIZE": ["0", "1"],
        "CPU_THREADS": ["0", "1", "8"], "PACK": ["0", "1"], "CACHE": ["0", "1"], "CACHE_DIR": [str(ROOT / "absent")],
        "CC": ["cc", "/usr/bin/gcc", "clang-15"], "DEV": ["CPU", "cuda:1", "PYTHON"], "CL_PLATFORM": ["0", "1"],
        "VIZ": ["0", "1", str(ROOT / "absent")]}


def test_every_knob_has_bad_values_here():
  assert set(BAD) == set(KNOBS) == set(GOOD)


@pytest.mark.parametrize("name", sorted(KNOBS))
def test_bad_values_are_refused_by_name(name):
  values, phrase = BAD[name]
  for v in values:
    with pytest.raises(KnobError) as e: check_environment({name: v})
    assert e.value.clause == "DEV.KNOBS" and isinstance(e.value, ValueError) and isinstance(e.value, SpecError)
    assert str(e.value) == f"DEV.KNOBS: {name} must be {phrase}, got {v!r}" or \
      str(e.value) == f"DEV.KNOBS: {name} must be {phrase}, got file {v!r}", str(e.value)
  for v in GOOD[name]: check_environment({name: v})
  check_environment({name: ""})   # empty: unset


def test_beam_abc_message():
  with pytest.raises(ValueError, match=re.escape("BEAM must be a non-negative integer, got 'abc'")):
    check_environment({"BEAM": "abc"})


@pytest.mark.parametrize("name,value", [("BEAM", "abc"), ("NOOPT", "2"), ("CPU_THREADS", "-1"), ("DEV", "c p u")])
def test_import_stops_on_a_bad_knob(name, value):
  """The check runs when refimpl is imported (a fresh interpreter)."""
  r = subprocess.run([sys.executable, "-c", "import refimpl"], cwd=ROOT, capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": str(ROOT), name: value})
  assert r.returncode != 0 and f"KnobError: DEV.KNOBS: {name} must be" in r.stderr and repr(value) in r.stderr, r.stderr


def test_context_validates_before_setting(monkeypatch):
  monkeypatch.delenv("BEAM", raising=False)
  with pytest.raises(KnobError, match="BEAM must be a non-negative integer, got 'abc'"): Context(BEAM="abc")
  with pytest.raises(KnobError, match="SANITIZE must be 0 or 1, got '2'"): Context(SANITIZE=2)
  assert "BEAM" not in os.environ
  with Context(SANITIZE=True, BEAM=2): assert knob("SANITIZE") == 1 and knob("BEAM") == 2
  with Context(TINYSPEC_OTHER="anything"): assert os.environ["TINYSPEC_OTHER"] == "anything"   # not ours: free


def test_readers_validate(monkeypatch):
  """getenv, the optimisation pass (codegen/search.py) and the packing pass (engine/pack.py) read through the
  validated reader; an empty value is the default."""
  from refimpl.codegen.search import choose_opts
  from refimpl.engine import pack
  monkeypatch.setenv("BEAM", "abc")
  getenv.cache_clear()
  with pytest.raises(KnobError, match="BEAM"): getenv("BEAM", 0)
  with pytest.raises(KnobError, match="BEAM"): choose_opts("CPU", None)
  monkeypatch.setenv("BEAM", "")
  monkeypatch.setenv("PACK", "off")
  with pytest.raises(KnobError, match="PACK must be 0 or 1, got 'off'"): pack.enabled()
  monkeypatch.setenv("PACK", "")
  monkeypatch.setenv("NOOPT", "")
  assert pack.enabled() and knob("PACK") == 1 and knob("CC") in ("cc", os.environ.get("CC"))
  getenv.cache_clear()
  assert getenv("BEAM", 0) == 0


def test_cpu_backend_reads_validated_knobs(monkeypatch):
  from refimpl.runtime.ops_cpu import CPUBackend
  monkeypatch.setenv("CPU_THREADS", "-3")
  with pytest.raises(KnobError, match="CPU_THREADS"): CPUBackend()
  monkeypatch.setenv("CPU_THREADS", "3")
  monkeypatch.setenv("CACHE", "0")
  dev = CPUBackend()
  assert dev.threads == 3 and dev.cache_dir is None


def test_spec_lists_every_knob():
  """spec/backends.md's DEV.KNOBS table has one row per knob of refimpl.helpers.KNOBS, and the README names each."""
  text = (ROOT / "spec" / "backends.md").read_text()
  section = text[text.index("`DEV.KNOBS`"):]
  rows = re.findall(r"^\| `([A-Z_]+)` \|", section, re.M)
  assert sorted(rows) == sorted(KNOBS)
  readme = (ROOT / "README.md").read_text()
  missing = [n for n in KNOBS if not re.search(rf"[`$]{n}\b", readme)]
  assert not missing, missing
