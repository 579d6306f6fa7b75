"""A third-party implementation with planted bugs, and its adapter, for tests of baselines and reproductions
(tests/test_conformance_baselines.py, tests/test_conformance_repro.py): `Tensor` is refimpl's with two bugs: `exp` one
percent too large, and `sin` with the right values but a gradient of 1 instead of cos (for finite inputs).
`PlantedAdapter` runs it through the adapter interface only, and its reproductions import this module
(Adapter.repro_prelude), so a pasted reproduction runs the buggy ops; `CorrectAdapter` is the same adapter over
refimpl's own Tensor."""
from __future__ import annotations

from typing import Any

import numpy as np

import refimpl
from conformance.adapters.refimpl import RefimplAdapter


class Tensor(refimpl.Tensor):
  """refimpl's Tensor with the planted bug."""

  def exp(self):
    return refimpl.Tensor.exp(self) * 1.01   # the bug: 1% too large

  def sin(self):
    return refimpl.Tensor.sin(self.detach()) + (self - self.detach())   # the bug: d/dx is 1


class PlantedAdapter(RefimplAdapter):
  """The buggy implementation on `backend`."""
  name = "planted"
  module = "tests.planted_adapter"

  def namespace(self) -> dict[str, Any]:
    return {**super().namespace(), "Tensor": Tensor}

  def tensor(self, array: np.ndarray, dtype: str) -> Tensor:
    return Tensor(np.asarray(array), dtype=dtype, device=self.backend)

  def repro_prelude(self) -> list[str]:
    return [f"from {self.module} import Tensor", "from refimpl import Device, dtypes",
            f"Device.DEFAULT = {self.backend!r}"]


class CorrectAdapter(PlantedAdapter):
  """The same adapter over refimpl's own Tensor: its reproductions pass."""
  name = "correct"

  def namespace(self) -> dict[str, Any]:
    return RefimplAdapter.namespace(self)

  def tensor(self, array: np.ndarray, dtype: str) -> refimpl.Tensor:
    return RefimplAdapter.tensor(self, array, dtype)

  def repro_prelude(self) -> list[str]:
    return ["from refimpl import Tensor, Device, dtypes", f"Device.DEFAULT = {self.backend!r}"]
