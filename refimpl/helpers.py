"""Small shared pieces: environment knobs and the error type that names a spec clause."""
from __future__ import annotations

import functools
import os


class SpecError(Exception):
  """A violation of the spec: bad input, an ill-typed graph, an unsupported dtype. `clause` is the ID of the
  clause that was broken (e.g. 'UOP.ADD' or 'DT.PROMOTE'); the message starts with it."""
  def __init__(self, clause: str, message: str):
    self.clause = clause
    super().__init__(f"{clause}: {message}")


@functools.cache
def getenv(key: str, default=0):
  """An environment knob (DEBUG, NOOPT, SANITIZE, ...) converted to the type of `default`; read once."""
  return type(default)(os.environ.get(key, default))
