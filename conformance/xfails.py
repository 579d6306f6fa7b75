"""Expected failures.

- `XFAILS`: (backend, op, dtype, property) -> reason, naming the clause a backend does not meet or the bug that makes
  it fail; `*` matches any backend or dtype. Strict: an expected failure that passes fails the run, so a fixed bug or
  a newly conforming backend is noticed and its entry removed. Properties: forward, alu, vjp, fd, second_order,
  fusion, edge_table.
- `BUGS`: known bugs of an implementation, each with a pinned reproduction that conformance/tests/test_known_bugs.py
  runs as a strict expected failure. The property domains stay clear of a listed bug's trigger (the entry's domain
  cites it), so the rest of the op is still checked; when the bug is fixed its reproduction passes, the run fails,
  and the entry and the domain's detour are removed together.

Unsupported dtypes are not listed: the suite skips them with the backend's DEV.DTYPE reason.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conformance.strategies import Case

__all__ = ["XFAILS", "BUGS", "Bug", "expected_failure"]

XFAILS: dict[tuple[str, str, str, str], str] = {
}


@dataclass(frozen=True)
class Bug:
  """A known bug of implementation `impl` (an adapter name): the catalogue entry and property it breaks, the
  backends it shows on ('*': all), what is wrong (naming the clause), and a reproduction as a dtype and a Case."""
  id: str
  op: str
  prop: str
  backends: str
  reason: str
  dtype: str
  case: Case
  impl: str = "refimpl"


BUGS: list[Bug] = [
  Bug("cumsum-empty-dtype", "cumsum", "forward", "*",
      "DT.SUM: cumsum over an empty axis of a float16/bfloat16 tensor returns float32, not the input dtype",
      "float16", Case([np.zeros((0,), np.float16)], ["float16"], {"axis": 0})),
  Bug("pad-empty-load", "pad", "forward", "PYTHON",
      "EXEC.MEMORY.gate: padding a 0-element tensor makes the emulator index the empty buffer for lanes whose LOAD is "
      "gated off (IndexError in emu/runtime.py load)",
      "float32", Case([np.zeros((0,), np.float32)], ["float32"], {"padding": ((1, 1),)})),
  Bug("unflatten-minus-one-empty", "unflatten", "forward", "*",
      "UOP.RESHAPE: unflatten infers -1 from the whole tensor's element count, so a tensor with a 0-size axis "
      "elsewhere raises (torch infers it from the unflattened axis)",
      "float32", Case([np.zeros((0, 2), np.float32)], ["float32"], {"dim": 1, "sizes": (-1,)})),
  Bug("mod-rounds-to-divisor", "mod", "forward", "*",
      "ACC.MOD: float x % y folds a remainder that rounds to the divisor to 0 (-1.0 % 2**30 gives 0.0; torch and "
      "Python give 2**30, the correctly rounded remainder)",
      "float32", Case([np.array([-1.0], np.float32), np.array([2.0 ** 30], np.float32)], ["float32", "float32"])),
  Bug("floordiv-inf-by-zero", "floordiv", "forward", "*",
      "float -inf // 0.0 gives nan; torch (and numpy) give -inf, floor(-inf / 0)",
      "float32", Case([np.array([-np.inf], np.float32), np.array([0.0], np.float32)], ["float32", "float32"])),
  Bug("conv-transpose-inf", "conv_transpose2d", "forward", "*",
      "NN.CONV_TRANSPOSE: an infinite weight gives NaN at outputs torch computes as finite: the zeros that stride "
      "spreads into the input multiply it (0 * inf)", "float32",
      Case([np.ones((1, 1, 2, 1), np.float32), np.full((1, 1, 1, 1), -np.inf, np.float32), np.zeros((1,), np.float32)],
           ["float32", "float32", "float32"],
           {"groups": 1, "stride": 2, "dilation": 1, "padding": 0, "output_padding": 1})),
  Bug("mean-half-overflow", "mean", "forward", "*",
      "ACC.MEAN.f16: the float16 mean casts the float32-accumulated sum back to float16 before dividing, so "
      "mean([60000, 60000]) is inf (torch: 60000)",
      "float16", Case([np.array([60000.0, 60000.0], np.float16)], ["float16"], {"axis": None, "keepdim": False})),
  Bug("avg-pool-half-overflow", "avg_pool2d", "forward", "*",
      "ACC.AVG_POOL.f16: float16 avg_pool2d rounds the window sum to float16 before dividing, so a window of two "
      "60000s averages to inf (torch: 60000)",
      "float16", Case([np.full((1, 1, 1, 2), 60000.0, np.float16)], ["float16"],
                      {"kernel_size": (1, 2), "stride": None, "padding": 0, "ceil_mode": False,
                       "count_include_pad": True})),
  Bug("relu6-tie-grad", "relu6", "vjp", "*",
      "GRAD.CHECK.tensor: relu6 (clip through maximum) gives g/2 at x = 0 and x = 6 (GRAD.MAX.tie); torch's relu6 "
      "gives 0 there", "float32", Case([np.array([0.0, 6.0, 3.0], np.float32)], ["float32"])),
  Bug("clip-boundary-grad", "clip", "vjp", "*",
      "GRAD.CHECK.tensor: clip gives g/2 at x = min or max (GRAD.MAX.tie); torch's clamp gives g (the bounds are "
      "inside)", "float32", Case([np.array([-1.0, 3.0, 1.0], np.float32)], ["float32"], {"lo": -1, "hi": 3})),
  Bug("leaky-relu-zero-grad", "leaky_relu", "vjp", "*",
      "GRAD.CHECK.tensor: leaky_relu gives g at x = 0; torch gives neg_slope * g", "float32",
      Case([np.array([0.0, 1.0], np.float32)], ["float32"], {"slope": 0.2})),
  Bug("getitem-index-grad", "getitem", "vjp", "*",
      "GRAD.CHECK.tensor: indexing with an integer tensor sums the selected elements as BITCAST integers, so no "
      "gradient reaches the source (GRAD.NONDIFF.none): x[[1, 2]] gives x a zero gradient", "float32",
      Case([np.array([1.0, 2.0, 3.0, 4.0], np.float32)], ["float32"], {"index": [1, 2]})),
  Bug("max-pool-tie-grad", "max_pool2d", "vjp", "*",
      "GRAD.CHECK.tensor: max_pool2d splits g among tied maxima of a window (GRAD.REDUCE.MAX.tie, through max); torch "
      "sends all of it to the first", "float32",
      Case([np.array([[[[1.0, 1.0]]]], np.float32)], ["float32"],
           {"kernel_size": (1, 2), "stride": None, "padding": 0, "ceil_mode": False})),
  Bug("sigmoid-grad-overflow", "sigmoid", "vjp", "*",
      "GRAD.CHECK.tensor: sigmoid's gradient is NaN where exp(-x) overflows (x < -88 in float32): the RECIPROCAL rule "
      "gives 0 and the EXP2 rule multiplies it by inf; torch gives 0", "float32",
      Case([np.array([-100.0, 1.0], np.float32)], ["float32"])),
  Bug("elu-grad-overflow", "elu", "vjp", "*",
      "GRAD.CHECK.tensor: elu's gradient is NaN where exp(x) of the branch WHERE does not take overflows (x > 88 in "
      "float32): GRAD.WHERE sends it 0 and the EXP2 rule multiplies that by inf; torch gives g", "float32",
      Case([np.array([100.0, -1.0], np.float32)], ["float32"], {"alpha": 1.0})),
  Bug("std-zero-grad", "std", "vjp", "*",
      "GRAD.CHECK.tensor: std's gradient is 0/0 = NaN where the standard deviation is 0; torch gives 0", "float32",
      Case([np.array([2.0, 2.0], np.float32)], ["float32"], {"axis": None, "keepdim": False, "correction": 1})),
  Bug("logsumexp-inf-grad", "logsumexp", "vjp", "*",
      "GRAD.CHECK.tensor: with +inf in a group, logsumexp shifts by 0 instead of the max, so a finite element whose "
      "exp overflows (100 in float32) gets a NaN gradient; torch gives it 0", "float32",
      Case([np.array([100.0, np.inf], np.float32)], ["float32"], {"axis": None, "keepdim": False})),
]


def expected_failure(backend: str, op: str, dtype: str, prop: str) -> str | None:
  """The reason `op` in `dtype` is expected to fail `prop` on `backend`, or None."""
  for b in (backend, "*"):
    for d in (dtype, "*"):
      if (b, op, d, prop) in XFAILS: return XFAILS[(b, op, d, prop)]
  return None
