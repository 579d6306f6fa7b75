"""Reproductions rebuild what the failing test ran (CONF.REPORT): input arrays keep their shape when empty, and a
VJP reproduction makes its cotangents the way the adapter made them in the test (`Adapter.repro_tensor`). Both were
suite bugs found by the tinygrad run (docs/tinygrad-conformance.md): an input of shape (0, 3) came back as (0,), and a
cotangent pasted as a plain `Tensor(np.array(...))` became a constant in tinygrad, which then gave another gradient."""
from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance import properties
from conformance.adapters.base import Adapter
from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import OPS
from conformance.strategies import Case

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests.planted_adapter, as --impl names it
from tests.planted_adapter import CorrectAdapter, PlantedAdapter   # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _run(source: str) -> tuple[dict, str]:
  namespace: dict = {}
  out = io.StringIO()
  with contextlib.redirect_stdout(out): exec(source, namespace)   # noqa: S102 (a reproduction the suite wrote)
  return namespace, out.getvalue()


def test_empty_inputs_keep_their_shape():
  case = Case([np.zeros((0, 3), np.float32)], ["float32"], {"axis": 1, "keepdim": False})
  source = properties.reproduction(RefimplAdapter("PYTHON"), OPS["sum"], case)
  namespace, printed = _run(source)
  assert namespace["x"].shape == (0, 3), source
  assert namespace["out"].shape == (0,) and namespace["got"][0].shape == (0,), printed


class _WrongGradient(RefimplAdapter):
  """Doubles every gradient, and makes its tensors through a helper that its reproductions define too."""

  def gradient(self, y, xs, cotangent):
    return [g * 2 for g in super().gradient(y, xs, cotangent)]

  def repro_prelude(self) -> list[str]:
    return ["from refimpl import Tensor, Device, dtypes", f"Device.DEFAULT = {self.backend!r}",
            "made = []", "def tensor(a, dt):", "  made.append(a.shape)", "  return Tensor(a, dtype=dt)"]

  def repro_tensor(self, array: str, dtype: str) -> str:
    return f"tensor({array}, {dtype!r})"


def test_vjp_reproduction_makes_cotangents_as_the_adapter_does():
  case = Case([np.array([[0.5, -1.0, 2.0]], np.float32)], ["float32"], {})
  result = properties.vjp(_WrongGradient("PYTHON"), OPS["sin"], case, "float32", seed=3)
  assert not result.ok and "GRAD.CHECK" in result.message, result.message
  source = result.message.split("--- reproduction ---\n", 1)[1]
  namespace, printed = _run(source)
  assert namespace["made"] == [(1, 3), (1, 3)], source   # the input, then the cotangent, both through tensor()
  printed_grads = eval(printed.strip(), {"array": np.array, "float32": np.float32})   # noqa: S307 ([array(...)])
  want = np.cos(case.inputs[0]) * namespace["g_"].numpy()   # refimpl's own (right) gradient for the pasted cotangent
  np.testing.assert_allclose(printed_grads[0], want, rtol=1e-6)


# ---- CONF.REPRO: reproductions in the adapter's own API that assert the expected value (issue 18)

def _paste(source: str) -> subprocess.CompletedProcess:
  """Run a reproduction as a user pasting it would: a fresh Python process in the checkout."""
  return subprocess.run([sys.executable, "-c", source], cwd=ROOT, capture_output=True, text=True, timeout=300)


F32 = Case([np.array([[0.5, -1.0, 2.0]], np.float32)], ["float32"], {})
F64 = Case([np.array([[0.5, -1.0, 2.0]], np.float64)], ["float64"], {})
PROPERTIES = {   # property: (the planted bug it meets, how to run it)
  "forward": lambda ad: properties.forward(ad, OPS["exp"], F32, "float32"),
  "vjp": lambda ad: properties.vjp(ad, OPS["exp"], F64, "float64", seed=3),
  "fd": lambda ad: properties.finite_differences(ad, OPS["sin"], F64, seed=3),
  "second_order": lambda ad: properties.second_order(ad, OPS["exp"], F64, "float64", seed=3),
}


@pytest.mark.parametrize("prop", list(PROPERTIES))
def test_a_planted_bug_gives_a_reproduction_that_fails_and_passes_once_fixed(prop):
  """CONF.REPRO.assert, CONF.REPRO.fd, CONF.REPRO.second-order, CONF.REPRO.hook: the reproduction of a failure of the
  planted implementation (tests/planted_adapter.py) imports it through its adapter's repro_prelude, asserts torch's
  value under the accuracy contract, and fails with an AssertionError when pasted; the same lines over the correct
  implementation pass. The correct adapter passes the property itself too."""
  planted, correct = PlantedAdapter("PYTHON"), CorrectAdapter("PYTHON")
  outcome = PROPERTIES[prop](planted)
  assert not outcome.ok, outcome
  source = outcome.message.split("--- reproduction ---\n", 1)[1]
  assert "from tests.planted_adapter import Tensor" in source and source.rstrip().splitlines()[-1].startswith(
    ("check(", "assert ")), source   # the assertion is the message's last line
  bad = _paste(source)
  assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("AssertionError: "), bad.stderr
  if prop == "fd":   # the whole check: the step, the direction, the cotangent and the two values compared
    assert all(f"{v} = " in source for v in ("h", "g", "v_x", "x0_x", "plus", "minus", "fd", "an", "tol")), source
    assert "finite differences give" in bad.stderr, bad.stderr
  else:
    assert "elements differ" in bad.stderr, bad.stderr
  good = _paste(source.replace("\n".join(planted.repro_prelude()), "\n".join(correct.repro_prelude())))
  assert good.returncode == 0, good.stderr
  assert PROPERTIES[prop](correct).ok


def test_a_crash_reproduction_fails_with_an_assertion_error():
  """A crash reproduces as an AssertionError naming the exception, like a wrong value."""
  class Crashing(CorrectAdapter):
    def repro_prelude(self):
      return [*super().repro_prelude(), "Tensor.exp = lambda self: 1 / 0   # the planted crash"]

    def evaluate(self, expr, inputs, params):
      raise ZeroDivisionError("division by zero")
  outcome = properties.forward(Crashing("PYTHON"), OPS["exp"], F32, "float32")
  assert not outcome.ok and "raised ZeroDivisionError" in outcome.message
  bad = _paste(outcome.message.split("--- reproduction ---\n", 1)[1])
  assert bad.returncode == 1 and "AssertionError: exp raised ZeroDivisionError: division by zero" in bad.stderr


def test_a_third_party_reproduction_does_not_import_refimpl():
  """CONF.REPRO.hook: the base Adapter's repro_prelude imports the adapter's namespace() from where it is defined, so
  a reproduction for another implementation (tinygrad here) names only that implementation."""
  import tinygrad

  class Third(Adapter):
    def namespace(self):
      return {"Tensor": tinygrad.Tensor, "dtypes": tinygrad.dtypes, "nn": tinygrad.nn}
  source = properties.reproduction(Third("CPU"), OPS["exp"], F32)
  assert "refimpl" not in source, source
  assert source.splitlines()[1:4] == ["from tinygrad.tensor import Tensor", "from tinygrad.dtype import dtypes",
                                      "import tinygrad.nn as nn"], source


def test_the_reproduction_is_the_last_section_of_a_failing_test():
  """CONF.REPRO.last: after hypothesis' notes and pytest's explanation, a failing conformance test prints the
  reproduction of the minimal example as its last section, and pasting that section fails."""
  proc = subprocess.run([sys.executable, "-m", "pytest", "conformance/tests/test_forward.py::test_forward[exp-float32]",
                         "-p", "no:cacheprovider", "--impl", "tests.planted_adapter:PlantedAdapter"],
                        cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 1, proc.stdout[-3000:]
  failure = proc.stdout.split("_ test_forward[exp-float32] _", 1)[1].split("===== conformance summary")[0]
  head, section = failure.rsplit(" reproduction (paste into Python; it fails while the bug is there) ", 1)
  assert "@reproduce_failure" in head   # hypothesis' notes come before it
  source = section.split("\n", 1)[1].strip()
  assert source.splitlines()[-1].startswith("check(got[0], want"), source
  bad = _paste(source)
  assert bad.returncode == 1 and "AssertionError" in bad.stderr, bad.stderr


LINEAR_BUG = "import refimpl.nn\n_right = refimpl.nn.Linear.__call__\n" \
             "refimpl.nn.Linear.__call__ = lambda self, x: _right(self, x) * 1.01   # the planted bug\n"


@pytest.mark.parametrize("prop", ["forward", "vjp"])
def test_a_layer_reproduction_asserts_torch_value(monkeypatch, prop):
  """CONF.REPRO.assert for layers: nn.Linear planted 1% too large fails layer_forward and layer_vjp; the
  reproduction, run with the same bug, fails with an AssertionError, and without it passes."""
  import refimpl.nn
  from hypothesis import HealthCheck, Phase, find, settings
  from conformance import layer_properties as L
  from conformance.catalogue.layers import LAYERS
  right = refimpl.nn.Linear.__call__
  monkeypatch.setattr(refimpl.nn.Linear, "__call__", lambda self, x: right(self, x) * 1.01)
  entry, adapter = next(e for e in LAYERS if e.name == "Linear"), RefimplAdapter("PYTHON")
  dtype = "float32" if prop == "forward" else "float64"
  run = (lambda c: L.layer_forward(adapter, entry, c, dtype)) if prop == "forward" else \
    (lambda c: L.layer_vjp(adapter, entry, c, dtype, 3))
  search = settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                    phases=(Phase.generate,))   # the first failing example will do: shrinking costs minutes
  source = run(find(L.layer_cases(entry, dtype), lambda c: not run(c).ok, settings=search)).message.split(
    "--- reproduction ---\n", 1)[1]
  bad, good = _paste(LINEAR_BUG + source), _paste(source)
  assert bad.returncode == 1 and "AssertionError: " in bad.stderr and "elements differ" in bad.stderr, bad.stderr
  assert good.returncode == 0, good.stderr


SGD_BUG = "import refimpl.nn.optim\n_right = refimpl.nn.optim.SGD\n" \
          "refimpl.nn.optim.SGD = lambda params, lr=0.001, **k: _right(params, lr * 1.5, **k)   # the planted bug\n"


def test_an_optimizer_reproduction_asserts_the_expected_parameters(monkeypatch):
  """CONF.REPRO.assert for optimizers: SGD planted with a learning rate 1.5 times too large fails optimizer_steps;
  the reproduction, run with the same bug, fails with an AssertionError on the parameter that broke, and without the
  bug it passes."""
  import refimpl.nn.optim
  from hypothesis import HealthCheck, Phase, find, settings
  from conformance import optim_properties as O
  from conformance.catalogue.optimizers import OPTIMIZERS
  right = refimpl.nn.optim.SGD
  monkeypatch.setattr(refimpl.nn.optim, "SGD", lambda params, lr=0.001, **k: right(params, lr * 1.5, **k))
  entry, adapter = next(e for e in OPTIMIZERS if e.name == "SGD"), RefimplAdapter("PYTHON")
  def run(c): return O.optimizer_steps(adapter, entry, c, "float32")
  search = settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                    phases=(Phase.generate,))   # the first failing example will do: shrinking costs minutes
  outcome = run(find(O.optim_cases(entry, "float32"), lambda c: not run(c).ok, settings=search))
  source = outcome.message.split("--- reproduction ---\n", 1)[1]
  assert source.splitlines()[-1].startswith("check(after["), source
  bad, good = _paste(SGD_BUG + source), _paste(source)
  assert bad.returncode == 1 and "AssertionError: " in bad.stderr and "elements differ" in bad.stderr, bad.stderr
  assert good.returncode == 0, good.stderr
