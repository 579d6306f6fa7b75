"""The buffer side of TinyJit (spec/jit.md, JIT.*): recording the kernel launches of a call, replaying them on other
buffers, and the checks that need only buffers and launches.

The Tensor-facing TinyJit (arguments and results, realize, results that alias arguments) is refimpl/jit.py, above
this layer: the engine never imports the Tensor (DESIGN.md, "Layers and who may import whom")."""
from __future__ import annotations

import dataclasses

from refimpl.device import Buffer, Device
from refimpl.engine import realize as engine   # the module itself: a Recording switches its `capture` list on and off
from refimpl.engine.realize import KernelLaunch, buffers
from refimpl.engine.schedule import new_buffer
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp


class Recording:
  """A context in which every kernel launch (and copy between devices) is also appended to `launches` (JIT.CAPTURE).

  Recordings nest: a TinyJit called inside another's capture hands its launches on to the outer recording when its
  block ends without an error. `in_bufs` are the call's argument buffers; with the buffers that exist when the
  recording starts they are what `host_data` treats as known."""

  def __init__(self, in_bufs: list[Buffer]):
    self.launches: list[KernelLaunch] = []
    self._existing = list(buffers.values())   # strong references, so that no new buffer can reuse one of these ids
    self._known = {id(b) for b in self._existing} | {id(b) for b in in_bufs}
    self._outer: list[KernelLaunch] | None = None

  def __enter__(self) -> Recording:
    self._outer, engine.capture = engine.capture, self.launches
    return self

  def __exit__(self, exc_type, *_) -> None:
    engine.capture = self._outer
    if exc_type is None and self._outer is not None: self._outer.extend(self.launches)

  def host_data(self, results: list[Buffer], capturing: bool) -> list[Buffer]:
    """JIT.CAPTURE: in order of first use, the buffers that the launches read or the results hold that were not
    known and that no earlier launch wrote: data copied in from the host during the call. Such a buffer that a launch
    overwrites (an assign into it) could not be replayed at all: the replay would start from the overwritten values;
    when `capturing`, that is an error."""
    fresh: dict[int, Buffer] = {}
    written: set[int] = set()
    for ln in self.launches:
      out = id(ln.out)
      if capturing and (out in fresh or (ln.overwrites and out not in self._known and out not in written)):
        raise SpecError("JIT.CAPTURE", f"kernel {ln.name} overwrites data copied in from the host during the call (an "
                        "assign into a Tensor built inside the function): a replay would start from the overwritten "
                        "values. Pass that Tensor as an argument, or create it before the first call")
      for b in ln.bufs:
        if b is not ln.out and b.size and id(b) not in self._known and id(b) not in written: fresh.setdefault(id(b), b)
      written.add(out)
    for b in results:
      if b.size and id(b) not in self._known and id(b) not in written: fresh.setdefault(id(b), b)
    return list(fresh.values())


class KernelReplay:
  """The launches of a capturing call, to be run again with other buffers in place of its argument buffers
  `in_bufs` (JIT.REPLAY). Every other buffer the launches use (state, constants, intermediates) is fixed: the same
  on every replay."""

  def __init__(self, launches: list[KernelLaunch], in_bufs: list[Buffer]):
    self.launches = tuple(launches)
    self.in_bufs = in_bufs
    self._fixed = {id(b) for ln in launches for b in ln.bufs} - {id(b) for b in in_bufs}

  def __call__(self, nodes: list[UOp]) -> list[UOp]:
    """Run the launches on the buffers of BUFFER `nodes`, one per argument buffer, in order; returns the nodes used,
    where a node that would alias (JIT.ALIAS) is replaced by a private copy."""
    used: list[UOp] = []
    seen: set[int] = set()
    for node in nodes:
      # JIT.ALIAS: a buffer the launches also use otherwise (an earlier result fed back in, state) or a repeated
      # argument would alias two slots; a private copy gives the values the argument had at the call
      if id(buffers[node]) in self._fixed or id(buffers[node]) in seen: node = copy_of(node)
      seen.add(id(buffers[node]))
      used.append(node)
    swap = {id(old): buffers[node] for old, node in zip(self.in_bufs, used)}
    for ln in self.launches:
      bufs, out = tuple(swap.get(id(b), b) for b in ln.bufs), swap.get(id(ln.out), ln.out)
      ln.run(bufs)   # a launch, or a copy between devices (EXEC.SCHED.copy): both are recorded and replayed
      if engine.capture is not None:   # replayed inside another TinyJit's capture: the outer one records it too
        engine.capture.append(dataclasses.replace(ln, bufs=bufs, out=out))
    return used


def check_distinct(wheres: list[str], in_bufs: list[Buffer]) -> None:
  """JIT.INPUTS: the capturing call's arguments (named by `wheres`) have distinct buffers."""
  first: dict[int, str] = {}
  for where, b in zip(wheres, in_bufs):
    if id(b) in first:
      raise SpecError("JIT.INPUTS", f"{where} shares its buffer with {first[id(b)]} in the capturing call: the "
                      "captured kernels would read one buffer for both; pass distinct tensors (e.g. x.contiguous())")
    first[id(b)] = where


def contents(b: Buffer) -> tuple:
  """What a buffer holds, comparable between calls: (dtype, size, bytes)."""
  return b.dtype, b.size, Device[b.device].copyout(b)


def is_buffer(u: UOp) -> bool:
  """Whether `u` is the graph of a realized tensor: a BUFFER, or a RESHAPE of one."""
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


def buffer_node(u: UOp) -> UOp:
  """The BUFFER under a realized tensor's graph (BUFFER or RESHAPE(BUFFER))."""
  if not is_buffer(u): raise SpecError("JIT.INPUTS", f"expected a realized tensor, got a {u.op!r} graph")
  return u if u.op is Ops.BUFFER else u.src[0]


def buffer_of(u: UOp) -> Buffer:
  """The device buffer under a realized tensor's graph."""
  return buffers[buffer_node(u)]


def copy_of(node: UOp) -> UOp:
  """A new BUFFER node holding a copy of `node`'s data (DEV.COPY)."""
  src = buffers[node]
  dev = Device[src.device]
  new = new_buffer(node.dtype, node.arg, src.device)
  buffers[new] = dev.alloc(src.size, src.dtype)
  dev.copyin(buffers[new], dev.copyout(src))
  return new
