"""Tensor: the lazy, tinygrad-style front end (DESIGN.md step 1). Methods build tensor-level UOp graphs; nothing runs
until realize(), numpy(), tolist() or item().

One class for users, written by op family: `core` holds the class itself (construction, autograd, realize, assign,
devices); each other module holds one family of ops as a plain class whose members are copied onto Tensor here, in
one place, so that every module can name `Tensor` directly (for static creators and results) without an import
circle. A module reads top to bottom like a chapter of the API."""
from refimpl.tensor import (activations, creation, cumulative, decompositions, elementwise, facts, indexing, linalg,
                            losses, movement, nnops, pooling, random, reductions, selection, shaping, sorting, unary)
from refimpl.tensor.core import Tensor

FAMILIES = (creation.CreationOps, random.RandomOps, movement.MovementOps, indexing.IndexingOps,
            elementwise.ElementwiseOps, unary.UnaryOps, reductions.ReductionOps, linalg.LinalgOps, nnops.NNOps,
            losses.LossOps, shaping.ShapingOps, pooling.PoolingOps, cumulative.CumulativeOps, sorting.SortingOps,
            selection.SelectionOps, facts.FactOps, decompositions.DecompositionOps, activations.ActivationOps)
_CLASS_ONLY = {"__module__", "__qualname__", "__dict__", "__weakref__", "__doc__", "__firstlineno__",
               "__static_attributes__", "__annotations__", "__annotate__"}


def _attach(families) -> None:
  """Copy each family's members onto Tensor; a name defined twice is a mistake, not an override."""
  seen: dict[str, str] = {}
  for fam in families:
    for name, value in vars(fam).items():
      if name in _CLASS_ONLY: continue
      if name in seen or (name in vars(Tensor) and name != "__hash__"):
        raise RuntimeError(f"Tensor.{name} is defined by both {seen.get(name, 'core')} and {fam.__name__}")
      seen[name] = fam.__name__
      setattr(Tensor, name, value)


_attach(FAMILIES)

__all__ = ["Tensor"]
