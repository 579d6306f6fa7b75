"""The scoreboard of one or more conformance runs (CONF.REPORT.scoreboard): a table of op x dtype (rows) by run x
property (columns), each cell the verdict of those tests and, where they passed, the worst error as a fraction of
its bound (CONF.REPORT.fraction). Written as OUT/scoreboard.md and as one static page OUT/scoreboard.html (inline CSS,
no script, nothing fetched), whose cells are coloured by that fraction or verdict and whose failing cells link to the
failures' reproductions further down the page.

    from conformance.scoreboard import write_scoreboard
    write_scoreboard(["reports/python", "reports/cpu"], "reports/all")   # run directories, or reports as dicts

`python -m conformance merge DIR1 DIR2 ... -o OUT` writes it next to the merged conformance.json.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable

from conformance.report import _read_report, _worse, merge_runs

__all__ = ["write_scoreboard", "load_merged", "scoreboard_cells", "scoreboard_markdown", "scoreboard_html"]

_COUNTS = ("pass", "fail", "xfail", "skip")
_SHADES = 10   # passing cells: 10 shades from green (an exact result) to amber (at the bound)


def load_merged(source: Any) -> dict[str, Any]:
  """A merged report from: a merged report, one run's report, a list of reports, or run directories / files."""
  if isinstance(source, dict):
    return source if source.get("kind") == "merged" or "runs" in source else merge_runs([source])
  items = [source] if isinstance(source, (str, Path)) else list(source)
  reports, names = [], []
  for item in items:
    if isinstance(item, dict): reports.append(item); names.append(None); continue
    path = Path(item)
    path = path / "conformance.json" if path.is_dir() else path
    reports.append(_read_report(path))
    names.append(str(item))
  if len(reports) == 1 and reports[0].get("kind") == "merged": return reports[0]
  return merge_runs(reports, names if all(names) else None)


def scoreboard_cells(merged: dict[str, Any]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
  """(op, dtype, property, run) -> the counts, the worst fraction and ULPs, and the failures of those tests. A test
  without a catalogue entry (its record keyed by its id, its property by its function) counts as op = its test
  function, property "test", so that such tests share one column."""
  cells: dict[tuple[str, str, str, str], dict[str, Any]] = {}
  for row in merged["results"]:
    op = row["op"].split("[")[0]
    prop = "test" if op == row["property"] else row["property"]
    key = (op, row.get("dtype", ""), prop, row.get("run", ""))
    cell = cells.setdefault(key, {**dict.fromkeys(_COUNTS, 0), "worst_fraction": 0.0, "worst_ulps": 0.0,
                                  "failures": []})
    for k in _COUNTS: cell[k] += row.get(k, 0)
    for k in ("worst_fraction", "worst_ulps"): cell[k] = _worse(cell[k], row.get(k, 0.0))
    cell["failures"] += row.get("failures", [])
  return cells


def _verdict(cell: dict[str, Any]) -> str:
  """fail, xfail, pass or skip: the worst verdict among the cell's tests."""
  return next(k for k in ("fail", "xfail", "pass", "skip") if cell[k]) if any(cell[k] for k in _COUNTS) else "skip"


def _fraction_text(f: float | None) -> str:
  return "inf" if f is None else f"{f:.2g}" if f else "0"


def _cell_text(cell: dict[str, Any]) -> str:
  """What a cell shows: FAIL / xfail / skip, or the worst fraction of the bound of its passing tests."""
  v = _verdict(cell)
  return {"fail": "FAIL", "xfail": "xfail", "skip": "skip"}.get(v) or _fraction_text(cell["worst_fraction"])


def _layout(merged: dict[str, Any]):
  """The cells, the runs in order, the properties in order, the (op, dtype) rows sorted, and a number for each
  failing cell (its anchor in the page)."""
  cells = scoreboard_cells(merged)
  runs = list(dict.fromkeys(r["label"] for r in merged["runs"]))
  props = sorted({k[2] for k in cells})
  rows = sorted({(k[0], k[1]) for k in cells})
  failing = {k: i + 1 for i, k in enumerate(sorted(k for k, c in cells.items() if c["fail"]))}
  return cells, runs, props, rows, failing


def _columns(cells, runs: list[str], props: list[str]) -> list[tuple[str, str]]:
  """(run, property) pairs that have at least one cell: a property that a run never tested takes no column."""
  present = {(k[3], k[2]) for k in cells}
  return [(r, p) for r in runs for p in props if (r, p) in present]


def _run_line(run: dict[str, Any]) -> str:
  """One run in words: label, implementation and version, backend, when, how long, at which commit."""
  meta = run.get("meta") or {}
  impl = meta.get("impl", {})
  commit = ((meta.get("git") or {}).get("suite") or {}).get("commit")
  parts = [f"{run['label']}: {run['impl']}"]
  if impl.get("version"): parts.append(f"version {impl['version']}")
  if meta.get("started"): parts.append(f"started {meta['started']} ({meta.get('duration_s', 0):.0f} s)")
  if meta.get("hypothesis"): parts.append(f"profile {meta['hypothesis'].get('profile')}")
  if commit: parts.append(f"tinyspec {commit[:12]}")
  if meta.get("shard"): parts.append(f"shard {meta['shard']}")
  return ", ".join(parts)


def scoreboard_markdown(merged: dict[str, Any]) -> str:
  """The scoreboard as a markdown table, with the failures' reproductions after it."""
  cells, runs, props, rows, failing = _layout(merged)
  cols = _columns(cells, runs, props)
  lines = ["# Conformance scoreboard", "", "Each cell: the worst error of the passing tests as a fraction of its bound "
           "(0 exact, 1 at the bound), or the worst verdict (FAIL, xfail, skip). Runs:", ""]
  lines += [f"- {_run_line(r)}" for r in merged["runs"]] + [""]
  lines.append("| op | dtype | " + " | ".join(f"{p} {r}" for r, p in cols) + " |")
  lines.append("|---|---|" + "---|" * len(cols))
  for op, dtype in rows:
    out = []
    for r, p in cols:
      cell = cells.get((op, dtype, p, r))
      if cell is None: out.append(""); continue
      text = _cell_text(cell)
      out.append(f"[{text}](#fail-{failing[(op, dtype, p, r)]})" if cell["fail"] else text)
    lines.append(f"| `{op}` | {dtype or '-'} | " + " | ".join(out) + " |")
  lines += ["", f"## Failures ({len(failing)})", ""]
  for key, n in failing.items():
    op, dtype, p, r = key
    lines += [f'<a id="fail-{n}"></a>', "", f"### {n}. {op} {dtype} {p} on {r}", ""]
    for f in cells[key]["failures"]:
      lines += [f"`{f['test']}`", "", "```", f.get("reproduction") or "", "```", ""]
  return "\n".join(lines)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table.scoreboard { border-collapse: collapse; font-size: 13px; }
table.scoreboard th, table.scoreboard td { border: 1px solid #bbb; padding: 2px 6px; text-align: center; }
table.scoreboard thead th { position: sticky; top: 0; background: #eee; }
table.scoreboard td.op { text-align: left; font-family: monospace; }
td.fail { background: #e53935; color: #fff; font-weight: bold; } td.fail a { color: #fff; }
td.xfail { background: #b39ddb; } td.skip { background: #e0e0e0; color: #666; } td.none { background: #fafafa; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 8px; overflow-x: auto; }
"""


def _shade_css() -> str:
  """Classes p0..p10 for passing cells: hue 120 (green, exact) down to 45 (amber, at the bound)."""
  return "\n".join(f"td.p{i} {{ background: hsl({120 - 75 * i / _SHADES:.0f}, 65%, {85 - 15 * i / _SHADES:.0f}%); }}"
                   for i in range(_SHADES + 1))


def _shade(f: float | None) -> int:
  return _SHADES if f is None else min(_SHADES, round(max(f, 0.0) * _SHADES))


def _html_cell(cell: dict[str, Any] | None, n: int | None) -> str:
  if cell is None: return '<td class="none"></td>'
  v = _verdict(cell)
  ulps = "inf" if cell["worst_ulps"] is None else f"{cell['worst_ulps']:.3g}"
  title = html.escape(", ".join(f"{k} {cell[k]}" for k in _COUNTS if cell[k]) +
                      f"; worst/bound {_fraction_text(cell['worst_fraction'])}, worst ULPs {ulps}")
  cls = f"p{_shade(cell['worst_fraction'])}" if v == "pass" else v
  text = html.escape(_cell_text(cell))
  if n is not None: text = f'<a href="#fail-{n}">{text}</a>'
  return f'<td class="{cls}" title="{title}">{text}</td>'


def scoreboard_html(merged: dict[str, Any]) -> str:
  """The scoreboard as one self-contained HTML page: inline CSS, no script, no external resource."""
  cells, runs, props, rows, failing = _layout(merged)
  cols = _columns(cells, runs, props)
  e = html.escape
  out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', "<title>Conformance scoreboard</title>",
         f"<style>{_CSS}{_shade_css()}</style></head><body>", "<h1>Conformance scoreboard</h1>", "<ul>"]
  out += [f"<li>{e(_run_line(r))}</li>" for r in merged["runs"]] + ["</ul>"]
  legend = "".join(f'<td class="p{i}">{i / _SHADES:g}</td>' for i in range(0, _SHADES + 1, 2))
  out += ["<p>Each cell: the worst error of the passing tests as a fraction of its bound (0 exact, 1 at the bound), "
          "or the worst verdict; a FAIL links to its reproductions below.</p>",
          f'<table class="scoreboard legend"><tr>{legend}<td class="xfail">xfail</td><td class="fail">FAIL</td>'
          '<td class="skip">skip</td></tr></table><br>']
  out.append('<table class="scoreboard" id="scoreboard"><thead><tr><th rowspan="2">op</th><th rowspan="2">dtype</th>')
  for r in runs:
    span = sum(1 for c in cols if c[0] == r)
    if span: out.append(f'<th colspan="{span}">{e(r)}</th>')
  out.append("</tr><tr>" + "".join(f"<th>{e(p)}</th>" for _, p in cols) + "</tr></thead><tbody>")
  for op, dtype in rows:
    tds = "".join(_html_cell(cells.get((op, dtype, p, r)), failing.get((op, dtype, p, r))) for r, p in cols)
    out.append(f'<tr><td class="op">{e(op)}</td><td>{e(dtype or "-")}</td>{tds}</tr>')
  out += ["</tbody></table>", f"<h2>Failures ({len(failing)})</h2>"]
  for key, n in failing.items():
    op, dtype, p, r = key
    out.append(f'<h3 id="fail-{n}">{n}. {e(op)} {e(dtype)} {e(p)} on {e(r)}</h3>')
    for f in cells[key]["failures"]:
      out.append(f"<p><code>{e(f['test'])}</code></p><pre>{e(f.get('reproduction') or '')}</pre>")
  out.append("</body></html>")
  return "\n".join(out)


def write_scoreboard(source: dict[str, Any] | Iterable[Any] | str | Path, out_dir: str | Path) -> dict[str, Path]:
  """Write OUT/scoreboard.md and OUT/scoreboard.html for `source`: a merged report (conformance/report.py
  merge_runs), one run's report, a list of reports, or run directories (each with a conformance.json) or report
  files. Returns the paths written, by format."""
  merged = load_merged(source)
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  paths = {"md": out / "scoreboard.md", "html": out / "scoreboard.html"}
  paths["md"].write_text(scoreboard_markdown(merged))
  paths["html"].write_text(scoreboard_html(merged))
  return paths
