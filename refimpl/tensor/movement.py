"""Movement: reshape, expand, permute, pad, shrink, flip and what is built from them (transpose, squeeze,
cat, stack, split, repeat, ...). Each is a RESHAPE/EXPAND/PERMUTE/PAD/SHRINK/FLIP node (spec/uop.md)."""
from __future__ import annotations

import math
from typing import Sequence


from refimpl.dtype import least_upper_dtype
from refimpl.helpers import SpecRuntimeError, SpecValueError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor import validate
from refimpl.tensor.args import _axis, _shape_arg
from refimpl.tensor.core import Tensor


class MovementOps:
  def reshape(self, shape=(), *args) -> Tensor:
    """The same elements in row-major order under a new shape: one entry may be -1 (inferred), and None keeps the
    size of the axis at that position (TENSOR.RESHAPE.none, as tinygrad)."""
    shape = tuple(shape) + args if isinstance(shape, (tuple, list)) else (shape, *args)
    if any(s is None for s in shape):
      if any(s is None and i >= self.ndim for i, s in enumerate(shape)):
        raise SpecValueError("TENSOR.RESHAPE.none", f"None in {shape} at an axis that shape {self.shape} lacks")
      shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(shape))
    shape = validate.shape(shape, infer=True)
    if shape.count(-1) > 1: raise SpecValueError("API.ARGS.infer", f"shape={shape}: only one -1 allowed")
    if -1 in shape:
      known = math.prod(s for s in shape if s != -1)
      if known == 0 or self.numel() % known:
        raise SpecValueError("UOP.RESHAPE", f"cannot reshape {self.shape} to shape={shape}")
      shape = tuple(self.numel() // known if s == -1 else s for s in shape)
    if math.prod(shape) != self.numel():   # UOP.RESHAPE: the element count stays
      raise SpecValueError("UOP.RESHAPE", f"cannot reshape {self.shape} ({self.numel()} elements) to shape={shape}")
    return self if shape == self.shape else self._mov(Ops.RESHAPE, shape)

  def expand(self, *shape) -> Tensor:
    """Broadcast size-1 axes (and new leading axes) to `shape`; -1 keeps an axis."""
    shape = validate.shape(shape, infer=True)
    if len(shape) < self.ndim:
      raise SpecValueError("UOP.EXPAND", f"cannot expand {self.shape} to fewer dims, shape={shape}")
    if -1 in shape[:len(shape) - self.ndim]:
      raise SpecValueError("API.ARGS.infer", f"shape={shape}: -1 keeps an existing axis, a new one needs its size")
    shape = tuple(s if n == -1 else n for s, n in zip((1,) * (len(shape) - self.ndim) + self.shape, shape))
    old = (1,) * (len(shape) - self.ndim) + self.shape
    if any(s != n and s != 1 for s, n in zip(old, shape)):   # UOP.EXPAND: only size-1 axes stretch
      raise SpecValueError("UOP.EXPAND", f"cannot expand {self.shape} to shape={shape}: only axes of size 1 grow")
    t = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    return t if shape == t.shape else t._mov(Ops.EXPAND, shape)

  def permute(self, *order) -> Tensor:
    """Reorder the axes."""
    if len(order) == 1 and isinstance(order[0], (tuple, list)): order = tuple(order[0])
    order = validate.axes(order, self.ndim, "order") if self.ndim or order else ()
    if len(order) != self.ndim:   # UOP.PERMUTE: a permutation of every axis
      raise SpecValueError("UOP.PERMUTE", f"order={order} must name each of the {self.ndim} axes once")
    return self if order == tuple(range(self.ndim)) else self._mov(Ops.PERMUTE, order)

  def pad(self, padding, mode: str = "constant", value=0.0) -> Tensor:
    """Pad each axis by (before, after) elements: `padding` is one (before, after) pair or None per axis, or torch's
    flat form (left, right, top, bottom, ...) for the last axes, last axis first (TENSOR.PAD). A negative amount
    cuts. `mode` 'constant' fills with `value`; 'reflect', 'replicate' and 'circular' are torch's modes."""
    pads = _pad_groups(padding, self.ndim)
    if mode == "constant": return self._pad_constant(pads, value)
    if mode in ("reflect", "replicate", "circular"): return self._pad_mode(pads, mode)
    raise SpecValueError("TENSOR.PAD.mode", f"mode={mode!r} is not constant, reflect, replicate or circular")

  def _mov_pad(self, pads: tuple[tuple[int, int], ...]) -> Tensor:
    """The PAD node itself: zeros around, amounts >= 0 (UOP.PAD)."""
    return self if all(p == (0, 0) for p in pads) else self._mov(Ops.PAD, pads)

  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    """Keep [start, end) of each axis (None keeps the whole axis)."""
    arg = tuple(arg)
    if len(arg) != self.ndim: raise SpecValueError("UOP.SHRINK", f"shrink {arg} for {self.ndim} axes")
    bounds = tuple((0, n) if b is None else (validate.integer(b[0], "shrink"), validate.integer(b[1], "shrink"))
                   for b, n in zip(arg, self.shape))
    if any(not 0 <= lo <= hi <= n for (lo, hi), n in zip(bounds, self.shape)):   # UOP.SHRINK
      raise SpecValueError("UOP.SHRINK", f"shrink {bounds} is not within the shape {self.shape}")
    return self if all(b == (0, n) for b, n in zip(bounds, self.shape)) else self._mov(Ops.SHRINK, bounds)

  def flip(self, axis) -> Tensor:
    """Reverse the order along `axis`."""
    axes = set(validate.axes(axis, self.ndim))
    return self._mov(Ops.FLIP, tuple(i in axes for i in range(self.ndim)))

  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    """Swap axes dim0 and dim1."""
    order = list(range(self.ndim))
    dim0, dim1 = _axis(dim0, self.ndim, "dim0"), _axis(dim1, self.ndim, "dim1")
    if not self.ndim: return self
    order[dim0], order[dim1] = order[dim1], order[dim0]
    return self.permute(order)

  @property
  def T(self) -> Tensor:
    """The transpose of axes 0 and 1."""
    return self.transpose()

  def view(self, shape=(), *args) -> Tensor:
    """Same as reshape (every tensor here is a lazy view)."""
    return self.reshape(shape, *args)

  def expand_as(self, other: Tensor) -> Tensor:
    """Broadcast to `other`'s shape."""
    return self.expand(other.shape)

  def contiguous(self) -> Tensor:
    """The same values, materialized in their own buffer when realized (CONTIGUOUS)."""
    return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

  def squeeze(self, dim=None) -> Tensor:
    """Drop size-1 axes: all of them, or those of `dim` (an int or tuple); a named axis of another size stays."""
    if dim is None: drop = {i for i, n in enumerate(self.shape) if n == 1}
    else: drop = {d for d in validate.axes(dim, self.ndim, "dim") if self.ndim and self.shape[d] == 1}
    return self.reshape(tuple(n for i, n in enumerate(self.shape) if i not in drop))

  def unsqueeze(self, dim: int) -> Tensor:
    """Insert a size-1 axis at `dim` (negative counts from the end of the result)."""
    d = _axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes start_dim..end_dim into one (a 0-d tensor becomes shape (1,), as in torch)."""
    if self.ndim == 0: return self.reshape(1)
    s, e = _axis(start_dim, self.ndim), _axis(end_dim, self.ndim)
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unflatten(self, dim: int, sizes) -> Tensor:
    """Split axis `dim` into `sizes` (one entry may be -1, inferred from that axis alone as torch does, so that a
    0-size axis elsewhere does not make it ambiguous)."""
    d = _axis(dim, self.ndim, "dim")
    sizes = validate.shape(tuple(sizes), "sizes", infer=True)
    if sizes.count(-1) > 1: raise SpecValueError("API.ARGS.infer", f"sizes={sizes}: only one -1 allowed")
    if sizes.count(-1) == 1:
      known = math.prod(s for s in sizes if s != -1)
      if known == 0 or self.shape[d] % known:
        raise SpecValueError("UOP.RESHAPE", f"cannot unflatten axis of size {self.shape[d]} into {sizes}")
      sizes = tuple(self.shape[d] // known if s == -1 else s for s in sizes)
    return self.reshape(self.shape[:d] + sizes + self.shape[d + 1:])

  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Concatenate along `dim`; dtypes promote together (DT.PROMOTE). Each piece is padded to the full length and
    selected with a padded mask (WHERE), not added, so that -0.0 and NaN pass through unchanged. As tinygrad,
    `Tensor.cat([a, b])` (a sequence first) is `a.cat(b)` (TENSOR.CAT.sequence)."""
    ts = _tensors(self, args)
    self = ts[0]
    if not all(isinstance(t, Tensor) for t in ts):
      raise validate.SpecTypeError("TENSOR.CAT", f"cat joins Tensors, got {[type(t).__name__ for t in ts]}")
    d = _axis(dim, self.ndim, "dim")
    for t in ts:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise SpecRuntimeError("TENSOR.CAT", f"cat: shapes {[t.shape for t in ts]} differ outside dim {d}")
    dt = least_upper_dtype(*(t.dtype for t in ts))
    total = sum(t.shape[d] for t in ts)
    pieces, off = [], 0
    for t in ts:
      if t.shape[d]: pieces.append((t.cast(dt), off))
      off += t.shape[d]
    if not pieces: return ts[0].cast(dt).reshape(ts[0].shape[:d] + (0,) + ts[0].shape[d + 1:])
    out = None
    for t, off in pieces:
      pad = tuple((off, total - off - t.shape[d]) if i == d else (0, 0) for i in range(t.ndim))
      p = t.pad(pad)
      if out is None: out = p
      else: out = Tensor.full(t.shape, True, device=t.device).pad(pad).where(p, out)
    return out

  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Join equal-shape tensors along a new axis `dim`; `Tensor.stack((a, b))` is `a.stack(b)` (TENSOR.CAT.sequence)."""
    ts = _tensors(self, args)
    if any(t.shape != ts[0].shape for t in ts):
      raise SpecRuntimeError("TENSOR.CAT", f"stack: shapes {[t.shape for t in ts]} differ")
    d = _axis(dim, ts[0].ndim + 1, "dim")
    return Tensor.cat(*(t.unsqueeze(d) for t in ts), dim=d)

  def split(self, sizes, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along `dim`: of `sizes` each (an int; the last may be shorter) or of the listed sizes."""
    d = _axis(dim, self.ndim, "dim")
    n = self.shape[d] if self.ndim else 0
    if not self.ndim: raise SpecValueError("TENSOR.SPLIT", "split of a 0-d tensor: it has no axis to cut")
    if not isinstance(sizes, (list, tuple)):
      sizes = validate.size(sizes, "sizes", "TENSOR.SPLIT")
      if sizes == 0 and n: raise SpecValueError("TENSOR.SPLIT", f"sizes=0 for an axis of {n}: pieces need a size >= 1")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if n else [0]
    sizes = [validate.size(s, "sizes", "TENSOR.SPLIT") for s in sizes]
    if sum(sizes) != n: raise SpecValueError("TENSOR.SPLIT", f"split sizes {sizes} do not add up to {n}")
    offs = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(self.shrink(tuple((o, o + s) if i == d else None for i in range(self.ndim)))
                 for o, s in zip(offs, sizes))

  def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` pieces of ceil(n / chunks) along `dim` (torch.chunk)."""
    chunks = validate.positive(chunks, "chunks", "TENSOR.SPLIT")
    n = self.shape[_axis(dim, self.ndim, "dim")] if self.ndim else 0
    return self.split(max(1, -(-n // chunks)), dim)

  def repeat(self, repeats, *args) -> Tensor:
    """Tile: axis i repeated repeats[i] times (torch.Tensor.repeat; extra leading repeats add axes)."""
    reps = _shape_arg((repeats, *args) if args else (repeats,), "repeats")
    if len(reps) < self.ndim:
      raise SpecValueError("API.ARGS.count", f"repeat: {len(reps)} repeats for {self.ndim} dims")
    shape = (1,) * (len(reps) - self.ndim) + self.shape
    # interleave a broadcast axis before each axis: (r0, s0, r1, s1, ...) then merge the pairs
    x = self.reshape(tuple(v for n in shape for v in (1, n)))
    x = x.expand(tuple(v for r, n in zip(reps, shape) for v in (r, n)))
    return x.reshape(tuple(r * n for r, n in zip(reps, shape)))

  def _stride(self, ax: int, step: int) -> Tensor:
    """Every `step`-th element of axis `ax`, starting with the first: pad to a multiple, split, keep column 0."""
    if step == 1: return self
    n = self.shape[ax]
    cnt = -(-n // step)
    x = self.pad(tuple((0, cnt * step - n) if i == ax else (0, 0) for i in range(self.ndim)))
    x = x.reshape(self.shape[:ax] + (cnt, step) + self.shape[ax + 1:])
    x = x.shrink(tuple((0, 1) if i == ax + 1 else None for i in range(x.ndim)))
    return x.reshape(self.shape[:ax] + (cnt,) + self.shape[ax + 1:])


def _tensors(first, rest) -> tuple[Tensor, ...]:
  """cat/stack's operands: `first, *rest`, or the sequence `first` when it is one (and nothing follows it)."""
  if isinstance(first, (list, tuple)):
    if rest: raise validate.SpecTypeError("TENSOR.CAT.sequence",
                                          "give the tensors either as one sequence or one by one")
    if not first: raise SpecValueError("TENSOR.CAT.sequence", "no tensors to join")
    return tuple(first)
  return (first, *rest)


def _pad_groups(padding, ndim: int) -> tuple[tuple[int, int], ...]:
  """A pad argument as one (before, after) pair per axis: grouped (a pair or None per axis) or torch's flat form
  (pairs for the last axes, last axis first; TENSOR.PAD.flat)."""
  padding = tuple(padding)
  if all(isinstance(p, int) and not isinstance(p, bool) for p in padding) and padding:
    if len(padding) % 2 or len(padding) > 2 * ndim:
      raise SpecValueError("TENSOR.PAD.flat", f"flat padding {padding} needs an even count of at most {2 * ndim}")
    pairs = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
    return ((0, 0),) * (ndim - len(pairs)) + tuple(pairs)
  if len(padding) != ndim: raise SpecValueError("TENSOR.PAD", f"padding {padding} for {ndim} axes")
  if any(p is not None and (not isinstance(p, (tuple, list)) or len(p) != 2) for p in padding):
    raise SpecValueError("TENSOR.PAD", f"padding {padding}: each axis takes None or a (before, after) pair")
  return tuple((0, 0) if p is None else (validate.integer(p[0], "padding"), validate.integer(p[1], "padding"))
               for p in padding)
