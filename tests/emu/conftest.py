"""Fixtures for the emu tests: `run` launches a LinearProgram on a fresh PYTHON device and copies every buffer out."""
import numpy as np
import pytest

from emu import valu
from emu.device import PythonBackend
from refimpl.dtype import dtypes

_BY_NP = {np.dtype(t): d for d, t in valu.NP.items() if d != dtypes.bfloat16}


def run_program(prog, *args, vals=None, sanitize=True, global_size=None, local_size=None):
  """args: numpy arrays or (dtype, array) pairs (copied in), or (dtype, size) pairs (fresh, unwritten buffers).
  Returns the buffers' contents after the launch, as numpy arrays of the storage dtype (bfloat16 as uint16 bits)."""
  dev = PythonBackend(sanitize=sanitize)
  bufs = []
  for a in args:
    if isinstance(a, np.ndarray): a = (_BY_NP[a.dtype], a)
    if isinstance(a[1], np.ndarray):
      b = dev.alloc(a[1].size, a[0]); dev.copyin(b, a[1].tobytes())
    else: b = dev.alloc(a[1], a[0])
    bufs.append(b)
  dev.launch(dev.compile(prog), bufs, vals, global_size, local_size)
  return [np.frombuffer(dev.copyout(b), valu.NP[b.dtype]).copy() for b in bufs]


@pytest.fixture
def run(): return run_program
