"""Small shared pieces: environment knobs (getenv, Context), counters of what ran (GlobalCounters) and the error type
that names a spec clause. Imports nothing of refimpl: every layer may use it."""
from __future__ import annotations

import contextlib
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar


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


# ---- the environment knobs (DEV.KNOBS, spec/backends.md): each with its type and range, and the one validated
# reader of them. Every knob set in the environment is checked when refimpl is imported (`check_environment`), when
# `Context` sets it and whenever it is read, so `BEAM=abc` is "DEV.KNOBS: BEAM must be a non-negative integer, got
# 'abc'" (a ValueError) at import, not a traceback from int() deep inside the compiler. An empty value means unset.

class KnobError(SpecError, ValueError):
  """A knob set to a value outside its type or range (DEV.KNOBS)."""
  def __init__(self, message: str): super().__init__("DEV.KNOBS", message)


def _count(name: str, raw: str) -> int:
  if not re.fullmatch(r"\s*\+?\d+\s*", raw): raise KnobError(f"{name} must be a non-negative integer, got {raw!r}")
  return int(raw)


def _flag(name: str, raw: str) -> int:
  if raw.strip() not in ("0", "1"): raise KnobError(f"{name} must be 0 or 1, got {raw!r}")
  return int(raw)


def _command(name: str, raw: str) -> str:
  if not re.fullmatch(r"[^\s]+", raw):
    raise KnobError(f"{name} must be one command name or path without spaces (no arguments), got {raw!r}")
  return raw


def _directory(name: str, raw: str) -> str:
  if os.path.exists(raw) and not os.path.isdir(raw): raise KnobError(f"{name} must be a directory, got file {raw!r}")
  return raw


def _device(name: str, raw: str) -> str:
  if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(:\d+)?", raw):
    raise KnobError(f"{name} must be a device name such as CPU or CUDA:1, got {raw!r}")
  return raw


def _viz(name: str, raw: str) -> int | str:
  """DEV.VIZ: 0 off, 1 record and serve (or write to a temporary directory), anything else a bundle directory."""
  if raw.strip() in ("0", "1"): return int(raw)
  if re.fullmatch(r"\s*[+-]?\d+\s*", raw): raise KnobError(f"{name} must be 0, 1 or a directory, got {raw!r}")
  if os.path.exists(raw) and not os.path.isdir(raw):
    raise KnobError(f"{name} must be 0, 1 or a directory, got file {raw!r}")
  return raw


@dataclass(frozen=True)
class Knob:
  """One knob: its name, how a value is checked and converted, its value when unset, what it does."""
  name: str
  parser: Callable[[str, str], Any]
  default: Any
  doc: str


KNOBS: dict[str, Knob] = {k.name: k for k in (
  Knob("DEBUG", _count, 0, "1 kernel counts and times, 2 each kernel, 3 generated source, 4 each linear program"),
  Knob("NOOPT", _flag, 0, "1: no optimisation pass (EXEC.OPT)"),
  Knob("BEAM", _count, 0, "N > 0: beam search of width N over kernel options (EXEC.OPT.beam)"),
  Knob("SANITIZE", _flag, 0, "1: the sanitizer (EXEC.SANITIZER) and checked kernels (EXEC.BOUNDS.checked)"),
  Knob("CPU_THREADS", _count, 0, "threads of the CPU device; 0: every core (DEV.C.threads)"),
  Knob("PACK", _flag, 1, "0: no panel copy of large CPU matmul operands or long multi-axis sums (EXEC.SCHED.pack)"),
  Knob("CACHE", _flag, 1, "0: no disk caches (DEV.CPU.cache, EXEC.OPT.beam)"),
  Knob("CACHE_DIR", _directory, "", "the disk caches' folder (DEV.CPU.cache)"),
  Knob("CC", _command, "cc", "the CPU device's C compiler (DEV.CPU.compiler)"),
  Knob("DEV", _device, "PYTHON", "the default device (DEV.REGISTRY)"),
  Knob("CL_PLATFORM", _count, 0, "the first OpenCL platform searched for devices (DEV.CL)"),
  Knob("VIZ", _viz, 0, "1: record every graph_rewrite and serve the explorer at exit; DIR: write the bundle there "
      "(DEV.VIZ)"),
)}


def parse(name: str, raw: str) -> Any:
  """The value of knob `name` given as the string `raw` (its default when empty); KnobError if out of range."""
  k = KNOBS[name]
  return k.default if raw == "" else k.parser(name, raw)


def knob(name: str) -> Any:
  """The value of knob `name` now, validated (DEV.KNOBS); not cached, so a test or Context may change it."""
  return parse(name, os.environ.get(name, ""))


def check_environment(environ=None) -> None:
  """Validate every knob that is set (DEV.KNOBS); refimpl's import runs this."""
  env = os.environ if environ is None else environ
  for name in KNOBS:
    if name in env: parse(name, env[name])


def cache_root() -> str | None:
  """The disk caches' folder: $CACHE_DIR, else $XDG_CACHE_HOME/tinyspec, else ~/.cache/tinyspec; None with CACHE=0."""
  if not knob("CACHE"): return None
  return knob("CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                           "tinyspec")


@functools.cache
def _environ(key: str, default: Any) -> Any:
  # DEV.KNOBS: a knob of refimpl's is validated; empty means unset
  if key not in KNOBS: return type(default)(os.environ.get(key, default))
  raw = os.environ.get(key, "")
  return default if raw == "" else type(default)(parse(key, raw))


def getenv(key: str, default: Any = 0) -> Any:
  """An environment knob (DEBUG, NOOPT, SANITIZE, ...) converted to the type of `default` (API.GETENV). Read from
  the environment once per (key, default) and cached; `Context` changes the environment and clears the cache. The
  knobs of KNOBS are validated (DEV.KNOBS)."""
  return _environ(key, default)


getenv.cache_clear = _environ.cache_clear   # tinygrad's getenv is a functools.cache: programs may call this


class Context(contextlib.ContextDecorator):
  """Set knobs for a block (API.CONTEXT): `with Context(DEBUG=2, NOOPT=1): ...` or as a decorator. Each knob is
  an environment variable for the length of the block, so every reader sees it, whether it reads through getenv
  (whose cache is cleared on entry and exit) or the environment directly; on exit the previous values come back
  (unset ones are unset again), also when the block raises. Not thread-safe: the environment is the process's. A knob
  of KNOBS is validated here, before the block runs (DEV.KNOBS)."""

  def __init__(self, **kwargs):
    for k, v in kwargs.items():
      if not isinstance(v, (bool, int, str)):
        raise SpecError("API.CONTEXT", f"knob {k}={v!r}: a knob's value is an int, bool or str")
      if k in KNOBS: parse(k, _text(v))
    self.kwargs = kwargs

  def __enter__(self):
    self._old: dict[str, str | None] = {k: os.environ.get(k) for k in self.kwargs}
    for k, v in self.kwargs.items(): os.environ[k] = _text(v)
    _environ.cache_clear()
    return self

  def __exit__(self, *exc):
    for k, old in self._old.items():
      if old is None: os.environ.pop(k, None)
      else: os.environ[k] = old
    _environ.cache_clear()
    return False


def _text(v: bool | int | str) -> str: return str(int(v)) if isinstance(v, bool) else str(v)


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
