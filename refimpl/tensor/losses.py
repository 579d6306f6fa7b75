"""Losses (spec/nn.md, NN.LOSS): `self` holds scores, log-probabilities or probabilities; Y the targets."""
from __future__ import annotations



from refimpl.dtype import dtypes
from refimpl.helpers import SpecRuntimeError, SpecTypeError, SpecValueError
from refimpl.tensor.checked import check_index_range, checked_indices
from refimpl.tensor.core import Tensor


class LossOps:
  # losses (NN.LOSS): `self` holds scores, log-probabilities or probabilities; Y the targets
  def _loss_reduce(self, reduction: str) -> Tensor:
    if reduction == "none": return self
    if reduction == "sum": return self.sum()
    if reduction == "mean": return self.mean()
    raise SpecValueError("NN.LOSS.reduction", f"reduction={reduction!r} is not one of 'none', 'sum', 'mean'")

  @staticmethod
  def _loss_checks(Y, reduction: str, label_smoothing: float = 0.0) -> Tensor:
    if reduction not in ("none", "sum", "mean"):
      raise SpecValueError("NN.LOSS.reduction", f"reduction={reduction!r} is not one of 'none', 'sum', 'mean'")
    if not 0.0 <= label_smoothing <= 1.0:
      raise SpecValueError("NN.LOSS.smoothing", f"label_smoothing={label_smoothing} is outside [0, 1]")
    return Y if isinstance(Y, Tensor) else Tensor(Y)

  def _labels(self, Y: Tensor, axis: int, name: str, ignore: int | None = None) -> None:
    """Class-index targets must be integers shaped like the scores without their class axis (NN.LOSS.labels); with
    CHECK_INDEX=1 each one not `ignore` lies in [0, C) (NN.LOSS.labels.range, API.INDEX.checked)."""
    if not dtypes.is_int(Y.dtype): raise SpecTypeError("NN.LOSS.labels", f"{name}: labels must be integers, not "
                                                   f"{Y.dtype!r}")
    want = self.shape[:axis] + self.shape[axis + 1:]
    if Y.shape != want: raise SpecRuntimeError("NN.LOSS.labels",
                                               f"{name}: labels of shape {Y.shape} for scores of shape "
                                        f"{self.shape} (want {want})")
    if checked_indices():
      check_index_range(Y, self.shape[axis], "NN.LOSS.labels.range", f"{name}: label", ignore=ignore)

  def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> Tensor:
    """Cross entropy of scores (..., C) (classes on the last axis) against integer labels (...)
    (NN.LOSS.sparse_categorical_crossentropy): -((1-ls) log_softmax[label] + ls mean(log_softmax)). Labels equal to
    ignore_index count nowhere: their loss is 0 and "mean" divides by the number of the others."""
    Y = Tensor._loss_checks(Y, reduction, label_smoothing)
    if self.ndim == 0: raise SpecValueError("NN.LOSS.labels", "scores need a class axis")
    self._labels(Y, self.ndim - 1, "sparse_categorical_crossentropy", ignore_index)
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
    if self.ndim == 0: raise SpecValueError("NN.LOSS.labels", "scores need a class axis")
    axis = 1 if self.ndim > 1 else 0
    logp = self.log_softmax(axis)
    if dtypes.is_float(Y.dtype):
      if Y.shape != self.shape: raise SpecRuntimeError("NN.LOSS.shape",
                                                       f"cross_entropy: probabilities of shape {Y.shape}"
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
    if self.ndim == 0: raise SpecValueError("NN.LOSS.labels", "log-probabilities need a class axis")
    axis = 1 if self.ndim > 1 else 0
    self._labels(Y, axis, "nll_loss", ignore_index)
    n = self.shape[axis]
    if weight is not None and weight.shape != (n,):
      raise SpecRuntimeError("NN.LOSS.shape", f"nll_loss: weight of shape {weight.shape} for {n} classes")
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
    if Y.shape != self.shape: raise SpecRuntimeError("NN.LOSS.shape",
                                                     f"binary_crossentropy: targets of shape {Y.shape} "
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
    if Y.shape != self.shape: raise SpecRuntimeError("NN.LOSS.shape", f"binary_crossentropy_logits: targets of shape "
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
