"""A contribution with a planted gradient bug: the denominator of softsign is detached from the graph, so the values
are right but the gradient misses the -x*sign(x)/(1+|x|)^2 term (it is 1/(1+|x|) instead of 1/(1+|x|)^2).

    python -m conformance grade conformance/examples/softsign_bad.py    # exits 1: vjp and fd fail
"""
from conformance import contrib


@contrib.op("softsign_detached", torch="x / (1 + x.abs())", tolerance="SIGMOID")
def softsign_detached(x):
  """x / (1 + |x|) with the denominator treated as a constant by autograd (the bug)."""
  return x / (1 + x.abs()).detach()
