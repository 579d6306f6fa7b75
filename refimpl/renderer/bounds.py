"""The checking mode of the C-style renderers (EXEC.BOUNDS.checked, spec/backends.md DEV.C.bounds).

With `render(program, checked=True)` every LOAD and STORE, in every memory space, goes through a bounds check before
its address is formed: the kernel takes one more buffer parameter, `bounds_info` (int64 words, right after the data
buffers), whose words from `HEADER` on hold the element count of each global slot (the host writes them), and whose
first `HEADER` words receive the first fault: a flag, the position of the LOAD or STORE, the index, the thread's
gidx and lidx. A failing check records the fault (once: the flag is claimed with an atomic exchange), and the access
is skipped as if gated off (EXEC.MEMORY.gate: a LOAD gives 0, a STORE writes nothing), so no access outside an array
ever happens; the host reads the words after the launch and raises EXEC.BOUNDS (refimpl/runtime/bounds.py).

`checked=False` (the default) adds nothing: the source is byte for byte what it is without this module."""
from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.uop import Ops
from refimpl.uop.ops import UOp

if TYPE_CHECKING: from refimpl.renderer.cstyle import CStyleLanguage, _Kernel

__all__ = ["HEADER", "PARAM", "FLAG", "POS", "INDEX", "GIDX", "LIDX", "check", "param", "prologue"]

HEADER = 16                      # words before the slot sizes
FLAG, POS, INDEX, GIDX, LIDX = 0, 1, 2, 3, 6   # word offsets: flag, LOAD/STORE position, index, gidx0..2, lidx0..2
PARAM = "bounds_info"            # the parameter's name in every language
HELPER = "i64_bounds_fault"      # an `i64_` name: no kernel can be named like it (DEV.C.name)


def param(lang: CStyleLanguage) -> str:
  """The declaration of the extra buffer parameter."""
  return f"{lang.buffer_prefix}int64_t* {lang.restrict} {PARAM}"


def prologue(lang: CStyleLanguage, k: _Kernel) -> list[str]:
  """Statements at the top of the kernel: each global slot's element count, read once from `bounds_info`."""
  return [f"const int64_t bsize{g.arg} = {PARAM}[{HEADER + g.arg}];" for g in k.p.globals]


def _helper(lang: CStyleLanguage, k: _Kernel) -> str:
  """The function a failing check calls: it claims the flag and, if first, writes the fault's words; it gives 0, so
  the access's condition is false."""
  words = "; ".join(f"f[{w}] = {v}" for w, v in ((POS, "pos"), (INDEX, "i"), (GIDX, "g0"), (GIDX + 1, "g1"),
                                                     (GIDX + 2, "g2"), (LIDX, "l0"), (LIDX + 1, "l1"),
                                                     (LIDX + 2, "l2")))
  args = ", ".join(f"int64_t {a}" for a in ("pos", "i", "g0", "g1", "g2", "l0", "l1", "l2"))
  return k.need(HELPER, f"{lang.helper_prefix}bool {HELPER}({lang.buffer_prefix}int64_t* f, {args}) {{\n"
                f"  if ({lang.bounds_claim('f')}) {{ {words}; }}\n  return 0;\n}}")


def check(lang: CStyleLanguage, k: _Kernel, idx: UOp, access: UOp, i: str, gate: str | None) -> str:
  """The condition under which `access` (a LOAD or STORE through INDEX `idx`, element expression `i`) happens: its
  gate, if any, first (a gated-off access is no access), then `0 <= i < size` as one unsigned comparison, else the
  fault is recorded and the condition is false."""
  buf = idx.src[0]
  size = f"bsize{buf.arg}" if buf.op is Ops.DEFINE_GLOBAL else str(buf.dtype.size)
  ids = [lang.bounds_thread_id(k, kind, d) for kind in ("g", "l") for d in range(3)]
  fault = f"{_helper(lang, k)}({PARAM}, {k.pos[access]}, (int64_t)({i}), {', '.join(ids)})"
  ok = f"((uint64_t)(int64_t)({i}) < (uint64_t){size} || {fault})"
  return ok if gate is None else f"({gate} && {ok})"
