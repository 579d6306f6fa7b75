"""Parametrization shared by the property tests: one test per (catalogue entry, dtype), each marked with the clauses
it checks (`clauses` marker, for the coverage report) and its identity (`conformance` marker, for xfails.py)."""
from __future__ import annotations

import json
import os
from typing import Iterable

import numpy as np

import pytest

from conformance import accuracy as A
from conformance.catalogue import Op
from conformance.report import note


def acc_clause(key: str, dtype: str) -> str:
  """The ACC clause that bounds results of `dtype` under tolerance key `key`."""
  try: return A.bound(key, dtype).clause
  except KeyError: return f"ACC.{key}"


def cases(ops: Iterable[Op], prop: str, dtypes=None, grad: bool = False) -> list:
  """pytest params (op, dtype) for property `prop`, for each op's dtypes (or those of `dtypes` it has)."""
  out = []
  for op in ops:
    for dt in (op.grad_dtypes or op.domain.dtypes) if grad else op.domain.dtypes:
      if (dtypes is not None and dt not in dtypes) or (grad and not A.is_float(dt)): continue
      key = op.grad_tolerance if grad else op.tolerance
      clauses = (*op.clauses, acc_clause(key, dt))
      out.append(pytest.param(op, dt, id=f"{op.name}-{dt}", marks=[
        pytest.mark.clauses(*clauses), pytest.mark.conformance(op=op.name, dtype=dt, prop=prop)]))
  return out


def record(outcome, op: Op, dtype: str, prop: str) -> None:
  """Append the outcome to $CONFORMANCE_LOG (JSON lines) when set: the raw data for reports and for measuring how
  much of each bound the implementation uses (spec/accuracy.md); and note it for the reports (conformance.report)."""
  note(outcome)
  path = os.environ.get("CONFORMANCE_LOG")
  if not path: return
  with open(path, "a") as f:
    f.write(json.dumps({"op": op.name, "dtype": dtype, "prop": prop, "ok": outcome.ok,
                        "worst_ulps": outcome.worst_ulps if np.isfinite(outcome.worst_ulps) else None,
                        "used": outcome.details.get("used", 0.0), "clauses": list(outcome.clauses)}) + "\n")


def skip_unsupported(adapter, op: Op, dtype: str) -> None:
  """Skip (with the adapter's reason, DEV.DTYPE) a dtype the backend does not compute in, or an op it lacks."""
  for d in {dtype, *(op.domain.dtype_of(dtype, i) for i in range(len(op.domain.inputs)))}:
    if (why := adapter.unsupported_dtype(d)): pytest.skip(why)
  if (why := adapter.unsupported(op.name)): pytest.skip(why)
