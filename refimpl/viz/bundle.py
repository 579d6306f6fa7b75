"""A VIZ bundle (DEV.VIZ.bundle): what a recorder captured, as one JSON file the explorer reads, with the prose of
every clause its steps cite taken from spec/ when the file is written, so the bundle stands alone.

The file lists groups (schedules, kernels, other rewrites); each group has `views`, the pages the explorer steps
through in compile order: graphs (a kernel's AST, a schedule's tensor graph and kernels), rewrites (each graph_rewrite,
with its steps and the stage it belongs to) and texts (a kernel's linear program and source)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
# the stage of the compiler each named graph_rewrite belongs to (spec/kernels.md: lowering, symbolic rules,
# optimisation, linearizer, renderer); a rewrite not named here is shown under its own name
STAGE_OF_REWRITE = {"lower": "symbolic", "shared axes": "optimisation", "drop true gates": "optimisation",
                    "reduce_to_register": "linearize"}
# the clauses a view that is not a rule application stands for
VIEW_CLAUSES = {"ast": "UOP.SINK", "tensor graph": "UOP.SINK", "kernels": "EXEC.ORDER.device",
                "program": "EXEC.PROGRAM", "source": "DEV.C"}
SOURCE_CLAUSES = {"CL": "DEV.CL", "CUDA": "DEV.CUDA"}   # the source of another device is C (DEV.C)
def op_kinds() -> dict[str, str]:
  """The colour class of every op (the seeds' walkthrough: find the elementwise, reduce and loop nodes)."""
  from refimpl.uop import GroupOp, Ops
  kinds = {"reduce": {Ops.REDUCE, Ops.REDUCE_AXIS, Ops.DEFINE_REG}, "loop": {Ops.RANGE, Ops.END, Ops.SPECIAL},
           "memory": {Ops.LOAD, Ops.STORE, Ops.INDEX, Ops.BUFFER, Ops.ASSIGN, Ops.COPY} | GroupOp.Buffer,
           "movement": set(GroupOp.Movement), "const": {Ops.CONST, Ops.DEFINE_VAR, Ops.BIND},
           "elementwise": set(GroupOp.Elementwise)}
  return {op.name: next((k for k, ops in kinds.items() if op in ops), "other") for op in Ops}


_CLAUSE_LINE = re.compile(r"^\s*(#+|[-*]|\|)\s+`([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_\-]+)+)`")
PROSE_CHARS = 1500


def spec_clauses(spec_dir: Path = SPEC_DIR) -> dict[str, dict]:
  """Every clause of spec/*.md: ID -> {file, line, text}. The text is the clause's own lines: a bullet or table row
  with its continuation lines, or a heading with the paragraphs under it up to the next clause."""
  out: dict[str, dict] = {}
  for path in sorted(spec_dir.glob("*.md")):
    lines = path.read_text().splitlines()
    section = ""
    for i, line in enumerate(lines):
      if line.startswith("#"): section = line
      m = _CLAUSE_LINE.match(line)
      if m is None: continue
      heading = m.group(1).startswith("#")
      text = [line]
      if m.group(1) == "|":   # a table row: under its section's heading and the table's header row
        top = i
        while top > 0 and lines[top - 1].lstrip().startswith("|"): top -= 1
        text = [section, "", lines[top], line]
      for nxt in lines[i + 1:]:
        if _CLAUSE_LINE.match(nxt) or nxt.startswith("#"): break
        if not heading and (not nxt.strip() or nxt.lstrip().startswith(("- ", "| "))): break
        text.append(nxt)
      prose = "\n".join(text).strip()
      out.setdefault(m.group(2), {"file": f"spec/{path.name}", "line": i + 1,
                                  "text": prose if len(prose) <= PROSE_CHARS else prose[:PROSE_CHARS] + " ..."})
  return out


def _views(group: dict) -> list[dict]:
  """The pages of one group, in compile order."""
  views = [{"kind": "graph", "title": label, "stage": "schedule" if group["kind"] == "schedule" else "lowering",
            "clause": VIEW_CLAUSES.get(label), "graph": g} for label, g in group["graphs"].items()]
  for r in group["rewrites"]:
    stage = STAGE_OF_REWRITE.get(r["name"], r["name"])
    views.append({"kind": "rewrite", "title": f"{stage}: {r['name']}", "stage": stage, "rewrite": r})
  for label, text in group["texts"].items():
    clause = VIEW_CLAUSES.get(label)
    if label == "source": clause = SOURCE_CLAUSES.get(str(group["info"].get("device", "")).partition(":")[0], clause)
    views.append({"kind": "text", "title": label, "stage": "linearize" if label == "program" else "render",
                  "clause": clause, "text": text})
  return views


def bundle(recorded: dict, program: str = "", spec_dir: Path = SPEC_DIR) -> dict:
  """The bundle of a recorder's `to_json()`: its groups with their views, and the prose of the clauses they cite."""
  groups = [{"kind": g["kind"], "name": g["name"], "info": g["info"], "views": _views(g)} for g in recorded["groups"]]
  cited = {s["clause"] for g in recorded["groups"] for r in g["rewrites"] for s in r["steps"] if s["clause"]}
  cited |= {v["clause"] for g in groups for v in g["views"] if v.get("clause")}
  known = spec_clauses(spec_dir) if spec_dir.is_dir() else {}
  notes = []
  if not known: notes.append(f"spec/ was not found beside the package ({spec_dir}): clause prose is missing")
  if recorded["cut_rewrites"]:
    notes.append(f"capture cut (DEV.VIZ.cap): {recorded['cut_rewrites']} graph_rewrites, graphs or groups after the "
                 f"first {recorded['max_bytes'] / 2 ** 20:g} MiB of records were not recorded")
  cut_steps = sum(r["cut"] for g in recorded["groups"] for r in g["rewrites"])
  if cut_steps:
    notes.append(f"capture cut (DEV.VIZ.cap): {cut_steps} rule applications beyond {recorded['max_steps']} per "
                 "graph_rewrite were not recorded")
  return {"format": "tinyspec-viz 1", "program": program, "groups": groups, "notes": notes, "op_kinds": op_kinds(),
          "clauses": {c: known.get(c) for c in sorted(cited)}}


def write(recorded: dict, directory: str | os.PathLike, name: str = "trace", program: str = "") -> Path:
  """Write the bundle of `recorded` as DIRECTORY/NAME.viz.json (made atomically: a reader never sees half a file)."""
  directory = Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  path = directory / f"{name}.viz.json"
  tmp = path.with_suffix(f".{os.getpid()}.tmp")
  tmp.write_text(json.dumps(bundle(recorded, program), separators=(",", ":")))
  os.replace(tmp, path)
  return path
