"""Tensor.assign and the scheduler's in-place writes (spec/kernels.md, "Schedules": EXEC.SCHED.*).

Expected values come from numpy or from torch run eagerly line by line (EXEC.SCHED.versions says a lazy program
means what the eager one does). The PYTHON device runs with its sanitizer on throughout, so an in-place kernel in
which one thread reads an element another thread overwrites fails as EXEC.RACE.global instead of passing by luck."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import refimpl.engine.schedule as sched
from refimpl import Device, Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops


@pytest.fixture(autouse=True)
def sanitizer():
  """Sanitize every launch on PYTHON (EXEC.SANITIZER): races and reads of unwritten elements fault."""
  dev = Device["PYTHON"]
  saved, saved_default = dev.sanitize, Device.DEFAULT
  dev.sanitize, Device.DEFAULT = True, "PYTHON"   # the sanitizer is what checks the hazards, so PYTHON even under DEV
  yield
  dev.sanitize, Device.DEFAULT = saved, saved_default


def buf(t: Tensor):
  """The BUFFER node a realized tensor holds (under its reshape)."""
  u = t.uop
  while u.op is not Ops.BUFFER: u = u.src[0]
  return u


def realized(values, dtype=None) -> Tensor:
  return Tensor(np.asarray(values), dtype=dtype, device="PYTHON").realize()


# ---- EXEC.SCHED.assign ----

def test_elementwise_update_is_one_kernel_into_the_same_buffer():
  rng = np.random.default_rng(0)
  w0, g0 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  w, g = realized(w0), realized(g0)
  before = buf(w)
  w.assign(w - 0.5 * g)
  kernels = w.schedule()
  assert len(kernels) == 1
  k = kernels[0].kernel
  assert k.src[0] is before and k.arg.in_place                       # it overwrites w's buffer ...
  assert {s for s in k.src if s.op is Ops.BUFFER} == {before, buf(g)}  # ... and no new buffer appears
  assert w.realize() is w
  assert buf(w) is before and w.shape == (3, 4)
  np.testing.assert_array_equal(w.numpy(), w0 - np.float32(0.5) * g0)


@pytest.mark.parametrize("dtype, make, update", [
  (dtypes.int32, lambda r: r.integers(-50, 50, 6), lambda a, b: a * 3 - b),
  (dtypes.uint8, lambda r: r.integers(0, 255, 6), lambda a, b: a + b),            # wraps (OP.ADD)
  (dtypes.bool, lambda r: r.integers(0, 2, 6).astype(bool), lambda a, b: a ^ b),
  (dtypes.float32, lambda r: r.standard_normal(6), lambda a, b: a * b + 1),
  (dtypes.float16, lambda r: r.standard_normal(6), lambda a, b: a - b),
], ids=lambda x: getattr(x, "name", ""))
def test_assign_works_for_int_bool_and_float(dtype, make, update):
  rng = np.random.default_rng(1)
  a0, b0 = make(rng), make(rng)
  a, b = realized(a0, dtype), realized(b0, dtype)
  expect = update(a.numpy(), b.numpy())   # numpy on numpy arrays of the same dtype: the same wrap and rounding
  before = buf(a)
  a.assign(update(a, b)).realize()
  assert buf(a) is before and a.dtype == dtype
  np.testing.assert_array_equal(a.numpy(), expect)


def test_assign_is_lazy_and_other_views_of_the_buffer_see_the_new_values():
  a = realized([1.0, 2.0, 3.0, 4.0])
  alias = a.reshape(2, 2)              # built before the assign: reads the buffer
  a.assign(a * 10)
  np.testing.assert_array_equal(alias.numpy(), [[1, 2], [3, 4]])   # nothing ran yet
  a.realize()
  np.testing.assert_array_equal(alias.numpy(), [[10, 20], [30, 40]])   # EXEC.SCHED.versions: same BUFFER node


def test_a_python_value_or_smaller_shape_broadcasts_to_the_target():
  a = realized(np.arange(6, dtype=np.float32).reshape(3, 2))
  a.assign(7).realize()
  np.testing.assert_array_equal(a.numpy(), np.full((3, 2), 7.0))
  a.assign(Tensor([1.0, 2.0])).realize()
  np.testing.assert_array_equal(a.numpy(), [[1, 2]] * 3)
  a.assign([[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]]).realize()
  np.testing.assert_array_equal(a.numpy(), [[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]])


def test_assign_to_a_lazy_tensor_gives_it_a_buffer_of_its_own():
  base = realized([1, 2, 3])
  t, twin = base * 2, base * 2          # lazy, and one graph (UOP.HASHCONS)
  t.assign(t + 1)
  assert len(t.schedule()) == 1         # the old value is computed inside the assign's kernel, not stored first
  t.realize()
  np.testing.assert_array_equal(t.numpy(), [3, 5, 7])
  np.testing.assert_array_equal(twin.numpy(), [2, 4, 6])   # the twin does not alias t's buffer
  np.testing.assert_array_equal(base.numpy(), [1, 2, 3])


def test_a_realized_assign_never_runs_again():
  a = realized([1, 2, 3])
  d = a.assign(a + 1) * 2               # d is built on the pending assign
  e = a + 0                             # so is e (a now stands for the assign)
  d.realize()                           # runs the assign once
  np.testing.assert_array_equal(a.numpy(), [2, 3, 4])
  assert a.schedule() == []             # a holds its buffer again, nothing is pending
  np.testing.assert_array_equal(e.numpy(), [2, 3, 4])
  np.testing.assert_array_equal(d.numpy(), [4, 6, 8])
  np.testing.assert_array_equal(a.numpy(), [2, 3, 4])


def test_chained_assigns_in_one_realize():
  a = realized([1, 2, 3])
  a.assign(a + 1)
  a.assign(a * 10)
  assert len(a.schedule()) == 2
  a.realize()
  np.testing.assert_array_equal(a.numpy(), [20, 30, 40])


def test_gradient_flows_to_the_assigned_value():
  """GRAD.ASSIGN: the ASSIGN stands for its value."""
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  t = Tensor.zeros(3).contiguous().realize()
  t.assign(x * x)
  t.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
  np.testing.assert_array_equal(t.numpy(), [1.0, 4.0, 9.0])


# ---- errors: EXEC.SCHED.assign, EXEC.SCHED.target, EXEC.SCHED.conflict ----

def test_dtype_mismatch_is_an_error():
  a = realized([1.0, 2.0])
  with pytest.raises(SpecError, match="cast them first") as e: a.assign(Tensor([1, 2]))
  assert e.value.clause == "EXEC.SCHED.assign"


@pytest.mark.parametrize("shape", [(3,), (2, 2), (4, 1)])
def test_shape_that_does_not_broadcast_to_the_target_is_an_error(shape):
  a = realized(np.zeros((2, 1), np.float32))
  with pytest.raises(SpecError, match="shape") as e: a.assign(Tensor.ones(*shape))
  assert e.value.clause == "EXEC.SCHED.assign"


@pytest.mark.parametrize("view", [lambda t: t.permute(1, 0), lambda t: t[1:], lambda t: t.flip(0)],
                         ids=["permute", "shrink", "flip"])
def test_assigning_through_a_view_is_refused(view):
  a = realized(np.zeros((2, 2), np.float32))
  with pytest.raises(SpecError, match="view") as e: view(a).assign(1.0)
  assert e.value.clause == "EXEC.SCHED.target"


def test_two_unchained_assigns_to_one_buffer_are_an_error():
  a = realized([1.0, 2.0, 3.0, 4.0])
  r = a.reshape(2, 2)
  a.assign(a + 1)
  r.assign(r * 2)
  with pytest.raises(SpecError) as e: Tensor.realize(a, r)
  assert e.value.clause == "EXEC.SCHED.conflict"


# ---- EXEC.SCHED.overlap: the value reads the target other than element by element ----

OVERLAPPING = {
  "flip": lambda a: a.flip(0),
  "permute": lambda a: a.permute(1, 0),
  "shift": lambda a: a[:, 1:].pad(((0, 0), (0, 1))),
  "expand": lambda a: a[:1].expand(3, 3),
  "sum": lambda a: a - a.sum(),
  "cumsum": lambda a: a.cumsum(1),
}


@pytest.mark.parametrize("name", list(OVERLAPPING))
def test_overlapping_reads_go_through_a_temporary(name):
  a0 = np.arange(9, dtype=np.float32).reshape(3, 3) + 1
  f = OVERLAPPING[name]
  expect = f(torch.tensor(a0)).numpy() if name not in ("shift", "expand") else {
    "shift": np.pad(a0[:, 1:], ((0, 0), (0, 1))), "expand": np.broadcast_to(a0[:1], (3, 3))}[name]
  a = realized(a0)
  a.assign(f(a))
  kernels = a.schedule()
  assert len(kernels) == 2 and kernels[-1].arg.in_place and not kernels[0].arg.in_place
  a.realize()
  np.testing.assert_allclose(a.numpy(), expect, rtol=1e-6)


def test_reshape_reads_the_same_element_so_stay_in_place():
  a = realized(np.arange(6, dtype=np.float32).reshape(2, 3))
  a.assign((a.reshape(6) * 2).reshape(2, 3))
  assert len(a.schedule()) == 1
  a.realize()
  np.testing.assert_array_equal(a.numpy(), np.arange(6).reshape(2, 3) * 2)


def test_overlap_hazard_is_real(monkeypatch):
  """Without EXEC.SCHED.overlap's temporary, a flip in place is a race, which the sanitizer reports."""
  monkeypatch.setattr(sched, "_reads_only_own_element", lambda a, materialized: True)
  a = realized([1, 2, 3, 4])
  a.assign(a.flip(0))
  with pytest.raises(Exception, match="EXEC.RACE.global"): a.realize()


def test_a_later_assign_reading_an_earlier_version_reshuffled():
  a = realized([1, 2, 3])
  a.assign(a + 1)
  a.assign(a.flip(0))
  a.realize()
  np.testing.assert_array_equal(a.numpy(), [4, 3, 2])


# ---- EXEC.SCHED.versions, EXEC.SCHED.war, EXEC.SCHED.cycle ----

def test_reads_of_the_old_value_run_before_the_write():
  a = realized([1.0, 2.0, 3.0])
  old = a * 1                     # built on the buffer: the old content
  a.assign(a + 10)
  Tensor.realize(a, old)
  np.testing.assert_array_equal(old.numpy(), [1, 2, 3])
  np.testing.assert_array_equal(a.numpy(), [11, 12, 13])


def test_reader_order_does_not_depend_on_realize_argument_order():
  a = realized([1.0, 2.0, 3.0])
  old = (a * 2).sum()             # a reduction over the old content: its own kernel
  a.assign(a + 10)
  for roots in ((old, a), (a, old)):   # the write waits for the reduction whichever is named first
    assert [(k.arg.name, k.arg.in_place) for k in Tensor.schedule(*roots)] == [("r_1", False), ("E_3", True)]
  Tensor.realize(a, old)
  assert old.item() == 12.0
  np.testing.assert_array_equal(a.numpy(), [11, 12, 13])


def test_one_kernel_reading_old_and_new_values():
  a = realized([1.0, 2.0, 3.0])
  old = a * 1
  a.assign(a + 1)
  both = old + a                  # the old content and the assigned one, in one graph
  both.realize()
  np.testing.assert_array_equal(both.numpy(), [3, 5, 7])
  np.testing.assert_array_equal(a.numpy(), [2, 3, 4])


@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.float32, dtypes.bool], ids=lambda d: d.name)
def test_swap_through_values_built_before_the_assigns(dtype):
  a0, b0 = np.array([1, 0, 3]), np.array([0, 5, 0])
  ta, tb = torch.tensor(a0), torch.tensor(b0)
  na, nb = tb.clone(), ta.clone()          # eager torch: both values are read before either write
  ta.copy_(na); tb.copy_(nb)
  a, b = realized(a0, dtype), realized(b0, dtype)
  na, nb = b.detach(), a.detach()
  a.assign(na)
  b.assign(nb)
  assert len(Tensor.schedule(a, b)) == 3   # EXEC.SCHED.cycle: one of the two goes through a temporary
  Tensor.realize(a, b)
  np.testing.assert_array_equal(a.numpy(), ta.numpy().astype(a.numpy().dtype))
  np.testing.assert_array_equal(b.numpy(), tb.numpy().astype(b.numpy().dtype))


def test_assigns_read_in_program_order_like_eager_torch():
  """a.assign(b); b.assign(a): the second reads a, which already stands for b's values (torch: copy_ twice)."""
  ta, tb = torch.tensor([1, 2]), torch.tensor([3, 4])
  ta.copy_(tb); tb.copy_(ta)
  a, b = realized([1, 2]), realized([3, 4])
  a.assign(b)
  b.assign(a)
  Tensor.realize(a, b)
  np.testing.assert_array_equal(a.numpy(), ta.numpy())
  np.testing.assert_array_equal(b.numpy(), tb.numpy())


def test_rotation_of_three_buffers():
  vals = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])]
  ts = [realized(v) for v in vals]
  news = [ts[(i + 1) % 3].detach() for i in range(3)]
  for t, n in zip(ts, news): t.assign(n)
  Tensor.realize(*ts)
  for i, t in enumerate(ts): np.testing.assert_array_equal(t.numpy(), vals[(i + 1) % 3])


@pytest.mark.parametrize("first", ["a", "b"])
def test_kernelized_assign_runs_once(first):
  """Tensor.kernelize makes the assign's KERNEL part of both graphs; realizing one retires it in the other."""
  a = realized([1, 2, 3])
  a.assign(a + 1)
  b = a * 2
  b.kernelize()
  order = (a, b) if first == "a" else (b, a)
  for t in order: t.realize()
  np.testing.assert_array_equal(a.numpy(), [2, 3, 4])
  np.testing.assert_array_equal(b.numpy(), [4, 6, 8])
  np.testing.assert_array_equal(a.numpy(), [2, 3, 4])


def test_assign_after_kernelize_chains_into_the_same_buffer():
  a = realized([1, 2, 3])
  alias = a.reshape(3)
  a.assign(a + 1)
  a.kernelize()                         # a is now ASSIGN(BUFFER, KERNEL), not yet run
  a.assign(a * 10)
  a.realize()
  np.testing.assert_array_equal(a.numpy(), [20, 30, 40])
  np.testing.assert_array_equal(alias.numpy(), [20, 30, 40])   # both writes went into the one buffer


def test_assign_to_a_buffer_shared_by_equal_tensors_copies_on_write():
  """EXEC.SCHED.cow: realized together, equal tensors share a buffer; an assign to one leaves the other alone."""
  z, w = Tensor.zeros(3), Tensor.zeros(3)
  Tensor.realize(z, w)
  assert z.uop is w.uop
  w.assign(w + 1.0).realize()
  np.testing.assert_array_equal(w.numpy(), [1.0, 1.0, 1.0])
  np.testing.assert_array_equal(z.numpy(), [0.0, 0.0, 0.0])
