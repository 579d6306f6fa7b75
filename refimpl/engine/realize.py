"""Running kernelized graphs on devices: buffers of BUFFER nodes, compiling and launching kernels, copying buffers
between devices (EXEC.SCHED.copy), DEBUG output."""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field

from refimpl.codegen.search import build_program, choose_opts
from refimpl.engine import counters
from refimpl.device import Buffer, Device, LinearProgram
from refimpl.helpers import getenv, knob
from refimpl.uop import Ops
from refimpl.uop import capture as viz_capture
from refimpl.uop.ops import UOp

# BUFFER node -> the device buffer holding its data; entries die with their node
buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()
_compiled: dict[tuple, tuple[LinearProgram, object, tuple[int, ...]]] = {}
_built: dict[tuple, tuple[LinearProgram, tuple[int, ...]]] = {}   # programs built by compile_ahead, not compiled yet


@dataclass(eq=False)
class KernelLaunch:
  """One launch as TinyJit records it (JIT.CAPTURE): the compiled program on `device`, the buffers in slot order,
  the one buffer it writes (`overwrites`: one that existed before, as for an assign), and the values of its symbolic
  variables. A copy between devices (EXEC.SCHED.copy) is recorded too: `compiled` is None, `bufs` is (destination,
  source), and `run` copies instead of launching."""
  name: str
  device: str
  compiled: object
  bufs: tuple[Buffer, ...]
  out: Buffer
  overwrites: bool = False
  vals: dict[str, int] = field(default_factory=dict)
  ops: int = 0   # the program's ALU operations, as GlobalCounters counts them (API.COUNTERS)

  def run(self, bufs: tuple[Buffer, ...]) -> None:
    """Launch the program again (or copy again) on `bufs`, buffers like the recorded ones (JIT.REPLAY)."""
    st = time.perf_counter()
    if self.compiled is None: copy_buffer(bufs[0], bufs[1])
    else: Device[self.device].launch(self.compiled, list(bufs), self.vals or None)
    counters.record(None if self.compiled is None else self.ops, tuple(bufs), time.perf_counter() - st)


# TinyJit sets this to a list while it captures a call; every launch is then also appended to it (JIT.CAPTURE)
capture: list[KernelLaunch] | None = None


def buffer_for(node: UOp) -> Buffer:
  """The device buffer of a BUFFER node, allocated on first use (DEV.ALLOC)."""
  if node not in buffers:
    device = node.src[1].arg
    buffers[node] = Device[device].alloc(node.arg, node.dtype)
  return buffers[node]


def copy_buffer(dst: Buffer, src: Buffer) -> None:
  """EXEC.SCHED.copy: the bytes of `src` into `dst` (same dtype and size), through the host: copy out of the source
  device, copy in to the destination (DEV.COPY); the copy out sees every earlier kernel's writes (EXEC.ORDER.device)."""
  Device[dst.device].copyin(dst, Device[src.device].copyout(src))


def compile_kernel(device: str, kernel) -> tuple[LinearProgram, object, tuple[int, ...]]:
  """Lower (with the options of the optimisation pass unless NOOPT=1, EXEC.OPT), linearize and compile a Kernel for
  `device`, once per (device, AST, options, SANITIZE); also which of the kernel's buffers each program slot takes.
  With a VIZ recorder installed (DEV.VIZ.capture), each kernel is compiled again once per recorder, in a group of its
  own, so that its rewrites are recorded even when an earlier run compiled it."""
  rec = viz_capture.recorder
  if rec is not None and rec.first_time((device, kernel.arg.ast, *(knob(k) for k in ("NOOPT", "BEAM", "SANITIZE")))):
    with rec.group("kernel", kernel.arg.name, device=device) as g:
      g.snapshot("ast", kernel.arg.ast)
      opts = choose_opts(device, kernel.arg.ast)
      g.info["opts"] = [repr(o) for o in opts] if opts else ("NOOPT=1" if opts is None else "none")
      key = (device, kernel.arg.ast, opts, getenv("SANITIZE", 0))
      prog, slots = _build(kernel, opts)
      _compiled[key] = (prog, Device[device].compile(prog), slots)
      _built.pop(key, None)
      g.texts["program"] = program_text(prog.uops)
      g.texts["source"] = source_of(device, prog, _compiled[key][1])
    return _compiled[key]
  key, (prog, slots) = _program(device, kernel)
  if key not in _compiled: _compiled[key] = (prog, Device[device].compile(prog), slots)
  _built.pop(key, None)
  return _compiled[key]


def _program(device: str, kernel) -> tuple[tuple, tuple[LinearProgram, tuple[int, ...]]]:
  """The compile key and the (program, slots) of a Kernel, built once."""
  opts = choose_opts(device, kernel.arg.ast)
  key = (device, kernel.arg.ast, opts, getenv("SANITIZE", 0))   # EXEC.BOUNDS.checked compiles another kernel
  if key in _compiled: return key, _compiled[key][::2]
  if key not in _built: _built[key] = _build(kernel, opts)
  return key, _built[key]


def _build(kernel, opts) -> tuple[LinearProgram, tuple[int, ...]]:
  prog, slots = build_program(kernel.arg.name, kernel.arg.ast, opts)
  if getenv("DEBUG", 0) >= 2 and opts: print(f"{kernel.arg.name}: {list(opts)}")
  if getenv("DEBUG", 0) >= 4:
    for i, u in enumerate(prog.uops): print(f"{i:4d} {u.op.name:14s} {u.dtype!r:24s} {u.arg!r}")
  return prog, slots


def compile_ahead(kernels: list[UOp]) -> None:
  """DEV.CPU.batch: hand a device that compiles several programs at once (a `compile_many` method) every program of
  this run it has not compiled, before the first launch; the launches still run one by one in order."""
  if viz_capture.recorder is not None: return   # VIZ compiles each kernel in its own recorded group (DEV.VIZ.capture)
  todo: dict[str, list[LinearProgram]] = {}
  for k in kernels:
    out = k.src[0] if k.src[0].op is Ops.BUFFER else k.src[0].src[0]
    if k.arg.is_copy or out.arg == 0 or not hasattr(Device[out.src[1].arg], "compile_many"): continue
    try: key, (prog, _) = _program(out.src[1].arg, k)
    except Exception: break   # an optimisation only: the in-order loop raises it after the kernels before it ran
    if key not in _compiled: todo.setdefault(out.src[1].arg, []).append(prog)
  for device, progs in todo.items():
    if len(progs) > 1: Device[device].compile_many(progs)


def program_text(uops: tuple) -> str:
  """A linear program as VIZ shows it, a line per UOp: position, op, dtype, the positions of its sources, arg."""
  pos = {u: i for i, u in enumerate(uops)}
  return "\n".join(f"{i:4d} {u.op.name:14s} {u.dtype!r:28s} {str([pos.get(s, '?') for s in u.src]):16s} {u.arg!r}"
                   for i, u in enumerate(uops))


def source_of(device: str, prog: LinearProgram, compiled) -> str:
  """The source a device compiled (C, OpenCL C, CUDA C). PYTHON runs the linear program itself (emu): VIZ shows the
  C that the CPU device would compile for it instead, saying so."""
  src = getattr(compiled, "src", None)
  if isinstance(src, str): return src
  try:
    from refimpl.renderer.cstyle import CRenderer
    return f"// {device} runs the linear program itself; the CPU device would compile this C:\n" + \
           CRenderer().render(prog)
  except Exception as e:   # noqa: BLE001 - a program the C renderer refuses still has its linear program to show
    return f"// {device} runs the linear program itself ({type(e).__name__}: {e})"


def run_kernels(kernels: list[UOp]) -> None:
  """Run KERNEL nodes in order (EXEC.ORDER.device: each finishes before the next starts)."""
  debug = getenv("DEBUG", 0)
  t0 = time.perf_counter()
  compile_ahead(kernels)
  for k in kernels:
    out = k.src[0] if k.src[0].op is Ops.BUFFER else k.src[0].src[0]   # an in-place write names the version it replaces
    device = out.src[1].arg
    bufs = [buffer_for(b if b.op is Ops.BUFFER else b.src[0]) for b in k.src]   # inputs may be ASSIGN(BUFFER, ..)
    if out.arg == 0: continue   # nothing to compute (EXEC.GRID.empty)
    st = time.perf_counter()
    if k.arg.is_copy:           # EXEC.SCHED.copy: no program, the source's bytes move to the destination
      compiled, call_bufs = None, (bufs[0], bufs[1])
      copy_buffer(*call_bufs)
    else:
      prog, compiled, slots = compile_kernel(device, k)
      call_bufs = tuple(bufs[s] for s in slots)
      st = time.perf_counter()   # API.COUNTERS: time_sum_s counts the launch, not the compilation
      Device[device].launch(compiled, list(call_bufs))
    ops = None if k.arg.is_copy else counters.program_ops(prog)
    counters.record(ops, call_bufs, time.perf_counter() - st)   # API.COUNTERS
    if capture is not None:
      capture.append(KernelLaunch(k.arg.name, device, compiled, call_bufs, bufs[0], k.arg.in_place, ops=ops or 0))
    if debug >= 2:
      print(f"{device:8s} kernel {k.arg.name:24s} {len(bufs)} buffers  {(time.perf_counter() - st) * 1e3:8.3f} ms")
  if debug >= 1 and kernels:
    print(f"{len(kernels)} kernels, {(time.perf_counter() - t0) * 1e3:.2f} ms")
