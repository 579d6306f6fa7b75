"""EXEC.OPT.exact over the suite's own kernels (issue 19 item 1): every forward op of the conformance catalogue, run on
the CPU with the optimisation pass's default options and with NOOPT=1, gives the same bits. The catalogue's examples
are small, and the heuristic leaves kernels under SMALL_WORK loop iterations as lowered, so the test sets SMALL_WORK to
2: every kernel of two iterations or more then gets the options the heuristic picks for its shape, with the tails
(EXEC.OPT.tail) that small shapes bring. Six derandomized examples per op and dtype (float32, and int32 where the op
takes it; the first example is the smallest); NaN payloads aside (not observable: OP.VALUES.nan)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import tensor_entries
from conformance.properties import _outputs, _read, _run
from refimpl.codegen import opt

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("cc") is None,
                                                   reason="DEV.COMPILE: no C compiler: the CPU cannot compile")]

CASES = [(op, dt) for op in tensor_entries() for dt in ("float32", "int32") if dt in op.domain.dtypes]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
  if a.shape != b.shape or a.dtype != b.dtype: return False
  if a.dtype.kind == "f":
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | (a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}"))))
  return a.tobytes() == b.tobytes()


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{op.name}-{dt}" for op, dt in CASES])
@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_default_options_give_noopt_bits(op, dtype, data, monkeypatch):
  adapter = RefimplAdapter("CPU")
  if adapter.unsupported(op.name) or adapter.unsupported_dtype(dtype): pytest.skip(f"DEV.DTYPE: {op.name} {dtype}")
  case = data.draw(op.cases(dtype), label="case")
  monkeypatch.setattr(opt, "SMALL_WORK", 2)
  results = []
  for noopt in ("1", ""):
    monkeypatch.setenv("NOOPT", noopt)
    try: results.append([_read(adapter, t)[0] for t in _outputs(_run(adapter, op, case))])
    except Exception as e: results.append(f"{type(e).__name__}: {e}")
  plain, optimised = results
  if isinstance(plain, str) or isinstance(optimised, str):   # a refusal must be the same refusal (API.ARGS)
    assert plain == optimised, (op.name, dtype, case)
    return
  assert len(plain) == len(optimised)
  for i, (a, b) in enumerate(zip(plain, optimised)):
    assert _same(np.asarray(a), np.asarray(b)), f"{op.name} {dtype} output {i}: NOOPT {a!r}, default options {b!r}"
