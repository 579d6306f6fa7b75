"""Grading contributed ops: `python -m conformance grade path/to/ops.py [--backend PYTHON] [--profile ci] [--out DIR]`.

Loads the file (its `@conformance.contrib.op` declarations register the ops), runs every property that applies to
each op on each chosen backend with hypothesis, prints a markdown scorecard, writes DIR/scorecard.json and
DIR/scorecard.md when --out is given, and exits 1 when a required property fails (every property is required: forward
in each dtype; for differentiable ops also the VJP in each float dtype and finite differences in float64; second
order where the declaration asks for it).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable

from hypothesis import given, settings, strategies as st

from conformance import accuracy as A
from conformance import contrib, properties
from conformance.adapters.base import Adapter, compiled, load_adapter
from conformance.plugin import DEFAULT_IMPL  # importing the plugin registers the hypothesis profiles

__all__ = ["main", "grade", "load_contributions", "ContribAdapter"]

SEEDS = st.integers(0, 2 ** 32 - 1)


def load_contributions(path: str | Path) -> list[contrib.Contribution]:
  """Import the contribution file and return the ops it declared."""
  path = Path(path).resolve()
  before = len(contrib.REGISTRY)
  spec = importlib.util.spec_from_file_location(path.stem, path)
  if spec is None or spec.loader is None: raise ValueError(f"cannot import {path}")
  module = importlib.util.module_from_spec(spec)
  sys.modules[path.stem] = module
  spec.loader.exec_module(module)
  found = contrib.REGISTRY[before:]
  if not found: raise ValueError(f"{path} declares no op (decorate functions with @conformance.contrib.op)")
  return found


class ContribAdapter:
  """An adapter with the contributed functions in scope: calls evaluate in the inner adapter's namespace plus the
  functions, and reproductions import them from the contribution file. Everything else is the inner adapter's."""

  def __init__(self, inner: Adapter, path: Path, functions: dict[str, Callable]):
    self._inner, self._path, self._functions = inner, path, functions

  def __getattr__(self, name: str) -> Any:
    return getattr(self._inner, name)

  def evaluate(self, expr: str, inputs: dict[str, Any], params: dict[str, Any]) -> Any:
    namespace = {"__builtins__": __builtins__, **self._inner.namespace(), **self._functions}
    return eval(compiled(expr), namespace, {**params, **inputs})   # noqa: S307 (the contribution's call)

  def repro_prelude(self) -> list[str]:
    inner = properties.adapter_prelude(self._inner)
    names = ", ".join(sorted(self._functions))
    return [*inner, f"import sys; sys.path.insert(0, {str(self._path.parent)!r})",
            f"from {self._path.stem} import {names}"]


def _properties(entry) -> list[tuple[str, str, Callable]]:
  """(property, dtype, run(adapter, data) -> Outcome) for every property that applies to the entry."""
  out = []
  for dt in entry.domain.dtypes:
    out.append(("forward", dt, lambda ad, data, dt=dt: properties.forward(
      ad, entry, data.draw(entry.cases(dt), label="case"), dt)))
  if entry.differentiable:
    for dt in (d for d in entry.domain.dtypes if A.is_float(d)):
      out.append(("vjp", dt, lambda ad, data, dt=dt: properties.vjp(
        ad, entry, data.draw(entry.cases(dt), label="case"), dt, data.draw(SEEDS, label="seed"))))
    out.append(("fd", "float64", lambda ad, data: properties.finite_differences(
      ad, entry, data.draw(entry.cases("float64", smooth=True), label="case"), data.draw(SEEDS, label="seed"))))
    if entry.second_order:
      out.append(("second_order", "float64", lambda ad, data: properties.second_order(
        ad, entry, data.draw(entry.cases("float64", smooth=True), label="case"), "float64",
        data.draw(SEEDS, label="seed"))))
  return out


def _run(adapter, run: Callable, profile: str) -> dict[str, Any]:
  """Run one property under hypothesis: pass or fail, examples, worst ULPs and the failure's message."""
  worst, examples = [0.0], [0]

  @settings(settings.get_profile(profile))
  @given(data=st.data())
  def check(data):
    outcome = run(adapter, data)
    examples[0] += 1
    if outcome.ok: worst[0] = max(worst[0], outcome.worst_ulps)
    assert outcome.ok, outcome.message
  try: check()
  except AssertionError as e:
    return {"status": "fail", "examples": examples[0], "worst_ulps": None, "failure": str(e).split("\nFalsifying")[0]}
  return {"status": "pass", "examples": examples[0], "worst_ulps": worst[0], "failure": None}


def grade(path: str | Path, backends: list[str], impl: str = DEFAULT_IMPL, profile: str = "ci") -> dict[str, Any]:
  """The scorecard of the contribution file on each backend: one row per (op, backend, property, dtype)."""
  path = Path(path).resolve()
  found = load_contributions(path)
  functions = {c.fn.__name__: c.fn for c in found}
  rows = []
  for backend in backends:
    adapter = ContribAdapter(load_adapter(impl, backend), path, functions)
    for c in found:
      for prop, dt, run in _properties(c.entry):
        skip = adapter.unsupported_dtype(dt)
        result = {"status": "skip", "examples": 0, "worst_ulps": None, "failure": skip} if skip else \
          _run(adapter, run, profile)
        rows.append({"op": c.entry.name, "backend": backend, "property": prop, "dtype": dt, "required": not skip,
                     **result})
  ok = all(r["status"] != "fail" for r in rows if r["required"])
  return {"file": str(path), "impl": impl, "profile": profile, "ok": ok, "results": rows}


def markdown(card: dict[str, Any]) -> str:
  """The scorecard as a markdown table, then each failure with its reproduction."""
  lines = [f"# Conformance scorecard: {Path(card['file']).name}", "",
           f"impl {card['impl']}, hypothesis profile {card['profile']}: **{'PASS' if card['ok'] else 'FAIL'}**", "",
           "| op | backend | property | dtype | result | examples | worst ULPs |", "|---|---|---|---|---|---|---|"]
  for r in card["results"]:
    worst = "-" if r["worst_ulps"] is None else f"{r['worst_ulps']:.3g}"
    lines.append(f"| {r['op']} | {r['backend']} | {r['property']} | {r['dtype']} | {r['status']} | {r['examples']} "
                 f"| {worst} |")
  for r in card["results"]:
    if r["status"] == "fail":
      lines += ["", f"## FAIL: {r['op']} {r['property']} {r['dtype']} on {r['backend']}", "", "```", r["failure"],
                "```"]
  return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
  """The `grade` command line; returns the exit status."""
  ap = argparse.ArgumentParser(prog="python -m conformance grade", description=__doc__.split("\n\n")[0])
  ap.add_argument("path", help="the contribution: a Python file with @conformance.contrib.op declarations")
  ap.add_argument("--backend", action="append", help="backend to run on (repeatable; default PYTHON)")
  ap.add_argument("--impl", default=DEFAULT_IMPL, help="adapter as module:Class")
  ap.add_argument("--profile", default="ci", choices=("ci", "dev", "thorough"), help="hypothesis profile")
  ap.add_argument("--out", help="directory for scorecard.json and scorecard.md")
  args = ap.parse_args(argv)
  card = grade(args.path, [b.upper() for b in args.backend or ["PYTHON"]], args.impl, args.profile)
  text = markdown(card)
  print(text)
  if args.out:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scorecard.json").write_text(json.dumps(card, indent=1))
    (out / "scorecard.md").write_text(text)
  return 0 if card["ok"] else 1
