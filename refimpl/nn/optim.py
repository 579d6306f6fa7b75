"""refimpl.nn.optim: optimizers with tinygrad's names, arguments and defaults (spec/optim.md).

An optimizer holds its parameters and its state (momentum, moments) as realized tensors. `step()` builds each
update as a lazy graph from the parameters' `.grad`, assigns the results in place (Tensor.assign, EXEC.SCHED.assign)
and runs everything as one schedule, so the gradient computation fuses into the update kernels. `fused=True` (tinygrad
concatenates all parameters into one buffer so the update is one kernel) is accepted and computes the same values
per parameter (OPTIM.FUSED)."""
from __future__ import annotations

from refimpl.device import Device
from refimpl.dtype import DType, dtypes, least_upper_dtype
from refimpl.helpers import SpecRuntimeError, SpecValueError
from refimpl.tensor import Tensor

__all__ = ["Optimizer", "OptimizerGroup", "SGD", "LARS", "Muon", "LAMB", "Adam", "AdamW"]


class Optimizer:
  """The base class (OPTIM.PARAMS): `params` are the tensors it trains (those whose requires_grad is True after
  undecided float tensors are switched on), `buffers` the others it was given (they are realized with every step),
  `lr` the learning rate as a tensor (OPTIM.LR), `device` where the state lives and the update is computed
  (OPTIM.DEVICE), `fused` tinygrad's one-kernel update, which changes no value here (OPTIM.FUSED). Subclasses
  implement `_step`."""

  def __init__(self, params: list[Tensor], lr: float | Tensor, device: str | None = None, fused: bool = False):
    for t in params:   # OPTIM.PARAMS: an undecided float tensor put into an optimizer is trained
      if t.requires_grad is None and dtypes.is_float(t.dtype): t.requires_grad = True
    self.params: list[Tensor] = _dedup([t for t in params if t.requires_grad])
    self.buffers: list[Tensor] = _dedup([t for t in params if not t.requires_grad])
    if not self.params: raise SpecValueError("OPTIM.PARAMS",
                                             "an optimizer needs at least one tensor that requires grad")
    self.device = Device.canonicalize(device) if device is not None else self.params[0].device   # OPTIM.DEVICE
    self.fused = bool(fused)   # OPTIM.FUSED: recorded; the update is computed per parameter either way
    if isinstance(lr, Tensor):
      if lr.numel() != 1: raise SpecValueError("OPTIM.LR",
                                               f"a tensor learning rate has one element, not shape {lr.shape}")
      self.lr = lr
    else:
      if not lr >= 0: raise SpecValueError("OPTIM.LR", f"the learning rate must be >= 0, got {lr}")
      self.lr = Tensor([lr], device=self.device, dtype=dtypes.float32, requires_grad=False)
    self._state: list[Tensor] = []
    Tensor.realize(*self.params, *self.buffers)   # so that assign writes into their own buffers (EXEC.SCHED.target)

  def _new_state(self, t: Tensor, value: float = 0.0, shape: tuple[int, ...] | None = None) -> Tensor:
    """A realized state tensor of `t`'s shape (or `shape`) on the optimizer's device, filled with `value`, in
    `_state_dtype(t)`."""
    s = Tensor.full(t.shape if shape is None else shape, value, dtype=_state_dtype(t.dtype), device=self.device)
    s = s.contiguous().realize()
    s.requires_grad = False
    self._state.append(s)
    return s

  def zero_grad(self) -> None:
    """Forget the gradients of all parameters (OPTIM.ZERO_GRAD): backward() then starts afresh."""
    for t in self.params: t.grad = None

  def step(self) -> None:
    """One update of every parameter from its `.grad` (OPTIM.STEP), run as one schedule."""
    Tensor.realize(*self.schedule_step())

  def schedule_step(self) -> list[Tensor]:
    """Build the update without running it: assigns every parameter and state tensor (OPTIM.STEP) and returns the
    tensors to realize (parameters, state, buffers)."""
    missing = [i for i, t in enumerate(self.params) if t.grad is None]
    if missing:
      i = missing[0]
      raise SpecRuntimeError("OPTIM.STEP", f"parameter {i} (shape {self.params[i].shape}) has no .grad, nor do "
                      f"{len(missing) - 1} more: call backward() on a loss that depends on every parameter first")
    with Tensor.no_grad:   # OPTIM.STEP: the update is no part of any gradient graph (GRAD.NOGRAD)
      # OPTIM.DEVICE: parameters and gradients are read on the optimizer's device, new values go back to theirs
      lr, params = _on(self.lr.reshape(()), self.device), _on(self.params, self.device)
      grads = _on([t.grad for t in self.params], self.device)
      new = self._step(lr, params, grads)
      for t, n in zip(self.params, new): t.assign(_on(n.cast(t.dtype), t.device))
    return [*self.params, *self._state, *self.buffers]

  def _step(self, lr: Tensor, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
    """The new value of each parameter, from the parameters and gradients on the optimizer's device (state
    tensors are assigned here too)."""
    raise NotImplementedError


class OptimizerGroup(Optimizer):
  """Several optimizers stepped as one (OPTIM.GROUP): `params` and `buffers` are theirs in order, `zero_grad()` and
  `schedule_step()` call each one's, `step()` realizes all their updates in one schedule, `group[i]` is the i-th."""

  def __init__(self, *optimizers: Optimizer):   # no Optimizer.__init__: the members own the parameters and state
    self.optimizers = optimizers
    self.params = [t for o in optimizers for t in o.params]
    self.buffers = [t for o in optimizers for t in o.buffers]

  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]

  def zero_grad(self) -> None:
    """zero_grad() of every member (OPTIM.GROUP)."""
    for o in self.optimizers: o.zero_grad()

  def schedule_step(self) -> list[Tensor]:
    """Every member's schedule_step(), in order, as one list (OPTIM.GROUP)."""
    return [t for o in self.optimizers for t in o.schedule_step()]


class LARS(Optimizer):
  """Layer-wise adaptive rate scaling (OPTIM.LARS): SGD with momentum whose step is scaled per parameter tensor by
  the trust ratio tcoef * ||p|| / (||g|| + weight_decay * ||p||). With tcoef=0 it is SGD (OPTIM.SGD); with
  ns_coefficients it orthogonalizes each update with Tensor.newton_schulz and is Muon (OPTIM.MUON)."""

  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.9,
               weight_decay: float = 1e-4, ns_steps: int = 0, ns_coefficients: tuple[float, ...] | None = None,
               nesterov: bool = False, classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001,
               device: str | None = None, fused: bool = False):
    if not momentum >= 0: raise SpecValueError("OPTIM.LARS", f"momentum must be >= 0, got {momentum}")
    super().__init__(params, lr, device, fused)
    if ns_coefficients and any(t.ndim == 0 for t in self.params):
      raise SpecValueError("OPTIM.MUON", "Newton-Schulz needs parameters of at least one dimension, got a 0-d one")
    self.momentum, self.wd, self.ns_steps, self.ns_coefficients = momentum, weight_decay, ns_steps, ns_coefficients
    self.nesterov, self.classic, self.pre_wd, self.tcoef = nesterov, classic, pre_wd, tcoef
    self.b = [self._new_state(t) for t in self.params] if momentum else []

  def _step(self, lr: Tensor, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
    new = []
    for i, (t, g) in enumerate(zip(params, grads)):
      r: Tensor | float = 1.0
      if self.tcoef != 0:                                    # OPTIM.LARS.trust: from the gradient before decay
        r1, r2 = (t * t).sum().sqrt(), (g * g).sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(self.tcoef * r1 / (r2 + self.wd * r1), 1.0), 1.0)
      if self.pre_wd and self.wd: g = g + self.wd * t        # OPTIM.SGD.weight_decay
      if self.classic: g = _scaled(g, r, lr)                 # OPTIM.SGD.classic
      if self.momentum:                                      # OPTIM.SGD.momentum
        b = self.b[i].assign((self.momentum * self.b[i] + g).cast(self.b[i].dtype))
        g = g + self.momentum * b if self.nesterov else b    # OPTIM.SGD.nesterov
      if self.ns_coefficients:                               # OPTIM.MUON: per parameter, as a matrix (rows, rest)
        g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients).reshape(g.shape)
      if not self.classic: g = _scaled(g, r, lr)
      # OPTIM.MUON.weight_decay: after the momentum; lr * t first, so a float64 parameter's decay is not rounded to
      # the float32 of the lr tensor (tinygrad's wd * lr is)
      if not self.pre_wd and self.wd: g = g + (t * lr) * self.wd
      new.append(t - g)
    return new


def SGD(params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False, classic: bool = False, device: str | None = None, fused: bool = False) -> LARS:
  """Stochastic gradient descent with optional weight decay, momentum, Nesterov momentum and tinygrad's `classic`
  momentum, which applies the learning rate before the momentum buffer instead of after (OPTIM.SGD): LARS without
  the trust ratio, as tinygrad builds it."""
  return LARS(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True, tcoef=0.0,
              device=device, fused=fused)


def Muon(params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.95, weight_decay: float = 0.1,
         ns_steps: int = 5, ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True,
         device: str | None = None, fused: bool = False) -> LARS:
  """Muon (OPTIM.MUON): SGD momentum (Nesterov by default) whose update is orthogonalized by `ns_steps` Newton-Schulz
  iterations (Tensor.newton_schulz) per parameter, with weight decay added after the momentum. `fused=True` is
  refused, as in tinygrad: the iteration acts on each parameter's matrix, not on all parameters joined."""
  if fused: raise SpecValueError("OPTIM.MUON",
                                 "fused=True is not allowed: Newton-Schulz acts on each parameter's matrix")
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False,
              tcoef=0.0, device=device, fused=fused)


class LAMB(Optimizer):
  """Adam's moment estimates with decoupled weight decay and, unless `adam`, the layer-wise trust ratio
  ||param|| / ||update|| (OPTIM.LAMB). With adam=True it is AdamW (OPTIM.ADAMW), and with `l2` instead of
  weight_decay it is Adam with L2 regularisation as torch's Adam does it (OPTIM.ADAM)."""

  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False, l2: float = 0.0,
               device: str | None = None, fused: bool = False):
    if not weight_decay >= 0: raise SpecValueError("OPTIM.LAMB", f"weight_decay must be >= 0, got {weight_decay}")
    super().__init__(params, lr, device, fused)
    self.b1, self.b2, self.eps, self.wd, self.adam, self.l2 = b1, b2, eps, weight_decay, adam, l2
    # OPTIM.ADAM.bias: the bias corrections 1 - b1^t and 1 - b2^t, kept as state like the moments
    self.bias_correction1, self.bias_correction2 = (self._new_state(self.params[0], shape=()) for _ in range(2))
    self.m = [self._new_state(t) for t in self.params]
    self.v = [self._new_state(t) for t in self.params]

  def _step(self, lr: Tensor, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
    # OPTIM.ADAM.bias: 1 - b^t = b * (1 - b^(t-1)) + (1 - b), which never subtracts two numbers close to 1
    c1 = self.bias_correction1.assign(self.b1 * self.bias_correction1 + (1.0 - self.b1))
    c2 = self.bias_correction2.assign(self.b2 * self.bias_correction2 + (1.0 - self.b2))
    new = []
    for t, g, m, v in zip(params, grads, self.m, self.v):
      if self.l2: g = g + self.l2 * t                                      # OPTIM.ADAM.weight_decay
      m.assign((self.b1 * m + (1.0 - self.b1) * g).cast(m.dtype))          # OPTIM.ADAM
      v.assign((self.b2 * v + (1.0 - self.b2) * (g * g)).cast(v.dtype))
      up = (m / c1) / ((v / c2).sqrt() + self.eps)
      if self.wd: up = up + self.wd * t                                    # OPTIM.ADAMW
      if not self.adam:                                                    # OPTIM.LAMB
        r1, r2 = (t * t).sum().sqrt(), (up * up).sum().sqrt()
        up = up * (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0)
      new.append(t - lr * up)
    return new


def Adam(params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0, device: str | None = None, fused: bool = False) -> LAMB:
  """Adam (OPTIM.ADAM); weight_decay adds weight_decay * param to the gradient, as torch's Adam does."""
  return LAMB(params, lr, b1, b2, eps, adam=True, l2=weight_decay, device=device, fused=fused)


def AdamW(params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01, device: str | None = None, fused: bool = False) -> LAMB:
  """Adam with decoupled weight decay (OPTIM.ADAMW)."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device, fused=fused)


def _state_dtype(dtype: DType) -> DType:
  """State is kept in at least float32 (OPTIM.PARAMS): float64 parameters keep float64 state."""
  return least_upper_dtype(dtype, dtypes.float32)


def _scaled(g: Tensor, r: Tensor | float, lr: Tensor) -> Tensor:
  """g * r * lr, without a multiplication by a trust ratio of exactly 1 (OPTIM.LARS.trust with tcoef=0)."""
  return g * lr if isinstance(r, float) and r == 1.0 else g * r * lr


def _on(t, device: str):
  """A tensor (or each of a list) on `device`: itself if it is there, else a copy (OPTIM.DEVICE)."""
  if isinstance(t, list): return [_on(x, device) for x in t]
  return t if t.device == device else t.to(device)


def _dedup(ts: list[Tensor]) -> list[Tensor]:
  """Each tensor once, by identity, in first-seen order."""
  return list({id(t): t for t in ts}.values())
