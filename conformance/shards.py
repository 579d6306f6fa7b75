"""Shards of one run (CONF.SHARD): what a run's report says about its shard, and joining the reports of the N shards
of a run into the report of the whole run (CONF.SHARD.join), which `python -m conformance merge` does before it
merges runs of different backends or implementations (conformance/report.py, `merge_runs`).

A shard's report names its shard (K of N), the selection it was cut from (the paths, -k and -m expressions and the
hypothesis profile: the same for every shard of a run) and the id and verdict of every test it ran. Joining checks
that the reports are the N shards of one run, each once, with no test in two of them, and adds them up: the joined
report is what one unsharded run of the same selection writes, since a test's examples depend on its id alone (the
ci profile is derandomized per test id).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import settings

__all__ = ["run_identity", "join_shards"]


def run_identity(config: pytest.Config) -> dict[str, Any]:
  """The fields of conformance.json that tell a run's shards apart from other runs: `shard` ({"k", "n"} of --shard,
  which the plugin has checked at start, or None for an unsharded run) and `selection` (what the run was cut from)."""
  spec = config.getoption("--shard", None)
  k, n = (int(v) for v in spec.split("/")) if spec else (0, 0)
  return {"shard": {"k": k, "n": n} if spec else None,
          "selection": {"args": [str(a) for a in config.args], "keyword": config.getoption("keyword", ""),
                        "markexpr": config.getoption("markexpr", ""),
                        "profile": settings.get_current_profile_name()}}


def _worse(a: float | None, b: float | None) -> float | None:
  """The larger of two worst errors, None (infinite) winning, as in conformance.report."""
  return None if a is None or b is None else max(a, b)


def _join_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Rows of the same (op, dtype, property) from several shards as one: counts and histograms add up, the worst
  errors are the worst of them, clauses and failures are pooled."""
  joined: dict[tuple[str, str, str], dict[str, Any]] = {}
  for row in rows:
    key = (row["op"], row["dtype"], row["property"])
    if key not in joined:
      joined[key] = {**row, "histogram": dict(row.get("histogram", {})), "clauses": list(row.get("clauses", [])),
                     "failures": list(row.get("failures", []))}
      continue
    j = joined[key]
    for k in ("pass", "fail", "xfail", "skip", "examples"): j[k] = j.get(k, 0) + row.get(k, 0)
    for k in ("worst_ulps", "worst_fraction"): j[k] = _worse(j.get(k, 0.0), row.get(k, 0.0))
    for b, n in row.get("histogram", {}).items(): j["histogram"][b] = j["histogram"].get(b, 0) + n
    j["clauses"] = sorted(set(j["clauses"]) | set(row.get("clauses", [])))
    j["failures"] += row.get("failures", [])
  return sorted(joined.values(), key=lambda r: (r["property"], r["op"], r["dtype"]))


def _join(group: list[dict[str, Any]], names: list[str], partial: bool) -> dict[str, Any]:
  """The N shard reports of one run (checked) as the report of the whole run; with `partial`, some of the N."""
  run = f"{group[0]['impl']} on {group[0]['backend']}"
  unsharded = [n for r, n in zip(group, names) if not r.get("shard")]
  if unsharded and len(group) > 1:
    raise ValueError(f"CONF.SHARD.join: {len(group)} reports of {run} ({', '.join(names)}), and {unsharded[0]} is not "
                     "a shard: only the shards of one run can be joined (merge runs of other backends or "
                     "implementations)")
  if unsharded: return group[0]
  counts, selections = {r["shard"]["n"] for r in group}, {repr(r.get("selection")) for r in group}
  if len(counts) > 1 or len(selections) > 1:
    what = f"shard counts {sorted(counts)}" if len(counts) > 1 else "selections (paths, -k, -m, profile)"
    raise ValueError(f"CONF.SHARD.join: the shards of {run} come from different runs: different {what} in "
                     f"{', '.join(names)}")
  n = counts.pop()
  seen: dict[int, str] = {}
  owner: dict[str, str] = {}
  for r, name in zip(group, names):
    k = r["shard"]["k"]
    if k in seen: raise ValueError(f"CONF.SHARD.join: shard {k}/{n} of {run} twice ({seen[k]} and {name})")
    seen[k] = name
    for test in r.get("tests", {}):
      if test in owner: raise ValueError(f"CONF.SHARD.join: {test} ran in two shards of {run} ({owner[test]} and "
                                         f"{name}): overlapping shards")
      owner[test] = name
  if (missing := sorted(set(range(1, n + 1)) - set(seen))) and not partial:
    raise ValueError(f"CONF.SHARD.join: {run} lacks shard{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(f'{k}/{n}' for k in missing)} (have {', '.join(names)}; merge --partial joins "
                     "the shards there are)")
  clauses: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: {"tests": 0, "passed": 0}))
  for r in group:
    for c, per_backend in r["clauses"].items():
      for backend, v in per_backend.items():
        clauses[c][backend]["tests"] += v["tests"]
        clauses[c][backend]["passed"] += v["passed"]
  by_k = sorted(zip(group, names), key=lambda rn: rn[0]["shard"]["k"])
  return {**by_k[0][0], "shard": None, "shards": {"n": n, "joined": sorted(seen)},
          "results": _join_rows([row for r in group for row in r["results"]]),
          "clauses": {c: {b: dict(v) for b, v in sorted(per.items())} for c, per in sorted(clauses.items())},
          "tests": {t: s for r, _ in by_k for t, s in r.get("tests", {}).items()}}


def join_shards(reports: list[dict[str, Any]], names: list[str],
                partial: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
  """CONF.SHARD.join: the reports with the shards of each run joined into one report of the whole run, and their
  names (a joined run's is its shards' names joined with '+', and says which shards it has when some are missing).
  Reports of one implementation on one backend must be the N shards of one run, each once, no test in two of them,
  and (unless `partial`) all N of them; anything else is a ValueError that says what is wrong (mixed runs, a shard
  twice, overlapping shards, missing shards)."""
  groups: dict[tuple[str, str], list[int]] = defaultdict(list)
  for i, r in enumerate(reports): groups[(r["impl"], r["backend"])].append(i)
  out, out_names = [], []
  for indices in groups.values():
    joined = _join([reports[i] for i in indices], [names[i] for i in indices], partial)
    name = "+".join(names[i] for i in indices)
    if (shards := joined.get("shards")) and len(shards["joined"]) < shards["n"]:
      name += f" (shard{'s' if len(shards['joined']) > 1 else ''} {', '.join(map(str, shards['joined']))} of " \
              f"{shards['n']} only)"
    out.append(joined)
    out_names.append(name)
  return out, out_names
