"""Expected failures.

- `XFAILS`: (backend, op, dtype, property) -> reason, naming the clause a backend does not meet or the bug that makes
  it fail; `*` matches any backend or dtype. Strict: an expected failure that passes fails the run, so a fixed bug or
  a newly conforming backend is noticed and its entry removed. Properties: forward, alu, vjp, fd, second_order,
  fusion, edge_table.
- `BUGS`: known bugs of an implementation, each with a pinned reproduction that conformance/tests/test_known_bugs.py
  runs as a strict expected failure. The property domains stay clear of a listed bug's trigger (the entry's domain
  cites it), so the rest of the op is still checked; when the bug is fixed its reproduction passes, the run fails,
  and the entry and the domain's detour are removed together.

Unsupported dtypes are not listed: the suite skips them with the backend's DEV.DTYPE reason.
"""
from __future__ import annotations

from dataclasses import dataclass


from conformance.strategies import Case

__all__ = ["XFAILS", "BUGS", "Bug", "expected_failure"]

XFAILS: dict[tuple[str, str, str, str], str] = {
}


@dataclass(frozen=True)
class Bug:
  """A known bug of implementation `impl` (an adapter name): the catalogue entry and property it breaks, the
  backends it shows on ('*': all), what is wrong (naming the clause), and a reproduction as a dtype and a Case."""
  id: str
  op: str
  prop: str
  backends: str
  reason: str
  dtype: str
  case: Case
  impl: str = "refimpl"


BUGS: list[Bug] = [
]


def expected_failure(backend: str, op: str, dtype: str, prop: str) -> str | None:
  """The reason `op` in `dtype` is expected to fail `prop` on `backend`, or None."""
  for b in (backend, "*"):
    for d in (dtype, "*"):
      if (b, op, d, prop) in XFAILS: return XFAILS[(b, op, d, prop)]
  return None
