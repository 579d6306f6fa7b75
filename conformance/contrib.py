"""The decorator API for contributed ops, graded by `python -m conformance grade path/to/ops.py`.

A contribution is a Python file whose functions implement new ops with refimpl's Tensor API, each declared with
`@op`: its name, its torch reference (an expression over torch tensors named like the function's parameters, with
`torch` and `F` = torch.nn.functional in scope), its input domain, and whether it is differentiable:

    from conformance import contrib

    @contrib.op("softsign", torch="x / (1 + x.abs())", tolerance="SIGMOID")
    def softsign(x):
      return x / (1 + x.abs())

The grader turns each declaration into a catalogue entry (conformance.catalogue.Op) and runs every property that
applies to it (forward values and dtypes, VJP against torch, finite differences, second order when asked).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from conformance import accuracy as A
from conformance.catalogue.core import FLOATS, Domain, Op

__all__ = ["op", "Contribution", "REGISTRY"]


@dataclass(frozen=True)
class Contribution:
  """One declared op: the catalogue entry the grader checks and the implementing function."""
  entry: Op
  fn: Callable


REGISTRY: list[Contribution] = []


def op(name: str, *, torch: str, dtypes: tuple[str, ...] = FLOATS, lo: float = -4.0, hi: float = 4.0,
       specials: bool = True, smooth: tuple[float, float] = (-2.0, 2.0), differentiable: bool = True,
       second_order: bool = False, tolerance: str = "EXACT", grad_tolerance: str = "GRAD",
       clauses: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
  """Declare the decorated function as an elementwise op (inputs broadcast together) of its parameters.

  torch        reference expression over the parameter names (evaluated in float64)
  dtypes       dtypes it is checked in; lo, hi: range of ordinary values; specials: draw NaN, inf, -0.0, ... too
  smooth       value range for finite differences, away from points where the op is not differentiable
  differentiable  whether gradients are checked (VJP against torch autograd, finite differences)
  second_order    whether the gradient of the gradient is checked too (float64)
  tolerance    accuracy key of spec/accuracy.md for the forward values (ACC.<key>.<dtype> or ACC.<key>)
  grad_tolerance  accuracy key for gradients (ACC.<key>.<dtype>, default ACC.GRAD)
  clauses      spec clauses the op relies on (reported with its results)
  """
  def register(fn: Callable) -> Callable:
    inputs = tuple(inspect.signature(fn).parameters)
    if not inputs: raise ValueError(f"contributed op {name}: the function takes no tensor inputs")
    _check_tolerance(name, "tolerance", tolerance, dtypes)
    if differentiable: _check_tolerance(name, "grad_tolerance", grad_tolerance, [d for d in dtypes if A.is_float(d)])
    domain = Domain("elementwise", tuple(dtypes), inputs, lo, hi, specials=specials, smooth=smooth)
    entry = Op(name, f"{fn.__name__}({', '.join(inputs)})", torch, domain, tuple(clauses), tolerance,
               grad_tolerance if differentiable else None, api=(), second_order=second_order,
               note=f"contributed op {fn.__module__}.{fn.__name__}")
    REGISTRY.append(Contribution(entry, fn))
    return fn
  return register


def _check_tolerance(name: str, argument: str, key: str, dtypes) -> None:
  """CONF.GRADE.tolerance: a tolerance key must name rows of spec/accuracy.md for every dtype the op is checked in,
  refused here, at the declaration, rather than as a KeyError in the middle of a hypothesis run."""
  for dt in dtypes:
    valid = A.tolerance_keys(dt)
    if key not in valid:
      raise ValueError(f"CONF.GRADE.tolerance: contributed op {name}: {argument}={key!r} has no row ACC.{key}."
                       f"{A.dtype_short(dt)} nor ACC.{key} in spec/accuracy.md (needed for {dt}); valid keys: "
                       f"{', '.join(valid)}")
