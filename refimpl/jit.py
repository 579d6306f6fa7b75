"""TinyJit: record the kernel launches of a function once, then replay them on new inputs (spec/jit.md, JIT.*).

Call 1 runs the function as usual, so its kernels compile. Call 2 runs it again while every launch made by a realize
is recorded (JIT.CAPTURE). From call 3 on the Python function does not run: the recorded launches run again in order,
with the buffers of the new call's tensor arguments in place of those of the capturing call (JIT.REPLAY), and the
same result objects come back holding the new values (JIT.OUTPUTS: results alias between calls, as in tinygrad).

This module is the Tensor side (arguments, results, realize); recording and replaying launches on buffers is
refimpl/engine/jit.py, which sits below the Tensor. Its path is also older tinygrad's `tinygrad.jit` (seed 003)."""
from __future__ import annotations

import functools
import math
import time
from typing import Any, Callable

import numpy as np

from refimpl.device import Buffer
from refimpl.engine.jit import KernelReplay, Recording, buffer_node, buffer_of, check_distinct, contents, is_buffer
from refimpl.engine.realize import KernelLaunch
from refimpl.helpers import SpecError, getenv
from refimpl.tensor import Tensor
from refimpl.uop import Ops


class TinyJit:
  """Wrap `fxn` (a function of Tensors and other values that returns Tensors, possibly in lists, tuples or dicts) so
  that from its third call on it runs as a replay of the kernels its second call launched (JIT.CALLS).

  `cnt` counts calls since the last `reset()`; `captured` is the tuple of recorded launches (None before call 2).
  Results of a replay are the very Tensor objects of the capturing call: a later call overwrites them (JIT.OUTPUTS)."""

  def __new__(cls, fxn: Callable | None = None, prune: bool = False):
    # JIT.DECORATOR: TinyJit() and TinyJit(prune=...) give a decorator (Python then skips __init__, as the result is
    # not a TinyJit); TinyJit(fn) is the wrapper itself
    if fxn is None: return lambda f: cls(f, prune=prune)
    return super().__new__(cls)

  def __init__(self, fxn: Callable | None = None, prune: bool = False):
    self.fxn, self.prune = fxn, prune   # prune changes no value (JIT.DECORATOR): every captured kernel is replayed
    functools.update_wrapper(self, fxn)
    self.reset()

  def reset(self) -> None:
    """Drop the capture: the next call runs the function as a first call again (JIT.CALLS)."""
    self.cnt = 0
    self._replay: KernelReplay | None = None
    self._inputs: list[tuple[str, tuple[int, ...], Any, str]] = []   # (where, shape, dtype, device) per tensor argument
    self._static: dict[str, Any] = {}                                # where -> value of each non-tensor argument
    self._aliased: list[tuple[Tensor, int]] = []   # results that view the buffer of tensor argument i (JIT.OUTPUTS)
    self._ret: Any = None
    self._host_data: list[tuple] = []   # (dtype, size, bytes) of the host data call 1 used (JIT.CAPTURE)

  @property
  def captured(self) -> tuple[KernelLaunch, ...] | None:
    """The launches recorded on call 2, in order (JIT.CAPTURE); None before it."""
    return None if self._replay is None else self._replay.launches

  def __get__(self, obj, objtype=None):
    """Used as a method decorator: the instance becomes the first, non-tensor, argument (JIT.INPUTS)."""
    return self if obj is None else functools.partial(self.__call__, obj)

  def __call__(self, *args, **kwargs):
    leaves = _leaves(args, "args") + _leaves(dict(sorted(kwargs.items())), "kwargs")
    tensors = [(where, v) for where, v in leaves if isinstance(v, Tensor)]
    static = {where: v for where, v in leaves if not isinstance(v, Tensor)}
    if self.cnt >= 2: self._check(tensors, static)   # before anything runs
    _realize([t for _, t in tensors if not is_buffer(t.uop)])   # JIT.INPUTS: every tensor argument is a buffer
    if self.cnt >= 2: return self._run_replay(tensors)
    in_bufs = [buffer_of(t.uop) for _, t in tensors]
    if self.cnt == 1: check_distinct([where for where, _ in tensors], in_bufs)
    ret, launches, host = self._run(args, kwargs, in_bufs, capturing=self.cnt == 1)
    if self.cnt == 0:
      self._host_data = [contents(b) for b in host]   # compared with the capturing call's (JIT.CAPTURE)
      self.cnt = 1
      return ret
    return self._capture(ret, launches, host, tensors, in_bufs, static)

  def _run(self, args, kwargs, in_bufs: list[Buffer], capturing: bool) -> tuple[Any, list[KernelLaunch], list[Buffer]]:
    """Run the function and realize its results (JIT.OUTPUTS) while recording every launch; also the buffers of host
    data that the call made and used (JIT.CAPTURE)."""
    with Recording(in_bufs) as rec:
      ret = self.fxn(*args, **kwargs)
      results = [t for _, t in _leaves(ret, "result") if isinstance(t, Tensor)]
      _realize(results)
    return ret, rec.launches, rec.host_data([buffer_of(t.uop) for t in results], capturing)

  # ---- call 2: capture ----
  def _capture(self, ret, launches: list[KernelLaunch], host: list[Buffer], tensors: list[tuple[str, Tensor]],
               in_bufs: list[Buffer], static: dict[str, Any]):
    # JIT.CAPTURE: host data the replays will reuse must be the same on every call; the first two calls must agree
    now = [contents(b) for b in host]
    if now != self._host_data:
      raise SpecError("JIT.CAPTURE", f"the function builds tensors from host data (a list or numpy array, rand or "
                      f"randn; in refimpl also arange and eye) that differ between the first call and the capturing "
                      f"call ({len(self._host_data)} and {len(now)} such buffers); a replay would reuse the capturing "
                      "call's data. Pass such data as a Tensor argument, or create it before the first call")
    index = {id(b): i for i, b in enumerate(in_bufs)}
    aliased: list[tuple[Tensor, int]] = []

    def own(where: str, t: Tensor) -> Tensor:
      b = buffer_of(t.uop)
      if id(b) not in index: return t
      fresh = Tensor(t.uop)   # a result that is (a view of) an argument: each replay points it at the new argument
      aliased.append((fresh, index[id(b)]))
      return fresh
    ret = _map_tensors(ret, "result", own)

    self._inputs = [(where, t.shape, t.dtype, t.device) for where, t in tensors]
    self._static = {where: _snapshot(v) for where, v in static.items()}
    self._aliased, self._ret = aliased, ret
    self._replay = KernelReplay(launches, in_bufs)
    self.cnt = 2
    if getenv("DEBUG", 0) >= 1: print(f"JIT captured {len(launches)} kernels with {len(in_bufs)} inputs")
    return ret

  # ---- calls 3+: replay ----
  def _check(self, tensors: list[tuple[str, Tensor]], static: dict[str, Any]) -> None:
    """JIT.INPUTS: the call has the tensor arguments (where, shape, dtype, device) and non-tensor values of the
    capturing call."""
    was, now = [w for w, *_ in self._inputs], [w for w, _ in tensors]
    if was != now:
      raise SpecError("JIT.INPUTS", f"the tensor arguments changed: captured with {len(was)} "
                      f"({', '.join(was) or 'none'}), called with {len(now)} ({', '.join(now) or 'none'})")
    for (where, t), (_, shape, dtype, device) in zip(tensors, self._inputs):
      for what, old, new in (("shape", shape, t.shape), ("dtype", dtype, t.dtype), ("device", device, t.device)):
        if old != new:
          raise SpecError("JIT.INPUTS", f"tensor argument {where} changed {what}: captured with {old!r}, called with "
                          f"{new!r}; the captured kernels are specialised to it (reset() the jit or use another one)")
    if static.keys() != self._static.keys():
      raise SpecError("JIT.INPUTS", f"the non-tensor arguments changed: captured with {sorted(self._static)}, called "
                      f"with {sorted(static)}")
    for where, v in static.items():
      if not _same(self._static[where], v):
        raise SpecError("JIT.INPUTS", f"non-tensor argument {where} is {v!r}, it was {self._static[where]!r} when the "
                        "call was captured: non-tensor values are baked into the captured kernels (pass it as a "
                        "Tensor, or reset() the jit)")

  def _run_replay(self, tensors: list[tuple[str, Tensor]]):
    assert self._replay is not None
    st = time.perf_counter()
    nodes = self._replay([buffer_node(t.uop) for _, t in tensors])
    for out, i in self._aliased: out.uop = nodes[i] if out.uop.op is Ops.BUFFER else out.uop.replace(src=(nodes[i],))
    self.cnt += 1
    if getenv("DEBUG", 0) >= 1:
      print(f"JIT replayed {len(self._replay.launches)} kernels in {(time.perf_counter() - st) * 1e3:.2f} ms")
    return self._ret


# ---- arguments and results ----
def _leaves(value, where: str) -> list[tuple[str, Any]]:
  """(where, leaf) for every leaf of nested lists, tuples and dicts, e.g. ('args[1][0]', tensor)."""
  if isinstance(value, (list, tuple)): return [x for i, v in enumerate(value) for x in _leaves(v, f"{where}[{i}]")]
  if isinstance(value, dict): return [x for k, v in value.items() for x in _leaves(v, f"{where}[{k!r}]")]
  return [(where, value)]


def _map_tensors(value, where: str, fn: Callable[[str, Tensor], Tensor]):
  """`value` with every Tensor leaf t (found as for _leaves) replaced by fn(where, t)."""
  if isinstance(value, Tensor): return fn(where, value)
  if isinstance(value, (list, tuple)):
    items = [_map_tensors(v, f"{where}[{i}]", fn) for i, v in enumerate(value)]
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)   # namedtuples take fields
  if isinstance(value, dict): return {k: _map_tensors(v, f"{where}[{k!r}]", fn) for k, v in value.items()}
  return value


def _realize(tensors: list[Tensor]) -> None:
  if tensors: tensors[0].realize(*tensors[1:])


def _snapshot(v):
  """A non-tensor argument as it was at capture: numpy arrays are copied, so later changes in place are seen."""
  return v.copy() if isinstance(v, np.ndarray) else v


def _same(a, b) -> bool:
  """Whether two non-tensor arguments are the same value (objects without a value equality compare by identity)."""
  if a is b: return True
  if type(a) is not type(b): return False
  if isinstance(a, np.ndarray):
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
  if isinstance(a, float) and math.isnan(a): return math.isnan(b)
  try: return bool(a == b)
  except Exception: return False
