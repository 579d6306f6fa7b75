"""The sanitizer's bookkeeping (EXEC.SANITIZER): which element was written, and the accesses of the current launch
that a later access could race with (EXEC.RACE). Everything is kept as numpy arrays over the elements of one memory
array, and one lockstep step's accesses (many threads, perhaps many iterations) are checked together."""
from __future__ import annotations

from typing import Callable

import numpy as np

from refimpl.helpers import SpecError

NONE = -1
_LOW = np.int64(0xFFFFFFFF)


class SanitizerError(SpecError):
  """A fault the PYTHON device found while running a launch (EXEC.SANITIZER); `clause` is the EXEC.* ID broken."""


class RaceTracker:
  """Per element of one global or local array, the accesses of this launch a later access must be ordered after.

  Two accesses are ordered when made by one thread, or by one work-group in different epochs (EXEC.RACE). Ordering
  is transitive here (epochs only grow), so after a write that races with nothing, the earlier accesses are all
  ordered before it and only the write is kept (w_*). Reads since that write are summarised by the reader with the
  smallest and the largest thread id (a reader in another work-group than a writer is always unordered, and the
  work-group is monotone in the thread id), and by the readers in the latest epoch (for a writer of the same
  work-group only those are unordered): key = epoch << 32 | tid (or ~tid), whose maximum picks the latest epoch."""

  def __init__(self, n: int):
    self.w_tid = np.full(n, NONE, np.int64); self.w_ep = np.zeros(n, np.int64); self.w_pos = np.zeros(n, np.int64)
    self.r_lo = np.full(n, np.iinfo(np.int64).max, np.int64); self.r_hi = np.full(n, NONE, np.int64)
    self.r_lo_pos = np.zeros(n, np.int64); self.r_hi_pos = np.zeros(n, np.int64)
    self.e_lo = np.full(n, NONE, np.int64); self.e_hi = np.full(n, NONE, np.int64)   # epoch<<32 | ~tid / tid
    self.e_lo_pos = np.zeros(n, np.int64); self.e_hi_pos = np.zeros(n, np.int64)

  def check(self, els: np.ndarray, tids: np.ndarray, eps: np.ndarray, tpw: int, pos: int, is_write: bool,
            report: Callable[[int, int, int, int, bool], None]) -> None:
    """Check the accesses (element, thread, epoch) one step of UOp `pos` makes against earlier ones, then record
    them. `report(i, other_tid, other_pos, other_epoch, other_is_write)` raises for the i-th access (other_pos -1:
    the same step; other_epoch -2: not tracked)."""
    wgs = tids // tpw
    # against the last write: unordered unless same thread, or same work-group and an earlier epoch
    wt = self.w_tid[els]
    bad = (wt != NONE) & (wt != tids) & ((wt // tpw != wgs) | (self.w_ep[els] == eps))
    if bad.any():
      i = int(np.argmax(bad)); e = els[i]
      report(i, int(wt[i]), int(self.w_pos[e]), int(self.w_ep[e]), True)
    if not is_write:
      self._record_reads(els, tids, eps, pos)
      return
    # two writes of one element in one step: different threads, same epoch, so unordered (EXEC.RACE.same-value too)
    order = np.argsort(els, kind="stable")
    dup = np.nonzero(els[order][1:] == els[order][:-1])[0]
    if dup.size:
      i, j = int(order[dup[0]]), int(order[dup[0] + 1])
      report(j, int(tids[i]), pos, int(eps[i]), True)
    # against reads since the last write
    has = self.r_hi[els] != NONE
    lo, hi = self.r_lo[els], self.r_hi[els]
    for other, where in ((lo, self.r_lo_pos), (hi, self.r_hi_pos)):
      bad = has & (other // tpw != wgs)
      if bad.any():
        i = int(np.argmax(bad)); report(i, int(other[i]), int(where[els[i]]), -2, False)
    elo, ehi = self.e_lo[els], self.e_hi[els]
    cur = has & ((ehi >> 32) == eps)
    lo_tid, hi_tid = _LOW - (elo & _LOW), ehi & _LOW
    for other, where in ((lo_tid, self.e_lo_pos), (hi_tid, self.e_hi_pos)):
      bad = cur & (other != tids)
      if bad.any():
        i = int(np.argmax(bad)); report(i, int(other[i]), int(where[els[i]]), int(eps[i]), False)
    self.w_tid[els], self.w_ep[els], self.w_pos[els] = tids, eps, pos
    self.r_lo[els], self.r_hi[els], self.e_lo[els], self.e_hi[els] = np.iinfo(np.int64).max, NONE, NONE, NONE

  def _record_reads(self, els, tids, eps, pos) -> None:
    for arr, vals, pos_arr, uf in ((self.r_lo, tids, self.r_lo_pos, np.minimum),
                                   (self.r_hi, tids, self.r_hi_pos, np.maximum),
                                   (self.e_lo, (eps << 32) | (_LOW - tids), self.e_lo_pos, np.maximum),
                                   (self.e_hi, (eps << 32) | tids, self.e_hi_pos, np.maximum)):
      before = arr[els]
      uf.at(arr, els, vals)
      changed = arr[els] != before
      pos_arr[els[changed]] = pos
