"""Project-wide consistency of the spec's clause IDs (DESIGN.md, "Spec clause IDs").

Code cites clause IDs next to the rules it implements; these tests keep the citations and the chapters of spec/ in
step: every op has its typing clause (UOP.<NAME>, spec/uop.md) and every ALU op its semantics clause (OP.<NAME>,
spec/ops.md), every ID that refimpl/ cites is defined in some chapter, and no ID is defined twice.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.spec_tables import CLAUSE_ID, clauses
from refimpl.uop import GroupOp, Ops

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
UOP_SPEC = SPEC / "uop.md"
OPS_SPEC = SPEC / "ops.md"
ALU_OPS = sorted(GroupOp.ALU | {Ops.CAST, Ops.BITCAST}, key=lambda o: o.name)

# A citation: a known prefix, a dot, then an upper-case first segment (IDs are OP.ADD, RW.SYM.add-zero, ...). The
# look-behind keeps OP.ADD out of UOP.ADD. Templates such as f"OP.{op.name}" do not match (`{` is not a segment);
# the per-op tests below cover what they expand to.
PREFIXES = "DT|UOP|OP|RW|EXEC|DEV|ACC|GRAD|NN|OPTIM|STATE|JIT|CONF|TENSOR|API"
CITATION = re.compile(rf"(?<![A-Za-z0-9_])(?:{PREFIXES})\.[A-Z][A-Za-z0-9_.\-]*")


def _all_clauses() -> dict[str, tuple[str, int]]:
  return clauses(SPEC)


def _citations() -> dict[str, list[str]]:
  """Every clause ID cited in refimpl/ (code, comments, docstrings, messages) -> where, as 'file:line'."""
  found: dict[str, list[str]] = {}
  for path in sorted((ROOT / "refimpl").rglob("*.py")):
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
      for m in CITATION.finditer(line):
        cid = m.group().rstrip(".-")   # a citation that ends a sentence keeps the sentence's full stop
        found.setdefault(cid, []).append(f"{path.relative_to(ROOT)}:{lineno}")
  return found


def test_no_clause_defined_twice():
  """(d) clauses() raises ValueError naming both places when an ID is defined twice anywhere under spec/."""
  defined = _all_clauses()
  assert len(defined) > 200


@pytest.mark.parametrize("op", list(Ops), ids=lambda o: o.name)
def test_every_op_has_a_typing_clause(op):
  """(a) UOP.<NAME> for every member of Ops, in spec/uop.md."""
  assert f"UOP.{op.name}" in clauses(UOP_SPEC)


@pytest.mark.parametrize("op", ALU_OPS, ids=lambda o: o.name)
def test_every_alu_op_has_a_semantics_clause(op):
  """(b) OP.<NAME> for every ALU op (CAST and BITCAST included), in spec/ops.md; and its typing clause points there."""
  assert f"OP.{op.name}" in clauses(OPS_SPEC)
  assert f"`OP.{op.name}`" in _section(UOP_SPEC, f"UOP.{op.name}")


def _section(path: Path, clause: str) -> str:
  """The text of the clause heading `clause` up to the next heading."""
  m = re.search(rf"^#+ `{re.escape(clause)}`.*?(?=^#)", path.read_text() + "\n#", re.S | re.M)
  assert m, f"no heading for {clause} in {path.name}"
  return m.group()


def test_cited_clauses_are_defined():
  """(c) every clause ID cited anywhere in refimpl/ is defined in some chapter of spec/."""
  cited, defined = _citations(), _all_clauses()
  assert len(cited) > 100, "the citation pattern found too little: is it still matching?"
  missing = {cid: where for cid, where in cited.items() if cid not in defined}
  assert not missing, "cited in refimpl/ but defined in no spec chapter:\n" + "\n".join(
    f"  {cid}  ({', '.join(where[:3])}{', ...' if len(where) > 3 else ''})" for cid, where in sorted(missing.items()))


def test_uop_chapter_references_resolve():
  """Every clause ID spec/uop.md mentions in backticks is defined somewhere under spec/ (no dangling references)."""
  defined = _all_clauses()
  mentioned = {t for t in re.findall(r"`([^`\s]+)`", UOP_SPEC.read_text()) if CLAUSE_ID.fullmatch(t)}
  assert mentioned, "found no references in spec/uop.md"
  assert not sorted(mentioned - set(defined))
