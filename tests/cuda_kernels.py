"""The representative set of CUDA kernels that CI compiles without a GPU (DEV.CUDA.compile): the one-op kernels of
every ALU op and every conversion for every dtype (tests/backend_checks.py), the hand-built programs (local memory,
BARRIER, IF, gates, 3-D grids), and the kernels of Tensor-level ops, gradients included, on small shapes, scheduled
on the PYTHON device and lowered and linearized as refimpl/engine/realize.py does. tests/test_cuda_compile.py
compiles them with NVRTC (cuda-python), tests/test_cuda_pycuda.py with nvcc through pycuda."""
from __future__ import annotations

import numpy as np

from refimpl import Tensor
from refimpl.codegen import linearize, lower
from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.uop.verify import verify
from tests.backend_checks import alu_program, convert_program, program_cases

try:   # the optimisation pass (EXEC.OPT.default): a CUDA device compiles each kernel with the heuristic's work-groups
  from refimpl.codegen.opt import heuristic
  from refimpl.codegen.search import build_program
except ImportError:   # a tree without the optimisation pass compiles the plain lowering only
  heuristic = build_program = None

RESERVED_NAMES = ("local", "float", "sin", "max_f32", "3d", "a-b")   # kernel names CUDA would not accept as written


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


def representative_set() -> dict[str, LinearProgram]:
  """Every kernel of the set by a readable id: one-op and conversion kernels per dtype, the hand-built programs,
  a hand-built program renamed to each reserved name, and each Tensor-level op's kernels."""
  out: dict[str, LinearProgram] = {}
  for dt in dtypes.all():
    out[f"alu-{dt.name}"] = alu_program(dt)[0]
    out[f"convert-{dt.name}"] = convert_program(dt)[0]
  for case in program_cases(): out[f"case-{case.name}"] = case.program
  base = program_cases()[0].program
  for name in RESERVED_NAMES: out[f"name-{name}"] = LinearProgram(name, base.uops, base.global_size, base.local_size)
  for op, make in TENSOR_OPS.items():
    for i, prog in enumerate(tensor_programs(make)): out[f"tensor-{op}-{i}"] = prog
  return out
