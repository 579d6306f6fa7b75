"""The op catalogue: one entry (`Op`) per public op of refimpl's Tensor API and per ALU op at the UOp level, each
with how to call it, its oracle (torch or the executable spec), its input domain, whether it is differentiable, the
spec clauses it checks and its tolerance key into spec/accuracy.md.

`OPS` maps entry names to entries; `EXEMPT` lists the public Tensor names that are not ops, each with the reason.
tests/test_conformance_catalogue.py keeps both complete."""
from __future__ import annotations

from conformance.catalogue import (alu, creation, elementwise, linalg, math, misc, movement, newton, nn, reductions,
                                   selection, shape)
from conformance.catalogue.core import Domain, Op

__all__ = ["Domain", "Op", "OPS", "EXEMPT", "tensor_entries", "alu_entries"]

OPS: dict[str, Op] = {}
for _module in (elementwise, reductions, movement, linalg, nn, creation, alu, newton, shape, selection, misc, math):
  for _op in _module.OPS:
    if _op.name in OPS: raise ValueError(f"catalogue: two entries named {_op.name}")
    OPS[_op.name] = _op

# Public names of refimpl.Tensor that are not ops of the catalogue, and why.
EXEMPT: dict[str, str] = {
  "backward": "autograd driver; every differentiable entry checks it through Adapter.gradient (GRAD.ACCUM tests)",
  "gradient": "autograd driver, exercised by every gradient property (GRAD.MODEL)",
  "requires_grad": "autograd flag (GRAD.NOGRAD), not an op",
  "requires_grad_": "autograd flag setter (GRAD.NOGRAD), not an op",
  "no_grad": "autograd mode switch (GRAD.NOGRAD), not an op",
  "train": "mode switch for Tensor.training, not an op",
  "training": "mode flag, not an op",
  "realize": "runs kernels; every property realizes its results",
  "schedule": "lists kernels; the fusion property counts them (CONF.FUSION)",
  "kernelize": "cuts the graph into kernels, not an op",
  "numpy": "reads values back; how every property reads results",
  "tolist": "reads values back, as numpy does",
  "item": "reads one value back, as numpy does",
  "shape": "metadata, checked with every result", "dtype": "metadata, checked with every result (dtype property)",
  "device": "metadata: where the data lives", "ndim": "metadata: the number of axes",
  "numel": "metadata: the number of elements",
  "__len__": "metadata (the size of axis 0)",
  "__bool__": "reads one value back, as item does; refusals are tests/test_bad_input.py's (API.ARGS.bool)",
  "empty": "contents unspecified by definition (DEV.ALLOC): nothing to compare",
  "empty_like": "contents unspecified by definition (DEV.ALLOC): nothing to compare",
  "to": "moves values between devices (UOP.COPY.to), not an op on them; conformance/tests/test_clauses_autograd.py "
        "checks it and its gradient (GRAD.COPY), tests/test_copy.py the values of every dtype",
  "to_": "moves a tensor between devices in place, as to does (UOP.COPY.to)",
  "manual_seed": "seeds the random generator: not an op",
  "rand": "random values differ from torch's by design (own counter-based generator); tests/test_tensor_ops.py "
          "checks ranges and determinism",
  "randn": "random, as rand", "randint": "random, as rand", "uniform": "random, as rand",
  "normal": "random, as rand",
  "glorot_uniform": "random initial values (NN.INIT), as rand",
  "kaiming_uniform": "random initial values (NN.INIT), as rand",
  "kaiming_normal": "random initial values (NN.INIT), as rand",
  "grad": "the gradient slot (TENSOR.SLOTS, GRAD.ACCUM), not an op; conformance/tests/test_clauses_misc.py",
  "uop": "the graph slot (TENSOR.SLOTS), not an op; conformance/tests/test_clauses_misc.py",
  "size": "metadata (TENSOR.SIZE); conformance/tests/test_clauses_misc.py",
  "nbytes": "metadata (TENSOR.NBYTES); conformance/tests/test_clauses_misc.py",
  "element_size": "metadata (TENSOR.NBYTES); conformance/tests/test_clauses_misc.py",
  "is_floating_point": "metadata (TENSOR.IS_FLOATING_POINT); conformance/tests/test_clauses_misc.py",
  "max_shape": "metadata (TENSOR.MAX_SHAPE); conformance/tests/test_clauses_misc.py",
  "max_numel": "metadata (TENSOR.MAX_SHAPE); conformance/tests/test_clauses_misc.py",
  "data": "reads values back as a memoryview (TENSOR.DATA), as numpy does; conformance/tests/test_clauses_misc.py",
  "replace": "rebinds a tensor to another's graph (TENSOR.REPLACE); conformance/tests/test_clauses_misc.py",
  "from_blob": "reads host memory (TENSOR.FROM_BLOB); conformance/tests/test_clauses_misc.py",
  "rand_like": "random, as rand (TENSOR.RAND_LIKE); conformance/tests/test_clauses_misc.py checks ranges",
  "randn_like": "random, as rand (TENSOR.RAND_LIKE)",
  "scaled_uniform": "random, as rand (TENSOR.SCALED_UNIFORM); conformance/tests/test_clauses_misc.py",
  "randperm": "random, as rand (TENSOR.RANDPERM); conformance/tests/test_clauses_misc.py checks it is a permutation",
  "multinomial": "random, as rand (TENSOR.MULTINOMIAL); conformance/tests/test_clauses_misc.py checks supports "
                 "and frequencies",
  "random_bits": "deterministic bits of threefry (TENSOR.RANDOM_BITS), whose catalogue entry checks the values; "
                 "conformance/tests/test_clauses_misc.py checks random_bits against a numpy reference",
  "alu": "applies a member of the implementation's own Ops enum (TENSOR.ALU), which the adapter interface does not "
         "carry; tests/test_tensor_math.py checks it against the executable spec and its refusals",
}


def tensor_entries() -> list[Op]:
  """The Tensor-level entries."""
  return [op for op in OPS.values() if not op.is_alu]


def alu_entries() -> list[Op]:
  """The UOp-level entries, one per ALU op."""
  return [op for op in OPS.values() if op.is_alu]
