"""The `tinyspec` command (also `python -m conformance`), one subcommand per job:

    tinyspec run [pytest options]             the suite: `pytest --pyargs conformance [options]`, from any directory
    tinyspec grade path/to/ops.py [...]       grade contributed ops (conformance/grade.py)
    tinyspec merge DIR1 DIR2 ... -o OUT       merge the --report-dir reports of several runs (conformance/report.py)
    tinyspec scoreboard DIR1 DIR2 ... [-o OUT]  op x dtype x property x run table of those reports
"""
from __future__ import annotations

import argparse
import sys

# `run` and `grade` hand their arguments on unparsed: to pytest, and to grade's own parser (`tinyspec grade --help`)
PASS_THROUGH = ("run", "grade")


def parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="tinyspec", description="The tinyspec conformance suite and its reports.")
  sub = ap.add_subparsers(dest="command", required=True, metavar="{run,grade,merge,scoreboard}")
  sub.add_parser("run", add_help=False, help="run the conformance suite: pytest --pyargs conformance [pytest options, "
                 "e.g. --impl mypkg.adapter:MyAdapter --backend CPU -n 2]")
  sub.add_parser("grade", add_help=False, help="grade contributed ops: grade path/to/ops.py [--backend B] [--out DIR]")
  merge = sub.add_parser("merge", help="merge the --report-dir reports of several runs (CONF.REPORT.merge)",
                         description="Merge the --report-dir reports of several conformance runs into OUT/conformance"
                                     ".json and OUT/coverage.md, the clause-coverage table over all of them.")
  merge.add_argument("dirs", nargs="+", help="report directories, each with a conformance.json")
  merge.add_argument("-o", "--out", required=True,
                     help="directory for the merged conformance.json, coverage.md and scoreboard.md/.html")
  merge.add_argument("--partial", action="store_true",
                     help="join the shards there are of a sharded run, not all N (CONF.SHARD.join)")
  board = sub.add_parser("scoreboard", help="op x dtype x property x run table of several runs' reports",
                         description="One markdown table over the --report-dir reports of several runs: a row per "
                                     "op, dtype and property, a column per run (backend or implementation).")
  board.add_argument("dirs", nargs="+", help="report directories, each with a conformance.json")
  board.add_argument("-o", "--out", help="write OUT/scoreboard.md and OUT/scoreboard.html (default: print the "
                     "markdown table)")
  return ap


def run(args: list[str]) -> int:
  """The suite through pytest and the installed plugin (conformance/plugin.py)."""
  import pytest
  return int(pytest.main(["--pyargs", "conformance", *args]))


def merge(dirs: list[str], out: str, partial: bool = False) -> int:
  """CONF.REPORT.merge: read DIR/conformance.json of each run (one per backend or implementation) and write
  OUT/conformance.json, OUT/coverage.md (the clause-coverage table over all of them) and the scoreboard
  OUT/scoreboard.md and OUT/scoreboard.html (CONF.REPORT.scoreboard)."""
  from conformance.report import write_merged
  from conformance.scoreboard import write_scoreboard
  try:
    merged = write_merged(dirs, out, partial)
    write_scoreboard(merged, out)
  except (OSError, ValueError) as e:   # a missing directory or a file that is not a run's report
    print(f"merge: {e}", file=sys.stderr)
    return 2
  print(f"merged {len(merged['runs'])} runs ({', '.join(r['label'] for r in merged['runs'])}) into {out}/: "
        "conformance.json, coverage.md, scoreboard.md, scoreboard.html")
  return 0


def scoreboard(dirs: list[str], out: str | None) -> int:
  """The runs' reports merged, then the scoreboard (conformance/scoreboard.py): OUT/scoreboard.md and
  OUT/scoreboard.html with -o OUT, else the markdown table on stdout."""
  from conformance.scoreboard import load_merged, scoreboard_markdown, write_scoreboard
  try:
    if out is None: print(scoreboard_markdown(load_merged(dirs)), end="")
    else: print(f"wrote {', '.join(str(p) for p in write_scoreboard(dirs, out).values())}")
  except (OSError, ValueError) as e:
    print(f"scoreboard: {e}", file=sys.stderr)
    return 2
  return 0


def main(argv: list[str] | None = None) -> int:
  """Parse the subcommand and run it; the exit status."""
  argv = sys.argv[1:] if argv is None else argv
  args, rest = parser().parse_known_args(argv)
  if args.command == "run": return run(rest)
  if args.command == "grade":
    from conformance.grade import main as grade_main
    return grade_main(rest)
  if rest: parser().error(f"unrecognized arguments: {' '.join(rest)}")
  if args.command == "merge": return merge(args.dirs, args.out, args.partial)
  return scoreboard(args.dirs, args.out)


if __name__ == "__main__":
  sys.exit(main())
