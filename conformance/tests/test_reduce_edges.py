"""EXEC.REDUCE.edges: every row of the reduction edge table of spec/kernels.md, run through the adapter (Tensor.sum,
prod, max, min, any, all over one axis) and compared bit for bit: signed zeros in both orders, NaN anywhere,
infinities, empty groups (max and min of none are refused with IndexError, API.ARGS.empty-reduce), overflow of
the accumulator, and lengths around the optimiser's unroll and upcast sizes.
Rows of one (op, dtype, length) run as one tensor of several identical groups, so that on an optimising backend the
groups also cross EXEC.OPT.default's size threshold and its tails (upcast lanes, unrolled loops). numpy computes each
row a second time where it defines the value, as an oracle for the table itself."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance.spec_tables import parse_value, tables
from conformance.strategies import NP
from refimpl.dtype import to_dtype

KERNELS_SPEC = Path(__file__).resolve().parent.parent.parent / "spec" / "kernels.md"
HEADER = ("op", "dtype", "values", "to", "result")
REFUSED = "IndexError"   # a result cell for a row the Tensor refuses (API.ARGS.empty-reduce), not a value
SMALL_WORK = 2 ** 14   # EXEC.OPT.default: below this many loop iterations a kernel runs as lowered


def group(cell: str, dtype: str) -> list:
  """The values of a `values` cell: comma-separated OP.TABLES cells, each with an optional `*n` repeat; `()` empty."""
  if cell.strip() == "()": return []
  out = []
  for item in cell.split(","):
    v, _, n = item.strip().partition("*")
    out += [parse_value(v, to_dtype(dtype))] * (int(n) if n else 1)
  return out


def rows() -> list[tuple[str, ...]]:
  found = [rs for clause, header, rs in tables(KERNELS_SPEC) if clause == "EXEC.REDUCE.edges" and header == HEADER]
  assert len(found) == 1, "spec/kernels.md: EXEC.REDUCE.edges needs exactly one table"
  return found[0]


def _groups() -> dict[tuple[str, str, int], list[tuple[list, str, str, str]]]:
  out = defaultdict(list)
  for op, dtype, values, to, result in rows():
    vals = group(values, dtype)
    out[(op, dtype, len(vals))].append((vals, to, result, values))
  return out


GROUPS = _groups()
def _refused(key) -> bool:
  """Whether the rows of `key` are refusals; a length holds refused rows only or none, as the input is one tensor."""
  kinds = {result == REFUSED for _, _, result, _ in GROUPS[key]}
  assert len(kinds) == 1, f"EXEC.REDUCE.edges: rows of {key} mix refusals and values"
  return kinds.pop()


CASES = [pytest.param(k, id=f"{k[0]}-{k[1]}-{k[2]}", marks=[
  pytest.mark.clauses("EXEC.REDUCE.edges", "EXEC.THREAD.reduce", "DT.SUM", "OP.MAX.zero", "OP.MAX.nan",
                      *(("API.ARGS.empty-reduce",) if _refused(k) else ())),
  pytest.mark.conformance(op=k[0], dtype=k[1], prop="reduce_edges")]) for k in sorted(GROUPS)]


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Bit-exact as the value model compares (OP.VALUES): NaN matches NaN, -0.0 differs from 0.0."""
  if got.dtype.kind != "f": return got == want
  with np.errstate(invalid="ignore"):
    return (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))


def numpy_oracle(op: str, dtype: str, vals: list, to: str):
  """The row computed with numpy (bfloat16 rounded by torch), or None where numpy leaves it open: the sign of a
  zero that max or min returns (np.maximum returns either operand of equal values)."""
  acc = np.float32 if dtype in ("float16", "bfloat16") and op in ("sum", "prod") else NP[to]
  x = np.array(vals, dtype=NP[dtype]).astype(acc) if op not in ("any", "all") else np.array(vals, NP[dtype]) != 0
  with np.errstate(all="ignore"):
    if op == "sum": r = np.add.reduce(x, initial=acc(0))        # the fold starts from +0.0 (EXEC.THREAD.reduce)
    elif op == "prod": r = np.multiply.reduce(x, initial=acc(1))
    elif op == "any": r = np.logical_or.reduce(x, initial=False)
    elif op == "all": r = np.logical_and.reduce(x, initial=True)
    else:
      lo = -np.inf if dtype in ("float16", "bfloat16", "float32", "float64") else (False if dtype == "bool" else
                                                                                  np.iinfo(NP[dtype]).min)
      hi = -lo if isinstance(lo, float) else (True if dtype == "bool" else np.iinfo(NP[dtype]).max)
      r = np.maximum.reduce(x, initial=lo) if op == "max" else np.minimum.reduce(x, initial=hi)
      if r == 0 and np.asarray(r).dtype.kind == "f": return None
    r = np.asarray(r).astype(NP[to])
    if to == "bfloat16": r = torch.tensor(float(r), dtype=torch.float32).to(torch.bfloat16).float().numpy()
  return r


@pytest.mark.parametrize("key", CASES)
def test_reduce_edge_rows(adapter, backend, key):
  op, dtype, n = key
  for d in {dtype, *(r[1] for r in GROUPS[key])}:
    if (why := adapter.unsupported_dtype(d)): pytest.skip(why)
  entries = GROUPS[key]
  # the rows of this length, each repeated so that the kernel reaches the optimiser's sizes off PYTHON (which
  # optimises nothing, EXEC.OPT.default), an odd count so that upcast lanes have a tail
  copies = 3 if backend == "PYTHON" else max(3, SMALL_WORK // max(n * len(entries), 1) + 3) | 1
  x = np.array([vals for vals, *_ in entries for _ in range(copies)], dtype=NP[dtype]).reshape(len(entries) * copies, n)
  if _refused(key):   # max/min of an empty group: no value, refused before any kernel as torch does
    with pytest.raises(IndexError, match="API.ARGS.empty-reduce"):
      adapter.evaluate(f"x.{op}(axis=1)", {"x": adapter.tensor(x, dtype)}, {})
    return
  got_t = adapter.evaluate(f"x.{op}(axis=1)", {"x": adapter.tensor(x, dtype)}, {})
  got = np.asarray(adapter.numpy(got_t)).reshape(len(entries), copies)
  bad, oracle_bugs = [], []
  for i, (vals, to, result, cell) in enumerate(entries):
    assert adapter.dtype_name(got_t) == to, f"{op} of {dtype} has dtype {adapter.dtype_name(got_t)}, the table {to}"
    want = np.array(parse_value(result, to_dtype(to)), dtype=NP[to])
    if not _same(got[i], np.broadcast_to(want, got[i].shape)).all():
      bad.append(f"{op}({cell}) in {dtype} = {got[i][~_same(got[i], want)][0]!r}, the table says {result}")
    second = numpy_oracle(op, dtype, vals, to)
    if second is not None and not _same(np.asarray(second), want):
      oracle_bugs.append(f"{op}({cell}) in {dtype}: the table says {result}, numpy {second!r}")
  assert not oracle_bugs, "oracle bug, EXEC.REDUCE.edges: the table and numpy disagree: " + "; ".join(oracle_bugs)
  assert not bad, "EXEC.REDUCE.edges: " + "; ".join(bad)
