"""One launch of a translated program: the threads, the memory arrays and the checked memory accesses.

All threads of the launch run in lockstep: each UOp's value is a numpy array over the threads (thread id
`t = work-group id * threads per work-group + local id`, EXEC.GRID.linear), and inside a vectorized loop also over
the iterations. The thread axis is the LAST axis and a nest's iteration axes come before it, outer loop first: a
value from outside the nest (shape (T,)) then broadcasts against the nest's values as it is, and the elementwise
index arithmetic of a nest runs with the threads as numpy's innermost loop. (With the threads first, an index that
mixes a 3-iteration loop with the threads made numpy loop 3 elements at a time: 0.4-0.6 ms per int32 add on conv2d's
147k-element indices, 20x the contiguous cost.) A value may have fewer leading axes, or size 1 on any axis, when it
is the same along them. A bool mask says which threads are executing (IF bodies, loops whose trip count differs
between threads). Lockstep is one legal execution (EXEC.ASIF); races, the only way a program could tell, are what
the sanitizer looks for (EXEC.RACE)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refimpl.dtype import DType
from emu import valu
from emu.sanitizer import RaceTracker, SanitizerError


@dataclass
class GlobalMem:
  """A global buffer's storage (Buffer.handle): `data` in storage dtype, `written` bits when sanitizing."""
  data: np.ndarray
  written: np.ndarray | None = None


class Mem:
  """One memory array as a launch sees it: `rows` copies of `size` elements (1 for global, one per work-group for
  local, one per thread for register), flattened into `data`; element i of row r is data[r * size + i]."""
  def __init__(self, space: str, label: str, dtype: DType, size: int, data: np.ndarray, rows: str,
               written: np.ndarray | None, tracker: RaceTracker | None):
    self.space, self.label, self.dtype, self.size, self.data, self.rows = space, label, dtype, size, data, rows
    self.written, self.tracker = written, tracker


@dataclass
class Addr:
  """The value of an INDEX: a memory array, an element index and an optional gate (EXEC.MEMORY.index, .gate)."""
  mem: Mem
  idx: Any
  gate: Any = None


class Launch:
  """The state of one launch (EXEC.GRID): sizes, thread ids, epochs, memory; checked loads, stores and barriers."""
  VEC_LIMIT = 1 << 22   # most elements a vectorized loop may hold per value (threads x iterations)

  def __init__(self, compiled, bufs: list, vals: dict[str, int], gsz: tuple[int, ...], lsz: tuple[int, ...],
               sanitize: bool):
    self.c, self.gsz, self.lsz, self.sanitize = compiled, gsz, lsz, sanitize
    self.tpw, self.nwg = int(np.prod(lsz)), int(np.prod(gsz))
    self.T = self.tpw * self.nwg
    self.tid = np.arange(self.T, dtype=np.int64)
    self.wg = self.tid // self.tpw
    self.epoch = np.zeros(self.nwg, np.int64)
    self.mask0 = np.ones(self.T, np.bool_)
    self.vals = vals
    self.glob = [self._global(u, b.handle) for u, b in zip(compiled.program.globals, bufs)]
    self.mem = {pos: self._scratch(pos, u) for pos, u in compiled.scratch}

  # ---- memory ----
  def _global(self, u, h: GlobalMem) -> Mem:
    tr = RaceTracker(len(h.data)) if self.sanitize else None
    return Mem("global", f"slot {u.arg}", u.dtype.base, len(h.data), h.data, "one", h.written, tr)

  def _scratch(self, pos: int, u) -> Mem:
    """DEFINE_LOCAL (a copy per work-group) or DEFINE_REG (a copy per thread), unwritten at the start
    (EXEC.UNINIT); contents are undefined, so poisoned with 0xFF bytes like fresh global memory."""
    base, local = u.dtype.base, u.dtype.addrspace == "local"
    rows = self.nwg if local else self.T
    n = rows * u.dtype.size
    shape = (n,) if base.count == 1 else (n, base.count)
    t = valu.NP[base.scalar()]
    if t is np.bool_: data = np.zeros(shape, t)
    else: data = np.full(n * base.itemsize, 0xFF, np.uint8).view(t).reshape(shape)
    written = np.zeros(n, np.bool_) if self.sanitize else None
    tr = RaceTracker(n) if self.sanitize and local else None
    label = repr(u.arg)
    return Mem("local" if local else "reg", label, base, u.dtype.size, data, "wg" if local else "tid", written, tr)

  def _rows(self, mem: Mem):
    """Which row of `mem` each thread uses: none for global memory, its work-group or itself for local or register."""
    if mem.rows == "one": return None
    return self.wg if mem.rows == "wg" else self.tid

  def _access(self, pos: int, mask, a: Addr, is_write: bool):
    """The elements one step of LOAD/STORE `pos` touches: (active mask, flat element numbers, the shape the two
    broadcast to), bounds checked (EXEC.BOUNDS, in every mode) and, when sanitizing, checked for races and
    uninitialised reads. The mask and the element numbers may have fewer or size-1 axes than the shape."""
    mem = a.mem
    eff = mask if a.gate is None else np.logical_and(mask, a.gate)   # EXEC.MEMORY.gate: gated off, no access
    idx = np.asarray(a.idx)
    shape = np.broadcast_shapes(np.shape(eff), idx.shape)
    # EXEC.BOUNDS: when every lane's index is inside, active or not (one min and max of the unbroadcast index), no
    # active one is outside; else the lanes outside must all be inactive. Those keep their index: a store writes
    # only active lanes, and a load reads with the index clipped into the array and drops the value.
    if idx.size and (idx.min() < 0 or idx.max() >= mem.size):
      bad = np.logical_and(eff, (idx < 0) | (idx >= mem.size))
      if bad.any(): raise self._out_of_bounds(pos, mem, bad, idx, is_write)
    rows = self._rows(mem)
    flat = idx if rows is None else rows * mem.size + idx.astype(np.int64)
    if self.sanitize:   # threads first: the canonical schedule runs a thread's iterations before the next thread's
      full = lambda x: np.moveaxis(np.broadcast_to(x, shape), -1, 0)
      self._sanitize(pos, mem, full(eff), full(flat).astype(np.int64), full(idx).astype(np.int64), is_write)
    return eff, flat, shape

  def _out_of_bounds(self, pos: int, mem: Mem, bad, idx, is_write: bool) -> SanitizerError:
    """The fault of the first active lane outside the array in the canonical schedule (EXEC.SANITIZER): the lowest
    thread's first iteration that has one (threads are the last axis: moved first)."""
    by_thread = np.moveaxis(bad, -1, 0)
    i = np.unravel_index(int(np.argmax(by_thread)), by_thread.shape)
    ix = int(np.moveaxis(np.broadcast_to(idx, bad.shape), -1, 0)[i])
    return self.fault("EXEC.BOUNDS", pos, int(i[0]), f"{'store to' if is_write else 'load from'} {mem.space} "
                      f"{mem.label}: index {ix} outside size {mem.size}")

  def _sanitize(self, pos, mem, eff, flat, idx, is_write) -> None:
    """eff, flat, idx: broadcast to one shape with the threads first (EXEC.SANITIZER's canonical schedule order)."""
    tids = np.broadcast_to(self.tid.reshape((self.T,) + (1,) * (eff.ndim - 1)), eff.shape)[eff]
    els, ix = flat[eff], idx[eff]
    if mem.tracker is not None:   # EXEC.RACE
      eps = self.epoch[tids // self.tpw]
      def report(i, other, opos, oep, owrite):
        kind = "EXEC.RACE.local" if mem.space == "local" else "EXEC.RACE.global"
        their = f"{'write' if owrite else 'read'} by thread {self.ids(other)} at {self.c.line(opos)}" + \
          (f", epoch {oep}" if oep >= 0 else "")
        raise self.fault(kind, pos, int(tids[i]), f"{'write' if is_write else 'read'} of {mem.space} {mem.label} "
                         f"index {int(ix[i])} (size {mem.size}), epoch {int(eps[i])}, races with the {their}")
      mem.tracker.check(els, tids, eps, self.tpw, pos, is_write, report)
    if is_write: mem.written[els] = True
    elif not mem.written[els].all():   # EXEC.UNINIT
      i = int(np.argmin(mem.written[els]))
      raise self.fault("EXEC.UNINIT", pos, int(tids[i]), f"read of unwritten {mem.space} {mem.label} index "
                       f"{int(ix[i])} (size {mem.size})")

  def load(self, pos: int, mask, a: Addr):
    """LOAD: the element's value where active, 0 of the dtype elsewhere (EXEC.MEMORY.gate)."""
    eff, flat, shape = self._access(pos, mask, a, False)
    data = a.mem.data
    # an empty buffer has no element 0 for gated-off lanes to read: all of them are off (any active lane failed the
    # bounds check above), so they read the zero of the dtype without touching memory
    if not data.shape[0]: return self._zero(a.mem, shape)
    # take, not data[flat]: 2x faster with int32 indices; clip: a gated-off lane's index may be outside the array
    v = np.take(data, flat, axis=0, mode="clip")
    if not np.all(eff):   # with every lane active (the usual case) the value keeps the index's shape
      off = np.logical_not(eff)[..., None] if a.mem.dtype.count > 1 else np.logical_not(eff)
      if np.broadcast_shapes(off.shape, v.shape) == v.shape: np.copyto(v, data.dtype.type(0), where=off)
      else: v = np.where(off, data.dtype.type(0), v)
    if a.mem.dtype.count > 1: return tuple(v[..., j] for j in range(a.mem.dtype.count))
    return v

  def _zero(self, mem: Mem, shape):
    z = np.zeros(shape + mem.data.shape[1:], mem.data.dtype)
    return tuple(z[..., j] for j in range(mem.dtype.count)) if mem.dtype.count > 1 else z

  def store(self, pos: int, mask, a: Addr, value) -> None:
    """STORE: write the value where active (EXEC.MEMORY.element: element-wise, never read-modify-write)."""
    eff, flat, shape = self._access(pos, mask, a, True)
    if not np.any(eff): return
    eff, flat = np.broadcast_to(eff, shape), np.broadcast_to(flat, shape)
    if a.mem.dtype.count > 1: value = np.stack(np.broadcast_arrays(*value), axis=-1)
    v = np.broadcast_to(np.asarray(value, a.mem.data.dtype), shape + a.mem.data.shape[1:])
    a.mem.data[flat[eff]] = v[eff]

  def acc_fold(self, pos_load: int, pos_store: int, mask, a: Addr, op, dt: DType, value, ns: tuple[int, ...]) -> None:
    """A register accumulator updated as acc = acc OP v in every iteration of a vectorized loop nest: one load of the
    initial value, the left-to-right fold over the iterations (EXEC.THREAD.reduce), one store of the result."""
    if 0 in ns or not np.any(mask): return   # zero iterations: no access at all
    init = self.load(pos_load, mask, a)
    self.store(pos_store, mask, a, valu.fold(op, dt, init, self.per_thread(value, ns)))

  def per_thread(self, value, ns: tuple[int, ...]) -> np.ndarray:
    """A value of a vectorized nest as (threads, iterations), iterations in the nest's order (outer loop slowest):
    the transpose of a C-ordered (iterations, threads) array, so a fold can take one iteration at a time."""
    return np.broadcast_to(value, tuple(ns) + (self.T,)).reshape(-1, self.T).T

  def barrier(self, pos: int, mask) -> None:
    """BARRIER: each work-group's threads arrive together or not at all (EXEC.BARRIER.divergence, every mode); then
    the work-groups that passed it start a new epoch (EXEC.RACE)."""
    m = np.broadcast_to(mask, (self.T,)).reshape(self.nwg, self.tpw)
    n = m.sum(axis=1)
    bad = (n > 0) & (n < self.tpw)
    if bad.any():
      g = int(np.argmax(bad))
      waiting = [self.thread_ids(g * self.tpw + i)[1] for i in np.nonzero(m[g])[0][:8]]
      absent = [self.thread_ids(g * self.tpw + i)[1] for i in np.nonzero(~m[g])[0][:8]]   # the first 8 of each
      raise self.fault("EXEC.BARRIER.divergence", pos, g * self.tpw + int(np.argmax(m[g])),
                       f"threads with lidx {waiting} wait at this barrier, threads with lidx {absent} of work-group "
                       f"gidx={self.thread_ids(g * self.tpw)[0]} end or wait at another barrier")
    self.epoch[n == self.tpw] += 1

  # ---- thread ids and values ----
  def thread_ids(self, t: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(gidx, lidx) of thread t (EXEC.GRID.linear: dimension 0 varies fastest)."""
    g, l = divmod(int(t), self.tpw)
    G, L = self.gsz, self.lsz
    return (g % G[0], g // G[0] % G[1], g // (G[0] * G[1])), (l % L[0], l // L[0] % L[1], l // (L[0] * L[1]))

  def special(self, name: str, t: type):
    """SPECIAL: the thread's work-group or local index along one dimension (EXEC.GRID.special)."""
    d = int(name[-1])
    if name.startswith("g"):
      g = self.wg
      return (g // int(np.prod(self.gsz[:d])) % self.gsz[d]).astype(t)
    lid = self.tid % self.tpw
    return (lid // int(np.prod(self.lsz[:d])) % self.lsz[d]).astype(t)

  def trip(self, end, mask) -> tuple[int, bool]:
    """(iterations to run, whether all active threads have the same end) for a RANGE (EXEC.THREAD.range)."""
    if np.ndim(end) == 0: return max(int(end), 0), True
    end, mask = np.broadcast_arrays(np.asarray(end), mask)
    e = end[mask]
    if e.size == 0: return 0, True
    lo, hi = int(e.min()), int(e.max())
    return max(hi, 0), lo == hi

  def vec_ok(self, ends: tuple, mask) -> tuple[int, ...] | None:
    """The trip counts of a loop nest that can run vectorized: ends the same for all active threads, and small."""
    out = []
    for e in ends:
      n, uniform = self.trip(e, mask)
      if not uniform: return None
      out.append(n)
    return tuple(out) if self.T * int(np.prod(out)) <= self.VEC_LIMIT else None

  def axis(self, n: int, t: type, depth: int, nd: int) -> np.ndarray:
    """The loop variable of the depth-th loop of a vectorized nest of nd loops, on its own axis (the threads' axis,
    last, has size 1: the variable is the same for every thread)."""
    return np.arange(n, dtype=t).reshape((n,) + (1,) * (nd - depth))

  def ids(self, t: int) -> str:
    gidx, lidx = self.thread_ids(t)
    return f"gidx={gidx} lidx={lidx}"

  def fault(self, clause: str, pos: int, t: int, what: str) -> SanitizerError:
    return SanitizerError(clause, f"kernel {self.c.name!r}, {self.c.line(pos)}, thread {self.ids(t)}: {what}")
