"""The CPU kernel cache heals (DEV.CPU.cache.heal) and stays safe under concurrency (DEV.CPU.cache): a cached file
that is truncated, random, another kernel's object or an object without the kernel's function is removed, compiled
again and reported once as a warning; a compiler that exits 0 but writes no usable object is a DEV.COMPILE error
naming it and the file; processes compiling the same kernel at once, and a compile killed half-way, leave a cache
that gives the right answers."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from refimpl.codegen import linearize
from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import const, glob, launch, store

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc), so the CPU device cannot compile", allow_module_level=True)

from refimpl.runtime import ops_cpu  # noqa: E402
from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def probe(tag: int, name: str | None = None) -> LinearProgram:
  """A kernel that stores `tag` into out[0]."""
  out = glob(0, dtypes.int32, 1)
  sink = UOp(Ops.SINK, dtypes.void, (store(out, const(0), const(tag)),))
  return LinearProgram(name or f"probe_{tag}", tuple(linearize(sink)))


def run(dev: CPUBackend, tag: int, name: str | None = None) -> int:
  return int(launch(dev, probe(tag, name), [np.zeros(1, np.int32)])[0][0])


def fresh_tag() -> int: return int.from_bytes(os.urandom(3), "little")   # a source no earlier run has cached


def only_object(cache: Path, exclude: tuple[Path, ...] = ()) -> Path:
  objs = [p for p in (cache / "cpu").glob("*.so") if p not in exclude]
  assert len(objs) == 1, objs
  return objs[0]


def _truncated(path: Path, other: Path, tag: int) -> None: path.write_bytes(path.read_bytes()[:-4000])
def _random(path: Path, other: Path, tag: int) -> None: path.write_bytes(os.urandom(path.stat().st_size))
def _foreign(path: Path, other: Path, tag: int) -> None: shutil.copyfile(other, path)


def _wrong_symbol(path: Path, other: Path, tag: int) -> None:
  """Another kernel's object sealed under this file's own key: whole, ours, but without the kernel's function."""
  key = path.stem
  body = other.read_bytes()[:-(len(ops_cpu.TRAILER) + 96)]
  path.write_bytes(ops_cpu._sealed(body, key))


@pytest.mark.parametrize("corrupt", [_truncated, _random, _foreign, _wrong_symbol], ids=lambda f: f.__name__[1:])
def test_corrupt_object_is_recompiled(tmp_path, monkeypatch, corrupt):
  """The next run warns once (naming DEV.CPU.cache.heal and the file), compiles again, gives the right answer and
  leaves a good object: the run after that neither compiles nor warns."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  tag, other_tag = fresh_tag(), fresh_tag() ^ 1
  assert run(CPUBackend(), tag) == tag
  path = only_object(tmp_path)
  assert run(CPUBackend(), other_tag) == other_tag
  other = only_object(tmp_path, exclude=(path,))
  corrupt(path, other, tag)
  dev = CPUBackend()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert run(dev, tag) == tag
  heal = [str(w.message) for w in caught if "DEV.CPU.cache.heal" in str(w.message)]
  assert len(heal) == 1 and path.name in heal[0] and dev.compiler_runs == 1, heal
  again = CPUBackend()
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert run(again, tag) == tag
  assert again.compiler_runs == 0


def test_elf_check_catches_a_cut_object(tmp_path, monkeypatch):
  """The check made before loading: a whole object passes; cut before a segment's end it is refused with the byte
  counts (loading it would be a SIGBUS); random bytes are no ELF object."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  run(CPUBackend(), fresh_tag())
  obj = only_object(tmp_path).read_bytes()[:-(len(ops_cpu.TRAILER) + 96)]
  assert ops_cpu._elf_whole(obj) == ""
  assert "past the object's" in ops_cpu._elf_whole(obj[:len(obj) // 2])
  assert ops_cpu._elf_whole(b"\x00" * 64) == "it is not an ELF object"


def _fake_cc(tmp_path: Path, body: str) -> Path:
  cc = tmp_path / "fake-cc"
  cc.write_text("#!/bin/sh\n" + textwrap.dedent(body))
  cc.chmod(0o755)
  return cc


@pytest.mark.parametrize("what,body", [
  ("garbage", 'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then head -c 4096 /dev/urandom > "$2"; fi; shift; done\n'),
  ("nothing", "exit 0\n")])
def test_compiler_output_that_does_not_load(tmp_path, monkeypatch, what, body):
  """DEV.COMPILE: $CC exits 0 but writes random bytes (or nothing): the error names the compiler and the file, and
  nothing reaches the cache."""
  cc = _fake_cc(tmp_path, body)
  monkeypatch.setenv("CC", str(cc))
  monkeypatch.setenv("CACHE_DIR", str(tmp_path / "cache"))
  with pytest.raises(SpecError) as e: run(CPUBackend(), fresh_tag())
  msg = str(e.value)
  assert e.value.clause == "DEV.COMPILE" and str(cc) in msg and ".so" in msg and "exited 0" in msg, msg
  assert not list((tmp_path / "cache").glob("cpu/*.so"))


CHILD = """
import sys, numpy as np
from tests.test_cpu_cache import run
from refimpl.runtime.ops_cpu import CPUBackend
dev = CPUBackend()
print(run(dev, int(sys.argv[1])), dev.compiler_runs)
"""


def _child(tag: int, env: dict) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-c", CHILD, str(tag)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)


def _env(**extra) -> dict:
  return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def test_concurrent_processes_share_the_cache(tmp_path):
  """Three processes compile the same new kernel into one cache at once: each gets the right answer, the cache holds
  one whole object and no temporary file, and a fourth process loads it without compiling."""
  tag = fresh_tag()
  env = _env(CACHE_DIR=str(tmp_path))
  procs = [_child(tag, env) for _ in range(3)]
  outs = [p.communicate(timeout=120) for p in procs]
  assert all(p.returncode == 0 for p in procs), outs
  assert all(o.split()[0] == str(tag) for o, _ in outs), outs
  path = only_object(tmp_path)
  assert not [p for p in (tmp_path / "cpu").iterdir() if p.suffix == ".tmp"]
  assert ops_cpu._unsealed(path.read_bytes(), path.stem) == ""
  out, err = _child(tag, env).communicate(timeout=120)
  assert out.split() == [str(tag), "0"], (out, err)


def test_killed_compile_leaves_the_cache_usable(tmp_path):
  """A process killed while its compiler runs publishes nothing; the next one compiles and gives the right answer."""
  marker = tmp_path / "started"
  cc = _fake_cc(tmp_path, f'[ "$1" = --version ] && exec cc --version\ntouch "{marker}"\nsleep 30\nexec cc "$@"\n')
  tag = fresh_tag()
  p = _child(tag, _env(CACHE_DIR=str(tmp_path / "cache"), CC=str(cc)))
  deadline = time.monotonic() + 60
  while not marker.exists() and p.poll() is None and time.monotonic() < deadline: time.sleep(0.05)
  assert marker.exists(), p.communicate()
  os.killpg(p.pid, signal.SIGKILL)
  p.wait(timeout=30)
  assert not list((tmp_path / "cache").glob("cpu/*.so"))
  out, err = _child(tag, _env(CACHE_DIR=str(tmp_path / "cache"))).communicate(timeout=120)
  assert out.split() == [str(tag), "1"], (out, err)
