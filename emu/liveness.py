"""Free each value of a translated kernel after its last use: a `del` line after the statement that names it last.

A launch's values are numpy arrays over its threads (and a vectorized nest's iterations); the generated function
otherwise holds every one of them until it returns, so each new array is fresh memory, which costs a page fault per
4 kB page: conv2d's 4x3x3 nest (147k-element values of 590 kB) spent 290 us on an int32 add that takes 15 us when
numpy gets a freed block back. Works on the source lines (kernel names are `v<position>`), statement by statement:
a statement with a block (a `for`, an `if` with its `else:`) counts as one, so a value used in a loop is freed after
the loop. Only values assigned once in the range, by a statement of the range's own indentation, are freed."""
from __future__ import annotations

import re
from collections import Counter

_NAME = re.compile(r"\bv\d+\b")
_ASSIGN = re.compile(r"\s*(v\d+) = ")


def _indent(line: str) -> int: return len(line) - len(line.lstrip(" "))


def _statements(lines: list[str], lo: int, hi: int) -> list[list[int]]:
  """[first, last] line of each statement of lines[lo:hi] at the indentation of lines[lo], blocks included."""
  base, out = _indent(lines[lo]), []
  for j in range(lo, hi):
    if _indent(lines[j]) == base and lines[j].strip() != "else:": out.append([j, j])
    else: out[-1][1] = j
  return out


def _dels(lines: list[str], lo: int, hi: int, keep: set[str]) -> list[tuple[int, str]]:
  """(line number, `del` line to put after it) for the values lines[lo:hi] can free; `keep`: names used elsewhere."""
  if lo >= hi: return []
  times = Counter(m.group(1) for line in lines[lo:hi] if (m := _ASSIGN.match(line)))
  last, heads = {}, []
  for a, b in _statements(lines, lo, hi):
    if (m := _ASSIGN.match(lines[a])): heads.append(m.group(1))
    for j in range(a, b + 1):
      for n in _NAME.findall(lines[j]): last[n] = b
  dead: dict[int, list[str]] = {}
  for n in heads:
    if times[n] == 1 and n not in keep: dead.setdefault(last[n], []).append(n)
  pad = " " * _indent(lines[lo])
  return [(j, f"{pad}del {', '.join(sorted(ns))}") for j, ns in dead.items()]


def free_dead_values(lines: list[str], regions: list[tuple[int, int, int]]) -> list[str]:
  """`lines`: the kernel's body; `regions`: (from, to, fallback_to) line numbers of each vectorized region, whose
  lines from..to-1 are straight-line code and to..fallback_to-1 its Python-loop form (the same names again). The
  regions' values are freed inside them (unless named outside the region), then the top level's."""
  out = list(lines)
  for lo, hi, end in sorted(regions, reverse=True):   # last region first: earlier line numbers stay valid
    keep = set(_NAME.findall("\n".join(out[:lo] + out[end:])))
    for j, d in sorted(_dels(out, lo, hi, keep), reverse=True): out.insert(j + 1, d)
  for j, d in sorted(_dels(out, 0, len(out), set()), reverse=True): out.insert(j + 1, d)
  return out
