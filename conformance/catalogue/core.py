"""What a catalogue entry is: `Op` (one public op: how to call it, its oracle, its domain, its clauses and tolerance)
and `Domain` (the inputs it is checked on), plus the small helpers entries are written with.

Calls are Python expressions, so an entry reads like the code a user writes and a failure can print a reproduction:
`call` is evaluated by the adapter with the input tensors bound to their names (`x`, `y`, ...), the parameters bound
to theirs, and the adapter's `Tensor` and `dtypes`; `torch` is evaluated with torch tensors bound to the same names
and `torch`, `F` (torch.nn.functional) and the helpers of `TORCH_HELPERS`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.strategies import Case
from refimpl.dtype import float_max, least_upper_dtype, least_upper_float, sum_acc_dtype, to_dtype

__all__ = ["Domain", "Op", "FLOATS", "INTS", "TORCH_INTS", "NUMERIC", "ANY", "same", "boolean", "floating", "summed",
           "promoted", "fixed", "reduced_count", "TORCH_HELPERS", "sqrt_max", "sum_limit", "exp_limit",
           "chain_in_range", "square_limit", "finite_inputs", "no_nan_inputs", "away_from", "divisor_range", "all_of",
           "recip_range"]

FLOATS = S.FLOATS
INTS = S.INTS
TORCH_INTS = S.TORCH_INTS
NUMERIC = FLOATS + TORCH_INTS          # dtypes torch computes with, bool aside
ANY = NUMERIC + ("bool",)

Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Domain:
  """The inputs an op is checked on.

  kind      how input shapes relate: elementwise (broadcasting), reduce, matmul, conv, pool, movement, index,
            creation or alu (equal shapes, one ALU op at the UOp level)
  dtypes    the dtypes the op is checked in, one test per dtype
  inputs    names of the tensor inputs, in call order
  lo, hi    range of ordinary values; `ranges` overrides it per input name
  specials  whether the spec's special values (strategies.special_values) are drawn too, or a predicate on them
  shapes    () -> strategy of one shape per input (default: mutually broadcasting shapes, 0- and 1-size axes)
  scalars   names of inputs passed as Python scalars (drawn like 0-d arrays, DT.SCALAR-PROMOTE)
  params    (shapes, dtypes) -> strategy of a dict of keyword parameters (default: none)
  input_dtype  (dtype, input index) -> that input's dtype (default: every input has the test's dtype)
  smooth    value range for finite differences, away from every point where the op is not differentiable; a
            dict gives it per input name
  limit     dtype -> the largest magnitude drawn (ACC.RANGE: the domain where no intermediate of the op's
            composition overflows); None: no limit
  """
  kind: str
  dtypes: tuple[str, ...]
  inputs: tuple[str, ...] = ("x",)
  lo: float = -4.0
  hi: float = 4.0
  ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
  specials: bool | Callable[[Any], bool] = True
  scalars: tuple[str, ...] = ()
  shapes: Callable[[], st.SearchStrategy] | None = None
  params: Callable[[Shapes, str], st.SearchStrategy] | None = None
  input_dtype: Callable[[str, int], str] | None = None
  smooth: tuple[float, float] | dict[str, tuple[float, float]] = (-2.0, 2.0)
  limit: Callable[[str], float] | None = None

  def dtype_of(self, dtype: str, i: int) -> str:
    """The dtype of input `i` in the test for `dtype`."""
    return self.input_dtype(dtype, i) if self.input_dtype else dtype

  def range_of(self, name: str) -> tuple[float, float]:
    """The range of ordinary values of input `name`."""
    return self.ranges.get(name, (self.lo, self.hi))

  def smooth_of(self, name: str) -> tuple[float, float]:
    """The finite-difference range of input `name`."""
    return self.smooth.get(name, (-2.0, 2.0)) if isinstance(self.smooth, dict) else self.smooth

  def shape_strategy(self) -> st.SearchStrategy:
    if self.shapes is not None: return self.shapes()
    return broadcasting(len(self.inputs))


@st.composite
def broadcasting(draw, k: int, max_dims: int = 3, max_side: int = 4, min_dims: int = 0) -> Shapes:
  """k shapes that broadcast together: each is the common shape with leading axes dropped or axes set to 1 (but at
  least `min_dims` axes each)."""
  full = draw(S.shapes(min_dims, max_dims, 0, max_side))
  out = [draw(S.broadcast_to(full).filter(lambda s: len(s) >= min_dims)) for _ in range(k)]
  if k: out[draw(st.integers(0, k - 1))] = full   # one input has the full shape, so the result has it
  return tuple(out)


@dataclass(frozen=True, repr=False)
class Op:
  """One catalogue entry.

  name        unique: the Tensor attribute ('exp', '__add__'), with a '.variant' suffix for a second entry of the
              same method, or 'ALU.<OP>' for an ALU op at the UOp level
  call        the call expression (over Tensor, dtypes, the inputs and the parameters), or the Ops name for ALU
  torch       the torch expression computing the reference in float64 (None: the executable spec is the oracle)
  domain      the inputs it is checked on
  clauses     the spec clauses the entry checks (OP.*, GRAD.*, DT.*, ...)
  tolerance   the key of its accuracy bound: ACC.<tolerance>.<dtype> or ACC.<tolerance> in spec/accuracy.md
  grad_tolerance  the key of its gradient bound (ACC.GRAD.<key>.<dtype>); None when it is not differentiable
  api         the public Tensor names the entry covers (None: the name itself, unless it has a '.variant' suffix or
              is an ALU entry)
  out_dtype   (input dtypes, params) -> the result dtype the spec gives, when it differs from torch's (with `note`);
              None: the result dtype must be torch's
  spec        (case) -> expected values by the executable spec, for inputs where torch is undefined or differs
  torch_defined  (case) -> mask of the result elements where torch's value is the reference (default: all)
  n           (case) -> the length of the reductions in the op, the `n` of its bound
  second_order  whether the gradient of its gradient is checked (a small stated subset, spec/accuracy.md)
  diff_inputs the inputs gradients are checked for (None: every float tensor input)
  grad_dtypes the dtypes gradients are checked in (None: the domain's float dtypes)
  grad_domain (case) -> whether gradients are compared on this example: False keeps them away from an undefined
              point of the rule (GRAD.CHECK.points) or from a listed bug (xfails.BUGS), as the entry's note says
  grad_magnitude  (case, cotangents) -> the `x` of its gradient bound, for a row ACC.GRAD.<key> that defines its
              own (ACC.GRAD.NEWTON_SCHULZ); None: ACC.GRAD.measure's `|g| * max(1, |input|)`
  reference   how torch computes the reference: 'float64' (float inputs in float64, ACC.MEASURE.reference),
              'float64-cast' (integer and bool inputs too, after their cast to the default float, for ops that
              promote them: DT.PROMOTE.float) or 'native' (every input in its own dtype, for ops whose rounding
              of mixed dtypes is the point: DT.PROMOTE)
  note        how and why the op differs from torch, naming the clause
  """
  name: str
  call: str
  torch: str | None
  domain: Domain
  clauses: tuple[str, ...]
  tolerance: str = "EXACT"
  grad_tolerance: str | None = None
  api: tuple[str, ...] | None = None
  out_dtype: Callable[[list[str], dict], str] | None = None
  spec: Callable[[Case], np.ndarray] | None = None
  torch_defined: Callable[[Case], np.ndarray] | None = None
  n: Callable[[Case], int] | None = None
  second_order: bool = False
  diff_inputs: tuple[str, ...] | None = None
  grad_dtypes: tuple[str, ...] | None = None
  grad_domain: Callable[[Case], bool] | None = None
  grad_magnitude: Callable[[Case, list[np.ndarray]], float] | None = None
  reference: str = "float64"
  note: str = ""

  def __repr__(self) -> str: return f"Op({self.name!r})"

  @property
  def differentiable(self) -> bool:
    """Whether gradients are checked: the op has a gradient rule chain for float inputs."""
    return self.grad_tolerance is not None

  @property
  def covers(self) -> tuple[str, ...]:
    """The public Tensor names this entry covers."""
    if self.api is not None: return self.api
    return () if "." in self.name else (self.name,)

  @property
  def is_alu(self) -> bool:
    return self.name.startswith("ALU.")

  def cases(self, dtype: str, smooth: bool = False) -> st.SearchStrategy[Case]:
    """Examples for the test in `dtype`; `smooth` draws float64 values in the domain's smooth range for finite
    differences instead (no special values, no ties)."""
    return _cases(self, dtype, smooth)

  def length(self, case: Case) -> int:
    return self.n(case) if self.n else 1


@st.composite
def _cases(draw, op: Op, dtype: str, smooth: bool) -> Case:
  d = op.domain
  drawn = draw(d.shape_strategy())
  shapes, params = (drawn["shapes"], dict(drawn["params"])) if isinstance(drawn, dict) else (drawn, {})
  ranges = drawn.get("ranges", {}) if isinstance(drawn, dict) else {}
  dts = [d.dtype_of(dtype, i) for i in range(len(d.inputs))]
  if smooth: dts = ["float64" if dt in FLOATS else dt for dt in dts]   # finite differences run in float64
  inputs = []
  for name, shape, dt in zip(d.inputs, shapes, dts):
    lo, hi = ranges.get(name, d.range_of(name))
    if smooth and dt in FLOATS:
      # random reals from a drawn seed: no ties, no integers, nothing on a kink (GRAD.CHECK.points)
      rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
      inputs.append(rng.uniform(*d.smooth_of(name), shape).astype(np.float64))
    else:
      lim = d.limit(dt) if d.limit and dt in FLOATS else math.inf
      lo, hi = max(lo, -lim), min(hi, lim)
      keep = d.specials
      if lim < math.inf and keep is not False:
        keep = (lambda v, p=keep: (not math.isfinite(v) or abs(v) <= lim) and (p is True or p(v)))
      inputs.append(draw(S.arrays(dt, shape, lo, hi, False if smooth else keep)))
  if d.params: params.update(draw(d.params(shapes, dtype)))
  return Case(inputs, dts, params)


# ---------------------------------------------------------------------------------------------------- result dtypes
# Each rule is the spec's function for the result dtype (spec/dtypes.md), used only where an entry says the spec and
# torch differ.

_NAME_OF = {to_dtype(n): n for n in ANY + ("uint16", "uint32", "uint64")}


def _name(dt) -> str:
  return _NAME_OF[dt]


def same(dts: list[str], params: dict) -> str:
  """The first input's dtype."""
  return dts[0]


def boolean(dts: list[str], params: dict) -> str:
  """bool (comparisons, isnan, any, all)."""
  return "bool"


def floating(dts: list[str], params: dict) -> str:
  """DT.PROMOTE.float: the input's dtype if it is a float, else the default float."""
  return _name(least_upper_float(to_dtype(dts[0])))


def summed(dts: list[str], params: dict) -> str:
  """DT.SUM: the accumulation dtype; float16 and bfloat16 sums come back in their own dtype."""
  return dts[0] if dts[0] in ("float16", "bfloat16") else _name(sum_acc_dtype(to_dtype(dts[0])))


def promoted(dts: list[str], params: dict) -> str:
  """DT.PROMOTE: the least upper bound of the input dtypes."""
  return _name(least_upper_dtype(*(to_dtype(d) for d in dts)))


def fixed(name: str) -> Callable[[list[str], dict], str]:
  """Always `name` (e.g. int32 for argmax, DT.DEFAULT)."""
  return lambda dts, params: name


def reduced_count(shape: tuple[int, ...], axis) -> int:
  """How many elements each output of a reduction over `axis` of `shape` combines (the `n` of a bound)."""
  if axis is None: return math.prod(shape)
  axes = (axis,) if isinstance(axis, int) else axis
  return math.prod(shape[a] for a in {a % len(shape) for a in axes}) if shape else 1


# ---------------------------------------------------------------------------------------------------- ACC.RANGE

def sqrt_max(dtype: str) -> float:
  """ACC.RANGE for squares and products summed over up to 64 terms: sqrt(largest finite) / 16."""
  return math.sqrt(float_max(to_dtype(dtype))) / 16


def sum_limit(dtype: str) -> float:
  """ACC.RANGE for sums of up to 64 terms: partial sums stay finite (largest finite / 64)."""
  return float_max(to_dtype(dtype)) / 64


def chain_in_range(values: np.ndarray, dtype: str, final: bool = False) -> np.ndarray:
  """ACC.RANGE for products folded left to right (EXEC.REDUCE.blocked: one chain up to 2**16 values) along the last
  axis of `values`, in the accumulator dtype of `dtype` (DT.SUM: float32 for float16 and bfloat16): whether every
  partial product stays within a factor 2 of the accumulator's normal range, up to the first zero, infinity or NaN.
  A partial that overflows or underflows there changes the result where the exact product is ordinary: max * 2 *
  0.5 is inf in float32, tiny * tiny * big is 0. The last partial is the result itself, whose rounding is the
  reference's too; `final=True` checks it as well (a product that a later step multiplies further). One bool per
  chain. The test is on sums of log2 |v|, so float64 inputs cannot overflow it."""
  acc = np.float64 if dtype == "float64" else np.float32
  hi, lo = math.log2(float(np.finfo(acc).max)) - 1, math.log2(float(np.finfo(acc).tiny)) + 1
  values = np.asarray(values, np.float64)
  if values.shape[-1] == 0: return np.ones(values.shape[:-1], bool)
  with np.errstate(divide="ignore", invalid="ignore"):
    logs = np.cumsum(np.log2(np.abs(values)), axis=-1)   # -inf after a zero, inf or NaN after a non-finite value
  checked = logs if final else logs[..., :-1]
  return ~(np.isfinite(checked) & ((checked > hi) | (checked < lo))).any(axis=-1)


def exp_limit(scale: float = 1.0) -> Callable[[str], float]:
  """ACC.RANGE for float16 compositions through exp(scale * x): |x| below the point where float16 exp overflows
  (ln 65504 = 11.09); other dtypes: no limit."""
  return lambda dtype: 11.0 / scale if dtype == "float16" else math.inf


# ---------------------------------------------------------------------------------------------------- grad domains
# Predicates for Op.grad_domain: examples on which gradients are compared.

def _float_inputs(case: Case) -> list[np.ndarray]:
  return [np.asarray(a, np.float64) for a, d in zip(case.inputs, case.dtypes) if d in FLOATS]


def finite_inputs(case: Case) -> bool:
  """No infinity or NaN among the float inputs: for ops whose gradients sum products in an order the spec leaves
  to the implementation (matmul, convolution), where an inf * 0 may or may not arise (ACC.GRAD.measure)."""
  return all(np.isfinite(a).all() for a in _float_inputs(case))


def no_nan_inputs(case: Case) -> bool:
  """No NaN among the float inputs: for the hardtanh family (hardtanh, relu6, hardsigmoid, hardswish), whose torch
  gradient at NaN depends on the element's position, its vectorised lanes and its scalar tail disagreeing
  (GRAD.CHECK.points), so torch is no reference there."""
  return not any(np.isnan(a).any() for a in _float_inputs(case))


def away_from(*points: float) -> Callable[[Case], bool]:
  """No float input element at any of `points` (ties and kinks a rule treats differently from torch)."""
  return lambda case: not any(np.isin(a, points).any() for a in _float_inputs(case))


def divisor_range(name_index: int) -> Callable[[Case], bool]:
  """The divisor input is 0 or at least sqrt(smallest normal) * 16 in magnitude: GRAD.FDIV's b * b must not
  underflow to 0 (which turns -(g a)/(b b) into a NaN or infinity where the derivative is finite)."""
  def ok(case: Case) -> bool:
    b = np.abs(np.asarray(case.inputs[name_index], np.float64))
    ebits, mbits = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}[
      case.dtypes[name_index]]
    tiny = 2.0 ** (2 - (1 << (ebits - 1)))
    return not ((b > 0) & (b < 16 * math.sqrt(tiny))).any()
  return ok


def recip_range(case: Case) -> bool:
  """GRAD.RECIPROCAL's y * y stays finite: the input is 0 or at least 16 / sqrt(largest finite) in magnitude."""
  x = np.abs(np.asarray(case.inputs[0], np.float64))
  return not ((x > 0) & (x < 16 / math.sqrt(float_max(to_dtype(case.dtypes[0]))))).any()


def all_of(*preds: Callable[[Case], bool]) -> Callable[[Case], bool]:
  """Every predicate holds."""
  return lambda case: all(p(case) for p in preds)


def square_limit(dtype: str) -> float:
  """ACC.RANGE for compositions that square an input (GRAD.FDIV's b * b): sqrt(largest finite)."""
  return math.sqrt(float_max(to_dtype(dtype)))


# ---------------------------------------------------------------------------------------------------- torch helpers

def _dims(axis, ndim: int):
  """A refimpl axis argument as torch's dim for amax/amin/logsumexp (None: every axis)."""
  if axis is None: return tuple(range(ndim))
  return axis


def _pad_arg(padding) -> tuple[int, ...]:
  """((before, after) per axis) -> torch.nn.functional.pad's flat list, last axis first."""
  return tuple(v for b, a in reversed(padding) for v in (b, a))


def _prod(x, axis, keepdim: bool):
  """torch's prod over several axes at once (torch.prod takes one dim): the reduced axes are moved last and merged,
  then reduced by one prod, so that its gradient is torch's single-prod rule."""
  if x.ndim == 0: return x
  dims = _dims(axis, x.ndim)
  dims = sorted({d % x.ndim for d in ((dims,) if isinstance(dims, int) else dims)})
  kept = [d for d in range(x.ndim) if d not in dims]
  out = x.permute(*kept, *dims).reshape(*(x.shape[d] for d in kept), math.prod(x.shape[d] for d in dims)).prod(-1)
  return out.reshape(tuple(1 if i in dims else n for i, n in enumerate(x.shape))) if keepdim else out


def _take(x, index):
  """x[index] with torch's indexing rules, negative slice steps included (torch has none): such an axis is flipped
  first and read with the mirrored positive slice. Integer lists become tensor indices."""
  import torch
  items = list(index) if isinstance(index, tuple) else [index]
  consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
  out, axis, flips = [], 0, []
  for i in items:
    if i is Ellipsis:
      out.append(i)
      axis += x.ndim - consumed
      continue
    if i is None:
      out.append(i)
      continue
    if isinstance(i, slice) and (i.step or 1) < 0:
      n = x.shape[axis]
      picked = range(*i.indices(n))
      flips.append(axis)
      i = slice(n - 1 - picked[0], n - picked[-1], -i.step) if len(picked) else slice(0, 0)
    out.append(torch.tensor(i) if isinstance(i, list) else i)
    axis += 1
  if flips: x = torch.flip(x, flips)
  return x[tuple(out)]


def _chan(t, x):
  """A per-channel tensor (C,) laid along axis 1 of x (batchnorm's layout)."""
  return t.reshape((1, -1) + (1,) * (x.ndim - 2))


def _trailing(x, axis) -> tuple[int, ...]:
  """The normalized_shape of torch's layer_norm for a refimpl axis argument (-1 or a tuple of trailing axes)."""
  k = 1 if isinstance(axis, int) else len(axis)
  return tuple(x.shape[x.ndim - k:])


def _attention(q, k, v, causal: bool):
  """softmax(q k^T / sqrt(d) + mask) v written out (torch's fused kernel has no double backward for S)."""
  import torch
  scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
  if causal:
    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    scores = scores.masked_fill(~keep, -math.inf)
  return torch.softmax(scores, -1) @ v


def _sdpa_math(q, k, v, **kwargs):
  """F.scaled_dot_product_attention through torch's math kernel: the fused CPU kernel torch picks for some shapes
  (flash attention for a 1x1 query) has no double backward, which the bound's S needs."""
  import torch
  from torch.nn.attention import SDPBackend, sdpa_kernel
  with sdpa_kernel(SDPBackend.MATH): return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)


TORCH_HELPERS = {"attention": _attention, "sdpa_math": _sdpa_math, "dims": _dims, "pad_arg": _pad_arg, "prod": _prod,
                 "take": _take,
                 "chan": _chan, "trailing": _trailing, "math": math, "np": np}
