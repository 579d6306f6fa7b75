"""The optimisation pass and BEAM search (spec/kernels.md, EXEC.OPT.*): every option list gives the bits NOOPT=1 gives,
on CPU and on the PYTHON device with its sanitizer (no out-of-bounds access, race or uninitialised read), for
elementwise kernels, reductions, matmuls, convolutions, softmax, odd sizes that no tile divides, and empty tensors."""
import os
import shutil

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen import search
from refimpl.codegen.lowerer import INDEX_DTYPE
from refimpl.codegen.opt import MAX_LANES, Opt, OptOps, check_opts, heuristic, layout, runs_on_cpu, thread_positions
from refimpl.codegen.search import build_program
from refimpl.device import Device
from refimpl.engine import realize
from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import CRenderer
from refimpl.renderer.cuda import CUDARenderer
from refimpl.renderer.opencl import OpenCLRenderer
from refimpl.uop import Ops
from refimpl.uop.ops import UOp, graph_rewrite
from refimpl.uop.symbolic import symbolic
from tests.backend_checks import needs_cl

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="DEV.COMPILE: no C compiler ($CC or cc): the CPU cannot compile")
U, R, L, S = OptOps.UPCAST, OptOps.UNROLL, OptOps.LOCAL, OptOps.STRIP


def data(seed: int, shape, dt=np.float32) -> np.ndarray:
  """Values of very different magnitudes (1e-6 .. 1e6; float16 1e-2 .. 1e2), so that adding them in another order
  changes the float sum."""
  rng = np.random.default_rng(seed)
  if np.issubdtype(dt, np.integer): return rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(dt)
  big = 3 if dt == np.float16 else 7
  return (rng.standard_normal(shape) * 10.0 ** rng.integers(1 - big, big, shape)).astype(dt)


def conv(x, w): return x.conv2d(w, padding=1)


# name -> (function, input shapes, numpy dtype); sizes are odd where a tile could divide them
CASES = {
  "add": (lambda a, b: a + b, [(131, 129), (131, 129)], np.float32),
  "chain": (lambda a, b: ((a * 3 - b).relu() + 1).sqrt() / (b * b + 1), [(131, 130), (131, 130)], np.float32),
  "sum_rows": (lambda a: a.sum(1), [(150, 131)], np.float32),
  "sum_cols": (lambda a: a.sum(0), [(131, 150)], np.float32),
  "max_rows": (lambda a: a.max(1), [(97, 170)], np.float32),
  "matmul_odd": (lambda a, b: a @ b, [(37, 29), (29, 45)], np.float32),
  "matmul": (lambda a, b: a @ b, [(32, 24), (24, 64)], np.float32),
  "matvec": (lambda a, b: a @ b, [(130, 128), (128,)], np.float32),
  "conv": (conv, [(1, 3, 13, 11), (5, 3, 3, 3)], np.float32),
  "softmax": (lambda a: a.softmax(1), [(130, 131)], np.float32),
  "int_sum": (lambda a, b: (a * b).sum(1), [(70, 300), (70, 300)], np.int32),
  "half_sum": (lambda a: a.sum(0), [(300, 70)], np.float16),
}


def run(case: str, device: str) -> np.ndarray:
  fn, shapes, dt = CASES[case]
  ins = [Tensor(data(i, s, dt), device=device) for i, s in enumerate(shapes)]
  return fn(*ins).numpy()


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
  return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture
def opts_for(monkeypatch):
  """Make every kernel compile with the given options, where they apply to it (EXEC.OPT.valid), else with none.
  Returns the list of option lists used, one per compiled kernel."""
  def use(opts: tuple[Opt, ...] | None) -> list:
    used: list = []

    def choose(device, ast):
      if opts is None: return None
      try: check_opts(layout(ast), opts)
      except SpecError: opts_used = ()
      else: opts_used = search.canonical(opts)
      used.append(opts_used)
      return opts_used
    monkeypatch.setattr(realize, "choose_opts", choose)
    return used
  return use


# ---- EXEC.OPT.exact: the default options on CPU give NOOPT's bits

@needs_cc
@pytest.mark.parametrize("case", sorted(CASES))
def test_default_options_give_noopt_bits_on_cpu(case, monkeypatch):
  monkeypatch.setenv("NOOPT", "1")
  want = run(case, "CPU")
  monkeypatch.setenv("NOOPT", "")
  chosen = []
  real = search.choose_opts
  monkeypatch.setattr(realize, "choose_opts", lambda d, ast: chosen.append(real(d, ast)) or chosen[-1])
  got = run(case, "CPU")
  assert any(chosen), f"{case}: the heuristic chose no option for any kernel ({chosen})"   # EXEC.OPT.default
  assert same_bits(want, got), f"{case}: default options change bits ({chosen})"


# ---- explicit options, tails included, on CPU and on the sanitized PYTHON device

EXPLICIT = [
  ("add", (Opt(U, 0, 8),)),                       # 16899 elements: a tail of 3 lanes
  ("add", (Opt(U, 0, 16), Opt(L, 0, 96))),        # and a work-group tail
  ("chain", (Opt(U, 0, 4),)),
  ("sum_rows", (Opt(U, 0, 4),)),                  # 150 rows / 4: a tail (131 is prime: nothing to unroll)
  ("sum_cols", (Opt(U, 0, 8),)),
  ("max_rows", (Opt(U, 0, 2), Opt(R, 0, 5))),
  ("matmul_odd", (Opt(U, 0, 4), Opt(U, 1, 8))),   # 37 x 45 output: tails on both axes
  ("matmul_odd", (Opt(U, 0, 3), Opt(U, 1, 4), Opt(L, 0, 7))),
  ("matmul", (Opt(U, 0, 4), Opt(U, 1, 8), Opt(R, 0, 4))),
  ("matmul", (Opt(U, 1, 16), Opt(R, 0, 8), Opt(L, 0, 32))),
  ("matvec", (Opt(U, 0, 8), Opt(R, 0, 2))),
  ("conv", (Opt(U, 1, 4), Opt(U, 3, 4), Opt(R, 2, 3))),
  ("softmax", (Opt(U, 0, 4),)),
  ("int_sum", (Opt(U, 0, 4), Opt(R, 0, 4))),
  ("half_sum", (Opt(U, 0, 8), Opt(R, 0, 4))),
  ("matmul_odd", (Opt(U, 0, 4), Opt(U, 1, 8), Opt(S, 0, 5))),   # EXEC.OPT.strip: 10 x 6 threads, strips of rows
  ("matmul", (Opt(U, 0, 8), Opt(U, 1, 8), Opt(R, 0, 4), Opt(S, 1, 2))),
  ("conv", (Opt(U, 1, 4), Opt(U, 3, 4), Opt(R, 2, 3), Opt(S, 3, 1))),
  ("matmul_odd", (Opt(U, 0, 3), Opt(U, 1, 4), Opt(L, 0, 7), Opt(S, 1, 4))),   # strips, tails and a work-group tail
]


def explicit_check(case, opts, device, opts_for):
  opts_for(None)
  want = run(case, device)
  used = opts_for(opts)
  got = run(case, device)
  assert any(used), f"{case}: {opts} apply to none of its kernels"
  assert same_bits(want, got), f"{case} with {opts} on {device}: bits differ from NOOPT"


@needs_cc
@pytest.mark.parametrize("case,opts", EXPLICIT, ids=[f"{c}-{i}" for i, (c, _) in enumerate(EXPLICIT)])
def test_explicit_options_give_noopt_bits_on_cpu(case, opts, opts_for):
  explicit_check(case, opts, "CPU", opts_for)


@pytest.mark.parametrize("case,opts", EXPLICIT[::2], ids=[f"{c}-{2 * i}" for i, (c, _) in enumerate(EXPLICIT[::2])])
def test_explicit_options_are_fault_free_on_python(case, opts, opts_for, monkeypatch):
  """EXEC.OPT.tail: clamped lanes and gated stores make no out-of-bounds access, race or uninitialised read
  (EXEC.SANITIZER checks every access)."""
  monkeypatch.setattr(Device["PYTHON"], "sanitize", True)
  explicit_check(case, opts, "PYTHON", opts_for)


@pytest.mark.parametrize("device", ["PYTHON"] + (["CPU"] if HAVE_CC else []))
def test_empty_tensors(device, opts_for):
  """EXEC.GRID.empty and empty reductions: zero outputs, and sums over a zero-length axis (the identity)."""
  opts_for((Opt(U, 0, 4), Opt(R, 0, 2)))
  assert Tensor(np.zeros((0, 3), np.float32), device=device).sum(1).numpy().shape == (0,)
  empty_sum = Tensor(np.zeros((6, 0), np.float32), device=device).sum(1).numpy()
  assert empty_sum.tolist() == [0.0] * 6 and not np.signbit(empty_sum).any()
  assert (Tensor(np.zeros((0, 5), np.float32), device=device) + 1).numpy().shape == (0, 5)


# ---- the order of a reduction is kept (EXEC.THREAD.reduce)

@pytest.mark.parametrize("device", ["PYTHON"] + (["CPU"] if HAVE_CC else []))
def test_unrolled_and_tiled_sums_fold_left_to_right(device, opts_for):
  """Rows whose float32 sum depends on the order: the result is the left-to-right fold computed here with numpy
  scalars, one rounding per step, for every row, with a tile of rows and the loop unrolled by 4."""
  row = np.array([1e8, 1.0, -1e8, 1.0, 3e-3, 1e7, -1e7, 0.5] * 4, np.float32)
  x = np.stack([np.roll(row, i) for i in range(6)])
  want = []
  for r in x:
    acc = np.float32(0.0)
    for v in r: acc = np.float32(acc + v)
    want.append(acc)
  opts_for((Opt(U, 0, 4), Opt(R, 0, 4)))
  got = Tensor(x, device=device).sum(1).numpy()
  assert got.tobytes() == np.array(want, np.float32).tobytes()


# ---- what the options do to the program

def matmul_ast(m: int, k: int, n: int, device: str = "PYTHON"):
  a, b = Tensor(np.ones((m, k), np.float32), device=device), Tensor(np.ones((k, n), np.float32), device=device)
  return (a @ b).schedule()[-1].ast


def test_tile_shares_loads_and_one_loop():
  """EXEC.OPT.share: a 4x4 matmul tile loads 4 elements of A and 4 of B per iteration of its one loop and keeps 16
  accumulators; EXEC.OPT.upcast: 16 outputs per thread, a quarter of the threads in each dimension."""
  prog, _ = build_program("mm", matmul_ast(16, 8, 32), (Opt(U, 0, 4), Opt(U, 1, 4)))
  uops = prog.uops
  ranges = [i for i, u in enumerate(uops) if u.op is Ops.RANGE]
  assert len(ranges) == 1
  end = next(i for i, u in enumerate(uops) if u.op is Ops.END)
  body = uops[ranges[0]:end]
  loads = [u for u in body if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
  assert sorted(u.src[0].src[0].arg for u in loads) == [1] * 4 + [2] * 4
  assert len([u for u in uops if u.op is Ops.DEFINE_REG]) == 16
  assert len([u for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]) == 16
  assert prog.global_size == (4 * 8, 1, 1) and prog.local_size == (1, 1, 1)


def test_local_and_unroll_shape_the_launch():
  """EXEC.OPT.local: work-groups of k threads, the last one gated past the end; EXEC.OPT.unroll: an inner loop of k
  iterations with a constant end inside an outer loop of size/k."""
  prog, _ = build_program("mm", matmul_ast(10, 12, 10), (Opt(L, 0, 64), Opt(R, 0, 4)))
  assert prog.global_size == (2, 1, 1) and prog.local_size == (64, 1, 1)
  ends = sorted(u.src[0].arg for u in prog.uops if u.op is Ops.RANGE)
  assert ends == [3, 4] and any(u.op is Ops.RANGE and u.arg[-1] == "unroll" for u in prog.uops)
  gates = [u for u in prog.uops if u.op is Ops.STORE and len(u.src[0].src) == 3]
  assert len(gates) == 1   # 128 threads for 100 outputs: the store is gated


def test_invalid_options_are_refused():
  """EXEC.OPT.valid names what is wrong."""
  lay = layout(matmul_ast(8, 6, 4))
  assert lay.shape == (8, 4) and lay.reduce_sizes == (6,)
  bad = [(Opt(U, 2, 2),), (Opt(U, 0, 2), Opt(U, 0, 4)), (Opt(R, 0, 4),), (Opt(R, 1, 2),), (Opt(L, 0, 2000),),
         (Opt(U, 0, 8), Opt(U, 1, 16)), (Opt(U, 0, 1),),
         # EXEC.OPT.strip: no axis 2; a width that does not divide the 4 threads along axis 1, or is not smaller than
         # them (after the UPCAST, 2); width 0; two strips
         (Opt(S, 2, 1),), (Opt(S, 1, 3),), (Opt(S, 1, 4),), (Opt(U, 1, 2), Opt(S, 1, 2)), (Opt(S, 0, 0),),
         (Opt(S, 0, 2), Opt(S, 1, 2))]
  assert 8 * 16 > MAX_LANES
  for opts in bad:
    with pytest.raises(SpecError) as e: check_opts(lay, opts)
    assert e.value.clause == "EXEC.OPT.valid"
  check_opts(lay, (Opt(U, 0, 8), Opt(U, 1, 4), Opt(R, 0, 3), Opt(L, 0, 16)))
  check_opts(lay, (Opt(U, 0, 2), Opt(S, 0, 2)))
  x = Tensor(np.ones((6, 50), np.float32), device="PYTHON")
  with pytest.raises(SpecError, match="no other axis"): check_opts(layout(x.sum(1).schedule()[-1].ast), (Opt(S, 0, 2),))


def test_strip_orders_threads_strip_by_strip():
  """EXEC.OPT.strip: STRIP(1, 2) over 3 x 4 thread positions: thread ids run down the rows of columns 0-1, then of
  columns 2-3; without a strip, row by row."""
  counts = (3, 4)

  def order(strip):
    out = []
    for t in range(12):
      pos = thread_positions(UOp.const(INDEX_DTYPE, t), counts, strip)
      out.append(tuple(graph_rewrite(p, symbolic).arg for p in pos))
    return out
  assert order(Opt(S, 1, 2)) == [(r, s * 2 + c) for s in range(2) for r in range(3) for c in range(2)]
  assert order(None) == [(r, c) for r in range(3) for c in range(4)]
  assert order(Opt(S, 0, 1)) == [(r, c) for r in range(3) for c in range(4)]   # strips of one row: row-major again

def test_heuristic_choices():
  """EXEC.OPT.default: a tile and an unrolled loop for a big matmul on CPU, 8 lanes for a big elementwise kernel,
  nothing for small kernels or on PYTHON, work-groups on GPUs."""
  mm = matmul_ast(64, 64, 64)
  assert heuristic(mm, "CPU") == (Opt(U, 0, 4), Opt(U, 1, 8), Opt(R, 0, 4))
  # a sum of >= 256 steps: the 8 x 8 tile, its loop not unrolled; B's panels of 512 x 8 float32 (16 KiB per thread
  # column) in strips of 64 columns (1 MiB, STRIP_BYTES) where B (4 MiB) does not fit at once; no strip where it does
  assert heuristic(matmul_ast(16, 512, 2048), "CPU") == (Opt(U, 0, 8), Opt(U, 1, 8), Opt(S, 1, 64))
  assert heuristic(matmul_ast(64, 256, 64), "CPU") == (Opt(U, 0, 8), Opt(U, 1, 8))
  assert heuristic(matmul_ast(16, 4096, 120), "CPU")[2] == Opt(S, 1, 5)   # 8 columns would fit; 5 divides 15
  assert heuristic(mm, "PYTHON") == ()
  assert heuristic(mm, "CUDA") == (Opt(L, 0, 128),) and heuristic(matmul_ast(3, 5, 7), "CUDA") == (Opt(L, 0, 21),)
  assert heuristic(matmul_ast(4, 4, 4), "CPU") == ()
  x = Tensor(np.ones(1 << 16, np.float32), device="PYTHON")
  add = (x + x).schedule()[-1].ast
  assert heuristic(add, "CPU") == (Opt(U, 0, 8),)


def test_heuristic_accumulators_for_row_sums():
  """EXEC.OPT.default: a reduction whose loads no output axis shares (row sums, the blocks of a blocked sum) gets
  independent accumulators: 8 lanes when the output has at least 1024 elements, 4 below, so that a small output still
  has threads for both cores; the loop is unrolled by 4 either way."""
  def rows_ast(m: int, k: int):
    return Tensor(np.ones((m, k), np.float32), device="PYTHON").sum(1).schedule()[-1].ast
  assert heuristic(rows_ast(4096, 64), "CPU") == (Opt(U, 0, 8), Opt(R, 0, 4))
  assert heuristic(rows_ast(1024, 64), "CPU") == (Opt(U, 0, 8), Opt(R, 0, 4))
  assert heuristic(rows_ast(1023, 64), "CPU") == (Opt(U, 0, 4), Opt(R, 0, 4))
  assert heuristic(rows_ast(64, 4096), "CPU") == (Opt(U, 0, 4), Opt(R, 0, 4))
  # a blocked sum of 16M values (EXEC.REDUCE.blocked): 8192 blocks of 2048 at 8 chains per thread, then the chain
  # over the 8192 block results, too small a kernel for any option
  big = Tensor.empty(1 << 24, device="PYTHON").sum().schedule()
  assert [heuristic(si.ast, "CPU") for si in big] == [(Opt(U, 0, 8), Opt(R, 0, 4)), ()]


def test_renderers_write_index_math_plainly_and_unroll_pragmas():
  """DEV.C.nowrap: index arithmetic that cannot overflow is C's signed arithmetic, a division by a constant is C's
  `/`; arithmetic on loaded values still wraps through unsigned types (DEV.C.wrap). EXEC.OPT.unroll: each language
  asks its compiler to unroll the inner loop."""
  prog, _ = build_program("mm", matmul_ast(16, 8, 32), (Opt(U, 1, 4), Opt(R, 0, 4)))
  c = CRenderer().render(prog)
  assert "#pragma GCC unroll 4" in c and "cdiv_i32" not in c and "(uint32_t)" not in c
  assert "#pragma unroll 4" in OpenCLRenderer().render(prog) and "#pragma unroll 4" in CUDARenderer().render(prog)
  a = Tensor(np.ones(8, np.int32), device="PYTHON")
  ast = (a + a).schedule()[-1].ast
  src = CRenderer().render(build_program("add", ast, None)[0])
  assert "(int32_t)((uint32_t)" in src   # two loaded int32 values can overflow: OP.ADD.wrap


# ---- BEAM (EXEC.OPT.beam)

@needs_cc
def test_beam_gives_noopt_bits_and_caches_its_winner(monkeypatch, tmp_path):
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))
  monkeypatch.setenv("NOOPT", "1")
  want = run("matmul", "CPU")
  monkeypatch.setenv("NOOPT", "")
  monkeypatch.setenv("BEAM", "2")
  small = [Opt(U, 0, 4), Opt(U, 1, 8), Opt(R, 0, 4), Opt(U, 1, 2)]   # a short action list keeps the search quick
  monkeypatch.setattr(search, "actions", lambda lay, device: small)
  timed = []
  real_time = search.time_program
  monkeypatch.setattr(search, "time_program", lambda *a, **k: timed.append(a[1]) or real_time(*a, **k))
  got = run("matmul", "CPU")
  assert same_bits(want, got) and len(timed) >= 3
  files = list((tmp_path / "beam").glob("*.json"))
  assert len(files) == 1 and '"version": 1' in files[0].read_text()
  search._chosen.clear()   # a new process: the winner comes from disk, nothing is timed
  timed.clear()
  assert same_bits(want, run("matmul", "CPU")) and timed == []


# ---- CL (PoCL in CI): the options give NOOPT's bits


@needs_cl
@pytest.mark.parametrize("case", ["matmul_odd", "add"])
def test_cl_default_options_give_noopt_bits(case, monkeypatch):
  monkeypatch.setenv("NOOPT", "1")
  want = run(case, "CL")
  monkeypatch.setenv("NOOPT", "")
  assert same_bits(want, run(case, "CL"))


@needs_cl
def test_cl_local_sizes_give_noopt_bits(opts_for):
  """EXEC.OPT.local on a real OpenCL runtime: work-groups of 64 threads with a gated tail, and a tile."""
  explicit_check("matmul_odd", (Opt(U, 0, 4), Opt(U, 1, 4), Opt(L, 0, 64)), "CL", opts_for)


@needs_cl
def test_cl_on_a_cpu_gets_the_cpu_heuristic():
  """EXEC.OPT.default: PoCL runs on the CPU, where tiles pay and work-groups alone do not."""
  mm = matmul_ast(64, 64, 64)
  assert heuristic(mm, "CL") == (heuristic(mm, "CPU") if runs_on_cpu("CL") else (Opt(L, 0, 128),))


@needs_cc
@pytest.mark.parametrize("shape,axis", [((0, 16384), 0), ((0, 4, 8192), 0), ((16384, 0), 1)])
def test_a_reduction_over_no_values_gets_valid_options(shape, axis):
  """EXEC.OPT.valid / EXEC.OPT.default: a reduction over an empty axis has no reduce loop, and its layout is the
  output's shape (size-1 axes included), not the flat one of an elementwise kernel; the heuristic upcasts its last axis
  of size above 1. It upcast axis 0 (size 1 here), which EXEC.OPT.valid refused: the sum of a (0, 16384) tensor over
  axis 0 with keepdim raised SpecError on CPU (found by a suite-wide NOOPT comparison, not kept yet)."""
  got = Tensor.ones(*shape, device="CPU").contiguous().sum(axis, keepdim=True).numpy()
  assert got.shape == tuple(1 if a == axis else n for a, n in enumerate(shape)) and not got.any()
  assert np.array_equal(Tensor.ones(*shape, device="CPU").contiguous().prod(axis, keepdim=True).numpy(),
                        np.ones(got.shape, np.float32))
