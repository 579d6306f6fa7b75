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


@pytest.mark.parametrize("shapes", [((16, 512), (512, 512)), ((9, 600), (600, 520)), ((3, 8, 512), (3, 512, 520)),
                                    ((2, 5, 512), (512, 512))], ids=["square", "tails", "batched", "broadcast"])
def test_packed_matmul_gives_the_same_bits(shapes):
  """EXEC.SCHED.pack: a matmul whose right operand has rows of >= 512 elements gets one panel copy before it, and its
  result has the bits of the unpacked kernel (PACK=0) and of the unoptimised one (NOOPT=1); a broadcast operand
  (the last case: one matrix for every batch) is packed once, not once per batch."""
  a, b = _data(*shapes[0]), _data(*shapes[1])
  names, got = _run(lambda x, y: x @ y, a, b)
  assert len(names) == 2 and names[0].startswith("E_") and names[1].startswith("r_"), names
  panel_elems = np.prod(shapes[1])   # the copy kernel is named after its shape: it stores b's elements once
  assert np.prod([int(n) for n in names[0].split("_")[1:]]) == panel_elems
  for env in ({"PACK": "0"}, {"NOOPT": "1"}):
    other_names, other = _run(lambda x, y: x @ y, a, b, env=env)
    assert len(other_names) == 1, (env, other_names)
    assert other.tobytes() == got.tobytes(), env
  np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["small", "short-reduce", "unit-stride", "lanes-not-multiple", "python"])
def test_pass_does_not_apply(case):
  """EXEC.SCHED.pack applies only on the CPU, to operands read with a large stride along a long sum and stride 1 along
  the lanes, whose size is a multiple of 8."""
  a, b, fn, device = _data(8, 64), _data(64, 64), (lambda x, y: x @ y), "CPU"
  if case == "short-reduce": a, b = _data(8, 128), _data(128, 1024)          # stride 1024, but only 128 steps
  if case == "unit-stride": a, b, fn = _data(8, 512), _data(512, 512), (lambda x, y: x @ y.T)   # b.T: stride 1
  if case == "lanes-not-multiple": a, b = _data(8, 512), _data(512, 515)
  if case == "python": a, b, device = _data(4, 300), _data(300, 512), "PYTHON"
  names = _names(fn(Tensor(a, device=device), Tensor(b, device=device)))
  assert len(names) == 1, names


def test_packed_index_has_no_division():
  """The panel's index reduces to panel * 8K + k * 8 + lane (RW.IDX.*-multiple rules): the matmul kernel's program has
  no CDIV or CMOD inside its reduce loop."""
  from refimpl.codegen.search import build_program, choose_opts
  x, y = Tensor(_data(16, 512), device="CPU").realize(), Tensor(_data(512, 512), device="CPU").realize()
  kernel = [si for si in (x @ y).schedule() if si.arg.name.startswith("r_")][0]
  program, _ = build_program(kernel.arg.name, kernel.ast, choose_opts("CPU", kernel.ast))
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
