"""Reproductions rebuild what the failing test ran (CONF.REPORT): input arrays keep their shape when empty, and a
VJP reproduction makes its cotangents the way the adapter made them in the test (`Adapter.repro_tensor`). Both were
suite bugs found by the tinygrad run (docs/tinygrad-conformance.md): an input of shape (0, 3) came back as (0,), and a
cotangent pasted as a plain `Tensor(np.array(...))` became a constant in tinygrad, which then gave another gradient."""
from __future__ import annotations

import contextlib
import io

import numpy as np

from conformance import properties
from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import OPS
from conformance.strategies import Case


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
  assert namespace["out"].shape == (0,) and printed.strip() == "[]", printed


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
