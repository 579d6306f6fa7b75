"""Shaping: ops that rearrange or select elements by position without computing with them (spec/tensor_shape.md):
triangles and diagonals, roll, repeat_interleave, meshgrid, unfold, pad_to/shrink_to, rearrange, and the padding
modes of `pad` (constant with a value, reflect, replicate, circular). Each is built from movement ops and WHERE, so
values pass through unchanged (-0.0 and NaN included) and gradients follow from GRAD.PAD/SHRINK/EXPAND/WHERE."""
from __future__ import annotations

import math

from refimpl.dtype import dtypes
from refimpl.helpers import SpecTypeError, SpecValueError
from refimpl.tensor.args import _axis
from refimpl.tensor.core import Tensor


def _ints(v, name: str, clause: str) -> tuple[int, ...]:
  """An int or a sequence of ints as a tuple."""
  vals = (v,) if isinstance(v, int) else tuple(v)
  if not all(isinstance(i, int) and not isinstance(i, bool) for i in vals):
    raise SpecTypeError(clause, f"{name}={v!r} must be an int or a sequence of ints")
  return vals


class ShapingOps:
  # ---- triangles and diagonals ----
  def _triangle(self, diagonal: int, lower: bool) -> Tensor:
    """Keep x[..., i, j] where j - i <= diagonal (lower) or j - i >= diagonal (upper); the rest become 0."""
    if self.ndim < 2: raise SpecValueError("TENSOR.TRIL", f"needs at least 2 dims, got shape {self.shape}")
    n, m = self.shape[-2:]
    rows = Tensor.arange(n, device=self.device).reshape(n, 1)
    cols = Tensor.arange(m, device=self.device).reshape(1, m)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return keep.where(self, Tensor(dtypes.as_const(0, self.dtype), dtype=self.dtype, device=self.device))

  def tril(self, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes: x[..., i, j] where j - i <= diagonal, else 0 (TENSOR.TRIL)."""
    return self._triangle(int(diagonal), lower=True)

  def triu(self, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes: x[..., i, j] where j - i >= diagonal, else 0 (TENSOR.TRIL)."""
    return self._triangle(int(diagonal), lower=False)

  def diag(self) -> Tensor:
    """The (n, n) matrix with this 1-D tensor on its main diagonal and 0 elsewhere (TENSOR.DIAG). Each element is
    padded with n zeros and the rows of n + 1 are re-read as rows of n, which shifts each one along by one."""
    if self.ndim != 1: raise SpecValueError("TENSOR.DIAG", f"needs a 1-D tensor, got shape {self.shape}")
    n = self.shape[0]
    return self.reshape(n, 1).pad(((0, 0), (0, n))).reshape(n * (n + 1)).shrink(((0, n * n),)).reshape(n, n)

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """x[..., i, i + offset] over axes dim1 and dim2, as a new last axis (torch.diagonal; TENSOR.DIAGONAL)."""
    a, b = _axis(dim1, self.ndim), _axis(dim2, self.ndim)
    if a == b: raise SpecValueError("TENSOR.DIAGONAL", f"dim1={dim1} and dim2={dim2} name the same axis")
    rest = [k for k in range(self.ndim) if k not in (a, b)]
    x = self.permute(rest + [a, b])
    n, m = x.shape[-2:]
    lead = [None] * len(rest)
    # the diagonal `offset` starts at (0, offset) or (-offset, 0); cut the matrix so that it is the main one
    x = x.shrink(lead + [(0, n), (min(offset, m), m)] if offset >= 0 else lead + [(min(-offset, n), n), (0, m)])
    d = min(x.shape[-2:])
    x = x.shrink(lead + [(0, d), (0, d)])
    return x.reshape(x.shape[:-2] + (0,)) if d == 0 else x._diagonal(x.ndim - 2, x.ndim - 1)

  # ---- rolling and repeating ----
  def roll(self, shifts, dims=None) -> Tensor:
    """Circular shift: out[..., (i + s) % n, ...] = x[..., i, ...] for each shift s along its axis; without dims the
    flattened tensor is rolled and reshaped back (torch.roll; TENSOR.ROLL)."""
    shifts = _ints(shifts, "shifts", "TENSOR.ROLL")
    if dims is None:
      if len(shifts) != 1: raise SpecValueError("TENSOR.ROLL",
                                                f"shifts={shifts} needs dims when it has several entries")
      return self.flatten().roll(shifts, 0).reshape(self.shape)
    dims = tuple(_axis(d, self.ndim) for d in _ints(dims, "dims", "TENSOR.ROLL"))
    if len(dims) != len(shifts): raise SpecValueError("TENSOR.ROLL", f"{len(shifts)} shifts for {len(dims)} dims")
    x = self
    for d, s in zip(dims, shifts):
      n = x.shape[d]
      if n == 0 or s % n == 0: continue
      # two copies side by side; the window starting at n - s reads x[n-s:], then x[:n-s]
      twice = x.repeat(tuple(2 if i == d else 1 for i in range(x.ndim)))
      x = twice.shrink(tuple((n - s % n, 2 * n - s % n) if i == d else None for i in range(x.ndim)))
    return x

  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
    """Each element repeated `repeats` times in place along `dim` (the flattened tensor when dim is None):
    [a, b] -> [a, a, b, b] (torch.repeat_interleave with an int; TENSOR.REPEAT_INTERLEAVE)."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
      raise SpecValueError("TENSOR.REPEAT_INTERLEAVE", f"repeats={repeats!r} must be an int >= 0")
    x, d = (self.flatten(), 0) if dim is None else (self, _axis(dim, self.ndim))
    s = x.shape
    return x.reshape(s[:d + 1] + (1,) + s[d + 1:]).expand(s[:d + 1] + (repeats,) + s[d + 1:]) \
            .reshape(s[:d] + (s[d] * repeats,) + s[d + 1:])

  def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 0-d or 1-D tensors: result k has shape (n_1, ..., n_m) and holds input k along axis k
    ('ij'); 'xy' swaps the first two axes of every grid (torch.meshgrid; TENSOR.MESHGRID)."""
    if indexing not in ("ij", "xy"): raise SpecValueError("TENSOR.MESHGRID",
                                                          f"indexing={indexing!r} is not 'ij' or 'xy'")
    ts = (self, *args)
    if any(t.ndim > 1 for t in ts):
      raise SpecValueError("TENSOR.MESHGRID", f"inputs must be 0-d or 1-D, got shapes {[t.shape for t in ts]}")
    ts = tuple(t.reshape(-1) for t in ts)
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1: axes[0], axes[1] = 1, 0
    shape = [0] * len(ts)
    for t, a in zip(ts, axes): shape[a] = t.shape[0]
    return tuple(t.reshape(tuple(-1 if i == a else 1 for i in range(len(ts)))).expand(tuple(shape))
                 for t, a in zip(ts, axes))

  def unfold(self, dim: int, size: int, step: int) -> Tensor:
    """Windows of `size` elements every `step` along `dim`: that axis becomes the count (n - size) // step + 1 and
    a new last axis holds each window (torch.Tensor.unfold; TENSOR.UNFOLD)."""
    d = _axis(dim, self.ndim)
    n = self.shape[d] if self.ndim else 1
    if size < 0 or step <= 0 or size > n:
      raise SpecValueError("TENSOR.UNFOLD",
                           f"size={size} and step={step} for an axis of {n} (0 <= size <= {n}, step > 0)")
    if self.ndim == 0: return self.reshape(1)[:size]
    others = [k for k in range(self.ndim) if k != d]
    x = self.permute(others + [d])._windows(size, step, 1)        # (others..., count, size)
    nd = x.ndim
    return x.permute(list(range(d)) + [nd - 2] + list(range(d, nd - 2)) + [nd - 1])

  # ---- growing and cutting to a shape ----
  def pad_to(self, shape, *args, value=0) -> Tensor:
    """Pad at the end of each axis up to `shape` (None keeps an axis) with `value` (TENSOR.PAD_TO)."""
    new = tuple(shape) + args if isinstance(shape, (tuple, list)) else (shape, *args)
    if len(new) != self.ndim or any(s is not None and s < n for s, n in zip(new, self.shape)):
      raise SpecValueError("TENSOR.PAD_TO", f"shape {new} is not at least {self.shape} on every axis")
    return self.pad(tuple((0, 0 if s is None else s - n) for s, n in zip(new, self.shape)), value=value)

  def shrink_to(self, shape, *args) -> Tensor:
    """Keep the first shape[i] elements of each axis (None keeps an axis) (TENSOR.SHRINK_TO)."""
    new = tuple(shape) + args if isinstance(shape, (tuple, list)) else (shape, *args)
    if len(new) != self.ndim or any(s is not None and not 0 <= s <= n for s, n in zip(new, self.shape)):
      raise SpecValueError("TENSOR.SHRINK_TO", f"shape {new} is not within {self.shape} on every axis")
    return self.shrink(tuple(None if s is None else (0, s) for s in new))

  # ---- padding modes (called by MovementOps.pad) ----
  def _pad_constant(self, pads: tuple[tuple[int, int], ...], value) -> Tensor:
    """Negative amounts cut (TENSOR.PAD.negative), the rest is filled with `value` cast to the dtype (DT.CONST,
    TENSOR.PAD.constant).
    A value other than +0 is put in by WHERE on a padded mask, so that it is exact whatever the value."""
    x = self._cut_negative(pads)
    pads = tuple((max(b, 0), max(a, 0)) for b, a in pads)
    if all(p == (0, 0) for p in pads): return x
    padded = x._mov_pad(pads)
    value = dtypes.as_const(value, self.dtype)
    if value == 0 and not (isinstance(value, float) and math.copysign(1.0, value) < 0): return padded
    inside = Tensor.full(x.shape, True, device=self.device)._mov_pad(pads)
    return inside.where(padded, Tensor(value, dtype=self.dtype, device=self.device))

  def _cut_negative(self, pads: tuple[tuple[int, int], ...]) -> Tensor:
    """Remove -b elements at the start and -a at the end of each axis where the amount is negative."""
    if all(b >= 0 and a >= 0 for b, a in pads): return self
    cut = tuple((max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(pads, self.shape))
    if any(lo > hi for lo, hi in cut):
      raise SpecValueError("TENSOR.PAD.negative", f"padding {pads} cuts more than the shape {self.shape} holds")
    return self.shrink(cut)

  def _pad_mode(self, pads: tuple[tuple[int, int], ...], mode: str) -> Tensor:
    """reflect, replicate or circular padding, one axis after another, after the negative amounts have cut the
    input (torch's order; TENSOR.PAD.reflect/replicate/circular)."""
    x = self._cut_negative(pads)
    for d, (b, a) in enumerate(pads):
      b, a = max(b, 0), max(a, 0)
      if b == 0 and a == 0: continue
      n = x.shape[d]
      def part(lo: int, hi: int, t: Tensor = x, d: int = d) -> Tensor:
        return t.shrink(tuple((lo, hi) if i == d else None for i in range(t.ndim)))
      if mode == "reflect":
        if b >= n or a >= n:
          raise SpecValueError("TENSOR.PAD.reflect", f"padding ({b}, {a}) of axis {d} must be below its size {n}")
        before, after = part(1, b + 1).flip(d), part(n - 1 - a, n - 1).flip(d)
      elif mode == "replicate":
        if n == 0: raise SpecValueError("TENSOR.PAD.replicate", f"axis {d} is empty: there is no edge to replicate")
        edge = tuple(1 if i == d else s for i, s in enumerate(x.shape))
        before = part(0, 1).expand(tuple(b if i == d else s for i, s in enumerate(edge)))
        after = part(n - 1, n).expand(tuple(a if i == d else s for i, s in enumerate(edge)))
      else:
        if b > n or a > n:
          raise SpecValueError("TENSOR.PAD.circular", f"padding ({b}, {a}) of axis {d} wraps more than once around {n}")
        before, after = part(n - b, n), part(0, a)
      x = Tensor.cat(*(p for p, k in ((before, b), (x, 1), (after, a)) if k), dim=d)
    return x

  # ---- rearrange ----
  def rearrange(self, formula: str, **sizes) -> Tensor:
    """einops' rearrange: 'b (h w) c -> b h (w c)' splits the grouped input axes (sizes of all but one name in a group
    come from `sizes`), reorders the names and merges the output groups; '...' stands for the axes not named and
    '1' or '()' for an axis of size 1 (TENSOR.REARRANGE)."""
    if formula.count("->") != 1: raise SpecValueError("TENSOR.REARRANGE", f"{formula!r} needs exactly one '->'")
    lhs, rhs = (_parse_side(s) for s in formula.split("->"))
    names_l = [n for g in lhs for n in g]
    names_r = [n for g in rhs for n in g]
    if sorted(names_l) != sorted(names_r) or len(set(names_l)) != len(names_l):
      raise SpecValueError("TENSOR.REARRANGE", f"{formula!r}: each name must appear once on each side")
    if any("..." in g and len(g) > 1 for g in lhs):
      raise SpecValueError("TENSOR.REARRANGE", f"{formula!r}: '...' cannot be inside a group on the left")
    for k in sizes:
      if k not in names_l: raise SpecValueError("TENSOR.REARRANGE", f"size of {k!r}, which {formula!r} does not name")
    if ["..."] in lhs: n_ell = self.ndim - (len(lhs) - 1)
    else: n_ell = 0 if len(lhs) == self.ndim else -1
    if n_ell < 0: raise SpecValueError("TENSOR.REARRANGE",
                                       f"{formula!r} names {len(lhs)} axes, the tensor has {self.ndim}")
    ell = [f"...{i}" for i in range(n_ell)]
    lhs = [g2 for g in lhs for g2 in ([[e] for e in ell] if g == ["..."] else [g])]
    # a bare '...' on the right is one axis per ellipsis axis; inside a group it merges them
    rhs = [g2 for g in rhs for g2 in ([[e] for e in ell] if g == ["..."] else
                                       [[m for n in g for m in (ell if n == "..." else [n])]])]
    dims: dict[str, int] = {}
    for g, n in zip(lhs, self.shape):
      known = math.prod(sizes[k] for k in g if k in sizes)
      unknown = [k for k in g if k not in sizes]
      if len(unknown) > 1: raise SpecValueError("TENSOR.REARRANGE", f"group {g} has more than one unknown size")
      if unknown:
        if known == 0 or n % known: raise SpecValueError("TENSOR.REARRANGE", f"group {g} cannot split an axis of {n}")
        dims[unknown[0]] = n // known
      elif known != n: raise SpecValueError("TENSOR.REARRANGE", f"sizes of group {g} multiply to {known}, not {n}")
      dims.update({k: sizes[k] for k in g if k in sizes})
    order = [n for g in lhs for n in g]
    x = self.reshape(tuple(dims[n] for n in order))
    x = x.permute([order.index(n) for g in rhs for n in g])
    return x.reshape(tuple(math.prod(dims[n] for n in g) for g in rhs))


def _parse_side(side: str) -> list[list[str]]:
  """One side of a rearrange formula as groups of names: a bare name is a group of one, '(a b)' a group of two,
  '()' and '1' an empty group (an axis of size 1)."""
  tokens = side.replace("(", " ( ").replace(")", " ) ").replace("…", "...").split()
  groups: list[list[str]] = []
  open_group: list[str] | None = None
  for tok in tokens:
    if tok == "(":
      if open_group is not None: raise SpecValueError("TENSOR.REARRANGE", f"nested parentheses in {side!r}")
      open_group = []
    elif tok == ")":
      if open_group is None: raise SpecValueError("TENSOR.REARRANGE", f"unbalanced parentheses in {side!r}")
      groups.append(open_group)
      open_group = None
    elif tok == "1":
      if open_group is None: groups.append([])
    elif tok == "..." or tok.isidentifier():
      (groups.append([tok]) if open_group is None else open_group.append(tok))
    else: raise SpecValueError("TENSOR.REARRANGE", f"{tok!r} is not an axis name")
  if open_group is not None: raise SpecValueError("TENSOR.REARRANGE", f"unbalanced parentheses in {side!r}")
  return groups
