"""The shares of special values, ties and sizes the conformance strategies promise (spec/conformance.md,
CONF.VALUES and CONF.PROGRAM.sizes), measured over a few hundred draws of the ci profile's kind (derandomized), so
that NaN, infinities, zeros and x-op-x cases appear in every ci run, not once in a while."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from conformance.catalogue import OPS
from conformance.programs import LARGE_SHARE, programs
from conformance.strategies import EQUAL_SHARE, NEGATED_SHARE, SPECIAL_SHARE, elements

DRAWS = settings(max_examples=300, deadline=None, database=None, derandomize=True, phases=(Phase.generate,),
                 suppress_health_check=list(HealthCheck))


def _draw_many(strategy) -> list:
  seen = []

  @DRAWS
  @given(strategy)
  def collect(x): seen.append(x)
  collect()
  return seen


def _has_nan(case) -> bool:
  return any(np.asarray(a).dtype.kind == "f" and np.isnan(a).any() for a in case.inputs)


# comparisons, min/max and selection ops: at least 10% of their examples hold a NaN (CONF.VALUES.specials)
@pytest.mark.parametrize("name", ["maximum", "minimum", "lt", "eq", "where", "max", "clip"])
def test_a_nan_in_at_least_a_tenth_of_the_examples(name):
  cases = _draw_many(OPS[name].cases("float32"))
  share = sum(map(_has_nan, cases)) / len(cases)
  assert share >= 0.10, f"{name}: {share:.0%} of {len(cases)} examples hold a NaN, CONF.VALUES.specials wants >= 10%"


def test_special_values_of_elements_at_the_stated_share():
  """CONF.VALUES.specials: one element in four is special; NaN, +-inf and +-0 each come often."""
  # lists, not single values: hypothesis runs each distinct example once, so single NaNs would be counted once
  values = [v for vs in _draw_many(st.lists(elements("float32"), min_size=16, max_size=16)) for v in vs]
  n = len(values)
  special = [v for v in values if not (math.isfinite(v) and -4 <= v <= 4 and v not in (0.0,))]
  stars = {"nan": 0, "inf": 0, "-inf": 0, "0.0": 0, "-0.0": 0}
  for v in values:
    key = "nan" if math.isnan(v) else repr(v)
    if key in stars: stars[key] += 1
  assert len(special) / n >= SPECIAL_SHARE / 2, (len(special), n)
  for key, count in stars.items(): assert count / n >= 0.01, f"{key}: {count} of {n} elements"


@pytest.mark.parametrize("name", ["maximum", "sub", "div", "eq"])
def test_equal_or_negated_inputs_at_the_stated_share(name):
  """CONF.VALUES.equal: among examples whose two inputs have one shape, the second is the first or its negation at
  least EQUAL_SHARE + NEGATED_SHARE of the time (more by chance, for one-element inputs)."""
  cases = [c for c in _draw_many(OPS[name].cases("float32")) if c.inputs[0].shape == c.inputs[1].shape]
  with np.errstate(invalid="ignore"):
    same = [c for c in cases if np.array_equal(c.inputs[0], c.inputs[1], equal_nan=True) or
            np.array_equal(c.inputs[0], -c.inputs[1], equal_nan=True)]
  assert len(cases) >= 50 and len(same) / len(cases) >= EQUAL_SHARE + NEGATED_SHARE, (len(same), len(cases))


def test_programs_at_the_stated_shares():
  """CONF.PROGRAM.sizes: about LARGE_SHARE of programs at kernel-choice sizes; CONF.PROGRAM.values: at least a
  tenth of programs hold a NaN in an input, and at least a tenth both zeros."""
  progs = _draw_many(programs())
  n = len(progs)
  large = sum(p.large for p in progs) / n
  nan = sum(any(np.isnan(i.values).any() for i in p.inputs if i.values.dtype.kind == "f") for p in progs) / n
  zeros = sum(any(((i.values == 0) & np.signbit(i.values)).any() and ((i.values == 0) & ~np.signbit(i.values)).any()
                  for i in p.inputs if i.values.dtype.kind == "f") for p in progs) / n
  assert LARGE_SHARE / 2 <= large <= LARGE_SHARE * 2, large
  assert nan >= 0.10 and zeros >= 0.10, (nan, zeros)
