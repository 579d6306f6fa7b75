"""The scoreboard of several runs (`tinyspec scoreboard DIR1 DIR2 ...`): the --report-dir reports merged
(CONF.REPORT.merge) and shown as one markdown table, a row per op, dtype and property, a column per run (its backend,
or implementation/backend), each cell the tests passed of those run and the worst error as a fraction of its bound
(CONF.REPORT.fraction: 0 exact, 1 at the bound)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.report import _read_report, merge_runs

__all__ = ["read_runs", "scoreboard_markdown"]


def read_runs(dirs: list[str]) -> dict[str, Any]:
  """DIR/conformance.json of each run directory, merged into one report."""
  return merge_runs([_read_report(Path(d) / "conformance.json") for d in dirs], list(dirs))


def _cell(row: dict[str, Any] | None) -> str:
  if row is None: return "-"
  ran = row["pass"] + row["fail"] + row["xfail"]
  if not ran: return "skip"
  worst = row.get("worst_fraction")
  verdict = f"{row['pass']}/{ran}" + (f" ({row['xfail']} xfail)" if row["xfail"] else "")
  return verdict + (" crash" if worst is None else f" {worst:.2g}")


def _add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
  """Two rows of one run label (shards of one run) as one: counts add up, the worst error is the larger (None, a
  crash, the largest)."""
  wa, wb = a.get("worst_fraction"), b.get("worst_fraction")
  return {**a, **{k: a[k] + b[k] for k in ("pass", "fail", "xfail", "skip")},
          "worst_fraction": None if wa is None or wb is None else max(wa, wb)}


def scoreboard_markdown(merged: dict[str, Any]) -> str:
  """The merged report's rows (op, dtype, property) against its runs, as a markdown table."""
  labels = [r["label"] for r in merged["runs"]]
  cells: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
  for row in merged["results"]:
    by_run = cells.setdefault((row["op"], row["dtype"], row["property"]), {})
    by_run[row["run"]] = _add(by_run[row["run"]], row) if row["run"] in by_run else row
  lines = ["# Conformance scoreboard", "",
           "Tests passed / run in each run, then the worst error as a fraction of its bound (0 exact, 1 at the bound; "
           "crash: a failure with no measured error).", "",
           "| op | dtype | property | " + " | ".join(labels) + " |", "|---|---|---|" + "---|" * len(labels)]
  for (op, dtype, prop), by_run in sorted(cells.items()):
    lines.append(f"| {op} | {dtype} | {prop} | " + " | ".join(_cell(by_run.get(label)) for label in labels) + " |")
  return "\n".join(lines) + "\n"
