"""The hypothesis profiles the conformance plugin registers (conformance/plugin.py, listed in the README): ci is
derandomized with no example database, so that two runs draw the same examples; ci-short and triage derive from it."""
from hypothesis import Phase, settings

import conformance.plugin  # noqa: F401 (registers the profiles)


def test_ci_is_reproducible():
  ci = settings.get_profile("ci")
  assert ci.derandomize and ci.database is None and ci.deadline is None and ci.max_examples == 6


def test_ci_short_halves_the_examples():
  assert settings.get_profile("ci-short").max_examples == 3
  assert settings.get_profile("ci-short").derandomize


def test_triage_is_ci_without_shrinking():
  triage, ci = settings.get_profile("triage"), settings.get_profile("ci")
  assert Phase.shrink in ci.phases and Phase.shrink not in triage.phases
  assert Phase.generate in triage.phases
  assert (triage.max_examples, triage.derandomize, triage.database) == (ci.max_examples, True, None)


def test_dev_and_thorough_draw_more():
  assert settings.get_profile("dev").max_examples == 30 and settings.get_profile("thorough").max_examples == 300
