"""RW.FOLD.tested: every fold spec/rewrites.md forbids on floats or allows only under a guard has a Tensor-level
conformance test (conformance/tests/test_folds.py) that cites its clause with the `clauses` marker (issue 16, item 2).

The list of such folds is read from the chapter, not written here: clauses whose text says **forbidden on floats** or
**guarded**, rule-table rows with a guard, and rule-table rows whose dtypes leave out floats although floats have every
operator of the rule (their float form is a fold the spec does not make)."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from conformance.spec_tables import clauses, tables

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "rewrites.md"
RULE_HEADER = ("clause", "rule", "applies to", "guard")
MARKERS = ("**forbidden on floats**", "**guarded**")
# operators of a rule's text that integers have and floats do not: C-style // and %, bitwise ops, shifts
INTEGER_ONLY_OPERATORS = re.compile(r"//|%|&|\||\^|<<|>>")


def marked_clauses(text: str) -> set[str]:
  """Clauses (bullets, headings) whose own text carries one of MARKERS."""
  found, current, body = set(), None, []
  for line in [*text.splitlines(), "- `END.OF.TEXT` —"]:
    m = re.match(r"^\s*(?:#+|[-*])\s+`([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_\-]+)+)`", line)
    if m or not line.strip():
      if current and any(k in " ".join(body) for k in MARKERS): found.add(current)
      current, body = (m.group(1), [line]) if m else (None, [])
    elif current: body.append(line)
  return found


def folds_needing_tests(path: Path = SPEC) -> dict[str, str]:
  """clause -> why it needs a Tensor-level test, read from the chapter."""
  out = {c: "marked in its text" for c in marked_clauses(path.read_text())}
  for _, header, rows in tables(path):
    if header != RULE_HEADER: continue
    for clause, rule, applies, guard in rows:
      cid = clause.strip("`")
      if guard.strip("` "): out[cid] = f"guard {guard}"
      elif "floats" not in applies and not INTEGER_ONLY_OPERATORS.search(rule.strip("`").split("->")[0]):
        out[cid] = f"applies to {applies} only, and floats have its operators"
  return out


def cited_by_fold_tests() -> set[str]:
  """The clause IDs test_folds.py's cases cite with the `clauses` marker."""
  with warnings.catch_warnings():   # the `clauses` marker is registered by conformance's plugin, not loaded here
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    from conformance.tests.test_folds import PARAMS
  return {cid for p in PARAMS for m in p.marks if m.name == "clauses" for cid in m.args}


def test_every_forbidden_or_guarded_fold_has_a_tensor_level_test():
  needed, cited = folds_needing_tests(), cited_by_fold_tests()
  missing = {c: why for c, why in needed.items() if c not in cited}
  assert not missing, "no case in conformance/tests/test_folds.py cites these folds of spec/rewrites.md:\n" + \
      "\n".join(f"  {c} ({why})" for c, why in sorted(missing.items()))


def test_the_list_is_read_from_the_chapter():
  """The three ways a fold enters the list each find what the chapter says today, and every ID is a clause."""
  needed, defined = folds_needing_tests(), clauses(SPEC)
  assert set(needed) <= set(defined)
  assert {"RW.FLOAT.none.div-self", "RW.FLOAT.none.cast-roundtrip", "RW.CAST.roundtrip"} <= set(needed)   # marked
  assert {"RW.IDX.div-mul", "RW.IDX.lt-add-const", "RW.BOUNDS.const"} <= set(needed)                      # guards
  assert {"RW.SYM.mul-zero", "RW.SYM.sub-self", "RW.SYM.eq-self", "RW.SYM.add-zero"} <= set(needed)       # int only
  # rules that hold for floats, or whose operators floats lack, are not folds the spec forbids or guards
  assert not {"RW.SYM.mul-one", "RW.SYM.where-same", "RW.SYM.and-self", "RW.SYM.mod-one", "RW.IDX.mod-mod"} & \
      set(needed)


def test_a_new_guarded_rule_without_a_test_is_reported(tmp_path):
  """The check fails for a rule added to the chapter with a guard and no test (a copy of the chapter with one more
  row), and for a newly marked clause."""
  text = SPEC.read_text()
  row = "| `RW.IDX.div-mul` |"
  extra = "| `RW.IDX.planted` | `(x * c) // c -> x` | ints | `(val(c) > 0)` |\n"
  marked = "\n- `RW.FLOAT.none.planted` — **forbidden on floats**: `x * 2 / 2 -> x`.\n"
  spec = tmp_path / "rewrites.md"
  spec.write_text(text.replace(row, extra + row, 1) + marked)
  needed, cited = folds_needing_tests(spec), cited_by_fold_tests()
  assert {c for c in needed if c not in cited} == {"RW.IDX.planted", "RW.FLOAT.none.planted"}
