"""Tensor: the lazy, tinygrad-style front end (DESIGN.md step 1). Methods build tensor-level UOp graphs; nothing runs
until realize(), numpy(), tolist() or item(). Python scalars become CONSTs; broadcasting is explicit RESHAPE/EXPAND;
dtypes follow the promotion rules of spec/dtypes.md (DT.PROMOTE, DT.SCALAR-PROMOTE)."""
from __future__ import annotations

import math
import weakref
from typing import Sequence

import numpy as np

from refimpl.device import Device
from refimpl.dtype import (DType, DTypeLike, dtypes, least_upper_dtype, least_upper_float, scalar_result_dtype,
                           sum_acc_dtype, to_dtype)
from refimpl.engine.realize import buffers, run_kernels
from refimpl.engine.schedule import ScheduleItem, kernelize, new_buffer, schedule
from refimpl.helpers import SpecError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp

_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
       dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
       dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32,
       dtypes.float64: np.float64}
_FROM_NP = {np.dtype(v): k for k, v in _NP.items() if k != dtypes.bfloat16}


def _bf16_bits(a: np.ndarray) -> np.ndarray:
  """float values -> bfloat16 bit patterns, rounded to nearest even (DT.ROUND)."""
  bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
  nan = np.isnan(np.asarray(a, np.float32))
  rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(nan, np.uint16(0x7FC0), rounded)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
  return (bits.astype(np.uint32) << 16).view(np.float32)


class _Switch:
  """A class-level flag that reads as a bool and also works as `with Tensor.no_grad:` (set for the block, then
  restored). Assigning True/False to the class attribute sets the flag instead of replacing it (_TensorType), so
  both styles keep working side by side."""
  def __init__(self, value: bool): self.value, self._saved = bool(value), []
  def __bool__(self) -> bool: return self.value
  def __eq__(self, other) -> bool: return self.value == bool(other)
  def __hash__(self) -> int: return hash(self.value)
  def __repr__(self) -> str: return repr(self.value)
  def __enter__(self):
    self._saved.append(self.value)
    self.value = True
    return self
  def __exit__(self, *exc) -> None: self.value = self._saved.pop()


class _TensorType(type):
  def __setattr__(cls, name, value):
    current = cls.__dict__.get(name)
    if isinstance(current, _Switch) and not isinstance(value, _Switch): current.value = bool(value)
    else: super().__setattr__(name, value)


class _Mode:
  """`with Tensor.train():` / `with Tensor.train(False):`: sets Tensor.training for the block, then restores it."""
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self):
    self.prev = bool(Tensor.training)
    Tensor.training = self.mode
    return self
  def __exit__(self, *exc) -> None: Tensor.training = self.prev


class Tensor(metaclass=_TensorType):
  """A lazy multi-dimensional array: `uop` is the graph that computes it."""
  _live: weakref.WeakSet = weakref.WeakSet()
  training = _Switch(False)
  no_grad = _Switch(False)   # GRAD.NOGRAD: results made while set get requires_grad=False

  def __init__(self, data, device: str | None = None, dtype: DTypeLike | None = None,
               requires_grad: bool | None = None):
    device = Device.canonicalize(device) if device is not None else Device.DEFAULT
    dtype = to_dtype(dtype) if dtype is not None else None
    if isinstance(data, UOp):
      # GRAD.NOGRAD: a result computed under no_grad is a constant to backward(), even if a source requires gradients
      uop = data if not Tensor.no_grad or requires_grad is not None or data.op is Ops.DETACH else \
        UOp(Ops.DETACH, data.dtype, (data,))
    elif isinstance(data, (bool, int, float)):
      uop = UOp.const(dtype or dtypes.from_py(data), data, device)
    elif isinstance(data, (list, tuple, np.ndarray)) or np.isscalar(data):
      uop = _from_numpy(_to_numpy(data, dtype), dtype, device)
    else: raise TypeError(f"Tensor: cannot build from {type(data).__name__}")
    self.uop: UOp = uop
    # GRAD.NOGRAD: under no_grad, new tensors refuse gradients unless asked for explicitly
    self.requires_grad = False if requires_grad is None and Tensor.no_grad else requires_grad
    self.grad: Tensor | None = None
    Tensor._live.add(self)

  # ---- autograd (spec/gradients.md) ----
  @property
  def requires_grad(self) -> bool | None:
    """True (backward() fills .grad of a leaf), False, or None (undecided); only float tensors can require gradients.
    A tensor computed from one that requires gradients requires them too (GRAD.NOGRAD), unless made under no_grad."""
    if self._requires_grad is not None: return self._requires_grad
    leaves = {t.uop for t in list(Tensor._live) if t._requires_grad}
    return True if leaves and any(u in leaves for u in self.uop.toposort()) else None
  @requires_grad.setter
  def requires_grad(self, value: bool | None) -> None:
    if value and not dtypes.is_float(self.dtype):
      raise SpecError("GRAD.DTYPE", f"only float tensors can require gradients, this one is {self.dtype!r}")
    if value and self._shares_identity():   # the old graph is detached: the new leaf passes no gradient into it
      self.uop = UOp(Ops.ASSIGN, self.dtype, (self._fresh_buffer(), UOp(Ops.DETACH, self.dtype, (self.uop,))))
    self._requires_grad = value

  def _shares_identity(self) -> bool:
    """GRAD.LEAF.identity: whether this tensor's graph could be another tensor's too. Autograd tells leaves apart
    by their UOp, and hash-consing makes equal graphs one UOp: two `Tensor.zeros(3)` are the same node, and realized
    together they are one buffer. A graph without a BUFFER (a constant) or one another live tensor holds is shared."""
    if getattr(self, "_requires_grad", None): return False   # already a leaf of its own
    if not any(u.op is Ops.BUFFER for u in self.uop.toposort()): return True
    return any(t is not self and t.uop is self.uop for t in list(Tensor._live))

  def _fresh_buffer(self) -> UOp:
    """A new, unwritten buffer of this tensor's shape, dtype and device (as a RESHAPE of the BUFFER node)."""
    return Tensor.empty(*self.shape, dtype=self.dtype, device=self.device).uop

  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    """Set requires_grad in place and return self."""
    self.requires_grad = requires_grad
    return self

  def detach(self) -> Tensor:
    """The same values, a constant to differentiation (DETACH, GRAD.DETACH)."""
    return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)), requires_grad=False)

  @staticmethod
  def train(mode: bool = True) -> _Mode:
    """A context manager that sets Tensor.training to `mode` inside its block."""
    return _Mode(mode)

  def _grad_seed(self, gradient) -> UOp:
    """The seed cotangent of this tensor (GRAD.SCALAR): a one for a one-element tensor, else the given gradient cast
    to this tensor's dtype."""
    if not dtypes.is_float(self.dtype):
      raise SpecError("GRAD.DTYPE", f"cannot differentiate a tensor of {self.dtype!r}, only floats have gradients")
    if gradient is None:
      if self.numel() != 1:
        raise SpecError("GRAD.SCALAR", f"a gradient can be implied only for one-element tensors, this one has shape "
                        f"{self.shape}: pass gradient=")
      return Tensor.full(self.shape, 1.0, dtype=self.dtype, device=self.device).uop
    g = gradient if isinstance(gradient, Tensor) else Tensor(gradient, device=self.device)
    if g.shape != self.shape:
      raise SpecError("GRAD.SCALAR", f"gradient of shape {g.shape} for a tensor of shape {self.shape}")
    if not dtypes.is_float(g.dtype): raise SpecError("GRAD.DTYPE", f"gradient of dtype {g.dtype!r} is not a float")
    return g.cast(self.dtype).uop

  def gradient(self, *targets: Tensor, gradient=None) -> list[Tensor]:
    """The derivative of this tensor with respect to each target, contracted with `gradient` (GRAD.MODEL); a graph,
    nothing runs. A target this tensor does not depend on gets zeros. `.grad` is not touched."""
    from refimpl.gradient import compute_gradient
    for t in targets:
      if not dtypes.is_float(t.dtype): raise SpecError("GRAD.DTYPE", f"a target of dtype {t.dtype!r} has no gradient")
    wanted = {t.uop for t in targets}
    root, alias = _through_realized(self.uop, wanted)
    grads = compute_gradient(root, self._grad_seed(gradient), {alias.get(u, u) for u in wanted})
    found = [grads.get(alias.get(t.uop, t.uop)) for t in targets]
    return [Tensor(g) if g is not None else t.zeros_like() for t, g in zip(targets, found)]

  def backward(self, gradient=None) -> Tensor:
    """Add the derivative of this tensor to the `.grad` of every tensor with requires_grad=True that it depends on
    (GRAD.ACCUM); without `gradient` this tensor must have one element (GRAD.SCALAR)."""
    from refimpl.gradient import compute_gradient
    seed = self._grad_seed(gradient)
    candidates = [t for t in list(Tensor._live) if t._requires_grad]   # leaves: requires_grad set on the tensor itself
    root, alias = _through_realized(self.uop, {t.uop for t in candidates})
    graph = set(root.toposort())
    leaves = [t for t in candidates if alias.get(t.uop, t.uop) in graph]
    if not leaves: raise SpecError("GRAD.NOGRAD", "backward() on a tensor that depends on no tensor with "
                                   "requires_grad=True")
    grads = compute_gradient(root, seed, {alias.get(t.uop, t.uop) for t in leaves})
    for t in leaves:
      node = alias.get(t.uop, t.uop)
      if node not in grads: continue   # GRAD.MODEL.sum: no cotangent leaves .grad unchanged
      g = Tensor(grads[node], requires_grad=False)
      t.grad = g if t.grad is None else t.grad + g
    return self

  # ---- properties ----
  @property
  def shape(self) -> tuple[int, ...]:
    """The size of each axis."""
    return self.uop.shape
  @property
  def dtype(self) -> DType:
    """The element type."""
    return self.uop.dtype
  @property
  def device(self) -> str:
    """The device the data lives on."""
    from refimpl.engine.schedule import device_of
    return device_of(self.uop)
  @property
  def ndim(self) -> int:
    """The number of axes."""
    return len(self.shape)
  def numel(self) -> int:
    """The number of elements."""
    return math.prod(self.shape)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]

  def __repr__(self) -> str: return f"<Tensor {self.uop.op!r} {self.shape} {self.dtype!r} on {self.device} " \
                                    f"with grad {None if self.grad is None else self.grad.uop.op!r}>"

  # ---- running ----
  def kernelize(self, *others: Tensor) -> Tensor:
    """Cut the graph into kernels without running them: the uop becomes ASSIGN(BUFFER, KERNEL) (UOP.KERNEL)."""
    _replace(kernelize([t.uop for t in (self, *others)]))   # one schedule: an assign shared by two is one kernel
    return self

  def schedule(self, *others: Tensor) -> list[ScheduleItem]:
    """The kernels that realizing these tensors runs, in order, each with its `ast` (and its KERNEL node)."""
    return [ScheduleItem(k) for k in schedule(list(kernelize([t.uop for t in (self, *others)]).values()))]

  def realize(self, *others: Tensor) -> Tensor:
    """Run the kernels that compute this tensor (and `others`) as one schedule; afterwards its uop is a BUFFER (or a
    view of one). Pending assigns run here (EXEC.SCHED.assign), reading old values as EXEC.SCHED.versions says."""
    roots = [t.uop for t in (self, *others)]
    graphs = kernelize(roots)
    run_kernels(schedule(list(graphs.values())))
    ran = {r: _strip_assign(g) for r, g in graphs.items()}
    # EXEC.SCHED.assign: an in-place write that ran must never run again, so every graph still holding it (a tensor
    # kernelized earlier) now reads the buffer instead
    ran.update({n: n.src[0] for g in graphs.values() for n in g.toposort()
                if n.op is Ops.ASSIGN and n.src[1].op is Ops.KERNEL and n.src[1].arg.in_place})
    _record_lineage(ran, graphs)
    _replace(ran)
    return self

  def numpy(self) -> np.ndarray:
    """The values as a numpy array (bfloat16 comes back as float32)."""
    t = self if _is_contiguous_buffer(self.uop) else Tensor(self.uop).realize()
    buf_node = t.uop if t.uop.op is Ops.BUFFER else t.uop.src[0]
    buf = buffers[buf_node]
    raw = np.frombuffer(Device[buf.device].copyout(buf), dtype=_NP[self.dtype]).copy()
    if self.dtype == dtypes.bfloat16: raw = _bf16_values(raw)
    return raw.reshape(self.shape)

  def tolist(self):
    """The values as nested Python lists."""
    return self.numpy().tolist()

  def item(self):
    """The one element as a Python number."""
    if self.numel() != 1: raise SpecError("UOP.CONST", f"item() needs one element, the tensor has {self.numel()}")
    return self.numpy().reshape(()).item()

  # ---- in-place update (assign) ----
  def assign(self, x) -> Tensor:
    """Write `x` into this tensor's own buffer when it is realized (EXEC.SCHED.assign); returns self, now standing
    for the new content. `x` is broadcast to this tensor's shape and must have its dtype and device (a Python value
    takes them). The target must be a buffer or a reshape of one: a lazy computation gets a fresh buffer, a view
    (permute, shrink, ...) of a buffer is refused (EXEC.SCHED.target). After realize the tensor holds the same
    BUFFER node as before, so every graph that reads that buffer sees the new values (EXEC.SCHED.versions)."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device, dtype=self.dtype)
    if x.uop is self.uop: return self   # writing a tensor into itself changes nothing
    if x.device != self.device:
      raise SpecError("EXEC.SCHED.assign", f"assign of a tensor on {x.device} to one on {self.device}: move it first")
    if x.dtype != self.dtype:
      raise SpecError("EXEC.SCHED.assign", f"assign of {x.dtype!r} values to a {self.dtype!r} tensor: cast them first")
    if x.shape != self.shape:
      if len(x.shape) > self.ndim or any(n not in (1, m) for n, m in zip(x.shape[::-1], self.shape[::-1])):
        raise SpecError("EXEC.SCHED.assign", f"assign of shape {x.shape} to a tensor of shape {self.shape}")
      x = x._expand_to(self.shape)
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self._assign_target(), x.uop))
    return self

  def _assign_target(self) -> UOp:
    """This tensor's graph as an assign target: a BUFFER or an assign to one (pending or kernelized), under RESHAPEs
    only."""
    u = self.uop
    while u.op is Ops.RESHAPE: u = u.src[0]
    if u.op is Ops.BUFFER and any(t is not self and t.uop is self.uop for t in list(Tensor._live)):
      # EXEC.SCHED.cow: hash-consing gave equal values one buffer (two Tensor.zeros(3) realized together); writing
      # into it would change the other tensors too, so this tensor gets a buffer of its own first
      return self._fresh_buffer()
    if u.op in (Ops.BUFFER, Ops.ASSIGN): return self.uop
    v = u
    while v.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.DETACH): v = v.src[0]
    if v is not u and v.op in (Ops.BUFFER, Ops.ASSIGN):
      raise SpecError("EXEC.SCHED.target", f"cannot assign to a {u.op.name} view of a buffer: writing through views "
                      "is not supported; assign to the whole tensor (or realize the view into a buffer of its own)")
    # a lazy value: the assign gives it a fresh buffer of its own. The old value need not be computed: `x` reads it
    # through its own graph if at all, and a realize of it would make identical lazy tensors share (alias) the buffer
    return Tensor.empty(*self.shape, dtype=self.dtype, device=self.device).uop

  # ---- moving between devices (UOP.COPY) ----
  def to(self, device: str | None) -> Tensor:
    """This tensor's values on `device` (None: Device.DEFAULT), lazily (UOP.COPY.to): self when it is already there,
    else a new tensor whose graph is COPY(self, DEVICE), which realize runs as a copy step (EXEC.SCHED.copy). It is
    differentiable: the cotangent goes back to this tensor's device (GRAD.COPY)."""
    device = Device.canonicalize(device) if device is not None else Device.DEFAULT
    if device == self.device: return self
    return Tensor(UOp(Ops.COPY, self.dtype, (self.uop, UOp(Ops.DEVICE, arg=device))))

  def to_(self, device: str | None) -> Tensor:
    """Move this tensor to `device` in place (UOP.COPY.to): its graph becomes the copy of `to`, its `.grad` (if any)
    moves too; returns self."""
    moved = self.to(device)
    if moved is not self:
      if self.grad is not None: self.grad = self.grad.to(device)
      self.uop = moved.uop
    return self

  # ---- creation ----
  @staticmethod
  def full(shape, value, dtype: DTypeLike | None = None, device: str | None = None,
           requires_grad: bool | None = None) -> Tensor:
    """A tensor of `shape` filled with `value` (a broadcast CONST; dtype from the value unless given). With
    requires_grad=True it becomes a leaf of its own (GRAD.LEAF.identity)."""
    shape = _shape_arg(shape)
    dtype = to_dtype(dtype) if dtype is not None else dtypes.from_py(value)
    device = Device.canonicalize(device) if device else Device.DEFAULT
    out = Tensor(UOp.const(dtype, value, device)).reshape((1,) * len(shape)).expand(shape)
    if requires_grad is not None: out.requires_grad = requires_grad
    return out

  @staticmethod
  def zeros(*shape, **kw) -> Tensor:
    """Zeros of `shape` (default float unless dtype is given)."""
    return Tensor.full(_shape_arg(shape), 0.0 if "dtype" not in kw else 0, **kw)
  @staticmethod
  def ones(*shape, **kw) -> Tensor:
    """Ones of `shape` (default float unless dtype is given)."""
    return Tensor.full(_shape_arg(shape), 1.0 if "dtype" not in kw else 1, **kw)

  @staticmethod
  def arange(start, stop=None, step=1, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """start, start+step, ... below stop (dtype from the arguments, as torch.arange)."""
    if stop is None: start, stop = 0, start
    values = np.arange(start, stop, step)
    dt = to_dtype(dtype) if dtype else dtypes.from_py([start, stop, step])
    return Tensor(values.astype(_NP[dt]) if dt != dtypes.bfloat16 else values, device=device, dtype=dt)

  @staticmethod
  def empty(*shape, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """A fresh buffer whose contents are unspecified (DEV.ALLOC); reading it before writing is an EXEC.UNINIT error
    under the sanitizer."""
    shape = _shape_arg(shape)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    device = Device.canonicalize(device) if device else Device.DEFAULT
    node = new_buffer(dt, math.prod(shape), device)
    buffers[node] = Device[device].alloc(math.prod(shape), dt)
    return Tensor(node if shape == (math.prod(shape),) else UOp(Ops.RESHAPE, dt, (node,), shape))

  def _like_kw(self, kw: dict) -> dict:
    return {"dtype": kw.get("dtype", self.dtype), "device": kw.get("device", self.device)}
  def zeros_like(self, **kw) -> Tensor:
    """Zeros of this tensor's shape (and dtype and device unless given)."""
    return Tensor.full(self.shape, 0, **self._like_kw(kw))
  def ones_like(self, **kw) -> Tensor:
    """Ones of this tensor's shape (and dtype and device unless given)."""
    return Tensor.full(self.shape, 1, **self._like_kw(kw))
  def full_like(self, fill_value, **kw) -> Tensor:
    """`fill_value` in this tensor's shape (and dtype and device unless given)."""
    return Tensor.full(self.shape, fill_value, **self._like_kw(kw))
  def empty_like(self, **kw) -> Tensor:
    """An uninitialised tensor of this tensor's shape (and dtype and device unless given)."""
    return Tensor.empty(self.shape, **self._like_kw(kw))

  @staticmethod
  def eye(n: int, m: int | None = None, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """The n x m identity matrix (default float), built from movement ops only: a square one-hot pattern from a
    padded column of ones read with row length k, then padded to n x m."""
    m = n if m is None else m
    k = min(n, m)
    # ones(k, 1) padded to rows of k+1 puts a one every k+1 elements; read back as rows of k, row i has it at column i
    sq = Tensor.ones(k, 1, dtype=dtype or dtypes.default_float, device=device).pad(((0, 0), (0, k))).reshape(-1)
    sq = sq.shrink(((0, k * k),)).reshape(k, k)
    return sq.pad(((0, n - k), (0, m - k)))

  @staticmethod
  def linspace(start, stop, steps: int, dtype: DTypeLike | None = None, device: str | None = None) -> Tensor:
    """`steps` evenly spaced values from start to stop; like torch, the first half counts up from start and the second
    half down from stop, so both ends are exact."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if steps == 1: return Tensor.full((1,), start, dtype=dtypes.default_float, device=device).cast(dt)
    f = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
    step = (stop - start) / (steps - 1)
    i = Tensor.arange(steps, device=device).cast(f)
    out = (i < steps // 2).where(i * step + start, stop - (steps - 1 - i) * step)
    return out.cast(dt)

  # ---- random numbers: drawn eagerly in numpy from a counter-based generator; values differ from tinygrad's ----
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

  # ---- movement (RESHAPE EXPAND PERMUTE PAD SHRINK FLIP) ----
  def reshape(self, *shape) -> Tensor:
    """The same elements in row-major order under a new shape (one entry may be -1)."""
    shape = _shape_arg(shape)
    if shape.count(-1) > 1: raise SpecError("UOP.RESHAPE", f"only one -1 allowed in {shape}")
    if -1 in shape:
      known = math.prod(s for s in shape if s != -1)
      if known == 0 or self.numel() % known: raise SpecError("UOP.RESHAPE", f"cannot reshape {self.shape} to {shape}")
      shape = tuple(self.numel() // known if s == -1 else s for s in shape)
    return self if shape == self.shape else self._mov(Ops.RESHAPE, shape)

  def expand(self, *shape) -> Tensor:
    """Broadcast size-1 axes (and new leading axes) to `shape`; -1 keeps an axis."""
    shape = _shape_arg(shape)
    shape = tuple(s if n == -1 else n for s, n in zip((1,) * (len(shape) - self.ndim) + self.shape, shape))
    t = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    return t if shape == t.shape else t._mov(Ops.EXPAND, shape)

  def permute(self, *order) -> Tensor:
    """Reorder the axes."""
    order = tuple(a % self.ndim for a in _shape_arg(order)) if self.ndim else ()
    return self if order == tuple(range(self.ndim)) else self._mov(Ops.PERMUTE, order)

  def pad(self, padding: Sequence[tuple[int, int]]) -> Tensor:
    """Pad each axis with (before, after) zeros."""
    padding = tuple((0, 0) if p is None else (int(p[0]), int(p[1])) for p in padding)
    if any(b < 0 or a < 0 for b, a in padding): raise SpecError("UOP.PAD", f"negative padding {padding}")
    return self if all(p == (0, 0) for p in padding) else self._mov(Ops.PAD, padding)

  def shrink(self, bounds: Sequence[tuple[int, int] | None]) -> Tensor:
    """Keep [start, end) of each axis (None keeps the whole axis)."""
    bounds = tuple((0, n) if b is None else (int(b[0]), int(b[1])) for b, n in zip(bounds, self.shape))
    return self if all(b == (0, n) for b, n in zip(bounds, self.shape)) else self._mov(Ops.SHRINK, bounds)

  def flip(self, axis) -> Tensor:
    """Reverse the order along `axis`."""
    axes = {a % self.ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    return self._mov(Ops.FLIP, tuple(i in axes for i in range(self.ndim)))

  def transpose(self, a: int = 1, b: int = 0) -> Tensor:
    """Swap axes a and b."""
    order = list(range(self.ndim))
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> Tensor:
    """The transpose of axes 0 and 1."""
    return self.transpose()

  def view(self, *shape) -> Tensor:
    """Same as reshape (every tensor here is a lazy view)."""
    return self.reshape(*shape)

  def expand_as(self, other: Tensor) -> Tensor:
    """Broadcast to `other`'s shape."""
    return self.expand(other.shape)

  def contiguous(self) -> Tensor:
    """The same values, materialized in their own buffer when realized (CONTIGUOUS)."""
    return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

  def squeeze(self, dim=None) -> Tensor:
    """Drop size-1 axes: all of them, or those of `dim` (an int or tuple); a named axis of another size stays."""
    if dim is None: drop = {i for i, n in enumerate(self.shape) if n == 1}
    else: drop = {d for d in (_axis(a, self.ndim) for a in ((dim,) if isinstance(dim, int) else dim))
                  if self.shape[d] == 1} if self.ndim else set()
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
    d = _axis(dim, self.ndim)
    sizes = tuple(sizes)
    if sizes.count(-1) == 1:
      known = math.prod(s for s in sizes if s != -1)
      if known == 0 or self.shape[d] % known:
        raise SpecError("UOP.RESHAPE", f"cannot unflatten axis of size {self.shape[d]} into {sizes}")
      sizes = tuple(self.shape[d] // known if s == -1 else s for s in sizes)
    return self.reshape(self.shape[:d] + sizes + self.shape[d + 1:])

  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Concatenate along `dim`; dtypes promote together (DT.PROMOTE). Each piece is padded to the full length and
    selected with a padded mask (WHERE), not added, so that -0.0 and NaN pass through unchanged."""
    ts = (self, *args)
    d = _axis(dim, self.ndim)
    for t in ts:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise SpecError("UOP.PAD", f"cat: shapes {[t.shape for t in ts]} differ outside dim {d}")
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
    """Join equal-shape tensors along a new axis `dim`."""
    d = _axis(dim, self.ndim + 1)
    return Tensor.cat(*(t.unsqueeze(d) for t in (self, *args)), dim=d)

  def split(self, sizes, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along `dim`: of `sizes` each (an int; the last may be shorter) or of the listed sizes."""
    d = _axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(sizes, int): sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if n else [0]
    if sum(sizes) != n: raise SpecError("UOP.SHRINK", f"split sizes {sizes} do not add up to {n}")
    offs = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(self.shrink(tuple((o, o + s) if i == d else None for i in range(self.ndim)))
                 for o, s in zip(offs, sizes))

  def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` pieces of ceil(n / chunks) along `dim` (torch.chunk)."""
    n = self.shape[_axis(dim, self.ndim)]
    return self.split(max(1, -(-n // chunks)), dim)

  def repeat(self, repeats, *args) -> Tensor:
    """Tile: axis i repeated repeats[i] times (torch.Tensor.repeat; extra leading repeats add axes)."""
    reps = _shape_arg((repeats, *args) if args else (repeats,) if isinstance(repeats, int) else (repeats,))
    if len(reps) < self.ndim: raise SpecError("UOP.EXPAND", f"repeat: {len(reps)} repeats for {self.ndim} dims")
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

  def __getitem__(self, index) -> Tensor:
    """Basic indexing (ints, slices with any step, None, Ellipsis) by movement ops, and integer tensor (or list)
    indices by a one-hot mask and a sum (torch's placement of the broadcast index dims). Out-of-range tensor
    indices give 0 (torch raises)."""
    idx = list(index) if isinstance(index, tuple) else [index]
    idx = [Tensor(i, device=self.device) if isinstance(i, (list, np.ndarray)) else i for i in idx]
    for i in idx:
      if not (i is None or i is Ellipsis or isinstance(i, (int, slice, Tensor))) or isinstance(i, bool):
        raise TypeError(f"unsupported index {i!r}")
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if used > self.ndim: raise IndexError(f"too many indices for a tensor of {self.ndim} dims")
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis")
    if Ellipsis in [i for i in idx if not isinstance(i, Tensor)]:
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx[e:e + 1] = [slice(None)] * (self.ndim - used)
    else: idx += [slice(None)] * (self.ndim - used)
    # basic indexing: each entry of `idx` that is not None consumes one axis of self
    x, ax, newshape, rest = self, 0, [], []   # rest: per axis of the result, None (sliced) or the index tensor
    for i in idx:
      if i is None:
        newshape.append(1)
        rest.append(None)
        continue
      n = x.shape[ax]
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
        i %= n
        x = x.shrink(tuple((i, i + 1) if k == ax else None for k in range(x.ndim)))
      elif isinstance(i, slice):
        start, stop, step = i.indices(n)
        cnt = len(range(start, stop, step))
        if cnt == 0: bounds = (0, 0)
        elif step > 0: bounds = (start, start + (cnt - 1) * step + 1)
        else: bounds = (start + (cnt - 1) * step, start + 1)
        x = x.shrink(tuple(bounds if k == ax else None for k in range(x.ndim)))
        if step < 0: x = x.flip(ax)
        x = x._stride(ax, abs(step))
        newshape.append(x.shape[ax])
        rest.append(None)
      else:
        newshape.append(n)
        rest.append(i)
      ax += 1
    x = x.reshape(newshape)
    tix = [k for k, r in enumerate(rest) if r is not None]
    return x if not tix else x._gather(tix, [rest[k] for k in tix])

  def _gather(self, axes: list[int], index: list[Tensor]) -> Tensor:
    """Advanced indexing of `axes` by broadcast integer tensors: compare each index with an arange (one-hot) and
    reduce the selected element. The reduction has at most one nonzero term, so it is exact; bools use MAX. Floats
    are summed as values, which is differentiable (each source element gets its selections' cotangents), and where
    that sum is 0 the sign of a selected -0.0 is restored from a second sum of the bit patterns (BITCAST to the
    same-size int, which carries no gradient) as bits - (0 - sum): the value of bits, the derivative of the sum."""
    for t in index:
      if not dtypes.is_int(t.dtype): raise IndexError(f"tensor indices must be integers, not {t.dtype!r}")
    bshape = index[0].shape
    for t in index[1:]: bshape = _broadcast_shape(bshape, t.shape)
    others = [k for k in range(self.ndim) if k not in axes]
    k, nb = len(axes), len(bshape)
    sizes = [self.shape[a] for a in axes]
    x = self.permute(others + axes)
    x = x.reshape(tuple(self.shape[o] for o in others) + (1,) * nb + tuple(sizes))
    mask = None
    for j, (t, n) in enumerate(zip(index, sizes)):
      t = t._expand_to(bshape)
      t = (t < 0).where(t + n, t)
      ar = Tensor.arange(n, device=self.device).reshape((1,) * (nb + j) + (n,) + (1,) * (k - j - 1))
      one = t.reshape(bshape + (1,) * k) == ar
      mask = one if mask is None else mask & one
    red = tuple(range(x.ndim - k, x.ndim))
    if x.dtype == dtypes.bool: out = mask.where(x, False)._reduce(Ops.MAX, red, False)
    elif dtypes.is_int(x.dtype): out = mask.where(x, 0)._reduce(Ops.ADD, red, False)
    else:
      it = _BITS_INT[x.dtype.itemsize]
      bits = mask.where(x.bitcast(it), 0)._reduce(Ops.ADD, red, False).bitcast(x.dtype)
      out = mask.where(x, 0)._reduce(Ops.ADD, red, False)
      out = (out == 0).where(bits - (0 - out), out)
    # torch: adjacent index tensors put their dims where the first one was; separated ones put them in front
    no = len(others)
    pos = axes[0] if axes == list(range(axes[0], axes[0] + k)) else 0
    return out.permute(list(range(pos)) + list(range(no, no + nb)) + list(range(pos, no)))

  def _mov(self, op: Ops, arg) -> Tensor: return Tensor(UOp(op, self.dtype, (self.uop,), arg))

  # ---- elementwise ----
  def cast(self, dtype: DTypeLike) -> Tensor:
    """Convert the values to `dtype` (OP.CAST: float to int truncates and saturates)."""
    dtype = to_dtype(dtype)
    return self if dtype == self.dtype else Tensor(UOp(Ops.CAST, dtype, (self.uop,)))

  def _broadcasted(self, y, reverse: bool = False) -> tuple[Tensor, Tensor]:
    if isinstance(y, Tensor):
      out = least_upper_dtype(self.dtype, y.dtype)
      x, y = self.cast(out), y.cast(out)
    else:
      out = scalar_result_dtype(self.dtype, y)
      x = self.cast(out)
      y = Tensor(UOp.const(out, y, x.device)).reshape((1,) * x.ndim)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x._expand_to(shape), y._expand_to(shape)

  def _expand_to(self, shape) -> Tensor:
    t = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    return t.expand(shape)

  def _alu(self, op: Ops, *src: Tensor) -> Tensor:
    dtype = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else self.dtype
    return Tensor(UOp(op, dtype, (self.uop, *(s.uop for s in src))))

  def add(self, y, reverse=False) -> Tensor:
    """x + y with broadcasting and promotion (DT.PROMOTE, DT.SCALAR-PROMOTE)."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.ADD, y)
  def sub(self, y, reverse=False) -> Tensor:
    """x - y with broadcasting and promotion."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.SUB, y)
  def mul(self, y, reverse=False) -> Tensor:
    """x * y with broadcasting and promotion."""
    x, y = self._broadcasted(y, reverse); return x._alu(Ops.MUL, y)

  def div(self, y, reverse=False) -> Tensor:
    """True division: integer operands are divided as default floats (DT.PROMOTE.float)."""
    x, y = self._broadcasted(y, reverse)
    dt = least_upper_float(x.dtype)
    return x.cast(dt)._alu(Ops.FDIV, y.cast(dt))

  def maximum(self, y) -> Tensor:
    """Elementwise max; NaN propagates (OP.MAX.nan)."""
    x, y = self._broadcasted(y); return x._alu(Ops.MAX, y)
  def minimum(self, y) -> Tensor:
    """Elementwise min; NaN propagates (floats: -max(-x, -y))."""
    x, y = self._broadcasted(y)
    return -((-x).maximum(-y)) if dtypes.is_float(x.dtype) else (x < y).where(x, y)

  def __lt__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPLT, y)
  def __gt__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._alu(Ops.CMPLT, y)
  def __eq__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPEQ, y)  # type: ignore[override]
  def __ne__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPNE, y)  # type: ignore[override]
  __hash__ = object.__hash__

  def where(self, a, b) -> Tensor:
    """`a` where this bool tensor is true, else `b`."""
    if isinstance(a, Tensor): a_, b_ = a._broadcasted(b)
    elif isinstance(b, Tensor): b_, a_ = b._broadcasted(a)
    else:
      a_, b_ = Tensor(a, device=self.device)._broadcasted(b)
    shape = _broadcast_shape(self.shape, a_.shape)
    c, a_, b_ = self.cast(dtypes.bool)._expand_to(shape), a_._expand_to(shape), b_._expand_to(shape)
    return Tensor(UOp(Ops.WHERE, a_.dtype, (c.uop, a_.uop, b_.uop)))

  def __neg__(self) -> Tensor:
    return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.NEG)
  def neg(self) -> Tensor:
    """-x (logical not for bool, like tinygrad; torch refuses bool)."""
    return -self
  def logical_not(self) -> Tensor:
    """x == 0 as bool (NaN counts as true, so its logical not is false)."""
    return self.cast(dtypes.bool)._alu(Ops.CMPNE, Tensor(True, device=self.device)._expand_to(self.shape))
  def relu(self) -> Tensor:
    """max(x, 0), keeping -0.0 and NaN as they are (torch): x where x < 0 is false. At x = +-0 the value passes
    through DETACH, so the gradient there is 0 as in torch, and NaN still gets the cotangent (GRAD.CHECK.tensor)."""
    return (self < 0).where(0, (self == 0).where(self.detach(), self))
  def exp2(self) -> Tensor:
    """2**x (EXP2) in the default float for non-floats."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.EXP2)
  def log2(self) -> Tensor:
    """log2 x (LOG2)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.LOG2)
  def sqrt(self) -> Tensor:
    """Square root (SQRT)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.SQRT)
  def sin(self) -> Tensor:
    """Sine (SIN)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.SIN)
  def reciprocal(self) -> Tensor:
    """1 / x (RECIPROCAL)."""
    return self.cast(least_upper_float(self.dtype))._alu(Ops.RECIPROCAL)

  def __le__(self, y) -> Tensor: x, y = self._broadcasted(y); return x._alu(Ops.CMPLT, y) | x._alu(Ops.CMPEQ, y)
  def __ge__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._alu(Ops.CMPLT, y) | x._alu(Ops.CMPEQ, y)

  # dtype shorthands
  def float(self) -> Tensor:
    """Cast to float32."""
    return self.cast(dtypes.float32)
  def half(self) -> Tensor:
    """Cast to float16."""
    return self.cast(dtypes.float16)
  def double(self) -> Tensor:
    """Cast to float64."""
    return self.cast(dtypes.float64)
  def int(self) -> Tensor:
    """Cast to int32 (torch's .int() too)."""
    return self.cast(dtypes.int32)
  def long(self) -> Tensor:
    """Cast to int64."""
    return self.cast(dtypes.int64)
  def bool(self) -> Tensor:
    """Cast to bool (x != 0; NaN is true)."""
    return self.cast(dtypes.bool)

  def bitcast(self, dtype: DTypeLike) -> Tensor:
    """Reinterpret the bits as `dtype` of the same itemsize (OP.BITCAST)."""
    dtype = to_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize:
      raise SpecError("OP.BITCAST.size", f"cannot bitcast {self.dtype!r} to {dtype!r}: itemsizes differ")
    return self if dtype == self.dtype else Tensor(UOp(Ops.BITCAST, dtype, (self.uop,)))

  # integer-valued division with torch's floor semantics
  def _floor_correction(self, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """CDIV and CMOD of integers, and the mask of the places where truncation and floor differ: a nonzero remainder
    whose sign differs from the divisor's. x // 0 and x % 0 keep OP.CDIV.zero / OP.CMOD.zero (-1 and x)."""
    q, r = self._alu(Ops.CDIV, y), self._alu(Ops.CMOD, y)
    fix = (r != 0) & ((r < 0) != (y < 0)) & (y != 0)
    return q, r, fix

  def __floordiv__(self, y) -> Tensor:
    """Floor division (torch's `//`). Integers: CDIV corrected by one where the signs call for it. Floats: the floor
    of the exact quotient: floor(x / y), less one where the rounded quotient landed on or past an integer the exact
    one does not reach (the residual x - q*y, from one MULACC, then has the wrong sign). Exact while |x / y| < 2**p;
    beyond that every float is an integer and the result is the rounded quotient (ACC.RANGE)."""
    x, y = self._broadcasted(y)
    return x._floordiv(y)
  def __rfloordiv__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._floordiv(y)

  def _float_floor_quotient(self, y: Tensor) -> tuple[Tensor, Tensor]:
    """floor(x / y) for floats and the residual x - floor(x / y) * y rounded once. Rounding x / y can only move it up
    to the next integer (rounding is monotone), so floor(FDIV) is the floor or one more; MULACC(-q, y, x) is the
    exact residual rounded once, and a nonzero residual whose sign differs from y's says it is one more. A NaN
    residual (0 * inf) corrects nothing."""
    q = self._alu(Ops.FDIV, y).floor()
    r = (-q)._alu(Ops.MULACC, y, self)
    over = ((r < 0) & (y > 0)) | ((r > 0) & (y < 0))
    return over.where(q - 1, q), over.where(r + y, r)

  def _floordiv(self, y: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype):
      q, _ = self._float_floor_quotient(y)
      # torch (and Python): a finite x over an infinite y of the other sign is -1, an infinite x gives NaN
      finite = (self - self) == 0
      q = (y.isinf() & (self != 0) & ((self < 0) != (y < 0))).where(-1.0, q)
      # torch: x // 0 is x / 0 for every x, so an infinite x gives an infinity there, not NaN
      return (finite | (y == 0)).where(q, math.nan)
    if self.dtype == dtypes.bool: raise SpecError("OP.CDIV", "floor division of bool tensors")
    q, _, fix = self._floor_correction(y)
    return fix.where(q - 1, q)

  def __mod__(self, y) -> Tensor:
    """Remainder with the sign of the divisor (torch's `%`, Python's). Integers: CMOD plus the divisor where the
    signs differ. Floats: x - floor(x / y) * y rounded once (a MULACC with the exact floor), so it is exact where
    torch's fmod-based result is, and a zero takes x's sign as torch's does. Where |x / y| >= 2**p the floor is not
    exact and neither is the remainder (ACC.MOD)."""
    x, y = self._broadcasted(y)
    return x._mod(y)
  def __rmod__(self, y) -> Tensor: x, y = self._broadcasted(y, True); return x._mod(y)

  def _mod(self, y: Tensor) -> Tensor:
    if dtypes.is_float(self.dtype):
      _, r = self._float_floor_quotient(y)
      r = (r == 0).where(self * 0, r)
      # torch (and Python): a finite x modulo an infinite y is x when the signs agree (or x is 0), else y
      finite = (self - self) == 0
      keep = (self == 0) | ((self < 0) == (y < 0))
      return (y.isinf() & finite).where(keep.where(self, y), r)
    if self.dtype == dtypes.bool: raise SpecError("OP.CMOD", "remainder of bool tensors")
    _, r, fix = self._floor_correction(y)
    return fix.where(r + y, r)

  def pow(self, y, reverse: bool = False) -> Tensor:
    """x ** y with the POW op (OP.POW): an int tensor to an int power stays int (negative powers follow
    OP.POW.negative-exponent where torch raises); a float operand makes it float. bool ** bool is x | ~y."""
    x, y = self._broadcasted(y, reverse)
    if x.dtype == dtypes.bool: return x | y.logical_not()
    return x._alu(Ops.POW, y)
  def __pow__(self, y) -> Tensor: return self.pow(y)
  def __rpow__(self, y) -> Tensor: return self.pow(y, True)

  # bitwise (bool and int only)
  def _bitwise(self, op: Ops, y, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(y, reverse)
    if dtypes.is_float(x.dtype): raise SpecError(f"OP.{op.name}", f"bitwise {op.name} of {x.dtype!r}")
    return x._alu(op, y)
  def __and__(self, y) -> Tensor: return self._bitwise(Ops.AND, y)
  def __or__(self, y) -> Tensor: return self._bitwise(Ops.OR, y)
  def __xor__(self, y) -> Tensor: return self._bitwise(Ops.XOR, y)
  def __rand__(self, y) -> Tensor: return self._bitwise(Ops.AND, y, True)
  def __ror__(self, y) -> Tensor: return self._bitwise(Ops.OR, y, True)
  def __rxor__(self, y) -> Tensor: return self._bitwise(Ops.XOR, y, True)
  def __lshift__(self, y) -> Tensor:
    """x << y; the count is taken modulo the bit width (OP.SHL.count)."""
    return self._bitwise(Ops.SHL, y)
  def __rshift__(self, y) -> Tensor:
    """x >> y: arithmetic for signed, logical for unsigned (OP.SHR)."""
    return self._bitwise(Ops.SHR, y)
  def __rlshift__(self, y) -> Tensor: return self._bitwise(Ops.SHL, y, True)
  def __rrshift__(self, y) -> Tensor: return self._bitwise(Ops.SHR, y, True)
  def __invert__(self) -> Tensor:
    """Bitwise not (logical not for bool): XOR with all ones."""
    if dtypes.is_float(self.dtype): raise SpecError("OP.XOR", f"bitwise not of {self.dtype!r}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1

  # sign, rounding
  def abs(self) -> Tensor:
    """|x|: max(x, -x), so abs(-0.0) = 0.0 and NaN stays NaN; unsigned and bool are unchanged."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    return self.maximum(-self)
  def sign(self) -> Tensor:
    """-1, 0 or 1 in the input dtype; like torch, sign(-0.0) = 0 and sign(NaN) = 0."""
    if self.dtype == dtypes.bool: return self
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
  def trunc(self) -> Tensor:
    """Round toward zero (TRUNC); integers are unchanged."""
    return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self
  def floor(self) -> Tensor:
    """Round down: trunc, minus one where trunc went up (negative non-integers); keeps -0.0."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    """Round up: trunc, plus one where trunc went down; ceil(-0.5) = -0.0 as in torch."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round to nearest, ties to even (torch.round). Built from trunc and the exact fraction x - trunc(x)."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    frac = (self - t).abs()
    away = t + self.sign()           # the neighbour away from zero
    t_even = (t - (t / 2).trunc() * 2) == 0
    return (frac > 0.5).where(away, ((frac == 0.5) & t_even.logical_not()).where(away, t))

  # transcendental: compositions of EXP2, LOG2, SIN, SQRT, RECIPROCAL
  def exp(self) -> Tensor:
    """e**x = exp2(x * log2(e))."""
    x = self.cast(least_upper_float(self.dtype))
    return (x * (1 / math.log(2))).exp2()
  def log(self) -> Tensor:
    """ln x = log2(x) * ln(2)."""
    return self.log2() * math.log(2)
  def rsqrt(self) -> Tensor:
    """1 / sqrt(x)."""
    return self.sqrt().reciprocal()
  def cos(self) -> Tensor:
    """cos x = sin(pi/2 - x)."""
    x = self.cast(least_upper_float(self.dtype))
    return (math.pi / 2 - x).sin()
  def tan(self) -> Tensor:
    """sin x / cos x."""
    return self.sin() / self.cos()
  def sigmoid(self) -> Tensor:
    """1 / (1 + e**-x), as 1 / (1 + z) for x > 0 and z / (1 + z) otherwise with z = e**-|x| <= 1: no intermediate
    overflows, so the gradient is finite (0) where e**-x would be inf (x < -88 in float32), as torch's. The sign is
    split with WHERE, not abs, whose tie at 0 would give the wrong slope there (GRAD.CHECK.tensor)."""
    x = self.cast(least_upper_float(self.dtype))
    pos = x > 0
    z = pos.where(-x, x).exp()
    r = (1 + z).reciprocal()
    return pos.where(r, z * r)
  def tanh(self) -> Tensor:
    """2 * sigmoid(2x) - 1 (tinygrad's composition; loses relative accuracy near 0)."""
    return 2 * (2 * self.cast(least_upper_float(self.dtype))).sigmoid() - 1
  def gelu(self) -> Tensor:
    """The tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (torch's approximate='tanh')."""
    x = self.cast(least_upper_float(self.dtype))
    return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
  def silu(self) -> Tensor:
    """x * sigmoid(x)."""
    return self * self.sigmoid()
  def swish(self) -> Tensor:
    """Same as silu."""
    return self.silu()
  def softplus(self, beta=1) -> Tensor:
    """log(1 + e**(beta x)) / beta, as (max(beta x, 0) + log1p(e**-|beta x|)) / beta so that large x do not overflow,
    built so that the gradient at x = 0 is torch's 1/2 (_softplus_stable; relu and abs would each give 0 there)."""
    x = self.cast(least_upper_float(self.dtype))
    return (x * beta)._softplus_stable() * (1 / beta)
  def elu(self, alpha=1.0) -> Tensor:
    """x for x > 0 (and NaN), alpha (e**x - 1) otherwise. The exponential branch is fed 0 where it is not taken, so
    its e**x cannot overflow and turn the gradient WHERE sends it (0) into NaN (GRAD.CHECK.tensor: torch gives g)."""
    x = self.cast(least_upper_float(self.dtype))
    neg = x <= 0
    return neg.where(alpha * (neg.where(x, 0).exp() - 1), x)
  def leaky_relu(self, neg_slope=0.01) -> Tensor:
    """x for x > 0, neg_slope * x otherwise: at x = 0 (and NaN) the gradient is neg_slope * g, as torch's."""
    return (self > 0).where(self, self * neg_slope)
  def relu6(self) -> Tensor:
    """min(max(x, 0), 6), with hardtanh's gradient (0 at x = 0 and x = 6, as torch's)."""
    return self.hardtanh(0, 6)
  def hardtanh(self, min_val=-1, max_val=1) -> Tensor:
    """x clipped to [min_val, max_val]. torch's gradient is g strictly inside (and at NaN), 0 at the bounds."""
    return self._clamp(min_val, max_val, bounds_inside=False)
  def clip(self, min_=None, max_=None) -> Tensor:
    """Clamp to [min_, max_] (either may be None); NaN stays NaN. torch's clamp gradient: g on the closed interval,
    bounds included, and 0 at NaN."""
    if min_ is None and max_ is None: raise ValueError("clip needs at least one of min_ and max_")
    x = self._clamp(min_, max_, bounds_inside=True)
    return x.isnan().where(x.detach(), x) if dtypes.is_float(x.dtype) else x

  def _clamp(self, lo, hi, bounds_inside: bool) -> Tensor:
    """Clamp with WHERE on comparisons, the lower bound first (so lo > hi gives hi, as torch). Not built on
    maximum/minimum, whose tie rule (GRAD.MAX.tie) would give g/2 at a bound: there x passes through unchanged (so
    -0.0 stays -0.0), with gradient g if `bounds_inside`, else through DETACH with none (GRAD.CHECK.tensor)."""
    x = self
    for b, below in ((lo, True), (hi, False)):
      if b is None: continue
      x, bt = x._broadcasted(b)
      at = x if bounds_inside else (x == bt).where(x.detach(), x)
      x = ((x < bt) if below else (x > bt)).where(bt, at)
    return x
  clamp = clip
  def isnan(self) -> Tensor:
    """x != x."""
    return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    """x == +inf (if detect_positive) or x == -inf (if detect_negative)."""
    if not dtypes.is_float(self.dtype): return Tensor.full(self.shape, False, device=self.device)
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)

  __add__, __sub__, __mul__, __truediv__ = add, sub, mul, div
  def __radd__(self, y): return self.add(y, True)
  def __rsub__(self, y): return self.sub(y, True)
  def __rmul__(self, y): return self.mul(y, True)
  def __rtruediv__(self, y): return self.div(y, True)

  # ---- reductions ----
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    if not self.ndim: return ()
    return tuple(sorted({_axis(a, self.ndim) for a in ((axis,) if isinstance(axis, int) else axis)}))

  def _reduce(self, op: Ops, axis, keepdim: bool) -> Tensor:
    axes = self._axes(axis)
    if not axes: return self   # nothing to reduce (a 0-d tensor, or axis=())
    ret = Tensor(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes)))
    return ret if keepdim else ret.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

  def sum(self, axis=None, keepdim: bool = False, dtype: DTypeLike | None = None) -> Tensor:
    """Sum over `axis` (int, tuple or None for all). Accumulates in sum_acc_dtype (DT.SUM: int32 for small ints and
    bool where torch uses int64); float16/bfloat16 sums come back in the input type; `dtype` overrides both."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out

  def prod(self, axis=None, keepdim: bool = False, dtype: DTypeLike | None = None) -> Tensor:
    """Product over `axis`, accumulated like sum (DT.SUM; torch uses int64 for integer inputs)."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out

  def max(self, axis=None, keepdim: bool = False) -> Tensor:
    """Maximum over `axis`; NaN propagates (OP.MAX.nan). The max over zero elements is the dtype's minimum."""
    return self._reduce(Ops.MAX, axis, keepdim)

  def _inverse(self) -> Tensor:
    """An order-reversing bijection: -x for floats, ~x for ints (no overflow, unlike -x), not for bool."""
    return -self if dtypes.is_float(self.dtype) else ~self

  def min(self, axis=None, keepdim: bool = False) -> Tensor:
    """Minimum over `axis`, as the inverse of the max of the inverse."""
    return self._inverse().max(axis, keepdim)._inverse()

  def mean(self, axis=None, keepdim: bool = False) -> Tensor:
    """Sum divided by the count, in the default float for int/bool inputs; NaN over zero elements."""
    x = self.cast(least_upper_float(self.dtype))
    n = math.prod(self.shape[a] for a in self._axes(axis))
    # divide in the accumulation type (float32 for float16/bfloat16, DT.SUM) before rounding back, so that a sum
    # beyond the dtype's range still gives a representable mean (torch)
    out = x.sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    return out.div(n).cast(x.dtype) if n else (out * math.nan).cast(x.dtype)

  def var(self, axis=None, keepdim: bool = False, correction=1) -> Tensor:
    """Variance: sum((x - mean)^2) / (n - correction) (torch's default correction=1)."""
    x = self.cast(least_upper_float(self.dtype))
    n = math.prod(self.shape[a] for a in self._axes(axis))
    d = x - x.mean(axis, keepdim=True)
    return (d * d).sum(axis, keepdim).div(max(0, n - correction))

  def std(self, axis=None, keepdim: bool = False, correction=1) -> Tensor:
    """sqrt(var). Where the variance is 0 it reaches SQRT through DETACH: SQRT's slope there is inf and the
    variance's is 0, so the chain would give NaN; torch gives 0 (GRAD.CHECK.tensor)."""
    v = self.var(axis, keepdim, correction)
    return (v == 0).where(v.detach(), v).sqrt()

  def argmax(self, axis=None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (NaN counts as the maximum, as in torch), over the flattened tensor for
    axis=None. The result is int32 (tinygrad; torch returns int64)."""
    if axis is None:
      out = self.flatten().argmax(0)
      return out.reshape((1,) * self.ndim) if keepdim else out
    ax = _axis(axis, self.ndim)
    n = self.shape[ax] if self.ndim else 1
    x = self.reshape(1) if self.ndim == 0 else self
    m = x.max(ax, keepdim=True)
    hit = x == m
    if dtypes.is_float(x.dtype): hit = hit | x.isnan()
    # count down from n so that the max over the hits picks the first one
    down = Tensor.arange(n, 0, -1, device=self.device).reshape(tuple(n if i == ax else 1 for i in range(x.ndim)))
    out = n - hit.where(down, 0).max(ax, keepdim=True)
    if self.ndim == 0: return out.reshape(())
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(x.shape) if i != ax))

  def argmin(self, axis=None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum (argmax of the inverse)."""
    x = self.logical_not() if self.dtype == dtypes.bool else self._inverse()
    return x.argmax(axis, keepdim)

  def any(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether any element is nonzero (False over zero elements)."""
    return self.cast(dtypes.bool).max(axis, keepdim)

  def all(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether every element is nonzero (True over zero elements)."""
    return self.logical_not().any(axis, keepdim).logical_not()

  def softmax(self, axis=-1, dtype: DTypeLike | None = None) -> Tensor:
    """e**(x - max) / sum(e**(x - max)) along `axis`."""
    x = self.cast(dtype) if dtype is not None else self.cast(least_upper_float(self.dtype))
    e = (x - x.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)

  def log_softmax(self, axis=-1, dtype: DTypeLike | None = None) -> Tensor:
    """x - max - log(sum(e**(x - max))) along `axis`."""
    x = self.cast(dtype) if dtype is not None else self.cast(least_upper_float(self.dtype))
    d = x - x.max(axis, keepdim=True)
    return d - d.exp().sum(axis, keepdim=True).log()

  def logsumexp(self, axis=None, keepdim: bool = False) -> Tensor:
    """log(sum(e**x)) computed as m + log(sum(e**(x - m))) with m the max (0 where the max is infinite, so that an
    all -inf slice gives -inf as in torch)."""
    x = self.cast(least_upper_float(self.dtype))
    m = x.max(axis, keepdim=True)
    # a group holding +inf sums to +inf whatever its finite elements are: they get no gradient (torch), and pass
    # through DETACH so that their e**x, which may overflow, cannot make the chain inf/inf = NaN
    x = ((m == math.inf) & (x != math.inf)).where(x.detach(), x)
    m = m.isinf().where(0, m)
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(n for i, n in enumerate(self.shape) if i not in self._axes(axis)))

  def cumsum(self, axis: int = 0) -> Tensor:
    """Running sum along `axis` (accumulated like sum, DT.SUM): the axis is padded with n-1 zeros in front and each
    output reads a window of n, made by movement ops alone, then summed."""
    if self.ndim == 0: return self.sum()
    ax = _axis(axis, self.ndim)
    n = self.shape[ax]
    # an empty axis has nothing to sum; the result keeps the dtype sum would give it (float16 stays float16)
    if n == 0: return self if self.dtype in (dtypes.float16, dtypes.bfloat16) else self.cast(sum_acc_dtype(self.dtype))
    x = self.transpose(ax, -1) if ax != self.ndim - 1 else self
    x = x.pad(((0, 0),) * (x.ndim - 1) + ((n - 1, 0),))._windows(n, 1, 1).sum(-1)
    x = x.cast(self.dtype) if self.dtype in (dtypes.float16, dtypes.bfloat16) else x
    return x.transpose(ax, -1) if ax != self.ndim - 1 else x

  def _windows(self, k: int, s: int, d: int) -> Tensor:
    """Sliding windows over the last axis: (..., n) -> (..., o, k) with out[..., i, j] = x[..., i*s + j*d] and
    o = (n - d*(k-1) - 1) // s + 1. Made by movement ops alone: the axis is tiled k times and read back in rows of
    n + d, which shifts each row by d; then the row starts are strided by s."""
    *pre, n = self.shape
    o = (n - d * (k - 1) - 1) // s + 1
    if o <= 0: raise SpecError("UOP.SHRINK", f"window of {k} (dilation {d}) does not fit in {n}")
    x = self.reshape(*pre, 1, n).expand(*pre, k, n).reshape(*pre, k * n)
    x = x.pad(((0, 0),) * len(pre) + ((0, k * d),)).reshape(*pre, k, n + d)
    x = x.shrink(tuple([None] * (len(pre) + 1) + [(0, (o - 1) * s + 1)]))._stride(len(pre) + 1, s)
    return x.transpose(-1, -2)

  # ---- linear algebra ----
  def matmul(self, w: Tensor) -> Tensor:
    """(..., n, k) @ (..., k, m): a broadcast multiply and a sum over k (there is no matmul primitive)."""
    if self.ndim == 0 or w.ndim == 0: raise SpecError("UOP.REDUCE_AXIS", "matmul needs tensors of at least 1 dim")
    x = self.reshape(1, -1) if self.ndim == 1 else self
    m = w.reshape(-1, 1) if w.ndim == 1 else w
    if x.shape[-1] != m.shape[-2]: raise SpecError("UOP.EXPAND", f"matmul of {self.shape} and {w.shape}")
    out = (x.reshape(*x.shape[:-1], 1, x.shape[-1]) * m.transpose(-1, -2).reshape(*m.shape[:-2], 1, *m.shape[::-1][:2]))
    out = out.sum(-1)
    if w.ndim == 1: out = out.reshape(out.shape[:-1])
    if self.ndim == 1:   # drop the row axis that a vector operand was given
      out = out.reshape(*out.shape[:-2], *out.shape[-1:]) if w.ndim > 1 else out.reshape(out.shape[:-1])
    return out

  __matmul__ = matmul
  def __rmatmul__(self, x) -> Tensor: return Tensor(x, device=self.device).matmul(self) if not isinstance(x, Tensor) \
      else x.matmul(self)

  def dot(self, w: Tensor) -> Tensor:
    """Same as matmul."""
    return self.matmul(w)

  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight + bias with tinygrad's weight layout (in_features, out_features) (torch's F.linear takes the
    transpose); a 1-d weight multiplies elementwise."""
    x = self * weight if weight.ndim == 1 else self.matmul(weight)
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

  def _pool(self, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> Tensor:
    """Sliding windows over the last len(k) axes: (..., n1, .., nm) -> (..., o1, .., om, k1, .., km)."""
    m = len(k)
    x, p = self, self.ndim - m
    for i in range(m):
      # x is (pre, o1..o_i, n_{i+1}..n_m, k1..k_i): window axis p+i moved last gives (..., o_{i+1}, k_{i+1}) at the end
      ax = p + i
      x = x.permute([a for a in range(x.ndim) if a != ax] + [ax])._windows(k[i], s[i], d[i])
      L = x.ndim
      x = x.permute(list(range(p + i)) + [L - 2] + list(range(p + i, L - 2)) + [L - 1])
    return x

  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
             dtype: DTypeLike | None = None) -> Tensor:
    """Convolution (torch's cross-correlation) over the trailing spatial axes of (N, Cin, *spatial) with weight
    (Cout, Cin // groups, *kernel). padding is an int, one per spatial axis, or two per axis in tinygrad's order
    (last axis first: (left, right, top, bottom)). Built as im2col: pad, sliding windows by movement ops,
    broadcast multiply with the weight and a sum over (Cin // groups, *kernel)."""
    ks = weight.shape[2:]
    m = len(ks)
    bs, cin = self.shape[:2]
    cout, cpg = weight.shape[:2]
    if cin != cpg * groups or cout % groups: raise SpecError("UOP.RESHAPE", f"conv2d: input {self.shape} with "
                                                             f"weight {weight.shape} and groups={groups}")
    st, dl = _tuple(stride, m), _tuple(dilation, m)
    pads = _conv_padding(padding, m)
    return self.pad(((0, 0), (0, 0), *pads))._conv(weight, bias, groups, st, dl, dtype)

  def _conv(self, weight: Tensor, bias: Tensor | None, groups: int, st, dl, dtype=None,
            valid: Tensor | None = None) -> Tensor:
    """conv2d of an already padded input. `valid` (a bool tensor of the input's shape) marks the elements that take
    part: the products of the others are WHERE'd to 0 instead of computed as 0 * w, which is NaN for an infinite w."""
    ks = weight.shape[2:]
    m = len(ks)
    bs, cout, cpg = self.shape[0], weight.shape[0], weight.shape[1]
    x = self._pool(ks, st, dl)                                      # (N, Cin, *o, *k)
    os = x.shape[2:2 + m]
    x = x.reshape(bs, groups, 1, cpg, *os, *ks)
    w = weight.reshape(1, groups, cout // groups, cpg, *((1,) * m), *ks)
    prod = x * w
    if valid is not None: prod = valid._pool(ks, st, dl).reshape(x.shape).where(prod, 0)
    out = prod.sum((3, *range(4 + m, 4 + 2 * m)), dtype=dtype)
    out = out.reshape(bs, cout, *os)
    return out if bias is None else out + bias.reshape(1, -1, *((1,) * m))

  def _pool_setup(self, kernel_size, stride, dilation, padding, ceil_mode):
    ks = _tuple(kernel_size, 2)
    m = len(ks)
    st = _tuple(stride if stride is not None else ks, m)
    dl = _tuple(dilation, m)
    pads = _conv_padding(padding, m)
    extra = []
    for n, k, s, d, (pb, pa) in zip(self.shape[-m:], ks, st, dl, pads):
      span = n + pb + pa - d * (k - 1) - 1
      o = (-(-span // s) if ceil_mode else span // s) + 1
      # torch (ceil_mode): the last window must start inside the input or the left padding
      if ceil_mode and (o - 1) * s >= n + pb: o -= 1
      extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + pb + pa)))
    return ks, st, dl, pads, extra

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False) -> Tensor:
    """Max over windows of the trailing len(kernel_size) axes; padding counts as -inf (torch.nn.functional). For
    floats the gradient goes, as torch's, wholly to the first maximum of a window (the last NaN if any), not split
    among ties (GRAD.REDUCE.MAX.tie): the value is read back through a one-hot mask of that position."""
    ks, st, dl, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    m = len(ks)
    full = tuple((0, 0) for _ in range(self.ndim - m)) + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    inside = Tensor.full(self.shape, True, device=self.device).pad(full)
    x = inside.where(self.pad(full), dtypes.min(self.dtype))
    w = x._pool(ks, st, dl)
    if not dtypes.is_float(self.dtype): return w.max(tuple(range(-m, 0)))
    w = w.reshape(w.shape[:-m] + (math.prod(ks),))
    k = w.shape[-1]
    # a padding position (-inf) never takes the gradient from an input -inf it ties with
    hit = (w == w.max(-1, keepdim=True)) & inside._pool(ks, st, dl).reshape(w.shape)
    nan = w.isnan()
    down = Tensor.arange(k, 0, -1, device=self.device)   # counts down: the max over the hits marks the first
    first = hit & (hit.where(down, 0).max(-1, keepdim=True) == down)
    up = Tensor.arange(1, k + 1, device=self.device)
    last_nan = nan & (nan.where(up, 0).max(-1, keepdim=True) == up)
    one = nan.max(-1, keepdim=True).where(last_nan, first)
    # one term, so the sums are exact; the bit pattern keeps the sign of a zero (as in _gather)
    red = (w.ndim - 1,)
    picked = one.where(w, 0)._reduce(Ops.ADD, red, False)
    bits = one.where(w.bitcast(_BITS_INT[w.dtype.itemsize]), 0)._reduce(Ops.ADD, red, False).bitcast(w.dtype)
    return (picked == 0).where(bits - (0 - picked), picked)

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> Tensor:
    """Mean over windows of the trailing len(kernel_size) axes. The divisor is the window's count of input elements,
    plus its explicit padding when count_include_pad; the extra right padding of ceil_mode is never counted (torch)."""
    ks, st, dl, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    m = len(ks)
    lead = tuple((0, 0) for _ in range(self.ndim - m))
    full = lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    x = self.cast(least_upper_float(self.dtype))
    # sum and divide in the accumulation type (DT.SUM), rounding to the dtype once at the end (as mean does)
    sums = x.pad(full)._pool(ks, st, dl).sum(tuple(range(-m, 0)), dtype=sum_acc_dtype(x.dtype))
    if count_include_pad:   # the explicit padding counts, the ceil_mode extra does not
      ones = Tensor.full(tuple(n + pb + pa for n, (pb, pa) in zip(self.shape[-m:], pads)), 1.0, dtype=x.dtype,
                         device=self.device).pad(tuple((0, e) for e in extra))
    else: ones = Tensor.full(self.shape[-m:], 1.0, dtype=x.dtype, device=self.device).pad(full[-m:])
    count = ones._pool(ks, st, dl).sum(tuple(range(-m, 0)))
    return (sums / count).cast(x.dtype)

  # ---- nn functional (refimpl.nn) ----
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                   dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value over the last two axes, as torch's function (NN.ATTENTION): a
    bool mask keeps the positions where it is True, a float mask is added; `is_causal` keeps j <= i."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise SpecError("NN.ATTENTION", f"query, key and value need at least 2 axes, got {self.shape}, {key.shape}, "
                      f"{value.shape}")
    if self.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
      raise SpecError("NN.ATTENTION", f"query {self.shape}, key {key.shape} and value {value.shape} do not fit")
    if is_causal:
      if attn_mask is not None: raise SpecError("NN.ATTENTION", "give either attn_mask or is_causal, not both")
      n, m = self.shape[-2], key.shape[-2]
      attn_mask = Tensor.arange(n, device=self.device).reshape(n, 1) >= Tensor.arange(m, device=self.device)
    scores = self.matmul(key.transpose(-1, -2)) * (1.0 / math.sqrt(self.shape[-1]))
    if attn_mask is not None:
      scores = attn_mask.where(scores, -math.inf) if attn_mask.dtype == dtypes.bool else scores + attn_mask
    return scores.softmax(-1).dropout(dropout_p).matmul(value)

  # Layers, normalisations and losses composed from the Tensor ops above, so that autograd needs no rule of its own
  # (GRAD.T, spec/gradients.md). Their meaning, and where it departs from torch or tinygrad, is spec/nn.md.

  def sequential(self, ll) -> Tensor:
    """Apply each callable of `ll` in turn: f_n(...f_2(f_1(self))) (NN.SEQUENTIAL)."""
    x = self
    for f in ll: x = f(x)
    return x

  def one_hot(self, num_classes: int = -1) -> Tensor:
    """A new last axis of size num_classes holding 1 at each label and 0 elsewhere, in the default int dtype
    (NN.ONE_HOT). num_classes=-1 takes max + 1, which realizes the labels. A label outside [0, num_classes) gives a
    row of zeros (torch raises)."""
    if not dtypes.is_int(self.dtype): raise SpecError("NN.ONE_HOT", f"labels must be integers, not {self.dtype!r}")
    if num_classes == -1: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    if num_classes < 0: raise SpecError("NN.ONE_HOT", f"num_classes={num_classes} is negative")
    return self._class_mask(num_classes, self.ndim).where(1, 0)

  def _class_mask(self, n: int, axis: int) -> Tensor:
    """Labels -> a bool mask with a class axis of size n inserted at `axis`: True where the class equals the label."""
    classes = Tensor.arange(n, device=self.device).reshape(tuple(n if i == axis else 1 for i in range(self.ndim + 1)))
    return self.unsqueeze(axis) == classes

  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1,
                       padding=0, output_padding=0) -> Tensor:
    """Transposed convolution (torch's conv_transpose2d, the input-gradient of conv2d) of (N, Cin, *spatial) with
    weight (Cin, Cout // groups, *kernel) (NN.CONV_TRANSPOSE). Built from conv2d: the input is spread out with
    stride-1 zeros between neighbours, padded by dilation*(k-1) - padding on each side (output_padding more at the
    end; a negative amount cuts), and convolved at stride 1 with the kernel flipped and its in/out axes swapped per
    group. Output size per axis: (n-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1."""
    ks = weight.shape[2:]
    m = len(ks)
    if m == 0 or self.ndim != m + 2:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} does not match weight {weight.shape}")
    cin, cpg = weight.shape[:2]
    if groups < 1 or self.shape[1] != cin or cin % groups:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} with weight {weight.shape} and groups={groups}")
    st, dl, pd, op = (_tuple(v, m) for v in (stride, dilation, padding, output_padding))
    if any(len(t) != m for t in (st, dl, pd, op)) or min(st + dl) < 1 or min(pd + op) < 0:
      raise SpecError("NN.CONV_TRANSPOSE", f"stride {stride}, dilation {dilation}, padding {padding} and "
                      f"output_padding {output_padding} for {m} spatial axes")
    # torch: the extra output rows must lie within one stride (or one dilation) of the last computed one
    if any(o >= max(s, d) for o, s, d in zip(op, st, dl)):
      raise SpecError("NN.CONV_TRANSPOSE", f"output_padding {op} must be smaller than stride {st} or dilation {dl}")
    out = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in zip(self.shape[2:], st, pd, dl, ks, op)]
    if min(out) < 1 or min(self.shape[2:]) < 1:
      raise SpecError("NN.CONV_TRANSPOSE", f"input {self.shape} gives the empty output size {out}")
    # the spread and padded zeros are marked invalid, so that they add nothing even against an infinite weight
    # (torch scatters only the input's own products)
    x, valid = self, Tensor.full(self.shape, True, device=self.device)
    amounts = [(d * (k - 1) - p, d * (k - 1) - p + o) for k, d, p, o in zip(ks, dl, pd, op)]
    for i, s in enumerate(st): x, valid = x._spread(2 + i, s), valid._spread(2 + i, s)
    x, valid = x._pad_or_cut(amounts), valid._pad_or_cut(amounts)
    w = weight.reshape(groups, cin // groups, cpg, *ks).transpose(1, 2).flip(tuple(range(3, 3 + m)))
    w = w.reshape(groups * cpg, cin // groups, *ks)
    return x._conv(w, bias, groups, (1,) * m, dl, valid=valid)

  def _spread(self, ax: int, s: int) -> Tensor:
    """s-1 zeros between neighbours along axis `ax`: n -> (n-1)*s + 1 (pad each element to s, drop the tail)."""
    if s == 1: return self
    n = self.shape[ax]
    x = self.unsqueeze(ax + 1).pad(tuple((0, s - 1) if i == ax + 1 else (0, 0) for i in range(self.ndim + 1)))
    x = x.reshape(self.shape[:ax] + (n * s,) + self.shape[ax + 1:])
    return x.shrink(tuple((0, (n - 1) * s + 1) if i == ax else None for i in range(self.ndim)))

  def _pad_or_cut(self, amounts: Sequence[tuple[int, int]]) -> Tensor:
    """Per trailing axis (before, after): a positive amount pads with zeros, a negative one shrinks."""
    lead = [(0, 0)] * (self.ndim - len(amounts))
    x = self.pad(lead + [(max(b, 0), max(a, 0)) for b, a in amounts])
    cut = [None] * len(lead) + [(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(amounts, x.shape[len(lead):])]
    return x.shrink(cut)

  def dropout(self, p: float = 0.5) -> Tensor:
    """In training (Tensor.training), zero each element with probability p and scale the others by 1/(1-p)
    (NN.DROPOUT); otherwise, or for p = 0, the tensor itself. The mask is drawn with Tensor.rand, so manual_seed makes
    it reproducible, and it is a constant to differentiation. As in torch the input is multiplied by the mask, so a
    dropped NaN or infinity still gives NaN."""
    if not 0 <= p <= 1: raise SpecError("NN.DROPOUT", f"p={p} is outside [0, 1]")
    if not Tensor.training or p == 0: return self
    if p == 1: return self * 0
    keep = Tensor.rand(*self.shape, device=self.device) >= p
    return self * (keep.cast(self.dtype) * (1 / (1 - p)))

  def layernorm(self, axis=-1, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over `axis` (an int or tuple), with the biased variance as torch's layer_norm
    (NN.LAYERNORM); no affine part (nn.LayerNorm adds it). The variance sees the mean through DETACH: its derivative
    with respect to the mean is 0 in exact arithmetic, and differentiating it would only add rounding noise
    (GRAD.T.layernorm)."""
    mean = self.mean(axis, keepdim=True)
    centred = self - mean.detach()
    return (self - mean) * ((centred * centred).mean(axis, keepdim=True) + eps).rsqrt()

  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis=1) -> Tensor:
    """(x - mean) * invstd * weight + bias, each of mean, invstd, weight and bias laid along `axis` (an int or
    tuple; invstd may instead have the input's full shape) (NN.BATCHNORM.F). weight and bias may be None."""
    axes = tuple(_axis(a, self.ndim) for a in ((axis,) if isinstance(axis, int) else axis))
    shape = tuple(n if i in axes else 1 for i, n in enumerate(self.shape))
    def along(t: Tensor, name: str) -> Tensor:
      if t.numel() != math.prod(shape):
        raise SpecError("NN.BATCHNORM.F", f"{name} of shape {t.shape} for axes {axes} of {self.shape}")
      return t.reshape(shape)
    x = self - along(mean, "mean")
    x = x * (invstd if invstd.shape == self.shape else along(invstd, "invstd"))
    if weight is not None: x = x * along(weight, "weight")
    return x if bias is None else x + along(bias, "bias")

  # losses (NN.LOSS): `self` holds scores, log-probabilities or probabilities; Y the targets
  def _loss_reduce(self, reduction: str) -> Tensor:
    if reduction == "none": return self
    if reduction == "sum": return self.sum()
    if reduction == "mean": return self.mean()
    raise SpecError("NN.LOSS.reduction", f"reduction={reduction!r} is not one of 'none', 'sum', 'mean'")

  @staticmethod
  def _loss_checks(Y, reduction: str, label_smoothing: float = 0.0) -> Tensor:
    if reduction not in ("none", "sum", "mean"):
      raise SpecError("NN.LOSS.reduction", f"reduction={reduction!r} is not one of 'none', 'sum', 'mean'")
    if not 0.0 <= label_smoothing <= 1.0:
      raise SpecError("NN.LOSS.smoothing", f"label_smoothing={label_smoothing} is outside [0, 1]")
    return Y if isinstance(Y, Tensor) else Tensor(Y)

  def _labels(self, Y: Tensor, axis: int, name: str) -> None:
    """Class-index targets must be integers shaped like the scores without their class axis (NN.LOSS.labels)."""
    if not dtypes.is_int(Y.dtype): raise SpecError("NN.LOSS.labels", f"{name}: labels must be integers, not "
                                                   f"{Y.dtype!r}")
    want = self.shape[:axis] + self.shape[axis + 1:]
    if Y.shape != want: raise SpecError("NN.LOSS.labels", f"{name}: labels of shape {Y.shape} for scores of shape "
                                        f"{self.shape} (want {want})")

  def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> Tensor:
    """Cross entropy of scores (..., C) (classes on the last axis) against integer labels (...)
    (NN.LOSS.sparse_categorical_crossentropy): -((1-ls) log_softmax[label] + ls mean(log_softmax)). Labels equal to
    ignore_index count nowhere: their loss is 0 and "mean" divides by the number of the others."""
    Y = Tensor._loss_checks(Y, reduction, label_smoothing)
    if self.ndim == 0: raise SpecError("NN.LOSS.labels", "scores need a class axis")
    self._labels(Y, self.ndim - 1, "sparse_categorical_crossentropy")
    logp = self.log_softmax(-1)
    per = self._smoothed_nll(logp, Y, self.ndim - 1, label_smoothing)
    keep = Y != ignore_index
    per = keep.where(per, 0.0)
    if reduction == "mean": return per.sum() / keep.sum().cast(per.dtype)
    return per._loss_reduce(reduction)

  @staticmethod
  def _smoothed_nll(logp: Tensor, Y: Tensor, axis: int, ls: float) -> Tensor:
    """-((1-ls) logp[label] + ls mean(logp)) along the class axis. The label's entry is picked with WHERE, not by a
    multiplication with a one-hot, so that -inf elsewhere in logp gives no 0 * inf = NaN."""
    picked = Y._class_mask(logp.shape[axis], axis).where(logp, 0.0).sum(axis)
    return -picked if ls == 0 else -((1 - ls) * picked + ls * logp.mean(axis))

  def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """torch's cross_entropy of scores with classes on axis 1 ((C,) unbatched: axis 0) (NN.LOSS.cross_entropy).
    Integer Y holds class indices (the scores' shape without the class axis); float Y holds class probabilities (the
    scores' shape), mixed with the uniform distribution by label_smoothing."""
    Y = Tensor._loss_checks(Y, reduction, label_smoothing)
    if self.ndim == 0: raise SpecError("NN.LOSS.labels", "scores need a class axis")
    axis = 1 if self.ndim > 1 else 0
    logp = self.log_softmax(axis)
    if dtypes.is_float(Y.dtype):
      if Y.shape != self.shape: raise SpecError("NN.LOSS.shape", f"cross_entropy: probabilities of shape {Y.shape}"
                                                f" for scores of shape {self.shape}")
      Y = Y * (1 - label_smoothing) + label_smoothing / self.shape[axis] if label_smoothing else Y
      return (-(logp * Y).sum(axis))._loss_reduce(reduction)
    self._labels(Y, axis, "cross_entropy")
    return Tensor._smoothed_nll(logp, Y, axis, label_smoothing)._loss_reduce(reduction)

  def nll_loss(self, Y, weight: Tensor | None = None, ignore_index: int | None = None,
               reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities with classes on axis 1 ((C,) unbatched: axis 0) against integer
    labels, each weighted by weight[label] (NN.LOSS.nll_loss). "mean" divides by the sum of the weights of the
    labels that are not ignore_index, as torch does."""
    Y = Tensor._loss_checks(Y, reduction)
    if self.ndim == 0: raise SpecError("NN.LOSS.labels", "log-probabilities need a class axis")
    axis = 1 if self.ndim > 1 else 0
    self._labels(Y, axis, "nll_loss")
    n = self.shape[axis]
    if weight is not None and weight.shape != (n,):
      raise SpecError("NN.LOSS.shape", f"nll_loss: weight of shape {weight.shape} for {n} classes")
    hit = Y._class_mask(n, axis)
    w = Tensor.ones(Y.shape, dtype=self.dtype, device=self.device) if weight is None else \
        hit.where(weight.cast(self.dtype).reshape(tuple(n if i == axis else 1 for i in range(self.ndim))), 0).sum(axis)
    per = -hit.where(self, 0.0).sum(axis) * w
    if ignore_index is not None:   # WHERE, not a zero weight: an ignored -inf must give 0, not 0 * inf = NaN
      keep = Y != ignore_index
      w, per = keep.where(w, 0.0), keep.where(per, 0.0)
    return per.sum() / w.sum() if reduction == "mean" else per._loss_reduce(reduction)

  def binary_crossentropy(self, Y, reduction: str = "mean") -> Tensor:
    """-(Y log x + (1-Y) log(1-x)) for probabilities x, each log clamped below at -100 as torch does, so x = 0 or 1
    gives a finite loss (NN.LOSS.binary_crossentropy)."""
    Y = Tensor._loss_checks(Y, reduction)
    if Y.shape != self.shape: raise SpecError("NN.LOSS.shape", f"binary_crossentropy: targets of shape {Y.shape} "
                                              f"for probabilities of shape {self.shape}")
    # torch: max(log(x), -100) and max(log1p(-x), -100). Where the log is -inf the value is -100 taken by WHERE, and
    # the log sees a harmless stand-in, so that its gradient is 0, not 0 * inf = NaN. NaN still propagates.
    has_log = (self <= 0).logical_not()
    log_x = has_log.where(has_log.where(self, 1.0).log().maximum(-100), -100.0)
    has_log1m = (self >= 1).logical_not()
    log_1mx = has_log1m.where(has_log1m.where(-self, 0.0)._log1p().maximum(-100), -100.0)
    return (-(Y * log_x + (1 - Y) * log_1mx))._loss_reduce(reduction)

  def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """binary_crossentropy of sigmoid(x), computed from the logits x without overflow as torch does:
    (1-Y) x + (1 + (pos_weight-1) Y) softplus(-x), softplus(z) = max(z, 0) + log1p(exp(-|z|))
    (NN.LOSS.binary_crossentropy_logits). pos_weight (broadcast along the last axis) weighs the positive term."""
    Y = Tensor._loss_checks(Y, reduction)
    if Y.shape != self.shape: raise SpecError("NN.LOSS.shape", f"binary_crossentropy_logits: targets of shape "
                                              f"{Y.shape} for logits of shape {self.shape}")
    scale = 1 if pos_weight is None else 1 + (pos_weight - 1) * Y
    return ((1 - Y) * self + scale * (-self)._softplus_stable())._loss_reduce(reduction)

  def _softplus_stable(self) -> Tensor:
    """log(1 + e**z) as max(z, 0) + log1p(e**-|z|), written with WHERE on z > 0 instead of relu and abs so that the
    gradient at z = 0 is sigmoid(0) = 1/2 (relu and abs each give 0 there, GRAD.CHECK.tensor)."""
    pos = self > 0
    return pos.where(self, 0.0) + pos.where(-self, self).exp()._log1p()

  def _log1p(self) -> Tensor:
    """log(1 + u) for u >= -1, accurate for small u: with w = 1 + u rounded, log(w) * u / (w - 1) corrects the
    rounding of w (Goldberg), and where w rounds to 1, log1p(u) = u to working precision. The divisor is replaced by 1
    where it is 0 so that the branch WHERE does not take has a finite gradient."""
    w = self + 1
    d = w - 1
    same = d == 0
    return same.where(self, w.log() * self / same.where(1.0, d))


# ------------------------------------------------------------------------------------------------------------


def _shape_arg(shape) -> tuple[int, ...]:
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = shape[0]
  return tuple(int(s) for s in shape)


def _axis(a: int, n: int) -> int:
  """A possibly negative axis number, checked against `n` axes."""
  if not -max(n, 1) <= a < max(n, 1): raise IndexError(f"axis {a} is out of range for {n} dims")
  return a % max(n, 1)


_BITS_INT = {1: dtypes.uint8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _tuple(x, n: int) -> tuple[int, ...]:
  return (int(x),) * n if isinstance(x, int) else tuple(int(v) for v in x)


def _conv_padding(padding, m: int) -> tuple[tuple[int, int], ...]:
  """Per spatial axis (before, after) from an int, m ints, or 2m ints in tinygrad's last-axis-first order."""
  if isinstance(padding, int): return ((padding, padding),) * m
  padding = tuple(int(p) for p in padding)
  if len(padding) == m: return tuple((p, p) for p in padding)
  if len(padding) == 2 * m: return tuple((padding[2 * i], padding[2 * i + 1]) for i in reversed(range(m)))
  raise ValueError(f"padding {padding} for {m} spatial axes")


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
  """numpy broadcasting: align right, size-1 axes stretch (DT-independent, UOP.EXPAND)."""
  n = max(len(a), len(b))
  a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
  out = []
  for x, y in zip(a, b):
    if x != y and 1 not in (x, y): raise SpecError("UOP.EXPAND", f"shapes {a} and {b} do not broadcast")
    out.append(y if x == 1 else x)
  return tuple(out)


def _to_numpy(data, dtype: DType | None) -> np.ndarray:
  if isinstance(data, np.generic): data = np.asarray(data)   # a numpy scalar keeps its numpy dtype, as an array
  if isinstance(data, np.ndarray):
    return data if dtype is None or dtype == dtypes.bfloat16 else data.astype(_NP[dtype])
  dt = dtype or dtypes.from_py(list(np.array(data, dtype=object).ravel()) if np.ndim(data) else data)
  if dt == dtypes.bfloat16: return np.array(data, dtype=np.float64)
  return np.array(data, dtype=_NP[dt])


def _from_numpy(arr: np.ndarray, dtype: DType | None, device: str) -> UOp:
  dt = dtype or _FROM_NP.get(arr.dtype)
  if dt is None: raise SpecError("DT.SCALARS", f"numpy dtype {arr.dtype} has no refimpl dtype")
  raw = _bf16_bits(arr) if dt == dtypes.bfloat16 else np.ascontiguousarray(arr, dtype=_NP[dt])
  node = new_buffer(dt, int(arr.size), device)
  buf = Device[device].alloc(int(arr.size), dt)
  Device[device].copyin(buf, raw.tobytes())
  buffers[node] = buf
  return node if arr.shape == (arr.size,) else UOp(Ops.RESHAPE, dt, (node,), tuple(arr.shape))


def _is_contiguous_buffer(u: UOp) -> bool:
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


def _strip_assign(u: UOp) -> UOp:
  """ASSIGN(BUFFER, KERNEL) -> BUFFER once the kernel has run (keeping a RESHAPE on top)."""
  if u.op is Ops.RESHAPE and u.src[0].op is Ops.ASSIGN: return UOp(Ops.RESHAPE, u.dtype, (u.src[0].src[0],), u.arg)
  return u.src[0] if u.op is Ops.ASSIGN else u


# GRAD.REALIZE: a realized tensor's graph is replaced by its buffer; for each buffer (as the tensor now holds it) that
# was computed from a tensor requiring gradients, the graph it replaced, so that differentiation can see through it.
# Entries die with the buffer node; an assign into the buffer drops them (the values are no longer that graph's).
_lineage: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


def _base_buffer(u: UOp) -> UOp | None:
  while u.op in (Ops.RESHAPE, Ops.ASSIGN): u = u.src[0]
  return u if u.op is Ops.BUFFER else None


def _record_lineage(ran: dict[UOp, UOp], graphs: dict[UOp, UOp]) -> None:
  written = {_base_buffer(g) for g in graphs.values() if g is not None}
  for key in [k for k in list(_lineage.keys()) if _base_buffer(k) in written]: del _lineage[key]
  leaves = {t.uop for t in list(Tensor._live) if t._requires_grad}
  if not leaves: return
  for root in graphs:
    if root.op is Ops.ASSIGN or root in leaves or root is ran[root]: continue
    if any(u in leaves or u in _lineage for u in root.toposort()): _lineage[ran[root]] = root


def _through_realized(root: UOp, targets: set[UOp]) -> tuple[UOp, dict[UOp, UOp]]:
  """`root` with every realized tensor that has a recorded lineage replaced by the graph that computed it,
  recursively (GRAD.REALIZE.after): the values are the same, and now gradients can flow. A target replaced so is
  marked by a CONTIGUOUS of its graph (a pass-through for gradients, GRAD.CONTIGUOUS): the second result maps such
  targets to their marker, whose cotangent is the target's."""
  memo: dict[UOp, UOp] = {}
  alias: dict[UOp, UOp] = {}
  def expand(u: UOp) -> UOp:
    if u not in memo:
      if u in _lineage:
        v = expand(_lineage[u])
        if u in targets: v = alias[u] = UOp(Ops.CONTIGUOUS, v.dtype, (v,))
        memo[u] = v
      else: memo[u] = u.replace(src=tuple(expand(s) for s in u.src)) if u.src else u
    return memo[u]
  return (expand(root), alias) if _lineage else (root, alias)


def _replace(mapping: dict[UOp, UOp]) -> None:
  """Every live tensor whose graph is a key now holds the value: identical tensors share results (seed 000). An
  ASSIGN key is replaced inside graphs as well (EXEC.SCHED.assign): a tensor built on a pending assign, such as
  `a.assign(x) * 2`, reads the written buffer afterwards instead of holding an assign that would run again."""
  effects = {k: v for k, v in mapping.items() if k.op is Ops.ASSIGN}
  memo: dict[UOp, UOp] = dict(effects)
  for t in list(Tensor._live):
    if t.uop in mapping: t.uop = mapping[t.uop]
    elif effects: t.uop = _substitute(t.uop, memo)


def _substitute(root: UOp, memo: dict[UOp, UOp]) -> UOp:
  """`root` with every node found in `memo` replaced by its value there (memo also caches the nodes it rebuilds).
  Iterative, as graphs can be deep. Inside a kernelized graph this makes a KERNEL that reads a write which has run
  read the buffer itself, which now holds that version, so the write is not run again."""
  stack = [root]
  while stack:
    u = stack[-1]
    if u in memo: stack.pop(); continue
    todo = [s for s in u.src if s not in memo]
    if todo: stack.extend(todo); continue
    stack.pop()
    src = tuple(memo[s] for s in u.src)
    memo[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
  return memo[root]
