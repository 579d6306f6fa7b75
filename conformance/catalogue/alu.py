"""The ALU ops at the UOp level (spec/ops.md), one entry per op, each on every dtype it accepts (OP.ALU). Operands
have equal shapes; the adapter runs the single op on the backend (`Adapter.alu`). The executable spec (`exec_alu`) is
the oracle bit for bit, except for float EXP2, LOG2, SIN and POW, whose reference is torch's within the accuracy
contract (OP.LIBM, EXEC.FLOAT.transcendental)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue import oracles
from conformance.catalogue.core import FLOATS, Domain, Op
from refimpl.dtype import to_dtype
from refimpl.uop import GroupOp, Ops
from refimpl.uop.semantics import ALU_DTYPES

__all__ = ["OPS", "TRANSCENDENTAL"]

TRANSCENDENTAL = ("EXP2", "LOG2", "SIN", "POW")
_ALL = ("bool",) + S.INTS + FLOATS
_TORCH = {"EXP2": "torch.exp2(x)", "LOG2": "torch.log2(x)", "SIN": "torch.sin(x)", "POW": "torch.pow(x, y)"}
_ARITY = {**{o: 1 for o in GroupOp.Unary}, Ops.CAST: 1, Ops.BITCAST: 1, **{o: 2 for o in GroupOp.Binary},
          **{o: 3 for o in GroupOp.Ternary}}
_SIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
         "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}


def _equal_shapes(k: int):
  return lambda: S.shapes(0, 2, 0, 4).map(lambda s: (s,) * k)


def _spec(op: str, target=None):
  """exec_alu, except where the backend may differ from it within the contract (float transcendentals)."""
  oracle = oracles.alu(op, target)
  def spec(case):
    if op in TRANSCENDENTAL and case.dtypes[-1] in FLOATS: return None
    return oracle(case)
  return spec


def _torch_pow_defined(case) -> np.ndarray:
  """Where torch.pow is a reference for POW: everywhere but integer 0 ** negative, which torch gives as 0 and the spec
  as -1, CDIV(1, 0)'s value (OP.POW.negative-exponent; exec_alu, oracle_alu's table rows and OP.TABLES decide it)."""
  x, y = (np.asarray(v) for v in case.inputs)
  if case.dtypes[-1] in FLOATS: return np.ones(np.broadcast_shapes(x.shape, y.shape), bool)
  return ~((x == 0) & (y < 0))


def _entry(op: Ops) -> Op:
  name, k = op.name, _ARITY[op]
  dts = tuple(d for d in _ALL if to_dtype(d) in ALU_DTYPES[op])
  inputs = ("x", "y", "z")[:k]
  target = None
  params = None
  if op in (Ops.CAST, Ops.BITCAST):
    same_size = op is Ops.BITCAST
    params = (lambda shapes, dt, same_size=same_size: st.fixed_dictionaries({"to": st.sampled_from(
      [d for d in _ALL if not same_size or (_SIZE[d] == _SIZE[dt] and "bool" not in (d, dt))] or [dt])}))
    target = lambda case: case.params["to"]   # noqa: E731
  dom = Domain("alu", dts, inputs, -300.0, 300.0, shapes=_equal_shapes(k), params=params,
               input_dtype=(lambda d, i: "bool" if i == 0 else d) if op is Ops.WHERE else None)
  clauses = (f"OP.{name}", "OP.ALU", "OP.TOTAL") + (("OP.LIBM",) if name in TRANSCENDENTAL else ())
  # torch is the reference only where the spec allows an error (its float64 sqrt, for one, is not correctly rounded)
  return Op(f"ALU.{name}", name, _TORCH[name] if name in TRANSCENDENTAL else None, dom, clauses, name, None, (),
            spec=_spec(name, target), torch_defined=_torch_pow_defined if op is Ops.POW else None,
            out_dtype=(lambda dts, p: p["to"]) if target else None,
            note="exec_alu is the oracle, bit for bit" + (" (floats: torch, within ACC)" if name in TRANSCENDENTAL
                                                          else ""))


OPS: list[Op] = [_entry(op) for op in sorted(GroupOp.ALU | {Ops.CAST, Ops.BITCAST}, key=lambda o: o.value)]
