"""The Tensor class itself: construction from Python and numpy data, autograd (spec/gradients.md), properties,
realize and reading values back, in-place assign, moving between devices, and the bookkeeping that keeps tensors
pointing at their realized buffers. The ops live in the family modules beside this one (refimpl/tensor/__init__.py
attaches them). Python scalars become CONSTs; broadcasting is explicit RESHAPE/EXPAND; dtypes follow the promotion
rules of spec/dtypes.md (DT.PROMOTE, DT.SCALAR-PROMOTE)."""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from refimpl.device import Device
from refimpl.dtype import DType, DTypeLike, dtypes, to_dtype
from refimpl.engine.realize import buffers, run_kernels
from refimpl.engine.schedule import ScheduleItem, kernelize, new_buffer, schedule
from refimpl.helpers import SpecRuntimeError, SpecTypeError
from refimpl.uop import Ops
from refimpl.uop.ops import UOp
from refimpl.tensor import validate

_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
       dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
       dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32,
       dtypes.float64: np.float64}
_FROM_NP = {np.dtype(v): k for k, v in _NP.items() if k != dtypes.bfloat16}

# UOP.HASHCONS.threads: tensors may be made in one thread while another realizes, and realizing walks every live
# tensor. A WeakSet raises "Set changed size during iteration" when another thread adds to it mid-walk, so adds and
# walks share this lock; the garbage collector's removals cannot take it (a collection may run while this thread
# holds it) and the WeakSet defers them during a walk, except in a window of a few bytecodes, which the retry covers.
_live_lock = threading.RLock()


def live_tensors() -> list[Tensor]:
  """A snapshot of every Tensor object that is still alive."""
  while True:
    with _live_lock:
      try: return list(Tensor._live)
      except RuntimeError: continue   # a collection removed a dead tensor mid-walk (see _live_lock)


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


class _Slot:
  """An instance attribute that the class names too (TENSOR.SLOTS): `Tensor.grad` and `Tensor.uop` exist, as
  tinygrad's __slots__ make them, and each instance sets its own (a non-data descriptor: the instance's value wins)."""
  def __set_name__(self, owner, name: str): self.name = name
  def __get__(self, obj, objtype=None):
    if obj is None: return self
    raise AttributeError(f"this Tensor has no {self.name} yet")
  def __repr__(self) -> str: return f"<slot {self.name!r} of Tensor>"


class Tensor(metaclass=_TensorType):
  """A lazy multi-dimensional array: `uop` is the graph that computes it."""
  uop = _Slot()    # TENSOR.SLOTS: the graph; set by __init__
  grad = _Slot()   # TENSOR.SLOTS: the gradient backward() accumulates (GRAD.ACCUM); set to None by __init__
  _live: weakref.WeakSet = weakref.WeakSet()
  training = _Switch(False)
  no_grad = _Switch(False)   # GRAD.NOGRAD: results made while set get requires_grad=False

  def __init__(self, data, device: str | None = None, dtype: DTypeLike | None = None,
               requires_grad: bool | None = None):
    device = validate.device(device) if device is not None else Device.DEFAULT
    dtype = to_dtype(dtype) if dtype is not None else None
    if isinstance(data, UOp):
      # GRAD.NOGRAD: a result computed under no_grad is a constant to backward(), even if a source requires gradients
      uop = data if not Tensor.no_grad or requires_grad is not None or data.op is Ops.DETACH else \
        UOp(Ops.DETACH, data.dtype, (data,))
    elif isinstance(data, (bool, int, float)):
      if isinstance(data, int) and not isinstance(data, bool) and not dtypes.is_float(dtype or dtypes.int64):
        validate.python_int(data, inferred=dtype is None)   # API.ARGS.int-range
      uop = UOp.const(dtype or dtypes.from_py(data), data, device)
    elif isinstance(data, (list, tuple, np.ndarray)) or np.isscalar(data):
      if isinstance(data, (list, tuple)) and not dtypes.is_float(dtype or dtypes.int64):
        validate.ints_in_data(data, dtype is None)
      uop = _from_numpy(_to_numpy(data, dtype), dtype, device)
    else: raise SpecTypeError("API.ARGS.data", f"Tensor: cannot build from {type(data).__name__}")
    self.uop: UOp = uop
    # GRAD.NOGRAD: under no_grad, new tensors refuse gradients unless asked for explicitly
    self.requires_grad = False if requires_grad is None and Tensor.no_grad else requires_grad
    self.grad: Tensor | None = None
    with _live_lock: Tensor._live.add(self)

  # ---- autograd (spec/gradients.md) ----
  @property
  def requires_grad(self) -> bool | None:
    """True (backward() fills .grad of a leaf), False, or None (undecided); only float tensors can require gradients.
    A tensor computed from one that requires gradients requires them too (GRAD.NOGRAD), unless made under no_grad."""
    if self._requires_grad is not None: return self._requires_grad
    leaves = {t.uop for t in live_tensors() if t._requires_grad}
    return True if leaves and any(u in leaves for u in self.uop.toposort()) else None
  @requires_grad.setter
  def requires_grad(self, value: bool | None) -> None:
    if value and not dtypes.is_float(self.dtype):
      raise SpecTypeError("GRAD.DTYPE", f"only float tensors can require gradients, this one is {self.dtype!r}")
    if value and self._shares_identity():   # the old graph is detached: the new leaf passes no gradient into it
      self.uop = UOp(Ops.ASSIGN, self.dtype, (self._fresh_buffer(), UOp(Ops.DETACH, self.dtype, (self.uop,))))
    self._requires_grad = value

  def _shares_identity(self) -> bool:
    """GRAD.LEAF.identity: whether this tensor's graph could be another tensor's too. Autograd tells leaves apart
    by their UOp, and hash-consing makes equal graphs one UOp: two `Tensor.zeros(3)` are the same node, and realized
    together they are one buffer. A graph without a BUFFER (a constant) or one another live tensor holds is shared."""
    if getattr(self, "_requires_grad", None): return False   # already a leaf of its own
    if not any(u.op is Ops.BUFFER for u in self.uop.toposort()): return True
    return any(t is not self and t.uop is self.uop for t in live_tensors())

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
      raise SpecTypeError("GRAD.DTYPE", f"cannot differentiate a tensor of {self.dtype!r}, only floats have gradients")
    if gradient is None:
      if self.numel() != 1:
        raise SpecRuntimeError("GRAD.SCALAR",
                               f"a gradient can be implied only for one-element tensors, this one has shape "
                        f"{self.shape}: pass gradient=")
      return Tensor.full(self.shape, 1.0, dtype=self.dtype, device=self.device).uop
    g = gradient if isinstance(gradient, Tensor) else Tensor(gradient, device=self.device)
    if g.shape != self.shape:
      raise SpecRuntimeError("GRAD.SCALAR", f"gradient of shape {g.shape} for a tensor of shape {self.shape}")
    if not dtypes.is_float(g.dtype): raise SpecTypeError("GRAD.DTYPE", f"gradient of dtype {g.dtype!r} is not a float")
    return g.cast(self.dtype).uop

  def gradient(self, *targets: Tensor, gradient=None) -> list[Tensor]:
    """The derivative of this tensor with respect to each target, contracted with `gradient` (GRAD.MODEL); a graph,
    nothing runs. A target this tensor does not depend on gets zeros. `.grad` is not touched."""
    from refimpl.gradient import compute_gradient
    for t in targets:
      if not dtypes.is_float(t.dtype): raise SpecTypeError("GRAD.DTYPE",
                                                           f"a target of dtype {t.dtype!r} has no gradient")
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
    candidates = [t for t in live_tensors() if t._requires_grad]   # leaves: requires_grad set on the tensor itself
    root, alias = _through_realized(self.uop, {t.uop for t in candidates})
    graph = set(root.toposort())
    leaves = [t for t in candidates if alias.get(t.uop, t.uop) in graph]
    if not leaves: raise SpecRuntimeError("GRAD.NOGRAD", "backward() on a tensor that depends on no tensor with "
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
    if not self.shape: raise SpecTypeError("API.ARGS.bool", "len() of a 0-d tensor")
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

  def realize(self, *others: Tensor, do_update_stats: bool = True) -> Tensor:
    """Run the kernels that compute this tensor (and `others`) as one schedule; afterwards its uop is a BUFFER (or a
    view of one). Pending assigns run here (EXEC.SCHED.assign), reading old values as EXEC.SCHED.versions says.
    `do_update_stats` is accepted for tinygrad's signature; refimpl keeps no run statistics (TENSOR.REALIZE)."""
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
    if self.numel() != 1:
      raise SpecRuntimeError("API.ARGS.bool", f"item() needs one element, the tensor has {self.numel()}")
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
      raise SpecRuntimeError("EXEC.SCHED.assign",
                             f"assign of a tensor on {x.device} to one on {self.device}: move it first")
    if x.dtype != self.dtype:
      raise SpecRuntimeError("EXEC.SCHED.assign",
                             f"assign of {x.dtype!r} values to a {self.dtype!r} tensor: cast them first")
    if x.shape != self.shape:
      if len(x.shape) > self.ndim or any(n not in (1, m) for n, m in zip(x.shape[::-1], self.shape[::-1])):
        raise SpecRuntimeError("EXEC.SCHED.assign", f"assign of shape {x.shape} to a tensor of shape {self.shape}")
      x = x._expand_to(self.shape)
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self._assign_target(), x.uop))
    return self

  def _assign_target(self) -> UOp:
    """This tensor's graph as an assign target: a BUFFER or an assign to one (pending or kernelized), under RESHAPEs
    only."""
    u = self.uop
    while u.op is Ops.RESHAPE: u = u.src[0]
    if u.op is Ops.BUFFER and any(t is not self and t.uop is self.uop for t in live_tensors()):
      # EXEC.SCHED.cow: hash-consing gave equal values one buffer (two Tensor.zeros(3) realized together); writing
      # into it would change the other tensors too, so this tensor gets a buffer of its own first
      return self._fresh_buffer()
    if u.op in (Ops.BUFFER, Ops.ASSIGN): return self.uop
    v = u
    while v.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.DETACH): v = v.src[0]
    if v is not u and v.op in (Ops.BUFFER, Ops.ASSIGN):
      raise SpecRuntimeError("EXEC.SCHED.target",
                             f"cannot assign to a {u.op.name} view of a buffer: writing through views "
                      "is not supported; assign to the whole tensor (or realize the view into a buffer of its own)")
    # a lazy value: the assign gives it a fresh buffer of its own. The old value need not be computed: `x` reads it
    # through its own graph if at all, and a realize of it would make identical lazy tensors share (alias) the buffer
    return Tensor.empty(*self.shape, dtype=self.dtype, device=self.device).uop

  # ---- moving between devices (UOP.COPY) ----
  def to(self, device: str | None) -> Tensor:
    """This tensor's values on `device` (None: Device.DEFAULT), lazily (UOP.COPY.to): self when it is already there,
    else a new tensor whose graph is COPY(self, DEVICE), which realize runs as a copy step (EXEC.SCHED.copy). It is
    differentiable: the cotangent goes back to this tensor's device (GRAD.COPY)."""
    device = validate.device(device) if device is not None else Device.DEFAULT
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


  def _mov(self, op: Ops, arg) -> Tensor: return Tensor(UOp(op, self.dtype, (self.uop,), arg))


def _to_numpy(data, dtype: DType | None) -> np.ndarray:
  if isinstance(data, np.generic): data = np.asarray(data)   # a numpy scalar keeps its numpy dtype, as an array
  if isinstance(data, np.ndarray):
    return data if dtype is None or dtype == dtypes.bfloat16 else data.astype(_NP[dtype])
  dt = dtype or dtypes.from_py(list(np.array(data, dtype=object).ravel()) if np.ndim(data) else data)
  if dt == dtypes.bfloat16: return np.array(data, dtype=np.float64)
  try: return np.array(data, dtype=_NP[dt])
  except OverflowError:   # DT.CONST: an int inside [-2**63, 2**64) (API.ARGS.int-range) wraps into the int type
    obj = np.array(data, dtype=object)
    return np.array([dtypes.as_const(v, dt) for v in obj.ravel()], dtype=_NP[dt]).reshape(obj.shape)


def _from_numpy(arr: np.ndarray, dtype: DType | None, device: str) -> UOp:
  dt = dtype or _FROM_NP.get(arr.dtype)
  if dt is None: raise SpecTypeError("DT.SCALARS", f"numpy dtype {arr.dtype} has no refimpl dtype")
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
  leaves = {t.uop for t in live_tensors() if t._requires_grad}
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
  for t in live_tensors():
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
