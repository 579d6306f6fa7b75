"""A catalogue of faulty kernels, one per fault kind, each caught with the right EXEC.* clause and a report naming
the kernel, the thread and the index; and each kernel fixed, running cleanly (EXEC.SANITIZER)."""
import numpy as np
import pytest

from emu.build import Builder
from emu.device import SanitizerError
from emu.examples import worked_example
from refimpl.dtype import dtypes

f32 = dtypes.float32
INP4 = np.array([1e8, 1.0, -1e8, 1.0], np.float32)


def oob_negative(fixed: bool):
  """out[g] = inp[g - 1]: thread 0 reads inp[-1]; fixed by gating the load on g > 0."""
  b = Builder("shift_right")
  out, inp = b.glob(0, f32, 4), b.glob(1, f32, 4)
  g = b.special("gidx0", 4)
  b.store(out, g, b.load(inp, g - 1, b.add(g > 0) if fixed else None))
  return b.program((4, 1, 1))


def uninit_global(fixed: bool):
  """out[g] = out[g] + 1 on a fresh buffer; fixed by storing before the load."""
  b = Builder("incr")
  out = b.glob(0, f32, 4)
  g = b.special("gidx0", 4)
  if fixed: b.store(out, g, 0.0)
  b.store(out, g, b.load(out, g, arg="again") + 1.0)
  return b.program((4, 1, 1))


def uninit_local(fixed: bool):
  """Each thread reads its neighbour's slot of local memory; fixed by storing its own slot and a barrier first."""
  b = Builder("neighbour")
  out = b.glob(0, f32, 4)
  tmp = b.local("tmp", f32, 4)
  l = b.special("lidx0", 4)
  if fixed: b.barrier(b.store(tmp, l, b.add(l.cast(f32))))
  b.store(out, l, b.load(tmp, (l + 1) % 4))
  return b.program(local_size=(4, 1, 1))


def global_race(fixed: bool):
  """Two work-groups write out[lidx0]; fixed by indexing with the global thread id."""
  b = Builder("two_groups")
  out = b.glob(0, f32, 4)
  g, l = b.special("gidx0", 2), b.special("lidx0", 2)
  b.store(out, b.add(g * 2 + l) if fixed else l, b.add(g.cast(f32)))
  return b.program((2, 1, 1), (2, 1, 1))


def global_read_write_race(fixed: bool):
  """Thread l writes out[l], thread l+1 then reads out[l] in the same epoch; fixed by a barrier between."""
  b = Builder("publish")
  out, res = b.glob(0, f32, 2), b.glob(1, f32, 2)
  l = b.special("lidx0", 2)
  st = b.store(out, l, b.add(l.cast(f32)))
  if fixed: b.barrier(st)
  b.store(res, l, b.load(out, (l + 1) % 2))
  return b.program((1, 1, 1), (2, 1, 1))


CATALOGUE = [
  # name, program factory, inputs, clause, thread text, index text
  ("oob-positive", lambda fixed: worked_example(None if fixed else "oob"), [(f32, 1), INP4], "EXEC.BOUNDS",
   "lidx=(0, 0, 0)", "index 4 outside size 4"),
  ("oob-negative", oob_negative, [(f32, 4), INP4], "EXEC.BOUNDS", "gidx=(0, 0, 0)", "index -1"),
  ("uninit-global", uninit_global, [(f32, 4)], "EXEC.UNINIT", "gidx=(0, 0, 0)", "index 0"),
  ("uninit-local", uninit_local, [(f32, 4)], "EXEC.UNINIT", "lidx=(0, 0, 0)", "index 1"),
  ("local-race", lambda fixed: worked_example(None if fixed else "race"), [(f32, 1), INP4], "EXEC.RACE.local",
   "lidx=(0, 1, 0)", "index 0"),
  ("global-race", global_race, [(f32, 4)], "EXEC.RACE.global", "gidx=(1, 0, 0)", "index 0"),
  ("global-read-write-race", global_read_write_race, [(f32, 2), (f32, 2)], "EXEC.RACE.global", "lidx=(", "index"),
  ("barrier-divergence", lambda fixed: worked_example(None if fixed else "divergence"), [(f32, 1), INP4],
   "EXEC.BARRIER.divergence", "lidx=(0, 0, 0)", "wait at this barrier"),
]


@pytest.mark.parametrize("name,factory,inputs,clause,thread,index", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_fault_is_reported(run, name, factory, inputs, clause, thread, index):
  prog = factory(False)
  with pytest.raises(SanitizerError) as e: run(prog, *inputs)
  assert e.value.clause == clause, str(e.value)
  msg = str(e.value)
  assert prog.name in msg and thread in msg and index in msg, msg


@pytest.mark.parametrize("name,factory,inputs,clause,thread,index", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_fixed_kernel_runs_clean(run, name, factory, inputs, clause, thread, index):
  run(factory(True), *inputs)


@pytest.mark.parametrize("name", ["oob-positive", "oob-negative", "barrier-divergence"])
def test_checked_without_sanitize(run, name):
  """EXEC.BOUNDS and EXEC.BARRIER.divergence are checked in every mode."""
  _, factory, inputs, clause, _, _ = next(c for c in CATALOGUE if c[0] == name)
  with pytest.raises(SanitizerError) as e: run(factory(False), *inputs, sanitize=False)
  assert e.value.clause == clause


def test_race_report_names_both_accesses(run):
  with pytest.raises(SanitizerError) as e: run(worked_example("race"), (f32, 1), INP4)
  msg = str(e.value)
  assert "races with the write by thread" in msg and "epoch 0" in msg and "local 'tmp'" in msg


def test_poisoned_buffer_copies_out_ff(run):
  """EXEC.UNINIT: a fresh buffer in sanitizer mode holds bytes 0xFF (copy out shows it)."""
  b = Builder("nothing")
  b.glob(0, f32, 2)
  out, = run(b.program(), (f32, 2))
  assert out.view(np.uint8).tolist() == [0xFF] * 8
