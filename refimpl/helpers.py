"""Small shared pieces: environment knobs (getenv, Context), counters of what ran (GlobalCounters) and the error type
that names a spec clause. Imports nothing of refimpl: every layer may use it."""
from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, ClassVar


class SpecError(Exception):
  """A violation of the spec: bad input, an ill-typed graph, an unsupported dtype. `clause` is the ID of the
  clause that was broken (e.g. 'UOP.ADD' or 'DT.PROMOTE'); the message starts with it."""
  def __init__(self, clause: str, message: str):
    self.clause, self.message = clause, message
    super().__init__(f"{clause}: {message}")

  def __reduce__(self):   # pickled (multiprocessing, xdist) as its two arguments, not as the formatted message
    return type(self), (self.clause, self.message)


# API.ERRORS: a refusal of a user's argument is a SpecError and also the builtin class that torch and tinygrad raise for
# the same fault, so that code written for them (`except IndexError:`) catches it. spec/api_errors.md has the table.
class SpecIndexError(SpecError, IndexError):
  """An axis or an index out of range, an empty reduction without identity (API.ERRORS)."""


class SpecValueError(SpecError, ValueError):
  """A bad value or shape of an argument: a negative size, a zero step or stride, a repeated axis (API.ERRORS)."""


class SpecTypeError(SpecError, TypeError):
  """An argument of the wrong type: a float size, a float index tensor (API.ERRORS)."""


class SpecRuntimeError(SpecError, RuntimeError):
  """Operands that do not fit together (shapes that do not broadcast, matmul sizes), the truth value of a tensor of
  several elements (API.ERRORS)."""


class SpecOverflowError(SpecError, OverflowError, ValueError):
  """A Python number that fits no dtype it must become (an int beyond 64 bits) (API.ERRORS)."""


@functools.cache
def _environ(key: str, default: Any) -> Any:
  return type(default)(os.environ.get(key, default))


def getenv(key: str, default: Any = 0) -> Any:
  """An environment knob (DEBUG, NOOPT, SANITIZE, ...) converted to the type of `default` (API.GETENV). Read from
  the environment once per (key, default) and cached; `Context` changes the environment and clears the cache."""
  return _environ(key, default)


getenv.cache_clear = _environ.cache_clear   # tinygrad's getenv is a functools.cache: programs may call this


class Context(contextlib.ContextDecorator):
  """Set knobs for a block (API.CONTEXT): `with Context(DEBUG=2, NOOPT=1): ...` or as a decorator. Each knob is
  an environment variable for the length of the block, so every reader sees it, whether it reads through getenv
  (whose cache is cleared on entry and exit) or the environment directly; on exit the previous values come back
  (unset ones are unset again), also when the block raises. Not thread-safe: the environment is the process's."""

  def __init__(self, **kwargs):
    for k, v in kwargs.items():
      if not isinstance(v, (bool, int, str)):
        raise SpecError("API.CONTEXT", f"knob {k}={v!r}: a knob's value is an int, bool or str")
    self.kwargs = kwargs

  def __enter__(self):
    self._old: dict[str, str | None] = {k: os.environ.get(k) for k in self.kwargs}
    for k, v in self.kwargs.items(): os.environ[k] = str(int(v)) if isinstance(v, bool) else str(v)
    _environ.cache_clear()
    return self

  def __exit__(self, *exc):
    for k, old in self._old.items():
      if old is None: os.environ.pop(k, None)
      else: os.environ[k] = old
    _environ.cache_clear()
    return False


class GlobalCounters:
  """What realize ran since the last reset (API.COUNTERS): `kernel_count` programs launched, `global_ops` their ALU
  operations, `global_mem` the bytes of the buffers they took, `time_sum_s` the seconds spent launching them and
  copying between devices. Class attributes, as in tinygrad; `reset()` sets all four to 0."""
  global_ops: ClassVar[int] = 0
  global_mem: ClassVar[int] = 0
  time_sum_s: ClassVar[float] = 0.0
  kernel_count: ClassVar[int] = 0

  @staticmethod
  def reset() -> None:
    """Set the counters back to 0 (API.COUNTERS)."""
    GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.kernel_count = 0, 0, 0
    GlobalCounters.time_sum_s = 0.0
