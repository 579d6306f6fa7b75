"""The CPU device compiles the kernels of a run in batches (DEV.CPU.batch): one compiler run for several programs, each
its own translation unit, one shared object that is every program's cache entry; kernels of one name go to different
batches, a batch the compiler rejects falls back to one compile per kernel (the error names its kernel), a later
process finds every program in the disk cache, and realize() hands the device a run's programs before launching."""
import os
import shutil
import warnings

import numpy as np
import pytest

from refimpl.codegen import linearize
from refimpl.device import Device, LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from tests.backend_checks import const, glob, launch, store

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc), so the CPU device cannot compile", allow_module_level=True)

from refimpl.runtime import ops_cpu  # noqa: E402
from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402


def probe(tag: int, name: str | None = None) -> LinearProgram:
  """A kernel that stores `tag` into out[0]."""
  out = glob(0, dtypes.int32, 1)
  sink = UOp(Ops.SINK, dtypes.void, (store(out, const(0), const(tag)),))
  return LinearProgram(name or f"probe_{tag}", tuple(linearize(sink)))


def fresh_tags(n: int) -> list[int]:
  """Tags no earlier run has cached (the source, hence the cache key, holds the tag)."""
  base = int.from_bytes(os.urandom(3), "little") * 64
  return [base + i for i in range(n)]


def run_all(dev, progs) -> list[int]:
  return [int(launch(dev, p, [np.zeros(1, np.int32)])[0][0]) for p in progs]


def test_one_compiler_run_per_batch(tmp_path, monkeypatch):
  """DEV.CPU.batch: five programs of distinct names, one compiler run, every kernel's own result; each program's
  cache file is a sealed whole object holding its function (a later backend loads all five, no compiler, no warning)."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  tags = fresh_tags(5)
  progs = [probe(t) for t in tags]
  dev = CPUBackend()
  dev.compile_many(progs)
  assert dev.compiler_runs == 1
  assert run_all(dev, progs) == tags and dev.compiler_runs == 1
  assert len(list((tmp_path / "cpu").glob("*.so"))) == 5
  later = CPUBackend()
  with warnings.catch_warnings():
    warnings.simplefilter("error")   # DEV.CPU.cache.heal would warn about an unusable file
    later.compile_many(progs)
    assert run_all(later, progs) == tags
  assert later.compiler_runs == 0


def test_same_name_and_batch_size(tmp_path, monkeypatch):
  """DEV.CPU.batch: two programs named alike cannot share an object (their functions would clash): they go to
  different batches; BATCH_MAX caps a batch; the batches compile on parallel threads (CPU_THREADS=2 here), each
  kernel still its own. Already compiled programs are not compiled again."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(ops_cpu, "BATCH_MAX", 3)
  monkeypatch.setenv("CPU_THREADS", "2")
  tags = fresh_tags(7)
  progs = [probe(t) for t in tags[:5]] + [probe(tags[5], f"probe_{tags[0]}"), probe(tags[6], f"probe_{tags[0]}")]
  dev = CPUBackend()
  dev.compile_many(progs)
  # names: 5 distinct + 2 more of the first name: batches [0,1,2], [3,4,5'], [6'], run on parallel threads
  assert dev.compiler_runs == 3
  assert run_all(dev, progs) == tags and dev.compiler_runs == 3
  dev.compile_many(progs)
  assert dev.compiler_runs == 3


def test_rejected_batch_compiles_one_by_one(tmp_path, monkeypatch):
  """DEV.CPU.batch: a batch with a source the compiler rejects publishes nothing; the good kernels then compile on
  their own and run, and the bad one's error is DEV.COMPILE naming it."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  tags = fresh_tags(3)
  good = [probe(t) for t in tags[:2]]
  bad = probe(tags[2], "broken_kernel")
  dev = CPUBackend()
  render = dev.renderer.render
  monkeypatch.setattr(dev.renderer, "render", lambda p, **kw: "this is not C;" if p.name == "broken_kernel"
                      else render(p, **kw))
  dev.compile_many([good[0], bad, good[1]])
  assert dev.compiler_runs == 1 and not list((tmp_path / "cpu").glob("*.so"))
  assert run_all(dev, good) == tags[:2] and dev.compiler_runs == 3
  with pytest.raises(SpecError, match="broken_kernel") as e: dev.compile(bad)
  assert "DEV.COMPILE" in str(e.value) or "DEV.CPU.compile-error" in str(e.value)


def test_realize_compiles_ahead_same_bits():
  """DEV.CPU.batch through realize(): a run of several new kernels takes fewer compiler runs than kernels, and gives
  the PYTHON device's bits (EXEC.ASIF). Shapes no earlier test used make every kernel new."""
  from refimpl import Tensor
  n = 40 + int.from_bytes(os.urandom(2), "little") % 4000
  rng = np.random.default_rng(n)
  a, b = rng.standard_normal((n, 3), np.float32), rng.standard_normal((3, 5), np.float32)
  def program(device):
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    return ((ta @ tb).softmax(0).sum(1) + ta.exp().max() - tb.sin().sum(0).max()).numpy()
  cpu = Device["CPU"]
  runs, programs = cpu.compiler_runs, len(cpu._programs)
  got = program("CPU")
  new = len(cpu._programs) - programs
  assert new >= 3 and cpu.compiler_runs - runs < new, (new, cpu.compiler_runs - runs)
  assert got.tobytes() == program("PYTHON").tobytes()
