"""The host side of the checking mode (EXEC.BOUNDS.checked): the `bounds_info` words a checked kernel takes, and the
EXEC.BOUNDS error made from the fault it recorded (the kernel side is refimpl/renderer/bounds.py).

The mode is the SANITIZE knob, as on the PYTHON device: a compiled backend's `sanitize` attribute, when None (the
default), reads $SANITIZE at each compile, so `Context(SANITIZE=1)` turns it on for the kernels compiled inside."""
from __future__ import annotations

import numpy as np

from refimpl.device import Buffer, LinearProgram
from refimpl.helpers import SpecError, getenv
from refimpl.renderer.bounds import FLAG, GIDX, HEADER, INDEX, LIDX, POS
from refimpl.uop import Ops

__all__ = ["checking", "info_words", "raise_fault", "fault_error"]


def checking(sanitize: bool | None) -> bool:
  """Whether kernels compiled now are checked: a backend's own setting, else $SANITIZE."""
  return bool(getenv("SANITIZE", 0)) if sanitize is None else sanitize


def info_words(bufs: list[Buffer]) -> np.ndarray:
  """The `bounds_info` array of a launch: HEADER zero words (no fault yet), then each slot's element count."""
  words = np.zeros(HEADER + len(bufs), np.int64)
  words[HEADER:] = [b.size for b in bufs]
  return words


def _line(p: LinearProgram, pos: int) -> str:
  """UOp `pos` as the emulator prints it (emu/translate.py): position, op, dtype, sources by position, arg."""
  where = {u: i for i, u in enumerate(p.uops)}
  u = p.uops[pos]
  srcs = ", ".join(str(where[s]) for s in u.src)
  return f"UOp #{pos} {u.op.name} {u.dtype!r} ({srcs})" + (f" arg={u.arg!r}" if u.arg is not None else "")


def fault_error(p: LinearProgram, words: np.ndarray) -> SpecError | None:
  """The EXEC.BOUNDS error of the fault in `words` (None if none): the kernel, the LOAD or STORE, the thread's gidx
  and lidx, the memory space and buffer (slot, local name or register arg), the index and the array's size, as the
  PYTHON device reports it (EXEC.SANITIZER)."""
  if not words[FLAG]: return None
  pos = int(words[POS])
  u = p.uops[pos]
  buf = u.src[0].src[0]
  space = {Ops.DEFINE_GLOBAL: "global", Ops.DEFINE_LOCAL: "local", Ops.DEFINE_REG: "reg"}[buf.op]
  label = f"slot {buf.arg}" if space == "global" else repr(buf.arg)
  size = int(words[HEADER + buf.arg]) if space == "global" else buf.dtype.size
  gidx = tuple(int(x) for x in words[GIDX:GIDX + 3])
  lidx = tuple(int(x) for x in words[LIDX:LIDX + 3])
  what = "store to" if u.op is Ops.STORE else "load from"
  return SpecError("EXEC.BOUNDS", f"kernel {p.name!r}, {_line(p, pos)}, thread gidx={gidx} lidx={lidx}: {what} "
                                  f"{space} {label}: index {int(words[INDEX])} outside size {size} (checked on the "
                                  "device; the access was skipped)")


def raise_fault(p: LinearProgram, words: np.ndarray) -> None:
  """Raise fault_error's error, if the launch recorded one."""
  if (err := fault_error(p, words)) is not None: raise err
