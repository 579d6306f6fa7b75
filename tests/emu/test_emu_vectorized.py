"""Faults and gates inside loop nests that run vectorized (emu/vectorize.py): the index arithmetic of all iterations
is computed at once, with the threads as the last array axis, and the bounds check looks at the whole index array
first. A fault must still be caught, at the lane that has it; gated-off lanes outside the array are no fault
(EXEC.MEMORY.gate). With faults in several threads, the vectorized form reports the one EXEC.SANITIZER's canonical
schedule meets first: the lowest thread (it runs all its iterations before the next thread starts), at its first
faulting iteration. The Python-loop form (taken for nests too large or with per-thread trip counts) runs the
threads in lockstep, one iteration at a time, and reports the first faulting iteration's lowest thread instead:
one of the faults, not always the canonical first (a deviation older than the vectorized form; the tests below
accept either fault from it)."""
import numpy as np
import pytest

from emu.build import Builder
from emu.device import SanitizerError
from emu.runtime import Launch
from refimpl.dtype import dtypes

f32, i32 = dtypes.float32, dtypes.int32


@pytest.fixture(params=["vectorized", "python-loop"])
def mode(request, monkeypatch):
  """Run each test with the nest vectorized (checked: vec_ok said yes) and in its Python-loop form (VEC_LIMIT 0)."""
  taken = []
  vec_ok = Launch.vec_ok
  def spy(self, ends, mask):
    r = vec_ok(self, ends, mask)
    taken.append(r is not None)
    return r
  monkeypatch.setattr(Launch, "vec_ok", spy)
  if request.param == "python-loop": monkeypatch.setattr(Launch, "VEC_LIMIT", 0)
  yield request.param
  assert taken and all(taken) == (request.param == "vectorized"), taken


def _window_sum(name: str, index, gate=None, size: int = 8):
  """out[g] = sum over r0 < 3, r1 < 2 of inp[index(g, r0, r1)] (gated by gate(idx)), 2 threads, one accumulator."""
  b = Builder(name)
  out, inp = b.glob(0, f32, 2), b.glob(1, f32, size)
  g = b.special("gidx0", 2)
  acc = b.reg(0, f32)
  b.store(acc, 0, 0.0)
  r0, r1 = b.range(3, 0), b.range(2, 1)
  idx = b.add(index(g, r0, r1))
  v = b.load(inp, idx, b.add(gate(idx)) if gate else None)
  b.end(b.store(acc, 0, b.load(acc, 0) + v, None, r0, r1), r1, r0)
  b.store(out, g, b.load(acc, 0, arg="after"))
  return b.program((2, 1, 1))


def _crossing(g, r0, r1):
  """Thread 0 reads inp[3..8]: index 8 at its LAST iteration; thread 1 reads inp[-1..4]: -1 at its FIRST."""
  return r0 * 2 + r1 + 3 - g * 4


# (kernel, index(g, r0, r1), [(thread, report)] of its faults, the canonical first one first)
OOB = [
  # thread 0 at its last iteration, thread 1 at its first: the canonical schedule meets thread 0's first
  ("crossing", _crossing, [(0, "index 8 outside size 8"), (1, "index -1 outside size 8")]),
  # one fault, one past the end and no index below 0 (the whole-array check must see max == size)
  ("past_end", lambda g, r0, r1: r0 * 2 + r1 + g * 3, [(1, "index 8 outside size 8")]),
]


@pytest.mark.parametrize("sanitize", [False, True])
@pytest.mark.parametrize("name, index, faults", OOB, ids=[c[0] for c in OOB])
def test_out_of_bounds_in_nest(run, mode, sanitize, name, index, faults):
  """EXEC.BOUNDS, every mode: caught; vectorized, the canonical schedule's first fault is reported."""
  with pytest.raises(SanitizerError) as e:
    run(_window_sum(name, index), (f32, 2), np.arange(8, dtype=np.float32), sanitize=sanitize)
  assert e.value.clause == "EXEC.BOUNDS"
  msg = str(e.value)
  reported = [f for f in faults if f"gidx=({f[0]}, 0, 0)" in msg and f[1] in msg]
  assert reported == faults[:1] if mode == "vectorized" else len(reported) == 1, msg


def test_gated_lanes_outside_are_no_fault(run, mode):
  """EXEC.MEMORY.gate: the same indices gated to the array: the lanes outside read 0, the others their element."""
  x = np.arange(1, 9, dtype=np.float32)
  out, _ = run(_window_sum("crossing_gated", _crossing, lambda i: (i < 8) & (i > -1)), (f32, 2), x)
  want = [x[3:8].sum(), x[0:5].sum()]   # thread 0: 3..8 less 8; thread 1: -1..4 less -1
  np.testing.assert_array_equal(out, want)


def test_active_lane_outside_a_gate_is_a_fault(run, mode):
  """A gate that lets one lane outside through (i < 9 admits index 8) is still a fault, at that lane."""
  with pytest.raises(SanitizerError) as e:
    run(_window_sum("crossing_bad_gate", _crossing, lambda i: (i < 9) & (i > -1)), (f32, 2),
        np.arange(8, dtype=np.float32))
  assert e.value.clause == "EXEC.BOUNDS" and "gidx=(0, 0, 0)" in str(e.value) and "index 8" in str(e.value)


def _registers_read_in_nest(fill_all: bool):
  """Each thread fills its register array reg[0..5] but one slot (thread 0 all but 5, thread 1 all but 0), then
  sums reg[r0 * 2 + r1] in a nest: thread 0 reads its unwritten slot last, thread 1 first. fill_all: no gap."""
  b = Builder("regs_in_nest")
  out = b.glob(0, f32, 2)
  g = b.special("gidx0", 2)
  reg = b.reg(1, f32, 6)
  for k in range(6):
    gap = b.add(g.eq(0)) if k == 5 else b.add(g.eq(1)) if k == 0 else None
    b.store(reg, k, b.add((g + 10 * k).cast(f32)), b.add(gap.ne(True)) if gap is not None and not fill_all else None)
  acc = b.reg(0, f32)
  b.store(acc, 0, 0.0)
  r0, r1 = b.range(3, 0), b.range(2, 1)
  v = b.load(reg, b.add(r0 * 2 + r1))
  b.end(b.store(acc, 0, b.load(acc, 0) + v, None, r0, r1), r1, r0)
  b.store(out, g, b.load(acc, 0, arg="after"))
  return b.program((2, 1, 1))


def test_uninitialised_register_in_nest(run, mode):
  """EXEC.UNINIT: caught; vectorized, thread 0's read of its slot 5 (its last iteration) is reported, which the
  canonical schedule meets before thread 1's read of its slot 0 (its first iteration)."""
  with pytest.raises(SanitizerError) as e: run(_registers_read_in_nest(False), (f32, 2))
  assert e.value.clause == "EXEC.UNINIT"
  msg = str(e.value)
  thread0, thread1 = "gidx=(0, 0, 0)" in msg and "index 5 " in msg, "gidx=(1, 0, 0)" in msg and "index 0 " in msg
  assert thread0 if mode == "vectorized" else thread0 != thread1, msg


def test_registers_read_in_nest(run, mode):
  """Per-thread register arrays (a row per thread) indexed by the nest's loop variables: each thread its own."""
  out, = run(_registers_read_in_nest(True), (f32, 2))
  np.testing.assert_array_equal(out, [sum(10 * k for k in range(6)), sum(1 + 10 * k for k in range(6))])


def test_local_memory_read_in_nest(run, mode):
  """Local memory (a row per work-group) read in a nest after a barrier: 2 work-groups of 4 threads, each thread
  sums its group's tmp[(l + r0 + r1) % 4] over r0 < 2, r1 < 3."""
  b = Builder("local_in_nest")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 8)
  g, l = b.special("gidx0", 2), b.special("lidx0", 4)
  tmp = b.local("tmp", f32, 4)
  b.barrier(b.store(tmp, l, b.load(inp, b.add(g * 4 + l))))
  acc = b.reg(0, f32)
  b.store(acc, 0, 0.0)
  r0, r1 = b.range(2, 0), b.range(3, 1)
  v = b.load(tmp, b.add((l + r0 + r1) % 4))
  b.end(b.store(acc, 0, b.load(acc, 0) + v, None, r0, r1), r1, r0)
  b.store(out, b.add(g * 4 + l), b.load(acc, 0, arg="after"))
  x = np.arange(1, 9, dtype=np.float32) ** 2
  out, _ = run(b.program((2, 1, 1), (4, 1, 1)), (f32, 8), x)
  want = [sum(x[gg * 4 + (ll + a + c) % 4] for a in range(2) for c in range(3)) for gg in range(2) for ll in range(4)]
  np.testing.assert_array_equal(out, np.array(want, np.float32))
