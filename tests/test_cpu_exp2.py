"""DEV.C.exp2: the CPU's EXP2 helper for float32 and the 16-bit floats meets ACC.EXP2.f32 (.f16, .bf16) and gives the
exact values of OP.EXP2 (special, overflow, underflow, exact powers of two).

float32 through tests/exp2_check.c, which runs the helper's own source (refimpl/renderer/exp2.py) compiled with a
kernel's flags and checks every result against glibc's double exp2 (the acceptance condition is derived there): 1M
random inputs and the special ones' neighbourhoods here, all 2**32 bit patterns in the slow test. Measured on this
machine (glibc 2.36, gcc 12, AVX-512, -O2 -march=native): all 2**32 accepted, 0 results differ from
(float)exp2((double)x) (the reference value of OP.LIBM), largest error 0.5 ulp; glibc's exp2f on the same check:
168364 differ, 0.5016 ulp. float16 and bfloat16: every bit pattern through a rendered CPU kernel, against the
bracketing values of the format computed here in double, and against the PYTHON device's reference values."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from refimpl import Tensor, dtypes
from refimpl.dtype import DType
from refimpl.renderer.cstyle import CRenderer
from refimpl.renderer.exp2 import exp2_f32_source
from refimpl.runtime import ops_cpu
from tests.backend_checks import alu_program

CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="DEV.COMPILE: no C compiler to build tests/exp2_check.c")
# the flags of a kernel with EXP2 (DEV.C.flags.exp2), of a tiled one (DEV.C.flags.tile), and scalar code
KERNEL = tuple(f for f in ops_cpu.FLAGS if f not in ("-shared", "-fPIC", "-O2")) + ops_cpu.EXP2_FLAGS
TILE = tuple(f for f in ops_cpu.FLAGS if f not in ("-shared", "-fPIC", "-O2")) + ops_cpu.TILE_FLAGS
SCALAR = ("-O0", "-std=c11", "-ffp-contract=off")


def build(tmp: Path, flags: tuple[str, ...], name: str) -> Path:
  (tmp / "exp2_f32.h").write_text("#include <stdint.h>\n#include <string.h>\n" + exp2_f32_source() + "\n")
  src = tmp / "exp2_check.c"
  shutil.copy(Path(__file__).with_name("exp2_check.c"), src)
  exe = tmp / name
  subprocess.run([CC, *flags, "-o", str(exe), str(src), "-lm"], check=True, capture_output=True, text=True)
  return exe


def run(exe: Path, *args: str) -> dict[str, float]:
  out = subprocess.run([str(exe), *args], capture_output=True, text=True)
  last = out.stdout.strip().splitlines()[-1]
  stats = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+|[0-9a-f]{16})", last) if k != "hash"}
  stats["hash"] = re.search(r"hash ([0-9a-f]{16})", last).group(1)
  assert out.returncode == 0 and stats["rejected"] == 0, out.stdout[-3000:]
  return stats


@needs_cc
def test_exp2_f32_sample(tmp_path):
  """1M random inputs (half any bit pattern, half in [-152, 130)) and the neighbourhoods of the special inputs: every
  result brackets 2**x and every special one is exact; the scalar, loop-vectorised and tiled builds give the same
  bits (EXEC.OPT.exact: a NOOPT kernel and a tiled one compile with different flags)."""
  stats = [run(build(tmp_path, flags, name), "sample", "1000000", "7")
           for name, flags in (("kernel", KERNEL), ("tile", TILE), ("scalar", SCALAR))]
  assert stats[0]["inputs"] > 1_000_000 and stats[0]["special"] > 200_000
  assert stats[0]["max_ulps"] <= 0.5 + 2 ** -20
  assert stats[0]["hash"] == stats[1]["hash"] == stats[2]["hash"]


@needs_cc
def test_exp2_check_rejects_a_wrong_helper(tmp_path):
  """The checker can fail: a helper one float off (for x in [0.25, 0.5)) and one that flushes subnormal results to
  zero are both rejected."""
  good = exp2_f32_source()
  for bad in (good.replace("memcpy(&r, &rb, 4); return r;", "memcpy(&r, &rb, 4); return x >= 0.25f && x < 0.5f ? "
                           "nextafterf(r, INFINITY) : r;"),
              good.replace("memcpy(&r, &rb, 4); return r;", "memcpy(&r, &rb, 4); return r < 0x1p-126f ? 0.0f : r;")):
    assert bad != good
    (tmp_path / "exp2_f32.h").write_text("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n" + bad + "\n")
    shutil.copy(Path(__file__).with_name("exp2_check.c"), tmp_path / "exp2_check.c")
    subprocess.run([CC, *SCALAR, "-o", str(tmp_path / "bad"), str(tmp_path / "exp2_check.c"), "-lm"], check=True)
    out = subprocess.run([str(tmp_path / "bad"), "sample", "100000", "3"], capture_output=True, text=True)
    assert out.returncode == 1 and "rejected 0 " not in out.stdout


@pytest.mark.slow
@needs_cc
def test_exp2_f32_exhaustive(tmp_path):
  """All 2**32 float32 bit patterns (about 70 s of one core): ACC.EXP2.f32 and OP.EXP2's exact values hold for
  every input. On this machine the results are also the reference values of OP.LIBM for every input (differ 0)."""
  stats = run(build(tmp_path, KERNEL, "kernel"), "all")
  assert stats["inputs"] == 2 ** 32
  assert stats["max_ulps"] <= 0.5 + 2 ** -20


def brackets(v: float, mant: int, emin: int, fmax: float) -> tuple[float, float]:
  """The two values of a float format (`mant` significand bits, least normal exponent `emin`, largest finite
  `fmax`) around v > 0 (the same value twice when v is one), with +inf above fmax; exact in double."""
  q = math.ldexp(1.0, max(math.frexp(v)[1] - 1, emin) - (mant - 1))
  lo = math.floor(v / q) * q
  hi = lo if lo == v else lo + q
  return lo, (math.inf if hi > fmax else hi)


# significand bits, least normal exponent, largest finite value
FORMATS = {dtypes.float16: (11, -14, 65504.0), dtypes.bfloat16: (8, -126, float.fromhex("0x1.fep127"))}


def as_float(bits: np.ndarray, dt: DType) -> np.ndarray:
  """The float64 values of 16-bit float bits (a signalling NaN widens to a NaN: numpy's warning is expected)."""
  with np.errstate(invalid="ignore"):
    if dt == dtypes.float16: return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=repr)
def test_exp2_half_exhaustive(dt):
  """Every float16 / bfloat16 input through a CPU kernel (exp2_f32, then rounded, DEV.C.half): one of the two values
  of the format around 2**x (ACC.EXP2.f16/.bf16; libm's double exp2 is too close to 2**x for a 16-bit value to lie
  between them except where 2**x is one, which the first branch below requires exactly), NaN for NaN, and the
  reference value of the PYTHON device for every other input but one."""
  mant, emin, fmax = FORMATS[dt]
  bits = np.arange(65536, dtype=np.uint16)
  got = Tensor(bits, device="CPU").bitcast(dt).exp2().bitcast(dtypes.uint16).numpy()
  ref = Tensor(bits, device="PYTHON").bitcast(dt).exp2().bitcast(dtypes.uint16).numpy()
  xs, rs = as_float(bits, dt), as_float(got, dt)
  bad = []
  for x, r, b in zip(xs.tolist(), rs.tolist(), bits.tolist()):
    if x != x:
      if r == r: bad.append((b, r))
      continue
    t = math.inf if x >= 1024 else math.exp2(x)
    lo, hi = brackets(t, mant, emin, fmax) if 0 < t < math.inf else (t, t)
    if math.isinf(x) or x.is_integer():   # 2**x exact: its correct rounding (the one tie, half the least subnormal: 0)
      ok = r == (math.inf if t > fmax else lo if t - lo <= hi - t else hi)
    else: ok = r in (lo, hi)
    if not ok: bad.append((b, x, r, lo, hi))
  assert not bad, bad[:10]
  # the reference values, NaNs aside (each device's NaN bits are its own, OP.BITCAST.nan), but for one float16 input:
  # x = 0x1.714p-11 (bits 0x11c5), 2**x = 0x1.00200039fp+0 rounds to the float32 0x1.002p+0, the float16 midpoint
  # 1 + 2**-11, which rounds to even (1.0) where the reference rounds once, up (libm's exp2f did the same)
  differ = np.nonzero((got != ref) & ~np.isnan(xs))[0]
  assert differ.tolist() == ([0x11c5] if dt == dtypes.float16 else [])


def test_exp2_rendering():
  """The C renderer calls exp2_f32 for float32 and 16-bit EXP2 and libm's exp2 for float64; a kernel with it gets
  DEV.C.flags.exp2; OpenCL C keeps its built-in exp2."""
  from refimpl.renderer.opencl import OpenCLRenderer
  from refimpl.uop import Ops
  for dt in (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64):
    prog = alu_program(dt)[0]
    src = CRenderer().render(prog)
    assert ("exp2_f32(" in src) == (dt != dtypes.float64)
    assert ("exp2(" in src.replace("exp2_f32(", "")) == (dt == dtypes.float64)
    assert "exp2_f32" not in OpenCLRenderer().render(prog)
    has = any(u.op is Ops.EXP2 for u in prog.uops)
    assert has and (ops_cpu.EXP2_FLAGS[-1] in ops_cpu.flags_for(prog)) == (dt != dtypes.float64 and
                                                                           bool(ops_cpu.NATIVE))
