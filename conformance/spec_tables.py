"""Read clause IDs and machine-readable tables out of the spec's markdown (spec/*.md).

A clause is a heading, bullet or table row whose first token is a backticked ID such as `OP.CDIV` or
`OP.CDIV.zero`. A table belongs to the nearest clause heading above it. Edge-case tables (OP.TABLES in spec/ops.md)
have one of the headers in EDGE_HEADERS; `parse_value` reads their cells, tokens included.
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Iterator

from refimpl.dtype import ConstType, DType, dtypes, float_max

__all__ = ["CLAUSE_ID", "EDGE_HEADERS", "clauses", "tables", "edge_tables", "parse_value", "same_value"]

CLAUSE_ID = re.compile(r"[A-Z][A-Z0-9_]*(\.[A-Za-z0-9_\-]+)+")
EDGE_HEADERS = (("dtype", "operands", "result"), ("from", "to", "operand", "result"))
_CLAUSE_LINE = re.compile(r"^\s*(#+|[-*]|\|)\s+`([^`]+)`")  # heading/bullet/table row, backticked ID first


def _markdown_files(path: str | Path) -> list[Path]:
  path = Path(path)
  return sorted(path.rglob("*.md")) if path.is_dir() else [path]


def _clause_at(line: str) -> tuple[str, bool] | None:
  """(clause ID, is_heading) if `line` opens a clause, else None."""
  m = _CLAUSE_LINE.match(line)
  if m is None or not CLAUSE_ID.fullmatch(m.group(2)): return None
  return m.group(2), m.group(1).startswith("#")


def clauses(path: str | Path) -> dict[str, tuple[str, int]]:
  """Every clause ID defined in the markdown file (or directory of files) `path`, mapped to (file, 1-based line).
  An ID defined twice is a broken spec: ValueError names both places."""
  found: dict[str, tuple[str, int]] = {}
  for f in _markdown_files(path):
    for lineno, line in enumerate(f.read_text().splitlines(), 1):
      if (c := _clause_at(line)) is None: continue
      if c[0] in found: raise ValueError(f"clause {c[0]} defined twice: {found[c[0]]} and {(str(f), lineno)}")
      found[c[0]] = (str(f), lineno)
  return found


def _cells(line: str) -> tuple[str, ...]:
  """A table row's cells; `\\|` is a literal pipe inside a cell (as GitHub markdown writes it)."""
  inner = line.strip().removeprefix("|").removesuffix("|")
  return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


def tables(path: str | Path) -> Iterator[tuple[str | None, tuple[str, ...], list[tuple[str, ...]]]]:
  """Every markdown table in `path` as (clause ID of the nearest heading above it or None, header cells, rows of
  cells). The separator row under the header is dropped."""
  for f in _markdown_files(path):
    clause, block = None, []
    for line in [*f.read_text().splitlines(), ""]:
      if line.lstrip().startswith("|"):
        block.append(_cells(line))
        continue
      if block: yield clause, block[0], [r for r in block[1:] if not all(set(c) <= set("-: ") for c in r)]
      block = []
      if (c := _clause_at(line)) is not None and c[1]: clause = c[0]


def edge_tables(path: str | Path) -> Iterator[tuple[str | None, tuple[str, ...], list[tuple[str, ...]]]]:
  """The edge-case tables of `path` (OP.TABLES): those whose header is one of EDGE_HEADERS."""
  return ((c, h, rows) for c, h, rows in tables(path) if h in EDGE_HEADERS)


def _token(name: str, dt: DType) -> ConstType:
  """The value of an OP.TABLES token (nan, inf, max, min, tiny) in dtype `dt`."""
  is_float = dtypes.is_float(dt)
  if name == "nan" and is_float: return math.nan
  if name == "inf" and is_float: return math.inf
  if name == "max": return float_max(dt) if is_float else dtypes.max(dt)
  if name == "min": return -float_max(dt) if is_float else dtypes.min(dt)
  if name == "tiny" and is_float:
    ebits, mbits = dtypes.finfo(dt)
    return math.ldexp(1.0, 2 - (1 << (ebits - 1)) - mbits)   # 2**(emin - mbits)
  raise ValueError(f"OP.TABLES: token {name!r} has no value in {dt!r}")


def parse_value(cell: str, dt: DType) -> ConstType:
  """The value a table cell stands for in dtype `dt` (OP.TABLES): a Python literal or a token with an optional
  leading '-'. An int literal in a float column means the equal float. Raises ValueError for anything else."""
  text = cell.strip()
  neg, name = (True, text[1:]) if text.startswith("-") else (False, text)
  if name in ("nan", "inf", "max", "min", "tiny"):
    v = _token(name, dt)
    return -v if neg else v
  v = ast.literal_eval(text)
  if dtypes.is_float(dt) and type(v) is int:
    if float(v) != v: raise ValueError(f"OP.TABLES: {text} is not exactly a float")
    v = float(v)
  if type(v) not in (bool, int, float): raise ValueError(f"OP.TABLES: {text!r} is not a number or bool")
  return v


def same_value(got: ConstType, want: ConstType) -> bool:
  """Equality of the value model (OP.VALUES): same kind of value, NaN matches NaN, -0.0 differs from 0.0."""
  if type(got) is not type(want): return False
  if isinstance(want, float):
    if math.isnan(want): return math.isnan(got)
    return got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
  return got == want
