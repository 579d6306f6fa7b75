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
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any, Callable

from hypothesis import given, settings, strategies as st

from conformance import accuracy as A
from conformance import contrib, properties
from conformance.adapters.base import Adapter, compiled, load_adapter
from conformance.plugin import DEFAULT_IMPL  # importing the plugin registers the hypothesis profiles

__all__ = ["main", "grade", "load_contributions", "ContribAdapter"]

SEEDS = st.integers(0, 2 ** 32 - 1)
DEFAULT_TIMEOUT = 600.0   # CONF.GRADE.timeout: seconds per op and backend (softsign takes about 10 s with ci)
STARTUP_LIMIT = 600.0     # seconds for a grading process to import the grader and make its adapter


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
  """Run one property under hypothesis: pass or fail, examples, worst ULPs and the failure's message. The message is
  the failing Outcome's own (the last one hypothesis saw, which after shrinking is the minimal example), not text
  taken apart from hypothesis' report."""
  worst, examples, failed = [0.0], [0], []

  @settings(settings.get_profile(profile))
  @given(data=st.data())
  def check(data):
    outcome = run(adapter, data)
    examples[0] += 1
    if not outcome.ok:
      failed.append(outcome.message)
      raise AssertionError(outcome.message)
    worst[0] = max(worst[0], outcome.worst_ulps)
  try: check()
  except Exception as e:   # noqa: BLE001 - a failing property, or the property itself raising (a grader error)
    failure = failed[-1] if failed else f"{type(e).__name__}: {e}"
    return {"status": "fail", "examples": examples[0], "worst_ulps": None, "failure": failure}
  return {"status": "pass", "examples": examples[0], "worst_ulps": worst[0], "failure": None}


def _grade_one(conn, path: str, index: int, backend: str, impl: str, profile: str) -> None:
  """The child process of `_grade_op`: grade contribution number `index` of the file on `backend`, sending ("ready",)
  once the adapter is made, then ("row", result) after each property, in `_properties` order."""
  found = load_contributions(path)
  c = found[index]
  adapter = ContribAdapter(load_adapter(impl, backend), Path(path), {f.fn.__name__: f.fn for f in found})
  conn.send(("ready",))
  for prop, dt, run in _properties(c.entry):
    skip = adapter.unsupported_dtype(dt)
    result = {"status": "skip", "examples": 0, "worst_ulps": None, "failure": skip} if skip else \
      _run(adapter, run, profile)
    conn.send(("row", {**result, "required": not skip}))
  conn.close()


def _grade_op(path: Path, index: int, entry, backend: str, impl: str, profile: str, timeout: float) -> list[dict]:
  """CONF.GRADE.timeout: the rows of one contributed op on one backend, graded in a child process that gets
  `timeout` seconds in all (0: no limit). A process, not a thread or an alarm: a hung op (a Python loop, a kernel that
  never returns, a lock never released) is ended by killing the process, which leaves this one's state, and the
  other ops' results, untouched. Spawned, not forked: a fork copies the CPU device's worker threads and torch's
  thread pool in whatever state they are."""
  props = [(prop, dt) for prop, dt, _ in _properties(entry)]
  rows: list[dict] = []
  ctx = multiprocessing.get_context("spawn")
  parent, child = ctx.Pipe(duplex=False)
  proc = ctx.Process(target=_grade_one, args=(child, str(path), index, backend, impl, profile), daemon=True)
  proc.start()
  child.close()
  # the op's clock starts once the child has imported everything and made its adapter: start-up (seconds on a loaded
  # machine) is not the op's time
  ready, deadline, why = False, time.monotonic() + STARTUP_LIMIT, None
  while len(rows) < len(props):
    if not parent.poll(None if deadline is None else max(0.0, deadline - time.monotonic())):
      why = f"timed out after {timeout:g} s (CONF.GRADE.timeout: the op's limit on {backend}; --timeout changes it)" \
        if ready else f"the grading process did not start within {STARTUP_LIMIT:g} s"
      break
    try: kind, *msg = parent.recv()
    except EOFError:
      proc.join(timeout=10)
      why = f"the grading process died (exit code {proc.exitcode})"
      break
    if kind == "ready": ready, deadline = True, (time.monotonic() + timeout if timeout > 0 else None)
    if kind == "row": rows.append(msg[0])
  if proc.is_alive(): proc.kill()
  proc.join(timeout=10)
  parent.close()
  out = [{"op": entry.name, "backend": backend, "property": p, "dtype": d, **r} for (p, d), r in zip(props, rows)]
  for k, (p, d) in enumerate(props[len(rows):]):   # the property that hung, then those that never ran
    failure = why if k == 0 else f"not run: an earlier property of the op ended its grading ({why.split(' (')[0]})"
    out.append({"op": entry.name, "backend": backend, "property": p, "dtype": d, "required": True, "status": "fail",
                "examples": 0, "worst_ulps": None, "failure": failure})
  return out


def grade(path: str | Path, backends: list[str], impl: str = DEFAULT_IMPL, profile: str = "ci",
          timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
  """The scorecard of the contribution file on each backend: one row per (op, backend, property, dtype). Each op
  runs in a process of its own with `timeout` seconds per backend (CONF.GRADE.timeout)."""
  path = Path(path).resolve()
  found = load_contributions(path)   # here too: a bad declaration (CONF.GRADE.tolerance) stops before any process
  rows = []
  for backend in backends:
    for index, c in enumerate(found):
      rows += _grade_op(path, index, c.entry, backend, impl, profile, timeout)
  ok = all(r["status"] != "fail" for r in rows if r["required"])
  return {"file": str(path), "impl": impl, "profile": profile, "timeout": timeout, "ok": ok, "results": rows}


def markdown(card: dict[str, Any]) -> str:
  """The scorecard as a markdown table, then each failure with its reproduction."""
  lines = [f"# Conformance scorecard: {Path(card['file']).name}", "",
           f"impl {card['impl']}, hypothesis profile {card['profile']}, time limit {card['timeout']:g} s per op: "
           f"**{'PASS' if card['ok'] else 'FAIL'}**", "",
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
  ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                  help=f"time limit of each op on each backend, all its properties together; a hung op fails with "
                       f"'timed out after N s' and the run goes on (default {DEFAULT_TIMEOUT:g}; 0: no limit)")
  args = ap.parse_args(argv)
  if args.timeout < 0: ap.error(f"--timeout must be >= 0, got {args.timeout:g}")
  try: card = grade(args.path, [b.upper() for b in args.backend or ["PYTHON"]], args.impl, args.profile, args.timeout)
  except ValueError as e:   # a file that declares nothing, or a declaration the grader refuses (CONF.GRADE.tolerance)
    ap.exit(2, f"{ap.prog}: error: {e}\n")
  text = markdown(card)
  print(text)
  if args.out:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scorecard.json").write_text(json.dumps(card, indent=1))
    (out / "scorecard.md").write_text(text)
  return 0 if card["ok"] else 1
