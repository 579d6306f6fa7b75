"""Every ALU op at the UOp level on every dtype it accepts (OP.ALU): bit-exact against two oracles, the executable
spec (exec_alu, which constant folding shares) and conformance.oracle_alu (numpy, torch and exact rationals, sharing no
code with exec_alu), integer edge cases torch leaves undefined included, and float transcendentals against torch under
the accuracy contract. The two oracles are compared with each other first, so that a slip in exec_alu is reported as
an oracle bug rather than followed by the implementation. Then every row of the edge-case tables of spec/ops.md
(OP.TABLES), the only oracle where numpy, torch and C leave a value undefined, run on the backend."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conformance import accuracy as A
from conformance import oracle_alu
from conformance.catalogue import OPS, alu_entries, oracles
from conformance.catalogue.alu import TRANSCENDENTAL
from conformance.properties import Outcome, _alu_out, forward
from conformance.spec_tables import edge_tables, parse_value
from conformance.strategies import NP, OPS_SPEC
from conformance.tests.params import cases, record, skip_unsupported
from refimpl.dtype import to_dtype


@pytest.mark.parametrize("op,dtype", cases(alu_entries(), "alu"))
@given(data=st.data())
def test_alu(adapter, op, dtype, data):
  skip_unsupported(adapter, op, dtype)
  case = data.draw(op.cases(dtype), label="case")
  second = independent(op, case)
  outcome = forward(adapter, op, case, dtype, second=second)
  record(outcome, op, dtype, "alu")
  assert outcome.ok, outcome.message


def independent(op, case) -> tuple[np.ndarray, np.ndarray]:
  """conformance.oracle_alu's (values, defined) for the case, after checking that exec_alu gives the same bits
  wherever both define the value (transcendentals included: their exact points bind exec_alu too). A difference is
  a bug in one of the oracles, not in the implementation, and fails the test saying so."""
  out = op.out_dtype(case.dtypes, case.params) if op.out_dtype else _alu_out(op, case)
  want, defined = oracle_alu.expected(op.call, out, list(zip(case.inputs, case.dtypes)))
  spec = np.asarray(oracles.alu(op.call, (lambda c: out) if op.out_dtype else None)(case))
  verdict = A.check(spec, want, out, A.bound("EXACT", out), where=defined)
  if not verdict.ok:
    bad = [f"{op.call}({', '.join(repr(np.asarray(x).ravel()[i].item()) for x in case.inputs)}) "
           f"[{', '.join(case.dtypes)} -> {out}]: exec_alu gives {spec.ravel()[i].item()!r}, "
           f"conformance.oracle_alu gives {want.ravel()[i].item()!r}"
           for i in np.flatnonzero(np.broadcast_to(verdict.bad, spec.shape).ravel())[:5]]
    raise AssertionError(f"oracle bug, OP.{op.call}: the two oracles disagree (fix exec_alu, "
                         f"conformance/oracle_alu.py or spec/ops.md, whichever is wrong): " + "; ".join(bad))
  return want, defined


def _table_groups() -> dict[tuple[str, str, str], list[tuple[list[str], str]]]:
  """Rows of the edge-case tables grouped by (op, operand dtype, result dtype), so that each group runs as one
  kernel: op -> [(operand cells, result cell)]."""
  groups = defaultdict(list)
  for clause, header, rows in edge_tables(OPS_SPEC):
    op = clause.split(".")[1]
    for row in rows:
      if header[0] == "from": src, dst, operands, result = row[0], row[1], [row[2]], row[3]
      else:
        src, operands, result = row[0], [c.strip() for c in row[1].split(",")], row[2]
        dst = "bool" if op in ("CMPLT", "CMPNE", "CMPEQ") else src
      groups[(op, _name(src), _name(dst))].append((operands, result))
  return groups


def _name(dtype: str) -> str:
  from conformance.catalogue.core import _NAME_OF
  return _NAME_OF[to_dtype(dtype)]


GROUPS = _table_groups()
TABLE_CASES = [pytest.param(k, id=f"{k[0]}-{k[1]}-{k[2]}", marks=[
  pytest.mark.clauses(f"OP.{k[0]}", "OP.TABLES"), pytest.mark.conformance(op=f"ALU.{k[0]}", dtype=k[1],
                                                                         prop="edge_table")]) for k in sorted(GROUPS)]


@pytest.mark.parametrize("key", TABLE_CASES)
def test_edge_table(adapter, key):
  """OP.TABLES: each row's result, bit for bit (float EXP2, LOG2, SIN and POW: within their ACC bound, special
  values exact, EXEC.FLOAT.transcendental)."""
  op, src, dst = key
  for d in {src, dst}:
    if (why := adapter.unsupported_dtype(d)): pytest.skip(why)
  if (why := adapter.unsupported(f"ALU.{op}")): pytest.skip(why)   # as test_alu: an op the implementation lacks
  rows = GROUPS[key]
  arity = len(rows[0][0])
  operand_dtypes = ["bool" if op == "WHERE" and i == 0 else src for i in range(arity)]
  operands = [(np.array([parse_value(r[0][i], to_dtype(d)) for r in rows], dtype=NP[d]), d)
              for i, d in enumerate(operand_dtypes)]
  want = np.array([parse_value(r[1], to_dtype(dst)) for r in rows], dtype=NP[dst])
  got = adapter.alu(op, dst, operands)
  rule = A.bound(op, dst) if op in TRANSCENDENTAL and dst in A._FLOATS else A.bound("EXACT", dst)
  verdict = A.check(got, want, dst, rule)
  bad = [f"{op}({', '.join(rows[i][0])}) in {src} = {got[i]!r}, the table says {rows[i][1]}"
         for i in np.flatnonzero(verdict.bad)]
  message = f"OP.{op} [{rule.clause}]: " + "; ".join(bad)
  # the whole table is one example: its worst error and fraction of the bound go to the reports (CONF.REPORT.fraction)
  record(Outcome(verdict.ok, (f"OP.{op}", "OP.TABLES", rule.clause), verdict.worst_ulps, message,
                 {"used": verdict.used}), OPS[f"ALU.{op}"], src, "edge_table")
  assert verdict.ok, message


def test_every_alu_op_has_a_table_or_entry():
  assert {k[0] for k in GROUPS} <= {op.call for op in alu_entries()}
  assert all(f"ALU.{k[0]}" in OPS for k in GROUPS)
