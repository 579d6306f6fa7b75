"""A forked child runs threaded CPU kernels (DEV.C.threads): the suite's crash-guarded helper forks a process whose
parent already used the CPU's thread pool; the child must not wait on the parent's threads, which it does not have."""
import multiprocessing

import numpy as np

from refimpl import Tensor


def _child(q) -> None:
  q.put(Tensor.ones(2048, 2048, device="CPU").sum(1).numpy()[:4].tolist())


def test_a_forked_child_runs_a_threaded_kernel():
  assert Tensor.ones(2048, 2048, device="CPU").sum(1).numpy()[0] == 2048   # the parent's pool exists now
  ctx = multiprocessing.get_context("fork")
  q = ctx.Queue()
  p = ctx.Process(target=_child, args=(q,))
  p.start()
  try: got = q.get(timeout=120)
  finally:
    p.join(10)
    if p.is_alive(): p.kill()
  np.testing.assert_array_equal(got, [2048.0] * 4)
