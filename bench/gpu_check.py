"""Bit-exactness of a compiled backend against the executable spec, for a lent GPU (or any device).

  python bench/gpu_check.py --device CUDA --out results.json   # on a machine with a GPU
  python bench/gpu_check.py --device CL --out cl.json          # PoCL here; CPU works too

Runs the device-level checks of tests/backend_checks.py (the ones tests/test_cpu.py and tests/test_cl.py assert) and
counts instead of stopping at the first failure: every edge-case row of spec/ops.md (OP.TABLES), random operands for
every ALU op x dtype against exec_alu (bit for bit; EXP2/LOG2/SIN/POW within the ULP bounds of spec/accuracy.md's
ACC.* rows, worst distance reported), random CASTs and BITCASTs between all dtypes, every float16/bfloat16 pattern and
rounding boundary, and the hand-built programs (local memory, BARRIER in work-groups of 64). Prints a summary per
op/dtype and writes everything, first failure of each kind included, as JSON. Exit status 1 when anything failed."""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

# `python bench/gpu_check.py` puts bench/ first on sys.path, where bench/emu.py would shadow the `emu` package; the
# repository root holds `tests`, whose backend_checks module this script shares with the tests
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402

from refimpl.device import Device  # noqa: E402
from refimpl.dtype import dtypes  # noqa: E402
from refimpl.helpers import SpecError  # noqa: E402
from tests.backend_checks import (EDGE_ROWS, FLOATS, HALVES, ULP_BOUND, Report, edge_row, half_patterns,  # noqa: E402
                                  half_rounding, launch, program_cases, random_alu, random_conversions)


def describe(dev) -> str:
  """Which hardware and software the device is."""
  name = type(dev).__name__
  if hasattr(dev, "arch"): return f"{name} {dev.arch}"                                 # CUDA: compute capability
  if hasattr(dev, "device"): return f"{name} {dev.device.name} ({dev.device.version})"   # CL: the OpenCL device
  return f"{name} {getattr(dev, 'cc', '')}".strip()


def edge_reports(dev) -> list[Report]:
  """One report per edge-table clause (OP.TABLES): rows checked and rows that differ from the table."""
  by_clause: dict[str, Report] = {}
  for clause, header, row in EDGE_ROWS:
    rep = by_clause.setdefault(clause, Report(clause, "*"))
    rep.checked += 1
    try: ok, what = edge_row(dev, clause, header, row)
    except Exception as e:   # noqa: BLE001 -- a crash is a failure of that row, counted, not the end of the run
      ok, what = False, f"{clause} {row}: {type(e).__name__}: {e}"
    if not ok: rep.fail(what)
  return list(by_clause.values())


def program_reports(dev) -> list[Report]:
  """One report per hand-built program: its output arrays against the expected ones, byte for byte."""
  out = []
  for case in program_cases():
    rep = Report(case.name, "*", checked=1)
    try:
      got = launch(dev, case.program, case.arrays, **case.kw)
      bad = [slot for slot, (g, w) in enumerate(zip(got, case.want)) if w is not None and g.tobytes() != w.tobytes()]
      if bad: rep.fail(f"{case.name}: slot {bad[0]} is {got[bad[0]][:8]}, expected {case.want[bad[0]][:8]}")
    except SpecError as e:
      if e.clause != "DEV.CPU.workgroup": rep.fail(f"{case.name}: {e}")
      else: rep.checked, rep.first = 0, f"not run: {e}"   # the CPU cannot run a BARRIER in larger work-groups
    except Exception as e:   # noqa: BLE001 -- counted as a failure of this program, the run goes on
      rep.fail(f"{case.name}: {type(e).__name__}: {e}")
    out.append(rep)
  return out


def print_matrix(reports: list[Report]) -> None:
  """The ALU reports as an op x dtype table: `.` all values right, the number of wrong values otherwise, blank where
  the op does not take the dtype."""
  cols = [repr(d) for d in dtypes.all()]
  cell = {(r.name, r.dtype): r for r in reports}
  ops = sorted({r.name for r in reports if r.dtype != "*"})
  print("\nALU ops x dtypes (. = every value right, else how many were wrong):")
  print(f"  {'':10s}" + "".join(f"{c.removeprefix('dtypes.')[:8]:>9s}" for c in cols))
  for op in ops:
    row = [cell.get((op, c)) for c in cols]
    print(f"  {op:10s}" + "".join(f"{'' if r is None else '.' if not r.failed else r.failed:>9}" for r in row))


def guarded(what: str, fn, *args, **kw) -> list[Report]:
  """fn(*args) as a list of reports; an exception (a kernel that does not compile) becomes one failed report."""
  try:
    r = fn(*args, **kw)
    return r if isinstance(r, list) else [r]
  except Exception as e:   # noqa: BLE001
    rep = Report(what, "*")
    rep.fail(f"{what}: {type(e).__name__}: {str(e)[:2000]}")
    return [rep]


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--device", default="CUDA", help="device name in the registry: CUDA, CL, CPU (default CUDA)")
  ap.add_argument("--out", default="gpu_check.json", help="where the JSON results go")
  ap.add_argument("--n", type=int, default=2000, help="random operands per ALU op and dtype (default 2000)")
  args = ap.parse_args()

  dev = Device[args.device]
  t0 = time.perf_counter()
  sections: dict[str, list[Report]] = {}
  timings: dict[str, float] = {}

  def section(name: str, reports: list[Report]) -> None:
    sections[name] = reports
    timings[name] = round(time.perf_counter() - t0 - sum(timings.values()), 2)
    bad = sum(r.failed > 0 for r in reports)
    print(f"{name:12s} {len(reports):4d} groups, {sum(r.checked for r in reports):8d} values, {bad:3d} groups with "
          f"failures  ({timings[name]:.1f} s)", flush=True)

  print(f"{args.device}: {describe(dev)}")
  section("edge-table", edge_reports(dev))
  # seeds other than the tests' (seed_of), so a run here checks operands the tests never saw
  section("alu", [r for i, dt in enumerate(dtypes.all())
                  for r in guarded(f"alu {dt!r}", random_alu, dev, dt, args.n, seed=1000 + i)])
  section("conversions", [r for dt in dtypes.all() for r in guarded(f"cvt {dt!r}", random_conversions, dev, dt)])
  section("half", [r for dt in HALVES for r in guarded(f"half {dt!r}", half_patterns, dev, dt, FLOATS)] +
          [r for dt in HALVES for src in (dtypes.float32, dtypes.float64)
           for r in guarded(f"round {src!r}->{dt!r}", half_rounding, dev, dt, src)])
  section("programs", program_reports(dev))

  print_matrix(sections["alu"])
  print("\ntranscendentals (worst distance in ULPs from exec_alu's correctly rounded float64-library value; "
        "bound of spec/accuracy.md in brackets):")
  for r in sections["alu"]:
    if r.worst_ulp is not None:
      bound = ULP_BOUND[next(d for d in FLOATS if repr(d) == r.dtype)]
      print(f"  {r.name:6s} {r.dtype:16s} {r.worst_ulp:>6} [{bound}]  {r.failed} of {r.checked} over the bound")
  failures = [r for reps in sections.values() for r in reps if r.failed]
  print(f"\n{len(failures)} groups with failures" + (":" if failures else ""))
  for r in failures: print(f"  {r.name} {r.dtype}: {r.failed} of {r.checked}, e.g. {r.first}")

  result = {"device": args.device, "describe": describe(dev), "host": platform.node(),
            "python": platform.python_version(), "numpy": np.__version__, "n": args.n,
            "seconds": round(time.perf_counter() - t0, 2), "timings": timings,
            "ulp_bounds": {repr(d): b for d, b in ULP_BOUND.items()},
            "passed": not failures, "sections": {k: [asdict(r) for r in v] for k, v in sections.items()}}
  Path(args.out).write_text(json.dumps(result, indent=1, default=str))
  print(f"\n{'PASS' if not failures else 'FAIL'} in {result['seconds']} s; results in {args.out}")
  return 0 if not failures else 1


if __name__ == "__main__":
  sys.exit(main())
