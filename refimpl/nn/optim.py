"""refimpl.nn.optim: optimizers with tinygrad's names, arguments and defaults (spec/optim.md).

An optimizer holds its parameters and its state (momentum, moments) as realized tensors. `step()` builds each
update as a lazy graph from the parameters' `.grad`, assigns the results in place (Tensor.assign, EXEC.SCHED.assign)
and runs everything as one schedule, so the gradient computation fuses into the update kernels."""
from __future__ import annotations

from refimpl.dtype import DType, dtypes, least_upper_dtype
from refimpl.helpers import SpecError
from refimpl.tensor import Tensor

__all__ = ["Optimizer", "SGD", "LAMB", "Adam", "AdamW"]


class Optimizer:
  """The base class (OPTIM.PARAMS): `params` are the tensors it trains (those whose requires_grad is True after
  undecided float tensors are switched on), `buffers` the others it was given (they are realized with every step),
  `lr` the learning rate as a tensor (OPTIM.LR). Subclasses implement `_step`."""

  def __init__(self, params: list[Tensor], lr: float | Tensor):
    for t in params:   # OPTIM.PARAMS: an undecided float tensor put into an optimizer is trained
      if t.requires_grad is None and dtypes.is_float(t.dtype): t.requires_grad = True
    self.params: list[Tensor] = _dedup([t for t in params if t.requires_grad])
    self.buffers: list[Tensor] = _dedup([t for t in params if not t.requires_grad])
    if not self.params: raise SpecError("OPTIM.PARAMS", "an optimizer needs at least one tensor that requires grad")
    self.device = self.params[0].device
    if isinstance(lr, Tensor):
      if lr.numel() != 1: raise SpecError("OPTIM.LR", f"a tensor learning rate has one element, not shape {lr.shape}")
      self.lr = lr
    else: self.lr = Tensor([lr], device=self.device, dtype=dtypes.float32, requires_grad=False)
    self._state: list[Tensor] = []
    Tensor.realize(*self.params, *self.buffers)   # so that assign writes into their own buffers (EXEC.SCHED.target)

  def _new_state(self, t: Tensor, value: float = 0.0, shape: tuple[int, ...] | None = None) -> Tensor:
    """A realized state tensor of `t`'s shape (or `shape`), filled with `value`, in `_state_dtype(t)`."""
    s = Tensor.full(t.shape if shape is None else shape, value, dtype=_state_dtype(t.dtype), device=t.device)
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
      raise SpecError("OPTIM.STEP", f"parameter {i} (shape {self.params[i].shape}) has no .grad, nor do "
                      f"{len(missing) - 1} more: call backward() on a loss that depends on every parameter first")
    lr = self.lr.reshape(())
    with Tensor.no_grad:   # OPTIM.STEP: the update is no part of any gradient graph (GRAD.NOGRAD)
      new = self._step(lr, [t.grad for t in self.params])
      for t, n in zip(self.params, new): t.assign(n.cast(t.dtype))
    return [*self.params, *self._state, *self.buffers]

  def _step(self, lr: Tensor, grads: list[Tensor]) -> list[Tensor]:
    """The new value of each parameter (state tensors are assigned here too)."""
    raise NotImplementedError


class SGD(Optimizer):
  """Stochastic gradient descent with optional weight decay, momentum, Nesterov momentum and tinygrad's `classic`
  momentum, which applies the learning rate before the momentum buffer instead of after (OPTIM.SGD)."""

  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.0,
               weight_decay: float = 0.0, nesterov: bool = False, classic: bool = False):
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
    self.b = [self._new_state(t) for t in self.params] if momentum else []

  def _step(self, lr: Tensor, grads: list[Tensor]) -> list[Tensor]:
    new = []
    for i, (t, g) in enumerate(zip(self.params, grads)):
      if self.wd: g = g + self.wd * t                        # OPTIM.SGD.weight_decay
      if self.classic: g = g * lr                            # OPTIM.SGD.classic
      if self.momentum:                                      # OPTIM.SGD.momentum
        b = self.b[i].assign((self.momentum * self.b[i] + g).cast(self.b[i].dtype))
        g = g + self.momentum * b if self.nesterov else b    # OPTIM.SGD.nesterov
      new.append(t - g if self.classic else t - g * lr)
    return new


class LAMB(Optimizer):
  """Adam's moment estimates with decoupled weight decay and, unless `adam`, the layer-wise trust ratio
  ||param|| / ||update|| (OPTIM.LAMB). With adam=True it is AdamW (OPTIM.ADAMW), and with `l2` instead of
  weight_decay it is Adam with L2 regularisation as torch's Adam does it (OPTIM.ADAM)."""

  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False, l2: float = 0.0):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam, self.l2 = b1, b2, eps, weight_decay, adam, l2
    # OPTIM.ADAM.bias: the bias corrections 1 - b1^t and 1 - b2^t, kept as state like the moments
    self.bias_correction1, self.bias_correction2 = (self._new_state(self.params[0], shape=()) for _ in range(2))
    self.m = [self._new_state(t) for t in self.params]
    self.v = [self._new_state(t) for t in self.params]

  def _step(self, lr: Tensor, grads: list[Tensor]) -> list[Tensor]:
    # OPTIM.ADAM.bias: 1 - b^t = b * (1 - b^(t-1)) + (1 - b), which never subtracts two numbers close to 1
    c1 = self.bias_correction1.assign(self.b1 * self.bias_correction1 + (1.0 - self.b1))
    c2 = self.bias_correction2.assign(self.b2 * self.bias_correction2 + (1.0 - self.b2))
    new = []
    for t, g, m, v in zip(self.params, grads, self.m, self.v):
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
         weight_decay: float = 0.0) -> LAMB:
  """Adam (OPTIM.ADAM); weight_decay adds weight_decay * param to the gradient, as torch's Adam does."""
  return LAMB(params, lr, b1, b2, eps, adam=True, l2=weight_decay)


def AdamW(params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01) -> LAMB:
  """Adam with decoupled weight decay (OPTIM.ADAMW)."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)


def _state_dtype(dtype: DType) -> DType:
  """State is kept in at least float32 (OPTIM.PARAMS): float64 parameters keep float64 state."""
  return least_upper_dtype(dtype, dtypes.float32)


def _dedup(ts: list[Tensor]) -> list[Tensor]:
  """Each tensor once, by identity, in first-seen order."""
  return list({id(t): t for t in ts}.values())
