"""EXEC.OPT.exact over the suite's own kernels (issue 19 item 1), run as a child process by tests/test_opt_suite.py:
every forward op of the conformance catalogue, run on the CPU with the optimisation pass's default options and with
NOOPT=1, gives the same bits.

The catalogue's examples are small, and the heuristic leaves kernels under SMALL_WORK loop iterations as lowered, so
this sets SMALL_WORK to 2: every kernel of two iterations or more then gets the options the heuristic picks for its
shape, with the tails (EXEC.OPT.tail) that small shapes bring. Six derandomized examples per op and dtype (float32, and
int32 where the op takes it); NaN payloads aside (not observable: OP.VALUES.nan). A refusal must be the same refusal
both ways (API.ARGS).

It runs in a process of its own because the lowered SMALL_WORK changes which options the engine chooses and caches
for a kernel (search and realize keep them per process): run beside other tests in one process, those tests saw
kernels optimised for the lowered threshold.

    python -m tests.opt_suite --shard 1/4     # prints one JSON line per mismatch, exits 1 if there is any
"""
from __future__ import annotations

import argparse
import json
import sys
import zlib

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import tensor_entries
from conformance.properties import _outputs, _read, _run
from refimpl import Context
from refimpl.codegen import opt

EXAMPLES = 6


def cases() -> list[tuple]:
  """(entry, dtype) for every forward op of the catalogue, in float32 and (where the op takes it) int32."""
  return [(op, dt) for op in tensor_entries() for dt in ("float32", "int32") if dt in op.domain.dtypes]


def case_id(op, dtype: str) -> str: return f"{op.name}-{dtype}"


def in_shard(name: str, shard: int, count: int) -> bool:
  """A fixed share of the cases by a stable hash of the name (not Python's hash, which changes per process)."""
  return zlib.crc32(name.encode()) % count == shard - 1


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
  if a.shape != b.shape or a.dtype != b.dtype: return False
  if a.dtype.kind == "f":
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | (a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}"))))
  return a.tobytes() == b.tobytes()


def _results(adapter, op, case) -> list | str:
  try: return [np.asarray(_read(adapter, t)[0]) for t in _outputs(_run(adapter, op, case))]
  except Exception as e: return f"{type(e).__name__}: {e}"   # noqa: BLE001 - a refusal is compared, not raised


def check(op, dtype: str) -> str | None:
  """None if the default options give NOOPT=1's bits on every example, else what differed on the first (shrunk) one."""
  adapter = RefimplAdapter("CPU")
  if adapter.unsupported(op.name) or adapter.unsupported_dtype(dtype): return None   # DEV.DTYPE: nothing to run

  @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
            suppress_health_check=list(HealthCheck))
  @given(data=st.data())
  def compare(data):
    case = data.draw(op.cases(dtype), label="case")
    with Context(NOOPT=1): plain = _results(adapter, op, case)
    optimised = _results(adapter, op, case)
    if isinstance(plain, str) or isinstance(optimised, str):
      assert plain == optimised, f"NOOPT=1 gave {plain!r:.300}, default options {optimised!r:.300}"
      return
    assert len(plain) == len(optimised), f"{len(plain)} outputs under NOOPT=1, {len(optimised)} with options"
    for i, (a, b) in enumerate(zip(plain, optimised)):
      assert same_bits(a, b), f"output {i}: NOOPT=1 {a!r:.300}, default options {b!r:.300}"

  try: compare()
  except AssertionError as e: return str(e)
  return None


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--shard", default="1/1", help="k/n: run the k-th of n fixed shares of the cases")
  ap.add_argument("--only", default=None, help="run the one case with this id (op-dtype)")
  args = ap.parse_args(argv)
  k, n = (int(x) for x in args.shard.split("/"))
  opt.SMALL_WORK = 2
  ran = failed = 0
  for op, dtype in cases():
    name = case_id(op, dtype)
    if (args.only is not None and name != args.only) or (args.only is None and not in_shard(name, k, n)): continue
    ran += 1
    problem = check(op, dtype)
    if problem is not None:
      failed += 1
      print(json.dumps({"case": name, "problem": problem}), flush=True)
  print(json.dumps({"ran": ran, "failed": failed}), flush=True)
  return 1 if failed or not ran else 0


if __name__ == "__main__":
  sys.exit(main())
