"""RW.FOLD.tested: every fold spec/rewrites.md forbids on floats or allows only under a guard, built at the Tensor level
through the adapter with the inputs that break the unsound version, and compared bit for bit with torch, or with
spec/ops.md's edge tables where torch defines nothing (conformance/folds.py has the cases and both namespaces).
tests/test_fold_tests.py fails when such a clause of spec/rewrites.md has no case here. $FOLD_LOG (a path), when set,
collects each failing case's message as a JSON line (tests/test_folds_planted.py reads it)."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from conformance.adapters.base import compiled
from conformance.folds import CASES, IMPL_HELPER_SOURCE, TORCH, FoldCase, dtype_name, impl_namespace, torch_tensor
from conformance.properties import adapter_prelude
from conformance.strategies import NP


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Bit-exact as the value model compares (OP.VALUES, RW.SOUND): NaN matches NaN, -0.0 differs from 0.0."""
  if want.dtype.kind != "f": return got == want
  with np.errstate(invalid="ignore"):
    return (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))


def _expected(case: FoldCase) -> tuple[str, np.ndarray]:
  """torch's (or the edge tables') dtype and values of the case."""
  inputs = {n: torch_tensor(v, dt) for n, (v, dt) in case.inputs.items()}
  out = eval(compiled(case.expr), {"__builtins__": __builtins__, **TORCH}, {**case.params, **inputs})  # noqa: S307
  dt = dtype_name(out)
  return dt, (out.float() if dt == "bfloat16" else out).numpy()


def reproduction(adapter, case: FoldCase) -> str:
  lines = [*adapter_prelude(adapter), "import numpy as np", "nan, inf = float('nan'), float('inf')",
           *IMPL_HELPER_SOURCE]
  for n, (v, dt) in case.inputs.items():
    lines.append(f"{n} = {adapter.repro_tensor(f'np.array({v!r}, dtype=np.{NP[dt].__name__})', dt)}")
  lines += [f"{k} = {v!r}" for k, v in case.params.items()]
  read = ".cast(dtypes.float32)" if case.name.endswith("bfloat16") else ""
  lines.append(f"print(({case.expr}){read}.numpy().tolist())")
  return "\n".join(lines)


PARAMS = [pytest.param(c, id=c.name, marks=[pytest.mark.clauses("RW.FOLD.tested", "RW.SOUND", *c.clauses),
                                            pytest.mark.conformance(op=f"fold.{c.name}", dtype="*", prop="fold")])
          for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_fold(adapter, case):
  # the inputs' dtypes and those the expression casts through (a device without float16 cannot run a trip through it)
  for dt in {dt for _, dt in case.inputs.values()} | set(re.findall(r"'(\w+)'", case.expr)):
    if (why := adapter.unsupported_dtype(dt)): pytest.skip(why)
  ns = impl_namespace(adapter.namespace())
  inputs = {n: adapter.tensor(np.array(v, dtype=NP[dt]), dt) for n, (v, dt) in case.inputs.items()}
  want_dt, want = _expected(case)
  if (why := adapter.unsupported_dtype(want_dt)): pytest.skip(why)
  where = f"{case.expr} with {', '.join(f'{n} = {v} ({dt})' for n, (v, dt) in case.inputs.items())}" + \
          "".join(f", {k} = {v!r}" for k, v in case.params.items())
  repro = f"\n--- reproduction ---\n{reproduction(adapter, case)}"
  try:
    _check(adapter, case, ns, inputs, want_dt, want, where, repro)
  except AssertionError as e:
    if path := os.environ.get("FOLD_LOG"):
      with open(path, "a") as f: f.write(json.dumps({"case": case.name, "message": str(e)}) + "\n")
    raise


def _check(adapter, case, ns, inputs, want_dt, want, where, repro) -> None:
  try:
    out = eval(compiled(case.expr), {"__builtins__": __builtins__, **ns}, {**case.params, **inputs})  # noqa: S307
    got_dt, got = adapter.dtype_name(out), np.asarray(adapter.numpy(out))
  except Exception as e:   # noqa: BLE001 (a refusal or a crashed kernel is this case's failure, reported with its input)
    raise AssertionError(f"{', '.join(case.clauses)}: {where} raised {type(e).__name__}: {e}{repro}") from e
  # raised, not asserted: pytest's assertion rewriting would indent the reproduction's lines
  if got_dt != want_dt:
    raise AssertionError(f"{', '.join(case.clauses)}: {where} has dtype {got_dt}, torch {want_dt}{repro}")
  got = got.reshape(want.shape).astype(want.dtype)
  bad = ~_same(got, want)
  if bad.any():
    raise AssertionError(f"{', '.join(case.clauses)}: {where}: got {got.tolist()}, want {want.tolist()} (first "
                         f"difference at index {int(np.flatnonzero(bad.ravel())[0])}){repro}")
