"""Creation ops: full, zeros, ones, arange, eye, linspace and the *_like ops. No tensor inputs (except the *_like
ops, whose input gives only its shape and dtype), so their domain is their parameters."""
from __future__ import annotations

from hypothesis import strategies as st

from conformance import strategies as S
from conformance.catalogue.core import ANY, NUMERIC, Domain, Op, fixed

__all__ = ["OPS"]


def _none():
  return st.just(())


def _shape_value(shapes, dtype):
  return st.fixed_dictionaries({"shape": S.shapes(0, 3, 0, 4), "value": S.elements(dtype), "dtype": st.just(dtype)})


def _shape_only(shapes, dtype):
  return st.fixed_dictionaries({"shape": S.shapes(0, 3, 0, 4), "dtype": st.just(dtype)})


def _arange(shapes, dtype):
  # torch refuses a range whose step points away from stop; refimpl gives an empty tensor (not compared)
  return st.fixed_dictionaries({"start": st.integers(-5, 5), "stop": st.integers(-5, 10),
                                "step": st.integers(-3, 3).filter(bool)}).filter(
    lambda p: p["start"] == p["stop"] or (p["stop"] > p["start"]) == (p["step"] > 0))


def _eye(shapes, dtype):
  return st.fixed_dictionaries({"n": st.integers(0, 4), "m": st.integers(0, 4), "dtype": st.just(dtype)})


def _linspace(shapes, dtype):
  return st.fixed_dictionaries({"start": st.integers(-8, 8), "stop": st.integers(-8, 8), "steps": st.integers(1, 9)})


def _py_default(dts, params) -> str:
  """DT.DEFAULT: a Python bool, int or float value gives bool, default_int (int32) or default_float (float32)."""
  v = params["value"]
  return "bool" if isinstance(v, bool) else "int32" if isinstance(v, int) else "float32"


def _creation(name, call, torch, params, dtypes=ANY, tol="EXACT", **kw) -> Op:
  return Op(name, call, torch, Domain("creation", dtypes, (), shapes=_none, params=params), kw.pop("clauses"), tol,
            None, kw.pop("api", (name,)), **kw)


def _like(name, call, torch, params=None) -> Op:
  return Op(name, call, torch, Domain("creation", ANY, params=params), ("UOP.CONST", "UOP.EXPAND"), "EXACT", None,
            (name,))


OPS: list[Op] = [
  _creation("full", "Tensor.full(shape, value, dtype=dtype)", "torch.full(shape, value, dtype=getattr(torch, dtype))",
            _shape_value, clauses=("UOP.CONST", "UOP.EXPAND", "DT.CONST")),
  _creation("full.default-dtype", "Tensor.full(shape, value)", "torch.full(shape, value)", lambda shapes, dt:
            st.fixed_dictionaries({"shape": S.shapes(0, 3, 0, 4), "value": S.elements(dt, specials=False)}),
            dtypes=("bool", "int32", "float32"), clauses=("DT.DEFAULT",), api=(), out_dtype=_py_default,
            note="a Python int fills default_int, int32 here and int64 in torch (DT.DEFAULT)"),
  _creation("zeros", "Tensor.zeros(*shape, dtype=dtype)", "torch.zeros(shape, dtype=getattr(torch, dtype))",
            _shape_only, clauses=("UOP.CONST",)),
  _creation("ones", "Tensor.ones(*shape, dtype=dtype)", "torch.ones(shape, dtype=getattr(torch, dtype))",
            _shape_only, clauses=("UOP.CONST",)),
  _creation("arange", "Tensor.arange(start, stop, step)", "torch.arange(start, stop, step)", _arange,
            dtypes=("int32",), clauses=("DT.DEFAULT",), out_dtype=fixed("int32"),
            note="integer arguments give default_int, int32 here and int64 in torch (DT.DEFAULT)"),
  _creation("eye", "Tensor.eye(n, m, dtype=dtype)", "torch.eye(n, m, dtype=getattr(torch, dtype))", _eye,
            dtypes=NUMERIC, clauses=("UOP.PAD", "UOP.RESHAPE", "UOP.SHRINK")),
  _creation("linspace", "Tensor.linspace(start, stop, steps)", "torch.linspace(start, stop, steps, "
            "dtype=torch.float64)", _linspace, dtypes=("float32",), tol="LINSPACE", out_dtype=fixed("float32"),
            clauses=("OP.MUL", "OP.ADD", "OP.WHERE"), note="the reference is computed in float64"),
  _like("zeros_like", "x.zeros_like()", "torch.zeros_like(x)"),
  _like("ones_like", "x.ones_like()", "torch.ones_like(x)"),
  _like("full_like", "x.full_like(2)", "torch.full_like(x, 2)"),
]

