"""Linear algebra: matmul, dot, linear and einsum, as broadcast multiplies and sums (no matmul primitive)."""
from __future__ import annotations



from refimpl.dtype import DTypeLike, to_dtype
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.tensor import validate
from refimpl.tensor.core import Tensor


class LinalgOps:
  def dot(self, w: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """(..., n, k) @ (..., k, m): a broadcast multiply and a sum over k (there is no matmul primitive). The products
    are in the promoted dtype (DT.PROMOTE); they are summed in `dtype` when given, else as sum accumulates (DT.SUM),
    and the result has `dtype`, else the promoted dtype (TENSOR.MATMUL.dtype, as tinygrad: int8 @ int8 is int8)."""
    validate.kind(isinstance(w, Tensor), "TENSOR.MATMUL", f"matmul with a {type(w).__name__}, not a Tensor")
    if self.ndim == 0 or w.ndim == 0: raise SpecRuntimeError("UOP.REDUCE_AXIS",
                                                             "matmul needs tensors of at least 1 dim")
    x = self.reshape(1, -1) if self.ndim == 1 else self
    m = w.reshape(-1, 1) if w.ndim == 1 else w
    if x.shape[-1] != m.shape[-2]: raise SpecRuntimeError("UOP.EXPAND", f"matmul of {self.shape} and {w.shape}")
    out = (x.reshape(*x.shape[:-1], 1, x.shape[-1]) * m.transpose(-1, -2).reshape(*m.shape[:-2], 1, *m.shape[::-1][:2]))
    result_dtype = to_dtype(dtype) if dtype is not None else out.dtype
    out = out.sum(-1, dtype=dtype).cast(result_dtype)
    if w.ndim == 1: out = out.reshape(out.shape[:-1])
    if self.ndim == 1:   # drop the row axis that a vector operand was given
      out = out.reshape(*out.shape[:-2], *out.shape[-1:]) if w.ndim > 1 else out.reshape(out.shape[:-1])
    return out

  def matmul(self, x: Tensor, reverse=False, dtype: DTypeLike | None = None) -> Tensor:
    """self @ x, or x @ self with reverse=True; `dtype` as in dot (TENSOR.MATMUL.dtype)."""
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)

  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x) -> Tensor: return Tensor(x, device=self.device).matmul(self) if not isinstance(x, Tensor) \
      else x.matmul(self)

  def linear(self, weight: Tensor, bias: Tensor | None = None, dtype: DTypeLike | None = None) -> Tensor:
    """x @ weight + bias with tinygrad's weight layout (in_features, out_features) (torch's F.linear takes the
    transpose); a 1-d weight multiplies elementwise. With `dtype` every operand is cast to it first
    (TENSOR.MATMUL.dtype)."""
    if dtype is not None:
      dt = to_dtype(dtype)
      return self.cast(dt).linear(weight.cast(dt), bias.cast(dt) if bias is not None else None)
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x if bias is None else x + bias

  @staticmethod
  def einsum(formula: str, *operands, dtype: DTypeLike | None = None) -> Tensor:
    """Einstein summation over letters: a repeated letter within an operand takes its diagonal; each operand is
    permuted and reshaped onto the sorted list of all letters, the operands are multiplied with broadcasting, and the
    letters missing from the output are summed. Without '->' the output is the letters that occur once, sorted
    (numpy/torch). '...' stands for an operand's unnamed axes, aligned from the right and broadcast across operands;
    they come first in an implicit output (TENSOR.EINSUM.ellipsis)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    formula = formula.replace(" ", "")
    lhs, out = formula.split("->") if "->" in formula else (formula, None)
    ins = lhs.split(",")
    if not all(isinstance(t, Tensor) for t in operands):
      raise SpecTypeError("TENSOR.EINSUM",
                          f"einsum: operands must be Tensors, got {[type(t).__name__ for t in operands]}")
    if len(ins) != len(operands):
      raise SpecValueError("TENSOR.EINSUM", f"einsum: {len(ins)} inputs in {formula!r}, {len(operands)} given")
    for part in [*ins] + ([out] if out is not None else []):
      if not all(c.isalpha() and c.isascii() for c in part.replace("...", "")):
        raise SpecValueError("TENSOR.EINSUM",
                             f"einsum: {part!r} in {formula!r}: subscripts are ASCII letters and '...'")
    if out is not None:
      named = set("".join(ins))
      if missing := [c for c in out.replace("...", "") if c not in named]:
        raise SpecValueError("TENSOR.EINSUM",
                             f"einsum: output letter {missing[0]!r} of {formula!r} names no input axis")
      if len(set(out.replace("...", ""))) != len(out.replace("...", "")):
        raise SpecValueError("TENSOR.EINSUM", f"einsum: {out!r} names an output axis twice")
    # '...' becomes fresh letters (characters beyond ASCII, so no clash): the broadcast axes, right-aligned
    n_ell = max((t.ndim - len(spec) + 3 for spec, t in zip(ins, operands) if "..." in spec), default=0)
    if n_ell < 0: raise SpecValueError("TENSOR.EINSUM.ellipsis", f"einsum: {formula!r} names more axes than given")
    ell = "".join(chr(0x100 + i) for i in range(n_ell))
    ins = [spec.replace("...", ell[n_ell - (t.ndim - len(spec) + 3):]) if "..." in spec else spec
           for spec, t in zip(ins, operands)]
    lhs = ",".join(ins)
    if out is None: out = ell + "".join(sorted(c for c in set(lhs) - {","} - set(ell) if lhs.count(c) == 1))
    else: out = out.replace("...", ell)
    letters = sorted(set(lhs) - {","})
    sizes: dict[str, int] = {}
    terms = []
    for spec, t in zip(ins, operands):
      if len(spec) != t.ndim:
        raise SpecRuntimeError("TENSOR.EINSUM", f"einsum: {spec!r} does not match the shape {t.shape}")
      spec = list(spec)
      while (rep := next((c for c in spec if spec.count(c) > 1), None)) is not None:
        i, j = [k for k, c in enumerate(spec) if c == rep][:2]
        t = t._diagonal(i, j)
        spec = [c for k, c in enumerate(spec) if k not in (i, j)] + [rep]
      for c, n in zip(spec, t.shape):
        if sizes.setdefault(c, n) != n and 1 not in (sizes[c], n):
          raise SpecRuntimeError("TENSOR.EINSUM", f"einsum: sizes of {c!r} differ ({sizes[c]} and {n})")
        sizes[c] = max(sizes[c], n) if 1 in (sizes[c], n) else n
      t = t.permute([spec.index(c) for c in letters if c in spec])
      terms.append(t.reshape(tuple(t.shape[[c for c in letters if c in spec].index(c)] if c in spec else 1
                                   for c in letters)))
    prod = terms[0]
    for t in terms[1:]: prod = prod * t
    prod = prod.expand(tuple(sizes[c] for c in letters))
    summed = [i for i, c in enumerate(letters) if c not in out]
    red = prod.sum(tuple(summed)) if summed else prod
    kept = [c for c in letters if c in out]
    red = red.permute([kept.index(c) for c in out])
    return red.cast(dtype) if dtype is not None else red

  def _diagonal(self, i: int, j: int) -> Tensor:
    """The diagonal of axes i and j (equal sizes), as a new last axis: flatten the pair and keep every (n+1)-th."""
    n = self.shape[i]
    rest = [k for k in range(self.ndim) if k not in (i, j)]
    x = self.permute(rest + [i, j]).reshape(*(self.shape[k] for k in rest), n * n)
    return x._stride(x.ndim - 1, n + 1)

  def newton_schulz(self, steps: int, params: tuple[float, ...], eps: float = 1.0e-7) -> Tensor:
    """`steps` Newton-Schulz iterations with the odd polynomial of coefficients `params` on the matrices of the last
    two axes, after scaling each to Frobenius norm just under 1 (TENSOR.NEWTON_SCHULZ); Muon's orthogonalization."""
    if self.ndim < 2: raise SpecValueError("TENSOR.NEWTON_SCHULZ",
                                           f"needs a tensor of at least 2 dims, got {self.shape}")
    if len(params) == 0: raise SpecValueError("TENSOR.NEWTON_SCHULZ", "params needs at least one coefficient")
    if steps < 0: raise SpecValueError("TENSOR.NEWTON_SCHULZ", f"steps must be >= 0, got {steps}")
    if self.shape[-2] > self.shape[-1]:   # TENSOR.NEWTON_SCHULZ.tall: iterate on the wide transpose
      return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    g = self / ((self * self).sum(axis=(-2, -1), keepdim=True).sqrt() + eps)   # TENSOR.NEWTON_SCHULZ.scale
    for _ in range(steps):   # g <- sum_i params[i] * (g g^T)^i g, summed in the order of params
      gram = g @ g.transpose(-2, -1)
      term, out = g, params[0] * g
      for p in params[1:]:
        term = gram @ term
        out = out + p * term
      g = out
    return g
