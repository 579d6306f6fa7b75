"""Build pycuda here, where the CUDA toolkit is installed but no driver is (DEV.CUDA.pycuda).

pycuda's extension links against the driver library, libcuda.so, which comes with the GPU driver, not with the
toolkit; the toolkit's usual link stub (lib64/stubs/libcuda.so) is missing from some installs too. So this script
writes its own link stub: every `cu*` function that cuda.h and cudaProfiler.h declare (after the preprocessor, so the
`_v2` names the headers map to), each returning CUDA_ERROR_STUB_LIBRARY, built with `cc -shared` into
BUILD/stub/libcuda.so. Its soname is libcuda.so.1, the driver's: the built extension asks for libcuda.so.1 at run
time and gets the real driver. The stub is never named libcuda.so.1 and never goes on a library path, so it cannot
shadow a driver.

Then: download pycuda's sdist (pip, PyPI), `configure.py --no-cuda-enable-curand` (the toolkit has no curand.h)
with the stub's folder as the driver's library folder, and `pip wheel` it into BUILD/wheels/cuda-X.Y/. A wheel
already there for this Python and toolkit is reused, so a second run takes seconds.

  python tools/build_pycuda.py                      # build (or find) the wheel; print its path
  python tools/build_pycuda.py --install            # and pip install it (with its dependencies) into this Python
  python tools/build_pycuda.py --build-dir DIR      # default: build/pycuda in the repository
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

VERSION = "2026.1"   # the pycuda release the `pycuda` extra of pyproject.toml names
ROOT = Path(__file__).resolve().parent.parent
STUB_ERROR = 34      # CUDA_ERROR_STUB_LIBRARY in cuda.h: what every stub function returns


def cuda_root() -> Path:
  """The toolkit: $CUDA_ROOT or $CUDA_HOME, else where the nvcc on PATH says it lives (`nvcc --dryrun` prints its
  TOP folder; the nvcc on PATH may be a wrapper script elsewhere)."""
  for var in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
    if os.environ.get(var): return Path(os.environ[var])
  nvcc = shutil.which("nvcc")
  if nvcc is None: raise SystemExit("build_pycuda: no nvcc on PATH and no $CUDA_ROOT: is the CUDA toolkit installed?")
  dry = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull], capture_output=True, text=True)
  m = re.search(r"^#\$ TOP=(.*)$", dry.stdout + dry.stderr, re.M)
  for cand in ([Path(m.group(1).strip())] if m else []) + [Path(os.path.realpath(nvcc)).parent.parent]:
    if (cand / "include" / "cuda.h").exists(): return cand.resolve()
  raise SystemExit(f"build_pycuda: found {nvcc} but no include/cuda.h beside it; set $CUDA_ROOT")


def toolkit_version(root: Path) -> str:
  """'13.0' from cuda.h's CUDA_VERSION (13000)."""
  m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (root / "include" / "cuda.h").read_text())
  if m is None: raise SystemExit(f"build_pycuda: no CUDA_VERSION in {root}/include/cuda.h")
  v = int(m.group(1))
  return f"{v // 1000}.{v % 1000 // 10}"


# the driver API headers pycuda includes (cuda.h, and cudaProfiler.h for cuProfilerStart/Stop); the GL, EGL and VDPAU
# ones need those libraries' headers and pycuda's GL support is off
HEADERS = ("cuda.h", "cudaProfiler.h")


def driver_functions(root: Path, cc: str = "cc") -> list[str]:
  """The names of the driver API functions the headers declare, as a program compiled against them links them: the
  headers are preprocessed first, so `cuMemAlloc` is already `cuMemAlloc_v2`."""
  src = "".join(f"#include <{h}>\n" for h in HEADERS)
  out = subprocess.run([cc, "-E", "-P", "-x", "c", f"-I{root / 'include'}", "-"], input=src, capture_output=True,
                       text=True, check=True).stdout
  # a declaration: `CUresult cuName(` (the return type is always CUresult; CUDAAPI expands to nothing on Linux)
  return sorted(set(re.findall(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(", out)))


def undefined_driver_symbols(extension: Path, stub: Path) -> list[str]:
  """The cu* symbols `extension` needs that `stub` does not define: a shared object may link with undefined
  symbols, so a gap in the stub shows only here (or as an ImportError at run time)."""
  def syms(path: Path, flag: str) -> set[str]:
    out = subprocess.run(["nm", "-D", flag, str(path)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.split() and ln.split()[-1].startswith("cu")}
  return sorted(syms(extension, "--undefined-only") - syms(stub, "--defined-only"))


def build_stub(root: Path, out_dir: Path, cc: str = "cc") -> Path:
  """Write and compile the link stub; return the path of out_dir/libcuda.so."""
  out_dir.mkdir(parents=True, exist_ok=True)
  names = driver_functions(root, cc)
  src = ["/* Link stub of the CUDA driver API, generated from cuda.h by tools/build_pycuda.py. Every function returns",
         f"   CUDA_ERROR_STUB_LIBRARY ({STUB_ERROR}). Never load this in place of a driver. */"]
  # error names and strings are out-parameters a caller reads after a failure (pycuda does, to raise its exception):
  # the stub answers them, so that a program loaded against it by mistake fails cleanly instead of crashing
  answers = {"cuGetErrorName": "CUDA_ERROR_STUB_LIBRARY",
             "cuGetErrorString": "CUDA driver link stub (tools/build_pycuda.py): no driver is loaded"}
  src += [f"int {n}(int e, const char **s) {{ if (s) *s = \"{answers[n]}\"; return 0; }}" if n in answers else
          f"int {n}(void) {{ return {STUB_ERROR}; }}" for n in names]
  (out_dir / "libcuda_stub.c").write_text("\n".join(src) + "\n")
  lib = out_dir / "libcuda.so"
  subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(out_dir / "libcuda_stub.c")],
                 check=True)
  return lib


def cached_wheel(wheel_dir: Path) -> Path | None:
  tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
  found = sorted(glob.glob(str(wheel_dir / f"pycuda-{VERSION}-{tag}-{tag}-*.whl")))
  return Path(found[-1]) if found else None


def build(build_dir: Path) -> Path:
  """The path of a pycuda wheel for this Python and toolkit: the cached one, else a fresh build."""
  root = cuda_root()
  wheel_dir = build_dir / "wheels" / f"cuda-{toolkit_version(root)}"
  if (whl := cached_wheel(wheel_dir)) is not None: return whl
  stub = build_stub(root, build_dir / "stub")
  sdist_dir = build_dir / "sdist"
  sdist = sdist_dir / f"pycuda-{VERSION}.tar.gz"
  if not sdist.exists():
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "pycuda",
                    f"pycuda=={VERSION}", "-d", str(sdist_dir)], check=True)
  src = build_dir / "src" / f"pycuda-{VERSION}"
  shutil.rmtree(src, ignore_errors=True)
  with tarfile.open(sdist) as tar: tar.extractall(build_dir / "src", filter="data")
  subprocess.run([sys.executable, "configure.py", f"--cuda-root={root}", "--no-cuda-enable-curand",
                  f"--cudadrv-lib-dir={stub.parent}"], cwd=src, check=True, stdout=subprocess.DEVNULL)
  # this Python's numpy and setuptools when it has setuptools (no isolated build env, nothing more to download);
  # else pip's isolated build env with pycuda's build requirements
  import importlib.util
  isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(wheel_dir), str(src)],
                 check=True)
  if (whl := cached_wheel(wheel_dir)) is None: raise SystemExit(f"build_pycuda: no wheel in {wheel_dir} after building")
  ext = next((src / "build").rglob("_driver*.so"))
  if missing := undefined_driver_symbols(ext, stub):
    whl.unlink()
    raise SystemExit(f"build_pycuda: the stub lacks driver functions pycuda uses: {missing}")
  return whl


def main(argv: list[str] | None = None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--build-dir", type=Path, default=Path(os.environ.get("PYCUDA_BUILD_DIR", ROOT / "build" / "pycuda")))
  ap.add_argument("--install", action="store_true", help="pip install the wheel into this Python")
  ap.add_argument("--stub-only", action="store_true", help="only write BUILD/stub/libcuda.so and print its path")
  args = ap.parse_args(argv)
  if args.stub_only:
    print(build_stub(cuda_root(), args.build_dir / "stub"))
    return
  whl = build(args.build_dir.resolve())
  if args.install: subprocess.run([sys.executable, "-m", "pip", "install", "-q", str(whl)], check=True)
  print(whl)


if __name__ == "__main__":
  main()
