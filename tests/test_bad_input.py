"""The bad-input catalogue (spec/api_errors.md, issue 17): every case refuses with the class API.ERRORS gives and a
message that starts with its clause, on PYTHON, CPU and CL (where an OpenCL driver exists); valid edge input gives
torch's value. The API.ERRORS table is read from the spec and each example run. The conformance CLI's refusals name
what is wrong."""
from __future__ import annotations

import builtins
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance.spec_tables import tables
from refimpl import Context, Tensor, dtypes
from refimpl.device import Device
from refimpl.helpers import SpecError
from tests import bad_input_more as more
from refimpl.tensor.core import live_tensors
from tests import bad_input_tensor as tensor_cases

ROOT = Path(__file__).resolve().parent.parent


def _cl_driver() -> str | None:
  """None where an OpenCL driver answers (PoCL in CI), else why not: the catalogue then runs on PYTHON and CPU only."""
  try: Device["CL"]
  except SpecError as e: return f"DEV.REGISTRY: no CL device here ({e})"
  return None


_NO_CL = _cl_driver()
DEVICES = ["PYTHON", "CPU", pytest.param("CL", marks=pytest.mark.skipif(_NO_CL is not None, reason=_NO_CL or ""))]
CASES = (tensor_cases.ISSUE + tensor_cases.SHAPES + tensor_cases.AXES + tensor_cases.EMPTY + tensor_cases.ELEMENTWISE
         + more.INDEXING + more.CONV + more.NN + more.LOSSES + more.STATE + more.OTHER)


def test_catalogue_is_large_and_unique():
  ids = [c.id for c in CASES] + [e.id for e in more.EDGES]
  assert len(set(ids)) == len(ids), sorted({i for i in ids if ids.count(i) > 1})
  assert len(CASES) + len(more.EDGES) >= 250


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_is_refused(case, device):
  with pytest.raises(case.exc) as info: case.call(device)
  err = info.value
  assert isinstance(err, SpecError), f"{type(err).__name__} is not a SpecError: {err}"
  assert err.clause == case.clause and str(err).startswith(case.clause + ": "), str(err)


def _same(ours, ref) -> None:
  if isinstance(ref, torch.Tensor):
    assert isinstance(ours, Tensor), ours
    assert ours.shape == tuple(ref.shape), (ours.shape, tuple(ref.shape))
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6, equal_nan=True)
  else: assert ours == ref or (isinstance(ref, float) and abs(ours - ref) < 1e-6), (ours, ref)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("edge", more.EDGES, ids=lambda e: e.id)
def test_valid_edge_input_matches_torch(edge, device):
  _same(edge.ours(device), edge.ref())


# ---- API.ERRORS: the table of the spec, row by row ----

_TABLE = next(rows for clause, header, rows in tables(ROOT / "spec" / "api_errors.md") if clause == "API.ERRORS")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row", _TABLE, ids=lambda r: r[0])
def test_api_errors_table(row, device):
  """Each row's example raises the row's class (a SpecError too), its message starting with the row's clause. The
  examples use `x` (1, 1, 4, 4) and `w` (1, 1, 2, 2) and run with CHECK_INDEX=1."""
  _, cls_name, example, clause = row
  cls = getattr(builtins, cls_name)
  example, clause = example.strip("`").split("` with")[0], clause.strip("`")
  env = {"Tensor": Tensor, "dtypes": dtypes, "x": Tensor.ones(1, 1, 4, 4, device=device),
         "w": Tensor.ones(1, 1, 2, 2, device=device)}
  with Context(CHECK_INDEX=1), pytest.raises(cls) as info: eval(example.replace("Tensor.ones(", "Tensor.ones("), env)
  assert isinstance(info.value, SpecError) and str(info.value).startswith(clause + ": "), str(info.value)


def test_axis_error_is_caught_as_index_error_and_names_argument():
  """API.ERRORS: `except IndexError` catches an axis out of range, and the message names the clause and argument."""
  try: Tensor.ones(2, 3).transpose(0, 4)
  except IndexError as e: assert str(e).startswith("API.ARGS.axis: dim1=4"), str(e)
  else: pytest.fail("no IndexError")


def test_spec_error_pickles():
  import pickle
  from refimpl.helpers import SpecIndexError
  e = pickle.loads(pickle.dumps(SpecIndexError("API.ARGS.axis", "axis=3")))
  assert isinstance(e, IndexError) and e.clause == "API.ARGS.axis" and str(e) == "API.ARGS.axis: axis=3"


def test_refused_call_builds_nothing():
  """Validation happens before any graph: a refused call leaves no new live tensor behind."""
  before = len(live_tensors())
  x = Tensor.ones(2, 3)
  with pytest.raises(ValueError): x.sum(axis=(0, 0))
  with pytest.raises(IndexError): x.flip(3)
  assert len(live_tensors()) == before + 1


# ---- the conformance CLI ----

def _cli(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True, text=True, cwd=ROOT,
                        timeout=120)


def test_merge_of_a_corrupt_report_names_the_file(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  (run / "conformance.json").write_text("{not json")
  res = _cli("merge", str(run), "-o", str(tmp_path / "out"))
  assert res.returncode == 2 and str(run / "conformance.json") in res.stderr and "not valid JSON" in res.stderr


def test_merge_of_a_report_without_fields_names_the_dir(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  (run / "conformance.json").write_text(json.dumps([1, 2]))
  res = _cli("merge", str(run), "-o", str(tmp_path / "out"))
  assert res.returncode == 2 and str(run) in res.stderr and "not a conformance report" in res.stderr


def test_merge_of_a_missing_dir(tmp_path):
  res = _cli("merge", str(tmp_path / "nowhere"), "-o", str(tmp_path / "out"))
  assert res.returncode == 2 and "nowhere" in res.stderr


@pytest.mark.parametrize("spec, cls, words", [("collections:OrderedDict", TypeError, "is not a conformance.adapters"),
                                               ("collections:NoSuchThing", ValueError, "has no NoSuchThing"),
                                               ("collections", ValueError, "module:Class")])
def test_impl_that_is_not_an_adapter(spec, cls, words):
  from conformance.adapters import load_adapter
  with pytest.raises(cls, match=words): load_adapter(spec, "PYTHON")


def test_unknown_tolerance_key_is_refused_where_the_op_is_declared():
  """CONF.GRADE.tolerance: a key spec/accuracy.md lacks is a ValueError at declaration naming op, key and valid keys,
  not a crash inside hypothesis later (the hung-op case of this family, CONF.GRADE.timeout, needs a process and a
  time limit: tests/test_conformance_grade.py::test_a_hung_op_times_out_and_the_run_goes_on)."""
  from conformance.contrib import op
  with pytest.raises(ValueError, match=r"(?s)softer.*NO_SUCH_KEY.*EXACT"):
    op("softer", torch="x / (1 + x.abs())", tolerance="NO_SUCH_KEY")(lambda x: x)
