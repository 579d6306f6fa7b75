"""A correct contribution: softsign(x) = x / (1 + |x|), written with refimpl's Tensor API.

    python -m conformance grade conformance/examples/softsign_ok.py     # exits 0
"""
from conformance import contrib


# rounding: |x| is exact, then one addition and one division: within SIGMOID's bound (3 ulp + eps*S)
@contrib.op("softsign", torch="x / (1 + x.abs())", tolerance="SIGMOID", second_order=True)
def softsign(x):
  """x / (1 + |x|)."""
  return x / (1 + x.abs())
