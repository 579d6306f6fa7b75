"""The CPU device (spec/backends.md, DEV.CPU.*): C from `CRenderer`, compiled by the machine's C compiler (`$CC`,
default `cc`) into a shared object, loaded with ctypes and run on 64-byte aligned numpy buffers. Compiled objects are
cached on disk (DEV.CPU.cache); launches with many work-groups are split over a pool of threads (DEV.C.threads)."""
from __future__ import annotations

import _ctypes
import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import struct
import subprocess
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refimpl.device import Backend, Buffer, LinearProgram
from refimpl.dtype import DType, dtypes
from refimpl.runtime import compile_error
from refimpl.helpers import SpecError, getenv
from refimpl.helpers import cache_root, knob
from refimpl.renderer.cstyle import CRenderer, kernel_name
from refimpl.runtime.bounds import checking, info_words, raise_fault
from refimpl.runtime.launch import Limits, check_launch
from refimpl.uop import Ops

__all__ = ["CPUBackend", "CPUProgram", "FLAGS", "TILE_FLAGS", "flags_for"]

# DEV.C.flags: optimise, but no value-changing optimisation: no fast-math (EXEC.FLOAT.fast-math), no contraction of
# a*b+c into fma (EXEC.FLOAT.contract); ISO C11 so that gcc rounds every float expression to its type
# (-fexcess-precision=standard, EXEC.FLOAT.precision); math functions need not set errno, which nothing observes.
FLAGS = ("-shared", "-fPIC", "-O2", "-std=c11", "-ffp-contract=off", "-fno-math-errno")
# DEV.C.flags.tile: a register-tiled kernel (TILE_REGS or more accumulators, EXEC.OPT.share) is compiled with -O3 for
# the host's vector units. -O3 without its loop vectoriser, because GCC's SLP vectoriser at -O2 groups a tile's loads
# across loop steps instead of across the tile's lanes and runs packed matmul kernels 4x slower (docs/cpu-speed.md);
# -march=native because a tile of 8 float32 lanes fills one AVX register. Neither changes a value: no fast-math, no
# contraction. Small kernels keep -O2, which compiles about twice as fast.
TILE_REGS = 8
NATIVE = ("-march=native",) if platform.machine().lower() in ("x86_64", "amd64") else ()
TILE_FLAGS = ("-O3", "-fno-tree-loop-vectorize") + NATIVE
# DEV.C.flags.exp2: a kernel with float32 or 16-bit EXP2 (the helper of DEV.C.exp2) is compiled for the host's vector
# units, -O2 with -march=native: GCC's loop vectoriser then runs the helper 8 lanes at a time, and folds a sum of
# exponentials in order (a fold-left reduction), so no value changes; without -march=native the vector code (SSE2,
# 2 doubles) was slower than exp2f.
EXP2_FLAGS = ("-O2",) + NATIVE
LIMITS = Limits()            # DEV.CPU.limits: those of the PYTHON device, so a program that runs there runs here
BATCH_MAX = 16               # DEV.CPU.batch: programs per compiler run
PARALLEL_MIN = 4096          # DEV.C.threads: fewer work-groups than this run on the calling thread, unless
PARALLEL_TRIPS = 2 ** 20     # their loops run at least this many iterations in all (a handoff costs tens of us)
ALIGN = 64
_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
       dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
       dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32,
       dtypes.float64: np.float64}
_CTYPES = {dtypes.int8: ctypes.c_int8, dtypes.uint8: ctypes.c_uint8, dtypes.int16: ctypes.c_int16,
           dtypes.uint16: ctypes.c_uint16, dtypes.int32: ctypes.c_int32, dtypes.uint32: ctypes.c_uint32,
           dtypes.int64: ctypes.c_int64, dtypes.uint64: ctypes.c_uint64}
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
  """A forked child (the suite's crash-guarded helper, CONF.PROGRAM.crash) has none of its parent's pool threads: an
  inherited pool would queue work no thread ever runs, and the child would wait forever. It starts with no pools."""
  global _POOLS_LOCK
  _POOLS.clear()
  _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _pool(n: int) -> ThreadPoolExecutor:
  """A persistent pool of `n` threads (ctypes releases the GIL while a kernel runs, so they run in parallel). Its
  threads run compiled kernels only, through ctypes on raw buffer addresses: no Python object of refimpl is touched
  there (UOP.HASHCONS.threads)."""
  with _POOLS_LOCK:
    if n not in _POOLS: _POOLS[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="tinyspec-cpu")
    return _POOLS[n]


@dataclass
class CPUProgram:
  """A compiled program: the C source, the loaded function and the size parameters it takes after the buffers,
  the variables and core_start/core_end."""
  program: LinearProgram
  source: str
  fn: object
  grid_params: tuple[str, ...]
  has_barrier: bool
  checked: bool = False   # EXEC.BOUNDS.checked: the kernel takes bounds_info after its buffers
  plan: tuple = (None, None, 0)   # (the sizes check_launch returned, what launch derived, the thread count) last time

  @property
  def name(self) -> str: return self.program.name

  @functools.cached_property
  def loop_trips(self) -> int:
    """Loop iterations one work-group runs (each RANGE's size times those of the RANGEs around it, summed; a size that
    is not a constant counts as its upper bound): the work that DEV.C.threads weighs against a thread's start."""
    trips, total = [1], 0
    for u in self.program.uops:
      if u.op is Ops.RANGE:
        size = u.src[0]
        trips.append(trips[-1] * max(1, size.arg if size.op is Ops.CONST else int(size.vmax)))
        total += trips[-1]
      elif u.op is Ops.END and len(trips) > 1: trips.pop()
    return total


class CPUBackend(Backend):
  """The CPU: `CC` picks the compiler, `CPU_THREADS` the number of threads (1: no threading; default: every core),
  `CACHE_DIR` the disk cache (default `$XDG_CACHE_HOME/tinyspec` or `~/.cache/tinyspec`), `CACHE=0` turns it off.
  They are read when the backend is made. `sanitize` (default: $SANITIZE at each compile) compiles kernels that check
  every access (EXEC.BOUNDS.checked)."""
  name = "CPU"

  def __init__(self, sanitize: bool | None = None):
    self.sanitize = sanitize
    self.cc = knob("CC")   # DEV.KNOBS: validated
    self.threads = knob("CPU_THREADS") or os.cpu_count() or 1
    root = cache_root()
    self.cache_dir: Path | None = None if root is None else Path(root) / "cpu"
    self.renderer = CRenderer()
    self.compiler_runs = 0   # how many times the compiler was invoked (a disk cache hit does not count)
    self._compiler_id: str | None = None
    self._programs: dict[tuple[LinearProgram, bool], CPUProgram] = {}   # keyed by program and checking mode
    self._rendered: dict[tuple[LinearProgram, bool], str] = {}   # sources compile_many rendered, until compiled
    self._libs: dict[str, ctypes.CDLL] = {}
    self._lock = threading.RLock()   # UOP.HASHCONS.threads: compile is one get-or-make step per program

  def supports(self, dtype: DType) -> bool:
    """DEV.DTYPE: every scalar dtype (16-bit floats stored as their bits and computed in float32, DEV.C.half)."""
    return dtype.count == 1 and dtype in _NP

  # ---- memory (DEV.ALLOC, DEV.COPY): a buffer's handle is a 64-byte aligned uint8 numpy array
  def alloc(self, size: int, dtype: DType) -> Buffer:
    """DEV.ALLOC: `size` elements, 64-byte aligned, contents undefined."""
    if not self.supports(dtype): raise SpecError("DEV.DTYPE", f"CPU allocates scalar dtypes, not {dtype!r}")
    if size < 0: raise SpecError("DEV.ALLOC", f"CPU: negative size {size}")
    nbytes = size * dtype.itemsize
    try: raw = np.empty(nbytes + ALIGN, np.uint8)
    except MemoryError: raise SpecError("DEV.ALLOC", f"CPU: out of memory for {nbytes} bytes") from None
    start = -raw.ctypes.data % ALIGN
    mem = raw[start:start + nbytes].view(_Memory)
    mem.address = raw.ctypes.data + start
    return Buffer(self.name, size, dtype, mem)

  def copyin(self, buf: Buffer, data: bytes | memoryview) -> None:
    """DEV.COPY: exactly nbytes, copied once into the buffer; bool bytes must be 0 or 1."""
    src = np.frombuffer(data, np.uint8)
    if src.size != buf.nbytes: raise SpecError("DEV.COPY", f"copy in of {src.size} bytes into {buf.nbytes} bytes")
    if buf.dtype == dtypes.bool and (src > 1).any(): raise SpecError("DEV.COPY", "bool bytes must be 0 or 1")
    buf.handle[:] = src

  def copyout(self, buf: Buffer) -> bytes:
    """DEV.COPY: the buffer's bytes, copied once."""
    return buf.handle.tobytes()

  def free(self, buf: Buffer) -> None: buf.handle = None

  # ---- compiling (DEV.COMPILE)
  def compile(self, program: LinearProgram) -> CPUProgram:
    """Render C for `program` and compile it (or find it in the caches); checked when bounds.checking says so."""
    key = (program, checking(self.sanitize))
    if key in self._programs: return self._programs[key]
    with self._lock: return self._compile_locked(program, key)

  def _compile_locked(self, program: LinearProgram, key: tuple[LinearProgram, bool]) -> CPUProgram:
    if key not in self._programs:
      src = self._rendered.pop(key, None) or \
        self.renderer.render(program, **({"checked": True} if key[1] else {}))   # the plain call as before
      if getenv("DEBUG", 0) >= 3: print(src)
      lib = self.compile_c(src, program.name, flags_for(program), kernel_name(program))
      fn = getattr(lib, kernel_name(program))
      grid = tuple(self.renderer.grid_params(program))
      fn.argtypes = ([ctypes.c_void_p] * (len(program.globals) + key[1]) + [_CTYPES[v.dtype] for v in program.vars] +
                     [ctypes.c_int64] * (2 + len(grid)))
      fn.restype = None
      barrier = any(u.op is Ops.BARRIER for u in program.uops)
      self._programs[key] = CPUProgram(program, src, fn, grid, barrier, key[1])
    return self._programs[key]

  def compile_many(self, programs: list[LinearProgram]) -> None:
    """DEV.CPU.batch: compile the programs of `programs` that are not compiled yet with as few compiler runs as
    possible: those with the same flags, distinct kernel names and no object in the caches go BATCH_MAX at a time to
    one run of the compiler, each its own translation unit (so each is compiled exactly as alone), linked into one
    shared object that becomes every one's cache entry; several batches run on parallel compiler processes. A batch
    the compiler rejects is compiled one by one, so the error names its kernel. `compile` then finds each program's
    object in the caches."""
    checked = checking(self.sanitize)
    pending: dict[tuple[str, ...], dict[str, tuple[str, str, str]]] = {}   # flags -> key -> (source, name, symbol)
    with self._lock:
      for program in programs:
        if (program, checked) in self._programs: continue
        src = self.renderer.render(program, **({"checked": True} if checked else {}))
        self._rendered[(program, checked)] = src
        flags, symbol = flags_for(program), kernel_name(program)
        key = self._cache_key(src, flags)
        final = None if self.cache_dir is None else self.cache_dir / f"{key}.so"
        if key in self._libs: continue
        lib = self._load_cached(final, key, symbol) if final is not None and final.exists() else None
        if lib is not None: self._libs[key] = lib
        else: pending.setdefault(flags, {})[key] = (src, program.name, symbol)
      batches = []
      for flags, by_key in pending.items():
        units = [(key, *unit) for key, unit in by_key.items()]
        while units:   # a batch takes each kernel name once (one shared object cannot hold two functions of a name)
          batch, names = [], set()
          for u in units:
            if len(batch) < BATCH_MAX and u[3] not in names: batch.append(u); names.add(u[3])
          units = [u for u in units if u not in batch]
          batches.append((batch, flags))
      self.compiler_runs += len(batches)
      if len(batches) <= 1 or self.threads <= 1: done = [self._compile_batch(*b) for b in batches]
      else:   # separate compiler processes: they run in parallel where there are cores (the GIL is released)
        done = list(_pool(min(self.threads, len(batches))).map(lambda b: self._compile_batch(*b), batches))
      for units, obj, lib in done:
        if lib is None: continue
        for key, *_ in units:
          self._libs[key] = lib
          if self.cache_dir is not None: self._publish(self.cache_dir / f"{key}.so", key, obj)

  def compiler_id(self) -> str:
    """The compiler's resolved path and `--version` line: part of the cache key (DEV.CPU.cache)."""
    if self._compiler_id is None:
      path = shutil.which(self.cc)
      if path is None: raise SpecError("DEV.COMPILE", f"no C compiler: CC={self.cc!r} is not on PATH")
      out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
      self._compiler_id = f"{os.path.realpath(path)}\n{out.splitlines()[0] if out else ''}"
    return self._compiler_id

  def compile_c(self, src: str, name: str = "kernel", flags: tuple[str, ...] = FLAGS,
                symbol: str | None = None) -> ctypes.CDLL:
    """Compile C source `src` with `flags` to a shared object and load it; a disk cache keyed by the sha256 of the
    source, the compiler, the flags and (with -march=native) the host CPU makes a second compile of the same source
    load the earlier object (DEV.CPU.cache). A cached file that is not a whole object of this key (its trailer says),
    does not load or lacks the function `symbol` is removed and compiled again, with a warning (DEV.CPU.cache.heal)."""
    key = self._cache_key(src, flags)
    if key in self._libs: return self._libs[key]
    final = None if self.cache_dir is None else self.cache_dir / f"{key}.so"
    lib = self._load_cached(final, key, symbol) if final is not None and final.exists() else None
    if lib is None: lib = self._compile(src, name, flags, key, final, symbol)
    self._libs[key] = lib
    return lib

  def _cache_key(self, src: str, flags: tuple[str, ...]) -> str:
    """DEV.CPU.cache: the sha256 of the source, the compiler, the flags and (with -march=native) the host CPU."""
    host = _host_cpu() if "-march=native" in flags else ""
    return hashlib.sha256("\0".join((CACHE_VERSION, src, self.compiler_id(), *flags, host)).encode()).hexdigest()

  def _load_cached(self, path: Path, key: str, symbol: str | None) -> ctypes.CDLL | None:
    """DEV.CPU.cache.heal: the cached object at `path` if it is whole and ours, else None after removing it."""
    try:
      why = _unsealed(path.read_bytes(), key)
      lib, why = (None, why) if why else _open(path, symbol)
    except OSError as e: lib, why = None, f"it does not load ({e})"
    if lib is not None: return lib
    warnings.warn(f"DEV.CPU.cache.heal: cached object {path} is unusable: {why}; removed, compiling again",
                  RuntimeWarning, stacklevel=4)
    path.unlink(missing_ok=True)
    return None

  def _compile(self, src: str, name: str, flags: tuple[str, ...], key: str, final: Path | None,
               symbol: str | None) -> ctypes.CDLL:
    """Run the compiler on `src` in a fresh temporary folder, load its object from there (a fresh name: the loader
    never mistakes it for an object loaded before under the cache's name), then publish it to the cache."""
    with tempfile.TemporaryDirectory(prefix="tinyspec-cc-") as tmp:
      c_file, so_file = Path(tmp) / f"{name}.c", Path(tmp) / f"{key}.so"
      c_file.write_text(src)
      self.compiler_runs += 1
      cc = shutil.which(self.cc) or self.cc
      r = subprocess.run([cc, *flags, "-pipe", "-o", str(so_file), str(c_file), "-lm"], capture_output=True, text=True)
      if r.returncode != 0: raise _compile_error(self.cc, name, src, r.returncode, r.stderr + r.stdout)
      try:
        obj = so_file.read_bytes()
        why = _elf_whole(obj)
        lib, why = (None, why) if why else _open(so_file, symbol)
      except OSError as e: lib, why = None, f"it does not load ({e})"
      if lib is None:   # DEV.CPU.compile-error: the compiler said yes, but what it wrote is no object of ours
        raise SpecError("DEV.COMPILE", f"compiler {self.cc!r} ({cc}) exited 0 compiling {name}, but its output "
                        f"{so_file} is unusable: {why}")
      if final is not None: self._publish(final, key, obj)
    return lib   # mapped: removing the temporary file is fine

  def _compile_batch(self, units: list[tuple[str, str, str, str]], flags: tuple[str, ...]):
    """DEV.CPU.batch: one compiler run for `units` ((key, source, name, symbol), distinct symbols) into one shared
    object: (units, the object's bytes, the loaded library), the library None on any failure, which leaves the units
    to `compile` (it compiles them one at a time and reports a compile error against its own kernel). Touches no
    state of the backend, so batches can run on several threads."""
    with tempfile.TemporaryDirectory(prefix="tinyspec-cc-") as tmp:
      files = []
      for i, (_, src, name, _) in enumerate(units):
        files.append(Path(tmp) / f"{i}_{name}.c")
        files[-1].write_text(src)
      so_file = Path(tmp) / f"batch-{units[0][0]}.so"
      cc = shutil.which(self.cc) or self.cc
      r = subprocess.run([cc, *flags, "-pipe", "-o", str(so_file), *map(str, files), "-lm"], capture_output=True,
                         text=True)
      if r.returncode != 0: return units, b"", None
      try:
        obj = so_file.read_bytes()
        if _elf_whole(obj): return units, b"", None
        lib = ctypes.CDLL(str(so_file))
      except OSError: return units, b"", None
      return units, obj, lib if all(hasattr(lib, symbol) for *_, symbol in units) else None

  def _publish(self, final: Path, key: str, obj: bytes) -> None:
    """Write the sealed object under a temporary name and rename it (atomic: a concurrent reader sees the whole
    object or none, DEV.CPU.cache)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp_final = final.parent / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp_final.write_bytes(_sealed(obj, key))
    os.replace(tmp_final, final)

  # ---- running (DEV.LAUNCH)
  def launch(self, compiled: CPUProgram, bufs: list[Buffer], vals: dict[str, int] | None = None,
             global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None) -> None:
    """DEV.LAUNCH: every check before anything runs (runtime/launch.py); an empty grid runs nothing
    (EXEC.GRID.empty); many work-groups are split into contiguous ranges run by a thread each (DEV.C.threads).
    The call returns when the kernel has finished, so DEV.SYNC has nothing to wait for."""
    if isinstance(compiled, LinearProgram): compiled = self.compile(compiled)
    p, vals = compiled.program, dict(vals or {})
    sizes = check_launch(self, p, bufs, vals, global_size, local_size, LIMITS)
    gsz, lsz = sizes
    if 0 in gsz or 0 in lsz: return
    if compiled.has_barrier and math.prod(lsz) > 1:
      raise SpecError("DEV.CPU.workgroup", f"{p.name}: the CPU runs the threads of a work-group one after another, "
                      f"so it cannot run a BARRIER in work-groups of {math.prod(lsz)} threads (local size {lsz})")
    for b in bufs:
      if not isinstance(b.handle, np.ndarray): raise SpecError("EXEC.PROGRAM.params", f"{p.name}: buffer not on CPU")
    info = info_words(bufs) if compiled.checked else None   # EXEC.BOUNDS.checked: sizes in, the first fault out
    head = [_address(b.handle) for b in bufs] + ([info.ctypes.data] if info is not None else []) + \
      [vals[v.arg[0]] for v in p.vars]
    # the sizes a program's own launch checked are one object, so what follows from them and the thread count is
    # derived once
    if compiled.plan[0] is not sizes or compiled.plan[2] != self.threads:
      sizes_of = {"gsize0": gsz[0], "gsize1": gsz[1], "lsize0": lsz[0], "lsize1": lsz[1], "lsize2": lsz[2]}
      total = math.prod(gsz)
      n = min(self.threads, total)
      alone = n <= 1 or (total < PARALLEL_MIN and total * compiled.loop_trips < PARALLEL_TRIPS)
      compiled.plan = (sizes, (tuple(sizes_of[k] for k in compiled.grid_params), total,
                               None if alone else [total * i // n for i in range(n + 1)]), self.threads)
    tail, total, cuts = compiled.plan[1]
    if cuts is None: compiled.fn(*head, 0, total, *tail)
    else:
      # work-groups are independent (EXEC.BARRIER.scope), so any split gives the same buffers (EXEC.ASIF); the calling
      # thread runs the first range itself: one handoff fewer, which on a busy machine costs tens of microseconds
      pool = _pool(len(cuts) - 2)
      futures = [pool.submit(compiled.fn, *head, lo, hi, *tail) for lo, hi in zip(cuts[1:], cuts[2:])]
      compiled.fn(*head, cuts[0], cuts[1], *tail)
      for f in futures: f.result()
    if info is not None: raise_fault(p, info)


class _Memory(np.ndarray):
  """A CPU buffer's bytes, with their address found once at allocation: `ndarray.ctypes.data` builds a ctypes object
  on every call, a cost each launch paid per buffer (issue 19, item 4)."""
  address: int


def _address(handle: np.ndarray) -> int:
  """The address of a buffer's first byte: the one alloc noted, else (a handle made elsewhere) numpy's."""
  address = getattr(handle, "address", None)   # a view of a _Memory is a _Memory without it
  return handle.ctypes.data if address is None else address


def flags_for(program: LinearProgram) -> tuple[str, ...]:
  """DEV.C.flags / DEV.C.flags.tile / DEV.C.flags.exp2: the compiler flags for `program`: FLAGS, with TILE_FLAGS in
  place of -O2 when the program keeps TILE_REGS or more register accumulators (a tile of outputs per thread), else
  EXP2_FLAGS when it has an EXP2 of float32 or a 16-bit float."""
  if sum(u.op is Ops.DEFINE_REG for u in program.uops) >= TILE_REGS: opt = TILE_FLAGS
  elif any(u.op is Ops.EXP2 and u.dtype != dtypes.float64 for u in program.uops): opt = EXP2_FLAGS
  else: return FLAGS
  return tuple(x for f in FLAGS for x in (opt if f == "-O2" else (f,)))


CACHE_VERSION = "2"   # DEV.CPU.cache: since version 2 a cached object ends with its TRAILER
TRAILER = b"tinyspec-cpu-object\0"   # then the 64 hex digits of the key, then the sha256 of the object before it


def _sealed(obj: bytes, key: str) -> bytes:
  """DEV.CPU.cache.heal: the bytes a cache file holds: the object, TRAILER, the key, the object's sha256 (the loader
  maps an object by its headers, so bytes after it are never read)."""
  return obj + TRAILER + key.encode() + hashlib.sha256(obj).digest()


def _unsealed(data: bytes, key: str) -> str:
  """Why the cache file `data` is not a whole object of `key` ("" if it is)."""
  n = len(TRAILER) + 64 + 32
  if len(data) < n or data[-n:-96] != TRAILER: return "it is not a sealed object (truncated, or not written by us)"
  obj, found, digest = data[:-n], data[-96:-32].decode(errors="replace"), data[-32:]
  if found != key: return f"it is the object of key {found[:16]}..., not {key[:16]}..."
  if hashlib.sha256(obj).digest() != digest: return "its bytes do not match its checksum (corrupted)"
  return _elf_whole(obj)


def _elf_whole(obj: bytes) -> str:
  """Why `obj` is not a whole ELF object ("" if it is): the loader maps the segments its program headers name, and a
  segment past the end of the file would be a SIGBUS when touched, so that is checked before loading."""
  if obj[:4] != b"\x7fELF" or obj[4] not in (1, 2) or obj[5] not in (1, 2): return "it is not an ELF object"
  wide, end = obj[4] == 2, "<" if obj[5] == 1 else ">"
  try:
    phoff, phentsize, phnum = (struct.unpack_from(end + "Q", obj, 32)[0], *struct.unpack_from(end + "HH", obj, 54)) \
      if wide else (struct.unpack_from(end + "I", obj, 28)[0], *struct.unpack_from(end + "HH", obj, 42))
    for k in range(phnum):
      at = phoff + k * phentsize
      off, size = struct.unpack_from(end + "QxxxxxxxxxxxxxxxxQ", obj, at + 8) if wide else \
        struct.unpack_from(end + "IxxxxxxxxI", obj, at + 4)
      if off + size > len(obj): return f"a segment ends at byte {off + size}, past the object's {len(obj)} bytes"
  except struct.error: return "its headers are cut off"
  return ""


def _open(path: Path, symbol: str | None) -> tuple[ctypes.CDLL | None, str]:
  """Load the checked object at `path`: (the library, "") if it has `symbol`, else (None, why), unloaded. The
  loader's OSError goes to the caller."""
  lib = ctypes.CDLL(str(path))
  if symbol is None or hasattr(lib, symbol): return lib, ""
  _ctypes.dlclose(lib._handle)   # so that the name can be loaded afresh
  return None, f"it has no function {symbol}"


def _host_cpu() -> str:
  """What -march=native compiles for: the CPU's model and feature flags (part of the cache key, DEV.CPU.cache, so
  that a cache directory shared between machines never hands one machine another's instructions)."""
  try:
    with open("/proc/cpuinfo") as f:
      lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
    return "".join(sorted(set(lines)))
  except OSError: return platform.processor() or platform.machine()


def _compile_error(cc: str, name: str, src: str, rc: int, log: str) -> SpecError:
  """DEV.CPU.compile-error: gcc/clang name the line as `file.c:LINE:COL: error`."""
  return compile_error(f"{cc} (exit status {rc})", name, src, log,
                       r"\.c:(\d+):(?:\d+:)? *(?:fatal )?error|\.c:(\d+):")
