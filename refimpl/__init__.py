"""refimpl: the reference implementation, with tinygrad's public API
(`from refimpl import Tensor, Device, dtypes, TinyJit, UOp, Variable, Context, GlobalCounters, getenv`)."""
from refimpl.helpers import check_environment
check_environment()   # DEV.KNOBS: a bad knob stops the import with its name, its range and the value
from refimpl.dtype import dtypes, DType  # noqa: E402
from refimpl.device import Device  # noqa: E402
from refimpl.helpers import Context, GlobalCounters, SpecError, getenv  # noqa: E402
from refimpl.tensor import Tensor  # noqa: E402
from refimpl.jit import TinyJit  # noqa: E402
from refimpl.uop.ops import UOp  # noqa: E402
from refimpl.viz import install_from_environment  # noqa: E402
install_from_environment()   # DEV.VIZ: with VIZ set, every graph_rewrite from here on is recorded

__all__ = ["dtypes", "DType", "Device", "Tensor", "TinyJit", "UOp", "Variable", "Context", "GlobalCounters", "getenv"]


def Variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.int32, multiple_of: int = 1,
             param: bool = False) -> UOp:
  """A symbolic integer `name` known to lie in [min_val, max_val] (API.VARIABLE): a DEFINE_VAR UOp (UOP.DEFINE_VAR),
  as tinygrad's `UOp.variable`. `v.bind(3)` gives its value for a run (UOP.BIND); a bound variable (or an integer
  expression of bound variables) stands for its value wherever an int is taken, shapes included
  (API.VARIABLE.value). `multiple_of` other than 1 and `param=True` (tinygrad's kernel-side form) are refused."""
  if multiple_of != 1: raise SpecError("API.VARIABLE", f"multiple_of={multiple_of}: only 1 (a DEFINE_VAR holds no "
                                       "divisibility)")
  if param: raise SpecError("API.VARIABLE", "param=True (tinygrad's kernel-side PARAM form) has no refimpl form")
  if not (isinstance(min_val, int) and isinstance(max_val, int) and min_val <= max_val):
    raise SpecError("API.VARIABLE", f"{name}: bounds must be ints with min_val <= max_val, got [{min_val}, {max_val}]")
  return UOp.variable(name, min_val, max_val, dtype)
