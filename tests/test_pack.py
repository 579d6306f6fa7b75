"""Operand packing (spec/kernels.md EXEC.SCHED.pack, refimpl/engine/pack.py) and the tile kernels' compiler flags
(spec/backends.md DEV.C.flags.tile): where the pass applies, where it must not, and that it never changes a bit."""
import os
import shutil

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.engine import pack
from refimpl.uop import Ops

if shutil.which(os.environ.get("CC", "cc")) is None:
  pytest.skip("DEV.COMPILE: no C compiler ($CC or cc) on this machine, so the CPU device cannot compile",
              allow_module_level=True)

from refimpl.runtime import ops_cpu  # noqa: E402

RNG = np.random.default_rng(7)


def _data(*shape):
  return RNG.standard_normal(shape, dtype=np.float32)


def _names(t: Tensor) -> list[str]:
  return [si.arg.name for si in t.schedule()]


def _run(fn, *arrays, env: dict[str, str] | None = None, device="CPU"):
  """(kernel names, result bytes) of fn over fresh CPU tensors of `arrays`, with environment `env` set meanwhile."""
  old = {k: os.environ.get(k) for k in (env or {})}
  os.environ.update(env or {})
  try:
    names = _names(fn(*(Tensor(a, device=device).realize() for a in arrays)))
    out = fn(*(Tensor(a, device=device).realize() for a in arrays)).numpy()
  finally:
    for k, v in old.items():
      if v is None: os.environ.pop(k, None)
      else: os.environ[k] = v
  return names, out


def _stored(shape, transposed: bool, dt=np.float32) -> np.ndarray:
  """Values for an operand of `shape`, stored transposed (read through .T) when `transposed`."""
  if np.issubdtype(dt, np.integer): x = RNG.integers(-1000, 1000, shape[::-1] if transposed else shape).astype(dt)
  else: x = RNG.standard_normal(shape[::-1] if transposed else shape).astype(dt)
  return x


# (a's shape, b's shape, a and b stored transposed, dtype) -> which operands the pass packs
PACKED = {
  "square": (((16, 512), (512, 512), False, False, np.float32), "ab"),
  "tails": (((9, 601), (601, 520), False, False, np.float32), "b"),       # 9 rows: no panel of 8
  "batched": (((3, 16, 512), (3, 512, 520), False, False, np.float32), "ab"),
  "batched-b-read-once": (((3, 8, 512), (3, 512, 520), False, False, np.float32), "a"),   # one tile row reads b
  "broadcast": (((2, 5, 512), (512, 512), False, False, np.float32), "b"),   # b once for both batches
  "transposed": (((600, 512), (512, 520), True, True, np.float32), "ab"),
  "a-transposed-short-rows": (((24, 512), (512, 8), True, False, np.float32), ""),
  "float64": (((16, 512), (512, 520), False, False, np.float64), "ab"),
  "int32": (((16, 512), (512, 520), False, False, np.int32), "ab"),
  "float16": (((16, 512), (512, 520), False, False, np.float16), "ab"),   # the product is cast to float32 and summed
}


@pytest.mark.parametrize("case", sorted(PACKED))
def test_packed_matmul_gives_the_same_bits(case):
  """EXEC.SCHED.pack: a matmul gets one panel copy before it per packed operand (a: lanes a row apart; b: rows of >=
  512 elements; each read by more than 8 outputs per element), and its result has the bits of the unpacked kernel
  (PACK=0) and of the unoptimised one (NOOPT=1); a broadcast operand (one matrix for every batch) is packed once, not
  once per batch."""
  (sa, sb, ta, tb, dt), which = PACKED[case]
  a, b = _stored(sa, ta, dt), _stored(sb, tb, dt)

  def mm(x, y): return (x.T if ta else x) @ (y.T if tb else y)
  names, got = _run(mm, a, b)
  assert len(names) == 1 + len(which) and names[-1].startswith("r_") and all(n.startswith("E_") for n in names[:-1])
  # each copy kernel is named after its shape: it stores its operand's elements once
  copied = sorted(np.prod([int(n) for n in name.split("_")[1:]]) for name in names[:-1])
  assert copied == sorted(np.prod({"a": sa, "b": sb}[w]) for w in which), (names, which)
  for env in ({"PACK": "0"}, {"NOOPT": "1"}):
    other_names, other = _run(mm, a, b, env=env)
    assert len(other_names) == 1, (env, other_names)
    assert other.tobytes() == got.tobytes(), env
  want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
  if dt == np.int32: assert (got == want.astype(np.int64).astype(np.int32)).all()   # |values| < 2**31: exact
  else: np.testing.assert_allclose(got, want, rtol=1e-2 if dt == np.float16 else 1e-4, atol=0.5 if dt == np.float16
                                   else 1e-3)


@pytest.mark.parametrize("case", ["small", "short-reduce", "short-rows", "lanes-not-multiple", "read-once",
                                  "python"])
def test_pass_does_not_apply(case):
  """EXEC.SCHED.pack applies only on the CPU, to operands summed over at least 256 steps, whose lanes are a multiple
  of 8, that more than 8 outputs read, and that are read with lanes apart or rows of at least 512 elements."""
  a, b, fn, device = _data(8, 64), _data(64, 64), (lambda x, y: x @ y), "CPU"
  if case == "short-reduce": a, b = _data(16, 128), _data(128, 1024)       # stride 1024, but only 128 steps
  if case == "short-rows": a, b = _data(12, 512), _data(512, 64)   # b: rows of 64 stay cached; a: 12 rows, no panel
  if case == "lanes-not-multiple": a, b = _data(7, 512), _data(512, 515)
  if case == "read-once": a, b = _data(8, 512), _data(512, 8)               # one 8 x 8 tile reads each operand once
  if case == "python": a, b, device = _data(16, 300), _data(300, 512), "PYTHON"
  names = _names(fn(Tensor(a, device=device), Tensor(b, device=device)))
  assert len(names) == 1, names


@pytest.mark.parametrize("shapes,kernels", [(((16, 512), (512, 1024)), 3), (((3, 16, 512), (3, 512, 520)), 3),
                                            (((37, 600), (600, 520)), 2)], ids=["square", "batched", "tails"])
def test_packed_index_has_no_division(shapes, kernels):
  """The panels' indices reduce to panel * 8K + k * 8 + lane (RW.IDX.*-multiple rules): the matmul kernel's program,
  with both operands packed, the 8 x 8 tile and strips (EXEC.OPT.default, EXEC.OPT.strip), has no CDIV or CMOD inside
  its reduce loop; nor where the tile's rows pass the end of the output (37 rows: a unpacked, its lanes clamped)."""
  from refimpl.codegen.opt import OptOps
  from refimpl.codegen.search import build_program, choose_opts
  x, y = Tensor(_data(*shapes[0]), device="CPU").realize(), Tensor(_data(*shapes[1]), device="CPU").realize()
  schedule = (x @ y).schedule()
  assert len(schedule) == kernels
  kernel = schedule[-1]
  opts = choose_opts("CPU", kernel.ast)
  assert {o.op for o in opts} >= {OptOps.UPCAST, OptOps.STRIP} and [o.amount for o in opts if o.op is OptOps.UPCAST] \
    == [8, 8], opts
  program, _ = build_program(kernel.arg.name, kernel.ast, opts)
  depth, inside = 0, []
  for u in program.uops:
    if u.op is Ops.RANGE: depth += 1
    elif u.op is Ops.END: depth -= 1
    elif depth and u.op in (Ops.CDIV, Ops.CMOD): inside.append(u)
  assert any(u.op is Ops.RANGE for u in program.uops) and inside == []


def test_pending_assign_of_a_packed_matmul():
  """An assign whose value is a packed matmul (an optimiser step) writes its target and retires: realizing again
  changes nothing, and the values are those of the unpacked computation."""
  a, b, w0 = _data(8, 512), _data(512, 512), _data(8, 512)
  w = Tensor(w0.copy(), device="CPU").realize()
  x, y = Tensor(a, device="CPU").realize(), Tensor(b, device="CPU").realize()
  w.assign(w - (x @ y) * 0.5)
  assert len(w.schedule()) == 2
  w.realize()
  first = w.numpy().copy()
  w.realize()
  assert w.numpy().tobytes() == first.tobytes()
  _, unpacked = _run(lambda x, y: x @ y, a, b, env={"PACK": "0"})
  expect = (Tensor(w0, device="CPU") - Tensor(unpacked, device="CPU") * 0.5).numpy()
  assert first.tobytes() == expect.tobytes()


def test_gradients_through_a_packed_matmul():
  """Autograd's matmuls (the gradient of x @ y with respect to x is g @ y.T, with respect to y x.T @ g) give the
  bits of PACK=0."""
  a, b = _data(16, 512), _data(512, 512)

  def grads():
    x, y = Tensor(a, device="CPU", requires_grad=True), Tensor(b, device="CPU", requires_grad=True)
    (x @ y).sum().backward()
    return x.grad.numpy().tobytes(), y.grad.numpy().tobytes()
  packed = grads()
  os.environ["PACK"] = "0"
  try: plain = grads()
  finally: os.environ.pop("PACK")
  assert packed == plain


def test_tile_kernels_get_the_tile_flags():
  """DEV.C.flags.tile: a kernel with a tile of 8 or more accumulators compiles with -O3 without the loop vectoriser;
  an elementwise kernel keeps FLAGS."""
  from refimpl.codegen.search import build_program, choose_opts
  x, y = Tensor(_data(64, 64), device="CPU").realize(), Tensor(_data(64, 64), device="CPU").realize()
  for t, tiled in ((x @ y, True), (x + y, False)):
    ast = t.schedule()[-1].ast
    program, _ = build_program("k", ast, choose_opts("CPU", ast))
    flags = ops_cpu.flags_for(program)
    if tiled: assert "-O3" in flags and "-fno-tree-loop-vectorize" in flags and "-O2" not in flags
    else: assert flags == ops_cpu.FLAGS
    assert {"-ffp-contract=off", "-std=c11"} <= set(flags)   # DEV.C.flags: nothing that changes a value goes


def test_native_objects_are_cached_per_host(tmp_path, monkeypatch):
  """DEV.CPU.cache: with -march=native the key holds the host CPU, so another CPU never loads this one's object."""
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  src = "void probe_native(int *out) { out[0] = 7; }\n"
  flags = ops_cpu.FLAGS + ("-march=native",)
  first = ops_cpu.CPUBackend()
  first.compile_c(src, "probe", flags)
  assert first.compiler_runs == 1
  second = ops_cpu.CPUBackend()
  second.compile_c(src, "probe", flags)
  assert second.compiler_runs == 0
  monkeypatch.setattr(ops_cpu, "_host_cpu", lambda: "model name: another CPU\n")
  third = ops_cpu.CPUBackend()
  third.compile_c(src, "probe", flags)
  assert third.compiler_runs == 1
  assert pack.MIN_STRIDE == 512 and pack.PANEL == 8   # the numbers spec/kernels.md EXEC.SCHED.pack states


def _conv_weight_grad(x, w, g):
  return (x.conv2d(w, padding=1) * g).sum().gradient(w)[0]


def _two_axis_einsum(a, b):
  """out[p, i, j] = sum over (k, l) of a[p, i, k, l] * b[p, k, l, j]: a batched matmul over two reduced axes."""
  return (a.reshape(*a.shape, 1) * b.reshape(b.shape[0], 1, *b.shape[1:])).sum((2, 3))


MULTI = {
  # conv2d's weight gradient sums over batch and image (4 * 32 * 32 = 4096 steps): both operands packed (the output
  # gradient with output channels as lanes, the input's sliding windows with input channels as lanes), then a copy
  # of the (cout, ky*kx*cin) result into the weight's (cout, cin, ky, kx) order
  "conv-weight-grad": (_conv_weight_grad, ((4, 8, 32, 32), (16, 8, 3, 3), (4, 16, 32, 32)),
                       ["E_2_4096_8", "E_9_4096_8", "r_16_72_1", "E_16_8_3_3"]),
  # batch axis p kept by both operands; i (16) and j (24) in order: no copy of the result
  "batched-two-axes": (_two_axis_einsum, ((2, 16, 64, 40), (2, 64, 40, 24)),
                       ["E_2_2_2560_8", "E_2_3_2560_8", "r_2_16_24"]),
}


@pytest.mark.parametrize("case", sorted(MULTI))
def test_packed_sum_over_several_axes_gives_the_same_bits(case):
  """EXEC.SCHED.pack over several reduced axes: both operands are copied into panels with their reduced positions
  flattened in row-major order (the fold order), the sum becomes one loop over them, and the bits are those of
  PACK=0 and NOOPT=1 (which keep the sum over several loops)."""
  fn, shapes, want = MULTI[case]
  arrays = [_data(*s) for s in shapes]
  names, got = _run(fn, *arrays)
  assert names == want, names
  for env in ({"PACK": "0"}, {"NOOPT": "1"}):
    other_names, other = _run(fn, *arrays, env=env)
    assert len(other_names) == 1, (env, other_names)
    assert other.tobytes() == got.tobytes(), env


@pytest.mark.parametrize("case", ["short-sum", "read-once", "lanes-not-multiple"])
def test_pass_over_several_axes_does_not_apply(case):
  """EXEC.SCHED.pack over several reduced axes needs a sum of at least 2048 steps (a convolution's forward, 288 steps,
  keeps its window tile), operands each read by more than 8 outputs per element, and lanes that are a multiple of 8."""
  if case == "short-sum": fn, shapes = _conv_weight_grad, ((1, 8, 32, 32), (16, 8, 3, 3), (1, 16, 32, 32))  # 1024
  if case == "read-once": fn, shapes = _two_axis_einsum, ((2, 8, 64, 40), (2, 64, 40, 24))   # a: 8 rows
  if case == "lanes-not-multiple": fn, shapes = _two_axis_einsum, ((2, 12, 64, 40), (2, 64, 40, 20))
  arrays = [Tensor(_data(*s), device="CPU").realize() for s in shapes]
  names = _names(fn(*arrays))
  assert not any(n.startswith("E_") for n in names), names
