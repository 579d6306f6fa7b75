"""Random tensors: a counter-based generator seeded by manual_seed; values differ from tinygrad's
(spec/nn.md NN.INIT for the initialisers)."""
from __future__ import annotations

import math

import numpy as np

from refimpl.dtype import DTypeLike, dtypes, to_dtype
from refimpl.helpers import SpecTypeError, SpecValueError
from refimpl.tensor.args import _shape_arg
from refimpl.tensor.core import Tensor


class RandomOps:
  _seed: int = 0
  _rng_counter: int = 0

  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Seed the generator: after manual_seed(s) the same sequence of random calls gives the same tensors."""
    Tensor._seed, Tensor._rng_counter = int(seed), 0

  @staticmethod
  def _rng() -> np.random.Generator:
    # one PCG64 stream per (seed, call number): a call's values do not depend on the sizes of earlier calls
    Tensor._rng_counter += 1
    return np.random.Generator(np.random.PCG64([Tensor._seed, Tensor._rng_counter]))

  @staticmethod
  def rand(*shape, device: str | None = None, dtype: DTypeLike | None = None, contiguous: bool = True,
           **kw) -> Tensor:
    """Uniform samples in [0, 1) of a float dtype (default float). The values are made on the host, so the result
    is a buffer whatever `contiguous` says (TENSOR.RAND.contiguous)."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise SpecTypeError("TENSOR.RAND.dtype", f"rand makes floats, dtype={dt!r} is not one")
    vals = Tensor._rng().random(_shape_arg(shape), dtype=np.float64 if dt == dtypes.float64 else np.float32)
    # rounding a float32 just below 1 to a narrower float can give 1.0: clamp to the largest value below 1
    if dt in (dtypes.float16, dtypes.bfloat16): vals = np.minimum(vals, 1 - 2.0 ** -(dtypes.finfo(dt)[1] + 1))
    return Tensor(vals, device=device).cast(dt) if dt != dtypes.float64 else Tensor(vals, device=device)

  @staticmethod
  def randn(*shape, dtype: DTypeLike | None = None, device: str | None = None, **kw) -> Tensor:
    """Standard normal samples (default float)."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    vals = Tensor._rng().standard_normal(_shape_arg(shape))
    return Tensor(vals, device=device).cast(dt)

  @staticmethod
  def randint(*shape, low: int = 0, high: int = 10, dtype: DTypeLike = dtypes.int32, device: str | None = None,
              **kw) -> Tensor:
    """Uniform integers in [low, high)."""
    dt = to_dtype(dtype)
    vals = Tensor._rng().integers(low, high, _shape_arg(shape), dtype=np.int64)
    return Tensor(vals, device=device).cast(dt)

  @staticmethod
  def uniform(*shape, low: float = 0.0, high: float = 1.0, dtype: DTypeLike | None = None, **kw) -> Tensor:
    """Uniform samples in [low, high): low + (high - low) * rand."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return (Tensor.rand(*shape, dtype=dt, **kw) * (high - low) + low).cast(dt)

  @staticmethod
  def normal(*shape, mean: float = 0.0, std: float = 1.0, dtype: DTypeLike | None = None, **kw) -> Tensor:
    """Normal samples: mean + std * randn."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return (Tensor.randn(*shape, dtype=dt, **kw) * std + mean).cast(dt)

  @staticmethod
  def glorot_uniform(*shape, **kw) -> Tensor:
    """Glorot (Xavier) uniform initial values: U(-b, b) with b = sqrt(6 / (shape[0] + prod(shape[1:]))) (NN.INIT)."""
    shape = _shape_arg(shape)
    bound = math.sqrt(6 / (shape[0] + math.prod(shape[1:]))) if shape else 1.0
    return Tensor.uniform(*shape, low=-bound, high=bound, **kw)

  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kw) -> Tensor:
    """He (Kaiming) uniform initial values for a leaky-relu slope `a`: U(-b, b) with
    b = sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:])) (NN.INIT)."""
    shape = _shape_arg(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a * a)) / math.sqrt(max(1, math.prod(shape[1:])))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kw)

  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kw) -> Tensor:
    """He (Kaiming) normal initial values: N(0, std^2) with std = sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:]))
    (NN.INIT)."""
    shape = _shape_arg(shape)
    std = math.sqrt(2.0 / (1 + a * a)) / math.sqrt(max(1, math.prod(shape[1:])))
    return Tensor.normal(*shape, mean=0.0, std=std, **kw)

  # ---- sampling from tensors (TENSOR.RAND_LIKE, TENSOR.RANDPERM, TENSOR.MULTINOMIAL) ----
  def rand_like(self, **kwargs) -> Tensor:
    """rand of this tensor's shape, and its dtype and device unless given (TENSOR.RAND_LIKE)."""
    return Tensor.rand(*self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype),
                       **kwargs)

  def randn_like(self, dtype: DTypeLike | None = None, **kwargs) -> Tensor:
    """randn of this tensor's shape, and its dtype and device unless given (TENSOR.RAND_LIKE)."""
    return Tensor.randn(*self.shape, dtype=dtype or self.dtype, device=kwargs.pop("device", self.device), **kwargs)

  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> Tensor:
    """Uniform samples in [-1, 1) scaled by prod(shape)**-0.5 (TENSOR.SCALED_UNIFORM)."""
    shape = _shape_arg(shape)
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs) * (max(1, math.prod(shape)) ** -0.5)

  @staticmethod
  def randperm(n: int, device=None, dtype=dtypes.int32, **kwargs) -> Tensor:
    """A uniformly random permutation of 0 .. n-1 (TENSOR.RANDPERM)."""
    if not isinstance(n, int) or n < 0: raise SpecValueError("TENSOR.RANDPERM", f"n={n!r} must be an int >= 0")
    return Tensor(Tensor._rng().permutation(n).astype(np.int64), device=device).cast(dtype)

  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """`num_samples` category indices per row of the weights (1-d: one row), each drawn with probability
    proportional to its weight: by inverse CDF of one uniform sample, and without replacement one sample at a time,
    each drawn category's weight then set to 0 (TENSOR.MULTINOMIAL). int32, as tinygrad (torch: int64)."""
    if self.ndim not in (1, 2):
      raise SpecValueError("TENSOR.MULTINOMIAL.shape", f"weights must be 1-d or 2-d, got shape {self.shape}")
    if not isinstance(num_samples, int) or num_samples < 1:
      raise SpecValueError("TENSOR.MULTINOMIAL.num_samples", f"num_samples={num_samples!r} must be a positive int")
    w = (self.unsqueeze(0) if self.ndim == 1 else self).float()
    if not replacement and num_samples > w.shape[1]:
      raise SpecValueError("TENSOR.MULTINOMIAL.num_samples", f"num_samples={num_samples} without replacement is more "
                      f"than the {w.shape[1]} categories")
    if replacement: out = w._sample_categories(num_samples)
    else:
      picks = []
      for _ in range(num_samples):
        k = w._sample_categories(1)   # (rows, 1)
        picks.append(k)
        w = (Tensor.arange(w.shape[1], device=w.device).reshape(1, -1) == k).where(0.0, w)
      out = picks[0].cat(*picks[1:], dim=1)
    return (out.squeeze(0) if self.ndim == 1 else out).cast(dtypes.int32)

  def _sample_categories(self, num_samples: int) -> Tensor:
    """(rows, n) float weights -> (rows, num_samples) indices: the number of CDF values at or below a uniform
    sample u in [0, 1), so category j is drawn for cdf[j-1] <= u < cdf[j] (a zero weight is never drawn)."""
    cdf = self.cumsum(1)
    cdf = cdf / cdf.shrink((None, (self.shape[1] - 1, self.shape[1])))
    u = Tensor.rand(self.shape[0], num_samples, 1, device=self.device)
    return (u >= cdf.unsqueeze(1)).cast(dtypes.int32).sum(2)

  # ---- the counter-based generator (TENSOR.THREEFRY, TENSOR.RANDOM_BITS) ----
  def threefry(self, seed) -> Tensor:
    """Threefry-2x32 with 20 rounds (Salmon et al., 2011) of each uint64 counter in self under the uint64 key `seed`
    (broadcast): each 64-bit value splits into the words (low, high); the result is (y1 << 32) | y0 (TENSOR.THREEFRY).
    Built from uint32 additions (wrapping, DT.WRAP), XOR and shifts."""
    if not isinstance(seed, Tensor): seed = Tensor(seed, device=self.device, dtype=dtypes.uint64)
    if self.dtype != dtypes.uint64 or seed.dtype != dtypes.uint64:
      raise SpecTypeError("TENSOR.THREEFRY.dtype", f"threefry takes uint64 counters and key, got {self.dtype!r} and "
                      f"{seed.dtype!r}")
    u32 = dtypes.uint32
    x, key = self._broadcasted(seed)
    x0, x1 = x.cast(u32), (x >> 32).cast(u32)
    k0, k1 = key.cast(u32), (key >> 32).cast(u32)
    ks = (k0, k1, k0 ^ k1 ^ Tensor(0x1BD11BDA, device=self.device, dtype=u32))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for group in range(5):   # 5 groups of 4 rounds, a key injection after each
      for r in _THREEFRY_ROTATIONS[group % 2]:
        x0 = x0 + x1
        x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
      s = group + 1
      x0, x1 = x0 + ks[s % 3], x1 + ks[(s + 1) % 3] + Tensor(s, device=self.device, dtype=u32)
    return (x1.cast(dtypes.uint64) << 32) | x0.cast(dtypes.uint64)

  @staticmethod
  def _threefry_random_bits(key: Tensor, counts0: Tensor, counts1: Tensor) -> Tensor:
    """threefry of the counters (counts1 << 32 | counts0) under the key (key[1] << 32 | key[0]), as uint32: the low
    words of all results, then the high words."""
    u64 = dtypes.uint64
    x = (counts1.cast(u64) << 32) | counts0.cast(u64)
    k = (key.shrink(((1, 2),)).cast(u64) << 32) | key.shrink(((0, 1),)).cast(u64)
    y = x.threefry(k)
    return y.cast(dtypes.uint32).cat((y >> 32).cast(dtypes.uint32))

  @staticmethod
  def random_bits(key: Tensor, counter: Tensor, num: int) -> Tensor:
    """`num` random uint32 words from a (2,) uint32 key and a (2,) uint32 counter (low, high), as tinygrad makes its
    random numbers (TENSOR.RANDOM_BITS): per chunk of at most 2**32-1 words starting at word i, a key derived from
    the counter advanced by i, then threefry of the counters 0 .. h-1 paired with h .. 2h-1 (h = ceil(chunk / 2))."""
    if tuple(key.shape) != (2,) or tuple(counter.shape) != (2,) or key.dtype != dtypes.uint32 or \
       counter.dtype != dtypes.uint32:
      raise SpecValueError("TENSOR.RANDOM_BITS", f"key and counter must be (2,) uint32 tensors, got {key.shape} "
                      f"{key.dtype!r} and {counter.shape} {counter.dtype!r}")
    u32 = dtypes.uint32
    low, high = counter.shrink(((0, 1),)), counter.shrink(((1, 2),))
    chunks = []
    for i in range(0, num, 2 ** 32 - 1):
      size = min(num - i, 2 ** 32 - 1)
      c_low = low + Tensor(i & 0xFFFFFFFF, device=low.device, dtype=u32)
      c_high = high + Tensor(i >> 32, device=low.device, dtype=u32) + (c_low < low).cast(u32)   # the carry
      chunk_key = Tensor._threefry_random_bits(key, c_low, c_high)
      h = (size + 1) // 2
      counts0 = Tensor.arange(h, dtype=u32, device=key.device)
      chunks.append(Tensor._threefry_random_bits(chunk_key, counts0, counts0 + h).shrink(((0, size),)))
    if not chunks: return counter.shrink(((0, 0),))
    return chunks[0].cat(*chunks[1:])


# TENSOR.THREEFRY: the rotation constants of Threefry-2x32, four per round group, alternating
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
