"""The sha256 of the default-mode source of a fixed set of programs for the C, OpenCL C and CUDA C renderers
(EXEC.BOUNDS.checked: the checking mode must leave the default source byte for byte as it was). The set: the one-op
kernel of every ALU op and every conversion for every dtype, and the hand-built programs of tests/backend_checks.py.

`python -m tests.render_digests > tests/data/render_digests.json` writes the file again after a deliberate change
to a renderer's output."""
from __future__ import annotations

import hashlib
import json

from refimpl.dtype import dtypes
from refimpl.renderer.cstyle import CRenderer
from refimpl.renderer.cuda import CUDARenderer
from refimpl.renderer.opencl import OpenCLRenderer
from tests.backend_checks import alu_program, convert_program, program_cases

RENDERERS = {"C": CRenderer, "CL": OpenCLRenderer, "CUDA": CUDARenderer}


def programs():
  """(id, LinearProgram) of the fixed set, in a fixed order."""
  for dt in dtypes.all():
    yield f"alu_{dt!r}", alu_program(dt)[0]
    yield f"convert_{dt!r}", convert_program(dt)[0]
  for case in program_cases(): yield f"case_{case.name}", case.program


def digests() -> dict[str, str]:
  out = {}
  for name, make in RENDERERS.items():
    r = make()
    for pid, prog in programs(): out[f"{name}:{pid}"] = hashlib.sha256(r.render(prog).encode()).hexdigest()
  return out


if __name__ == "__main__": print(json.dumps(digests(), indent=0, sort_keys=True))
