"""Generated CUDA C compiles without a GPU (DEV.CUDA.compile): NVRTC turns every kernel of a representative set into
PTX for compute_75, so broken CUDA source is caught in CI. The set: the one-op kernels of every ALU op and every
conversion for every dtype (the programs the edge-table and random tests run, tests/backend_checks.py), the
hand-built programs (local memory, BARRIER, IF, gates, 3-D grids), and the kernels of Tensor-level ops, gradients
included, on small shapes, scheduled on the PYTHON device and lowered and linearized as refimpl/engine/realize.py
does. Running them needs a GPU: bench/gpu_check.py."""
import numpy as np
import pytest

from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.renderer.cstyle import kernel_name
from refimpl.renderer.cuda import CUDARenderer
from tests.backend_checks import alu_program, convert_program, program_cases
from tests.cuda_kernels import RESERVED_NAMES, TENSOR_OPS, tensor_programs


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
  for name in RESERVED_NAMES:
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


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_tensor_kernels_compile(name):
  progs = tensor_programs(TENSOR_OPS[name])
  assert progs, f"{name} scheduled no kernel"
  for prog in progs: compiles(prog)
