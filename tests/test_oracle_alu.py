"""conformance/oracle_alu.py, the ALU oracle that shares no code with exec_alu (issue 16, item 7): it imports neither
refimpl.uop.semantics nor the emulator; every edge-case row of spec/ops.md (OP.TABLES) where it defines a value gives
that value; and every region where it defines none (numpy, torch and C leave the value undefined there) has table rows,
which are then the only oracle."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from conformance import oracle_alu
from conformance.spec_tables import edge_tables, parse_value, same_value
from conformance.strategies import NP, OPS_SPEC
from refimpl.dtype import to_dtype

ROOT = Path(__file__).resolve().parent.parent


def _name(d: str) -> str:
  from conformance.catalogue.core import _NAME_OF
  return _NAME_OF[to_dtype(d)]


def _rows():
  """(op, operand dtypes, result dtype, operand cells, result cell) for every OP.TABLES row."""
  for clause, header, rows in edge_tables(OPS_SPEC):
    op = clause.split(".")[1]
    for row in rows:
      if header[0] == "from": yield op, [_name(row[0])], _name(row[1]), [row[2]], row[3]
      else:
        src, cells = _name(row[0]), [c.strip() for c in row[1].split(",")]
        dst = "bool" if op in ("CMPLT", "CMPNE", "CMPEQ") else src
        yield op, ["bool" if op == "WHERE" and i == 0 else src for i in range(len(cells))], dst, cells, row[2]


ROWS = list(_rows())


def _run(op, dts, out, cells):
  vals = [parse_value(c, to_dtype(d)) for c, d in zip(cells, dts)]
  operands = [(np.array([v], dtype=NP[d]), d) for v, d in zip(vals, dts)]
  with np.errstate(all="ignore"):
    want, defined = oracle_alu.expected(op, out, operands)
  return vals, want[0].item(), bool(defined[0])


def test_imports_no_code_under_test():
  tree = ast.parse((ROOT / "conformance" / "oracle_alu.py").read_text())
  mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
  mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
  assert not {m for m in mods if m.startswith(("refimpl", "emu", "conformance.catalogue"))}, mods


def test_tables_agree_with_the_independent_oracle():
  """OP.TABLES: each row the oracle defines has the value the oracle gives (a row and numpy disagreeing is a spec or
  oracle bug either way); and the oracle defines most rows."""
  bad, defined_rows = [], 0
  for op, dts, out, cells, result in ROWS:
    _, got, defined = _run(op, dts, out, cells)
    if not defined: continue
    defined_rows += 1
    want = parse_value(result, to_dtype(out))
    got = bool(got) if out == "bool" else int(got) if isinstance(want, int) else float(got)
    if not same_value(got, want): bad.append(f"OP.{op}({', '.join(cells)}) [{dts[-1]} -> {out}]: table {result}, "
                                             f"oracle_alu {got!r}")
  assert not bad, "\n".join(bad)
  assert defined_rows > 0.7 * len(ROWS), (defined_rows, len(ROWS))


@pytest.mark.parametrize("op,region", [(op, r) for op, regions in oracle_alu.UNDEFINED.items() for r in regions])
def test_every_undefined_region_has_table_rows(op, region):
  """Where numpy, torch and C define no value (division by zero, INT_MIN / -1, shift counts outside [0, width),
  integer negative powers, NaN, infinite and out-of-range float -> int, NaN bits), the tables are the oracle: each
  region has a row, and the independent oracle indeed leaves that row undefined."""
  pred = oracle_alu.UNDEFINED[op][region]
  hits = []
  for o, dts, out, cells, result in ROWS:
    if o != op: continue
    vals, _, defined = _run(o, dts, out, cells)
    args = (vals[0], dts[0], out) if op in ("CAST", "BITCAST") else (*vals, dts[-1])
    if pred(*args):
      assert not defined, f"OP.{op}({', '.join(cells)}): in region {region!r} but the oracle defines it"
      hits.append(cells)
  assert hits, f"OP.{op}: no OP.TABLES row in the region {region!r}, where only the table can be the oracle"


def test_nearest_rounds_once():
  """oracle_alu.nearest: the double-rounding traps of OP.CAST and OP.MULACC, and overflow at the midpoint."""
  from fractions import Fraction
  assert oracle_alu.nearest(Fraction(2 ** 60 + 2 ** 52 + 1), "bfloat16") == 2.0 ** 60 + 2.0 ** 53
  assert oracle_alu.nearest(Fraction(65520), "float16") == math.inf
  assert oracle_alu.nearest(Fraction(65519), "float16") == 65504.0
  assert math.copysign(1, oracle_alu.nearest(Fraction(-1, 2 ** 200), "float32")) == -1.0
