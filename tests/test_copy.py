"""Tensor.to / Tensor.to_ and copies between devices (spec/uop.md UOP.COPY.to, spec/kernels.md EXEC.SCHED.copy and
EXEC.SCHED.device, spec/gradients.md GRAD.COPY).

PYTHON (the emulator, sanitizer on) and CPU are always there; CL runs where pyopencl finds a device (PoCL in CI).
Bytes are compared as the devices hold them (copy out of each buffer), so "bit-exact" includes NaN payloads, -0.0,
subnormals and bool bytes; expected values come from numpy and torch, or from the same computation on one device."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import refimpl.engine.realize as realize_mod
from refimpl import Device, Tensor, TinyJit, dtypes
from refimpl.dtype import to_dtype
from refimpl.engine.realize import buffers
from refimpl.helpers import SpecError
from refimpl.uop import Ops

PAIRS = [("PYTHON", "CPU"), ("CPU", "PYTHON")]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64"]
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture(autouse=True)
def sanitized_python():
  """PYTHON is the default device and runs with its sanitizer (EXEC.SANITIZER): a copy that left an element
  unwritten, or a kernel reading one, faults instead of passing by luck."""
  dev = Device["PYTHON"]
  saved, saved_default = dev.sanitize, Device.DEFAULT
  dev.sanitize, Device.DEFAULT = True, "PYTHON"
  yield
  dev.sanitize, Device.DEFAULT = saved, saved_default


@pytest.fixture
def copies(monkeypatch) -> list[tuple[str, str]]:
  """Every copy step realize runs, as (source device, destination device), in order."""
  ran: list[tuple[str, str]] = []
  real = realize_mod.copy_buffer

  def counting(dst, src):
    ran.append((src.device, dst.device))
    real(dst, src)
  monkeypatch.setattr(realize_mod, "copy_buffer", counting)
  return ran


def raw(t: Tensor) -> bytes:
  """The bytes of a realized tensor's buffer as its device holds them."""
  t.realize()
  node = t.uop if t.uop.op is Ops.BUFFER else t.uop.src[0]
  assert node.op is Ops.BUFFER, f"not a contiguous buffer: {node.op}"
  buf = buffers[node]
  assert buf.device == t.device
  return Device[buf.device].copyout(buf)


def random_tensor(dtype: str, n: int, device: str, seed: int) -> Tensor:
  """n random values of `dtype` on `device`; floats get random bit patterns (NaN payloads, infinities, -0.0,
  subnormals), bool random 0/1 bytes."""
  rng = np.random.default_rng(seed)
  dt = to_dtype(dtype)
  if dt == dtypes.bool: return Tensor(rng.integers(0, 2, n).astype(np.bool_), device=device)
  bits = rng.integers(0, 2 ** (8 * dt.itemsize), n, dtype=_UINT[dt.itemsize], endpoint=False)
  if dtypes.is_float(dt):
    bits[:4] = [0, 1, 1 << (8 * dt.itemsize - 1), (1 << (8 * dt.itemsize)) - 1]   # 0, subnormal, -0.0, a NaN
    return Tensor(bits, device=device).bitcast(dt).realize()
  return Tensor(bits.view(np.dtype(dtype)), device=device)   # signed ints: the same bits, read as signed


def steps(t: Tensor) -> list[tuple[str, str]]:
  """The schedule of `t` as (kind, device): 'copy' or 'kernel', and the device of the buffer each step writes."""
  return [("copy" if si.arg.is_copy else "kernel", si.bufs[0].src[1].arg) for si in t.schedule()]


# ---- UOP.COPY.to: the Tensor API ----

def test_to_same_device_is_self_and_names_are_canonical():
  """UOP.COPY.to: the same device (in any spelling) gives the tensor itself; None means Device.DEFAULT."""
  a = Tensor([1.0, 2.0], device="CPU")
  assert a.to("cpu") is a and a.to("CPU:0") is a
  b = a.to(None)
  assert b is not a and b.device == "PYTHON" and b.uop.op is Ops.COPY
  p = Tensor([1, 2])
  assert p.to(None) is p and p.to_("python") is p


def test_to_is_lazy(copies):
  """UOP.COPY.to: nothing moves until realize; the new tensor's device is the destination, the source's is unchanged;
  schedule() lists the copy without running it (EXEC.SCHED.copy)."""
  a = Tensor([1.0, 2.0, 3.0], device="PYTHON")
  b = (a * 2).to("CPU")
  assert (a.device, b.device, b.uop.op) == ("PYTHON", "CPU", Ops.COPY)
  assert steps(b) == [("kernel", "PYTHON"), ("copy", "CPU")]
  assert copies == []
  np.testing.assert_array_equal(b.numpy(), [2.0, 4.0, 6.0])
  assert copies == [("PYTHON", "CPU")]
  assert b.uop.op is Ops.BUFFER and b.device == "CPU"   # realized: a buffer on the destination


# ---- EXEC.SCHED.copy: values ----

@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bytes_arrive_unchanged(src, dst, dtype):
  """EXEC.SCHED.copy / DEV.COPY: every dtype arrives bit for bit, NaN payloads, -0.0, subnormals and bool bytes
  included, in the tensor's shape; and back again."""
  a = random_tensor(dtype, 37, src, seed=DTYPES.index(dtype)).reshape(37, 1)
  want = raw(a)
  b = a.to(dst)
  assert (b.device, b.dtype, b.shape) == (dst, to_dtype(dtype), (37, 1))
  assert raw(b) == want
  c = b.to(src)
  assert c.device == src and raw(c) == want


def test_fused_consumers_on_both_sides(copies):
  """EXEC.SCHED.copy: elementwise ops and reductions fuse into one kernel on each side of a copy; the copy reads the
  source kernel's buffer and the destination kernel reads the copy's."""
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  a = Tensor(x, device="PYTHON")
  out = ((a * 3 + 1).to("CPU").relu() * 2).sum(1)
  assert steps(out) == [("kernel", "PYTHON"), ("copy", "CPU"), ("kernel", "CPU")]
  np.testing.assert_array_equal(out.numpy(), (np.maximum(x * 3 + 1, 0) * 2).sum(1))
  assert out.device == "CPU" and copies == [("PYTHON", "CPU")]


def test_chain_there_and_back(copies):
  """EXEC.SCHED.copy: A -> B -> A with work on each side: two copies, each after the kernel writing its source and
  before the kernel reading it (EXEC.ORDER.device)."""
  x = np.linspace(-2, 2, 10, dtype=np.float32)
  a = Tensor(x, device="PYTHON")
  out = ((a + 1).to("CPU") * 2).to("PYTHON") - 3
  assert out.device == "PYTHON"
  assert steps(out) == [("kernel", "PYTHON"), ("copy", "CPU"), ("kernel", "CPU"), ("copy", "PYTHON"),
                        ("kernel", "PYTHON")]
  np.testing.assert_array_equal(out.numpy(), (x + 1) * 2 - 3)
  assert copies == [("PYTHON", "CPU"), ("CPU", "PYTHON")]
  plain = a.to("CPU").to("PYTHON")   # no work in between: two copies, no kernel
  assert steps(plain) == [("copy", "CPU"), ("copy", "PYTHON")]
  np.testing.assert_array_equal(plain.numpy(), x)


def test_to_of_realized_tensors():
  """EXEC.SCHED.copy: a realized buffer, or a reshape of one, is copied as it is (one step); a permuted view is
  materialized on the source first."""
  x = np.arange(6, dtype=np.int32)
  a = Tensor(x, device="CPU").realize()
  assert steps(a.to("PYTHON")) == [("copy", "PYTHON")]
  assert steps(a.reshape(2, 3).to("PYTHON")) == [("copy", "PYTHON")]
  t = a.reshape(2, 3).permute(1, 0).to("PYTHON")
  assert steps(t) == [("kernel", "CPU"), ("copy", "PYTHON")]
  np.testing.assert_array_equal(t.numpy(), x.reshape(2, 3).T)
  np.testing.assert_array_equal(a.reshape(2, 3).to("PYTHON").numpy(), x.reshape(2, 3))
  empty = Tensor.zeros(0, 3, device="CPU").to("PYTHON")
  assert empty.numpy().shape == (0, 3)


def test_copy_reads_the_version_before_an_assign():
  """EXEC.SCHED.war with a copy: in one schedule, a copy of `a` made before `a.assign(...)` reads the old content,
  so the copy runs before the kernel that overwrites `a` (EXEC.SCHED.versions)."""
  a = Tensor([1.0, 2.0, 3.0], device="PYTHON").realize()
  b = a.to("CPU")
  a.assign(a * 10)
  Tensor.realize(a, b)
  np.testing.assert_array_equal(b.numpy(), [1.0, 2.0, 3.0])
  np.testing.assert_array_equal(a.numpy(), [10.0, 20.0, 30.0])


def test_mixing_devices_without_to_is_an_error():
  """EXEC.SCHED.device: a kernel reading buffers on two devices is refused before anything runs."""
  a, b = Tensor([1.0, 2.0], device="CPU"), Tensor([3.0, 4.0], device="PYTHON")
  with pytest.raises(SpecError) as e: (a + b).realize()
  assert e.value.clause == "EXEC.SCHED.device" and ".to(" in str(e.value)
  np.testing.assert_array_equal((a.to("PYTHON") + b).numpy(), [4.0, 6.0])
  np.testing.assert_array_equal((a + 1).numpy(), [2.0, 3.0])   # a constant carries no data: fine on any device


# ---- to_ ----

def test_to_in_place_and_assign_after_it():
  """UOP.COPY.to: to_ moves the tensor itself (returns it); an assign afterwards writes on the new device, lazily
  moved or realized first."""
  t = Tensor([1, 2, 3], device="PYTHON")
  assert t.to_("CPU") is t and t.device == "CPU" and t.uop.op is Ops.COPY
  t.assign(t * 2 + 1)
  np.testing.assert_array_equal(t.numpy(), [3, 5, 7])
  assert t.device == "CPU"
  u = Tensor([1.0, 2.0], device="CPU").to_("PYTHON").realize()
  node = u.uop
  u.assign(u - 1).realize()
  assert u.uop is node and u.device == "PYTHON"   # the same buffer, written in place
  np.testing.assert_array_equal(u.numpy(), [0.0, 1.0])


# ---- GRAD.COPY ----

def _loss(x: Tensor, w: Tensor, where: str | None) -> Tensor:
  """An exact-arithmetic loss of x and w, computed on `where` (None: on x's own device, without any copy)."""
  xs = x if where is None else x.to(where)
  ws = w if where is None else w.to(where)
  y = (xs * xs * ws + xs / 4 - ws).sum()
  return y if where is None else y.to(x.device)


@pytest.mark.parametrize("home,away", PAIRS)
def test_gradients_through_to(home, away):
  """GRAD.COPY: backward() through .to() gives .grad on each leaf's own device, equal bit for bit to the same
  computation without copies, and to torch's gradients."""
  rng = np.random.default_rng(7)
  xv, wv = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
  got, want = [], []
  for where, out in ((away, got), (None, want)):
    x = Tensor(xv, device=home, requires_grad=True)
    w = Tensor(wv, device=home, requires_grad=True)
    _loss(x, w, where).backward()
    assert x.grad.device == home and w.grad.device == home
    out += [x.grad.numpy(), w.grad.numpy()]
  for g, h in zip(got, want): np.testing.assert_array_equal(g, h)
  tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
  (tx * tx * tw + tx / 4 - tw).sum().backward()
  np.testing.assert_allclose(got[0], tx.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(got[1], tw.grad.numpy(), rtol=1e-6)


def test_gradient_of_a_tensor_moved_in_place():
  """GRAD.COPY with to_: a leaf moved to another device keeps requiring gradients; its .grad moves with it and
  gradients then accumulate there (GRAD.ACCUM)."""
  x = Tensor([1.0, -2.0, 3.0], device="PYTHON", requires_grad=True)
  (x * x).sum().backward()
  x.to_("CPU")
  assert x.grad.device == "CPU" and x.requires_grad
  (x * 3).sum().backward()
  assert x.grad.device == "CPU"
  np.testing.assert_array_equal(x.grad.numpy(), [5.0, -1.0, 9.0])


# ---- JIT ----

def test_jit_records_and_replays_copies():
  """EXEC.SCHED.copy: TinyJit records copy steps with the kernels and a replay copies the new call's values
  (JIT.CAPTURE, JIT.REPLAY)."""
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x.to("CPU") * 2).to("PYTHON") + x

  for i in range(4):
    x = np.arange(5, dtype=np.float32) * (i + 1)
    out = f(Tensor(x, device="PYTHON"))
    np.testing.assert_array_equal(out.numpy(), x * 3)
  assert sum(ln.compiled is None for ln in f.captured) == 2 and f.cnt == 4


# ---- CL ----

def _cl_or_skip():
  try: return Device["CL"]
  except Exception as e:   # no pyopencl, or no OpenCL platform/driver (PoCL) on this machine
    pytest.skip(f"DEV.REGISTRY: no CL device here (pyopencl or an OpenCL driver such as PoCL missing: {e})")


@pytest.mark.parametrize("other", ["PYTHON", "CPU"])
def test_cl_round_trip(other):
  """EXEC.SCHED.copy on CL: bytes of every dtype the CL device supports go there and back unchanged, and a kernel on
  CL between two copies computes on the copied values."""
  cl = _cl_or_skip()
  for i, dtype in enumerate(DTYPES):
    if not cl.supports(to_dtype(dtype)): continue
    a = random_tensor(dtype, 19, other, seed=100 + i)
    want = raw(a)
    assert raw(a.to("CL")) == want and raw(a.to("CL").to(other)) == want
  x = np.arange(-4, 4, dtype=np.int32)
  out = ((Tensor(x, device=other).to("CL") * 3).to(other) + 1)
  assert steps(out) == [("copy", "CL"), ("kernel", "CL"), ("copy", other), ("kernel", other)]
  np.testing.assert_array_equal(out.numpy(), x * 3 + 1)
