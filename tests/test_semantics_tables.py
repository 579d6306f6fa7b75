"""spec/ops.md against refimpl/uop/semantics.py: every edge-case table row (OP.TABLES), the acceptance table (OP.ALU),
the clause headings, the clauses the code cites, and the SpecErrors of rejected input (OP.VALUES.check)."""
import re
from pathlib import Path

import pytest

from conformance.spec_tables import clauses, edge_tables, parse_value, same_value, tables
from refimpl.dtype import dtypes, to_dtype
from refimpl.helpers import SpecError
from refimpl.uop import GroupOp, Ops
from refimpl.uop.semantics import ALU_DTYPES, alu_result_dtype, exec_alu

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "ops.md"
SEMANTICS = ROOT / "refimpl" / "uop" / "semantics.py"
ROWS = [(clause, header, row) for clause, header, rows in edge_tables(SPEC) for row in rows]


def test_spec_has_tables():
  # guards the parametrised test below against silently collecting nothing
  assert len({clause for clause, _, _ in ROWS}) == len(GroupOp.ALU) + 2
  assert len(ROWS) > 400


@pytest.mark.parametrize("op", sorted(GroupOp.ALU | {Ops.CAST, Ops.BITCAST}, key=lambda o: o.name), ids=repr)
def test_every_alu_op_has_a_clause(op):
  assert f"OP.{op.name}" in clauses(SPEC)


def test_clauses_cited_by_the_code_exist():
  cited = set(re.findall(r"\bOP\.[A-Z0-9_]+(?:\.[a-z0-9\-]+)?", SEMANTICS.read_text()))
  missing = cited - set(clauses(SPEC)) - {"OP.<NAME>"}
  assert not missing, f"semantics.py cites clauses spec/ops.md does not define: {sorted(missing)}"
  assert len(cited) > 60


def _op_of(clause: str) -> Ops:
  assert clause is not None and clause.count(".") == 1, f"edge table under {clause!r}, not under an OP.<NAME> heading"
  return Ops[clause.split(".")[1]]


@pytest.mark.parametrize("clause,header,row", ROWS, ids=[f"{c}:{'|'.join(r)}" for c, _, r in ROWS])
def test_edge_table_row(clause, header, row):
  op = _op_of(clause)
  assert len(row) == len(header), f"{clause}: row {row} does not match header {header}"
  if header == ("dtype", "operands", "result"):
    src = to_dtype(row[0])
    operand_dtypes = [dtypes.bool if op is Ops.WHERE and i == 0 else src for i in range(len(row[1].split(",")))]
    operands = [parse_value(cell, dt) for cell, dt in zip(row[1].split(","), operand_dtypes)]
    dst = alu_result_dtype(op, src)
    want = parse_value(row[2], dst)
  else:
    src, dst = to_dtype(row[0]), to_dtype(row[1])
    operands, want = [parse_value(row[2], src)], parse_value(row[3], dst)
  got = exec_alu(op, dst, operands, src)
  assert same_value(got, want), f"{clause} on {src!r} {operands}: spec says {want!r}, exec_alu gives {got!r}"


def test_acceptance_table_matches_ALU_DTYPES():
  """OP.ALU: the spec's yes/no table is the code's ALU_DTYPES and alu_result_dtype."""
  (header, rows), = [(h, rows) for clause, h, rows in tables(SPEC) if clause == "OP.ALU"]
  assert header == ("op", "bool", "int", "float", "result")
  kinds = {"bool": [dtypes.bool], "int": [d for d in dtypes.all() if dtypes.is_int(d)],
           "float": [d for d in dtypes.all() if dtypes.is_float(d)]}
  assert {Ops[r[0]] for r in rows} == set(ALU_DTYPES) == GroupOp.ALU | {Ops.CAST, Ops.BITCAST}
  for name, *yes_no, result in rows:
    op = Ops[name]
    spec_dtypes = {d for kind, yn in zip(header[1:4], yes_no) if yn == "yes" for d in kinds[kind]}
    assert ALU_DTYPES[op] == spec_dtypes, name
    for dt in sorted(spec_dtypes):
      if result == "target":
        with pytest.raises(SpecError): alu_result_dtype(op, dt)
      else: assert alu_result_dtype(op, dt) == (dtypes.bool if result == "bool" else dt), (name, dt)


@pytest.mark.parametrize("op,dtype,operands,src,clause", [
  (Ops.CDIV, dtypes.float32, (1.0, 2.0), None, "OP.CDIV"),          # dtype not accepted
  (Ops.NEG, dtypes.bool, (True,), None, "OP.NEG"),                   # OP.NEG.bool
  (Ops.SUB, dtypes.bool, (True, False), None, "OP.SUB"),
  (Ops.SQRT, dtypes.int32, (4,), None, "OP.SQRT"),
  (Ops.ADD, dtypes.int8, (127, 1, 0), None, "OP.ADD"),               # operand count
  (Ops.ADD, dtypes.int8, (128, 1), None, "OP.ADD"),                  # out of range
  (Ops.ADD, dtypes.uint8, (-1, 1), None, "OP.ADD"),
  (Ops.ADD, dtypes.int8, (True, 1), None, "OP.ADD"),                 # a bool is not an int8 value
  (Ops.ADD, dtypes.float32, (0.1, 1.0), None, "OP.ADD"),             # not representable in float32
  (Ops.ADD, dtypes.float16, (65520.0, 1.0), None, "OP.ADD"),
  (Ops.ADD, dtypes.float32, (1, 1.0), None, "OP.ADD"),               # an int is not a float value
  (Ops.ADD, dtypes.bool, (1, 0), None, "OP.ADD"),
  (Ops.CMPLT, dtypes.int8, (1, 2), dtypes.int8, "OP.CMPLT"),         # comparisons give bool
  (Ops.ADD, dtypes.int16, (1, 2), dtypes.int8, "OP.ADD"),            # result dtype must be the operand dtype
  (Ops.WHERE, dtypes.int8, (1, 2, 3), None, "OP.WHERE"),             # WHERE's condition is bool
  (Ops.BITCAST, dtypes.int16, (1.0,), dtypes.float32, "OP.BITCAST"),  # OP.BITCAST.size
  (Ops.CAST, dtypes.int8, (300,), dtypes.int32.vec(2), "OP.CAST"),   # scalars only
  (Ops.ADD, dtypes.float32.vec(4), (1.0, 2.0), None, "OP.ADD"),
  (Ops.LOAD, dtypes.int8, (1,), None, "OP.ALU"),                     # not an ALU op
])
def test_rejected_input(op, dtype, operands, src, clause):
  with pytest.raises(SpecError) as e: exec_alu(op, dtype, operands, src)
  assert e.value.clause == clause and str(e.value).startswith(clause + ":")
