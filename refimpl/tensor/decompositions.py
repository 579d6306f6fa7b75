"""Matrix decompositions (spec/tensor_misc.md TENSOR.QR, TENSOR.SVD): QR by Householder reflections and the SVD by
one-sided Jacobi rotations with a fixed number of sweeps, written as compositions of tensor ops (matmul, sums, WHERE)
over a batch of matrices in the last two axes. Sign conventions are fixed so that results are unique where the
mathematics allows (a nonnegative diagonal of R; a positive largest entry of each singular vector of the smaller
factor), which makes torch.linalg an oracle."""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.helpers import SpecTypeError, SpecValueError
from refimpl.tensor.core import Tensor

# TENSOR.SVD.sweeps: cyclic Jacobi converges quadratically; 8 sweeps over all column pairs bring the off-diagonal
# mass below float64 rounding for the matrix sizes a reference is used on (n <= 16)
JACOBI_SWEEPS = 8


def _check_matrix(x: Tensor, clause: str) -> None:
  if x.ndim < 2: raise SpecValueError(f"{clause}.shape", f"needs a matrix (2 or more dims), got shape {x.shape}")
  if not dtypes.is_float(x.dtype): raise SpecTypeError(f"{clause}.dtype", f"needs a float tensor, got {x.dtype!r}")


def _eye(n: int, like: Tensor, batch: tuple[int, ...]) -> Tensor:
  return Tensor.eye(n, dtype=like.dtype, device=like.device).reshape((1,) * len(batch) + (n, n)).expand(
    *batch, n, n)


def _column(x: Tensor, j: int) -> Tensor:
  """Column j of the matrices, as (..., m, 1)."""
  return x.shrink(tuple([None] * (x.ndim - 1) + [(j, j + 1)]))


def _sign(x: Tensor) -> Tensor:
  """+1 where x >= 0 (zero included), -1 elsewhere: a sign that is never 0."""
  return (x < 0).where(-1.0, 1.0).cast(x.dtype)


class DecompositionOps:
  def qr(self) -> tuple[Tensor, Tensor]:
    """Q, R with Q @ R = self, Q (..., m, m) orthogonal and R (..., m, n) upper triangular with a nonnegative
    diagonal and exact zeros below it (TENSOR.QR), by min(m, n) Householder reflections."""
    _check_matrix(self, "TENSOR.QR")
    *batch, m, n = self.shape
    batch = tuple(batch)
    R, Q = self, _eye(m, self, batch)
    rows = Tensor.arange(m, device=self.device).reshape(m, 1)
    for i in range(min(m, n)):
      # TENSOR.QR.householder: the reflector H = I - tau v v^T that maps column i (rows i and below) onto e_i;
      # v[i] = 1 and v is zero above row i
      x = (rows >= i).where(_column(R, i), 0.0).cast(self.dtype)
      x0 = (rows == i).where(x, 0.0).cast(self.dtype).sum(-2, keepdim=True)
      norm = (x * x).sum(-2, keepdim=True).sqrt()
      active = norm != 0   # TENSOR.QR.zero-column: nothing to reflect, H = I
      u0 = x0 + _sign(x0) * norm
      v = (rows == i).where(1.0, x / active.where(u0, 1.0)).cast(self.dtype)
      v = (rows >= i).where(v, 0.0).cast(self.dtype)
      tau = active.where(_sign(x0) * u0 / active.where(norm, 1.0), 0.0).cast(self.dtype)
      R = R - (v * tau) @ (v.transpose(-1, -2) @ R)
      Q = Q - (Q @ v) @ (v * tau).transpose(-1, -2)
    # TENSOR.QR.signs: flip row i of R and column i of Q where R[i, i] < 0, so the diagonal is nonnegative
    diag = (R * Tensor.eye(m, n, dtype=self.dtype, device=self.device)).sum(-1)   # (..., m), zeros past n
    d = _sign(diag)
    R = R * d.unsqueeze(-1)
    Q = Q * d.unsqueeze(-2)
    below = rows > Tensor.arange(n, device=self.device).reshape(1, n)
    return Q, below.where(0.0, R).cast(self.dtype)

  def svd(self, full_matrices=True) -> tuple[Tensor, Tensor, Tensor]:
    """U, S, Vh with U @ diag(S) @ Vh = self (TENSOR.SVD): S (..., k) descending, k = min(m, n); U (..., m, m) and
    Vh (..., n, n), or (..., m, k) and (..., k, n) with full_matrices=False. A QR of the taller orientation, then
    one-sided Jacobi rotations of R for a fixed number of sweeps."""
    _check_matrix(self, "TENSOR.SVD")
    *batch, m, n = self.shape
    if m < n:   # TENSOR.SVD.wide: the SVD of the transpose, transposed back
      u, s, vh = self.transpose(-1, -2).svd(full_matrices)
      return vh.transpose(-1, -2), s, u.transpose(-1, -2)
    batch = tuple(batch)
    Q, R = self.qr()
    W = R.shrink(tuple([None] * len(batch) + [(0, n), None]))   # (..., n, n): R's square top
    V = _eye(n, self, batch)
    eye = Tensor.eye(n, dtype=self.dtype, device=self.device)
    for _ in range(JACOBI_SWEEPS):
      for p in range(n):
        for q in range(p + 1, n):
          W, V = _jacobi_rotation(W, V, p, q, eye)
    # TENSOR.SVD.order: the singular values are the column norms, sorted descending (ties keep column order)
    s = (W * W).sum(-2).sqrt()   # (..., n)
    P = _sorting_permutation(s)
    s = (s.unsqueeze(-2) @ P).squeeze(-2)
    W, V = W @ P, V @ P
    # TENSOR.SVD.signs: the entry of largest magnitude of each right singular vector (column of V) is positive
    # (the first one among equal magnitudes)
    lead = (V.abs().argmax(-2, keepdim=True) == Tensor.arange(n, device=self.device).reshape(n, 1))
    flip = _sign((lead.where(V, 0.0).cast(self.dtype)).sum(-2, keepdim=True))
    W, V = W * flip, V * flip
    # TENSOR.SVD.zero: a zero singular value leaves its column of W as it is (no division by 0)
    Ur = W / (s != 0).where(s, 1.0).cast(self.dtype).unsqueeze(-2)
    k = n
    if full_matrices:
      pad = ((0, 0),) * len(batch) + ((0, m - k), (0, m - k))
      block = Ur.pad(pad) + _eye(m, self, batch) - _eye(k, self, batch).pad(pad)   # blockdiag(Ur, I)
      U = Q @ block
    else:
      U = Q.shrink(tuple([None] * (len(batch) + 1) + [(0, k)])) @ Ur
    return U, s, V.transpose(-1, -2)


def _jacobi_rotation(W: Tensor, V: Tensor, p: int, q: int, eye: Tensor) -> tuple[Tensor, Tensor]:
  """One Jacobi rotation of columns p and q of W (and V) that makes them orthogonal (TENSOR.SVD.jacobi):
  zeta = (beta - alpha) / (2 gamma), t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)), c = 1 / sqrt(1 + t^2), s = c t,
  with alpha, beta the squared norms and gamma the dot product of the two columns; gamma = 0 gives no rotation."""
  wp, wq = _column(W, p), _column(W, q)
  alpha, beta, gamma = (wp * wp).sum(-2, keepdim=True), (wq * wq).sum(-2, keepdim=True), (wp * wq).sum(-2, keepdim=True)
  turn = gamma != 0
  zeta = (beta - alpha) / (turn.where(gamma, 1.0).cast(W.dtype) * 2)
  t = _sign(zeta) / (zeta.abs() + (zeta * zeta + 1).sqrt())
  t = turn.where(t, 0.0).cast(W.dtype)
  c = (t * t + 1).rsqrt()
  s = c * t
  # J = I + (c - 1)(e_p e_p^T + e_q e_q^T) + s (e_p e_q^T - e_q e_p^T): column p becomes c wp - s wq, q s wp + c wq
  n = eye.shape[0]
  ep, eq = _column(eye, p).reshape(n, 1), _column(eye, q).reshape(n, 1)
  J = eye + (c - 1) * (ep @ ep.T + eq @ eq.T) + s * (ep @ eq.T - eq @ ep.T)
  return (W @ J).contiguous(), (V @ J).contiguous()


def _sorting_permutation(s: Tensor) -> Tensor:
  """The (..., n, n) permutation matrix P with (s @ P) sorted descending, ties in their original order: the rank of
  s_j is the number of elements larger than it plus the number of equal ones before it."""
  n = s.shape[-1]
  a, b = s.unsqueeze(-1), s.unsqueeze(-2)   # a[j, k] = s_j, b[j, k] = s_k
  idx = Tensor.arange(n, device=s.device)
  before = idx.reshape(1, n) < idx.reshape(n, 1)   # k < j
  rank = ((b > a) | ((b == a) & before)).cast(dtypes.int32).sum(-1)   # (..., n)
  return (rank.unsqueeze(-1) == idx.reshape(1, n)).cast(s.dtype)
