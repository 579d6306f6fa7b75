"""The shape family of spec/tensor_shape.md: refusals (SpecError naming the clause), and what the conformance
catalogue cannot draw (max_unpool2d's repeated positions, int dtypes where torch refuses, arange beyond int32)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError


def _raises(clause: str, fn) -> None:
  with pytest.raises(SpecError, match=clause.replace(".", r"\.")): fn()


X = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("clause, call", [
  ("TENSOR.TRIL", lambda: Tensor([1.0, 2.0]).tril()),
  ("TENSOR.DIAG", lambda: Tensor(X).diag()),
  ("TENSOR.DIAGONAL", lambda: Tensor(X).diagonal(0, 1, -1)),
  ("TENSOR.ROLL", lambda: Tensor(X).roll((1, 2), 0)),
  ("TENSOR.ROLL", lambda: Tensor(X).roll((1, 2))),
  ("TENSOR.REPEAT_INTERLEAVE", lambda: Tensor(X).repeat_interleave(-1)),
  ("TENSOR.MESHGRID", lambda: Tensor(X).meshgrid(Tensor([1.0]))),
  ("TENSOR.MESHGRID", lambda: Tensor([1.0]).meshgrid(Tensor([1.0]), indexing="ji")),
  ("TENSOR.UNFOLD", lambda: Tensor(X).unfold(0, 4, 1)),
  ("TENSOR.UNFOLD", lambda: Tensor(X).unfold(0, 2, 0)),
  ("TENSOR.PAD_TO", lambda: Tensor(X).pad_to(2, 4)),
  ("TENSOR.SHRINK_TO", lambda: Tensor(X).shrink_to(4, None)),
  ("TENSOR.REARRANGE", lambda: Tensor(X).rearrange("a b")),
  ("TENSOR.REARRANGE", lambda: Tensor(X).rearrange("a b -> a c")),
  ("TENSOR.REARRANGE", lambda: Tensor(X).rearrange("a (b c) -> a b c")),
  ("TENSOR.REARRANGE", lambda: Tensor(X).rearrange("a (b c) -> a b c", b=3)),
  ("TENSOR.REARRANGE", lambda: Tensor(X).rearrange("a b c -> a b c")),
  ("TENSOR.PAD.flat", lambda: Tensor(X).pad((1, 2, 3))),
  ("TENSOR.PAD.flat", lambda: Tensor(X).pad((1,) * 6)),
  ("TENSOR.PAD", lambda: Tensor(X).pad(((1, 1),))),
  ("TENSOR.PAD.negative", lambda: Tensor(X).pad((-3, -2))),
  ("TENSOR.PAD.reflect", lambda: Tensor(X).pad((4, 0), mode="reflect")),
  ("TENSOR.PAD.replicate", lambda: Tensor(np.zeros((2, 0))).pad((1, 0), mode="replicate")),
  ("TENSOR.PAD.circular", lambda: Tensor(X).pad((0, 5), mode="circular")),
  ("TENSOR.PAD.mode", lambda: Tensor(X).pad((1, 1), mode="wrap")),
  ("TENSOR.RESHAPE.none", lambda: Tensor(X).reshape(3, 2, None)),
  ("TENSOR.CAT.sequence", lambda: Tensor.cat([Tensor(X)], Tensor(X))),
  ("TENSOR.CAT.sequence", lambda: Tensor.stack([])),
  ("TENSOR.EINSUM.ellipsis", lambda: Tensor.einsum("ij...->i", Tensor([1.0]))),
  ("TENSOR.MAX_UNPOOL2D", lambda: Tensor(np.zeros((1, 1, 2, 2))).max_unpool2d(Tensor(np.zeros((1, 1, 2), np.int32)))),
  ("TENSOR.MAX_UNPOOL2D", lambda: Tensor(np.zeros((1, 1, 2, 2))).max_unpool2d(Tensor(np.zeros((1, 1, 2, 2))))),
  ("TENSOR.INTERPOLATE", lambda: Tensor(X).interpolate((0,))),
  ("TENSOR.INTERPOLATE", lambda: Tensor(X).interpolate((2, 2, 2))),
  ("TENSOR.INTERPOLATE.mode", lambda: Tensor(X).interpolate((2,), mode="bicubic")),
  ("TENSOR.INTERPOLATE.mode", lambda: Tensor(X).interpolate((2,), mode="nearest", align_corners=True)),
  ("TENSOR.NORMALIZE", lambda: Tensor(X).normalize(p=-1)),
  ("TENSOR.ATTENTION.gqa", lambda: Tensor(np.zeros((3, 2, 4))).scaled_dot_product_attention(
    Tensor(np.zeros((2, 2, 4))), Tensor(np.zeros((2, 2, 4))), enable_gqa=True)),
])
def test_refusals(clause, call):
  """Bad arguments raise SpecError naming the clause, before any graph is built."""
  _raises(clause, call)


def test_max_unpool2d_repeated_and_outside_positions():
  """TENSOR.MAX_UNPOOL2D: of several elements naming one position the last (row-major) is kept, and only it takes
  the gradient (GRAD.T.max_unpool2d); a position outside the plane is dropped."""
  x = Tensor([[[[1.0, 2.0, 3.0, 4.0]]]], requires_grad=True)
  idx = Tensor([[[[0, 0, 1, 9]]]], dtype=dtypes.int32)
  out = x.max_unpool2d(idx, (1, 1), output_size=(1, 4))
  assert out.numpy().tolist() == [[[[2.0, 3.0, 0.0, 0.0]]]]
  (out * Tensor([[[[10.0, 20.0, 30.0, 40.0]]]])).sum().backward()
  assert x.grad.numpy().tolist() == [[[[0.0, 10.0, 20.0, 0.0]]]]



@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
def test_max_unpool2d_gradient_on_each_device(device):
  """GRAD.T.max_unpool2d: dx = g at each element's position. On PYTHON this raised TypeError (the emulator's CMOD fast
  path on a serial loop's scalar counter, tests/emu/test_emu_valu.py), the example conformance drew."""
  x = Tensor([[[[-float("inf")]], [[3.0]]]], device=device)
  out = x.max_unpool2d(Tensor([[[[0]], [[3]]]], dtype=dtypes.int32, device=device), (2, 2), output_size=(2, 2))
  g = Tensor(np.arange(1, 9, dtype=np.float32).reshape(1, 2, 2, 2), device=device)
  assert out.gradient(x, gradient=g)[0].numpy().tolist() == [[[[1.0]], [[8.0]]]]

def test_max_unpool2d_inverts_overlapping_max_pool():
  """A maximum shared by overlapping windows is written once (tinygrad adds it twice)."""
  a = np.array([[[[0.0, 5.0, 1.0], [2.0, 3.0, 4.0]]]])
  v, i = Tensor(a).max_pool2d((2, 2), stride=1, return_indices=True)
  out = Tensor(v.numpy()).max_unpool2d(Tensor(i.numpy()), (2, 2), stride=1)
  tv, ti = F.max_pool2d(torch.tensor(a), 2, 1, return_indices=True)
  assert np.array_equal(out.numpy(), F.max_unpool2d(tv, ti, 2, 1).numpy())
  assert out.numpy()[0, 0, 0, 1] == 5.0


def test_max_pool2d_indices_of_ints_and_dtype():
  """TENSOR.MAX_POOL2D.indices: int inputs too (first maximum), default_int indices."""
  a = np.array([[[[3, 3, 1, 7], [0, 3, 7, 2]]]], dtype=np.int32)
  v, i = Tensor(a).max_pool2d(return_indices=True)
  assert i.dtype == dtypes.default_int and v.dtype == dtypes.int32
  assert v.numpy().tolist() == [[[[3, 7]]]] and i.numpy().tolist() == [[[[0, 3]]]]


def test_pad_modes_of_ints_match_numpy():
  """TENSOR.PAD.reflect/replicate/circular on an int tensor (torch's modes take floats only), against numpy's
  reflect, edge and wrap, on every axis at once."""
  a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
  pads = ((1, 1), (2, 0), (1, 3))
  for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
    got = Tensor(a).pad(pads, mode=mode).numpy()
    assert got.dtype == np.int32 and np.array_equal(got, np.pad(a, pads, mode=np_mode)), mode


def test_pad_constant_value_signs_and_ints():
  """TENSOR.PAD.constant: -0.0 and NaN fill exactly; an int tensor takes the value as DT.CONST converts it."""
  got = Tensor([1.0]).pad(((1, 1),), value=-0.0).numpy()
  assert got.tolist() == [0.0, 1.0, 0.0] and np.signbit(got[0]) and np.signbit(got[2])
  assert np.isnan(Tensor([1.0]).pad((1, 0), value=math.nan).numpy()[0])
  assert Tensor([1, 2]).pad((1, 1), value=2.9).numpy().tolist() == [2, 1, 2, 2]


def test_interpolate_ints_and_leading_axes():
  """TENSOR.INTERPOLATE: an int input is computed in the default float and truncated; any leading axes."""
  a = np.array([[0, 10], [20, 30]], dtype=np.int32)
  got = Tensor(a).interpolate((3,), align_corners=True)
  assert got.dtype == dtypes.int32 and got.numpy().tolist() == [[0, 5, 10], [20, 25, 30]]
  assert Tensor(a).interpolate((4,), mode="nearest").numpy().tolist() == [[0, 0, 10, 10], [20, 20, 30, 30]]


def test_normalize_zero_row_gradient():
  """GRAD.T.normalize: a row of zeros gives zeros and the gradient g / eps, torch's; no NaN from the root."""
  x = Tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
  x.normalize(dim=1).sum().backward()
  tx = torch.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
  F.normalize(tx, dim=1).sum().backward()
  assert np.allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("p", [2.0, 3.0])
def test_normalize_nan_row_is_nan(p, dtype):
  """TENSOR.NORMALIZE: NaN in a row makes the row NaN, an infinity in it included (torch's [nan, nan]); the norm's
  guard for a zero sum once gave such a row the norm 0, so eps, and -inf / eps = -inf (found by the conformance
  suite's ci profile)."""
  got = Tensor(np.array([[-np.inf, np.nan], [3.0, 4.0]], np.float32), dtype=dtype).normalize(p, 1).numpy()
  assert np.isnan(got[0]).all() and np.isfinite(got[1]).all(), got


@pytest.mark.parametrize("p", [math.inf, 2.0, 1.0, 0.0])
def test_normalize_empty_dim(p):
  """TENSOR.NORMALIZE.empty: along a dim of size 0 the result is empty for every p, inf included (torch refuses the
  inf norm of no elements; nothing here needs max's missing identity, API.ARGS.empty-reduce)."""
  for shape, dim in (((0, 3), 0), ((2, 0), 1), ((0,), 0)):
    got = Tensor.ones(*shape).normalize(p, dim)
    assert got.shape == shape and got.numpy().shape == shape


def test_arange_beyond_int32():
  """DT.DEFAULT.wide: ints beyond default_int's range take int64 instead of wrapping."""
  t = Tensor.arange(2**31, 2**31 + 3)
  assert t.dtype == dtypes.int64 and t.tolist() == [2**31, 2**31 + 1, 2**31 + 2]
  assert Tensor([1, -2**40]).dtype == dtypes.int64 and Tensor([1, 2]).dtype == dtypes.default_int
  assert (Tensor([1], dtype=dtypes.int8) + 1000).dtype == dtypes.int8   # weak scalars do not widen by value


def test_names_as_tinygrad():
  """shrink(arg) and transpose(dim0, dim1) take tinygrad's keyword names; meshgrid of one tensor is a 1-tuple."""
  x = Tensor(X)
  assert x.shrink(arg=((0, 1), None)).shape == (1, 4)
  assert x.transpose(dim0=0, dim1=1).shape == (4, 3)
  assert len(Tensor([1.0, 2.0]).meshgrid()) == 1
