"""Hypothesis strategies for random integer ALU graphs over DEFINE_VARs (tests only)."""
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.uop import UOp, Ops

INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.uint32, dtypes.int64]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.CDIV, Ops.CMOD, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR]


@st.composite
def var_ranges(draw, dt, names=("a", "b", "c")):
  out = {}
  for n in names:
    lo = draw(st.integers(dtypes.min(dt), dtypes.max(dt)))
    hi = draw(st.one_of(st.integers(lo, min(lo + 64, dtypes.max(dt))), st.integers(lo, dtypes.max(dt))))
    out[n] = (lo, hi)
  return out


def constants(dt):
  small = st.integers(max(-8, dtypes.min(dt)), min(16, dtypes.max(dt)))
  extremes = st.sampled_from([dtypes.min(dt), dtypes.max(dt)])
  return st.one_of(small, extremes, st.integers(dtypes.min(dt), dtypes.max(dt)))


def graphs(dt, ranges):
  """Random graphs of dtype dt over DEFINE_VARs with the given ranges; leaves are vars and constants."""
  leaves = st.one_of(st.sampled_from([UOp.variable(n, lo, hi, dt) for n, (lo, hi) in ranges.items()]),
                     constants(dt).map(lambda v: UOp.const(dt, v)))

  def extend(children):
    binary = st.tuples(st.sampled_from(BINARY), children, children).map(lambda t: t[1].alu(t[0], t[2]))
    neg = children.map(lambda a: -a) if not dtypes.is_unsigned(dt) else children
    select = st.tuples(children, children, children, children).map(lambda t: (t[0] < t[1]).where(t[2], t[3]))
    return st.one_of(binary, binary, neg, select)
  return st.recursive(leaves, extend, max_leaves=12)


@st.composite
def graph_and_env(draw, dtype_list=INT_DTYPES):
  dt = draw(st.sampled_from(dtype_list))
  ranges = draw(var_ranges(dt))
  g = draw(graphs(dt, ranges))
  env = {n: draw(st.integers(lo, hi)) for n, (lo, hi) in ranges.items()}
  return g, env
