"""Data types, the promotion lattice and exact value conversion (spec/dtypes.md).

A DType is an immutable value object. Scalars are singletons reached through `dtypes`; vector types come from
`dt.vec(n)` and pointer types from `dt.ptr(size)`. Values of a dtype are modelled with Python objects:
`bool` for bool, `int` (in the dtype's range, two's complement for signed) for integers and `float` for every
float type (a float16/bfloat16/float32 value is a Python float that the narrower format represents exactly).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Union

__all__ = ["DType", "PtrDType", "dtypes", "least_upper_dtype", "least_upper_float", "to_dtype", "DTypeLike",
           "ConstType", "scalar_result_dtype", "sum_acc_dtype", "can_lossless_cast"]

ConstType = Union[bool, int, float]


@dataclass(frozen=True, eq=True)
class DType:
  """A scalar or vector element type. `count > 1` is a vector of `count` scalars (kernel level only)."""
  priority: int   # position in the table of spec/dtypes.md; used only to order types in listings
  itemsize: int   # bytes of one element (of the whole vector when count > 1)
  name: str       # C-style name; also how the type prints (`dtypes.int`)
  fmt: str | None  # struct module format character, None where struct has none (bfloat16, void)
  count: int = 1
  _scalar: DType | None = None

  def __repr__(self) -> str:
    if self.count > 1: return f"{self.scalar()!r}.vec({self.count})"
    return f"dtypes.{_REPR_NAME.get(self.name, self.name)}"

  def __lt__(self, other: DType) -> bool: return (self.priority, self.itemsize, self.name, self.count) < \
      (other.priority, other.itemsize, other.name, other.count)

  def scalar(self) -> DType: return self._scalar if self._scalar is not None else self

  def vec(self, count: int) -> DType:
    """The vector of `count` elements of this scalar type (DT.VECTOR)."""
    if self.count != 1: raise ValueError(f"DT.VECTOR: cannot make a vector of the vector type {self!r}")
    if count == 1 or self == dtypes.void: return self
    if not isinstance(count, int) or count < 1: raise ValueError(f"DT.VECTOR: length must be >= 1, got {count!r}")
    return DType(self.priority, self.itemsize * count, f"{self.name}{count}", None, count, self)

  def ptr(self, size: int = -1, addrspace: str = "global") -> PtrDType:
    """A pointer to `size` elements of this type in `addrspace` ('global', 'local' or 'reg') (DT.PTR)."""
    if addrspace not in ("global", "local", "reg"):
      raise ValueError(f"DT.PTR: address space must be 'global', 'local' or 'reg', got {addrspace!r}")
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, self._scalar,
                    base=self, size=size, addrspace=addrspace)

  @property
  def bits(self) -> int: return 8 * self.itemsize // self.count if self.name != "bool" else 1

  # DT.RANGE: `dtypes.int32.min` and `.max`, as tinygrad has them: the range of an integer type, False/True for
  # bool, -inf/+inf for floats
  @property
  def min(self) -> ConstType: return dtypes.min(self)
  @property
  def max(self) -> ConstType: return dtypes.max(self)


@dataclass(frozen=True, eq=True, repr=False)
class PtrDType(DType):
  """The type of a buffer pointer at kernel level: `base` elements, `size` of them (-1: unknown)."""
  base: DType = None  # type: ignore[assignment]
  size: int = -1
  addrspace: str = "global"

  def __repr__(self) -> str:
    tail = "" if self.addrspace == "global" else f", addrspace={self.addrspace!r}"
    return f"{self.base!r}.ptr({self.size}{tail})"

  def vec(self, count: int) -> DType: raise ValueError("DT.PTR: pointer types have no vector form")
  def ptr(self, size: int = -1, addrspace: str = "global") -> PtrDType: raise ValueError("DT.PTR: pointer of pointer")


# name -> how repr prints it (the C names tinygrad prints, e.g. `dtypes.int`)
_REPR_NAME = {"signed char": "char", "unsigned char": "uchar", "unsigned short": "ushort", "unsigned int": "uint",
              "unsigned long": "ulong", "__bf16": "bfloat16"}


class dtypes:
  """The dtype namespace: every scalar type under its sized name and its C alias (spec DT.SCALARS)."""
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "signed char", "b")
  uint8 = DType(2, 1, "unsigned char", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "unsigned short", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "unsigned int", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "unsigned long", "Q")
  float16 = DType(9, 2, "half", "e")
  bfloat16 = DType(10, 2, "__bf16", None)
  float32 = DType(11, 4, "float", "f")
  float64 = DType(12, 8, "double", "d")
  # C-style aliases, as tinygrad spells them
  char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
  half, float, double = float16, float32, float64
  # DT.DEFAULT: the types of Python ints and floats when nothing else decides; settable
  default_int: DType = int32
  default_float: DType = float32

  @staticmethod
  def all() -> tuple[DType, ...]:
    """Every scalar dtype with values (void excluded), in table order."""
    return _ALL

  @staticmethod
  def is_float(dt: DType) -> bool: return dt.scalar() in _FLOATS

  @staticmethod
  def is_int(dt: DType) -> bool: return dt.scalar() in _INTS

  @staticmethod
  def is_unsigned(dt: DType) -> bool: return dt.scalar() in _UNSIGNED

  @staticmethod
  def is_bool(dt: DType) -> bool: return dt.scalar() == dtypes.bool

  @staticmethod
  def min(dt: DType) -> ConstType:
    """Smallest value of `dt` (-inf for floats, False for bool)."""
    dt = dt.scalar()
    if dt == dtypes.bool: return False
    if dt in _INTS: return 0 if dt in _UNSIGNED else -(1 << (dt.bits - 1))
    if dt in _FLOATS: return -math.inf
    raise ValueError(f"DT.SCALARS: {dt!r} has no values")

  @staticmethod
  def max(dt: DType) -> ConstType:
    """Largest value of `dt` (+inf for floats, True for bool)."""
    dt = dt.scalar()
    if dt == dtypes.bool: return True
    if dt in _INTS: return (1 << dt.bits) - 1 if dt in _UNSIGNED else (1 << (dt.bits - 1)) - 1
    if dt in _FLOATS: return math.inf
    raise ValueError(f"DT.SCALARS: {dt!r} has no values")

  @staticmethod
  def finfo(dt: DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype (DT.FLOAT)."""
    if dt.scalar() not in _FINFO: raise ValueError(f"DT.FLOAT: {dt!r} is not a float type")
    return _FINFO[dt.scalar()]

  @staticmethod
  def from_py(x) -> DType:
    """The dtype of a Python value: bool, default_int or default_float (DT.DEFAULT); lists take their widest."""
    if isinstance(x, bool): return dtypes.bool
    # an int beyond default_int's range would wrap there: it takes int64, as torch's default (DT.DEFAULT.wide)
    if isinstance(x, int):
      di = dtypes.default_int
      return di if dtypes.min(di) <= x <= dtypes.max(di) else dtypes.int64
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, (list, tuple)):
      return max((dtypes.from_py(v) for v in x), key=lambda d: (_KIND[d], d.itemsize), default=dtypes.default_float)
    raise TypeError(f"DT.DEFAULT: no dtype for Python value of type {type(x).__name__}")

  @staticmethod
  def as_const(x: ConstType, dt: DType) -> ConstType:
    """Convert a Python number to the canonical value of `dt` exactly as CAST does (DT.CONST)."""
    dt = dt.scalar()
    if type(x) not in (bool, int, float): x = py_scalar(x)   # np.int64(2**60 + 1) must round once, as its int
    if dt == dtypes.bool: return bool(x)
    if dt in _INTS:
      if isinstance(x, float):
        if math.isnan(x): return 0
        x = min(max(math.trunc(x) if math.isfinite(x) else x, dtypes.min(dt)), dtypes.max(dt))
      return wrap_int(int(x), dt)
    if dt in _FLOATS:
      if isinstance(x, int) and dt != dtypes.float64 and (shift := abs(x).bit_length() - 53) > 0:
        # float(x) rounds once and round_float again: double rounding. Rounding to odd at 53 bits first keeps a
        # sticky bit, which makes the second rounding exact for every format narrower than float64.
        m = (abs(x) >> shift) | (abs(x) & ((1 << shift) - 1) != 0)
        x = m << shift if x > 0 else -(m << shift)
      try: v = float(x)
      except OverflowError: v = math.inf if x > 0 else -math.inf   # an int past float64; copysign would overflow too
      return round_float(v, dt)
    raise ValueError(f"DT.CONST: {dt!r} has no constants")

  @staticmethod
  def fields() -> dict[str, DType]:
    """Every name in the namespace that is a DType (aliases included)."""
    return {k: v for k, v in vars(dtypes).items() if isinstance(v, DType) and not k.startswith("default")}


_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
_UNSIGNED = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
_INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64,
         dtypes.uint64)
_ALL = (dtypes.bool, *_INTS, *_FLOATS)
_FINFO = {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52)}
_KIND = {dtypes.bool: 0, **{d: 1 for d in _INTS}, **{d: 2 for d in _FLOATS}}   # DT.SCALAR-PROMOTE categories


def wrap_int(x: int, dt: DType) -> int:
  """`x` reduced modulo 2**bits into the range of integer dtype `dt` (two's complement) (DT.WRAP)."""
  bits = dt.scalar().bits
  x &= (1 << bits) - 1
  return x - (1 << bits) if dt.scalar() not in _UNSIGNED and x >> (bits - 1) else x


def round_float(x: float, dt: DType) -> float:
  """`x` rounded to the nearest value of float dtype `dt`, ties to even, with subnormals and overflow to
  infinity (DT.ROUND). Exact: the work is integer rounding of a power-of-two scaled Python float."""
  dt = dt.scalar()
  if dt == dtypes.float64 or x != x or math.isinf(x) or x == 0: return float(x)
  ebits, mbits = dtypes.finfo(dt)
  emax = (1 << (ebits - 1)) - 1
  emin = 1 - emax
  _, e = math.frexp(x)           # |x| = m * 2**e with 0.5 <= m < 1, so x's IEEE exponent is e-1
  prec = mbits + 1 - max(0, emin - (e - 1))   # significant bits the format keeps at this exponent
  r = round(math.ldexp(x, prec - e))          # Python's round on a float is round-half-even and exact
  try: y = math.copysign(math.ldexp(r, e - prec) if r else 0.0, x)
  except OverflowError: return math.copysign(math.inf, x)   # x near float64's max rounded up to 2**1024
  return math.copysign(math.inf, x) if abs(y) > float_max(dt) else y


def float_max(dt: DType) -> float:
  """The largest finite value of a float dtype."""
  ebits, mbits = dtypes.finfo(dt)
  emax = (1 << (ebits - 1)) - 1
  return math.ldexp(2.0 - math.ldexp(1.0, -mbits), emax)


# DT.PROMOTE: each type's immediate parents in the promotion graph. "weak float" is an internal node that is
# the least upper bound of int64 and uint64; it stands for dtypes.default_float (see spec/dtypes.md).
_WEAK_FLOAT = "weak float"
_PARENTS: dict = {
  dtypes.bool: (dtypes.int8, dtypes.uint8),
  dtypes.int8: (dtypes.int16,), dtypes.uint8: (dtypes.int16, dtypes.uint16),
  dtypes.int16: (dtypes.int32,), dtypes.uint16: (dtypes.int32, dtypes.uint32),
  dtypes.int32: (dtypes.int64,), dtypes.uint32: (dtypes.int64, dtypes.uint64),
  dtypes.int64: (_WEAK_FLOAT,), dtypes.uint64: (_WEAK_FLOAT,),
  _WEAK_FLOAT: (dtypes.float16, dtypes.bfloat16),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,),
  dtypes.float64: (),
}


def _upper_set(dt) -> frozenset:
  out, todo = set(), [dt]
  while todo:
    d = todo.pop()
    if d not in out:
      out.add(d)
      todo.extend(_PARENTS[d])
  return frozenset(out)


_UPPER = {d: _upper_set(d) for d in _PARENTS}


def least_upper_dtype(*ds: DType) -> DType:
  """The least upper bound of scalar dtypes in the promotion lattice of spec/dtypes.md (DT.PROMOTE)."""
  if not ds: raise ValueError("DT.PROMOTE: least_upper_dtype needs at least one dtype")
  for d in ds:
    if d.scalar() not in _PARENTS: raise ValueError(f"DT.PROMOTE: {d!r} takes no part in promotion")
  common = frozenset.intersection(*(_UPPER[d.scalar()] for d in ds))
  # the lattice guarantees exactly one element of `common` lies below all others
  least = [c for c in common if all(o in _UPPER[c] for o in common)]
  assert len(least) == 1, f"promotion graph is not a lattice at {ds}"
  return dtypes.default_float if least[0] == _WEAK_FLOAT else least[0]


def least_upper_float(dt: DType) -> DType:
  """`dt` if it is a float type, else the default float (DT.PROMOTE.float): what true division and
  transcendental ops compute in."""
  return dt if dtypes.is_float(dt) else dtypes.default_float


def py_scalar(x) -> ConstType:
  """The plain Python value a scalar stands for (DT.SCALAR-PROMOTE.python): bool, int and float themselves; a bool-like
  (numpy's bool_) as bool, any other numbers.Integral (int subclasses, IntEnum members, numpy integers) as its int,
  any other numbers.Real (float subclasses, numpy floats) as its float. Only the kind and the value count, never the
  scalar's own width. Anything else is a TypeError naming the clause."""
  if type(x) in (bool, int, float): return x
  if isinstance(x, bool) or getattr(getattr(x, "dtype", None), "kind", None) == "b": return bool(x)
  if isinstance(x, numbers.Integral): return int(x)
  if isinstance(x, numbers.Real): return float(x)
  raise TypeError(f"DT.SCALAR-PROMOTE.python: {type(x).__name__} is not a bool, integer or real scalar")


def scalar_result_dtype(dt: DType, x: ConstType) -> DType:
  """The dtype of an op between a tensor of type `dt` and a Python scalar `x` (DT.SCALAR-PROMOTE).
  Python scalars are weak: the tensor's type wins unless the scalar is of a higher kind (bool < int < float),
  in which case the result is that kind's default type. numpy scalars, int subclasses and IntEnum members count
  by the kind of the value they stand for (DT.SCALAR-PROMOTE.python)."""
  x = py_scalar(x)
  kind = 0 if isinstance(x, bool) else 1 if isinstance(x, int) else 2
  if _KIND[dt.scalar()] >= kind: return dt
  return dtypes.default_int if kind == 1 else dtypes.default_float


def sum_acc_dtype(dt: DType) -> DType:
  """The type a sum over `dt` accumulates in (DT.SUM): bool and small signed ints widen to default_int, small
  unsigned ints to uint32, float16/bfloat16 accumulate in float32 (and such a sum is cast back to `dt` at the end)."""
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt == dtypes.bool: return least_upper_dtype(dt, dtypes.default_int)
  return least_upper_dtype(dt, dtypes.float32)


def can_lossless_cast(src: DType, dst: DType) -> bool:
  """True when every value of `src` is also a value of `dst`, so casting it changes nothing (DT.CAST.lossless)."""
  src, dst = src.scalar(), dst.scalar()
  if src == dst or src == dtypes.bool: return True
  if dst == dtypes.bool: return False
  if dtypes.is_int(src) and dtypes.is_int(dst):
    return dtypes.min(dst) <= dtypes.min(src) and dtypes.max(src) <= dtypes.max(dst)
  if dtypes.is_int(src) and dtypes.is_float(dst): return src.bits - (0 if dtypes.is_unsigned(src) else 1) <= \
      dtypes.finfo(dst)[1] + 1
  if dtypes.is_float(src) and dtypes.is_float(dst):
    (se, sm), (de, dm) = dtypes.finfo(src), dtypes.finfo(dst)
    return se <= de and sm <= dm
  return False


DTypeLike = Union[str, DType]


def to_dtype(x: DTypeLike) -> DType:
  """A DType from a DType or its name ('float32', 'int', 'half', ...) (DT.SCALARS)."""
  if isinstance(x, DType): return x
  fields = dtypes.fields()
  if isinstance(x, str) and x in fields: return fields[x]
  raise ValueError(f"DT.SCALARS: unknown dtype {x!r}; known: {sorted(fields)}")
