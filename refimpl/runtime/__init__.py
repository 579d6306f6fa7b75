"""refimpl's compiled backends (CPU, CL, CUDA), opened by name through the device registry (DEV.REGISTRY)."""
from __future__ import annotations

import re

from refimpl.helpers import SpecError


def compile_error(what: str, name: str, src: str, log: str, line_pattern: str, around: int = 3) -> SpecError:
  """DEV.COMPILE, as every compiled backend reports it: `what` could not compile kernel `name`, the compiler's whole
  log, and the numbered source lines around the first line the log names (the first group `line_pattern` matched),
  marked `>`;
  the whole source is the error's `source` attribute."""
  lines = src.splitlines()
  m = re.search(line_pattern, log)
  first = min(int(next(g for g in m.groups() if g)), max(1, len(lines))) if m else 1
  lo, hi = max(1, first - around), min(len(lines), first + around)
  excerpt = "\n".join(f"{'>' if i == first else ' '}{i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1))
  err = SpecError("DEV.COMPILE", f"{what} could not compile {name}:\n{log.rstrip()}\n"
                                 f"source lines {lo}-{hi}:\n{excerpt}")
  err.source = src   # type: ignore[attr-defined]
  return err
