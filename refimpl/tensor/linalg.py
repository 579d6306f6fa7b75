"""Linear algebra: matmul, dot, linear and einsum, as broadcast multiplies and sums (no matmul primitive)."""
from __future__ import annotations



from refimpl.dtype import DTypeLike, to_dtype
from refimpl.helpers import SpecError
from refimpl.tensor.core import Tensor


class LinalgOps:
  def dot(self, w: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """(..., n, k) @ (..., k, m): a broadcast multiply and a sum over k (there is no matmul primitive). The products
    are in the promoted dtype (DT.PROMOTE); they are summed in `dtype` when given, else as sum accumulates (DT.SUM),
    and the result has `dtype`, else the promoted dtype (TENSOR.MATMUL.dtype, as tinygrad: int8 @ int8 is int8)."""
    if self.ndim == 0 or w.ndim == 0: raise SpecError("UOP.REDUCE_AXIS", "matmul needs tensors of at least 1 dim")
    x = self.reshape(1, -1) if self.ndim == 1 else self
    m = w.reshape(-1, 1) if w.ndim == 1 else w
    if x.shape[-1] != m.shape[-2]: raise SpecError("UOP.EXPAND", f"matmul of {self.shape} and {w.shape}")
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
    """Einstein summation over letters (no '...'): a repeated letter within an operand takes its diagonal; each
    operand is permuted and reshaped onto the sorted list of all letters, the operands are multiplied with
    broadcasting, and the letters missing from the output are summed. Without '->' the output is the letters that
    occur once, sorted (numpy/torch)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    formula = formula.replace(" ", "")
    lhs, out = formula.split("->") if "->" in formula else (formula, None)
    ins = lhs.split(",")
    if len(ins) != len(operands): raise ValueError(f"einsum: {len(ins)} inputs in {formula!r}, {len(operands)} given")
    if out is None: out = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    letters = sorted(set(lhs) - {","})
    sizes: dict[str, int] = {}
    terms = []
    for spec, t in zip(ins, operands):
      if len(spec) != t.ndim: raise ValueError(f"einsum: {spec!r} does not match the shape {t.shape}")
      spec = list(spec)
      while (rep := next((c for c in spec if spec.count(c) > 1), None)) is not None:
        i, j = [k for k, c in enumerate(spec) if c == rep][:2]
        t = t._diagonal(i, j)
        spec = [c for k, c in enumerate(spec) if k not in (i, j)] + [rep]
      for c, n in zip(spec, t.shape):
        if sizes.setdefault(c, n) != n and 1 not in (sizes[c], n): raise ValueError(f"einsum: sizes of {c!r} differ")
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
