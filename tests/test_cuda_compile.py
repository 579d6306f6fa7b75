"""Generated CUDA C compiles without a GPU (DEV.CUDA.compile): NVRTC turns every kernel of a representative set into
PTX for compute_75, so broken CUDA source is caught in CI. The set: the one-op kernels of every ALU op and every
conversion for every dtype (the programs the edge-table and random tests run, tests/backend_checks.py), the
hand-built programs (local memory, BARRIER, IF, gates, 3-D grids), and the kernels of Tensor-level ops, gradients
included, on small shapes, scheduled on the PYTHON device and lowered and linearized as refimpl/engine/realize.py
does. Running them needs a GPU: bench/gpu_check.py."""
import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen import linearize, lower
from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import kernel_name
from refimpl.renderer.cuda import CUDARenderer
from refimpl.uop.verify import verify
from tests.backend_checks import alu_program, convert_program, program_cases

try:   # the optimisation pass (EXEC.OPT.default): a CUDA device compiles each kernel with the heuristic's work-groups
  from refimpl.codegen.opt import heuristic
  from refimpl.codegen.search import build_program
except ImportError:   # a tree without the optimisation pass compiles the plain lowering only
  heuristic = build_program = None


def _nvrtc_works() -> str | None:
  """Why NVRTC cannot be used here, or None when it can."""
  try: from cuda.bindings import nvrtc
  except ImportError as e: return f"cuda-python is not installed (pip install 'tinyspec[cuda]'): {e}"
  try: err, *_ = nvrtc.nvrtcVersion()
  except Exception as e: return f"the NVRTC library does not load (nvidia-cuda-nvrtc): {e}"   # noqa: BLE001
  return None if int(err) == 0 else f"nvrtcVersion failed: {err}"


if (_why := _nvrtc_works()) is not None:
  pytest.skip(f"DEV.CUDA.compile: {_why}", allow_module_level=True)

from refimpl.runtime.ops_cuda import nvrtc_compile  # noqa: E402

ARCH = "compute_75"   # the oldest architecture with every instruction the renderer may need (DEV.CUDA.compile)


def compiles(prog: LinearProgram) -> None:
  """Render `prog` as CUDA C and compile it to PTX; NVRTC's log is in the SpecError if it does not compile. The PTX
  must define the kernel under the name the CUDA device looks it up by."""
  src = CUDARenderer().render(prog)
  ptx = nvrtc_compile(src, kernel_name(prog), ARCH).decode(errors="replace")
  assert f".entry {kernel_name(prog)}(" in ptx, f"{prog.name}: no kernel {kernel_name(prog)} in the PTX"


@pytest.mark.parametrize("dt", dtypes.all(), ids=repr)
def test_one_op_kernels_compile(dt):
  """Every ALU op accepting `dt` (one kernel), every CAST and BITCAST from `dt` (another)."""
  compiles(alu_program(dt)[0])
  compiles(convert_program(dt)[0])


@pytest.mark.parametrize("case", program_cases(), ids=lambda c: c.name)
def test_hand_built_programs_compile(case):
  """DEV.GPU.local, DEV.GPU.barrier, DEV.GPU.special: __shared__ arrays, __syncthreads(), blockIdx/threadIdx."""
  compiles(case.program)


def test_kernel_names_that_are_reserved_words():
  """A program named like a keyword or a helper gets a name CUDA accepts, and the same name is looked up."""
  base = program_cases()[0].program
  for name in ("local", "float", "sin", "max_f32", "3d", "a-b"):
    compiles(LinearProgram(name, base.uops, base.global_size, base.local_size))


def test_compile_error_carries_the_log():
  """DEV.CUDA.compile: NVRTC's log and the numbered source lines around the error are in SpecError(DEV.COMPILE)."""
  src = "\n".join(["// line 1", "// line 2", 'extern "C" __global__ void broken(int* p) {', "  p[0] = undeclared_x;",
                   "}"])
  with pytest.raises(SpecError) as e: nvrtc_compile(src, "broken", ARCH)
  msg = str(e.value)
  assert e.value.clause == "DEV.COMPILE" and "broken" in msg and "undeclared_x" in msg and "error" in msg
  assert "   4 |   p[0] = undeclared_x;" in msg


def test_compiling_leaves_python_bytes_alone():
  """DEV.CUDA.compile: NVRTC writes its log and output into buffers it is given; a clean compile has a 1-byte log
  (its NUL), which once went into CPython's shared one-byte object b" " and turned every b" " of the process, the
  CUDA device's 1-byte copies included, into b"\\x00"."""
  compiles(program_cases()[0].program)
  assert bytes([32])[0] == 32 and np.array([32], np.uint8).tobytes()[0] == 32


# ---- the kernels of Tensor-level ops on small shapes

def _inputs() -> dict:
  """Small seeded inputs: float32 matrices, an image and conv weights, int32 values, class labels."""
  rng = np.random.default_rng(0)
  f = lambda *s: rng.normal(size=s).astype(np.float32)
  return dict(x=f(4, 5), y=f(5, 3), img=f(1, 2, 6, 6), w=f(3, 2, 3, 3),
              i=rng.integers(-50, 50, (4, 5)).astype(np.int32), labels=np.array([0, 2, 4, 1], np.int32))


def T(a, dtype=None) -> Tensor: return Tensor(a, device="PYTHON", dtype=dtype)


def _grads(loss, *xs: Tensor) -> tuple[Tensor, ...]:
  """The gradients of loss(*xs) with respect to each of xs (GRAD.*)."""
  return tuple(loss(*xs).gradient(*xs))


TENSOR_OPS = {
  "arith": lambda v: T(v["x"]) * 2 - T(v["x"]) / 3 + 1.5,
  "max-min-pow": lambda v: T(v["x"]).maximum(0.5).minimum(T(v["x"]) * T(v["x"])) + T(v["x"]).abs().pow(1.7),
  "exp-log": lambda v: T(v["x"]).exp() + (T(v["x"]).abs() + 1).log() + T(v["x"]).exp2() + T(v["x"]).abs().log2(),
  "trig": lambda v: T(v["x"]).sin() + T(v["x"]).cos() + T(v["x"]).tan(),
  "sqrt-rsqrt": lambda v: T(v["x"]).abs().sqrt() + (T(v["x"]).abs() + 1).rsqrt() + T(v["x"]).reciprocal(),
  "activations": lambda v: T(v["x"]).sigmoid() + T(v["x"]).tanh() + T(v["x"]).gelu() + T(v["x"]).silu() +
                           T(v["x"]).elu() + T(v["x"]).softplus() + T(v["x"]).relu6() + T(v["x"]).leaky_relu(),
  "rounding": lambda v: T(v["x"]).floor() + T(v["x"]).ceil() + T(v["x"]).round() + T(v["x"]).trunc() +
                        T(v["x"]).sign(),
  "nan-inf-where": lambda v: (T(v["x"]).isnan().logical_not() & (T(v["x"]) < 0.5)).where(T(v["x"]), 0.0) +
                             T(v["x"]).isinf().where(1.0, 2.0),
  "reductions": lambda v: (T(v["x"]).sum(1) + T(v["x"]).max(1) + T(v["x"]).min(1) + T(v["x"]).mean(1) +
                           T(v["x"]).prod(1), T(v["x"]).var(0) + T(v["x"]).std(0)),
  "arg-any-all": lambda v: (T(v["x"]).argmax(1), T(v["x"]).argmin(0), (T(v["x"]) > 0).any(1), (T(v["x"]) > 0).all(0)),
  "softmax": lambda v: (T(v["x"]).softmax(1), T(v["x"]).log_softmax(0), T(v["x"]).logsumexp(1)),
  "cumsum": lambda v: T(v["x"]).cumsum(1),
  "matmul": lambda v: T(v["x"]) @ T(v["y"]),
  "conv-pool": lambda v: (T(v["img"]).conv2d(T(v["w"]), padding=1).relu().max_pool2d(),
                          T(v["img"]).avg_pool2d()),
  "movement": lambda v: T(v["x"]).permute(1, 0).flip(0).pad(((1, 0), (0, 2))).shrink(((1, 4), (0, 4))) +
                        T(v["x"])[:, :3].T.expand(3, 4).contiguous().reshape(3, 4),
  "cat-stack-repeat": lambda v: (T(v["x"]).cat(T(v["x"]) * 2, dim=0), Tensor.stack(T(v["x"]), T(v["x"]) + 1),
                                 T(v["x"]).repeat(2, 1)),
  "losses": lambda v: (T(v["x"]).cross_entropy(T(v["labels"])), T(v["x"]).layernorm(),
                       T(v["labels"]).one_hot(5)),
  "int-ops": lambda v: T(v["i"]) // 7 + T(v["i"]) % 5 + (T(v["i"]) & 12) + (T(v["i"]) | 3) + (T(v["i"]) ^ 5) +
                       (T(v["i"]) << 2) + (T(v["i"]) >> 1) + T(v["i"]) * T(v["i"]) - T(v["i"]).maximum(3),
  "small-ints": lambda v: (T(v["i"], dtypes.uint8) * 3 + 7, T(v["i"], dtypes.int8) // 3, T(v["i"], dtypes.int16) % 9,
                           T(v["i"], dtypes.uint16) >> 3),
  "int64": lambda v: (T(v["i"], dtypes.int64) * 1_000_000_007 + T(v["i"], dtypes.int64) // 3).sum(),
  "uint32-uint64": lambda v: (T(v["i"], dtypes.uint32) * 3 - 1, T(v["i"], dtypes.uint64) // 7),
  "float16": lambda v: ((T(v["x"]).half() * 3 + 1).exp().sqrt(), T(v["x"]).half().sum(), T(v["x"]).half().softmax()),
  "bfloat16": lambda v: ((T(v["x"]).cast(dtypes.bfloat16) * 3 + 1).log2(), T(v["x"]).cast(dtypes.bfloat16).max(0)),
  "float64": lambda v: (T(v["x"]).double().exp().sum(0), T(v["x"]).double() @ T(v["y"]).double()),
  "casts": lambda v: tuple(T(v["x"]).cast(d) for d in dtypes.all()) + tuple(T(v["i"]).cast(d) for d in dtypes.all()),
  "bitcasts": lambda v: (T(v["x"]).bitcast(dtypes.int32), T(v["i"]).bitcast(dtypes.float32),
                         T(v["x"]).half().bitcast(dtypes.uint16)),
  "bool": lambda v: ((T(v["x"]) > 0) & (T(v["i"]) < 3), (T(v["x"]) > 0).logical_not().where(T(v["x"]), T(v["i"]))),
  "creation": lambda v: (Tensor.arange(10, device="PYTHON") * 2, Tensor.eye(4, device="PYTHON"),
                         Tensor.linspace(0, 1, 7, device="PYTHON"), Tensor.full((2, 3), 7, device="PYTHON")),
  "random": lambda v: (Tensor.rand(3, 4, device="PYTHON"), Tensor.randn(5, device="PYTHON")),
  "gradient": lambda v: _grads(lambda x, y: (x @ y).relu().sum(), T(v["x"]), T(v["y"])),
  "conv-gradient": lambda v: _grads(lambda a, w: a.conv2d(w).tanh().mean(), T(v["img"]), T(v["w"])),
}


def tensor_programs(make) -> list[LinearProgram]:
  """The linear programs of the kernels that realizing `make(inputs)` runs, scheduled on the PYTHON device so no GPU
  is needed: the plain lowering (NOOPT=1: lower, verify, linearize) and, where the optimisation pass exists, the
  program with the options a CUDA device gets by default."""
  out = make(_inputs())
  ts = out if isinstance(out, tuple) else (out,)
  progs = []
  for k in ts[0].schedule(*ts[1:]):
    sink, n, _ = lower(k.arg.ast)
    verify(sink)
    progs.append(LinearProgram(k.arg.name, tuple(linearize(sink)), (n, 1, 1), (1, 1, 1)))
    if heuristic is not None and (opts := heuristic(k.arg.ast, "CUDA")):
      progs.append(build_program(f"{k.arg.name}_opt", k.arg.ast, opts)[0])
  return progs


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_tensor_kernels_compile(name):
  progs = tensor_programs(TENSOR_OPS[name])
  assert progs, f"{name} scheduled no kernel"
  for prog in progs: compiles(prog)
