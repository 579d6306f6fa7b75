"""Elementwise math of spec/tensor_math.md: inverse trigonometric and hyperbolic functions, erf, log10, the
activations, remainders and rounding divisions, closeness tests, the named forms of the operators and tinygrad's
small helpers (const, const_like, ufix, usum, uprod). Each entry cites its TENSOR.* clause and the edge-case
sub-clauses its strategies draw (the special values of spec/ops.md include +-0, +-1, +-inf and NaN)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue import oracles
from conformance.catalogue.core import (ANY, FLOATS, NUMERIC, TORCH_INTS, Domain, Op, away_from, exp_limit,
                                        finite_inputs, no_nan_inputs, promoted, square_limit)
from refimpl.dtype import float_max, to_dtype
from conformance.catalogue.elementwise import (_SHIFT_COUNTS, _binary, _floordiv_defined, _ints_only, _shift_defined,
                                               _unary, _with_scalar)

__all__ = ["OPS"]


def _in_range(lo: float, hi: float):
  """Op.grad_domain: every float input in [lo, hi] or NaN (gradients outside an op's domain are not compared)."""
  def ok(case) -> bool:
    x = np.asarray(case.inputs[0], np.float64)
    return bool((np.isnan(x) | ((x >= lo) & (x <= hi))).all())
  return ok


def _fraction_of_max(k: float):
  """Domain.limit: |x| <= largest finite / k (ACC.RANGE)."""
  return lambda dt: float_max(to_dtype(dt)) / k


def _no_nan(case) -> bool:
  """Op.grad_domain: no NaN among the float inputs."""
  return not any(np.isnan(np.asarray(a, np.float64)).any() for a in case.inputs)


def _params(**choices):
  """A params strategy drawing each named parameter from its list."""
  return lambda shapes, dt: st.fixed_dictionaries({k: st.sampled_from(v) for k, v in choices.items()})


def _trunc_defined(case) -> np.ndarray:
  """Where torch's trunc division is the reference: integers with a nonzero divisor; floats as for `//`
  (|x / y| < 2**p, ACC.RANGE), less the places where torch's kernel, which truncates the rounded quotient, saw it
  round onto an integer the exact quotient does not reach (TENSOR.DIV.rounding: refimpl truncates the exact one)."""
  mask = np.array(_floordiv_defined(case), bool)
  if case.dtypes[0] not in FLOATS: return mask
  x, y = (a.astype(np.float64) for a in np.broadcast_arrays(*case.inputs))
  with np.errstate(all="ignore"): q = x / y
  landed = np.isfinite(q) & (q == np.trunc(q)) & (q != 0)
  for i in np.ndindex(landed.shape):
    if landed[i] and Fraction(float(x[i])) != Fraction(float(q[i])) * Fraction(float(y[i])): mask[i] = False
  return mask


def _copysign_int(case, x: int, y: int) -> int:
  # TENSOR.COPYSIGN on integers: |x| with y's sign, in the promoted integer dtype (|INT_MIN| wraps to INT_MIN)
  from refimpl.dtype import to_dtype, wrap_int
  dt = to_dtype(promoted(case.dtypes, {}))
  return wrap_int(-abs(x) if y < 0 else abs(x), dt)


def _copysign_defined(case) -> np.ndarray:
  """torch computes integer copysign in float32: its value is the reference where float32 holds |x| exactly."""
  x, _ = np.broadcast_arrays(*case.inputs)
  return np.ones(x.shape, bool) if case.dtypes[0] in FLOATS else np.abs(x.astype(np.float64)) <= 2 ** 24


def _isclose_params(shapes, dt):
  return st.fixed_dictionaries({"rtol": st.sampled_from([1e-5, 0.1, 0.0]), "atol": st.sampled_from([1e-8, 0.5, 0.0]),
                                "equal_nan": st.booleans()})


def _three(name: str, call: str, torch: str, tol: str, clauses: tuple[str, ...], *, dtypes=ANY, grad="GRAD",
           **kw) -> Op:
  """An op of three broadcasting tensors x, y, z of one dtype."""
  return Op(name, call, torch, Domain("elementwise", dtypes, ("x", "y", "z")), clauses, tol, grad,
            kw.pop("api", (name,)), **kw)


def _creation_value(shapes, dtype):
  return st.fixed_dictionaries({"value": S.elements(dtype), "dtype": st.just(dtype)})


OPS: list[Op] = [
  # ---- inverse trigonometric and hyperbolic functions, erf, log10 (spec/accuracy.md: ACC.<NAME>)
  _unary("atan", "x.atan()", "torch.atan(x)", "ATAN", ("TENSOR.ATAN", "OP.RECIPROCAL", "GRAD.CHECK.tensor"),
         lo=-10, hi=10, smooth=(-3.0, 3.0)),
  _unary("asin", "x.asin()", "torch.asin(x)", "ASIN", ("TENSOR.ASIN", "TENSOR.ASIN.domain", "OP.SQRT"), lo=-1, hi=1,
         smooth=(-0.9, 0.9), second_order=True),
  _unary("acos", "x.acos()", "torch.acos(x)", "ACOS", ("TENSOR.ACOS", "TENSOR.ACOS.domain", "OP.SQRT"), lo=-1, hi=1,
         smooth=(-0.9, 0.9)),
  _unary("asinh", "x.asinh()", "torch.asinh(x)", "ASINH", ("TENSOR.ASINH", "OP.LOG2"), lo=-10, hi=10,
         smooth=(-3.0, 3.0)),
  _unary("acosh", "x.acosh()", "torch.acosh(x)", "ACOSH", ("TENSOR.ACOSH", "TENSOR.ACOSH.domain", "OP.LOG2"),
         lo=0, hi=10, smooth=(1.2, 4.0), grad_domain=_in_range(1.0, np.inf),
         note="gradients on x >= 1 only: below it torch's formula gives numbers, refimpl NaN (TENSOR.ACOSH.domain)"),
  _unary("atanh", "x.atanh()", "torch.atanh(x)", "ATANH", ("TENSOR.ATANH", "TENSOR.ATANH.domain", "OP.LOG2"),
         lo=-1, hi=1, smooth=(-0.9, 0.9), grad_domain=_in_range(-1.0, 1.0),
         note="gradients on [-1, 1] only (TENSOR.ATANH.domain)"),
  _unary("sinh", "x.sinh()", "torch.sinh(x)", "SINH", ("TENSOR.SINH", "OP.EXP2"), lo=-10, hi=10, limit=exp_limit()),
  _unary("cosh", "x.cosh()", "torch.cosh(x)", "COSH", ("TENSOR.COSH", "OP.EXP2"), lo=-10, hi=10, limit=exp_limit()),
  _unary("erf", "x.erf()", "torch.erf(x)", "ERF", ("TENSOR.ERF", "OP.EXP2"), lo=-7, hi=7, smooth=(-3.0, 3.0),
         grad="GRAD.ERF"),
  _unary("log10", "x.log10()", "torch.log10(x)", "LOG10", ("TENSOR.LOG10", "OP.LOG2"), lo=0, hi=8,
         smooth=(0.2, 4.0)),
  # ---- activations
  _unary("gelu.none", "x.gelu('none')", "F.gelu(x)", "GELU_NONE", ("TENSOR.GELU", "TENSOR.GELU.approximate"), lo=-8,
         hi=8, api=(), smooth=(-3.0, 3.0), grad="GRAD.ERF", grad_domain=finite_inputs,
         note="gradients on finite inputs: at -inf refimpl's is 0, torch's NaN (TENSOR.GELU.approximate)"),
  _unary("gelu.tanh", "x.gelu(approximate='tanh')", "F.gelu(x, approximate='tanh')", "GELU",
         ("TENSOR.GELU.approximate",), lo=-6, hi=6, grad=None, api=()),
  _unary("logsigmoid", "x.logsigmoid()", "F.logsigmoid(x)", "SOFTPLUS", ("TENSOR.LOGSIGMOID", "GRAD.CHECK.tensor"),
         lo=-20, hi=20),
  _unary("mish", "x.mish()", "F.mish(x)", "MISH", ("TENSOR.MISH", "OP.EXP2"), lo=-20, hi=20,
         grad_domain=away_from(np.inf), note="mish(inf) has slope 1 here, NaN in torch (TENSOR.MISH)"),
  _unary("selu", "x.selu(alpha, gamma)", "gamma * F.elu(x, alpha)", "SELU", ("TENSOR.SELU", "GRAD.WHERE"), lo=-6,
         hi=6, params=lambda shapes, dt: st.sampled_from([{"alpha": 1.67326, "gamma": 1.0507},
                                                          {"alpha": 1.0, "gamma": 2.0}]),
         grad_domain=_no_nan, note="gradients away from NaN, where torch's is NaN and refimpl's gamma g (TENSOR.SELU)"),
  _unary("selu.default", "x.selu()", "1.0507 * F.elu(x, 1.67326)", "SELU", ("TENSOR.SELU",), lo=-6, hi=6, grad=None,
         api=()),
  _unary("celu", "x.celu(alpha)", "F.celu(x, alpha)", "CELU", ("TENSOR.CELU", "GRAD.WHERE"), lo=-8, hi=8,
         params=_params(alpha=[1.0, 0.5, 2.0]), grad_domain=no_nan_inputs,
         note="gradients away from NaN, where torch's depends on the element's position, as elu's (GRAD.CHECK.points)"),
  _unary("hardsigmoid", "x.hardsigmoid(alpha, beta)", "F.hardtanh(x * alpha + beta, 0, 1)", "HARDSIGMOID",
         ("TENSOR.HARDSIGMOID", "GRAD.CHECK.tensor", "GRAD.CHECK.points"), lo=-5, hi=5, smooth=(-5.0, 5.0),
         params=lambda shapes, dt: st.sampled_from([{"alpha": 1 / 6, "beta": 0.5}, {"alpha": 0.25, "beta": 0.25}]),
         grad_domain=no_nan_inputs, note="gradients away from NaN, where torch's hardtanh gradient depends on the "
                                         "element's position (GRAD.CHECK.points)"),
  _unary("hardswish", "x.hardswish()", "F.hardswish(x)", "HARDSWISH",
         ("TENSOR.HARDSWISH", "GRAD.CHECK.tensor", "GRAD.CHECK.points"),
         lo=-6, hi=6, smooth=(-5.0, 5.0), limit=_fraction_of_max(8), grad_domain=no_nan_inputs,
         note="|x| <= max/8: torch's x * 6 overflows beyond (ACC.RANGE); refimpl's factor is at most 1. Gradients "
              "away from NaN, where torch's hardswish gradient depends on the element's position (its vector "
              "lanes give NaN, its scalar tail g; GRAD.CHECK.points)"),
  _unary("quick_gelu", "x.quick_gelu()", "x * torch.sigmoid(1.702 * x)", "SILU", ("TENSOR.QUICK_GELU", "OP.EXP2"),
         lo=-8, hi=8, limit=lambda dt: min(exp_limit(1.702)(dt), float_max(to_dtype(dt)) / 2),
         note="|1.702 x| stays finite (ACC.RANGE); torch has no quick_gelu: the reference is its formula in float64"),
  _unary("softsign", "x.softsign()", "F.softsign(x)", "SOFTSIGN", ("TENSOR.SOFTSIGN", "OP.FDIV"), limit=square_limit,
         note="|x| <= sqrt(max): GRAD.FDIV squares the divisor 1 + |x| (ACC.RANGE)"),
  Op("softmin", "x.softmin(axis)", "F.softmin(x, axis)",
     Domain("reduce", FLOATS, lo=-10, hi=10, shapes=lambda: st.tuples(S.shapes(0, 3, 0, 4)),
            params=lambda shapes, dt: st.fixed_dictionaries(
              {"axis": st.integers(-len(shapes[0]), len(shapes[0]) - 1) if shapes[0] else st.just(0)})),
     ("TENSOR.SOFTMIN", "OP.EXP2"), "SOFTMAX", "GRAD",
     n=lambda case: case.inputs[0].shape[case.params["axis"]] if case.inputs[0].shape else 1),
  # ---- binary math
  _unary("square", "x.square()", "torch.square(x)", "MUL", ("TENSOR.SQUARE", "OP.MUL"), dtypes=NUMERIC,
         reference="native"),
  _binary("logaddexp", "x.logaddexp(y)", "torch.logaddexp(x, y)", "LOGADDEXP", ("TENSOR.LOGADDEXP", "GRAD.MAX"),
          dtypes=FLOATS, lo=-20, hi=20, grad_domain=finite_inputs,
          note="gradients on finite inputs: at equal infinities torch's is NaN, refimpl's g/2 (TENSOR.LOGADDEXP)"),
  _binary("copysign", "x.copysign(y)", "torch.copysign(x, y)", "EXACT",
          ("TENSOR.COPYSIGN", "TENSOR.COPYSIGN.zero", "TENSOR.COPYSIGN.nan", "OP.BITCAST"), dtypes=NUMERIC,
          out_dtype=promoted, torch_defined=_copysign_defined,
          spec=_ints_only(oracles.elementwise(_copysign_int, lambda case: promoted(case.dtypes, {}))),
          grad_domain=finite_inputs,
          note="integers stay integers (TENSOR.COPYSIGN: tinygrad's dtype; torch's is float); "
                                   "|INT_MIN| wraps; torch's float32 values are compared where they are exact"),
  _binary("fmod", "x.fmod(y)", "torch.fmod(x, y)", "EXACT",
          ("TENSOR.FMOD", "TENSOR.FMOD.sign", "TENSOR.FMOD.zero", "TENSOR.FMOD.special", "OP.MULACC", "OP.CMOD.zero"),
          lo=-20, hi=20, smooth={"x": (-2.0, 2.0), "y": (0.5, 2.0)}, torch_defined=_floordiv_defined,
          spec=_ints_only(oracles.alu("CMOD")), grad_domain=lambda case: finite_inputs(case) and
          bool(_trunc_defined(case).all()),
          note="integer x fmod 0 = x (OP.CMOD.zero; torch raises); floats exact within |x / y| < 2**p (ACC.RANGE)"),
  _binary("mod.named", "x.mod(y)", "torch.remainder(x, y)", "MOD", ("TENSOR.MOD", "OP.CMOD.sign"), lo=-20, hi=20,
          grad=None, api=("mod",), torch_defined=_floordiv_defined, spec=_ints_only(oracles.mod)),
  _binary("div.trunc", "x.div(y, rounding_mode='trunc')", "torch.div(x, y, rounding_mode='trunc')", "EXACT",
          ("TENSOR.DIV", "TENSOR.DIV.rounding", "OP.CDIV", "OP.CDIV.zero"), lo=-20, hi=20, api=(),
          smooth={"x": (-2.0, 2.0), "y": (0.5, 2.0)}, torch_defined=_trunc_defined,
          spec=_ints_only(oracles.alu("CDIV")), grad_domain=finite_inputs,
          note="integer x / 0 = -1 (OP.CDIV.zero); float64 compared where torch's rounded quotient is exact"),
  _binary("div.floor", "x.div(y, rounding_mode='floor')", "torch.div(x, y, rounding_mode='floor')", "EXACT",
          ("TENSOR.DIV.rounding", "OP.CDIV"), lo=-20, hi=20, api=(), torch_defined=_floordiv_defined,
          smooth={"x": (-2.0, 2.0), "y": (0.5, 2.0)}, spec=_ints_only(oracles.floordiv), grad_domain=finite_inputs),
  Op("lerp", "x.lerp(y, z)", "torch.lerp(x, y, z)",
     Domain("elementwise", FLOATS, ("x", "y", "z"), specials=lambda v: not np.isinf(v), limit=_fraction_of_max(16)),
     ("TENSOR.LERP", "OP.MUL", "OP.ADD"), "LERP", "GRAD", grad_domain=finite_inputs,
     note="no infinities drawn (TENSOR.LERP), |x| <= max/16 so that (end - x) w stays finite (ACC.RANGE); one "
          "formula x + (end - x) w where torch switches to "
          "end - (end - x)(1 - w) for |w| >= 1/2 (ACC.LERP)"),
  _binary("lerp.scalar", "x.lerp(y, 0.25)", "torch.lerp(x, y, 0.25)", "LERP", ("TENSOR.LERP",), dtypes=FLOATS,
          api=(), grad_domain=finite_inputs, specials=lambda v: not np.isinf(v), limit=_fraction_of_max(16)),
  _unary("isfinite", "x.isfinite()", "torch.isfinite(x)", "EXACT", ("TENSOR.ISFINITE", "OP.CMPNE.nan"), dtypes=ANY,
         grad=None),
  Op("isclose", "x.isclose(y, rtol, atol, equal_nan)", "torch.isclose(x, y, rtol, atol, equal_nan)",
     Domain("elementwise", FLOATS + TORCH_INTS, ("x", "y"), params=_isclose_params),
     ("TENSOR.ISCLOSE", "TENSOR.ISCLOSE.inf", "TENSOR.ISCLOSE.nan"), "EXACT", None),
  Op("allclose", "x.allclose(y, rtol, atol, equal_nan)", "torch.isclose(x, y, rtol, atol, equal_nan).all()",
     Domain("elementwise", FLOATS, ("x", "y"), params=_isclose_params),
     ("TENSOR.ISCLOSE",), "EXACT", None),
  # ---- named operators
  _binary("eq.named", "x.eq(y)", "x == y", "EXACT", ("TENSOR.EQ", "OP.CMPEQ.nan"), dtypes=ANY, grad=None,
          api=("eq",)),
  _binary("ne.named", "x.ne(y)", "x != y", "EXACT", ("TENSOR.EQ", "OP.CMPNE.nan"), dtypes=ANY, grad=None,
          api=("ne",)),
  *[_binary(f"{name}.named", f"x.{name}(y)", f"x {sym} y", "EXACT", ("TENSOR.BITWISE", f"OP.{alu}"),
            dtypes=TORCH_INTS + ("bool",), grad=None, api=(name,))
    for name, sym, alu in (("bitwise_and", "&", "AND"), ("bitwise_or", "|", "OR"), ("bitwise_xor", "^", "XOR"))],
  _binary("bitwise_and.reverse", "x.bitwise_and(y, True)", "y & x", "EXACT", ("TENSOR.BITWISE",),
          dtypes=("int8", "bool"), grad=None, api=()),
  _unary("bitwise_not.named", "x.bitwise_not()", "~x", "EXACT", ("TENSOR.BITWISE", "OP.XOR"),
         dtypes=TORCH_INTS + ("bool",), grad=None, api=("bitwise_not",)),
  *[_binary(f"{name}.named", f"x.{name}(y)", f"x {sym} y", "EXACT", ("TENSOR.SHIFT", "TENSOR.SHIFT.count", f"OP.{alu}"),
            dtypes=TORCH_INTS, ranges=_SHIFT_COUNTS, grad=None, api=(name,), spec=oracles.alu(alu),
            torch_defined=_shift_defined, note="counts outside [0, bits), negative ones included, are taken modulo the "
                                               "width (TENSOR.SHIFT.count)")
    for name, sym, alu in (("lshift", "<<", "SHL"), ("rshift", ">>", "SHR"))],
  _with_scalar("lshift.reverse", "x.lshift(c, True)", "c << x", "EXACT", ("TENSOR.SHIFT",), dtypes=("int32",), lo=0,
               hi=20, grad=None, api=(), specials=False),
  # ---- the other operand is named x (TENSOR.OPERAND); positional calls are what every other entry makes
  *[_binary(f"{name}.keyword", f"x.{name}(x=y)", torch, tol, ("TENSOR.OPERAND",), dtypes=FLOATS, api=(), grad=None,
            **kw)
    for name, torch, tol, kw in (("add", "x + y", "ADD", {}), ("sub", "x - y", "SUB", {}), ("mul", "x * y", "MUL", {}),
                                 ("maximum", "torch.maximum(x, y)", "MAX", {}),
                                 ("minimum", "torch.minimum(x, y)", "MAX", {}), ("div", "x / y", "FDIV", {}),
                                 ("pow", "x ** y", "POW", {"lo": 0.25, "hi": 3}))],
  Op("where.keyword", "x.where(x=y, y=z)", "torch.where(x, y, z)",
     Domain("elementwise", FLOATS, ("x", "y", "z"), input_dtype=lambda d, i: "bool" if i == 0 else d),
     ("TENSOR.OPERAND", "OP.WHERE"), "EXACT", None, ()),
  # ---- helpers
  Op("const", "Tensor.const(value, dtype=getattr(dtypes, dtype))", "torch.tensor(value, dtype=getattr(torch, dtype))",
     Domain("creation", ANY, (), shapes=lambda: st.just(()), params=_creation_value), ("TENSOR.CONST", "DT.CONST"),
     "EXACT", None),
  Op("const.default-dtype", "Tensor.const(value)", "torch.tensor(value, dtype=torch.float32 if isinstance(value, "
     "float) else torch.int32 if isinstance(value, int) and not isinstance(value, bool) else torch.bool)",
     Domain("creation", ("bool", "int32", "float32"), (), shapes=lambda: st.just(()),
            params=lambda shapes, dt: st.fixed_dictionaries({"value": S.elements(dt, specials=False)})),
     ("TENSOR.CONST", "DT.DEFAULT"), "EXACT", None, ()),
  Op("const_like", "x.const_like(2)", "torch.full_like(x, 2)", Domain("creation", ANY), ("TENSOR.CONST",), "EXACT",
     None),
  Op("const_like.dtype", "x.const_like(1, dtypes.int8)", "torch.full_like(x, 1, dtype=torch.int8)",
     Domain("creation", ANY), ("TENSOR.CONST",), "EXACT", None, ()),
  _with_scalar("ufix", "x.ufix(c)", "torch.as_tensor(c, dtype=x.dtype)", "EXACT", ("TENSOR.UFIX", "DT.SCALAR-PROMOTE"),
               dtypes=ANY, grad=None),
  _with_scalar("ufix.float-scalar", "x.ufix(c)", "torch.as_tensor(c, dtype=torch.float32)", "EXACT",
               ("TENSOR.UFIX", "DT.SCALAR-PROMOTE"), dtypes=TORCH_INTS + ("bool",), scalar_kind="float", grad=None,
               api=()),
  _binary("ufix.tensor", "x.ufix(y)", "y", "EXACT", ("TENSOR.UFIX",), dtypes=ANY, grad=None, api=()),
  _three("usum", "x.usum(y, z)", "x + y + z", "ADD", ("TENSOR.USUM", "OP.ADD"), reference="native",
         grad_domain=finite_inputs),
  _three("usum.list", "x.usum([y, z])", "x + y + z", "ADD", ("TENSOR.USUM",), api=(), reference="native", grad=None),
  _three("uprod", "x.uprod(y, z)", "x * y * z", "MUL", ("TENSOR.USUM", "OP.MUL"), reference="native",
         grad_domain=finite_inputs),
]
