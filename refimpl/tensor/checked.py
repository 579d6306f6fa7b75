"""Checked indices (API.INDEX.checked): index values that only the data knows (tensor indices, gather and scatter
indices, one_hot and loss labels, Embedding indices) are out of range by default without an error, as each op's
clause defines (API.INDEX.data). With the knob CHECK_INDEX=1 the ops realize those values first and refuse one out of
range with an IndexError naming the op's clause, as torch does. The check reads data back, so it costs a realize."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from refimpl.helpers import SpecIndexError, getenv

if TYPE_CHECKING: from refimpl.tensor.core import Tensor


def checked_indices() -> bool:
  """Whether CHECK_INDEX is set (API.INDEX.checked), read through getenv so that Context(CHECK_INDEX=1) works."""
  return bool(getenv("CHECK_INDEX", 0))


def check_index_range(index: Tensor, n: int, clause: str, what: str, negative: bool = False,
                      ignore: int | None = None) -> None:
  """Realize `index` and refuse a value outside [0, n) ([-n, n) with `negative`), other than `ignore`, with an
  IndexError naming `clause` (API.INDEX.checked)."""
  values = index.numpy().astype(np.int64)
  lo = -n if negative else 0
  bad = (values < lo) | (values >= n)
  if ignore is not None: bad &= values != ignore
  if bad.any():
    raise SpecIndexError(clause, f"{what} {int(values[bad].flat[0])} is out of range [{lo}, {n}) (CHECK_INDEX=1, "
                         "API.INDEX.checked)")
