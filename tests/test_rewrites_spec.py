"""spec/rewrites.md and refimpl/uop/symbolic.py say the same thing: every rule's clause, text, dtypes and guard."""
from pathlib import Path

from conformance.spec_tables import clauses, tables
from refimpl.uop.rules import show_rule, show_where, dtype_class
from refimpl.uop.symbolic import SYM_RULES, symbolic

SPEC = Path(__file__).parents[1] / "spec" / "rewrites.md"


def _spec_rows() -> dict[str, tuple[str, str, str]]:
  rows = {}
  for _, header, body in tables(SPEC):
    if header != ("clause", "rule", "applies to", "guard"): continue
    for clause, rule, applies, guard in body: rows[clause.strip("`")] = (rule.strip("`"), applies, guard.strip("`"))
  return rows


def test_every_rule_is_in_the_spec_table_as_written():
  rows = _spec_rows()
  for r in SYM_RULES:
    assert r.clause in rows, f"{r.clause} has no row in spec/rewrites.md"
    assert rows[r.clause] == (show_rule(r), dtype_class(r.dtypes), show_where(r)), r.clause


def test_spec_table_has_no_stale_rules():
  assert set(_spec_rows()) == {r.clause for r in SYM_RULES}


def test_every_rule_in_the_matcher_cites_a_defined_clause():
  defined = clauses(SPEC)
  for rule in symbolic.rules:
    assert rule.clause in defined, f"rule {rule.label} cites {rule.clause}, not defined in spec/rewrites.md"
