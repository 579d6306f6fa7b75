"""refimpl's side of spec/tensor_misc.md that conformance cannot express: the sign conventions of qr and svd against
torch.linalg, the graph contiguous_backward builds, the slots, the clause each refusal names, and requires_grad=None
(GRAD.NOGRAD.default) with backward() and optimizers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from refimpl import Tensor, dtypes
from refimpl.helpers import SpecError
from refimpl.nn.optim import SGD
from refimpl.uop import Ops


def _torch_qr(a: np.ndarray):
  """torch.linalg.qr (complete), normalized as TENSOR.QR.signs says: a nonnegative diagonal of R."""
  q, r = (t.numpy() for t in torch.linalg.qr(torch.tensor(a), mode="complete"))
  k = min(a.shape[-2:])
  d = np.ones(a.shape[:-1])
  d[..., :k] = np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
  return q * d[..., None, :], r * d[..., :, None]


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 3), (1, 1), (5, 1)])
def test_qr_matches_torch_after_the_sign_convention(shape):
  a = np.random.default_rng(sum(shape)).standard_normal(shape)
  q, r = Tensor(a).qr()
  tq, tr = _torch_qr(a)
  k = min(shape[-2:])
  np.testing.assert_allclose(r.numpy(), tr, atol=1e-12)
  np.testing.assert_allclose(q.numpy()[..., :k], tq[..., :k], atol=1e-12)
  rn = r.numpy()
  assert (np.diagonal(rn, axis1=-2, axis2=-1) >= 0).all()
  assert (np.tril(rn, -1) == 0).all()   # exact zeros below the diagonal


def test_qr_of_a_zero_column_is_finite():
  """TENSOR.QR.zero-column: no division by zero."""
  q, r = Tensor([[0.0, 1.0], [0.0, 2.0]]).qr()
  assert np.isfinite(q.numpy()).all() and np.isfinite(r.numpy()).all()
  np.testing.assert_allclose(q.numpy() @ r.numpy(), [[0.0, 1.0], [0.0, 2.0]], atol=1e-6)


def _torch_svd(a: np.ndarray):
  """torch.linalg.svd, normalized as TENSOR.SVD.signs says (for m >= n: each column of V has its largest-magnitude
  entry positive; for m < n: each column of U)."""
  u, s, vh = (t.numpy() for t in torch.linalg.svd(torch.tensor(a), full_matrices=False))
  ref = vh.swapaxes(-1, -2) if a.shape[-2] >= a.shape[-1] else u
  lead = np.take_along_axis(ref, np.abs(ref).argmax(-2)[..., None, :], -2)
  f = np.where(lead < 0, -1.0, 1.0)
  return u * f, s, vh * f.swapaxes(-1, -2)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2), (1, 3), (4, 4)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_matches_torch_after_the_sign_convention(shape, full):
  a = np.random.default_rng(7 + sum(shape)).standard_normal(shape)
  u, s, vh = (t.numpy() for t in Tensor(a).svd(full_matrices=full))
  m, n = shape[-2:]
  k = min(m, n)
  assert u.shape == shape[:-2] + ((m, m) if full else (m, k)) and vh.shape == shape[:-2] + ((n, n) if full else (k, n))
  tu, ts, tvh = _torch_svd(a)
  np.testing.assert_allclose(s, ts, atol=1e-12)
  np.testing.assert_allclose(u[..., :k], tu, atol=1e-10)
  np.testing.assert_allclose(vh[..., :k, :], tvh, atol=1e-10)
  side = u.shape[-1]
  np.testing.assert_allclose(u.swapaxes(-1, -2) @ u, np.broadcast_to(np.eye(side), u.shape[:-2] + (side, side)),
                             atol=1e-12)


def test_svd_of_a_rank_deficient_matrix():
  """TENSOR.SVD.zero: a zero singular value, no NaN; S sorted descending; the product rebuilds the input."""
  a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
  u, s, vh = (t.numpy() for t in Tensor(a).svd(full_matrices=False))
  assert np.isfinite(u).all() and s[0] >= s[1] and abs(s[1]) < 1e-12
  np.testing.assert_allclose((u * s) @ vh, a, atol=1e-12)


def test_contiguous_backward_marks_the_cotangent():
  """TENSOR.CONTIGUOUS_BACKWARD: the forward graph is a NOOP marker; the gradient graph holds a CONTIGUOUS of the
  cotangent (GRAD.CONTIGUOUS_BACKWARD), and a plain NOOP passes it unchanged."""
  x = Tensor([1.0, 2.0])
  y = x.contiguous_backward()
  assert y.uop.op is Ops.NOOP and y.uop.arg == "contiguous_backward"
  (g,) = (y * 3).sum().gradient(x)
  assert any(u.op is Ops.CONTIGUOUS for u in g.uop.toposort())
  assert g.numpy().tolist() == [3.0, 3.0]


def test_slots():
  """TENSOR.SLOTS: the class names both attributes; instances have their own."""
  assert Tensor.grad is not None and Tensor.uop is not None
  t = Tensor([1.0])
  assert t.grad is None and t.uop.op in (Ops.BUFFER, Ops.RESHAPE)


@pytest.mark.parametrize("call,clause", [
  (lambda: Tensor([1.0, 2.0]).size(2), "TENSOR.SIZE.dim"),
  (lambda: Tensor(1.0).size(0), "TENSOR.SIZE.dim"),
  (lambda: Tensor([1.0]).replace(Tensor([1.0, 2.0])), "TENSOR.REPLACE.shape"),
  (lambda: Tensor([1.0]).bfloat16().data(), "TENSOR.DATA.format"),
  (lambda: Tensor.from_blob(0, (2,)), "TENSOR.FROM_BLOB.ptr"),
  (lambda: Tensor([1.0]).qr(), "TENSOR.QR.shape"),
  (lambda: Tensor([[1, 2]]).svd(), "TENSOR.SVD.dtype"),
  (lambda: Tensor([[1.0]]).multinomial(0), "TENSOR.MULTINOMIAL.num_samples"),
  (lambda: Tensor([1.0, 2.0]).multinomial(3), "TENSOR.MULTINOMIAL.num_samples"),
  (lambda: Tensor([[[1.0]]]).multinomial(), "TENSOR.MULTINOMIAL.shape"),
  (lambda: Tensor([1], dtype=dtypes.uint32).threefry(Tensor([1], dtype=dtypes.uint64)), "TENSOR.THREEFRY.dtype"),
  (lambda: Tensor.random_bits(Tensor([1, 2]), Tensor([1, 2], dtype=dtypes.uint32), 3), "TENSOR.RANDOM_BITS"),
  (lambda: Tensor.rand(3, dtype=dtypes.int8), "TENSOR.RAND.dtype"),
  (lambda: Tensor.randperm(-1), "TENSOR.RANDPERM"),
])
def test_refusals_name_their_clause(call, clause):
  with pytest.raises(SpecError, match=clause.replace(".", r"\.")):
    call()


def test_requires_grad_none_becomes_differentiable():
  """GRAD.NOGRAD.default: gradient() works at once; backward() fills .grad once requires_grad is set, by the user
  after the graph was built or by an optimizer."""
  x = Tensor([1.0, 2.0])
  assert x.requires_grad is None
  loss = (x * x).sum()
  assert loss.gradient(x)[0].numpy().tolist() == [2.0, 4.0]
  with pytest.raises(SpecError, match="GRAD.NOGRAD"):
    loss.backward()
  x.requires_grad = True
  loss.backward()
  assert x.grad.numpy().tolist() == [2.0, 4.0]
  w = Tensor([3.0])
  SGD([w], lr=0.1)
  assert w.requires_grad is True
  (w * 5).sum().backward()
  assert w.grad.numpy().tolist() == [5.0]


def test_full_buffer_forms_agree():
  """TENSOR.FULL.buffer: both forms hold the same values and can be assigned to."""
  a, b = Tensor.full((2,), 3.0), Tensor.full((2,), 3.0, buffer=False)
  assert a.numpy().tolist() == b.numpy().tolist() == [3.0, 3.0]
  a.assign(Tensor([1.0, 2.0])).realize()
  assert a.numpy().tolist() == [1.0, 2.0] and b.numpy().tolist() == [3.0, 3.0]


def test_clone_copies_grad_and_device():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x * 2).sum().backward()
  c = x.clone()
  assert c.numpy().tolist() == [1.0, 2.0] and c.grad.numpy().tolist() == [2.0, 2.0]
  assert (c * 3).sum().gradient(x)[0].numpy().tolist() == [3.0, 3.0]
