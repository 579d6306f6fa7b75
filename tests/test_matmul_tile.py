"""Large matmuls on every device: the CPU's panel copies of both operands (EXEC.SCHED.pack), the 8 x 8 tile of a long
sum (EXEC.OPT.default) and strips of output columns (EXEC.OPT.strip) change no bit. PYTHON runs the plain lowering,
CL (PoCL, a CPU) the tile and strips without panels, the CPU all three; all three agree bit for bit and with NOOPT=1
(EXEC.OPT.exact), for float16, float32, float64 and int32, batched, transposed and with sizes no tile divides."""
import os
import shutil

import numpy as np
import pytest

from refimpl import Tensor
from refimpl.codegen import search
from refimpl.codegen.opt import OptOps
from refimpl.engine import realize
from tests.backend_checks import needs_cl

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="DEV.COMPILE: no C compiler ($CC or cc): the CPU cannot compile")
_plain: dict[str, np.ndarray] = {}


def data(seed: int, shape, dt) -> np.ndarray:
  """Values of very different magnitudes, so that summing them in another order changes the float result."""
  rng = np.random.default_rng(seed)
  if np.issubdtype(dt, np.integer): return rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(dt)
  big = 2 if dt == np.float16 else 6
  return (rng.standard_normal(shape) * 10.0 ** rng.integers(1 - big, big, shape)).astype(dt)


# name -> (a as stored, b as stored, read a transposed, read b transposed, dtype)
CASES = {
  "square": ((16, 512), (512, 520), False, False, np.float32),
  "tails": ((37, 601), (601, 523), False, False, np.float32),   # no 8 divides M, K or N: clamped lanes, no panels
  "batched": ((2, 16, 512), (2, 512, 264), False, False, np.float32),
  "transposed": ((512, 24), (264, 512), True, True, np.float32),
  "float64": ((16, 300), (300, 520), False, False, np.float64),
  "int32": ((16, 300), (300, 520), False, False, np.int32),      # wrapping integer sums (OP.ADD.wrap)
  "float16": ((16, 300), (300, 520), False, False, np.float16),  # products summed in float32 (DT.SUM)
}


def matmul(case: str, device: str, monkeypatch, noopt: bool = False) -> tuple[np.ndarray, list]:
  """(the result of the case on `device`, the option lists its kernels were compiled with)."""
  sa, sb, ta, tb, dt = CASES[case]
  monkeypatch.setenv("NOOPT", "1" if noopt else "")
  chosen = []
  real = search.choose_opts
  monkeypatch.setattr(realize, "choose_opts", lambda d, ast: chosen.append(real(d, ast)) or chosen[-1])
  x, y = Tensor(data(0, sa, dt), device=device), Tensor(data(1, sb, dt), device=device)
  out = ((x.transpose(-1, -2) if ta else x) @ (y.transpose(-1, -2) if tb else y)).numpy()
  return out, chosen


@pytest.mark.parametrize("device", [pytest.param("CPU", marks=needs_cc), pytest.param("CL", marks=needs_cl)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_devices_agree_bit_for_bit(case, device, monkeypatch):
  """EXEC.OPT.exact, EXEC.SCHED.pack: each compiled device's default kernels give the bits of PYTHON's plain lowering
  and of its own NOOPT=1, and use the 8 x 8 tile (and on the CPU the panels) where the case allows; "square" (B of
  1 MiB) runs in strips of columns (EXEC.OPT.strip)."""
  if case not in _plain: _plain[case] = matmul(case, "PYTHON", monkeypatch)[0]
  want = _plain[case]
  got, chosen = matmul(case, device, monkeypatch)
  assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (case, device, chosen)
  tiles = [[o.amount for o in opts if o.op is OptOps.UPCAST] for opts in chosen if opts]
  assert [8, 8] in tiles, (device, chosen)
  if device == "CPU" and case != "tails": assert len(chosen) >= 2, chosen   # at least one panel copy
  if case == "square": assert any(o.op is OptOps.STRIP for opts in chosen for o in opts or ()), chosen
  noopt, _ = matmul(case, device, monkeypatch, noopt=True)
  assert noopt.tobytes() == want.tobytes(), (case, device)

