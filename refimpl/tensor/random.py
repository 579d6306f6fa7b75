"""Random tensors: a counter-based generator seeded by manual_seed; values differ from tinygrad's
(spec/nn.md NN.INIT for the initialisers)."""
from __future__ import annotations

import math

import numpy as np

from refimpl.dtype import DTypeLike, dtypes, to_dtype
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
  def rand(*shape, dtype: DTypeLike | None = None, device: str | None = None, **kw) -> Tensor:
    """Uniform samples in [0, 1) (default float)."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
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
