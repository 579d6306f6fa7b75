"""Elementwise Tensor ops: math functions and activations, rounding, casts, arithmetic with broadcasting and with
Python scalars, comparisons, bitwise ops and where."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue import oracles
from conformance.catalogue.core import (ANY, FLOATS, NUMERIC, TORCH_INTS, Domain, Op, all_of, broadcasting,
                                        divisor_range, exp_limit, finite_inputs, fixed, no_nan_inputs,
                                        promoted, recip_range, square_limit)
from refimpl.dtype import float_max, to_dtype

__all__ = ["OPS"]


# torch's gradient of the hardtanh family at NaN depends on where the NaN sits (F.hardtanh(x, -1, 1) of [nan] gives
# g, of the same NaN at index 6 of 8 elements 0: vector lanes and scalar tail disagree), so gradients are compared
# away from NaN (GRAD.CHECK.points); refimpl gives g there, as torch's scalar path (tests/test_tensor_ops.py). So
# does elu's (float64 F.elu of 16 NaNs gives NaN, of one NaN g)
_NAN_GRAD = ("gradients away from NaN, where torch's depends on the element's position (vector lanes and scalar "
             "tail disagree; GRAD.CHECK.points)")


def _unary(name: str, call: str, torch: str, tol: str, clauses: tuple[str, ...], *, dtypes=FLOATS, lo=-4.0, hi=4.0,
           smooth=(-2.0, 2.0), grad: str | None = "GRAD", params=None, limit=None, **kw) -> Op:
  """An elementwise op of one tensor."""
  dom = Domain("elementwise", dtypes, lo=lo, hi=hi, smooth=smooth, params=params, limit=limit)
  return Op(name, call, torch, dom, clauses, tol, grad, kw.pop("api", (name,)), **kw)


def _binary(name: str, call: str, torch: str, tol: str, clauses: tuple[str, ...], *, dtypes=NUMERIC, lo=-4.0, hi=4.0,
            ranges=None, smooth=(-2.0, 2.0), grad: str | None = "GRAD", shapes=None, limit=None, **kw) -> Op:
  """An elementwise op of two broadcasting tensors x and y."""
  dom = Domain("elementwise", dtypes, ("x", "y"), lo, hi, ranges or {}, smooth=smooth, shapes=shapes, limit=limit,
               specials=kw.pop("specials", True))
  return Op(name, call, torch, dom, clauses, tol, grad, kw.pop("api", (name,)), **kw)


def _with_scalar(name: str, call: str, torch: str, tol: str, clauses: tuple[str, ...], *, dtypes=NUMERIC,
                 lo=-4.0, hi=4.0, scalar_kind: str | None = None, grad: str | None = "GRAD", limit=None,
                 smooth=(-2.0, 2.0), **kw) -> Op:
  """A binary op of tensor x and a Python scalar c: `scalar_kind` 'float' draws a float scalar whatever the
  tensor's dtype (the kind-crossing case of DT.SCALAR-PROMOTE), None a scalar of the tensor's own kind."""
  dom = Domain("elementwise", dtypes, ("x", "c"), lo, hi, scalars=("c",), limit=limit, smooth=smooth,
               shapes=lambda: st.tuples(S.shapes(0, 3, 0, 4), st.just(())),
               input_dtype=(lambda d, i: "float32" if i == 1 else d) if scalar_kind == "float" else None,
               specials=kw.pop("specials", True))
  return Op(name, call, torch, dom, clauses, tol, grad, kw.pop("api", (name,)), **kw)


_ALL = ANY + ("uint16", "uint32", "uint64")


def _cast_targets(shapes, dtype):
  return st.fixed_dictionaries({"to": st.sampled_from(_ALL)})


def _bitcast_targets(shapes, dtype):
  return st.fixed_dictionaries({"to": st.sampled_from([d for d in _ALL if _SIZE[d] == _SIZE[dtype] and d != "bool"])})


_SIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
         "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}


_SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _floordiv_defined(case) -> np.ndarray:
  """Where torch's `//` and `%` are the reference (ACC.RANGE): floats where |x / y| < 2**p, the range in which the
  floor of the exact quotient is a float of the dtype and both refimpl (floor of the rounded quotient, corrected by
  the sign of an exact residual) and torch (through the exact fmod) find it; beyond it every float is an integer and
  the two round the quotient differently. Special operands (infinities, NaN, a zero divisor) always count. Integers:
  wherever the divisor is nonzero (torch raises on x // 0)."""
  x, y = np.broadcast_arrays(*case.inputs)
  if case.dtypes[0] not in FLOATS: return y != 0
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  with np.errstate(all="ignore"): q = x64 / y64
  special = ~np.isfinite(x64) | ~np.isfinite(y64) | (y64 == 0)
  return special | (np.abs(q) < 2.0 ** _SIGNIFICAND_BITS[case.dtypes[0]])


def _pow_grad_range(case) -> bool:
  """|exponent| <= 16, and a zero base only with a half-integer exponent: at a = 0 the rule's a**(b-1) is 0 or an
  infinity whose sign depends on b - 1 being an odd integer, which rounding b - 1 can change (GRAD.POW.base-zero
  pins the half-integer points)."""
  a, b = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in case.inputs))
  return bool((np.abs(b) <= 16).all() and ((a != 0) | (2 * b == np.round(2 * b))).all())


def _gelu_range(case) -> bool:
  """The cube x * x * x inside gelu's composition stays finite (ACC.RANGE): beyond it the gradient is inf * 0."""
  x = np.abs(np.asarray(case.inputs[0], np.float64))
  x = x[~np.isnan(x)]   # NaN propagates through any rule; infinities are out of range
  with np.errstate(over="ignore"):
    return bool((x ** 3 <= float_max(to_dtype(case.dtypes[0]))).all())


def _nowhere(case) -> np.ndarray:
  """torch is not the value reference anywhere (the executable spec is)."""
  return np.zeros(np.broadcast_shapes(*(a.shape for a in case.inputs)), bool)


def _ints_only(oracle):
  """An executable-spec oracle for integer dtypes only (floats are compared with torch alone)."""
  return lambda case: None if case.dtypes[0] in FLOATS else oracle(case)


def _shift_defined(case) -> np.ndarray:
  """torch shifts are undefined for counts outside [0, bits) (C's rule); the spec takes the count modulo the width
  (OP.SHL.count, OP.SHR.count)."""
  x, y = np.broadcast_arrays(*case.inputs)
  return (y >= 0) & (y < 8 * x.dtype.itemsize)


def _pow_defined(case) -> np.ndarray:
  """torch refuses negative integer exponents of integers (OP.POW.negative-exponent gives them a value)."""
  x, y = np.broadcast_arrays(*case.inputs)
  return np.ones(x.shape, bool) if case.dtypes[0] in FLOATS else y >= 0


_int_pow = oracles.alu("POW")

_PARTNER = {"bool": "int8", "int8": "uint8", "uint8": "int8", "int16": "uint8", "int32": "int16", "int64": "float16",
            "float16": "bfloat16", "bfloat16": "float16", "float32": "int64", "float64": "int32"}

_SHIFT_COUNTS = {"x": (-4.0, 100.0), "y": (-2.0, 70.0)}

OPS: list[Op] = [
  # ---- math functions: compositions of EXP2, LOG2, SIN, SQRT, RECIPROCAL (spec/accuracy.md, ACC.COMPOSITE)
  _unary("exp", "x.exp()", "torch.exp(x)", "EXP", ("OP.EXP2", "OP.MUL", "GRAD.EXP2", "GRAD.MUL"), lo=-10, hi=10,
         limit=exp_limit(), second_order=True),
  _unary("exp2", "x.exp2()", "torch.exp2(x)", "EXP2", ("OP.EXP2", "GRAD.EXP2"), lo=-10, hi=10),
  _unary("log", "x.log()", "torch.log(x)", "LOG", ("OP.LOG2", "OP.MUL", "GRAD.LOG2"), lo=0, hi=8, smooth=(0.2, 4.0),
         second_order=True),
  _unary("log2", "x.log2()", "torch.log2(x)", "LOG2", ("OP.LOG2", "GRAD.LOG2"), lo=0, hi=8, smooth=(0.2, 4.0)),
  _unary("sqrt", "x.sqrt()", "torch.sqrt(x)", "SQRT", ("OP.SQRT", "GRAD.SQRT"), lo=0, hi=8, smooth=(0.2, 4.0),
         second_order=True, spec=oracles.alu("SQRT"), torch_defined=_nowhere,
         note="torch's CPU sqrt is not correctly rounded (float64 sqrt(2147483520.0) is 1 ulp off): values are "
              "compared with exec_alu's (OP.SQRT), gradients with torch"),
  _unary("rsqrt", "x.rsqrt()", "torch.rsqrt(x)", "RSQRT", ("OP.SQRT", "OP.RECIPROCAL", "GRAD.SQRT",
                                                           "GRAD.RECIPROCAL"), lo=0, hi=8, smooth=(0.2, 4.0)),
  _unary("reciprocal", "x.reciprocal()", "torch.reciprocal(x)", "RECIPROCAL", ("OP.RECIPROCAL", "GRAD.RECIPROCAL"),
         smooth=(0.3, 3.0), grad_domain=recip_range),
  _unary("sin", "x.sin()", "torch.sin(x)", "SIN", ("OP.SIN", "GRAD.SIN"), lo=-8, hi=8, second_order=True),
  _unary("cos", "x.cos()", "torch.cos(x)", "COS", ("OP.SIN", "OP.SUB", "GRAD.SIN"), lo=-8, hi=8),
  _unary("tan", "x.tan()", "torch.tan(x)", "TAN", ("OP.SIN", "OP.FDIV", "GRAD.SIN", "GRAD.FDIV"), lo=-1.5, hi=1.5,
         smooth=(-1.2, 1.2)),
  _unary("sigmoid", "x.sigmoid()", "torch.sigmoid(x)", "SIGMOID", ("OP.EXP2", "OP.RECIPROCAL", "GRAD.RECIPROCAL",
                                                                   "GRAD.EXP2"), lo=-12, hi=12, limit=exp_limit(),
         second_order=True),
  _unary("tanh", "x.tanh()", "torch.tanh(x)", "TANH", ("OP.EXP2", "OP.RECIPROCAL", "GRAD.CHECK.tensor"),
         lo=-6, hi=6, limit=exp_limit(2.0), second_order=True),
  _unary("gelu", "x.gelu()", "F.gelu(x, approximate='tanh')", "GELU", ("OP.EXP2", "GRAD.CHECK.tensor"), lo=-6, hi=6,
         grad_domain=_gelu_range),
  _unary("silu", "x.silu()", "F.silu(x)", "SILU", ("OP.EXP2", "OP.MUL", "GRAD.CHECK.tensor"), lo=-8, hi=8,
         limit=exp_limit()),
  _unary("swish", "x.swish()", "F.silu(x)", "SILU", ("OP.EXP2", "OP.MUL", "GRAD.CHECK.tensor"), lo=-8, hi=8,
         limit=exp_limit()),
  _unary("softplus", "x.softplus(beta)", "torch.logaddexp(x * beta, torch.zeros_like(x)) / beta", "SOFTPLUS",
         ("OP.EXP2", "OP.LOG2", "GRAD.CHECK.tensor"), lo=-20, hi=20,
         params=lambda shapes, dt: st.fixed_dictionaries({"beta": st.sampled_from([1, 2, 0.5])}),
         limit=lambda dt: float_max(to_dtype(dt)) / 4,
         note="torch's softplus switches to x above a threshold; the reference is the exact log(1 + e**(beta x)); "
              "|beta x| stays finite (ACC.RANGE)"),
  _unary("elu", "x.elu(alpha)", "F.elu(x, alpha)", "ELU", ("OP.EXP2", "OP.WHERE", "GRAD.WHERE"), lo=-6, hi=6,
         params=lambda shapes, dt: st.fixed_dictionaries({"alpha": st.sampled_from([1.0, 0.5])}),
         grad_domain=no_nan_inputs, note=_NAN_GRAD),
  # ---- selections and rounding: exact (ACC.EXACT)
  _unary("relu", "x.relu()", "torch.relu(x)", "EXACT", ("OP.CMPLT", "OP.WHERE", "GRAD.WHERE", "GRAD.CHECK.tensor"),
         dtypes=FLOATS + ("int8", "int32", "int64")),
  _unary("relu6", "x.relu6()", "F.relu6(x)", "MAX", ("OP.MAX", "GRAD.MAX", "GRAD.CHECK.tensor", "GRAD.CHECK.points"),
         lo=-3, hi=9, smooth=(-3.0, 9.0), grad_domain=no_nan_inputs, note=_NAN_GRAD),
  _unary("hardtanh", "x.hardtanh(lo, hi)", "F.hardtanh(x, lo, hi)", "MAX", ("OP.MAX", "GRAD.MAX",
                                                                            "GRAD.CHECK.tensor", "GRAD.CHECK.points"),
         params=lambda shapes, dt: st.fixed_dictionaries({"lo": st.sampled_from([-1, -0.5]),
                                                          "hi": st.sampled_from([1, 2])}),
         grad_domain=no_nan_inputs, note=_NAN_GRAD),
  _unary("clip", "x.clip(lo, hi)", "torch.clip(x, lo, hi)", "MAX", ("OP.MAX", "GRAD.MAX", "GRAD.CHECK.tensor"),
         dtypes=NUMERIC, api=("clip", "clamp"),
         params=lambda shapes, dt: st.fixed_dictionaries({"lo": st.sampled_from([-2, -1, None]),
                                                      "hi": st.sampled_from([0, 3])})),
  _unary("leaky_relu", "x.leaky_relu(slope)", "F.leaky_relu(x, slope)", "SCALE", ("OP.MUL", "OP.WHERE", "GRAD.WHERE",
                                                                                  "DT.SCALAR-PROMOTE"),
         params=lambda shapes, dt: st.fixed_dictionaries({"slope": st.sampled_from([0.01, 0.2])})),
  _unary("neg", "-x", "-x", "NEG", ("OP.NEG", "GRAD.NEG"), dtypes=FLOATS + ("int8", "int16", "int32", "int64"),
         api=("neg", "__neg__")),
  _unary("neg.bool", "-x", "torch.logical_not(x)", "EXACT", ("OP.NEG.bool",), dtypes=("bool",), grad=None, api=(),
         note="refimpl (like tinygrad) reads -x of a bool tensor as logical not; torch refuses it (OP.NEG.bool)"),
  _unary("abs", "x.abs()", "torch.abs(x)", "EXACT", ("OP.MAX", "OP.NEG", "GRAD.MAX"), dtypes=NUMERIC),
  _unary("sign", "x.sign()", "torch.sign(x)", "EXACT", ("OP.CMPLT", "OP.SUB", "OP.CAST"), dtypes=NUMERIC),
  _unary("trunc", "x.trunc()", "torch.trunc(x)", "EXACT", ("OP.TRUNC", "GRAD.NONDIFF.zero"), dtypes=NUMERIC,
         lo=-40, hi=40),
  _unary("floor", "x.floor()", "torch.floor(x)", "EXACT", ("OP.TRUNC", "OP.CMPLT", "GRAD.NONDIFF.zero"),
         dtypes=NUMERIC, lo=-40, hi=40),
  _unary("ceil", "x.ceil()", "torch.ceil(x)", "EXACT", ("OP.TRUNC", "OP.CMPLT", "GRAD.NONDIFF.zero"), dtypes=NUMERIC,
         lo=-40, hi=40),
  _unary("round", "x.round()", "torch.round(x)", "EXACT", ("OP.TRUNC", "GRAD.NONDIFF.zero"), dtypes=NUMERIC,
         lo=-40, hi=40),
  _unary("isnan", "x.isnan()", "torch.isnan(x)", "EXACT", ("OP.CMPNE.nan",), dtypes=FLOATS, grad=None),
  _unary("isinf", "x.isinf(pos, neg)", "(torch.isposinf(x) & pos) | (torch.isneginf(x) & neg)", "EXACT",
         ("OP.CMPEQ",), dtypes=NUMERIC, grad=None,
         params=lambda shapes, dt: st.fixed_dictionaries({"pos": st.booleans(), "neg": st.booleans()})),
  _unary("logical_not", "x.logical_not()", "torch.logical_not(x)", "EXACT", ("OP.CMPNE", "OP.CAST.to-bool"),
         dtypes=ANY, grad=None),
  # ---- casts: the executable spec is the oracle (torch's float-to-int casts are undefined out of range, and its
  #      float64 -> float16/bfloat16 conversion rounds twice, through float32)
  Op("cast", "x.cast(getattr(dtypes, to))", None,
     Domain("elementwise", _ALL, params=_cast_targets, lo=-300, hi=300),
     ("OP.CAST", "OP.CAST.saturate", "OP.CAST.nan", "OP.CAST.wrap", "OP.CAST.float-to-float", "GRAD.CAST"),
     spec=oracles.alu("CAST", lambda case: case.params["to"]), out_dtype=lambda dts, p: p["to"], api=("cast",),
     note="oracle: exec_alu CAST (DT.CONST)"),
  *[Op(f"{m}", f"x.{m}()", None, Domain("elementwise", ANY, lo=-300, hi=300), ("OP.CAST",),
       spec=oracles.alu("CAST", lambda case, t=t: t), out_dtype=fixed(t), note="oracle: exec_alu CAST (DT.CONST)")
    for m, t in (("float", "float32"), ("half", "float16"), ("double", "float64"), ("int", "int32"),
                 ("long", "int64"), ("bool", "bool"))],
  Op("bitcast", "x.bitcast(getattr(dtypes, to))", None,
     Domain("elementwise", tuple(d for d in _ALL if d != "bool"), params=_bitcast_targets, lo=-300, hi=300),
     ("OP.BITCAST", "OP.BITCAST.nan"), spec=oracles.alu("BITCAST", lambda case: case.params["to"]),
     out_dtype=lambda dts, p: p["to"], note="oracle: exec_alu BITCAST; the target is drawn among same-size dtypes"),
  # ---- arithmetic with broadcasting: exact (ACC.EXACT per op) except POW
  _binary("add", "x + y", "x + y", "ADD", ("OP.ADD", "GRAD.ADD", "GRAD.BROADCAST", "DT.PROMOTE"), dtypes=ANY,
          api=("add", "__add__")),
  _binary("sub", "x - y", "x - y", "SUB", ("OP.SUB", "GRAD.SUB", "GRAD.BROADCAST"), api=("sub", "__sub__")),
  _binary("mul", "x * y", "x * y", "MUL", ("OP.MUL", "GRAD.MUL", "GRAD.BROADCAST"), dtypes=ANY,
          api=("mul", "__mul__"), second_order=True),
  _binary("div", "x / y", "x / y", "FDIV", ("OP.FDIV", "GRAD.FDIV", "DT.PROMOTE.float"),
          smooth={"x": (-2.0, 2.0), "y": (0.5, 2.0)}, api=("div", "__truediv__"), second_order=True,
          reference="float64-cast", limit=square_limit, grad_domain=divisor_range(1)),
  _binary("maximum", "x.maximum(y)", "torch.maximum(x, y)", "MAX", ("OP.MAX", "OP.MAX.nan", "OP.MAX.zero",
                                                                   "GRAD.MAX"), dtypes=ANY),
  _binary("minimum", "x.minimum(y)", "torch.minimum(x, y)", "MAX", ("OP.MAX", "OP.NEG", "GRAD.MAX"), dtypes=ANY),
  _binary("pow", "x ** y", "x ** y", "POW", ("OP.POW", "OP.POW.special", "GRAD.POW"), dtypes=FLOATS + TORCH_INTS,
          lo=-3, hi=3, smooth={"x": (0.5, 2.0), "y": (-2.0, 2.0)}, api=("pow", "__pow__"),
          spec=lambda case: None if case.dtypes[0] in FLOATS else _int_pow(case), torch_defined=_pow_defined,
          grad_domain=all_of(finite_inputs, _pow_grad_range),
          note="integers: negative exponents follow OP.POW.negative-exponent where torch raises; gradients on finite "
               "inputs with |exponent| <= 16, where g * b in GRAD.POW cannot overflow before a**(b-1) underflows"),
  _binary("floordiv", "x // y", "torch.div(x, y, rounding_mode='floor')", "EXACT", ("OP.CDIV", "OP.CDIV.zero",
                                                                                   "OP.CDIV.overflow"),
          dtypes=FLOATS + TORCH_INTS, lo=-20, hi=20, grad=None, api=("__floordiv__",), torch_defined=_floordiv_defined,
          spec=_ints_only(oracles.floordiv),
          note="float: the rounded quotient is floored, torch floors the exact one; integer x // 0 = -1 "
               "(OP.CDIV.zero)"),
  _binary("mod", "x % y", "torch.remainder(x, y)", "MOD", ("OP.CMOD", "OP.CMOD.zero", "OP.CMOD.sign"),
          dtypes=FLOATS + TORCH_INTS, lo=-20, hi=20, grad=None, api=("__mod__",), torch_defined=_floordiv_defined,
          spec=_ints_only(oracles.mod),
          note="float: x - floor(x / y) * y from the rounded quotient; integer x % 0 = x (OP.CMOD.zero)"),
  # ---- comparisons: bool results, exact
  _binary("lt", "x < y", "x < y", "EXACT", ("OP.CMPLT", "OP.CMPLT.nan"), dtypes=ANY, grad=None, api=("__lt__",)),
  _binary("gt", "x > y", "x > y", "EXACT", ("OP.CMPLT",), dtypes=ANY, grad=None, api=("__gt__",)),
  _binary("le", "x <= y", "x <= y", "EXACT", ("OP.CMPLT", "OP.CMPEQ"), dtypes=ANY, grad=None, api=("__le__",)),
  _binary("ge", "x >= y", "x >= y", "EXACT", ("OP.CMPLT", "OP.CMPEQ"), dtypes=ANY, grad=None, api=("__ge__",)),
  _binary("eq", "x == y", "x == y", "EXACT", ("OP.CMPEQ", "OP.CMPEQ.nan"), dtypes=ANY, grad=None, api=("__eq__",)),
  _binary("ne", "x != y", "x != y", "EXACT", ("OP.CMPNE", "OP.CMPNE.nan"), dtypes=ANY, grad=None, api=("__ne__",)),
  # ---- bitwise (bool and integers)
  _binary("and", "x & y", "x & y", "EXACT", ("OP.AND",), dtypes=TORCH_INTS + ("bool",), grad=None, api=("__and__",)),
  _binary("or", "x | y", "x | y", "EXACT", ("OP.OR",), dtypes=TORCH_INTS + ("bool",), grad=None, api=("__or__",)),
  _binary("xor", "x ^ y", "x ^ y", "EXACT", ("OP.XOR",), dtypes=TORCH_INTS + ("bool",), grad=None, api=("__xor__",)),
  _unary("invert", "~x", "~x", "EXACT", ("OP.XOR",), dtypes=TORCH_INTS + ("bool",), grad=None, api=("__invert__",)),
  _binary("lshift", "x << y", "x << y", "EXACT", ("OP.SHL", "OP.SHL.count", "OP.SHL.wrap"), dtypes=TORCH_INTS,
          ranges=_SHIFT_COUNTS, grad=None, api=("__lshift__",), spec=oracles.alu("SHL"),
          torch_defined=_shift_defined, note="counts outside [0, bits) are taken modulo the width (OP.SHL.count)"),
  _binary("rshift", "x >> y", "x >> y", "EXACT", ("OP.SHR", "OP.SHR.count", "OP.SHR.signed"), dtypes=TORCH_INTS,
          ranges=_SHIFT_COUNTS, grad=None, api=("__rshift__",), spec=oracles.alu("SHR"),
          torch_defined=_shift_defined, note="counts outside [0, bits) are taken modulo the width (OP.SHR.count)"),
  # ---- where: bool condition, two broadcasting branches
  Op("where", "x.where(y, z)", "torch.where(x, y, z)",
     Domain("elementwise", ANY, ("x", "y", "z"), input_dtype=lambda d, i: "bool" if i == 0 else d),
     ("OP.WHERE", "GRAD.WHERE"), "EXACT", "GRAD"),
  # ---- mixed dtypes (DT.PROMOTE) and Python scalars (DT.SCALAR-PROMOTE)
  Op("add.promote", "x + y", "x + y",
     Domain("elementwise", ANY, ("x", "y"), input_dtype=lambda d, i: _PARTNER[d] if i else d,
            shapes=lambda: broadcasting(2, min_dims=1)),
     ("DT.PROMOTE", "OP.ADD", "OP.CAST"), "ADD", api=(), out_dtype=promoted, reference="native",
     note="the result dtype is the spec's lattice join; torch agrees on every pair drawn here once 0-d tensors, "
          "weak in torch (DT.SCALAR-PROMOTE.torch), are left out"),
  _with_scalar("radd", "c + x", "c + x", "ADD", ("OP.ADD", "DT.SCALAR-PROMOTE"), dtypes=ANY, api=("__radd__",)),
  _with_scalar("rsub", "c - x", "c - x", "SUB", ("OP.SUB", "DT.SCALAR-PROMOTE"), api=("__rsub__",)),
  _with_scalar("rmul", "c * x", "c * x", "MUL", ("OP.MUL", "DT.SCALAR-PROMOTE"), dtypes=ANY, api=("__rmul__",)),
  _with_scalar("rtruediv", "c / x", "torch.as_tensor(c, dtype=x.dtype) / x", "FDIV", ("OP.FDIV", "DT.SCALAR-PROMOTE"),
               api=("__rtruediv__",), reference="float64-cast", limit=square_limit, grad_domain=divisor_range(0),
               note="torch divides a scalar by a tensor as a reciprocal times the scalar, rounding twice; the "
                    "reference "
                    "divides tensors"),
  _with_scalar("rpow", "c ** x", "c ** x", "POW", ("OP.POW", "DT.SCALAR-PROMOTE"), dtypes=FLOATS, lo=0.25, hi=3,
               api=("__rpow__",), smooth={"c": (0.5, 2.0)}),
  _with_scalar("rfloordiv", "c // x", "c // x", "EXACT", ("OP.CDIV",),
               dtypes=TORCH_INTS, grad=None, api=("__rfloordiv__",), specials=lambda v: v != 0,
               spec=oracles.elementwise(lambda case, x, c: oracles._floordiv(case, c, x), lambda case: case.dtypes[0])),
  _with_scalar("rmod", "c % x", "c % x", "EXACT", ("OP.CMOD",),
               dtypes=TORCH_INTS, grad=None, api=("__rmod__",), specials=lambda v: v != 0,
               spec=oracles.elementwise(lambda case, x, c: oracles._mod(case, c, x), lambda case: case.dtypes[0])),
  _with_scalar("rand", "c & x", "c & x", "EXACT", ("OP.AND",), dtypes=TORCH_INTS + ("bool",), grad=None,
               api=("__rand__",)),
  _with_scalar("ror", "c | x", "c | x", "EXACT", ("OP.OR",), dtypes=TORCH_INTS + ("bool",), grad=None,
               api=("__ror__",)),
  _with_scalar("rxor", "c ^ x", "c ^ x", "EXACT", ("OP.XOR",), dtypes=TORCH_INTS + ("bool",), grad=None,
               api=("__rxor__",)),
  _with_scalar("rlshift", "c << x", "c << x", "EXACT", ("OP.SHL",), dtypes=("int32", "int64"), lo=0, hi=20,
               grad=None, api=("__rlshift__",), specials=False),
  _with_scalar("rrshift", "c >> x", "c >> x", "EXACT", ("OP.SHR",), dtypes=("int32", "int64"), lo=0, hi=20,
               grad=None, api=("__rrshift__",), specials=False),
  _with_scalar("mul.float-scalar", "x * c", "x * c", "MUL", ("DT.SCALAR-PROMOTE", "DT.PROMOTE.float", "OP.MUL"),
               dtypes=TORCH_INTS + ("bool",), scalar_kind="float", grad=None, api=(), reference="float64-cast",
               note="an int or bool tensor times a float scalar is default_float (DT.SCALAR-PROMOTE)"),
]
