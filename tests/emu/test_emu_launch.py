"""Errors before anything runs: malformed programs (EXEC.PROGRAM.*, DEV.COMPILE), bad launches (EXEC.PROGRAM.params,
EXEC.GRID.match, DEV.LAUNCH.limits) and the copy contract (DEV.COPY)."""
import pytest

from emu.build import Builder
from emu.device import PythonBackend
from refimpl.device import LinearProgram
from refimpl.dtype import dtypes
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

f32 = dtypes.float32


def copy_kernel(n_var: bool = False, lsz: int = 4):
  b = Builder("copy")
  out, inp = b.glob(0, f32, 8), b.glob(1, f32, 8)
  g = b.special("gidx0", b.var("n", 1, 4) if n_var else 2)
  l = b.special("lidx0", lsz)
  i = b.add(g * lsz + l)
  b.store(out, i, b.load(inp, i))
  return b.program((2, 1, 1), (lsz, 1, 1))


def launch(prog, bufs=None, **kw):
  dev = PythonBackend()
  bufs = bufs if bufs is not None else [dev.alloc(8, f32), dev.alloc(8, f32)]
  for b in bufs: dev.copyin(b, bytes(b.nbytes))
  dev.launch(dev.compile(prog), bufs, **kw)


@pytest.mark.parametrize("case,clause", [
  ("too few buffers", "EXEC.PROGRAM.params"), ("wrong dtype", "EXEC.PROGRAM.params"),
  ("wrong size", "EXEC.PROGRAM.params"), ("aliased", "EXEC.PROGRAM.params"),
  ("special mismatch", "EXEC.GRID.match"), ("local over limit", "DEV.LAUNCH.limits"),
  ("var out of range", "EXEC.PROGRAM.params"), ("missing var", "EXEC.PROGRAM.params"),
  ("four dims", "EXEC.GRID")])
def test_launch_errors(case, clause):
  dev = PythonBackend()
  a, b = dev.alloc(8, f32), dev.alloc(8, f32)
  kw, prog, bufs = {}, copy_kernel(), [a, b]
  if case == "too few buffers": bufs = [a]
  if case == "wrong dtype": bufs = [a, dev.alloc(8, dtypes.int32)]
  if case == "wrong size": bufs = [a, dev.alloc(9, f32)]
  if case == "aliased": bufs = [a, a]
  if case == "special mismatch": kw = {"global_size": (3, 1, 1)}
  if case == "local over limit": prog, kw = copy_kernel(lsz=2048), {}
  if case == "var out of range": prog, kw = copy_kernel(n_var=True), {"vals": {"n": 5}}
  if case == "missing var": prog = copy_kernel(n_var=True)
  if case == "four dims": kw = {"global_size": (2, 1, 1, 1)}
  with pytest.raises(SpecError) as e: launch(prog, bufs, **kw)
  assert e.value.clause == clause, str(e.value)


def test_threads_per_group_limit_names_value():
  b = Builder("wide")
  b.glob(0, f32, 1)
  b.special("lidx0", 64); b.special("lidx1", 32)
  with pytest.raises(SpecError) as e: launch(b.program((1, 1, 1), (64, 32, 1)), [PythonBackend().alloc(1, f32)])
  assert e.value.clause == "DEV.LAUNCH.limits" and "2048" in str(e.value) and "1024" in str(e.value)


def test_var_launch_ok():
  launch(copy_kernel(n_var=True), vals={"n": 2})


@pytest.mark.parametrize("case,clause", [("duplicate", "EXEC.PROGRAM.order"), ("source later", "EXEC.PROGRAM.order"),
                                         ("unclosed", "EXEC.PROGRAM.nest"), ("scope", "EXEC.PROGRAM.scope"),
                                         ("slots", "EXEC.PROGRAM.params"), ("special name", "EXEC.GRID.special")])
def test_compile_errors(case, clause):
  b = Builder(case)
  out = b.glob(0 if case != "slots" else 1, f32, 4)
  if case == "special name": b.special("tid0", 4)
  r = b.range(4)
  v = b.add(r.cast(f32))
  st = b.store(out, r, v, None, r)
  uops = list(b.uops)
  if case != "unclosed": uops.append(UOp(Ops.END, dtypes.void, (st, r)))
  if case == "duplicate": uops.append(uops[-2])
  if case == "source later": uops = uops[:2] + uops[3:4] + uops[2:3] + uops[4:]
  if case == "scope": uops.append(UOp(Ops.STORE, dtypes.void, (uops[-3].src[0], v)))
  with pytest.raises(SpecError) as e: PythonBackend().compile(LinearProgram(case, tuple(uops), (1, 1, 1), (1, 1, 1)))
  assert e.value.clause == clause, str(e.value)


def test_copy_contract():
  """DEV.COPY: exact byte counts, bytes unchanged, bool bytes 0 or 1."""
  dev = PythonBackend()
  buf = dev.alloc(3, dtypes.bfloat16)
  raw = bytes([1, 2, 3, 4, 5, 6])
  dev.copyin(buf, raw)
  assert dev.copyout(buf) == raw
  with pytest.raises(SpecError) as e: dev.copyin(buf, raw + b"\0")
  assert e.value.clause == "DEV.COPY"
  with pytest.raises(SpecError) as e: dev.copyin(dev.alloc(2, dtypes.bool), bytes([0, 2]))
  assert e.value.clause == "DEV.COPY"
  assert len(dev.copyout(dev.alloc(0, f32))) == 0
