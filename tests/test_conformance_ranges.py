"""ACC.RANGE for products: the suite compares a product with torch's float64 value only where the fold the spec
defines (left to right in the accumulation dtype, EXEC.REDUCE.blocked) keeps every partial product ordinary. These
examples failed the prod and scatter_reduce forward properties before the masks existed (refimpl right by the spec,
torch's float64 product a different number), and pass with them; ordinary examples stay compared."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conformance.adapters.refimpl import RefimplAdapter
from conformance.catalogue import tensor_entries
from conformance.catalogue.core import chain_in_range
from conformance.properties import forward
from conformance.strategies import Case

BIG = 2.0 ** 64   # BIG * BIG is past float32's largest finite value, BIG * BIG * 0.5 is not
# (values, what refimpl's float32 fold gives: inf after an overflow, 0 after an underflow, NaN for inf * 0)
MIDWAY = [([BIG, BIG, 0.5], np.inf), ([2.0 ** -149, 2.0 ** -76, BIG, BIG], 0.0), ([BIG, BIG, 0.0], np.nan)]


def _entry(name: str, masked: bool = True):
  op = next(o for o in tensor_entries() if o.name == name)
  return op if masked else dataclasses.replace(op, torch_defined=None)


def test_chain_in_range():
  assert chain_in_range(np.array([[BIG, BIG, 0.5], [BIG, 0.5, BIG], [3.0, 0.0, BIG]]), "float32").tolist() == \
    [False, True, True]
  assert chain_in_range(np.array([BIG, BIG]), "float32").tolist() is True        # the last partial is the result
  assert chain_in_range(np.array([BIG, BIG]), "float32", final=True).tolist() is False
  assert chain_in_range(np.array([BIG, BIG, 0.5]), "float16").tolist() is False  # float16 folds in float32 (DT.SUM)
  assert chain_in_range(np.array([BIG, BIG, 0.5]), "float64").tolist() is True
  assert chain_in_range(np.array([np.inf, 0.0, BIG]), "float32").tolist() is True  # past a non-finite value: torch too
  assert chain_in_range(np.zeros((2, 0)), "float32").tolist() == [True, True]


@pytest.mark.parametrize("values,fold", MIDWAY)
def test_prod_midway_overflow_is_not_compared_with_torch(values, fold):
  ad = RefimplAdapter("PYTHON")
  case = Case([np.array([values, [1.0, 2.0, 3.0] + [4.0] * (len(values) - 3)], np.float32)], ["float32"],
              {"axis": 1, "keepdim": True})
  got = ad.numpy(ad.evaluate("x.prod(axis, keepdim)", {"x": ad.tensor(case.inputs[0], "float32")}, case.params))
  np.testing.assert_array_equal(got[0], [fold])   # the spec's fold, not the exact product
  assert _entry("prod").torch_defined(case).tolist() == [[False], [True]]
  assert not forward(ad, _entry("prod", masked=False), case, "float32").ok
  assert forward(ad, _entry("prod"), case, "float32").ok


@pytest.mark.parametrize("values,fold", MIDWAY)
@pytest.mark.parametrize("name,params", [("scatter_reduce.prod", {"dim": 0, "include_self": True}),
                                         ("scatter_reduce.prod", {"dim": 0, "include_self": False}),
                                         ("scatter.reduce", {"dim": 0, "reduce": "multiply"})])
def test_scatter_product_midway_overflow_is_not_compared_with_torch(name, params, values, fold):
  ad = RefimplAdapter("PYTHON")
  n = len(values)
  case = Case([np.array([1.0, 3.0], np.float32), np.array([0] * n + [1], np.int32),
               np.array(values + [2.0], np.float32)], ["float32", "int32", "float32"], params)
  assert _entry(name).torch_defined(case).tolist() == [False, True]
  assert not forward(ad, _entry(name, masked=False), case, "float32").ok
  assert forward(ad, _entry(name), case, "float32").ok


def test_float16_src_product_is_cast_before_x_joins():
  """float16 folds the src terms in float32 and casts their product to float16 before x joins: 256 * 256 = 65536
  is inf in float16, so x = 0.5 gives inf where torch gives 32768."""
  case = Case([np.array([0.5], np.float16), np.array([0, 0], np.int32), np.array([256.0, 256.0], np.float16)],
              ["float16", "int32", "float16"], {"dim": 0, "include_self": True})
  ad = RefimplAdapter("PYTHON")
  got = ad.evaluate("x.scatter_reduce(dim, index, src, 'prod', include_self=include_self)",
                    {"x": ad.tensor(case.inputs[0], "float16"), "index": ad.tensor(case.inputs[1], "int32"),
                     "src": ad.tensor(case.inputs[2], "float16")}, case.params)
  assert ad.numpy(got).tolist() == [np.inf]
  assert _entry("scatter_reduce.prod").torch_defined(case).tolist() == [False]
  case.params["include_self"] = False   # the src product is the result: rounded alike by both
  assert _entry("scatter_reduce.prod").torch_defined(case).tolist() == [True]
