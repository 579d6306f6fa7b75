"""UOP.HASHCONS.threads: graphs may be built from several Python threads at once, also while CPU kernels run on the
CPU device's worker threads: equal graphs are still one object, and results are right. The device registry opens a
device once and the CPU device compiles a program once, whichever threads ask."""
import os
import shutil
import sys
import threading
import time

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.device import _DeviceRegistry, Backend
from refimpl.uop.ops import UOp

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc), so the CPU device cannot compile", allow_module_level=True)

from refimpl.runtime.ops_cpu import CPUBackend  # noqa: E402
from tests.backend_checks import launch  # noqa: E402
from tests.test_cpu_cache import probe  # noqa: E402


@pytest.fixture
def fast_switching():
  """Switch threads every 10 microseconds (CPython's default is 5 ms), so that races show within a short test."""
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-5)
  yield
  sys.setswitchinterval(old)


def _kernel_graphs(n: int) -> list[UOp]:
  """n kernel-level expressions over a fresh variable (every node made here, unless another thread made it first)."""
  x = UOp.variable(f"stress_{n}", 0, 1000)
  return [((x + i) * (i + 7) - x) // 3 for i in range(n)]


def _tensor_graphs(base: Tensor, n: int) -> list[UOp]:
  """n tensor-level graphs over a shared lazy tensor (only built, never realized here)."""
  return [((base * (i % 17) + i).relu().sum(axis=1) - base.max()).uop for i in range(n)]


def test_graphs_built_in_threads_while_cpu_kernels_run(fast_switching):
  """Four threads build the same graphs at once while a fifth realizes CPU kernels of 8192+ work-groups on a pool of
  worker threads: each graph is one object in every thread, and every kernel result equals numpy's."""
  n_builders, n = 4, 400
  base = Tensor(np.arange(64, dtype=np.float32).reshape(8, 8), device="CPU")
  start = threading.Barrier(n_builders + 1)
  built: list = [None] * n_builders
  errors: list = []
  results: list = []
  stop = threading.Event()

  def build(t: int):
    try:
      start.wait()
      built[t] = (_kernel_graphs(n), _tensor_graphs(base, n // 4))
    except BaseException as e: errors.append(e)   # noqa: BLE001

  def run_kernels():
    try:
      rng = np.random.default_rng(5)
      start.wait()
      while not stop.is_set() or len(results) < 2:
        a = rng.normal(size=1 << 15).astype(np.float32)
        got = (Tensor(a, device="CPU") * 3 + 1).relu().numpy()
        results.append(got.tobytes() == np.maximum(a * np.float32(3) + np.float32(1), 0).tobytes())
    except BaseException as e: errors.append(e)   # noqa: BLE001

  runner = threading.Thread(target=run_kernels)
  builders = [threading.Thread(target=build, args=(t,)) for t in range(n_builders)]
  runner.start()
  for b in builders: b.start()
  for b in builders: b.join()
  stop.set()
  runner.join()
  assert not errors, errors
  assert results and all(results), results
  for t in range(1, n_builders):
    for kind in (0, 1):
      split = [i for i, (a, b) in enumerate(zip(built[0][kind], built[t][kind])) if a is not b]
      assert not split, f"thread {t}: {len(split)} equal graphs are different objects, e.g. #{split[0]}"
  again = _kernel_graphs(n)   # and the ones built now, on this thread, are those
  assert all(a is b for a, b in zip(again, built[0][0]))


def test_tensors_made_in_threads_while_another_realizes(fast_switching):
  """Two threads make tensors without pause while a third realizes 300 times: realizing walks every live tensor
  (refimpl.tensor.core.live_tensors), and a walk that another thread's new tensor interrupts raised RuntimeError
  'Set changed size during iteration' (seen once in CI in the test above; this one failed on the old code)."""
  stop = threading.Event()
  errors: list = []
  sums: list = []

  def make():
    try:
      while not stop.is_set(): _ = [Tensor([1.0, 2.0]) for _ in range(50)]
    except BaseException as e: errors.append(e)   # noqa: BLE001

  def realize():
    try:
      for i in range(300): sums.append((Tensor(np.full(4, i, np.float32), device="PYTHON") + 1).numpy().sum())
    except BaseException as e: errors.append(e)   # noqa: BLE001
    finally: stop.set()

  makers = [threading.Thread(target=make) for _ in range(2)]
  for m in makers: m.start()
  realize()
  for m in makers: m.join()
  assert not errors, errors
  assert sums == [4.0 * (i + 1) for i in range(300)]


def test_registry_opens_a_device_once(monkeypatch, fast_switching):
  """DEV.REGISTRY under threads: eight threads ask a fresh registry for a slow-to-make device at once; one backend
  is made and all get it."""
  made = []

  class Slow(Backend):
    name = "SLOWTEST"
    def __init__(self):
      time.sleep(0.05)
      made.append(self)

  from refimpl import device
  monkeypatch.setitem(device._FACTORIES, "SLOWTEST", Slow)
  reg = _DeviceRegistry()
  got: list = []
  threads = [threading.Thread(target=lambda: got.append(reg["slowtest"])) for _ in range(8)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert len(made) == 1 and len(got) == 8 and all(g is made[0] for g in got)


def test_cpu_compiles_a_program_once(tmp_path, monkeypatch, fast_switching):
  """Six threads compile and run the same new program on one fresh CPU backend: the compiler runs once, every thread
  gets the same compiled program and the right answer."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  dev = CPUBackend()
  tag = int.from_bytes(os.urandom(3), "little")
  prog = probe(tag)
  out: list = []
  threads = [threading.Thread(target=lambda: out.append((dev.compile(prog), launch(dev, prog, [
    np.zeros(1, np.int32)])[0][0]))) for _ in range(6)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert dev.compiler_runs == 1 and len(out) == 6
  assert all(c is out[0][0] and v == tag for c, v in out)
